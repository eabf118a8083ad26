//! Running a program of the userland pack: the read-only Debian root the
//! host attaches as a disk and the init mounts (at `/pack` by default). A
//! command runs in a child that unshares its mount namespace, binds the
//! workload's writable directory at [`WORK_MOUNT`] inside the pack, mounts
//! proc, /dev and a tmpfs there, chroots into the pack and execs the
//! program with a fixed environment, its output going to a log file. The
//! caller reaps that child with `wait4`, so the figures cover the program
//! and every process it reaped (make and its compilers). The mounts live
//! only in the child's namespace and vanish with it. Owns the pack's
//! layout as workloads see it, the check that a pack is there, and the
//! child; must not decide what to run (the workloads do), nor mount
//! anything in the caller's namespace.

use crate::reap::{self, Exit, ReapError, Usage};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus};
use nix::unistd::{chdir, chroot, dup2_stderr, dup2_stdin, dup2_stdout, fork, pipe2, setpgid, ForkResult, Pid};
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Where the init mounts the pack.
pub const DEFAULT_PACK: &str = crate::suite::PACK_MOUNT;

/// The empty directory in the pack where a command finds the workload's
/// writable directory.
pub const WORK_MOUNT: &str = "/bootbench/work";

/// The whole environment of a command in the pack: nothing is inherited.
pub const ENVIRONMENT: [&str; 4] = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "HOME=/", "TMPDIR=/tmp"];

/// The pack's make environment, in the pack: `KEY=VALUE` lines (the kernel
/// build's timestamp, user and host, `SOURCE_DATE_EPOCH`) that the
/// preparation of its Linux tree ran with, and that every build in it adds
/// to [`ENVIRONMENT`] so that nothing prepared is made again.
pub const MAKE_ENV_FILE: &str = "/bootbench/make.env";

/// Whether `key` may come from [`MAKE_ENV_FILE`]: only what fixes what
/// kbuild generates, never `PATH` or anything else a build would follow.
pub fn is_pack_make_env(key: &str) -> bool {
    key == "SOURCE_DATE_EPOCH" || key.starts_with("KBUILD_BUILD_")
}

/// The pack's identity, in the pack: one line, the 64 hex digits of the
/// key the host cached it under (a hash of its lockfile and of the builder
/// that made it). Packs with one identity were built from the same pinned
/// packages by the same builder, reproducibly, so a workload that ran the
/// pack's programs records it among its parameters, and results from
/// different packs are never compared. It is what the image says of
/// itself: the host records the image's sha256 beside it.
pub const IDENTITY_FILE: &str = "/bootbench/pack.id";

/// The identity in the pack's [`IDENTITY_FILE`] under `pack`. A pack
/// without one, or with anything but 64 lowercase hex digits there, is
/// refused by name: its results could not be told from another pack's.
pub fn pack_identity(pack: &Path) -> Result<String, PackError> {
    let path = pack.join(IDENTITY_FILE.trim_start_matches('/'));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(PackError::NoIdentity { path }),
        Err(source) => return Err(PackError::Io { what: "read", path, source }),
    };
    let id = text.trim_end_matches('\n');
    if id.len() == 64 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(id.to_string())
    } else {
        Err(PackError::Identity { path, text: text.chars().take(80).collect() })
    }
}

/// The entries of the pack's [`MAKE_ENV_FILE`] under `pack` that
/// [`is_pack_make_env`] allows, as `KEY=VALUE`; none when the file is
/// missing. A line of another shape, or another key, is an error naming it.
pub fn pack_make_env(pack: &Path) -> Result<Vec<String>, PackError> {
    let path = pack.join(MAKE_ENV_FILE.trim_start_matches('/'));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(PackError::Io { what: "read", path, source }),
    };
    let mut env = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match line.split_once('=') {
            Some((k, _)) if is_pack_make_env(k) && !line.contains('\0') => env.push(line.to_string()),
            _ => return Err(PackError::MakeEnv { path, line: line.to_string() }),
        }
    }
    Ok(env)
}

