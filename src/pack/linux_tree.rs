//! The Linux tree a pack carries: Debian's source tarball unpacked at
//! [`TREE`] (and removed), and an output tree configured and prepared
//! (`make defconfig prepare`) at [`OBJ`], so that the guest compiles single
//! objects in a copy of it without redoing any preparation. Each step runs
//! in a chroot of the pack's root with the pack's own tools (never the
//! host's compiler), in a fixed environment, in a private mount namespace
//! that holds /proc and /dev for that step only: they are gone when the
//! step's process is. It knows nothing of lockfiles or images.
//!
//! The layout the guest relies on:
//! - [`TREE`]: the source, read-only, the tarball's top directory stripped;
//! - [`OBJ`]: the prepared output tree (`.config`, generated headers, the
//!   host programs and objtool), every generated file at least as new as
//!   what it was made from;
//! - [`BUILD_DIR`]: where the guest's writable copy of [`OBJ`] (`cp -a`,
//!   keeping the times) goes. The preparation ran there, because objtool's
//!   build records its output directory as an absolute path: a copy at any
//!   other place rebuilds objtool on its first make.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::mount::MsFlags;

use super::targets::LinuxSource;

/// The unpacked source tree, in the pack (where the guest's build looks).
pub const TREE: &str = loads::pack_build::SOURCE;
/// The prepared output tree, in the pack.
pub const OBJ: &str = loads::pack_build::PREPARED;
/// The directory the guest mounts its writable work tree on.
pub const WORK: &str = loads::userland_pack::WORK_MOUNT;
/// Where the output tree was prepared and where the guest's copy of it
/// must be for its make to find the preparation complete.
pub const BUILD_DIR: &str = loads::pack_build::OBJ_IN_PACK;
/// The make targets that prepare the output tree, after the configuration.
pub const PREPARE_TARGETS: &[&str] = &["prepare"];
/// The name the kernel's build gives the builder and its host.
pub const BUILD_NAME: &str = "bootbench";

/// The kernel's `PER_LINUX32` execution domain (`uname -m` says i686).
const PER_LINUX32: i32 = 0x0008;

/// Puts the calling process (and what it execs) in the 32-bit execution
/// domain, as `linux32` does.
fn set_linux32() -> nix::Result<()> {
    nix::sys::personality::set(nix::sys::personality::Persona::from_bits_retain(PER_LINUX32)).map(drop)
}

/// How many trailing lines of a step's output an error keeps.
const TAIL_LINES: usize = 30;

/// A step of the preparation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The tarball unpacked.
    Unpack,
    /// The configuration written (`make <config>`).
    Defconfig,
    /// `make prepare`.
    Prepare,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Unpack => "unpack",
            Step::Defconfig => "defconfig",
            Step::Prepare => "prepare",
        })
    }
}

/// The Linux tree could not be unpacked or prepared.
#[derive(Debug, thiserror::Error)]
pub enum LinuxTreeError {
    /// The package's tarball is not in the root.
    #[error("the pack's root has no {tarball} (is {package} installed?)")]
    NoTarball {
        /// The package.
        package: String,
        /// The tarball, in the root.
        tarball: String,
    },
    /// A file or directory of the root could not be made, read or removed.
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
    /// A step's process could not be started.
    #[error("cannot start the {step} step (`{command}`) in a chroot of {root}")]
    Spawn {
        /// The step.
        step: Step,
        /// Its command.
        command: String,
        /// The root.
        root: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A step failed.
    #[error("the {step} step (`{command}`) failed ({status}) in a chroot of {root}; its output ends:\n{tail}")]
    Failed {
        /// The step.
        step: Step,
        /// Its command.
        command: String,
        /// The root.
        root: PathBuf,
        /// Its exit status.
        status: String,
        /// The end of its output.
        tail: String,
    },
    /// A step succeeded without leaving what it makes.
    #[error("the {step} step left no {path} in the pack")]
    Missing {
        /// The step.
        step: Step,
        /// What is missing, in the pack.
        path: String,
    },
}

/// What to prepare, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipe {
    /// The source.
    pub source: LinuxSource,
    /// make's job count for `prepare`.
    pub jobs: usize,
    /// The build's `SOURCE_DATE_EPOCH` (the lockfile's).
    pub source_date_epoch: u64,
    /// Run every step with the 32-bit personality (`PER_LINUX32`, as
    /// `linux32` does), for a 32-bit pack on a 64-bit host.
    pub linux32: bool,
}

