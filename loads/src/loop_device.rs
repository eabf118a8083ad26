//! A file attached read-only to a free loop device, for the host's
//! `bootbench local` (the userland pack mounted on this host) and the
//! guest's init (a lab machine's pack, a file in its pack store).
//!
//! The device is set up with `LOOP_CONFIGURE` (one ioctl: backing file,
//! read-only and autoclear together, Linux 5.8 or later; before it,
//! `LOOP_SET_FD` and `LOOP_SET_STATUS64`) over nix's ioctl macros rather than a loop-device crate (those generate their bindings
//! with bindgen, a libclang build dependency, and the init is built static
//! for every guest arch) or the `losetup` program (the appliance has none).
//! Autoclear lets the kernel detach the device itself when its last user
//! goes: once the filesystem on it is mounted, the caller may close the
//! device, and the umount detaches it.

// PID 1 runs this module (a lab candidate's init): no panics.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// `/dev/loop-control`.
pub const LOOP_CONTROL: &str = "/dev/loop-control";
// <linux/loop.h>: the ioctl numbers are plain (not _IOC-encoded).
const LOOP_SET_FD: u32 = 0x4C00;
const LOOP_CLR_FD: u32 = 0x4C01;
const LOOP_SET_STATUS64: u32 = 0x4C04;
const LOOP_CONFIGURE: u32 = 0x4C0A;
const LOOP_CTL_GET_FREE: u32 = 0x4C82;
const LO_FLAGS_READ_ONLY: u32 = 1;
const LO_FLAGS_AUTOCLEAR: u32 = 4;
const LO_NAME_SIZE: usize = 64;
/// How many times a free device is asked for when another process takes
/// the one we were given first.
const ATTACH_TRIES: u32 = 8;

/// `struct loop_info64`.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; LO_NAME_SIZE],
    lo_crypt_name: [u8; LO_NAME_SIZE],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// `struct loop_config`.
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

nix::ioctl_none_bad!(
    /// The number of a free loop device (on `/dev/loop-control`).
    loop_ctl_get_free,
    LOOP_CTL_GET_FREE
);
nix::ioctl_write_ptr_bad!(
    /// Binds a backing file to a loop device, with its flags.
    loop_configure,
    LOOP_CONFIGURE,
    LoopConfig
);
nix::ioctl_write_int_bad!(
    /// Binds a backing file to a loop device (before Linux 5.8).
    loop_set_fd,
    LOOP_SET_FD
);
nix::ioctl_write_ptr_bad!(
    /// Sets a bound loop device's flags (before Linux 5.8).
    loop_set_status64,
    LOOP_SET_STATUS64,
    LoopInfo64
);
nix::ioctl_none_bad!(
    /// Detaches a loop device (or marks it autoclear while in use).
    loop_clr_fd,
    LOOP_CLR_FD
);

