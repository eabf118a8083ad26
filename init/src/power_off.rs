//! The end of every run: stop whatever is left, sync, disarm the hardware
//! watchdog, and power off (or reboot, or halt: `bootbench.after`). Never
//! returns; if the kernel refuses, PID 1 sleeps forever rather than exit
//! (an exiting PID 1 panics the kernel).

use crate::bounded_child;
use crate::hw_watchdog;
use crate::result_channels;
use crate::signals::reap_until_empty;
use loads::suite::AfterRun;
use nix::sys::reboot::RebootMode;
use nix::sys::signal::{kill, Signal};
use nix::sys::signalfd::SignalFd;
use nix::unistd::Pid;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

/// How the boot ends ([`AfterRun`] as a number), set once the cmdline is
/// read; the panic hook's end honours it too.
static AFTER: AtomicU8 = AtomicU8::new(0);

const AFTER_MODES: [AfterRun; 3] = [AfterRun::PowerOff, AfterRun::Reboot, AfterRun::Halt];

/// Sets how the boot ends.
pub fn set_after(after: AfterRun) {
    let n = AFTER_MODES.iter().position(|m| *m == after).unwrap_or(0);
    AFTER.store(u8::try_from(n).unwrap_or(0), Ordering::SeqCst);
}

/// How the boot ends.
pub fn after() -> AfterRun {
    AFTER_MODES.get(usize::from(AFTER.load(Ordering::SeqCst))).copied().unwrap_or_default()
}

/// The reboot(2) command for an ending.
pub fn reboot_mode(after: AfterRun) -> RebootMode {
    match after {
        AfterRun::PowerOff => RebootMode::RB_POWER_OFF,
        AfterRun::Reboot => RebootMode::RB_AUTOBOOT,
        AfterRun::Halt => RebootMode::RB_HALT_SYSTEM,
    }
}

/// How long processes get between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// How long the final `sync` may take before PID 1 powers off anyway (a
/// broken disk must not keep a finished boot from ending).
pub const SYNC_LIMIT: Duration = Duration::from_secs(20);

/// SIGTERM to everything, a grace period, SIGKILL, reap, a bounded sync,
/// the console drained, power off (or what [`set_after`] said).
pub fn power_off(sfd: Option<&SignalFd>) -> ! {
    // kill(-1) signals every process except PID 1 itself.
    let _ = kill(Pid::from_raw(-1), Signal::SIGTERM);
    reap_until_empty(sfd, GRACE);
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    reap_until_empty(sfd, GRACE);
    // The watchdog lasts more than twice the alive interval (2 s at
    // least); the sync's bound can be longer, so it is petted once more.
    hw_watchdog::pet();
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

/// The console drained, the hardware watchdog disarmed, then power off (or
/// what [`set_after`] said); never returns. Also the panic hook's end, so
/// it does no more than that.
pub fn halt() -> ! {
    result_channels::drain_console();
    // A planned end: the watchdog must not reset the machine meanwhile.
    let _ = hw_watchdog::disarm();
    let _ = nix::sys::reboot::reboot(reboot_mode(after()));
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ending_is_its_own_reboot_command_and_is_kept() {
        assert_eq!(after(), AfterRun::PowerOff, "the default");
        assert_eq!(reboot_mode(AfterRun::PowerOff), RebootMode::RB_POWER_OFF);
        assert_eq!(reboot_mode(AfterRun::Reboot), RebootMode::RB_AUTOBOOT);
        assert_eq!(reboot_mode(AfterRun::Halt), RebootMode::RB_HALT_SYSTEM);
        for a in [AfterRun::Reboot, AfterRun::Halt, AfterRun::PowerOff] {
            set_after(a);
            assert_eq!(after(), a);
        }
    }
}
