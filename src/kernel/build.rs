//! Builds a kernel for the appliance from any kernel source tree: the arch's
//! defconfig with modules and large subsystems the appliance never uses
//! switched off, the [`config_fragment`](super::config_fragment) merged on
//! top, built with the cross compiler, and installed with a `kernel.json`
//! record into the kernel cache (or a directory of the caller's choice).
//! This is how big-endian ppc64, which Debian has no kernel for, gets one.
//!
//! It builds out of tree (`O=`), so the source tree itself is never
//! configured or written to apart from the build directory. It never
//! installs packages.
//!
//! Cache layout, under the kernel cache root (see
//! [`default_cache_root`](super::default_cache_root)), beside the Debian
//! arch directories of [`fetch`](super::fetch):
//! ```text
//! <root>/built/<arch>/<release>_<config-sha256[..12]>/   boot/vmlinu[xz]-REL, boot/config-REL,
//!                                                        boot/System.map-REL, kernel.json
//! <root>/built/<arch>/default                            symlink to the newest build
//! ```

use super::check::KernelConfig;
use super::config_fragment::{fragment, requirements, Need};
use qemu::Arch;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};

/// Name of the metadata file in an installed build.
pub const KERNEL_JSON: &str = "kernel.json";
/// Name of the symlink to the newest build of an arch.
pub const DEFAULT_LINK: &str = "default";
/// The directory under the kernel cache root that holds built kernels.
pub const BUILT_DIR: &str = "built";

/// Options switched off after the defconfig: loadable modules (everything
/// the appliance needs is built in, so the image needs no modules) and large
/// subsystems a QEMU guest running the appliance never touches. Without
/// modules, Kconfig would turn every `=m` into `=y`, so `mod2noconfig` runs
/// first and this list only has to catch what defconfigs build in.
pub const TRIM: &[&str] = &[
    "MODULES",
    "DRM",
    "FB",
    "SOUND",
    "USB_SUPPORT",
    "WLAN",
    "WIRELESS",
    "BT",
    "INFINIBAND",
    "MEDIA_SUPPORT",
    "NETFILTER",
    "MD",
    "ATA",
    "SCSI",
    "NETWORK_FILESYSTEMS",
    "ETHERNET",
    "VIRTUALIZATION",
];

/// Errors while building or looking up a built kernel.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The tree is not a kernel source tree.
    #[error("{tree} is not a kernel source tree (no {missing})")]
    NotKernelTree {
        /// The tree given.
        tree: PathBuf,
        /// The file that is missing.
        missing: &'static str,
    },
    /// A build tool is not installed.
    #[error("building a {arch} kernel needs {tool}, which is not on PATH; install the Debian package {package} (scripts/setup does)")]
    MissingTool {
        /// The arch being built.
        arch: Arch,
        /// The missing program.
        tool: String,
        /// The package that provides it.
        package: &'static str,
    },
    /// A file system operation failed.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A build step could not be started.
    #[error("cannot run `{command}`")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A build step failed.
    #[error("`{command}` failed ({status}) in {dir}{detail}")]
    Step {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Where it ran.
        dir: PathBuf,
        /// Its output's tail, or where the output went.
        detail: String,
    },
    /// Options the appliance needs did not survive `make olddefconfig`
    /// (a dependency of theirs is off in this tree or arch).
    #[error("after `make olddefconfig` in {build_dir}, these options are not as the appliance needs: {options}")]
    ConfigDidNotStick {
        /// The build directory with the final `.config`.
        build_dir: PathBuf,
        /// `CONFIG_X=VALUE (wanted y)`, comma-separated.
        options: String,
    },
    /// The final config could not be parsed.
    #[error("the config written by the build is unusable")]
    Config(#[source] super::check::CheckError),
    /// The built image is not a kernel for the arch.
    #[error("the built image {path} is not a {arch} kernel")]
    Image {
        /// The image.
        path: PathBuf,
        /// The arch built for.
        arch: Arch,
        /// Why.
        #[source]
        source: qemu::kernel_image::KernelImageError,
    },
    /// An installed build that cannot be used as it is.
    #[error("built kernel {path} is unusable ({why}); build it again or delete it")]
    Corrupt {
        /// The entry or its metadata file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// How one arch's kernel is configured and built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchBuild {
    /// The kernel's `ARCH=`.
    pub make_arch: &'static str,
    /// The defconfig target.
    pub defconfig: &'static str,
    /// The image target.
    pub target: &'static str,
    /// Where the target lands in the build directory.
    pub image_path: &'static str,
    /// The image's name prefix in the installed `boot/`, before the release.
    pub image_prefix: &'static str,
    /// `CROSS_COMPILE=` (empty: the host compiler, which builds both x86 arches).
    pub cross_compile: &'static str,
    /// The Debian package with the cross compiler.
    pub cross_package: &'static str,
}

impl ArchBuild {
    /// The build settings of `arch`.
    pub fn of(arch: Arch) -> ArchBuild {
        let x86 = |make_arch, defconfig| ArchBuild {
            make_arch,
            defconfig,
            target: "bzImage",
            image_path: "arch/x86/boot/bzImage",
            image_prefix: "vmlinuz-",
            cross_compile: "",
            cross_package: "gcc",
        };
        let power = |defconfig, cross_compile, cross_package| ArchBuild {
            make_arch: "powerpc",
            defconfig,
            target: "vmlinux",
            image_path: "vmlinux",
            image_prefix: "vmlinux-",
            cross_compile,
            cross_package,
        };
        match arch {
            Arch::X86_64 => x86("x86_64", "x86_64_defconfig"),
            Arch::I386 => x86("i386", "i386_defconfig"),
            Arch::Ppc64 => power("pseries_defconfig", "powerpc64-linux-gnu-", "gcc-12-powerpc64-linux-gnu"),
            Arch::Ppc64le => power("pseries_le_defconfig", "powerpc64le-linux-gnu-", "gcc-12-powerpc64le-linux-gnu"),
        }
    }
}

/// Where a build is installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Into the kernel cache under this root, made the arch's default.
    Cache(PathBuf),
    /// Into this directory (created; the files it holds are replaced).
    Dir(PathBuf),
}

