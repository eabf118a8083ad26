//! What a bisection has running in the tree, written down before it starts
//! and removed when it ends, so that a resume after bootbench was killed
//! (SIGKILL, the OOM killer, a lost terminal) can clean up what the dead run
//! left behind:
//!
//! - a `git checkout` killed halfway leaves git's `index.lock`, and every
//!   later checkout then fails with "Unable to create index.lock: File
//!   exists": the lock is removed, once no git process is left working in
//!   the tree;
//! - a build command runs in its own process group, which a kill of
//!   bootbench does not reach: the group is killed, so no stale build writes
//!   into the tree while the resumed run builds there.
//!
//! Nothing else is touched: only the lock file of a checkout recorded as
//! started and not ended, only the process group recorded, and of it only
//! when one of its processes works inside the tree. The caller holds the
//! bisection's state lock ([`StateLock`]), so the run that wrote the lease
//! is known to be gone.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Errors of the lease and the state lock.
#[derive(Debug, thiserror::Error)]
pub enum TreeLeaseError {
    /// A file could not be read, written or removed.
    #[error("cannot {what} {path}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The lease file is not one this module wrote.
    #[error("{path} is not a tree lease ({why}); remove it if no bisection is running")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// Another bootbench holds the bisection's state lock.
    #[error("another bootbench bisect is running on {state} (it holds {lock}); wait for it to end or stop it first")]
    Busy {
        /// The state file.
        state: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// Another bisection works in the tree.
    #[error("another bootbench bisect works in {tree} (it holds {lock}); two bisections cannot share a tree: wait for it to end, or bisect in another work tree (git worktree add)")]
    TreeBusy {
        /// The tree.
        tree: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// git's processes of the dead run still work in the tree.
    #[error("a git process of the bisection that was stopped still works in {tree} (pids {pids:?}); wait for it to end, then resume")]
    GitStillRunning {
        /// The tree.
        tree: PathBuf,
        /// The processes.
        pids: Vec<i32>,
    },
    /// git could not do what the clean-up needs.
    #[error("cannot {what} in {tree}: {why}")]
    Git {
        /// What was asked of git.
        what: &'static str,
        /// The tree.
        tree: PathBuf,
        /// What git said.
        why: String,
    },
}

/// What was running in the tree when the lease was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "running", rename_all = "snake_case")]
pub enum Running {
    /// A `git checkout` (written before git starts, so a kill at any moment
    /// of it is covered).
    Checkout,
    /// The build command, in process group `pgid`.
    Build {
        /// Its process group.
        pgid: i32,
    },
}

/// The lease file of one bisection (in its artifacts directory).
#[derive(Debug, Clone)]
pub struct TreeLease {
    path: PathBuf,
    tree: PathBuf,
}

impl TreeLease {
    /// The lease of the bisection whose artifacts are in `artifacts`,
    /// working in `tree`.
    pub fn new(artifacts: &Path, tree: &Path) -> TreeLease {
        TreeLease { path: artifacts.join("tree-lease.json"), tree: tree.to_path_buf() }
    }

    /// Records that `running` starts now (atomically: a kill leaves the old
    /// file or the new one, never half of one).
    pub fn begin(&self, running: Running) -> Result<(), TreeLeaseError> {
        let tmp = self.path.with_extension("json.tmp");
        let text = serde_json::to_string(&running).expect("a lease serialises");
        std::fs::write(&tmp, text).map_err(|source| TreeLeaseError::Io { what: "write", path: tmp.clone(), source })?;
        std::fs::rename(&tmp, &self.path).map_err(|source| TreeLeaseError::Io {
            what: "rename into place",
            path: self.path.clone(),
            source,
        })
    }

    /// Records that `running` starts now, and that it has ended when the
    /// returned guard is dropped (or [`Held::end`] is called).
    pub fn hold(&self, running: Running) -> Result<Held<'_>, TreeLeaseError> {
        self.begin(running)?;
        Ok(Held { lease: self, ended: false })
    }

    /// Records that what was running has ended.
    pub fn end(&self) -> Result<(), TreeLeaseError> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(TreeLeaseError::Io { what: "remove", path: self.path.clone(), source: e })
            }
            _ => Ok(()),
        }
    }

    /// What the lease says was running, if anything.
    pub fn read(&self) -> Result<Option<Running>, TreeLeaseError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(TreeLeaseError::Io { what: "read", path: self.path.clone(), source }),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| TreeLeaseError::Corrupt { path: self.path.clone(), why: e.to_string() })
    }

    /// Cleans up after the run that wrote the lease (it must be gone: hold
    /// the [`StateLock`]) and removes the lease. Returns what it did, one
    /// sentence each, for the user.
    pub fn recover(&self, git_wait: Duration) -> Result<Vec<String>, TreeLeaseError> {
        let Some(running) = self.read()? else { return Ok(Vec::new()) };
        let mut done = Vec::new();
        match running {
            Running::Checkout => {
                let deadline = Instant::now() + git_wait;
                let mut git = git_processes_in(&self.tree);
                while !git.is_empty() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(100));
                    git = git_processes_in(&self.tree);
                }
                if !git.is_empty() {
                    return Err(TreeLeaseError::GitStillRunning { tree: self.tree.clone(), pids: git });
                }
                let lock = index_lock(&self.tree)?;
                if lock.exists() {
                    std::fs::remove_file(&lock).map_err(|source| TreeLeaseError::Io {
                        what: "remove the stale git lock",
                        path: lock.clone(),
                        source,
                    })?;
                    done.push(format!("removed {} left by the checkout the stopped run was doing", lock.display()));
                    // git writes the files before the index and HEAD: a
                    // checkout killed halfway leaves some files of the new
                    // commit under the old HEAD, and the next checkout
                    // would refuse them as local changes. The tree was
                    // clean when the bisection started and only its
                    // checkouts change tracked files, so they go back to
                    // HEAD (untracked build output stays). Only after a
                    // checkout killed while it held the lock: anything else
                    // in the tree may be the user's. A kill during this
                    // reset leaves the lease, and the next resume does it
                    // again.
                    run_git(&self.tree, "reset the tracked files", &["reset", "--hard", "--quiet"])?;
                    done.push(format!(
                        "reset the tracked files of {} to HEAD after the checkout the stopped run was doing",
                        self.tree.display()
                    ));
                }
            }
            Running::Build { pgid } => {
                let members = group_members(pgid);
                if members.iter().any(|&pid| works_inside(pid, &self.tree)) {
                    let _ =
                        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), nix::sys::signal::Signal::SIGKILL);
                    done.push(format!(
                        "killed the build the stopped run had left running in {} (process group {pgid}, {} processes)",
                        self.tree.display(),
                        members.len()
                    ));
                }
            }
        }
        self.end()?;
        Ok(done)
    }
}

