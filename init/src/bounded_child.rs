//! Runs a step that may block in the kernel (a module load, `sync`,
//! `umount`, a network upload) in a forked child with a deadline. A
//! blocking syscall cannot be bounded from inside PID 1, but PID 1 can stop
//! waiting for a child: when the deadline passes, the child is sent SIGKILL
//! and PID 1 goes on without it, so a hang in the kernel under test can
//! delay the end of a boot but never stop it.

use crate::signals;
use nix::sys::signal::{kill, Signal};
use nix::sys::signalfd::SignalFd;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};
use std::fmt;
use std::time::{Duration, Instant};

/// How a bounded step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepEnd {
    /// The child exited with this code (0: the step succeeded).
    Exited(i32),
    /// A signal ended the child (e.g. SIGABRT from a panic in it).
    Signaled(String),
    /// The deadline passed; the child was sent SIGKILL and left behind.
    TimedOut {
        /// The step's name.
        step: &'static str,
        /// The bound that passed.
        limit: Duration,
        /// The child's pid.
        pid: i32,
    },
    /// The child could not be started.
    ForkFailed(nix::Error),
}

impl StepEnd {
    /// Whether the step ran to its end (whatever its exit code).
    pub fn finished(&self) -> bool {
        matches!(self, StepEnd::Exited(_))
    }

    /// Whether the step ran to its end and succeeded.
    pub fn succeeded(&self) -> bool {
        matches!(self, StepEnd::Exited(0))
    }
}

impl fmt::Display for StepEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepEnd::Exited(0) => f.write_str("done"),
            StepEnd::Exited(code) => write!(f, "failed (exit status {code})"),
            StepEnd::Signaled(sig) => write!(f, "died ({sig})"),
            StepEnd::TimedOut { step, limit, pid } => {
                write!(f, "{step} did not finish within {} s; its process {pid} was killed", limit.as_secs())
            }
            StepEnd::ForkFailed(e) => write!(f, "cannot start it: {e}"),
        }
    }
}

/// Runs `step` in a child and waits at most `limit` for it. The child's
/// return value is its exit code. The child starts with default signal
/// handling; whatever it prints goes to the console PID 1 shares with it.
pub fn run(sfd: Option<&SignalFd>, name: &'static str, limit: Duration, step: impl FnOnce() -> i32) -> StepEnd {
    // SAFETY: the child runs only `step` and then _exit; PID 1 is
    // single-threaded here (the upload's threads live in these children).
    let child = match unsafe { fork() } {
        Err(e) => return StepEnd::ForkFailed(e),
        Ok(ForkResult::Child) => {
            signals::reset_for_child();
            let code = step();
            // SAFETY: _exit skips PID 1's atexit handlers and buffers.
            unsafe { libc::_exit(code) }
        }
        Ok(ForkResult::Parent { child }) => child,
    };
    wait_bounded(sfd, name, child, limit)
}

/// Waits for `child` until `limit`; past it, SIGKILL and go on.
fn wait_bounded(sfd: Option<&SignalFd>, name: &'static str, child: Pid, limit: Duration) -> StepEnd {
    let t0 = Instant::now();
    loop {
        match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return StepEnd::Exited(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => return StepEnd::Signaled(sig.to_string()),
            Err(nix::Error::ECHILD) => return StepEnd::Exited(0),
            _ => {}
        }
        let remaining = limit.saturating_sub(t0.elapsed());
        if remaining.is_zero() {
            let _ = kill(child, Signal::SIGKILL);
            return StepEnd::TimedOut { step: name, limit, pid: child.as_raw() };
        }
        // PID 1 waits here for a bounded step: an armed hardware watchdog
        // is petted every second meanwhile.
        let slice = if crate::hw_watchdog::armed() { remaining.min(Duration::from_secs(1)) } else { remaining };
        crate::hw_watchdog::pet();
        signals::wait_for_signal(sfd, slice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_that_blocks_is_abandoned_at_its_bound_and_killed() {
        let t0 = Instant::now();
        let end = run(None, "sleeper", Duration::from_millis(300), || loop {
            std::thread::sleep(Duration::from_secs(3600));
        });
        let waited = t0.elapsed();
        let StepEnd::TimedOut { step, pid, .. } = end else { panic!("{end:?}") };
        assert_eq!(step, "sleeper");
        assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(5), "{waited:?}");
        // SIGKILL was sent: the child dies and can be reaped.
        let status = waitpid(Pid::from_raw(pid), None).unwrap();
        assert!(matches!(status, WaitStatus::Signaled(_, Signal::SIGKILL, _)), "{status:?}");
    }

    #[test]
    fn a_step_that_ends_reports_its_exit_code() {
        assert_eq!(run(None, "ok", Duration::from_secs(10), || 0), StepEnd::Exited(0));
        let end = run(None, "fails", Duration::from_secs(10), || 3);
        assert_eq!(end, StepEnd::Exited(3));
        assert!(end.finished() && !end.succeeded());
        let end = run(None, "crashes", Duration::from_secs(10), || {
            let _ = nix::sys::signal::raise(Signal::SIGSEGV);
            0
        });
        assert_eq!(end, StepEnd::Signaled("SIGSEGV".into()));
    }
}
