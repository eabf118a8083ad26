//! `sdet_applets`: SDET-style multi-user throughput for arches without a
//! userland pack (and the quick suite, which needs none). N concurrent
//! "user scripts" run, each in its own home directory, each a sequence of
//! commands (list, copy, cat, grep, sort, word count, mkdir/rm, compile)
//! run as exec'd applets of the init one after another, fork and exec per
//! command and pipes between pipeline stages; the "shell" is a fork of
//! the workload, not a shell program. So it measures the fork and exec of
//! the init's own image, not SDET's profile: `sdet` (real scripts under
//! dash, the pack's programs) is SDET, and the two are never compared.
//! Every script is the same set of commands in its own seeded order.
//! Throughput is scripts per hour at each concurrency level (1, 4, 16, 64,
//! 128 by default). Owns script generation and the shells; must not
//! implement the commands (the applets do) nor the home (`sdet_home`).

use crate::applet_argv::APPLET_FLAG;
use crate::kernel_build::source_tree::INCLUDE_DIR;
use crate::reap::{self, Exit, Usage};
use crate::schema::{Iteration, Metric};
use crate::sdet_home::{self, doc, HomeSpec, Sources, WORDS};
use crate::workload::{params_map, RunContext, Workload, WorkloadError};
use nix::unistd::{fork, ForkResult, Pid};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};
use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The workload's name.
pub const NAME: &str = "sdet_applets";

/// Per-script error log, in the script's home.
pub const LOG: &str = "sdet.log";

/// Errors of the SDET workload.
#[derive(Debug, thiserror::Error)]
pub enum SdetError {
    /// Setting up a home directory failed.
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
    /// A command line with more pipeline stages than the shell runs.
    #[error("command {command} has {stages} pipeline stages; the shell runs at most {MAX_STAGES}: {text}")]
    TooManyStages {
        /// Its index in the script.
        command: usize,
        /// Its stages.
        stages: usize,
        /// The line, as a shell prints it.
        text: String,
    },
    /// A path or argument with a NUL byte (cannot be passed to exec).
    #[error("argument {0:?} contains a NUL byte")]
    Nul(String),
    /// Making the skeleton home failed.
    #[error("making the skeleton home")]
    Home(#[from] sdet_home::HomeError),
    /// A shell could not be started.
    #[error("cannot fork the shell of script {script}")]
    Fork {
        /// Script index.
        script: usize,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// Reaping failed.
    #[error("reaping scripts")]
    Reap(#[from] reap::ReapError),
    /// A script failed; its log says which command and why.
    #[error("script {script} of {level} failed ({exit}): {log_tail}")]
    ScriptFailed {
        /// Script index.
        script: usize,
        /// Concurrency level.
        level: usize,
        /// How its shell ended.
        exit: Exit,
        /// The end of its log.
        log_tail: String,
    },
}

/// One stage of a command: an applet with arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Applet name.
    pub applet: &'static str,
    /// Arguments.
    pub args: Vec<String>,
}

/// One command line of a script: stages joined by pipes, the last one's
/// output redirected to a file when `stdout` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// Pipeline stages (at least one).
    pub stages: Vec<Stage>,
    /// `> FILE`, relative to the home.
    pub stdout: Option<String>,
    /// Exit codes that count as success (grep's "no match" is 1).
    pub ok_codes: &'static [i32],
}

impl CommandLine {
    fn simple(applet: &'static str, args: Vec<String>, stdout: Option<String>) -> CommandLine {
        CommandLine { stages: vec![Stage { applet, args }], stdout, ok_codes: &[0] }
    }

    /// As a shell would print it.
    pub fn display(&self) -> String {
        let mut s =
            self.stages.iter().map(|st| format!("{} {}", st.applet, st.args.join(" "))).collect::<Vec<_>>().join(" | ");
        if let Some(o) = &self.stdout {
            s.push_str(" > ");
            s.push_str(o);
        }
        s
    }
}

/// A unit of work: command lines that must stay in order (mkdir, use,
/// remove). Scripts permute units, never the lines inside one.
pub type Unit = Vec<CommandLine>;

/// Parameters of `sdet`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SdetParams {
    /// Concurrency levels (scripts run at once), in order.
    pub levels: Vec<u32>,
    /// Units of work per script.
    pub units: u32,
    /// Text files in each home.
    pub docs: u32,
    /// Lines per text file.
    pub doc_lines: u32,
    /// C sources in each home, for the compile commands.
    pub sources: u32,
}

impl Default for SdetParams {
    fn default() -> Self {
        SdetParams { levels: vec![1, 4, 16, 64, 128], units: 24, docs: 6, doc_lines: 200, sources: 3 }
    }
}