/// A loop device could not be had or set up.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// `/dev/loop-control` cannot be opened (no loop driver: built in, or
    /// its module loaded?).
    #[error("cannot open {LOOP_CONTROL} (is the loop driver built in or its module loaded?)")]
    Control(#[source] std::io::Error),
    /// The kernel gave no free device.
    #[error("no free loop device ({LOOP_CONTROL})")]
    NoFree(#[source] nix::Error),
    /// The device it named cannot be opened.
    #[error("cannot open {}", .device.display())]
    Open {
        /// The device.
        device: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `LOOP_CONFIGURE` failed, or on a kernel without it `LOOP_SET_FD`
    /// or `LOOP_SET_STATUS64`.
    #[error("{call} on {}", .device.display())]
    Configure {
        /// The ioctl that failed.
        call: &'static str,
        /// The device.
        device: PathBuf,
        /// Why.
        #[source]
        source: nix::Error,
    },
}

/// The backing file's name as the kernel shows it (`loop/backing_file`
/// shows the real path; this is `lo_file_name`, at most 63 bytes).
fn kernel_name(image: &Path) -> [u8; LO_NAME_SIZE] {
    let mut name = [0u8; LO_NAME_SIZE];
    for (slot, b) in name.iter_mut().zip(image.as_os_str().as_encoded_bytes().iter().take(LO_NAME_SIZE - 1)) {
        *slot = *b;
    }
    name
}

/// The read-only, autoclear `loop_info64` of `image`.
fn info(image: &Path) -> LoopInfo64 {
    LoopInfo64 {
        lo_device: 0,
        lo_inode: 0,
        lo_rdevice: 0,
        lo_offset: 0,
        lo_sizelimit: 0,
        lo_number: 0,
        lo_encrypt_type: 0,
        lo_encrypt_key_size: 0,
        lo_flags: LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR,
        lo_file_name: kernel_name(image),
        lo_crypt_name: [0; LO_NAME_SIZE],
        lo_encrypt_key: [0; 32],
        lo_init: [0; 2],
    }
}

/// Attaches `backing` (the open `image`) read-only, with autoclear, to a
/// free loop device; returns the device, open, and its path.
pub fn attach_read_only(image: &Path, backing: &File) -> Result<(File, PathBuf), LoopError> {
    let control = File::open(LOOP_CONTROL).map_err(LoopError::Control)?;
    let config = LoopConfig { fd: backing.as_raw_fd() as u32, block_size: 0, info: info(image), reserved: [0; 8] };
    let mut tries = 0;
    loop {
        tries += 1;
        // SAFETY: LOOP_CTL_GET_FREE takes no argument.
        let number = unsafe { loop_ctl_get_free(control.as_raw_fd()) }.map_err(LoopError::NoFree)?;
        let device = PathBuf::from(format!("/dev/loop{number}"));
        // Opened read-only, the device is read-only whatever the flags say.
        let file = File::open(&device).map_err(|source| LoopError::Open { device: device.clone(), source })?;
        // SAFETY: `config` is a valid `struct loop_config` that outlives the
        // call, and `file` is a loop device.
        let configured = match unsafe { loop_configure(file.as_raw_fd(), &config) } {
            // Before Linux 5.8: bind, then set the flags.
            Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOTTY) => {
                set_fd_then_status(&file, backing, &config.info)
            }
            other => other.map(|_| ()).map_err(|e| ("LOOP_CONFIGURE", e)),
        };
        match configured {
            Ok(()) => return Ok((file, device)),
            // Another process took it between the two calls.
            Err((_, nix::errno::Errno::EBUSY)) if tries < ATTACH_TRIES => continue,
            Err((call, source)) => return Err(LoopError::Configure { call, device, source }),
        }
    }
}

/// The pre-5.8 way: `LOOP_SET_FD` (read-only, since `backing` was opened
/// read-only), then `LOOP_SET_STATUS64` for autoclear; undone when the
/// second fails.
fn set_fd_then_status(file: &File, backing: &File, info: &LoopInfo64) -> Result<(), (&'static str, nix::Error)> {
    // SAFETY: `file` is a loop device; LOOP_SET_FD takes the backing fd.
    unsafe { loop_set_fd(file.as_raw_fd(), backing.as_raw_fd()) }.map_err(|e| ("LOOP_SET_FD", e))?;
    // SAFETY: `info` is a valid `struct loop_info64` that outlives the call.
    if let Err(e) = unsafe { loop_set_status64(file.as_raw_fd(), info) } {
        detach(file);
        return Err(("LOOP_SET_STATUS64", e));
    }
    Ok(())
}

/// Detaches the loop device `file` at once, or, while it is still in use
/// (mounted), leaves autoclear to detach it when its last user goes.
pub fn detach(file: &File) {
    // SAFETY: `file` is a loop device we attached; LOOP_CLR_FD takes no
    // argument. It fails only with the device in use, which autoclear
    // then detaches.
    let _ = unsafe { loop_clr_fd(file.as_raw_fd()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_structs_have_the_kernels_layout() {
        // <linux/loop.h>: 232 bytes of loop_info64, 304 of loop_config.
        assert_eq!(std::mem::size_of::<LoopInfo64>(), 232);
        assert_eq!(std::mem::size_of::<LoopConfig>(), 304);
    }

    /// Both ways of attaching, on this host's loop driver (root, as
    /// `bootbench local` and the tests' CI run): read-only, autoclear, the
    /// right file.
    #[test]
    fn a_file_is_attached_read_only_with_autoclear_by_loop_configure_and_by_the_calls_before_linux_5_8() {
        assert!(nix::unistd::geteuid().is_root(), "missing prerequisite: root (loop devices)");
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
        let backing = File::open(&img).unwrap();
        let check = |device: &Path| {
            let n = device.display().to_string().trim_start_matches("/dev/loop").to_string();
            let read = |f: &str| std::fs::read_to_string(format!("/sys/block/loop{n}/{f}")).unwrap().trim().to_string();
            assert_eq!(read("ro"), "1", "{}", device.display());
            assert_eq!(read("loop/autoclear"), "1", "{}", device.display());
            assert_eq!(read("loop/backing_file"), img.display().to_string());
        };
        let (file, device) = attach_read_only(&img, &backing).unwrap();
        check(&device);
        detach(&file);
        let control = File::open(LOOP_CONTROL).expect("missing prerequisite: the loop driver");
        // SAFETY: LOOP_CTL_GET_FREE takes no argument.
        let n = unsafe { loop_ctl_get_free(control.as_raw_fd()) }.unwrap();
        let device = PathBuf::from(format!("/dev/loop{n}"));
        let file = File::open(&device).unwrap();
        set_fd_then_status(&file, &backing, &info(&img)).unwrap();
        check(&device);
        detach(&file);
    }

    #[test]
    fn the_kernels_name_of_the_file_is_cut_at_63_bytes() {
        let long = Path::new("/x").join("y".repeat(100));
        let name = kernel_name(&long);
        assert_eq!(name[LO_NAME_SIZE - 1], 0);
        assert_eq!(&name[..3], b"/x/");
        assert_eq!(kernel_name(Path::new("/a"))[..3], *b"/a\0");
    }
}
