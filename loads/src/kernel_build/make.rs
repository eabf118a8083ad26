//! The build: a make-like scheduler and the call that times one build.
//!
//! kernbench timed `make -j N` with `/usr/bin/time`, so its figures are
//! the rusage of make plus every compiler make reaped. The same holds
//! here: [`build_once`] execs the `make` applet in its own process group
//! and reaps it with `wait4`, so elapsed, user, system, faults and context
//! switches cover the scheduler and all its jobs. The scheduler living in
//! its own process also means it may reap with `wait4(-1)` without
//! stealing other children of the caller (contest runs its loads beside
//! the build). Owns job scheduling, cleaning and the per-build figures;
//! must not decide which job counts to run (the workload does).

use super::source_tree::{SourceTree, TreeError, ENTRY, INCLUDE_DIR, MANIFEST, OUTPUT};
use crate::applet_argv;
use crate::reap::{self, Exit, ReapError, Reaped, Usage};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Name of the build log (the scheduler's and the jobs' stderr) in the
/// tree's root.
pub const LOG: &str = "make.log";

/// How many jobs may run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobLimit {
    /// At most this many (≥ 1).
    Jobs(usize),
    /// All at once (`make -j`).
    Unbounded,
}

impl JobLimit {
    /// The make flag: `-jN` or `-j`.
    pub fn flag(&self) -> String {
        match self {
            JobLimit::Jobs(n) => format!("-j{n}"),
            JobLimit::Unbounded => "-j".to_string(),
        }
    }
    fn allows(&self, running: usize) -> bool {
        match self {
            JobLimit::Jobs(n) => running < *n,
            JobLimit::Unbounded => true,
        }
    }
}

