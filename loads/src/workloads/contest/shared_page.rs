//! The memory a background load shares with the contest process: the stop
//! flag contest raises and the counters the load's processes bump. It is
//! anonymous `MAP_SHARED` memory mapped before the fork, so every process
//! of the load's tree sees the same atomics with no system call per unit
//! of work. Owns the mapping; must not decide what a unit of work is.

use nix::sys::mman::{mmap_anonymous, munmap, MapFlags, ProtFlags};
use std::num::NonZeroUsize;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Errors of mapping the shared page.
#[derive(Debug, thiserror::Error)]
pub enum SharedPageError {
    /// `mmap` refused.
    #[error("cannot map {bytes} bytes of shared memory for the load's counters")]
    Map {
        /// Size asked for.
        bytes: usize,
        /// errno.
        #[source]
        source: nix::Error,
    },
}

#[repr(C)]
struct Counters {
    stop: AtomicBool,
    work: AtomicU64,
    oom_kills: AtomicU64,
}

/// The shared counters of one background load.
pub struct SharedPage {
    counters: NonNull<Counters>,
    len: NonZeroUsize,
}

impl SharedPage {
    /// Maps a fresh page: not stopped, all counters 0.
    pub fn new() -> Result<SharedPage, SharedPageError> {
        let len = NonZeroUsize::MIN.saturating_add(std::mem::size_of::<Counters>() - 1);
        // SAFETY: a new anonymous mapping aliases nothing; the kernel
        // zero-fills it, and all-zero bytes are a valid `Counters` (false
        // and 0 for every atomic).
        let ptr =
            unsafe { mmap_anonymous(None, len, ProtFlags::PROT_READ | ProtFlags::PROT_WRITE, MapFlags::MAP_SHARED) }
                .map_err(|source| SharedPageError::Map { bytes: len.get(), source })?;
        Ok(SharedPage { counters: ptr.cast(), len })
    }

    fn counters(&self) -> &Counters {
        // SAFETY: the mapping lives as long as `self`, is page aligned
        // (more than `Counters` needs) and only ever accessed atomically.
        unsafe { self.counters.as_ref() }
    }

    /// Asks the load to stop at its next unit of work.
    pub fn request_stop(&self) {
        self.counters().stop.store(true, Ordering::SeqCst);
    }

    /// Whether contest asked the load to stop.
    pub fn stop_requested(&self) -> bool {
        self.counters().stop.load(Ordering::Relaxed)
    }

    /// Adds `n` units of completed work.
    pub fn add_work(&self, n: u64) {
        self.counters().work.fetch_add(n, Ordering::Relaxed);
    }

    /// Units of work completed so far.
    pub fn work(&self) -> u64 {
        self.counters().work.load(Ordering::SeqCst)
    }

    /// Counts one load process killed by the OOM killer.
    pub fn add_oom_kill(&self) {
        self.counters().oom_kills.fetch_add(1, Ordering::SeqCst);
    }

    /// Load processes the OOM killer took so far.
    pub fn oom_kills(&self) -> u64 {
        self.counters().oom_kills.load(Ordering::SeqCst)
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this length and no
        // reference into it outlives `self`.
        let _ = unsafe { munmap(self.counters.cast(), self.len.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::wait::waitpid;
    use nix::unistd::{fork, ForkResult};

    #[test]
    fn a_child_sees_the_stop_flag_and_its_work_reaches_the_parent() {
        let page = SharedPage::new().unwrap();
        assert!(!page.stop_requested());
        // SAFETY: the child only touches atomics and calls _exit.
        match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                page.add_work(5);
                page.add_oom_kill();
                while !page.stop_requested() {
                    std::hint::spin_loop();
                }
                page.add_work(1);
                unsafe { libc::_exit(0) }
            }
            ForkResult::Parent { child } => {
                while page.work() < 5 {
                    std::thread::yield_now();
                }
                page.request_stop();
                waitpid(child, None).unwrap();
                assert_eq!((page.work(), page.oom_kills()), (6, 1));
            }
        }
    }
}
