//! The no-panic lints cover every module PID 1 runs, in whichever crate it
//! lives: the init crate (its Cargo.toml), each `loads` module the init
//! names (an inner `#![deny(...)]`), the workload registry's impls PID 1
//! calls (`Suite::from_json`, `CmdlineConfig::parse`...; an outer
//! `#[deny(...)]` on each), and `results-uploader` (crate-wide). `applets`
//! is the one exception: the init runs it only when it is not PID 1.

use std::path::Path;

/// The lints that keep PID 1 from panicking.
pub const PID1_LINTS: [&str; 4] =
    ["clippy::unwrap_used", "clippy::expect_used", "clippy::panic", "clippy::indexing_slicing"];

/// `loads` modules the init names that PID 1 itself never runs.
const NOT_RUN_BY_PID1: &[&str] = &["applets"];

/// The lints of [`PID1_LINTS`] that no `#![deny(...)]` (or, with `outer`,
/// `#[deny(...)]`) attribute of `text` names.
pub fn missing_lints(text: &str, outer: bool) -> Vec<&'static str> {
    let open = if outer { "#[deny(" } else { "#![deny(" };
    let attrs: Vec<&str> = text
        .match_indices(open)
        .filter_map(|(i, _)| text.get(i..).and_then(|t| t.split_once(")]")).map(|(a, _)| a))
        .collect();
    PID1_LINTS.iter().copied().filter(|l| !attrs.iter().any(|a| a.contains(l))).collect()
}

/// The names that follow `prefix` in `text` (`loads::NAME`, `crate::NAME`).
fn names_after(text: &str, prefix: &str, names: &mut Vec<String>) {
    for (i, _) in text.match_indices(prefix) {
        let name: String = text[i + prefix.len()..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
            .collect();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
}

/// The file of `loads` module `name`.
fn loads_module_file(root: &Path, name: &str) -> String {
    if root.join(format!("loads/src/{name}.rs")).exists() {
        format!("loads/src/{name}.rs")
    } else {
        format!("loads/src/{name}/mod.rs")
    }
}

/// The `loads` modules the init's sources name (`loads::NAME`).
pub fn loads_modules_named_by(init_src: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(init_src).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        names_after(&text, "loads::", &mut names);
    }
    names.sort();
    names
}

/// The `loads` modules PID 1 can reach: those the init names, and every
/// module they name in turn (`crate::NAME`), to a fixed point. The
/// workload registry (`workloads`, whose impls PID 1 calls are checked
/// one by one) and [`NOT_RUN_BY_PID1`] are not followed.
pub fn loads_modules_reached(root: &Path) -> Vec<String> {
    let mut reached: Vec<String> = Vec::new();
    let mut todo = loads_modules_named_by(&root.join("init/src"));
    while let Some(name) = todo.pop() {
        if reached.contains(&name) || name == "workloads" || NOT_RUN_BY_PID1.contains(&name.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(root.join(loads_module_file(root, &name))).unwrap_or_default();
        names_after(&text, "crate::", &mut todo);
        reached.push(name);
    }
    reached.sort();
    reached
}

/// Every place that must carry the lints and does not: `path: lints`.
pub fn uncovered(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let init_toml = std::fs::read_to_string(root.join("init/Cargo.toml")).unwrap();
    for lint in PID1_LINTS {
        let key = lint.trim_start_matches("clippy::");
        if !init_toml.lines().any(|l| l.replace(' ', "") == format!("{key}=\"deny\"")) {
            problems.push(format!("init/Cargo.toml: {lint}"));
        }
    }
    let mut check = |rel: String, outer: bool, min_count: usize| {
        let text = std::fs::read_to_string(root.join(&rel)).unwrap_or_default();
        let open = if outer { "#[deny(" } else { "#![deny(" };
        let missing = missing_lints(&text, outer);
        if !missing.is_empty() || text.matches(open).count() < min_count {
            problems.push(format!("{rel}: {}", missing.join(", ")));
        }
    };
    for name in loads_modules_reached(root) {
        check(loads_module_file(root, &name), false, 1);
    }
    check("loads/src/workloads/mod.rs".into(), true, 2);
    check("results-uploader/src/lib.rs".into(), false, 1);
    problems
}
