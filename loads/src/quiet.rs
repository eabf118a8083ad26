//! Evidence that userland stayed silent while a workload was measured:
//! PID 1's context switches, and userspace tasks outside the workload's own
//! process tree. Reads /proc only.

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

/// (ppid, flags) from /proc/PID/stat; the comm field may hold spaces and
/// parentheses, so fields are counted from its closing parenthesis.
fn stat_fields(pid: i32) -> Option<(i32, u64)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the comm: state(0) ppid(1) pgrp session tty_nr tpgid flags(6)
    Some((f.get(1)?.parse().ok()?, f.get(6)?.parse().ok()?))
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
    fn own_tree_is_not_counted() {
        let me = std::process::id() as i32;
        let with_me = other_userspace_tasks(me);
        let without_root = other_userspace_tasks(-1);
        assert!(without_root > with_me, "{without_root} vs {with_me}");
    }
}
