//! A lab machine's pack store (`loads::lab_protocol`, "The userland
//! pack"): the one ext2/3/4 filesystem with the label the lab gave it,
//! holding the userland packs its jobs need as files.
//!
//! The agent ([`stage`]) mounts it read-write, claims it (a new
//! filesystem, only `lost+found`, gets the marker; one with somebody's
//! files and no marker is never written to), and fetches the job's pack
//! into it when it is not there yet: under a temporary name, checked
//! against its sha256 while it streams, then renamed. Older packs are
//! deleted, oldest first, only when the new one would not fit.
//!
//! The candidate ([`mount_for_candidate`]) mounts the store read-only and
//! the pack from it through a read-only loop device at `PACK_MOUNT`, so a
//! kernel under test never writes to the store. Never panics.

use crate::block_device::DEVICE_WAIT;
use crate::volume_label::{self, LabelError};
use loads::lab_protocol::{self, JobFile, PACK_STORE_DIR, PACK_STORE_MARKER};
use loads::schema::PackStoreInfo;
use loads::suite::{PACK_FS, PACK_MOUNT};
use nix::mount::{mount, umount, MsFlags};
use std::fs;
use std::path::{Path, PathBuf};

/// Where the agent mounts the store (read-write).
pub const AGENT_MOUNT: &str = "/lab-packs";
/// Where the candidate mounts the store (read-only).
pub const CANDIDATE_MOUNT: &str = "/pack-store";
/// The suffix of a pack being fetched.
const PARTIAL_SUFFIX: &str = ".partial";
/// Room left free beyond the pack, for the filesystem's own needs.
pub const ROOM_MARGIN: u64 = 16 << 20;

/// Errors of the pack store.
#[derive(Debug, thiserror::Error)]
pub enum PackStoreError {
    /// No single filesystem carries the label.
    #[error(transparent)]
    Label(#[from] LabelError),
    /// A mount point could not be made.
    #[error("cannot create mount point {path}")]
    MountPoint {
        /// The mount point.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// mount(2) refused the store.
    #[error(
        "cannot mount the pack store '{label}' ({device}) {how} on {path} (is ext4 built in or its module packed?)"
    )]
    Mount {
        /// The label.
        label: String,
        /// Its device.
        device: String,
        /// `read-write` or `read-only`.
        how: &'static str,
        /// The mount point.
        path: String,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The filesystem with the label is not bootbench's, or could not be
    /// looked at.
    #[error(transparent)]
    Claim(#[from] crate::claimed_fs::ClaimError),
    /// The job's sha256 cannot name a file.
    #[error("'{0}' is not a sha256 (64 lower-case hex digits)")]
    BadSha256(String),
    /// The store is still mounted writable after the agent tried to
    /// unmount it: no kernel is booted over it.
    #[error("the pack store is still mounted at {AGENT_MOUNT} after its unmount failed; no candidate boots over a writable mount of it")]
    StillMounted,
    /// The candidate found a store without the marker.
    #[error(
        "the filesystem labelled '{label}' is not a pack store (no {PACK_STORE_MARKER}): its agent has not claimed it"
    )]
    NotAStore {
        /// The label.
        label: String,
    },
    /// A file of the store could not be read, written or removed.
    #[error("cannot {what} {path} in the pack store")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The store is too small for the pack, even emptied of older ones.
    #[error("the pack store '{label}' has {free} bytes free after removing {removed} older pack(s); the pack needs {need} (and {ROOM_MARGIN} spare): give the store a bigger partition")]
    NoRoom {
        /// The label.
        label: String,
        /// Bytes needed, the margin included.
        need: u64,
        /// Bytes free.
        free: u64,
        /// How many packs were removed trying.
        removed: usize,
    },
    /// The pack could not be fetched.
    #[error("fetching the pack: {0}")]
    Fetch(String),
    /// The candidate's pack is not in the store.
    #[error("the pack store '{label}' has no {file} (the agent fetches it before the kexec)")]
    Missing {
        /// The label.
        label: String,
        /// The file, relative to the store.
        file: String,
    },
    /// The pack file could not be attached to a loop device.
    #[error("the pack {file} of store '{label}'")]
    Loop {
        /// The label.
        label: String,
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: loads::loop_device::LoopError,
    },
    /// mount(2) refused the pack.
    #[error("cannot mount the userland pack {device} (from store '{label}') read-only ({PACK_FS}) on {PACK_MOUNT}")]
    MountPack {
        /// The label.
        label: String,
        /// The loop device.
        device: String,
        /// errno.
        #[source]
        source: nix::Error,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> PackStoreError + 'a {
    move |source| PackStoreError::Io { what, path: path.display().to_string(), source }
}

/// Claims the store mounted (writable) at `root` by `claimed_fs`' rule:
/// a store with the marker is ours; a new filesystem gets it; anything
/// else is refused, untouched. Returns whether it was claimed now.
pub fn claim(root: &Path, label: &str) -> Result<bool, PackStoreError> {
    use crate::claimed_fs::{inspect, mark, Claim};
    match inspect(root, label, PACK_STORE_MARKER)? {
        Claim::Ours => Ok(false),
        Claim::New => {
            mark(root, PACK_STORE_MARKER, "bootbench keeps userland packs here (packs/SHA256.ext4)\n")?;
            Ok(true)
        }
    }
}

/// Bytes free for an unprivileged writer on the filesystem at `path`.
pub fn free_bytes(path: &Path) -> Result<u64, PackStoreError> {
    let st = nix::sys::statvfs::statvfs(path).map_err(|e| PackStoreError::Io {
        what: "statvfs",
        path: path.display().to_string(),
        source: e.into(),
    })?;
    Ok((st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64))
}

/// What [`stage`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The pack was there already.
    pub cached: bool,
    /// Older packs deleted to make room, by file name.
    pub removed: Vec<String>,
}

