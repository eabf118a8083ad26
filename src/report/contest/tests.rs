use super::test_fixtures::{boot, contest_boot, iteration, workload};
use super::*;
use crate::compare::test_fixtures::fork_workload;

fn kernel(name: &str, boots: Vec<BootRecord>) -> KernelInput {
    KernelInput {
        name: name.into(),
        sources: vec!["t.json".into()],
        boots: boots.into_iter().map(|record| InputBoot { origin: "t.json".into(), record }).collect(),
    }
}

fn settings(ratio_base: RatioBase) -> Settings {
    Settings { ratio_base, baseline: None, intervals: false }
}

/// Two kernels as in reference 001/003: `base` over two boots of one
/// iteration each, `cand` one boot of two iterations, whose no_load is 2%
/// faster than base's.
fn two_kernels() -> Vec<KernelInput> {
    let base = vec![
        contest_boot(
            0,
            "base",
            "aaaaaa01",
            vec![iteration(&[("no_load", 30.0, 177.0, 0.0, 0.0), ("process_load", 38.0, 142.0, 12.0, 47.0)], &[])],
        ),
        contest_boot(
            2,
            "base",
            "aaaaaa01",
            vec![iteration(&[("no_load", 32.0, 178.0, 0.0, 0.0), ("process_load", 38.4, 142.2, 13.0, 47.8)], &[])],
        ),
    ];
    let cand = vec![contest_boot(
        1,
        "cand",
        "bbbbbb02",
        vec![
            iteration(&[("no_load", 30.0, 180.0, 0.0, 0.0), ("process_load", 41.0, 129.3, 16.0, 61.0)], &[]),
            iteration(&[("no_load", 30.76, 180.0, 0.0, 0.0), ("process_load", 41.0, 129.3, 16.0, 61.0)], &[]),
        ],
    )];
    vec![kernel("base", base), kernel("cand", cand)]
}

fn entry<'a>(r: &'a ContestReport, row: &str, kernel: &str) -> &'a RowEntry {
    let t = r.rows.iter().find(|t| t.row == row).unwrap_or_else(|| panic!("no row {row}"));
    t.kernels.iter().find(|e| e.kernel == kernel).unwrap_or_else(|| panic!("no {kernel} in {row}"))
}

#[test]
fn contest_text_layout_is_the_reference_one() {
    let r = build(&two_kernels(), &settings(RatioBase::Baseline)).unwrap();
    let expected = "\
no_load:
Kernel  [runs]  Time   CPU%  Loads  LCPU%  Ratio
base         2  31.0  177.5      0    0.0   1.00
cand         2  30.4  180.0      0    0.0   0.98

process_load:
Kernel  [runs]  Time   CPU%  Loads  LCPU%  Ratio
base         2  38.2  142.1     13   47.4   1.23
cand         2  41.0  129.3     16   61.0   1.32

Time: the foreground build's wall time in seconds; CPU%: its CPU use (over 100 on SMP); \
Loads: work the load completed; LCPU%: the load's CPU time over its running time. \
[runs] counts the iterations that measured the row; the columns are their means.
Ratio: Time over the mean no_load Time of the baseline base (31.0 s).
contest parameters: build_size=100 load_lead_s=3

Load units:
  no_load       units
  process_load  loops

Kernels:
  base (baseline): 2 of 2 boot(s), 2 iteration(s); accel tcg; \
ext4 on /dev/vda (2048 MiB), scheduler mq-deadline, swap /dev/vdb (512 MiB)
  cand: 1 of 1 boot(s), 2 iteration(s); accel tcg; \
ext4 on /dev/vda (2048 MiB), scheduler mq-deadline, swap /dev/vdb (512 MiB)
";
    assert_eq!(render::text(&r), expected);
}

#[test]
fn contest_columns_line_up_past_wide_kernel_names() {
    use unicode_width::UnicodeWidthStr;
    let mut kernels = two_kernels();
    kernels[1].name = "名前 ↑ é".into();
    let r = build(&kernels, &settings(RatioBase::Baseline)).unwrap();
    let text = render::text(&r);
    let block: Vec<&str> = text.lines().skip(1).take(3).collect();
    // Every line of a block is as wide as its header, and `[runs]`'s
    // figure ends where the header's `[runs]` does.
    let end_of = |l: &str, word: &str| l.find(word).map(|i| l[..i + word.len()].width());
    assert!(block.iter().all(|l| l.width() == block[0].width()), "{text}");
    assert_eq!(end_of(block[0], "[runs]"), end_of(block[2], "名前 ↑ é       2"), "{text}");
}