/// The units every script runs (in its own order), numbered so outputs
/// never collide.
pub fn base_units(p: &SdetParams, sources: &[String], seed: u64) -> Vec<Unit> {
    let mut g = Pcg64::seed_from_u64(seed ^ 0x5de7);
    let mut pick = |n: u32| if n <= 1 { 0 } else { g.random_range(0..n) };
    let mut units = Vec::with_capacity(p.units as usize);
    for k in 0..p.units {
        let d = doc(pick(p.docs));
        let d2 = doc(pick(p.docs));
        let word = WORDS.get(pick(WORDS.len() as u32) as usize).copied().unwrap_or("kernel").to_string();
        let out = |name: &str| Some(format!("out/{name}{k}"));
        let all_docs: Vec<String> = (0..p.docs).map(doc).collect();
        let unit = match k % 12 {
            0 => vec![CommandLine::simple("ls", vec!["-l".into(), "docs".into()], out("ls"))],
            1 => vec![CommandLine::simple("cp", vec![d, format!("tmp/copy{k}.txt")], None)],
            2 => vec![CommandLine::simple("cat", vec![d, d2], out("cat"))],
            3 => {
                let mut args = vec!["-c".to_string(), word];
                args.extend(all_docs);
                vec![CommandLine { ok_codes: &[0, 1], ..CommandLine::simple("grep", args, out("grep")) }]
            }
            4 => vec![CommandLine::simple("sort", vec![d], out("sort"))],
            5 => vec![CommandLine::simple("wc", all_docs, out("wc"))],
            6 => vec![CommandLine {
                stages: vec![
                    Stage { applet: "cat", args: vec![d, d2] },
                    Stage { applet: "sort", args: vec!["-u".into()] },
                    Stage { applet: "wc", args: vec!["-l".into()] },
                ],
                stdout: out("pipe"),
                ok_codes: &[0],
            }],
            7 => {
                let dir = format!("tmp/d{k}");
                vec![
                    CommandLine::simple("mkdir", vec!["-p".into(), format!("{dir}/a/b")], None),
                    CommandLine::simple("cp", vec![d, d2, format!("{dir}/a/b")], None),
                    CommandLine::simple("ls", vec!["-R".into(), dir.clone()], out("tree")),
                    CommandLine::simple("rm", vec!["-r".into(), dir], None),
                ]
            }
            8 => {
                let src = sources.get(pick(sources.len() as u32) as usize).cloned().unwrap_or_default();
                vec![CommandLine::simple(
                    "cc",
                    vec![
                        "-I".into(),
                        format!("src/{INCLUDE_DIR}"),
                        "-o".into(),
                        format!("tmp/obj{k}.o"),
                        format!("src/{src}"),
                    ],
                    None,
                )]
            }
            9 => vec![CommandLine {
                ok_codes: &[0, 1],
                ..CommandLine::simple("grep", vec!["-i".into(), "-n".into(), word, d], out("grepi"))
            }],
            10 => {
                vec![CommandLine::simple("sort", vec!["-n".into(), "-r".into(), "docs/numbers.txt".into()], out("num"))]
            }
            _ => vec![CommandLine::simple("ls", vec!["-l".into(), "-R".into(), ".".into()], out("lsr"))],
        };
        units.push(unit);
    }
    units
}

/// Script `index`: the base units in that script's own seeded order.
pub fn script(base: &[Unit], seed: u64, index: usize) -> Vec<CommandLine> {
    sdet_home::script_order(base.len(), seed, index)
        .into_iter()
        .flat_map(|u| base.get(u).cloned().unwrap_or_default())
        .collect()
}

fn cstr(s: &OsStr) -> Result<CString, SdetError> {
    CString::new(s.as_bytes()).map_err(|_| SdetError::Nul(s.to_string_lossy().into_owned()))
}

/// A command line ready for the shell: everything allocated before fork,
/// so the shell only makes system calls.
struct Prepared {
    /// argv of each stage (exe, --applet, name, args...).
    argvs: Vec<Vec<CString>>,
    /// Pointer arrays for execv, NULL-terminated, into `argvs`.
    ptrs: Vec<Vec<*const libc::c_char>>,
    stdout: Option<CString>,
    ok_codes: &'static [i32],
    /// "command N: ...\n", written to the log when it fails.
    failure: Vec<u8>,
}

/// The most pipeline stages one command line may have (the forked shell
/// keeps their pids in a fixed array: it must not allocate).
pub const MAX_STAGES: usize = 8;

