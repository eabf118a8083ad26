//! The storage a boot had, as the host made it: part of the host envelope.
//! Plain data; making the disks is `crate::boot::scratch_disk`'s job, and
//! this module depends on nothing of the crate.

use serde::{Deserialize, Serialize};

/// One disk image as made for a boot, recorded in the host envelope.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskRecord {
    /// The guest's device for it, e.g. `/dev/vda`.
    pub device: String,
    /// Size in bytes (the image is sparse).
    pub bytes: u64,
    /// The command that made it.
    pub command: Vec<String>,
    /// The tool's version line, e.g. `mke2fs 1.47.0 (5-Feb-2023)`.
    pub tool_version: String,
    /// Host seconds the command took.
    pub make_s: f64,
}

/// The storage a boot had, as the host made it (the guest's side is in
/// the document's `provenance.storage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostStorage {
    /// The ext4 scratch disk.
    #[serde(default)]
    pub scratch: Option<DiskRecord>,
    /// The swap disk.
    #[serde(default)]
    pub swap: Option<DiskRecord>,
    /// The block scheduler asked for.
    #[serde(default)]
    pub iosched: Option<String>,
    /// The guest page size the swap was made for.
    #[serde(default)]
    pub page_size: u64,
}
