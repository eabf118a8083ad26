use super::objects::Status;
use super::*;
use crate::compare::test_fixtures::{boot, doc, fork_workload};
use crate::results::ResultsFile;

const SHA: &str = "85667e6c72245133bd7e3e80bac7d16b26fda15c0a3c68faa4b713850ea526cd";

fn file(boots: Vec<BootRecord>) -> ResultsFile {
    ResultsFile { boots, ..ResultsFile::default() }
}

/// A complete boot of the fork workload with the guest's run id `run_id`.
fn fork_boot(index: u32, run_id: &str) -> BootRecord {
    let mut d = doc(vec![fork_workload(1000, &[100.0, 110.0, 120.0])]);
    d.run_id = run_id.into();
    d.provenance.started_at = "2026-12-04T16:45:57Z".into();
    boot(index, "", SHA, d)
}

fn export_of(boots: Vec<BootRecord>, options: &KcidbOptions) -> Export {
    let f = file(boots);
    export(&[NamedResults { name: "runs/a.json".into(), file: &f }], options).unwrap()
}

fn json(e: &Export) -> serde_json::Value {
    serde_json::to_value(&e.data).unwrap()
}

fn test_at<'a>(e: &'a Export, path: &str) -> Vec<&'a objects::Test> {
    e.data.tests.iter().filter(|t| t.path == path).collect()
}

#[test]
fn each_classification_has_the_status_kcidb_defines_for_it() {
    // The kernel's failures are FAIL; the harness's are ERROR or MISS.
    for (classification, want) in [
        ("ok", Status::Pass),
        ("panic", Status::Fail),
        ("oops", Status::Fail),
        ("hang", Status::Fail),
        ("boot_failure", Status::Fail),
        ("init_panic", Status::Error),
        ("incomplete", Status::Error),
        ("qemu_failure", Status::Miss),
        ("something_new", Status::Error),
    ] {
        assert_eq!(boot_status(classification), want, "{classification}");
    }
}

#[test]
fn a_panicked_boot_is_a_failed_boot_test_with_the_console_tail_and_no_workloads() {
    let mut b = fork_boot(0, "x");
    b.result = None;
    b.boot.classification = "panic".into();
    b.boot.detail = Some("Kernel panic - not syncing: Fatal exception".into());
    b.boot.envelope_id = Some("host-0123".into());
    b.console_log = format!("{}\nKernel panic - not syncing: Fatal exception\n", "x".repeat(40_000));
    let e = export_of(vec![b], &KcidbOptions::default());
    assert_eq!(e.data.tests.len(), 1, "{:?}", e.data.tests);
    let t = &e.data.tests[0];
    assert_eq!(
        (t.path.as_str(), t.status, t.id.as_str()),
        ("bootbench.boot", Status::Fail, "bootbench:host-0123.boot")
    );
    let excerpt = t.log_excerpt.as_deref().unwrap();
    assert!(excerpt.chars().count() <= 16384, "{}", excerpt.len());
    assert!(excerpt.starts_with("Kernel panic - not syncing: Fatal exception\n"), "{}", &excerpt[..80]);
    assert!(excerpt.ends_with("Fatal exception\n"));
    assert!(t.comment.as_deref().unwrap().starts_with("panic: Kernel panic"), "{:?}", t.comment);
}

#[test]
fn a_complete_measurement_is_done_with_its_mean_and_unit() {
    let e = export_of(vec![fork_boot(0, "run-a")], &KcidbOptions::default());
    let boot = test_at(&e, "bootbench.boot");
    assert_eq!(boot[0].status, Status::Pass);
    assert_eq!(boot[0].start_time.as_deref(), Some("2026-12-04T16:45:57Z"));
    let w = test_at(&e, "bootbench.fork");
    assert_eq!(w[0].status, Status::Pass);
    let rate = test_at(&e, "bootbench.fork.fork_rate");
    assert_eq!(rate.len(), 1);
    assert_eq!(rate[0].status, Status::Done);
    assert_eq!(rate[0].number, Some(Number { value: 110.0, unit: Some("forks/s".into()) }));
    assert_eq!(rate[0].id, "bootbench:run-a.1.fork.fork_rate");
    let v = json(&e);
    let rate_json = v["tests"].as_array().unwrap().iter().find(|t| t["path"] == "bootbench.fork.fork_rate").unwrap();
    assert_eq!(rate_json["misc"]["iterations"], serde_json::json!([100.0, 110.0, 120.0]));
    assert_eq!(rate_json["environment"]["misc"]["smp"], 2);
    assert_eq!(v["version"], serde_json::json!({"major": 5, "minor": 3}));
}

