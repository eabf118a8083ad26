//! Recognising a kernel image from its header, so that a bzImage handed to
//! the ppc64 profile (or a big-endian vmlinux to the ppc64le one) is refused
//! with a clear message instead of a guest that prints nothing. Reads the
//! first page of the file only.

use crate::arch::Arch;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Errors recognising a kernel image.
#[derive(Debug, thiserror::Error)]
pub enum KernelImageError {
    /// The file cannot be opened or read.
    #[error("cannot read kernel image {path}")]
    Read {
        /// The image.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The header is neither a bzImage nor an ELF file.
    #[error("kernel image {path} is neither a bzImage nor an ELF vmlinux")]
    Unrecognised {
        /// The image.
        path: PathBuf,
    },
    /// The image is for another arch or in the wrong format.
    #[error("kernel image {path} is {found}, but arch {arch} needs {wanted}")]
    WrongKind {
        /// The image.
        path: PathBuf,
        /// What the header says.
        found: KernelKind,
        /// The profile's arch.
        arch: Arch,
        /// What that arch boots.
        wanted: &'static str,
    },
}

/// What a kernel image's header says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// An x86 bzImage; `long_mode` is whether it has a 64-bit entry point
    /// (XLF_KERNEL_64), i.e. is an x86_64 kernel.
    BzImage {
        /// Whether it is a 64-bit kernel.
        long_mode: bool,
    },
    /// An ELF file.
    Elf {
        /// `e_machine`.
        machine: u16,
        /// ELFCLASS64.
        class64: bool,
        /// ELFDATA2LSB.
        little_endian: bool,
    },
}

const EM_386: u16 = 3;
const EM_PPC64: u16 = 21;
const EM_X86_64: u16 = 62;

impl KernelKind {
    /// Reads the header of the image at `path`.
    pub fn detect(path: &Path) -> Result<KernelKind, KernelImageError> {
        let read_err = |source| KernelImageError::Read { path: path.to_path_buf(), source };
        let mut head = Vec::with_capacity(4096);
        std::fs::File::open(path).map_err(read_err)?.take(4096).read_to_end(&mut head).map_err(read_err)?;
        KernelKind::from_header(&head).ok_or_else(|| KernelImageError::Unrecognised { path: path.to_path_buf() })
    }

    /// Recognises the first bytes of an image (at least 0x240 for a bzImage,
    /// 20 for ELF).
    pub fn from_header(head: &[u8]) -> Option<KernelKind> {
        if head.len() >= 20 && head[..4] == *b"\x7fELF" {
            let little_endian = head[5] == 1;
            let machine = if little_endian {
                u16::from_le_bytes([head[18], head[19]])
            } else {
                u16::from_be_bytes([head[18], head[19]])
            };
            return Some(KernelKind::Elf { machine, class64: head[4] == 2, little_endian });
        }
        // Linux x86 boot protocol: "HdrS" at 0x202, xloadflags at 0x236.
        if head.len() >= 0x238 && head[0x202..0x206] == *b"HdrS" {
            let version = u16::from_le_bytes([head[0x206], head[0x207]]);
            let long_mode = version >= 0x020c && head[0x236] & 1 != 0;
            return Some(KernelKind::BzImage { long_mode });
        }
        None
    }

    /// Whether QEMU's profile for `arch` can boot this image; the error
    /// names what the arch wants.
    pub fn check_for(self, arch: Arch) -> Result<(), &'static str> {
        match (arch, self) {
            (Arch::X86_64, KernelKind::BzImage { long_mode: true }) => Ok(()),
            (Arch::X86_64, KernelKind::Elf { machine: EM_X86_64, .. }) => Ok(()),
            (Arch::X86_64, _) => Err("an x86_64 bzImage (or a PVH vmlinux)"),
            (Arch::I386, KernelKind::BzImage { long_mode: false }) => Ok(()),
            (Arch::I386, KernelKind::Elf { machine: EM_386, .. }) => Ok(()),
            (Arch::I386, _) => Err("a 32-bit x86 bzImage"),
            (Arch::Ppc64, KernelKind::Elf { machine: EM_PPC64, class64: true, little_endian: false }) => Ok(()),
            (Arch::Ppc64, _) => Err("a big-endian ppc64 ELF vmlinux"),
            (Arch::Ppc64le, KernelKind::Elf { machine: EM_PPC64, class64: true, little_endian: true }) => Ok(()),
            (Arch::Ppc64le, _) => Err("a little-endian ppc64 ELF vmlinux"),
        }
    }
}

impl fmt::Display for KernelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KernelKind::BzImage { long_mode: true } => f.write_str("an x86_64 bzImage"),
            KernelKind::BzImage { long_mode: false } => f.write_str("a 32-bit x86 bzImage"),
            KernelKind::Elf { machine, class64, little_endian } => {
                let name = match machine {
                    EM_386 => "i386",
                    EM_X86_64 => "x86_64",
                    EM_PPC64 => "ppc64",
                    _ => "unknown-machine",
                };
                let endian = if little_endian { "little" } else { "big" };
                let bits = if class64 { 64 } else { 32 };
                write!(f, "a {bits}-bit {endian}-endian {name} ELF (e_machine {machine})")
            }
        }
    }
}

/// Checks that the image at `path` is one `arch` boots.
pub fn check_kernel(path: &Path, arch: Arch) -> Result<KernelKind, KernelImageError> {
    let kind = KernelKind::detect(path)?;
    kind.check_for(arch).map_err(|wanted| KernelImageError::WrongKind {
        path: path.to_path_buf(),
        found: kind,
        arch,
        wanted,
    })?;
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bzimage(long_mode: bool) -> Vec<u8> {
        let mut h = vec![0u8; 0x240];
        h[0x202..0x206].copy_from_slice(b"HdrS");
        h[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
        h[0x236] = u8::from(long_mode);
        h
    }

    fn elf(machine: u16, class64: bool, le: bool) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = if class64 { 2 } else { 1 };
        h[5] = if le { 1 } else { 2 };
        let m = if le { machine.to_le_bytes() } else { machine.to_be_bytes() };
        h[18..20].copy_from_slice(&m);
        h
    }

    #[test]
    fn recognises_and_matches_arches() {
        let k64 = KernelKind::from_header(&bzimage(true)).unwrap();
        let k32 = KernelKind::from_header(&bzimage(false)).unwrap();
        assert!(k64.check_for(Arch::X86_64).is_ok());
        assert!(k64.check_for(Arch::I386).is_err());
        assert!(k32.check_for(Arch::I386).is_ok());
        assert!(k32.check_for(Arch::Ppc64le).is_err());
        let le = KernelKind::from_header(&elf(EM_PPC64, true, true)).unwrap();
        let be = KernelKind::from_header(&elf(EM_PPC64, true, false)).unwrap();
        assert!(le.check_for(Arch::Ppc64le).is_ok());
        assert!(le.check_for(Arch::Ppc64).is_err());
        assert!(be.check_for(Arch::Ppc64).is_ok());
        assert_eq!(KernelKind::from_header(b"garbage"), None);
    }

    #[test]
    fn mismatch_message_names_both_sides() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("vmlinuz");
        std::fs::write(&p, bzimage(true)).unwrap();
        let msg = check_kernel(&p, Arch::Ppc64le).unwrap_err().to_string();
        assert!(msg.contains("x86_64 bzImage") && msg.contains("little-endian ppc64 ELF"), "{msg}");
    }
}
