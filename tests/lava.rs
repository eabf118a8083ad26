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
        ("grub.yaml", &["--device-type", "x86", "--boot-method", "grub", "--kernel-commit", "abc123"]),
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
    assert_eq!((lab.system.as_str(), lab.job_id.as_deref(), lab.device.as_deref()), ("lava", Some("9391"), Some("qemu-01")));
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
