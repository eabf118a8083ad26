//! Everyday use without a boot: what `-q`/`-v` do to stderr, progress
//! drawn on a terminal and never into a log, shell completions and man
//! pages made from the command line itself, `local`'s exit status, and
//! what `local -o` writes read by `report` and `compare`, and a printing
//! command whose reader went away (`| head`).

mod support;

use clap::CommandFactory;
use std::path::Path;
use std::process::{Command, Output};
use support::*;

fn run(c: &mut Command) -> Output {
    c.output().expect("cannot run bootbench")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Every subcommand's name, from the command line's own definition.
fn subcommands() -> Vec<String> {
    bootbench::cli::Cli::command().get_subcommands().map(|s| s.get_name().to_string()).collect()
}

#[test]
fn info_lines_name_the_command_and_quiet_keeps_only_errors() {
    let dir = scratch();
    let out = run(bootbench(["man", "-o"]).arg(dir.path()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(said.starts_with("man: wrote the man pages into "), "{said}");
    let quiet = run(bootbench(["-q", "man", "-o"]).arg(dir.path()));
    assert!(quiet.status.success());
    assert_eq!(text(&quiet.stderr), "", "-q hides info lines");
    // Global: after the subcommand too.
    let quiet = run(bootbench(["man", "-q", "-o"]).arg(dir.path()));
    assert_eq!(text(&quiet.stderr), "");
    let missing = dir.path().join("no-such-results.json");
    let failed = run(bootbench(["-qq", "report"]).arg(&missing));
    assert_eq!(failed.status.code(), Some(1));
    let said = text(&failed.stderr);
    assert!(said.contains("error:") && said.contains("no-such-results.json"), "errors stay under -qq: {said}");
}

#[test]
fn bash_completion_completes_subcommands_and_their_options() {
    require_program("bash");
    let script = run(&mut bootbench(["completions", "bash"]));
    assert!(script.status.success());
    let dir = scratch();
    let file = dir.path().join("bootbench.bash");
    std::fs::write(&file, &script.stdout).unwrap();
    let complete = |words: &str| {
        let n = words.split(' ').count() - 1;
        let probe = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={n}; _bootbench bootbench \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display()
        );
        let out = Command::new("bash").arg("-c").arg(probe).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).lines().map(str::to_string).collect::<Vec<_>>()
    };
    let all = complete("bootbench ''");
    for name in subcommands() {
        assert!(all.contains(&name), "{name} is not completed: {all:?}");
    }
    assert_eq!(complete("bootbench bisect-r"), ["bisect-run"]);
    assert!(complete("bootbench run --ker").contains(&"--kernel".to_string()));
}

#[test]
fn zsh_and_fish_completions_name_every_subcommand() {
    for (shell, marker) in [("zsh", "#compdef bootbench"), ("fish", "complete -c bootbench")] {
        let out = run(&mut bootbench(["completions", shell]));
        assert!(out.status.success(), "{shell}");
        let script = text(&out.stdout);
        assert!(script.contains(marker), "{shell}: {}", &script[..script.len().min(200)]);
        for name in subcommands() {
            assert!(script.contains(&name), "{shell} lacks {name}");
        }
    }
    let bad = run(&mut bootbench(["completions", "tcsh"]));
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("tcsh"), "{}", text(&bad.stderr));
}

