//! What the console protocol costs: bytes on the wire per byte of result
//! document, for protocol v1 (the format before issue 14, reproduced below)
//! and v2 (`console_protocol::encode`).
//!
//! `cargo run --release -p bootbench-loads --example framing_overhead`
//!
//! The documents are `RunDocument`s shaped like the guest's (provenance,
//! workloads whose iterations carry metrics and system-counter deltas),
//! grown to about 2 KB, 50 KB and 500 KB, serialised compact as the init
//! does. Wire bytes count each line and its newline as the guest writes
//! them (the serial console adds one CR per line on top).

use loads::console_protocol::{encode, StreamKind, MARKER};
use loads::schema::{
    CpuTime, GuestTimings, Iteration, Metric, Provenance, RunDocument, Status, SystemDeltas, WorkloadResult,
    SCHEMA_VERSION,
};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// A boot id as the guest has it (/proc/sys/kernel/random/boot_id).
const BOOT_ID: &str = "6f1c2a7e-3b9d-4e0f-a5c8-2d71b04e9f36";

/// PROTOCOL V1, for comparison only: the line layout before issue 14.
/// `BEGIN <id> chunks=<n> bytes=<len> sha256=<hex>`, then `DATA <id>
/// <seq>/<n> <crc32> <payload>` with 192-byte payloads, then `END <id>`.
fn encode_v1(id: &str, document: &str) -> Vec<String> {
    const V1_CHUNK_BYTES: usize = 192;
    let mut chunks = Vec::new();
    let mut rest = document;
    while rest.len() > V1_CHUNK_BYTES {
        let mut cut = V1_CHUNK_BYTES;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (a, b) = rest.split_at(cut);
        chunks.push(a);
        rest = b;
    }
    chunks.push(rest);
    let n = chunks.len();
    let mut lines = vec![format!(
        "{MARKER} BEGIN {id} chunks={n} bytes={} sha256={}",
        document.len(),
        hex::encode(Sha256::digest(document.as_bytes()))
    )];
    for (i, chunk) in chunks.iter().enumerate() {
        lines.push(format!("{MARKER} DATA {id} {}/{n} {:08x} {chunk}", i + 1, crc32fast::hash(chunk.as_bytes())));
    }
    lines.push(format!("{MARKER} END {id}"));
    lines
}

fn wire_bytes(lines: &[String]) -> usize {
    lines.iter().map(|l| l.len() + 1).sum()
}

/// A small deterministic generator, so every run prints the same figures.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn around(&mut self, v: f64) -> f64 {
        let f = 0.97 + (self.next() % 6000) as f64 / 100_000.0;
        (v * f * 1000.0).round() / 1000.0
    }
}

/// A metric's name, typical value, unit, and whether higher is better.
type MetricShape = (&'static str, f64, &'static str, bool);

fn iteration(rng: &mut Rng, metrics: &[MetricShape]) -> Iteration {
    let mut it = Iteration::default();
    for &(name, v, unit, higher) in metrics {
        let v = rng.around(v);
        it.metrics.insert(name.to_string(), if higher { Metric::higher(v, unit) } else { Metric::lower(v, unit) });
    }
    it.detail.insert("wall_s".into(), rng.around(10.0).into());
    let cpus = (0..2)
        .map(|cpu| CpuTime {
            cpu,
            user_s: rng.around(2.5),
            system_s: rng.around(6.0),
            idle_s: rng.around(0.4),
            softirq_s: rng.around(0.02),
            ..CpuTime::default()
        })
        .collect();
    let mut interrupts = BTreeMap::new();
    for name in ["4 IO-APIC 4-edge ttyS0", "CAL", "LOC", "RES", "TLB"] {
        interrupts.insert(name.to_string(), rng.next() % 9000);
    }
    let softirqs = ["RCU", "SCHED", "TIMER"].iter().map(|n| (n.to_string(), rng.next() % 5000)).collect();
    let vmstat = ["nr_free_pages", "pgalloc_normal", "pgfault", "pgfree"]
        .iter()
        .map(|n| (n.to_string(), (rng.next() % 10_000_000) as i64))
        .collect();
    it.system = Some(SystemDeltas {
        context_switches: rng.next() % 90_000,
        forks: rng.next() % 30_000,
        cpus,
        interrupts,
        softirqs,
        vmstat,
    });
    it
}

