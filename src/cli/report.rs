//! `bootbench report`: the table of a results file, again.

use crate::report::summary_table;
use crate::results::migration::read_results_or_local;
use std::path::Path;
use std::process::ExitCode;

/// Prints the table of the results file `file`.
pub fn run(file: &Path) -> anyhow::Result<ExitCode> {
    let f = read_results_or_local(file)?;
    print!("{}", summary_table::render_boots(&f.boots));
    Ok(ExitCode::SUCCESS)
}
