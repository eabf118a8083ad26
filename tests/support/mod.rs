//! Shared pieces of the end-to-end tests: find the `bootbench` binary and the
//! cached default kernel, run a subcommand under a deadline, read its results
//! file, and fail loudly when a prerequisite is missing. It boots nothing by
//! itself and never skips a test: a missing prerequisite is a failure that
//! says what to install.

// Each test crate includes this module and uses only part of it.
#![allow(dead_code)]

use bootbench::kernel::{self, DebianArch, FetchedKernel};
use bootbench::results::{BootRecord, ResultsFile};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The `#[ignore]` reason of every test that boots a kernel.
pub const BOOTS_REASON: &str = "boots real kernels under QEMU: run scripts/test";

/// A deadline for one `bootbench run` of a short suite. TCG boots take
/// 10–30 s on an idle host, but this machine is shared: a loaded host has
/// been seen to take 110 s for one boot.
pub const BOOT_DEADLINE: Duration = Duration::from_secs(900);

/// The `bootbench` binary cargo built for this test crate.
pub fn bootbench_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_bootbench"))
}

/// Fails the test unless `cond` holds, naming what is missing.
#[track_caller]
pub fn require(cond: bool, what_is_missing: &str) {
    if !cond {
        panic!("missing prerequisite: {what_is_missing} (run scripts/setup / scripts/test)");
    }
}

/// Whether `program` is an executable on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            let f = d.join(program);
            f.metadata()
                .is_ok_and(|m| m.is_file() && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
        })
    })
}

/// Fails the test unless `program` is on PATH.
#[track_caller]
pub fn require_program(program: &str) {
    require(on_path(program), &format!("program '{program}' not on PATH"));
}

/// Fails the test unless this host can run `bootbench local` with the
/// userland pack: root (to mount it; mmdebstrap builds it as root) and
/// the programs that build it.
#[track_caller]
pub fn require_local_pack() {
    require(nix::unistd::geteuid().is_root(), "root (local mounts the pack; mmdebstrap builds it)");
    for program in ["mmdebstrap", "mke2fs"] {
        require_program(program);
    }
}

/// The cached default kernel of `arch` (what `bootbench run` boots without
/// `--kernel`); fails the test when it is not cached or is damaged.
#[track_caller]
pub fn default_kernel(arch: DebianArch) -> FetchedKernel {
    let root = kernel::default_cache_root();
    let found = kernel::cached(arch, &root).unwrap_or_else(|e| {
        panic!("missing prerequisite: a usable {arch} kernel cache under {} ({e:#})", root.display())
    });
    let k = found.unwrap_or_else(|| {
        panic!(
            "missing prerequisite: the default {arch} kernel is not cached under {} (run `bootbench kernel fetch`, or scripts/test)",
            root.display()
        )
    });
    if let Err(e) = k.verify() {
        panic!(
            "missing prerequisite: the cached {arch} kernel is damaged ({e:#}); run `bootbench kernel fetch --update`"
        );
    }
    k
}

/// The default amd64 kernel, plus QEMU for it: the usual needs of a boot test.
#[track_caller]
pub fn require_x86_64_boot() -> FetchedKernel {
    require_program("qemu-system-x86_64");
    default_kernel(DebianArch::Amd64)
}

/// Serialises the boots of one test crate: the machine has two cores shared
/// by everyone, and parallel QEMU boots would also distort every timing.
pub fn boot_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A test that failed while holding the lock leaves nothing to repair.
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a finished command printed, how it ended, and how long it took.
#[derive(Debug)]
pub struct CliRun {
    /// The command, for messages.
    pub what: String,
    /// Exit status.
    pub status: ExitStatus,
    /// Everything on stdout.
    pub stdout: String,
    /// Everything on stderr.
    pub stderr: String,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
}

impl CliRun {
    /// The exit code (`None` when a signal ended it).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Fails the test unless the command exited 0.
    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        assert!(self.status.success(), "{} failed ({}):\n{}", self.what, self.status, self.transcript());
        self
    }

    /// stdout and stderr, for failure messages.
    pub fn transcript(&self) -> String {
        format!("--- stdout ---\n{}\n--- stderr ---\n{}", self.stdout, self.stderr)
    }
}

/// A `bootbench` command with `args`, ready for [`run_with_deadline`] (set
/// environment or working directory on it first).
pub fn bootbench<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut c = Command::new(bootbench_bin());
    c.args(args);
    c
}

