//! How QEMU does a disk's I/O: the host cache mode, the AIO engine and the
//! block throttle of a `-drive`, the facts a host probe gathers about them
//! (whether the image directory takes direct I/O, which AIO engines this
//! QEMU opens a disk with), and the choice made from those facts. The
//! choice is a pure function of the probe, so it is tested without a host
//! that has (or lacks) io_uring or tmpfs; gathering the facts is
//! [`crate::runner::probe_disk_io`]'s job, since only the runner spawns
//! QEMU.

use std::fmt;
use std::path::Path;

/// ramfs's `statfs` magic (linux/magic.h), which neither nix nor libc names.
const RAMFS_MAGIC: u32 = 0x8584_58f6;

/// The largest `throttling.*` value QEMU accepts (its `THROTTLE_VALUE_MAX`).
pub const THROTTLE_VALUE_MAX: u64 = 1_000_000_000_000_000;

/// Where a disk's data is cached on the host (`cache=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiskCache {
    /// `cache=none`: the image is opened with O_DIRECT, so the host's page
    /// cache holds none of the guest's disk data; the guest's page cache
    /// (and the emulated device) is all there is.
    None,
    /// `cache=writeback` (QEMU's default): guest I/O is served from the
    /// host's page cache at memory speed.
    Writeback,
}

impl DiskCache {
    /// QEMU's name for the mode.
    pub fn name(self) -> &'static str {
        match self {
            DiskCache::None => "none",
            DiskCache::Writeback => "writeback",
        }
    }
}

/// The host's asynchronous I/O engine for a disk (`aio=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiskAio {
    /// `aio=threads`: a pool of host threads doing blocking I/O (QEMU's
    /// default; works with any cache mode).
    Threads,
    /// `aio=native`: Linux AIO (`io_submit`); needs `cache=none`.
    Native,
    /// `aio=io_uring`: io_uring, when QEMU is built with it and the host
    /// kernel allows it.
    IoUring,
}

impl DiskAio {
    /// QEMU's name for the engine.
    pub fn name(self) -> &'static str {
        match self {
            DiskAio::Threads => "threads",
            DiskAio::Native => "native",
            DiskAio::IoUring => "io_uring",
        }
    }

    /// The engines a run tries with `cache=none`, best first. io_uring
    /// comes before Linux AIO because `io_submit` can block the submitting
    /// QEMU thread while ext4 allocates blocks under a sparse image's holes,
    /// which io_uring hands to its own workers.
    pub const PREFERENCE: [DiskAio; 3] = [DiskAio::IoUring, DiskAio::Native, DiskAio::Threads];
}

/// A disk's block throttle (QEMU's `throttling.bps-total` and
/// `throttling.iops-total`), applied in host time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DiskThrottle {
    /// Bytes per second, reads and writes together.
    pub bps: u64,
    /// I/O operations per second, reads and writes together, if limited.
    pub iops: Option<u64>,
}

impl fmt::Display for DiskThrottle {
    /// `40 MiB/s` or `40 MiB/s, 500 IOPS` (bytes shown in the largest
    /// binary unit that divides them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (value, unit) = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")]
            .iter()
            .find(|(shift, _)| self.bps.trailing_zeros() >= *shift)
            .map_or((self.bps, "B"), |&(shift, unit)| (self.bps >> shift, unit));
        write!(f, "{value} {unit}/s")?;
        if let Some(iops) = self.iops {
            write!(f, ", {iops} IOPS")?;
        }
        Ok(())
    }
}

/// How QEMU does one disk's I/O: the cache mode, the AIO engine and an
/// optional throttle. The default is QEMU's own (`cache=writeback`,
/// `aio=threads`, no throttle), which works on any filesystem;
/// `bootbench run` probes the host and asks for `cache=none` instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DriveIo {
    /// The host cache mode.
    pub cache: DiskCache,
    /// The AIO engine.
    pub aio: DiskAio,
    /// The throttle, if any.
    pub throttle: Option<DiskThrottle>,
}

