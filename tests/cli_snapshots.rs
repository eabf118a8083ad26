//! Snapshots of what the CLI promises, so that moving code cannot change
//! behaviour unnoticed: the `--help` of every subcommand (found by walking
//! the `Commands:` lists, so a new subcommand gets a snapshot of its own).
//! The shape of a quick run's results file is snapshotted by the boot in
//! `pid1.rs`, which runs the whole quick suite anyway.
//!
//! A changed snapshot fails the test; when the change is intended, review it
//! and accept it with `INSTA_UPDATE=always scripts/test -- cli_snapshots`
//! (or `cargo insta review`).

mod support;

use std::process::Command;

/// `bootbench ARGS --help`: the exit status and what was printed.
fn help(args: &[&str]) -> String {
    let out = Command::new(support::bootbench_bin())
        .args(args)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("cannot run bootbench {args:?} --help: {e}"));
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stderr.is_empty() {
        text.push_str("--- stderr ---\n");
        text.push_str(&stderr);
    }
    format!("exit status: {:?}\n{text}", out.status.code())
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn help_of_every_subcommand_is_unchanged() {
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = Vec::new();
    while let Some(path) = queue.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        for sub in subcommands(&text) {
            let mut child = path.clone();
            child.push(sub);
            queue.push(child);
        }
        let name = if path.is_empty() { "bootbench".to_owned() } else { path.join("_") };
        insta::assert_snapshot!(format!("help_{name}"), text);
        seen.push(path.join(" "));
    }
    seen.sort();
    // The list of commands is part of the promise too.
    insta::assert_snapshot!("commands", seen.join("\n"));
}

#[test]
fn subcommands_are_read_from_a_commands_list() {
    let text = "Usage: x\n\nCommands:\n  run      Boot\n           more text\n  help     Print\n\nOptions:\n  -h\n";
    assert_eq!(subcommands(text), ["run"]);
}
#[test]
fn shape_lists_every_path_and_collapses_what_is_data() {
    use support::json_shape::{json_shape, ShapeRules};
    let doc = serde_json::json!({
        "format": "f1",
        "a": [{"x": 1, "y": null}, {"x": 2.5, "y": "s", "z": true}],
        "counters": {"pgfault": 3, "nr_free_pages": 9},
        "workloads": [{"name": "fork", "m": {"rate": {"unit": "forks/s"}}}, {"name": "dbench", "m": {"close_latency": {"unit": "ms"}, "read_latency": {"unit": "ms"}}}],
        "warnings": ["w1"],
    });
    let rules = ShapeRules {
        data_keyed: &["counters"],
        data_suffixes: &[("workloads[dbench].m", "_latency")],
        named_arrays: &["workloads"],
        opaque: &["warnings"],
        pinned: &["format", "*.unit"],
    };
    let want = "\
. : object
a : array
a[] : object
a[].x : number
a[].y : null|string
a[].z : bool
counters : object
counters{*} : number
format : string = \"f1\"
warnings : array
workloads : array
workloads[dbench] : object
workloads[dbench].m : object
workloads[dbench].m.*_latency : object
workloads[dbench].m.*_latency.unit : string = \"ms\"
workloads[dbench].name : string
workloads[fork] : object
workloads[fork].m : object
workloads[fork].m.rate : object
workloads[fork].m.rate.unit : string = \"forks/s\"
workloads[fork].name : string
";
    assert_eq!(json_shape(&doc, &rules), want);
    // Without the rules, data shows as keys and workloads merge.
    let plain = json_shape(&doc, &ShapeRules::default());
    assert!(
        plain.contains("counters.pgfault : number") && plain.contains("workloads[].m.rate.unit : string\n"),
        "{plain}"
    );
    assert!(plain.contains("warnings[] : string"), "{plain}");
}