fn drain<R: Read + Send + 'static>(mut r: R) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Runs `cmd` to completion, capturing its output; fails the test (after
/// killing it) when it is still running at `deadline`. `bootbench run`
/// starts QEMU with a parent-death signal, so killing it kills its QEMU too.
#[track_caller]
pub fn run_with_deadline(mut cmd: Command, deadline: Duration) -> CliRun {
    let what = format!("{cmd:?}");
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let out = drain(child.stdout.take().expect("stdout is piped"));
    let err = drain(child.stderr.take().expect("stderr is piped"));
    let status = loop {
        if let Some(st) = child.try_wait().unwrap_or_else(|e| panic!("cannot wait for {what}: {e}")) {
            break st;
        }
        if start.elapsed() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = out.join().unwrap_or_default();
            let stderr = err.join().unwrap_or_default();
            panic!(
                "{what} still running after {deadline:?}; killed it\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = start.elapsed();
    CliRun { what, status, stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default(), elapsed }
}

/// Runs `bootbench ARGS` under `deadline`.
#[track_caller]
pub fn run_bootbench<I, S>(args: I, deadline: Duration) -> CliRun
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    run_with_deadline(bootbench(args), deadline)
}

/// Reads a results file `bootbench run -o` wrote; fails the test with what
/// bootbench printed when there is none.
#[track_caller]
pub fn read_results(path: &Path, run: &CliRun) -> ResultsFile {
    ResultsFile::read(path)
        .unwrap_or_else(|e| panic!("no results file from {} ({e:#}):\n{}", run.what, run.transcript()))
}

/// The one boot of a results file that must hold exactly one.
#[track_caller]
pub fn only_boot(path: &Path, run: &CliRun) -> BootRecord {
    let mut file = read_results(path, run);
    assert_eq!(file.boots.len(), 1, "expected one boot in {}:\n{}", path.display(), run.transcript());
    file.boots.remove(0)
}

/// Polls `f` until it returns true or `deadline` passes; returns whether it
/// became true.
pub fn wait_until(deadline: Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + deadline;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// sha256 of a file, hex.
#[track_caller]
pub fn sha256_file(path: &Path) -> String {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    hex::encode(Sha256::digest(&data))
}

/// A fresh scratch directory, removed when dropped.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("bootbench-test-").tempdir().expect("cannot create a temp dir")
}

/// Shapes of JSON documents for snapshot tests.
pub mod json_shape;
/// Test certificates for the receiver's https.
pub mod test_pki;

/// Runs git in `dir` and returns its stdout, trimmed; fails the test, with
/// git's output, when git fails.
#[track_caller]
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().expect("cannot run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A git tree at `tree` with commits c0 … c4 on `main`; from c3 on its
/// `cmdline` file names an init that does not exist, so a kernel booted
/// with it finds no init and panics. Returns the commits' shas.
pub fn no_init_history(tree: &Path) -> Vec<String> {
    std::fs::create_dir_all(tree).unwrap();
    git(tree, &["init", "-q", "-b", "main"]);
    git(tree, &["config", "user.email", "bootbench-test@example.invalid"]);
    git(tree, &["config", "user.name", "bootbench test"]);
    std::fs::write(tree.join(".gitignore"), "out/\n").unwrap();
    let mut shas = Vec::new();
    for i in 0..=4 {
        let cmdline = if i >= 3 { "rdinit=/nonexistent" } else { "" };
        std::fs::write(tree.join("cmdline"), format!("{cmdline}\n")).unwrap();
        // Every commit changes something, so none is empty.
        std::fs::write(tree.join("version"), format!("{i}\n")).unwrap();
        git(tree, &["add", "-A"]);
        git(tree, &["commit", "-q", "-m", &format!("c{i}")]);
        shas.push(git(tree, &["rev-parse", "HEAD"]));
    }
    shas
}

/// A `--build` command for [`no_init_history`]'s tree: the cached kernel
/// `k` copied into `out/` with the tree's `cmdline`.
pub fn copy_kernel_build(k: &FetchedKernel) -> String {
    format!(
        "mkdir -p out && cp '{}' out/bzImage && cp '{}' out/.config && cp cmdline out/cmdline",
        k.image().display(),
        k.config().display()
    )
}

/// The `bisect` flags for a tree built by [`copy_kernel_build`]: the build
/// command and where it leaves the kernel, its config and its cmdline.
pub fn copy_kernel_build_flags(k: &FetchedKernel) -> Vec<String> {
    let build = copy_kernel_build(k);
    [
        "--build",
        &build,
        "--kernel-image",
        "out/bzImage",
        "--kernel-config",
        "out/.config",
        "--append-file",
        "out/cmdline",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Lays out the cached Debian kernel `k` at `dir` as a kernel tree built
/// in place: `.config`, `arch/x86/boot/bzImage`, the release in
/// `include/config/kernel.release`, each module at its tree path (a
/// symlink to the cached file) with `modules.order` and `modules.builtin`
/// as the build writes them (no `kernel/` prefix). Returns `dir`'s
/// canonical path.
pub fn debian_kernel_as_built_tree(k: &FetchedKernel, dir: &Path) -> PathBuf {
    let put = |rel: &str, from: &Path| {
        let to = dir.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, &to).unwrap_or_else(|e| panic!("cannot copy {} to {}: {e}", from.display(), to.display()));
    };
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("Makefile"), "VERSION = 6\n").unwrap();
    std::fs::write(dir.join("Kconfig"), "mainmenu \"Linux/$(ARCH) $(KERNELVERSION) Kernel Configuration\"\n").unwrap();
    put(".config", &k.config());
    put("arch/x86/boot/bzImage", &k.image());
    std::fs::create_dir_all(dir.join("include/config")).unwrap();
    std::fs::write(dir.join("include/config/kernel.release"), format!("{}\n", k.info.release)).unwrap();
    let modules = k.modules_dir();
    let strip = |l: &str| l.trim().strip_prefix("kernel/").unwrap_or(l.trim()).to_string();
    let order = std::fs::read_to_string(modules.join("modules.order")).unwrap();
    let mut tree_order = String::new();
    for line in order.lines().filter(|l| !l.trim().is_empty()) {
        let rel = strip(line);
        let to = dir.join(&rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(modules.join(line.trim()), &to).unwrap();
        tree_order.push_str(&rel);
        tree_order.push('\n');
    }
    std::fs::write(dir.join("modules.order"), tree_order).unwrap();
    let builtin = std::fs::read_to_string(modules.join("modules.builtin")).unwrap_or_default();
    std::fs::write(dir.join("modules.builtin"), builtin).unwrap();
    std::fs::canonicalize(dir).unwrap()
}
