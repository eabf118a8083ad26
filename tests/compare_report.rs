//! `bootbench compare` and `bootbench calibrate` driven through the CLI on
//! results files built here, plus two checks that need tools from
//! scripts/setup (ignored by a plain `cargo test`, run by scripts/test): the
//! HTML report in headless Chromium, and the statistics against a live
//! SciPy.

mod support;

use bootbench::results::{BootInfo, BootRecord, InitramfsRef, KernelRef, MachineShape, ResultsFile};
use loads::schema::{Iteration, Metric, Provenance, RunDocument, Status, WorkloadResult, SCHEMA_VERSION};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn boot(index: u32, label: &str, cmdline: &str, rates: &[f64]) -> BootRecord {
    let mut params = serde_json::Map::new();
    params.insert("count".into(), 1000.into());
    let workload = WorkloadResult {
        name: "fork".into(),
        params,
        warmup: 1,
        error: None,
        iterations: rates
            .iter()
            .map(|&r| {
                let mut it = Iteration::default();
                it.metrics.insert("fork_rate".into(), Metric::higher(r, "forks/s"));
                it.metrics.insert("fork_latency".into(), Metric::lower(1e6 / r, "us"));
                it
            })
            .collect(),
        quiet: None,
    };
    let mut provenance = Provenance::default();
    provenance.kernel.release = "6.1.0-57-amd64".into();
    BootRecord {
        label: label.into(),
        cmdline: cmdline.into(),
        kernel: KernelRef { image_sha256: "85667e6c7224aa".into(), ..Default::default() },
        initramfs: InitramfsRef { sha256: "f7d80b74b1a1".into(), ..Default::default() },
        machine: MachineShape {
            arch: "x86_64".into(),
            smp: 2,
            mem_mib: 1024,
            accel: "tcg".into(),
            ..Default::default()
        },
        boot: BootInfo { index, classification: "ok".into(), wall_s: 20.0, ..Default::default() },
        result: Some(RunDocument {
            schema_version: SCHEMA_VERSION,
            run_id: format!("r{index}"),
            status: Status::Complete,
            errors: vec![],
            provenance,
            timings: Default::default(),
            workloads: vec![workload],
        }),
        ..Default::default()
    }
}

/// An interleaved two-kernel run: the candidate's fork rate is ~8% higher.
fn two_kernel_file(dir: &Path) -> PathBuf {
    let mut f = ResultsFile::default();
    for i in 0..5u32 {
        let wobble = [0.0, 0.6, -0.4, 0.3, -0.5][i as usize];
        f.boots.push(boot(2 * i, "default", "quiet", &[380.0 + wobble, 381.0 + wobble, 379.5 + wobble]));
        f.boots.push(boot(
            2 * i + 1,
            "mitigations-off",
            "quiet mitigations=off",
            &[411.0 - wobble, 410.0 - wobble, 411.5],
        ));
    }
    let p = dir.join("run.json");
    f.write(&p).unwrap();
    p
}