/// The mount points every pack has (besides [`WORK_MOUNT`]).
const MOUNT_POINTS: [&str; 4] = ["bootbench/work", "proc", "dev", "tmp"];

/// How many lines of a failed command's log its error carries.
pub const LOG_TAIL_LINES: usize = 20;

/// A step of setting up the child, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `unshare(CLONE_NEWNS)`.
    Unshare,
    /// Every mount made private, so nothing propagates out.
    Private,
    /// The work directory bound at [`WORK_MOUNT`].
    BindWork,
    /// proc mounted at `/proc`.
    Proc,
    /// The host's /dev bound at `/dev`.
    Dev,
    /// A tmpfs at `/tmp`.
    Tmp,
    /// `chroot` into the pack.
    Chroot,
    /// `chdir` to the command's directory.
    Chdir,
    /// stdin from /dev/null, stdout and stderr to the log.
    Stdio,
    /// `execve` of the program.
    Exec,
}

const STEPS: [Step; 10] = [
    Step::Unshare,
    Step::Private,
    Step::BindWork,
    Step::Proc,
    Step::Dev,
    Step::Tmp,
    Step::Chroot,
    Step::Chdir,
    Step::Stdio,
    Step::Exec,
];

impl Step {
    fn code(self) -> u8 {
        STEPS.iter().position(|s| *s == self).map_or(u8::MAX, |i| i as u8)
    }

    fn from_code(c: u8) -> Option<Step> {
        STEPS.get(usize::from(c)).copied()
    }

    /// What the step does, with its paths, for an error message.
    pub fn describe(self, cmd: &PackCommand) -> String {
        let p = cmd.pack.display();
        match self {
            Step::Unshare => "unshare the mount namespace".into(),
            Step::Private => "make every mount private (MS_REC | MS_PRIVATE on /)".into(),
            Step::BindWork => format!("bind-mount {} on {p}{WORK_MOUNT}", cmd.work.display()),
            Step::Proc => format!("mount proc on {p}/proc"),
            Step::Dev => format!("bind-mount /dev on {p}/dev"),
            Step::Tmp => format!("mount a tmpfs on {p}/tmp"),
            Step::Chroot => format!("chroot into {p}"),
            Step::Chdir => format!("chdir to {} in the pack", cmd.cwd),
            Step::Stdio => format!("redirect output to {}", cmd.log.display()),
            Step::Exec => format!("exec {} in the pack", cmd.argv.first().map_or("", String::as_str)),
        }
    }
}

