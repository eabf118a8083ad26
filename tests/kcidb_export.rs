//! `bootbench export --format kcidb` through the CLI, on results files made
//! here from a real boot of the standard suite (`fixtures/standard_suite_boot.json`:
//! one x86_64 TCG boot of Debian's kernel, its console cut to the last
//! lines and the system counters kept for each workload's first iteration)
//! and from variants of it: a failed workload, boots that panicked, hung or
//! lost their result, a kernel tree's boot. The output is checked here, and
//! against KCIDB's own validator (the `kcidb-io` Python package) in a test
//! that needs it (ignored by a plain `cargo test`, run by scripts/test;
//! scripts/setup installs the package).

mod support;

use bootbench::results::migration::read_results;
use bootbench::results::{BootRecord, ResultsFile};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(120);

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/standard_suite_boot.json")
}

/// The real boot of the fixture.
fn real_boot() -> BootRecord {
    let mut f = read_results(&fixture()).expect("the fixture reads as a results file");
    assert_eq!(f.boots.len(), 1);
    f.boots.remove(0)
}

/// The real boot again, as another boot (its own run id) of the same
/// kernel, with `change` applied.
fn variant(index: u32, change: impl FnOnce(&mut BootRecord)) -> BootRecord {
    let mut b = real_boot();
    b.boot.index = index;
    if let Some(doc) = &mut b.result {
        doc.run_id = format!("00000000-0000-4000-8000-{index:012}");
    }
    change(&mut b);
    b
}

/// A boot that ended without a guest document.
fn failed(b: &mut BootRecord, classification: &str, detail: &str) {
    b.result = None;
    b.boot.classification = classification.into();
    b.boot.detail = Some(detail.into());
    b.result_error = Some("the result stream ended early".into());
    b.console_log.push_str(&format!("{detail}\n"));
}

/// Two results files: the real boot as it is, and its variants.
fn write_inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let real = dir.join("real.json");
    ResultsFile { boots: vec![real_boot()], ..ResultsFile::default() }.write(&real).unwrap();
    let boots = vec![
        variant(1, |_| {}),
        variant(2, |b| {
            let doc = b.result.as_mut().unwrap();
            let dbench = doc.workloads.iter_mut().find(|w| w.name == "dbench").unwrap();
            dbench.iterations.truncate(1);
            dbench.error =
                Some("iteration 2: client 1: cannot create /work/clients/client1: No space left on device".into());
        }),
        variant(3, |b| {
            failed(b, "panic", "Kernel panic - not syncing: Attempted to kill the idle task!");
            b.boot.envelope_id = Some("host-0123456789abcdef0123456789abcdef".into());
        }),
        variant(4, |b| failed(b, "init_panic", "the appliance's init (PID 1) panicked at init/src/main.rs:1:1")),
        variant(5, |b| failed(b, "incomplete", "stream ended at chunk 3 of 96")),
        variant(6, |b| failed(b, "qemu_failure", "qemu-system-x86_64: cannot set up guest memory")),
        // No envelope id (files from before it was recorded).
        variant(7, |b| failed(b, "hang", "silence timeout: no console output for 120 s")),
        variant(8, |b| {
            b.kernel.package = Some("tree /src/linux (git 0123456789ab)".into());
            b.kernel.image_sha256 = "ab".repeat(32);
        }),
    ];
    let variants = dir.join("variants.json");
    ResultsFile { boots, ..ResultsFile::default() }.write(&variants).unwrap();
    (real, variants)
}

/// `bootbench export --format kcidb ARGS`, which must succeed: the JSON
/// it printed, and its stderr.
fn export(args: &[&str]) -> (Value, String) {
    let mut all = vec!["export", "--format", "kcidb"];
    all.extend_from_slice(args);
    let run = support::run_bootbench(&all, DEADLINE);
    run.assert_success();
    let data = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("export printed no JSON ({e}):\n{}", run.transcript()));
    (data, run.stderr)
}

fn tests_at<'a>(data: &'a Value, path: &str) -> Vec<&'a Value> {
    data["tests"].as_array().unwrap().iter().filter(|t| t["path"] == path).collect()
}

fn test_with_id<'a>(data: &'a Value, id: &str) -> &'a Value {
    data["tests"].as_array().unwrap().iter().find(|t| t["id"] == id).unwrap_or_else(|| panic!("no test {id}"))
}

