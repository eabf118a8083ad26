//! The rule by which bootbench may write to a filesystem a lab labelled
//! for it (a lab machine's scratch partition, its pack store): one that
//! holds its marker file is bootbench's; a new one (nothing but
//! `lost+found`) is claimed by writing the marker; anything else is
//! somebody's and is never written to. The check is made on a read-only
//! mount that does not even replay the journal (`noload`), so a wrong
//! label costs the disk nothing. Never panics.

use nix::mount::{mount, umount, MsFlags};
use std::fs;
use std::path::Path;

/// What a labelled filesystem holds, as far as bootbench may write to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// It carries the marker: bootbench's.
    Ours,
    /// Nothing but `lost+found`: new, bootbench may claim it.
    New,
}

/// Errors while finding out whose a filesystem is.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The read-only look could not be mounted.
    #[error("cannot mount {device} read-only on {path} to see what it holds (is ext4 built in or its module packed?)")]
    Mount {
        /// The device.
        device: String,
        /// The mount point.
        path: String,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The mount point could not be made.
    #[error("cannot create mount point {path}")]
    MountPoint {
        /// The mount point.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Its root could not be listed, or the marker written.
    #[error("cannot {what} {path}")]
    Io {
        /// `read` or `create`.
        what: &'static str,
        /// What could not be read or written.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It holds somebody's files.
    #[error("the filesystem labelled '{label}' holds {entries} entries (e.g. '{first}') and no {marker}: it was not made for bootbench, so nothing on it is touched (a new one made with mke2fs -L {label} is claimed by the first run)")]
    Foreign {
        /// The label.
        label: String,
        /// How many entries besides lost+found.
        entries: usize,
        /// One of them.
        first: String,
        /// The marker it lacks.
        marker: &'static str,
    },
}

/// Whose the filesystem mounted at `root` is (labelled `label`), by its
/// `marker`. Reads only.
pub fn inspect(root: &Path, label: &str, marker: &'static str) -> Result<Claim, ClaimError> {
    let read_err = |source| ClaimError::Io { what: "read", path: root.display().to_string(), source };
    let mut names = Vec::new();
    for entry in fs::read_dir(root).map_err(read_err)? {
        names.push(entry.map_err(read_err)?.file_name().to_string_lossy().into_owned());
    }
    if names.iter().any(|n| n == marker) {
        return Ok(Claim::Ours);
    }
    let others: Vec<&String> = names.iter().filter(|n| *n != "lost+found").collect();
    match others.first() {
        None => Ok(Claim::New),
        Some(first) => Err(ClaimError::Foreign {
            label: label.to_string(),
            entries: others.len(),
            first: first.to_string(),
            marker,
        }),
    }
}

/// Writes `marker` (with `text`) at `root`: the filesystem is bootbench's
/// from now on.
pub fn mark(root: &Path, marker: &str, text: &str) -> Result<(), ClaimError> {
    let path = root.join(marker);
    fs::write(&path, text).map_err(|source| ClaimError::Io { what: "create", path: path.display().to_string(), source })
}

/// Mounts `device` (an ext2/3/4 filesystem labelled `label`) read-only at
/// `mount_point` without replaying its journal, says whose it is, and
/// unmounts it: to be called before anything mounts it writable.
pub fn check_before_writing(
    device: &str,
    mount_point: &str,
    label: &str,
    marker: &'static str,
) -> Result<Claim, ClaimError> {
    fs::create_dir_all(mount_point)
        .map_err(|source| ClaimError::MountPoint { path: mount_point.to_string(), source })?;
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NODEV | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
    mount(Some(device), mount_point, Some("ext4"), flags, Some("noload")).map_err(|source| ClaimError::Mount {
        device: device.to_string(),
        path: mount_point.to_string(),
        source,
    })?;
    let claim = inspect(Path::new(mount_point), label, marker);
    let _ = umount(mount_point);
    claim
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_filesystem_is_ours_a_new_one_claimable_and_any_other_foreign() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(inspect(root, "bb", ".m").unwrap(), Claim::New, "empty");
        fs::create_dir(root.join("lost+found")).unwrap();
        assert_eq!(inspect(root, "bb", ".m").unwrap(), Claim::New, "only lost+found");
        fs::write(root.join("thesis.tex"), b"x").unwrap();
        let e = inspect(root, "bb", ".m").unwrap_err();
        assert!(matches!(&e, ClaimError::Foreign { entries: 1, first, .. } if first == "thesis.tex"), "{e}");
        assert!(e.to_string().contains("no .m") && e.to_string().contains("'bb'"), "{e}");
        mark(root, ".m", "ours\n").unwrap();
        assert_eq!(inspect(root, "bb", ".m").unwrap(), Claim::Ours, "the marker wins, whatever else is there");
        let e = inspect(&root.join("missing"), "bb", ".m").unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