#[test]
fn contest_ratio_over_the_baseline_kernels_no_load() {
    let r = build(&two_kernels(), &settings(RatioBase::Baseline)).unwrap();
    assert_eq!(r.baseline, "base");
    assert_eq!(r.baseline_no_load_s, Some(31.0));
    let base = entry(&r, "no_load", "base").ratio.unwrap();
    assert_eq!(base.mean, 1.0);
    let cand = entry(&r, "no_load", "cand").ratio.unwrap();
    assert!((cand.mean - 30.38 / 31.0).abs() < 1e-12, "{cand:?}");
    assert_eq!(format!("{:.2}", cand.mean), "0.98");
    // The spread is Time's, over the fixed divisor.
    let t = entry(&r, "no_load", "base").time.unwrap();
    assert!((t.sd.unwrap() - 2f64.sqrt()).abs() < 1e-12);
    assert!((base.sd.unwrap() - 2f64.sqrt() / 31.0).abs() < 1e-12);

    // Another baseline changes every ratio.
    let s = Settings { ratio_base: RatioBase::Baseline, baseline: Some("cand".into()), intervals: false };
    let r = build(&two_kernels(), &s).unwrap();
    assert_eq!(entry(&r, "no_load", "cand").ratio.unwrap().mean, 1.0);
    assert!((entry(&r, "no_load", "base").ratio.unwrap().mean - 31.0 / 30.38).abs() < 1e-12);
    assert!(r.kernels.iter().any(|k| k.name == "cand" && k.baseline));
}

#[test]
fn each_ratio_has_its_95_percent_interval_and_the_text_shows_it_when_asked() {
    use crate::stats::fieller::RatioInterval;
    // own: Student's t over cand's two per-iteration ratios (1 degree of
    // freedom: t = 12.706).
    let r = build(&two_kernels(), &Settings { ratio_base: RatioBase::Own, baseline: None, intervals: true }).unwrap();
    let (a, b): (f64, f64) = (41.0 / 30.0, 41.0 / 30.76);
    let (mean, sd) = ((a + b) / 2.0, (a - b).abs() / 2f64.sqrt());
    let half = 12.706_204_736 * sd / 2f64.sqrt();
    match entry(&r, "process_load", "cand").ratio_interval {
        Some(RatioInterval::Bounded { lo, hi }) => {
            assert!((lo - (mean - half)).abs() < 1e-6 && (hi - (mean + half)).abs() < 1e-6, "{lo} {hi}")
        }
        other => panic!("{other:?}"),
    }
    // One run: no interval.
    let it = iteration(&[("no_load", 20.0, 100.0, 0.0, 0.0), ("io_load", 50.0, 40.0, 7.0, 10.0)], &[]);
    let one = vec![kernel("k", vec![contest_boot(0, "k", "aaaaaa01", vec![it])])];
    let one = build(&one, &Settings { ratio_base: RatioBase::Own, baseline: None, intervals: true }).unwrap();
    assert_eq!(entry(&one, "io_load", "k").ratio_interval, None);
    assert!(render::text(&one).lines().any(|l| l.starts_with("k ") && l.ends_with(" -")), "{}", render::text(&one));
    let text = render::text(&r);
    assert!(text.contains("Ratio 95%"), "{text}");
    assert!(text.contains(&format!("[{:.2}, {:.2}]", mean - half, mean + half)), "{text}");
    assert!(!render::text(&build(&two_kernels(), &settings(RatioBase::Own)).unwrap()).contains("Ratio 95%"));
    assert_eq!(entry(&r, "no_load", "cand").ratio_interval, None, "a no_load over itself is 1, no interval");
    // baseline: Fieller's for cand's mean Time over base's mean no_load
    // Time, both spreads counted.
    let r = build(&two_kernels(), &settings(RatioBase::Baseline)).unwrap();
    let want = crate::stats::fieller::fieller(&[30.0, 32.0], &[41.0, 41.0]).unwrap().interval(0.05);
    assert_eq!(entry(&r, "process_load", "cand").ratio_interval, Some(want));
    assert!(matches!(want, RatioInterval::Bounded { lo, hi } if lo < 41.0 / 31.0 && hi > 41.0 / 31.0));
    // The baseline's own rows pair with its own no_load: its no_load is 1
    // by construction (no interval), its loads' intervals are over its
    // per-iteration ratios.
    assert_eq!(entry(&r, "no_load", "base").ratio_interval, None);
    let (a, b): (f64, f64) = (38.0 / 30.0, 38.4 / 32.0);
    let (mean, half) = ((a + b) / 2.0, 12.706_204_736 * (a - b).abs() / 2f64.sqrt() / 2f64.sqrt());
    assert!(matches!(entry(&r, "process_load", "base").ratio_interval,
        Some(RatioInterval::Bounded { lo, hi }) if (lo - (mean - half)).abs() < 1e-6 && (hi - (mean + half)).abs() < 1e-6));
    // cand's boot ran two iterations: asking for intervals says they share
    // that boot's noise.
    let warned = |intervals| {
        let r = build(&two_kernels(), &Settings { ratio_base: RatioBase::Own, baseline: None, intervals }).unwrap();
        r.warnings.iter().any(|w| w.contains("iterations of one boot share that boot's noise"))
    };
    assert!(warned(true) && !warned(false));
}

