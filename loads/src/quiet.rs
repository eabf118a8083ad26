//! Evidence that userland stayed silent while a workload was measured:
//! PID 1's context switches, and userspace tasks outside the workload's own
//! process tree. Reads /proc only.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::collections::HashMap;
use std::fs;

/// PID 1's (voluntary, involuntary) context switches, from /proc/1/status.
pub fn pid1_switches() -> Option<(u64, u64)> {
    let status = fs::read_to_string("/proc/1/status").ok()?;
    let field =
        |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse::<u64>().ok());
    Some((field("voluntary_ctxt_switches:")?, field("nonvoluntary_ctxt_switches:")?))
}

/// This process's blocked and ignored signals and OOM adjustment.
pub fn process_state() -> Option<crate::schema::ProcessState> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
    Some(crate::schema::ProcessState {
        signals_blocked: field("SigBlk:")?,
        signals_ignored: field("SigIgn:")?,
        oom_score_adj: fs::read_to_string("/proc/self/oom_score_adj").ok()?.trim().parse().ok()?,
    })
}

const PF_KTHREAD: u64 = 0x0020_0000;

/// The fields of /proc/PID/stat after the comm, the state first. The comm
/// may hold spaces and parentheses, so fields are counted from its closing
/// parenthesis.
pub fn stat_after_comm(pid: i32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    Some(after.split_whitespace().map(str::to_string).collect())
}

/// (ppid, flags) from /proc/PID/stat.
fn stat_fields(pid: i32) -> Option<(i32, u64)> {
    let f = stat_after_comm(pid)?;
    // After the comm: state(0) ppid(1) pgrp session tty_nr tpgid flags(6)
    Some((f.get(1)?.parse().ok()?, f.get(6)?.parse().ok()?))
}

/// One userspace process as /proc shows it, for reports of processes that
/// outlived their workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Its pid.
    pub pid: i32,
    /// Its command name.
    pub comm: String,
    /// Its state letter (`D` is uninterruptible sleep, `Z` a zombie).
    pub state: String,
    /// The kernel function it sleeps in, when /proc says.
    pub wchan: String,
    /// Whether SIGKILL is already pending for it (it is dying).
    pub kill_pending: bool,
}

impl std::fmt::Display for ProcessInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} ({}) state {} wchan {}", self.pid, self.comm, self.state, self.wchan)
    }
}

/// Whether SIGKILL is pending for `pid`, to it or its thread group
/// (`SigPnd`/`ShdPnd` of /proc/PID/status).
fn kill_pending(pid: i32) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    let sigkill_bit = 1u64 << (libc::SIGKILL - 1);
    status
        .lines()
        .filter_map(|l| l.strip_prefix("SigPnd:").or_else(|| l.strip_prefix("ShdPnd:")))
        .filter_map(|v| u64::from_str_radix(v.trim(), 16).ok())
        .any(|mask| mask & sigkill_bit != 0)
}

/// Every userspace process but PID 1 (kernel threads left out). Never
/// panics: PID 1 calls it between workloads.
pub fn userspace_processes() -> Vec<ProcessInfo> {
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if pid == 1 {
            continue;
        }
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some((head, after)) = stat.rsplit_once(')') else { continue };
        let comm = head.split_once('(').map(|(_, c)| c.to_string()).unwrap_or_default();
        let f: Vec<&str> = after.split_whitespace().collect();
        let flags = f.get(6).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if flags & PF_KTHREAD != 0 {
            continue;
        }
        out.push(ProcessInfo {
            pid,
            comm,
            state: f.first().map(|s| s.to_string()).unwrap_or_default(),
            wchan: fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default().trim().to_string(),
            kill_pending: kill_pending(pid),
        });
    }
    out.sort_by_key(|p| p.pid);
    out
}

/// Userspace processes other than PID 1 and the tree rooted at `root`.
pub fn other_userspace_tasks(root: i32) -> u32 {
    let Ok(dir) = fs::read_dir("/proc") else { return 0 };
    let mut parent: HashMap<i32, i32> = HashMap::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if let Some((ppid, flags)) = stat_fields(pid) {
            if flags & PF_KTHREAD == 0 {
                parent.insert(pid, ppid);
            }
        }
    }
    let in_tree = |mut pid: i32| {
        for _ in 0..64 {
            if pid == root {
                return true;
            }
            match parent.get(&pid) {
                Some(&p) if p > 0 => pid = p,
                _ => return false,
            }
        }
        false
    };
    parent.keys().filter(|&&pid| pid != 1 && !in_tree(pid)).count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_state_reads_masks() {
        let st = process_state().unwrap();
        assert_eq!(st.signals_blocked.len(), 16, "{st:?}");
        assert!(u64::from_str_radix(&st.signals_ignored, 16).is_ok());
    }

    #[test]
    fn userspace_processes_lists_a_child_with_its_state() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        // Right after the spawn the child may still be this test's fork,
        // not yet exec'd: wait until it is `sleep`, asleep.
        let settled = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.contains("(sleep) S")
        };
        let t0 = std::time::Instant::now();
        while !settled() && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let seen = userspace_processes();
        child.kill().unwrap();
        child.wait().unwrap();
        let me = seen.iter().find(|p| p.pid == pid).unwrap_or_else(|| panic!("{pid} not in {seen:?}"));
        assert_eq!(me.comm, "sleep");
        assert!(["S", "R"].contains(&me.state.as_str()), "{me}");
        assert!(!me.kill_pending, "{me:?}");
        assert!(seen.iter().all(|p| p.pid != 1));
    }

    #[test]
    fn own_tree_is_not_counted() {
        let me = std::process::id() as i32;
        let with_me = other_userspace_tasks(me);
        let without_root = other_userspace_tasks(-1);
        assert!(without_root > with_me, "{without_root} vs {with_me}");
    }
}
