//! End-to-end: `bootbench bisect` on a synthetic git history whose commits
//! change the kernel for real. Every commit's "build" copies the cached
//! Debian kernel into the tree and writes the kernel cmdline that commit
//! wants; from the culprit on, the cmdline turns on the function-graph
//! tracer for `copy_process` (`ftrace=function_graph
//! ftrace_graph_filter=copy_process`), which slows every fork in the guest
//! several-fold: the kernel's fork path really runs slower, the workload is
//! unchanged. The bisection must name the culprit and confirm it, and it
//! must survive being killed halfway (`--resume`).

mod support;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::git;

/// The knob the bad commits add: a real slowdown of the kernel's fork path.
const SLOW_FORK: &str = "ftrace=function_graph ftrace_graph_filter=copy_process";

/// c0 … c8; commits from `culprit` on carry the slow-fork knob.
fn synthetic_history(tree: &Path, culprit: usize) -> Vec<String> {
    std::fs::create_dir_all(tree).unwrap();
    git(tree, &["init", "-q", "-b", "main"]);
    git(tree, &["config", "user.email", "bisect-test@example.invalid"]);
    git(tree, &["config", "user.name", "bisect test"]);
    std::fs::write(tree.join(".gitignore"), "out/\n").unwrap();
    let mut shas = Vec::new();
    for i in 0..=8 {
        let cmdline = if i >= culprit { SLOW_FORK } else { "" };
        std::fs::write(tree.join("cmdline"), format!("{cmdline}\n")).unwrap();
        std::fs::write(tree.join("version"), format!("{i}\n")).unwrap();
        git(tree, &["add", "-A"]);
        let subject =
            if i == culprit { format!("c{i}: trace copy_process") } else { format!("c{i}: unrelated change") };
        git(tree, &["commit", "-q", "-m", &subject]);
        shas.push(git(tree, &["rev-parse", "HEAD"]));
    }
    shas
}

