//! The disk images of one boot: a fresh sparse ext4 scratch image and swap
//! image made with mke2fs and mkswap in the plan's sizes, their removal, and
//! the record of them for the host envelope. It decides no sizes and reads
//! no kernel config.

use super::error::ScratchDiskError;
use super::plan::{StoragePlan, SCRATCH_FS};
use crate::results::storage::{DiskRecord, HostStorage, ThrottleRecord};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Filesystem label of the scratch image (ext4 labels hold 16 bytes).
pub const SCRATCH_LABEL: &str = "bb-scratch";
/// Label of the swap image.
pub const SWAP_LABEL: &str = "bb-swap";
/// Fixed UUID (and ext4 directory hash seed) of every image: each boot gets
/// a byte-identical filesystem, so htree layout and checksum seeds cannot
/// differ between the boots being compared.
pub const IMAGE_UUID: &str = "b007be9c-5c7a-4c1d-8a11-000000000001";

/// The disks made for one boot: files in attach order, and their record.
#[derive(Debug)]
pub struct BootDisks {
    /// Image files, scratch first.
    pub files: Vec<PathBuf>,
    /// What was made.
    pub record: HostStorage,
}

impl BootDisks {
    /// Deletes the images (they hold what the guest wrote, possibly GBs).
    pub fn remove(&self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// A one-line summary of the disks made for a boot, for progress output.
pub fn describe(r: &HostStorage) -> String {
    let disk = |d: &DiskRecord, what: &str| {
        format!("{what} {} MiB on {} (made in {:.2} s)", d.bytes >> 20, d.device, d.make_s)
    };
    let mut parts = Vec::new();
    if let Some(d) = &r.scratch {
        parts.push(disk(d, &format!("{SCRATCH_FS} scratch disk")));
    }
    if let Some(d) = &r.swap {
        parts.push(disk(d, &format!("swap ({} B pages)", r.page_size)));
    }
    if let Some(s) = &r.iosched {
        parts.push(format!("scheduler {s}"));
    }
    parts.join(", ")
}

fn version_line(program: &'static str, flag: &str) -> String {
    Command::new(program)
        .arg(flag)
        .output()
        .ok()
        .and_then(|o| {
            let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            text.lines().next().map(|l| l.trim().to_string())
        })
        .unwrap_or_default()
}

/// Creates a sparse file of `bytes` and runs `program` with `args` on it.
fn make(
    program: &'static str,
    package: &'static str,
    version_flag: &str,
    args: Vec<String>,
    path: &Path,
    bytes: u64,
    device: &str,
) -> Result<DiskRecord, ScratchDiskError> {
    let create = |source| ScratchDiskError::Create { path: path.to_path_buf(), source };
    let file = std::fs::File::create(path).map_err(create)?;
    file.set_len(bytes).map_err(create)?;
    drop(file);
    let t0 = Instant::now();
    let out = Command::new(program)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| ScratchDiskError::Spawn { program, package, source })?;
    let make_s = t0.elapsed().as_secs_f64();
    let command: Vec<String> = std::iter::once(program.to_string()).chain(args).collect();
    if !out.status.success() {
        return Err(ScratchDiskError::ToolFailed {
            command: command.join(" "),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(DiskRecord {
        device: device.to_string(),
        bytes,
        command,
        tool_version: version_line(program, version_flag),
        make_s,
    })
}

/// Makes the plan's disks in `dir` for boot `tag`: a fresh ext4 image and
/// a fresh swap image every boot, so no boot sees what an earlier one wrote.
/// Their record carries the plan's throttle.
/// The inode tables and journal are initialised here, not lazily by the
/// guest kernel's ext4lazyinit thread, which would write in the background
/// of the measurements.
pub fn make_disks(plan: &StoragePlan, page_size: u64, dir: &Path, tag: &str) -> Result<BootDisks, ScratchDiskError> {
    let (scratch_dev, swap_dev) = plan.devices();
    let mut disks = BootDisks {
        files: Vec::new(),
        record: HostStorage {
            iosched: plan.iosched.clone(),
            page_size,
            throttle: plan.throttle.map(|t| ThrottleRecord { bps_total: t.bps, iops_total: t.iops }),
            ..Default::default()
        },
    };
    if let (Some(bytes), Some(device)) = (plan.scratch_bytes, scratch_dev) {
        let path = dir.join(format!("scratch-{tag}.img"));
        let args = vec![
            "-q".into(),
            "-F".into(),
            "-t".into(),
            SCRATCH_FS.into(),
            "-L".into(),
            SCRATCH_LABEL.into(),
            // No blocks reserved for root: the whole disk is the loads'.
            "-m".into(),
            "0".into(),
            "-U".into(),
            IMAGE_UUID.to_string(),
            "-E".into(),
            format!("lazy_itable_init=0,lazy_journal_init=0,hash_seed={IMAGE_UUID}"),
            path.display().to_string(),
            format!("{}k", bytes >> 10),
        ];
        disks.files.push(path.clone());
        match make("mke2fs", "e2fsprogs", "-V", args, &path, bytes, device) {
            Ok(r) => disks.record.scratch = Some(r),
            Err(e) => {
                disks.remove();
                return Err(e);
            }
        }
    }
    if let (Some(bytes), Some(device)) = (plan.swap_bytes, swap_dev) {
        let path = dir.join(format!("swap-{tag}.img"));
        let args = vec![
            "-q".into(),
            "-p".into(),
            page_size.to_string(),
            "-L".into(),
            SWAP_LABEL.into(),
            "-U".into(),
            IMAGE_UUID.to_string(),
            path.display().to_string(),
        ];
        disks.files.push(path.clone());
        match make("mkswap", "util-linux", "--version", args, &path, bytes, device) {
            Ok(r) => disks.record.swap = Some(r),
            Err(e) => {
                disks.remove();
                return Err(e);
            }
        }
    }
    Ok(disks)
}
