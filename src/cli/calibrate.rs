//! `bootbench calibrate`: A/A calibration on one kernel. Boots it N times
//! with `bootbench run`'s machinery (every `run` option applies; `--boots`
//! defaults to 20 here), or reads boots from `--from FILE`, then reports
//! what [`crate::calibration`] finds.

use crate::boot::options::RunOptions;
use crate::calibration::{self, sources};
use crate::compare::options::{parse_confidence, parse_threshold};
use crate::compare::{Method, Settings};
use crate::stats::multiple_testing::Correction;
use anyhow::bail;
use clap::{ArgMatches, Args, Command, FromArgMatches};
use std::process::ExitCode;

/// Options of `bootbench calibrate` besides `run`'s.
#[derive(Debug, Clone, clap::Args)]
pub struct CalibrateOptions {
    /// Analyse the boots in this results file (FILE or FILE:SELECTOR for
    /// one group) instead of booting.
    #[arg(long)]
    pub from: Option<String>,
    /// The threshold the false-positive rate and the boots needed are for.
    #[arg(long, default_value = "2%")]
    pub threshold: String,
    /// Confidence in %.
    #[arg(long, default_value = "95")]
    pub confidence: String,
    /// Correction over the metrics, as in `compare`: holm, bh or none.
    #[arg(long, default_value = "holm")]
    pub correction: String,
    /// Random half-splits to compare.
    #[arg(long, default_value_t = 1000)]
    pub splits: usize,
    /// Seed of the splits (the same seed gives the same figures).
    #[arg(long, default_value_t = 1)]
    pub split_seed: u64,
    /// Boots per kernel for which the smallest detectable change is given.
    #[arg(long, default_value_t = 10)]
    pub for_boots: usize,
    /// Output format: text or json.
    #[arg(long, default_value = "text")]
    pub format: String,
    /// Leave out boots with NaN or missing metrics instead of refusing.
    #[arg(long)]
    pub skip_incomplete_boots: bool,
}

/// All options: `run`'s (with `--boots` defaulting to 20) and the
/// calibration's.
#[derive(Debug, Clone)]
pub struct CalibrateArgs {
    /// How to boot.
    pub run: RunOptions,
    /// How to analyse.
    pub opts: CalibrateOptions,
}

impl FromArgMatches for CalibrateArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(CalibrateArgs { run: RunOptions::from_arg_matches(m)?, opts: CalibrateOptions::from_arg_matches(m)? })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        self.run.update_from_arg_matches(m)?;
        self.opts.update_from_arg_matches(m)
    }
}

impl Args for CalibrateArgs {
    fn augment_args(cmd: Command) -> Command {
        let cmd = CalibrateOptions::augment_args(RunOptions::augment_args(cmd));
        // Keep in step with calibration::MIN_BOOTS (a test checks).
        cmd.mut_arg("boots", |a| a.default_value("20"))
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// Runs `bootbench calibrate`.
pub fn run(args: &CalibrateArgs) -> anyhow::Result<ExitCode> {
    let o = &args.opts;
    let settings = Settings {
        threshold_pct: parse_threshold(&o.threshold)?,
        confidence: parse_confidence(&o.confidence)?,
        correction: o.correction.parse::<Correction>()?,
        method: Method::WelchLog,
    };
    let json = match o.format.as_str() {
        "text" => false,
        "json" => true,
        other => bail!("unknown format '{other}' (expected text or json)"),
    };
    let (boots, what) = match &o.from {
        Some(arg) => sources::from_file(arg)?,
        None => sources::boot_a_a(&args.run)?,
    };
    let only = args.run.workloads.as_ref().map(|w| w.split(',').map(|s| s.trim().to_string()).collect::<Vec<_>>());
    let c = calibration::analyse(
        &boots,
        settings,
        o.splits,
        o.split_seed,
        o.for_boots,
        only.as_deref(),
        o.skip_incomplete_boots,
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        print!("{}", calibration::render(&c, &what));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: CalibrateArgs,
    }

    #[test]
    fn boots_default_to_the_calibration_minimum() {
        let cli = Cli::try_parse_from(["calibrate"]).unwrap();
        assert_eq!(cli.args.run.boots as usize, calibration::MIN_BOOTS);
        let cli = Cli::try_parse_from(["calibrate", "--boots", "30", "--clock", "icount", "--from", "x.json"]).unwrap();
        assert_eq!((cli.args.run.boots, cli.args.run.clock.as_str()), (30, "icount"));
        assert_eq!(cli.args.opts.from.as_deref(), Some("x.json"));
    }
}