#[test]
fn contest_ratio_over_the_own_no_load() {
    let r = build(&two_kernels(), &settings(RatioBase::Own)).unwrap();
    assert_eq!(entry(&r, "no_load", "cand").ratio.unwrap().mean, 1.0);
    assert_eq!(entry(&r, "no_load", "base").ratio.unwrap().mean, 1.0);
    // Paired per iteration, then averaged.
    let own = entry(&r, "process_load", "cand").ratio.unwrap();
    let want = (41.0 / 30.0 + 41.0 / 30.76) / 2.0;
    assert!((own.mean - want).abs() < 1e-12, "{own:?}");
    assert_eq!(own.n, 2);
    assert!(own.sd.unwrap() > 0.0);
    assert!(render::text(&r).contains("Ratio: Time over the same iteration's no_load Time of the same kernel"));
}

#[test]
fn contest_own_ratio_is_formed_when_the_metric_is_missing() {
    let mut it = iteration(&[("no_load", 20.0, 100.0, 0.0, 0.0), ("io_load", 50.0, 40.0, 7.0, 10.0)], &[]);
    it.metrics.remove("ratio_io_load");
    let r = build(&[kernel("k", vec![contest_boot(0, "k", "aaaaaa01", vec![it])])], &settings(RatioBase::Own)).unwrap();
    assert_eq!(entry(&r, "io_load", "k").ratio.unwrap().mean, 2.5);
}

#[test]
fn contest_error_rows_show_good_runs_and_footnotes() {
    let k = vec![contest_boot(
        0,
        "k",
        "aaaaaa01",
        vec![
            iteration(
                &[("no_load", 20.0, 100.0, 0.0, 0.0), ("io_load", 50.0, 40.0, 7.0, 10.0)],
                &[("mem_load", "oom")],
            ),
            iteration(
                &[("no_load", 20.0, 100.0, 0.0, 0.0)],
                &[("io_load", "the load died after 2 s"), ("mem_load", "oom")],
            ),
        ],
    )];
    let r = build(&[kernel("k", k)], &settings(RatioBase::Baseline)).unwrap();
    let io = entry(&r, "io_load", "k");
    assert_eq!((io.state, io.runs, io.failed), (RowState::Measured, 1, 1));
    assert_eq!(
        io.errors[0],
        RowError { location: "boot #0 iteration 2".into(), message: "the load died after 2 s".into() }
    );
    let mem = entry(&r, "mem_load", "k");
    assert_eq!((mem.state, mem.runs, mem.failed), (RowState::Failed, 0, 2));
    assert!(mem.time.is_none() && mem.ratio.is_none());
    let text = render::text(&r);
    assert!(text.contains("k            1  50.0  40.0      7   10.0   2.50  [1]\n"), "{text}");
    assert!(
        text.contains("  [1] k: failed in 1 of 2 iteration(s): boot #0 iteration 2: the load died after 2 s\n"),
        "{text}"
    );
    assert!(
        text.contains("mem_load:\nKernel  [runs]  Time  CPU%  Loads  LCPU%  Ratio\nk            0  error: oom [2]\n"),
        "{text}"
    );
    assert!(text.contains("  [2] k: failed in 2 of 2 iteration(s): boot #0 iteration 1: oom; boot #0 iteration 2: oom"));
    let md = render::markdown(&r);
    assert!(md.contains("| k | 0 | error: oom [2] | | | | |"), "{md}");
}

