//! contest on the host, small: every load really runs (its counter moves),
//! stops when asked, and leaves no process behind; a load that dies makes
//! its row an error instead of a silent no_load; process_load is contest's
//! wake-up chain of exec'd ring members.
use loads::workload::RunContext;
use loads::workloads;
use loads::workloads::contest::background_loads::{LoadEnv, LoadKind};
use loads::workloads::contest::{load_process, ring};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
            // Enough files that the build's window (about 0.2 s) holds at
            // least one unit of every load's work on a busy host.
            "rows": rows, "files": 64, "tar_files": 12, "lead_s": 0.5, "mem_bytes": 48u64 << 20,
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
    // Every row's ratio is its own time over this iteration's no_load
    // time (the rows' times all differ, so any other divisor shows).
    let base = it.metrics["time_no_load"].value;
    for r in rows {
        let (t, ratio) = (it.metrics[&format!("time_{r}")].value, it.metrics[&format!("ratio_{r}")].value);
        assert_eq!(ratio, t / base, "{r}: ratio {ratio}, time {t}, no_load {base}");
    }
    // CPU-bound loads have a CPU share (small on a busy host, never nil):
    // over the load's whole life, from its rusage. The build's window here
    // is about 0.2 s, and /proc counts the window's CPU in 10 ms ticks, so
    // its LCPU% can read 0 for a load that ran; it is only bounded.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for r in ["process_load", "fork_load", "mem_load"] {
        let detail = it.detail["rows"].as_array().unwrap().iter().find(|d| d["row"] == r).unwrap();
        let share = detail["load_cpu_s"].as_f64().unwrap() / detail["load_wall_s"].as_f64().unwrap() * 100.0;
        assert!(share > 1.0, "{r}: {share:.1}% CPU over its life");
        let lcpu = it.metrics[&format!("lcpu_percent_{r}")].value;
        assert!((0.0..=100.0 * (cpus + 1.0)).contains(&lcpu), "{r}: LCPU% {lcpu}");
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

fn load_env(dir: &Path, ring_procs: u32, applet_exe: PathBuf) -> LoadEnv {
    LoadEnv::small(dir, ring_procs, applet_exe)
}

/// The kernel's count of voluntary context switches of `pid` (its
/// sleeps), from /proc/PID/status.
fn voluntary_switches(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")).unwrap().trim().parse().unwrap()
}

/// contest's process_load: N processes forked and exec'd in a ring of
/// pipes carrying M ≪ N chunks, a wake-up chain. Checked with the
/// kernel's own accounting: the members are the `ring` applet (their exe
/// and argv), and a chunk's arrival wakes a member that slept waiting for
/// it: close to one voluntary switch per member per chunk passed on
/// (0.8–0.95 measured). With a chunk per member (M = N, the old ring) the
/// members mostly find data waiting: 0.09–0.15.
#[test]
fn process_load_is_a_wake_up_chain_of_exec_d_members() {
    let d = tempfile::tempdir().unwrap();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_bootbench-applet")).unwrap();
    let n = 16usize;
    let m = ring::chunks(n);
    assert_eq!(m, 2);
    let mut load = load_process::start(LoadKind::Process, &load_env(d.path(), n as u32, exe.clone())).unwrap();
    load.lead(Duration::from_millis(500)).unwrap();
    let pgid = load.pgid();
    let members: Vec<i32> = group_members(pgid.into()).into_iter().filter(|&p| p != pgid).collect();
    assert_eq!(members.len(), n, "ring members in the load's group: {members:?}");
    for &pid in &members {
        assert_eq!(std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(), exe, "member {pid} was not exec'd");
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let argv: Vec<String> =
            cmdline.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into()).collect();
        assert_eq!(argv.get(1..3), Some(&["--applet".to_string(), "ring".to_string()][..]), "{argv:?}");
        assert_eq!(argv.len(), 5, "ring IN_FD OUT_FD: {argv:?}");
    }
    let sleeps = || members.iter().map(|&p| voluntary_switches(p)).sum::<u64>();
    let (sleeps0, laps0) = (sleeps(), load.work());
    std::thread::sleep(Duration::from_secs(1));
    let (sleeps1, laps1) = (sleeps(), load.work());
    let laps = laps1 - laps0;
    let per_hop = (sleeps1 - sleeps0) as f64 / (laps as f64 * n as f64);
    eprintln!("{laps} laps, {per_hop:.3} sleeps per member hop");
    let report = load.stop(Duration::from_secs(10)).unwrap();
    assert!(!report.killed, "the leader did not stop by itself: {report:?}");
    assert_eq!(group_members(pgid.into()), Vec::<i32>::new(), "ring members left");
    assert!(laps > 100, "the ring hardly moved: {laps} laps in 1 s");
    assert!(per_hop > 0.5, "{per_hop:.3} sleeps per hop: members had data waiting, not a wake-up chain");
}

/// A ring member that dies makes the load fail, saying which member and
/// how; so does a member that cannot be exec'd.
#[test]
fn a_ring_member_that_dies_is_named_with_how() {
    let d = tempfile::tempdir().unwrap();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_bootbench-applet"));
    let failure = |load: &mut load_process::RunningLoad| -> String {
        let t0 = Instant::now();
        loop {
            match load.check_alive("during the build") {
                Err(e) => return loads::error_chain::error_chain(&e),
                Ok(()) if t0.elapsed() > Duration::from_secs(10) => panic!("the load outlived its broken ring"),
                Ok(()) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    };
    let mut load = load_process::start(LoadKind::Process, &load_env(d.path(), 8, exe)).unwrap();
    load.lead(Duration::from_millis(300)).unwrap();
    let pgid = load.pgid();
    let members: Vec<i32> = group_members(pgid.into()).into_iter().filter(|&p| p != pgid).collect();
    let victim = members[3];
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(victim), nix::sys::signal::Signal::SIGTERM).unwrap();
    let e = failure(&mut load);
    assert!(e.contains("ring broke") && e.contains(&format!("(pid {victim}): killed by SIGTERM")), "{e}");
    drop(load);
    assert_eq!(group_members(pgid.into()), Vec::<i32>::new(), "ring members left");

    let mut load =
        load_process::start(LoadKind::Process, &load_env(d.path(), 4, d.path().join("no-such-exe"))).unwrap();
    let e = failure(&mut load);
    assert!(e.contains("exit status 127: the ring applet could not be exec'd"), "{e}");
}
