//! The host crate's layers: which top-level modules of `src/` each one may
//! name. ARCHITECTURE.md's code map says the same in words; this table is
//! what keeps it true. Edges from `#[cfg(test)]` modules do not count (test
//! code may use fixtures from anywhere); every other path does, counted as
//! for the cycle check.

use std::collections::BTreeSet;
use std::path::Path;

use crate::module_graph::ModuleGraph;

/// Each top-level module of the host library and the top-level modules it
/// may depend on. `cli` may use everything and nothing may use `cli`.
pub const HOST_LAYERS: &[(&str, &[&str])] = &[
    // The bottom: data and pure computations.
    ("results", &[]),
    ("stats", &[]),
    ("terminal_table", &[]),
    ("html_page", &[]),
    ("suite_choice", &[]),
    ("apt_sources", &[]),
    ("interrupt", &[]),
    // What the commands say on stderr: log lines and progress bars.
    ("terminal", &[]),
    ("kernel", &["apt_sources", "terminal"]),
    ("pack", &["apt_sources", "results", "terminal"]),
    ("local", &["results", "pack", "interrupt"]),
    ("saved_upload", &["results"]),
    // The results service, the top of its own corner.
    ("service", &["results"]),
    // Statistics over results, and reports.
    ("compare", &["results", "stats", "terminal_table", "html_page"]),
    ("report", &["results", "stats", "compare", "terminal_table", "html_page"]),
    ("nbench_compat", &["stats"]),
    // Results in other systems' formats.
    ("kcidb_export", &["results"]),
    // Booting kernels.
    ("boot", &["results", "kernel", "suite_choice", "service", "pack", "interrupt", "terminal"]),
    // What is built on booting and on the statistics.
    ("calibration", &["results", "stats", "compare", "boot", "terminal_table"]),
    ("overhead", &["results", "kernel", "suite_choice", "boot"]),
    ("bisect", &["results", "kernel", "suite_choice", "boot", "stats", "interrupt", "terminal"]),
    ("group_inputs", &["results", "compare", "report", "service"]),
    ("lava", &["results", "suite_choice", "boot"]),
    ("lab", &["results", "service", "boot"]),
    // The config file: fills the option structs of the commands above.
    ("settings", &["boot", "kernel", "bisect"]),
    // The command line.
    ("cli", &["*"]),
];

/// The layer rules `graph` (the host library's) breaks: one line each, with
/// the first path that broke it.
pub fn violations(graph: &ModuleGraph, base: &Path) -> Vec<String> {
    let top = |id: usize| graph.tree.modules[id].name_path.get(1).cloned();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (&(from, to), (evidence, _)) in &graph.edges {
        if graph.tree.modules[from].cfg_test {
            continue;
        }
        let (Some(a), Some(b)) = (top(from), top(to)) else { continue };
        if a == b || !seen.insert((a.clone(), b.clone())) {
            continue;
        }
        let allowed = match HOST_LAYERS.iter().find(|(m, _)| *m == a) {
            Some((_, allowed)) => allowed.contains(&"*") || allowed.contains(&b.as_str()),
            None => {
                out.push(format!("crate::{a} is not in the layer table (tests/architecture/layers.rs)"));
                continue;
            }
        };
        if !allowed {
            let file = evidence.file.strip_prefix(base).unwrap_or(&evidence.file);
            out.push(format!(
                "crate::{a} must not depend on crate::{b}: {}:{} `{}`",
                file.display(),
                evidence.line,
                evidence.text
            ));
        }
    }
    out
}

/// The workloads of `loads`: none may name another.
pub const LOADS_WORKLOADS: &[&str] =
    &["fork", "dbench", "tbench", "kbuild", "kernbench", "sdet", "sdet_applets", "hackbench", "contest"];

/// The rules of `loads` that a missing cycle does not already imply:
/// no workload names another; the shared engines (`workloads::nbench`,
/// `kernel_build`, `pack_build`) name no workload; the suite model names neither the
/// registry, the runner nor the applets. One line per broken rule, with
/// the first path that broke it.
pub fn loads_violations(graph: &ModuleGraph, base: &Path) -> Vec<String> {
    let path_of = |id: usize| graph.tree.modules[id].name_path.join("::");
    let under = |path: &str, prefix: &str| path == prefix || path.starts_with(&format!("{prefix}::"));
    let workload_of = |path: &str| {
        LOADS_WORKLOADS.iter().find(|w| under(path, &format!("crate::workloads::{w}"))).map(|w| w.to_string())
    };
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (&(from, to), (evidence, _)) in &graph.edges {
        if graph.tree.modules[from].cfg_test {
            continue;
        }
        let (a, b) = (path_of(from), path_of(to));
        let why = match (workload_of(&a), workload_of(&b)) {
            (Some(x), Some(y)) if x != y => Some(format!("workload {x} must not name workload {y}")),
            (None, Some(y))
                if ["crate::workloads::nbench", "crate::kernel_build", "crate::pack_build", "crate::sdet_home"]
                    .iter()
                    .any(|engine| under(&a, engine)) =>
            {
                Some(format!("the shared engine {a} must not name workload {y}"))
            }
            _ if under(&a, "crate::suite")
                && ["crate::workloads", "crate::runner", "crate::applets"].iter().any(|p| under(&b, p)) =>
            {
                Some(format!("the suite model must not name {b}"))
            }
            _ => None,
        };
        if let Some(why) = why {
            if seen.insert(why.clone()) {
                let file = evidence.file.strip_prefix(base).unwrap_or(&evidence.file);
                out.push(format!("{why}: {}:{} `{}`", file.display(), evidence.line, evidence.text));
            }
        }
    }
    out
}
