//! What became of one boot's upload: part of the host envelope. Plain
//! data; arranging the upload is `crate::boot::run_upload`'s job.

use results_uploader::UploadReport;
use serde::{Deserialize, Serialize};

/// What became of one boot's upload (part of the host envelope).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UploadRecord {
    /// The receiver URL the guest was given.
    pub url: String,
    /// The guest's `network` event: how it configured the interface.
    #[serde(default)]
    pub network: Option<String>,
    /// The guest's own report (its `upload` event); `None` when it printed
    /// none (the boot ended before, or the init predates uploads).
    #[serde(default)]
    pub guest: Option<UploadReport>,
    /// Why the `upload` event could not be read, if it could not.
    #[serde(default)]
    pub event_error: Option<String>,
    /// With `--serve`: whether the receiver has this run's document.
    #[serde(default)]
    pub received: Option<bool>,
    /// With `--serve`: whether the stored document is the one the console
    /// carried (same canonical JSON).
    #[serde(default)]
    pub matches_console: Option<bool>,
    /// With `--upload-url`: the report of the host's upload of this boot's
    /// envelope (with `--serve` the host writes it into the store itself).
    /// The uploaded copy cannot hold its own report: only the results file
    /// has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<UploadReport>,
    /// Why the host's envelope could not be delivered, when it could not
    /// even be tried (or the `--serve` store refused it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope_error: Option<String>,
}

impl UploadRecord {
    /// What went wrong with this boot's uploads, one phrase each; empty
    /// when the guest's document and the host's envelope are both where
    /// they were sent (as far as the host can tell).
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        match &self.guest {
            Some(g) if g.verdict.delivered() => {}
            Some(g) => p.push(format!("the guest's upload {}", g.verdict.name())),
            None => p.push("no upload report from the guest".to_string()),
        }
        if self.received == Some(false) {
            p.push("the receiver does not have the guest's document".to_string());
        }
        if self.matches_console == Some(false) {
            p.push("the stored document differs from the console's".to_string());
        }
        match (&self.envelope, &self.envelope_error) {
            (_, Some(_)) => p.push("the host's envelope was not delivered".to_string()),
            (Some(r), None) if !r.verdict.delivered() => p.push(format!("the host's envelope {}", r.verdict.name())),
            _ => {}
        }
        p
    }
}
