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
}
