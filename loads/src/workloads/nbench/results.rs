//! Turns the clients' reports into an iteration of the result schema:
//! throughput in MB/s (10^6 bytes, as dbench prints it), the largest
//! latency, the operation rate, the average latency of the operations that
//! dominate the mix, and dbench's per-operation table in the detail. Owns
//! metric names and units; must not measure anything.

use super::client_driver::DriverOutcome;
use super::loadfile::{Loadfile, OpKind};
use crate::schema::{Iteration, Metric};
use serde_json::{json, Map, Value};

/// Operations whose average latency is a metric of its own (the ones that
/// dominate client.txt's mix, plus Flush: the fsync path).
pub const LATENCY_METRICS: &[OpKind] = &[
    OpKind::NtCreateX,
    OpKind::Close,
    OpKind::ReadX,
    OpKind::WriteX,
    OpKind::Qpathinfo,
    OpKind::Find,
    OpKind::Unlink,
    OpKind::Flush,
];

/// The metric name of an operation's average latency, e.g.
/// `readx_avg_latency`.
pub fn latency_metric_name(kind: OpKind) -> String {
    format!("{}_avg_latency", kind.name().to_ascii_lowercase())
}

/// Builds the iteration for one run of the clients.
pub fn iteration(outcome: &DriverOutcome, lf: &Loadfile) -> Iteration {
    let secs = outcome.measured_s.max(1e-9);
    let ops = outcome.ops();
    let mut it = Iteration::default();
    it.metrics.insert("throughput".into(), Metric::higher(outcome.bytes() as f64 / 1e6 / secs, "MB/s"));
    let total_ops: u64 = ops.iter().map(|o| o.count).sum();
    it.metrics.insert("operation_rate".into(), Metric::higher(total_ops as f64 / secs, "ops/s"));
    let max_ns = ops.iter().map(|o| o.max_ns).max().unwrap_or(0);
    it.metrics.insert("max_latency".into(), Metric::lower(max_ns as f64 / 1e6, "ms"));
    for &kind in LATENCY_METRICS {
        if let Some(s) = ops.get(kind.index()).filter(|s| s.count > 0) {
            it.metrics.insert(latency_metric_name(kind), Metric::lower(s.avg_ms(), "ms"));
        }
    }
    let mut table = Map::new();
    for kind in OpKind::ALL {
        if let Some(s) = ops.get(kind.index()).filter(|s| s.count > 0) {
            table.insert(
                kind.name().into(),
                json!({ "count": s.count, "avg_ms": s.avg_ms(), "max_ms": s.max_ns as f64 / 1e6 }),
            );
        }
    }
    let mut counters: std::collections::BTreeMap<String, u64> = Default::default();
    for c in &outcome.clients {
        for (k, v) in &c.counters {
            *counters.entry(k.clone()).or_default() += v;
        }
    }
    let d = &mut it.detail;
    d.insert("ops".into(), Value::Object(table));
    d.insert("clients".into(), outcome.clients.len().into());
    d.insert("measured_s".into(), outcome.measured_s.into());
    d.insert("bytes".into(), outcome.bytes().into());
    d.insert("operations".into(), total_ops.into());
    d.insert(
        "client_throughput_mb_s".into(),
        outcome.clients.iter().map(|c| c.bytes as f64 / 1e6 / secs).collect::<Vec<f64>>().into(),
    );
    let passes: u64 = outcome.clients.iter().map(|c| c.passes).sum();
    d.insert("passes_started".into(), passes.into());
    d.insert("loadfile".into(), lf.name.clone().into());
    d.insert("loadfile_sha256".into(), lf.sha256.clone().into());
    d.insert("loadfile_lines".into(), lf.lines.len().into());
    d.insert("counters".into(), json!(counters));
    d.insert("clients_user_s".into(), outcome.usage.user_s.into());
    d.insert("clients_sys_s".into(), outcome.usage.sys_s.into());
    d.insert("clients_context_switches".into(), outcome.usage.context_switches().into());
    d.insert("clients_minor_faults".into(), outcome.usage.minor_faults.into());
    it
}

#[cfg(test)]
mod tests {
    use super::super::client_driver::{ClientReport, OpStat};
    use super::*;
    use crate::reap::Usage;

    #[test]
    fn metrics_have_units_directions_and_dbench_arithmetic() {
        let lf = Loadfile::parse("t", b"ReadX 1 0 10 10 NT_STATUS_OK\n").unwrap();
        let mut ops = vec![OpStat::default(); OpKind::COUNT];
        ops[OpKind::ReadX.index()] = OpStat { count: 4, total_ns: 8_000_000, max_ns: 5_000_000 };
        ops[OpKind::Close.index()] = OpStat { count: 2, total_ns: 1_000_000, max_ns: 700_000 };
        let client = ClientReport { id: 0, bytes: 3_000_000, lines: 6, passes: 2, ops, ..Default::default() };
        let out = DriverOutcome { clients: vec![client.clone(), client], measured_s: 2.0, usage: Usage::default() };
        let it = iteration(&out, &lf);
        assert_eq!(it.metrics["throughput"], Metric::higher(3.0, "MB/s"));
        assert_eq!(it.metrics["operation_rate"], Metric::higher(6.0, "ops/s"));
        assert_eq!(it.metrics["max_latency"], Metric::lower(5.0, "ms"));
        assert_eq!(it.metrics["readx_avg_latency"], Metric::lower(2.0, "ms"));
        assert_eq!(it.metrics["close_avg_latency"], Metric::lower(0.5, "ms"));
        assert!(!it.metrics.contains_key("writex_avg_latency"), "no WriteX ran");
        assert_eq!(it.detail["ops"]["ReadX"]["count"], json!(8));
        assert_eq!(it.detail["client_throughput_mb_s"], json!([1.5, 1.5]));
        assert_eq!(it.detail["loadfile_sha256"], json!(lf.sha256));
    }
}
