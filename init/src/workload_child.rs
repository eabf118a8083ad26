//! Runs one workload in a child process and waits for it. The child starts
//! clean (signal mask and dispositions reset, oom_score_adj 0), runs the
//! workload with the loads crate, and sends its result as JSON over a pipe.
//! Meanwhile PID 1 sleeps in one blocking poll on that pipe and the
//! signalfd, bounded by the watchdog, and wakes once a minute to print an
//! `alive` event, so the host does not take a long workload (a contest
//! iteration runs for many minutes) for a silent hang.

use crate::result_channels::console_line;
use crate::signals;
use crate::system_setup;
use crate::test_faults::{self, ChildFaults};
use loads::console_protocol::{self, EVENT_ALIVE};
use loads::runner;
use loads::schema::WorkloadResult;
use loads::suite::{Suite, WorkloadSpec};
use loads::workload::RunContext;
use nix::poll::{poll, PollFd, PollFlags};
use nix::sys::signal::{kill, Signal};
use nix::sys::signalfd::SignalFd;
use nix::sys::wait::WaitStatus;
use nix::unistd::{fork, ForkResult};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// Errors while running a workload child.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// pipe or fork failed.
    #[error("cannot start the child for workload {workload}: {what}")]
    Spawn {
        /// Workload name.
        workload: String,
        /// The call that failed.
        what: &'static str,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The watchdog expired; the child was killed.
    #[error("workload {workload}: watchdog expired after {elapsed_s:.1} s; child killed")]
    Watchdog {
        /// Workload name.
        workload: String,
        /// Seconds the workload ran.
        elapsed_s: f64,
    },
    /// The child ended without a usable result.
    #[error("workload {workload}: child ended without a result ({status})")]
    NoResult {
        /// Workload name.
        workload: String,
        /// How it ended.
        status: String,
    },
    /// The child's result did not parse.
    #[error("workload {workload}: child sent a malformed result")]
    Malformed {
        /// Workload name.
        workload: String,
        /// Parser error.
        #[source]
        source: serde_json::Error,
    },
    /// PID 1 has more than one thread, so forking it would be unsound.
    #[error("workload {workload}: not started: PID 1 has {threads} threads, and forks only single-threaded")]
    Threads {
        /// Workload name.
        workload: String,
        /// Threads /proc/self/status counts.
        threads: u32,
    },
    /// PID 1 was asked to stop (SIGTERM, SIGINT or SIGPWR).
    #[error("workload {workload}: stopped by signal {signal}")]
    Stopped {
        /// Workload name.
        workload: String,
        /// The signal number.
        signal: i32,
    },
}

/// The result pipe's write end in the workload child, for the fork handler
/// below; -1 when there is none.
static RESULT_FD: AtomicI32 = AtomicI32::new(-1);

/// Runs in every process the workload child forks: the result pipe's write
/// end belongs to the workload child alone. A grandchild holding it would
/// keep the pipe open after the workload child died.
extern "C" fn close_result_fd_in_forked_child() {
    let fd = RESULT_FD.swap(-1, Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: closes a descriptor number this process inherited and
        // will never use (async-signal-safe).
        unsafe { libc::close(fd) };
    }
}

/// The child's side: runs the workload and writes its result. Never returns.
fn child_main(suite: &Suite, spec: &WorkloadSpec, ctx: &RunContext, out: OwnedFd, faults: &ChildFaults) -> ! {
    signals::reset_for_child();
    let _ = system_setup::set_oom_score_adj(0);
    RESULT_FD.store(out.as_raw_fd(), Ordering::SeqCst);
    // SAFETY: registers a handler that only closes a descriptor.
    unsafe { libc::pthread_atfork(None, None, Some(close_result_fd_in_forked_child)) };
    if faults.orphans {
        test_faults::leave_orphans();
    }
    if faults.segv {
        test_faults::die_of_segv();
    }
    let result = runner::run_workload(suite, spec, ctx, true);
    let code = match serde_json::to_vec(&result) {
        Ok(json) => {
            let mut f = std::fs::File::from(out);
            if f.write_all(&json).is_ok() {
                0
            } else {
                2
            }
        }
        Err(_) => 3,
    };
    // SAFETY: _exit skips atexit handlers and stdio flushing that belong to
    // PID 1's copy of the process image.
    unsafe { libc::_exit(code) }
}

fn status_text(s: &WaitStatus) -> String {
    match s {
        WaitStatus::Exited(_, code) => format!("exit status {code}"),
        WaitStatus::Signaled(_, sig, core) => {
            format!("killed by {sig}{}", if *core { " (core dumped)" } else { "" })
        }
        other => format!("{other:?}"),
    }
}