/// Errors of running a command in the pack.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// The pack is not there, or lacks what the caller needs.
    #[error("no usable userland pack at {pack}: {missing} is missing. {who} runs the pack's programs, so the run needs the pack: boot with `bootbench run --pack` (the host attaches it and the init mounts it at {DEFAULT_PACK}), or give the {who} parameter `pack` where it is mounted")]
    Missing {
        /// The pack's root.
        pack: PathBuf,
        /// The path that is missing.
        missing: PathBuf,
        /// Who needs it (`kernbench`).
        who: &'static str,
    },
    /// A path or argument holds a NUL byte.
    #[error("{0:?} holds a NUL byte and cannot be passed to the kernel")]
    Nul(String),
    /// A file of the caller's (the log, /dev/null).
    #[error("cannot {what} {path}")]
    Io {
        /// The operation.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The pack has no identity file.
    #[error("{path} is missing: the pack was made by a bootbench older than pack builder 4, and its results could not be told from another pack's; let `bootbench run --pack auto` or `bootbench pack` make it again")]
    NoIdentity {
        /// The file.
        path: PathBuf,
    },
    /// The pack's identity file holds something else than an identity.
    #[error(
        "{path} holds {text:?}, not a pack identity (64 lowercase hex digits): rebuild the pack with this bootbench"
    )]
    Identity {
        /// The file.
        path: PathBuf,
        /// Its first characters.
        text: String,
    },
    /// The pack's make environment has a line it may not have.
    #[error("{path}: line '{line}' is not KEY=VALUE with a SOURCE_DATE_EPOCH or KBUILD_BUILD_* key")]
    MakeEnv {
        /// The file.
        path: PathBuf,
        /// The line.
        line: String,
    },
    /// `pipe2` or `fork` failed.
    #[error("cannot start the child for `{command}`: {what} failed")]
    Spawn {
        /// The command.
        command: String,
        /// `pipe2` or `fork`.
        what: &'static str,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// A step of the child's set-up failed.
    #[error("the child for `{command}` could not {step}")]
    Setup {
        /// The command.
        command: String,
        /// [`Step::describe`].
        step: String,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// Reaping the child failed.
    #[error("reaping the child for `{command}`")]
    Reap {
        /// The command.
        command: String,
        /// The wait error.
        #[source]
        source: ReapError,
    },
    /// The command ran and failed.
    #[error("`{command}` failed in the pack ({exit}); the last lines of {log}:\n{tail}")]
    Failed {
        /// The command.
        command: String,
        /// How it ended.
        exit: Exit,
        /// Its log.
        log: PathBuf,
        /// The last [`LOG_TAIL_LINES`] lines of the log.
        tail: String,
    },
}

/// Fails unless `pack` holds every path of `needs` (relative to its root)
/// and the mount points a command needs; `who` is named in the error.
pub fn check(pack: &Path, needs: &[&str], who: &'static str) -> Result<(), PackError> {
    for rel in needs.iter().chain(MOUNT_POINTS.iter()) {
        let path = pack.join(rel);
        // `symlink_metadata`: a pack's /usr/bin/cc is a symlink into
        // itself, which only resolves inside the chroot.
        if std::fs::symlink_metadata(&path).is_err() {
            return Err(PackError::Missing { pack: pack.to_path_buf(), missing: path, who });
        }
    }
    Ok(())
}

/// One command to run in the pack.
#[derive(Debug, Clone)]
pub struct PackCommand {
    /// The pack's root (read-only).
    pub pack: PathBuf,
    /// The writable directory bound at [`WORK_MOUNT`].
    pub work: PathBuf,
    /// The working directory inside the pack.
    pub cwd: String,
    /// The program (an absolute path inside the pack) and its arguments.
    pub argv: Vec<String>,
    /// Where stdout and stderr go (outside the pack, e.g. in `work`).
    pub log: PathBuf,
    /// `KEY=VALUE` entries added to [`ENVIRONMENT`] (the pack's
    /// [`MAKE_ENV_FILE`] for its builds).
    pub extra_env: Vec<String>,
    /// Whether the command gets a process group of its own (make and its
    /// compilers, killed as one group when it fails or is stopped), or
    /// stays in the caller's (a background load's `tar` or `ls`, whose CPU
    /// time counts as the load's group's while it runs; stopping it kills
    /// the command alone, so it must start no processes of its own).
    pub own_group: bool,
}

impl PackCommand {
    /// The command line, for messages.
    pub fn command_line(&self) -> String {
        self.argv.join(" ")
    }
}

/// What a command cost: wall time from fork to reap, and the rusage of
/// the child and every descendant it reaped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ran {
    /// Seconds from fork to reap (CLOCK_MONOTONIC).
    pub elapsed_s: f64,
    /// Seconds from the program's exec (the set-up in the pack done) to
    /// its reaping: the program's own time, without the mounts.
    pub from_exec_s: f64,
    /// `wait4`'s rusage.
    pub usage: Usage,
}

impl Ran {
    /// (user + system) / elapsed, in percent (time(1)'s %P); 0 for no
    /// elapsed time.
    pub fn cpu_percent(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            (self.usage.user_s + self.usage.sys_s) / self.elapsed_s * 100.0
        } else {
            0.0
        }
    }
}

/// Everything the child needs, built before the fork so that the child
/// only makes system calls.
struct Prepared {
    pack: CString,
    work: CString,
    work_mount: CString,
    proc_dir: CString,
    dev_dir: CString,
    tmp_dir: CString,
    cwd: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    own_group: bool,
}

fn cstring(s: &[u8]) -> Result<CString, PackError> {
    CString::new(s).map_err(|_| PackError::Nul(String::from_utf8_lossy(s).into_owned()))
}

