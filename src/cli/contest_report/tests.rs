use super::*;
use crate::compare::test_fixtures::fork_workload;
use crate::group_inputs::contest_kernels;
use crate::report::contest::test_fixtures::{boot, contest_boot, iteration};
use crate::results::BootRecord;
use crate::results::ResultsFile;
use crate::service::store;

fn args(files: &[&std::path::Path]) -> ContestReportArgs {
    ContestReportArgs {
        files: files.iter().map(|p| p.display().to_string()).collect(),
        ratio_base: RatioBase::Baseline,
        baseline: None,
        intervals: false,
        format: Format::Text,
        output: None,
        store: None,
    }
}

fn write(dir: &std::path::Path, name: &str, boots: Vec<BootRecord>) -> PathBuf {
    let p = dir.join(name);
    ResultsFile { boots, ..ResultsFile::default() }.write(&p).unwrap();
    p
}

fn its(no_load: f64, io: f64) -> Vec<loads::schema::Iteration> {
    vec![iteration(&[("no_load", no_load, 100.0, 0.0, 0.0), ("io_load", io, 50.0, 4.0, 12.0)], &[])]
}

/// Two kernels interleaved in one file, as `bootbench run` writes them.
fn interleaved() -> Vec<BootRecord> {
    vec![
        contest_boot(0, "v6.1", "aaaaaa01", its(20.0, 40.0)),
        contest_boot(1, "v6.1-cfq", "bbbbbb02", its(21.0, 63.0)),
        contest_boot(2, "v6.1", "aaaaaa01", its(22.0, 42.0)),
        contest_boot(3, "v6.1-cfq", "bbbbbb02", its(21.0, 63.0)),
    ]
}

#[test]
fn contest_groups_two_kernels_of_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "run.json", interleaved());
    let ks = contest_kernels(&[f.display().to_string()], None).unwrap();
    let names: Vec<&str> = ks.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["v6.1", "v6.1-cfq"]);
    assert_eq!(ks[0].sources, [format!("{}:#1", f.display())]);
    let indices: Vec<u32> = ks[1].boots.iter().map(|b| b.record.boot.index).collect();
    assert_eq!(indices, [1, 3]);
    let (text, _) = render_report(&args(&[&f])).unwrap();
    assert!(text.contains("io_load:\nKernel    [runs]  Time  CPU%  Loads  LCPU%  Ratio\n"), "{text}");
    assert!(text.contains("\nv6.1           2  41.0  50.0      4   12.0   1.95\n"), "{text}");
    assert!(text.contains("\nv6.1-cfq       2  63.0  50.0      4   12.0   3.00\n"), "{text}");

    // One group picked with a selector, the other from a second file: the
    // same kernel in two files is one kernel, a boot given twice counts once.
    let g = write(dir.path(), "more.json", vec![contest_boot(7, "v6.1", "aaaaaa01", its(20.0, 44.0))]);
    let picked = [format!("{}:v6.1", f.display()), g.display().to_string(), g.display().to_string()];
    let ks = contest_kernels(&picked, None).unwrap();
    assert_eq!(ks.len(), 1);
    assert_eq!(ks[0].boots.len(), 3);
    assert_eq!(ks[0].sources.len(), 3);
    let mut a = args(&[]);
    a.files = picked.to_vec();
    let (text, _) = render_report(&a).unwrap();
    assert!(text.contains("\nv6.1         3  42.0"), "{text}");
}

#[test]
fn contest_refuses_a_file_without_contest() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.json", interleaved());
    let fork =
        write(dir.path(), "fork.json", vec![boot(0, "x", "cccccc03", "none", vec![fork_workload(100, &[900.0])])]);
    let e = render_report(&args(&[&good, &fork])).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("fork.json: no contest results"), "{msg}");
    assert!(msg.contains("boot #0: no contest workload (it ran fork)"), "{msg}");
    // A selector naming a group without contest is refused the same way.
    let mut mixed = interleaved();
    mixed.push(boot(4, "x", "cccccc03", "none", vec![fork_workload(100, &[900.0])]));
    let m = write(dir.path(), "mixed.json", mixed);
    let e = contest_kernels(&[format!("{}:x", m.display())], None).unwrap_err();
    assert!(format!("{e:#}").contains("mixed.json:x: no contest results"), "{e:#}");
    // The whole file has contest results: its other group is left out
    // with a warning, not refused.
    let (text, warnings) = render_report(&args(&[&m])).unwrap();
    assert!(warnings.iter().any(|w| w.starts_with("x is left out")), "{warnings:?}");
    assert!(text.contains("Excluded boots:\n  x "), "{text}");
    // Not a results file at all.
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{}").unwrap();
    assert!(render_report(&args(&[&junk])).is_err());
}

