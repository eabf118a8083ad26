//! Tests of the comparison engine on synthetic boots.

use super::test_fixtures::*;
use super::*;

fn group(name: &str, boots: Vec<BootRecord>) -> GroupInput {
    GroupInput { name: name.into(), source: format!("{name}.json"), boots }
}

fn rate(r: &Report, cand: usize) -> (&MetricReport, &Change) {
    let m = r.metrics.iter().find(|m| m.key.metric == "fork_rate").unwrap();
    (m, &m.changes[cand - 1])
}

#[test]
fn verdict_rules() {
    use Better::*;
    assert_eq!(verdict(0.5, Some((-1.0, 1.5)), 2.0, Higher), Verdict::NoChange);
    assert_eq!(verdict(5.0, Some((3.0, 7.0)), 2.0, Higher), Verdict::Better);
    assert_eq!(verdict(5.0, Some((3.0, 7.0)), 2.0, Lower), Verdict::Worse);
    assert_eq!(verdict(-5.0, Some((-7.0, -3.0)), 2.0, Lower), Verdict::Better);
    // Beyond the threshold but the interval includes 0.
    assert_eq!(verdict(5.0, Some((-1.0, 11.0)), 2.0, Higher), Verdict::Unsure);
    // Significant but small and not provably inside the threshold.
    assert_eq!(verdict(1.5, Some((0.5, 2.5)), 2.0, Higher), Verdict::Unsure);
    // Estimate beyond, interval excludes 0 but straddles the threshold: still a change.
    assert_eq!(verdict(2.5, Some((1.0, 4.0)), 2.0, Higher), Verdict::Better);
    assert_eq!(verdict(3.0, None, 2.0, Higher), Verdict::Unsure);
}

#[test]
fn clear_improvement_and_reference_layout_figures() {
    let base = fork_boots(0, "base", "aaaa", &[&[100.0, 101.0], &[99.0, 100.0], &[101.0, 100.5], &[100.0, 99.5]]);
    let cand = fork_boots(4, "cand", "bbbb", &[&[110.0, 111.0], &[109.0, 110.0], &[111.0, 110.5], &[110.0, 109.5]]);
    let r = compare(&group("base", base), &[group("cand", cand)], Settings::default(), None, false).unwrap();
    assert_eq!(r.metrics.len(), 2);
    let (m, c) = rate(&r, 1);
    assert_eq!(m.kernels[0].pct_of_baseline, 100.0);
    assert!((m.kernels[1].pct_of_baseline - 110.0).abs() < 0.2, "{}", m.kernels[1].pct_of_baseline);
    assert_eq!((m.kernels[0].boots, m.kernels[0].iterations), (4, 8));
    assert!(m.kernels[0].sd_between_boots);
    assert_eq!(c.verdict, Verdict::Better);
    assert_eq!(c.boots, (4, 4));
    assert_eq!(c.iterations, (8, 8));
    let (lo, hi) = c.interval_pct.unwrap();
    assert!(lo > 8.0 && hi < 12.0 && lo < c.change_pct && c.change_pct < hi, "{lo} {hi}");
    // The latency is 1e6/rate: one member of Holm's family, drawn at α.
    assert!((c.interval_confidence - 0.95).abs() < 1e-12, "{}", c.interval_confidence);
    // The latency got lower: better too.
    let lat = r.metrics.iter().find(|m| m.key.metric == "fork_latency").unwrap();
    assert_eq!(lat.changes[0].verdict, Verdict::Better);
    assert!(lat.changes[0].change_pct < -8.0);
}