fn cpath(p: &Path) -> Result<CString, PackError> {
    cstring(p.as_os_str().as_bytes())
}

impl Prepared {
    fn new(cmd: &PackCommand) -> Result<Prepared, PackError> {
        let inside = |rel: &str| cpath(&cmd.pack.join(rel));
        Ok(Prepared {
            pack: cpath(&cmd.pack)?,
            work: cpath(&cmd.work)?,
            work_mount: inside(WORK_MOUNT.trim_start_matches('/'))?,
            proc_dir: inside("proc")?,
            dev_dir: inside("dev")?,
            tmp_dir: inside("tmp")?,
            cwd: cstring(cmd.cwd.as_bytes())?,
            argv: cmd.argv.iter().map(|a| cstring(a.as_bytes())).collect::<Result<_, _>>()?,
            env: ENVIRONMENT
                .iter()
                .copied()
                .chain(cmd.extra_env.iter().map(String::as_str))
                .map(|e| cstring(e.as_bytes()))
                .collect::<Result<_, _>>()?,
            own_group: cmd.own_group,
        })
    }
}

fn pointers(v: &[CString]) -> Vec<*const libc::c_char> {
    v.iter().map(|c| c.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// The child: set up, exec, or report the failed step and its errno on
/// `report` and `_exit(127)`. Allocates nothing.
fn child(
    p: &Prepared,
    argv: &[*const libc::c_char],
    env: &[*const libc::c_char],
    report: RawFd,
    log: BorrowedFd,
    null: BorrowedFd,
) -> ! {
    let fail = |step: Step, e: Errno| -> ! {
        let mut rec = [0u8; 5];
        rec[0] = step.code();
        rec[1..].copy_from_slice(&(e as i32).to_le_bytes());
        // SAFETY: writes a local buffer to the report pipe, then leaves
        // without running anything of the parent's.
        unsafe {
            libc::write(report, rec.as_ptr().cast(), rec.len());
            libc::_exit(127)
        }
    };
    let none: Option<&CStr> = None;
    // Its own group, so a failure can kill whatever make left.
    if p.own_group {
        let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
    }
    if let Err(e) = unshare(CloneFlags::CLONE_NEWNS) {
        fail(Step::Unshare, e);
    }
    if let Err(e) = mount(none, c"/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none) {
        fail(Step::Private, e);
    }
    if let Err(e) = mount(Some(p.work.as_c_str()), p.work_mount.as_c_str(), none, MsFlags::MS_BIND, none) {
        fail(Step::BindWork, e);
    }
    let nodev = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if let Err(e) = mount(Some(c"proc"), p.proc_dir.as_c_str(), Some(c"proc"), nodev | MsFlags::MS_NOEXEC, none) {
        fail(Step::Proc, e);
    }
    if let Err(e) = mount(Some(c"/dev"), p.dev_dir.as_c_str(), none, MsFlags::MS_BIND | MsFlags::MS_REC, none) {
        fail(Step::Dev, e);
    }
    if let Err(e) = mount(Some(c"tmpfs"), p.tmp_dir.as_c_str(), Some(c"tmpfs"), nodev, Some(c"mode=1777")) {
        fail(Step::Tmp, e);
    }
    if let Err(e) = chroot(p.pack.as_c_str()) {
        fail(Step::Chroot, e);
    }
    if let Err(e) = chdir(p.cwd.as_c_str()) {
        fail(Step::Chdir, e);
    }
    if let Err(e) = dup2_stdin(null).and_then(|()| dup2_stdout(log)).and_then(|()| dup2_stderr(log)) {
        fail(Step::Stdio, e);
    }
    let Some(program) = p.argv.first() else { fail(Step::Exec, Errno::ENOENT) };
    // libc's execve, not nix's: nix builds the pointer arrays in the
    // child, an allocation after fork.
    // SAFETY: both arrays are NUL-terminated and point into `p`, alive
    // until the exec.
    unsafe { libc::execve(program.as_ptr(), argv.as_ptr(), env.as_ptr()) };
    fail(Step::Exec, Errno::last())
}

/// The last `n` lines of the file at `path`, or a note that it is empty
/// or unreadable.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = match std::fs::read(path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => return format!("(cannot read the log: {e})"),
    };
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines.get(lines.len().saturating_sub(n)..).unwrap_or_default().join("\n");
    if tail.trim().is_empty() {
        "(empty log)".to_string()
    } else {
        tail
    }
}

