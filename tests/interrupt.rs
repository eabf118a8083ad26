//! End-to-end: Ctrl-C (fault case 9). A terminal's Ctrl-C sends SIGINT to
//! the foreground process group; these tests send it the same way, to the
//! group of a `bootbench` started as a group leader, while it boots real
//! kernels. `bootbench run -o` must leave a valid results file holding
//! exactly the finished boots, kill the QEMU of the boot in progress,
//! remove its scratch files and exit 130; `bootbench bisect` must leave a
//! state that `--resume` takes to the same answer; `bootbench local` must
//! kill the build running in the userland pack and let go of the pack.

mod support;

use bootbench::bisect::state::BisectState;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::*;

/// Sends SIGINT to the process group `child` leads, as Ctrl-C would.
fn ctrl_c(child: &Child) {
    killpg(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("cannot send SIGINT");
}

/// Waits for `child` to exit; kills its group and fails after `limit`.
#[track_caller]
fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().expect("cannot wait") {
            return st;
        }
        if Instant::now() >= until {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
            panic!("bootbench still running {limit:?} after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pids of `parent`'s children whose command is `comm`.
fn children_named(parent: u32, comm: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid ...
        let Some((head, tail)) = stat.rsplit_once(')') else { continue };
        let name = head.split_once('(').map(|(_, n)| n).unwrap_or_default();
        let ppid = tail.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) && name == comm {
            out.push(pid);
        }
    }
    out
}

/// Whether `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, t)| t.trim_start().starts_with('Z')),
    }
}

/// The `-initrd` path in a process's command line.
fn initrd_of(pid: u32) -> Option<PathBuf> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = raw.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let i = args.iter().position(|a| a == "-initrd")?;
    args.get(i + 1).map(PathBuf::from)
}

/// Starts `cmd` as the leader of its own process group (as a shell starts
/// a foreground job), its stderr piped, nothing on stdin or stdout.
fn spawn_leader(mut cmd: Command, what: &str) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"))
}

