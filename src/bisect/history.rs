//! The commit history a bisection walks, and which commit to test next.
//! [`GitHistory`] asks git itself: `git rev-list --bisect-all BAD --not
//! GOOD...` lists the candidates best midpoint first (git's own bisection
//! algorithm, merges included), and skipped commits are passed over the way
//! `git bisect skip` does. The bisection's verdicts stay in bootbench's state
//! file rather than in `.git/BISECT_*`, so a crash or a host reboot cannot
//! leave the two out of step. This module reads the repository; it never
//! checks anything out (the lab does) and never runs `git bisect`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors reading the history.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// git could not be run.
    #[error("cannot run git in {tree}")]
    Spawn {
        /// The tree.
        tree: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A git command failed.
    #[error("`git {args}` failed in {tree}: {stderr}")]
    Git {
        /// The tree.
        tree: PathBuf,
        /// Its arguments.
        args: String,
        /// What git said.
        stderr: String,
    },
    /// A revision that does not name a commit.
    #[error("'{rev}' is not a commit in {tree}")]
    BadRevision {
        /// The tree.
        tree: PathBuf,
        /// The revision as given.
        rev: String,
    },
    /// The good end is not an ancestor of the bad end.
    #[error(
        "good commit {good} is not an ancestor of bad commit {bad}: give a good revision the bad one descends from"
    )]
    NotAncestor {
        /// The good end.
        good: String,
        /// The bad end.
        bad: String,
    },
    /// The bad bound is reachable from a good commit: verdicts contradict.
    #[error("bad commit {bad} is reachable from a good commit: the verdicts contradict each other")]
    Contradiction {
        /// The bad bound.
        bad: String,
    },
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextStep {
    /// Test this commit.
    Test {
        /// The commit.
        commit: String,
        /// Candidates left (bad bound included).
        remaining: u64,
    },
    /// The bad bound is the first bad commit.
    FirstBad(String),
    /// Only skipped commits are left between the bounds: the first bad
    /// commit is one of these (the bad bound included).
    OnlySkipped(Vec<String>),
}

/// A history to bisect.
pub trait History {
    /// The next step, given the bad bound, the good commits and the skipped
    /// ones.
    fn next(&mut self, bad: &str, goods: &[String], skipped: &[String]) -> Result<NextStep, HistoryError>;
    /// The first parent of `commit`.
    fn first_parent(&mut self, commit: &str) -> Result<Option<String>, HistoryError>;
    /// A commit's subject line.
    fn subject(&mut self, commit: &str) -> Result<String, HistoryError>;
    /// Index of `commit` in the original range, oldest first, 0 = good end.
    fn position(&self, commit: &str) -> Option<u64>;
}

/// A git repository's history.
#[derive(Debug, Clone)]
pub struct GitHistory {
    tree: PathBuf,
    first_parent: bool,
    positions: HashMap<String, u64>,
}