#[test]
fn identical_samples_are_no_change() {
    let runs: &[&[f64]] = &[&[100.0, 100.2], &[100.1, 100.3], &[99.9, 100.0], &[100.05, 100.1]];
    let r = compare(
        &group("a", fork_boots(0, "a", "aaaa", runs)),
        &[group("b", fork_boots(4, "b", "aaaa", runs))],
        Settings::default(),
        None,
        false,
    )
    .unwrap();
    let (_, c) = rate(&r, 1);
    assert_eq!(c.change_pct, 0.0);
    assert!((c.p_value.unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(c.verdict, Verdict::NoChange);
}

#[test]
fn zero_variance_is_exact() {
    let a = fork_boots(0, "a", "aaaa", &[&[100.0], &[100.0], &[100.0]]);
    let same = compare(
        &group("a", a.clone()),
        &[group("b", fork_boots(3, "b", "bbbb", &[&[100.0], &[100.0]]))],
        Settings::default(),
        None,
        false,
    )
    .unwrap();
    let (_, c) = rate(&same, 1);
    assert_eq!((c.change_pct, c.interval_pct, c.verdict), (0.0, Some((0.0, 0.0)), Verdict::NoChange));
    assert!(c.note.as_deref().unwrap().contains("exact"));
    let apart = compare(
        &group("a", a),
        &[group("b", fork_boots(3, "b", "bbbb", &[&[90.0], &[90.0]]))],
        Settings::default(),
        None,
        false,
    )
    .unwrap();
    let (_, c) = rate(&apart, 1);
    assert!((c.change_pct + 10.0).abs() < 1e-9);
    assert_eq!(c.verdict, Verdict::Worse);
}

#[test]
fn one_boot_gives_no_interval_and_two_boots_work() {
    let a = fork_boots(0, "a", "aaaa", &[&[100.0, 101.0, 99.0]]);
    let b = fork_boots(1, "b", "bbbb", &[&[120.0, 121.0], &[119.0, 120.0]]);
    let r = compare(&group("a", a), &[group("b", b.clone())], Settings::default(), None, false).unwrap();
    let (m, c) = rate(&r, 1);
    assert_eq!(c.verdict, Verdict::Unsure);
    assert_eq!(c.interval_pct, None);
    assert!(c.note.as_deref().unwrap().contains("at least 2 boots per kernel (baseline 1, candidate 2)"));
    // A single boot's spread is over its iterations, and says so.
    assert!(!m.kernels[0].sd_between_boots);
    assert!((m.kernels[0].sd - 1.0).abs() < 1e-12);

    let a2 = fork_boots(0, "a", "aaaa", &[&[100.0, 101.0], &[99.0, 100.0]]);
    let r = compare(&group("a", a2), &[group("b", b)], Settings::default(), None, false).unwrap();
    let (_, c) = rate(&r, 1);
    assert!(c.interval_pct.is_some() && c.p_value.is_some());
}

#[test]
fn nan_and_missing_metrics_name_the_metric_and_boot() {
    let a = fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]);
    let mut b = fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0], &[102.0]]);
    b[1].result.as_mut().unwrap().workloads[0].iterations[0].metrics.get_mut("fork_rate").unwrap().value = f64::NAN;
    let e = compare(&group("a", a.clone()), &[group("b", b.clone())], Settings::default(), None, false).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("boot #3") && msg.contains("'fork_rate'") && msg.contains("NaN"), "{msg}");
    // With --skip-incomplete-boots the boot is left out and listed.
    let r = compare(&group("a", a.clone()), &[group("b", b)], Settings::default(), None, true).unwrap();
    assert_eq!(r.kernels[1].boots_used, 2);
    assert!(r.kernels[1].skipped[0].reason.contains("NaN"));

    let mut c = fork_boots(2, "c", "cccc", &[&[100.0, 99.0], &[101.0, 98.0]]);
    c[0].result.as_mut().unwrap().workloads[0].iterations[1].metrics.remove("fork_latency");
    let msg =
        compare(&group("a", a.clone()), &[group("c", c)], Settings::default(), None, false).unwrap_err().to_string();
    assert!(
        msg.contains("boot #2") && msg.contains("'fork_latency' is missing") && msg.contains("iteration 1"),
        "{msg}"
    );

    let mut d = fork_boots(2, "d", "dddd", &[&[100.0], &[101.0]]);
    for it in &mut d[1].result.as_mut().unwrap().workloads[0].iterations {
        it.metrics.remove("fork_latency");
    }
    let msg = compare(&group("a", a), &[group("d", d)], Settings::default(), None, false).unwrap_err().to_string();
    assert!(msg.contains("boot #3") && msg.contains("fork_latency") && msg.contains("boot #2 has it"), "{msg}");
}

