//! The workloads that exec applets, run on the host through the
//! `bootbench-applet` binary (a test harness cannot dispatch applets).
//! They check what the kernel is made to do: execs (by the kernel's own
//! process accounting), page faults, context switches, and that nothing is
//! left running.

use loads::kernel_build::make::{build_once, JobLimit};
use loads::kernel_build::source_tree::{SourceTree, TreeSpec};
use loads::workload::RunContext;
use loads::workloads;
use process_accounting::{comm_of, in_pid_namespace};
use std::path::PathBuf;
use std::sync::Mutex;

mod process_accounting;

/// Tests here reap and count children; they run one at a time so one
/// test cannot reap another's.
static SERIAL: Mutex<()> = Mutex::new(());

fn ctx(dir: &std::path::Path) -> RunContext {
    RunContext {
        seed: 7,
        work_dir: dir.to_path_buf(),
        applet_exe: PathBuf::from(env!("CARGO_BIN_EXE_bootbench-applet")),
    }
}

fn params(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match v {
        serde_json::Value::Object(m) => m,
        _ => unreachable!(),
    }
}

/// kbuild's figures, its exec counts checked against the kernel's: the
/// iteration runs as pid 1 of its own PID namespace with process
/// accounting on, so every process it made is accounted (see
/// `process_accounting`).
#[test]
fn kbuild_iteration_counts_execs_faults_and_switches() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let files = 24;
    let modes = ["single", "optimal", "maximal"];
    let accounted = in_pid_namespace(|| {
        let p = params(serde_json::json!({"files": files, "modes": modes, "cpus": 2, "warmup_build": false}));
        let mut w = workloads::prepare("kbuild", &p, &ctx(d.path())).unwrap();
        serde_json::to_value(w.run_iteration().unwrap()).unwrap()
    });
    let it: loads::schema::Iteration = serde_json::from_value(accounted.value.clone()).unwrap();
    // The kernel's count: one make per mode, in the order they ran, each
    // the parent of every job of its build; every process exec'd the
    // applet binary; nothing else was made.
    let makes = accounted.children_of(1);
    assert_eq!(makes.len(), modes.len(), "makes: {makes:?}");
    // make is the applet binary exec'd by path; it execs its jobs through
    // /proc/self/exe, which names them `exe`.
    let applet = comm_of(std::path::Path::new(env!("CARGO_BIN_EXE_bootbench-applet")));
    for e in &accounted.ended {
        let comm = if e.ppid == 1 { applet.as_str() } else { "exe" };
        assert!(e.execd && e.comm == comm, "a build process that did not exec the applet: {e:?}");
    }
    assert_eq!(accounted.processes as usize, 1 + accounted.ended.len(), "processes made but not accounted");
    for (mode, make) in modes.iter().zip(&makes) {
        let jobs = accounted.children_of(make.pid).len() as u64;
        let detail = |k: &str| it.detail[&format!("{k}_{mode}")].as_u64().unwrap();
        // One cc per file and one ld, by the kernel's count; and the
        // workload's execs are what the kernel saw exec'd: make and its jobs.
        assert_eq!(jobs, files + 1, "{mode}: jobs the kernel saw make start");
        assert_eq!(detail("execs"), 1 + jobs, "{mode}: execs against the kernel's count");
        let m = |k: &str| it.metrics[&format!("{k}_{mode}")].value;
        assert!(m("elapsed") > 0.0 && m("user") > 0.0 && m("cpu_percent") > 0.0, "{mode}: {it:?}");
        // Every exec maps and touches a fresh image: dozens of minor faults
        // each at least, whatever the page size.
        assert!(detail("minor_faults") > 20 * (files + 2), "{mode}: {}", detail("minor_faults"));
        // make sleeps in wait4 for every job at least once.
        assert!(m("sleeps") >= files as f64, "{mode}: {}", m("sleeps"));
    }
    assert_eq!(it.detail["max_running_single"], 1);
    assert_eq!(it.detail["max_running_optimal"], 8, "4 x 2 CPUs");
    assert_eq!(it.detail["max_running_maximal"], files);
    assert_eq!(it.detail["jobs_maximal"], "-j");
    assert_eq!(it.detail["tree_files"], files);
    assert_eq!(it.detail.get("skipped"), None, "half was not asked for");
    assert_no_children();
}