#[test]
fn contest_cli_options() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "run.json", interleaved());
    let mut a = args(&[&f]);
    a.ratio_base = RatioBase::Own;
    a.baseline = Some("v6.1-cfq".into());
    a.format = Format::Json;
    let (json, _) = render_report(&a).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["baseline"], "v6.1-cfq");
    assert_eq!(v["ratio_base"], "own");
    // Own ratios pair each iteration with its own no_load: (40/20 + 42/22) / 2.
    let own = v["rows"][1]["kernels"][0]["ratio"]["mean"].as_f64().unwrap();
    assert!((own - (2.0 + 42.0 / 22.0) / 2.0).abs() < 1e-12, "{own}");
    a.format = Format::Markdown;
    assert!(render_report(&a).unwrap().0.starts_with("### no_load\n"));
    assert!("csv".parse::<Format>().unwrap_err().to_string().contains("csv"));
    use clap::Parser;
    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ContestReportArgs,
    }
    let cli = Cli::try_parse_from(["x", "f.json", "--ratio-base", "own", "--format", "md"]).unwrap();
    assert_eq!((cli.args.ratio_base, cli.args.format), (RatioBase::Own, Format::Markdown));
    let e = Cli::try_parse_from(["x", "f.json", "--ratio-base", "median"]).unwrap_err();
    assert!(e.to_string().contains("median"), "{e}");
}

#[test]
fn contest_one_kernel_under_two_schedulers_is_two_lines() {
    let dir = tempfile::tempdir().unwrap();
    let under = |index: u32, sched: &str, io: f64| {
        let mut b = boot(
            index,
            "",
            "aaaaaa01",
            sched,
            vec![crate::report::contest::test_fixtures::workload(100, its(20.0, io))],
        );
        b.cmdline = format!("console=ttyS0 bootbench.iosched={sched}");
        b
    };
    let f = write(dir.path(), "sched.json", vec![under(0, "mq-deadline", 40.0), under(1, "bfq", 30.0)]);
    let ks = contest_kernels(&[f.display().to_string()], None).unwrap();
    let names: Vec<&str> = ks.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["6.1.0-test [iosched=mq-deadline]", "6.1.0-test [iosched=bfq]"]);
    let (text, _) = render_report(&args(&[&f])).unwrap();
    assert!(text.contains("\n6.1.0-test [iosched=bfq]               1  30.0  50.0      4   12.0   1.50\n"), "{text}");
    assert!(text.contains("  6.1.0-test [iosched=bfq]: 1 of 1 boot(s), 1 iteration(s); accel tcg; ext4 on /dev/vda (2048 MiB), scheduler bfq,"), "{text}");
    let mut a = args(&[&f]);
    a.baseline = Some("6.1.0-test [iosched=bfq]".into());
    assert!(render_report(&a)
        .unwrap()
        .0
        .contains("Ratio: Time over the mean no_load Time of the baseline 6.1.0-test [iosched=bfq] (20.0 s)."));
}

#[test]
fn contest_takes_runs_of_a_results_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let mut s = store::Store::open(&db).unwrap();
    for (i, io) in [(0, 40.0), (1, 44.0)] {
        let doc = contest_boot(i, "v61", "aaaaaa01", its(20.0, io)).result.unwrap();
        let id = doc.run_id.clone();
        s.put(&store::validate(serde_json::to_vec(&doc).unwrap(), &id).unwrap(), None, None).unwrap();
    }
    drop(s);
    let f = write(dir.path(), "cand.json", vec![contest_boot(5, "cand", "bbbbbb02", its(20.0, 60.0))]);
    let mut a = args(&[&f]);
    a.files = vec!["v61-0".into(), "v61-1".into(), f.display().to_string()];
    a.store = Some(db.clone());
    let (text, _) = render_report(&a).unwrap();
    // The two bare documents are one kernel (same release and cmdline).
    assert!(text.contains("\n6.1.0-test       2  42.0  50.0      4   12.0   2.10\n"), "{text}");
    assert!(text.contains("\ncand             1  60.0"), "{text}");
    a.files = vec!["v61-9".into()];
    let e = format!("{:#}", render_report(&a).unwrap_err());
    assert!(e.contains("'v61-9' is no file, and not a run of the store"), "{e}");
    // Without --store, a name that is no file stays an error about the file.
    a.store = None;
    assert!(format!("{:#}", render_report(&a).unwrap_err()).contains("v61-9"));
}
