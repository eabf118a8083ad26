//! The suite's workloads on this host, without booting. Each workload runs
//! in this process exactly as the guest's workload child runs it, so
//! development and tests need no boot.

use anyhow::Context;
use loads::runner;
use loads::schema::RunDocument;
use loads::suite::Suite;
use loads::workload::RunContext;
use std::path::Path;

/// Runs every workload of `suite` here, in `work_dir` (default: a fresh
/// temporary directory), and returns the finished document.
pub fn run_suite(suite: &Suite, work_dir: Option<&Path>) -> anyhow::Result<RunDocument> {
    let tmp;
    let work_dir = match work_dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create work dir {}", d.display()))?;
            d.to_path_buf()
        }
        None => {
            tmp = tempfile::Builder::new().prefix("bootbench-local-").tempdir().context("cannot create a temp dir")?;
            tmp.path().to_path_buf()
        }
    };
    let ctx = RunContext::new(suite.seed, work_dir);
    let run_id = uuid::Uuid::new_v4().to_string();
    let mut doc = runner::begin_document(&run_id, Some(suite), None);
    let kmsg = loads::provenance::KmsgCursor::open(false);
    for spec in &suite.workloads {
        eprintln!("local: workload {} ...", spec.name);
        doc.workloads.push(runner::run_workload(suite, spec, &ctx, false));
    }
    let mut kmsg = kmsg;
    runner::finish_document(&mut doc, kmsg.warnings());
    Ok(doc)
}
