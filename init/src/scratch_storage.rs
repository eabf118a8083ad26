//! The scratch disk and swap the host attached (`bootbench.scratch`,
//! `bootbench.swap`, `bootbench.iosched` on the cmdline), and the read-only
//! userland pack (`bootbench.pack=SERIAL`, found by its virtio serial and
//! mounted at [`PACK_MOUNT`]; on a lab machine `bootbench.pack_label` and
//! `bootbench.pack_sha256`, a file of its pack store, see `pack_store`):
//! waits for the
//! block devices, mounts the scratch filesystem at [`SCRATCH_MOUNT`],
//! selects the block scheduler, enables swap, and says what it got; at the
//! end it unmounts the scratch filesystem so the guest stops clean. It
//! never panics and never stops the run: every failure is returned for the
//! result, and the workloads run without the piece that failed. It loads
//! no modules (the early module list does that before it runs). A zram
//! swap (`bootbench.zram`) is set up through `zram_swap`; the device and
//! kernel-file plumbing both use is in `block_device`.

use crate::block_device::{read, swapon, wait_for, write, DeviceError, DEVICE_WAIT};
use crate::zram_swap::{self, ZramError};
use loads::schema::StorageInfo;
use loads::suite::{CmdlineConfig, DEFAULT_SCRATCH_FS, PACK_FS, PACK_MOUNT};
use nix::mount::{mount, umount, MsFlags};
use std::fs;
use std::path::Path;
use std::time::Instant;