/// Runs `spec` in a child and returns its result. `deadline` is the
/// watchdog's; past it the child is killed. `alive_every` spaces the
/// `alive` events. PID 1 stops waiting once the child is reaped: what the
/// child wrote is drained without blocking, so processes it left behind
/// (holding the pipe or not) cannot hold PID 1; they are the caller's to
/// kill ([`crate::quiesce`]). After SIGKILL (watchdog, stop) PID 1 does not
/// wait for the child at all: one stuck in the kernel would never go.
pub fn run(
    suite: &Suite,
    spec: &WorkloadSpec,
    ctx: &RunContext,
    sfd: &SignalFd,
    deadline: Instant,
    alive_every: Duration,
    faults: &ChildFaults,
) -> Result<WorkloadResult, ChildError> {
    let workload = spec.name.clone();
    let spawn = |what, source| ChildError::Spawn { workload: workload.clone(), what, source };
    let (rx, tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
        .map_err(|e| spawn("pipe", e))?;
    // The write end blocks as usual: only the read end is PID 1's.
    let _ = nix::fcntl::fcntl(&tx, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()));
    if let Some(threads) = thread_count().filter(|&n| n > 1) {
        return Err(ChildError::Threads { workload, threads });
    }
    let t0 = Instant::now();
    // SAFETY: PID 1 is single-threaded (checked just above), so the child
    // may run arbitrary code.
    let child = match unsafe { fork() }.map_err(|e| spawn("fork", e))? {
        ForkResult::Child => {
            drop(rx);
            child_main(suite, spec, ctx, tx, faults)
        }
        ForkResult::Parent { child } => child,
    };
    drop(tx);
    let mut rx = std::fs::File::from(rx);
    let mut json = Vec::new();
    let mut eof = false;
    let mut status: Option<WaitStatus> = None;
    let mut next_alive = t0 + alive_every;
    while status.is_none() {
        let now = Instant::now();
        let remaining = deadline.saturating_duration_since(now);
        if remaining.is_zero() {
            // A child that ended as the deadline passed ended in time: its
            // exit may be waiting unreaped.
            if let Some(s) = signals::reap_all().into_iter().find(|s| s.pid() == Some(child)) {
                status = Some(s);
                break;
            }
            let _ = kill(child, Signal::SIGKILL);
            return Err(ChildError::Watchdog { workload, elapsed_s: t0.elapsed().as_secs_f64() });
        }
        if now >= next_alive {
            let text = format!("workload={workload} elapsed_s={}", t0.elapsed().as_secs());
            console_line(&console_protocol::event(EVENT_ALIVE, &text));
            // PID 1 is making progress: the hardware watchdog may wait.
            crate::hw_watchdog::pet();
            next_alive = now + alive_every;
        }
        let wait = remaining.min(next_alive.saturating_duration_since(now));
        let mut fds = vec![PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
        if !eof {
            fds.push(PollFd::new(rx.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, signals::poll_timeout(wait)) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(e) => return Err(spawn("poll", e)),
        }
        let pipe_ready = fds.get(1).and_then(|f| f.revents()).is_some_and(|r| !r.is_empty());
        drop(fds);
        if pipe_ready {
            eof = drain_pipe(&mut rx, &mut json);
        }
        for signo in signals::drain(sfd) {
            if signals::STOP_SIGNALS.contains(&signo) {
                let _ = kill(child, Signal::SIGKILL);
                return Err(ChildError::Stopped { workload, signal: signo });
            }
        }
        for s in signals::reap_all() {
            if s.pid() == Some(child) {
                status = Some(s);
            }
        }
    }
    // The child wrote everything before it exited: what is in the pipe now
    // is all there will be from it.
    drain_pipe(&mut rx, &mut json);
    let status = status.unwrap_or(WaitStatus::StillAlive);
    if json.is_empty() || !matches!(status, WaitStatus::Exited(_, 0)) {
        return Err(ChildError::NoResult { workload, status: status_text(&status) });
    }
    serde_json::from_slice(&json).map_err(|source| ChildError::Malformed { workload, source })
}

/// The threads of this process, from /proc/self/status.
fn thread_count() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok())
}

/// Reads what the non-blocking pipe holds into `json`; true at end of
/// file (or an error, which ends the reading too).
fn drain_pipe(rx: &mut std::fs::File, json: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 65536];
    loop {
        match rx.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => json.extend_from_slice(buf.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_counted_from_proc() {
        let alone = thread_count().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || rx.recv());
        assert_eq!(thread_count(), Some(alone + 1));
        tx.send(()).unwrap();
        t.join().unwrap().unwrap();
    }
}