/// Errors of scheduling and of one build.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A job could not be started.
    #[error("cannot start job {job}")]
    Spawn {
        /// The job (`cc kernel/sched3.c`, `ld vmlinux`, `make`).
        job: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A job failed.
    #[error("job {job} failed: {exit}")]
    JobFailed {
        /// The job.
        job: String,
        /// How it ended.
        exit: Exit,
    },
    /// Reaping failed.
    #[error("reaping build jobs")]
    Reap(#[from] ReapError),
    /// A reaped pid the scheduler did not start.
    #[error("reaped pid {0}, which is not a job of this build")]
    StrayChild(i32),
    /// Cleaning or reading the tree failed.
    #[error("source tree")]
    Tree(#[from] TreeError),
    /// The build's own files (manifest, log, summary, output).
    #[error("cannot {what} {path}")]
    Io {
        /// The operation.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The make process failed; the log's tail says why.
    #[error("make {flag} in {dir} failed ({exit}): {log_tail}")]
    MakeFailed {
        /// `-jN` or `-j`.
        flag: String,
        /// Tree root.
        dir: PathBuf,
        /// How make ended.
        exit: Exit,
        /// Last lines of the build log.
        log_tail: String,
    },
    /// make's summary did not parse.
    #[error("make printed a malformed summary: {0:?}")]
    BadSummary(String),
    /// The build reported success without producing its output.
    #[error("build finished but {0} is missing")]
    NoOutput(PathBuf),
    /// The manifest lists nothing.
    #[error("manifest {0} lists no sources")]
    EmptyManifest(PathBuf),
}

/// What the scheduler ran.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScheduleReport {
    /// Jobs started (and reaped).
    pub started: usize,
    /// Most jobs running at one time.
    pub max_running: usize,
    /// Summed rusage of the jobs.
    pub usage: Usage,
}

/// Runs `count` jobs, at most `limit` at a time: `spawn(i)` starts job
/// `i`, `wait()` reaps whichever job ends next. On the first failure no
/// new job starts, the running ones are killed and reaped, and the error
/// names the failed job (`name(i)`).
pub fn schedule(
    count: usize,
    limit: JobLimit,
    mut spawn: impl FnMut(usize) -> Result<Pid, BuildError>,
    mut wait: impl FnMut() -> Result<Reaped, BuildError>,
    name: impl Fn(usize) -> String,
) -> Result<ScheduleReport, BuildError> {
    let mut running: Vec<(Pid, usize)> = Vec::new();
    let mut report = ScheduleReport::default();
    let mut next = 0usize;
    let fail = |running: &[(Pid, usize)], e: BuildError| {
        let pids: Vec<Pid> = running.iter().map(|(p, _)| *p).collect();
        reap::kill_and_reap(&pids);
        Err(e)
    };
    while next < count || !running.is_empty() {
        while next < count && limit.allows(running.len()) {
            match spawn(next) {
                Ok(pid) => running.push((pid, next)),
                Err(e) => return fail(&running, e),
            }
            next += 1;
            report.started += 1;
            report.max_running = report.max_running.max(running.len());
        }
        let r = match wait() {
            Ok(r) => r,
            Err(e) => return fail(&running, e),
        };
        let Some(pos) = running.iter().position(|(p, _)| *p == r.pid) else {
            return fail(&running, BuildError::StrayChild(r.pid.as_raw()));
        };
        let (_, job) = running.swap_remove(pos);
        report.usage = report.usage.plus(&r.usage);
        if !r.exit.success() {
            return fail(&running, BuildError::JobFailed { job: name(job), exit: r.exit });
        }
    }
    Ok(report)
}

/// What the `make` applet prints on stdout when it succeeds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MakeSummary {
    /// Compile jobs run.
    pub compiles: u64,
    /// Link jobs run.
    pub links: u64,
    /// Most compile jobs running at once.
    pub max_running: u64,
}

fn self_applet(name: &str) -> Command {
    applet_argv::command_in(Path::new(applet_argv::SELF_EXE), name)
}

fn make(dir: &Path, limit: JobLimit) -> Result<MakeSummary, BuildError> {
    let manifest = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&manifest).map_err(|source| BuildError::Io {
        what: "read",
        path: manifest.clone(),
        source,
    })?;
    let sources: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if sources.is_empty() {
        return Err(BuildError::EmptyManifest(manifest));
    }
    let objects: Vec<String> = sources.iter().map(|s| SourceTree::object_of(s)).collect();
    let compile = schedule(
        sources.len(),
        limit,
        |i| {
            let (src, obj) = (sources.get(i).copied().unwrap_or_default(), objects.get(i).cloned().unwrap_or_default());
            let child = self_applet("cc")
                .current_dir(dir)
                .args(["-I", INCLUDE_DIR, "-o", &obj, src])
                .stdin(Stdio::null())
                .spawn()
                .map_err(|source| BuildError::Spawn { job: format!("cc {src}"), source })?;
            Ok(Pid::from_raw(child.id() as i32))
        },
        || Ok(reap::wait_any()?),
        |i| format!("cc {}", sources.get(i).copied().unwrap_or_default()),
    )?;
    let link = schedule(
        1,
        JobLimit::Jobs(1),
        |_| {
            let child = self_applet("ld")
                .current_dir(dir)
                .args(["-o", OUTPUT, "-e", ENTRY])
                .args(&objects)
                .stdin(Stdio::null())
                .spawn()
                .map_err(|source| BuildError::Spawn { job: format!("ld {OUTPUT}"), source })?;
            Ok(Pid::from_raw(child.id() as i32))
        },
        || Ok(reap::wait_any()?),
        |_| format!("ld {OUTPUT}"),
    )?;
    Ok(MakeSummary {
        compiles: compile.started as u64,
        links: link.started as u64,
        max_running: compile.max_running as u64,
    })
}

/// The `make` applet: `make -C DIR [-jN | -j]`. Builds every source the
/// tree's manifest lists, then links; prints a [`MakeSummary`] as JSON.
/// Exit 0 on success, 1 when a job fails, 2 on a usage error.
pub fn main(args: &[OsString]) -> i32 {
    use lexopt::prelude::*;
    let parsed = (|| -> Result<(PathBuf, JobLimit), lexopt::Error> {
        let mut p = lexopt::Parser::from_args(args.iter().cloned());
        let (mut dir, mut limit) = (None, JobLimit::Jobs(1));
        while let Some(a) = p.next()? {
            match a {
                Short('C') => dir = Some(PathBuf::from(p.value()?)),
                Short('j') => {
                    limit = match p.optional_value() {
                        None => JobLimit::Unbounded,
                        Some(v) => {
                            let n: usize = v.parse()?;
                            if n == 0 {
                                return Err(lexopt::Error::Custom("-j needs at least 1 job".into()));
                            }
                            JobLimit::Jobs(n)
                        }
                    }
                }
                other => return Err(other.unexpected()),
            }
        }
        Ok((dir.unwrap_or_else(|| PathBuf::from(".")), limit))
    })();
    let (dir, limit) = match parsed {
        Ok(x) => x,
        Err(e) => {
            eprintln!("make: {e} (usage: make -C DIR [-jN | -j])");
            return 2;
        }
    };
    match make(&dir, limit) {
        Ok(s) => {
            println!("{}", serde_json::to_string(&s).unwrap_or_default());
            0
        }
        Err(e) => {
            eprintln!("make: *** {}", crate::error_chain::error_chain(&e));
            1
        }
    }
}

