//! Stock Debian kernels to benchmark: resolves the current kernel of an arch's
//! default flavour, downloads its .deb and unpacks it into a cache that hands
//! out the same kernel every time until an explicit update.
//!
//! It works only through the private apt configuration that `scripts/setup`
//! writes ([`DEFAULT_APT_DIR`], or `$BOOTBENCH_APT_DIR`), with a separate index
//! directory per architecture. It never installs a package, never changes the
//! system's apt or dpkg configuration (no `dpkg --add-architecture`), and never
//! names a mirror: the mirror comes from the private sources.list.
//!
//! Cache layout, under a cache root (see [`default_cache_root`]):
//! ```text
//! <root>/<debian-arch>/<package>_<version>/   the unpacked .deb plus kernel.json
//! <root>/<debian-arch>/default                symlink to the chosen entry
//! <root>/<debian-arch>/.lock                  serialises fetches of one arch
//! ```
//! An entry appears by one rename of a complete tree, so an interrupted fetch
//! leaves nothing that [`cached`] would accept.
//!
//! This file owns the cache; the apt and dpkg mechanics are in `apt` (which
//! knows nothing of the cache), and the error both report is in `error`.

mod apt;
mod error;

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::arch::DebianArch;
use apt::{unpack_deb, Apt, Resolved};
use error::log;

pub use apt::{apt_dir, APT_DIR_ENV, DEFAULT_APT_DIR};
pub(crate) use apt::{candidate_version, download_package};
pub use error::FetchError;

/// Environment variable that sets the kernel cache root itself.
pub const CACHE_ENV: &str = "BOOTBENCH_CACHE";
/// Name of the metadata file in each cache entry.
pub const KERNEL_JSON: &str = "kernel.json";
/// Name of the symlink to the chosen entry in each arch directory.
pub const DEFAULT_LINK: &str = "default";

/// The metadata of one cached kernel, stored as `kernel.json` in its entry.
/// Paths are relative to the entry directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelInfo {
    /// Debian architecture of the package.
    pub arch: DebianArch,
    /// The concrete binary package, e.g. `linux-image-6.1.0-28-amd64`.
    pub package: String,
    /// Its exact Debian version, e.g. `6.1.119-1`.
    pub version: String,
    /// Its Debian source package as apt reports it, e.g.
    /// `linux-signed-amd64 (6.1.119+1)`; `linux-signed-*` means the image
    /// carries a Secure Boot signature.
    pub source: String,
    /// The metapackage it was resolved from, e.g. `linux-image-amd64`.
    pub metapackage: String,
    /// The kernel release (`uname -r`), e.g. `6.1.0-28-amd64`.
    pub release: String,
    /// The bootable image: `boot/vmlinuz-RELEASE` on x86, `boot/vmlinux-RELEASE` on ppc64el.
    pub image: PathBuf,
    /// The kernel config: `boot/config-RELEASE`.
    pub config: PathBuf,
    /// The modules tree: `lib/modules/RELEASE` (no `modules.dep`: Debian builds it at install time).
    pub modules: PathBuf,
    /// sha256 of the image, lowercase hex.
    pub image_sha256: String,
    /// sha256 of the config, lowercase hex.
    pub config_sha256: String,
    /// When the package was downloaded, RFC 3339 UTC.
    pub fetched_at: String,
}

/// A kernel in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedKernel {
    /// The entry directory, `<root>/<debian-arch>/<package>_<version>`; it is
    /// also the base for `depmod -b`, since the modules sit under `lib/modules/`.
    pub dir: PathBuf,
    /// Its `kernel.json`.
    pub info: KernelInfo,
}

impl FetchedKernel {
    /// Absolute path of the bootable image.
    pub fn image(&self) -> PathBuf {
        self.dir.join(&self.info.image)
    }

    /// Absolute path of the kernel config.
    pub fn config(&self) -> PathBuf {
        self.dir.join(&self.info.config)
    }

    /// Absolute path of the modules tree (`.../lib/modules/RELEASE`).
    pub fn modules_dir(&self) -> PathBuf {
        self.dir.join(&self.info.modules)
    }