impl Default for DriveIo {
    fn default() -> Self {
        DriveIo { cache: DiskCache::Writeback, aio: DiskAio::Threads, throttle: None }
    }
}

/// Why a directory cannot hold images opened with O_DIRECT, or `Ok` when it
/// can. A RAM filesystem (tmpfs, ramfs) is refused even where its kernel
/// accepts O_DIRECT (tmpfs does since Linux 6.6), because its pages are the
/// host's RAM whatever the cache mode: the guest's disk would still be
/// served at memory speed. Otherwise a file is made in `dir` and opened
/// with O_DIRECT.
pub fn direct_io_check(dir: &Path) -> Result<(), String> {
    let fs = nix::sys::statfs::statfs(dir).map_err(|e| format!("cannot statfs {}: {e}", dir.display()))?;
    let kind = fs.filesystem_type();
    // f_type is signed or unsigned, 32 or 64 bits, by libc and arch; the
    // magic is its low 32 bits.
    let ramfs = kind.0 as u32 == RAMFS_MAGIC;
    if kind == nix::sys::statfs::TMPFS_MAGIC || ramfs {
        let name = if ramfs { "ramfs" } else { "tmpfs" };
        return Err(format!("{} is on {name}, whose pages are host RAM whatever the cache mode", dir.display()));
    }
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!(".bootbench-direct-io-{}-{seq}", std::process::id()));
    let made = std::fs::File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()));
    let opened = made.and_then(|_| {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .map(drop)
            .map_err(|e| format!("the filesystem of {} refuses O_DIRECT ({e})", dir.display()))
    });
    let _ = std::fs::remove_file(&path);
    opened
}

/// What the host says about direct I/O for a run's disk images; the input
/// of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskIoProbe {
    /// [`direct_io_check`] of the directory the images are made in.
    pub direct_io: Result<(), String>,
    /// The AIO engines tried with `cache=none` on an image in that
    /// directory, in [`DiskAio::PREFERENCE`] order, each `Ok` when QEMU
    /// opened the disk with it, else the first line QEMU printed. The probe
    /// stops at the first that works, and tries none when `direct_io`
    /// failed.
    pub aio: Vec<(DiskAio, Result<(), String>)>,
}

/// The cache mode and AIO engine chosen, and why, for the log and the host
/// envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskIoChoice {
    /// The cache mode.
    pub cache: DiskCache,
    /// The AIO engine.
    pub aio: DiskAio,
    /// Why they were chosen (or why `cache=none` was not).
    pub reason: String,
}