/// Figures of one timed build, as `/usr/bin/time -f "%e %U %S %P %c %w"
/// make` gave kernbench, plus page faults and exec counts.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildStats {
    /// The job limit.
    pub limit: JobLimit,
    /// Wall seconds from exec of make to its reaping.
    pub elapsed_s: f64,
    /// make and its jobs: CPU time, faults, context switches.
    pub usage: Usage,
    /// (user + system) / elapsed, in percent.
    pub cpu_percent: f64,
    /// Programs exec'd: make, every compile, the link.
    pub execs: u64,
    /// Compile jobs.
    pub compiles: u64,
    /// Most compile jobs running at once.
    pub max_running: u64,
    /// sha256 of the linked image (the same for every job count).
    pub image_sha256: String,
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines.get(lines.len().saturating_sub(5)..).unwrap_or_default().join(" | ");
    if tail.is_empty() {
        "(empty log)".to_string()
    } else {
        tail
    }
}

/// Cleans `tree` (objects and output, as kernbench's `make clean`),
/// syncs, and times one build with `limit` jobs, running the applets from
/// `applet_exe`. On failure nothing of the build is left running.
pub fn build_once(tree: &SourceTree, limit: JobLimit, applet_exe: &Path) -> Result<BuildStats, BuildError> {
    prepare_build(tree)?;
    timed_build(tree, limit, applet_exe)
}

/// What comes before a timed build: `tree` cleaned and everything synced.
pub fn prepare_build(tree: &SourceTree) -> Result<(), BuildError> {
    tree.clean()?;
    nix::unistd::sync();
    Ok(())
}