    /// Re-hashes the image and config and compares them with `kernel.json`.
    pub fn verify(&self) -> Result<(), FetchError> {
        for (path, want) in [(self.image(), &self.info.image_sha256), (self.config(), &self.info.config_sha256)] {
            let got = sha256_file(&path)?;
            if &got != want {
                return Err(FetchError::Corrupt { path, why: format!("sha256 is {got}, kernel.json says {want}") });
            }
        }
        Ok(())
    }
}

/// The kernel cache root: `$BOOTBENCH_CACHE`, else
/// `$XDG_CACHE_HOME/bootbench/kernels`, else `~/.cache/bootbench/kernels`
/// (`/var/cache/bootbench/kernels` when there is no `$HOME`).
pub fn default_cache_root() -> PathBuf {
    cache_root_from(|name| std::env::var_os(name))
}

/// [`default_cache_root`] with the environment read through `env` (the
/// config file's view of it, and tests).
pub fn cache_root_from(env: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let set = |name| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(root) = set(CACHE_ENV) {
        return root;
    }
    // The XDG spec says to ignore a relative XDG_CACHE_HOME.
    if let Some(xdg) = set("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return xdg.join("bootbench/kernels");
    }
    match set("HOME") {
        Some(home) => home.join(".cache/bootbench/kernels"),
        None => PathBuf::from("/var/cache/bootbench/kernels"),
    }
}

/// The kernel `fetch` chose last for `arch`, with no network access; `None`
/// when nothing was fetched for it yet. An entry that is incomplete or whose
/// metadata does not parse is an error, never silently skipped.
pub fn cached(arch: DebianArch, cache_root: &Path) -> Result<Option<FetchedKernel>, FetchError> {
    let arch_dir = cache_root.join(arch.as_str());
    let link = arch_dir.join(DEFAULT_LINK);
    let target = match fs::read_link(&link) {
        Ok(target) => target,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(FetchError::Io { action: "read the symlink", path: link, source }),
    };
    load_entry(&arch_dir.join(target), arch).map(Some)
}

/// Returns the kernel to benchmark for `arch`.
///
/// Without `update`, a kernel already in the cache is returned with no network
/// access at all. Otherwise, and when nothing is cached yet, the private apt
/// indexes for `arch` are refreshed (only when `update` is set or they are
/// missing), the metapackage's current dependency is resolved, downloaded and
/// unpacked, and `default` is pointed at it. Progress goes to stderr.
pub fn fetch(arch: DebianArch, update: bool, cache_root: &Path) -> Result<FetchedKernel, FetchError> {
    if !update {
        match cached(arch, cache_root) {
            Ok(Some(kernel)) => return Ok(kernel),
            Ok(None) => {}
            Err(e) => log(format_args!("fetching again, because {e}")),
        }
    }
    let arch_dir = cache_root.join(arch.as_str());
    create_dir_all(&arch_dir)?;
    let _lock = lock_arch_dir(&arch_dir)?;
    if !update {
        // Another process may have fetched it while this one waited for the lock.
        if let Ok(Some(kernel)) = cached(arch, cache_root) {
            return Ok(kernel);
        }
    }
    remove_stale_temps(&arch_dir);

    let apt = Apt::open(arch)?;
    let mut updated = false;
    if update || !apt.has_main_index()? {
        apt.update()?;
        updated = true;
    }
    let kernel = loop {
        let resolved = apt.resolve()?;
        match entry_for(&resolved, &arch_dir) {
            Ok(kernel) => break kernel,
            // Indexes from an earlier day may name a version the mirror no longer has.
            Err(e @ FetchError::Command { .. }) if !updated => {
                log(format_args!("{e}\nrefreshing the {arch} indexes and trying again"));
                apt.update()?;
                updated = true;
            }
            Err(e) => return Err(e),
        }
    };
    point_default(&arch_dir, &kernel.dir)?;
    log(format_args!(
        "{arch} default kernel: {} {} (release {}) in {}",
        kernel.info.package,
        kernel.info.version,
        kernel.info.release,
        kernel.dir.display()
    ));
    Ok(kernel)
}

