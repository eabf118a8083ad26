//! Ctrl-C (SIGINT) and SIGTERM in the commands that boot kernels and in
//! `bootbench local`: the write in progress ends first, the cleanups
//! registered run (a build's process group killed, a run's scratch files
//! removed, local's userland pack unmounted), each says what was kept and
//! what was lost, and the process exits with 128 + the signal (130 for
//! SIGINT, as a shell reports it). QEMU dies with its parent (the runner
//! gives it a parent-death signal), so the boot in progress ends too and is
//! not recorded. Depends on nothing else of the crate.
//!
//! The signal handler only writes the signal's number to a pipe; a watcher
//! thread does the rest outside signal context. A second Ctrl-C while the
//! cleanups run ends the process at once. Owns no file and no process of its
//! own: what to keep and what to kill is the registering code's business.

use std::io::Read;
use std::os::fd::{IntoRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

/// The exit status after SIGINT: 128 + 2.
pub const EXIT_INTERRUPTED: i32 = 128 + 2;

/// The handling could not be set up.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InterruptError {
    /// The pipe, the watcher thread or a signal handler could not be made.
    #[error("cannot set up the handling of Ctrl-C and SIGTERM ({what}): {detail}")]
    Install {
        /// What failed.
        what: &'static str,
        /// The error.
        detail: String,
    },
}

type Hook = Box<dyn FnMut() + Send>;

/// Held while a file that must never be cut is written.
static WRITES: Mutex<()> = Mutex::new(());
/// What runs on an interrupt, in registration order.
static HOOKS: Mutex<Vec<(u64, Hook)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);
/// The pipe's write end, for the signal handler.
static PIPE: AtomicI32 = AtomicI32::new(-1);
static INSTALLED: OnceLock<Result<(), InterruptError>> = OnceLock::new();
/// Set by the signal handler itself: from then on the process ends through
/// the watcher, with the signal's status.
static HANDLING: AtomicBool = AtomicBool::new(false);

const SIGNALS: [nix::sys::signal::Signal; 2] = [nix::sys::signal::Signal::SIGINT, nix::sys::signal::Signal::SIGTERM];

fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    // A hook that panicked leaves nothing to repair.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

extern "C" fn on_signal(signal: nix::libc::c_int) {
    // At once, in the handler (an atomic store is async-signal-safe): the
    // main thread may see QEMU die of the same Ctrl-C before the watcher
    // thread runs, and must already hold then.
    HANDLING.store(true, Ordering::SeqCst);
    let fd = PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = [u8::try_from(signal).unwrap_or(u8::MAX)];
        // SAFETY: write(2) is async-signal-safe; `byte` outlives the call,
        // and `fd` is the pipe's write end, never closed.
        unsafe {
            nix::libc::write(fd, byte.as_ptr().cast(), 1);
        }
    }
}

/// Waits for a signal number on the pipe, then runs the hooks and exits.
fn watch(read: OwnedFd) {
    let mut pipe = std::fs::File::from(read);
    let mut byte = [0u8; 1];
    loop {
        match pipe.read(&mut byte) {
            Ok(1) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
    }
    HANDLING.store(true, Ordering::SeqCst);
    // Another signal now ends the process at once, should a cleanup hang.
    for s in SIGNALS {
        // SAFETY: restores the default disposition; no handler is involved.
        let _ = unsafe { nix::sys::signal::signal(s, nix::sys::signal::SigHandler::SigDfl) };
    }
    // The write in progress ends first; no other starts after it.
    let _writes = lock(&WRITES);
    let mut hooks = lock(&HOOKS);
    for (_, hook) in hooks.iter_mut().rev() {
        hook();
    }
    std::process::exit(128 + i32::from(byte[0]));
}

fn setup() -> Result<(), InterruptError> {
    let err = |what: &'static str| move |e: nix::Error| InterruptError::Install { what, detail: e.to_string() };
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(err("pipe"))?;
    std::thread::Builder::new()
        .name("interrupt".into())
        .spawn(move || watch(read))
        .map_err(|e| InterruptError::Install { what: "watcher thread", detail: e.to_string() })?;
    // The write end lives as long as the process.
    PIPE.store(write.into_raw_fd(), Ordering::Relaxed);
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(on_signal),
        nix::sys::signal::SaFlags::SA_RESTART,
        nix::sys::signal::SigSet::empty(),
    );
    for s in SIGNALS {
        // SAFETY: the handler only loads an atomic and calls write(2), both
        // async-signal-safe.
        unsafe { nix::sys::signal::sigaction(s, &action) }.map_err(err("sigaction"))?;
    }
    Ok(())
}