fn prepare(cmds: &[CommandLine], exe: &Path) -> Result<Vec<Prepared>, SdetError> {
    let exe = cstr(exe.as_os_str())?;
    let flag = cstr(OsStr::new(APPLET_FLAG))?;
    let mut out = Vec::with_capacity(cmds.len());
    for (n, c) in cmds.iter().enumerate() {
        if c.stages.len() > MAX_STAGES {
            return Err(SdetError::TooManyStages { command: n, stages: c.stages.len(), text: c.display() });
        }
        let mut argvs = Vec::with_capacity(c.stages.len());
        for st in &c.stages {
            let mut argv = vec![exe.clone(), flag.clone(), cstr(OsStr::new(st.applet))?];
            for a in &st.args {
                argv.push(cstr(OsStr::new(a))?);
            }
            argvs.push(argv);
        }
        let ptrs = argvs
            .iter()
            .map(|a| a.iter().map(|c| c.as_ptr()).chain(std::iter::once(std::ptr::null())).collect())
            .collect();
        out.push(Prepared {
            argvs,
            ptrs,
            stdout: c.stdout.as_deref().map(|s| cstr(OsStr::new(s))).transpose()?,
            ok_codes: c.ok_codes,
            failure: format!("sdet: command {n} failed: {}\n", c.display()).into_bytes(),
        });
    }
    Ok(out)
}

/// The shell: runs every command line in order in `home`, then exits 0;
/// exits 1 after logging the first failing line. Only system calls here:
/// this runs in a forked child.
fn shell(home: &CString, log: &CString, cmds: &[Prepared]) -> ! {
    // SAFETY: plain system calls on valid, NUL-terminated paths and fds.
    unsafe {
        libc::setpgid(0, 0);
        if libc::chdir(home.as_ptr()) != 0 {
            libc::_exit(2);
        }
        let fd = libc::open(log.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC, 0o644);
        if fd < 0 {
            libc::_exit(2);
        }
        libc::dup2(fd, 2);
        let devnull = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        for c in cmds {
            if !run_line(c, devnull) {
                libc::write(2, c.failure.as_ptr().cast(), c.failure.len());
                libc::_exit(1);
            }
        }
        libc::_exit(0)
    }
}

/// Forks and execs each stage with pipes between them; true when every
/// stage exited with an accepted code.
///
/// # Safety
/// Only for the forked shell: it execs and `_exit`s in children.
unsafe fn run_line(c: &Prepared, devnull: libc::c_int) -> bool {
    let n = c.argvs.len();
    let mut pids: [libc::pid_t; MAX_STAGES] = [0; MAX_STAGES];
    let mut input = devnull;
    let mut ok = true;
    for (i, ptrs) in c.ptrs.iter().enumerate().take(pids.len()) {
        let last = i + 1 == n;
        let mut p = [-1 as libc::c_int; 2];
        // SAFETY (whole block): system calls on fds this shell owns.
        unsafe {
            if !last && libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return false;
            }
            let out = if last {
                match &c.stdout {
                    Some(path) => libc::open(
                        path.as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                        0o644,
                    ),
                    None => libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC),
                }
            } else {
                p[1]
            };
            if out < 0 {
                return false;
            }
            let pid = libc::fork();
            if pid == 0 {
                libc::dup2(input, 0);
                libc::dup2(out, 1);
                let exe = ptrs.first().copied().unwrap_or(std::ptr::null());
                libc::execv(exe, ptrs.as_ptr());
                libc::_exit(127);
            }
            if input != devnull {
                libc::close(input);
            }
            libc::close(out);
            if pid < 0 {
                ok = false;
                break;
            }
            if let Some(slot) = pids.get_mut(i) {
                *slot = pid;
            }
            input = if last { devnull } else { p[0] };
        }
    }
    for &pid in pids.iter().take(n) {
        if pid <= 0 {
            continue;
        }
        let mut status = 0;
        // SAFETY: waiting for this shell's own child.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
            if nix::Error::last() != nix::Error::EINTR {
                return false;
            }
        }
        let accepted = libc::WIFEXITED(status) && c.ok_codes.contains(&libc::WEXITSTATUS(status));
        ok &= accepted;
    }
    ok
}

/// Figures of one concurrency level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelStats {
    /// Scripts run at once.
    pub scripts: usize,
    /// Wall seconds until the last script ended.
    pub elapsed_s: f64,
    /// Scripts per hour.
    pub scripts_per_hour: f64,
    /// Programs exec'd (every pipeline stage).
    pub execs: u64,
    /// Usage of the shells and their commands.
    pub usage: Usage,
}