/// The process groups of the commands running now, for [`kill_running`].
/// A group is listed from just after its fork until it has ended and
/// before it is reaped, so its number is never another process's.
static RUNNING: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

/// Set by [`kill_running`]: the process is ending, so a command started
/// after it (the next step of a workload that has not seen the end yet)
/// is killed as soon as it is listed.
static STOPPING: AtomicBool = AtomicBool::new(false);

fn running() -> std::sync::MutexGuard<'static, Vec<Pid>> {
    // A thread that panicked while holding it left a plain list.
    RUNNING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// SIGKILLs the process group of every command of the pack running now
/// (make and every compiler it started), for a process about to end early:
/// `bootbench local` on Ctrl-C, where make, in its own group, would
/// otherwise compile on, keeping the pack's mount and loop device busy.
/// The callers of [`run`] still reap their commands (and report them as
/// killed), and every command started from now on is killed as soon as
/// it has forked. Commands that stay in their caller's process group
/// (`own_group` false: contest's loads) are neither listed nor killed
/// here: they end when their caller's group is killed. Returns how many
/// groups were signalled.
pub fn kill_running() -> usize {
    let groups = running();
    STOPPING.store(true, Ordering::SeqCst);
    groups.iter().filter(|&&g| killpg(g, Signal::SIGKILL).is_ok()).count()
}

/// Runs `cmd` in the pack and reaps it: its wall time from fork to reap
/// and its rusage (the command and every descendant it reaped). A failed
/// set-up step names the step and the errno; a command that fails carries
/// its exit status and the tail of its log. Nothing it started is left
/// running when it fails.
pub fn run(cmd: &PackCommand) -> Result<Ran, PackError> {
    match run_until(cmd, None)? {
        Ended::Ran(r) => Ok(r),
        Ended::Stopped => Err(failure(cmd, Exit::Signal(libc::SIGKILL))),
    }
}

/// How [`run_until`] ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ended {
    /// The command ran to its end, successfully.
    Ran(Ran),
    /// `stop` asked for the end first: the command was killed and reaped.
    Stopped,
}