/// A lease held while something runs in the tree; dropping it ends it.
#[derive(Debug)]
pub struct Held<'a> {
    lease: &'a TreeLease,
    ended: bool,
}

impl Held<'_> {
    /// Ends the lease now, saying whether that worked.
    pub fn end(mut self) -> Result<(), TreeLeaseError> {
        self.ended = true;
        self.lease.end()
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // A lease left behind costs a resume one harmless check.
            let _ = self.lease.end();
        }
    }
}

/// The exclusive lock of one bisection's state: held for the whole run, so
/// two runs never share a state, a tree lease or a tree's checkout.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

impl StateLock {
    /// Takes the lock of `state` (the file `STATE.lock` beside it), or says
    /// which run holds it.
    pub fn take(state: &Path) -> Result<StateLock, TreeLeaseError> {
        let mut name = state.as_os_str().to_os_string();
        name.push(".lock");
        let lock = PathBuf::from(name);
        match try_lock(&lock)? {
            Some(file) => Ok(StateLock { _file: file }),
            None => Err(TreeLeaseError::Busy { state: state.into(), lock }),
        }
    }
}

/// The file `lock`, opened (made if missing) and locked exclusively;
/// `None` when another process holds it.
fn try_lock(lock: &Path) -> Result<Option<File>, TreeLeaseError> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock)
        .map_err(|source| TreeLeaseError::Io { what: "open the lock file", path: lock.into(), source })?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(source)) => {
            Err(TreeLeaseError::Io { what: "lock", path: lock.into(), source })
        }
    }
}

