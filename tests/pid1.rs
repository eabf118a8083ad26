//! End-to-end checks of the PID-1 rules in a real boot: children start
//! clean, the watchdog bounds a workload that runs too long, and a workload
//! that runs longer than the host's silence timeout survives on PID 1's
//! `alive` events. The quick-suite boot also pins the shape of the results
//! file (schema and keys; see `support::json_shape`).

mod support;

use bootbench::results::ResultsFile;
use std::path::Path;
use std::process::Command;

fn run_boot(out: &Path, workloads: &str, append: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bootbench"))
        .args(["run", "--workloads", workloads, "--iterations", "1", "--warmup", "0", "--timeout-total", "600"])
        .args(["--append", append, "-o"])
        .arg(out)
        .output()
        .expect("cannot run bootbench")
}

fn first_boot(out: &Path, output: &std::process::Output) -> bootbench::results::BootRecord {
    let file = ResultsFile::read(out).unwrap_or_else(|e| {
        panic!(
            "no results file ({e:#}); bootbench said:\n{}\n(missing QEMU or kernel? run scripts/test)",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    file.boots.into_iter().next().expect("no boot recorded")
}

/// Workload paths of a results file, by name.
fn workload(name: &str) -> String {
    format!("boots[].result.workloads[{name}]")
}

/// The shape (key paths, JSON types, and the values that are schema) of
/// the results file at `path`. Data is left out: counters listed only when
/// they changed, the CPU's vulnerability files, the nbench operations a run
/// happened to reach (and their latency metrics), kernel warnings.
fn results_shape(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let value: serde_json::Value = serde_json::from_str(&text).expect("the results file is JSON");
    let system = |w: &str, part: &str| format!("{}.iterations[].system.{part}", workload(w));
    let mut data_keyed = vec!["boots[].result.provenance.mitigations".to_string()];
    for w in ["fork", "dbench", "tbench", "kbuild", "sdet_applets", "hackbench"] {
        for part in ["vmstat", "interrupts", "softirqs"] {
            data_keyed.push(system(w, part));
        }
    }
    for w in ["dbench", "tbench"] {
        data_keyed.push(format!("{}.iterations[].detail.ops", workload(w)));
    }
    let data_keyed: Vec<&str> = data_keyed.iter().map(String::as_str).collect();
    let latencies: Vec<String> =
        ["dbench", "tbench"].iter().map(|w| format!("{}.iterations[].metrics", workload(w))).collect();
    let data_suffixes: Vec<(&str, &str)> = latencies.iter().map(|p| (p.as_str(), "_avg_latency")).collect();
    let rules = support::json_shape::ShapeRules {
        data_keyed: &data_keyed,
        data_suffixes: &data_suffixes,
        named_arrays: &["boots[].result.workloads"],
        opaque: &["boots[].result.provenance.kernel_warnings"],
        pinned: &[
            "format",
            "version",
            "boots[].result.schema_version",
            "*.unit",
            "*.better",
            "boots[].boot.classification",
        ],
    };
    support::json_shape::json_shape(&value, &rules)
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn workload_children_start_clean_and_pid1_stays_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let output = run_boot(&out, "fork,dbench,tbench,kbuild,sdet_applets,hackbench", "bootbench.fork.count=300");
    let boot = first_boot(&out, &output);
    assert_eq!(boot.boot.classification, "ok", "{:?}", boot.boot.detail);
    let doc = boot.result.expect("no guest document");
    assert_eq!(doc.workloads.len(), 6);
    for w in &doc.workloads {
        let name = &w.name;
        let quiet = w.quiet.clone().unwrap_or_else(|| panic!("{name}: no quiet observation"));
        let child = quiet.workload_process.unwrap_or_else(|| panic!("{name}: no workload process state"));
        assert_eq!(child.signals_blocked, "0000000000000000", "{name}: child inherited PID 1's signal mask");
        assert_eq!(child.signals_ignored, "0000000000000000", "{name}: child inherited ignored signals");
        assert_eq!(child.oom_score_adj, 0, "{name}: child inherited PID 1's OOM protection");
        assert_eq!(quiet.other_userspace_tasks, 0, "{name}: another userspace task was alive while measuring");
        // PID 1 sleeps in one blocking poll while a workload runs.
        assert!(quiet.pid1_voluntary_switches <= 2, "{name}: PID 1 woke {} times", quiet.pid1_voluntary_switches);
    }
    // The schema and keys of a quick run's results file, every workload's
    // included: a change is a change of what users parse.
    insta::assert_snapshot!("quick_run_results_shape", results_shape(&out));
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn watchdog_kills_an_overlong_workload_and_the_result_still_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    // fork alone: what follows the killed workload is not under test.
    let output = run_boot(&out, "fork", "bootbench.watchdog=3 bootbench.fork.count=100000000");
    assert_eq!(output.status.code(), Some(2), "a run with a failed workload must not exit 0");
    let boot = first_boot(&out, &output);
    // The boot itself is fine: the init reported the failure and powered off.
    assert_eq!(boot.boot.classification, "ok", "{:?}", boot.boot.detail);
    let doc = boot.result.expect("no guest document");
    let err = doc.workloads[0].error.clone().expect("workload error missing");
    assert!(err.contains("watchdog"), "{err}");
    assert_eq!(doc.status, loads::schema::Status::Error);
    assert!(boot.console_log.contains("watchdog expired"), "console does not say why");
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn alive_events_keep_a_long_workload_from_passing_for_a_silent_hang() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    // The console may stay silent 20 s; fork runs for well over that, and
    // only PID 1's alive events (every 5 s) speak meanwhile.
    let output = Command::new(env!("CARGO_BIN_EXE_bootbench"))
        .args(["run", "--workloads", "fork", "--iterations", "1", "--warmup", "0", "--timeout-silence", "20"])
        .args(["--timeout-total", "600", "--append", "bootbench.alive=5 bootbench.fork.count=30000", "-o"])
        .arg(&out)
        .output()
        .expect("cannot run bootbench");
    let boot = first_boot(&out, &output);
    assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, boot.console_log);
    let doc = boot.result.expect("no guest document");
    let fork = &doc.workloads[0];
    assert_eq!(fork.error, None);
    let elapsed = fork.iterations[0].detail["elapsed_s"].as_f64().unwrap();
    assert!(elapsed > 25.0, "fork ran {elapsed} s, not longer than the silence timeout: raise its count");
    let alive = boot.console_log.lines().filter(|l| l.contains("alive workload=fork elapsed_s=")).count();
    assert!(
        alive as f64 >= (elapsed / 5.0).floor() - 1.0,
        "{alive} alive events in {elapsed} s:\n{}",
        boot.console_log
    );
    // PID 1 wakes for each alive event and for nothing else while the
    // iteration runs: at most one wake-up per alive interval (the goal is
    // at most one a second), plus the workload's start and end. A wake-up
    // is a voluntary switch (PID 1 slept and was woken); an involuntary
    // one is the workload preempting PID 1 while it was awake, which a
    // slow or contended host makes more of without PID 1 waking more.
    let quiet = fork.quiet.clone().expect("no quiet observation");
    let wakeups = quiet.pid1_voluntary_switches;
    let preempted = quiet.pid1_involuntary_switches;
    eprintln!(
        "PID 1 woke {wakeups} times (and was preempted {preempted} times) during a {elapsed:.1} s iteration \
         with alive events every 5 s ({:.3} wake-ups/s, {alive} alive events)",
        wakeups as f64 / elapsed
    );
    assert!(
        wakeups as f64 <= elapsed / 5.0 + 3.0,
        "PID 1 woke {wakeups} times in a {elapsed} s iteration, more than its alive events ({alive})"
    );
    assert!((wakeups + preempted) as f64 <= elapsed, "more than one PID-1 switch per second");
}
