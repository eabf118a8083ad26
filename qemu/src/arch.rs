//! Guest architectures and the per-arch QEMU profile: which binary, machine,
//! console and kernel format each one uses. Pure data; nothing here spawns a
//! process or touches the file system.

use crate::cmdline::{CmdlineError, KernelCmdline};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The format QEMU's `-kernel` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelFormat {
    /// An x86 boot-protocol image (`arch/x86/boot/bzImage`, Debian's vmlinuz).
    BzImage,
    /// An uncompressed ELF `vmlinux`.
    Elf,
}

/// Errors naming an architecture.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchError {
    /// Not one of the names [`Arch::from_str`] accepts.
    #[error("unknown architecture '{0}' (valid: {VALID_NAMES})")]
    Unknown(String),
    /// The host this binary runs on is none of the supported guest arches.
    #[error("host architecture '{0}' is not one bootbench can boot")]
    UnsupportedHost(&'static str),
}

/// Every accepted spelling, for error messages.
const VALID_NAMES: &str = "x86_64|amd64, i386|i686|x86, ppc64|powerpc64, ppc64le|ppc64el|powerpc64le";

/// A guest architecture bootbench can boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// 64-bit x86.
    X86_64,
    /// 32-bit x86.
    I386,
    /// 64-bit big-endian POWER.
    Ppc64,
    /// 64-bit little-endian POWER.
    Ppc64le,
}

impl Arch {
    /// Every arch, in display order.
    pub const ALL: [Arch; 4] = [Arch::X86_64, Arch::I386, Arch::Ppc64, Arch::Ppc64le];

    /// The canonical name, as printed and as used in results.
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::I386 => "i386",
            Arch::Ppc64 => "ppc64",
            Arch::Ppc64le => "ppc64le",
        }
    }

    /// The arch of the host this binary was built for.
    ///
    /// ```
    /// # use qemu::Arch;
    /// # #[cfg(target_arch = "x86_64")]
    /// assert_eq!(Arch::host().unwrap(), Arch::X86_64);
    /// ```
    pub fn host() -> Result<Arch, ArchError> {
        match (std::env::consts::ARCH, cfg!(target_endian = "little")) {
            ("x86_64", _) => Ok(Arch::X86_64),
            ("x86", _) => Ok(Arch::I386),
            ("powerpc64", false) => Ok(Arch::Ppc64),
            ("powerpc64", true) => Ok(Arch::Ppc64le),
            (other, _) => Err(ArchError::UnsupportedHost(other)),
        }
    }

    /// The QEMU profile for this arch.
    pub fn profile(self) -> ArchProfile {
        ArchProfile::for_arch(self)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Arch {
    type Err = ArchError;

    /// Accepts the kernel, Debian and Rust spellings of each arch.
    ///
    /// ```
    /// # use qemu::Arch;
    /// assert_eq!("amd64".parse::<Arch>().unwrap(), Arch::X86_64);
    /// assert_eq!("ppc64el".parse::<Arch>().unwrap(), Arch::Ppc64le);
    /// assert!("arm64".parse::<Arch>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "x86_64" | "amd64" | "x86-64" => Ok(Arch::X86_64),
            "i386" | "i686" | "x86" => Ok(Arch::I386),
            "ppc64" | "powerpc64" => Ok(Arch::Ppc64),
            "ppc64le" | "ppc64el" | "powerpc64le" => Ok(Arch::Ppc64le),
            _ => Err(ArchError::Unknown(s.to_string())),
        }
    }
}

/// The kernel's `COMMAND_LINE_SIZE` (including the terminating NUL) on x86
/// and powerpc for the 6.1 kernels bootbench targets.
pub const COMMAND_LINE_SIZE: usize = 2048;

/// How QEMU boots one arch. The fields are public so a caller (or a test) can
/// override e.g. the QEMU binary or the machine type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchProfile {
    /// The guest arch.
    pub arch: Arch,
    /// The QEMU system emulator, looked up on `PATH` when not absolute.
    pub qemu_binary: PathBuf,
    /// The `-machine` type.
    pub machine: String,
    /// The console device for `console=` on the kernel cmdline.
    pub console: &'static str,
    /// The kernel image format QEMU's `-kernel` expects here.
    pub kernel_format: KernelFormat,
    /// The Rust target triple the init must be built for.
    pub init_target: &'static str,
    /// The Debian architecture name of this arch's kernel packages, if Debian
    /// has one (Debian ships no big-endian ppc64 kernel).
    pub debian_arch: Option<&'static str>,
    /// The `-cpu` model used under TCG when the caller names none; `None`
    /// leaves QEMU's default. Under KVM the default is always `host`.
    pub tcg_cpu: Option<&'static str>,
    /// The `-device` that lets the guest report a panic to QEMU, if the
    /// machine needs one (pseries reports panics through RTAS `ibm,os-term`).
    pub pvpanic: Option<&'static str>,
    /// The kernel's command-line buffer size, including the NUL.
    pub cmdline_capacity: usize,
    /// Guest memory when the caller names none, in MiB.
    pub default_mem_mib: u64,
    /// The granularity the machine requires of guest memory, in MiB:
    /// pseries refuses a size that is not a whole number of its 256 MiB
    /// memory blocks; 1 where any size of whole MiB is accepted.
    pub mem_step_mib: u64,
    /// The most guest memory the arch's kernel can use, in MiB, when that
    /// is less than any host has: Debian's 686 kernel (HIGHMEM4G, no PAE)
    /// cannot reach what the `pc` machine puts above 4 GiB, and from 3.5
    /// GiB of RAM on it keeps only 3 GiB below 4 GiB. `--mem auto` never
    /// grows past it; a larger `--mem` is checked as this much.
    pub max_usable_mem_mib: Option<u64>,
}