#[test]
fn failed_boots_are_left_out_and_listed() {
    let a = fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0], &[99.0]]);
    let mut b = fork_boots(3, "b", "bbbb", &[&[100.0], &[101.0], &[99.0]]);
    b[0].boot.classification = "hang".into();
    b[0].result = None;
    b[0].result_error = Some("silence timeout".into());
    let r = compare(&group("a", a), &[group("b", b)], Settings::default(), None, false).unwrap();
    assert_eq!(r.kernels[1].boots_used, 2);
    assert_eq!(r.kernels[1].skipped[0].reason, "hang: silence timeout");
    let (_, c) = rate(&r, 1);
    assert_eq!(c.boots, (3, 2));
}

#[test]
fn results_of_different_loadfiles_are_never_compared() {
    let with_loadfile = |mut boots: Vec<BootRecord>, name: &str, sha: &str| {
        for boot in &mut boots {
            let w = &mut boot.result.as_mut().unwrap().workloads[0];
            w.name = "dbench".into();
            w.params.insert("loadfile".into(), name.into());
            w.params.insert("loadfile_sha256".into(), sha.into());
        }
        boots
    };
    let a = with_loadfile(fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]), "/usr/share/dbench/client.txt", "ec27");
    let same = with_loadfile(fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]), "/usr/share/dbench/client.txt", "ec27");
    compare(&group("a", a.clone()), &[group("b", same)], Settings::default(), None, false).unwrap();
    for (name, sha) in [("/usr/share/dbench/client.txt", "0bad"), ("builtin", "ec27")] {
        let b = with_loadfile(fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]), name, sha);
        let e = compare(&group("a", a.clone()), &[group("b", b)], Settings::default(), None, false).unwrap_err();
        let msg = format!("{:#}", anyhow::Error::from(e));
        assert!(msg.contains("different parameters") && msg.contains(name) && msg.contains(sha), "{msg}");
    }
}

#[test]
fn different_workloads_or_params_are_refused() {
    let a = fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]);
    let mut b = fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]);
    for boot in &mut b {
        boot.result.as_mut().unwrap().workloads[0].params.insert("count".into(), 5000.into());
    }
    let msg = format!(
        "{:#}",
        anyhow::Error::from(
            compare(&group("a", a.clone()), &[group("b", b)], Settings::default(), None, false).unwrap_err()
        )
    );
    assert!(
        msg.contains("cannot compare a with b") && msg.contains("different parameters") && msg.contains("5000"),
        "{msg}"
    );

    let mut c = fork_boots(2, "c", "cccc", &[&[100.0], &[101.0]]);
    for boot in &mut c {
        let mut w = fork_workload(1000, &[1.0]);
        w.name = "hackbench".into();
        boot.result.as_mut().unwrap().workloads.push(w);
    }
    let e = compare(&group("a", a.clone()), &[group("c", c.clone())], Settings::default(), None, false).unwrap_err();
    assert!(format!("{:#}", anyhow::Error::from(e)).contains("hackbench ran for c but not for a"));
    // Restricting to the shared workload compares.
    let only = vec!["fork".to_string()];
    assert!(compare(&group("a", a.clone()), &[group("c", c)], Settings::default(), Some(&only), false).is_ok());
    let only = vec!["dbench".to_string()];
    let e = compare(&group("a", a), &[], Settings::default(), Some(&only), false).unwrap_err();
    assert!(e.to_string().contains("no candidate"), "{e}");
}

#[test]
fn machine_differences_are_warnings() {
    let a = fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]);
    let mut b = fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]);
    for boot in &mut b {
        boot.machine.accel = "icount".into();
        boot.machine.smp = 4;
    }
    let r = compare(&group("a", a), &[group("b", b)], Settings::default(), None, false).unwrap();
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("accel differs: icount (b) vs tcg (a)"), "{:?}", r.warnings);
    assert!(r.warnings[1].contains("vCPUs differs"));
}

