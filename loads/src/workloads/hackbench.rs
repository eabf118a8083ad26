//! `hackbench`: the scheduler and IPC stress of Rusty Russell's hackbench
//! (as in rt-tests and `perf bench sched messaging`). Groups of `fds`
//! senders and `fds` receivers; each sender writes `loops` messages of
//! `datasize` bytes to every receiver of its group, over pipes or AF_UNIX
//! stream socketpairs, with the tasks as processes (fork) or threads. All
//! tasks first report ready and wait on a shared wake pipe; the time runs
//! from the wake-up until the last task is reaped. hackbench's defaults:
//! 10 groups, 20 fds, 100 loops, 100 bytes.
//!
//! Each receiver reads its `fds × loops` messages as hackbench does: every
//! read asks for what is left of the current message, so one read never
//! takes two messages (a 100-byte message is one read, however many are
//! queued), and after the last one the receiver exits without waiting for
//! end-of-file.
//! Unlike hackbench, end-of-file before the last message is an error
//! (hackbench would spin). An excess at one receiver cannot be seen without
//! a read hackbench does not make, but it would be a shortfall at another
//! (senders write all their bytes or fail), so that check costs no system
//! call. Owns the task topology and its timing; must not run anything
//! between wake-up and reaping.

use crate::fd_limit::FdLimitError;
use crate::reap::{self, Usage};
use crate::schema::{Iteration, Metric};
use crate::workload::{params_map, RunContext, Workload, WorkloadError};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::unistd::{fork, ForkResult, Pid};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Instant;

/// Transport and task kind of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Pipes between processes.
    PipeProcess,
    /// Pipes between threads.
    PipeThread,
    /// AF_UNIX stream socketpairs between processes (hackbench's default).
    SocketProcess,
    /// AF_UNIX stream socketpairs between threads.
    SocketThread,
}

impl Mode {
    /// Metric-name suffix, e.g. `pipe_process`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::PipeProcess => "pipe_process",
            Mode::PipeThread => "pipe_thread",
            Mode::SocketProcess => "socket_process",
            Mode::SocketThread => "socket_thread",
        }
    }
    fn pipes(self) -> bool {
        matches!(self, Mode::PipeProcess | Mode::PipeThread)
    }
    fn threads(self) -> bool {
        matches!(self, Mode::PipeThread | Mode::SocketThread)
    }
}

/// Parameters of `hackbench`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HackbenchParams {
    /// Groups of senders and receivers.
    pub groups: u32,
    /// Senders (and receivers) per group.
    pub fds: u32,
    /// Messages each sender sends to each receiver.
    pub loops: u32,
    /// Bytes per message.
    pub datasize: u32,
    /// Runs per iteration, in this order.
    pub modes: Vec<Mode>,
}

impl Default for HackbenchParams {
    fn default() -> Self {
        HackbenchParams {
            groups: 10,
            fds: 20,
            loops: 100,
            datasize: 100,
            modes: vec![Mode::PipeProcess, Mode::PipeThread, Mode::SocketProcess, Mode::SocketThread],
        }
    }
}

/// Errors of hackbench.
#[derive(Debug, thiserror::Error)]
pub enum HackbenchError {
    /// A system call while setting up failed.
    #[error("{mode}: {what} failed")]
    Setup {
        /// The mode.
        mode: &'static str,
        /// The call.
        what: &'static str,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The file-descriptor limit is too low for the thread modes.
    #[error("{mode} needs {need} file descriptors but RLIMIT_NOFILE allows {limit}; lower groups or fds")]
    FdLimit {
        /// The mode.
        mode: &'static str,
        /// Descriptors needed.
        need: u64,
        /// The hard limit.
        limit: u64,
    },
    /// A task failed or a receiver got the wrong amount of data.
    #[error("{mode}: {what}")]
    Task {
        /// The mode.
        mode: &'static str,
        /// What went wrong.
        what: String,
    },
    /// Reaping failed.
    #[error("reaping hackbench tasks")]
    Reap(#[from] reap::ReapError),
}

/// Exit codes of process-mode tasks.
const EXIT_SHORT: i32 = 3;
const EXIT_IO: i32 = 5;
const EXIT_READY: i32 = 6;

/// Figures of one mode's run.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeStats {
    /// Seconds from wake-up to the last task reaped.
    pub elapsed_s: f64,
    /// Tasks (senders + receivers).
    pub tasks: u64,
    /// Messages delivered and checked.
    pub messages: u64,
    /// CPU time, faults and context switches of the tasks.
    pub usage: Usage,
}

fn fdpair(mode: Mode) -> Result<(OwnedFd, OwnedFd), HackbenchError> {
    if mode.pipes() {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|source| HackbenchError::Setup {
            mode: mode.name(),
            what: "pipe",
            source,
        })
    } else {
        socketpair(AddressFamily::Unix, SockType::Stream, None, SockFlag::SOCK_CLOEXEC)
            .map_err(|source| HackbenchError::Setup { mode: mode.name(), what: "socketpair", source })
    }
}