/// Runs git with `args` in `tree` and returns what it printed.
fn run_git(tree: &Path, what: &'static str, args: &[&str]) -> Result<String, TreeLeaseError> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(tree)
        .args(args)
        .output()
        .map_err(|e| TreeLeaseError::Git { what, tree: tree.into(), why: e.to_string() })?;
    if !out.status.success() {
        return Err(TreeLeaseError::Git {
            what,
            tree: tree.into(),
            why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The exclusive lock of one tree: held for a bisection's whole run, so
/// two bisections with different states never check out, build or clean up
/// in one tree at once.
#[derive(Debug)]
pub struct TreeLock {
    _file: File,
}

impl TreeLock {
    /// Takes the lock of `tree` (a file in its git directory), or says that
    /// another bisection holds it.
    pub fn take(tree: &Path) -> Result<TreeLock, TreeLeaseError> {
        let lock = git_path(tree, "bootbench-bisect.lock")?;
        match try_lock(&lock)? {
            Some(file) => Ok(TreeLock { _file: file }),
            None => Err(TreeLeaseError::TreeBusy { tree: tree.into(), lock }),
        }
    }
}

/// Where git keeps `name` for `tree` (`git rev-parse --git-path`: worktrees
/// have their own).
fn git_path(tree: &Path, name: &str) -> Result<PathBuf, TreeLeaseError> {
    let p = PathBuf::from(run_git(tree, "find the git directory", &["rev-parse", "--git-path", name])?);
    Ok(if p.is_absolute() { p } else { tree.join(p) })
}

/// git's index lock of `tree`.
fn index_lock(tree: &Path) -> Result<PathBuf, TreeLeaseError> {
    git_path(tree, "index.lock")
}

/// Every process of this machine, with its `/proc/PID/stat` fields after
/// the command name (a name may hold spaces and parentheses).
fn processes() -> Vec<(i32, String, Vec<String>)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let comm = stat[open + 1..close].to_string();
        let rest = stat[close + 1..].split_whitespace().map(str::to_string).collect();
        out.push((pid, comm, rest));
    }
    out
}

/// The processes of group `pgid` (the fifth field of `stat`, third after
/// the name).
fn group_members(pgid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|(_, _, rest)| rest.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid))
        .map(|(pid, _, _)| pid)
        .collect()
}

/// Whether `pid`'s working directory is `tree` or below it.
fn works_inside(pid: i32, tree: &Path) -> bool {
    let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) else { return false };
    let tree = tree.canonicalize().unwrap_or_else(|_| tree.to_path_buf());
    cwd.starts_with(&tree)
}