/// Installs the handling (once per process; later calls return the first
/// one's result). Until it is installed, registered hooks never run and a
/// signal ends the process as it would anyway.
pub fn install() -> Result<(), InterruptError> {
    INSTALLED.get_or_init(setup).clone()
}

/// Registered cleanup, unregistered when dropped.
#[must_use = "the hook is unregistered when this is dropped"]
#[derive(Debug)]
pub struct OnInterrupt {
    id: u64,
}

impl Drop for OnInterrupt {
    fn drop(&mut self) {
        lock(&HOOKS).retain(|(id, _)| *id != self.id);
    }
}

/// Runs `hook` if the process is interrupted while the returned guard
/// lives, after the write in progress (see [`critical`]) and after hooks
/// registered later (inner first). A hook runs on the watcher thread while
/// other threads go on, so it touches only what it owns; it must not call
/// [`critical`] or register hooks.
pub fn on_interrupt(hook: impl FnMut() + Send + 'static) -> OnInterrupt {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    lock(&HOOKS).push((id, Box::new(hook)));
    OnInterrupt { id }
}

/// Whether an interrupt is being handled (the process is about to end).
pub fn interrupted() -> bool {
    HANDLING.load(Ordering::SeqCst)
}

/// Waits here for good if an interrupt is being handled, so the calling
/// thread starts nothing more (no retry, no next boot) and cannot end the
/// process with another status before the cleanups finish: the watcher
/// ends it with the signal's. Returns at once otherwise.
pub fn hold_if_interrupted() {
    while interrupted() {
        std::thread::park();
    }
}

/// Removes the directory `dir` and everything in it, again and again until
/// it is gone: a thread that has not yet seen the interrupt may still be
/// creating a file in it (a retried boot's console or port file), which
/// makes a single `remove_dir_all` fail with "directory not empty". Once
/// the directory itself is gone nothing recreates it. Gives up after
/// `patience`; returns whether it is gone.
pub fn remove_dir_until_gone(dir: &Path, patience: Duration) -> bool {
    let until = std::time::Instant::now() + patience;
    loop {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(_) if std::time::Instant::now() >= until => return !dir.exists(),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Runs `write` so that an interrupt cannot cut it: the interrupt waits for
/// it to end (and nothing registered runs meanwhile).
pub fn critical<T>(write: impl FnOnce() -> T) -> T {
    let _writes = lock(&WRITES);
    write()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn hooks_run_innermost_first_only_while_registered() {
        // No signal is raised here (it would end the test process); the
        // order and the registry are checked directly.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let outer = {
            let seen = seen.clone();
            on_interrupt(move || seen.lock().unwrap().push("outer"))
        };
        let gone = {
            let seen = seen.clone();
            on_interrupt(move || seen.lock().unwrap().push("dropped"))
        };
        let inner = {
            let seen = seen.clone();
            on_interrupt(move || seen.lock().unwrap().push("inner"))
        };
        drop(gone);
        {
            let mut hooks = lock(&HOOKS);
            for (id, hook) in hooks.iter_mut().rev() {
                if [outer.id, inner.id].contains(id) {
                    hook();
                }
            }
        }
        assert_eq!(*seen.lock().unwrap(), vec!["inner", "outer"]);
        let ids = [outer.id, inner.id];
        drop((outer, inner));
        assert!(lock(&HOOKS).iter().all(|(id, _)| !ids.contains(id)));
    }

    #[test]
    fn a_directory_that_another_thread_keeps_filling_is_still_removed() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("work");
        std::fs::create_dir(&dir).unwrap();
        let writer = {
            let dir = dir.clone();
            std::thread::spawn(move || {
                // Keeps creating files, as a boot that has not seen the
                // interrupt would, for a while or until the directory is
                // gone.
                for n in 0..20_000 {
                    if std::fs::write(dir.join(format!("port-{n}.out")), b"x").is_err() && !dir.exists() {
                        break;
                    }
                }
            })
        };
        // Let the writer fill it first.
        while std::fs::read_dir(&dir).map_or(0, Iterator::count) < 2000 {
            std::thread::yield_now();
        }
        let gone = remove_dir_until_gone(&dir, Duration::from_secs(60));
        writer.join().unwrap();
        assert!(gone && !dir.exists(), "{} was left behind", dir.display());
    }

    #[test]
    fn hold_returns_at_once_when_nothing_is_handled() {
        assert!(!interrupted());
        hold_if_interrupted();
    }

    #[test]
    fn install_is_idempotent() {
        assert!(install().is_ok());
        assert!(install().is_ok());
        assert!(PIPE.load(Ordering::Relaxed) >= 0);
    }
}
