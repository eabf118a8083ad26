//! LAVA: the jobs `bootbench lava job` writes pass LAVA's own job schema
//! (lava-common's validator, as a LAVA server runs it on submission), and
//! the `monitors` pattern in them reads the lines the init prints with the
//! ids LAVA keeps. No boots here; the real `lava-run` job is in the long
//! tier (`tests/lava_run.rs`).

mod support;

use std::path::Path;
use std::process::Command;
use support::{bootbench, require};

/// Debian's python3, which has lava-common (a pyenv python3 may come
/// first on PATH).
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

fn require_lava_common() {
    let ok = Command::new(SYSTEM_PYTHON).args(["-c", "import lava_common.schemas"]).status().is_ok_and(|s| s.success());
    require(ok, "lava-common for /usr/bin/python3 (apt-get install lava-common)");
}

/// lava-common's verdict on a job file: `Ok` or its error text.
fn lava_validate(job: &Path) -> Result<(), String> {
    let out = Command::new(SYSTEM_PYTHON)
        .args([
            "-c",
            "import sys, yaml\n\
             from lava_common.schemas import validate, extra_checks\n\
             d = yaml.safe_load(open(sys.argv[1]))\n\
             validate(d, strict=True)\n\
             extra_checks(d)\n",
        ])
        .arg(job)
        .output()
        .expect("run python3");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

const SHA_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const SHA_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn job_args(extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "lava",
        "job",
        "--kernel-url",
        "http://lab.example/vmlinuz",
        "--kernel-sha256",
        SHA_A,
        "--initramfs-url",
        "http://lab.example/bootbench.cpio.gz",
        "--initramfs-sha256",
        SHA_B,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn write_job(dir: &Path, name: &str, extra: &[&str]) -> std::path::PathBuf {
    let path = dir.join(name);
    let mut args = job_args(extra);
    args.extend(["-o".to_string(), path.display().to_string()]);
    let out = bootbench(&args).output().unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    path
}

/// The result document of a recorded boot's console (a quick suite).
fn recorded_document() -> loads::schema::RunDocument {
    let text = include_str!("../qemu/src/fixtures/streams.txt");
    let mut d = loads::console_protocol::Decoder::new();
    d.feed_text(text);
    let doc: loads::schema::RunDocument = serde_json::from_str(&d.last_document().unwrap()).unwrap();
    assert!(doc.workloads.iter().any(|w| !w.iterations.is_empty()), "the fixture measured nothing");
    doc
}

#[test]
fn every_boot_method_s_job_passes_lavas_own_schema() {
    require_lava_common();
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("qemu.yaml", &["--device-type", "qemu", "--no-kvm"]),
        ("qemu-ppc64.yaml", &["--device-type", "qemu", "--arch", "ppc64le", "--suite", "standard"]),
        ("ipxe.yaml", &["--device-type", "x86"]),
        (
            "grub.yaml",
            &[
                "--device-type",
                "x86",
                "--boot-method",
                "grub",
                "--kernel-commit",
                "0123456789abcdef0123456789abcdef01234567",
            ],
        ),
        ("u-boot.yaml", &["--device-type", "beaglebone-black", "--dtb-url", "http://lab.example/am335x-boneblack.dtb"]),
        ("other.yaml", &["--device-type", "my-lab-box", "--boot-method", "ipxe", "--append", "mitigations=off"]),
    ];
    for (name, extra) in cases {
        let job = write_job(dir.path(), name, extra);
        if let Err(e) = lava_validate(&job) {
            panic!("{name} fails LAVA's schema:\n{e}\n{}", std::fs::read_to_string(&job).unwrap());
        }
    }
    // The validator is not a rubber stamp: a job without the monitors'
    // pattern is refused.
    let job = dir.path().join("qemu.yaml");
    let text = std::fs::read_to_string(&job).unwrap();
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, text.replace("      pattern: ", "      patern: ")).unwrap();
    assert!(lava_validate(&broken).is_err(), "lava-common accepted a monitor without a pattern");
}