/// Tells the parent this task is ready, then blocks until the wake-up.
fn ready(ready_tx: RawFd, wake_rx: RawFd) -> bool {
    let b = [b'R'];
    // SAFETY: write/poll on fds the caller keeps open.
    unsafe {
        if libc::write(ready_tx, b.as_ptr().cast(), 1) != 1 {
            return false;
        }
        let mut p = libc::pollfd { fd: wake_rx, events: libc::POLLIN, revents: 0 };
        loop {
            let r = libc::poll(&mut p, 1, -1);
            if r == 1 {
                return true;
            }
            if r < 0 && nix::Error::last() == nix::Error::EINTR {
                continue;
            }
            return false;
        }
    }
}

/// Sends `loops` messages of `buf` to each fd in turn (hackbench's
/// order); false on a write error.
fn send_all(out: &[RawFd], loops: u32, buf: &[u8]) -> bool {
    for _ in 0..loops {
        for &fd in out {
            let mut done = 0;
            while done < buf.len() {
                let rest = buf.get(done..).unwrap_or_default();
                // SAFETY: writing from a live buffer to an fd the caller owns.
                let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
                if n < 0 {
                    if nix::Error::last() == nix::Error::EINTR {
                        continue;
                    }
                    return false;
                }
                done += n as usize;
            }
        }
    }
    true
}

/// Reads `messages` messages of `msg.len()` bytes, as hackbench's
/// receiver does: each read asks for what is left of the current message,
/// so one read never takes more than one message, and the receiver
/// returns after its last message without waiting for end-of-file.
/// Returns 0, or the EXIT_* code of what went wrong: end-of-file before
/// the last message is `EXIT_SHORT`.
fn receive_all(fd: RawFd, messages: u64, msg: &mut [u8]) -> i32 {
    for _ in 0..messages {
        let mut done = 0;
        while done < msg.len() {
            let rest = msg.get_mut(done..).unwrap_or_default();
            // SAFETY: reading into a live buffer from an fd the caller owns.
            let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
            if n < 0 {
                if nix::Error::last() == nix::Error::EINTR {
                    continue;
                }
                return EXIT_IO;
            }
            if n == 0 {
                return EXIT_SHORT;
            }
            done += n as usize;
        }
    }
    0
}

fn describe_exit(code: i32) -> &'static str {
    match code {
        EXIT_SHORT => "receiver got fewer messages than sent (end-of-file early)",
        EXIT_IO => "task hit an I/O error",
        EXIT_READY => "task could not report ready",
        _ => "task failed",
    }
}

/// Ignores SIGPIPE while alive: a failed receiver must turn its senders'
/// writes into EPIPE errors, not kill the workload (the init starts
/// workloads with default dispositions).
struct IgnoreSigpipe(Option<SigAction>);

impl IgnoreSigpipe {
    fn new() -> Self {
        let ign = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
        // SAFETY: installing SIG_IGN has no handler code to be unsafe in.
        IgnoreSigpipe(unsafe { sigaction(Signal::SIGPIPE, &ign) }.ok())
    }
}

