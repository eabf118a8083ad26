//! The userland pack mounted on this host for `bootbench local`: the image
//! attached read-only to a free loop device and mounted `ro,nodev,nosuid`
//! at a fresh temporary directory, both undone when the [`PackMount`] is
//! dropped. Needs root. Choosing and building the image is
//! `crate::pack::choice`'s job; this module must not mount anything else.
//!
//! The loop device is `loads::loop_device`'s (read-only, autoclear: even a
//! process killed between the umount and the detach leaves no device
//! behind), not the `mount` program's, whose device we would have to find
//! again to record and detach it.

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long an unmount waits for a busy pack (a build's processes still
/// leaving it) before detaching it lazily.
const UNMOUNT_PATIENCE: Duration = Duration::from_secs(5);

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
    #[error("cannot attach the userland pack {image} to a loop device")]
    Loop {
        /// The image.
        image: PathBuf,
        /// Why.
        #[source]
        source: loads::loop_device::LoopError,
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
        let (loop_file, device) = loads::loop_device::attach_read_only(image, &backing)
            .map_err(|source| PackMountError::Loop { image: image.to_path_buf(), source })?;
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
            // Closing `f` next detaches it when it is not still in use.
            loads::loop_device::detach(&f);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_image_is_refused_naming_it() {
        let e = PackMount::mount(Path::new("/nonexistent/pack.ext4")).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/pack.ext4"), "{e}");
    }
}
