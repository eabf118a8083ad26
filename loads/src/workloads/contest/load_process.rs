//! Starting, watching and stopping one background load. The load runs in
//! a forked leader process (its own process group) that executes the
//! load's body; contest watches it for an early death, then raises the
//! stop flag, gives it a grace period, kills the whole group if needed,
//! and reaps it with its resource usage (the leader reaps its own
//! children, so their CPU time is in the leader's rusage). Owns process
//! control; must not know what a load does.

use super::background_loads::{self, LoadEnv, LoadKind};
use super::shared_page::{SharedPage, SharedPageError};
use crate::reap::{self, Exit, Reaped};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::{fork, setpgid, ForkResult, Pid};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// Errors of load process control.
#[derive(Debug, thiserror::Error)]
pub enum LoadProcessError {
    /// The shared counters could not be mapped.
    #[error("{load}: cannot set up the load")]
    Shared {
        /// The load.
        load: &'static str,
        /// Why.
        #[source]
        source: SharedPageError,
    },
    /// A system call failed.
    #[error("{load}: {what} failed")]
    Sys {
        /// The load.
        load: &'static str,
        /// The call.
        what: &'static str,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The load ended before contest stopped it (or failed to start).
    #[error("{load} ended {when} ({exit}){}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    DiedEarly {
        /// The load.
        load: &'static str,
        /// `before the build started` or `during the build`.
        when: &'static str,
        /// How the leader ended.
        exit: String,
        /// The body's error, when it reported one.
        message: Option<String>,
    },
    /// Waiting for the leader failed.
    #[error("{load}: cannot reap the load")]
    Reap {
        /// The load.
        load: &'static str,
        /// Why.
        #[source]
        source: reap::ReapError,
    },
}

/// A load whose leader is running.
pub struct RunningLoad {
    kind: LoadKind,
    leader: Pid,
    page: SharedPage,
    started: Instant,
    errors: OwnedFd,
    ended: Option<(Reaped, Instant)>,
}

/// What a stopped load did.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    /// Units of work completed ([`LoadKind::unit`]).
    pub work: u64,
    /// From start to the leader's reaping, s.
    pub wall_s: f64,
    /// CPU time of the leader and its reaped children, s.
    pub cpu_s: f64,
    /// `cpu_s` over `wall_s`, in percent (contest's LCPU%).
    pub cpu_percent: f64,
    /// Load processes the OOM killer took (mem_load restarts its worker).
    pub oom_kills: u64,
    /// True when the grace period ran out and the group was SIGKILLed.
    pub killed: bool,
    /// Seconds from the stop request to the leader's end.
    pub stop_s: f64,
    /// The load's process group (the leader's pid), so callers can check
    /// that nothing of it is left.
    pub pgid: i32,
    /// What the load did while the build ran (between two [`LoadMark`]s):
    /// contest's Loads and LCPU% cover this window only.
    pub window: Option<LoadWindow>,
}

/// The load's counters at one moment: its work and the CPU time of its
/// process group so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadMark {
    /// Units of work completed.
    pub work: u64,
    /// CPU time of the group's processes and the children they reaped, s.
    pub cpu_s: f64,
    /// When it was taken.
    pub at: Instant,
}

/// What a load did between two marks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadWindow {
    /// Units of work completed in the window.
    pub work: u64,
    /// The window's length, s.
    pub wall_s: f64,
    /// CPU time the load's group used in it, s.
    pub cpu_s: f64,
    /// `cpu_s` over `wall_s`, in percent.
    pub cpu_percent: f64,
}

impl LoadWindow {
    /// The load's work and CPU between `from` and `to`.
    pub fn between(from: &LoadMark, to: &LoadMark) -> LoadWindow {
        let wall_s = to.at.saturating_duration_since(from.at).as_secs_f64();
        let cpu_s = (to.cpu_s - from.cpu_s).max(0.0);
        LoadWindow {
            work: to.work.saturating_sub(from.work),
            wall_s,
            cpu_s,
            cpu_percent: if wall_s > 0.0 { cpu_s / wall_s * 100.0 } else { 0.0 },
        }
    }
}

/// CPU time, in s, of every process in process group `pgid`, each with the
/// children it has reaped (utime + stime + cutime + cstime of
/// /proc/PID/stat): a process that ended and was reaped inside the group
/// counts once, in its reaper.
pub fn group_cpu_s(pgid: i32) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0.0 };
    let mut ticks: u64 = 0;
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Some(f) = crate::quiet::stat_after_comm(pid) else { continue };
        // After the comm: state(0) ppid(1) pgrp(2) ... utime(11) stime(12)
        // cutime(13) cstime(14).
        if f.get(2).and_then(|v| v.parse::<i32>().ok()) != Some(pgid) {
            continue;
        }
        let t = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        ticks = ticks.saturating_add(t(11) + t(12) + t(13) + t(14));
    }
    ticks as f64 / crate::system_counters::user_hz() as f64
}

