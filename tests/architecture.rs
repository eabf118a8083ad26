//! Architecture hygiene: no crate of the workspace has a module import
//! cycle, the host crate's top-level modules depend only on the layers
//! `architecture/layers.rs` allows, and `loads`' workloads stay apart. Every target of every workspace package (`cargo metadata
//! --no-deps`: libs, bins, tests, build scripts) is read with `syn` from its
//! root file, following `mod x;` (`x.rs` or `x/mod.rs`, or `#[path]`) and
//! inline `mod x { ... }`. Needs cargo (for the metadata), nothing else.
//!
//! # The graph
//!
//! A node is a module: one per file, one per inline `mod`. A `#[cfg(test)]`
//! module is a node like any other; production code never names it, so a
//! test module that uses its parent makes no cycle.
//!
//! An edge A -> B means code in A names a path that resolves to module B or
//! to an item of B. Every path counts: `use` trees (groups, renames, globs,
//! `pub use` re-exports), types (fields, signatures, generics, impl headers,
//! bounds), expressions and patterns, and paths inside macro invocations
//! (their tokens parsed as comma-separated expressions, else as statements,
//! else scanned for `a::b` sequences, `$crate` included). Attributes and
//! visibilities (`pub(in crate::a)`) are not edges.
//!
//! Resolution, in module M:
//! - `crate::a::b::C` lands in the deepest module on the path: `crate::a::b`
//!   when `b` is a module, else `crate::a` (also when `b` is only a
//!   re-export there: naming it through `a` depends on `a`).
//! - How `super::` counts: `super::x` resolves from M's parent, so a child
//!   that names `super::Thing` depends on its parent (`super::super::` on the
//!   grandparent, and so on). `self::x` resolves from M.
//! - A first segment that is a child module of M goes into that child; one
//!   that M defines is M itself (no edge); one that a `use` in M binds (a
//!   `use` in a function body counts for all of M) goes through that
//!   import; otherwise M's globs (`use super::*`, `use crate::a::*`) are
//!   tried: the name resolves as the glob's module sees it if it defines,
//!   imports or glob-imports it (a glob of an enum, to its variants), and is
//!   ignored if not. Anything else (std, core, alloc, other crates, the
//!   prelude, locals and generics) is ignored: cargo already forbids cycles
//!   between crates.
//! - A `mod x;` declaration alone is not an edge (the parent owns the
//!   child, it does not use it), but a parent that calls or re-exports
//!   `child::f` depends on the child. So a `mod.rs` that re-exports a child
//!   while the child uses a type defined in the mod.rs is a cycle, on
//!   purpose: shared types belong in a sibling module at the bottom.
//! - Outside `use`, a path that names a module itself (an expression `a`
//!   where `a` is also a child module) is a local variable or a generic, not
//!   an edge.
//!
//! Known approximations: items made by macros and `macro_rules!` textual
//! scope are not seen, enum variants glob-imported and used bare in
//! patterns are missed, and function-local scopes are merged into the
//! module's (a local variable that shadows an imported name still counts
//! as the import).
//!
//! # The report
//!
//! For each crate, `N import cycles (strongly connected components), M
//! modules in them`; for each cycle its modules, and for each edge inside it
//! the first `file:line` and path that made it. The graph itself:
//! `cargo test --release --test architecture -- --ignored --nocapture print_module_graph`.

#[path = "architecture/layers.rs"]
mod layers;
#[path = "architecture/module_graph.rs"]
mod module_graph;
#[path = "architecture/module_tree.rs"]
mod module_tree;
#[path = "architecture/name_resolution.rs"]
mod name_resolution;
#[path = "architecture/pid1_lints.rs"]
mod pid1_lints;
#[path = "architecture/references.rs"]
mod references;
#[path = "architecture/synthetic_crates.rs"]
mod synthetic_crates;
#[path = "architecture/workspace_targets.rs"]
mod workspace_targets;

use module_graph::ModuleGraph;
use workspace_targets::workspace_targets;

#[test]
fn workspace_has_no_module_import_cycles() {
    let (root, targets) = workspace_targets();
    assert!(!targets.is_empty(), "cargo metadata listed no targets");
    let mut report = String::new();
    let mut failing = Vec::new();
    for target in &targets {
        let graph = ModuleGraph::load(&target.src_path).unwrap_or_else(|e| panic!("{}: {e}", target.label));
        // A `mod x;` whose file was not found would leave its code out of
        // the graph: that is a failure, not a note.
        for missing in &graph.tree.missing_files {
            report.push_str(&format!("\n{}: {missing} (a module whose code was not read)\n", target.label));
            failing.push(target.label.as_str());
        }
        let cycles = graph.cycles();
        println!("{}: {}", target.label, ModuleGraph::summary(&cycles));
        if !cycles.is_empty() {
            report.push_str(&format!(
                "\n{} ({}): {}\n{}",
                target.label,
                target.src_path.strip_prefix(&root).unwrap_or(&target.src_path).display(),
                ModuleGraph::summary(&cycles),
                graph.describe_cycles(&cycles, &root)
            ));
            failing.push(target.label.as_str());
        }
    }
    assert!(
        failing.is_empty(),
        "module import cycles in {}:\n{report}\nBreak each cycle: move what both sides need into a module below \
         them both (see the doc comment of tests/architecture.rs for how edges count).",
        failing.join(", ")
    );
}

