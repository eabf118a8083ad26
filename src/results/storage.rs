//! The storage a boot had, as the host made it: part of the host envelope.
//! Plain data; making the disks is `crate::boot::scratch_disk`'s job, and
//! this module depends on nothing of the crate.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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

/// How QEMU did the disks' I/O on the host, as probed before the run's
/// first boot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskIoRecord {
    /// QEMU's host cache mode: `none` (O_DIRECT: only the guest's page
    /// cache holds the disks' data) or `writeback` (the host's page cache
    /// does too).
    pub cache: String,
    /// QEMU's AIO engine: `io_uring`, `native` or `threads`.
    pub aio: String,
    /// Why: what the probe found (engines QEMU refused, a RAM filesystem).
    pub reason: String,
    /// The host directory the images were made in.
    pub dir: PathBuf,
}

/// The block throttle each disk had (`--disk-throttle`), applied by QEMU in
/// host time; each disk has its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThrottleRecord {
    /// Bytes per second, reads and writes together (`throttling.bps-total`).
    pub bps_total: u64,
    /// I/O operations per second, reads and writes together
    /// (`throttling.iops-total`), when limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops_total: Option<u64>,
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
    /// How QEMU did the disks' I/O (absent in files written before it was
    /// recorded, when QEMU's default `cache=writeback,aio=threads` was
    /// used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<DiskIoRecord>,
    /// The throttle each disk had, when the run asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<ThrottleRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_files_read_and_absent_fields_are_not_written() {
        let old = r#"{"scratch":{"device":"/dev/vda","bytes":67108864,"command":["mke2fs"],"tool_version":"mke2fs 1.47.0","make_s":0.1},"swap":null,"iosched":null,"page_size":4096}"#;
        let h: HostStorage = serde_json::from_str(old).unwrap();
        assert_eq!((h.io.as_ref(), h.throttle.as_ref()), (None, None));
        assert_eq!(h.scratch.as_ref().map(|d| d.bytes), Some(64 << 20));
        let text = serde_json::to_string(&h).unwrap();
        assert!(!text.contains("\"io\"") && !text.contains("throttle"), "{text}");

        let h = HostStorage {
            io: Some(DiskIoRecord {
                cache: "none".into(),
                aio: "io_uring".into(),
                reason: "QEMU opens the disks with cache=none,aio=io_uring".into(),
                dir: "/tmp/bootbench-run-x".into(),
            }),
            throttle: Some(ThrottleRecord { bps_total: 40 << 20, iops_total: None }),
            ..h
        };
        let v = serde_json::to_value(&h).unwrap();
        assert_eq!(v["io"]["cache"], "none");
        assert_eq!(v["io"]["aio"], "io_uring");
        assert_eq!(v["throttle"], serde_json::json!({ "bps_total": 41943040 }), "no iops_total unless limited");
        assert_eq!(serde_json::from_value::<HostStorage>(v).unwrap(), h);
    }
}