/// Puts `pack` into the store mounted (writable) at `root`, labelled
/// `label`: nothing to do when its file is there with its size; otherwise
/// `fetch` writes it to a temporary file (and checks it), which is then
/// renamed into place. Older packs go, oldest first, only when the free
/// space (`free`, measured on `root`) is short.
pub fn stage(
    root: &Path,
    label: &str,
    pack: &JobFile,
    free: impl Fn(&Path) -> Result<u64, PackStoreError>,
    fetch: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<Staged, PackStoreError> {
    if !lab_protocol::valid_sha256(&pack.sha256) {
        return Err(PackStoreError::BadSha256(pack.sha256.escape_debug().to_string()));
    }
    claim(root, label)?;
    let dir = root.join(PACK_STORE_DIR);
    fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    let target = root.join(lab_protocol::pack_store_file(&pack.sha256));
    if fs::metadata(&target).map(|m| m.is_file() && m.len() == pack.bytes).unwrap_or(false) {
        // Its time is when a job last used it: the oldest goes first when
        // room is short.
        fs::File::options()
            .write(true)
            .open(&target)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()))
            .map_err(io("touch", &target))?;
        return Ok(Staged { cached: true, removed: Vec::new() });
    }
    // Left-overs of a fetch that did not end, and a damaged copy.
    let mut packs: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for entry in fs::read_dir(&dir).map_err(io("read", &dir))? {
        let path = entry.map_err(io("read", &dir))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.ends_with(PARTIAL_SUFFIX) || path == target {
            fs::remove_file(&path).map_err(io("remove", &path))?;
        } else if name.ends_with(".ext4") {
            let at = fs::metadata(&path).and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
            packs.push((at, path));
        }
    }
    packs.sort();
    let need = pack.bytes.saturating_add(ROOM_MARGIN);
    let mut removed = Vec::new();
    let mut left = packs.into_iter();
    let mut have = free(root)?;
    while have < need {
        let Some((_, old)) = left.next() else {
            return Err(PackStoreError::NoRoom { label: label.to_string(), need, free: have, removed: removed.len() });
        };
        fs::remove_file(&old).map_err(io("remove", &old))?;
        removed.push(old.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
        have = free(root)?;
    }
    let partial = dir.join(format!("{}{PARTIAL_SUFFIX}", pack.sha256));
    if let Err(e) = fetch(&partial) {
        let _ = fs::remove_file(&partial);
        return Err(PackStoreError::Fetch(e));
    }
    fs::rename(&partial, &target).map_err(io("rename", &partial))?;
    // The rename reaches the disk before the kexec.
    fs::File::open(&dir).and_then(|d| d.sync_all()).map_err(io("sync", &dir))?;
    Ok(Staged { cached: false, removed })
}