#[test]
fn host_modules_depend_only_on_the_layers_below_them() {
    let (root, _) = workspace_targets();
    let graph = ModuleGraph::load(&root.join("src/lib.rs")).unwrap_or_else(|e| panic!("src/lib.rs: {e}"));
    let broken = layers::violations(&graph, &root);
    assert!(
        broken.is_empty(),
        "the host crate's layers (tests/architecture/layers.rs, ARCHITECTURE.md) are broken:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn loads_workloads_stay_apart_and_the_suite_names_no_registry() {
    let (root, _) = workspace_targets();
    let graph = ModuleGraph::load(&root.join("loads/src/lib.rs")).unwrap_or_else(|e| panic!("loads/src/lib.rs: {e}"));
    let broken = layers::loads_violations(&graph, &root);
    assert!(broken.is_empty(), "loads' rules (tests/architecture/layers.rs) are broken:\n  {}", broken.join("\n  "));
}

#[test]
fn a_workload_naming_another_breaks_the_loads_rules() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("workloads")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod suite;\npub mod workloads;\n").unwrap();
    std::fs::write(src.join("suite.rs"), "pub fn names() -> usize { crate::workloads::COUNT }\n").unwrap();
    std::fs::write(src.join("workloads.rs"), "pub mod contest;\npub mod kbuild;\npub const COUNT: usize = 2;\n")
        .unwrap();
    std::fs::write(src.join("workloads/kbuild.rs"), "pub fn make() {}\n").unwrap();
    std::fs::write(src.join("workloads/contest.rs"), "pub fn run() { crate::workloads::kbuild::make() }\n").unwrap();
    let graph = ModuleGraph::load(&src.join("lib.rs")).unwrap();
    let broken = layers::loads_violations(&graph, dir.path());
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken
        .iter()
        .any(|b| b.starts_with("workload contest must not name workload kbuild: src/workloads/contest.rs:1")));
    assert!(broken.iter().any(|b| b.starts_with("the suite model must not name crate::workloads: src/suite.rs:1")));
}

#[test]
fn a_shared_engine_naming_a_workload_breaks_the_loads_rules() {
    // The pack build kernbench and contest share must not reach back into
    // either: then one workload would name another through it.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("workloads")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod pack_build;\npub mod workloads;\n").unwrap();
    std::fs::write(src.join("workloads.rs"), "pub mod kernbench;\n").unwrap();
    std::fs::write(src.join("workloads/kernbench.rs"), "pub const NAME: &str = \"kernbench\";\n").unwrap();
    std::fs::write(src.join("pack_build.rs"), "pub fn who() -> &'static str { crate::workloads::kernbench::NAME }\n")
        .unwrap();
    let graph = ModuleGraph::load(&src.join("lib.rs")).unwrap();
    let broken = layers::loads_violations(&graph, dir.path());
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(
        broken[0]
            .starts_with("the shared engine crate::pack_build must not name workload kernbench: src/pack_build.rs:1"),
        "{broken:?}"
    );
}

#[test]
fn a_dependency_upwards_breaks_the_layers() {
    // The results model naming the service is the dependency the layers
    // exist to forbid.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod results;\npub mod service;\npub mod cli;\n").unwrap();
    std::fs::write(src.join("results.rs"), "pub struct R(pub crate::service::Upload);\n").unwrap();
    std::fs::write(src.join("service.rs"), "pub struct Upload;\npub fn f(_: crate::results::R) {}\n").unwrap();
    std::fs::write(src.join("cli.rs"), "pub fn g(_: crate::service::Upload) {}\n").unwrap();
    let graph = ModuleGraph::load(&src.join("lib.rs")).unwrap();
    let broken = layers::violations(&graph, dir.path());
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(broken[0].starts_with("crate::results must not depend on crate::service: src/results.rs:1"), "{broken:?}");
}

#[test]
fn every_module_pid1_runs_denies_the_panicking_lints() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let problems = pid1_lints::uncovered(root);
    assert!(problems.is_empty(), "modules PID 1 runs without the no-panic lints:\n{}", problems.join("\n"));
    // The check sees what it is meant to see.
    let named = pid1_lints::loads_modules_named_by(&root.join("init/src"));
    for m in ["suite", "runner", "console_protocol", "quiet"] {
        assert!(named.iter().any(|n| n == m), "the init names loads::{m}, not found in {named:?}");
    }
    // Modules reached only through others are followed (the runner's
    // system counters), the registry and the applets are not.
    let reached = pid1_lints::loads_modules_reached(root);
    for m in ["system_counters", "error_chain", "schema"] {
        assert!(reached.iter().any(|n| n == m), "loads::{m} is reached from the init, not found in {reached:?}");
    }
    // Only through the applets (which PID 1 never runs) is the compiler
    // reached: following `crate::` through them would pull it in.
    assert!(!reached.iter().any(|n| n == "compiler"), "loads::compiler is not PID 1's: {reached:?}");
    let attr = "#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]";
    assert!(pid1_lints::missing_lints(attr, false).is_empty());
    assert_eq!(pid1_lints::missing_lints(&attr.replace(", clippy::panic", ""), false), ["clippy::panic"]);
    assert_eq!(pid1_lints::missing_lints(attr, true).len(), 4, "an inner attribute is not an outer one");
}

#[test]
#[ignore = "prints the module graph: cargo test --test architecture -- --ignored --nocapture print_module_graph"]
fn print_module_graph() {
    let (root, targets) = workspace_targets();
    for target in &targets {
        let graph = ModuleGraph::load(&target.src_path).unwrap_or_else(|e| panic!("{}: {e}", target.label));
        let cycles = graph.cycles();
        println!("== {}: {}", target.label, ModuleGraph::summary(&cycles));
        print!("{}", graph.describe_graph(&root));
    }
}
