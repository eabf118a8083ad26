//! The Debian architecture a stock kernel is fetched for ([`DebianArch`]),
//! and its mapping to the guest arch ([`qemu::Arch`]) it boots as. Parsing
//! accepts every spelling `qemu::Arch` accepts.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Errors in architecture names.
#[derive(Debug, thiserror::Error)]
pub enum ArchError {
    /// A name no architecture answers to.
    #[error(transparent)]
    Unknown(#[from] qemu::arch::ArchError),
    /// Debian builds no kernel for this architecture.
    #[error("Debian has no big-endian ppc64 kernel; build one (see bootbench kernel config)")]
    NoDebianKernel(qemu::Arch),
}

/// A Debian architecture with a stock kernel package in bookworm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DebianArch {
    /// `amd64`: the `linux-image-amd64` flavour, a bzImage.
    Amd64,
    /// `i386`: the `linux-image-686` flavour, a bzImage.
    I386,
    /// `ppc64el`: the `linux-image-powerpc64le` flavour, an ELF vmlinux.
    Ppc64el,
}

impl DebianArch {
    /// Every Debian architecture, in a stable order.
    pub const ALL: [DebianArch; 3] = [DebianArch::Amd64, DebianArch::I386, DebianArch::Ppc64el];

    /// The Debian name (`amd64`, `i386`, `ppc64el`), as dpkg and apt spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            DebianArch::Amd64 => "amd64",
            DebianArch::I386 => "i386",
            DebianArch::Ppc64el => "ppc64el",
        }
    }

    /// The arch the kernel boots as.
    pub fn target(self) -> qemu::Arch {
        match self {
            DebianArch::Amd64 => qemu::Arch::X86_64,
            DebianArch::I386 => qemu::Arch::I386,
            DebianArch::Ppc64el => qemu::Arch::Ppc64le,
        }
    }

    /// The Debian architecture whose stock kernel boots as `arch`.
    pub fn for_target(arch: qemu::Arch) -> Result<DebianArch, ArchError> {
        match arch {
            qemu::Arch::X86_64 => Ok(DebianArch::Amd64),
            qemu::Arch::I386 => Ok(DebianArch::I386),
            qemu::Arch::Ppc64le => Ok(DebianArch::Ppc64el),
            qemu::Arch::Ppc64 => Err(ArchError::NoDebianKernel(arch)),
        }
    }

    /// The metapackage that depends on the current kernel of the default flavour.
    pub fn metapackage(self) -> &'static str {
        match self {
            DebianArch::Amd64 => "linux-image-amd64",
            DebianArch::I386 => "linux-image-686",
            DebianArch::Ppc64el => "linux-image-powerpc64le",
        }
    }

    /// How the bootable image in the package's `boot/` starts: a compressed
    /// `vmlinuz-RELEASE` on x86, an uncompressed ELF `vmlinux-RELEASE` on POWER
    /// (what QEMU's pseries machine loads).
    pub fn image_prefix(self) -> &'static str {
        match self {
            DebianArch::Amd64 | DebianArch::I386 => "vmlinuz-",
            DebianArch::Ppc64el => "vmlinux-",
        }
    }
}

impl fmt::Display for DebianArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DebianArch {
    type Err = ArchError;

    /// Accepts every spelling [`qemu::Arch`] accepts; big-endian ppc64 is an
    /// error because Debian builds no kernel for it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DebianArch::for_target(s.parse::<qemu::Arch>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_spelling() {
        for (given, want) in [
            ("x86_64", DebianArch::Amd64),
            ("amd64", DebianArch::Amd64),
            ("i386", DebianArch::I386),
            ("i686", DebianArch::I386),
            ("ppc64le", DebianArch::Ppc64el),
            ("ppc64el", DebianArch::Ppc64el),
            ("PPC64LE", DebianArch::Ppc64el),
        ] {
            assert_eq!(given.parse::<DebianArch>().unwrap(), want, "{given}");
        }
    }

    #[test]
    fn big_endian_ppc64_has_no_debian_kernel() {
        let err = "ppc64".parse::<DebianArch>().unwrap_err();
        assert!(matches!(err, ArchError::NoDebianKernel(qemu::Arch::Ppc64)));
        assert_eq!(err.to_string(), "Debian has no big-endian ppc64 kernel; build one (see bootbench kernel config)");
    }

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let err = "sparc64".parse::<DebianArch>().unwrap_err();
        assert!(err.to_string().contains("'sparc64'"), "{err}");
        assert!(err.to_string().contains("ppc64le"), "{err}");
    }

    #[test]
    fn names_round_trip() {
        for arch in DebianArch::ALL {
            assert_eq!(arch.as_str().parse::<DebianArch>().unwrap(), arch);
            assert_eq!(DebianArch::for_target(arch.target()).unwrap(), arch);
            assert_eq!(serde_json::to_string(&arch).unwrap(), format!("\"{arch}\""));
        }
    }
}
