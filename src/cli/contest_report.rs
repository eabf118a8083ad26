//! `bootbench contest-report`: contest's table, in the layout of the 2003
//! reports, from results files or runs of a results store.
//!
//! Every argument is a results file (all its kernel groups) or
//! FILE:SELECTOR (one group, as `compare` takes it). Groups with the same
//! kernel image, cmdline and label from several arguments are one kernel:
//! boots of one kernel run on different days add up. A boot given twice
//! (same run id) counts once.

use crate::group_inputs::contest_kernels;
use crate::report::contest::render::{self, Format};
use crate::report::contest::{self, RatioBase, Settings};
use crate::report::delivery::deliver;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `bootbench contest-report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ContestReportArgs {
    /// Results files written by `bootbench run -o`; FILE:SELECTOR picks one
    /// kernel group of a file (#N, label=NAME or NAME, sha=HEXPREFIX,
    /// cmdline~TEXT). With --store, a run id of the store.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// What Ratio divides by: `baseline` (the baseline kernel's mean
    /// no_load time, as the 2002 reports did) or `own` (each kernel's own
    /// no_load of the same iteration).
    #[arg(long, default_value = "baseline")]
    pub ratio_base: RatioBase,
    /// The baseline kernel, by its name in the table or its label
    /// (default: the first kernel).
    #[arg(long)]
    pub baseline: Option<String>,
    /// Show each Ratio's 95% confidence interval in a last column (text):
    /// Student's t over the per-iteration ratios with `--ratio-base own`,
    /// Fieller's for the row's mean Time over the baseline's mean no_load
    /// Time with `baseline`. JSON always carries them.
    #[arg(long)]
    pub intervals: bool,
    /// Output format: text, json or markdown.
    #[arg(long, default_value = "text")]
    pub format: Format,
    /// Write the output here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// A results store (SQLite file of `bootbench serve`): arguments that
    /// are not files are run ids in it.
    #[arg(long)]
    pub store: Option<PathBuf>,
}

/// The report for `args`, rendered, and its warnings.
pub fn render_report(args: &ContestReportArgs) -> anyhow::Result<(String, Vec<String>)> {
    let inputs = contest_kernels(&args.files, args.store.as_ref())?;
    let settings = Settings { ratio_base: args.ratio_base, baseline: args.baseline.clone(), intervals: args.intervals };
    let report = contest::build(&inputs, &settings)?;
    Ok((render::render(&report, args.format)?, report.warnings))
}

/// Runs `bootbench contest-report`.
pub fn run(args: &ContestReportArgs) -> anyhow::Result<ExitCode> {
    let (body, warnings) = render_report(args)?;
    deliver(&body, &warnings, args.format != Format::Text, args.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests;