impl Recipe {
    /// The make targets in the order they run: the configuration, then
    /// [`PREPARE_TARGETS`].
    pub fn make_targets(&self) -> Vec<String> {
        std::iter::once(self.source.config).chain(PREPARE_TARGETS.iter().copied()).map(String::from).collect()
    }

    /// The whole environment of every step: the kernel build's timestamp,
    /// user and host fixed, so that what it generates is the same each time.
    pub fn env(&self) -> Vec<(String, String)> {
        let epoch = std::time::UNIX_EPOCH + Duration::from_secs(self.source_date_epoch);
        [
            ("PATH", "/usr/sbin:/usr/bin:/sbin:/bin".to_string()),
            ("LANG", "C".into()),
            ("HOME", "/root".into()),
            ("SOURCE_DATE_EPOCH", self.source_date_epoch.to_string()),
            ("KBUILD_BUILD_TIMESTAMP", humantime::format_rfc3339_seconds(epoch).to_string()),
            ("KBUILD_BUILD_USER", BUILD_NAME.into()),
            ("KBUILD_BUILD_HOST", BUILD_NAME.into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Each step's argv, run in the chroot.
    pub fn steps(&self) -> Vec<(Step, Vec<String>)> {
        let make = |extra: &[String]| {
            let mut argv: Vec<String> =
                ["/usr/bin/make", "-C", TREE, &format!("O={BUILD_DIR}")].iter().map(|s| s.to_string()).collect();
            argv.extend_from_slice(extra);
            argv
        };
        let unpack: Vec<String> = [
            "/usr/bin/tar",
            "--extract",
            "--file",
            self.source.tarball,
            "--directory",
            TREE,
            "--strip-components=1",
            "--no-same-owner",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut prepare = vec![format!("-j{}", self.jobs.max(1))];
        prepare.extend(PREPARE_TARGETS.iter().map(|t| t.to_string()));
        vec![
            (Step::Unpack, unpack),
            (Step::Defconfig, make(&[self.source.config.to_string()])),
            (Step::Prepare, make(&prepare)),
        ]
    }
}

/// What the preparation made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// sha256 of the output tree's `.config` (hex).
    pub config_sha256: String,
    /// How long each step took.
    pub timings: Vec<(Step, Duration)>,
}

/// The path of the pack's absolute path `inner` under `root`.
fn in_root(root: &Path, inner: &str) -> PathBuf {
    root.join(inner.trim_start_matches('/'))
}

/// Unpacks and prepares the tree in `root` (see the module doc); each
/// step's output goes to a log in `log_dir`, removed when the step succeeds.
pub fn prepare(root: &Path, log_dir: &Path, recipe: &Recipe) -> Result<Prepared, LinuxTreeError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| LinuxTreeError::Io { action, path, source }
    };
    let tarball = in_root(root, recipe.source.tarball);
    if !tarball.is_file() {
        return Err(LinuxTreeError::NoTarball {
            package: recipe.source.package.into(),
            tarball: recipe.source.tarball.into(),
        });
    }
    let tree = in_root(root, TREE);
    let build_dir = in_root(root, BUILD_DIR);
    // Both top directories get their mode here, not from the caller's
    // umask (the tarball's own top directory is stripped).
    for dir in [&tree, &build_dir] {
        std::fs::create_dir_all(dir).map_err(io("create directory", dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io("set the mode of", dir))?;
    }
    let env = recipe.env();
    let mut timings = Vec::new();
    for (step, argv) in recipe.steps() {
        let started = Instant::now();
        run_in_chroot(root, log_dir, step, &argv, &env, recipe.linux32)?;
        timings.push((step, started.elapsed()));
        let (made, what) = match step {
            Step::Unpack => (tree.join("Makefile"), format!("{TREE}/Makefile")),
            Step::Defconfig | Step::Prepare => (build_dir.join(".config"), format!("{BUILD_DIR}/.config")),
        };
        if !made.is_file() {
            return Err(LinuxTreeError::Missing { step, path: what });
        }
        if step == Step::Unpack {
            std::fs::remove_file(&tarball).map_err(io("remove", &tarball))?;
        }
    }
    let config = build_dir.join(".config");
    let config_sha256 = super::cache::sha256_hex(&std::fs::read(&config).map_err(io("read", &config))?);
    let obj = in_root(root, OBJ);
    std::fs::rename(&build_dir, &obj).map_err(io("move the prepared tree to", &obj))?;
    // The guest's builds run with the same timestamp, user and host, or
    // kbuild would regenerate what depends on them (compile.h).
    let make_env = in_root(root, loads::userland_pack::MAKE_ENV_FILE);
    let lines: String = env
        .iter()
        .filter(|(k, _)| loads::userland_pack::is_pack_make_env(k))
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    std::fs::write(&make_env, lines).map_err(io("write", &make_env))?;
    Ok(Prepared { config_sha256, timings })
}

/// Runs `argv` chrooted in `root` with exactly `env`, umask 022, in a new
/// mount namespace with /proc and the host's /dev mounted in the root;
/// stdout and stderr to one log, whose tail a failure carries.
fn run_in_chroot(
    root: &Path,
    log_dir: &Path,
    step: Step,
    argv: &[String],
    env: &[(String, String)],
    linux32: bool,
) -> Result<(), LinuxTreeError> {
    let command_text = argv.join(" ");
    let spawn_err =
        |source| LinuxTreeError::Spawn { step, command: command_text.clone(), root: root.to_path_buf(), source };
    let cstring = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|e| spawn_err(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))
    };
    let root_c = cstring(root)?;
    let proc_c = cstring(&root.join("proc"))?;
    let dev_c = cstring(&root.join("dev"))?;
    let log_path = log_dir.join(format!("linux-{step}.log"));
    let log = File::create(&log_path).map_err(|source| LinuxTreeError::Io {
        action: "create",
        path: log_path.clone(),
        source,
    })?;
    let log_err =
        log.try_clone().map_err(|source| LinuxTreeError::Io { action: "open", path: log_path.clone(), source })?;
    let (program, args) = argv.split_first().ok_or_else(|| spawn_err(std::io::ErrorKind::InvalidInput.into()))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    // SAFETY: between fork and exec the closure makes system calls only, on
    // strings allocated before the fork.
    unsafe {
        command.pre_exec(move || enter_root(&root_c, &proc_c, &dev_c, linux32).map_err(std::io::Error::from));
    }
    let status = {
        let _shown = crate::terminal::FollowBuildLog::start(&log_path, &format!("linux tree, {step}"));
        command.status().map_err(spawn_err)?
    };
    if status.success() {
        return std::fs::remove_file(&log_path).map_err(|source| LinuxTreeError::Io {
            action: "remove",
            path: log_path,
            source,
        });
    }
    let text = std::fs::read(&log_path).map_err(|source| LinuxTreeError::Io {
        action: "read",
        path: log_path.clone(),
        source,
    })?;
    Err(LinuxTreeError::Failed {
        step,
        command: command_text,
        root: root.to_path_buf(),
        status: status.to_string(),
        tail: tail(&String::from_utf8_lossy(&text), TAIL_LINES),
    })
}

