//! The two operations on a pack: `lock` installs the target's packages
//! unpinned and writes every installed version to the lockfile; `build`
//! installs exactly the locked versions, refuses a root that differs from
//! the lockfile, prepares the Linux tree in it, makes the image and caches
//! it by content (a cached pack is only verified). Work happens in a
//! directory beside the cache and is removed afterwards, never while
//! anything is mounted under it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::bootstrap::{BootstrapError, BootstrapSpec};
use super::cache::{self, CacheError, CachedPack, Manifest, SourceManifest};
use super::dpkg_status::{self, DpkgStatusError};
use super::image::{self, ImageError, Mke2fsArgs};
use super::linux_tree::{self, LinuxTreeError, Recipe};
use super::lockfile::{Lockfile, LockfileError};
use super::mirror::{self, MirrorError};
use super::targets::{target, PackTarget, BUILDER_VERSION};

/// The options of `bootbench pack lock` and `bootbench pack build`.
#[derive(Debug, Clone, clap::Args)]
pub struct PackOptions {
    /// Guest arch of the pack: x86_64, i386 or ppc64le (big-endian ppc64 has
    /// no Debian port, so no pack).
    #[arg(long, default_value = "x86_64")]
    pub arch: String,
    /// The lockfile (default for `build`: the arch's packs/ARCH.lock as
    /// this binary was built with it; for `lock`: packs/ARCH.lock under the
    /// current directory, which should be the repository).
    #[arg(long)]
    pub lockfile: Option<PathBuf>,
    /// Cache directory (default: $BOOTBENCH_PACK_CACHE or ~/.cache/bootbench/packs).
    #[arg(long)]
    pub cache: Option<PathBuf>,
}

impl PackOptions {
    fn target(&self) -> Result<&'static PackTarget, BuildError> {
        target(&self.arch).ok_or_else(|| BuildError::NoTarget { arch: self.arch.clone() })
    }

    fn lockfile_path(&self, target: &PackTarget) -> PathBuf {
        self.lockfile.clone().unwrap_or_else(|| PathBuf::from(target.lockfile))
    }

    fn cache_root(&self) -> PathBuf {
        self.cache.clone().unwrap_or_else(cache::default_cache_root)
    }
}