/// Chooses the cache mode and AIO engine from a probe: `cache=none` with
/// the first engine QEMU opened a disk with (io_uring, then Linux AIO, then
/// threads); `cache=writeback` with threads when the image directory takes
/// no direct I/O or QEMU opened no disk with `cache=none`.
///
/// ```
/// # use qemu::disk_io::{decide, DiskAio, DiskCache, DiskIoProbe};
/// let probe = DiskIoProbe {
///     direct_io: Ok(()),
///     aio: vec![(DiskAio::IoUring, Err("io_uring disabled".into())), (DiskAio::Native, Ok(()))],
/// };
/// let c = decide(&probe);
/// assert_eq!((c.cache, c.aio), (DiskCache::None, DiskAio::Native));
/// ```
pub fn decide(probe: &DiskIoProbe) -> DiskIoChoice {
    let writeback = |reason: String| DiskIoChoice {
        cache: DiskCache::Writeback,
        aio: DiskAio::Threads,
        reason: format!("{reason}; using cache=writeback (the host's page cache holds the disks' data)"),
    };
    if let Err(why) = &probe.direct_io {
        return writeback(why.clone());
    }
    let refused: Vec<String> =
        probe.aio.iter().filter_map(|(aio, r)| r.as_ref().err().map(|e| format!("aio={} ({e})", aio.name()))).collect();
    match probe.aio.iter().find(|(_, r)| r.is_ok()) {
        Some((aio, _)) => {
            let mut reason = format!("QEMU opens the disks with cache=none,aio={}", aio.name());
            if !refused.is_empty() {
                reason.push_str(&format!("; it refused {}", refused.join(", ")));
            }
            DiskIoChoice { cache: DiskCache::None, aio: *aio, reason }
        }
        None if refused.is_empty() => writeback("no AIO engine was tried with cache=none".to_string()),
        None => writeback(format!("QEMU opened no disk with cache=none: it refused {}", refused.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(results: &[(DiskAio, Result<(), &str>)]) -> DiskIoProbe {
        DiskIoProbe { direct_io: Ok(()), aio: results.iter().map(|(a, r)| (*a, r.map_err(str::to_string))).collect() }
    }

    #[test]
    fn the_first_engine_qemu_accepts_is_used_with_cache_none() {
        let c = decide(&probe(&[(DiskAio::IoUring, Ok(()))]));
        assert_eq!((c.cache, c.aio), (DiskCache::None, DiskAio::IoUring));
        assert_eq!(c.reason, "QEMU opens the disks with cache=none,aio=io_uring");
        let c = decide(&probe(&[(DiskAio::IoUring, Err("not supported in this build")), (DiskAio::Native, Ok(()))]));
        assert_eq!((c.cache, c.aio), (DiskCache::None, DiskAio::Native));
        assert!(c.reason.contains("refused aio=io_uring (not supported in this build)"), "{}", c.reason);
        let c = decide(&probe(&[
            (DiskAio::IoUring, Err("disabled")),
            (DiskAio::Native, Err("no linux-aio")),
            (DiskAio::Threads, Ok(())),
        ]));
        assert_eq!((c.cache, c.aio), (DiskCache::None, DiskAio::Threads), "threads still with cache=none");
    }

    #[test]
    fn no_direct_io_means_writeback_with_the_reason() {
        let p = DiskIoProbe { direct_io: Err("/tmp/x is on tmpfs".into()), aio: Vec::new() };
        let c = decide(&p);
        assert_eq!((c.cache, c.aio), (DiskCache::Writeback, DiskAio::Threads));
        assert!(c.reason.starts_with("/tmp/x is on tmpfs; using cache=writeback"), "{}", c.reason);
        let c = decide(&probe(&[
            (DiskAio::IoUring, Err("a")),
            (DiskAio::Native, Err("b")),
            (DiskAio::Threads, Err("Invalid argument")),
        ]));
        assert_eq!(c.cache, DiskCache::Writeback);
        assert!(c.reason.contains("aio=threads (Invalid argument)"), "{}", c.reason);
        assert_eq!(decide(&probe(&[])).cache, DiskCache::Writeback);
    }

    #[test]
    fn a_ram_filesystem_is_no_place_for_direct_io() {
        let shm = Path::new("/dev/shm");
        if nix::sys::statfs::statfs(shm).is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC) {
            let e = direct_io_check(shm).unwrap_err();
            assert!(e.contains("/dev/shm is on tmpfs"), "{e}");
        }
        let e = direct_io_check(Path::new("/nonexistent/dir")).unwrap_err();
        assert!(e.contains("cannot statfs /nonexistent/dir"), "{e}");
    }

    #[test]
    fn throttles_read_in_binary_units() {
        assert_eq!(DiskThrottle { bps: 40 << 20, iops: None }.to_string(), "40 MiB/s");
        assert_eq!(DiskThrottle { bps: 3 << 10, iops: Some(500) }.to_string(), "3 KiB/s, 500 IOPS");
        assert_eq!(DiskThrottle { bps: 1536, iops: None }.to_string(), "1536 B/s");
        assert_eq!(DiskThrottle { bps: 1000, iops: None }.to_string(), "1000 B/s");
        assert_eq!(DiskThrottle { bps: 2 << 40, iops: None }.to_string(), "2 TiB/s");
    }
}