impl ArchProfile {
    /// The profile for `arch`.
    ///
    /// ```
    /// # use qemu::{Arch, ArchProfile};
    /// let p = ArchProfile::for_arch(Arch::Ppc64le);
    /// assert_eq!(p.machine, "pseries");
    /// assert_eq!(p.console, "hvc0");
    /// assert_eq!(p.qemu_binary.to_str(), Some("qemu-system-ppc64"));
    /// ```
    pub fn for_arch(arch: Arch) -> ArchProfile {
        match arch {
            Arch::X86_64 => ArchProfile {
                arch,
                qemu_binary: PathBuf::from("qemu-system-x86_64"),
                machine: "q35".to_string(),
                console: "ttyS0",
                kernel_format: KernelFormat::BzImage,
                init_target: "x86_64-unknown-linux-gnu",
                debian_arch: Some("amd64"),
                tcg_cpu: Some("max"),
                pvpanic: Some("pvpanic"),
                cmdline_capacity: COMMAND_LINE_SIZE,
                default_mem_mib: 512,
                mem_step_mib: 1,
                max_usable_mem_mib: None,
            },
            Arch::I386 => ArchProfile {
                arch,
                qemu_binary: PathBuf::from("qemu-system-i386"),
                machine: "pc".to_string(),
                console: "ttyS0",
                kernel_format: KernelFormat::BzImage,
                init_target: "i686-unknown-linux-gnu",
                debian_arch: Some("i386"),
                tcg_cpu: Some("max"),
                pvpanic: Some("pvpanic"),
                cmdline_capacity: COMMAND_LINE_SIZE,
                default_mem_mib: 512,
                mem_step_mib: 1,
                max_usable_mem_mib: Some(3583),
            },
            Arch::Ppc64 | Arch::Ppc64le => ArchProfile {
                arch,
                qemu_binary: PathBuf::from("qemu-system-ppc64"),
                machine: "pseries".to_string(),
                console: "hvc0",
                kernel_format: KernelFormat::Elf,
                init_target: if arch == Arch::Ppc64 {
                    "powerpc64-unknown-linux-gnu"
                } else {
                    "powerpc64le-unknown-linux-gnu"
                },
                debian_arch: if arch == Arch::Ppc64 { None } else { Some("ppc64el") },
                tcg_cpu: None,
                pvpanic: None,
                cmdline_capacity: COMMAND_LINE_SIZE,
                default_mem_mib: 1024,
                mem_step_mib: 256,
                max_usable_mem_mib: None,
            },
        }
    }

    /// The cmdline every boot starts from: the console the host reads, and
    /// `panic=-1` so a panicking kernel reboots at once (which `-no-reboot`
    /// turns into QEMU exiting).
    ///
    /// ```
    /// # use qemu::{Arch, ArchProfile};
    /// let c = ArchProfile::for_arch(Arch::X86_64).base_cmdline().unwrap();
    /// assert_eq!(c.as_str(), "console=ttyS0 panic=-1");
    /// ```
    pub fn base_cmdline(&self) -> Result<KernelCmdline, CmdlineError> {
        let mut c = KernelCmdline::new(self.cmdline_capacity)?;
        c.push("console", self.console)?;
        c.push("panic", "-1")?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_parses_and_round_trips() {
        for (s, a) in [
            ("x86_64", Arch::X86_64),
            ("AMD64", Arch::X86_64),
            ("i386", Arch::I386),
            ("i686", Arch::I386),
            ("x86", Arch::I386),
            ("ppc64", Arch::Ppc64),
            ("powerpc64", Arch::Ppc64),
            ("ppc64le", Arch::Ppc64le),
            ("ppc64el", Arch::Ppc64le),
            ("powerpc64le", Arch::Ppc64le),
        ] {
            assert_eq!(s.parse::<Arch>().unwrap(), a, "{s}");
        }
        for a in Arch::ALL {
            assert_eq!(a.to_string().parse::<Arch>().unwrap(), a);
        }
    }

    #[test]
    fn unknown_arch_lists_valid_names() {
        let msg = "riscv64".parse::<Arch>().unwrap_err().to_string();
        assert!(msg.contains("riscv64") && msg.contains("ppc64le") && msg.contains("amd64"), "{msg}");
    }

    #[test]
    fn profiles_match_the_machine_notes() {
        let x = Arch::X86_64.profile();
        assert_eq!((x.machine.as_str(), x.console, x.kernel_format), ("q35", "ttyS0", KernelFormat::BzImage));
        assert_eq!(x.pvpanic, Some("pvpanic"));
        let be = Arch::Ppc64.profile();
        assert_eq!(be.kernel_format, KernelFormat::Elf);
        assert_eq!(be.debian_arch, None);
        assert_eq!(be.init_target, "powerpc64-unknown-linux-gnu");
        assert_eq!(Arch::Ppc64le.profile().debian_arch, Some("ppc64el"));
        assert_eq!(Arch::I386.profile().qemu_binary, PathBuf::from("qemu-system-i386"));
    }
}
