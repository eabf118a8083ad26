//! `bootbench export`: results files in another system's format (KCIDB's
//! JSON, for KernelCI), on standard output or in the file `-o` names.

use crate::kcidb_export::{self, KcidbOptions, NamedResults};
use crate::report::delivery::deliver;
use crate::results::migration::read_results_or_local;
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;

/// The formats `bootbench export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// KernelCI's KCIDB I/O JSON (schema 5.3): a checkout and a build per
    /// kernel group, a test per boot, workload and metric.
    Kcidb,
}

/// Options of `bootbench export`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// Results files (`bootbench run -o`, or a `bootbench local -o` document).
    #[arg(required = true, value_name = "RESULTS")]
    pub files: Vec<PathBuf>,
    /// The format to write.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Write the output here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// What KCIDB needs that the results files do not hold.
    #[command(flatten)]
    pub kcidb: KcidbOptions,
}

/// Runs `bootbench export`.
pub fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    kcidb_export::check_origin(&args.kcidb.origin)?;
    let files = args.files.iter().map(|p| read_results_or_local(p)).collect::<Result<Vec<_>, _>>()?;
    let named: Vec<NamedResults<'_>> =
        args.files.iter().zip(&files).map(|(p, file)| NamedResults { name: p.display().to_string(), file }).collect();
    let body = match args.format {
        ExportFormat::Kcidb => {
            let export = kcidb_export::export(&named, &args.kcidb)?;
            let json = serde_json::to_string_pretty(&export.data).context("cannot serialise the KCIDB data")?;
            (json + "\n", export.warnings)
        }
    };
    deliver(&body.0, &body.1, true, args.output.as_deref())?;
    Ok(ExitCode::SUCCESS)
}