#[test]
fn a_failed_workload_is_an_error_test_and_never_disappears() {
    let mut failed = fork_workload(1000, &[100.0]);
    failed.error = Some("iteration 2: fork: Resource temporarily unavailable".into());
    let mut empty = fork_workload(1000, &[]);
    empty.name = "dbench".into();
    empty.error = Some("no scratch disk".into());
    let mut d = doc(vec![failed, empty]);
    d.run_id = "run-f".into();
    let e = export_of(vec![boot(0, "", SHA, d)], &KcidbOptions::default());
    let fork = test_at(&e, "bootbench.fork");
    assert_eq!(fork.len(), 1);
    assert_eq!(fork[0].status, Status::Error);
    assert!(fork[0].comment.as_deref().unwrap().contains("Resource temporarily unavailable"), "{:?}", fork[0].comment);
    // What it measured before it stopped is there, not counted as complete.
    let rate = test_at(&e, "bootbench.fork.fork_rate");
    assert_eq!(rate[0].status, Status::Error);
    assert_eq!(rate[0].number.as_ref().map(|n| n.value), Some(100.0));
    // A workload that measured nothing is still a test.
    let dbench = test_at(&e, "bootbench.dbench");
    assert_eq!(dbench.len(), 1, "{:?}", e.data.tests.iter().map(|t| &t.path).collect::<Vec<_>>());
    assert_eq!(dbench[0].status, Status::Error);
    assert!(e.data.tests.iter().all(|t| !matches!(t.status, Status::Fail)), "a workload's error blames no kernel");
}

#[test]
fn a_part_of_an_iteration_that_failed_makes_its_workload_an_error() {
    let mut w = fork_workload(1000, &[100.0, 100.0]);
    w.iterations[1].errors.push("row io_load: the load died".into());
    assert_eq!(workload_status(&w), Status::Error);
    w.iterations[1].errors.clear();
    assert_eq!(workload_status(&w), Status::Pass);
}

#[test]
fn a_workload_the_suite_did_not_run_is_a_miss_not_an_error() {
    let mut w = fork_workload(1000, &[]);
    w.error = Some("not run: the watchdog's 600 s ran out before workload fork".into());
    assert_eq!(workload_status(&w), Status::Miss);
    w.error = Some("the watchdog killed it".into());
    assert_eq!(workload_status(&w), Status::Error);
}

#[test]
fn a_nan_metric_has_no_number_and_is_an_error() {
    let mut d = doc(vec![fork_workload(1000, &[100.0, f64::NAN])]);
    d.run_id = "run-n".into();
    let e = export_of(vec![boot(0, "", SHA, d)], &KcidbOptions::default());
    let rate = test_at(&e, "bootbench.fork.fork_rate");
    assert_eq!(rate[0].status, Status::Error);
    assert_eq!(rate[0].number, None);
    let text = serde_json::to_string(&e.data).unwrap();
    assert!(!text.contains("null"), "KCIDB allows no null: {text}");
    assert!(text.contains("\"NaN\""), "the iteration's value is kept as text");
}

