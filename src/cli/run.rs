//! `bootbench run`: boots kernels, prints the table, and exits 2 unless
//! every boot is `ok` with a complete result.

use crate::boot::options::RunOptions;
use crate::boot::session::run_boots;
use crate::report::summary_table;
use std::process::ExitCode;

/// Runs `bootbench run`: boots, prints the table, and exits 2 unless every
/// boot is `ok` with a complete result.
pub fn run(args: &RunOptions) -> anyhow::Result<ExitCode> {
    let file = run_boots(args)?;
    print!("{}", summary_table::render_boots(&file.boots));
    if let Some(out) = &args.output {
        eprintln!("run: wrote {}", out.display());
    }
    let all_ok = file.boots.iter().all(|b| {
        b.boot.classification == "ok" && b.result.as_ref().is_some_and(|d| d.status == loads::schema::Status::Complete)
    });
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::from(2) })
}
