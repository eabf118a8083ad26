//! `bootbench compare`: the groups named on the command line, compared, in
//! the asked format.

use crate::compare::options::{self, parse_confidence, parse_threshold, Format};
use crate::compare::{self, Method, Settings};
use crate::group_inputs::{comparison_inputs, list_groups};
use crate::report::delivery::deliver;
use crate::stats::multiple_testing::Correction;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `bootbench compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// The baseline, then one or more candidates. Each is a results file
    /// (holding one kernel group) or FILE:SELECTOR for one group of a
    /// multi-kernel file; SELECTOR is #N, label=NAME (or just NAME),
    /// sha=HEXPREFIX or cmdline~TEXT. A single multi-kernel file compares
    /// its first group (baseline) with all the others.
    #[arg(required = true, value_name = "BASE [CAND]...")]
    pub groups: Vec<String>,
    /// Changes inside ±threshold are "no change", e.g. 2% or 0.5.
    #[arg(long, default_value = "2%")]
    pub threshold: String,
    /// Confidence in %, e.g. 95 (or 0.95).
    #[arg(long, default_value = "95")]
    pub confidence: String,
    /// Correction for the number of metrics: holm, bh (Benjamini-Hochberg) or none.
    #[arg(long, default_value = "holm")]
    pub correction: String,
    /// Interval method: welch-log (ratio of geometric means) or fieller
    /// (ratio of arithmetic means).
    #[arg(long, default_value = "welch-log")]
    pub method: String,
    /// Output format: text, json, csv, markdown or html.
    #[arg(long, default_value = "text")]
    pub format: String,
    /// Write the output here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Compare only these workloads, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Leave out boots with NaN or missing metrics or a failed workload
    /// (listed in the output) instead of refusing.
    #[arg(long)]
    pub skip_incomplete_boots: bool,
    /// A results store (SQLite file of `bootbench serve`): a group argument
    /// that names no file is a run id of this store.
    #[arg(long)]
    pub store: Option<PathBuf>,
    /// List the kernel groups in the files and stop.
    #[arg(long)]
    pub list: bool,
}

/// Runs `bootbench compare`.
pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        print!("{}", list_groups(&args.groups)?);
        return Ok(ExitCode::SUCCESS);
    }
    let format: Format = args.format.parse()?;
    if args.output.is_some() {
        crate::terminal_table::never_wrap();
    }
    let settings = Settings {
        threshold_pct: parse_threshold(&args.threshold)?,
        confidence: parse_confidence(&args.confidence)?,
        correction: args.correction.parse::<Correction>()?,
        method: args.method.parse::<Method>()?,
    };
    let (baseline, inputs) = comparison_inputs(&args.groups, args.store.as_deref())?;
    let only = (!args.workloads.is_empty()).then_some(args.workloads.as_slice());
    let report = compare::compare(&baseline, &inputs, settings, only, args.skip_incomplete_boots)?;
    let body = options::render(&report, format)?;
    deliver(&body, &report.warnings, format != Format::Text, args.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
}