/// What to build.
#[derive(Debug, Clone)]
pub struct BuildSpec {
    /// The kernel source tree.
    pub tree: PathBuf,
    /// The guest arch.
    pub arch: Arch,
    /// Parallel make jobs.
    pub jobs: u32,
    /// The out-of-tree build directory; default `TREE/.bootbench-build-ARCH`
    /// (hidden, so the kernel's .gitignore already ignores it).
    pub build_dir: Option<PathBuf>,
    /// More Kconfig fragments to merge after the appliance's, in order.
    pub extra_fragments: Vec<PathBuf>,
    /// Where the result goes.
    pub destination: Destination,
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
    /// The options switched off after the defconfig ([`TRIM`]).
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

/// The build steps of one spec, with their common make arguments.
struct Builder<'a> {
    spec: &'a BuildSpec,
    settings: ArchBuild,
    build_dir: PathBuf,
    /// PATH with the compiler shim in front, when one was needed.
    path: Option<OsString>,
    /// Keeps the shim directory alive for the build.
    _shim: Option<tempfile::TempDir>,
    compiler: String,
}

impl Builder<'_> {
    fn make_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--no-print-directory".into(),
            "-C".into(),
            self.spec.tree.clone().into(),
            format!("O={}", self.build_dir.display()).into(),
            format!("ARCH={}", self.settings.make_arch).into(),
        ];
        if !self.settings.cross_compile.is_empty() {
            args.push(format!("CROSS_COMPILE={}", self.settings.cross_compile).into());
        }
        args
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        if let Some(path) = &self.path {
            cmd.env("PATH", path);
        }
        // Messages are shown to the user and parsed nowhere, but keep them stable.
        cmd.env("LC_ALL", "C");
        cmd
    }

    /// Runs make with `extra` arguments; `quiet` steps keep their output
    /// for the error, loud ones (the long compile) stream it to stderr.
    fn make(&self, extra: &[&str], quiet: bool) -> Result<String, BuildError> {
        let mut cmd = self.command("make");
        cmd.args(self.make_args()).args(extra);
        run(cmd, &self.spec.tree, quiet)
    }
}