#[test]
fn the_jobs_pattern_reads_the_inits_lines_with_the_ids_lava_keeps() {
    require_lava_common();
    let dir = tempfile::tempdir().unwrap();
    let job = write_job(dir.path(), "qemu.yaml", &["--device-type", "qemu"]);
    // The lines of a real-shaped document, as the init prints them.
    let doc = recorded_document();
    let lines = loads::lava_lines::document_lines(&doc);
    let lines_file = dir.path().join("lines.txt");
    std::fs::write(&lines_file, lines.join("\n") + "\n").unwrap();
    // LAVA's monitor (lava_dispatcher/actions/test/monitor.py): the job's
    // pattern searched in the console, the id stripped, lowercased and
    // each run of non-word characters made `_`.
    let script = "import sys, re, yaml, json\n\
        job = yaml.safe_load(open(sys.argv[1]))\n\
        mon = job['actions'][2]['test']['monitors'][0]\n\
        out = []\n\
        for line in open(sys.argv[2]):\n\
        \x20   m = re.search(mon['pattern'], line)\n\
        \x20   if not m: out.append({'unmatched': line.strip()}); continue\n\
        \x20   g = m.groupdict()\n\
        \x20   case = re.sub(r'\\W+', '_', g['test_case_id'].strip().lower())\n\
        \x20   out.append({'raw': g['test_case_id'], 'case': case, 'result': g['result'], 'measurement': g['measurement'], 'units': g['units']})\n\
        print(json.dumps(out))\n";
    let out = Command::new(SYSTEM_PYTHON).args(["-c", script]).arg(&job).arg(&lines_file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got.len(), lines.len());
    let mut metrics = 0;
    for (line, g) in lines.iter().zip(&got) {
        assert!(g.get("unmatched").is_none(), "LAVA's pattern misses {line}");
        assert_eq!(g["raw"], g["case"], "LAVA changes the id of {line}");
        if let Some(m) = g["measurement"].as_str() {
            metrics += 1;
            let v: f64 = m.parse().unwrap_or_else(|_| panic!("measurement {m} of {line}"));
            assert!(v.is_finite());
            assert!(g["units"].as_str().is_some_and(|u| !u.is_empty()), "{line}");
        }
    }
    // Every metric of every workload is a case with its measurement.
    let want: usize = doc
        .workloads
        .iter()
        .map(|w| w.iterations.iter().flat_map(|i| i.metrics.keys()).collect::<std::collections::BTreeSet<_>>().len())
        .sum();
    assert_eq!(metrics, want);
    assert_eq!(got.last().unwrap()["case"], "bootbench_run");
}

#[test]
fn a_device_type_bootbench_cannot_boot_is_refused_listing_those_it_can() {
    let mut args = job_args(&["--device-type", "frobnicator-9000"]);
    args.push("-o".into());
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("job.yaml");
    args.push(out_file.display().to_string());
    let out = bootbench(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown LAVA device type 'frobnicator-9000'"), "{err}");
    for known in ["qemu", "x86", "beaglebone-black"] {
        assert!(err.contains(known), "{err}");
    }
    assert!(err.contains("--boot-method"), "{err}");
    assert!(!out_file.exists());
}

/// The definition `bootbench lava job` wrote for `monitors-job.log`
/// (a real lava-run of the quick suite, with the appliance's LAVA lines),
/// edited by `edit`, in `dir`.
fn monitors_definition(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> std::path::PathBuf {
    let text = std::fs::read_to_string(fixture("monitors-job.yaml")).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, edit(text)).unwrap();
    path
}

/// A recorded `lava-run` log (tests/fixtures/lava, from
/// tests/support/lava/run_example.sh): the quick suite booted by LAVA's
/// QEMU device under TCG.
fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lava").join(name)
}

fn import(log: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["lava".to_string(), "import".into(), log.display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["-o".to_string(), out.display().to_string()]);
    bootbench(&args).output().unwrap()
}

