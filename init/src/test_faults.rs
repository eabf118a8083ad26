//! Faults injected on purpose, for bootbench's own fault-matrix tests only
//! (`bootbench.test_fault=NAME[,NAME...]`, see
//! [`loads::suite::TEST_FAULTS`]). A run with any is recorded as such in its
//! result (an error under `test-fault`), so it can never pass for a clean
//! measurement. Each fault fires at one point: the first workload, or after
//! it, or in the steps after the result.

use nix::sys::signal::{self, SigHandler, Signal};
use nix::unistd::{fork, setsid, ForkResult};
use std::time::Duration;

/// Test-only faults the workload child injects.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildFaults {
    /// Die of SIGSEGV before measuring.
    pub segv: bool,
    /// Leave processes that ignore SIGTERM behind, in their own session.
    pub orphans: bool,
}

/// The faults a run asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    names: Vec<String>,
}

impl Faults {
    /// From the cmdline's `bootbench.test_fault` names.
    pub fn new(names: &[String]) -> Faults {
        Faults { names: names.to_vec() }
    }

    fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// The names, for the result's error line; `None` without faults.
    pub fn describe(&self) -> Option<String> {
        (!self.names.is_empty()).then(|| format!("test faults injected on purpose: {}", self.names.join(",")))
    }

    /// What the child of workload number `index` (0-based) injects.
    pub fn for_child(&self, index: usize) -> ChildFaults {
        ChildFaults { segv: index == 0 && self.has("segv"), orphans: index == 0 && self.has("orphans") }
    }

    /// After the first workload's result went out: crash the kernel, panic
    /// PID 1, or fall silent, as asked.
    pub fn after_first_workload(&self) {
        if self.has("kernel-panic") {
            crate::result_channels::drain_console();
            let _ = std::fs::write("/proc/sys/kernel/sysrq", "1");
            let _ = std::fs::write("/proc/sysrq-trigger", "c");
        }
        if self.has("init-panic") {
            inject_init_panic();
        }
        if self.has("silence") {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    }

    /// Whether a step after the result should block without end.
    pub fn late_hang(&self) -> bool {
        self.has("late-hang")
    }
}

#[allow(clippy::panic)]
fn inject_init_panic() {
    panic!("test fault init-panic: a panic inside PID 1 on purpose");
}

/// In the workload child: die of SIGSEGV, as a crashing workload does.
pub fn die_of_segv() -> ! {
    let _ = nix::sys::signal::raise(Signal::SIGSEGV);
    // SAFETY: _exit; only reached if the signal did not end the process.
    unsafe { libc::_exit(139) }
}

/// In the workload child: starts a process in its own session that ignores
/// SIGTERM and forks two more like it, all sleeping; then returns, so the
/// workload runs as usual with them alive.
pub fn leave_orphans() {
    // SAFETY: the workload child is single-threaded; the new process only
    // calls async-signal-safe functions and sleeps.
    if let Ok(ForkResult::Child) = unsafe { fork() } {
        let _ = setsid();
        // SAFETY: ignoring SIGTERM is always sound.
        let _ = unsafe { signal::signal(Signal::SIGTERM, SigHandler::SigIgn) };
        for _ in 0..2 {
            // SAFETY: as above.
            let _ = unsafe { fork() };
        }
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}
