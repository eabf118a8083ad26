//! PID 1 setup: mounts, console file descriptors and PID 1's own OOM
//! protection. Table-driven; every failure names the row that failed and is
//! returned, never panicked on.

use nix::mount::{mount, MsFlags};
use std::fs;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Errors while setting up the system.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A mount from [`MOUNTS`] failed.
    #[error("mount {fstype} on {target} failed")]
    Mount {
        /// Filesystem type.
        fstype: &'static str,
        /// Mount point.
        target: &'static str,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// A mount point could not be created.
    #[error("cannot create mount point {target}")]
    MountPoint {
        /// Mount point.
        target: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// /dev/console could not be opened for fds 0-2.
    #[error("cannot open /dev/console for stdin/stdout/stderr")]
    Console(#[source] std::io::Error),
    /// The work directory's tmpfs could not be replaced by an empty one.
    #[error("cannot replace the tmpfs on {target} with an empty one ({step})")]
    FreshTmpfs {
        /// Mount point.
        target: String,
        /// `unmount` or `mount`.
        step: &'static str,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// oom_score_adj could not be written.
    #[error("cannot write {path}")]
    OomScore {
        /// The file.
        path: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// One mount: (source, target, fstype, flags, data).
pub type MountRow = (&'static str, &'static str, &'static str, MsFlags, &'static str);

const NOSUID_NODEV_NOEXEC: MsFlags = MsFlags::MS_NOSUID.union(MsFlags::MS_NODEV).union(MsFlags::MS_NOEXEC);

/// Everything PID 1 mounts, in order. The work directory is a tmpfs so the
/// workloads never write to the initramfs' rootfs.
pub const MOUNTS: &[MountRow] = &[
    ("proc", "/proc", "proc", NOSUID_NODEV_NOEXEC, ""),
    ("sysfs", "/sys", "sysfs", NOSUID_NODEV_NOEXEC, ""),
    ("devtmpfs", "/dev", "devtmpfs", MsFlags::MS_NOSUID, "mode=0755"),
    ("devpts", "/dev/pts", "devpts", MsFlags::MS_NOSUID.union(MsFlags::MS_NOEXEC), "gid=5,mode=620,ptmxmode=666"),
    ("tmpfs", "/run", "tmpfs", MsFlags::MS_NOSUID.union(MsFlags::MS_NODEV), "mode=0755"),
    ("tmpfs", "/work", "tmpfs", MsFlags::MS_NOSUID.union(MsFlags::MS_NODEV), "mode=1777"),
];

/// The directory workloads write into.
pub const WORK_DIR: &str = "/work";

/// Gives [`WORK_DIR`] an empty tmpfs, so no workload starts among the
/// files of the one before, nor with the memory they held. Called after
/// every workload, once its processes are gone. The old tmpfs is detached
/// (`MNT_DETACH`: no traversal, no I/O, nothing to block on) and freed when
/// its last user is; a new one is mounted in its place.
pub fn fresh_work_dir() -> Result<(), SetupError> {
    let row = MOUNTS.iter().find(|r| r.1 == WORK_DIR).copied();
    let (_, _, _, flags, data) = row.unwrap_or(("tmpfs", WORK_DIR, "tmpfs", MsFlags::empty(), ""));
    fresh_tmpfs(Path::new(WORK_DIR), flags, data)
}

/// Replaces the tmpfs on `target` with an empty one mounted with `flags`
/// and `data`; if `target` is not a mount point, just mounts one there.
fn fresh_tmpfs(target: &Path, flags: MsFlags, data: &str) -> Result<(), SetupError> {
    let error = |step, source| SetupError::FreshTmpfs { target: target.display().to_string(), step, source };
    match nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::Error::EINVAL) => {}
        Err(e) => return Err(error("unmount", e)),
    }
    let data = if data.is_empty() { None } else { Some(data) };
    mount(Some("tmpfs"), target, Some("tmpfs"), flags, data).map_err(|e| error("mount", e))
}

/// Mounts every row of [`MOUNTS`]; a row already mounted (EBUSY) is fine.
/// Returns the errors of the rows that failed, and goes on with the rest.
pub fn mount_all() -> Vec<SetupError> {
    let mut errors = Vec::new();
    for &(source, target, fstype, flags, data) in MOUNTS {
        if let Err(source) = fs::create_dir_all(target) {
            errors.push(SetupError::MountPoint { target, source });
            continue;
        }
        let data = if data.is_empty() { None } else { Some(data) };
        match mount(Some(source), target, Some(fstype), flags, data) {
            Ok(()) | Err(nix::Error::EBUSY) => {}
            Err(source) => errors.push(SetupError::Mount { fstype, target, source }),
        }
    }
    errors
}

/// Whether `fd` needs the console: it is closed, or it is /dev/null. Rust's
/// runtime, before `main`, opens /dev/null on any of fds 0-2 the kernel
/// left closed (the kernel gives init the console only when the image has
/// the node), so "open" alone would let the result go to /dev/null.
fn needs_console(fd: i32) -> bool {
    // SAFETY: F_GETFD only queries the descriptor table.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return true;
    }
    // SAFETY: `fd` is open (checked above) for the length of this call.
    match nix::sys::stat::fstat(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }) {
        Ok(st) => {
            let is_char = st.st_mode & libc::S_IFMT == libc::S_IFCHR;
            is_char && libc::major(st.st_rdev) == 1 && libc::minor(st.st_rdev) == 3
        }
        Err(_) => true,
    }
}

/// Makes sure fds 0, 1 and 2 are the console: any that is closed or is
/// /dev/null gets /dev/console instead.
pub fn ensure_console_fds() -> Result<(), SetupError> {
    if !(0..3).any(needs_console) {
        return Ok(());
    }
    let console =
        fs::OpenOptions::new().read(true).write(true).open(Path::new("/dev/console")).map_err(SetupError::Console)?;
    for fd in 0..3 {
        if console.as_raw_fd() != fd && needs_console(fd) {
            // SAFETY: dup2 onto one of fds 0-2; `console` stays open
            // until after the loop.
            if unsafe { libc::dup2(console.as_raw_fd(), fd) } == -1 {
                return Err(SetupError::Console(std::io::Error::last_os_error()));
            }
        }
    }
    // `console` itself may have landed on 0..2; only close it if not.
    if console.as_raw_fd() < 3 {
        std::mem::forget(console);
    }
    Ok(())
}

/// Sets this process's OOM score adjustment.
pub fn set_oom_score_adj(value: i32) -> Result<(), SetupError> {
    const PATH: &str = "/proc/self/oom_score_adj";
    fs::write(PATH, value.to_string()).map_err(|source| SetupError::OomScore { path: PATH, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a child with a mount namespace of its own (a test process has
    /// threads, and only a single-threaded process may unshare it): a
    /// tmpfs with files in it comes back empty, still a tmpfs, with the
    /// given mode, and a file held open in the old one does not stop that.
    #[test]
    fn the_work_tmpfs_comes_back_empty_and_a_file_held_open_does_not_block_it() {
        assert!(nix::unistd::geteuid().is_root(), "this test mounts: run it as root (CI does)");
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().to_path_buf();
        // SAFETY: the child only makes system calls and exits with _exit.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let code = (|| -> Option<i32> {
                    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).ok()?;
                    let private = MsFlags::MS_REC | MsFlags::MS_PRIVATE;
                    mount(None::<&str>, "/", None::<&str>, private, None::<&str>).ok()?;
                    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
                    mount(Some("tmpfs"), &target, Some("tmpfs"), flags, Some("mode=1777")).ok()?;
                    fs::create_dir_all(target.join("kbuild/tree")).ok()?;
                    fs::write(target.join("kbuild/tree/a.c"), "int a;").ok()?;
                    let _held = fs::File::open(target.join("kbuild/tree/a.c")).ok()?;
                    if fresh_tmpfs(&target, flags, "mode=1777").is_err() {
                        return Some(3);
                    }
                    if fs::read_dir(&target).ok()?.next().is_some() {
                        return Some(4);
                    }
                    let fs_type = nix::sys::statfs::statfs(&target).ok()?.filesystem_type();
                    if fs_type != nix::sys::statfs::TMPFS_MAGIC {
                        return Some(5);
                    }
                    use std::os::unix::fs::PermissionsExt;
                    if fs::metadata(&target).ok()?.permissions().mode() & 0o7777 != 0o1777 {
                        return Some(6);
                    }
                    // Replaced, not stacked on (a stacked one keeps the old
                    // files' memory).
                    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
                    let at = target.to_str()?;
                    if mountinfo.lines().filter(|l| l.split(' ').nth(4) == Some(at)).count() != 1 {
                        return Some(7);
                    }
                    Some(0)
                })()
                .unwrap_or(2);
                // SAFETY: leaves the forked child without running the
                // harness's exit handlers.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                let status = nix::sys::wait::waitpid(child, None).unwrap();
                let what = [
                    "ok",
                    "-",
                    "a setup step failed",
                    "fresh_tmpfs failed",
                    "the old files are still there",
                    "not a tmpfs",
                    "the mode is not 1777",
                    "the new tmpfs is stacked on the old one",
                ];
                match status {
                    nix::sys::wait::WaitStatus::Exited(_, 0) => {}
                    nix::sys::wait::WaitStatus::Exited(_, c) => panic!("{}", what.get(c as usize).unwrap_or(&"?")),
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    #[test]
    fn dev_null_and_closed_fds_need_the_console_a_tty_or_file_does_not() {
        let null = fs::File::open("/dev/null").unwrap();
        assert!(needs_console(null.as_raw_fd()));
        let file = tempfile::tempfile().unwrap();
        assert!(!needs_console(file.as_raw_fd()));
        let zero = fs::File::open("/dev/zero").unwrap();
        assert!(!needs_console(zero.as_raw_fd()), "only /dev/null (1,3) is taken for missing");
        let closed = file.as_raw_fd();
        drop(file);
        assert!(needs_console(closed));
    }
}