fn sys(load: &'static str, what: &'static str) -> impl FnOnce(nix::Error) -> LoadProcessError {
    move |source| LoadProcessError::Sys { load, what, source }
}

/// Starts `kind` in a new leader process.
pub fn start(kind: LoadKind, env: &LoadEnv) -> Result<RunningLoad, LoadProcessError> {
    let load = kind.name();
    let page = SharedPage::new().map_err(|source| LoadProcessError::Shared { load, source })?;
    let (err_r, err_w) = nix::unistd::pipe().map_err(sys(load, "pipe"))?;
    // SAFETY: the child runs the load's body and leaves with _exit; it
    // never returns into the caller's code.
    match unsafe { fork() }.map_err(sys(load, "fork"))? {
        ForkResult::Child => {
            drop(err_r);
            let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
            let code = match background_loads::run(kind, env, &page) {
                Ok(()) => 0,
                Err(e) => {
                    let mut f = std::fs::File::from(err_w);
                    let _ = f.write_all(crate::error_chain::error_chain(&e).as_bytes());
                    1
                }
            };
            // SAFETY: _exit skips destructors of state shared with the parent.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            drop(err_w);
            // Both sides set the group, so a kill right after fork already
            // reaches it.
            let _ = setpgid(child, child);
            Ok(RunningLoad { kind, leader: child, page, started: Instant::now(), errors: err_r, ended: None })
        }
    }
}

impl RunningLoad {
    /// The load.
    pub fn kind(&self) -> LoadKind {
        self.kind
    }

    /// The load's process group (its leader's pid): the leader and every
    /// process it started.
    pub fn pgid(&self) -> i32 {
        self.leader.as_raw()
    }

    /// Work completed so far.
    pub fn work(&self) -> u64 {
        self.page.work()
    }

    fn body_error(&mut self) -> Option<String> {
        let mut text = String::new();
        let mut f = std::fs::File::from(self.errors.try_clone().ok()?);
        f.read_to_string(&mut text).ok()?;
        let text = text.trim().to_string();
        (!text.is_empty()).then_some(text)
    }

    fn died(&mut self, when: &'static str, r: Reaped) -> LoadProcessError {
        // The group may still hold children of a leader that died.
        let _ = killpg(self.leader, Signal::SIGKILL);
        LoadProcessError::DiedEarly {
            load: self.kind.name(),
            when,
            exit: r.exit.to_string(),
            message: self.body_error(),
        }
    }

    /// Fails when the leader has already ended: a load must run until
    /// contest stops it. `when` says which phase is being checked.
    pub fn check_alive(&mut self, when: &'static str) -> Result<(), LoadProcessError> {
        if self.ended.is_none() {
            if let Some(r) = reap::try_wait_pid(self.leader)
                .map_err(|source| LoadProcessError::Reap { load: self.kind.name(), source })?
            {
                self.ended = Some((r, Instant::now()));
            }
        }
        match self.ended {
            Some((r, _)) => Err(self.died(when, r)),
            None => Ok(()),
        }
    }

    /// Waits `lead`, the head start the load gets before the build,
    /// failing as soon as the load dies.
    pub fn lead(&mut self, lead: Duration) -> Result<(), LoadProcessError> {
        let until = Instant::now() + lead;
        loop {
            self.check_alive("before the build started")?;
            let now = Instant::now();
            if now >= until {
                return Ok(());
            }
            std::thread::sleep((until - now).min(Duration::from_millis(20)));
        }
    }

    /// The load's counters now (see [`LoadWindow::between`]).
    pub fn mark(&self) -> LoadMark {
        LoadMark { work: self.page.work(), cpu_s: group_cpu_s(self.leader.as_raw()), at: Instant::now() }
    }