/// A result document of at least `target` bytes, and its workloads' JSON.
fn document(target: usize) -> (String, Vec<String>) {
    let mut rng = Rng(0x5eed_1414);
    let mut provenance = Provenance::default();
    provenance.kernel.release = "6.1.0-48-amd64".into();
    provenance.kernel.version = "#1 SMP PREEMPT_DYNAMIC Debian 6.1.172-1 (2026-05-15)".into();
    provenance.kernel.cmdline = "console=ttyS0 panic=-1 bootbench.port=org.bootbench.results".into();
    provenance.machine.arch = "x86_64".into();
    provenance.machine.cpu_model = "QEMU Virtual CPU version 2.5+".into();
    provenance.mitigations.insert("spectre_v2".into(), "Mitigation: Retpolines; STIBP: disabled".into());
    provenance.suite.name = "quick".into();
    let mut doc = RunDocument {
        schema_version: SCHEMA_VERSION,
        run_id: BOOT_ID.into(),
        status: Status::Complete,
        errors: vec![],
        provenance,
        timings: GuestTimings { init_start_s: 4.26, first_workload_s: Some(4.9), workloads_done_s: Some(71.3) },
        workloads: vec![],
    };
    let kinds: [(&str, &[MetricShape]); 3] = [
        ("fork", &[("fork_rate", 11873.2, "forks/s", true), ("fork_latency_us", 84.2, "us", false)]),
        ("hackbench", &[("time_s", 1.73, "s", false)]),
        ("dbench", &[("throughput", 412.7, "MB/s", true), ("max_latency_ms", 12.4, "ms", false)]),
    ];
    // Workloads of 5 iterations each, in turn, until the whole document
    // reaches the target.
    let mut started = 0;
    while serde_json::to_string(&doc).map_or(0, |s| s.len()) < target {
        if doc.workloads.last().is_none_or(|w| w.iterations.len() >= 5) {
            let (name, _) = kinds[started % kinds.len()];
            doc.workloads.push(WorkloadResult { name: name.into(), warmup: 1, ..WorkloadResult::default() });
            started += 1;
        }
        let w = doc.workloads.last_mut().expect("one was just pushed");
        let metrics = kinds.iter().find(|k| k.0 == w.name).map_or(&[][..], |k| k.1);
        w.iterations.push(iteration(&mut rng, metrics));
    }
    let workloads = doc.workloads.iter().map(|w| serde_json::to_string(w).expect("serialises")).collect();
    (serde_json::to_string(&doc).expect("serialises"), workloads)
}

fn main() {
    println!("console framing overhead: wire bytes (lines + newlines) per document byte");
    println!(
        "{:>9} {:>7} | {:>9} {:>6} {:>7} | {:>9} {:>6} {:>7} | {:>9} {:>7}",
        "document", "wl", "v1 wire", "lines", "ratio", "v2 wire", "lines", "ratio", "v2 boot", "ratio"
    );
    for target in [2_000, 50_000, 500_000] {
        let (doc, workloads) = document(target);
        let v1 = encode_v1(BOOT_ID, &doc);
        let v2 = encode(StreamKind::Result, BOOT_ID, &doc);
        // What a v2 guest prints in all: each workload's stream, then the
        // result stream (which holds the workloads again).
        let per_workload: usize = workloads.iter().map(|w| wire_bytes(&encode(StreamKind::Workload, BOOT_ID, w))).sum();
        let boot = per_workload + wire_bytes(&v2);
        let ratio = |wire: usize| wire as f64 / doc.len() as f64;
        println!(
            "{:>9} {:>7} | {:>9} {:>6} {:>7.3} | {:>9} {:>6} {:>7.3} | {:>9} {:>7.3}",
            doc.len(),
            format!("{}wl", workloads.len()),
            wire_bytes(&v1),
            v1.len(),
            ratio(wire_bytes(&v1)),
            wire_bytes(&v2),
            v2.len(),
            ratio(wire_bytes(&v2)),
            boot,
            ratio(boot),
        );
    }
    println!("v1: 192-byte chunks, boot id on every line (the format before issue 14)");
    println!("v2: {}-byte chunks, boot id in the header only", loads::console_protocol::CHUNK_BYTES);
    println!("v2 boot: the result stream plus every per-workload stream the guest also prints");
}
