//! A panic in PID 1 must not read as the kernel's. Without a hook, a panic
//! (ours, in `loads`, or in a library PID 1 runs, on any of its threads)
//! aborts PID 1, the kernel prints "Attempted to kill init!" and the host
//! blames the kernel. The hook installed here prints a checksummed
//! `init-panic` event with the message and the location instead, syncs
//! (bounded), drains the console and powers off, so the host classifies
//! the boot as an appliance failure.
//!
//! Workload children are forks of PID 1 and inherit the hook; in them it
//! does what Rust's default hook does (the message on stderr), and the
//! child then aborts: a panic there is that workload's error.

use crate::power_off;
use loads::console_protocol::{self, EVENT_INIT_PANIC};
use std::panic::PanicHookInfo;
use std::time::Duration;

/// How long the panic path waits for `sync` before powering off.
const SYNC_LIMIT: Duration = Duration::from_secs(5);

/// The event text for a panic: `location=FILE:LINE:COL message=TEXT`, the
/// message on one line.
pub fn event_text(location: Option<(&str, u32, u32)>, message: &str) -> String {
    let location = location.map(|(f, l, c)| format!("{f}:{l}:{c}")).unwrap_or_else(|| "unknown".into());
    let message: String = message.chars().map(|c| if c.is_control() { ' ' } else { c }).take(800).collect();
    format!("location={location} message={message}")
}

/// Writes `bytes` to fd 1 with plain write(2): the panic may have happened
/// while the stdout lock was held.
fn raw_write(bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: writes from a live slice.
        let n = unsafe { libc::write(1, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = rest.get(usize::try_from(n).unwrap_or(rest.len())..).unwrap_or_default();
    }
}

fn in_pid1(info: &PanicHookInfo<'_>) -> ! {
    let location = info.location().map(|l| (l.file(), l.line(), l.column()));
    let message = info.payload_as_str().unwrap_or("(a panic payload that is not text)");
    let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
    let text = event_text(location, &format!("{message} (thread {thread})"));
    let mut line = console_protocol::event(EVENT_INIT_PANIC, &text).into_bytes();
    line.push(b'\n');
    raw_write(&line);
    raw_write(b"bootbench: PID 1 panicked: this is a bug in bootbench, not in the kernel under test; powering off\n");
    // SAFETY: fork in a panic hook: the child only calls sync and _exit.
    match unsafe { libc::fork() } {
        0 => {
            // SAFETY: plain syscalls in the child.
            unsafe {
                libc::sync();
                libc::_exit(0)
            }
        }
        pid if pid > 0 => {
            let t0 = std::time::Instant::now();
            let mut status = 0;
            // SAFETY: a non-blocking wait for our own child.
            while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == 0 && t0.elapsed() < SYNC_LIMIT {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        _ => {}
    }
    power_off::halt()
}

/// Installs the hook. Call first thing in `main`.
pub fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::process::id() == 1 {
            in_pid1(info);
        }
        default(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_names_the_location_and_keeps_the_message_on_one_line() {
        let t = event_text(Some(("init/src/main.rs", 10, 5)), "overflow\nwhen adding");
        assert_eq!(t, "location=init/src/main.rs:10:5 message=overflow when adding");
        let line = console_protocol::event(EVENT_INIT_PANIC, &t);
        assert!(line.contains("init-panic") && !line.contains('\n'), "{line}");
        assert!(event_text(None, &"x".repeat(5000)).len() < 900);
    }
}
