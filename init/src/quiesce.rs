//! Between workloads, nothing but PID 1 may be alive. A workload may leave
//! processes behind (a crash, the watchdog, loads that `setsid` into their
//! own sessions): they would run during the next workload's measurement,
//! the late steps and the upload. After every workload PID 1 sends SIGKILL
//! to every other process (`kill(-1)`), reaps them all with a bound, and
//! checks that /proc is empty of userspace again. A process stuck in
//! uninterruptible sleep survives SIGKILL: it is reported with its state
//! and wchan, and PID 1 never waits for it without a bound.

use crate::signals;
use loads::quiet::{userspace_processes, ProcessInfo};
use nix::sys::signal::{kill, Signal};
use nix::sys::signalfd::SignalFd;
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// How long processes get to die after SIGKILL before they are reported
/// (a large memory load takes a while to free its pages under TCG).
pub const KILL_WAIT: Duration = Duration::from_secs(20);

/// What the clean-up after one workload found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quiesced {
    /// Processes that were still alive and got SIGKILL.
    pub killed: Vec<ProcessInfo>,
    /// Processes alive after [`KILL_WAIT`] (stuck, e.g. in state `D`).
    pub stuck: Vec<ProcessInfo>,
}

impl Quiesced {
    /// One line for the console and the result, or `None` when nothing was
    /// left behind.
    pub fn summary(&self, workload: &str) -> Option<String> {
        if self.killed.is_empty() && self.stuck.is_empty() {
            return None;
        }
        let names = |v: &[ProcessInfo]| v.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        let mut s = format!(
            "workload {workload} left {} process(es) behind, killed: {}",
            self.killed.len(),
            names(&self.killed)
        );
        if !self.stuck.is_empty() {
            s.push_str(&format!(
                "; {} could not be killed within {} s: {}",
                self.stuck.len(),
                KILL_WAIT.as_secs(),
                names(&self.stuck)
            ));
        }
        Some(s)
    }
}

/// Kills and reaps every process but PID 1, waiting at most [`KILL_WAIT`].
pub fn after_workload(sfd: Option<&SignalFd>) -> Quiesced {
    signals::reap_all();
    // A process already dying of SIGKILL (a load its workload killed on the
    // way out) was not left behind; it only gets time to go.
    let killed: Vec<ProcessInfo> =
        userspace_processes().into_iter().filter(|p| p.state != "Z" && !p.kill_pending).collect();
    if killed.is_empty() && !signals::any_children() && userspace_processes().is_empty() {
        return Quiesced::default();
    }
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    let t0 = Instant::now();
    let mut stuck;
    loop {
        signals::reap_all();
        // Zombies not ours are reaped by their parents, which are dying too.
        stuck = userspace_processes();
        if stuck.is_empty() {
            break;
        }
        let remaining = KILL_WAIT.saturating_sub(t0.elapsed());
        if remaining.is_zero() {
            break;
        }
        signals::wait_for_signal(sfd, remaining.min(Duration::from_millis(100)));
    }
    Quiesced { killed, stuck }
}