/// In the child: a private mount namespace, /proc and /dev mounted in the
/// root, the root entered, a fixed umask (the tree's modes must not
/// depend on the caller's), and the 32-bit personality when asked for.
fn enter_root(root: &std::ffi::CStr, proc: &std::ffi::CStr, dev: &std::ffi::CStr, linux32: bool) -> nix::Result<()> {
    if linux32 {
        set_linux32()?;
    }
    let none: Option<&std::ffi::CStr> = None;
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
    nix::mount::mount(none, c"/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)?;
    let proc_flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    nix::mount::mount(Some(c"proc"), proc, Some(c"proc"), proc_flags, none)?;
    nix::mount::mount(Some(c"/dev"), dev, none, MsFlags::MS_BIND, none)?;
    nix::unistd::chroot(root)?;
    nix::unistd::chdir(c"/")?;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    Ok(())
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe() -> Recipe {
        Recipe {
            source: LinuxSource {
                package: "linux-source-6.1",
                tarball: "/usr/src/linux-source-6.1.tar.xz",
                config: "x86_64_defconfig",
            },
            jobs: 2,
            source_date_epoch: 1_796_190_798,
            linux32: false,
        }
    }

    #[test]
    fn steps_unpack_configure_and_prepare_in_the_build_directory() {
        let steps = recipe().steps();
        let names: Vec<Step> = steps.iter().map(|(s, _)| *s).collect();
        assert_eq!(names, [Step::Unpack, Step::Defconfig, Step::Prepare]);
        assert_eq!(
            steps[0].1.join(" "),
            "/usr/bin/tar --extract --file /usr/src/linux-source-6.1.tar.xz --directory /usr/src/linux \
             --strip-components=1 --no-same-owner"
        );
        assert_eq!(steps[1].1.join(" "), "/usr/bin/make -C /usr/src/linux O=/bootbench/work/obj x86_64_defconfig");
        assert_eq!(steps[2].1.join(" "), "/usr/bin/make -C /usr/src/linux O=/bootbench/work/obj -j2 prepare");
        assert_eq!(recipe().make_targets(), ["x86_64_defconfig", "prepare"]);
        assert!(BUILD_DIR.starts_with(&format!("{WORK}/")));
    }

    #[test]
    fn the_environment_is_fixed_and_complete() {
        let env = recipe().env();
        let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("PATH"), Some("/usr/sbin:/usr/bin:/sbin:/bin"));
        assert_eq!(get("KBUILD_BUILD_TIMESTAMP"), Some("2026-12-02T05:53:18Z"));
        assert_eq!(get("KBUILD_BUILD_USER"), Some("bootbench"));
        assert_eq!(get("KBUILD_BUILD_HOST"), Some("bootbench"));
        assert_eq!(get("SOURCE_DATE_EPOCH"), Some("1796190798"));
        assert_eq!(env.len(), 7, "{env:?}");
    }

    #[test]
    fn a_failed_step_is_named_with_the_tail_of_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let argv = vec!["/bin/sh".to_string(), "-c".into(), "exit 3".into()];
        // Not root (or no /proc in the root): the chroot itself fails, named by step.
        let err = run_in_chroot(dir.path(), dir.path(), Step::Prepare, &argv, &[], false).unwrap_err().to_string();
        assert!(err.contains("prepare step (`/bin/sh -c exit 3`)"), "{err}");
        let text: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        assert_eq!(tail(&text, 3), "line 38\nline 39\nline 40");
    }

    #[test]
    fn a_root_without_the_tarball_is_refused_naming_the_package() {
        let dir = tempfile::tempdir().unwrap();
        let err = prepare(dir.path(), dir.path(), &recipe()).unwrap_err().to_string();
        assert_eq!(err, "the pack's root has no /usr/src/linux-source-6.1.tar.xz (is linux-source-6.1 installed?)");
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_32_bit_personality_makes_uname_say_i686() {
        let machine = |linux32: bool| {
            let mut c = Command::new("uname");
            c.arg("-m");
            // SAFETY: personality(2) only, between fork and exec.
            unsafe {
                c.pre_exec(move || if linux32 { set_linux32().map_err(std::io::Error::from) } else { Ok(()) });
            }
            String::from_utf8(c.output().unwrap().stdout).unwrap().trim().to_string()
        };
        assert_eq!(machine(false), "x86_64");
        assert_eq!(machine(true), "i686");
    }
}
