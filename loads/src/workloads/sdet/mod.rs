//! `sdet`: SDET's multi-user throughput, with real scripts in a real
//! shell. N concurrent user scripts run, each a shell script of ordinary
//! commands (`script`) that dash, the userland pack's `/bin/sh`, runs in
//! the user's own home with the pack's coreutils, grep, sed, diff,
//! findutils and gcc: the shell forks, searches the PATH and execs each
//! command, as SPEC's SDET scripts were run. A driver script starts the N
//! scripts at once and waits for the last; the whole runs chrooted into
//! the read-only pack (`userland_pack`), the homes under the bind of the
//! workload's directory. Throughput is scripts per hour at each level (1,
//! 4, 16, 64, 128 by default) over the time from the driver's exec to its
//! reaping; the rusage covers the driver, every shell and every command.
//! Owns the levels, the homes' set-up and the figures; the scripts' text
//! is `script`'s, the home's contents `sdet_home`'s.

pub mod script;

use crate::pack_build::PACK_ID_PARAM;
use crate::reap::Usage;
use crate::schema::{Iteration, Metric};
use crate::sdet_home::{self, HomeSpec, Sources};
use crate::userland_pack::{self, PackCommand, PackError, WORK_MOUNT};
use crate::workload::{params_map, RunContext, Workload, WorkloadError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The workload's name.
pub const NAME: &str = "sdet";

/// Each script's log (its stderr and anything it printed), in its home.
pub const LOG: &str = "sdet.log";

/// What the pack must hold for the scripts, relative to its root.
pub const PACK_NEEDS: [&str; 13] = [
    "bin/sh",
    "usr/bin/ls",
    "usr/bin/cp",
    "usr/bin/cat",
    "usr/bin/grep",
    "usr/bin/sort",
    "usr/bin/wc",
    "usr/bin/mkdir",
    "usr/bin/rm",
    "usr/bin/cc",
    "usr/bin/find",
    "usr/bin/sed",
    "usr/bin/diff",
];

/// Memory one script may take at once, MiB: its shell, and at the peak
/// its compile. Measured on the development host (Debian 12, gcc 12.2)
/// with `/usr/bin/time -v cc -O -c` of a 300-line file of the home's
/// kind: 30,116 KiB maximum RSS for the compile (cc1 alone 18,680 KiB).
pub const SCRIPT_MIB: u64 = 32;

/// Memory besides the scripts, MiB: the kernel, the init and the page
/// cache of the programs the scripts run.
pub const BASE_MIB: u64 = 128;

/// MiB of MemTotal `levels` need: [`BASE_MIB`] plus [`SCRIPT_MIB`] for
/// every script of the largest level (in the worst case every script
/// compiles at once).
pub fn memory_needed_mib(levels: &[u32]) -> u64 {
    BASE_MIB.saturating_add(SCRIPT_MIB.saturating_mul(u64::from(levels.iter().copied().max().unwrap_or(0))))
}

/// Errors of the SDET workload.
#[derive(Debug, thiserror::Error)]
pub enum SdetError {
    /// A file of the homes or scripts.
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
    /// Making the skeleton home failed.
    #[error("making the skeleton home")]
    Home(#[from] sdet_home::HomeError),
    /// The pack, or running the driver in it.
    #[error(transparent)]
    Pack(#[from] PackError),
    /// The machine has less memory than the largest level may take.
    #[error("sdet at {level} scripts at once needs about {need_mib} MiB ({BASE_MIB} MiB + {SCRIPT_MIB} MiB per script, each of which may be compiling), but MemTotal is {have_mib} MiB: give the machine more memory, or lower levels")]
    Memory {
        /// The largest level.
        level: u32,
        /// What it needs.
        need_mib: u64,
        /// MemTotal.
        have_mib: u64,
    },
    /// A script ended well but wrote to its log: a command inside a
    /// pipeline (whose status the shell does not check) or one that warned.
    #[error("script {script} of {level} wrote to its log {log} (a failing stage of a pipeline, or a warning): {tail}")]
    Stderr {
        /// Script index.
        script: usize,
        /// Concurrency level.
        level: usize,
        /// The log.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },
    /// A script failed: which, at which level, the command and its status.
    #[error("script {script} of {level} failed: {command}; the end of its log {log}: {tail}")]
    ScriptFailed {
        /// Script index.
        script: usize,
        /// Concurrency level.
        level: usize,
        /// The failing command line and status, from the script's log.
        command: String,
        /// The log.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },
}

/// Parameters of `sdet`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SdetParams {
    /// Concurrency levels (scripts run at once), in order.
    pub levels: Vec<u32>,
    /// Units of work per script (they cycle through the
    /// [`script::UNIT_KINDS`] kinds).
    pub units: u32,
    /// Text files in each home.
    pub docs: u32,
    /// Lines per text file.
    pub doc_lines: u32,
    /// C sources in each home, for the compile commands.
    pub sources: u32,
    /// Where the userland pack is mounted.
    pub pack: String,
}

impl Default for SdetParams {
    fn default() -> Self {
        SdetParams {
            levels: vec![1, 4, 16, 64, 128],
            units: 2 * script::UNIT_KINDS,
            docs: 6,
            doc_lines: 200,
            sources: 3,
            pack: userland_pack::DEFAULT_PACK.to_string(),
        }
    }
}

/// Figures of one concurrency level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelStats {
    /// Scripts run at once.
    pub scripts: usize,
    /// Seconds from the driver's exec to its reaping.
    pub elapsed_s: f64,
    /// Scripts per hour.
    pub scripts_per_hour: f64,
    /// Usage of the driver, the shells and their commands.
    pub usage: Usage,
}

/// The prepared workload.
pub struct Sdet {
    params: SdetParams,
    pack: PathBuf,
    pack_id: String,
    root: PathBuf,
    skel: PathBuf,
    base: Vec<script::Unit>,
    seed: u64,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SdetError + 'a {
    move |source| SdetError::Io { what, path: path.to_path_buf(), source }
}

fn failed(e: SdetError) -> WorkloadError {
    WorkloadError::Failed { workload: NAME, source: Box::new(e) }
}

/// The failing command a script's log names, and its last lines.
fn script_failure(log: &Path, lines: &[script::Line]) -> (String, String) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let command = text
        .lines()
        .find_map(|l| l.strip_prefix(script::FAILED_MARK))
        .map(|rest| {
            let n = rest.split_whitespace().next().unwrap_or("");
            let status = rest.split_once('(').map(|(_, s)| s.trim_end_matches(')')).unwrap_or("");
            match n.parse::<usize>().ok().and_then(|n| lines.get(n)) {
                Some(l) => format!("`{}` ({status})", l.text),
                None => format!("command {n} ({status})"),
            }
        })
        .unwrap_or_else(|| "no command named (the script was killed, or its shell failed)".into());
    (command, userland_pack::log_tail(log, 4).replace('\n', " | "))
}

impl Sdet {
    /// Checks the parameters and the pack, writes the skeleton home under
    /// the work directory, and runs one script untimed.
    pub fn new(params: SdetParams, ctx: &RunContext) -> Result<Self, WorkloadError> {
        let bad = |why: String| WorkloadError::Invalid { workload: NAME, why };
        sdet_home::check_levels(&params.levels).map_err(bad)?;
        if !(1..=10_000).contains(&params.units) {
            return Err(bad(format!("units must be 1..=10000, got {}", params.units)));
        }
        let spec = HomeSpec { docs: params.docs, doc_lines: params.doc_lines, sources: params.sources };
        spec.check().map_err(bad)?;
        let pack = PathBuf::from(&params.pack);
        userland_pack::check(&pack, &PACK_NEEDS, NAME).map_err(|e| failed(e.into()))?;
        let have_mib =
            crate::provenance::mem_total().ok_or_else(|| bad("cannot read MemTotal from /proc/meminfo".into()))? >> 20;
        let need_mib = memory_needed_mib(&params.levels);
        if have_mib < need_mib {
            let level = params.levels.iter().copied().max().unwrap_or(0);
            return Err(failed(SdetError::Memory { level, need_mib, have_mib }));
        }
        let pack_id = userland_pack::pack_identity(&pack).map_err(|e| failed(e.into()))?;
        let root = ctx.work_dir.join(NAME);
        if root.exists() {
            std::fs::remove_dir_all(&root).map_err(io("remove", &root)).map_err(failed)?;
        }
        let skel =
            sdet_home::make_skeleton(&root.join("skel"), &spec, Sources::C, ctx.seed).map_err(|e| failed(e.into()))?;
        let base = script::base_units(params.units, params.docs, &skel.sources, ctx.seed);
        let sdet = Sdet { params, pack, pack_id, root, skel: skel.dir, base, seed: ctx.seed };
        // One script first, untimed, as kernbench builds once first: the
        // pack's programs (gcc's cc1 above all) are read from the disk
        // now, not in the first level's time.
        sdet.run_level(1).map_err(failed)?;
        Ok(sdet)
    }

    /// Runs `n` scripts at once and measures them: the homes are made and
    /// the scripts written first (untimed), then the driver runs in the
    /// pack; the homes are removed after a level that succeeded.
    pub fn run_level(&self, n: usize) -> Result<LevelStats, SdetError> {
        let homes = self.root.join("homes");
        let scripts = self.root.join("scripts");
        for d in [&homes, &scripts] {
            if d.exists() {
                std::fs::remove_dir_all(d).map_err(io("remove", d))?;
            }
            std::fs::create_dir_all(d).map_err(io("create", d))?;
        }
        let mut started = Vec::with_capacity(n);
        let mut lines_of = Vec::with_capacity(n);
        for i in 0..n {
            let home = homes.join(format!("user{i}"));
            crate::file_tools::copy_tree(&self.skel, &home).map_err(io("copy the skeleton to", &home))?;
            let lines = script::script_lines(&self.base, self.seed, i);
            let text = script::render_script(&format!("{WORK_MOUNT}/homes/user{i}"), &lines);
            let path = scripts.join(format!("s{i}.sh"));
            std::fs::write(&path, text).map_err(io("write", &path))?;
            started.push((format!("scripts/s{i}.sh"), format!("homes/user{i}/{LOG}")));
            lines_of.push(lines);
        }
        let driver = self.root.join("driver.sh");
        std::fs::write(&driver, script::render_driver(&started)).map_err(io("write", &driver))?;
        let cmd = PackCommand {
            pack: self.pack.clone(),
            work: self.root.clone(),
            cwd: WORK_MOUNT.to_string(),
            argv: vec!["/bin/sh".into(), "driver.sh".into()],
            log: self.root.join("driver.log"),
            extra_env: Vec::new(),
            own_group: true,
        };
        let ran = match userland_pack::run(&cmd) {
            Ok(r) => r,
            Err(e @ PackError::Failed { .. }) => {
                // The first script that failed, by the driver's log; a
                // driver that failed otherwise (killed) is the pack's error.
                let text = std::fs::read_to_string(&cmd.log).unwrap_or_default();
                let Some(script) = text
                    .lines()
                    .find_map(|l| l.strip_prefix(script::SCRIPT_FAILED_MARK))
                    .and_then(|rest| rest.split_whitespace().next())
                    .and_then(|s| s.parse::<usize>().ok())
                else {
                    return Err(e.into());
                };
                let log = homes.join(format!("user{script}")).join(LOG);
                let (command, tail) = script_failure(&log, lines_of.get(script).map_or(&[], Vec::as_slice));
                return Err(SdetError::ScriptFailed { script, level: n, command, log, tail });
            }
            Err(e) => return Err(e.into()),
        };
        // Every command's stderr goes to its script's log, and a good
        // script writes none: a failing stage inside a pipeline (dash has
        // no pipefail) shows here.
        for i in 0..n {
            let log = homes.join(format!("user{i}")).join(LOG);
            if std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0) > 0 {
                let tail = userland_pack::log_tail(&log, 4).replace('\n', " | ");
                return Err(SdetError::Stderr { script: i, level: n, log, tail });
            }
        }
        let _ = std::fs::remove_dir_all(&homes);
        let elapsed_s = ran.from_exec_s;
        Ok(LevelStats {
            scripts: n,
            elapsed_s,
            scripts_per_hour: if elapsed_s > 0.0 { n as f64 * 3600.0 / elapsed_s } else { 0.0 },
            usage: ran.usage,
        })
    }
}

impl Workload for Sdet {
    fn name(&self) -> &'static str {
        NAME
    }

    /// The parameters, and the pack's identity: scripts run by different
    /// programs are never compared.
    fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut p = params_map(&self.params);
        // Where the pack is mounted is not what was measured.
        p.remove("pack");
        p.insert(PACK_ID_PARAM.into(), self.pack_id.clone().into());
        p
    }

    fn run_iteration(&mut self) -> Result<Iteration, WorkloadError> {
        let mut it = Iteration::default();
        for &n in &self.params.levels {
            let s = self.run_level(n as usize).map_err(failed)?;
            it.metrics.insert(format!("scripts_per_hour_{n}"), Metric::higher(s.scripts_per_hour, "scripts/h"));
            let d = &mut it.detail;
            d.insert(format!("elapsed_{n}"), s.elapsed_s.into());
            d.insert(format!("user_{n}"), s.usage.user_s.into());
            d.insert(format!("system_{n}"), s.usage.sys_s.into());
            d.insert(format!("minor_faults_{n}"), s.usage.minor_faults.into());
            d.insert(format!("context_switches_{n}"), s.usage.context_switches().into());
        }
        it.detail.insert("commands_per_script".into(), self.base.iter().map(Vec::len).sum::<usize>().into());
        it.detail.insert("pack".into(), self.pack.display().to_string().into());
        Ok(it)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A skeleton home copied to `home`, and script 0's lines for it.
    fn home_and_lines(dir: &Path, units: u32) -> (PathBuf, Vec<script::Line>) {
        let spec = HomeSpec { docs: 3, doc_lines: 50, sources: 2 };
        let skel = sdet_home::make_skeleton(&dir.join("skel"), &spec, Sources::C, 3).unwrap();
        let home = dir.join("home");
        crate::file_tools::copy_tree(&skel.dir, &home).unwrap();
        let base = script::base_units(units, spec.docs, &skel.sources, 3);
        (home, script::script_lines(&base, 3, 0))
    }

    fn sh(script: &Path, log: &Path) -> std::process::ExitStatus {
        let log = std::fs::File::create(log).unwrap();
        std::process::Command::new("/bin/sh")
            .arg(script)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .env("PATH", "/usr/bin:/bin")
            .status()
            .unwrap()
    }

    #[test]
    fn a_script_runs_every_command_in_a_real_shell_and_a_failing_one_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, lines) = home_and_lines(tmp.path(), 2 * script::UNIT_KINDS);
        let script = tmp.path().join("s0.sh");
        let log = tmp.path().join(LOG);
        std::fs::write(&script, script::render_script(&home.display().to_string(), &lines)).unwrap();
        let status = sh(&script, &log);
        assert!(status.success(), "{status}: {}", std::fs::read_to_string(&log).unwrap());
        // Every command left its output: the compiles their objects, the
        // listings and the pipeline their files, the mkdir/rm unit nothing.
        let out: Vec<String> = std::fs::read_dir(home.join("out"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        for prefix in ["ls", "cat", "grep", "sort", "wc", "pipe", "tree", "grepi", "num", "lsr", "find", "diff"] {
            assert_eq!(
                out.iter().filter(|n| n.trim_end_matches(char::is_numeric) == prefix).count(),
                2,
                "{prefix}: {out:?}"
            );
        }
        let objects = std::fs::read_dir(home.join("tmp"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".o"));
        assert_eq!(objects.count(), 2, "two compiles");
        let pipe = out.iter().find(|n| n.starts_with("pipe")).unwrap();
        let count: u32 = std::fs::read_to_string(home.join("out").join(pipe)).unwrap().trim().parse().unwrap();
        assert!(count > 1, "sort -u | wc -l counted {count} lines");

        // A command that fails ends the script, named by its number.
        let mut broken = lines.clone();
        broken.insert(3, script::Line { text: "cat docs/missing.txt > out/x".into(), accept: script::Accept::Zero });
        std::fs::remove_dir_all(&home).unwrap();
        let (home, _) = home_and_lines(&tmp.path().join("again"), 2 * script::UNIT_KINDS);
        std::fs::write(&script, script::render_script(&home.display().to_string(), &broken)).unwrap();
        let status = sh(&script, &log);
        assert_eq!(status.code(), Some(1));
        let (command, tail) = script_failure(&log, &broken);
        assert_eq!(command, "`cat docs/missing.txt > out/x` (exit 1)", "{tail}");
        assert!(tail.contains("missing.txt"), "{tail}");
        // A failing first stage of a pipeline: dash says 0 (no pipefail),
        // so only the log tells; run_level refuses a script that wrote one.
        let lines = vec![script::Line {
            text: "cat docs/missing.txt | sort -u | wc -l > out/p".into(),
            accept: script::Accept::Zero,
        }];
        std::fs::write(&script, script::render_script(&home.display().to_string(), &lines)).unwrap();
        assert_eq!(sh(&script, &log).code(), Some(0));
        assert!(std::fs::read_to_string(&log).unwrap().contains("missing.txt"));
        // grep finding nothing is no failure; a grep error is.
        let lines = vec![
            script::Line { text: "grep -c nosuchword docs/doc0.txt".into(), accept: script::Accept::ZeroOrOne },
            script::Line { text: "grep -c x docs/nosuchfile".into(), accept: script::Accept::ZeroOrOne },
        ];
        std::fs::write(&script, script::render_script(&home.display().to_string(), &lines)).unwrap();
        assert_eq!(sh(&script, &log).code(), Some(1));
        assert_eq!(script_failure(&log, &lines).0, "`grep -c x docs/nosuchfile` (exit 2)");
    }

    #[test]
    fn the_driver_runs_every_script_at_once_and_names_one_that_failed() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        // Each script waits until all three have started, so they ran at
        // once; script 1 then fails.
        let mut scripts = Vec::new();
        for i in 0..3 {
            let body = format!(
                "touch {d}/started{i}\nwhile [ $(ls {d} | grep -c started) -lt 3 ]; do sleep 0.05; done\nexit {}\n",
                u8::from(i == 1),
                d = d.display()
            );
            std::fs::write(d.join(format!("s{i}.sh")), body).unwrap();
            scripts.push((format!("{}/s{i}.sh", d.display()), format!("{}/l{i}", d.display())));
        }
        let driver = d.join("driver.sh");
        std::fs::write(&driver, script::render_driver(&scripts)).unwrap();
        let log = d.join("driver.log");
        let status = sh(&driver, &log);
        assert_eq!(status.code(), Some(1));
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text, format!("{}1 failed (exit 1)\n", script::SCRIPT_FAILED_MARK));
    }

    #[test]
    fn bad_params_are_refused_and_a_missing_pack_named() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = RunContext::new(1, tmp.path().to_path_buf());
        for (p, want) in [
            (SdetParams { levels: vec![], ..Default::default() }, "levels"),
            (SdetParams { units: 0, ..Default::default() }, "units"),
            (SdetParams { sources: 1, ..Default::default() }, "sources"),
        ] {
            let e = Sdet::new(p, &ctx).err().unwrap().to_string();
            assert!(e.contains(want), "{e}");
        }
        let pack = tmp.path().join("no-pack");
        let p = SdetParams { pack: pack.display().to_string(), ..Default::default() };
        let e = crate::error_chain::error_chain(&Sdet::new(p, &ctx).err().unwrap());
        assert!(e.contains(&format!("{}/bin/sh is missing", pack.display())) && e.contains("sdet"), "{e}");
    }
}
