//! `bootbench run`: boots kernels, prints the table, and exits with the
//! run's status: 0 when every boot is `ok` with a complete result (and,
//! with an upload, every result and envelope was delivered), 2 when a boot
//! was not, 3 when the boots were but an upload failed.

use crate::boot::options::RunOptions;
use crate::boot::session::run_boots;
use crate::report::summary_table;
use crate::results::BootRecord;
use std::process::ExitCode;

/// Exit status of a run whose boots were all `ok` with a complete result
/// but whose uploads did not all arrive: the measurements are good (and in
/// the results file); the lab store lacks some of them.
pub const EXIT_UPLOAD_FAILED: u8 = 3;
/// Exit status of a run with a boot that was not `ok` or whose result was
/// not complete.
pub const EXIT_BOOT_FAILED: u8 = 2;

/// What each boot's uploads came to, for the summary: `(boot number,
/// problems)` for every boot with one.
fn upload_problems(boots: &[BootRecord]) -> Vec<(usize, Vec<String>)> {
    boots
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.upload.as_ref().map(|u| (i + 1, u.problems())))
        .filter(|(_, p)| !p.is_empty())
        .collect()
}

/// The exit status for `boots` (see the module doc).
fn status(boots: &[BootRecord]) -> u8 {
    let all_ok = boots.iter().all(|b| {
        b.boot.classification == "ok" && b.result.as_ref().is_some_and(|d| d.status == loads::schema::Status::Complete)
    });
    if !all_ok {
        EXIT_BOOT_FAILED
    } else if !upload_problems(boots).is_empty() {
        EXIT_UPLOAD_FAILED
    } else {
        0
    }
}

/// Runs `bootbench run`: boots, prints the table, says which uploads
/// failed, and exits with the run's status.
pub fn run(args: &RunOptions) -> anyhow::Result<ExitCode> {
    let file = run_boots(args)?;
    print!("{}", summary_table::render_boots(&file.boots));
    for (boot, problems) in upload_problems(&file.boots) {
        log::warn!("boot {boot}: upload FAILED: {}", problems.join("; "));
    }
    if let Some(out) = &args.output {
        log::info!("wrote {}", out.display());
    }
    Ok(ExitCode::from(status(&file.boots)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::upload::UploadRecord;
    use results_uploader::{UploadReport, Verdict};

    fn boot(upload: Option<UploadRecord>) -> BootRecord {
        let mut b = BootRecord { upload, ..BootRecord::default() };
        b.boot.classification = "ok".into();
        let mut doc = loads::runner::begin_document("run-1", None, None);
        doc.status = loads::schema::Status::Complete;
        b.result = Some(doc);
        b
    }

    fn report(verdict: Verdict) -> UploadReport {
        UploadReport {
            verdict,
            http_status: None,
            attempts: 1,
            elapsed_ms: 1,
            history: vec![],
            delays_ms: vec![],
            url: "http://127.0.0.1:9/runs/run-1".into(),
            error: None,
        }
    }

    #[test]
    fn a_failed_upload_of_good_boots_has_a_status_of_its_own() {
        let delivered = UploadRecord {
            guest: Some(report(Verdict::Stored)),
            envelope: Some(report(Verdict::AlreadyStored)),
            ..UploadRecord::default()
        };
        assert_eq!(status(&[boot(None), boot(Some(delivered.clone()))]), 0);
        let guest_failed = UploadRecord { guest: Some(report(Verdict::GaveUp)), ..delivered.clone() };
        assert_eq!(status(&[boot(Some(delivered.clone())), boot(Some(guest_failed))]), EXIT_UPLOAD_FAILED);
        let envelope_failed = UploadRecord { envelope: Some(report(Verdict::Refused)), ..delivered.clone() };
        assert_eq!(status(&[boot(Some(envelope_failed.clone()))]), EXIT_UPLOAD_FAILED);
        let not_received = UploadRecord { received: Some(false), ..delivered.clone() };
        assert_eq!(status(&[boot(Some(not_received))]), EXIT_UPLOAD_FAILED);
        let no_event = UploadRecord { guest: None, ..delivered };
        assert_eq!(status(&[boot(Some(no_event))]), EXIT_UPLOAD_FAILED);
        // A failed boot says more than a failed upload.
        let mut panicked = boot(Some(envelope_failed));
        panicked.boot.classification = "panic".into();
        assert_eq!(status(&[panicked]), EXIT_BOOT_FAILED);
        assert_eq!(upload_problems(&[boot(None)]), vec![]);
    }
}
