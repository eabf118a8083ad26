//! Signals for PID 1: every signal blocked and taken through a signalfd, so
//! PID 1 sleeps in one blocking poll; and the reset a child needs to start
//! clean.

use nix::sys::signal::{self, SigHandler, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

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

/// Drains pending signals from `sfd`; returns the ones seen other than
/// SIGCHLD (SIGCHLD only means "reap").
pub fn drain(sfd: &SignalFd) -> Vec<i32> {
    let mut seen = Vec::new();
    while let Ok(Some(info)) = sfd.read_signal() {
        let signo = info.ssi_signo as i32;
        if signo != libc::SIGCHLD {
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
