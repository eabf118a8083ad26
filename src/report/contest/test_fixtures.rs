//! Synthetic contest boots for the tests: documents shaped like the
//! workload's contract (per row `time_R`, `cpu_percent_R`, `loads_R`,
//! `lcpu_percent_R`, `ratio_R`; failures as `R: message`), with chosen
//! values.

use crate::compare::test_fixtures;
use crate::results::BootRecord;
use loads::schema::{Iteration, Metric, StorageInfo, WorkloadResult};

/// One row's measured values: (row, time s, build CPU%, loads, load CPU%).
pub type RowRun<'a> = (&'a str, f64, f64, f64, f64);

/// The unit contest states for a row's Loads.
pub fn unit_of(row: &str) -> &'static str {
    match row {
        "process_load" => "loops",
        "ctar_load" | "xtar_load" => "archives",
        "io_load" | "read_load" => "MiB",
        "fork_load" => "forks",
        _ => "units",
    }
}

/// One contest iteration: the rows measured, and the rows that failed
/// (`("io_load", "the load died")`). `ratio_R` is over this iteration's
/// no_load, when it has one.
pub fn iteration(rows: &[RowRun], failed: &[(&str, &str)]) -> Iteration {
    let mut it = Iteration::default();
    let no_load = rows.iter().find(|r| r.0 == "no_load").map(|r| r.1);
    let mut detail_rows = Vec::new();
    for &(row, time, cpu, loads, lcpu) in rows {
        it.metrics.insert(format!("time_{row}"), Metric::lower(time, "s"));
        it.metrics.insert(format!("cpu_percent_{row}"), Metric::lower(cpu, "%"));
        it.metrics.insert(format!("loads_{row}"), Metric::higher(loads, unit_of(row)));
        it.metrics.insert(format!("lcpu_percent_{row}"), Metric::higher(lcpu, "%"));
        if let Some(base) = no_load {
            it.metrics.insert(format!("ratio_{row}"), Metric::lower(time / base, "ratio"));
        }
        detail_rows.push(serde_json::json!({"row": row, "load_unit": unit_of(row)}));
    }
    for (row, message) in failed {
        it.errors.push(format!("{row}: {message}"));
        detail_rows.push(serde_json::json!({"row": row, "load_unit": unit_of(row)}));
    }
    it.detail.insert("rows".into(), serde_json::Value::Array(detail_rows));
    it
}

/// A contest workload with a foreground build of `size` and `iterations`.
pub fn workload(size: u64, iterations: Vec<Iteration>) -> WorkloadResult {
    let mut params = serde_json::Map::new();
    params.insert("build_size".into(), size.into());
    params.insert("load_lead_s".into(), 3.into());
    WorkloadResult { name: "contest".into(), params, warmup: 0, error: None, iterations, quiet: None }
}

/// The storage a contest boot records.
pub fn storage(scheduler: &str) -> StorageInfo {
    StorageInfo {
        scratch_device: Some("/dev/vda".into()),
        scratch_label: None,
        scratch_fs: Some("ext4".into()),
        scratch_mount: Some("/scratch".into()),
        scratch_bytes: Some(2048 * 1024 * 1024),
        scheduler: Some(scheduler.into()),
        swap_device: Some("/dev/vdb".into()),
        swap_bytes: Some(512 * 1024 * 1024),
        zram: None,
        pack_device: None,
        pack_mount: None,
        pack_store: None,
    }
}

/// A boot of kernel `label` (image `sha`) holding `workloads`, with a run
/// id unique to (label, index) and a scratch disk under `scheduler`.
pub fn boot(index: u32, label: &str, sha: &str, scheduler: &str, workloads: Vec<WorkloadResult>) -> BootRecord {
    let mut doc = test_fixtures::doc(workloads);
    doc.run_id = format!("{label}-{index}");
    doc.provenance.storage = Some(storage(scheduler));
    test_fixtures::boot(index, label, sha, doc)
}

/// A boot with one contest workload of default size over `iterations`.
pub fn contest_boot(index: u32, label: &str, sha: &str, iterations: Vec<Iteration>) -> BootRecord {
    boot(index, label, sha, "mq-deadline", vec![workload(100, iterations)])
}