/// Mounts the store labelled `label` at `mount_point`: writable (after a
/// read-only look says it is bootbench's or new), or read-only without
/// replaying its journal, so that nothing is written; returns its device.
fn mount_store(label: &str, mount_point: &str, writable: bool) -> Result<String, PackStoreError> {
    let device = volume_label::find(Path::new("/sys/class/block"), Path::new("/dev"), label, DEVICE_WAIT)?;
    let mut flags = MsFlags::MS_NODEV | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
    let (how, options) = if writable {
        crate::claimed_fs::check_before_writing(&device, mount_point, label, PACK_STORE_MARKER)?;
        ("read-write", None)
    } else {
        flags |= MsFlags::MS_RDONLY;
        ("read-only", Some("noload"))
    };
    fs::create_dir_all(mount_point)
        .map_err(|source| PackStoreError::MountPoint { path: mount_point.to_string(), source })?;
    // ext4's driver mounts ext2 and ext3 too, and the label was read from
    // an ext2/3/4 superblock.
    mount(Some(device.as_str()), mount_point, Some("ext4"), flags, options).map_err(|source| {
        PackStoreError::Mount {
            label: label.to_string(),
            device: device.clone(),
            how,
            path: mount_point.to_string(),
            source,
        }
    })?;
    Ok(device)
}

/// The agent's side: mounts the store labelled `label` read-write at
/// [`AGENT_MOUNT`]; returns the mount point.
pub fn open_for_agent(label: &str) -> Result<PathBuf, PackStoreError> {
    mount_store(label, AGENT_MOUNT, true)?;
    Ok(PathBuf::from(AGENT_MOUNT))
}

/// Whether the store is still mounted where the agent mounts it.
pub fn agent_mount_left() -> bool {
    fs::read_to_string("/proc/self/mounts")
        .map(|m| m.lines().any(|l| l.split_whitespace().nth(1) == Some(AGENT_MOUNT)))
        .unwrap_or(false)
}

/// The agent's side: syncs and unmounts the store, so that the kexec
/// finds it clean.
pub fn close_for_agent() -> Result<(), PackStoreError> {
    nix::unistd::sync();
    umount(AGENT_MOUNT).map_err(|e| PackStoreError::Io {
        what: "unmount",
        path: AGENT_MOUNT.to_string(),
        source: e.into(),
    })
}

/// The candidate's side: mounts the store labelled `label` read-only at
/// [`CANDIDATE_MOUNT`], attaches its pack `sha256` to a read-only loop
/// device and mounts that at `PACK_MOUNT`. Returns the store as found and
/// the loop device. On failure nothing stays mounted.
pub fn mount_for_candidate(label: &str, sha256: &str) -> Result<(PackStoreInfo, String), PackStoreError> {
    let device = mount_store(label, CANDIDATE_MOUNT, false)?;
    let mounted = pack_from_store(Path::new(CANDIDATE_MOUNT), label, sha256);
    if mounted.is_err() {
        let _ = umount(CANDIDATE_MOUNT);
    }
    let loop_device = mounted?;
    let info = PackStoreInfo { label: label.to_string(), device, file: lab_protocol::pack_store_file(sha256) };
    Ok((info, loop_device))
}

