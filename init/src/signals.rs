//! Signals for PID 1: every signal blocked and taken through a signalfd, so
//! PID 1 sleeps in one blocking poll; and the reset a child needs to start
//! clean.

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{self, SigHandler, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// Errors while setting up signal handling.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    /// sigprocmask failed.
    #[error("cannot block signals")]
    Block(#[source] nix::Error),
    /// signalfd failed.
    #[error("cannot create a signalfd")]
    SignalFd(#[source] nix::Error),
}

/// Blocks every signal and returns a non-blocking signalfd for all of them.
pub fn block_all() -> Result<SignalFd, SignalError> {
    let all = SigSet::all();
    signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&all), None).map_err(SignalError::Block)?;
    SignalFd::with_flags(&all, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).map_err(SignalError::SignalFd)
}

/// The signals that ask PID 1 to stop the run.
pub const STOP_SIGNALS: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGPWR];

/// The first stop signal any [`drain`] read, 0 for none: whoever drains
/// the signalfd (a bounded step's wait, the clean-up between workloads),
/// the run loop sees the request.
static STOP_REQUESTED: AtomicI32 = AtomicI32::new(0);

/// The stop signal received so far, if any.
pub fn stop_requested() -> Option<i32> {
    Some(STOP_REQUESTED.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// Drains pending signals from `sfd`; returns the ones seen other than
/// SIGCHLD (SIGCHLD only means "reap"). A stop signal is also remembered
/// for [`stop_requested`].
pub fn drain(sfd: &SignalFd) -> Vec<i32> {
    let mut seen = Vec::new();
    while let Ok(Some(info)) = sfd.read_signal() {
        let signo = info.ssi_signo as i32;
        if signo != libc::SIGCHLD {
            if STOP_SIGNALS.contains(&signo) {
                let _ = STOP_REQUESTED.compare_exchange(0, signo, Ordering::SeqCst, Ordering::SeqCst);
            }
            seen.push(signo);
        }
    }
    seen
}

/// Reaps every exited child without blocking: `waitpid(-1, WNOHANG)` until
/// none are left. Returns the statuses reaped.
pub fn reap_all() -> Vec<WaitStatus> {
    let mut reaped = Vec::new();
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => break,
            Ok(status) => reaped.push(status),
        }
    }
    reaped
}

/// In a freshly forked child: default dispositions for every signal and an
/// empty signal mask, so the child does not inherit PID 1's blocking.
pub fn reset_for_child() {
    for sig in Signal::iterator() {
        if sig == Signal::SIGKILL || sig == Signal::SIGSTOP {
            continue;
        }
        // SAFETY: installing SIG_DFL is always sound.
        let _ = unsafe { signal::signal(sig, SigHandler::SigDfl) };
    }
    let _ = signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
}

/// A poll timeout of at least `d`: rounded up to whole milliseconds, so a
/// wait for a deadline never returns just before it and spins.
pub fn poll_timeout(d: Duration) -> PollTimeout {
    let ms = i32::try_from(d.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
    PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
}

/// Sleeps until a signal arrives on `sfd` or `limit` passes (50 ms steps
/// without a signalfd), then drains `sfd`. Returns the signals seen other
/// than SIGCHLD.
pub fn wait_for_signal(sfd: Option<&SignalFd>, limit: Duration) -> Vec<i32> {
    match sfd {
        Some(sfd) => {
            let mut fds = [PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
            let _ = poll(&mut fds, poll_timeout(limit));
            drain(sfd)
        }
        None => {
            std::thread::sleep(Duration::from_millis(50).min(limit));
            Vec::new()
        }
    }
}

/// Whether PID 1 has any child left (exited or not).
pub fn any_children() -> bool {
    // ECHILD from a non-blocking wait means there is nobody left to reap.
    !matches!(
        nix::sys::wait::waitid(
            nix::sys::wait::Id::All,
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT
        ),
        Err(nix::Error::ECHILD)
    )
}

/// Waits, reaping, until no children are left or `limit` passes. Returns
/// whether none are left.
pub fn reap_until_empty(sfd: Option<&SignalFd>, limit: Duration) -> bool {
    let t0 = Instant::now();
    loop {
        reap_all();
        if !any_children() {
            return true;
        }
        let remaining = limit.saturating_sub(t0.elapsed());
        if remaining.is_zero() {
            return false;
        }
        wait_for_signal(sfd, remaining);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_timeouts_round_up_so_a_deadline_wait_cannot_spin() {
        assert_eq!(poll_timeout(Duration::from_micros(1)), PollTimeout::try_from(1).unwrap());
        assert_eq!(poll_timeout(Duration::from_micros(999)), PollTimeout::try_from(1).unwrap());
        assert_eq!(poll_timeout(Duration::from_micros(1001)), PollTimeout::try_from(2).unwrap());
        assert_eq!(poll_timeout(Duration::ZERO), PollTimeout::ZERO);
        // Long waits stay what they are (a late step's 180 s bound, a
        // 3600 s alive interval), not "forever".
        assert_eq!(poll_timeout(Duration::from_secs(70)), PollTimeout::try_from(70_000).unwrap());
        assert_eq!(poll_timeout(Duration::from_secs(3600)), PollTimeout::try_from(3_600_000).unwrap());
        assert_eq!(poll_timeout(Duration::from_secs(u64::MAX)), PollTimeout::MAX);
    }
}