#[test]
fn export_maps_every_boot_workload_and_metric() {
    let dir = support::scratch();
    let (real, variants) = write_inputs(dir.path());
    let (data, stderr) = export(&[real.to_str().unwrap(), variants.to_str().unwrap()]);

    // Two kernels (Debian's, and the tree's): a checkout and a build each.
    assert_eq!(data["checkouts"].as_array().unwrap().len(), 2, "{}", data["checkouts"]);
    assert_eq!(data["builds"].as_array().unwrap().len(), 2);
    let debian = &data["checkouts"][0];
    assert!(debian.get("git_commit_hash").is_none(), "no commit may be invented: {debian}");
    assert!(debian["misc"]["no_commit"].as_str().unwrap().contains("linux-image-6.1.0-57-amd64 6.1.192-3"));
    assert!(stderr.contains(&format!("{}: kernel group", real.display())), "the warning names the file:\n{stderr}");
    let tree = &data["checkouts"][1];
    assert_eq!(tree["git_commit_name"], "0123456789ab", "{tree}");
    assert!(tree.get("git_commit_hash").is_none());

    // The real boot: a PASS boot, a PASS per workload, a DONE per metric.
    let run_id = real_boot().result.unwrap().run_id;
    assert_eq!(test_with_id(&data, &format!("bootbench:{run_id}.boot"))["status"], "PASS");
    let fork_rate = test_with_id(&data, &format!("bootbench:{run_id}.1.fork.fork_rate"));
    assert_eq!(fork_rate["status"], "DONE");
    assert_eq!(fork_rate["number"]["unit"], "forks/s");
    assert!(fork_rate["number"]["value"].as_f64().unwrap() > 300.0, "{fork_rate}");
    assert_eq!(fork_rate["misc"]["iterations"].as_array().unwrap().len(), 5);
    assert_eq!(fork_rate["environment"]["misc"]["accel"], "tcg");
    let real_tests =
        data["tests"].as_array().unwrap().iter().filter(|t| t["misc"]["run_id"] == run_id.as_str()).count();
    // The boot, 6 workloads and their 2 + 11 + 11 + 12 + 2 + 4 metrics.
    assert_eq!(real_tests, 1 + 6 + 42);

    // The failed workload is there, as an ERROR, with its reason.
    let dbench = test_with_id(&data, "bootbench:00000000-0000-4000-8000-000000000002.2.dbench");
    assert_eq!(dbench["status"], "ERROR", "{dbench}");
    assert!(dbench["comment"].as_str().unwrap().contains("No space left on device"));
    let throughput = test_with_id(&data, "bootbench:00000000-0000-4000-8000-000000000002.2.dbench.throughput");
    assert_eq!(throughput["status"], "ERROR");

    // Each failed boot: its boot test only, the kernel's failures FAIL.
    let boots = tests_at(&data, "bootbench.boot");
    assert_eq!(boots.len(), 9);
    let status_of = |classification: &str| -> Vec<&str> {
        boots
            .iter()
            .filter(|t| t["misc"]["classification"] == classification)
            .map(|t| t["status"].as_str().unwrap())
            .collect()
    };
    assert_eq!(status_of("panic"), ["FAIL"]);
    assert_eq!(status_of("hang"), ["FAIL"]);
    assert_eq!(status_of("init_panic"), ["ERROR"]);
    assert_eq!(status_of("incomplete"), ["ERROR"]);
    assert_eq!(status_of("qemu_failure"), ["MISS"]);
    let panic = test_with_id(&data, "bootbench:host-0123456789abcdef0123456789abcdef.boot");
    assert!(panic["log_excerpt"].as_str().unwrap().contains("Attempted to kill the idle task"), "{panic}");

    // Ids are unique and every reference resolves.
    let ids = |list: &str| data[list].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap()).collect::<Vec<_>>();
    for list in ["checkouts", "builds", "tests"] {
        let all = ids(list);
        assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), all.len(), "{list} ids repeat");
    }
    let builds: BTreeSet<_> = ids("builds").into_iter().collect();
    assert!(data["tests"].as_array().unwrap().iter().all(|t| builds.contains(t["build_id"].as_str().unwrap())));

    // The same files again: the same output, byte for byte.
    let (again, _) = export(&[real.to_str().unwrap(), variants.to_str().unwrap()]);
    assert_eq!(again, data);
}

