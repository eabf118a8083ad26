//! The suite runner: warmup then measured iterations of one workload in the
//! calling process, with the quiet-userland evidence; and the document that
//! gathers workload results with their provenance.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use crate::error_chain::error_chain;
use crate::provenance;
use crate::quiet;
use crate::schema::{
    GuestTimings, Provenance, QuietObservation, RunDocument, RunError, SuiteInfo, WorkloadResult,
    WorkloadStreamDocument, SCHEMA_VERSION,
};
use crate::suite::{Suite, WorkloadSpec};
use crate::system_counters::IterationCounters;
use crate::workload::RunContext;
use crate::workloads;
use std::time::{Instant, SystemTime};

/// Runs `spec` from `suite`: warmup iterations (discarded), then measured
/// ones. Failures end the workload and are recorded in its `error`; the
/// iterations measured before stay. With `observe_quiet`, PID 1's context
/// switches and foreign userspace tasks are recorded for the measured phase.
/// Each measured iteration carries the system counters' changes over it
/// (`Iteration::system`).
pub fn run_workload(suite: &Suite, spec: &WorkloadSpec, ctx: &RunContext, observe_quiet: bool) -> WorkloadResult {
    let warmup = suite.warmup_for(spec);
    let iterations = suite.iterations_for(spec);
    let mut result =
        WorkloadResult { name: spec.name.clone(), params: spec.params.clone(), warmup, ..Default::default() };
    let mut w = match workloads::prepare(&spec.name, &spec.params, ctx) {
        Ok(w) => w,
        Err(e) => {
            result.error = Some(error_chain(&e));
            return result;
        }
    };
    result.params = w.params();
    // Every result names the version of the workload that made it.
    if let Some(v) = workloads::version(&spec.name) {
        result.params.insert(crate::workload::VERSION_PARAM.into(), v.into());
    }
    for i in 1..=warmup {
        if let Err(e) = w.run_iteration() {
            result.error = Some(format!("warmup iteration {i}: {}", error_chain(&e)));
            return result;
        }
    }
    let me = std::process::id() as i32;
    let mut obs = QuietObservation {
        workload_process: if observe_quiet { quiet::process_state() } else { None },
        ..Default::default()
    };
    let mut counters = IterationCounters::default();
    for i in 1..=iterations {
        let others = if observe_quiet { quiet::other_userspace_tasks(me) } else { 0 };
        let before = if observe_quiet { quiet::pid1_switches() } else { None };
        counters.start();
        let t0 = Instant::now();
        let outcome = w.run_iteration();
        let wall = t0.elapsed().as_secs_f64();
        let system = counters.finish();
        if let (Some((v0, n0)), Some((v1, n1))) = (before, if observe_quiet { quiet::pid1_switches() } else { None }) {
            obs.pid1_voluntary_switches += v1.saturating_sub(v0);
            obs.pid1_involuntary_switches += n1.saturating_sub(n0);
        }
        obs.measured_s += wall;
        obs.other_userspace_tasks = obs.other_userspace_tasks.max(others);
        match outcome {
            Ok(mut it) => {
                // Evidence only: without /proc the iteration still counts.
                if it.system.is_none() {
                    it.system = system.ok();
                }
                drop_non_finite_metrics(&mut it);
                result.iterations.push(it)
            }
            Err(e) => {
                result.error = Some(format!("iteration {i}: {}", error_chain(&e)));
                break;
            }
        }
    }
    if observe_quiet {
        result.quiet = Some(obs);
    }
    result
}

/// The JSON of `workload`'s own console stream: its result with its
/// position in the suite (from 1), see [`WorkloadStreamDocument`].
pub fn workload_stream_json(position: usize, workload: &WorkloadResult) -> serde_json::Result<String> {
    let position = u32::try_from(position).unwrap_or(u32::MAX);
    serde_json::to_string(&WorkloadStreamDocument { position, workload: workload.clone() })
}

/// Moves every metric whose value is NaN or infinite out of `it` and into
/// its errors, naming the metric: JSON has no such numbers, so one would
/// otherwise turn the whole workload's result unreadable.
pub fn drop_non_finite_metrics(it: &mut crate::schema::Iteration) {
    let bad: Vec<String> = it.metrics.iter().filter(|(_, m)| !m.value.is_finite()).map(|(k, _)| k.clone()).collect();
    for name in bad {
        if let Some(m) = it.metrics.remove(&name) {
            it.errors.push(format!("metric {name} is not a finite number ({}); left out", m.value));
        }
    }
}