impl Drop for IgnoreSigpipe {
    fn drop(&mut self) {
        if let Some(old) = self.0.take() {
            // SAFETY: restoring the disposition that was there before.
            let _ = unsafe { sigaction(Signal::SIGPIPE, &old) };
        }
    }
}

fn wait_ready(mode: Mode, ready_rx: &OwnedFd, count: u64) -> Result<(), HackbenchError> {
    let mut buf = [0u8; 256];
    let mut got = 0u64;
    while got < count {
        let want = ((count - got) as usize).min(buf.len());
        match nix::unistd::read(ready_rx, buf.get_mut(..want).unwrap_or_default()) {
            Ok(0) => {
                return Err(HackbenchError::Task {
                    mode: mode.name(),
                    what: format!("only {got} of {count} tasks reported ready"),
                })
            }
            Ok(n) => got += n as u64,
            Err(nix::Error::EINTR) => {}
            Err(source) => return Err(HackbenchError::Setup { mode: mode.name(), what: "read ready", source }),
        }
    }
    Ok(())
}

fn wake(mode: Mode, wake_tx: &OwnedFd) -> Result<(), HackbenchError> {
    nix::unistd::write(wake_tx, b"G").map(|_| ()).map_err(|source| HackbenchError::Setup {
        mode: mode.name(),
        what: "write wake-up",
        source,
    })
}

