//! Installed builds: the `kernel.json` record of a built kernel, the entry
//! it describes (in the kernel cache or a directory of the caller's choice),
//! the cache's per-arch directories and their `default` link, and the
//! installing of a finished build's files. It runs no build step and names
//! nothing in `build` but its error.

use super::error::BuildError;
use qemu::Arch;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

/// Name of the metadata file in an installed build.
pub const KERNEL_JSON: &str = "kernel.json";
/// Name of the symlink to the newest build of an arch.
pub const DEFAULT_LINK: &str = "default";
/// The directory under the kernel cache root that holds built kernels.
pub const BUILT_DIR: &str = "built";

/// Where a build is installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Into the kernel cache under this root, made the arch's default.
    Cache(PathBuf),
    /// Into this directory (created; the files it holds are replaced).
    Dir(PathBuf),
}

/// The metadata of a built kernel, stored as `kernel.json`. Paths of files
/// in the entry are relative to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuiltKernelInfo {
    /// The guest arch.
    pub arch: Arch,
    /// `make kernelrelease`, e.g. `6.1.192`.
    pub release: String,
    /// The source tree it was built from.
    pub source_tree: PathBuf,
    /// The build directory.
    pub build_dir: PathBuf,
    /// The defconfig it started from.
    pub defconfig: String,
    /// The options switched off after the defconfig ([`TRIM`](super::TRIM)).
    pub trimmed: Vec<String>,
    /// Extra fragments merged after the appliance's.
    pub extra_fragments: Vec<PathBuf>,
    /// sha256 of the appliance fragment merged, lowercase hex.
    pub fragment_sha256: String,
    /// `CROSS_COMPILE=` used (empty for the host compiler).
    pub cross_compile: String,
    /// The compiler's version line.
    pub compiler: String,
    /// The bootable image: `boot/vmlinux-REL` (POWER) or `boot/vmlinuz-REL` (x86).
    pub image: PathBuf,
    /// The config: `boot/config-REL`.
    pub config: PathBuf,
    /// The symbol map: `boot/System.map-REL`.
    pub system_map: PathBuf,
    /// sha256 of the image, lowercase hex.
    pub image_sha256: String,
    /// sha256 of the config, lowercase hex.
    pub config_sha256: String,
    /// Base page size in bytes, from the config.
    pub page_size: Option<u64>,
    /// When the build finished, RFC 3339 UTC.
    pub built_at: String,
    /// Wall time of the whole build, in seconds.
    pub build_seconds: f64,
}

/// A built kernel in the cache or an output directory.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltKernel {
    /// The entry directory.
    pub dir: PathBuf,
    /// Its `kernel.json`.
    pub info: BuiltKernelInfo,
}

impl BuiltKernel {
    /// Absolute path of the bootable image.
    pub fn image(&self) -> PathBuf {
        self.dir.join(&self.info.image)
    }

    /// Absolute path of the config.
    pub fn config(&self) -> PathBuf {
        self.dir.join(&self.info.config)
    }

    /// Re-hashes the image and config and compares them with `kernel.json`.
    pub fn verify(&self) -> Result<(), BuildError> {
        for (path, want) in [(self.image(), &self.info.image_sha256), (self.config(), &self.info.config_sha256)] {
            let got = sha256_file(&path)?;
            if &got != want {
                return Err(BuildError::Corrupt { path, why: format!("sha256 is {got}, kernel.json says {want}") });
            }
        }
        Ok(())
    }

    /// Reads an entry directory and checks that it is for `arch` and complete.
    pub fn load(dir: &Path, arch: Arch) -> Result<BuiltKernel, BuildError> {
        let corrupt = |path: &Path, why: String| BuildError::Corrupt { path: path.to_path_buf(), why };
        let json = dir.join(KERNEL_JSON);
        let bytes = fs::read(&json).map_err(|e| corrupt(&json, format!("cannot read it: {e}")))?;
        let info: BuiltKernelInfo =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(&json, format!("it does not parse: {e}")))?;
        if info.arch != arch {
            return Err(corrupt(&json, format!("it is for {}, not {arch}", info.arch)));
        }
        let kernel = BuiltKernel { dir: dir.to_path_buf(), info };
        for (what, path) in [("image", kernel.image()), ("config", kernel.config())] {
            if !path.is_file() {
                return Err(corrupt(dir, format!("its {what} {} is missing", path.display())));
            }
        }
        Ok(kernel)
    }
}

/// The directory of `arch`'s built kernels under a cache root.
pub fn arch_dir(cache_root: &Path, arch: Arch) -> PathBuf {
    cache_root.join(BUILT_DIR).join(arch.name())
}

/// The default built kernel of `arch`, `None` when none was built.
pub fn cached(arch: Arch, cache_root: &Path) -> Result<Option<BuiltKernel>, BuildError> {
    let link = arch_dir(cache_root, arch).join(DEFAULT_LINK);
    match fs::read_link(&link) {
        Ok(target) => BuiltKernel::load(&arch_dir(cache_root, arch).join(target), arch).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(BuildError::Io { action: "read the symlink", path: link, source }),
    }
}

