//! Kernel plumbing that the scratch storage and the zram swap share:
//! waiting for a device node or sysfs entry to appear, reading and writing
//! sysfs and procfs files, and swapon(2), with the errors they return.
//! Depends on no other init module; never panics.

use std::ffi::CString;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a block device node may take to appear after its driver loaded.
pub const DEVICE_WAIT: Duration = Duration::from_secs(10);
/// How often to look for it meanwhile (setup time, nothing is measured yet).
const DEVICE_POLL: Duration = Duration::from_millis(20);

/// Errors of waiting for a device, of kernel files and of swapon(2).
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The device node never appeared on devtmpfs.
    #[error("block device {device} did not appear within {waited_s} s (is its driver loaded, virtio_blk for /dev/vdX, and the disk attached?)")]
    NoDevice {
        /// The device path.
        device: String,
        /// How long it was waited for.
        waited_s: u64,
    },
    /// swapon(2) refused.
    #[error("swapon {device} failed (was it made with mkswap for this kernel's page size?)")]
    Swapon {
        /// The device.
        device: String,
        /// errno.
        #[source]
        source: std::io::Error,
    },
    /// A sysfs or procfs file could not be read or written.
    #[error("cannot {what} {path}")]
    File {
        /// `read` or `write`.
        what: &'static str,
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A kernel file did not have the expected shape.
    #[error("cannot understand {path}: '{text}'")]
    Unparsable {
        /// The file.
        path: String,
        /// What it held (trimmed).
        text: String,
    },
}

/// Waits (bounded) for `device` to exist: drivers probe asynchronously
/// after their module loaded, and devtmpfs adds the node when they are done.
pub fn wait_for(device: &str) -> Result<(), DeviceError> {
    if appears(Path::new(device)) {
        Ok(())
    } else {
        Err(DeviceError::NoDevice { device: device.to_string(), waited_s: DEVICE_WAIT.as_secs() })
    }
}

/// Whether `path` exists within [`DEVICE_WAIT`] (a device node, or a
/// sysfs entry a module's probe creates).
pub fn appears(path: &Path) -> bool {
    let start = Instant::now();
    while !path.exists() {
        if start.elapsed() >= DEVICE_WAIT {
            return false;
        }
        std::thread::sleep(DEVICE_POLL);
    }
    true
}

/// Reads a sysfs or procfs file.
pub fn read(path: &str) -> Result<String, DeviceError> {
    fs::read_to_string(path).map_err(|source| DeviceError::File { what: "read", path: path.to_string(), source })
}

/// Writes a sysfs file.
pub fn write(path: &str, text: &str) -> Result<(), DeviceError> {
    fs::write(path, text).map_err(|source| DeviceError::File { what: "write", path: path.to_string(), source })
}

/// The size in bytes /proc/swaps gives `device` (its Size column is KiB).
fn swap_bytes_of(proc_swaps: &str, device: &str) -> Option<u64> {
    proc_swaps.lines().skip(1).find_map(|line| {
        let mut cols = line.split_whitespace();
        let name = cols.next()?;
        let size_kib: u64 = cols.nth(1)?.parse().ok()?;
        (name == device).then_some(size_kib * 1024)
    })
}

/// swapon(2) flags of <sys/swap.h> (not in the libc crate): the priority
/// in the low bits is used only with this flag set.
const SWAP_FLAG_PREFER: i32 = 0x8000;
const SWAP_FLAG_PRIO_MASK: i32 = 0x7fff;

/// Enables `device` as swap, at `priority` when given (else the kernel's
/// decreasing negative default), and returns its size from /proc/swaps.
pub fn swapon(device: &str, priority: Option<i32>) -> Result<u64, DeviceError> {
    wait_for(device)?;
    let c = CString::new(device).map_err(|e| DeviceError::Swapon { device: device.to_string(), source: e.into() })?;
    let flags = priority.map_or(0, |p| SWAP_FLAG_PREFER | (p & SWAP_FLAG_PRIO_MASK));
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    if unsafe { libc::swapon(c.as_ptr(), flags) } != 0 {
        return Err(DeviceError::Swapon { device: device.to_string(), source: std::io::Error::last_os_error() });
    }
    let text = read("/proc/swaps")?;
    swap_bytes_of(&text, device).ok_or_else(|| DeviceError::Unparsable {
        path: "/proc/swaps".into(),
        text: format!("no line for {device} in: {}", text.trim()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_sizes_come_from_proc_swaps() {
        let text = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/vdb                                partition\t65532\t\t0\t\t-2\n";
        assert_eq!(swap_bytes_of(text, "/dev/vdb"), Some(65532 * 1024));
        assert_eq!(swap_bytes_of(text, "/dev/vdc"), None);
        assert_eq!(swap_bytes_of("Filename Type Size Used Priority\n", "/dev/vdb"), None);
    }
}
