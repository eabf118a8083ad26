//! Where a run's disk images are made and how QEMU does their I/O, decided
//! once before the first boot: a directory whose filesystem takes O_DIRECT
//! (the run's work directory, else a fresh one under [`FALLBACK_DIR`]),
//! QEMU's probe of `cache=none` with each AIO engine there, the choice, the
//! throttle from the plan, and the record of all of it for the host
//! envelope. It decides no sizes and reads no kernel config.

use super::error::ScratchDiskError;
use super::images::{make_disks, BootDisks};
use super::plan::StoragePlan;
use crate::results::storage::DiskIoRecord;
use qemu::disk_io::{decide, direct_io_check, DiskIoChoice, DriveIo};
use std::path::{Path, PathBuf};

/// Where the images go when the run's work directory is a RAM filesystem
/// (as /tmp often is): a directory that survives reboots is on a disk.
pub const FALLBACK_DIR: &str = "/var/tmp";

/// The directory for the images, and why it is not the work directory.
#[derive(Debug)]
struct ImageDir {
    /// The directory.
    path: PathBuf,
    /// A directory made for the images under [`FALLBACK_DIR`], removed on
    /// drop.
    owned: Option<tempfile::TempDir>,
    /// Why the images are not in the work directory, or why no directory
    /// takes O_DIRECT (then `path` is the work directory).
    note: Option<String>,
    /// Whether `path` takes O_DIRECT.
    direct_io: bool,
}

/// Picks the images' directory: `work` when it takes O_DIRECT, else a new
/// directory under `fallback` when that does, else `work` all the same.
fn image_dir(work: &Path, fallback: &Path) -> ImageDir {
    let why_not_work = match direct_io_check(work) {
        Ok(()) => return ImageDir { path: work.to_path_buf(), owned: None, note: None, direct_io: true },
        Err(e) => e,
    };
    let made = tempfile::Builder::new().prefix("bootbench-disks-").tempdir_in(fallback);
    let why_not_fallback = match made {
        Ok(dir) => match direct_io_check(dir.path()) {
            Ok(()) => {
                let note = format!("images in {} because {why_not_work}", dir.path().display());
                return ImageDir {
                    path: dir.path().to_path_buf(),
                    owned: Some(dir),
                    note: Some(note),
                    direct_io: true,
                };
            }
            Err(e) => e,
        },
        Err(e) => format!("cannot make a directory under {}: {e}", fallback.display()),
    };
    ImageDir {
        path: work.to_path_buf(),
        owned: None,
        note: Some(format!("{why_not_work}, and {why_not_fallback} (set TMPDIR to a directory on a disk)")),
        direct_io: false,
    }
}

/// The run's disk I/O: the images' directory, QEMU's cache mode, AIO engine
/// and throttle for every disk, and their record.
#[derive(Debug)]
pub struct DiskIoSetup {
    dir: ImageDir,
    /// How QEMU does every disk's I/O.
    pub io: DriveIo,
    /// What the envelope records of it.
    pub record: DiskIoRecord,
}

impl DiskIoSetup {
    /// Decides the disk I/O of a run whose work directory is `work`, probing
    /// `qemu` (the arch's QEMU binary) once; see
    /// [`qemu::runner::probe_disk_io`]. The plan's throttle is applied to
    /// every disk.
    pub fn probe(plan: &StoragePlan, qemu: &Path, work: &Path) -> DiskIoSetup {
        let dir = image_dir(work, Path::new(FALLBACK_DIR));
        let mut probe = qemu::probe_disk_io(qemu, &dir.path);
        if let (false, Some(note)) = (dir.direct_io, &dir.note) {
            // The work directory's reason and the fallback's, not only the
            // first.
            probe.direct_io = Err(note.clone());
        }
        DiskIoSetup::from_choice(plan, dir, decide(&probe))
    }

    fn from_choice(plan: &StoragePlan, dir: ImageDir, choice: DiskIoChoice) -> DiskIoSetup {
        let reason = match (&dir.note, dir.direct_io) {
            (Some(note), true) => format!("{}; {note}", choice.reason),
            _ => choice.reason.clone(),
        };
        let record = DiskIoRecord {
            cache: choice.cache.name().to_string(),
            aio: choice.aio.name().to_string(),
            reason,
            dir: dir.path.clone(),
        };
        let io = DriveIo { cache: choice.cache, aio: choice.aio, throttle: plan.throttle };
        DiskIoSetup { dir, io, record }
    }

    /// The directory the images are made in.
    pub fn dir(&self) -> &Path {
        &self.dir.path
    }

    /// The directory made for the images outside the work directory, if
    /// any: an interrupt must remove it too.
    pub fn own_dir(&self) -> Option<&Path> {
        self.dir.owned.as_ref().map(|d| d.path())
    }

    /// Makes the plan's disks for boot `tag` (see [`make_disks`]) in this
    /// setup's directory, their record carrying the cache mode and AIO
    /// engine.
    pub fn make_disks(&self, plan: &StoragePlan, page_size: u64, tag: &str) -> Result<BootDisks, ScratchDiskError> {
        let mut disks = make_disks(plan, page_size, self.dir(), tag)?;
        disks.record.io = Some(self.record.clone());
        Ok(disks)
    }