/// `boots` moved to host `name` and icount (shift 0), with the recorded
/// machine type and CPU model of an x86_64 icount boot.
fn on_host(mut boots: Vec<BootRecord>, name: &str) -> Vec<BootRecord> {
    for b in &mut boots {
        b.host = Some(crate::results::HostRef { name: name.into(), cpus: 2, ..Default::default() });
        b.machine.accel = "icount".into();
        b.machine.smp = 1;
        b.machine.machine_type = Some("pc-q35-10.0".into());
        b.machine.cpu_model = Some("max".into());
        b.initramfs.sha256 = "0123456789abcdef".into();
        b.qemu.argv = ["-machine", "q35", "-icount", "shift=0,sleep=off", "-cpu", "max"].map(String::from).to_vec();
    }
    boots
}

#[test]
fn icount_boots_of_one_machine_on_two_hosts_compare_and_say_so() {
    let a = on_host(fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]), "alpha");
    let b = on_host(fork_boots(2, "b", "aaaa", &[&[100.0], &[101.0]]), "beta");
    let r = compare(&group("a", a.clone()), &[group("b", b.clone())], Settings::default(), None, false).unwrap();
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    let w = &r.warnings[0];
    assert!(w.contains("different hosts: alpha (a) vs beta (b)"), "{w}");
    assert_eq!(r.kernels[1].machine, "x86_64 icount, 1 vCPU, 1024 MiB, pc-q35-10.0, on beta");
    assert!(w.contains("compare across the hosts") && !w.contains("machines differ"), "{w}");
    // What lets the host reach an icount guest, or leaves the machine
    // unknown, is named instead of the claim.
    type Reach = fn(&mut BootRecord);
    let reaches: [(&str, Reach); 3] = [
        ("do not record their machine type", |b| b.machine.machine_type = None),
        ("more than one vCPU", |b| b.machine.smp = 2),
        ("disk I/O", |b| b.pack = Some(Default::default())),
    ];
    for (expected, reach) in reaches {
        let (mut a2, mut b2) = (a.clone(), b.clone());
        for boot in a2.iter_mut().chain(&mut b2) {
            reach(boot);
        }
        let r = compare(&group("a", a2), &[group("b", b2)], Settings::default(), None, false).unwrap();
        let w = r.warnings.last().unwrap();
        assert!(w.contains(expected) && !w.contains("compare across the hosts"), "{expected}: {w}");
    }
    // Two machines that share a hostname are two hosts, named by CPU.
    let mut b2 = on_host(fork_boots(2, "b", "aaaa", &[&[100.0], &[101.0]]), "alpha");
    for boot in &mut b2 {
        boot.host.as_mut().unwrap().cpu = "POWER9".into();
    }
    let r = compare(&group("a", a.clone()), &[group("b", b2)], Settings::default(), None, false).unwrap();
    let w = r.warnings.last().unwrap();
    assert!(w.contains("alpha [, 2 CPUs] (a) vs alpha [POWER9, 2 CPUs] (b)"), "{w}");
    // One host: no line at all.
    let b1 = on_host(fork_boots(2, "b", "aaaa", &[&[100.0], &[101.0]]), "alpha");
    assert!(compare(&group("a", a.clone()), &[group("b", b1)], Settings::default(), None, false)
        .unwrap()
        .warnings
        .is_empty());

    // Each aspect that decides an icount figure, changed on one host, is
    // named, and the hosts' line then says the figures do not compare.
    type Change = fn(&mut BootRecord);
    let changes: [(&str, Change); 5] = [
        ("the machines differ — machine type differs: pc-q35-10.0 (a) vs pc-q35-9.2 (b)", |b| {
            b.machine.machine_type = Some("pc-q35-9.2".into())
        }),
        ("the machines differ — CPU model differs: Skylake-Client (b) vs max (a)", |b| {
            b.machine.cpu_model = Some("Skylake-Client".into())
        }),
        ("the machines differ — icount differs: shift=0,sleep=off (a) vs shift=3,sleep=off (b)", |b| {
            b.qemu.argv[3] = "shift=3,sleep=off".into()
        }),
        ("QEMU differs: QEMU 10.0.2 (a) vs QEMU 9.2.0 (b)", |b| b.qemu.version = "QEMU 9.2.0".into()),
        ("initramfs sha256 differs: 0123456789ab (a) vs ffffffffffff (b)", |b| b.initramfs.sha256 = "f".repeat(64)),
    ];
    for (expected, change) in changes {
        let (mut a, mut b) = (a.clone(), b.clone());
        for boot in &mut a {
            boot.qemu.version = "QEMU 10.0.2".into();
        }
        for boot in &mut b {
            boot.qemu.version = "QEMU 10.0.2".into();
            change(boot);
        }
        let r = compare(&group("a", a), &[group("b", b)], Settings::default(), None, false).unwrap();
        assert!(r.warnings.iter().any(|w| w.contains(expected)), "{expected}: {:?}", r.warnings);
        let hosts = r.warnings.last().unwrap();
        assert!(hosts.contains("different hosts") && hosts.contains("here it is not"), "{expected}: {hosts}");
    }
}

