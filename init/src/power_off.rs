//! The end of every run: stop whatever is left, sync, power off. Never
//! returns; if the kernel refuses to power off, PID 1 sleeps forever rather
//! than exit (an exiting PID 1 panics the kernel).

use crate::bounded_child;
use crate::result_channels;
use crate::signals::reap_until_empty;
use nix::sys::signal::{kill, Signal};
use nix::sys::signalfd::SignalFd;
use nix::unistd::Pid;
use std::time::Duration;

/// How long processes get between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// How long the final `sync` may take before PID 1 powers off anyway (a
/// broken disk must not keep a finished boot from ending).
pub const SYNC_LIMIT: Duration = Duration::from_secs(20);

/// SIGTERM to everything, a grace period, SIGKILL, reap, a bounded sync,
/// the console drained, power off.
pub fn power_off(sfd: Option<&SignalFd>) -> ! {
    // kill(-1) signals every process except PID 1 itself.
    let _ = kill(Pid::from_raw(-1), Signal::SIGTERM);
    reap_until_empty(sfd, GRACE);
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    reap_until_empty(sfd, GRACE);
    // sync blocks in the kernel under test: in a child, with a bound.
    let synced = bounded_child::run(sfd, "sync", SYNC_LIMIT, || {
        nix::unistd::sync();
        0
    });
    if !synced.finished() {
        result_channels::say(&format!("sync before power-off: {synced}; powering off anyway"));
    }
    halt()
}

/// The console drained, then power off; never returns. Also the panic
/// hook's end, so it does no more than that.
pub fn halt() -> ! {
    result_channels::drain_console();
    let _ = nix::sys::reboot::reboot(nix::sys::reboot::RebootMode::RB_POWER_OFF);
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