#[test]
fn contest_rows_keep_contest_order_and_missing_rows_say_so() {
    // Metric names sort alphabetically (cacherun, fork_load, no_load); the
    // table must not.
    let a = contest_boot(
        0,
        "a",
        "aaaaaa01",
        vec![iteration(
            &[
                ("fork_load", 25.0, 90.0, 40000.0, 30.0),
                ("no_load", 20.0, 100.0, 0.0, 0.0),
                ("cacherun", 19.0, 104.0, 0.0, 0.0),
            ],
            &[],
        )],
    );
    let b = contest_boot(1, "b", "bbbbbb02", vec![iteration(&[("no_load", 21.0, 100.0, 0.0, 0.0)], &[])]);
    let r = build(&[kernel("a", vec![a]), kernel("b", vec![b])], &settings(RatioBase::Baseline)).unwrap();
    let rows: Vec<&str> = r.rows.iter().map(|t| t.row.as_str()).collect();
    assert_eq!(rows, ["no_load", "cacherun", "fork_load"]);
    let missing = entry(&r, "fork_load", "b");
    assert_eq!((missing.state, missing.runs), (RowState::NotMeasured, 0));
    let text = render::text(&r);
    assert!(text.contains("\nb            0  not measured\n"), "{text}");
    assert!(text.contains("  fork_load  forks\n"), "{text}");
    assert!(!text.contains("io_load"), "{text}");
}

#[test]
fn contest_unknown_rows_follow_the_known_ones() {
    let it = iteration(&[("zram_load", 30.0, 80.0, 5.0, 20.0), ("no_load", 20.0, 100.0, 0.0, 0.0)], &[]);
    let r = build(&[kernel("a", vec![contest_boot(0, "a", "aaaaaa01", vec![it])])], &settings(RatioBase::Baseline))
        .unwrap();
    let rows: Vec<&str> = r.rows.iter().map(|t| t.row.as_str()).collect();
    assert_eq!(rows, ["no_load", "zram_load"]);
}

#[test]
fn contest_excludes_bad_boots_with_the_reason() {
    let mut panicked = contest_boot(3, "a", "aaaaaa01", vec![iteration(&[("no_load", 1.0, 1.0, 0.0, 0.0)], &[])]);
    panicked.boot.classification = "panic".into();
    panicked.boot.detail = Some("Kernel panic - not syncing".into());
    let fork_only = boot(4, "a", "aaaaaa01", "none", vec![fork_workload(100, &[1000.0])]);
    let mut empty = boot(5, "a", "aaaaaa01", "none", vec![workload(100, vec![])]);
    if let Some(d) = empty.result.as_mut() {
        d.workloads[0].error = Some("scratch disk missing".into());
    }
    let good = contest_boot(0, "a", "aaaaaa01", vec![iteration(&[("no_load", 20.0, 100.0, 0.0, 0.0)], &[])]);
    let r = build(&[kernel("a", vec![good, panicked, fork_only, empty])], &settings(RatioBase::Baseline)).unwrap();
    let reasons: Vec<(u32, &str)> = r.excluded.iter().map(|x| (x.boot, x.reason.as_str())).collect();
    assert_eq!(
        reasons,
        [
            (3, "boot classified panic: Kernel panic - not syncing"),
            (4, "no contest workload (it ran fork)"),
            (5, "contest measured nothing: scratch disk missing"),
        ]
    );
    assert_eq!((r.kernels[0].boots_used, r.kernels[0].boots_total), (1, 4));
    let text = render::text(&r);
    assert!(text.contains("Excluded boots:\n  a t.json boot #3: boot classified panic"), "{text}");
}

#[test]
fn contest_refuses_inputs_without_contest() {
    let fork_only = boot(0, "a", "aaaaaa01", "none", vec![fork_workload(100, &[1000.0])]);
    let e = check_has_contest("runs/fork.json", std::slice::from_ref(&fork_only)).unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("runs/fork.json: no contest results"), "{msg}");
    assert!(msg.contains("boot #0: no contest workload (it ran fork)"), "{msg}");
    assert!(check_has_contest("empty.json", &[]).unwrap_err().to_string().contains("(no boots)"));
    let good = contest_boot(1, "a", "aaaaaa01", vec![iteration(&[("no_load", 20.0, 100.0, 0.0, 0.0)], &[])]);
    assert!(check_has_contest("mixed.json", &[fork_only.clone(), good]).is_ok());
    // A kernel with no usable boot is left out, with a warning; as the
    // only kernel there is nothing to table.
    assert_eq!(
        build(&[kernel("a", vec![fork_only.clone()])], &settings(RatioBase::Baseline)).unwrap_err(),
        ContestReportError::NothingToTable
    );
    let mut ks = two_kernels();
    ks.push(kernel("dead", vec![fork_only]));
    let r = build(&ks, &settings(RatioBase::Baseline)).unwrap();
    assert_eq!(r.kernels.len(), 2);
    assert!(r.warnings.iter().any(|w| w.starts_with("dead is left out")), "{:?}", r.warnings);
}