#[test]
fn real_clock_boots_on_two_hosts_are_a_machine_warning() {
    let mut a = on_host(fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]), "alpha");
    let mut b = on_host(fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]), "beta");
    for boot in a.iter_mut().chain(&mut b) {
        boot.machine.accel = "tcg".into();
        boot.qemu.argv.drain(2..4);
    }
    let r = compare(&group("a", a), &[group("b", b)], Settings::default(), None, false).unwrap();
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].starts_with("the machines differ — the boots ran on different hosts: alpha (a) vs beta (b)"));
    assert!(r.warnings[0].contains("--clock icount"), "{}", r.warnings[0]);
}

#[test]
fn an_unknown_cpu_model_is_no_difference() {
    // A store's bare document (no argv) against a file that names its
    // model: nothing is known to differ.
    let a = fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]);
    let mut b = fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]);
    for boot in &mut b {
        boot.machine.cpu_model = Some("power10_v2.0-powerpc64-cpu".into());
    }
    let r = compare(&group("a", a), &[group("b", b)], Settings::default(), None, false).unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn a_file_without_a_recorded_machine_type_or_cpu_model_is_no_difference() {
    // Older files: no machine type, no CPU model (the argv's -cpu stands in).
    let a = on_host(fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]), "alpha");
    let mut b = on_host(fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]), "alpha");
    for boot in &mut b {
        boot.machine.machine_type = None;
        boot.machine.cpu_model = None;
        boot.host = None;
    }
    let r = compare(&group("a", a), &[group("b", b)], Settings::default(), None, false).unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn different_iteration_counts_are_a_warning() {
    let a = fork_boots(0, "a", "aaaa", &[&[100.0, 99.0], &[101.0, 100.0]]);
    let mut b = fork_boots(2, "b", "bbbb", &[&[100.0, 99.0, 98.0], &[101.0, 100.0, 99.0]]);
    for boot in &mut b {
        boot.result.as_mut().unwrap().workloads[0].warmup = 2;
    }
    let r = compare(&group("a", a.clone()), &[group("b", b)], Settings::default(), None, false).unwrap();
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].contains("warmup+measured iterations differs: fork 1+2 (a) vs fork 2+3 (b)"),
        "{:?}",
        r.warnings
    );
    // The same counts: no warning.
    let same = fork_boots(2, "b", "bbbb", &[&[100.0, 99.0], &[101.0, 100.0]]);
    assert!(compare(&group("a", a), &[group("b", same)], Settings::default(), None, false)
        .unwrap()
        .warnings
        .is_empty());
}

#[test]
fn non_positive_values_fall_back_to_fieller() {
    let a = fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0], &[99.0]]);
    let mut b = fork_boots(3, "b", "bbbb", &[&[100.0], &[101.0], &[99.0]]);
    b[0].result.as_mut().unwrap().workloads[0].iterations[0].metrics.get_mut("fork_rate").unwrap().value = 0.0;
    let r = compare(&group("a", a), &[group("b", b)], Settings::default(), None, false).unwrap();
    let (_, c) = rate(&r, 1);
    assert_eq!(c.method, Method::Fieller);
    assert!(c.note.as_deref().unwrap().contains("Fieller"));
}

