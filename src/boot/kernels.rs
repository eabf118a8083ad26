//! The kernels a run boots: the user's images (with the config and modules
//! found beside them), the kernel trees the user built
//! ([`crate::kernel::tree`]), or the cached default kernel of the arch, each
//! with what the host knows about it for the envelope; and the arch a run
//! boots, which a tree's config decides when `--arch` is not given.

use crate::boot::options::RunOptions;
use crate::kernel::tree::KernelTree;
use crate::kernel::{self, DebianArch, FetchedKernel};
use anyhow::{bail, Context};
use qemu::Arch;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

pub(crate) fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(hex::encode(Sha256::digest(&data)))
}

/// A kernel to boot, with what the host knows about it.
#[derive(Debug, Clone)]
pub(crate) struct KernelUnderTest {
    pub(crate) image: PathBuf,
    pub(crate) image_sha256: String,
    pub(crate) config: Option<PathBuf>,
    pub(crate) config_sha256: Option<String>,
    pub(crate) modules_dir: Option<PathBuf>,
    pub(crate) package: Option<String>,
    pub(crate) release: Option<String>,
    /// The built tree the kernel comes from: the modules the run needs are
    /// installed from it when the image is built (unless `modules_dir` was
    /// given).
    pub(crate) tree: Option<KernelTree>,
}

impl KernelUnderTest {
    /// The kernel as a boot's record names it.
    pub(crate) fn kernel_ref(&self) -> crate::results::KernelRef {
        crate::results::KernelRef {
            path: self.image.clone(),
            image_sha256: self.image_sha256.clone(),
            config_sha256: self.config_sha256.clone(),
            package: self.package.clone(),
            release: self.release.clone(),
            commit: None,
        }
    }

    /// Puts what the host knows of the kernel (its image's and config's
    /// sha256) into the guest's document, which cannot know them.
    pub(crate) fn stamp(&self, doc: &mut loads::schema::RunDocument) {
        doc.provenance.kernel.image_sha256 = Some(self.image_sha256.clone());
        doc.provenance.kernel.config_sha256 = self.config_sha256.clone();
    }

    pub(crate) fn from_fetched(k: &FetchedKernel) -> KernelUnderTest {
        KernelUnderTest {
            image: k.image(),
            image_sha256: k.info.image_sha256.clone(),
            config: Some(k.config()),
            config_sha256: Some(k.info.config_sha256.clone()),
            modules_dir: Some(k.modules_dir()),
            package: Some(format!("{} {}", k.info.package, k.info.version)),
            release: Some(k.info.release.clone()),
            tree: None,
        }
    }

    pub(crate) fn from_built(k: &kernel::build::BuiltKernel) -> KernelUnderTest {
        KernelUnderTest {
            image: k.image(),
            image_sha256: k.info.image_sha256.clone(),
            config: Some(k.config()),
            config_sha256: Some(k.info.config_sha256.clone()),
            // Built for the appliance: everything it needs is built in.
            modules_dir: None,
            package: Some(format!("built from {} ({})", k.info.source_tree.display(), k.info.defconfig)),
            release: Some(k.info.release.clone()),
            tree: None,
        }
    }