#[test]
fn without_a_commit_the_checkout_has_no_hash_and_says_why() {
    let mut b = fork_boot(0, "run-a");
    b.kernel.package = Some("linux-image-6.1.0-57-amd64 6.1.192-3".into());
    let e = export_of(vec![b], &KcidbOptions::default());
    let v = json(&e);
    let checkout = &v["checkouts"][0];
    assert!(checkout.get("git_commit_hash").is_none(), "{checkout}");
    let why = checkout["misc"]["no_commit"].as_str().unwrap();
    assert!(why.contains("no git commit") && why.contains("linux-image-6.1.0-57-amd64 6.1.192-3"), "{why}");
    assert!(checkout["comment"].as_str().unwrap().contains("no git commit"), "{checkout}");
    assert_eq!(e.warnings.len(), 1);
    assert!(e.warnings[0].starts_with("runs/a.json: "), "{:?}", e.warnings);

    // With --commit the hash is there and nothing is said.
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let options = KcidbOptions { commit: Some(commit.to_uppercase()), ..Default::default() };
    let e = export_of(vec![fork_boot(0, "run-a")], &options);
    let v = json(&e);
    assert_eq!(v["checkouts"][0]["git_commit_hash"], commit);
    assert!(v["checkouts"][0]["misc"].get("no_commit").is_none());
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
}

#[test]
fn a_trees_short_commit_is_its_name_and_must_agree_with_commit() {
    let mut b = fork_boot(0, "run-a");
    b.kernel.package = Some("tree /src/linux/build (source /src/linux, git 0123456789ab)".into());
    let e = export_of(vec![b.clone()], &KcidbOptions::default());
    let c = &e.data.checkouts[0];
    assert_eq!(c.git_commit_name.as_deref(), Some("0123456789ab"));
    assert_eq!(c.git_commit_hash, None, "a short hash is not KCIDB's full hash");
    assert!(c.misc.no_commit.as_deref().unwrap().contains("short commit 0123456789ab"), "{:?}", c.misc);

    let f = file(vec![b]);
    let named = [NamedResults { name: "t.json".into(), file: &f }];
    let agrees = KcidbOptions { commit: Some("0123456789ab0000000000000000000000000000".into()), ..Default::default() };
    assert!(export(&named, &agrees).is_ok());
    let differs = KcidbOptions { commit: Some("f".repeat(40)), ..Default::default() };
    let err = export(&named, &differs).unwrap_err().to_string();
    assert!(err.contains("t.json") && err.contains("0123456789ab"), "{err}");

    // No git in the tree: nothing to name.
    let mut b = fork_boot(0, "run-b");
    b.kernel.package = Some("tree /tmp/fixture-tree (no git)".into());
    assert_eq!(export_of(vec![b], &KcidbOptions::default()).data.checkouts[0].git_commit_name, None);
}

#[test]
fn a_bisect_label_names_the_commit() {
    let mut b = fork_boot(0, "run-a");
    b.label = "0123456789ab".into();
    let e = export_of(vec![b], &KcidbOptions::default());
    assert_eq!(e.data.checkouts[0].git_commit_name.as_deref(), Some("0123456789ab"));
    assert!(e.data.checkouts[0].misc.commit_from.as_deref().unwrap().contains("bisect"));
}

#[test]
fn ids_are_stable_per_boot_and_distinct_across_boots() {
    let boots = vec![fork_boot(0, "run-a"), fork_boot(1, "run-b")];
    let first = export_of(boots.clone(), &KcidbOptions::default());
    let again = export_of(boots.clone(), &KcidbOptions::default());
    assert_eq!(first.data, again.data);
    // The boots in the other order: each boot keeps its ids.
    let reversed = export_of(boots.into_iter().rev().collect(), &KcidbOptions::default());
    let ids = |e: &Export| e.data.tests.iter().map(|t| t.id.clone()).collect::<BTreeSet<_>>();
    assert_eq!(ids(&first), ids(&reversed));
    assert_eq!(ids(&first).len(), first.data.tests.len(), "ids repeat");
    // One kernel group: one checkout and one build, every test on it.
    assert_eq!((first.data.checkouts.len(), first.data.builds.len()), (1, 1));
    assert!(first.data.tests.iter().all(|t| t.build_id == first.data.builds[0].id));
    // The origin starts every id.
    let other = export_of(vec![fork_boot(0, "run-a")], &KcidbOptions { origin: "lab_7".into(), ..Default::default() });
    assert!(other.data.tests.iter().all(|t| t.id.starts_with("lab_7:run-a.") && t.origin == "lab_7"));
    assert!(other.data.builds[0].id.starts_with("lab_7:build-85667e6c72245133-"));
}