/// Runs git in `tree` and returns its stdout.
pub fn git(tree: &Path, args: &[&str]) -> Result<String, HistoryError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(tree)
        .args(args)
        .output()
        .map_err(|source| HistoryError::Spawn { tree: tree.into(), source })?;
    if !out.status.success() {
        return Err(HistoryError::Git {
            tree: tree.into(),
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The full object name of the commit `rev` names.
pub fn resolve(tree: &Path, rev: &str) -> Result<String, HistoryError> {
    match git(tree, &["rev-parse", "--verify", "--quiet", &format!("{rev}^{{commit}}")]) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Ok(_) | Err(HistoryError::Git { .. }) => Err(HistoryError::BadRevision { tree: tree.into(), rev: rev.into() }),
        Err(e) => Err(e),
    }
}

impl GitHistory {
    /// The history of `good..bad` in `tree`; `first_parent` follows only
    /// first parents (bisecting merges as units).
    pub fn open(tree: &Path, good: &str, bad: &str, first_parent: bool) -> Result<GitHistory, HistoryError> {
        let ancestor = Command::new("git")
            .arg("-C")
            .arg(tree)
            .args(["merge-base", "--is-ancestor", good, bad])
            .status()
            .map_err(|source| HistoryError::Spawn { tree: tree.into(), source })?;
        if !ancestor.success() {
            return Err(HistoryError::NotAncestor { good: good.into(), bad: bad.into() });
        }
        let mut args = vec!["rev-list", "--reverse", "--topo-order"];
        if first_parent {
            args.push("--first-parent");
        }
        let range = format!("{good}..{bad}");
        args.push(&range);
        let list = git(tree, &args)?;
        let mut positions: HashMap<String, u64> = HashMap::new();
        positions.insert(good.to_string(), 0);
        for (i, sha) in list.lines().enumerate() {
            positions.insert(sha.trim().to_string(), i as u64 + 1);
        }
        Ok(GitHistory { tree: tree.into(), first_parent, positions })
    }

    /// The history of `tree` without a range (for `git bisect run`, where
    /// git keeps the range): positions are unknown.
    pub fn without_range(tree: &Path) -> GitHistory {
        GitHistory { tree: tree.into(), first_parent: false, positions: HashMap::new() }
    }

    /// Candidate commits in the original range (bad end included).
    pub fn range_commits(&self) -> u64 {
        (self.positions.len() as u64).saturating_sub(1)
    }
}

impl History for GitHistory {
    fn next(&mut self, bad: &str, goods: &[String], skipped: &[String]) -> Result<NextStep, HistoryError> {
        let mut args: Vec<&str> = vec!["rev-list", "--bisect-all"];
        if self.first_parent {
            args.push("--first-parent");
        }
        args.push(bad);
        args.push("--not");
        args.extend(goods.iter().map(String::as_str));
        let out = git(&self.tree, &args)?;
        // Lines are "<sha> (dist=N)", best midpoint first.
        let listed: Vec<&str> = out.lines().filter_map(|l| l.split_whitespace().next()).collect();
        pick(bad, &listed, skipped)
    }

    fn first_parent(&mut self, commit: &str) -> Result<Option<String>, HistoryError> {
        match git(&self.tree, &["rev-parse", "--verify", "--quiet", &format!("{commit}^1")]) {
            Ok(s) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
            Err(HistoryError::Git { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn subject(&mut self, commit: &str) -> Result<String, HistoryError> {
        Ok(git(&self.tree, &["log", "-1", "--format=%s", commit])?.trim().to_string())
    }

    fn position(&self, commit: &str) -> Option<u64> {
        self.positions.get(commit).copied()
    }
}

/// Chooses the next step from the candidates listed best first (the bad
/// bound among them). Shared by git and simulated histories, so both skip
/// alike.
pub fn pick(bad: &str, listed: &[&str], skipped: &[String]) -> Result<NextStep, HistoryError> {
    match listed {
        [] => Err(HistoryError::Contradiction { bad: bad.into() }),
        [only] if *only == bad => Ok(NextStep::FirstBad(bad.into())),
        _ => {
            let remaining = listed.len() as u64;
            match listed.iter().find(|c| **c != bad && !skipped.iter().any(|s| s == *c)) {
                Some(c) => Ok(NextStep::Test { commit: c.to_string(), remaining }),
                None => {
                    let mut left: Vec<String> = listed.iter().filter(|c| **c != bad).map(|c| c.to_string()).collect();
                    left.push(bad.to_string());
                    Ok(NextStep::OnlySkipped(left))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, script: &str) {
        let st = Command::new("sh").arg("-c").arg(script).current_dir(dir).status().unwrap();
        assert!(st.success(), "{script}");
    }

    /// A linear history c0..c8 plus a side branch merged at m.
    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        sh(
            d.path(),
            "git init -q . && git config user.email t@example.invalid && git config user.name t && \
             for i in 0 1 2 3 4 5 6 7 8; do echo $i > f; git add f; git commit -qm c$i; git tag c$i; done",
        );
        d
    }

    #[test]
    fn bisects_a_linear_range_like_git() {
        let d = repo();
        let t = d.path();
        let c = |n: u32| resolve(t, &format!("c{n}")).unwrap();
        let mut h = GitHistory::open(t, &c(0), &c(8), false).unwrap();
        assert_eq!(h.range_commits(), 8);
        assert_eq!(h.position(&c(0)), Some(0));
        assert_eq!(h.position(&c(5)), Some(5));
        assert_eq!(h.subject(&c(3)).unwrap(), "c3");
        assert_eq!(h.first_parent(&c(3)).unwrap(), Some(c(2)));
        assert_eq!(h.first_parent(&c(0)).unwrap(), None);
        // git's midpoint of 8 candidates is c4.
        let step = h.next(&c(8), &[c(0)], &[]).unwrap();
        assert_eq!(step, NextStep::Test { commit: c(4), remaining: 8 });
        // Skipping c4 moves to a neighbour.
        match h.next(&c(8), &[c(0)], &[c(4)]).unwrap() {
            NextStep::Test { commit, .. } => assert!(commit == c(3) || commit == c(5), "{commit}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(h.next(&c(5), &[c(0), c(4)], &[]).unwrap(), NextStep::FirstBad(c(5)));
        assert_eq!(h.next(&c(6), &[c(4)], &[c(5)]).unwrap(), NextStep::OnlySkipped(vec![c(5), c(6)]));
        assert!(matches!(h.next(&c(4), &[c(6)], &[]), Err(HistoryError::Contradiction { .. })));
    }

    #[test]
    fn bad_revisions_and_ranges_are_clear_errors() {
        let d = repo();
        let t = d.path();
        let e = resolve(t, "nope").unwrap_err();
        assert!(e.to_string().contains("'nope' is not a commit"), "{e}");
        let (c2, c5) = (resolve(t, "c2").unwrap(), resolve(t, "c5").unwrap());
        let e = GitHistory::open(t, &c5, &c2, false).unwrap_err();
        assert!(matches!(e, HistoryError::NotAncestor { .. }), "{e}");
    }

    #[test]
    fn pick_handles_the_edges() {
        let skipped = vec!["a".to_string()];
        assert_eq!(pick("b", &["b"], &[]).unwrap(), NextStep::FirstBad("b".into()));
        assert_eq!(pick("b", &["a", "b"], &skipped).unwrap(), NextStep::OnlySkipped(vec!["a".into(), "b".into()]));
        assert_eq!(pick("b", &["b", "a"], &[]).unwrap(), NextStep::Test { commit: "a".into(), remaining: 2 });
    }
}