/// git processes working in `tree` (`git -C TREE` changes into it).
fn git_processes_in(tree: &Path) -> Vec<i32> {
    let me = std::process::id() as i32;
    processes()
        .into_iter()
        .filter(|(pid, comm, _)| *pid != me && comm == "git" && works_inside(*pid, tree))
        .map(|(pid, _, _)| pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    fn sh(dir: &Path, script: &str) {
        let ok = Command::new("sh").args(["-ec", script]).current_dir(dir).status().unwrap();
        assert!(ok.success(), "{script}");
    }

    /// A repository with two commits, `one` and `two`, that differ in
    /// `a.txt`; `one` is checked out.
    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        sh(
            dir.path(),
            "git init --quiet; git config user.email t@t; git config user.name t
             echo one > a.txt; git add a.txt; git commit --quiet -m one; git tag one
             echo two > a.txt; git commit --quiet -am two; git tag two
             git checkout --quiet --detach one",
        );
        dir
    }

    #[test]
    fn a_killed_checkouts_index_lock_is_removed_and_nothing_else() {
        let tree = repo();
        let artifacts = tempfile::tempdir().unwrap();
        let lease = TreeLease::new(artifacts.path(), tree.path());
        let lock = tree.path().join(".git/index.lock");

        // No lease: a lock there is someone else's and stays.
        std::fs::write(&lock, b"").unwrap();
        assert!(lease.recover(Duration::ZERO).unwrap().is_empty());
        assert!(lock.exists(), "a lock no checkout of ours left was removed");

        // A checkout of `two` started and killed after it wrote a.txt: its
        // lock goes, the file goes back to HEAD, and the lease goes.
        std::fs::write(tree.path().join("a.txt"), b"two\n").unwrap();
        lease.begin(Running::Checkout).unwrap();
        // A short wait, as a resume waits: a git of this tree's own setup
        // was once seen still exiting here when the whole crate's tests ran
        // at once (GitStillRunning with no wait).
        let done = lease.recover(Duration::from_secs(5)).unwrap();
        assert!(!lock.exists(), "the killed checkout's lock is still there");
        assert!(done[0].contains("index.lock"), "{done:?}");
        assert_eq!(std::fs::read_to_string(tree.path().join("a.txt")).unwrap(), "one\n", "{done:?}");
        assert_eq!(lease.read().unwrap(), None);
        // ... so the next checkout works.
        sh(tree.path(), "git checkout --quiet --detach two; git checkout --quiet --detach one");

        // A checkout recorded but no lock left (killed before git took
        // it, or after it let go): a changed file is not the checkout's
        // to reset; it may be the user's.
        std::fs::write(tree.path().join("a.txt"), b"mine\n").unwrap();
        lease.begin(Running::Checkout).unwrap();
        assert!(lease.recover(Duration::ZERO).unwrap().is_empty());
        assert_eq!(std::fs::read_to_string(tree.path().join("a.txt")).unwrap(), "mine\n");
        sh(tree.path(), "git checkout --quiet -- a.txt");

        // A checkout that ended: nothing to do.
        std::fs::write(&lock, b"").unwrap();
        lease.begin(Running::Checkout).unwrap();
        lease.end().unwrap();
        assert!(lease.recover(Duration::ZERO).unwrap().is_empty());
        assert!(lock.exists());
    }

    #[test]
    fn a_git_still_working_in_the_tree_is_waited_for_not_raced() {
        let tree = repo();
        let artifacts = tempfile::tempdir().unwrap();
        let lease = TreeLease::new(artifacts.path(), tree.path());
        std::fs::write(tree.path().join(".git/index.lock"), b"").unwrap();
        lease.begin(Running::Checkout).unwrap();
        // A process named git, working in the tree, that outlives the wait.
        let bin = tempfile::tempdir().unwrap();
        let git = bin.path().join("git");
        std::os::unix::fs::symlink("/bin/sleep", &git).unwrap();
        let mut child = Command::new(&git).arg("30").current_dir(tree.path()).spawn().unwrap();
        let err = lease.recover(Duration::from_millis(300)).unwrap_err();
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            matches!(err, TreeLeaseError::GitStillRunning { ref pids, .. } if pids.contains(&(child.id() as i32))),
            "{err}"
        );
        assert!(tree.path().join(".git/index.lock").exists(), "the lock was removed under a running git");
        assert_eq!(lease.read().unwrap(), Some(Running::Checkout), "the lease was dropped before the clean-up");
        // Once it is gone, the resume goes on.
        assert!(lease.recover(Duration::ZERO).unwrap()[0].contains("index.lock"));
        assert!(!tree.path().join(".git/index.lock").exists());
    }

    #[test]
    fn a_build_left_running_in_the_tree_is_killed_and_other_groups_are_not() {
        let tree = repo();
        let artifacts = tempfile::tempdir().unwrap();
        let lease = TreeLease::new(artifacts.path(), tree.path());
        let spawn = |dir: &Path| {
            Command::new("sh").args(["-c", "sleep 30; true"]).current_dir(dir).process_group(0).spawn().unwrap()
        };
        // A group recorded but working elsewhere (a reused group id): kept.
        let elsewhere = tempfile::tempdir().unwrap();
        let mut other = spawn(elsewhere.path());
        lease.begin(Running::Build { pgid: other.id() as i32 }).unwrap();
        assert!(lease.recover(Duration::ZERO).unwrap().is_empty());
        assert!(other.try_wait().unwrap().is_none(), "a group outside the tree was killed");
        let _ =
            nix::sys::signal::killpg(nix::unistd::Pid::from_raw(other.id() as i32), nix::sys::signal::Signal::SIGKILL);
        let _ = other.wait();

        let mut build = spawn(tree.path());
        std::thread::sleep(Duration::from_millis(100));
        lease.begin(Running::Build { pgid: build.id() as i32 }).unwrap();
        let done = lease.recover(Duration::ZERO).unwrap();
        assert!(done[0].contains("killed the build"), "{done:?}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while build.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the build left in the tree still runs");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_state_lock_is_exclusive_and_names_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        let held = StateLock::take(&state).unwrap();
        let err = StateLock::take(&state).unwrap_err();
        assert!(err.to_string().contains("state.json"), "{err}");
        assert!(matches!(err, TreeLeaseError::Busy { .. }));
        drop(held);
        StateLock::take(&state).unwrap();
    }

    #[test]
    fn the_tree_lock_is_exclusive_and_names_the_tree() {
        let tree = repo();
        let held = TreeLock::take(tree.path()).unwrap();
        let err = TreeLock::take(tree.path()).unwrap_err();
        assert!(matches!(err, TreeLeaseError::TreeBusy { .. }), "{err}");
        assert!(err.to_string().contains(&tree.path().display().to_string()), "{err}");
        drop(held);
        TreeLock::take(tree.path()).unwrap();
    }

    #[test]
    fn a_corrupt_lease_is_an_error_naming_the_file() {
        let tree = repo();
        let artifacts = tempfile::tempdir().unwrap();
        let lease = TreeLease::new(artifacts.path(), tree.path());
        std::fs::write(artifacts.path().join("tree-lease.json"), b"{\"running\":\"dance\"}").unwrap();
        let err = lease.recover(Duration::ZERO).unwrap_err();
        assert!(err.to_string().contains("tree-lease.json"), "{err}");
    }
}
