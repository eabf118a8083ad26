//! `bootbench bisect`: an unattended, resumable bisection of a kernel
//! tree; the exit status says how it ended.

use crate::bisect::session::{self, BisectArgs};
use crate::bisect::state::Outcome;
use std::process::ExitCode;

/// Exit status of `bootbench bisect` when a culprit was named but not
/// confirmed, or only skipped commits were left.
pub const EXIT_UNCONFIRMED: u8 = 3;
/// `git bisect run`: skip this commit.
pub const EXIT_SKIP: u8 = 125;
/// `git bisect run`: abort the bisection (any status above 127 does).
pub const EXIT_ABORT: u8 = 128;

/// Runs `bootbench bisect`.
pub fn run(args: &BisectArgs) -> anyhow::Result<ExitCode> {
    Ok(match session::bisect(args)? {
        Some(Outcome::Confirmed { .. }) => ExitCode::SUCCESS,
        Some(Outcome::Unconfirmed { .. } | Outcome::Ambiguous { .. }) => ExitCode::from(EXIT_UNCONFIRMED),
        Some(Outcome::Failed { .. }) | None => ExitCode::FAILURE,
    })
}
