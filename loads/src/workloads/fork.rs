//! `fork`: the fork/exit/wait rate. Each step forks a child that exits at
//! once and waits for it; the rate is steps per second of wall time.

use crate::measure::{children_cpu, CpuTimes};
use crate::schema::{Iteration, Metric};
use crate::workload::{params_map, RunContext, Workload, WorkloadError};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Parameters of `fork`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ForkParams {
    /// Forks per iteration.
    pub count: u64,
}

impl Default for ForkParams {
    fn default() -> Self {
        ForkParams { count: 1000 }
    }
}

/// The prepared workload.
pub struct Fork {
    params: ForkParams,
}

impl Fork {
    /// Prepares `fork`.
    pub fn new(params: ForkParams, _ctx: &RunContext) -> Self {
        Fork { params }
    }
}

fn sys(what: &str, source: nix::Error) -> WorkloadError {
    WorkloadError::Sys { workload: "fork", what: what.to_string(), source }
}

/// Forks a child that exits at once and reaps it.
pub fn fork_and_reap() -> Result<(), WorkloadError> {
    // SAFETY: the child only calls _exit, which is async-signal-safe, so
    // forking from a process with other threads is fine.
    match unsafe { fork() }.map_err(|e| sys("fork", e))? {
        ForkResult::Child => unsafe { libc::_exit(0) },
        ForkResult::Parent { child } => match waitpid(child, None).map_err(|e| sys("waitpid", e))? {
            WaitStatus::Exited(_, 0) => Ok(()),
            other => Err(WorkloadError::Child { workload: "fork", pid: child.as_raw(), how: format!("{other:?}") }),
        },
    }
}

impl Workload for Fork {
    fn name(&self) -> &'static str {
        "fork"
    }

    fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        params_map(&self.params)
    }

    fn run_iteration(&mut self) -> Result<Iteration, WorkloadError> {
        let cpu0 = children_cpu();
        let t0 = Instant::now();
        for _ in 0..self.params.count {
            fork_and_reap()?;
        }
        let wall = t0.elapsed().as_secs_f64();
        let cpu = children_cpu().since(&cpu0);
        let mut it = Iteration::default();
        let rate = if wall > 0.0 { self.params.count as f64 / wall } else { 0.0 };
        it.metrics.insert("fork_rate".into(), Metric::higher(rate, "forks/s"));
        it.metrics.insert("fork_latency".into(), Metric::lower(wall * 1e6 / self.params.count.max(1) as f64, "us"));
        it.detail.insert("forks".into(), self.params.count.into());
        it.detail.insert("elapsed_s".into(), wall.into());
        let CpuTimes { user_s, sys_s } = cpu;
        it.detail.insert("children_user_s".into(), user_s.into());
        it.detail.insert("children_sys_s".into(), sys_s.into());
        Ok(it)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_positive_rate() {
        let ctx = RunContext::new(0, std::env::temp_dir());
        let mut f = Fork::new(ForkParams { count: 50 }, &ctx);
        let it = f.run_iteration().unwrap();
        let rate = it.metrics["fork_rate"].value;
        assert!(rate > 1.0, "rate {rate}");
        assert_eq!(it.detail["forks"], serde_json::json!(50));
        assert_eq!(f.params()["count"], serde_json::json!(50));
    }
}
