//! `bootbench bisect`: an unattended, resumable bisection of a kernel
//! tree; the exit status says how it ended.

use crate::bisect::session::{self, BisectArgs};
use crate::bisect::state::Outcome;
use std::process::ExitCode;

/// Exit status of `bootbench bisect` when a culprit was named but not
/// confirmed, or only skipped commits were left.
pub const EXIT_UNCONFIRMED: u8 = 3;
/// Exit status of `bootbench bisect` when it gave up: the bisection is over
/// without an answer (the ends do not differ, the verdicts contradict each
/// other, the metric is too noisy); resuming would end the same way.
pub const EXIT_GAVE_UP: u8 = 4;
/// Exit status of `bootbench bisect` when it stopped with its state saved
/// (a lab or host error, another workload version or pack): fix the cause
/// and run it again with `--resume`.
pub const EXIT_RESUMABLE: u8 = 5;
/// `git bisect run`: skip this commit.
pub const EXIT_SKIP: u8 = 125;
/// `git bisect run`: abort the bisection (any status above 127 does).
pub const EXIT_ABORT: u8 = 128;

/// Runs `bootbench bisect`.
pub fn run(args: &BisectArgs) -> anyhow::Result<ExitCode> {
    let outcome = match session::bisect(args) {
        Ok(o) => o,
        Err(e) if e.downcast_ref::<session::Stopped>().is_some() => {
            eprintln!("bootbench bisect: {e:#}");
            return Ok(ExitCode::from(EXIT_RESUMABLE));
        }
        Err(e) => return Err(e),
    };
    Ok(match outcome {
        Some(Outcome::Confirmed { .. }) => ExitCode::SUCCESS,
        Some(Outcome::Unconfirmed { .. } | Outcome::Ambiguous { .. }) => ExitCode::from(EXIT_UNCONFIRMED),
        Some(Outcome::Failed { .. }) => ExitCode::from(EXIT_GAVE_UP),
        None => ExitCode::FAILURE,
    })
}
