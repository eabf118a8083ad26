//! `bootbench report`: the table of a results file, again, or its HTML
//! page.

use crate::report::delivery::deliver;
use crate::report::{html, summary_table};
use crate::results::migration::read_results_or_local;
use std::path::PathBuf;
use std::process::ExitCode;

/// Output formats of `bootbench report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// The summary table.
    Text,
    /// A page: each metric's value per iteration, plotted, beside the
    /// system counters' changes over that iteration.
    Html,
}

/// Options of `bootbench report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// The results file.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write the output here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Prints (or writes) the report of the results file `args.file`.
pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let f = read_results_or_local(&args.file)?;
    if args.output.is_some() {
        crate::terminal_table::never_wrap();
    }
    let body = match args.format {
        ReportFormat::Text => summary_table::render_boots(&f.boots),
        ReportFormat::Html => html::render(&args.file.display().to_string(), &f.boots)?,
    };
    deliver(&body, &[], args.format != ReportFormat::Text, args.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
}
