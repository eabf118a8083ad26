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
//!
//! This file owns the build steps; installed builds and the cache layout
//! are in `installed`, and the error both report is in `error`.

mod error;
mod installed;

use super::check::KernelConfig;
use super::config_fragment::{fragment, requirements, Need};
use installed::{install_build, sha256_file};
use qemu::Arch;
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};

pub use error::BuildError;
pub use installed::{
    arch_dir, cached, BuiltKernel, BuiltKernelInfo, Destination, BUILT_DIR, DEFAULT_LINK, KERNEL_JSON,
};

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

impl BuildSpec {
    /// A spec from the user's choices: `jobs` defaults to the host's CPUs
    /// (0 is refused), every fragment must be a file, and the kernel goes
    /// to `output` or else into the cache at `cache_root`.
    pub fn from_choices(
        tree: PathBuf,
        arch: Arch,
        jobs: Option<u32>,
        output: Option<PathBuf>,
        build_dir: Option<PathBuf>,
        extra_fragments: Vec<PathBuf>,
        cache_root: PathBuf,
    ) -> anyhow::Result<BuildSpec> {
        let jobs = match jobs {
            Some(0) => anyhow::bail!("--jobs must be at least 1"),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        };
        for f in &extra_fragments {
            anyhow::ensure!(f.is_file(), "config fragment {} does not exist or is not a file", f.display());
        }
        let destination = match output {
            Some(dir) => Destination::Dir(dir),
            None => Destination::Cache(cache_root),
        };
        Ok(BuildSpec { tree, arch, jobs, build_dir, extra_fragments, destination })
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
    let info = BuiltKernelInfo { build_seconds: started.elapsed().as_secs_f64(), ..info.clone() };
    let installed = install_build(&spec.destination, &files, &info)?;
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
    // The compile's messages are the user's to read: streamed to stderr (on
    // stdout they would mix with what bootbench prints there), or on a
    // terminal summed up by a spinner, their tail kept for a failure.
    let (status, tail) = crate::terminal::run_with_steps(&mut cmd, &shown, 20)
        .map_err(|source| BuildError::Spawn { command: shown.clone(), source })?;
    if status.success() {
        Ok(String::new())
    } else {
        let detail =
            if tail.is_empty() { " (its messages are above)".to_string() } else { format!(":\n{}", tail.join("\n")) };
        Err(BuildError::Step { command: shown, status: status.to_string(), dir: dir.into(), detail })
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

fn log(message: std::fmt::Arguments<'_>) {
    log::info!("{message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_from_the_users_choices_refuses_zero_jobs_and_missing_fragments() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().to_path_buf();
        let root = dir.path().join("cache");
        let spec = |jobs, out, frags| {
            BuildSpec::from_choices(tree.clone(), Arch::X86_64, jobs, out, None, frags, root.clone())
        };
        let e = spec(Some(0), None, Vec::new()).unwrap_err().to_string();
        assert!(e.contains("--jobs must be at least 1"), "{e}");
        let missing = dir.path().join("no-such.config");
        let e = spec(Some(2), None, vec![missing.clone()]).unwrap_err().to_string();
        assert!(e.contains(&missing.display().to_string()) && e.contains("does not exist"), "{e}");
        let s = spec(None, None, Vec::new()).unwrap();
        assert!(s.jobs >= 1);
        assert!(matches!(&s.destination, Destination::Cache(r) if *r == root), "{:?}", s.destination);
        let out = dir.path().join("out");
        let s = spec(Some(3), Some(out.clone()), Vec::new()).unwrap();
        assert_eq!(s.jobs, 3);
        assert!(matches!(&s.destination, Destination::Dir(d) if *d == out), "{:?}", s.destination);
    }

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