/// Forks a task that closes `close`, runs `body` and `_exit`s with its
/// code.
fn spawn_process(close: &[RawFd], body: impl FnOnce() -> i32) -> Result<Pid, nix::Error> {
    // SAFETY: the child only closes fds, runs `body` (system calls on
    // buffers allocated before the fork) and `_exit`s.
    match unsafe { fork() }? {
        ForkResult::Child => {
            for &fd in close {
                unsafe { libc::close(fd) };
            }
            let code = body();
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => Ok(child),
    }
}

fn run_processes(p: &HackbenchParams, mode: Mode) -> Result<ModeStats, HackbenchError> {
    let setup = |what, source| HackbenchError::Setup { mode: mode.name(), what, source };
    let (ready_rx, ready_tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| setup("pipe", e))?;
    let (wake_rx, wake_tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| setup("pipe", e))?;
    let (rtx, wrx) = (ready_tx.as_raw_fd(), wake_rx.as_raw_fd());
    let shared = [ready_rx.as_raw_fd(), wake_tx.as_raw_fd()];
    let per_receiver = u64::from(p.fds) * u64::from(p.loops);
    let msg = vec![b'S'; p.datasize as usize];
    let mut rbuf = vec![0u8; p.datasize as usize];
    let mut kids: Vec<Pid> = Vec::with_capacity((p.groups * p.fds * 2) as usize);
    let abort = |kids: &[Pid], e: HackbenchError| {
        reap::kill_and_reap(kids);
        Err(e)
    };
    for _ in 0..p.groups {
        let mut txs: Vec<OwnedFd> = Vec::with_capacity(p.fds as usize);
        for _ in 0..p.fds {
            let (rx, tx) = match fdpair(mode) {
                Ok(x) => x,
                Err(e) => return abort(&kids, e),
            };
            // The receiver keeps only its read end and the ready/wake fds.
            let mut close: Vec<RawFd> = txs.iter().map(AsRawFd::as_raw_fd).collect();
            close.push(tx.as_raw_fd());
            close.extend(shared);
            let rxfd = rx.as_raw_fd();
            let buf = &mut rbuf;
            let r = spawn_process(&close, || {
                if !ready(rtx, wrx) {
                    return EXIT_READY;
                }
                receive_all(rxfd, per_receiver, buf)
            });
            match r {
                Ok(pid) => kids.push(pid),
                Err(e) => return abort(&kids, setup("fork", e)),
            }
            drop(rx);
            txs.push(tx);
        }
        let out: Vec<RawFd> = txs.iter().map(AsRawFd::as_raw_fd).collect();
        for _ in 0..p.fds {
            let r = spawn_process(&shared, || {
                if !ready(rtx, wrx) {
                    return EXIT_READY;
                }
                if send_all(&out, p.loops, &msg) {
                    0
                } else {
                    EXIT_IO
                }
            });
            match r {
                Ok(pid) => kids.push(pid),
                Err(e) => return abort(&kids, setup("fork", e)),
            }
        }
        // Only the senders hold write ends now, so a receiver whose
        // senders failed sees end-of-file instead of waiting forever.
        drop(txs);
    }
    drop(ready_tx);
    drop(wake_rx);
    if let Err(e) = wait_ready(mode, &ready_rx, kids.len() as u64) {
        return abort(&kids, e);
    }
    let t0 = Instant::now();
    if let Err(e) = wake(mode, &wake_tx) {
        return abort(&kids, e);
    }
    let mut usage = Usage::default();
    let mut failure: Option<String> = None;
    for (i, &pid) in kids.iter().enumerate() {
        match reap::wait_pid(pid) {
            Ok(r) => {
                usage = usage.plus(&r.usage);
                if !r.exit.success() && failure.is_none() {
                    failure = Some(match r.exit {
                        reap::Exit::Code(c) => format!("task {i}: {} (exit status {c})", describe_exit(c)),
                        other => format!("task {i}: {other}"),
                    });
                }
            }
            Err(e) => return abort(kids.get(i..).unwrap_or_default(), e.into()),
        }
    }
    let elapsed_s = t0.elapsed().as_secs_f64();
    if let Some(what) = failure {
        return Err(HackbenchError::Task { mode: mode.name(), what });
    }
    Ok(ModeStats {
        elapsed_s,
        tasks: kids.len() as u64,
        messages: u64::from(p.groups) * u64::from(p.fds) * u64::from(p.fds) * u64::from(p.loops),
        usage,
    })
}

/// Makes sure this process may hold `need` descriptors.
fn ensure_fds(mode: Mode, need: u64) -> Result<(), HackbenchError> {
    crate::fd_limit::ensure(need).map_err(|e| match e {
        FdLimitError::TooLow { need, limit } => HackbenchError::FdLimit { mode: mode.name(), need, limit },
        FdLimitError::Call { what, source } => HackbenchError::Setup { mode: mode.name(), what, source },
    })
}

fn run_threads(p: &HackbenchParams, mode: Mode) -> Result<ModeStats, HackbenchError> {
    let setup = |what, source| HackbenchError::Setup { mode: mode.name(), what, source };
    // Every pair lives in this process, plus ready/wake and some slack
    // for what the process already has open.
    ensure_fds(mode, u64::from(p.groups) * u64::from(p.fds) * 2 + 64)?;
    let (ready_rx, ready_tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| setup("pipe", e))?;
    let (wake_rx, wake_tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| setup("pipe", e))?;
    let gate = Arc::new((ready_tx, wake_rx));
    let per_receiver = u64::from(p.fds) * u64::from(p.loops);
    let before = self_usage();
    let mut receivers = Vec::new();
    let mut senders = Vec::new();
    let mut spawn_error = None;
    // hackbench gives threads PTHREAD_STACK_MIN; Rust code wants a
    // little more.
    let builder = || std::thread::Builder::new().stack_size(128 * 1024);
    'groups: for _ in 0..p.groups {
        let mut txs = Vec::with_capacity(p.fds as usize);
        for _ in 0..p.fds {
            let (rx, tx) = match fdpair(mode) {
                Ok(x) => x,
                Err(e) => {
                    spawn_error = Some(e);
                    break 'groups;
                }
            };
            txs.push(tx);
            let g = Arc::clone(&gate);
            let dsize = p.datasize as usize;
            let r = builder().spawn(move || {
                let mut buf = vec![0u8; dsize];
                if !ready(g.0.as_raw_fd(), g.1.as_raw_fd()) {
                    return EXIT_READY;
                }
                drop(g);
                receive_all(rx.as_raw_fd(), per_receiver, &mut buf)
            });
            match r {
                Ok(h) => receivers.push(h),
                Err(e) => {
                    spawn_error = Some(setup("thread spawn", nix::Error::from_raw(e.raw_os_error().unwrap_or(0))));
                    break 'groups;
                }
            }
        }
        let txs = Arc::new(txs);
        for _ in 0..p.fds {
            let (g, out) = (Arc::clone(&gate), Arc::clone(&txs));
            let (loops, msg) = (p.loops, vec![b'S'; p.datasize as usize]);
            let r = builder().spawn(move || {
                if !ready(g.0.as_raw_fd(), g.1.as_raw_fd()) {
                    return EXIT_READY;
                }
                drop(g);
                let fds: Vec<RawFd> = out.iter().map(AsRawFd::as_raw_fd).collect();
                // Dropping `out` when done closes the group's write ends
                // once the last sender finishes.
                if send_all(&fds, loops, &msg) {
                    0
                } else {
                    EXIT_IO
                }
            });
            match r {
                Ok(h) => senders.push(h),
                Err(e) => {
                    spawn_error = Some(setup("thread spawn", nix::Error::from_raw(e.raw_os_error().unwrap_or(0))));
                    break 'groups;
                }
            }
        }
    }
    let tasks = (receivers.len() + senders.len()) as u64;
    let started = match &spawn_error {
        Some(_) => Ok(()),
        None => wait_ready(mode, &ready_rx, tasks),
    };
    // Wake everyone even after an error: the threads only end once they
    // ran (a half-built group ends through end-of-file or EPIPE).
    let t0 = Instant::now();
    let woke = wake(mode, &wake_tx);
    drop(gate);
    let mut failure = None;
    for (i, h) in senders.into_iter().chain(receivers).enumerate() {
        match h.join() {
            Ok(0) => {}
            Ok(c) => {
                failure.get_or_insert_with(|| format!("thread {i}: {} (code {c})", describe_exit(c)));
            }
            Err(_) => {
                failure.get_or_insert_with(|| format!("thread {i} panicked"));
            }
        }
    }
    let elapsed_s = t0.elapsed().as_secs_f64();
    if let Some(e) = spawn_error {
        return Err(e);
    }
    started?;
    woke?;
    if let Some(what) = failure {
        return Err(HackbenchError::Task { mode: mode.name(), what });
    }
    Ok(ModeStats {
        elapsed_s,
        tasks,
        messages: u64::from(p.groups) * u64::from(p.fds) * u64::from(p.fds) * u64::from(p.loops),
        usage: self_usage().since(&before),
    })
}

