//! dbench and tbench in a real boot: one TCG boot of the Debian amd64
//! kernel runs both workloads and each reports throughput and
//! per-operation latency. dbench replays the built-in loadfile (the quick
//! suite's); tbench replays Debian's client.txt, which `bootbench run`
//! packs into the image, pinned by its sha256, as the standard and full
//! suites do. tbench needs the loopback interface, which nothing in the
//! appliance configures but the workload itself.

mod support;

use loads::known_loadfiles::{CLIENT_TXT, CLIENT_TXT_SHA256};
use loads::schema::{Better, Status};
use support::*;

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn dbench_and_tbench_report_metrics_in_the_guest() {
    let _k = require_x86_64_boot();
    let _boot = boot_lock();
    let dir = scratch();
    let out = dir.path().join("results.json");
    let suite = dir.path().join("suite.json");
    let phases = serde_json::json!({ "clients": 2, "warmup_s": 0.5, "duration_s": 2.0 });
    let mut tbench = phases.clone();
    tbench["loadfile"] = CLIENT_TXT.into();
    tbench["loadfile_sha256"] = CLIENT_TXT_SHA256.into();
    let doc = serde_json::json!({ "name": "nbench", "iterations": 1, "warmup": 0, "workloads": [
        { "name": "dbench", "params": phases },
        { "name": "tbench", "params": tbench },
    ]});
    std::fs::write(&suite, doc.to_string()).unwrap();
    let run = run_with_deadline(
        {
            let mut c = bootbench(["run", "--accel", "tcg", "--label", "nbench", "--suite"]);
            c.arg(&suite).arg("-o").arg(&out);
            c
        },
        BOOT_DEADLINE,
    );
    assert!(run.stderr.contains(&format!("run: packed {CLIENT_TXT} (sha256 {CLIENT_TXT_SHA256})")), "{}", run.stderr);
    run.assert_success();
    let boot = only_boot(&out, &run);
    assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, boot.console_log);
    let doc = boot.result.as_ref().expect("an ok boot must carry the guest document");
    assert_eq!(doc.status, Status::Complete, "errors: {:?}; workloads: {:?}", doc.errors, doc.workloads);
    let names: Vec<&str> = doc.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["dbench", "tbench"]);
    for w in &doc.workloads {
        assert_eq!(w.error, None, "{}", w.name);
        assert_eq!(w.iterations.len(), 1, "{}", w.name);
        let (loadfile, sha) = match w.name.as_str() {
            "dbench" => ("builtin", loads::workloads::nbench::builtin_loadfile::BUILTIN_SHA256),
            _ => (CLIENT_TXT, CLIENT_TXT_SHA256),
        };
        assert_eq!(
            (&w.params["loadfile"], &w.params["loadfile_sha256"]),
            (&loadfile.into(), &sha.into()),
            "{}",
            w.name
        );
        let it = &w.iterations[0];
        let tp = &it.metrics["throughput"];
        assert_eq!((tp.unit.as_str(), tp.better), ("MB/s", Better::Higher), "{}", w.name);
        assert!(tp.value > 0.0, "{}: throughput {}", w.name, tp.value);
        let lat = &it.metrics["readx_avg_latency"];
        assert_eq!((lat.unit.as_str(), lat.better), ("ms", Better::Lower), "{}", w.name);
        assert!(lat.value > 0.0, "{}", w.name);
        let reads = it.detail["ops"]["ReadX"]["count"].as_u64().unwrap_or(0);
        assert!(reads > 0, "{}: no ReadX completed: {}", w.name, it.detail["ops"]);
        assert_eq!(it.detail["clients"], 2, "{}: the quick suite's client count", w.name);
        eprintln!(
            "{}: {:.1} MB/s, {:.0} ops/s, ReadX avg {:.3} ms, max latency {:.1} ms",
            w.name, tp.value, it.metrics["operation_rate"].value, lat.value, it.metrics["max_latency"].value
        );
    }
    let dbench = &doc.workloads[0].iterations[0];
    assert_eq!(dbench.detail["counters"]["find_count_mismatches"], 0, "the built-in loadfile replays exactly");
}