/// Builds the kernel `spec` describes and installs it. Progress and the
/// compiler's messages go to stderr.
pub fn build(spec: &BuildSpec) -> Result<BuiltKernel, BuildError> {
    let started = Instant::now();
    let tree = fs::canonicalize(&spec.tree).map_err(|source| BuildError::Io {
        action: "find the kernel tree",
        path: spec.tree.clone(),
        source,
    })?;
    for missing in ["Makefile", "scripts/kconfig/merge_config.sh", "scripts/config"] {
        if !tree.join(missing).is_file() {
            return Err(BuildError::NotKernelTree { tree, missing });
        }
    }
    let spec = &BuildSpec { tree: tree.clone(), ..spec.clone() };
    let settings = ArchBuild::of(spec.arch);
    for (tool, package) in [("make", "make"), ("flex", "flex"), ("bison", "bison"), ("bc", "bc"), ("perl", "perl")] {
        if find_on_path(tool).is_none() {
            return Err(BuildError::MissingTool { arch: spec.arch, tool: tool.into(), package });
        }
    }
    let (path, shim, compiler) = toolchain(spec.arch, &settings)?;
    let build_dir = match &spec.build_dir {
        Some(dir) => dir.clone(),
        None => tree.join(format!(".bootbench-build-{}", spec.arch)),
    };
    fs::create_dir_all(&build_dir).map_err(|source| BuildError::Io {
        action: "create the build directory",
        path: build_dir.clone(),
        source,
    })?;
    let build_dir = fs::canonicalize(&build_dir).map_err(|source| BuildError::Io {
        action: "find the build directory",
        path: build_dir.clone(),
        source,
    })?;
    let b = Builder { spec, settings, build_dir: build_dir.clone(), path, _shim: shim, compiler };
    log(format_args!(
        "building a {} kernel from {} in {} with {}",
        spec.arch,
        tree.display(),
        build_dir.display(),
        b.compiler
    ));

    // Configure: defconfig, modules off, trims, the appliance fragment, olddefconfig.
    let step = Instant::now();
    b.make(&[settings.defconfig], true)?;
    b.make(&["mod2noconfig"], true)?;
    let config = build_dir.join(".config");
    let mut trim = b.command(&tree.join("scripts/config").to_string_lossy());
    trim.arg("--file").arg(&config);
    for option in TRIM {
        trim.args(["--disable", option]);
    }
    run(trim, &tree, true)?;
    let fragment_text = fragment(spec.arch);
    let fragment_path = build_dir.join("bootbench.config");
    fs::write(&fragment_path, &fragment_text).map_err(|source| BuildError::Io {
        action: "write",
        path: fragment_path.clone(),
        source,
    })?;
    let mut merge = b.command(&tree.join("scripts/kconfig/merge_config.sh").to_string_lossy());
    merge.arg("-m").arg("-O").arg(&build_dir).arg(&config).arg(&fragment_path).args(&spec.extra_fragments);
    run(merge, &tree, true)?;
    b.make(&["olddefconfig"], true)?;
    let final_config = read_config(&config)?;
    check_config(&final_config, spec.arch, &build_dir)?;
    log(format_args!("configured in {:.1} s", step.elapsed().as_secs_f64()));

    let step = Instant::now();
    let jobs = format!("-j{}", spec.jobs.max(1));
    b.make(&[&jobs, settings.target], false)?;
    log(format_args!("`make {}` took {:.1} s", settings.target, step.elapsed().as_secs_f64()));
    let release = b.make(&["-s", "kernelrelease"], true)?.trim().to_string();
    if release.is_empty() || release.contains(char::is_whitespace) || release.contains('/') {
        return Err(BuildError::Corrupt { path: build_dir, why: format!("`make kernelrelease` said {release:?}") });
    }
    let image = build_dir.join(settings.image_path);
    qemu::kernel_image::check_kernel(&image, spec.arch).map_err(|source| BuildError::Image {
        path: image.clone(),
        arch: spec.arch,
        source,
    })?;

    let config_sha256 = sha256_file(&config)?;
    let info = BuiltKernelInfo {
        arch: spec.arch,
        release: release.clone(),
        source_tree: tree.clone(),
        build_dir: build_dir.clone(),
        defconfig: settings.defconfig.to_string(),
        trimmed: TRIM.iter().map(|s| s.to_string()).collect(),
        extra_fragments: spec.extra_fragments.clone(),
        fragment_sha256: hex::encode(Sha256::digest(fragment_text.as_bytes())),
        cross_compile: settings.cross_compile.to_string(),
        compiler: b.compiler.clone(),
        image: PathBuf::from(format!("boot/{}{release}", settings.image_prefix)),
        config: PathBuf::from(format!("boot/config-{release}")),
        system_map: PathBuf::from(format!("boot/System.map-{release}")),
        image_sha256: sha256_file(&image)?,
        config_sha256: config_sha256.clone(),
        page_size: final_config.page_size(),
        built_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        build_seconds: 0.0,
    };
    let files = [(image, &info.image), (config, &info.config), (build_dir.join("System.map"), &info.system_map)];
    let installed = match &spec.destination {
        Destination::Dir(dir) => {
            let info = BuiltKernelInfo { build_seconds: started.elapsed().as_secs_f64(), ..info.clone() };
            install(dir, &files, &info)?;
            BuiltKernel::load(dir, spec.arch)?
        }
        Destination::Cache(root) => {
            let arch_dir = arch_dir(root, spec.arch);
            let entry = arch_dir.join(format!("{release}_{}", &config_sha256[..12]));
            let temp = arch_dir.join(format!(".build-{}", uuid::Uuid::new_v4()));
            let info = BuiltKernelInfo { build_seconds: started.elapsed().as_secs_f64(), ..info.clone() };
            let result = install(&temp, &files, &info).and_then(|()| replace_dir(&temp, &entry));
            if result.is_err() {
                let _ = fs::remove_dir_all(&temp);
            }
            result?;
            point_default(&arch_dir, &entry)?;
            BuiltKernel::load(&entry, spec.arch)?
        }
    };
    log(format_args!(
        "{} kernel {} built in {:.1} s: {}",
        spec.arch,
        release,
        installed.info.build_seconds,
        installed.image().display()
    ));
    Ok(installed)
}

