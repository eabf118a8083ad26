//! The end of every run: stop whatever is left, sync, power off. Never
//! returns; if the kernel refuses to power off, PID 1 sleeps forever rather
//! than exit (an exiting PID 1 panics the kernel).

use crate::signals;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::sys::signalfd::SignalFd;
use nix::unistd::Pid;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// How long processes get between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

fn any_children() -> bool {
    // ECHILD from a non-blocking wait means there is nobody left to reap.
    !matches!(
        nix::sys::wait::waitid(
            nix::sys::wait::Id::All,
            nix::sys::wait::WaitPidFlag::WEXITED
                | nix::sys::wait::WaitPidFlag::WNOHANG
                | nix::sys::wait::WaitPidFlag::WNOWAIT
        ),
        Err(nix::Error::ECHILD)
    )
}

/// Waits, reaping, until no children are left or `limit` passes.
fn reap_until_empty(sfd: Option<&SignalFd>, limit: Duration) {
    let t0 = Instant::now();
    loop {
        signals::reap_all();
        if !any_children() {
            return;
        }
        let remaining = limit.saturating_sub(t0.elapsed());
        if remaining.is_zero() {
            return;
        }
        match sfd {
            Some(sfd) => {
                let mut fds = [PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
                let _ = poll(&mut fds, PollTimeout::try_from(remaining).unwrap_or(PollTimeout::MAX));
                signals::drain(sfd);
            }
            None => std::thread::sleep(Duration::from_millis(50).min(remaining)),
        }
    }
}

/// SIGTERM to everything, a grace period, SIGKILL, reap, sync, power off.
pub fn power_off(sfd: Option<&SignalFd>) -> ! {
    // kill(-1) signals every process except PID 1 itself.
    let _ = kill(Pid::from_raw(-1), Signal::SIGTERM);
    reap_until_empty(sfd, GRACE);
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    reap_until_empty(sfd, GRACE);
    nix::unistd::sync();
    let _ = nix::sys::reboot::reboot(nix::sys::reboot::RebootMode::RB_POWER_OFF);
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
