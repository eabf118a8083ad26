//! Where a workload's big files live (contest's rows, kernbench's build
//! tree): the scratch filesystem the init mounted at /scratch when the run
//! has a scratch disk, else the work directory. What they measure touches
//! the block layer and the VM, so the filesystem type and free space are
//! checked and recorded. Owns the choice and the checks; must not mount
//! anything, and names no workload.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};

/// Where the init mounts the scratch disk.
pub const SCRATCH_MOUNT: &str = "/scratch";

/// Errors of choosing the scratch space.
#[derive(Debug, thiserror::Error)]
pub enum ScratchError {
    /// The directory cannot be examined.
    #[error("cannot examine the directory {path}")]
    Stat {
        /// The directory.
        path: PathBuf,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// Not enough free space for what the workload asked for.
    #[error("{who} needs {need_mib} MiB free in {path} ({fs}), but only {free_mib} MiB are free{hint}{also}")]
    TooSmall {
        /// Who needs the space (`contest's rows`).
        who: &'static str,
        /// The directory.
        path: PathBuf,
        /// Its filesystem type.
        fs: String,
        /// MiB needed.
        need_mib: u64,
        /// MiB free.
        free_mib: u64,
        /// What to do about it.
        hint: &'static str,
        /// What else the workload's parameters offer (`, or lower mem_bytes`).
        also: &'static str,
    },
}

/// The chosen directory and its filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScratchSpace {
    /// The directory.
    pub dir: PathBuf,
    /// Filesystem type, e.g. `ext4`, `tmpfs`.
    pub fs: String,
    /// Whether it is the mounted scratch disk.
    pub scratch_disk: bool,
    /// Free bytes for an unprivileged writer.
    pub free_bytes: u64,
}

fn is_mount_point(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(me), Some(Ok(parent))) = (std::fs::metadata(p), p.parent().map(std::fs::metadata)) else {
        return false;
    };
    me.dev() != parent.dev()
}

/// Names a filesystem by its statfs magic.
pub fn fs_name(magic: i64) -> String {
    match magic {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x858_458f6 => "ramfs".into(),
        0x6969 => "nfs".into(),
        0x794c_7630 => "overlayfs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        other => format!("fs-0x{other:x}"),
    }
}

/// Chooses the directory: `auto` means /scratch when it is a mount
/// point, else `work_dir`; anything else is taken as given.
pub fn choose(setting: &str, work_dir: &Path) -> Result<ScratchSpace, ScratchError> {
    let (dir, scratch_disk) = match setting {
        "auto" if is_mount_point(Path::new(SCRATCH_MOUNT)) => (PathBuf::from(SCRATCH_MOUNT), true),
        "auto" => (work_dir.to_path_buf(), false),
        given => (PathBuf::from(given), is_mount_point(Path::new(given)) && given == SCRATCH_MOUNT),
    };
    let stat = |source| ScratchError::Stat { path: dir.clone(), source };
    let fs = nix::sys::statfs::statfs(&dir).map_err(stat)?;
    let vfs = nix::sys::statvfs::statvfs(&dir).map_err(stat)?;
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let free_bytes = (vfs.blocks_available() as u64).saturating_mul(vfs.fragment_size() as u64);
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let magic = fs.filesystem_type().0 as i64;
    Ok(ScratchSpace { fs: fs_name(magic), dir, scratch_disk, free_bytes })
}

impl ScratchSpace {
    /// Fails unless `need` bytes are free; the error names `who` needs
    /// them and ends with `also` (another remedy the caller offers).
    pub fn require(&self, need: u64, who: &'static str, also: &'static str) -> Result<(), ScratchError> {
        if self.free_bytes >= need {
            return Ok(());
        }
        Err(ScratchError::TooSmall {
            who,
            path: self.dir.clone(),
            fs: self.fs.clone(),
            need_mib: need.div_ceil(1 << 20),
            free_mib: self.free_bytes >> 20,
            hint: if self.scratch_disk {
                ": give the run a larger scratch disk (bootbench run --scratch-disk SIZE)"
            } else {
                ": give the run a scratch disk (bootbench run --scratch-disk auto)"
            },
            also,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_directory_is_examined_and_a_missing_one_named() {
        let tmp = tempfile::tempdir().unwrap();
        let s = choose(tmp.path().to_str().unwrap(), Path::new("/nonexistent")).unwrap();
        assert!(s.free_bytes > 0);
        assert!(!s.scratch_disk);
        let e = s.require(u64::MAX, "the test", ", or ask for less").unwrap_err().to_string();
        assert!(e.starts_with("the test needs") && e.contains("MiB free in") && e.contains("scratch disk"), "{e}");
        assert!(e.ends_with("--scratch-disk auto), or ask for less"), "{e}");
        let e = choose("/nonexistent/contest", Path::new("/tmp")).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/contest"), "{e}");
        assert_eq!(fs_name(0xEF53), "ext4");
    }
}