    /// A user-supplied image: its config is `config-SUFFIX` beside a
    /// `vmlinuz-SUFFIX`, or the `.config` of the kernel tree it was built in.
    pub(crate) fn from_path(path: &Path, modules_dir: Option<&PathBuf>) -> anyhow::Result<KernelUnderTest> {
        if !path.is_file() {
            bail!("kernel image {} does not exist or is not a file", path.display());
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let suffix = name.strip_prefix("vmlinuz-").or_else(|| name.strip_prefix("vmlinux-"));
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut candidates = Vec::new();
        if let Some(s) = suffix {
            candidates.push(dir.join(format!("config-{s}")));
        }
        candidates.extend(dir.ancestors().take(4).map(|d| d.join(".config")));
        let config = candidates.into_iter().find(|c| c.is_file());
        let config_sha256 = config.as_deref().map(sha256_file).transpose()?;
        // A kernel from the cache carries its modules at ../lib/modules/SUFFIX.
        let modules_dir =
            modules_dir.cloned().or_else(|| suffix.map(|s| dir.join("../lib/modules").join(s)).filter(|d| d.is_dir()));
        Ok(KernelUnderTest {
            image: path.to_path_buf(),
            image_sha256: sha256_file(path)?,
            config,
            config_sha256,
            modules_dir,
            package: None,
            release: suffix.map(str::to_string),
            tree: None,
        })
    }

    /// A kernel tree the user built, opened and checked for `arch`;
    /// `modules_dir` (`--modules-dir`) wins over installing from the tree.
    pub(crate) fn from_tree(dir: &Path, arch: Arch, modules_dir: Option<&PathBuf>) -> anyhow::Result<KernelUnderTest> {
        let tree = KernelTree::open(dir, Some(arch))?;
        qemu::kernel_image::check_kernel(&tree.image, arch)?;
        Ok(KernelUnderTest {
            image: tree.image.clone(),
            image_sha256: sha256_file(&tree.image)?,
            config: Some(tree.config_path.clone()),
            config_sha256: Some(sha256_file(&tree.config_path)?),
            modules_dir: modules_dir.cloned(),
            package: Some(tree.describe()),
            release: Some(tree.release.clone()),
            tree: Some(tree),
        })
    }

    /// Whether the modules the kernel's config builds as `=m` can be
    /// packed: a modules tree is known, or a modular built tree will
    /// install them.
    pub(crate) fn modules_known(&self) -> bool {
        self.modules_dir.is_some() || self.tree.as_ref().is_some_and(|t| t.modular)
    }

    /// How the kernel config builds the virtio console: `y`, `m`, or unknown.
    pub(crate) fn virtio_console(&self) -> Option<char> {
        let text = std::fs::read_to_string(self.config.as_ref()?).ok()?;
        text.lines().find_map(|l| l.strip_prefix("CONFIG_VIRTIO_CONSOLE=")).and_then(|v| v.chars().next())
    }
}

/// The arch a run boots: `--arch`, else the arch of the `--kernel` trees'
/// configs (which must agree), else x86_64. A tree whose config is for
/// another arch than `--arch`, or that cannot boot, is refused here,
/// before anything is built.
pub(crate) fn run_arch(args: &RunOptions) -> anyhow::Result<Arch> {
    let given: Option<Arch> = args.arch.as_deref().map(str::parse).transpose()?;
    let mut from_trees: Option<(Arch, &Path)> = None;
    for dir in args.kernels.iter().filter(|p| p.is_dir()) {
        let tree = KernelTree::open(dir, given)?;
        match from_trees {
            Some((arch, first)) if arch != tree.arch => bail!(
                "--kernel {} is configured for {arch} but --kernel {} for {}: one run boots one arch",
                first.display(),
                dir.display(),
                tree.arch
            ),
            Some(_) => {}
            None => from_trees = Some((tree.arch, dir)),
        }
    }
    Ok(given.or(from_trees.map(|(arch, _)| arch)).unwrap_or(Arch::X86_64))
}

pub(crate) fn resolve_kernels(args: &RunOptions, arch: Arch) -> anyhow::Result<Vec<KernelUnderTest>> {
    if !args.kernels.is_empty() {
        return args
            .kernels
            .iter()
            .map(|p| {
                if p.is_dir() {
                    return KernelUnderTest::from_tree(p, arch, args.modules_dir.as_ref());
                }
                // Refuse a file that is no kernel for the arch before building
                // an image or starting QEMU.
                qemu::kernel_image::check_kernel(p, arch)?;
                KernelUnderTest::from_path(p, args.modules_dir.as_ref())
            })
            .collect();
    }
    let root = args.kernel_cache_root();
    if arch.profile().debian_arch.is_none() {
        // Debian has no kernel for this arch (big-endian ppc64): boot the
        // one `bootbench kernel build` installed into the cache.
        let built = kernel::build::cached(arch, &root)?.with_context(|| {
            format!(
                "no {arch} kernel: Debian ships none, and none was built into {}; build one with \
                 `bootbench kernel build --tree \"$(bootbench kernel source)\" --arch {arch}` or give --kernel",
                kernel::build::arch_dir(&root, arch).display()
            )
        })?;
        built.verify()?;
        return Ok(vec![KernelUnderTest::from_built(&built)]);
    }
    let debian = DebianArch::for_target(arch)?;
    let fetched = match kernel::cached(debian, &root)? {
        Some(k) => {
            k.verify()?;
            k
        }
        None => {
            log::info!("no cached {debian} kernel; fetching the default one");
            kernel::fetch(debian, false, &root)?
        }
    };
    Ok(vec![KernelUnderTest::from_fetched(&fetched)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_kernel_file_is_a_clear_error() {
        let e = KernelUnderTest::from_path(Path::new("/nonexistent/vmlinuz-x"), None).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/vmlinuz-x"), "{e}");
    }
}
