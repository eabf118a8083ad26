//! A file attached read-only to a free loop device, for the host's
//! `bootbench local` (the userland pack mounted on this host) and the
//! guest's init (a lab machine's pack, a file in its pack store).
//!
//! The device is set up with `LOOP_CONFIGURE` (one ioctl: backing file,
//! read-only and autoclear together, Linux 5.8 or later) over nix's ioctl
//! macros rather than a loop-device crate (those generate their bindings
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
const LOOP_CLR_FD: u32 = 0x4C01;
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
    /// `LOOP_CONFIGURE` failed.
    #[error("LOOP_CONFIGURE on {} (needs Linux 5.8 or later)", .device.display())]
    Configure {
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

/// Attaches `backing` (the open `image`) read-only, with autoclear, to a
/// free loop device; returns the device, open, and its path.
pub fn attach_read_only(image: &Path, backing: &File) -> Result<(File, PathBuf), LoopError> {
    let control = File::open(LOOP_CONTROL).map_err(LoopError::Control)?;
    let config = LoopConfig {
        fd: backing.as_raw_fd() as u32,
        block_size: 0,
        info: LoopInfo64 {
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
        },
        reserved: [0; 8],
    };
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
        match unsafe { loop_configure(file.as_raw_fd(), &config) } {
            Ok(_) => return Ok((file, device)),
            // Another process took it between the two calls.
            Err(nix::errno::Errno::EBUSY) if tries < ATTACH_TRIES => continue,
            Err(source) => return Err(LoopError::Configure { device, source }),
        }
    }
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

    #[test]
    fn the_kernels_name_of_the_file_is_cut_at_63_bytes() {
        let long = Path::new("/x").join("y".repeat(100));
        let name = kernel_name(&long);
        assert_eq!(name[LO_NAME_SIZE - 1], 0);
        assert_eq!(&name[..3], b"/x/");
        assert_eq!(kernel_name(Path::new("/a"))[..3], *b"/a\0");
    }
}
