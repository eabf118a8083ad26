//! Synthetic boots for the comparison's tests: documents shaped like the
//! guest's, with chosen values.

use crate::results::{BootInfo, BootRecord, KernelRef, MachineShape};
use loads::schema::{Iteration, Metric, Provenance, RunDocument, Status, WorkloadResult, SCHEMA_VERSION};

/// A `fork`-shaped workload: per iteration a rate (higher is better) and
/// its latency (lower is better).
pub fn fork_workload(count: u64, rates: &[f64]) -> WorkloadResult {
    let mut params = serde_json::Map::new();
    params.insert("count".into(), count.into());
    WorkloadResult {
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
    }
}

/// A guest document holding `workloads`.
pub fn doc(workloads: Vec<WorkloadResult>) -> RunDocument {
    let mut provenance = Provenance::default();
    provenance.kernel.release = "6.1.0-test".into();
    provenance.machine.cpus = 2;
    provenance.bootbench.version = "0.1.0".into();
    RunDocument {
        schema_version: SCHEMA_VERSION,
        run_id: "r".into(),
        status: Status::Complete,
        errors: vec![],
        provenance,
        timings: Default::default(),
        workloads,
    }
}

/// A successful boot of kernel `sha` with `label`.
pub fn boot(index: u32, label: &str, sha: &str, doc: RunDocument) -> BootRecord {
    BootRecord {
        label: label.into(),
        cmdline: "console=ttyS0 quiet".into(),
        kernel: KernelRef { image_sha256: sha.into(), release: Some("6.1.0-test".into()), ..Default::default() },
        machine: MachineShape {
            arch: "x86_64".into(),
            smp: 2,
            mem_mib: 1024,
            accel: "tcg".into(),
            ..Default::default()
        },
        boot: BootInfo { index, classification: "ok".into(), wall_s: 20.0, ..Default::default() },
        result: Some(doc),
        ..Default::default()
    }
}

/// Boots of one kernel, one per entry of `per_boot` (each the iteration
/// rates of that boot), numbered from `first_index`.
pub fn fork_boots(first_index: u32, label: &str, sha: &str, per_boot: &[&[f64]]) -> Vec<BootRecord> {
    per_boot
        .iter()
        .enumerate()
        .map(|(i, rates)| boot(first_index + i as u32, label, sha, doc(vec![fork_workload(1000, rates)])))
        .collect()
}
