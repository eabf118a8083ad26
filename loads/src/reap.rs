//! Reaping children together with their resource usage (`wait4`), and
//! killing what a failed step leaves behind. Owns the rusage arithmetic the
//! process-tree workloads report (CPU time, page faults, context switches);
//! must not decide what a workload does with a child's exit status.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Errors of waiting for children.
#[derive(Debug, thiserror::Error)]
pub enum ReapError {
    /// `wait4` failed.
    #[error("wait4 for {target} failed")]
    Wait {
        /// `pid N` or `any child`.
        target: String,
        /// errno.
        #[source]
        source: nix::Error,
    },
}

/// Resource usage of one or more reaped processes (a `struct rusage`
/// reduced to what the workloads report). Counters are `u64` on every
/// arch, whatever the width of the kernel's `long`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User CPU seconds.
    pub user_s: f64,
    /// System CPU seconds.
    pub sys_s: f64,
    /// Page faults served without I/O.
    pub minor_faults: u64,
    /// Page faults that needed I/O.
    pub major_faults: u64,
    /// Voluntary context switches (the process blocked).
    pub voluntary_switches: u64,
    /// Involuntary context switches (the process was preempted).
    pub involuntary_switches: u64,
}

fn count(v: libc::c_long) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn seconds(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

impl Usage {
    /// Converts the kernel's `struct rusage`.
    pub fn from_rusage(ru: &libc::rusage) -> Usage {
        Usage {
            user_s: seconds(ru.ru_utime),
            sys_s: seconds(ru.ru_stime),
            minor_faults: count(ru.ru_minflt),
            major_faults: count(ru.ru_majflt),
            voluntary_switches: count(ru.ru_nvcsw),
            involuntary_switches: count(ru.ru_nivcsw),
        }
    }

    /// Sum of two usages.
    pub fn plus(&self, o: &Usage) -> Usage {
        Usage {
            user_s: self.user_s + o.user_s,
            sys_s: self.sys_s + o.sys_s,
            minor_faults: self.minor_faults + o.minor_faults,
            major_faults: self.major_faults + o.major_faults,
            voluntary_switches: self.voluntary_switches + o.voluntary_switches,
            involuntary_switches: self.involuntary_switches + o.involuntary_switches,
        }
    }

    /// The usage accrued between `earlier` and `self` (counters never go
    /// backwards; a smaller value reads as 0).
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
            voluntary_switches: self.voluntary_switches.saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self.involuntary_switches.saturating_sub(earlier.involuntary_switches),
        }
    }

    /// Voluntary plus involuntary context switches.
    pub fn context_switches(&self) -> u64 {
        self.voluntary_switches + self.involuntary_switches
    }
}

/// How a reaped child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `exit(code)`.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl Exit {
    /// True for `exit(0)`.
    pub fn success(&self) -> bool {
        *self == Exit::Code(0)
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit status {c}"),
            Exit::Signal(s) => match Signal::try_from(*s) {
                Ok(sig) => write!(f, "killed by {sig}"),
                Err(_) => write!(f, "killed by signal {s}"),
            },
        }
    }
}

/// One reaped child.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reaped {
    /// Its pid.
    pub pid: Pid,
    /// How it ended.
    pub exit: Exit,
    /// Its resource usage, including its own reaped descendants.
    pub usage: Usage,
}

fn wait4_raw(pid: libc::pid_t) -> Result<Reaped, ReapError> {
    loop {
        if let Some(r) = wait4_flags(pid, 0)? {
            return Ok(r);
        }
    }
}

