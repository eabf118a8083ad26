//! `bootbench bisect`: an unattended, resumable bisection of a kernel
//! tree; the exit status says how it ended.

use crate::bisect::session::{self, BisectArgs, Ended};
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
    let ended = session::bisect(args);
    if let Err(e) = &ended {
        if e.downcast_ref::<session::Stopped>().is_some() {
            log::error!("{e:#}");
        }
    }
    exit_status(ended).map(ExitCode::from)
}

/// The exit status of a bisection that ended with `ended`; an error that
/// is not a saved stop stays an error (status 1). A range split at a step
/// between the ends, or whose first culprit was refused and its sides
/// searched, is confirmed (0) when its sides confirmed a change and none
/// was left open, else 3.
pub fn exit_status(ended: anyhow::Result<Ended>) -> anyhow::Result<u8> {
    let ended = match ended {
        Err(e) if e.downcast_ref::<session::Stopped>().is_some() => return Ok(EXIT_RESUMABLE),
        Err(e) => return Err(e),
        Ok(ended) => ended,
    };
    let searched = ended.sides_searched > 0;
    let settled = ended.changes_confirmed > 0 && ended.sides_open == 0;
    Ok(match ended.outcome {
        Some(Outcome::Confirmed { .. }) => 0,
        // Split, or refused by the direct test with both culprit and parent
        // between the ends: the answer is what the sides found.
        Some(Outcome::Split { .. }) if settled => 0,
        Some(Outcome::Unconfirmed { .. }) if searched && settled => 0,
        Some(Outcome::Unconfirmed { .. } | Outcome::Ambiguous { .. } | Outcome::Split { .. }) => EXIT_UNCONFIRMED,
        Some(Outcome::Failed { .. }) => EXIT_GAVE_UP,
        None => 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::driver::DriverError;

    #[test]
    fn each_ending_has_its_own_exit_status() {
        let ended = |o: Outcome, changes_confirmed, sides_open| Ended {
            outcome: Some(o),
            changes_confirmed,
            sides_open,
            sides_searched: changes_confirmed + sides_open,
        };
        let status = |o: Outcome| exit_status(Ok(ended(o, 0, 0))).unwrap();
        assert_eq!(status(Outcome::Confirmed { culprit: "c".into(), parent: "p".into(), step: None }), 0);
        assert_eq!(status(Outcome::Unconfirmed { culprit: "c".into(), reason: "r".into() }), EXIT_UNCONFIRMED);
        assert_eq!(status(Outcome::Ambiguous { candidates: vec![] }), EXIT_UNCONFIRMED);
        assert_eq!(status(Outcome::Failed { reason: "ends alike".into() }), EXIT_GAVE_UP);
        // A split range: confirmed only when its sides confirmed a change
        // and left none open.
        let split = Outcome::Split { at: "m".into(), position: 0.5, p_value: 1e-3 };
        assert_eq!(exit_status(Ok(ended(split.clone(), 2, 0))).unwrap(), 0);
        assert_eq!(exit_status(Ok(ended(split.clone(), 1, 1))).unwrap(), EXIT_UNCONFIRMED);
        assert_eq!(exit_status(Ok(ended(split, 0, 0))).unwrap(), EXIT_UNCONFIRMED);
        // A refused first culprit whose sides found the changes: the same.
        let refused = Outcome::Unconfirmed { culprit: "c".into(), reason: "direct test".into() };
        assert_eq!(exit_status(Ok(ended(refused.clone(), 2, 0))).unwrap(), 0);
        assert_eq!(exit_status(Ok(ended(refused, 1, 1))).unwrap(), EXIT_UNCONFIRMED);
        // A stop with the state saved, even under added context, is 5.
        let stopped = anyhow::Error::new(session::Stopped { state: "s.json".into(), source: DriverError::Finished })
            .context("while bisecting");
        assert_eq!(exit_status(Err(stopped)).unwrap(), EXIT_RESUMABLE);
        // Any other error stays an error.
        assert!(exit_status(Err(anyhow::anyhow!("no such tree"))).is_err());
        let distinct: std::collections::BTreeSet<u8> = [0, EXIT_UNCONFIRMED, EXIT_GAVE_UP, EXIT_RESUMABLE, 1].into();
        assert_eq!(distinct.len(), 5, "every ending is told apart");
    }
}
