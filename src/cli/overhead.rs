//! `bootbench overhead`: what the appliance itself costs, printed; exit 2
//! when a boot gave no figures.

use crate::overhead::{self, OverheadOptions};
use std::process::ExitCode;

/// Runs `bootbench overhead`.
pub fn run(args: &OverheadOptions) -> anyhow::Result<ExitCode> {
    let (report, all_ok) = overhead::measure(args)?;
    print!("{report}");
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::from(2) })
}
