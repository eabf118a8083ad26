//! The userland pack mounted on this host for `bootbench local`: the image
//! attached read-only to a free loop device and mounted `ro,nodev,nosuid`
//! at a fresh temporary directory, both undone when the [`PackMount`] is
//! dropped. Needs root. Choosing and building the image is
//! `crate::pack::choice`'s job; this module must not mount anything else.
//!
//! The loop device is set up with `LOOP_CONFIGURE` (one ioctl: backing
//! file, read-only and autoclear together, Linux 5.8 or later) over nix's
//! ioctl macros rather than a loop-device crate (those generate their
//! bindings with bindgen, a libclang build dependency) or the `mount`
//! program (whose device we would have to find again to record and detach
//! it). Autoclear lets the kernel detach the device itself when its last
//! user goes, so even a process killed between the umount and the detach
//! leaves no device behind.

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `/dev/loop-control`.
const LOOP_CONTROL: &str = "/dev/loop-control";
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
/// How long an unmount waits for a busy pack (a build's processes still
/// leaving it) before detaching it lazily.
const UNMOUNT_PATIENCE: Duration = Duration::from_secs(5);

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

/// The pack could not be mounted or unmounted.
#[derive(Debug, thiserror::Error)]
pub enum PackMountError {
    /// Mounting needs root.
    #[error("cannot mount the userland pack {image}: bootbench local mounts it with a loop device, which needs root (run as root, or give --pack none: the built-in suites then build synthetically)")]
    NotRoot {
        /// The image.
        image: PathBuf,
    },
    /// The image cannot be opened.
    #[error("cannot read the userland pack image {image}")]
    Image {
        /// The image.
        image: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No loop device could be had or set up.
    #[error("cannot attach the userland pack {image} to a loop device: {what}")]
    Loop {
        /// The image.
        image: PathBuf,
        /// The step, with its device.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The mount point could not be made.
    #[error("cannot make a mount point for the userland pack {image}")]
    MountPoint {
        /// The image.
        image: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// mount(2) failed.
    #[error("cannot mount the userland pack {image} ({device}) read-only as ext4 at {dir}")]
    Mount {
        /// The image.
        image: PathBuf,
        /// The loop device.
        device: PathBuf,
        /// The mount point.
        dir: PathBuf,
        /// Why.
        #[source]
        source: nix::Error,
    },
    /// umount2(2) failed even lazily.
    #[error("cannot unmount the userland pack at {dir}")]
    Unmount {
        /// The mount point.
        dir: PathBuf,
        /// Why.
        #[source]
        source: nix::Error,
    },
    /// The mount point could not be removed.
    #[error("cannot remove the pack's mount point {dir}")]
    RemoveMountPoint {
        /// The mount point.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The pack, mounted: unmounted, its loop device detached and its mount
/// point removed by [`PackMount::unmount`] or on drop.
#[derive(Debug)]
pub struct PackMount {
    image: PathBuf,
    device: PathBuf,
    dir: PathBuf,
    /// The loop device, open: with autoclear set, closing it after the
    /// umount detaches the device.
    loop_file: Option<File>,
    /// The mount point's directory, removed last.
    mount_point: Option<tempfile::TempDir>,
    mounted: bool,
    /// Unmounts the pack lazily on Ctrl-C, when the process ends without
    /// dropping this.
    on_interrupt: Option<crate::interrupt::OnInterrupt>,
}

impl PackMount {
    /// Mounts `image` read-only (`ro,nodev,nosuid`, ext4) on a fresh loop
    /// device at a new directory under the temporary directory.
    pub fn mount(image: &Path) -> Result<PackMount, PackMountError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(PackMountError::NotRoot { image: image.to_path_buf() });
        }
        let backing =
            File::open(image).map_err(|source| PackMountError::Image { image: image.to_path_buf(), source })?;
        let (loop_file, device) = attach(image, &backing)?;
        drop(backing);
        let mut m = PackMount {
            image: image.to_path_buf(),
            device,
            dir: PathBuf::new(),
            loop_file: Some(loop_file),
            mount_point: None,
            mounted: false,
            on_interrupt: None,
        };
        // On an error below, dropping `m` detaches the device.
        let mount_point = tempfile::Builder::new()
            .prefix("bootbench-pack-")
            .tempdir()
            .map_err(|source| PackMountError::MountPoint { image: image.to_path_buf(), source })?;
        m.dir = mount_point.path().to_path_buf();
        m.mount_point = Some(mount_point);
        let flags = MsFlags::MS_RDONLY | MsFlags::MS_NODEV | MsFlags::MS_NOSUID;
        mount(Some(m.device.as_path()), m.dir.as_path(), Some("ext4"), flags, None::<&str>).map_err(|source| {
            PackMountError::Mount { image: image.to_path_buf(), device: m.device.clone(), dir: m.dir.clone(), source }
        })?;
        m.mounted = true;
        let dir = m.dir.clone();
        m.on_interrupt = Some(crate::interrupt::on_interrupt(move || {
            // Gone from the tree at once; the loop device detaches itself
            // (autoclear) when its last user goes.
            match umount2(&dir, MntFlags::MNT_DETACH) {
                Ok(()) => {
                    let _ = std::fs::remove_dir(&dir);
                    log::info!("interrupted; unmounted the userland pack at {}", dir.display());
                }
                Err(e) => log::warn!("interrupted; cannot unmount the userland pack at {}: {e}", dir.display()),
            }
        }));
        Ok(m)
    }

    /// Where the pack is mounted.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The loop device, e.g. `/dev/loop3`.
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// The image.
    pub fn image(&self) -> &Path {
        &self.image
    }

    /// Unmounts the pack (lazily when it stays busy), detaches the loop
    /// device and removes the mount point, reporting what failed.
    pub fn unmount(mut self) -> Result<(), PackMountError> {
        self.undo()
    }

    fn undo(&mut self) -> Result<(), PackMountError> {
        self.on_interrupt = None;
        let mut first_error = None;
        if self.mounted {
            match unmount_with_patience(&self.dir) {
                Ok(()) => self.mounted = false,
                Err(source) => first_error = Some(PackMountError::Unmount { dir: self.dir.clone(), source }),
            }
        }
        if let Some(f) = self.loop_file.take() {
            // Fails only with the device still in use, when autoclear
            // detaches it as its last user goes; closing `f` next detaches
            // it otherwise.
            // SAFETY: `f` is the loop device we attached; LOOP_CLR_FD takes
            // no argument.
            let _ = unsafe { loop_clr_fd(f.as_raw_fd()) };
        }
        if let Some(d) = self.mount_point.take() {
            if self.mounted {
                // Still mounted: removing would fail, and must not reach
                // into the pack.
                std::mem::forget(d);
            } else if let Err(source) = d.close() {
                first_error.get_or_insert(PackMountError::RemoveMountPoint { dir: self.dir.clone(), source });
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for PackMount {
    fn drop(&mut self) {
        if let Err(e) = self.undo() {
            log::warn!("{}", loads::error_chain::error_chain(&e));
        }
    }
}

/// umount2(dir): waits a while for a busy pack, then detaches it lazily
/// (gone from the tree at once, released when its last user goes).
fn unmount_with_patience(dir: &Path) -> nix::Result<()> {
    let until = Instant::now() + UNMOUNT_PATIENCE;
    loop {
        match umount2(dir, MntFlags::empty()) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EBUSY) if Instant::now() < until => std::thread::sleep(Duration::from_millis(100)),
            Err(nix::errno::Errno::EBUSY) => return umount2(dir, MntFlags::MNT_DETACH),
            Err(e) => return Err(e),
        }
    }
}

/// Attaches `backing` (the open `image`) read-only, with autoclear, to a
/// free loop device; returns the device, open, and its path.
fn attach(image: &Path, backing: &File) -> Result<(File, PathBuf), PackMountError> {
    let fail = |what: String, source: std::io::Error| PackMountError::Loop { image: image.to_path_buf(), what, source };
    let control = File::open(LOOP_CONTROL).map_err(|e| fail(format!("cannot open {LOOP_CONTROL}"), e))?;
    let mut name = [0u8; LO_NAME_SIZE];
    let bytes = image.as_os_str().as_encoded_bytes();
    let n = bytes.len().min(LO_NAME_SIZE - 1);
    name[..n].copy_from_slice(&bytes[..n]);
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
            lo_file_name: name,
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
        let number = unsafe { loop_ctl_get_free(control.as_raw_fd()) }
            .map_err(|e| fail(format!("no free loop device ({LOOP_CONTROL})"), e.into()))?;
        let device = PathBuf::from(format!("/dev/loop{number}"));
        // Opened read-only, the device is read-only whatever the flags say.
        let file = File::open(&device).map_err(|e| fail(format!("cannot open {}", device.display()), e))?;
        // SAFETY: `config` is a valid `struct loop_config` that outlives the
        // call, and `file` is a loop device.
        match unsafe { loop_configure(file.as_raw_fd(), &config) } {
            Ok(_) => return Ok((file, device)),
            // Another process took it between the two calls.
            Err(nix::errno::Errno::EBUSY) if tries < ATTACH_TRIES => continue,
            Err(e) => {
                return Err(fail(
                    format!("LOOP_CONFIGURE on {} (needs Linux 5.8 or later)", device.display()),
                    e.into(),
                ))
            }
        }
    }
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
    fn an_unreadable_image_is_refused_naming_it() {
        let e = PackMount::mount(Path::new("/nonexistent/pack.ext4")).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/pack.ext4"), "{e}");
    }
}
