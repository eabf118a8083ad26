//! The pack cache: one directory per content key (the hash of the lockfile
//! and the builder version) holding the image and its manifest. An entry
//! appears by one rename of a complete directory, so an interrupted build
//! leaves nothing [`CachedPack::open`] accepts. It does not build.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Environment variable that sets the pack cache root.
pub const CACHE_ENV: &str = "BOOTBENCH_PACK_CACHE";
/// The image's file name in an entry.
pub const IMAGE_FILE: &str = "pack.ext4";
/// The manifest's file name in an entry.
pub const MANIFEST_FILE: &str = "pack.json";

/// A cache entry that cannot be read or does not hold together.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A file could not be read or written.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The manifest is not valid JSON of the expected shape.
    #[error("the pack manifest {path} is not valid")]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The entry's contents contradict its manifest or key.
    #[error("the cached pack {dir} is corrupt: {why} (delete the directory to rebuild it)")]
    Corrupt {
        /// The entry.
        dir: PathBuf,
        /// What does not match.
        why: String,
    },
}

/// The manifest of a built pack, `pack.json` in its entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The cache key (hex).
    pub key: String,
    /// The builder version the image was made by.
    pub builder_version: u32,
    /// sha256 of the lockfile's bytes (hex).
    pub lockfile_sha256: String,
    /// The Debian suite.
    pub suite: String,
    /// The Debian architecture.
    pub arch: String,
    /// The image's file name in the entry.
    pub image: String,
    /// sha256 of the image (hex).
    pub image_sha256: String,
    /// The image's size in bytes.
    pub image_bytes: u64,
    /// The Linux tree the image carries prepared (none before builder 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceManifest>,
    /// Every installed package as `name=version`, sorted.
    pub packages: Vec<String>,
}

/// The Linux tree in a pack: where it is, and how its output tree was
/// configured and prepared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceManifest {
    /// The Debian package of the source.
    pub package: String,
    /// Its version.
    pub version: String,
    /// The source tree, in the image.
    pub tree: String,
    /// The prepared output tree, in the image.
    pub obj: String,
    /// Where the output tree was prepared: a writable copy of it there
    /// builds objects without redoing the preparation.
    pub build_dir: String,
    /// The configuration target.
    pub config: String,
    /// sha256 of the output tree's `.config` (hex).
    pub config_sha256: String,
    /// The make targets run, in order.
    pub make_targets: Vec<String>,
    /// The whole environment make ran with (`NAME=value`).
    pub make_env: Vec<String>,
}

/// sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The cache key of a lockfile's bytes built by `builder_version`.
pub fn cache_key(lockfile: &[u8], builder_version: u32) -> String {
    let mut hasher = Sha256::new();
    hasher.update(format!("bootbench-pack builder {builder_version}\n").as_bytes());
    hasher.update(lockfile);
    hex::encode(hasher.finalize())
}