    /// One line for progress output: the mode, the throttle and why.
    pub fn describe(&self) -> String {
        let throttle = match self.io.throttle {
            Some(t) => format!(", each throttled to {t}"),
            None => String::new(),
        };
        format!("disks cache={} aio={}{throttle} ({})", self.record.cache, self.record.aio, self.record.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::storage::ThrottleRecord;
    use qemu::disk_io::{DiskAio, DiskCache, DiskIoProbe, DiskThrottle};

    fn on_tmpfs() -> Option<tempfile::TempDir> {
        let d = tempfile::tempdir_in("/dev/shm").ok()?;
        direct_io_check(d.path()).is_err().then_some(d)
    }

    #[test]
    fn images_leave_a_ram_filesystem_for_one_that_takes_direct_io() {
        let Some(shm) = on_tmpfs() else {
            return; // no tmpfs on this host to leave
        };
        let disk = tempfile::tempdir().unwrap();
        if direct_io_check(disk.path()).is_err() {
            return; // and no disk to go to
        }
        let d = image_dir(shm.path(), disk.path());
        assert!(d.direct_io && d.path.starts_with(disk.path()) && d.path != disk.path(), "{d:?}");
        let note = d.note.clone().unwrap();
        assert!(note.starts_with(&format!("images in {} because ", d.path.display())), "{note}");
        assert!(note.contains("is on tmpfs"), "{note}");
        let made = d.path.clone();
        drop(d);
        assert!(!made.exists(), "the fallback directory is removed with the setup");

        // Nowhere to go: the work directory, and both reasons.
        let d = image_dir(shm.path(), shm.path());
        assert!(!d.direct_io && d.path == shm.path() && d.owned.is_none(), "{d:?}");
        let note = d.note.unwrap();
        assert_eq!(note.matches("is on tmpfs").count(), 2, "{note}");
        assert!(note.contains("set TMPDIR"), "{note}");
    }

    #[test]
    fn a_work_directory_that_takes_direct_io_is_kept() {
        let disk = tempfile::tempdir().unwrap();
        if direct_io_check(disk.path()).is_err() {
            return;
        }
        let d = image_dir(disk.path(), Path::new("/nonexistent"));
        assert!(d.direct_io && d.path == disk.path() && d.note.is_none() && d.owned.is_none(), "{d:?}");
    }

    #[test]
    fn each_boots_disks_are_made_in_the_setups_directory_and_carry_its_record() {
        let work = tempfile::tempdir().unwrap();
        let plan = StoragePlan {
            scratch_bytes: Some(64 << 20),
            swap_bytes: Some(4 << 20),
            throttle: Some(DiskThrottle { bps: 8 << 20, iops: None }),
            ..StoragePlan::default()
        };
        let dir = ImageDir { path: work.path().to_path_buf(), owned: None, note: None, direct_io: true };
        let probe = DiskIoProbe {
            direct_io: Ok(()),
            aio: vec![(DiskAio::IoUring, Err("x".into())), (DiskAio::Native, Ok(()))],
        };
        let s = DiskIoSetup::from_choice(&plan, dir, decide(&probe));
        let disks = s.make_disks(&plan, 4096, "t").unwrap();
        assert!(disks.files.iter().all(|f| f.parent() == Some(work.path())), "{:?}", disks.files);
        let io = disks.record.io.clone().unwrap();
        assert_eq!((io.cache.as_str(), io.aio.as_str()), ("none", "native"));
        assert!(io.reason.contains("refused aio=io_uring (x)"), "{}", io.reason);
        assert_eq!(disks.record.throttle, Some(ThrottleRecord { bps_total: 8 << 20, iops_total: None }));
        disks.remove();
    }

    #[test]
    fn the_record_carries_the_choice_the_reason_and_the_throttle() {
        let plan = StoragePlan {
            scratch_bytes: Some(64 << 20),
            throttle: Some(DiskThrottle { bps: 40 << 20, iops: Some(500) }),
            ..StoragePlan::default()
        };
        let dir = ImageDir { path: "/var/tmp/bootbench-disks-x".into(), owned: None, note: None, direct_io: true };
        let probe = DiskIoProbe { direct_io: Ok(()), aio: vec![(DiskAio::IoUring, Ok(()))] };
        let s = DiskIoSetup::from_choice(&plan, dir, decide(&probe));
        assert_eq!(s.io, DriveIo { cache: DiskCache::None, aio: DiskAio::IoUring, throttle: plan.throttle });
        assert_eq!((s.record.cache.as_str(), s.record.aio.as_str()), ("none", "io_uring"));
        assert_eq!(s.record.dir, Path::new("/var/tmp/bootbench-disks-x"));
        assert_eq!(
            s.describe(),
            "disks cache=none aio=io_uring, each throttled to 40 MiB/s, 500 IOPS \
             (QEMU opens the disks with cache=none,aio=io_uring)"
        );

        let moved = ImageDir {
            path: "/var/tmp/d".into(),
            owned: None,
            note: Some("images in /var/tmp/d because /tmp/w is on tmpfs".into()),
            direct_io: true,
        };
        let s = DiskIoSetup::from_choice(&StoragePlan::default(), moved, decide(&probe));
        assert!(s.record.reason.ends_with("; images in /var/tmp/d because /tmp/w is on tmpfs"), "{}", s.record.reason);
        assert_eq!(s.io.throttle, None);
        assert!(!s.describe().contains("throttled"), "{}", s.describe());
    }
}
