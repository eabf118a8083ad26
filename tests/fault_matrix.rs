//! The fault matrix, end to end: each case boots the Debian amd64 kernel
//! under TCG with a fault injected (`bootbench.test_fault=...`, test-only
//! and recorded in the result, or a cmdline that keeps the init from
//! starting), and asserts the host's verdict, what was kept and the exit
//! status. One boot carries several cases where they do not interfere.
//! Every case prints a `fault-matrix:` line (case, verdict, kept, exit
//! status, wall time) for the table.
//!
//! Cases elsewhere: a boot that never reaches the init in tests/skeleton.rs
//! (`kernel_panic_is_classified_at_once_not_at_the_timeout`, whose verdict
//! is `boot_failure`); the host interrupt (SIGINT) in tests/interrupt.rs; a
//! damaged console stream in qemu's console_protocol and console_scan unit
//! tests; an upload server that fails then recovers in tests/upload.rs.
//! The default tier has the quick cases; the silent guest, which waits out
//! a timeout, and the OOM killer under mem_load (a guest without swap) are
//! in the long tier.

mod support;

use bootbench::results::BootRecord;
use std::path::Path;
use std::time::Duration;

/// Runs `bootbench run` on the default amd64 kernel with the quick suite's
/// `workloads`, one short iteration each, plus `extra` arguments.
fn boot(out: &Path, workloads: &str, extra: &[&str]) -> support::CliRun {
    support::require_x86_64_boot();
    let _lock = support::boot_lock();
    let mut args = vec!["run", "--workloads", workloads, "--iterations", "1", "--warmup", "0"];
    args.extend_from_slice(&["--timeout-total", "600", "-o", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    support::run_bootbench(args, support::BOOT_DEADLINE)
}

/// Prints the case's row of the fault-matrix table.
fn report(case: &str, b: &BootRecord, kept: &str, run: &support::CliRun) {
    eprintln!(
        "fault-matrix: {case} | verdict {} | kept {kept} | exit {} | wall {:.1} s",
        b.boot.classification,
        run.status.code().map(|c| c.to_string()).unwrap_or_else(|| "signal".into()),
        run.elapsed.as_secs_f64()
    );
}

/// Names of the workloads the host kept from a failed boot.
fn kept_names(b: &BootRecord) -> Vec<String> {
    b.workloads_kept.as_ref().map(|k| k.workloads.iter().map(|w| w.name.clone()).collect()).unwrap_or_default()
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn a_crashing_workload_its_orphans_a_hanging_late_step_and_a_dead_receiver_cost_only_themselves() {
    let dir = support::scratch();
    let out = dir.path().join("r.json");
    // A port nothing listens on: the receiver is down for the whole upload.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://10.0.2.2:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let run = boot(
        &out,
        "fork,hackbench",
        &[
            "--upload-url",
            &url,
            "--upload-token",
            "t0ken-0123456789abcdef",
            "--append",
            "bootbench.test_fault=segv,orphans,late-hang bootbench.fork.count=100 \
             bootbench.upload_attempts=2 bootbench.upload_timeout=2",
        ],
    );
    let b = support::only_boot(&out, &run);
    let log = &b.console_log;
    assert_eq!(b.boot.classification, "ok", "{:?}\n{}", b.boot.detail, run.transcript());
    assert_eq!(run.status.code(), Some(2), "a run with a failed workload exits 2:\n{}", run.transcript());
    let doc = b.result.as_ref().expect("no document");
    // The fault is in the result: this run cannot pass for a clean one.
    assert!(doc.errors.iter().any(|e| e.location == "test-fault"), "{:?}", doc.errors);
    // Case 4: SIGSEGV is fork's error; hackbench still ran.
    let fork = &doc.workloads[0];
    let err = fork.error.as_deref().unwrap_or_default();
    assert!(err.contains("SIGSEGV"), "fork's error does not name the signal: {err:?}");
    let hackbench = &doc.workloads[1];
    assert_eq!(hackbench.name, "hackbench");
    assert_eq!(hackbench.error, None, "hackbench failed after fork crashed");
    assert_eq!(hackbench.iterations.len(), 1);
    report("4 workload SIGSEGV", &b, "the other workloads", &run);
    // Case 7: the orphans (SIGTERM ignored, own session) were killed before
    // hackbench, which saw no other userspace task.
    let teardown: Vec<&str> =
        doc.errors.iter().filter(|e| e.location == "teardown").map(|e| e.message.as_str()).collect();
    assert!(
        teardown.iter().any(|m| m.starts_with("workload fork left") && !m.contains("could not be killed")),
        "the orphans were not found and killed: {teardown:?}"
    );
    let quiet = hackbench.quiet.clone().expect("hackbench has no quiet observation");
    assert_eq!(quiet.other_userspace_tasks, 0, "fork's orphans were alive during hackbench");
    report("7 orphans ignoring SIGTERM", &b, "all; orphans killed before the next workload", &run);
    // A step after the result that hangs: bounded, reported, nothing lost.
    assert!(log.contains("step=late-hang status=timeout"), "no late-step event:\n{log}");
    let late = b.boot.late_failure.as_deref().unwrap_or_default();
    assert!(late.contains("late-hang"), "the late failure is not recorded beside the result: {late:?}");
    report("late step hangs", &b, "the whole result", &run);
    // Case 8: the receiver is down: two attempts, announced, then given up;
    // the boot is ok and the failure is in the record.
    assert!(log.contains("upload-attempt attempt=1") && log.contains("upload-attempt attempt=2"), "{log}");
    let upload = b.upload.as_ref().expect("no upload record");
    let guest = upload.guest.as_ref().unwrap_or_else(|| panic!("the guest's upload report is missing: {upload:?}"));
    assert_eq!(guest.verdict, results_uploader::Verdict::GaveUp, "{guest:?}");
    assert_eq!(guest.history, ["refused", "refused"], "{guest:?}");
    report("8 upload server down", &b, "the whole result; upload failure recorded", &run);
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn a_kernel_panic_mid_suite_is_the_kernels_and_keeps_the_finished_workloads() {
    let dir = support::scratch();
    let out = dir.path().join("r.json");
    let db = dir.path().join("lab.db");
    let fault = "bootbench.test_fault=kernel-panic bootbench.fork.count=100";
    let run = boot(&out, "fork,hackbench", &["--append", fault, "--serve", "--serve-db", db.to_str().unwrap()]);
    let b = support::only_boot(&out, &run);
    assert_eq!(b.boot.classification, "panic", "{:?}\n{}", b.boot.detail, run.transcript());
    assert_eq!(run.status.code(), Some(2), "a boot failed: exit 2\n{}", run.transcript());
    assert!(b.result.is_none());
    // The lab store has the panicked boot's envelope too, under the host's
    // id for it, its status the classification.
    let id = b.boot.envelope_id.as_deref().expect("a boot without a document gets a host-made id");
    assert!(id.starts_with("host-") && id.len() == 37, "{id}");
    let upload = b.upload.as_ref().expect("no upload record");
    assert_eq!(upload.envelope_error, None, "{upload:?}");
    let stored = bootbench::service::store::load_run(&db, id).unwrap_or_else(|e| panic!("{e:#}"));
    let stored = stored.into_results_file();
    assert_eq!(stored.boots[0].boot.classification, "panic");
    assert!(stored.boots[0].console_log.contains("Kernel panic"), "{}", stored.boots[0].console_log);
    assert_eq!(kept_names(&b), ["fork"], "{:?}", b.workloads_kept);
    let fork = &b.workloads_kept.as_ref().unwrap().workloads[0];
    assert_eq!(fork.error, None);
    assert_eq!(fork.iterations.len(), 1);
    report("1 kernel panic mid-suite", &b, "fork (finished before the panic)", &run);
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn a_panic_inside_pid1_is_reported_as_ours_never_as_the_kernels() {
    let dir = support::scratch();
    let out = dir.path().join("r.json");
    let run = boot(&out, "fork,hackbench", &["--append", "bootbench.test_fault=init-panic bootbench.fork.count=100"]);
    let b = support::only_boot(&out, &run);
    assert_eq!(b.boot.classification, "init_panic", "{:?}\n{}", b.boot.detail, b.console_log);
    let detail = b.boot.detail.as_deref().unwrap_or_default();
    assert!(detail.contains("test fault init-panic"), "the panic message is not in the verdict: {detail}");
    assert!(detail.contains("test_faults.rs"), "the panic location is not in the verdict: {detail}");
    assert!(!b.console_log.contains("Attempted to kill init"), "PID 1 died instead of powering off");
    assert_ne!(run.status.code(), Some(0));
    assert_eq!(kept_names(&b), ["fork"], "{:?}", b.workloads_kept);
    report("6 panic inside PID 1", &b, "fork", &run);
}

#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_a_silent_guest_is_a_hang_and_a_users_panic_0_is_refused() {
    // Case 2: the guest falls silent after the first workload.
    let dir = support::scratch();
    let out = dir.path().join("silent.json");
    let run = boot(
        &out,
        "fork,hackbench",
        &["--timeout-silence", "20", "--append", "bootbench.test_fault=silence bootbench.fork.count=100"],
    );
    let b = support::only_boot(&out, &run);
    assert_eq!(b.boot.classification, "hang", "{:?}", b.boot.detail);
    let detail = b.boot.detail.as_deref().unwrap_or_default();
    assert!(detail.contains("silence") || detail.contains("20 s"), "{detail}");
    assert!(b.console_log.contains("workload fork starting"), "the last console lines are not kept");
    assert_eq!(kept_names(&b), ["fork"], "{:?}", b.workloads_kept);
    assert!(run.elapsed < Duration::from_secs(300), "took {:?}", run.elapsed);
    report("2 silent guest (hang)", &b, "fork; console kept", &run);

    // Case 3b: `panic=0` from the user (the kernel would then wait forever
    // after a panic) is refused before anything boots: bootbench sets
    // `panic=-1` itself and a key may appear once. And a kernel that
    // panics anyway is judged by its panic line, not at a timeout (case 3,
    // tests/skeleton.rs).
    let out = dir.path().join("panic0.json");
    let run = boot(&out, "fork", &["--timeout-boot", "30", "--append", "rdinit=/nonexistent panic=0"]);
    assert_ne!(run.status.code(), Some(0));
    assert!(run.stderr.contains("'panic' is already set"), "{}", run.transcript());
    assert!(!out.exists(), "a refused run wrote a results file");
    eprintln!("fault-matrix: 3b panic=0 from the user | refused before booting | exit {:?}", run.status.code());
}

#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_the_oom_killer_under_mem_load_fails_that_row_only() {
    // Case 5: mem_load touches 110% of RAM in a guest without swap, so the
    // OOM killer takes its worker (it has the highest OOM score; PID 1 has
    // the lowest). The lead time is long enough for two passes at the
    // mapping before the build starts; past `max_oom_kills` the row fails
    // as the README documents, and the other row, the workload and the
    // boot stay.
    support::require_x86_64_boot();
    let _lock = support::boot_lock();
    let dir = support::scratch();
    let suite = dir.path().join("oom-suite.json");
    let json = serde_json::json!({
        "name": "contest-oom", "iterations": 1, "warmup": 0, "watchdog_s": 900,
        "workloads": [{"name": "contest", "params": {
            "rows": ["no_load", "mem_load"], "files": 20, "lead_s": 8.0, "max_oom_kills": 1
        }}]
    });
    std::fs::write(&suite, serde_json::to_vec(&json).unwrap()).unwrap();
    let out = dir.path().join("oom.json");
    let run = support::run_bootbench(
        [
            "run",
            "--accel",
            "tcg",
            "--mem",
            "256M",
            "--swap",
            "none",
            "--suite",
            suite.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        support::BOOT_DEADLINE,
    );
    // A row with an error makes the result incomplete: exit 2, as the
    // README documents, with the results file written.
    assert_eq!(run.status.code(), Some(2), "{}", run.transcript());
    let b = support::only_boot(&out, &run);
    assert_eq!(b.boot.classification, "ok", "{:?}\n{}", b.boot.detail, run.transcript());
    let doc = b.result.as_ref().expect("no document");
    let contest = &doc.workloads[0];
    assert_eq!(contest.error, None, "the workload was lost, not the row");
    let it = contest.iterations.first().unwrap_or_else(|| panic!("no iteration: {:?}", contest.error));
    assert!(
        it.errors
            .iter()
            .any(|e| e.starts_with("mem_load") && e.contains("the OOM killer took the worker 2 times (limit 1)")),
        "mem_load's row did not fail on OOM kills: {:?}",
        it.errors
    );
    assert_eq!(it.errors.len(), 1, "{:?}", it.errors);
    assert!(it.metrics.contains_key("time_no_load"), "no_load's row was lost: {:?}", it.metrics.keys());
    assert!(!it.metrics.contains_key("time_mem_load"), "the failed row still has a time: {:?}", it.metrics.keys());
    let rows = it.detail["rows"].as_array().expect("detail.rows");
    let mem_row = rows.iter().find(|r| r["row"] == "mem_load").expect("mem_load's row detail");
    assert_eq!(mem_row["vmstat"]["oom_kill"], 2, "the kernel's count of OOM kills in the row: {mem_row}");
    assert!(b.console_log.contains("Out of memory: Killed process"), "no OOM kill on the console");
    report("5 OOM killer under mem_load", &b, "every other row; mem_load row fails, kills counted", &run);
}