/// Finds the compiler; when only the versioned cross gcc (`X-gcc-12`) is
/// installed, puts a directory with an `X-gcc` link to it in front of PATH,
/// because Kbuild calls `$(CROSS_COMPILE)gcc`.
fn toolchain(
    arch: Arch,
    settings: &ArchBuild,
) -> Result<(Option<OsString>, Option<tempfile::TempDir>, String), BuildError> {
    let gcc = format!("{}gcc", settings.cross_compile);
    let ld = format!("{}ld", settings.cross_compile);
    let missing =
        |tool: &str| BuildError::MissingTool { arch, tool: tool.to_string(), package: settings.cross_package };
    if find_on_path(&ld).is_none() {
        return Err(missing(&ld));
    }
    let (path, shim, gcc_path) =
        match find_on_path(&gcc) {
            Some(found) => (None, None, found),
            None => {
                let versioned = format!("{gcc}-12");
                let target = find_on_path(&versioned).ok_or_else(|| missing(&versioned))?;
                let shim = tempfile::Builder::new().prefix("bootbench-cc-").tempdir().map_err(|source| {
                    BuildError::Io { action: "create a temp dir in", path: std::env::temp_dir(), source }
                })?;
                let link = shim.path().join(&gcc);
                std::os::unix::fs::symlink(&target, &link).map_err(|source| BuildError::Io {
                    action: "create the symlink",
                    path: link.clone(),
                    source,
                })?;
                let mut dirs = vec![shim.path().to_path_buf()];
                dirs.extend(
                    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default(),
                );
                let path = std::env::join_paths(dirs).map_err(|e| BuildError::Io {
                    action: "put on PATH",
                    path: shim.path().to_path_buf(),
                    source: std::io::Error::other(e),
                })?;
                (Some(path), Some(shim), link)
            }
        };
    let version = Command::new(&gcc_path)
        .arg("--version")
        .output()
        .map_err(|source| BuildError::Spawn { command: format!("{} --version", gcc_path.display()), source })?;
    let line = String::from_utf8_lossy(&version.stdout).lines().next().unwrap_or_default().trim().to_string();
    Ok((path, shim, if line.is_empty() { gcc } else { line }))
}

fn find_on_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(tool)).find(|p| p.is_file())
}

/// Runs a build step. A quiet step's output is kept and returned (stdout),
/// and its tail goes into the error; a loud step streams to stderr.
fn run(mut cmd: Command, dir: &Path, quiet: bool) -> Result<String, BuildError> {
    let shown = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    cmd.current_dir(dir).stdin(Stdio::null());
    if quiet {
        let out = cmd.output().map_err(|source| BuildError::Spawn { command: shown.clone(), source })?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines.get(lines.len().saturating_sub(20)..).unwrap_or_default().join("\n");
        return Err(BuildError::Step {
            command: shown,
            status: out.status.to_string(),
            dir: dir.into(),
            detail: format!(":\n{tail}"),
        });
    }
    // The compile's messages are the user's to read; on stdout they would
    // mix with what bootbench prints there.
    let status = cmd
        .stdout(std::io::stderr())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|source| BuildError::Spawn { command: shown.clone(), source })?;
    if status.success() {
        Ok(String::new())
    } else {
        Err(BuildError::Step {
            command: shown,
            status: status.to_string(),
            dir: dir.into(),
            detail: " (its messages are above)".into(),
        })
    }
}