/// Entry directory name of `resolved`; an epoch's ':' is escaped as dpkg
/// does in file names.
fn entry_name(resolved: &Resolved) -> String {
    format!("{}_{}", resolved.package, resolved.version.replace(':', "%3a"))
}

/// Returns the cache entry for `resolved`, downloading and unpacking it when absent.
fn entry_for(resolved: &Resolved, arch_dir: &Path) -> Result<FetchedKernel, FetchError> {
    let entry = arch_dir.join(entry_name(resolved));
    if let Ok(kernel) = load_entry(&entry, resolved.arch) {
        if kernel.info.package == resolved.package && kernel.info.version == resolved.version {
            log(format_args!("{} {} is already in {}", resolved.package, resolved.version, entry.display()));
            return Ok(kernel);
        }
    }
    if entry.exists() {
        log(format_args!("replacing the unusable cache entry {}", entry.display()));
        remove_dir_all(&entry)?;
    }
    let temp = TempDir::create(arch_dir)?;
    let tree = download_and_unpack(resolved, &temp.0)?;
    if let Err(source) = fs::rename(&tree, &entry) {
        return Err(FetchError::Io { action: "move the unpacked kernel into place at", path: entry, source });
    }
    load_entry(&entry, resolved.arch)
}

/// Downloads the package into `temp/deb`, unpacks it into `temp/tree`, writes
/// `kernel.json` there and returns the tree.
fn download_and_unpack(resolved: &Resolved, temp: &Path) -> Result<PathBuf, FetchError> {
    let arch = resolved.arch;
    let deb_dir = temp.join("deb");
    let tree = temp.join("tree");
    create_dir_all(&deb_dir)?;

    let started = Instant::now();
    let spec = format!("{}:{}={}", resolved.package, arch, resolved.version);
    let doing = format!("downloading {} {}", resolved.package, resolved.version);
    let deb = Apt::open(arch)?.download(&spec, &deb_dir, &doing, resolved)?;
    let deb_bytes = fs::metadata(&deb).map(|m| m.len()).unwrap_or(0);
    log(format_args!(
        "downloaded {} {} ({:.1} MB) in {:.1} s",
        resolved.package,
        resolved.version,
        deb_bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    ));

    let started = Instant::now();
    let doing = format!("unpacking {} {}", resolved.package, resolved.version);
    unpack_deb(arch, &deb, &tree, &doing)?;
    remove_file(&deb)?;
    log(format_args!("unpacked {} in {:.1} s", resolved.package, started.elapsed().as_secs_f64()));

    let info = describe_tree(resolved, &tree)?;
    let json = serde_json::to_vec_pretty(&info).expect("KernelInfo serialises");
    write_synced(&tree.join(KERNEL_JSON), &json)?;
    Ok(tree)
}

/// Finds the image, config and modules in an unpacked package and hashes them.
fn describe_tree(resolved: &Resolved, tree: &Path) -> Result<KernelInfo, FetchError> {
    let arch = resolved.arch;
    let layout_err =
        |why: String| FetchError::Layout { package: resolved.package.clone(), arch, dir: tree.to_path_buf(), why };
    let boot = tree.join("boot");
    let prefix = arch.image_prefix();
    let entries = fs::read_dir(&boot).map_err(|e| layout_err(format!("cannot list boot/: {e}")))?;
    let mut releases: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.strip_prefix(prefix).map(str::to_string))
        .collect();
    releases.sort();
    let release = match releases.as_slice() {
        [release] => release.clone(),
        [] => return Err(layout_err(format!("no boot/{prefix}*"))),
        many => return Err(layout_err(format!("several images: {}", many.join(", ")))),
    };
    let image = PathBuf::from(format!("boot/{prefix}{release}"));
    let config = PathBuf::from(format!("boot/config-{release}"));
    if !tree.join(&config).is_file() {
        return Err(layout_err(format!("no {}", config.display())));
    }
    let modules = ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|base| Path::new(base).join(&release))
        .find(|dir| tree.join(dir).is_dir())
        .ok_or_else(|| layout_err(format!("no lib/modules/{release}")))?;

    let kind = qemu::kernel_image::check_kernel(&tree.join(&image), arch.target())
        .map_err(|source| FetchError::Image { package: resolved.package.clone(), arch, source })?;
    log(format_args!("{} is {kind}", image.display()));

    Ok(KernelInfo {
        arch,
        package: resolved.package.clone(),
        version: resolved.version.clone(),
        source: resolved.source.clone(),
        metapackage: resolved.metapackage.clone(),
        release,
        image_sha256: sha256_file(&tree.join(&image))?,
        config_sha256: sha256_file(&tree.join(&config))?,
        image,
        config,
        modules,
        fetched_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
    })
}