/// The longest [`run_until`] waits between two questions to `stop`: it
/// asks after 1 ms, then twice as long each time up to this, so a short
/// command is not held up and a long one is stopped within it.
pub const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// [`run`], asking `stop` (when given) at least every [`STOP_POLL`] while
/// the command runs: when it says so, the command is SIGKILLed (with its
/// group when it has one of its own), reaped, and [`Ended::Stopped`]
/// returned, whatever its status. For a background load that must end
/// within moments of being told to. Without `stop` the wait blocks, so a
/// timed command is not woken by the polling.
pub fn run_until(cmd: &PackCommand, stop: Option<&dyn Fn() -> bool>) -> Result<Ended, PackError> {
    let command = cmd.command_line();
    let p = Prepared::new(cmd)?;
    let argv = pointers(&p.argv);
    let env = pointers(&p.env);
    let log =
        File::create(&cmd.log).map_err(|source| PackError::Io { what: "create", path: cmd.log.clone(), source })?;
    let null =
        File::open("/dev/null").map_err(|source| PackError::Io { what: "open", path: "/dev/null".into(), source })?;
    let spawn = |what, source| PackError::Spawn { command: command.clone(), what, source };
    let (report_r, report_w) = pipe2(OFlag::O_CLOEXEC).map_err(|e| spawn("pipe2", e))?;
    let t0 = Instant::now();
    // SAFETY: the child makes system calls on what was prepared above and
    // leaves by exec or _exit.
    let pid = match unsafe { fork() }.map_err(|e| spawn("fork", e))? {
        ForkResult::Child => child(&p, &argv, &env, report_w.as_raw_fd(), log.as_fd(), null.as_fd()),
        ForkResult::Parent { child } => child,
    };
    drop(report_w);
    // The command's group when it has one, else the command alone.
    let kill = || {
        let _ = if cmd.own_group { killpg(pid, Signal::SIGKILL) } else { nix::sys::signal::kill(pid, Signal::SIGKILL) };
    };
    if cmd.own_group {
        let _ = setpgid(pid, pid);
        let mut groups = running();
        if STOPPING.load(Ordering::SeqCst) {
            kill();
        }
        groups.push(pid);
    }
    let mut rec = Vec::with_capacity(5);
    let _ = File::from(report_r).read_to_end(&mut rec);
    // The pipe closes at the exec (or when the child fails before it).
    let t_exec = Instant::now();
    // Ended but not yet reaped: the group's number is still this one's
    // while it leaves the list.
    let mut stopped = false;
    let mut pause = std::time::Duration::from_millis(1);
    let ended = loop {
        if !stopped && stop.is_some_and(|asked| asked()) {
            stopped = true;
            kill();
        }
        let flags = if stopped || stop.is_none() { WaitPidFlag::empty() } else { WaitPidFlag::WNOHANG };
        match waitid_ended(pid, flags) {
            Ok(WaitStatus::StillAlive) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(STOP_POLL);
            }
            other => break other,
        }
    };
    // Not on an error of waitid: then the number may be another's.
    if matches!(ended, Ok(s) if s != WaitStatus::Exited(pid, 0)) {
        // make kills its jobs when it fails; a make killed by a signal
        // cannot, so whatever is left goes with its process group, while
        // the group's number is still this one's.
        kill();
    }
    if cmd.own_group {
        running().retain(|&g| g != pid);
    }
    let reaped = reap::wait_pid(pid);
    let done = Instant::now();
    let reaped = match reaped {
        Ok(r) => r,
        Err(source) => {
            reap::kill_and_reap(&[pid]);
            return Err(PackError::Reap { command, source });
        }
    };
    if let (Some(step), Some(errno)) = (
        rec.first().and_then(|&c| Step::from_code(c)),
        rec.get(1..5).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(i32::from_le_bytes),
    ) {
        return Err(PackError::Setup { command, step: step.describe(cmd), source: Errno::from_raw(errno) });
    }
    if stopped {
        return Ok(Ended::Stopped);
    }
    if !reaped.exit.success() {
        return Err(failure(cmd, reaped.exit));
    }
    let elapsed_s = done.duration_since(t0).as_secs_f64();
    let from_exec_s = done.duration_since(t_exec).as_secs_f64();
    Ok(Ended::Ran(Ran { elapsed_s, from_exec_s, usage: reaped.usage }))
}

/// Waits until `pid` has ended without reaping it (`WNOWAIT`; with
/// `WNOHANG` in `flags`, `StillAlive` when it has not): how it ended.
fn waitid_ended(pid: Pid, flags: WaitPidFlag) -> nix::Result<WaitStatus> {
    use nix::sys::wait::{waitid, Id};
    loop {
        match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | flags) {
            Err(Errno::EINTR) => {}
            other => return other,
        }
    }
}