#[test]
fn contest_baseline_by_name() {
    let s = |n: &str| Settings { ratio_base: RatioBase::Baseline, baseline: Some(n.into()), intervals: false };
    let e = build(&two_kernels(), &s("nope")).unwrap_err();
    assert_eq!(e, ContestReportError::UnknownBaseline { name: "nope".into(), names: "base, cand".into() });
    // The release names both kernels of the fixture.
    let e = build(&two_kernels(), &s("6.1.0-test")).unwrap_err();
    assert!(matches!(e, ContestReportError::AmbiguousBaseline { .. }), "{e}");
    assert_eq!("own".parse::<RatioBase>().unwrap(), RatioBase::Own);
    assert_eq!("mean".parse::<RatioBase>().unwrap_err(), ContestReportError::RatioBase("mean".into()));
}

#[test]
fn contest_warns_about_different_parameters_and_storage() {
    let it = || vec![iteration(&[("no_load", 20.0, 100.0, 0.0, 0.0)], &[])];
    let a = boot(0, "a", "aaaaaa01", "mq-deadline", vec![workload(100, it())]);
    let b = boot(1, "b", "bbbbbb02", "bfq", vec![workload(200, it())]);
    let r = build(&[kernel("a", vec![a]), kernel("b", vec![b])], &settings(RatioBase::Baseline)).unwrap();
    let w = r.warnings.join("\n");
    assert!(w.contains("contest ran with different parameters"), "{w}");
    assert!(w.contains("a: build_size=100 load_lead_s=3; b: build_size=200 load_lead_s=3"), "{w}");
    let text = render::text(&r);
    assert!(!text.contains("contest parameters:"), "{text}");
    assert!(text.contains("scheduler bfq"), "{text}");

    // Running fewer rows is not a different benchmark.
    let mut fewer = workload(100, it());
    fewer.params.insert("rows".into(), serde_json::json!(["no_load"]));
    let a = boot(0, "a", "aaaaaa01", "mq-deadline", vec![workload(100, it())]);
    let b = boot(1, "b", "bbbbbb02", "mq-deadline", vec![fewer]);
    let r = build(&[kernel("a", vec![a]), kernel("b", vec![b])], &settings(RatioBase::Baseline)).unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);

    let mixed = vec![
        boot(0, "a", "aaaaaa01", "mq-deadline", vec![workload(100, it())]),
        boot(1, "a", "aaaaaa01", "none", vec![workload(100, it())]),
    ];
    let r = build(&[kernel("a", mixed)], &settings(RatioBase::Baseline)).unwrap();
    assert!(r.warnings.iter().any(|w| w.contains("boots used different storage")), "{:?}", r.warnings);
    assert_eq!(r.kernels[0].storage.len(), 2);
}

#[test]
fn contest_non_finite_values_are_failed_runs() {
    let mut bad = iteration(&[("no_load", 20.0, 100.0, 0.0, 0.0), ("io_load", 50.0, 40.0, 7.0, 10.0)], &[]);
    bad.metrics.insert("lcpu_percent_io_load".into(), loads::schema::Metric::higher(f64::NAN, "%"));
    let good = iteration(&[("no_load", 20.0, 100.0, 0.0, 0.0), ("io_load", 60.0, 40.0, 9.0, 12.0)], &[]);
    let r = build(&[kernel("k", vec![contest_boot(0, "k", "aaaaaa01", vec![bad, good])])], &settings(RatioBase::Own))
        .unwrap();
    let io = entry(&r, "io_load", "k");
    assert_eq!((io.runs, io.failed), (1, 1));
    assert_eq!(io.time.unwrap().mean, 60.0);
    assert_eq!(io.errors[0].message, "lcpu_percent_io_load is NaN");
}