/// Reads `child`'s stderr on a thread: every line goes to the channel.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().expect("stderr is piped");
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn ctrl_c_during_a_run_keeps_exactly_the_finished_boots_in_a_valid_file_and_exits_130() {
    require_x86_64_boot();
    let _boot = boot_lock();
    let dir = scratch();
    let out = dir.path().join("results.json");
    let t0 = Instant::now();
    let mut run = bootbench(["run", "--accel", "tcg", "--workloads", "fork", "--iterations", "1", "--warmup", "0"]);
    run.args(["--boots", "3", "--append", "bootbench.fork.count=100", "-o"]).arg(&out);
    let mut child = spawn_leader(run, "bootbench run");
    let lines = stderr_lines(&mut child);
    let mut said = Vec::new();
    let mut take = |limit: Duration, what: &str, f: &dyn Fn(&str) -> bool| loop {
        match lines.recv_timeout(limit) {
            Ok(l) => {
                let hit = f(&l);
                said.push(l);
                if hit {
                    return;
                }
            }
            Err(e) => panic!("no {what} ({e}); bootbench said:\n{}", said.join("\n")),
        }
    };
    take(BOOT_DEADLINE, "'run: boot 1/3' line", &|l| l.starts_with("run: boot 1/3"));
    assert!(said.last().unwrap().contains(": ok in "), "the first boot must be ok:\n{}", said.join("\n"));
    // The second boot's QEMU, running: Ctrl-C must end it.
    let mut qemu = Vec::new();
    assert!(
        wait_until(Duration::from_secs(60), || {
            qemu = children_named(child.id(), "qemu-system-x86");
            !qemu.is_empty()
        }),
        "the second boot's QEMU never started"
    );
    let work = initrd_of(qemu[0]).and_then(|p| p.parent().map(Path::to_path_buf)).expect("QEMU's -initrd");
    assert!(work.is_dir(), "{}", work.display());
    ctrl_c(&child);
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let elapsed = t0.elapsed();
    while let Ok(l) = lines.recv_timeout(Duration::from_secs(5)) {
        said.push(l);
    }
    let said = said.join("\n");
    assert_eq!(status.code(), Some(130), "exit status after Ctrl-C ({status}):\n{said}");
    // Exactly the boots it reported finished, in a file that reads back.
    let finished = said.lines().filter(|l| l.starts_with("run: boot ")).count();
    assert_eq!(finished, 1, "{said}");
    let file = bootbench::results::ResultsFile::read(&out).unwrap_or_else(|e| panic!("{e:#}\n{said}"));
    assert_eq!(file.boots.len(), finished, "{said}");
    assert_eq!(file.boots[0].boot.classification, "ok");
    assert!(file.boots[0].result.is_some());
    assert!(
        said.contains(&format!(
            "run: interrupted during boot 2/3: that boot is not recorded; {} holds the 1 finished boot(s)",
            out.display()
        )),
        "{said}"
    );
    // Nothing half-written beside it, no QEMU left, no scratch files left.
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["results.json"]);
    assert!(wait_until(Duration::from_secs(10), || qemu.iter().all(|p| gone(*p))), "QEMU {qemu:?} outlived bootbench");
    assert!(!work.exists(), "the run's scratch directory {} was left behind", work.display());
    eprintln!("run interrupted after its first boot: {elapsed:.1?} in all");
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn ctrl_c_during_a_bisection_leaves_a_state_that_resumes_to_the_same_answer() {
    let kernel = require_x86_64_boot();
    let _boot = boot_lock();
    require_program("git");
    let dir = scratch();
    let tree = dir.path().join("tree");
    // c0 … c4: from c3 on the kernel finds no init and panics.
    let shas = support::no_init_history(&tree);
    let state = dir.path().join("bisect/state.json");
    let mut args: Vec<String> = [
        "bisect",
        "--tree",
        tree.to_str().unwrap(),
        "--good",
        &shas[0],
        "--bad",
        &shas[4],
        "--mode",
        "boot",
        "--boot-tries",
        "1",
        "--workloads",
        "fork",
        "--iterations",
        "1",
        "--warmup",
        "0",
        "--append",
        "bootbench.fork.count=10",
        "--state",
        state.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(support::copy_kernel_build_flags(&kernel))
    .collect();
    let boots = |p: &Path| BisectState::load(p).map(|s| s.boots.len()).unwrap_or(0);

    let t0 = Instant::now();
    let mut bisect = Command::new(bootbench_bin());
    bisect.args(&args);
    let mut child = spawn_leader(bisect, "bootbench bisect");
    let lines = stderr_lines(&mut child);
    let mut said = Vec::new();
    // Both ends measured: interrupt the bisection in its first step.
    let deadline = Instant::now() + BOOT_DEADLINE;
    while boots(&state) < 2 {
        while let Ok(l) = lines.try_recv() {
            said.push(l);
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("bootbench bisect ended early ({st}):\n{}", said.join("\n"));
        }
        assert!(Instant::now() < deadline, "no progress:\n{}", said.join("\n"));
        std::thread::sleep(Duration::from_millis(100));
    }
    ctrl_c(&child);
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let first = t0.elapsed();
    while let Ok(l) = lines.recv_timeout(Duration::from_secs(5)) {
        said.push(l);
    }
    let said = said.join("\n");
    assert_eq!(status.code(), Some(130), "exit status after Ctrl-C ({status}):\n{said}");
    let kept = BisectState::load(&state).unwrap_or_else(|e| panic!("the state does not load ({e:#}):\n{said}"));
    assert!(kept.boots.len() >= 2, "{said}");
    assert!(said.contains("interrupted:") && said.contains("--resume --state"), "{said}");
    // The log ends with the interruption; the tree is back on its branch;
    // no temp file of a cut state write is left.
    let log = std::fs::read_to_string(dir.path().join("bisect/log.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["kind"], "interrupted", "{log}");
    assert_eq!(git(&tree, &["symbolic-ref", "--short", "HEAD"]), "main");
    let strays: Vec<String> = std::fs::read_dir(dir.path().join("bisect"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp"))
        .collect();
    assert!(strays.is_empty(), "{strays:?}");

    args.push("--resume".into());
    let t1 = Instant::now();
    let resumed = run_with_deadline(
        {
            let mut c = Command::new(bootbench_bin());
            c.args(&args);
            c
        },
        BOOT_DEADLINE,
    );
    let second = t1.elapsed();
    assert_eq!(resumed.code(), Some(0), "the resumed bisection did not confirm a culprit:\n{}", resumed.transcript());
    let done = BisectState::load(&state).unwrap();
    match &done.outcome {
        Some(bootbench::bisect::state::Outcome::Confirmed { culprit, parent, .. }) => {
            assert_eq!((culprit, parent), (&shas[3], &shas[2]), "{}", resumed.transcript());
        }
        other => panic!("expected a confirmed culprit, got {other:?}\n{}", resumed.transcript()),
    }
    // The boots from before the interruption were kept, not redone.
    assert_eq!(done.boots[..kept.boots.len()], kept.boots[..]);
    eprintln!("bisect: interrupted after {first:.1?}, resumed to the end in {second:.1?}");
}

/// `pid` and every live process below it.
fn process_tree(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let ppid = stat.rsplit_once(')').and_then(|(_, t)| t.split_whitespace().nth(1)?.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((p, ppid));
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while let Some(&p) = tree.get(i) {
        tree.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree
}

#[test]
#[ignore = "needs root and the userland pack (built on first use, networked): run scripts/test"]
fn ctrl_c_during_a_local_build_kills_make_and_frees_the_pack() {
    require_local_pack();
    let dir = scratch();
    let suite = dir.path().join("suite.json");
    // Two timed builds of the quick target at the half job count: the
    // build still has seconds to go when make is seen.
    std::fs::write(
        &suite,
        r#"{"name":"t","workloads":[{"name":"kernbench","iterations":2,"warmup":0,"params":{"target":"quick","jobs":["half"]}}]}"#,
    )
    .unwrap();
    let mut local = bootbench(["local", "--suite"]);
    local.arg(&suite);
    let mut child = spawn_leader(local, "bootbench local");
    let lines = stderr_lines(&mut child);
    let mut said = Vec::new();
    let device = loop {
        match lines.recv_timeout(BOOT_DEADLINE) {
            Ok(l) => {
                let dev = l
                    .contains("mounted read-only at")
                    .then(|| l.rsplit_once('(').map(|(_, d)| d.trim_end_matches(')').to_string()))
                    .flatten();
                said.push(l);
                if let Some(d) = dev {
                    break d;
                }
            }
            Err(e) => panic!("the pack was never mounted ({e}); bootbench said:\n{}", said.join("\n")),
        }
    };
    let backing = format!("/sys/block/{}/loop/backing_file", device.trim_start_matches("/dev/"));
    assert!(Path::new(&backing).exists(), "{backing}: {}", said.join("\n"));
    let mut make = Vec::new();
    assert!(
        wait_until(Duration::from_secs(120), || {
            make = children_named(child.id(), "make");
            !make.is_empty()
        }),
        "make never started:\n{}",
        said.join("\n")
    );
    // Let make start its compilers, then interrupt while they run.
    std::thread::sleep(Duration::from_millis(300));
    let build = process_tree(make[0]);
    ctrl_c(&child);
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let ended = Instant::now();
    while let Ok(l) = lines.recv_timeout(Duration::from_secs(2)) {
        said.push(l);
    }
    let said = said.join("\n");
    assert_eq!(status.code(), Some(130), "exit status after Ctrl-C ({status}):\n{said}");
    assert!(said.contains("local: interrupted; killed the build running in the userland pack"), "{said}");
    // make and everything it started end with bootbench, not when the
    // build would have ended; then the loop device lets go of the pack.
    assert!(
        wait_until(Duration::from_secs(1), || build.iter().all(|p| gone(*p))),
        "the build {build:?} outlived bootbench by {:?}:\n{said}",
        ended.elapsed()
    );
    assert!(
        wait_until(Duration::from_secs(5), || !Path::new(&backing).exists()),
        "{device} still holds the pack {:?} after bootbench ended:\n{said}",
        ended.elapsed()
    );
}