#[test]
fn build_once_is_deterministic_and_reports_a_failed_compile() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_bootbench-applet"));
    let tree = SourceTree::generate(&d.path().join("t"), &TreeSpec { files: 10, headers: 0 }, 99).unwrap();
    let accounted = in_pid_namespace(|| {
        let a = build_once(&tree, JobLimit::Jobs(3), &exe).unwrap();
        serde_json::json!([a.image_sha256, a.compiles, a.execs])
    });
    let b = build_once(&tree, JobLimit::Unbounded, &exe).unwrap();
    assert_eq!(accounted.value[0], b.image_sha256.as_str());
    // The build's counts against the kernel's: make, 10 compiles and the
    // link, all exec'd, and nothing else.
    let make = accounted.children_of(1);
    assert_eq!(make.len(), 1, "{make:?}");
    let jobs = accounted.children_of(make[0].pid);
    assert_eq!(jobs.len(), 11);
    assert!(accounted.ended.iter().all(|e| e.execd), "{:?}", accounted.ended);
    assert_eq!(accounted.processes, 13, "pid 1, make and its jobs");
    let (compiles, execs) = (accounted.value[1].as_u64(), accounted.value[2].as_u64());
    assert_eq!((compiles, execs), (Some(jobs.len() as u64 - 1), Some(1 + jobs.len() as u64)), "make's counts");
    // Break one source: the build fails naming file and line, and no job
    // is left behind.
    let victim = tree.root.join(&tree.sources[4]);
    let mut text = std::fs::read_to_string(&victim).unwrap();
    text.push_str("int broken(void) { return undeclared_thing; }\n");
    std::fs::write(&victim, text).unwrap();
    let e = build_once(&tree, JobLimit::Jobs(4), &exe).unwrap_err().to_string();
    assert!(e.contains("undeclared_thing") && e.contains(&tree.sources[4]), "{e}");
    assert!(!tree.root.join("vmlinux").exists());
    assert_no_children();
}

fn assert_no_children() {
    // Every child this process started was reaped (ECHILD means none left).
    let r = nix::sys::wait::waitpid(None, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
    assert!(matches!(r, Err(nix::Error::ECHILD)), "{r:?}");
}

#[test]
fn sdet_applets_levels_report_throughput_and_failures_name_the_command() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let p = params(serde_json::json!({"levels": [1, 3], "units": 12, "docs": 3, "doc_lines": 50}));
    let accounted = in_pid_namespace(|| {
        let mut w = workloads::prepare("sdet_applets", &p, &ctx(d.path())).unwrap();
        serde_json::to_value(w.run_iteration().unwrap()).unwrap()
    });
    let it: loads::schema::Iteration = serde_json::from_value(accounted.value.clone()).unwrap();
    let per_script = it.detail["commands_per_script"].as_u64().unwrap();
    // 12 units: ten single commands, mkdir/cp/ls/rm, and a 3-stage pipeline.
    assert_eq!(per_script, 15);
    // The kernel's count, from process accounting in the iteration's own
    // PID namespace: the shells are forks that never exec (1 + 3 of them,
    // the levels in order); each command stage is a process the shell
    // forked that exec'd the applet binary.
    let shells = accounted.children_of(1);
    assert!(shells.iter().all(|s| !s.execd), "a shell exec'd: {shells:?}");
    assert_eq!(shells.len(), 4, "shells: {shells:?}");
    assert_eq!(accounted.processes as usize, 1 + accounted.ended.len(), "processes made but not accounted");
    let applet = comm_of(std::path::Path::new(env!("CARGO_BIN_EXE_bootbench-applet")));
    let mut shells = shells.into_iter();
    for n in [1u64, 3] {
        let sph = it.metrics[&format!("scripts_per_hour_{n}")].value;
        let elapsed = it.detail[&format!("elapsed_{n}")].as_f64().unwrap();
        assert!((sph - n as f64 * 3600.0 / elapsed).abs() < 1e-6 * sph, "{sph} {elapsed}");
        let mut execd = 0;
        for shell in shells.by_ref().take(n as usize) {
            let stages = accounted.children_of(shell.pid);
            assert!(stages.iter().all(|s| s.execd && s.comm == applet), "a stage that did not exec: {stages:?}");
            execd += stages.len() as u64;
        }
        // Every stage of every command line: 15 lines, one a 3-stage pipe.
        assert_eq!(execd, n * (per_script + 2), "level {n}: stages the kernel saw exec'd");
        assert_eq!(it.detail[&format!("execs_{n}")].as_u64().unwrap(), execd, "level {n}: execs against the kernel's");
        assert!(it.detail[&format!("minor_faults_{n}")].as_u64().unwrap() > 20 * n * per_script);
    }
    assert_no_children();
    let mut w = workloads::prepare("sdet_applets", &p, &ctx(d.path())).unwrap();
    // A file a command needs disappears: the level fails, naming the
    // script's failing command, and nothing is left running.
    std::fs::remove_file(d.path().join("sdet_applets/skel/docs/numbers.txt")).unwrap();
    let e = loads::error_chain::error_chain(&w.run_iteration().unwrap_err());
    assert!(e.contains("sort -n -r docs/numbers.txt") && e.contains("No such file"), "{e}");
    assert_no_children();
}

