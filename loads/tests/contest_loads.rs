//! contest on the host, small: every load really runs (its counter moves),
//! stops when asked, and leaves no process behind; a load that dies makes
//! its row an error instead of a silent no_load.

use loads::workload::RunContext;
use loads::workloads;
use std::path::{Path, PathBuf};

fn ctx(dir: &Path) -> RunContext {
    RunContext {
        seed: 11,
        work_dir: dir.to_path_buf(),
        applet_exe: PathBuf::from(env!("CARGO_BIN_EXE_bootbench-applet")),
    }
}

fn params(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// Pids of live processes in process group `pgid`.
fn group_members(pgid: i64) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        // Fields after the parenthesised command: state ppid pgrp ...
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.get(2).and_then(|g| g.parse::<i64>().ok()) == Some(pgid) && f.first() != Some(&"Z") {
            out.push(pid);
        }
    }
    out
}

#[test]
fn every_load_works_stops_and_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let rows = [
        "no_load",
        "cacherun",
        "process_load",
        "ctar_load",
        "xtar_load",
        "io_load",
        "read_load",
        "list_load",
        "mem_load",
        "dbench_load",
        "fork_load",
    ];
    let mut w = workloads::prepare(
        "contest",
        &params(serde_json::json!({
            "rows": rows, "files": 16, "tar_files": 12, "lead_s": 0.5, "mem_bytes": 48u64 << 20,
            "drop_caches": false, "dbench_clients": 2, "ring_procs": 4, "dir": d.path(),
        })),
        &ctx(d.path()),
    )
    .unwrap();
    let it = w.run_iteration().unwrap();
    assert!(it.errors.is_empty(), "{:?}", it.errors);
    for r in rows {
        let m = |k: &str| it.metrics.get(&format!("{k}_{r}")).unwrap_or_else(|| panic!("no {k}_{r}: {it:?}")).value;
        assert!(m("time") > 0.0 && m("cpu_percent") > 0.0, "{r}");
        if r.ends_with("_load") && r != "no_load" {
            assert!(m("loads") > 0.0, "{r} did no work in the build's window: {it:?}");
        } else {
            assert_eq!(m("loads"), 0.0);
        }
    }
    assert_eq!(it.metrics["ratio_no_load"].value, 1.0);
    // CPU-bound loads have a CPU share (small on a busy host, never nil).
    for r in ["process_load", "fork_load", "mem_load"] {
        let lcpu = it.metrics[&format!("lcpu_percent_{r}")].value;
        assert!(lcpu > 1.0, "{r}: LCPU% {lcpu}");
    }
    for row in it.detail["rows"].as_array().unwrap() {
        if let Some(pgid) = row.get("load_pgid").and_then(|p| p.as_i64()) {
            assert_eq!(group_members(pgid), Vec::<i32>::new(), "{row}: processes left");
            assert_eq!(row["load_killed"], false, "{row}: needed a kill to stop");
        }
    }
    assert_eq!(it.detail["caches_dropped"], false);
    // dbench_load replays dbench's own client.txt by default, pinned in
    // the result.
    let p = w.params();
    assert_eq!(p["dbench_loadfile"], loads::known_loadfiles::CLIENT_TXT);
    assert_eq!(p["dbench_loadfile_sha256"], loads::known_loadfiles::CLIENT_TXT_SHA256);
}

#[test]
fn a_load_that_dies_makes_its_row_an_error_not_a_no_load() {
    let d = tempfile::tempdir().unwrap();
    let mut w = workloads::prepare(
        "contest",
        &params(serde_json::json!({
            "rows": ["no_load", "xtar_load", "fork_load"], "files": 8, "tar_files": 4, "lead_s": 0.3,
            "mem_bytes": 16u64 << 20, "drop_caches": false, "dir": d.path(),
        })),
        &ctx(d.path()),
    )
    .unwrap();
    // The archive xtar_load extracts goes away: its body fails at once.
    std::fs::remove_file(d.path().join("contest/tar-source.tar")).unwrap();
    let it = w.run_iteration().unwrap();
    assert_eq!(it.errors.len(), 1, "{:?}", it.errors);
    let e = &it.errors[0];
    assert!(
        e.starts_with("xtar_load: ") && e.contains("before the build started") && e.contains("tar-source.tar"),
        "{e}"
    );
    assert!(!it.metrics.contains_key("time_xtar_load"), "an error row has no figures");
    assert!(it.metrics.contains_key("time_fork_load"), "the rows after it still run");
}