/// Installs a finished build's `files` (each with its path in the entry)
/// and `info` at `destination`: into the directory as it is, or into the
/// cache as a new entry that becomes the arch's default.
pub(super) fn install_build(
    destination: &Destination,
    files: &[(PathBuf, &PathBuf)],
    info: &BuiltKernelInfo,
) -> Result<BuiltKernel, BuildError> {
    match destination {
        Destination::Dir(dir) => {
            install(dir, files, info)?;
            BuiltKernel::load(dir, info.arch)
        }
        Destination::Cache(root) => {
            let arch_dir = arch_dir(root, info.arch);
            let entry = arch_dir.join(format!("{}_{}", info.release, &info.config_sha256[..12]));
            let temp = arch_dir.join(format!(".build-{}", uuid::Uuid::new_v4()));
            let result = install(&temp, files, info).and_then(|()| replace_dir(&temp, &entry));
            if result.is_err() {
                let _ = fs::remove_dir_all(&temp);
            }
            result?;
            point_default(&arch_dir, &entry)?;
            BuiltKernel::load(&entry, info.arch)
        }
    }
}

/// Copies the build's files into `dir` and writes `kernel.json` last, so an
/// entry with metadata is complete.
fn install(dir: &Path, files: &[(PathBuf, &PathBuf)], info: &BuiltKernelInfo) -> Result<(), BuildError> {
    for (from, rel) in files {
        let to = dir.join(rel);
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).map_err(|source| BuildError::Io {
                action: "create directory",
                path: parent.to_path_buf(),
                source,
            })?;
        }
        fs::copy(from, &to).map_err(|source| BuildError::Io { action: "copy", path: from.clone(), source })?;
    }
    let json = dir.join(KERNEL_JSON);
    let bytes = serde_json::to_vec_pretty(info).map_err(|e| BuildError::Io {
        action: "serialise",
        path: json.clone(),
        source: std::io::Error::other(e),
    })?;
    fs::write(&json, bytes).map_err(|source| BuildError::Io { action: "write", path: json, source })
}

/// Moves `from` to `to`, replacing an older entry of the same name.
fn replace_dir(from: &Path, to: &Path) -> Result<(), BuildError> {
    if to.exists() {
        fs::remove_dir_all(to).map_err(|source| BuildError::Io {
            action: "remove the old entry",
            path: to.to_path_buf(),
            source,
        })?;
    }
    fs::rename(from, to).map_err(|source| BuildError::Io { action: "move into place", path: to.to_path_buf(), source })
}

/// Points `<arch_dir>/default` at `entry` by renaming a fresh relative symlink over it.
fn point_default(arch_dir: &Path, entry: &Path) -> Result<(), BuildError> {
    let name = entry.file_name().unwrap_or_default();
    let link = arch_dir.join(DEFAULT_LINK);
    let temp = arch_dir.join(format!(".default-{}", uuid::Uuid::new_v4()));
    std::os::unix::fs::symlink(name, &temp).map_err(|source| BuildError::Io {
        action: "create the symlink",
        path: temp.clone(),
        source,
    })?;
    fs::rename(&temp, &link).map_err(|source| {
        let _ = fs::remove_file(&temp);
        BuildError::Io { action: "replace the symlink", path: link, source }
    })
}

/// The sha256 of a file, lowercase hex.
pub(super) fn sha256_file(path: &Path) -> Result<String, BuildError> {
    let data = fs::read(path).map_err(|source| BuildError::Io { action: "read", path: path.to_path_buf(), source })?;
    Ok(hex::encode(Sha256::digest(&data)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::config_fragment::fragment;

    fn fake_entry(root: &Path, arch: Arch, name: &str) -> PathBuf {
        let dir = arch_dir(root, arch).join(name);
        let files = tempfile::tempdir().unwrap();
        let image = files.path().join("vmlinux");
        let config = files.path().join(".config");
        let map = files.path().join("System.map");
        fs::write(&image, b"image").unwrap();
        fs::write(&config, fragment(arch)).unwrap();
        fs::write(&map, b"map").unwrap();
        let info = BuiltKernelInfo {
            arch,
            release: "6.1.0-test".into(),
            source_tree: "/src".into(),
            build_dir: "/src/.b".into(),
            defconfig: "pseries_defconfig".into(),
            trimmed: vec![],
            extra_fragments: vec![],
            fragment_sha256: "f".into(),
            cross_compile: "powerpc64-linux-gnu-".into(),
            compiler: "gcc".into(),
            image: "boot/vmlinux-6.1.0-test".into(),
            config: "boot/config-6.1.0-test".into(),
            system_map: "boot/System.map-6.1.0-test".into(),
            image_sha256: sha256_file(&image).unwrap(),
            config_sha256: sha256_file(&config).unwrap(),
            page_size: Some(65536),
            built_at: "2024-01-01T00:00:00Z".into(),
            build_seconds: 1.0,
        };
        install(&dir, &[(image, &info.image), (config, &info.config), (map, &info.system_map)], &info).unwrap();
        dir
    }

    #[test]
    fn cache_default_link_finds_the_entry() {
        let root = tempfile::tempdir().unwrap();
        assert!(cached(Arch::Ppc64, root.path()).unwrap().is_none());
        let entry = fake_entry(root.path(), Arch::Ppc64, "6.1.0-test_abc");
        point_default(&arch_dir(root.path(), Arch::Ppc64), &entry).unwrap();
        let k = cached(Arch::Ppc64, root.path()).unwrap().unwrap();
        assert_eq!(k.dir, arch_dir(root.path(), Arch::Ppc64).join("6.1.0-test_abc"));
        k.verify().unwrap();
        // The layout lets `run --kernel IMAGE` find the config beside the image.
        assert!(k.image().with_file_name("config-6.1.0-test").is_file());

        fs::write(k.image(), b"changed").unwrap();
        let e = k.verify().unwrap_err().to_string();
        assert!(e.contains("kernel.json says"), "{e}");
        // An entry of another arch is refused.
        let e = BuiltKernel::load(&entry, Arch::Ppc64le).unwrap_err().to_string();
        assert!(e.contains("it is for ppc64, not ppc64le"), "{e}");
    }
}