/// Reads and checks a cache entry: metadata parses, is for `arch`, and names
/// files that exist.
fn load_entry(dir: &Path, arch: DebianArch) -> Result<FetchedKernel, FetchError> {
    let corrupt = |path: &Path, why: String| FetchError::Corrupt { path: path.to_path_buf(), why };
    let json_path = dir.join(KERNEL_JSON);
    let bytes = fs::read(&json_path).map_err(|e| corrupt(&json_path, format!("cannot read it: {e}")))?;
    let info: KernelInfo =
        serde_json::from_slice(&bytes).map_err(|e| corrupt(&json_path, format!("it does not parse: {e}")))?;
    if info.arch != arch {
        return Err(corrupt(&json_path, format!("it is for {}, not {arch}", info.arch)));
    }
    let kernel = FetchedKernel { dir: dir.to_path_buf(), info };
    for (what, path, is_dir) in
        [("image", kernel.image(), false), ("config", kernel.config(), false), ("modules", kernel.modules_dir(), true)]
    {
        let ok = if is_dir { path.is_dir() } else { path.is_file() };
        if !ok {
            return Err(corrupt(dir, format!("its {what} {} is missing", path.display())));
        }
    }
    Ok(kernel)
}

/// Points `<arch_dir>/default` at `entry` by renaming a fresh relative symlink over it.
fn point_default(arch_dir: &Path, entry: &Path) -> Result<(), FetchError> {
    let name = entry.file_name().expect("entry paths end in a name");
    let link = arch_dir.join(DEFAULT_LINK);
    if fs::read_link(&link).is_ok_and(|current| current == Path::new(name)) {
        return Ok(());
    }
    let temp = arch_dir.join(format!(".default-{}", uuid::Uuid::new_v4()));
    std::os::unix::fs::symlink(name, &temp).map_err(|source| FetchError::Io {
        action: "create the symlink",
        path: temp.clone(),
        source,
    })?;
    fs::rename(&temp, &link).map_err(|source| {
        let _ = fs::remove_file(&temp);
        FetchError::Io { action: "replace the symlink", path: link, source }
    })
}

