//! The QEMU process's plumbing: dying with the parent, killing the whole
//! process group and reaping, bounded waits, and the threads that read the
//! console and keep stderr. It must not interpret what QEMU prints or
//! decide a boot's outcome.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io::{self, Read};
use std::process::{Child, ExitStatus};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

/// QEMU stderr kept in the outcome.
const MAX_STDERR_BYTES: usize = 1 << 20;

/// What the console reader thread sends.
pub(super) enum Feed {
    Bytes(Vec<u8>),
    Eof,
}

/// Makes the child die with us (so an interrupted `bootbench` leaves no QEMU
/// behind, even though QEMU has its own process group). Runs between fork
/// and exec, so it only makes async-signal-safe calls.
pub(super) fn die_with_parent(parent: Pid) -> io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
    if nix::unistd::getppid() != parent {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// A QEMU without a guest (`-machine none -nodefaults -display none`, then
/// `args`), in a process group of its own, dying with us, its stdin piped
/// (for its monitor); the caller sets stdout and stderr.
pub(super) fn guestless_qemu(binary: &std::path::Path, args: &[&str]) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(binary);
    command
        .args(["-machine", "none", "-nodefaults", "-display", "none"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .process_group(0);
    let parent = nix::unistd::getpid();
    // SAFETY: as in `boot`: prctl(2) and getppid(2) only, no allocation.
    unsafe {
        command.pre_exec(move || die_with_parent(parent));
    }
    command
}

/// Kills QEMU and everything in its process group, then reaps QEMU. Only
/// called while QEMU is not yet reaped, so its pid (the group id) cannot
/// have been reused.
pub(super) fn kill_and_reap(child: &mut Child) -> io::Result<ExitStatus> {
    match i32::try_from(child.id()) {
        Ok(pid) if killpg(Pid::from_raw(pid), Signal::SIGKILL).is_ok() => {}
        _ => child.kill()?,
    }
    child.wait()
}

/// Waits up to `limit` for QEMU to exit by itself.
pub(super) fn wait_bounded(child: &mut Child, limit: Duration) -> io::Result<Option<ExitStatus>> {
    let until = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(Some(st));
        }
        if Instant::now() >= until {
            return Ok(None);
        }
        thread::sleep(Duration::from_millis(5));
    }
}

pub(super) fn spawn_reader<R: Read + Send + 'static>(mut src: R) -> Receiver<Feed> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send(Feed::Bytes(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(Feed::Eof);
    });
    rx
}

pub(super) fn spawn_stderr_reader<R: Read + Send + 'static>(mut src: R) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = MAX_STDERR_BYTES.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
}