#[test]
fn contest_json_and_markdown_carry_the_figures() {
    let r = build(&two_kernels(), &settings(RatioBase::Baseline)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&render::json(&r).unwrap()).unwrap();
    assert_eq!(v["format"], REPORT_FORMAT);
    assert_eq!(v["ratio_base"], "baseline");
    let process = &v["rows"][1];
    assert_eq!(process["row"], "process_load");
    assert_eq!(process["load_units"], serde_json::json!(["loops"]));
    let base = &process["kernels"][0];
    assert_eq!(base["runs"], 2);
    assert!((base["time"]["mean"].as_f64().unwrap() - 38.2).abs() < 1e-9);
    assert!((base["time"]["sd"].as_f64().unwrap() - 0.4 / 2f64.sqrt()).abs() < 1e-9);
    assert!((base["loads"]["sd"].as_f64().unwrap() - 0.5f64.sqrt()).abs() < 1e-9);
    assert_eq!(v["kernels"][0]["storage_info"][0]["scheduler"], "mq-deadline");
    let md = render::markdown(&r);
    assert!(
        md.contains("### process_load\n\n| Kernel | runs | Time (s) | CPU% | Loads (loops) | LCPU% | Ratio |\n"),
        "{md}"
    );
    assert!(md.contains("| base | 2 | 38.2 | 142.1 | 13 | 47.4 | 1.23 |\n"), "{md}");
    assert!(md.contains("| cand | 2 | 30.4 | 180.0 | 0 | 0.0 | 0.98 |\n"), "{md}");
}

#[test]
fn storage_line_names_a_zram_swap() {
    let mut s = super::test_fixtures::storage("bfq");
    s.swap_device = None;
    s.swap_bytes = None;
    assert!(describe_storage(Some(&s)).ends_with("scheduler bfq, no swap"));
    s.zram = Some(loads::schema::ZramInfo {
        device: "/dev/zram0".into(),
        disksize_bytes: 128 << 20,
        algorithm: Some("lzo-rle".into()),
        swap_bytes: Some(128 << 20),
        priority: 100,
        ..Default::default()
    });
    assert_eq!(
        describe_storage(Some(&s)),
        "ext4 on /dev/vda (2048 MiB), scheduler bfq, no swap disk, zram swap /dev/zram0 (128 MiB, lzo-rle, used first)"
    );
}

#[test]
fn boots_of_different_contest_versions_are_refused_naming_each() {
    // Version 1 written out is the same as none (results from before
    // versions): tabled together.
    let mut kernels = two_kernels();
    for b in &mut kernels[1].boots {
        b.record.result.as_mut().unwrap().workloads[0].params.insert("version".into(), 1.into());
    }
    assert!(build(&kernels, &settings(RatioBase::Baseline)).is_ok());
    for b in &mut kernels[1].boots {
        b.record.result.as_mut().unwrap().workloads[0].params.insert("version".into(), 2.into());
    }
    let e = build(&kernels, &settings(RatioBase::Baseline)).unwrap_err().to_string();
    assert!(
        e.contains(
            "contest ran in different versions: version 1 in base boot #0, base boot #2; version 2 in cand boot #1"
        ),
        "{e}"
    );
}

#[test]
fn boots_of_different_foreground_builds_or_packs_are_refused_naming_each() {
    let mut kernels = two_kernels();
    let set = |kernels: &mut Vec<KernelInput>, i: usize, build: &str, pack: &str| {
        let k: &mut KernelInput = &mut kernels[i];
        for b in &mut k.boots {
            let p = &mut b.record.result.as_mut().unwrap().workloads[0].params;
            p.insert("build".into(), build.into());
            p.insert("pack_id".into(), pack.into());
        }
    };
    let (a, b) = ("a".repeat(64), "b".repeat(64));
    set(&mut kernels, 0, "pack", &a);
    set(&mut kernels, 1, "pack", &a);
    assert!(build(&kernels, &settings(RatioBase::Baseline)).is_ok(), "one build from one pack");
    set(&mut kernels, 1, "pack", &b);
    let e = build(&kernels, &settings(RatioBase::Baseline)).unwrap_err().to_string();
    assert!(
        e.contains("(pack build of quick from pack aaaaaaaaaaaa) in base")
            && e.contains("from pack bbbbbbbbbbbb) in cand"),
        "{e}"
    );
    set(&mut kernels, 1, "synthetic", "");
    let e = build(&kernels, &settings(RatioBase::Baseline)).unwrap_err().to_string();
    assert!(e.contains("different versions or foreground builds"), "the synthetic build is another: {e}");
}