/// The prepared workload.
pub struct Sdet {
    params: SdetParams,
    root: PathBuf,
    base: Vec<Unit>,
    seed: u64,
    applet_exe: PathBuf,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SdetError + 'a {
    move |source| SdetError::Io { what, path: path.to_path_buf(), source }
}

fn failed(e: SdetError) -> WorkloadError {
    WorkloadError::Failed { workload: NAME, source: Box::new(e) }
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines.get(lines.len().saturating_sub(4)..).unwrap_or_default().join(" | ");
    if tail.is_empty() {
        "(empty log)".into()
    } else {
        tail
    }
}

impl Sdet {
    /// Checks the parameters and writes the skeleton home (text files,
    /// numbers, a few C sources) under the work directory.
    pub fn new(params: SdetParams, ctx: &RunContext) -> Result<Self, WorkloadError> {
        let bad = |why: String| WorkloadError::Invalid { workload: NAME, why };
        sdet_home::check_levels(&params.levels).map_err(bad)?;
        if !(1..=10_000).contains(&params.units) {
            return Err(bad(format!("units must be 1..=10000, got {}", params.units)));
        }
        let spec = HomeSpec { docs: params.docs, doc_lines: params.doc_lines, sources: params.sources };
        spec.check().map_err(bad)?;
        let root = ctx.work_dir.join(NAME);
        if root.exists() {
            std::fs::remove_dir_all(&root).map_err(io("remove", &root)).map_err(failed)?;
        }
        let skel = sdet_home::make_skeleton(&root.join("skel"), &spec, Sources::Synthetic, ctx.seed)
            .map_err(|e| failed(e.into()))?;
        let base = base_units(&params, &skel.sources, ctx.seed);
        Ok(Sdet { params, root, base, seed: ctx.seed, applet_exe: ctx.applet_exe.clone() })
    }

    /// Runs `n` scripts at once and measures them.
    pub fn run_level(&self, n: usize) -> Result<LevelStats, SdetError> {
        let homes = self.root.join("homes");
        if homes.exists() {
            std::fs::remove_dir_all(&homes).map_err(io("remove", &homes))?;
        }
        let skel = self.root.join("skel");
        let mut shells = Vec::with_capacity(n);
        let mut execs = 0u64;
        for i in 0..n {
            let home = homes.join(format!("user{i}"));
            std::fs::create_dir_all(&home).map_err(io("create", &home))?;
            crate::file_tools::copy_tree(&skel, &home).map_err(io("copy the skeleton to", &home))?;
            let cmds = script(&self.base, self.seed, i);
            execs += cmds.iter().map(|c| c.stages.len() as u64).sum::<u64>();
            let prepared = prepare(&cmds, &self.applet_exe)?;
            shells.push((cstr(home.as_os_str())?, cstr(home.join(LOG).as_os_str())?, prepared, home));
        }
        // Start every shell, then wait for all: the level's time is until
        // the last script ends.
        let t0 = Instant::now();
        let mut pids: Vec<Pid> = Vec::with_capacity(n);
        for (i, (home, log, cmds, _)) in shells.iter().enumerate() {
            // SAFETY: the child runs `shell`, which only makes system calls
            // on data prepared before the fork, and never returns.
            match unsafe { fork() } {
                Ok(ForkResult::Child) => shell(home, log, cmds),
                Ok(ForkResult::Parent { child }) => {
                    // Also from the parent, so a kill of the group cannot
                    // race the child's own setpgid.
                    let _ = nix::unistd::setpgid(child, child);
                    pids.push(child);
                }
                Err(source) => {
                    kill_groups(&pids);
                    return Err(SdetError::Fork { script: i, source });
                }
            }
        }
        let mut usage = Usage::default();
        let mut failure: Option<SdetError> = None;
        for (i, &pid) in pids.iter().enumerate() {
            let r = match reap::wait_pid(pid) {
                Ok(r) => r,
                Err(e) => {
                    kill_groups(pids.get(i..).unwrap_or_default());
                    return Err(e.into());
                }
            };
            usage = usage.plus(&r.usage);
            if !r.exit.success() && failure.is_none() {
                let log = shells.get(i).map(|s| s.3.join(LOG)).unwrap_or_default();
                failure = Some(SdetError::ScriptFailed { script: i, level: n, exit: r.exit, log_tail: log_tail(&log) });
                // The rest is wasted work now: stop it.
                kill_groups(pids.get(i + 1..).unwrap_or_default());
            }
        }
        let elapsed_s = t0.elapsed().as_secs_f64();
        if let Some(e) = failure {
            return Err(e);
        }
        let _ = std::fs::remove_dir_all(&homes);
        Ok(LevelStats {
            scripts: n,
            elapsed_s,
            scripts_per_hour: if elapsed_s > 0.0 { n as f64 * 3600.0 / elapsed_s } else { 0.0 },
            execs,
            usage,
        })
    }
}