fn count_boots(state: &Path) -> usize {
    std::fs::read_to_string(state)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["boots"].as_array().map(Vec::len))
        .unwrap_or(0)
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn bisect_names_and_confirms_the_commit_that_slows_fork_and_resumes_after_a_kill() {
    let kernel = support::require_x86_64_boot();
    let _one_qemu_at_a_time = support::boot_lock();
    support::require_program("git");
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let culprit = 5;
    let shas = synthetic_history(&tree, culprit);
    let state = dir.path().join("bisect/state.json");
    let report = dir.path().join("report");
    let mut args: Vec<String> = [
        "bisect",
        "--tree",
        tree.to_str().unwrap(),
        "--good",
        &shas[0],
        "--bad",
        &shas[8],
        // A short fork workload: the knob's effect is several-fold (about
        // 5x measured here), so few iterations and boots suffice.
        "--append",
        "bootbench.fork.count=50",
        "--iterations",
        "2",
        "--warmup",
        "1",
        "--reference-boots",
        "3",
        "--max-reference-boots",
        "5",
        "--min-boots",
        "1",
        // Tracing slows the boot too (its setup took ~30 s of guest time
        // under TCG); a loaded host needs more than the default 120 s.
        "--timeout-boot",
        "400",
        "--timeout-total",
        "900",
        // One change is planted: the search for others is the simulation's
        // and the unit tests' (a false split would only add boots here).
        "--max-changes",
        "1",
        "--state",
        state.to_str().unwrap(),
        "-o",
        report.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(support::copy_kernel_build_flags(&kernel))
    .collect();

    // First run: killed (with its QEMU) once the ends are measured.
    let mut child = Command::new(support::bootbench_bin())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("cannot start bootbench bisect");
    let deadline = Instant::now() + Duration::from_secs(1800);
    while count_boots(&state) < 7 {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("bootbench bisect ended early ({st}); log: {}", dir.path().join("bisect/log.jsonl").display());
        }
        assert!(Instant::now() < deadline, "no progress: {} boots after 30 min", count_boots(&state));
        std::thread::sleep(Duration::from_millis(500));
    }
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    let boots_before = count_boots(&state);

    // Starting again without --resume is refused: the state would be lost.
    let refused = Command::new(support::bootbench_bin()).args(&args).output().unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--resume"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // The tree may be left on a candidate after the kill; resume anyway.
    args.push("--resume".into());
    let out =
        Command::new(support::bootbench_bin()).args(&args).output().expect("cannot run bootbench bisect --resume");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "bisect did not confirm a culprit:\n{stdout}\n{stderr}");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.with_extension("json")).unwrap()).unwrap();
    assert_eq!(json["outcome"]["outcome"], "confirmed", "{stdout}");
    assert_eq!(json["outcome"]["culprit"], shas[culprit].as_str(), "{stdout}");
    assert_eq!(json["outcome"]["parent"], shas[culprit - 1].as_str(), "{stdout}");
    assert!(stdout.contains("first bad commit") && stdout.contains("trace copy_process"), "{stdout}");
    // The boots from before the kill were kept, not redone.
    let boots_after = json["boots"].as_u64().unwrap() as usize;
    assert!(boots_after > boots_before, "{boots_before} → {boots_after}");
    // The ends really differ: the knob slows fork by more than half.
    let change = json["change_pct"].as_f64().unwrap();
    assert!(change < -30.0, "fork rate change between the ends: {change}%");

    // The tree is back on its branch, clean.
    assert_eq!(git(&tree, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert_eq!(git(&tree, &["status", "--porcelain", "--untracked-files=no"]), "");

    // The log has every build, boot and verdict; the HTML has its plots.
    let log = std::fs::read_to_string(dir.path().join("bisect/log.jsonl")).unwrap();
    let kinds: Vec<String> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"].as_str().unwrap().to_string())
        .collect();
    for k in ["start", "build", "boot", "ends", "test", "verdict", "resume", "outcome"] {
        assert!(kinds.iter().any(|x| x == k), "no {k} event in the log");
    }
    // One event per boot (plus at most the one the kill cut between its log
    // line and its checkpoint).
    let boot_events = kinds.iter().filter(|k| *k == "boot").count();
    assert!(
        boot_events >= boots_after && boot_events <= boots_after + 1,
        "{boot_events} boot events, {boots_after} boots"
    );
    let html = std::fs::read_to_string(report.with_extension("html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 2);
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn git_bisect_run_with_bisect_run_finds_the_commit_that_makes_the_kernel_panic() {
    let kernel = support::require_x86_64_boot();
    let _one_qemu_at_a_time = support::boot_lock();
    support::require_program("git");
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    // c0 … c4: from c3 on the kernel finds no init and panics.
    let shas = support::no_init_history(&tree);
    git(&tree, &["bisect", "start", &shas[4], &shas[0]]);
    let out = Command::new("git")
        .arg("-C")
        .arg(&tree)
        .args(["bisect", "run"])
        .arg(support::bootbench_bin())
        .args([
            "bisect-run",
            "--mode",
            "boot",
            "--boot-tries",
            "1",
            "--iterations",
            "1",
            "--warmup",
            "0",
            "--append",
            "bootbench.fork.count=10",
            "--timeout-total",
            "600",
        ])
        .args(support::copy_kernel_build_flags(&kernel))
        .output()
        .expect("cannot run git bisect run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "git bisect run failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("{} is the first bad commit", shas[3])), "{stdout}\n{stderr}");
    // Every invocation recorded its verdict with the evidence in one state.
    let state_path = tree.join(".git/bootbench-bisect-run/state.json");
    let state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    let tests = state["tests"].as_array().unwrap();
    assert!(tests.len() >= 2, "{tests:?}");
    for t in tests {
        let reason = t["reason"].as_str().unwrap_or_default();
        match t["verdict"].as_str() {
            Some("bad") => assert!(reason.contains("panic"), "{reason}"),
            Some("good") => assert!(reason.contains("booted cleanly"), "{reason}"),
            other => panic!("unexpected verdict {other:?}: {reason}"),
        }
    }
    git(&tree, &["bisect", "reset"]);
}

/// Waits up to `limit` for `path` to exist, failing the test (with `child`'s
/// status) if `child` ends first.
fn wait_for_file(path: &Path, child: &mut std::process::Child, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !path.exists() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("bootbench bisect ended ({st}) before {} appeared", path.display());
        }
        assert!(Instant::now() < deadline, "{} did not appear in {limit:?}", path.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie has no cwd link: it is not working in the tree any more.
    std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok()
}

/// A SIGKILL of bootbench (the OOM killer, a lost session) reaches neither
/// the build, which runs in its own process group, nor the clean-up a
/// checkout needs: git's `index.lock` and the half-written files stay. Here
/// the first run is killed inside its first checkout (a `git` on PATH that
/// takes the lock, writes one file and hangs, as a slow checkout does), and
/// the second inside its first build; each resume must clean up what the
/// dead run left and go on. No kernel boots: the build never produces one.
#[test]
#[ignore = "builds the appliance image: run scripts/test"]
fn a_resume_cleans_up_the_checkout_and_the_build_a_killed_bisection_left_in_the_tree() {
    support::require_program("git");
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let shas = synthetic_history(&tree, 5);
    let state = dir.path().join("bisect/state.json");
    let real_git = String::from_utf8(Command::new("sh").args(["-c", "command -v git"]).output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let checkout_mark = dir.path().join("checkout-started");
    std::fs::write(
        bin.join("git"),
        format!(
            "#!/bin/sh\ncase \" $* \" in *' checkout --quiet --detach '*)\n  \
             if [ ! -e '{mark}' ]; then : > '{mark}'; : > \"$2/.git/index.lock\"; echo half > \"$2/version\"; exec sleep 600; fi;;\n\
             esac\nexec '{real_git}' \"$@\"\n",
            mark = checkout_mark.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(bin.join("git"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // The build hangs the first time (writing its pid, its group's id) and
    // fails after that.
    let build_pid = dir.path().join("build.pid");
    let build = format!(
        "if [ ! -e '{p}' ]; then echo $$ > '{p}.tmp'; mv '{p}.tmp' '{p}'; exec sleep 600; fi; exit 1",
        p = build_pid.display()
    );
    let args = |resume: bool| {
        let mut a: Vec<String> = ["bisect", "--tree", tree.to_str().unwrap(), "--good", &shas[0], "--bad", &shas[8]]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(["--build".into(), build.clone(), "--kernel-image".into(), "out/bzImage".into()]);
        a.extend(["--state".into(), state.to_str().unwrap().into()]);
        if resume {
            a.push("--resume".into());
        }
        a
    };
    let kill_group = |child: &mut std::process::Child| {
        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGKILL)
            .unwrap();
        child.wait().unwrap();
    };

    // 1. Killed inside the checkout of the good end.
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut first = Command::new(support::bootbench_bin())
        .args(args(false))
        .env("PATH", &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    wait_for_file(&checkout_mark, &mut first, Duration::from_secs(600));
    kill_group(&mut first);
    assert!(tree.join(".git/index.lock").exists(), "the fake checkout left no lock: the test is broken");

    // 2. The resume cleans up the checkout, then is killed inside the build.
    let stderr_file = dir.path().join("resume-1.stderr");
    let mut second = Command::new(support::bootbench_bin())
        .args(args(true))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_file).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    wait_for_file(&build_pid, &mut second, Duration::from_secs(300));
    kill_group(&mut second);
    let said = std::fs::read_to_string(&stderr_file).unwrap();
    assert!(said.contains("index.lock") && said.contains("reset the tracked files"), "{said}");
    let build_group: i32 = std::fs::read_to_string(&build_pid).unwrap().trim().parse().unwrap();
    assert!(alive(build_group), "the build died with bootbench: the test no longer shows what the lease is for");

    // 3. The next resume kills the orphaned build before building again,
    // then ends on the good end's failed build with the tree restored.
    let third = Command::new(support::bootbench_bin()).args(args(true)).output().unwrap();
    let said = String::from_utf8_lossy(&third.stderr);
    assert!(said.contains("killed the build"), "{said}");
    assert!(!said.contains("index.lock"), "{said}");
    assert!(support::wait_until(Duration::from_secs(5), || !alive(build_group)), "the orphaned build still runs");
    assert_ne!(third.status.code(), Some(0), "{said}");
    assert_eq!(git(&tree, &["symbolic-ref", "--short", "HEAD"]), "main", "{said}");
    assert_eq!(git(&tree, &["status", "--porcelain", "--untracked-files=no"]), "", "{said}");
}

/// A new bisection under a state name whose side searches from an earlier
/// bisection are still there is refused, naming them: it would take their
/// boots for its own.
#[test]
fn a_new_bisection_refuses_to_start_over_an_old_ones_side_searches() {
    support::require_program("git");
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let shas = synthetic_history(&tree, 5);
    let state = dir.path().join("bisect/state.json");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    let old_side = dir.path().join("bisect/state.side-aaaaaaaaaaaa-bbbbbbbbbbbb.json");
    std::fs::write(&old_side, "{}").unwrap();
    let out = Command::new(support::bootbench_bin())
        .args(["bisect", "--tree", tree.to_str().unwrap(), "--good", &shas[0], "--bad", &shas[8]])
        .args(["--build", "true", "--kernel-image", "out/bzImage", "--state", state.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("state.side-aaaaaaaaaaaa-bbbbbbbbbbbb.json") && said.contains("side search"), "{said}");
    assert!(!state.exists(), "a state was written");
    assert!(old_side.exists(), "the old side's state was removed");
}
