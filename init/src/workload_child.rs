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
use loads::console_protocol::{self, EVENT_ALIVE};
use loads::runner;
use loads::schema::WorkloadResult;
use loads::suite::{Suite, WorkloadSpec};
use loads::workload::RunContext;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::sys::signalfd::SignalFd;
use nix::sys::wait::WaitStatus;
use nix::unistd::{fork, ForkResult};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
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
    /// PID 1 was asked to stop (SIGTERM, SIGINT or SIGPWR).
    #[error("workload {workload}: stopped by signal {signal}")]
    Stopped {
        /// Workload name.
        workload: String,
        /// The signal number.
        signal: i32,
    },
}

/// The child's side: runs the workload and writes its result. Never returns.
fn child_main(suite: &Suite, spec: &WorkloadSpec, ctx: &RunContext, out: OwnedFd) -> ! {
    signals::reset_for_child();
    let _ = system_setup::set_oom_score_adj(0);
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
/// `alive` events.
pub fn run(
    suite: &Suite,
    spec: &WorkloadSpec,
    ctx: &RunContext,
    sfd: &SignalFd,
    deadline: Instant,
    alive_every: Duration,
) -> Result<WorkloadResult, ChildError> {
    let workload = spec.name.clone();
    let spawn = |what, source| ChildError::Spawn { workload: workload.clone(), what, source };
    let (rx, tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| spawn("pipe", e))?;
    let t0 = Instant::now();
    // SAFETY: PID 1 is single-threaded, so the child may run arbitrary code.
    let child = match unsafe { fork() }.map_err(|e| spawn("fork", e))? {
        ForkResult::Child => {
            drop(rx);
            child_main(suite, spec, ctx, tx)
        }
        ForkResult::Parent { child } => child,
    };
    drop(tx);
    let mut rx = std::fs::File::from(rx);
    let mut json = Vec::new();
    let mut eof = false;
    let mut status: Option<WaitStatus> = None;
    let mut next_alive = t0 + alive_every;
    while !(eof && status.is_some()) {
        let now = Instant::now();
        let remaining = deadline.saturating_duration_since(now);
        if remaining.is_zero() {
            let _ = kill(child, Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(child, None);
            return Err(ChildError::Watchdog { workload, elapsed_s: t0.elapsed().as_secs_f64() });
        }
        if now >= next_alive {
            let text = format!("workload={workload} elapsed_s={}", t0.elapsed().as_secs());
            console_line(&console_protocol::event(EVENT_ALIVE, &text));
            next_alive = now + alive_every;
        }
        let wait = remaining.min(next_alive.saturating_duration_since(now));
        let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
        let mut fds = vec![PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
        if !eof {
            fds.push(PollFd::new(rx.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(e) => return Err(spawn("poll", e)),
        }
        let pipe_ready = fds.get(1).and_then(|f| f.revents()).is_some_and(|r| !r.is_empty());
        drop(fds);
        if pipe_ready {
            let mut buf = [0u8; 65536];
            match rx.read(&mut buf) {
                Ok(0) => eof = true,
                Ok(n) => json.extend_from_slice(buf.get(..n).unwrap_or_default()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => eof = true,
            }
        }
        for signo in signals::drain(sfd) {
            if [libc::SIGTERM, libc::SIGINT, libc::SIGPWR].contains(&signo) {
                let _ = kill(child, Signal::SIGKILL);
                let _ = nix::sys::wait::waitpid(child, None);
                return Err(ChildError::Stopped { workload, signal: signo });
            }
        }
        for s in signals::reap_all() {
            if s.pid() == Some(child) {
                status = Some(s);
            }
        }
    }
    let status = status.unwrap_or(WaitStatus::StillAlive);
    if json.is_empty() || !matches!(status, WaitStatus::Exited(_, 0)) {
        return Err(ChildError::NoResult { workload, status: status_text(&status) });
    }
    serde_json::from_slice(&json).map_err(|source| ChildError::Malformed { workload, source })
}
