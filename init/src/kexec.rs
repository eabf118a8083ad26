//! Booting a downloaded kernel from PID 1: `kexec_file_load(2)` with the
//! kernel's and initramfs's files and the cmdline, then
//! `reboot(LINUX_REBOOT_CMD_KEXEC)`. Only what the running kernel can load
//! by itself (no kexec-tools loader is reimplemented here); every refusal
//! names its errno and what it usually means. Never panics.

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Errors while loading or booting a kernel with kexec.
#[derive(Debug, thiserror::Error)]
pub enum KexecError {
    /// A file to load cannot be opened.
    #[error("cannot open {path} for kexec")]
    Open {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The cmdline cannot be passed as a C string.
    #[error("the job's cmdline holds a NUL byte")]
    NulInCmdline,
    /// The kernel refused to load the image.
    #[error("kexec_file_load refused the kernel: {hint}")]
    Load {
        /// What the errno usually means here.
        hint: &'static str,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The kexec reboot returned (it only returns on failure).
    #[error("reboot(LINUX_REBOOT_CMD_KEXEC) failed")]
    Reboot(#[source] nix::Error),
}

/// What an errno of `kexec_file_load` usually means.
pub fn load_errno_hint(errno: nix::Error) -> &'static str {
    use nix::Error as E;
    match errno {
        E::ENOSYS => "this kernel or architecture has no kexec_file_load (i386 has none; or CONFIG_KEXEC_FILE is off)",
        E::EPERM => "not permitted: kernel lockdown, or kexec disabled by kernel.kexec_load_disabled",
        E::EKEYREJECTED => {
            "the kernel's signature was rejected (Secure Boot or lockdown wants a kernel signed with a trusted key)"
        }
        E::ENOKEY => "no key to check the kernel's signature (an unsigned kernel where signatures are enforced)",
        E::EBADMSG => "the kernel's signature is malformed",
        E::ENOEXEC => "not a kernel image this kernel can kexec (wrong format or architecture)",
        E::EINVAL => "invalid image or arguments (a cmdline longer than this kernel takes?)",
        E::ENOMEM => "not enough memory for the kernel and its initramfs",
        E::EBUSY => "another kexec load is in progress",
        _ => "unexpected errno",
    }
}

#[cfg(any(
    all(target_arch = "x86_64", target_pointer_width = "64"),
    target_arch = "aarch64",
    target_arch = "powerpc64",
    target_arch = "s390x",
    target_arch = "loongarch64"
))]
fn kexec_file_load(kernel_fd: i32, initrd_fd: i32, cmdline: &CString) -> Result<(), nix::Error> {
    let bytes = cmdline.as_bytes_with_nul();
    // SAFETY: both fds are open for the call; the cmdline pointer and its
    // length (NUL included, as the syscall wants) come from a live CString.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_kexec_file_load,
            libc::c_long::from(kernel_fd),
            libc::c_long::from(initrd_fd),
            bytes.len() as libc::c_ulong,
            bytes.as_ptr(),
            0 as libc::c_ulong,
        )
    };
    if rc < 0 {
        return Err(nix::Error::last());
    }
    Ok(())
}

/// Architectures whose Linux has no `kexec_file_load` (i386, 32-bit Arm
/// and PowerPC): the same answer the kernel would give.
#[cfg(not(any(
    all(target_arch = "x86_64", target_pointer_width = "64"),
    target_arch = "aarch64",
    target_arch = "powerpc64",
    target_arch = "s390x",
    target_arch = "loongarch64"
)))]
fn kexec_file_load(_kernel_fd: i32, _initrd_fd: i32, _cmdline: &CString) -> Result<(), nix::Error> {
    Err(nix::Error::ENOSYS)
}

/// Loads `kernel` with `initrd` and `cmdline` for the next kexec reboot.
pub fn load(kernel: &Path, initrd: &Path, cmdline: &str) -> Result<(), KexecError> {
    let open =
        |path: &Path| std::fs::File::open(path).map_err(|source| KexecError::Open { path: path.to_path_buf(), source });
    let cmdline = CString::new(cmdline).map_err(|_| KexecError::NulInCmdline)?;
    let (k, i) = (open(kernel)?, open(initrd)?);
    kexec_file_load(k.as_raw_fd(), i.as_raw_fd(), &cmdline)
        .map_err(|source| KexecError::Load { hint: load_errno_hint(source), source })
}

/// Reboots into the loaded kernel. Returns only when the kernel refused.
pub fn reboot_into_loaded() -> KexecError {
    match nix::sys::reboot::reboot(nix::sys::reboot::RebootMode::RB_KEXEC) {
        Err(e) => KexecError::Reboot(e),
        Ok(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_their_errno_and_likely_cause() {
        let e = KexecError::Load { hint: load_errno_hint(nix::Error::EKEYREJECTED), source: nix::Error::EKEYREJECTED };
        let text = loads::error_chain::error_chain(&e);
        assert!(text.contains("Secure Boot") && text.contains("EKEYREJECTED"), "{text}");
        assert!(load_errno_hint(nix::Error::ENOSYS).contains("i386"));
        assert!(load_errno_hint(nix::Error::EPERM).contains("lockdown"));
    }

    #[test]
    fn a_missing_file_or_a_nul_in_the_cmdline_is_refused_before_the_syscall() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("kernel");
        let e = load(&k, &k, "console=ttyS0").unwrap_err();
        assert!(matches!(e, KexecError::Open { ref path, .. } if path == &k), "{e:?}");
        std::fs::write(&k, b"x").unwrap();
        assert!(matches!(load(&k, &k, "a\0b"), Err(KexecError::NulInCmdline)));
    }
}