#[test]
fn bad_settings_are_refused() {
    let a = fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]);
    let s = Settings { confidence: 1.5, ..Settings::default() };
    assert!(compare(&group("a", a.clone()), &[group("b", a.clone())], s, None, false)
        .unwrap_err()
        .to_string()
        .contains("confidence"));
    assert!("median".parse::<Method>().unwrap_err().to_string().contains("median"));
}

#[test]
fn display_names_disambiguate() {
    use super::selector::FileGroup;
    let mut x = fork_boots(0, "", "aaaa", &[&[1.0]]);
    let mut y = fork_boots(1, "", "aaaa", &[&[1.0]]);
    y[0].cmdline = "console=ttyS0 quiet mitigations=off".into();
    let z = fork_boots(2, "fast", "bbbb", &[&[1.0]]);
    x[0].cmdline = "console=ttyS0 quiet".into();
    let names = display_names(&[
        FileGroup { number: 1, boots: x.clone() },
        FileGroup { number: 2, boots: y },
        FileGroup { number: 3, boots: z },
        FileGroup { number: 4, boots: x },
    ]);
    // The label when given; the cmdline words the others lack; the
    // position only when nothing else differs.
    assert_eq!(names[1], "6.1.0-test [mitigations=off]");
    assert_eq!(names[2], "fast");
    assert_eq!(names[0], "6.1.0-test #1");
    assert_eq!(names[3], "6.1.0-test #4");
}

/// Groups of one release (two builds of one tree), each booted from
/// `path` with image hash `sha`.
fn builds(images: &[(&str, &str)]) -> Vec<String> {
    use super::selector::FileGroup;
    let groups: Vec<FileGroup> = images
        .iter()
        .enumerate()
        .map(|(i, (path, sha))| {
            let mut boots = fork_boots(i as u32, "", sha, &[&[1.0]]);
            boots[0].kernel.path = path.into();
            FileGroup { number: i + 1, boots }
        })
        .collect();
    display_names(&groups)
}

#[test]
fn builds_of_one_release_are_named_by_their_image_file() {
    assert_eq!(
        builds(&[("/k/bzImage-a", "aaaa01"), ("/k/bzImage-b", "bbbb02")]),
        ["6.1.0-test (bzImage-a)", "6.1.0-test (bzImage-b)"]
    );
}

#[test]
fn same_file_names_are_told_apart_by_the_shortest_differing_path() {
    assert_eq!(
        builds(&[
            ("/src/linux-a/arch/x86/boot/bzImage", "aaaa01"),
            ("/src/linux-b/arch/x86/boot/bzImage", "bbbb02"),
            ("/src/linux-c/arch/x86/boot/bzImage", "cccc03"),
        ]),
        [
            "6.1.0-test (linux-a/arch/x86/boot/bzImage)",
            "6.1.0-test (linux-b/arch/x86/boot/bzImage)",
            "6.1.0-test (linux-c/arch/x86/boot/bzImage)",
        ]
    );
    // Only the group whose path differs is qualified by it.
    let names = builds(&[("/a/bzImage", "aaaa01"), ("/b/bzImage", "bbbb02"), ("/b/bzImage", "cccc03")]);
    assert_eq!(names[0], "6.1.0-test (a/bzImage)");
    assert_eq!(names[1], "6.1.0-test (b/bzImage) (image bbbb02)");
    assert_eq!(names[2], "6.1.0-test (b/bzImage) (image cccc03)");
}

#[test]
fn one_path_rebuilt_is_told_apart_by_a_short_image_hash() {
    assert_eq!(
        builds(&[("/k/bzImage", "0123456789abcdef01"), ("/k/bzImage", "fedcba9876543210ff")]),
        ["6.1.0-test (image 0123456789ab)", "6.1.0-test (image fedcba987654)"]
    );
    // Nothing differs: the position, as a last resort.
    assert_eq!(builds(&[("/k/bzImage", "aaaa01"), ("/k/bzImage", "aaaa01")]), ["6.1.0-test #1", "6.1.0-test #2"]);
}