#[test]
fn a_lava_jobs_log_imports_as_a_results_file_that_compare_and_report_read() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (out, id) in [(&a, "9391"), (&b, "9392")] {
        let o = import(&fixture("ok-job.log"), out, &["--job-id", id, "--device", "qemu-01"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let file = bootbench::results::ResultsFile::read(&a).unwrap();
    let boot = &file.boots[0];
    assert_eq!(boot.boot.classification, "ok");
    let doc = boot.result.as_ref().expect("the checked document");
    assert_eq!(doc.workloads.len(), 6);
    // The kernel is the one LAVA fetched, by the sha256 LAVA computed.
    assert_eq!(boot.kernel.image_sha256, "85667e6c72245133bd7e3e80bac7d16b26fda15c0a3c68faa4b713850ea526cd");
    assert_eq!(boot.initramfs.bytes, 8317532);
    let lab = boot.lab.as_ref().unwrap();
    assert_eq!(
        (lab.system.as_str(), lab.job_id.as_deref(), lab.device.as_deref()),
        ("lava", Some("9391"), Some("qemu-01"))
    );
    assert_eq!(lab.result.as_deref(), Some("pass"));
    assert!(boot.channels[0].intact);
    assert!(boot.boot.to_hello_s.is_some_and(|s| s > 1.0 && s < boot.boot.wall_s), "{:?}", boot.boot);
    let cmp = bootbench(["compare".as_ref(), a.as_os_str(), b.as_os_str()]).output().unwrap();
    assert!(cmp.status.success(), "{}", String::from_utf8_lossy(&cmp.stderr));
    assert!(String::from_utf8_lossy(&cmp.stdout).contains("fork"));
    let rep = bootbench(["report".as_ref(), a.as_os_str()]).output().unwrap();
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
}

#[test]
fn a_log_whose_result_lost_chunks_names_them_and_writes_nothing() {
    let text = std::fs::read_to_string(fixture("ok-job.log")).unwrap();
    // Drop chunks 2 and 5 of the result stream (`@@BOOTBENCH R TAG 2/N`).
    let mut dropped = 0;
    let cut: String = text
        .lines()
        .filter(|l| {
            let drop = [" 2/", " 5/"].iter().any(|n| l.contains("@@BOOTBENCH R ") && l.contains(n));
            dropped += drop as usize;
            !drop
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(dropped, 2, "the fixture's result stream has chunks 2 and 5");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cut.log");
    std::fs::write(&log, cut).unwrap();
    let out = dir.path().join("r.json");
    let o = import(&log, &out, &[]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cut.log") && err.contains("2 of") && err.contains("missing [2, 5]"), "{err}");
    assert!(err.contains("nothing written"), "{err}");
    assert!(!out.exists());
}

#[test]
fn a_log_that_stops_before_the_jobs_end_is_refused_as_cut() {
    let text = std::fs::read_to_string(fixture("ok-job.log")).unwrap();
    let half: String = text.lines().take(text.lines().count() / 2).map(|l| format!("{l}\n")).collect();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("half.log");
    std::fs::write(&log, half).unwrap();
    let out = dir.path().join("r.json");
    let o = import(&log, &out, &[]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("half.log") && err.contains("it is cut"), "{err}");
    assert!(!out.exists());
    // Not a LAVA log at all: the line is named.
    std::fs::write(&log, "Linux version 6.1\n").unwrap();
    let err = String::from_utf8_lossy(&import(&log, &out, &[]).stderr).into_owned();
    assert!(err.contains("half.log: line 1 is not a LAVA log line"), "{err}");
}

#[test]
fn a_kernel_that_never_reached_the_init_is_the_kernels_failure_and_lavas_error_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.json");
    let o = import(&fixture("panic-job.log"), &out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let boot = &bootbench::results::ResultsFile::read(&out).unwrap().boots[0];
    // rdinit=/nonexistent: the kernel panics for want of a root.
    assert_eq!(boot.boot.classification, "boot_failure", "{:?}", boot.boot);
    assert!(boot.boot.detail.as_deref().is_some_and(|d| d.contains("Kernel panic")), "{:?}", boot.boot);
    assert!(boot.result.is_none());
    let lab = boot.lab.as_ref().unwrap();
    assert_eq!(lab.result.as_deref(), Some("fail"));
    assert!(lab.error.as_deref().is_some_and(|e| e.contains("timed out")), "{lab:?}");
}

#[test]
fn a_job_definition_naming_another_kernel_than_lava_fetched_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let job = write_job(dir.path(), "job.yaml", &["--device-type", "qemu"]);
    let out = dir.path().join("r.json");
    let o = import(&fixture("ok-job.log"), &out, &["--job", job.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("85667e6c72245133") && err.contains(SHA_A), "{err}");
    assert!(!out.exists());
}

/// A device configuration for `lava-run`: lava-server's `qemu` template
/// (from its package, cached beside the kernels) rendered for TCG.
fn render_qemu_device(dir: &Path) -> std::path::PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/lava");
    let cache = bootbench::kernel::default_cache_root().join("lava-server");
    let out = Command::new(here.join("unpack_server_templates.sh")).arg(&cache).output().unwrap();
    assert!(out.status.success(), "lava-server's templates: {}", String::from_utf8_lossy(&out.stderr));
    let templates = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let device = dir.join("device.yaml");
    let out = Command::new(SYSTEM_PYTHON)
        .arg(here.join("render_device.py"))
        .args([&templates, "amd64", device.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "render_device.py: {}", String::from_utf8_lossy(&out.stderr));
    device
}

/// Runs `job` with `lava-run` on `device`; its log (stderr), its
/// `result.yaml` and its wall time.
fn lava_run(dir: &Path, device: &Path, job: &Path, name: &str) -> (std::path::PathBuf, String, f64) {
    let out_dir = dir.join(format!("{name}-out"));
    let log = dir.join(format!("{name}.log"));
    let t0 = std::time::Instant::now();
    let status = Command::new("lava-run")
        .args(["--job-id", &format!("{}{}", std::process::id(), name.len())])
        .arg("--output-dir")
        .arg(&out_dir)
        .arg("--device")
        .arg(device)
        .arg(job)
        .stderr(std::fs::File::create(&log).unwrap())
        .status()
        .unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let result = std::fs::read_to_string(out_dir.join("result.yaml")).unwrap_or_default();
    eprintln!("lava-run {name}: {status}, {wall:.1} s, result.yaml: {}", result.trim());
    (log, result, wall)
}

#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_a_real_lava_run_job_reports_every_metric_and_a_panic_fails_the_job() {
    require_lava_common();
    support::require_program("lava-run");
    let k = support::require_x86_64_boot();
    let _lock = support::boot_lock();
    let dir = support::scratch();
    let d = dir.path();
    let initramfs = d.join("bootbench.cpio");
    support::run_bootbench(["image", "--suite", "quick", "-o", initramfs.to_str().unwrap()], support::BOOT_DEADLINE)
        .assert_success();
    let device = render_qemu_device(d);
    let kernel = k.image();
    let url = |p: &Path| format!("file://{}", p.display());
    let job_for = |name: &str, extra: &[&str]| {
        let path = d.join(format!("{name}.yaml"));
        let mut args: Vec<String> = vec!["lava".into(), "job".into(), "--device-type".into(), "qemu".into()];
        args.push("--no-kvm".into());
        for (flag, value) in [
            ("--kernel-url", url(&kernel)),
            ("--kernel", kernel.display().to_string()),
            ("--initramfs-url", url(&initramfs)),
            ("--initramfs", initramfs.display().to_string()),
            ("--label", name.to_string()),
            ("-o", path.display().to_string()),
        ] {
            args.extend([flag.to_string(), value]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let o = bootbench(&args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        lava_validate(&path).unwrap();
        path
    };

    // 1. A good job: LAVA passes it and records every metric. One boot
    // minute, and fork made to run longer than that (6 x 5000 forks, about
    // 85 s under TCG here) without a line LAVA's monitor matches: the
    // monitor's wait must not be the boot's. (With the boot action's
    // timeout at one minute, LAVA's monitor gave up after 60 s and LAVA
    // still passed the job.)
    let job = job_for("lava-ok", &["--boot-minutes", "1", "--append", "bootbench.fork.count=5000"]);
    let (log, result, lava_wall) = lava_run(d, &device, &job, "ok");
    assert!(result.contains("result: pass"), "LAVA failed the job: {result}\n{}", tail(&log));
    let imported = d.join("lava-ok.json");
    let o = import(&log, &imported, &["--job", job.to_str().unwrap(), "--job-id", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let boot = bootbench::results::ResultsFile::read(&imported).unwrap().boots.remove(0);
    assert_eq!(boot.boot.classification, "ok", "{:?}", boot.boot);
    let doc = boot.result.as_ref().unwrap();
    assert_eq!(format!("{:?}", doc.status), "Complete");
    assert_lava_recorded_every_metric(&log, doc);
    let text = std::fs::read_to_string(&log).unwrap();
    // What the lines cost: the end line says.
    let end = text.lines().find(|l| l.contains("bootbench-lava end")).unwrap_or_default();
    eprintln!("LAVA lines' console cost: {end}");

    // The same kernel and image with bootbench's own QEMU, for the wall
    // time, and `compare` reading both.
    let run_file = d.join("run.json");
    let t0 = std::time::Instant::now();
    support::run_bootbench(
        [
            "run",
            "--suite",
            "quick",
            "--accel",
            "tcg",
            "--initramfs",
            initramfs.to_str().unwrap(),
            "--label",
            "qemu",
            "--append",
            "bootbench.fork.count=5000",
            "-o",
            run_file.to_str().unwrap(),
        ],
        support::BOOT_DEADLINE,
    )
    .assert_success();
    let run_wall = t0.elapsed().as_secs_f64();
    eprintln!("wall: lava-run {lava_wall:.1} s, bootbench run {run_wall:.1} s");
    let cmp = bootbench(["compare".as_ref(), run_file.as_os_str(), imported.as_os_str()]).output().unwrap();
    assert!(cmp.status.success(), "{}", String::from_utf8_lossy(&cmp.stderr));

    // 2. A kernel that panics in the middle of the suite: LAVA fails the
    // job (its timeout: `panic=0` keeps the guest from running the suite
    // again), and the import says `panic`, keeping the finished workload.
    let job = job_for(
        "lava-panic",
        &["--append", "bootbench.test_fault=kernel-panic", "--suite-minutes", "2", "--boot-minutes", "3"],
    );
    let (log, result, wall) = lava_run(d, &device, &job, "panic");
    assert!(result.contains("result: fail"), "LAVA passed a panicking kernel: {result}");
    let out = d.join("lava-panic.json");
    let o = import(&log, &out, &["--job", job.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let boot = bootbench::results::ResultsFile::read(&out).unwrap().boots.remove(0);
    assert_eq!(boot.boot.classification, "panic", "{:?}\n{}", boot.boot, tail(&log));
    assert!(boot.result.is_none());
    let kept = boot.workloads_kept.as_ref().expect("the workload finished before the panic");
    assert_eq!(kept.workloads[0].name, "fork");
    eprintln!("panic job: LAVA failed it after {wall:.1} s: {:?}", boot.lab.as_ref().and_then(|l| l.error.clone()));
}

/// LAVA's own results in the job's log: a case for each workload and for
/// every metric of it, with a measurement equal to the document's mean
/// and the same unit.
fn assert_lava_recorded_every_metric(log: &Path, doc: &loads::schema::RunDocument) {
    let text = std::fs::read_to_string(log).unwrap();
    let parsed = bootbench::lava::log::JobLog::parse("job.log", &text).unwrap();
    let cases: std::collections::BTreeMap<String, bootbench::lava::log::CaseResult> =
        parsed.results().into_iter().filter(|r| r.definition == "bootbench").map(|r| (r.case.clone(), r)).collect();
    let mut checked = 0;
    for w in &doc.workloads {
        assert_eq!(cases.get(&w.name).map(|c| c.result.as_str()), Some("pass"), "workload {} in {cases:?}", w.name);
        let names: std::collections::BTreeSet<&String> = w.iterations.iter().flat_map(|i| i.metrics.keys()).collect();
        for m in names {
            let id = loads::lava_lines::case_id(&format!("{}_{m}", w.name));
            let c = cases.get(&id).unwrap_or_else(|| panic!("LAVA has no case {id}"));
            let values: Vec<f64> = w.iterations.iter().filter_map(|i| i.metrics.get(m)).map(|x| x.value).collect();
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let lava_value: f64 = match c.measurement.as_ref().unwrap() {
                serde_yaml_ng::Value::Tagged(t) => t.value.as_str().unwrap().parse().unwrap(),
                v => v.as_str().map(|s| s.parse().unwrap()).or(v.as_f64()).unwrap(),
            };
            assert!(
                (lava_value - mean).abs() <= 1e-9 * mean.abs().max(1.0),
                "{id}: LAVA {lava_value}, document {mean}"
            );
            let unit = &w.iterations[0].metrics[m].unit;
            assert_eq!(c.units.as_deref(), Some(unit.replace(' ', "_").as_str()), "{id}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} metrics");
    assert_eq!(cases.get("bootbench_run").map(|c| c.result.as_str()), Some("pass"));
}

#[test]
fn lava_recorded_every_metric_of_a_real_job_with_the_documents_mean_and_unit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let log = fixture("monitors-job.log");
    assert!(import(&log, &out, &["--job", fixture("monitors-job.yaml").to_str().unwrap()]).status.success());
    let boot = bootbench::results::ResultsFile::read(&out).unwrap().boots.remove(0);
    assert_eq!(boot.boot.classification, "ok");
    assert_lava_recorded_every_metric(&log, boot.result.as_ref().unwrap());
}

/// The end of a log, for failure messages.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

#[test]
fn the_jobs_kernel_commit_reaches_the_import_and_the_kcidb_checkout() {
    let dir = tempfile::tempdir().unwrap();
    // The fixture's job was written with this --kernel-commit.
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let job = fixture("monitors-job.yaml");
    assert!(std::fs::read_to_string(&job).unwrap().contains(commit));
    let out = dir.path().join("r.json");
    let o = import(&fixture("monitors-job.log"), &out, &["--job", job.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let boot = bootbench::results::ResultsFile::read(&out).unwrap().boots.remove(0);
    assert_eq!(boot.kernel.commit.as_deref(), Some(commit));
    assert_eq!(boot.lab.as_ref().unwrap().boot_method.as_deref(), Some("qemu"));
    let e = bootbench(["export".as_ref(), "--format".as_ref(), "kcidb".as_ref(), out.as_os_str()]).output().unwrap();
    assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
    let kcidb: serde_json::Value = serde_json::from_slice(&e.stdout).unwrap();
    assert_eq!(kcidb["checkouts"][0]["git_commit_hash"], commit, "{}", kcidb["checkouts"]);
    // A short or made-up commit is refused when the job is written.
    let mut bad = job_args(&["--device-type", "qemu", "--kernel-commit", "abc123"]);
    bad.extend(["-o".into(), dir.path().join("bad.yaml").display().to_string()]);
    let o = bootbench(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a full git commit"));
}

#[test]
fn a_job_on_a_lava_server_imports_by_its_url_through_the_rest_api() {
    support::require_program("python3");
    // A directory laid out as LAVA's REST API v0.2 answers, served over
    // HTTP: the job (definition, device, state) and its log.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("www");
    let job_dir = root.join("lab/api/v0.2/jobs/1234");
    std::fs::create_dir_all(job_dir.join("logs")).unwrap();
    let definition =
        std::fs::read_to_string(fixture("monitors-job.yaml")).unwrap().replace("lava-fixture", "from-server");
    let api = serde_json::json!({"id": 1234, "definition": definition, "actual_device": "qemu-07", "state": "Finished", "health": "Complete"});
    std::fs::write(job_dir.join("index.html"), api.to_string()).unwrap();
    std::fs::copy(fixture("monitors-job.log"), job_dir.join("logs/index.html")).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut server = Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1", &port.to_string()])
        .current_dir(&root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = support::wait_until(std::time::Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let out = dir.path().join("r.json");
    let url = format!("http://127.0.0.1:{port}/lab/scheduler/job/1234");
    let o = if up { Some(import(Path::new(&url), &out, &[])) } else { None };
    let missing =
        import(Path::new(&format!("http://127.0.0.1:{port}/lab/scheduler/job/999")), &dir.path().join("m.json"), &[]);
    let _ = server.kill();
    let _ = server.wait();
    let o = o.expect("the test's HTTP server did not start");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let boot = bootbench::results::ResultsFile::read(&out).unwrap().boots.remove(0);
    assert_eq!(boot.boot.classification, "ok");
    assert_eq!(boot.label, "from-server");
    let lab = boot.lab.unwrap();
    assert_eq!(lab.job_id.as_deref(), Some("1234"));
    assert_eq!(lab.device.as_deref(), Some("qemu-07"));
    assert_eq!(lab.device_type.as_deref(), Some("qemu"));
    assert_eq!(lab.url, Some(format!("http://127.0.0.1:{port}/lab/scheduler/job/1234")));
    assert_eq!(missing.status.code(), Some(1));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("/lab/api/v0.2/jobs/999/") && err.contains("404"), "{err}");
}

/// `ok-job.log` with `edit` applied to its lines, written in `dir`.
fn edited_log(dir: &Path, name: &str, mut edit: impl FnMut(&str) -> Vec<String>) -> std::path::PathBuf {
    let text = std::fs::read_to_string(fixture("ok-job.log")).unwrap();
    let out: String = text.lines().flat_map(&mut edit).map(|l| l + "\n").collect();
    let path = dir.join(name);
    std::fs::write(&path, out).unwrap();
    path
}

#[test]
fn a_log_of_two_boots_or_two_jobs_or_another_jobs_definition_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    // The device rebooted and the appliance started again (a hello of its
    // own: another boot time).
    let hello = loads::console_protocol::event("hello", "version=0.1.0 boottime=4.250000");
    let line = format!("{{\"dt\": \"2026-12-04T19:30:00.000000\", \"lvl\": \"target\", \"msg\": \"{hello}\"}}");
    let twice = edited_log(dir.path(), "twice.log", |l| {
        if l.contains("\"case\": \"job\"") {
            vec![line.clone(), l.to_string()]
        } else {
            vec![l.to_string()]
        }
    });
    let o = import(&twice, &out, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("twice.log") && err.contains("started 2 times"), "{err}");
    assert!(!out.exists());
    // Two jobs' logs joined.
    let joined = dir.path().join("joined.log");
    let mut text = std::fs::read_to_string(fixture("ok-job.log")).unwrap();
    text.push_str(&std::fs::read_to_string(fixture("panic-job.log")).unwrap());
    std::fs::write(&joined, text).unwrap();
    let err = String::from_utf8_lossy(&import(&joined, &out, &[]).stderr).into_owned();
    assert!(err.contains("joined.log") && err.contains("2 LAVA jobs"), "{err}");
    assert!(!out.exists());
    // The log's own definition is accepted; one with another initramfs or
    // another cmdline is another job's.
    let log = fixture("monitors-job.log");
    let own = monitors_definition(dir.path(), "own.yaml", |t| t);
    assert!(import(&log, &out, &["--job", own.to_str().unwrap()]).status.success());
    std::fs::remove_file(&out).unwrap();
    let initramfs_sha = |t: &str| {
        let line = t.lines().find(|l| l.contains("bootbench.initramfs.sha256:")).unwrap();
        line.rsplit(' ').next().unwrap().to_string()
    };
    let other_image = monitors_definition(dir.path(), "other-image.yaml", |t| {
        let sha = initramfs_sha(&t);
        t.replace(&sha, SHA_B)
    });
    let other_cmdline = monitors_definition(dir.path(), "other-cmdline.yaml", |t| {
        t.replace(
            "bootbench.cmdline: console=ttyS0,115200n8",
            "bootbench.cmdline: console=ttyS0,115200n8 mitigations=off",
        )
    });
    for (job, words) in [(other_image, "initramfs with sha256"), (other_cmdline, "'mitigations=off'")] {
        let o = import(&log, &out, &["--job", job.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", job.display());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(words) && err.contains("another job"), "{}: {err}", job.display());
        assert!(!out.exists());
    }
}

#[test]
fn lavas_timeouts_and_its_own_failures_classify_as_a_hang_and_a_harness_failure() {
    let dir = tempfile::tempdir().unwrap();
    // Cut the console after the first workload's stream: the monitor timed
    // out (LAVA's warning), LAVA still passed the job.
    let mut after_fork = false;
    let silent = edited_log(dir.path(), "silent.log", |l| {
        if l.contains("bootbench: workload dbench starting") {
            after_fork = true;
        }
        let console = l.contains("\"lvl\": \"target\"") || l.contains("\"lvl\": \"feedback\"");
        if after_fork && console {
            return vec![];
        }
        if l.contains("\"case\": \"job\"") {
            return vec![
                "{\"dt\": \"2026-12-04T19:40:00.000000\", \"lvl\": \"warning\", \"msg\": \"err: lava test monitoring has timed out\"}".into(),
                l.to_string(),
            ];
        }
        vec![l.to_string()]
    });
    let out = dir.path().join("s.json");
    let o = import(&silent, &out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let boot = bootbench::results::ResultsFile::read(&out).unwrap().boots.remove(0);
    assert_eq!(boot.boot.classification, "hang", "{:?}", boot.boot);
    assert_eq!(boot.workloads_kept.as_ref().unwrap().workloads[0].name, "fork");
    // Imported again: the same run id, not a new one.
    let again = dir.path().join("s2.json");
    assert!(import(&silent, &again, &[]).status.success());
    let id = |p: &Path| bootbench::results::ResultsFile::read(p).unwrap().boots[0].boot.envelope_id.clone();
    assert!(id(&out).is_some_and(|i| i.starts_with("host-")));
    assert_eq!(id(&out), id(&again));
    // LAVA's own failure (its connection to the device broke) in the
    // middle of the suite: the harness's, as when QEMU itself fails.
    let mut cut = false;
    let infra = edited_log(dir.path(), "infra.log", |l| {
        if l.contains("bootbench: workload dbench starting") {
            cut = true;
        }
        let console = l.contains("\"lvl\": \"target\"") || l.contains("\"lvl\": \"feedback\"");
        if cut && console {
            return vec![];
        }
        if l.contains("\"case\": \"job\"") {
            return vec!["{\"dt\": \"2026-12-04T19:40:00.000000\", \"lvl\": \"results\", \"msg\": {\"case\": \"job\", \"definition\": \"lava\", \"error_msg\": \"Connection closed\", \"error_type\": \"Infrastructure\", \"result\": \"fail\"}}".into()];
        }
        vec![l.to_string()]
    });
    let out = dir.path().join("i.json");
    let o = import(&infra, &out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let boot = bootbench::results::ResultsFile::read(&out).unwrap().boots.remove(0);
    assert_eq!(boot.lab.as_ref().unwrap().error_type.as_deref(), Some("Infrastructure"));
    assert_eq!(boot.boot.classification, "qemu_failure", "{:?}", boot.boot);
    assert!(
        boot.boot.detail.as_deref().is_some_and(|d| d.contains("Infrastructure") && d.contains("Connection closed")),
        "{:?}",
        boot.boot
    );
}

#[test]
fn a_quote_in_the_cmdline_or_an_overlong_job_name_is_refused_before_lava_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, words) in [
        (
            vec!["--device-type", "qemu", "--append", "note=it's -hda /etc/shadow"],
            "''' cannot be in a LAVA job's cmdline",
        ),
        (vec!["--device-type", "qemu", "--console", "ttyS0{kernel}"], "cannot be in a LAVA job's cmdline"),
    ] {
        let mut args = job_args(&extra);
        let job = dir.path().join("job.yaml");
        args.extend(["-o".into(), job.display().to_string()]);
        let o = bootbench(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{extra:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(words), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(!job.exists());
    }
    let long = "x".repeat(190);
    let mut args = job_args(&["--device-type", "qemu", "--label", &long]);
    args.extend(["-o".into(), dir.path().join("j.yaml").display().to_string()]);
    let o = bootbench(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 to 200 characters"));
}

#[test]
fn the_boot_action_waits_as_long_as_the_suite_since_lavas_monitor_waits_with_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let job =
        write_job(dir.path(), "job.yaml", &["--device-type", "qemu", "--boot-minutes", "3", "--suite-minutes", "40"]);
    let v: serde_json::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&job).unwrap()).unwrap();
    let minutes = |action: usize, name: &str| v["actions"][action][name]["timeout"]["minutes"].as_u64().unwrap();
    assert_eq!(minutes(0, "deploy"), 3);
    assert_eq!(minutes(1, "boot"), 43);
    assert_eq!(minutes(2, "test"), 40);
    assert_eq!(v["timeouts"]["job"]["minutes"].as_u64(), Some(3 + 43 + 40));
}

#[test]
fn a_missing_log_or_image_file_is_named_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = import(&dir.path().join("no-such.log"), &out, &[]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot read the job log") && err.contains("no-such.log"), "{err}");
    assert!(!out.exists());
    let o = import(&fixture("ok-job.log"), &out, &["--job", dir.path().join("no-job.yaml").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-job.yaml"));
    assert!(!out.exists());
    let job = dir.path().join("job.yaml");
    let kernel = dir.path().join("no-vmlinuz");
    let args = [
        "lava",
        "job",
        "--device-type",
        "qemu",
        "--kernel-url",
        "http://lab/vmlinuz",
        "--kernel",
        kernel.to_str().unwrap(),
        "--initramfs-url",
        "http://lab/i.cpio",
        "--initramfs-sha256",
        SHA_B,
        "-o",
        job.to_str().unwrap(),
    ];
    let o = bootbench(args).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-vmlinuz"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!job.exists());
}
