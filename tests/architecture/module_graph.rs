//! The module graph of one crate (an edge per pair of modules, with the
//! first path that made it) and its import cycles: the strongly connected
//! components of more than one module.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use petgraph::algo::tarjan_scc;
use petgraph::graphmap::DiGraphMap;

use crate::module_tree::{LoadError, ModuleId, ModuleTree};
use crate::references::{collect, Reference};

/// One crate's modules and the edges between them.
pub struct ModuleGraph {
    /// The modules.
    pub tree: ModuleTree,
    /// `(from, to)` to the first reference that made the edge, and how many
    /// references there are.
    pub edges: BTreeMap<(ModuleId, ModuleId), (Reference, usize)>,
}

/// A strongly connected component of more than one module.
pub struct Cycle {
    /// Its modules, in tree order.
    pub modules: Vec<ModuleId>,
}

impl ModuleGraph {
    /// Reads the crate whose root source file is `root`.
    pub fn load(root: &Path) -> Result<ModuleGraph, LoadError> {
        let tree = ModuleTree::load(root)?;
        let mut edges: BTreeMap<(ModuleId, ModuleId), (Reference, usize)> = BTreeMap::new();
        for reference in collect(&tree) {
            edges.entry((reference.from, reference.to)).or_insert((reference, 0)).1 += 1;
        }
        Ok(ModuleGraph { tree, edges })
    }

    /// The import cycles, largest first.
    pub fn cycles(&self) -> Vec<Cycle> {
        let mut graph = DiGraphMap::<ModuleId, ()>::new();
        for id in 0..self.tree.modules.len() {
            graph.add_node(id);
        }
        for &(from, to) in self.edges.keys() {
            graph.add_edge(from, to, ());
        }
        let mut cycles: Vec<Cycle> = tarjan_scc(&graph)
            .into_iter()
            .filter(|scc| scc.len() > 1)
            .map(|mut modules| {
                modules.sort_unstable();
                Cycle { modules }
            })
            .collect();
        cycles.sort_by(|a, b| b.modules.len().cmp(&a.modules.len()).then_with(|| a.modules.cmp(&b.modules)));
        cycles
    }

    /// `crate::a::b` for a module id.
    pub fn name(&self, id: ModuleId) -> String {
        self.tree.modules[id].display_name()
    }

    /// `N import cycles (strongly connected components), M modules in them`.
    pub fn summary(cycles: &[Cycle]) -> String {
        let modules: usize = cycles.iter().map(|c| c.modules.len()).sum();
        format!("{} import cycles (strongly connected components), {modules} modules in them", cycles.len())
    }

    /// Each cycle's modules, and for each edge inside it one path that made
    /// it, with file paths shown relative to `base`.
    pub fn describe_cycles(&self, cycles: &[Cycle], base: &Path) -> String {
        let mut out = String::new();
        for (n, cycle) in cycles.iter().enumerate() {
            let names: Vec<String> = cycle.modules.iter().map(|&m| self.name(m)).collect();
            let _ = writeln!(out, "cycle {} ({} modules): {}", n + 1, cycle.modules.len(), names.join(", "));
            for ((from, to), (evidence, count)) in &self.edges {
                if cycle.modules.contains(from) && cycle.modules.contains(to) {
                    let _ = writeln!(
                        out,
                        "    {} -> {}: {}",
                        self.name(*from),
                        self.name(*to),
                        evidence_text(evidence, *count, base)
                    );
                }
            }
        }
        out
    }

    /// Every module and its outgoing edges.
    pub fn describe_graph(&self, base: &Path) -> String {
        let mut out = String::new();
        for (id, module) in self.tree.modules.iter().enumerate() {
            let file = module.file.strip_prefix(base).unwrap_or(&module.file);
            let _ = writeln!(out, "{} ({})", self.name(id), file.display());
            for ((_, to), (evidence, count)) in self.edges.range((id, 0)..(id + 1, 0)) {
                let _ = writeln!(out, "    -> {}: {}", self.name(*to), evidence_text(evidence, *count, base));
            }
        }
        out
    }
}

fn evidence_text(evidence: &Reference, count: usize, base: &Path) -> String {
    let file = evidence.file.strip_prefix(base).unwrap_or(&evidence.file);
    let more = if count > 1 { format!(" (+{} more)", count - 1) } else { String::new() };
    format!("{}:{} `{}`{more}", file.display(), evidence.line, evidence.text)
}