/// `wait4(pid, flags)`: `None` when WNOHANG found nothing to reap (or an
/// EINTR interrupted the wait).
fn wait4_flags(pid: libc::pid_t, flags: libc::c_int) -> Result<Option<Reaped>, ReapError> {
    let target = if pid == -1 { "any child".to_string() } else { format!("pid {pid}") };
    {
        let mut status: libc::c_int = 0;
        // SAFETY: zeroed rusage is a valid value of this plain C struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: both out-pointers refer to live locals of the right type.
        let got = unsafe { libc::wait4(pid, &mut status, flags, &mut ru) };
        if got < 0 {
            let e = nix::Error::last();
            if e == nix::Error::EINTR {
                return Ok(None);
            }
            return Err(ReapError::Wait { target, source: e });
        }
        if got == 0 {
            return Ok(None);
        }
        let exit = if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        };
        Ok(Some(Reaped { pid: Pid::from_raw(got), exit, usage: Usage::from_rusage(&ru) }))
    }
}

/// Reaps `pid` if it has ended, without blocking; `None` while it runs.
pub fn try_wait_pid(pid: Pid) -> Result<Option<Reaped>, ReapError> {
    wait4_flags(pid.as_raw(), libc::WNOHANG)
}

/// Reaps any ended child without blocking; `None` when none has ended
/// (an error with ECHILD when there is no child at all).
pub fn try_wait_any() -> Result<Option<Reaped>, ReapError> {
    wait4_flags(-1, libc::WNOHANG)
}

/// Blocks until `pid` ends and reaps it with its usage.
pub fn wait_pid(pid: Pid) -> Result<Reaped, ReapError> {
    wait4_raw(pid.as_raw())
}

/// Blocks until any child ends and reaps it. Only for processes whose
/// every child is theirs to reap (an applet that runs jobs, a script's
/// shell): elsewhere it would steal other code's children.
pub fn wait_any() -> Result<Reaped, ReapError> {
    wait4_raw(-1)
}

/// SIGKILLs every pid in `pids` and reaps each one, so a failed step
/// leaves no process behind. Errors are ignored: a child may already be
/// gone.
pub fn kill_and_reap(pids: &[Pid]) {
    for &p in pids {
        let _ = kill(p, Signal::SIGKILL);
    }
    for &p in pids {
        let _ = wait_pid(p);
    }
}

/// Usage of the calling thread so far (`RUSAGE_THREAD`): the share of a
/// scheduler that runs in this thread, excluding other threads' work.
pub fn this_thread() -> Usage {
    // SAFETY: zeroed rusage is valid; getrusage writes into it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer refers to a live local.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
        Usage::from_rusage(&ru)
    } else {
        Usage::default()
    }
}

/// Usage of every reaped child of this process so far (`RUSAGE_CHILDREN`).
pub fn children() -> Usage {
    // SAFETY: as in `this_thread`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer refers to a live local.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } == 0 {
        Usage::from_rusage(&ru)
    } else {
        Usage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::unistd::{fork, ForkResult};

    fn spawn_exit(code: i32) -> Pid {
        // SAFETY: the child only calls _exit.
        match unsafe { fork() }.unwrap() {
            ForkResult::Child => unsafe { libc::_exit(code) },
            ForkResult::Parent { child } => child,
        }
    }

    #[test]
    fn reaps_exit_codes_and_signals() {
        let a = spawn_exit(7);
        let r = wait_pid(a).unwrap();
        assert_eq!((r.pid, r.exit), (a, Exit::Code(7)));
        assert!(!r.exit.success());
        // SAFETY: the child only pauses until killed.
        let b = match unsafe { fork() }.unwrap() {
            ForkResult::Child => loop {
                unsafe { libc::pause() };
            },
            ForkResult::Parent { child } => child,
        };
        kill_and_reap(&[b]);
        assert!(wait_pid(b).is_err(), "already reaped");
        assert_eq!(Exit::Signal(9).to_string(), "killed by SIGKILL");
    }

    #[test]
    fn usage_arithmetic() {
        let a = Usage {
            user_s: 1.0,
            minor_faults: 10,
            voluntary_switches: 2,
            involuntary_switches: 3,
            ..Default::default()
        };
        let b = a.plus(&a);
        assert_eq!(b.minor_faults, 20);
        assert_eq!(b.since(&a), a);
        assert_eq!(a.since(&b).minor_faults, 0);
        assert_eq!(a.context_switches(), 5);
    }
}