fn bootbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bootbench")).args(args).output().expect("run bootbench")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn compare_formats_and_selectors() {
    let dir = tempfile::tempdir().unwrap();
    let run = two_kernel_file(dir.path());
    let r = run.display().to_string();

    // One multi-kernel file: first group is the baseline.
    let o = bootbench(&["compare", &r]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("Config") && out.contains("default (baseline)") && out.contains("100.00 +- "), "{out}");
    let row = out.lines().find(|l| l.starts_with("fork fork_rate")).unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("better") && row.contains("5 v 5") && row.contains("15 v 15"), "{row}");
    assert!(out.contains("Holm"), "{out}");

    // Explicit selectors, every format.
    let base = format!("{r}:label=default");
    let cand = format!("{r}:cmdline~mitigations=off");
    let o = bootbench(&["compare", &base, &cand, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", text(&o)));
    assert_eq!(v["kernels"][1]["name"], "mitigations-off");
    assert_eq!(v["settings"]["correction"], "holm");
    let o = bootbench(&["compare", &base, &cand, "--format", "csv"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 5, "{:?}", text(&o));
    let o = bootbench(&["compare", &base, &cand, "--format", "markdown", "--threshold", "10%"]);
    let (md, _) = text(&o);
    assert!(
        md.contains("| fork fork_rate ↑ | mitigations-off |") && md.contains("**unsure**")
            || md.contains("**no change**"),
        "{md}"
    );
    let html = dir.path().join("r.html");
    let o = bootbench(&["compare", &base, &cand, "--format", "html", "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(std::fs::read_to_string(&html).unwrap().matches("<svg").count(), 4);

    // Errors say what is wrong and list the groups.
    let o = bootbench(&["compare", &format!("{r}:sha=85667e"), &cand]);
    let (_, err) = text(&o);
    assert!(
        !o.status.success() && err.contains("matches 2 groups") && err.contains("#2 label 'mitigations-off'"),
        "{err}"
    );
    let o = bootbench(&["compare", &r, "--format", "pdf"]);
    assert!(text(&o).1.contains("unknown format 'pdf'"));
    let o = bootbench(&["compare", "/nonexistent/a.json", &r]);
    assert!(text(&o).1.contains("/nonexistent/a.json"));
}

#[test]
fn compare_refuses_nan_and_other_workloads() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ResultsFile::default();
    let mut b = ResultsFile::default();
    for i in 0..3u32 {
        a.boots.push(boot(i, "a", "quiet", &[100.0, 101.0]));
        b.boots.push(boot(i, "b", "quiet", &[100.0, 101.0]));
    }
    b.boots[2].result.as_mut().unwrap().workloads[0].iterations[1].metrics.get_mut("fork_rate").unwrap().value =
        f64::NAN;
    let (pa, pb) = (dir.path().join("a.json"), dir.path().join("b.json"));
    a.write(&pa).unwrap();
    // serde_json writes NaN as null: that is how a NaN arrives in a file.
    b.write(&pb).unwrap();
    let o = bootbench(&["compare", pa.to_str().unwrap(), pb.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(!o.status.success() && err.contains("boot #2"), "{err}");

    let mut c = ResultsFile::default();
    for i in 0..3u32 {
        let mut x = boot(i, "c", "quiet", &[100.0]);
        x.result.as_mut().unwrap().workloads[0].params.insert("count".into(), 50.into());
        c.boots.push(x);
    }
    let pc = dir.path().join("c.json");
    c.write(&pc).unwrap();
    let o = bootbench(&["compare", pa.to_str().unwrap(), pc.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(!o.status.success() && err.contains("different parameters"), "{err}");
}

#[test]
fn calibrate_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = ResultsFile::default();
    for i in 0..22u32 {
        let level = 380.0 * (1.0 + 0.004 * ((i * 7 % 11) as f64 - 5.0));
        f.boots.push(boot(i, "aa", "quiet", &[level, level * 1.001, level * 0.999]));
    }
    let p = dir.path().join("aa.json");
    f.write(&p).unwrap();
    let o = bootbench(&["calibrate", "--from", p.to_str().unwrap(), "--splits", "200"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("22 boots used, 66 iterations") && out.contains("200 random half-splits (11 v 11"), "{out}");
    assert!(out.contains("fork fork_rate ↑") && out.contains("any metric"), "{out}");
    let o = bootbench(&["calibrate", "--from", p.to_str().unwrap(), "--splits", "200", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["boots"], 22);
    let cv = v["metrics"][1]["cv_between_boots_pct"].as_f64().unwrap();
    assert!(cv > 0.5 && cv < 5.0, "{cv}");
}

#[test]
#[ignore = "needs Chromium (Debian's chromium): run scripts/test"]
fn html_report_renders_in_headless_chromium() {
    support::require(support::on_path("chromium"), "chromium (Debian package chromium)");
    let dir = tempfile::tempdir().unwrap();
    let run = two_kernel_file(dir.path());
    let html = dir.path().join("report.html");
    let o = bootbench(&["compare", run.to_str().unwrap(), "--format", "html", "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    let profile = tempfile::tempdir().unwrap();
    let shot = dir.path().join("report.png");
    let url = format!("file://{}", html.display());
    let chromium = |extra: &[&str]| headless_chromium(profile.path(), &url, extra);
    let dom = chromium(&["--dump-dom"]);
    assert!(dom.status.success(), "chromium --dump-dom failed: {}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    // The browser parsed the document: two figures per metric, each with an
    // inline SVG, and the labels where they belong.
    assert_eq!(dom.matches("<figure").count(), 4, "{dom}");
    assert_eq!(dom.matches("<svg").count(), 4, "{dom}");
    assert!(dom.contains("<title>bootbench compare: default vs mitigations-off</title>"), "title");
    for section in ["m-fork-fork_rate", "m-fork-fork_latency"] {
        assert!(dom.contains(&format!("id=\"{section}\"")), "{section} missing");
    }
    let svg_texts = svg_texts(&dom);
    assert!(svg_texts.iter().any(|t| t == "fork fork_rate: change against the baseline (%)"), "{svg_texts:?}");
    assert!(
        svg_texts.iter().any(|t| t == "fork fork_rate: values per iteration and per boot (forks/s)"),
        "{svg_texts:?}"
    );
    assert_eq!(svg_texts.iter().filter(|t| *t == "mitigations-off").count(), 4, "candidate labels: {svg_texts:?}");
    assert_eq!(svg_texts.iter().filter(|t| *t == "default").count(), 2, "baseline labels: {svg_texts:?}");
    assert!(dom.contains("class=\"name verdict-better\">better</td>"), "verdict cell");
    // It renders to pixels, not a blank page.
    let o = chromium(&["--window-size=1100,1600", &format!("--screenshot={}", shot.display())]);
    assert!(o.status.success(), "chromium --screenshot failed: {}", String::from_utf8_lossy(&o.stderr));
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "screenshot of {} bytes", png.len());
}

/// A one-kernel run of three boots whose iterations carry the system
/// counters' changes (context switches 5000 + n for the n-th iteration).
fn run_with_system_deltas(dir: &Path) -> PathBuf {
    use loads::schema::{CpuTime, SystemDeltas};
    let mut f = ResultsFile::default();
    let mut n = 0u64;
    for i in 0..3u32 {
        let mut b = boot(i, "<tuned>", "quiet", &[380.0 + i as f64, 381.5, 379.25]);
        for it in &mut b.result.as_mut().unwrap().workloads[0].iterations {
            n += 1;
            it.system = Some(SystemDeltas {
                context_switches: 5000 + n,
                forks: 1000,
                cpus: vec![CpuTime { cpu: 0, user_s: 0.5, system_s: 1.25, idle_s: 0.125, ..Default::default() }],
                interrupts: [("LOC".to_string(), 800 + n)].into(),
                softirqs: [("TIMER".to_string(), 300)].into(),
                vmstat: [("pgfault".to_string(), 20_000 + n as i64)].into(),
            });
        }
        f.boots.push(b);
    }
    let p = dir.join("one.json");
    f.write(&p).unwrap();
    p
}

#[test]
fn report_prints_the_table_or_writes_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_with_system_deltas(dir.path());
    let o = bootbench(&["report", run.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("fork_rate ↑") && out.contains("3 boot(s)"), "{out}");
    let o = bootbench(&["report", run.to_str().unwrap(), "--format", "html"]);
    let (page, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("Kernel &lt;tuned&gt;"), "{page}");
    for n in 1..=9 {
        assert!(page.contains(&format!("<td>{}</td><td>1000</td>", 5000 + n)), "iteration {n}'s deltas");
    }
    let html = dir.path().join("one.html");
    let o = bootbench(&["report", run.to_str().unwrap(), "--format", "html", "-o", html.to_str().unwrap()]);
    assert!(o.status.success() && o.stdout.is_empty(), "{:?}", text(&o));
    assert_eq!(std::fs::read_to_string(&html).unwrap(), page);
}

#[test]
#[ignore = "needs Chromium (Debian's chromium): run scripts/test"]
fn report_html_renders_in_headless_chromium() {
    support::require(support::on_path("chromium"), "chromium (Debian package chromium)");
    let dir = tempfile::tempdir().unwrap();
    let run = run_with_system_deltas(dir.path());
    let html = dir.path().join("report.html");
    let o = bootbench(&["report", run.to_str().unwrap(), "--format", "html", "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{:?}", text(&o));
    let profile = tempfile::tempdir().unwrap();
    let shot = std::env::var_os("BOOTBENCH_REPORT_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.path().join("report.png"));
    let url = format!("file://{}", html.display());
    let chromium = |extra: &[&str]| headless_chromium(profile.path(), &url, extra);
    let dom = chromium(&["--dump-dom"]);
    assert!(dom.status.success(), "chromium --dump-dom failed: {}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    // The browser parsed the document: a figure with its SVG per metric, a
    // row per iteration in each metric's table, the label escaped.
    assert_eq!(dom.matches("<figure").count(), 2, "{dom}");
    assert_eq!(dom.matches("<svg").count(), 2, "{dom}");
    assert_eq!(dom.matches("<td class=\"value\">").count(), 18, "{dom}");
    assert!(dom.contains("<h2 class=\"kernel\" id=\"k1\">Kernel &lt;tuned&gt;</h2>"), "{dom}");
    for section in ["k1-fork-fork_rate", "k1-fork-fork_latency"] {
        assert!(dom.contains(&format!("id=\"{section}\"")), "{section} missing");
    }
    let svg_texts = svg_texts(&dom);
    assert!(svg_texts.iter().any(|t| t == "fork fork_rate per iteration (forks/s)"), "{svg_texts:?}");
    assert!(svg_texts.iter().any(|t| t == "boot 2"), "legend: {svg_texts:?}");
    // It renders to pixels, not a blank page.
    let o = chromium(&["--window-size=1100,1600", &format!("--screenshot={}", shot.display())]);
    assert!(o.status.success(), "chromium --screenshot failed: {}", String::from_utf8_lossy(&o.stderr));
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "screenshot of {} bytes", png.len());
}

#[test]
#[ignore = "needs python3 with SciPy: run scripts/test"]
fn statistics_match_live_scipy() {
    use bootbench::stats::{power, proportion, welch};
    let probe = Command::new("python3").args(["-c", "import scipy"]).output();
    support::require(probe.is_ok_and(|o| o.status.success()), "python3 with scipy (scripts/setup installs it)");
    // Samples shaped like per-boot means of a noisy TCG machine.
    let base = [384.4, 379.1, 390.2, 386.0, 381.7, 377.3, 388.8];
    let cand = [395.3, 401.2, 392.8, 398.9, 404.0];
    let script = format!(
        "import numpy as np\nfrom scipy import stats, optimize\n\
         b=np.log({base:?}); c=np.log({cand:?})\n\
         r=stats.ttest_ind(c,b,equal_var=False); ci=r.confidence_interval(0.95)\n\
         print(r.statistic, r.pvalue, r.df, np.exp(ci.low), np.exp(ci.high))\n\
         print(*stats.binomtest(7, 400).proportion_ci(0.95, 'exact'))\n\
         c2=stats.t.ppf(0.975,18); print(stats.nct.sf(c2,18,2.2)+stats.nct.cdf(-c2,18,2.2))\n"
    );
    let o = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let nums: Vec<f64> = String::from_utf8_lossy(&o.stdout).split_whitespace().map(|t| t.parse().unwrap()).collect();
    let r = welch::log_ratio(&base, &cand).unwrap();
    let (lo, hi) = r.interval(0.05);
    for (got, want) in
        [(r.test.t, nums[0]), (r.test.p_value, nums[1]), (r.test.df, nums[2]), (lo, nums[3]), (hi, nums[4])]
    {
        assert!((got - want).abs() <= 1e-7 * want.abs().max(1e-3), "{got} vs SciPy {want}");
    }
    let cp = proportion::clopper_pearson(7, 400, 0.05).unwrap();
    assert!((cp.lo - nums[5]).abs() < 1e-9 && (cp.hi - nums[6]).abs() < 1e-9, "{cp:?} vs {nums:?}");
    assert!((power::power_of_t_test(2.2, 18.0, 0.05) - nums[7]).abs() < 2e-6);
}

/// Headless Chromium with its own profile directory, on `url`, with `extra`
/// options (`--dump-dom`, `--screenshot=...`).
fn headless_chromium(profile: &std::path::Path, url: &str, extra: &[&str]) -> std::process::Output {
    let mut c = Command::new("chromium");
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        &format!("--user-data-dir={}", profile.display()),
    ]);
    c.args(extra).arg(url);
    c.output().expect("run chromium")
}

/// The text of every SVG `<text>` element in a dumped DOM.
fn svg_texts(dom: &str) -> Vec<String> {
    dom.split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>'))
        .map(|(_, rest)| rest.split("</text>").next().unwrap_or("").trim().to_string())
        .collect()
}
