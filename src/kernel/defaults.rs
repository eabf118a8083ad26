//! The kernel a run boots when none is given: the fetched Debian kernel of
//! the arch, or the one built into the cache where Debian has none.

use super::arch::DebianArch;
use super::check::{self, CheckReport, LocatedConfig};
use super::{build, fetch};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// The config of the kernel `bootbench run --arch ARCH` boots by default:
/// the fetched Debian kernel, or the built one where Debian has none.
pub fn default_config(arch: qemu::Arch, root: &Path) -> anyhow::Result<PathBuf> {
    match DebianArch::for_target(arch) {
        Ok(debian) => {
            let k = fetch::cached(debian, root)?.with_context(|| {
                format!("no {arch} kernel in {}: run `bootbench kernel fetch --arch {arch}`", root.display())
            })?;
            Ok(k.config())
        }
        Err(_) => {
            let k = build::cached(arch, root)?.with_context(|| {
                format!(
                    "no {arch} kernel built in {}: run `bootbench kernel build --tree \"$(bootbench kernel source)\" --arch {arch}`",
                    build::arch_dir(root, arch).display()
                )
            })?;
            Ok(k.config())
        }
    }
}

/// The config of `kernel` (an image or a config file), or else of the
/// default kernel of `arch`, with the appliance's check of it.
pub fn check_given_or_default(
    kernel: Option<&Path>,
    arch: Option<qemu::Arch>,
    cache_root: &Path,
) -> anyhow::Result<(LocatedConfig, CheckReport)> {
    let path = match kernel {
        Some(p) => p.to_path_buf(),
        None => {
            let arch = arch.context("give a kernel (or config) to check, or --arch for the cached default")?;
            default_config(arch, cache_root)?
        }
    };
    let located = check::locate(&path)?;
    let arch = check::arch_for(&located, arch)?;
    let report = check::check(&located.config, arch);
    Ok((located, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checking_with_neither_a_kernel_nor_an_arch_or_an_empty_cache_says_what_to_do() {
        let empty = tempfile::tempdir().unwrap();
        let e = check_given_or_default(None, None, empty.path()).unwrap_err().to_string();
        assert!(e.contains("give a kernel (or config) to check, or --arch"), "{e}");
        let e = format!("{:#}", check_given_or_default(None, Some(qemu::Arch::X86_64), empty.path()).unwrap_err());
        assert!(e.contains("bootbench kernel fetch --arch x86_64"), "{e}");
        let e = format!("{:#}", check_given_or_default(None, Some(qemu::Arch::Ppc64), empty.path()).unwrap_err());
        assert!(e.contains("bootbench kernel build"), "{e}");
        let missing = empty.path().join("vmlinuz-none");
        let e = format!("{:#}", check_given_or_default(Some(&missing), None, empty.path()).unwrap_err());
        assert!(e.contains("vmlinuz-none"), "{e}");
    }
}