/// Where the scratch filesystem is mounted (contest's disk loads live there).
pub use loads::scratch_space::SCRATCH_MOUNT;
/// Errors while setting up or tearing down the scratch storage.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The mount point could not be created.
    #[error("cannot create mount point {SCRATCH_MOUNT}")]
    MountPoint(#[source] std::io::Error),
    /// mount(2) refused.
    #[error("cannot mount {device} ({fstype}) on {SCRATCH_MOUNT} (is the {fstype} module packed and the disk formatted as {fstype}?)")]
    Mount {
        /// The device.
        device: String,
        /// Filesystem type asked for.
        fstype: String,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The kernel does not offer the block scheduler asked for.
    #[error("block scheduler '{wanted}' is not offered for {device} by this kernel (offered: {offered}; is its module packed?)")]
    SchedulerNotOffered {
        /// The device.
        device: String,
        /// `bootbench.iosched`.
        wanted: String,
        /// What the scheduler file lists.
        offered: String,
    },
    /// The scheduler was written but another one is in effect.
    #[error("block scheduler for {device} reads back as '{got}' after selecting '{wanted}'")]
    SchedulerNotApplied {
        /// The device.
        device: String,
        /// `bootbench.iosched`.
        wanted: String,
        /// The bracketed entry read back.
        got: String,
    },
    /// A device did not appear, a sysfs or procfs file could not be read,
    /// written or understood, or swapon(2) refused.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The zram swap could not be set up.
    #[error("zram swap")]
    Zram(#[source] Box<ZramError>),
    /// The pack's mount point could not be created.
    #[error("cannot create mount point {PACK_MOUNT} for the userland pack")]
    PackMountPoint(#[source] std::io::Error),
    /// No block device carries the pack's serial.
    #[error("no disk with serial '{serial}' appeared within {waited_s} s (the userland pack; is virtio_blk loaded and the pack attached?)")]
    NoPack {
        /// The serial looked for.
        serial: String,
        /// How long it was waited for.
        waited_s: u64,
    },
    /// The scratch disk the host named is the pack's disk.
    #[error("{device}, named as the scratch disk, is the userland pack (serial '{serial}'); nothing is written to it")]
    ScratchIsPack {
        /// The device.
        device: String,
        /// The pack's serial.
        serial: String,
    },
    /// mount(2) refused the pack.
    #[error("cannot mount the userland pack {device} read-only ({PACK_FS}) on {PACK_MOUNT} (is {PACK_FS} built into the kernel or its module packed?)")]
    MountPack {
        /// The device.
        device: String,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The pack could not be mounted from the lab machine's pack store.
    #[error(transparent)]
    PackStore(#[from] crate::pack_store::PackStoreError),
    /// No single filesystem carries `bootbench.scratch_label`.
    #[error(transparent)]
    Label(#[from] crate::volume_label::LabelError),
    /// The scratch filesystem found by its label could not be claimed or
    /// emptied.
    #[error("cannot {what} {path} on the scratch filesystem (the workloads run without it)")]
    Empty {
        /// `read`, `create` or `remove`.
        what: &'static str,
        /// What could not be read, created or removed.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The filesystem with the label is not bootbench's, or could not be
    /// looked at.
    #[error(transparent)]
    Claim(#[from] crate::claimed_fs::ClaimError),
    /// umount(2) refused at the end of the run.
    #[error("cannot unmount {SCRATCH_MOUNT} (a process may still use it); the guest powers off with it mounted")]
    Unmount(#[source] nix::Error),
}

/// The device name under /sys/class/block: `/dev/vda` → `vda` (the
/// cmdline key was checked to be `/dev/NAME`; a device found by its label
/// is `/dev/NAME` too, a disk or a partition).
fn sys_name(device: &str) -> &str {
    device.rsplit('/').next().unwrap_or(device)
}

/// The device's size in bytes (sysfs counts 512-byte sectors whatever the
/// logical block size; a partition has its own `size`).
fn device_bytes(device: &str) -> Result<u64, StorageError> {
    let path = format!("/sys/class/block/{}/size", sys_name(device));
    let text = read(&path)?;
    text.trim()
        .parse::<u64>()
        .map(|sectors| sectors * 512)
        .map_err(|_| DeviceError::Unparsable { path, text: text.trim().to_string() }.into())
}

/// The bracketed (active) entry of a `queue/scheduler` file, e.g.
/// `mq-deadline` from `[mq-deadline] kyber none`.
fn active_scheduler(text: &str) -> Option<&str> {
    text.split_whitespace().find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
}

/// Every entry of a `queue/scheduler` file, brackets removed.
fn offered_schedulers(text: &str) -> Vec<&str> {
    text.split_whitespace().map(|w| w.trim_start_matches('[').trim_end_matches(']')).collect()
}

/// Selects `wanted` (when given) and returns the scheduler in effect.
fn scheduler(device: &str, wanted: Option<&str>) -> Result<String, StorageError> {
    let path = scheduler_path(Path::new("/sys/class/block"), sys_name(device)).display().to_string();
    let before = read(&path)?;
    if let Some(wanted) = wanted {
        if !offered_schedulers(&before).contains(&wanted) {
            return Err(StorageError::SchedulerNotOffered {
                device: device.to_string(),
                wanted: wanted.to_string(),
                offered: offered_schedulers(&before).join(", "),
            });
        }
        write(&path, wanted)?;
    }
    let after = read(&path)?;
    let active = active_scheduler(&after)
        .ok_or_else(|| DeviceError::Unparsable { path: path.clone(), text: after.trim().to_string() })?;
    match wanted {
        Some(w) if w != active => Err(StorageError::SchedulerNotApplied {
            device: device.to_string(),
            wanted: w.to_string(),
            got: active.to_string(),
        }),
        _ => Ok(active.to_string()),
    }
}

fn mount_scratch(device: &str, fstype: &str) -> Result<(), StorageError> {
    wait_for(device)?;
    fs::create_dir_all(SCRATCH_MOUNT).map_err(StorageError::MountPoint)?;
    // Default options, as a kernel developer's test box mounts its disks:
    // the block layer and VM are what is measured, so nothing is tuned.
    mount(Some(device), SCRATCH_MOUNT, Some(fstype), MsFlags::empty(), None::<&str>)
        .map_err(|source| StorageError::Mount { device: device.to_string(), fstype: fstype.to_string(), source })
}

/// The file at the root of a scratch filesystem found by its label that
/// says bootbench may empty it: written by the first job on a new
/// filesystem (nothing in it but `lost+found`), or by the lab.
pub const SCRATCH_MARKER: &str = ".bootbench-scratch";

/// Claims the scratch filesystem found by its label at `mount` (a lab
/// machine's partition keeps the last job's files; a QEMU scratch disk is
/// new at every boot), by `claimed_fs`' rule: with [`SCRATCH_MARKER`],
/// everything but the marker and `lost+found` goes; a new filesystem gets
/// the marker; anything else is somebody's files and is left alone,
/// refused. Returns how many entries were removed.
fn claim_scratch(mount: &Path, label: &str) -> Result<usize, StorageError> {
    use crate::claimed_fs::{inspect, mark, Claim};
    if inspect(mount, label, SCRATCH_MARKER)? == Claim::New {
        mark(mount, SCRATCH_MARKER, "bootbench may empty this filesystem before each run\n")?;
        return Ok(0);
    }
    let read_err = |source| StorageError::Empty { what: "read", path: mount.display().to_string(), source };
    let mut others = Vec::new();
    for entry in fs::read_dir(mount).map_err(read_err)? {
        let name = entry.map_err(read_err)?.file_name().to_string_lossy().into_owned();
        if name != "lost+found" && name != SCRATCH_MARKER {
            others.push(name);
        }
    }
    for name in &others {
        let path = mount.join(name);
        let is_dir = fs::symlink_metadata(&path).map(|m| m.is_dir()).unwrap_or(false);
        let done = if is_dir { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        done.map_err(|source| StorageError::Empty { what: "remove", path: path.display().to_string(), source })?;
    }
    Ok(others.len())
}

/// The `queue/scheduler` file of block device `name` under
/// `sys_class_block`: its own, or, for a partition, its disk's (the
/// parent of the partition's sysfs directory, which the kernel resolves
/// through the class link).
fn scheduler_path(sys_class_block: &Path, name: &str) -> std::path::PathBuf {
    let own = sys_class_block.join(name).join("queue/scheduler");
    if own.exists() {
        own
    } else {
        sys_class_block.join(name).join("../queue/scheduler")
    }
}

/// The virtio serial of block device `name` (`/sys/block/NAME/serial`),
/// when it has one.
fn serial_of(sys_block: &Path, name: &str) -> Option<String> {
    fs::read_to_string(sys_block.join(name).join("serial")).ok().map(|s| s.trim_end_matches(['\n', '\0']).to_string())
}

/// The block device (`/dev/NAME`) whose serial is `serial`, looked for in
/// `sys_block` (`/sys/block`) until it appears or [`DEVICE_WAIT`] passes:
/// the pack is found by its serial, never by probe order.
fn find_by_serial(sys_block: &Path, serial: &str, wait: std::time::Duration) -> Result<String, StorageError> {
    let start = Instant::now();
    loop {
        let mut names: Vec<String> = fs::read_dir(sys_block)
            .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        if let Some(name) = names.iter().find(|n| serial_of(sys_block, n).as_deref() == Some(serial)) {
            return Ok(format!("/dev/{name}"));
        }
        if start.elapsed() >= wait {
            return Err(StorageError::NoPack { serial: serial.to_string(), waited_s: wait.as_secs() });
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Finds the pack's disk by `serial` and mounts it read-only at
/// [`PACK_MOUNT`]; returns the device.
fn mount_pack(serial: &str) -> Result<String, StorageError> {
    let device = find_by_serial(Path::new("/sys/block"), serial, DEVICE_WAIT)?;
    wait_for(&device)?;
    fs::create_dir_all(PACK_MOUNT).map_err(StorageError::PackMountPoint)?;
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NODEV | MsFlags::MS_NOSUID;
    mount(Some(device.as_str()), PACK_MOUNT, Some(PACK_FS), flags, None::<&str>)
        .map_err(|source| StorageError::MountPack { device: device.clone(), source })?;
    Ok(device)
}

/// Sets up what `cmdline` asks for. Returns what is in effect (`None`
/// when nothing was asked) and every failure; a failed piece is left out
/// and the rest still goes on.
pub fn setup(cmdline: &CmdlineConfig) -> (Option<StorageInfo>, Vec<StorageError>) {
    if cmdline.scratch.is_none()
        && cmdline.scratch_label.is_none()
        && cmdline.swap.is_none()
        && cmdline.zram_bytes.is_none()
        && cmdline.pack.is_none()
        && cmdline.pack_label.is_none()
    {
        return (None, Vec::new());
    }
    let mut info = StorageInfo::default();
    let mut errors = Vec::new();
    if let Some(serial) = &cmdline.pack {
        match mount_pack(serial) {
            Ok(device) => {
                info.pack_device = Some(device);
                info.pack_mount = Some(PACK_MOUNT.to_string());
            }
            Err(e) => errors.push(e),
        }
    } else if let (Some(label), Some(sha256)) = (&cmdline.pack_label, &cmdline.pack_sha256) {
        match crate::pack_store::mount_for_candidate(label, sha256) {
            Ok((store, device)) => {
                info.pack_device = Some(device);
                info.pack_mount = Some(PACK_MOUNT.to_string());
                info.pack_store = Some(store);
            }
            Err(e) => errors.push(e.into()),
        }
    }
    // The scratch device: named by the host, or found by its label (never
    // a device whose filesystem does not carry it).
    let scratch = match (&cmdline.scratch, &cmdline.scratch_label) {
        (Some(device), _) => Some(device.clone()),
        (None, Some(label)) => {
            match crate::volume_label::find(Path::new("/sys/class/block"), Path::new("/dev"), label, DEVICE_WAIT) {
                Ok(device) => {
                    info.scratch_label = Some(label.clone());
                    Some(device)
                }
                Err(e) => {
                    errors.push(e.into());
                    None
                }
            }
        }
        (None, None) => None,
    };
    let scratch_is_pack = match (&scratch, &cmdline.pack) {
        (Some(device), Some(serial)) => serial_of(Path::new("/sys/block"), sys_name(device)).as_ref() == Some(serial),
        _ => false,
    };
    if let (true, Some(device), Some(serial)) = (scratch_is_pack, &scratch, &cmdline.pack) {
        errors.push(StorageError::ScratchIsPack { device: device.clone(), serial: serial.clone() });
    } else if let Some(device) = &scratch {
        let fstype = cmdline.scratch_fs.as_deref().unwrap_or(DEFAULT_SCRATCH_FS);
        info.scratch_device = Some(device.clone());
        info.scratch_fs = Some(fstype.to_string());
        // A filesystem found by its label is looked at read-only first:
        // somebody's is never mounted writable.
        let checked = match &info.scratch_label {
            Some(label) => crate::claimed_fs::check_before_writing(device, SCRATCH_MOUNT, label, SCRATCH_MARKER)
                .map(|_| ())
                .map_err(StorageError::from),
            None => Ok(()),
        };
        match checked.and_then(|()| mount_scratch(device, fstype)) {
            Ok(()) => {
                info.scratch_mount = Some(SCRATCH_MOUNT.to_string());
                if let Some(label) = info.scratch_label.clone() {
                    if let Err(e) = claim_scratch(Path::new(SCRATCH_MOUNT), &label) {
                        // Files of another run would be measured among:
                        // the workloads get no scratch filesystem.
                        errors.push(e);
                        let _ = umount(SCRATCH_MOUNT);
                        info.scratch_mount = None;
                    }
                }
                match device_bytes(device) {
                    Ok(b) => info.scratch_bytes = Some(b),
                    Err(e) => errors.push(e),
                }
                match scheduler(device, cmdline.iosched.as_deref()) {
                    Ok(s) => info.scheduler = Some(s),
                    Err(e) => errors.push(e),
                }
            }
            Err(e) => errors.push(e),
        }
    }
    if let Some(device) = &cmdline.swap {
        info.swap_device = Some(device.clone());
        match swapon(device, None) {
            Ok(b) => info.swap_bytes = Some(b),
            Err(e) => errors.push(e.into()),
        }
    }
    if let Some(bytes) = cmdline.zram_bytes {
        match zram_swap::setup(bytes) {
            Ok(z) => info.zram = Some(z),
            Err(e) => errors.push(StorageError::Zram(Box::new(e))),
        }
    }
    (Some(info), errors)
}

/// Records what the zram swap holds after the workloads (nothing to do
/// without one).
pub fn record_zram_usage(info: Option<&mut StorageInfo>) -> Result<(), StorageError> {
    match info.and_then(|i| i.zram.as_mut()) {
        Some(z) => zram_swap::record_usage(z).map_err(|e| StorageError::Zram(Box::new(e))),
        None => Ok(()),
    }
}

/// Syncs and unmounts the scratch filesystem if `info` says it is mounted,
/// so the journal is clean when the guest powers off; unmounts the pack.
pub fn teardown(info: Option<&StorageInfo>) -> Result<(), StorageError> {
    if info.and_then(|i| i.pack_store.as_ref()).is_some() {
        crate::pack_store::unmount_for_candidate();
    } else if info.and_then(|i| i.pack_mount.as_deref()).is_some() {
        // Read-only: nothing to lose if it stays mounted.
        let _ = umount(PACK_MOUNT);
    }
    if info.and_then(|i| i.scratch_mount.as_deref()).is_none() {
        return Ok(());
    }
    nix::unistd::sync();
    umount(SCRATCH_MOUNT).map_err(StorageError::Unmount)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_scratch_filesystem_is_claimed_a_claimed_one_emptied_and_a_foreign_one_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path();
        let names = |m: &Path| {
            let mut v: Vec<String> =
                fs::read_dir(m).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            v.sort();
            v
        };
        // New (mke2fs made it): claimed, nothing removed.
        fs::create_dir_all(m.join("lost+found")).unwrap();
        assert_eq!(claim_scratch(m, "bb").unwrap(), 0);
        assert_eq!(names(m), [SCRATCH_MARKER, "lost+found"]);
        // Ours, with a job's files: emptied, marker and lost+found kept.
        fs::create_dir_all(m.join("contest/io_load/deep")).unwrap();
        fs::write(m.join("contest/io_load/deep/f"), b"x").unwrap();
        fs::write(m.join("left-over"), b"y").unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("keep"), b"k").unwrap();
        std::os::unix::fs::symlink(outside.path(), m.join("link-out")).unwrap();
        assert_eq!(claim_scratch(m, "bb").unwrap(), 3);
        assert_eq!(names(m), [SCRATCH_MARKER, "lost+found"]);
        assert!(outside.path().join("keep").exists(), "a symlink's target is never followed");
        // Somebody's filesystem: refused, untouched.
        let other = tempfile::tempdir().unwrap();
        fs::write(other.path().join("thesis.tex"), b"z").unwrap();
        let e = claim_scratch(other.path(), "data").unwrap_err().to_string();
        assert!(e.contains("'data'") && e.contains("thesis.tex") && e.contains("not made for bootbench"), "{e}");
        assert_eq!(names(other.path()), ["thesis.tex"]);
        let e = claim_scratch(&m.join("missing"), "bb").unwrap_err().to_string();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn a_partitions_scheduler_is_its_disks() {
        let dir = tempfile::tempdir().unwrap();
        let devices = dir.path().join("devices/pci0/block/sda");
        fs::create_dir_all(devices.join("queue")).unwrap();
        fs::create_dir_all(devices.join("sda2")).unwrap();
        fs::write(devices.join("queue/scheduler"), "[mq-deadline] none\n").unwrap();
        let class = dir.path().join("class/block");
        fs::create_dir_all(&class).unwrap();
        std::os::unix::fs::symlink(&devices, class.join("sda")).unwrap();
        std::os::unix::fs::symlink(devices.join("sda2"), class.join("sda2")).unwrap();
        for name in ["sda", "sda2"] {
            let text = fs::read_to_string(scheduler_path(&class, name)).unwrap();
            assert_eq!(active_scheduler(&text), Some("mq-deadline"), "{name}");
        }
    }

    #[test]
    fn scheduler_file_is_read() {
        assert_eq!(active_scheduler("[mq-deadline] kyber bfq none\n"), Some("mq-deadline"));
        assert_eq!(active_scheduler("mq-deadline kyber [bfq] none\n"), Some("bfq"));
        assert_eq!(active_scheduler("[none] \n"), Some("none"));
        assert_eq!(active_scheduler("none\n"), None);
        assert_eq!(offered_schedulers("[mq-deadline] kyber none\n"), ["mq-deadline", "kyber", "none"]);
    }

    #[test]
    fn sys_names() {
        assert_eq!(sys_name("/dev/vda"), "vda");
        assert_eq!(sys_name("/dev/nvme0n1"), "nvme0n1");
    }

    #[test]
    fn the_pack_is_found_by_its_serial_not_by_its_place() {
        let sys = tempfile::tempdir().unwrap();
        for (name, serial) in [("vda", Some("scratch\n")), ("vdb", None), ("vdc", Some("bootbench-pack\0\0"))] {
            std::fs::create_dir(sys.path().join(name)).unwrap();
            if let Some(s) = serial {
                std::fs::write(sys.path().join(name).join("serial"), s).unwrap();
            }
        }
        let wait = std::time::Duration::from_millis(100);
        assert_eq!(find_by_serial(sys.path(), "bootbench-pack", wait).unwrap(), "/dev/vdc");
        assert_eq!(serial_of(sys.path(), "vda").as_deref(), Some("scratch"));
        let e = find_by_serial(sys.path(), "other", wait).unwrap_err().to_string();
        assert!(e.contains("'other'") && e.contains("userland pack"), "{e}");
    }

    #[test]
    fn nothing_asked_sets_up_nothing() {
        let (info, errors) = setup(&CmdlineConfig::default());
        assert!(info.is_none() && errors.is_empty());
        assert!(teardown(None).is_ok());
    }
}