/// Takes the per-arch lock, waiting for another fetch to finish.
fn lock_arch_dir(arch_dir: &Path) -> Result<File, FetchError> {
    let path = arch_dir.join(".lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| FetchError::Io { action: "open the lock file", path: path.clone(), source })?;
    if file.try_lock().is_err() {
        log(format_args!("waiting for another fetch holding {}", path.display()));
        file.lock().map_err(|source| FetchError::Io { action: "lock", path, source })?;
    }
    Ok(file)
}

/// Removes what interrupted fetches left; called with the arch lock held.
fn remove_stale_temps(arch_dir: &Path) {
    let Ok(entries) = fs::read_dir(arch_dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        if name.starts_with(".fetch-") {
            let _ = fs::remove_dir_all(&path);
        } else if name.starts_with(".default-") {
            let _ = fs::remove_file(&path);
        }
    }
}

fn sha256_file(path: &Path) -> Result<String, FetchError> {
    let read_err = |source| FetchError::Io { action: "read", path: path.to_path_buf(), source };
    let mut file = File::open(path).map_err(read_err)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(read_err)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

fn create_dir_all(path: &Path) -> Result<(), FetchError> {
    fs::create_dir_all(path).map_err(|source| FetchError::Io { action: "create directory", path: path.into(), source })
}

fn remove_dir_all(path: &Path) -> Result<(), FetchError> {
    fs::remove_dir_all(path).map_err(|source| FetchError::Io { action: "remove", path: path.into(), source })
}

fn remove_file(path: &Path) -> Result<(), FetchError> {
    fs::remove_file(path).map_err(|source| FetchError::Io { action: "remove", path: path.into(), source })
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), FetchError> {
    let write_err = |source| FetchError::Io { action: "write", path: path.into(), source };
    let mut file = File::create(path).map_err(write_err)?;
    file.write_all(bytes).map_err(write_err)?;
    file.sync_all().map_err(write_err)
}

/// A `.fetch-*` directory in the arch directory, removed when dropped (the
/// unpacked tree is renamed out of it first on success).
struct TempDir(PathBuf);

impl TempDir {
    fn create(arch_dir: &Path) -> Result<TempDir, FetchError> {
        let path = arch_dir.join(format!(".fetch-{}", uuid::Uuid::new_v4()));
        fs::create_dir(&path).map_err(|source| FetchError::Io {
            action: "create directory",
            path: path.clone(),
            source,
        })?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_root_precedence() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| OsString::from(v))
        };
        assert_eq!(
            cache_root_from(env(&[("BOOTBENCH_CACHE", "/c"), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])),
            PathBuf::from("/c")
        );
        assert_eq!(
            cache_root_from(env(&[("BOOTBENCH_CACHE", ""), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])),
            PathBuf::from("/x/bootbench/kernels")
        );
        assert_eq!(
            cache_root_from(env(&[("XDG_CACHE_HOME", "relative"), ("HOME", "/h")])),
            PathBuf::from("/h/.cache/bootbench/kernels")
        );
        assert_eq!(cache_root_from(env(&[])), PathBuf::from("/var/cache/bootbench/kernels"));
    }

    #[test]
    fn entry_name_escapes_an_epoch() {
        let resolved = Resolved {
            arch: DebianArch::Amd64,
            metapackage: "m".into(),
            package: "linux-image-x".into(),
            version: "1:6.1-1~bpo".into(),
            source: "s".into(),
        };
        assert_eq!(entry_name(&resolved), "linux-image-x_1%3a6.1-1~bpo");
    }

    /// Writes a fake but well-formed cache entry and points `default` at it.
    fn fake_entry(root: &Path, arch: DebianArch, version: &str) -> PathBuf {
        let resolved = Resolved {
            arch,
            metapackage: arch.metapackage().into(),
            package: "linux-image-6.1.0-99-test".into(),
            version: version.into(),
            source: "linux".into(),
        };
        let arch_dir = root.join(arch.as_str());
        let entry = arch_dir.join(entry_name(&resolved));
        fs::create_dir_all(entry.join("boot")).unwrap();
        fs::create_dir_all(entry.join("lib/modules/6.1.0-99-test")).unwrap();
        let exe = fs::read("/proc/self/exe").unwrap();
        // The image check in describe_tree needs a real kernel header; a test only
        // needs load_entry, so write the metadata by hand.
        fs::write(entry.join("boot/vmlinuz-6.1.0-99-test"), &exe[..4096]).unwrap();
        fs::write(entry.join("boot/config-6.1.0-99-test"), "CONFIG_X=y\n").unwrap();
        let info = KernelInfo {
            arch,
            package: resolved.package.clone(),
            version: version.into(),
            source: "linux".into(),
            metapackage: resolved.metapackage.clone(),
            release: "6.1.0-99-test".into(),
            image: "boot/vmlinuz-6.1.0-99-test".into(),
            config: "boot/config-6.1.0-99-test".into(),
            modules: "lib/modules/6.1.0-99-test".into(),
            image_sha256: sha256_file(&entry.join("boot/vmlinuz-6.1.0-99-test")).unwrap(),
            config_sha256: hex::encode(Sha256::digest(b"CONFIG_X=y\n")),
            fetched_at: "2026-01-01T00:00:00Z".into(),
        };
        fs::write(entry.join(KERNEL_JSON), serde_json::to_vec(&info).unwrap()).unwrap();
        point_default(&arch_dir, &entry).unwrap();
        entry
    }

    #[test]
    fn cached_follows_default_and_is_stable() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(cached(DebianArch::Amd64, root.path()).unwrap(), None);
        let first = fake_entry(root.path(), DebianArch::Amd64, "1.0-1");
        let kernel = cached(DebianArch::Amd64, root.path()).unwrap().unwrap();
        assert_eq!(kernel.dir, first);
        assert_eq!(kernel.image(), first.join("boot/vmlinuz-6.1.0-99-test"));
        kernel.verify().unwrap();
        // fetch without --update does no apt work when a default exists.
        let fetched = fetch(DebianArch::Amd64, false, root.path()).unwrap();
        assert_eq!(fetched, kernel);

        let second = fake_entry(root.path(), DebianArch::Amd64, "2.0-1");
        assert_eq!(cached(DebianArch::Amd64, root.path()).unwrap().unwrap().dir, second);
        assert_eq!(
            fs::read_link(root.path().join("amd64/default")).unwrap(),
            Path::new("linux-image-6.1.0-99-test_2.0-1")
        );
        assert_eq!(cached(DebianArch::I386, root.path()).unwrap(), None);
    }

    #[test]
    fn incomplete_entry_is_rejected() {
        let root = tempfile::tempdir().unwrap();
        let entry = fake_entry(root.path(), DebianArch::I386, "1.0-1");
        fs::remove_file(entry.join("boot/config-6.1.0-99-test")).unwrap();
        let err = cached(DebianArch::I386, root.path()).unwrap_err();
        assert!(matches!(err, FetchError::Corrupt { .. }), "{err:?}");
        assert!(err.to_string().contains("config"), "{err}");

        fs::remove_file(entry.join(KERNEL_JSON)).unwrap();
        assert!(matches!(cached(DebianArch::I386, root.path()), Err(FetchError::Corrupt { .. })));
    }

    #[test]
    fn verify_detects_a_changed_image() {
        let root = tempfile::tempdir().unwrap();
        fake_entry(root.path(), DebianArch::Ppc64el, "1.0-1");
        let kernel = cached(DebianArch::Ppc64el, root.path()).unwrap().unwrap();
        fs::write(kernel.image(), b"changed").unwrap();
        assert!(matches!(kernel.verify(), Err(FetchError::Corrupt { .. })));
    }

    #[test]
    fn temp_dirs_do_not_count_as_entries() {
        let root = tempfile::tempdir().unwrap();
        let arch_dir = root.path().join("amd64");
        fs::create_dir_all(&arch_dir).unwrap();
        let temp = TempDir::create(&arch_dir).unwrap();
        fs::create_dir_all(temp.0.join("tree/boot")).unwrap();
        assert_eq!(cached(DebianArch::Amd64, root.path()).unwrap(), None);
        let path = temp.0.clone();
        std::mem::forget(temp);
        remove_stale_temps(&arch_dir);
        assert!(!path.exists());
    }

    /// Fetches real kernels into the default cache root (network, about a
    /// minute per arch): `BOOTBENCH_FETCH_ARCHES=amd64,i386,ppc64el cargo test
    /// -p bootbench real_fetch -- --ignored --nocapture`; `BOOTBENCH_FETCH_UPDATE=1`
    /// fetches the newest.
    #[test]
    #[ignore = "downloads Debian kernels"]
    fn real_fetch() {
        let arches = std::env::var("BOOTBENCH_FETCH_ARCHES").unwrap_or_else(|_| "amd64".into());
        let update = std::env::var_os("BOOTBENCH_FETCH_UPDATE").is_some();
        let root = default_cache_root();
        for arch in arches.split(',') {
            let arch: DebianArch = arch.trim().parse().unwrap();
            let started = Instant::now();
            let kernel = fetch(arch, update, &root).unwrap();
            let image = qemu::kernel_image::check_kernel(&kernel.image(), arch.target()).unwrap();
            kernel.verify().unwrap();
            assert_eq!(cached(arch, &root).unwrap().as_ref(), Some(&kernel));
            eprintln!(
                "{arch}: {:.1} s: {}\n{image:?}\n{}",
                started.elapsed().as_secs_f64(),
                kernel.dir.display(),
                serde_json::to_string_pretty(&kernel.info).unwrap()
            );
        }
    }
}