#[test]
fn a_boot_without_a_document_or_an_envelope_id_gets_a_stable_id() {
    let mut b = fork_boot(0, "x");
    b.result = None;
    b.boot.classification = "hang".into();
    let a = export_of(vec![b.clone()], &KcidbOptions::default());
    let again = export_of(vec![b.clone()], &KcidbOptions::default());
    assert_eq!(a.data.tests[0].id, again.data.tests[0].id);
    b.boot.index = 1;
    let other = export_of(vec![b], &KcidbOptions::default());
    assert_ne!(a.data.tests[0].id, other.data.tests[0].id);
}

#[test]
fn two_kernel_groups_are_two_checkouts_and_builds() {
    let mut other = fork_boot(1, "run-b");
    other.cmdline.push_str(" mitigations=off");
    let e = export_of(vec![fork_boot(0, "run-a"), other], &KcidbOptions::default());
    assert_eq!((e.data.checkouts.len(), e.data.builds.len()), (2, 2));
    assert_ne!(e.data.builds[0].id, e.data.builds[1].id);
    assert_eq!(test_at(&e, "bootbench.boot")[1].build_id, e.data.builds[1].id);
    assert_eq!(e.data.builds[1].misc.cmdline, "console=ttyS0 quiet mitigations=off");
}

#[test]
fn a_boot_given_twice_is_exported_once_with_a_warning() {
    let f = file(vec![fork_boot(0, "run-a")]);
    let named = [NamedResults { name: "a.json".into(), file: &f }, NamedResults { name: "b.json".into(), file: &f }];
    let options = KcidbOptions { commit: Some("0".repeat(40)), ..Default::default() };
    let e = export(&named, &options).unwrap();
    assert_eq!(test_at(&e, "bootbench.boot").len(), 1);
    assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
    assert!(e.warnings[0].starts_with("b.json: ") && e.warnings[0].contains("a.json"), "{:?}", e.warnings);
}

#[test]
fn bad_options_and_empty_results_are_refused() {
    for origin in ["", "Bootbench", "boot-bench", "a:b"] {
        assert!(matches!(check_origin(origin), Err(KcidbError::Origin(_))), "{origin}");
    }
    assert!(check_origin("kernelci_lab_1").is_ok());
    let f = file(vec![fork_boot(0, "r")]);
    let named = [NamedResults { name: "a.json".into(), file: &f }];
    let refuse = |o: KcidbOptions| export(&named, &o).unwrap_err();
    assert!(matches!(refuse(KcidbOptions { origin: "no way".into(), ..Default::default() }), KcidbError::Origin(_)));
    assert!(matches!(refuse(KcidbOptions { commit: Some("abc".into()), ..Default::default() }), KcidbError::Commit(_)));
    let url = Some("git://git.kernel.org/linux.git".into());
    assert!(matches!(refuse(KcidbOptions { git_url: url, ..Default::default() }), KcidbError::GitUrl(_)));
    let empty = file(vec![]);
    let none = export(&[NamedResults { name: "e.json".into(), file: &empty }], &KcidbOptions::default());
    assert!(matches!(none, Err(KcidbError::NoBoots)));
    // One commit for two kernels cannot be right.
    let mut b = fork_boot(1, "s");
    b.kernel.image_sha256 = "ff".repeat(32);
    let two = file(vec![fork_boot(0, "r"), b]);
    let options = KcidbOptions { commit: Some("0".repeat(40)), ..Default::default() };
    let err = export(&[NamedResults { name: "two.json".into(), file: &two }], &options).unwrap_err();
    assert!(matches!(err, KcidbError::CommitForSeveralKernels { kernels: 2 }), "{err}");
}

#[test]
fn names_become_kcidb_path_parts() {
    assert_eq!(path_part("fork_rate"), "fork_rate");
    assert_eq!(path_part("ratio_io-load"), "ratio_io-load");
    assert_eq!(path_part("time pipe.process/%"), "time_pipe_process__");
    assert_eq!(path_part(""), "_");
}