/// RFC 3339 time of day, seconds precision.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// A document for a run that starts now. Provenance other than the start
/// time is gathered by [`finish_document`], after the workloads, so reading
/// /proc and /sys does not delay the first workload. `suite` may be absent
/// when configuration failed.
pub fn begin_document(run_id: &str, suite: Option<&Suite>, accel: Option<String>) -> RunDocument {
    RunDocument {
        schema_version: SCHEMA_VERSION,
        run_id: run_id.to_string(),
        status: crate::schema::Status::Error,
        errors: Vec::new(),
        provenance: Provenance {
            machine: crate::schema::MachineInfo { accel, ..Default::default() },
            suite: suite
                .map(|s| SuiteInfo { name: s.name.clone(), sha256: s.sha256(), seed: s.seed })
                .unwrap_or_default(),
            started_at: now_rfc3339(),
            ..Default::default()
        },
        timings: GuestTimings::default(),
        workloads: Vec::new(),
    }
}

/// Closes a document: provenance of this system, finish time, kernel
/// warnings, derived status.
pub fn finish_document(doc: &mut RunDocument, kernel_warnings: Vec<String>) {
    let accel = doc.provenance.machine.accel.take();
    doc.provenance.kernel = provenance::kernel();
    doc.provenance.machine = provenance::machine(accel);
    doc.provenance.mitigations = provenance::mitigations();
    doc.provenance.bootbench = provenance::bootbench();
    doc.provenance.finished_at = now_rfc3339();
    doc.provenance.kernel_warnings = kernel_warnings;
    doc.status = doc.derive_status();
}

/// Records an error in the document.
pub fn push_error(doc: &mut RunDocument, location: &str, message: String) {
    doc.errors.push(RunError { location: location.to_string(), message });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Status;

    #[test]
    fn a_non_finite_metric_is_an_error_for_that_metric_and_the_rest_serialises() {
        use crate::schema::{Iteration, Metric};
        let mut it = Iteration::default();
        it.metrics.insert("rate".into(), Metric::higher(f64::NAN, "ops/s"));
        it.metrics.insert("latency".into(), Metric::higher(f64::INFINITY, "ms"));
        it.metrics.insert("wall".into(), Metric::higher(2.5, "s"));
        drop_non_finite_metrics(&mut it);
        assert_eq!(it.metrics.keys().collect::<Vec<_>>(), ["wall"]);
        assert_eq!(it.errors.len(), 2, "{:?}", it.errors);
        assert!(it.errors.iter().any(|e| e.contains("metric rate is not a finite number (NaN)")), "{:?}", it.errors);
        let r = WorkloadResult { name: "w".into(), iterations: vec![it], ..Default::default() };
        let json = serde_json::to_vec(&r).unwrap();
        let back: WorkloadResult = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.iterations[0].metrics["wall"].value, 2.5);
    }

    #[test]
    fn runs_warmup_and_iterations() {
        let mut suite = Suite::builtin("quick").unwrap();
        suite.iterations = 3;
        suite.warmup = 1;
        suite.workloads[0].params.insert("count".into(), 20.into());
        let ctx = RunContext::new(1, std::env::temp_dir());
        let r = run_workload(&suite, &suite.workloads[0], &ctx, true);
        assert_eq!(r.error, None);
        assert_eq!(r.iterations.len(), 3);
        assert_eq!(r.warmup, 1);
        let version = crate::workloads::version("fork").unwrap();
        assert_eq!(r.params.get(crate::workload::VERSION_PARAM), Some(&version.into()), "{:?}", r.params);
        for it in &r.iterations {
            let sys = it.system.as_ref().expect("system counters around every iteration");
            assert!(sys.forks >= 20, "20 forks per iteration: {sys:?}");
            assert!(!sys.cpus.is_empty());
        }
        assert!(r.quiet.as_ref().unwrap().measured_s > 0.0);
        let mut doc = begin_document("id", Some(&suite), None);
        doc.workloads.push(r);
        finish_document(&mut doc, vec![]);
        assert_eq!(doc.status, Status::Complete);
        assert_eq!(doc.provenance.suite.name, "quick");
    }

    #[test]
    fn bad_params_become_the_workload_error() {
        let mut suite = Suite::builtin("quick").unwrap();
        suite.workloads[0].params.insert("count".into(), "lots".into());
        let ctx = RunContext::new(1, std::env::temp_dir());
        let r = run_workload(&suite, &suite.workloads[0], &ctx, false);
        let e = r.error.unwrap();
        assert!(e.contains("fork") && e.contains("lots"), "{e}");
        assert!(r.iterations.is_empty());
    }
}