/// Times one build of a `tree` already prepared ([`prepare_build`]).
pub fn timed_build(tree: &SourceTree, limit: JobLimit, applet_exe: &Path) -> Result<BuildStats, BuildError> {
    let log_path = tree.root.join(LOG);
    let log = std::fs::File::create(&log_path).map_err(|source| BuildError::Io {
        what: "create",
        path: log_path.clone(),
        source,
    })?;
    let t0 = Instant::now();
    let mut child = applet_argv::command_in(applet_exe, "make")
        .arg("-C")
        .arg(&tree.root)
        .arg(limit.flag())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|source| BuildError::Spawn { job: "make".into(), source })?;
    let pid = Pid::from_raw(child.id() as i32);
    let mut out = String::new();
    let read = child.stdout.take().map(|mut s| s.read_to_string(&mut out));
    let reaped = reap::wait_pid(pid);
    let elapsed_s = t0.elapsed().as_secs_f64();
    let reaped = match reaped {
        Ok(r) if r.exit.success() => r,
        other => {
            // Whatever make left (it kills its jobs itself; a make killed
            // by a signal cannot) goes with its process group.
            let _ = killpg(pid, Signal::SIGKILL);
            if other.is_err() {
                let _ = reap::wait_pid(pid);
            }
            let exit = other.map(|r| r.exit).unwrap_or(Exit::Signal(libc::SIGKILL));
            return Err(BuildError::MakeFailed {
                flag: limit.flag(),
                dir: tree.root.clone(),
                exit,
                log_tail: log_tail(&log_path),
            });
        }
    };
    if let Some(Err(source)) = read {
        return Err(BuildError::Io { what: "read make's summary from", path: tree.root.clone(), source });
    }
    let summary: MakeSummary =
        serde_json::from_str(out.trim()).map_err(|_| BuildError::BadSummary(out.trim().to_string()))?;
    let image = tree.root.join(OUTPUT);
    let bytes = std::fs::read(&image).map_err(|_| BuildError::NoOutput(image.clone()))?;
    let u = reaped.usage;
    Ok(BuildStats {
        limit,
        elapsed_s,
        usage: u,
        cpu_percent: if elapsed_s > 0.0 { (u.user_s + u.sys_s) / elapsed_s * 100.0 } else { 0.0 },
        execs: 1 + summary.compiles + summary.links,
        compiles: summary.compiles,
        max_running: summary.max_running,
        image_sha256: hex::encode(Sha256::digest(&bytes)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    use nix::unistd::{fork, ForkResult};
    use std::time::Duration;

    /// A job that sleeps `ms` and exits with `code`.
    fn sleeper(ms: u64, code: i32) -> Pid {
        // SAFETY: the child only sleeps and exits.
        match unsafe { fork() }.unwrap() {
            ForkResult::Child => unsafe {
                libc::usleep((ms * 1000) as libc::c_uint);
                libc::_exit(code)
            },
            ForkResult::Parent { child } => child,
        }
    }

    /// Waits for one of `pids` without touching other children of the
    /// test process (tests run in parallel threads).
    fn wait_one_of(pids: &std::cell::RefCell<Vec<Pid>>) -> Result<Reaped, BuildError> {
        loop {
            let now: Vec<Pid> = pids.borrow().clone();
            for p in now {
                match waitpid(p, Some(WaitPidFlag::WNOHANG)).unwrap() {
                    WaitStatus::StillAlive => {}
                    WaitStatus::Exited(_, c) => {
                        pids.borrow_mut().retain(|q| *q != p);
                        return Ok(Reaped { pid: p, exit: Exit::Code(c), usage: Usage::default() });
                    }
                    WaitStatus::Signaled(_, s, _) => {
                        pids.borrow_mut().retain(|q| *q != p);
                        return Ok(Reaped { pid: p, exit: Exit::Signal(s as i32), usage: Usage::default() });
                    }
                    other => panic!("{other:?}"),
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn run(
        count: usize,
        limit: JobLimit,
        ms: u64,
        fail_at: Option<usize>,
    ) -> (Result<ScheduleReport, BuildError>, f64) {
        let pids = std::cell::RefCell::new(Vec::new());
        let t0 = Instant::now();
        let r = schedule(
            count,
            limit,
            |i| {
                let p = sleeper(if Some(i) == fail_at { 1 } else { ms }, if Some(i) == fail_at { 3 } else { 0 });
                pids.borrow_mut().push(p);
                Ok(p)
            },
            || wait_one_of(&pids),
            |i| format!("job{i}"),
        );
        (r, t0.elapsed().as_secs_f64())
    }

    #[test]
    fn respects_the_job_limit() {
        // 8 jobs of 60 ms: at -j2 at least 4 rounds (240 ms), unbounded
        // all at once.
        let (r, t) = run(8, JobLimit::Jobs(2), 60, None);
        let r = r.unwrap();
        assert_eq!((r.started, r.max_running), (8, 2));
        assert!(t >= 0.24, "-j2 took {t} s: more than 2 jobs ran at once");
        let (r, _) = run(8, JobLimit::Unbounded, 60, None);
        assert_eq!(r.unwrap().max_running, 8);
        let (r, _) = run(3, JobLimit::Jobs(16), 10, None);
        assert_eq!(r.unwrap().max_running, 3);
    }

    #[test]
    fn a_failed_job_stops_the_build_and_leaves_nothing_running() {
        let pids = std::cell::RefCell::new(Vec::new());
        let all = std::cell::RefCell::new(Vec::new());
        let e = schedule(
            6,
            JobLimit::Jobs(3),
            |i| {
                let p = if i == 1 { sleeper(1, 3) } else { sleeper(5_000, 0) };
                pids.borrow_mut().push(p);
                all.borrow_mut().push(p);
                Ok(p)
            },
            || wait_one_of(&pids),
            |i| format!("job{i}"),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "job job1 failed: exit status 3");
        // Jobs 0 and 2 were killed and reaped; 3..5 never started.
        assert_eq!(all.borrow().len(), 3);
        for p in all.borrow().iter() {
            assert!(waitpid(*p, Some(WaitPidFlag::WNOHANG)).is_err(), "pid {p} left unreaped");
        }
    }

    #[test]
    fn job_limit_flags() {
        assert_eq!(JobLimit::Jobs(8).flag(), "-j8");
        assert_eq!(JobLimit::Unbounded.flag(), "-j");
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(main(&os(&["-j0"])), 2);
        assert_eq!(main(&os(&["-jmany"])), 2);
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(MANIFEST), "\n").unwrap();
        assert_eq!(main(&os(&["-C", d.path().to_str().unwrap()])), 1);
    }
}
