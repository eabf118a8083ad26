//! The file applets (cat, sort, grep, wc, mkdir, cp, ls, rm) behave like
//! the coreutils SDET's scripts used. Each runs as its own process through
//! the `bootbench-applet` binary, as in the guest (a fork inside the
//! threaded test harness could deadlock on a lock another test holds).

use std::path::Path;
use std::process::Command;

/// Runs applet `tool` in `dir` and returns (exit code, stdout).
fn run_in(dir: &Path, tool: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bootbench-applet"))
        .args(["--applet", tool])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("cannot run bootbench-applet");
    (out.status.code().unwrap_or(128), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn file_commands_behave_like_coreutils() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("a.txt"), "pear 3\napple 10\nfig 2\napple 10\n").unwrap();
    std::fs::write(p.join("b.txt"), "Kernel panic\nall good\n").unwrap();
    assert_eq!(run_in(p, "cat", &["a.txt", "b.txt"]).1.lines().count(), 6);
    assert_eq!(run_in(p, "sort", &["a.txt"]).1, "apple 10\napple 10\nfig 2\npear 3\n");
    assert_eq!(run_in(p, "sort", &["-u", "-r", "a.txt"]).1, "pear 3\nfig 2\napple 10\n");
    let by_num = run_in(p, "sort", &["-k", "a.txt"]);
    assert_eq!(by_num.0, 2, "unknown option");
    assert_eq!(run_in(p, "grep", &["-c", "apple", "a.txt"]), (0, "2\n".into()));
    assert_eq!(run_in(p, "grep", &["-i", "kernel", "a.txt", "b.txt"]), (0, "b.txt:Kernel panic\n".into()));
    assert_eq!(run_in(p, "grep", &["-v", "-c", "a", "b.txt"]), (1, "0\n".into()));
    assert_eq!(run_in(p, "grep", &["nothing", "a.txt"]).0, 1);
    assert_eq!(run_in(p, "grep", &["x", "missing.txt"]).0, 2);
    assert_eq!(run_in(p, "grep", &["(", "a.txt"]).0, 2);
    assert_eq!(run_in(p, "wc", &["-l", "a.txt"]).1, "       4 a.txt\n");
    assert_eq!(run_in(p, "wc", &["a.txt", "b.txt"]).1.lines().last().unwrap(), "       6      12      53 total");
    assert_eq!(run_in(p, "mkdir", &["-p", "d/e/f"]).0, 0);
    assert_eq!(run_in(p, "mkdir", &["d"]).0, 1, "exists");
    assert_eq!(run_in(p, "cp", &["a.txt", "b.txt", "d/e"]).0, 0);
    assert_eq!(run_in(p, "cp", &["d", "d2"]).0, 1, "directory without -r");
    assert_eq!(run_in(p, "cp", &["-r", "d", "d2"]).0, 0);
    assert_eq!(
        std::fs::read_to_string(p.join("d2/e/a.txt")).unwrap(),
        std::fs::read_to_string(p.join("a.txt")).unwrap()
    );
    let (c, listing) = run_in(p, "ls", &["-R", "d2"]);
    assert_eq!(c, 0);
    assert_eq!(listing, "d2:\ne\n\nd2/e:\na.txt\nb.txt\nf\n\nd2/e/f:\n");
    let (c, long) = run_in(p, "ls", &["-l", "d2/e"]);
    assert_eq!(c, 0);
    let first = long.lines().next().unwrap();
    assert!(first.starts_with("-rw") && first.ends_with(" a.txt"), "{long}");
    assert_eq!(run_in(p, "ls", &["nope"]).0, 1);
    assert_eq!(run_in(p, "rm", &["d"]).0, 1, "directory without -r");
    assert_eq!(run_in(p, "rm", &["-r", "d", "d2"]).0, 0);
    assert!(!p.join("d").exists() && !p.join("d2").exists());
    assert_eq!(run_in(p, "rm", &["-f", "gone"]).0, 0);
    assert_eq!(run_in(p, "rm", &["gone"]).0, 1);
}
