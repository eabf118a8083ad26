//! `bootbench nbench-compat`: our dbench and tbench beside Debian's; exit 1
//! when a throughput ratio misses the goal.

use crate::nbench_compat::{self, NbenchCompatOptions};
use std::process::ExitCode;

/// Runs `bootbench nbench-compat`.
pub fn run(args: &NbenchCompatOptions) -> anyhow::Result<ExitCode> {
    Ok(if nbench_compat::measure(args)? { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