#[test]
fn different_workload_versions_are_refused_naming_both() {
    let set_version = |boots: &mut Vec<BootRecord>, v: serde_json::Value| {
        for boot in boots {
            boot.result.as_mut().unwrap().workloads[0].params.insert("version".into(), v.clone());
        }
    };
    let a = fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]);
    // Results from before versions (none) are version 1.
    let mut one = fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]);
    set_version(&mut one, 1.into());
    assert!(compare(&group("a", a.clone()), &[group("b", one)], Settings::default(), None, false).is_ok());
    let mut two = fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]);
    set_version(&mut two, 2.into());
    let msg = format!(
        "{:#}",
        anyhow::Error::from(compare(&group("a", a), &[group("b", two)], Settings::default(), None, false).unwrap_err())
    );
    assert!(msg.contains("workload fork is version 1 for a and version 2 for b"), "{msg}");
    // A group that mixes versions is refused too.
    let mut mixed = fork_boots(0, "m", "mmmm", &[&[100.0], &[101.0]]);
    mixed[1].result.as_mut().unwrap().workloads[0].params.insert("version".into(), 2.into());
    let mut two = fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]);
    set_version(&mut two, 2.into());
    let msg =
        compare(&group("m", mixed), &[group("b", two)], Settings::default(), None, false).unwrap_err().to_string();
    assert!(msg.contains("m: boot #1 ran workload fork version 2, boot #0 version 1"), "{msg}");
}

#[test]
fn different_disk_io_or_throttle_is_a_warning() {
    let with_disk = |io: serde_json::Value, throttle: serde_json::Value| -> crate::results::storage::HostStorage {
        serde_json::from_value(serde_json::json!({
            "scratch": {"device": "/dev/vda", "bytes": 67108864, "command": ["mke2fs"], "tool_version": "1.47", "make_s": 0.1},
            "swap": null, "iosched": null, "page_size": 4096, "io": io, "throttle": throttle
        }))
        .unwrap()
    };
    let none_uring = serde_json::json!({"cache": "none", "aio": "io_uring", "reason": "r", "dir": "/var/tmp/x"});
    let mut a = fork_boots(0, "a", "aaaa", &[&[100.0], &[101.0]]);
    let mut b = fork_boots(2, "b", "bbbb", &[&[100.0], &[101.0]]);
    for boot in &mut a {
        // Written before the disks' I/O was recorded: QEMU's default.
        boot.storage = Some(with_disk(serde_json::Value::Null, serde_json::Value::Null));
    }
    for boot in &mut b {
        boot.storage = Some(with_disk(none_uring.clone(), serde_json::json!({"bps_total": 41943040})));
    }
    let r = compare(&group("a", a.clone()), &[group("b", b)], Settings::default(), None, false).unwrap();
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(
        r.warnings[0].contains("disk I/O differs: cache=none,aio=io_uring (b) vs cache=writeback,aio=threads (a)"),
        "{:?}",
        r.warnings
    );
    assert!(r.warnings[1].contains("disk throttle differs: 41943040 B/s (b) vs none (a)"), "{:?}", r.warnings);
    // The same disks: no warning; no disks at all: nothing to compare.
    assert!(compare(&group("a", a.clone()), &[group("b", a)], Settings::default(), None, false)
        .unwrap()
        .warnings
        .is_empty());
}

/// Fork boots (one iteration each) with two more metrics per iteration:
/// `other`, a noisy metric of its own, and `zero`, always 0.
fn fork_with_others(first: u32, label: &str, sha: &str, rates: &[f64], others: &[f64]) -> Vec<BootRecord> {
    let per_boot: Vec<&[f64]> = rates.iter().map(std::slice::from_ref).collect();
    let mut boots = fork_boots(first, label, sha, &per_boot);
    for (b, &o) in boots.iter_mut().zip(others) {
        let it = &mut b.result.as_mut().unwrap().workloads[0].iterations[0];
        it.metrics.insert("other".into(), loads::schema::Metric::higher(o, "ops/s"));
        it.metrics.insert("zero".into(), loads::schema::Metric::lower(0.0, "errors"));
    }
    boots
}

