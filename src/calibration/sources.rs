//! Where a calibration's boots come from: one group of a results file, or
//! fresh A/A boots of one kernel with `bootbench run`'s machinery.

use super::MIN_BOOTS;
use crate::boot::options::RunOptions;
use crate::boot::session::run_boots;
use crate::compare::selector;
use crate::results::{migration, BootRecord};
use anyhow::{bail, Context};

/// The boots of the group `arg` (FILE or FILE:SELECTOR) names, and how to
/// cite them.
pub fn from_file(arg: &str) -> anyhow::Result<(Vec<BootRecord>, String)> {
    let sel = selector::parse(arg)?;
    let file = migration::read_results_or_local(&sel.file)?;
    let group = selector::select(&sel, &selector::groups(&file.boots))?;
    let what = format!("{} from {arg}", group.release());
    Ok((group.boots, what))
}

/// Boots one kernel `run.boots` times (at least [`MIN_BOOTS`]), keeping the
/// results file where `-o` says or in a temporary file it names, and says
/// what was booted.
pub fn boot_a_a(run: &RunOptions) -> anyhow::Result<(Vec<BootRecord>, String)> {
    if run.kernels.len() > 1 {
        bail!("calibrate boots one kernel (A/A); got {} --kernel options", run.kernels.len());
    }
    if (run.boots as usize) < MIN_BOOTS {
        bail!("calibrate needs --boots {} or more (got {})", MIN_BOOTS, run.boots);
    }
    let mut run = run.clone();
    if run.output.is_none() {
        let path = std::env::temp_dir().join(format!("bootbench-calibrate-{}.json", std::process::id()));
        log::info!("the boots are kept in {} (give -o to choose)", path.display());
        run.output = Some(path);
    }
    let file = run_boots(&run)?;
    let what = file
        .boots
        .first()
        .map(|b| format!("{} ({} {})", selector::groups(&file.boots)[0].release(), b.machine.arch, b.machine.accel))
        .context("no boot ran")?;
    Ok((file.boots, what))
}