#[test]
fn man_pages_exist_for_every_subcommand_and_render() {
    require_program("man");
    let dir = scratch();
    let out = run(bootbench(["-q", "man", "-o"]).arg(dir.path()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.path().join("bootbench.1").is_file());
    for name in subcommands() {
        let page = dir.path().join(format!("bootbench-{name}.1"));
        assert!(page.is_file(), "no page for {name}");
    }
    let page = dir.path().join("bootbench-run.1");
    let shown = Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_FORMATTING", "")
        .output()
        .unwrap();
    let shown = text(&shown.stdout).replace('\u{2010}', "-").replace("\u{8}", "");
    assert!(shown.contains("bootbench-run") && shown.contains("--kernel"), "{shown}");
    let unwritable = run(&mut bootbench(["man", "-o", "/proc/version/x"]));
    assert_eq!(unwritable.status.code(), Some(1));
    assert!(text(&unwritable.stderr).contains("/proc/version/x"), "{}", text(&unwritable.stderr));
}

#[test]
#[ignore = "builds the static init (cargo) and needs script(1): run scripts/test"]
fn progress_is_drawn_on_a_terminal_and_never_into_a_log() {
    require_program("script");
    let dir = scratch();
    let image = dir.path().join("i.cpio.gz");
    // stderr to a pipe (a log): the image's lines, no bar.
    let piped = run(bootbench(["image", "--suite", "quick", "-o"]).arg(&image));
    assert!(piped.status.success(), "{}", text(&piped.stderr));
    let log = text(&piped.stderr);
    assert!(!log.contains('\r') && !log.contains('\u{1b}'), "escape codes in a log: {log:?}");
    assert!(!log.contains("building the initramfs"), "{log:?}");
    // On a terminal: the spinner, drawn and cleared.
    let cmd = format!("{} image --suite quick -o {}", bootbench_bin().display(), image.display());
    let tty = run(&mut {
        let mut c = Command::new("script");
        c.args(["-qefc", &cmd, "/dev/null"]);
        c
    });
    assert!(tty.status.success(), "{}", text(&tty.stderr));
    let screen = text(&tty.stdout);
    assert!(screen.contains("building the initramfs") && screen.contains("\u{1b}[2K"), "{screen:?}");
    // -q: no bar on a terminal either.
    let cmd = format!("{} -q image --suite quick -o {}", bootbench_bin().display(), image.display());
    let quiet = run(&mut {
        let mut c = Command::new("script");
        c.args(["-qefc", &cmd, "/dev/null"]);
        c
    });
    assert!(!text(&quiet.stdout).contains("building the initramfs"), "{:?}", text(&quiet.stdout));
}

/// A suite of one short fork run, and with `fail`, a dbench whose
/// loadfile does not exist (its workload fails; fork's result stands).
fn suite(dir: &Path, fail: bool) -> std::path::PathBuf {
    let dbench = r#",{"name":"dbench","params":{"loadfile":"/nonexistent/client.txt"}}"#;
    let json = format!(
        r#"{{"name":"t","iterations":3,"warmup":0,"workloads":[{{"name":"fork","params":{{"count":200}}}}{}]}}"#,
        if fail { dbench } else { "" }
    );
    let path = dir.join(if fail { "failing.json" } else { "good.json" });
    std::fs::write(&path, json).unwrap();
    path
}

#[test]
fn local_exits_2_when_a_workload_failed_and_its_document_is_read_by_report_and_compare() {
    let dir = scratch();
    let local = |suite: &Path, out: &Path| {
        let mut c = bootbench(["local", "--pack", "none", "--suite"]);
        c.arg(suite).arg("-o").arg(out);
        run(&mut c)
    };
    let (a, b, bad) = (dir.path().join("a.json"), dir.path().join("b.json"), dir.path().join("bad.json"));
    for out in [&a, &b] {
        let done = local(&suite(dir.path(), false), out);
        assert_eq!(done.status.code(), Some(0), "{}", text(&done.stderr));
    }
    let failed = local(&suite(dir.path(), true), &bad);
    assert_eq!(failed.status.code(), Some(2), "a failed workload is a failed run: {}", text(&failed.stderr));
    assert!(bad.is_file(), "the document is written all the same");
    assert!(text(&failed.stdout).contains("fork"), "and the table printed: {}", text(&failed.stdout));

    let report = run(&mut {
        let mut c = bootbench(["report"]);
        c.arg(&a);
        c
    });
    assert!(report.status.success(), "{}", text(&report.stderr));
    assert!(text(&report.stdout).contains("fork_rate"), "{}", text(&report.stdout));

    let compare = run(&mut {
        let mut c = bootbench(["compare"]);
        c.arg(&a).arg(&b);
        c
    });
    assert!(compare.status.success(), "{}", text(&compare.stderr));
    let table = text(&compare.stdout);
    assert!(table.contains("fork_rate") && table.contains("fork_latency"), "{table}");
    // Not a results file, not a document: still named.
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, r#"{"format":"something-else","version":1}"#).unwrap();
    let refused = run(&mut {
        let mut c = bootbench(["report"]);
        c.arg(&junk);
        c
    });
    assert_eq!(refused.status.code(), Some(1));
    assert!(text(&refused.stderr).contains("junk.json") && text(&refused.stderr).contains("something-else"));
}

/// `bootbench report FILE | head -1`: the reader goes away, and the
/// commands that only read and print end as `cat` would, killed by
/// SIGPIPE, instead of panicking in `print!` (which aborts the process
/// with a message on stderr, since the release profile aborts on panic).
/// The pipe's read end is closed before the command starts, so every
/// write fails and nothing depends on timing.
#[test]
fn a_printing_command_whose_reader_went_away_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch();
    let doc = dir.path().join("a.json");
    let mut c = bootbench(["local", "--pack", "none", "--suite"]);
    c.arg(suite(dir.path(), false)).arg("-o").arg(&doc);
    let done = run(&mut c);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done.stderr));
    let config = dir.path().join("no-config.toml");
    for args in [vec!["report".into(), doc.clone().into_os_string()], vec!["config".into(), "show".into()]] {
        let (read, write) = nix::unistd::pipe().expect("a pipe");
        drop(read);
        let mut c = bootbench(&args);
        c.env("BOOTBENCH_CONFIG", &config).stdout(std::process::Stdio::from(write));
        let out = run(&mut c);
        let said = text(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(nix::sys::signal::Signal::SIGPIPE as i32),
            "{args:?}: {:?}, stderr: {said}",
            out.status
        );
        assert!(!said.contains("panicked"), "{args:?}: {said}");
    }
}