/// The error of `cmd` having ended with `exit`: the status and the tail
/// of its log.
pub fn failure(cmd: &PackCommand, exit: Exit) -> PackError {
    PackError::Failed {
        command: cmd.command_line(),
        exit,
        log: cmd.log.clone(),
        tail: log_tail(&cmd.log, LOG_TAIL_LINES),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_pack_is_named_with_the_option_that_gives_one() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = tmp.path().join("pack");
        let e = check(&pack, &["usr/bin/make"], "kernbench").unwrap_err().to_string();
        assert!(e.contains(&format!("{}/usr/bin/make is missing", pack.display())), "{e}");
        assert!(e.contains("bootbench run --pack") && e.contains("kernbench"), "{e}");
        for d in ["usr/bin", "bootbench/work", "proc", "dev"] {
            std::fs::create_dir_all(pack.join(d)).unwrap();
        }
        std::fs::write(pack.join("usr/bin/make"), "").unwrap();
        let e = check(&pack, &["usr/bin/make"], "kernbench").unwrap_err().to_string();
        assert!(e.contains("/tmp is missing"), "the mount points are checked too: {e}");
        std::fs::create_dir(pack.join("tmp")).unwrap();
        check(&pack, &["usr/bin/make"], "kernbench").unwrap();
    }

    #[test]
    fn a_pack_without_a_well_formed_identity_is_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("bootbench/pack.id");
        let e = pack_identity(tmp.path()).unwrap_err().to_string();
        assert!(e.contains(&format!("{} is missing", file.display())) && e.contains("builder 4"), "{e}");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let id = "0123456789abcdef".repeat(4);
        std::fs::write(&file, format!("{id}\n")).unwrap();
        assert_eq!(pack_identity(tmp.path()).unwrap(), id);
        for bad in [&id[1..], &id.to_uppercase(), &format!("{id}0"), "", &format!("{}g", &id[1..])] {
            std::fs::write(&file, format!("{bad}\n")).unwrap();
            let e = pack_identity(tmp.path()).unwrap_err().to_string();
            assert!(e.contains("not a pack identity") && e.contains("pack.id"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_packs_make_env_gives_only_what_fixes_kbuilds_output() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(pack_make_env(tmp.path()).unwrap().is_empty(), "no file, nothing added");
        let file = tmp.path().join("bootbench/make.env");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "KBUILD_BUILD_USER=bootbench\n\nSOURCE_DATE_EPOCH=1796190798\n").unwrap();
        assert_eq!(pack_make_env(tmp.path()).unwrap(), ["KBUILD_BUILD_USER=bootbench", "SOURCE_DATE_EPOCH=1796190798"]);
        for bad in ["PATH=/evil", "KBUILD_BUILD_USER", "LD_PRELOAD=/x.so"] {
            std::fs::write(&file, format!("KBUILD_BUILD_HOST=bootbench\n{bad}\n")).unwrap();
            let e = pack_make_env(tmp.path()).unwrap_err().to_string();
            assert!(e.contains(&format!("'{bad}'")) && e.contains("make.env"), "{e}");
        }
    }

    #[test]
    fn the_log_tail_is_the_last_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("log");
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&log, text).unwrap();
        let tail = log_tail(&log, LOG_TAIL_LINES);
        assert_eq!(tail.lines().count(), 20);
        assert!(tail.starts_with("line 11\n") && tail.ends_with("line 30"), "{tail}");
        std::fs::write(&log, "").unwrap();
        assert_eq!(log_tail(&log, 5), "(empty log)");
        assert!(log_tail(&tmp.path().join("nope"), 5).starts_with("(cannot read the log"));
    }

    #[test]
    fn a_failed_command_carries_its_exit_status_and_the_tail_of_its_log() {
        let tmp = tempfile::tempdir().unwrap();
        let cmd = PackCommand {
            pack: "/pack".into(),
            work: tmp.path().into(),
            cwd: "/".into(),
            argv: vec!["/usr/bin/make".into(), "-j8".into(), "vmlinux".into()],
            log: tmp.path().join("build.log"),
            extra_env: Vec::new(),
            own_group: true,
        };
        let text: String = (1..=30).map(|i| format!("make line {i}\n")).collect();
        std::fs::write(&cmd.log, text).unwrap();
        let e = failure(&cmd, Exit::Code(2)).to_string();
        assert!(e.starts_with("`/usr/bin/make -j8 vmlinux` failed in the pack (exit status 2)"), "{e}");
        assert!(e.contains(&format!("the last lines of {}:", cmd.log.display())), "{e}");
        assert!(e.contains("make line 11\n") && e.ends_with("make line 30"), "{e}");
        assert!(!e.contains("make line 10\n"), "20 lines: {e}");
        let e = failure(&cmd, Exit::Signal(9)).to_string();
        assert!(e.contains("(killed by SIGKILL)"), "{e}");
    }

    #[test]
    fn steps_round_trip_through_their_codes() {
        for s in STEPS {
            assert_eq!(Step::from_code(s.code()), Some(s));
        }
        assert_eq!(Step::from_code(200), None);
    }
}