fn pack_from_store(root: &Path, label: &str, sha256: &str) -> Result<String, PackStoreError> {
    if !root.join(PACK_STORE_MARKER).exists() {
        return Err(PackStoreError::NotAStore { label: label.to_string() });
    }
    let file = lab_protocol::pack_store_file(sha256);
    let path = root.join(&file);
    let backing = fs::File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => PackStoreError::Missing { label: label.to_string(), file: file.clone() },
        _ => PackStoreError::Io { what: "open", path: path.display().to_string(), source: e },
    })?;
    let (loop_file, device) = loads::loop_device::attach_read_only(&path, &backing)
        .map_err(|source| PackStoreError::Loop { label: label.to_string(), file: file.clone(), source })?;
    drop(backing);
    fs::create_dir_all(PACK_MOUNT)
        .map_err(|source| PackStoreError::MountPoint { path: PACK_MOUNT.to_string(), source })?;
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NODEV | MsFlags::MS_NOSUID;
    let device_name = device.display().to_string();
    if let Err(source) = mount(Some(device.as_path()), PACK_MOUNT, Some(PACK_FS), flags, None::<&str>) {
        loads::loop_device::detach(&loop_file);
        return Err(PackStoreError::MountPack { label: label.to_string(), device: device_name, source });
    }
    // Autoclear: the umount detaches the device once this is closed.
    drop(loop_file);
    Ok(device_name)
}

