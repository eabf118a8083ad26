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