fn read_config(path: &Path) -> Result<KernelConfig, BuildError> {
    let text = fs::read_to_string(path).map_err(|source| BuildError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    KernelConfig::parse(&text, path).map_err(BuildError::Config)
}

/// Every option of the fragment must have come out `=y`; recommended ones
/// that did not are only reported.
fn check_config(config: &KernelConfig, arch: Arch, build_dir: &Path) -> Result<(), BuildError> {
    let mut wrong = Vec::new();
    for r in requirements(arch) {
        let value = config.get(r.option);
        if value == Some("y") {
            continue;
        }
        let shown = format!("CONFIG_{}={} (wanted y)", r.option, value.unwrap_or("n"));
        if r.need == Need::Recommended {
            log(format_args!("note: recommended option not available in this tree: {shown}"));
        } else {
            wrong.push(shown);
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(BuildError::ConfigDidNotStick { build_dir: build_dir.to_path_buf(), options: wrong.join(", ") })
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

fn sha256_file(path: &Path) -> Result<String, BuildError> {
    let data = fs::read(path).map_err(|source| BuildError::Io { action: "read", path: path.to_path_buf(), source })?;
    Ok(hex::encode(Sha256::digest(&data)))
}

fn log(message: std::fmt::Arguments<'_>) {
    eprintln!("kernel build: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_never_remove_what_the_appliance_needs() {
        for arch in Arch::ALL {
            for r in requirements(arch) {
                assert!(!TRIM.contains(&r.option), "{arch}: {} is both trimmed and required", r.option);
            }
        }
    }

    #[test]
    fn power_builds_a_vmlinux_with_the_cross_compiler() {
        let be = ArchBuild::of(Arch::Ppc64);
        assert_eq!(
            (be.defconfig, be.target, be.cross_compile),
            ("pseries_defconfig", "vmlinux", "powerpc64-linux-gnu-")
        );
        let le = ArchBuild::of(Arch::Ppc64le);
        assert_eq!(le.defconfig, "pseries_le_defconfig");
        assert_eq!(ArchBuild::of(Arch::I386).make_arch, "i386");
        // The installed name matches what the fetch cache and `run` expect per format.
        for arch in Arch::ALL {
            let prefix = ArchBuild::of(arch).image_prefix;
            let want = match arch.profile().kernel_format {
                qemu::arch::KernelFormat::Elf => "vmlinux-",
                _ => "vmlinuz-",
            };
            assert_eq!(prefix, want, "{arch}");
        }
    }

    #[test]
    fn not_a_kernel_tree_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let spec = BuildSpec {
            tree: dir.path().to_path_buf(),
            arch: Arch::Ppc64,
            jobs: 1,
            build_dir: None,
            extra_fragments: Vec::new(),
            destination: Destination::Dir(dir.path().join("out")),
        };
        let e = build(&spec).unwrap_err().to_string();
        assert!(e.contains("is not a kernel source tree (no Makefile)"), "{e}");
        let spec = BuildSpec { tree: dir.path().join("absent"), ..spec };
        let e = build(&spec).unwrap_err().to_string();
        assert!(e.contains("cannot find the kernel tree") && e.contains("absent"), "{e}");
    }

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

    #[test]
    fn options_that_do_not_stick_are_named() {
        let text = fragment(Arch::Ppc64)
            .replace("CONFIG_VIRTIO_NET=y", "CONFIG_VIRTIO_NET=m")
            .replace("CONFIG_IP_PNP=y\n", "");
        let config = KernelConfig::parse(&text, Path::new("c")).unwrap();
        let e = check_config(&config, Arch::Ppc64, Path::new("/b")).unwrap_err().to_string();
        assert!(e.contains("CONFIG_VIRTIO_NET=m (wanted y)"), "{e}");
        assert!(!e.contains("IP_PNP"), "recommended options are not fatal: {e}");
    }
}
