//! What the progress bars say: pure functions of what a long piece of
//! work knows (a boot's guest progress, a bisection's steps), so the
//! wording is tested without a terminal.

use qemu::GuestProgress;
use std::time::Duration;

/// The workload a boot is running now: the next one of `workloads` (the
/// guest's suite, in order) after those whose streams ended, else the one
/// the last `alive` event named; `None` before the init said hello or
/// after the last workload ended.
pub fn current_workload<'a>(progress: &'a GuestProgress, workloads: &'a [String]) -> Option<&'a str> {
    if !progress.hello {
        return None;
    }
    workloads.get(progress.workloads_done).map(String::as_str).or(progress.alive_workload.as_deref())
}

/// What one boot is doing: `booting`, `running NAME (k of n)` or
/// `writing the result`, with the time the last boot of this kernel took
/// when there was one.
pub fn boot_status(progress: &GuestProgress, workloads: &[String], expected: Option<Duration>) -> String {
    let doing = if !progress.hello {
        "booting the kernel".to_string()
    } else if progress.workloads_done >= workloads.len() && !workloads.is_empty() {
        "all workloads done; writing the result".to_string()
    } else {
        match current_workload(progress, workloads) {
            Some(name) => {
                format!(
                    "running {name} ({} of {})",
                    (progress.workloads_done + 1).min(workloads.len()),
                    workloads.len()
                )
            }
            None => "running the suite".to_string(),
        }
    };
    match expected {
        Some(d) => format!("{doing}; the last boot of this kernel took {}", seconds(d)),
        None => doing,
    }
}

/// `N s` or `M min S s`.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs();
    if s < 120 {
        format!("{s} s")
    } else {
        format!("{} min {} s", s / 60, s % 60)
    }
}

/// About how many steps a bisection of `commits` candidates takes:
/// ⌈log2(commits)⌉ (at least 1).
pub fn bisection_steps(commits: usize) -> u64 {
    (usize::BITS - commits.saturating_sub(1).leading_zeros()).max(1) as u64
}

/// What a bisection has done: boots so far, the last verdict (commit
/// shortened to 12 digits), the commits still in the range.
pub fn bisect_status(boots: usize, last: Option<(&str, String)>, remaining: Option<u64>) -> String {
    let mut s = format!("bisect: {boots} boot{}", if boots == 1 { "" } else { "s" });
    if let Some((commit, verdict)) = last {
        s.push_str(&format!(", last {} {verdict}", commit.get(..12).unwrap_or(commit)));
    }
    if let Some(n) = remaining {
        s.push_str(&format!(", ~{n} commit{} left", if n == 1 { "" } else { "s" }));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["fork", "dbench", "hackbench"].map(String::from).to_vec()
    }

    #[test]
    fn a_boot_says_what_it_does_from_the_guests_events() {
        let mut p = GuestProgress::default();
        assert_eq!(boot_status(&p, &names(), None), "booting the kernel");
        p.hello = true;
        assert_eq!(boot_status(&p, &names(), None), "running fork (1 of 3)");
        p.workloads_done = 1;
        p.alive_workload = Some("fork".into());
        // The stream that ended says more than an older alive event.
        assert_eq!(boot_status(&p, &names(), None), "running dbench (2 of 3)");
        p.workloads_done = 3;
        assert_eq!(
            boot_status(&p, &names(), Some(Duration::from_secs(185))),
            "all workloads done; writing the result; the last boot of this kernel took 3 min 5 s"
        );
        // A suite the host does not know: the alive event names it.
        p.workloads_done = 0;
        p.alive_workload = Some("contest".into());
        assert_eq!(current_workload(&p, &[]), Some("contest"));
    }

    #[test]
    fn a_bisection_says_its_boots_last_verdict_and_what_is_left() {
        assert_eq!(bisect_status(0, None, None), "bisect: 0 boots");
        assert_eq!(
            bisect_status(1, Some(("0123456789abcdef", "bad".into())), Some(1)),
            "bisect: 1 boot, last 0123456789ab bad, ~1 commit left"
        );
        assert_eq!(
            bisect_status(14, Some(("abc", "good".into())), Some(37)),
            "bisect: 14 boots, last abc good, ~37 commits left"
        );
    }

    #[test]
    fn bisection_steps_are_the_ceiling_of_log2() {
        let got: Vec<u64> = [0, 1, 2, 3, 4, 5, 8, 9, 1000, 1024, 1025].map(bisection_steps).to_vec();
        assert_eq!(got, [1, 1, 1, 2, 2, 3, 3, 4, 10, 10, 11]);
    }
}
