//! The userland pack a boot had attached, as the host recorded it: part of
//! the host envelope (and of `bootbench local`'s document), so every result
//! that used a pack names exactly which one (its image hash and every
//! package in it). Plain data; choosing and building the pack is
//! `crate::pack`'s job, attaching it `crate::boot::session`'s and mounting
//! it on the host `crate::local`'s.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One pack image as attached to a boot (read-only virtio-blk, found in
/// the guest by its serial) or mounted on the host by `bootbench local`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackRecord {
    /// The image on the host.
    pub image: PathBuf,
    /// sha256 of the image (hex).
    pub image_sha256: String,
    /// The image's size in bytes.
    pub image_bytes: u64,
    /// The virtio serial the guest found it by (empty, and left out, when
    /// no guest did: `bootbench local`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub serial: String,
    /// The pack's cache key, when it came from bootbench's pack cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// sha256 of the lockfile it was built from, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lockfile_sha256: Option<String>,
    /// The version of the recipe that built it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builder_version: Option<u32>,
    /// The prepared Linux tree's configuration (e.g. `x86_64_defconfig`)
    /// and the sha256 of its `.config`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linux_config: Option<String>,
    /// sha256 of the prepared tree's `.config` (hex), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linux_config_sha256: Option<String>,
    /// Every installed package as `name=version`, sorted (empty when the
    /// image came without bootbench's manifest).
    #[serde(default)]
    pub packages: Vec<String>,
}