    /// Stops the load: raises the flag, waits up to `grace`, then kills
    /// the group; reaps the leader and whatever of the group is left.
    pub fn stop(mut self, grace: Duration) -> Result<LoadReport, LoadProcessError> {
        let load = self.kind.name();
        self.check_alive("during the build")?;
        self.page.request_stop();
        let asked = Instant::now();
        let mut killed = false;
        let (reaped, ended) = loop {
            if let Some(r) =
                reap::try_wait_pid(self.leader).map_err(|source| LoadProcessError::Reap { load, source })?
            {
                break (r, Instant::now());
            }
            if asked.elapsed() >= grace && !killed {
                killed = true;
                let _ = killpg(self.leader, Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        self.ended = Some((reaped, ended));
        // Whatever the leader left in its group goes too.
        let _ = killpg(self.leader, Signal::SIGKILL);
        let ok = reaped.exit.success() || (killed && reaped.exit == Exit::Signal(libc::SIGKILL));
        if !ok {
            return Err(LoadProcessError::DiedEarly {
                load,
                when: "while stopping",
                exit: reaped.exit.to_string(),
                message: self.body_error(),
            });
        }
        let wall_s = ended.duration_since(self.started).as_secs_f64();
        let cpu_s = reaped.usage.user_s + reaped.usage.sys_s;
        Ok(LoadReport {
            work: self.page.work(),
            wall_s,
            cpu_s,
            cpu_percent: if wall_s > 0.0 { cpu_s / wall_s * 100.0 } else { 0.0 },
            oom_kills: self.page.oom_kills(),
            killed,
            stop_s: ended.duration_since(asked).as_secs_f64(),
            pgid: self.leader.as_raw(),
            window: None,
        })
    }
}

impl Drop for RunningLoad {
    /// A load dropped without `stop` (an error path) leaves nothing behind.
    fn drop(&mut self) {
        if self.ended.is_none() {
            self.page.request_stop();
            let _ = killpg(self.leader, Signal::SIGKILL);
            let _ = reap::wait_pid(self.leader);
            self.ended = Some((
                Reaped { pid: self.leader, exit: Exit::Signal(libc::SIGKILL), usage: Default::default() },
                Instant::now(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::contest::background_loads::LoadEnv;

    fn env(dir: &std::path::Path) -> LoadEnv {
        LoadEnv::small(dir, 2, std::path::PathBuf::from(crate::applet_argv::SELF_EXE))
    }

    /// contest's Loads and LCPU% are the build's window only: a load that
    /// ran alone for its head start did more over its life than in the
    /// window, and the window's CPU time is bounded by its length.
    #[test]
    fn a_window_counts_only_what_the_load_did_between_its_marks() {
        let dir = tempfile::tempdir().unwrap();
        let mut load = start(LoadKind::Fork, &env(dir.path())).unwrap();
        load.lead(Duration::from_millis(700)).unwrap();
        let from = load.mark();
        std::thread::sleep(Duration::from_millis(300));
        let to = load.mark();
        let report = load.stop(Duration::from_secs(10)).unwrap();
        let w = LoadWindow::between(&from, &to);
        assert!(from.work > 0 && from.cpu_s > 0.05, "the head start did work: {from:?}");
        assert!(w.work > 0 && w.work < report.work, "window {w:?}, whole life {report:?}");
        assert!((0.25..0.6).contains(&w.wall_s), "{w:?}");
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        assert!(w.cpu_s > 0.0 && w.cpu_s <= w.wall_s * cpus + 0.05, "{w:?}");
        assert!(report.cpu_s > w.cpu_s, "the whole life includes the head start: {report:?} vs {w:?}");
    }

    /// A group's CPU time includes the children its members reaped.
    #[test]
    fn group_cpu_counts_live_members_and_the_children_they_reaped() {
        // SAFETY: the child only spins, forks and exits with _exit.
        match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
                // SAFETY: as above.
                if let Ok(ForkResult::Child) = unsafe { fork() } {
                    // 0.3 s of CPU, however busy the machine is.
                    let cpu = || nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID).unwrap();
                    let t0 = Duration::from(cpu());
                    while Duration::from(cpu()) - t0 < Duration::from_millis(300) {
                        std::hint::spin_loop();
                    }
                    unsafe { libc::_exit(0) }
                }
                let _ = nix::sys::wait::wait();
                std::thread::sleep(Duration::from_secs(30));
                unsafe { libc::_exit(0) }
            }
            ForkResult::Parent { child } => {
                let t0 = Instant::now();
                let mut seen = 0.0;
                while t0.elapsed() < Duration::from_secs(20) && seen < 0.25 {
                    std::thread::sleep(Duration::from_millis(50));
                    seen = group_cpu_s(child.as_raw());
                }
                let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
                let _ = nix::sys::wait::waitpid(child, None);
                assert!(seen >= 0.25, "the reaped grandchild's 0.3 s are not counted: {seen}");
            }
        }
    }
}
