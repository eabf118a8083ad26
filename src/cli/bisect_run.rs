//! `bootbench bisect-run`: one step for `git bisect run` (exit 0 good, 1
//! bad, 125 skip, 128 abort).

use super::bisect::{EXIT_ABORT, EXIT_SKIP};
use crate::bisect::git_run::{self, BisectRunArgs};
use crate::bisect::state::Verdict;
use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

/// Runs `bootbench bisect-run` with its raw arguments. Never fails: every
/// error becomes exit status 128, which makes `git bisect run` stop (a
/// plain failure status would read as "bad").
pub fn bisect_run(raw: &[String]) -> ExitCode {
    let argv = std::iter::once("bootbench bisect-run".to_string()).chain(raw.iter().cloned());
    let parsed = BisectRunArgs::command()
        .try_get_matches_from(argv)
        .and_then(|m| BisectRunArgs::from_arg_matches(&m).map(|a| (a, m)));
    let args = match parsed {
        Ok((mut a, m)) => match crate::settings::Settings::load_default() {
            Ok(s) => {
                // The machine flags it was not given come from the config file.
                s.apply_to_bisect_boot(&mut a.boot, &m);
                a
            }
            Err(e) => {
                eprintln!("bootbench bisect-run: error (aborting git bisect): {:#}", anyhow::Error::from(e));
                return ExitCode::from(EXIT_ABORT);
            }
        },
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::from(EXIT_ABORT),
            };
        }
    };
    match git_run::run_step(&args) {
        Ok(v) => {
            log::info!("{v}");
            ExitCode::from(match v {
                Verdict::Good => 0,
                Verdict::Bad => 1,
                Verdict::Skip => EXIT_SKIP,
            })
        }
        Err(e) => {
            log::error!("error (aborting git bisect): {e:#}");
            ExitCode::from(EXIT_ABORT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bisect_run_turns_errors_into_abort() {
        // A bad option must not read as "bad commit" (exit 1) to git.
        assert_eq!(bisect_run(&["--no-such-option".into()]), ExitCode::from(EXIT_ABORT));
        let dir = tempfile::tempdir().unwrap();
        // Not a git tree: an error, so abort.
        let code =
            bisect_run(&["--tree".into(), dir.path().display().to_string(), "--kernel-image".into(), "bzImage".into()]);
        assert_eq!(code, ExitCode::from(EXIT_ABORT));
    }
}