#[test]
fn export_names_its_origin_and_commit_and_writes_to_a_file() {
    let dir = support::scratch();
    let (real, _) = write_inputs(dir.path());
    let out = dir.path().join("kcidb.json");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let run = support::run_bootbench(
        [
            "export",
            "--format",
            "kcidb",
            real.to_str().unwrap(),
            "--origin",
            "lab_1",
            "--commit",
            commit,
            "--tree-name",
            "stable",
            "--git-url",
            "https://git.kernel.org/pub/scm/linux/kernel/git/stable/linux.git",
            "-o",
            out.to_str().unwrap(),
        ],
        DEADLINE,
    );
    run.assert_success();
    assert!(run.stdout.is_empty(), "{}", run.transcript());
    assert!(!run.stderr.contains("warning"), "a commit was given: nothing to warn about\n{}", run.stderr);
    let data: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let c = &data["checkouts"][0];
    assert_eq!((c["git_commit_hash"].as_str(), c["tree_name"].as_str()), (Some(commit), Some("stable")));
    assert!(data["tests"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["origin"] == "lab_1" && t["id"].as_str().unwrap().starts_with("lab_1:")));
}

#[test]
fn export_refuses_bad_input_and_says_which() {
    let dir = support::scratch();
    let (real, _) = write_inputs(dir.path());
    let missing = dir.path().join("missing.json");
    let not_results = dir.path().join("notes.json");
    std::fs::write(&not_results, "{\"hello\": 1}").unwrap();
    for (args, code, says) in [
        (vec![missing.to_str().unwrap()], 1, "missing.json".to_string()),
        (vec![real.to_str().unwrap(), not_results.to_str().unwrap()], 1, "notes.json".to_string()),
        (vec![real.to_str().unwrap(), "--origin", "Bad-Origin"], 1, "origin 'Bad-Origin'".to_string()),
        (vec![real.to_str().unwrap(), "--commit", "0123456789ab"], 1, "'0123456789ab' is not a full".to_string()),
    ] {
        let mut all = vec!["export", "--format", "kcidb"];
        all.extend(args);
        let run = support::run_bootbench(&all, DEADLINE);
        assert_eq!(run.code(), Some(code), "{all:?}\n{}", run.transcript());
        assert!(run.stderr.contains(&says), "{all:?} should say {says:?}:\n{}", run.stderr);
        assert!(run.stdout.is_empty(), "{all:?} printed output:\n{}", run.stdout);
    }
    let run = support::run_bootbench(["export", "--format", "junit", real.to_str().unwrap()], DEADLINE);
    assert_eq!(run.code(), Some(2), "{}", run.transcript());
    assert!(run.stderr.contains("'junit'") && run.stderr.contains("kcidb"), "{}", run.stderr);
}

/// KCIDB's validator, on what it is given: the schema (5.3, exactly),
/// and that ids are unique and references resolve. Prints what it found.
const VALIDATE: &str = r#"
import json, sys, kcidb_io
data = json.load(open(sys.argv[1]))
kcidb_io.schema.V5_3.validate_exactly(data)
for name in ("checkouts", "builds", "tests"):
    ids = [o["id"] for o in data.get(name, [])]
    assert len(ids) == len(set(ids)), f"{name}: repeated ids"
checkouts = {c["id"] for c in data["checkouts"]}
builds = {b["id"] for b in data["builds"]}
assert all(b["checkout_id"] in checkouts for b in data["builds"]), "a build of no checkout"
assert all(t["build_id"] in builds for t in data["tests"]), "a test of no build"
print("valid KCIDB", kcidb_io.schema.V5_3.major, kcidb_io.schema.V5_3.minor, len(data["checkouts"]),
      len(data["builds"]), len(data["tests"]))
"#;

#[test]
#[ignore = "needs python3 with kcidb-io: run scripts/test"]
fn kcidb_io_validates_the_export() {
    let probe = Command::new("python3").args(["-c", "import kcidb_io"]).output();
    support::require(
        probe.is_ok_and(|o| o.status.success()),
        "python3 with kcidb_io (scripts/setup installs kcidb-io)",
    );
    let dir = support::scratch();
    let (real, variants) = write_inputs(dir.path());
    let out = dir.path().join("kcidb.json");
    let run = support::run_bootbench(
        [
            "export",
            "--format",
            "kcidb",
            real.to_str().unwrap(),
            variants.to_str().unwrap(),
            "--tree-name",
            "mainline",
            "--git-url",
            "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git",
            "-o",
            out.to_str().unwrap(),
        ],
        DEADLINE,
    );
    run.assert_success();
    let v = Command::new("python3").args(["-c", VALIDATE]).arg(&out).output().expect("cannot run python3");
    let said = format!("{}{}", String::from_utf8_lossy(&v.stdout), String::from_utf8_lossy(&v.stderr));
    assert!(v.status.success(), "kcidb-io refused the export:\n{said}");
    eprintln!("{said}");
    assert!(said.starts_with("valid KCIDB 5 3 2 2 "), "{said}");
}