/// SIGKILLs the process group of each shell (the shell and its commands).
fn kill_groups(pids: &[Pid]) {
    for &p in pids {
        let _ = nix::sys::signal::killpg(p, nix::sys::signal::Signal::SIGKILL);
    }
}

impl Workload for Sdet {
    fn name(&self) -> &'static str {
        NAME
    }

    fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        params_map(&self.params)
    }

    fn run_iteration(&mut self) -> Result<Iteration, WorkloadError> {
        let mut it = Iteration::default();
        for &n in &self.params.levels {
            let s = self.run_level(n as usize).map_err(failed)?;
            it.metrics.insert(format!("scripts_per_hour_{n}"), Metric::higher(s.scripts_per_hour, "scripts/h"));
            let d = &mut it.detail;
            d.insert(format!("elapsed_{n}"), s.elapsed_s.into());
            d.insert(format!("execs_{n}"), s.execs.into());
            d.insert(format!("user_{n}"), s.usage.user_s.into());
            d.insert(format!("system_{n}"), s.usage.sys_s.into());
            d.insert(format!("minor_faults_{n}"), s.usage.minor_faults.into());
            d.insert(format!("context_switches_{n}"), s.usage.context_switches().into());
        }
        it.detail.insert("commands_per_script".into(), self.base.iter().map(Vec::len).sum::<usize>().into());
        Ok(it)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Vec<Unit> {
        base_units(&SdetParams::default(), &["kernel/a.c".into(), "mm/b.c".into()], 11)
    }

    #[test]
    fn a_line_longer_than_the_shell_runs_is_refused_not_cut() {
        let stage = |applet| Stage { applet, args: vec!["x".into()] };
        let line = |n| CommandLine { stages: (0..n).map(|_| stage("cat")).collect(), stdout: None, ok_codes: &[0] };
        let exe = Path::new("/init");
        assert!(prepare(&[line(MAX_STAGES)], exe).is_ok());
        match prepare(&[line(1), line(MAX_STAGES + 1)], exe) {
            Err(SdetError::TooManyStages { command: 1, stages, text }) => {
                assert_eq!(stages, MAX_STAGES + 1);
                assert_eq!(text.matches(" | ").count(), MAX_STAGES, "{text}");
            }
            Ok(_) => panic!("a line of {} stages was accepted", MAX_STAGES + 1),
            Err(e) => panic!("expected TooManyStages for command 1, got {e}"),
        }
    }

    #[test]
    fn scripts_are_permutations_of_the_same_units() {
        let b = base();
        assert_eq!(b.len(), 24);
        let s0 = script(&b, 5, 0);
        let s1 = script(&b, 5, 1);
        assert_ne!(s0, s1, "each script has its own order");
        assert_eq!(s0, script(&b, 5, 0), "deterministic");
        let key = |s: &[CommandLine]| {
            let mut v: Vec<String> = s.iter().map(CommandLine::display).collect();
            v.sort();
            v
        };
        assert_eq!(key(&s0), key(&s1));
        // mkdir / use / rm stay together and in order.
        let i = s1.iter().position(|c| c.stages[0].applet == "mkdir").unwrap();
        assert_eq!(s1[i + 3].stages[0].applet, "rm");
        // Every applet a script runs exists.
        for c in &s0 {
            for st in &c.stages {
                assert!(crate::applets::NAMES.contains(&st.applet), "{}", st.applet);
            }
        }
        assert!(s0.iter().any(|c| c.stages.len() == 3), "a pipeline");
        assert!(s0.iter().any(|c| c.stages[0].applet == "cc"));
        let pipe = s0.iter().find(|c| c.stages.len() == 3).unwrap().display();
        assert!(pipe.starts_with("cat docs/doc") && pipe.contains(" | sort -u | wc -l > out/pipe"), "{pipe}");
    }

    #[test]
    fn bad_params_are_refused() {
        let ctx = RunContext::new(1, std::env::temp_dir());
        for (p, want) in [
            (SdetParams { levels: vec![], ..Default::default() }, "levels"),
            (SdetParams { levels: vec![0], ..Default::default() }, "levels"),
            (SdetParams { units: 0, ..Default::default() }, "units"),
            (SdetParams { sources: 1, ..Default::default() }, "sources"),
        ] {
            let e = Sdet::new(p, &ctx).err().unwrap().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