fn self_usage() -> Usage {
    // SAFETY: zeroed rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer refers to a live local.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
        Usage::from_rusage(&ru)
    } else {
        Usage::default()
    }
}

/// Runs one mode with `p`.
pub fn run_mode(p: &HackbenchParams, mode: Mode) -> Result<ModeStats, HackbenchError> {
    let _sigpipe = IgnoreSigpipe::new();
    if mode.threads() {
        run_threads(p, mode)
    } else {
        run_processes(p, mode)
    }
}

/// The prepared workload.
pub struct Hackbench {
    params: HackbenchParams,
}

impl Hackbench {
    /// Checks the parameters.
    pub fn new(params: HackbenchParams, _ctx: &RunContext) -> Result<Self, WorkloadError> {
        let bad = |why: String| Err(WorkloadError::Invalid { workload: "hackbench", why });
        if !(1..=1000).contains(&params.groups) || !(1..=1000).contains(&params.fds) {
            return bad(format!("groups and fds must be 1..=1000, got {} and {}", params.groups, params.fds));
        }
        if params.loops == 0 || !(1..=65536).contains(&params.datasize) {
            return bad(format!(
                "loops must be at least 1 and datasize 1..=65536, got {} and {}",
                params.loops, params.datasize
            ));
        }
        if params.modes.is_empty() {
            return bad("modes is empty; give some of pipe_process, pipe_thread, socket_process, socket_thread".into());
        }
        let mut m = params.modes.clone();
        m.sort();
        m.dedup();
        if m.len() != params.modes.len() {
            return bad(format!("modes lists a mode twice: {:?}", params.modes));
        }
        Ok(Hackbench { params })
    }
}