/// This process's read(2) calls so far by the kernel's count (`syscr`
/// in /proc/self/io), with those of its ended threads and reaped
/// children; the read that takes the count is not in it.
fn reads_so_far() -> u64 {
    use std::io::Read;
    let mut text = [0u8; 4096];
    let n = std::fs::File::open("/proc/self/io").unwrap().read(&mut text).unwrap();
    let text = std::str::from_utf8(&text[..n]).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("syscr:"))
        .expect("no syscr: CONFIG_TASK_IO_ACCOUNTING")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn hackbench_reads_each_message_by_itself_and_reports_its_children_s_switches() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let p = params(serde_json::json!({"groups": 2, "loops": 10}));
    let mut w = workloads::prepare("hackbench", &p, &ctx(d.path())).unwrap();
    let (reads_before, children_before) = (reads_so_far(), loads::reap::children());
    let t0 = std::time::Instant::now();
    let it = w.run_iteration().unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let (reads, children) = (reads_so_far() - reads_before - 1, loads::reap::children().since(&children_before));
    let (tasks, messages) = (2 * 20 * 2, 2 * 20 * 20 * 10);
    assert_eq!(it.detail["tasks"], tasks);
    assert_eq!(it.detail["messages"], messages);
    // Four modes, each one read per message (hackbench's receiver) plus
    // at most one per task for the ready bytes. Receivers that read what
    // is queued in one go make a fraction of that.
    assert!(reads >= 4 * messages && reads <= 4 * (messages + tasks), "{reads} reads for 4 × {messages} messages");
    // The process modes' switches are those of their tasks, all reaped
    // children of this process: the kernel's RUSAGE_CHILDREN.
    let processes = |what: &str| -> u64 {
        ["pipe_process", "socket_process"].iter().map(|m| it.detail[&format!("{what}_{m}")].as_u64().unwrap()).sum()
    };
    assert_eq!(processes("voluntary_switches"), children.voluntary_switches);
    assert_eq!(processes("involuntary_switches"), children.involuntary_switches);
    // The time runs from the wake-up to the last task reaped. The process
    // modes' tasks spend most of their CPU time (the kernel's count, reaped
    // with them) in that window, so it lasts at least that time spread
    // over every CPU: 0.87 to 3 times it measured here; a clock stopped
    // before the reaping times little more than the wake-up write. No
    // mode lasts longer than the whole iteration.
    let cpus = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map_or(1, |set| (0..nix::sched::CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).count())
        as f64;
    let mut times = 0.0;
    for m in ["pipe_process", "pipe_thread", "socket_process", "socket_thread"] {
        let t = &it.metrics[&format!("time_{m}")];
        assert!(t.unit == "s" && t.better == loads::schema::Better::Lower, "{m}: {t:?}");
        times += t.value;
        if m.ends_with("_process") {
            let cpu =
                it.detail[&format!("user_{m}")].as_f64().unwrap() + it.detail[&format!("system_{m}")].as_f64().unwrap();
            assert!(t.value >= 0.4 * cpu / cpus, "{m}: {} s for {cpu} s of its tasks' CPU on {cpus} CPUs", t.value);
        }
        assert!(it.detail[&format!("voluntary_switches_{m}")].as_u64().unwrap() > 0, "{m}");
    }
    assert!(times <= wall, "the modes' times add up to {times} s, the iteration took {wall} s");
    assert_no_children();
}
