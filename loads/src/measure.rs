//! Clocks and CPU accounting shared by the workloads: wall time from
//! CLOCK_MONOTONIC (through `Instant`), CPU time from the rusage of reaped
//! children, boot-relative time from CLOCK_BOOTTIME.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use nix::sys::resource::{getrusage, UsageWho};
use nix::time::{clock_gettime, ClockId};

/// User and system CPU seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// User CPU seconds.
    pub user_s: f64,
    /// System CPU seconds.
    pub sys_s: f64,
}

impl CpuTimes {
    /// The CPU time spent between `earlier` and `self`.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes { user_s: self.user_s - earlier.user_s, sys_s: self.sys_s - earlier.sys_s }
    }
}

fn tv_s(tv: nix::sys::time::TimeVal) -> f64 {
    tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6
}

/// CPU time of all reaped children of this process so far.
pub fn children_cpu() -> CpuTimes {
    match getrusage(UsageWho::RUSAGE_CHILDREN) {
        Ok(u) => CpuTimes { user_s: tv_s(u.user_time()), sys_s: tv_s(u.system_time()) },
        Err(_) => CpuTimes::default(),
    }
}

/// Seconds since the kernel started (CLOCK_BOOTTIME), 0 if unavailable.
pub fn boottime_s() -> f64 {
    clock_gettime(ClockId::CLOCK_BOOTTIME).map(|t| t.tv_sec() as f64 + t.tv_nsec() as f64 / 1e9).unwrap_or(0.0)
}