/// A pack could not be locked or built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No pack for the arch.
    #[error("there is no userland pack for arch {arch} (packs exist for: {})", super::targets::arches_text())]
    NoTarget {
        /// The arch asked for.
        arch: String,
    },
    /// mmdebstrap's root mode needs root.
    #[error("building a pack runs mmdebstrap --mode=root, which needs root (uid 0)")]
    NotRoot,
    /// The lockfile.
    #[error("lockfile {path}")]
    Lockfile {
        /// The lockfile.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: LockfileError,
    },
    /// The lockfile is for another target.
    #[error("the lockfile {path} is for {got}, the {arch} pack needs {want}")]
    WrongTarget {
        /// The lockfile.
        path: PathBuf,
        /// The arch.
        arch: String,
        /// What it says (`suite/arch`).
        got: String,
        /// What the target is.
        want: String,
    },
    /// A package the target asks for is not in the lockfile.
    #[error("the lockfile {path} does not lock package {package}, which the {arch} pack installs; run `bootbench pack lock`")]
    NotLocked {
        /// The lockfile.
        path: PathBuf,
        /// The arch.
        arch: String,
        /// The package.
        package: String,
    },
    /// A package asked for is not installed after an unpinned install.
    #[error("mmdebstrap installed no package {package} into {root}")]
    NotInstalled {
        /// The package.
        package: String,
        /// The root.
        root: PathBuf,
    },
    /// The mirror could not be derived.
    #[error("cannot choose the Debian mirror")]
    Mirror(#[source] MirrorError),
    /// The install failed.
    #[error("cannot install the {arch} pack's root")]
    Bootstrap {
        /// The arch.
        arch: String,
        /// Why.
        #[source]
        source: BootstrapError,
    },
    /// The installed root's packages could not be read.
    #[error("cannot read the packages of the built root")]
    Status(#[source] DpkgStatusError),
    /// The built root differs from the lockfile.
    #[error("the pack built from {path} is refused")]
    Mismatch {
        /// The lockfile.
        path: PathBuf,
        /// The differences.
        #[source]
        source: LockfileError,
    },
    /// The Linux tree could not be prepared.
    #[error("cannot prepare the pack's Linux tree")]
    LinuxTree(#[source] LinuxTreeError),
    /// The image could not be made.
    #[error("cannot make the pack image")]
    Image(#[source] ImageError),
    /// The cache.
    #[error("pack cache")]
    Cache(#[source] CacheError),
    /// A work directory could not be made, moved or removed.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Something is still mounted in a work directory: it is left alone.
    #[error("{mount} is still mounted inside the work directory {dir}; unmount it, then delete the directory")]
    StillMounted {
        /// The work directory.
        dir: PathBuf,
        /// The mount point.
        mount: String,
    },
}

/// What `lock` wrote.
#[derive(Debug, Clone)]
pub struct Locked {
    /// The lockfile written.
    pub path: PathBuf,
    /// Its contents.
    pub lockfile: Lockfile,
    /// How long the install took.
    pub elapsed: Duration,
}

/// A pack in the cache.
#[derive(Debug, Clone)]
pub struct BuiltPack {
    /// The cache entry.
    pub entry: CachedPack,
    /// Whether it was already cached (only verified now).
    pub was_cached: bool,
    /// How long the whole operation took.
    pub elapsed: Duration,
}

fn log(message: std::fmt::Arguments<'_>) {
    log::info!("{message}");
}

/// `bootbench pack lock`: installs the target's packages unpinned and
/// writes every installed package's version to the lockfile, with the
/// current time as the pack's `SOURCE_DATE_EPOCH`.
pub fn lock(options: &PackOptions) -> Result<Locked, BuildError> {
    let started = Instant::now();
    let target = options.target()?;
    let path = options.lockfile_path(target);
    require_root()?;
    let mirror = mirror::mirror_for(target.suite, Path::new(mirror::APT_ETC)).map_err(BuildError::Mirror)?;
    let epoch = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let work = WorkDir::create(&options.cache_root(), "lock")?;
    let root = work.path.join("root");
    log(format_args!("installing the {} pack's packages unpinned from {mirror} into {}", target.arch, root.display()));
    let spec = BootstrapSpec {
        suite: target.suite.into(),
        arch: target.debian_arch.into(),
        mirror,
        include: target.packages.iter().map(|p| p.to_string()).collect(),
        root: root.clone(),
        source_date_epoch: epoch,
    };
    spec.run().map_err(|source| BuildError::Bootstrap { arch: target.arch.into(), source })?;
    let packages = dpkg_status::installed_packages(&root).map_err(BuildError::Status)?;
    if let Some(missing) = target.packages.iter().find(|p| !packages.contains_key(**p)) {
        return Err(BuildError::NotInstalled { package: missing.to_string(), root });
    }
    let lockfile =
        Lockfile { suite: target.suite.into(), arch: target.debian_arch.into(), source_date_epoch: epoch, packages };
    lockfile.write(&path).map_err(|source| BuildError::Lockfile { path: path.clone(), source })?;
    work.remove()?;
    Ok(Locked { path, lockfile, elapsed: started.elapsed() })
}

/// `bootbench pack build`: the cached pack of the lockfile, verified, or a
/// new one built from exactly the locked versions.
pub fn build(options: &PackOptions) -> Result<BuiltPack, BuildError> {
    let started = Instant::now();
    let target = options.target()?;
    // Without --lockfile, the lockfile this binary was built with.
    let (path, bytes) = match &options.lockfile {
        Some(p) => (p.clone(), None),
        None => (PathBuf::from(format!("{} (built in)", target.lockfile)), Some(target.lockfile_text.as_bytes())),
    };
    let lock_err = |source| BuildError::Lockfile { path: path.clone(), source };
    let bytes = match bytes {
        Some(b) => b.to_vec(),
        None => std::fs::read(&path).map_err(|source| lock_err(LockfileError::Read { path: path.clone(), source }))?,
    };
    let lockfile = Lockfile::parse(&String::from_utf8_lossy(&bytes), &path.display().to_string()).map_err(lock_err)?;
    check_target(&lockfile, target, &path)?;
    let key = cache::cache_key(&bytes, BUILDER_VERSION);
    let lockfile_sha256 = cache::sha256_hex(&bytes);
    let cache_root = options.cache_root();

    if let Some(entry) = CachedPack::open(&cache_root, &key).map_err(BuildError::Cache)? {
        log(format_args!("verifying the cached pack {}", entry.dir.display()));
        entry
            .verify(&key, &lockfile_sha256, |p| image::sha256_file(p).map_err(|e| e.to_string()))
            .map_err(BuildError::Cache)?;
        return Ok(BuiltPack { entry, was_cached: true, elapsed: started.elapsed() });
    }

    require_root()?;
    let mirror = mirror::mirror_for(&lockfile.suite, Path::new(mirror::APT_ETC)).map_err(BuildError::Mirror)?;
    let work = WorkDir::create(&cache_root, &format!("build-{}", &key[..16]))?;
    let root = work.path.join("root");
    log(format_args!("installing {} pinned packages from {mirror} into {}", lockfile.packages.len(), root.display()));
    let spec = BootstrapSpec {
        suite: lockfile.suite.clone(),
        arch: lockfile.arch.clone(),
        mirror,
        include: lockfile.pins(),
        root: root.clone(),
        source_date_epoch: lockfile.source_date_epoch,
    };
    spec.run().map_err(|source| BuildError::Bootstrap { arch: target.arch.into(), source })?;
    let installed = dpkg_status::installed_packages(&root).map_err(BuildError::Status)?;
    lockfile.check_installed(&installed).map_err(|source| BuildError::Mismatch { path: path.clone(), source })?;

    image::make_mount_points(&root).map_err(BuildError::Image)?;
    let recipe = Recipe {
        source: target.linux,
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        source_date_epoch: lockfile.source_date_epoch,
        linux32: target.linux32,
    };
    log(format_args!(
        "preparing the Linux tree of {}: unpack, make {} with {} jobs",
        target.linux.package,
        recipe.make_targets().join(" "),
        recipe.jobs
    ));
    let prepared = linux_tree::prepare(&root, &work.path, &recipe).map_err(BuildError::LinuxTree)?;
    for (step, took) in &prepared.timings {
        log(format_args!("  {step}: {:.1} s", took.as_secs_f64()));
    }
    let source = SourceManifest {
        package: target.linux.package.into(),
        // check_target made sure the lockfile pins it.
        version: lockfile.packages.get(target.linux.package).cloned().unwrap_or_default(),
        tree: linux_tree::TREE.into(),
        obj: linux_tree::OBJ.into(),
        build_dir: linux_tree::BUILD_DIR.into(),
        config: target.linux.config.into(),
        config_sha256: prepared.config_sha256,
        make_targets: recipe.make_targets(),
        make_env: recipe.env().iter().map(|(k, v)| format!("{k}={v}")).collect(),
    };

    let identity = root.join(loads::userland_pack::IDENTITY_FILE.trim_start_matches('/'));
    std::fs::write(&identity, format!("{key}\n")).map_err(|source| BuildError::Io {
        action: "write",
        path: identity.clone(),
        source,
    })?;
    image::remove_volatile(&root).map_err(BuildError::Image)?;
    let size = image::clamp_and_measure(&root, lockfile.source_date_epoch).map_err(BuildError::Image)?;
    let image_path = work.path.join(cache::IMAGE_FILE);
    let args = Mke2fsArgs {
        root: root.clone(),
        image: image_path.clone(),
        uuid: cache::uuid_of_key(&key),
        inodes: size.inode_count(),
        blocks: size.fs_blocks(),
    };
    log(format_args!(
        "making the image: {} inodes, {} MiB of data, a {} MiB filesystem",
        size.inodes,
        (size.blocks * image::BLOCK_SIZE) >> 20,
        (args.blocks * image::BLOCK_SIZE) >> 20
    ));
    let conf = work.path.join("mke2fs.conf");
    let imaging = Instant::now();
    let shown = crate::terminal::spinner("making the pack's ext4 image");
    let made = image::make_image(&args, &conf, lockfile.source_date_epoch);
    shown.finish_and_clear();
    made.map_err(BuildError::Image)?;
    log(format_args!("image made in {:.1} s; removing the root", imaging.elapsed().as_secs_f64()));
    work.remove_inside(&root)?;
    for scratch in [conf.clone(), conf.with_file_name("debugfs.cmds")] {
        std::fs::remove_file(&scratch).map_err(|source| BuildError::Io { action: "remove", path: scratch, source })?;
    }

    let image_sha256 = image::sha256_file(&image_path).map_err(BuildError::Image)?;
    let image_bytes = std::fs::metadata(&image_path)
        .map_err(|source| BuildError::Io { action: "stat", path: image_path.clone(), source })?
        .len();
    let manifest = Manifest {
        key: key.clone(),
        builder_version: BUILDER_VERSION,
        lockfile_sha256,
        suite: lockfile.suite.clone(),
        arch: lockfile.arch.clone(),
        image: cache::IMAGE_FILE.into(),
        image_sha256,
        image_bytes,
        source: Some(source),
        packages: lockfile.pins(),
    };
    cache::write_manifest(&work.path, &manifest).map_err(BuildError::Cache)?;
    let entry = work.publish(&cache_root.join(&key))?;
    Ok(BuiltPack { entry: CachedPack { dir: entry, manifest }, was_cached: false, elapsed: started.elapsed() })
}

/// The lockfile is for `target`'s suite and arch and locks every package
/// the target asks for.
fn check_target(lockfile: &Lockfile, target: &PackTarget, path: &Path) -> Result<(), BuildError> {
    if lockfile.suite != target.suite || lockfile.arch != target.debian_arch {
        return Err(BuildError::WrongTarget {
            path: path.into(),
            arch: target.arch.into(),
            got: format!("{}/{}", lockfile.suite, lockfile.arch),
            want: format!("{}/{}", target.suite, target.debian_arch),
        });
    }
    match target.packages.iter().find(|p| !lockfile.packages.contains_key(**p)) {
        Some(package) => {
            Err(BuildError::NotLocked { path: path.into(), arch: target.arch.into(), package: package.to_string() })
        }
        None => Ok(()),
    }
}

fn require_root() -> Result<(), BuildError> {
    if nix::unistd::geteuid().is_root() {
        Ok(())
    } else {
        Err(BuildError::NotRoot)
    }
}

/// A work directory beside the cache entries, removed when dropped unless
/// published, and never while something is mounted in it.
struct WorkDir {
    path: PathBuf,
    done: bool,
}

impl WorkDir {
    fn create(cache_root: &Path, what: &str) -> Result<WorkDir, BuildError> {
        sweep_dead_work_dirs(cache_root);
        let path = cache_root.join(format!(".work-{what}-{}", std::process::id()));
        if path.exists() {
            remove_unmounted(&path, &path)?;
        }
        std::fs::create_dir_all(&path).map_err(|source| BuildError::Io {
            action: "create directory",
            path: path.clone(),
            source,
        })?;
        Ok(WorkDir { path, done: false })
    }

    /// Removes `inner`, a tree inside the work directory.
    fn remove_inside(&self, inner: &Path) -> Result<(), BuildError> {
        remove_unmounted(&self.path, inner)
    }

    fn remove(mut self) -> Result<(), BuildError> {
        self.done = true;
        remove_unmounted(&self.path, &self.path)
    }

    /// Renames the work directory to `entry`; when another build published
    /// it first, keeps that one.
    fn publish(mut self, entry: &Path) -> Result<PathBuf, BuildError> {
        match std::fs::rename(&self.path, entry) {
            Ok(()) => {
                self.done = true;
                Ok(entry.to_path_buf())
            }
            Err(_) if entry.join(cache::MANIFEST_FILE).is_file() => Ok(entry.to_path_buf()),
            Err(source) => Err(BuildError::Io { action: "publish the pack as", path: entry.into(), source }),
        }
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = remove_unmounted(&self.path, &self.path) {
                log(format_args!("leaving {}: {e}", self.path.display()));
            }
        }
    }
}

/// The pid a work directory's name ends with (`.work-WHAT-PID`).
fn work_dir_pid(name: &str) -> Option<i32> {
    name.strip_prefix(".work-")?.rsplit_once('-')?.1.parse().ok()
}

/// Removes the work directories of builds whose process is gone (killed,
/// or interrupted before their directory could be removed): each holds a
/// whole root, gigabytes, and no later build has the same name.
fn sweep_dead_work_dirs(cache_root: &Path) {
    let Ok(entries) = std::fs::read_dir(cache_root) else { return };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = work_dir_pid(&name) else { continue };
        let alive =
            !matches!(nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None), Err(nix::errno::Errno::ESRCH));
        if pid > 0 && !alive {
            log(format_args!("removing {}, left by build process {pid}, which is gone", e.path().display()));
            if let Err(err) = remove_unmounted(&e.path(), &e.path()) {
                log(format_args!("leaving {}: {err}", e.path().display()));
            }
        }
    }
}

/// Removes `path` (inside `dir`) unless a mount point lies inside `dir`:
/// an install chroot's /dev or /proc must never be deleted through.
fn remove_unmounted(dir: &Path, path: &Path) -> Result<(), BuildError> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|source| BuildError::Io {
        action: "read",
        path: "/proc/self/mountinfo".into(),
        source,
    })?;
    let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    if let Some(mount) = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|m| m.replace("\\040", " "))
        .find(|m| Path::new(m).starts_with(&canonical))
    {
        return Err(BuildError::StillMounted { dir: dir.into(), mount });
    }
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(BuildError::Io { action: "remove", path: path.into(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lockfile(packages: &[&str]) -> Lockfile {
        Lockfile {
            suite: "bookworm".into(),
            arch: "amd64".into(),
            source_date_epoch: 1,
            packages: packages.iter().map(|p| (p.to_string(), "1".to_string())).collect(),
        }
    }

    #[test]
    fn a_lockfile_must_lock_every_package_the_target_asks_for() {
        let target = target("x86_64").unwrap();
        let mut all: Vec<&str> = target.packages.to_vec();
        check_target(&lockfile(&all), target, Path::new("x.lock")).unwrap();
        all.retain(|p| *p != "bison");
        let err = check_target(&lockfile(&all), target, Path::new("x.lock")).unwrap_err().to_string();
        assert!(err.contains("does not lock package bison"), "{err}");
        let mut other = lockfile(target.packages);
        other.arch = "i386".into();
        let err = check_target(&other, target, Path::new("x.lock")).unwrap_err().to_string();
        assert_eq!(err, "the lockfile x.lock is for bookworm/i386, the x86_64 pack needs bookworm/amd64");
    }

    #[test]
    fn a_work_directory_with_a_mount_inside_is_never_removed() {
        // /proc is always a mount point: a "work directory" above it must be refused.
        let err = remove_unmounted(Path::new("/"), Path::new("/nonexistent-bootbench-test")).unwrap_err();
        assert!(matches!(err, BuildError::StillMounted { .. }), "{err}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        remove_unmounted(dir.path(), &dir.path().join("root")).unwrap();
        assert!(!dir.path().join("root").exists());
    }

    #[test]
    fn work_dirs_of_gone_builds_are_swept_and_live_ones_kept() {
        let cache = tempfile::tempdir().unwrap();
        // A pid that cannot be running (above the kernel's pid_max limit).
        let gone = cache.path().join(".work-build-0123456789abcdef-99999999");
        let live = cache.path().join(format!(".work-build-0123456789abcdef-{}", std::process::id()));
        let entry = cache.path().join("0123");
        for d in [&gone, &live, &entry] {
            std::fs::create_dir_all(d.join("root/usr")).unwrap();
        }
        assert_eq!(work_dir_pid(".work-lock-x86_64-42"), Some(42));
        assert_eq!(work_dir_pid("0123"), None);
        sweep_dead_work_dirs(cache.path());
        assert!(!gone.exists(), "a gone build's work directory is removed");
        assert!(live.exists() && entry.exists(), "a running build's and a cache entry are kept");
    }
}