#[test]
fn a_metric_that_is_an_exact_function_of_another_or_untestable_does_not_enlarge_the_family() {
    let a = fork_with_others(0, "a", "aaaa", &[100.0, 101.0, 99.0, 100.5], &[50.0, 52.0, 49.0, 51.0]);
    let b = fork_with_others(4, "b", "bbbb", &[110.0, 111.0, 109.0, 110.5], &[50.5, 51.0, 50.0, 52.0]);
    let r = compare(&group("a", a), &[group("b", b)], Settings::default(), None, false).unwrap();
    let change = |name: &str| r.metrics.iter().find(|m| m.key.metric == name).unwrap().changes[0].clone();
    // Four metrics, but the family is fork_rate and other: latency is
    // 1e6/rate, and zero has no test. Holm's first level is 5%/2, not 5%/4.
    let rate = change("fork_rate");
    assert!((rate.interval_confidence - 0.975).abs() < 1e-12, "{rate:?}");
    let latency = change("fork_latency");
    assert_eq!((latency.interval_confidence, latency.p_adjusted), (rate.interval_confidence, rate.p_adjusted));
    assert!(change("zero").p_value.is_none());
    assert!((change("other").interval_confidence - 0.95).abs() < 1e-12, "{:?}", change("other"));
    assert!(r.method_sentence().contains("exact function of another"), "{}", r.method_sentence());
    assert!(r.method_sentence().contains("arithmetic means of the boot means"), "{}", r.method_sentence());
}

#[test]
fn on_the_fieller_path_the_p_value_agrees_with_the_interval() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
    let (mut checked, mut disagree) = (0, Vec::new());
    for _ in 0..4000 {
        let base: Vec<f64> = (0..3).map(|_| 100.0 + rng.random_range(-20.0..20.0)).collect();
        let cand: Vec<f64> = (0..7).map(|_| 110.0 + rng.random_range(-3.0..3.0)).collect();
        let t = test_metric(&base, &cand, Method::Fieller);
        let (Some(p), Some((lo, hi))) = (t.p_value, (t.interval)(0.05)) else { continue };
        checked += 1;
        if (p < 0.05) != (lo > 1.0 || hi < 1.0) {
            disagree.push((p, lo, hi));
        }
    }
    assert!(checked > 1000, "{checked}");
    assert!(disagree.is_empty(), "{} of {checked} disagree, e.g. {:?}", disagree.len(), disagree.first());
}

#[test]
fn over_a_negative_baseline_a_fall_is_a_fall() {
    // Higher is better; the candidate's values are lower (more negative).
    let a = fork_boots(0, "a", "aaaa", &[&[-100.0], &[-101.0], &[-99.0], &[-100.5]]);
    let b = fork_boots(4, "b", "bbbb", &[&[-110.0], &[-111.0], &[-109.0], &[-110.5]]);
    let r = compare(&group("a", a), &[group("b", b)], Settings::default(), None, false).unwrap();
    let (_, c) = rate(&r, 1);
    assert_eq!(c.method, Method::Fieller);
    let (lo, hi) = c.interval_pct.unwrap();
    assert!(c.change_pct < -9.0 && lo < hi && hi < 0.0, "{c:?}");
    assert_eq!(c.verdict, Verdict::Worse, "{c:?}");
}

/// A `bootbench local` document compared with a guest's boot: the accel
/// difference is warned about, as any machine difference is.
#[test]
fn a_host_run_beside_a_guest_run_is_warned_about_its_accel() {
    use crate::results::migration::{host_run_record, HOST_ACCEL};
    let host = host_run_record(loads::runner::begin_document("local-1", None, None), None);
    let mut guest = host.clone();
    guest.machine.accel = "tcg".into();
    let warned = super::compat::environment_warnings(&[("host", &[host][..]), ("guest", &[guest][..])]);
    assert!(warned.iter().any(|w| w.contains("accel") && w.contains(HOST_ACCEL) && w.contains("tcg")), "{warned:?}");
}
