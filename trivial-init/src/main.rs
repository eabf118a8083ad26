//! The trivial PID 1 that `bootbench overhead` boots beside the appliance:
//! it writes one line with its CLOCK_BOOTTIME to the console and powers the
//! machine off at once. Kernel start to this line is the floor any init
//! pays, so bootbench's own start-up cost is measured against it. It does
//! nothing else: no mounts, no allocation before the line is written, and
//! it never returns and never panics.

use std::io::Write;

/// The event the host looks for (`@@BOOTBENCH EVENT <name> boottime=S`);
/// it must match `bootbench::overhead`'s `TRIVIAL_INIT_EVENT`.
const EVENT_LINE_PREFIX: &str = "@@BOOTBENCH EVENT trivial-init";

/// Seconds of CLOCK_BOOTTIME (time since the kernel started), or 0 if the
/// clock cannot be read (the host then sees an implausible time).
fn boottime_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Writes `line` to /dev/console, or to stdout when the console cannot be
/// opened (the kernel gives PID 1 the console as fds 0-2 when the archive
/// has a /dev/console node).
fn say(line: &str) {
    let written =
        std::fs::OpenOptions::new().write(true).open("/dev/console").and_then(|mut c| c.write_all(line.as_bytes()));
    if written.is_err() {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

fn main() {
    let t = boottime_s();
    if std::process::id() != 1 {
        // Powering off is only for a guest's PID 1, never for a host.
        let _ = writeln!(std::io::stderr(), "bootbench-trivial-init: must run as PID 1 (an initramfs /init)");
        std::process::exit(2);
    }
    say(&format!("{EVENT_LINE_PREFIX} boottime={t:.6}\n"));
    // SAFETY: sync and reboot take no pointers; PID 1 powering off is the
    // whole point of this program.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    // reboot failed (it cannot return otherwise): PID 1 must not exit, or
    // the kernel panics. The host's timeouts end the boot.
    say("@@BOOTBENCH EVENT trivial-init-error reboot(RB_POWER_OFF) failed\n");
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}