/// The candidate's side, at the end: unmounts the pack (its loop device
/// detaches itself) and the store. Read-only both: nothing is lost if
/// either stays.
pub fn unmount_for_candidate() {
    let _ = umount(PACK_MOUNT);
    let _ = umount(CANDIDATE_MOUNT);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    fn pack(n: u8, bytes: u64) -> JobFile {
        JobFile { sha256: format!("{n:02x}").repeat(32), bytes }
    }

    fn writer(bytes: u64) -> impl FnOnce(&Path) -> Result<(), String> {
        move |p: &Path| {
            fs::write(p, vec![7u8; bytes as usize]).unwrap();
            Ok(())
        }
    }

    #[test]
    fn a_new_store_is_claimed_a_pack_fetched_once_then_found_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir(root.join("lost+found")).unwrap();
        let big = |_: &Path| Ok(u64::MAX);
        let p = pack(1, 10);
        let s = stage(root, "bb-packs", &p, big, writer(10)).unwrap();
        assert_eq!(s, Staged { cached: false, removed: vec![] });
        assert_eq!(names(root), [PACK_STORE_MARKER, "lost+found", "packs"]);
        assert_eq!(names(&root.join("packs")), [format!("{}.ext4", p.sha256)]);
        let fetched = Cell::new(false);
        let s = stage(root, "bb-packs", &p, big, |_| {
            fetched.set(true);
            Ok(())
        })
        .unwrap();
        assert!(s.cached && !fetched.get(), "a pack in place with its size is not fetched again");
        // A copy of the wrong size (a damaged store) is fetched again.
        fs::write(root.join(lab_protocol::pack_store_file(&p.sha256)), b"short").unwrap();
        let s = stage(root, "bb-packs", &p, big, writer(10)).unwrap();
        assert!(!s.cached);
        assert_eq!(fs::metadata(root.join(lab_protocol::pack_store_file(&p.sha256))).unwrap().len(), 10);
    }

    #[test]
    fn a_filesystem_with_somebodys_files_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("home.tar"), b"precious").unwrap();
        let e = stage(root, "data", &pack(1, 3), |_| Ok(u64::MAX), writer(3)).unwrap_err();
        assert!(matches!(e, PackStoreError::Claim(crate::claimed_fs::ClaimError::Foreign { entries: 1, .. })), "{e}");
        assert!(e.to_string().contains("home.tar") && e.to_string().contains("'data'"), "{e}");
        assert_eq!(names(root), ["home.tar"], "nothing written");
    }

    #[test]
    fn a_failed_fetch_leaves_no_partial_file_and_no_pack() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let p = pack(2, 5);
        let e = stage(
            root,
            "bb",
            &p,
            |_| Ok(u64::MAX),
            |dest: &Path| {
                fs::write(dest, b"par").unwrap();
                Err("sha256 is 00, expected 02".into())
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("sha256 is 00"), "{e}");
        assert!(names(&root.join("packs")).is_empty(), "{:?}", names(&root.join("packs")));
        // And a partial file from an agent that died is removed next time.
        fs::write(root.join("packs").join(format!("{}.partial", p.sha256)), b"x").unwrap();
        stage(root, "bb", &p, |_| Ok(u64::MAX), writer(5)).unwrap();
        assert_eq!(names(&root.join("packs")), [format!("{}.ext4", p.sha256)]);
    }

    #[test]
    fn older_packs_go_oldest_first_only_while_the_new_one_does_not_fit() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (a, b, c) = (pack(0xa, 4), pack(0xb, 4), pack(0xc, 4));
        let roomy = |_: &Path| Ok(u64::MAX);
        stage(root, "bb", &a, roomy, writer(4)).unwrap();
        stage(root, "bb", &b, roomy, writer(4)).unwrap();
        // a older than b.
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(root.join(lab_protocol::pack_store_file(&a.sha256)))
            .unwrap()
            .set_modified(old)
            .unwrap();
        // Room for the new one once one pack is gone: only the older goes.
        let files = |root: &Path| fs::read_dir(root.join("packs")).unwrap().count() as u64;
        let one_short = |r: &Path| Ok(if files(r) >= 2 { ROOM_MARGIN } else { u64::MAX });
        let s = stage(root, "bb", &c, one_short, writer(4)).unwrap();
        assert_eq!(s.removed, [format!("{}.ext4", a.sha256)]);
        assert_eq!(names(&root.join("packs")), [format!("{}.ext4", b.sha256), format!("{}.ext4", c.sha256)]);
        // Never room: every older pack goes, then it says how short it is.
        let e = stage(root, "bb", &pack(0xd, 4), |_| Ok(1), writer(4)).unwrap_err();
        let PackStoreError::NoRoom { need, free, removed, .. } = e else { panic!("{e}") };
        assert_eq!((need, free, removed), (4 + ROOM_MARGIN, 1, 2));
        assert!(names(&root.join("packs")).is_empty());
    }

    #[test]
    fn a_pack_a_job_just_used_is_kept_over_one_fetched_later_but_unused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let (a, b, c) = (pack(0xa, 4), pack(0xb, 4), pack(0xc, 4));
        let roomy = |_: &Path| Ok(u64::MAX);
        stage(root, "bb", &a, roomy, writer(4)).unwrap();
        stage(root, "bb", &b, roomy, writer(4)).unwrap();
        let file = |p: &JobFile| root.join(lab_protocol::pack_store_file(&p.sha256));
        let at = |secs| std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
        let set = |p: &JobFile, t| fs::File::options().write(true).open(file(p)).unwrap().set_modified(t).unwrap();
        // a fetched long ago, b later; then a job uses a.
        set(&a, at(7200));
        set(&b, at(3600));
        assert!(stage(root, "bb", &a, roomy, |_| Ok(())).unwrap().cached);
        let files = |r: &Path| fs::read_dir(r.join("packs")).unwrap().count() as u64;
        let one_short = |r: &Path| Ok(if files(r) >= 2 { ROOM_MARGIN } else { u64::MAX });
        let s = stage(root, "bb", &c, one_short, writer(4)).unwrap();
        assert_eq!(s.removed, [format!("{}.ext4", b.sha256)], "b was used last longest ago");
        assert!(file(&a).exists() && file(&c).exists());
    }

    #[test]
    fn a_bad_sha256_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let bad = JobFile { sha256: "../../etc/passwd".into(), bytes: 1 };
        let e = stage(dir.path(), "bb", &bad, |_| Ok(u64::MAX), writer(1)).unwrap_err();
        assert!(matches!(e, PackStoreError::BadSha256(_)) && e.to_string().contains("not a sha256"), "{e}");
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn the_candidate_refuses_a_store_without_the_marker_or_the_pack() {
        let dir = tempfile::tempdir().unwrap();
        let sha = "ab".repeat(32);
        let e = pack_from_store(dir.path(), "bb", &sha).unwrap_err();
        assert!(matches!(e, PackStoreError::NotAStore { .. }), "{e}");
        fs::write(dir.path().join(PACK_STORE_MARKER), b"").unwrap();
        let e = pack_from_store(dir.path(), "bb", &sha).unwrap_err();
        assert!(matches!(e, PackStoreError::Missing { .. }) && e.to_string().contains(&sha), "{e}");
    }
}