/// The filesystem UUID (also the directory hash seed) of a key: its first
/// 16 bytes, marked as a version 4 UUID so tools accept it.
pub fn uuid_of_key(key: &str) -> uuid::Uuid {
    let digest = Sha256::digest(key.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// The pack cache root: `$BOOTBENCH_PACK_CACHE`, else
/// `$XDG_CACHE_HOME/bootbench/packs`, else `~/.cache/bootbench/packs`.
pub fn default_cache_root() -> PathBuf {
    let set = |name: &str| std::env::var_os(name).filter(|v: &OsString| !v.is_empty()).map(PathBuf::from);
    if let Some(root) = set(CACHE_ENV) {
        return root;
    }
    if let Some(xdg) = set("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return xdg.join("bootbench/packs");
    }
    match set("HOME") {
        Some(home) => home.join(".cache/bootbench/packs"),
        None => PathBuf::from("/var/cache/bootbench/packs"),
    }
}

/// A complete cache entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedPack {
    /// The entry directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
}

impl CachedPack {
    /// The entry of `key` under `root`, if there is one.
    pub fn open(root: &Path, key: &str) -> Result<Option<CachedPack>, CacheError> {
        let dir = root.join(key);
        let path = dir.join(MANIFEST_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(CacheError::Io { action: "read", path, source }),
        };
        let manifest: Manifest = serde_json::from_str(&text).map_err(|source| CacheError::Manifest { path, source })?;
        Ok(Some(CachedPack { dir, manifest }))
    }

    /// The image file.
    pub fn image(&self) -> PathBuf {
        self.dir.join(&self.manifest.image)
    }

    /// Checks the manifest against `key` and `lockfile_sha256`, and the
    /// image's size and sha256 (`hash` computes it) against the manifest.
    pub fn verify(
        &self,
        key: &str,
        lockfile_sha256: &str,
        hash: impl Fn(&Path) -> Result<String, String>,
    ) -> Result<(), CacheError> {
        let corrupt = |why: String| CacheError::Corrupt { dir: self.dir.clone(), why };
        let m = &self.manifest;
        if m.key != key {
            return Err(corrupt(format!("its manifest's key is {}, the directory's {key}", m.key)));
        }
        if m.lockfile_sha256 != lockfile_sha256 {
            return Err(corrupt(format!(
                "its manifest records lockfile sha256 {}, the lockfile's is {lockfile_sha256}",
                m.lockfile_sha256
            )));
        }
        let image = self.image();
        let bytes = std::fs::metadata(&image)
            .map_err(|source| CacheError::Io { action: "stat", path: image.clone(), source })?
            .len();
        if bytes != m.image_bytes {
            return Err(corrupt(format!("{} has {bytes} bytes, the manifest says {}", image.display(), m.image_bytes)));
        }
        let got = hash(&image).map_err(corrupt)?;
        if got != m.image_sha256 {
            return Err(corrupt(format!("{} has sha256 {got}, the manifest says {}", image.display(), m.image_sha256)));
        }
        Ok(())
    }
}

/// Writes `manifest` into the directory `dir`.
pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), CacheError> {
    let path = dir.join(MANIFEST_FILE);
    let text =
        serde_json::to_string_pretty(manifest).map_err(|source| CacheError::Manifest { path: path.clone(), source })?;
    std::fs::write(&path, text + "\n").map_err(|source| CacheError::Io { action: "write", path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(key: &str) -> Manifest {
        Manifest {
            key: key.into(),
            builder_version: 1,
            lockfile_sha256: "l".into(),
            suite: "bookworm".into(),
            arch: "amd64".into(),
            image: IMAGE_FILE.into(),
            image_sha256: sha256_hex(b"image"),
            image_bytes: 5,
            source: None,
            packages: vec!["make=4.3-4.1".into()],
        }
    }

    #[test]
    fn a_manifest_without_a_source_reads_and_one_with_it_round_trips() {
        let mut m = manifest("k");
        let text = serde_json::to_string(&m).unwrap();
        assert!(!text.contains("source"), "{text}");
        assert_eq!(serde_json::from_str::<Manifest>(&text).unwrap(), m);
        m.source = Some(SourceManifest {
            package: "linux-source-6.1".into(),
            version: "6.1.176-1".into(),
            tree: "/usr/src/linux".into(),
            obj: "/usr/src/linux-obj".into(),
            build_dir: "/bootbench/work/obj".into(),
            config: "x86_64_defconfig".into(),
            config_sha256: sha256_hex(b"config"),
            make_targets: vec!["x86_64_defconfig".into(), "prepare".into()],
            make_env: vec!["LANG=C".into()],
        });
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains(&format!("\"config_sha256\":\"{}\"", sha256_hex(b"config"))), "{text}");
        assert_eq!(serde_json::from_str::<Manifest>(&text).unwrap(), m);
    }

    #[test]
    fn key_depends_on_lockfile_and_builder_version() {
        let a = cache_key(b"suite bookworm\n", 1);
        assert_eq!(a.len(), 64);
        assert_ne!(a, cache_key(b"suite bookworm\n", 2));
        assert_ne!(a, cache_key(b"suite trixie\n", 1));
        assert_eq!(uuid_of_key(&a), uuid_of_key(&a));
        assert_eq!(uuid_of_key(&a).get_version_num(), 4);
    }

    #[test]
    fn an_entry_verifies_and_a_changed_image_is_corrupt() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(CachedPack::open(root.path(), "k").unwrap(), None);
        let dir = root.path().join("k");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(IMAGE_FILE), b"image").unwrap();
        write_manifest(&dir, &manifest("k")).unwrap();
        let entry = CachedPack::open(root.path(), "k").unwrap().unwrap();
        let hash = |p: &Path| Ok(sha256_hex(&std::fs::read(p).unwrap()));
        entry.verify("k", "l", hash).unwrap();
        let err = entry.verify("k", "other", hash).unwrap_err().to_string();
        assert!(err.contains("records lockfile sha256 l, the lockfile's is other"), "{err}");
        std::fs::write(dir.join(IMAGE_FILE), b"imagf").unwrap();
        let err = entry.verify("k", "l", hash).unwrap_err().to_string();
        assert!(err.contains("has sha256"), "{err}");
    }
}