impl Workload for Hackbench {
    fn name(&self) -> &'static str {
        "hackbench"
    }

    fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        params_map(&self.params)
    }

    fn run_iteration(&mut self) -> Result<Iteration, WorkloadError> {
        let mut it = Iteration::default();
        for &mode in &self.params.modes {
            let s = run_mode(&self.params, mode)
                .map_err(|e| WorkloadError::Failed { workload: "hackbench", source: Box::new(e) })?;
            let m = mode.name();
            it.metrics.insert(format!("time_{m}"), Metric::lower(s.elapsed_s, "s"));
            let d = &mut it.detail;
            d.insert(format!("user_{m}"), s.usage.user_s.into());
            d.insert(format!("system_{m}"), s.usage.sys_s.into());
            d.insert(format!("voluntary_switches_{m}"), s.usage.voluntary_switches.into());
            d.insert(format!("involuntary_switches_{m}"), s.usage.involuntary_switches.into());
            d.insert("tasks".into(), s.tasks.into());
            d.insert("messages".into(), s.messages.into());
        }
        Ok(it)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's count of read and write system calls in the
    /// `/proc/.../io` file at `path` (`syscr`, `syscw`), taken with one
    /// read(2).
    fn io_calls(path: &str) -> (u64, u64) {
        use std::io::Read;
        let mut text = [0u8; 4096];
        let n = std::fs::File::open(path).unwrap().read(&mut text).unwrap();
        let text = std::str::from_utf8(&text[..n]).unwrap();
        let field = |key: &str| -> u64 {
            let line = text.lines().find_map(|l| l.strip_prefix(key));
            line.unwrap_or_else(|| panic!("{path} has no {key} (CONFIG_TASK_IO_ACCOUNTING)")).trim().parse().unwrap()
        };
        (field("syscr:"), field("syscw:"))
    }

    /// The read system calls this thread makes in `f`, by the kernel's
    /// count (less the one read that takes each count).
    fn reads_in(f: impl FnOnce()) -> u64 {
        let before = io_calls("/proc/thread-self/io").0;
        f();
        io_calls("/proc/thread-self/io").0 - before - 1
    }

    #[test]
    fn a_receiver_reads_one_message_per_read_and_stops_after_the_last() {
        assert_eq!(reads_in(|| {}), 0, "the read counter's own reads are not taken off right");
        for mode in [Mode::PipeProcess, Mode::SocketProcess] {
            let (rx, tx) = fdpair(mode).unwrap();
            // All five messages are queued before the first read, and the
            // write end stays open: waiting for end-of-file would be
            // EAGAIN on the non-blocking read end (EXIT_IO), not a hang.
            assert!(send_all(&[tx.as_raw_fd()], 5, &[b'S'; 100]));
            nix::fcntl::fcntl(&rx, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK)).unwrap();
            let mut msg = [0u8; 100];
            let mut code = -1;
            let reads = reads_in(|| code = receive_all(rx.as_raw_fd(), 5, &mut msg));
            assert_eq!((code, reads), (0, 5), "{mode:?}: exit code and read(2) calls for 5 queued messages");
        }
    }

    #[test]
    fn a_read_never_takes_more_than_the_rest_of_its_message() {
        for mode in [Mode::PipeProcess, Mode::SocketProcess] {
            let (rx, tx) = fdpair(mode).unwrap();
            // Two and a half messages of 4 bytes, the first split over two
            // writes.
            assert!(send_all(&[tx.as_raw_fd()], 1, b"ab"));
            assert!(send_all(&[tx.as_raw_fd()], 1, b"cdefghij"));
            let mut msg = [0u8; 4];
            assert_eq!(receive_all(rx.as_raw_fd(), 2, &mut msg), 0, "{mode:?}");
            assert_eq!(&msg, b"efgh", "{mode:?}");
            // What follows the receiver's messages stays queued.
            let mut rest = [0u8; 16];
            assert_eq!(nix::unistd::read(&rx, &mut rest), Ok(2), "{mode:?}");
            assert_eq!(&rest[..2], b"ij", "{mode:?}");
        }
    }

    #[test]
    fn a_receiver_reports_end_of_file_before_its_last_message() {
        for (sent, mode) in [(&b"abcd"[..], Mode::PipeThread), (&b"abcdef"[..], Mode::SocketThread)] {
            let (rx, tx) = fdpair(mode).unwrap();
            assert!(send_all(&[tx.as_raw_fd()], 1, sent));
            drop(tx);
            assert_eq!(receive_all(rx.as_raw_fd(), 2, &mut [0u8; 4]), EXIT_SHORT, "{mode:?}");
        }
        let (rx, tx) = fdpair(Mode::PipeProcess).unwrap();
        assert!(send_all(&[tx.as_raw_fd()], 3, b"abcd"));
        drop(tx);
        assert_eq!(receive_all(rx.as_raw_fd(), 3, &mut [0u8; 4]), 0);
    }

    /// Runs `mode` in a child process and returns its exit status and
    /// the kernel's count of read and write system calls made by it, its
    /// threads and the children it reaped, taken while it is a zombie.
    fn run_mode_in_child(p: &HackbenchParams, mode: Mode) -> (i32, u64, u64) {
        let (tasks, messages) = (2 * p.groups * p.fds, p.groups * p.fds * p.fds * p.loops);
        // SAFETY: the child only runs the workload (whose process modes
        // fork the test process the same way; glibc's allocator is
        // fork-safe) and `_exit`s.
        match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                let code = match run_mode(p, mode) {
                    Ok(s) if s.tasks == u64::from(tasks) && s.messages == u64::from(messages) => 0,
                    Ok(_) => 2,
                    Err(_) => 1,
                };
                unsafe { libc::_exit(code) }
            }
            ForkResult::Parent { child } => {
                // SAFETY: zeroed siginfo is valid; waitid fills it. WNOWAIT
                // leaves the child a zombie, whose io file still reads.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                let flags = libc::WEXITED | libc::WNOWAIT;
                assert_eq!(unsafe { libc::waitid(libc::P_PID, child.as_raw() as libc::id_t, &mut info, flags) }, 0);
                let (reads, writes) = io_calls(&format!("/proc/{child}/io"));
                let status = match reap::wait_pid(child).unwrap().exit {
                    reap::Exit::Code(c) => c,
                    other => panic!("{mode:?}: {other}"),
                };
                (status, reads, writes)
            }
        }
    }

    #[test]
    fn every_mode_makes_one_read_and_one_write_per_message_by_the_kernel_s_count() {
        let p = HackbenchParams { groups: 2, fds: 5, loops: 50, datasize: 100, modes: vec![] };
        let (tasks, messages) = (20, 2 * 5 * 5 * 50);
        for mode in HackbenchParams::default().modes {
            let (status, reads, writes) = run_mode_in_child(&p, mode);
            assert_eq!(status, 0, "{mode:?}: the run failed or miscounted tasks or messages");
            // Each 100-byte write is whole (below PIPE_BUF, one socket
            // buffer), so every message is one read and one write. Besides
            // those: each task writes `ready` once, the parent writes the
            // wake-up once and reads the ready bytes in 1 to `tasks` reads.
            // A few more reads are allowed: on a loaded host one in about a
            // dozen runs counted one read above that (the bug this guards,
            // up to 40 messages per read, is far below `messages`).
            assert_eq!(writes, messages + tasks + 1, "{mode:?}: write(2) calls");
            assert!(
                reads > messages && reads <= messages + tasks + 4,
                "{mode:?}: {reads} read(2) calls for {messages} messages; hackbench reads each message by itself"
            );
        }
    }

    #[test]
    fn defaults_are_hackbench_s_and_bad_params_are_refused() {
        let d = HackbenchParams::default();
        assert_eq!((d.groups, d.fds, d.loops, d.datasize), (10, 20, 100, 100));
        let ctx = RunContext::new(1, std::env::temp_dir());
        for (p, want) in [
            (HackbenchParams { groups: 0, ..Default::default() }, "groups"),
            (HackbenchParams { datasize: 0, ..Default::default() }, "datasize"),
            (HackbenchParams { modes: vec![], ..Default::default() }, "modes is empty"),
            (HackbenchParams { modes: vec![Mode::PipeThread, Mode::PipeThread], ..Default::default() }, "twice"),
        ] {
            let e = Hackbench::new(p, &ctx).err().unwrap().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
