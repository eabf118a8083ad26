//! `kernbench`: kernbench for real. Linux (the pack's linux-source-6.1,
//! x86_64_defconfig, prepared) is compiled by Debian's gcc and make from
//! the read-only userland pack, chrooted, with the output tree (`O=`) on
//! the scratch disk when there is one, else in the work directory.
//! Preparation copies the pack's prepared output tree (`cp -a` of the
//! pack's own coreutils). Each iteration then, per job level, undoes the
//! target's build (untimed; `make clean` for vmlinux, as kernbench did),
//! syncs, and times one `make -jN` from fork to reap; the rusage comes
//! from `wait4`, so it covers make and every compiler it reaped. The
//! runner's warmup iterations are kernbench's warmup build. Owns the
//! parameters, the job levels, the memory bound of its levels and the
//! metrics; the copy, the reset, the timed make and the targets are
//! `pack_build`'s (shared with contest's foreground), the chrooted child
//! `userland_pack`'s.
//!
//! The synthetic `kbuild` stays for arches without a pack; the two are
//! different workloads and never compared.

use crate::kernel_build::make::JobLimit;
use crate::kernel_build::online_cpus;
use crate::pack_build::target::Target;
use crate::pack_build::{self, PackBuild, PackBuildError, BASE_MIB, JOB_MIB};
use crate::reap::Usage;
use crate::schema::{Iteration, Metric};
use crate::scratch_space::{self, ScratchError, ScratchSpace};
use crate::userland_pack::{self, PackError, Ran};
use crate::workload::{params_map, RunContext, Workload, WorkloadError};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The workload's name.
pub const NAME: &str = "kernbench";

/// One of kernbench's runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobLevel {
    /// `make -j CPUs/2` (at least 1).
    Half,
    /// `make -j 4×CPUs`.
    Optimal,
    /// `make -j`, no limit (`max` is accepted too).
    #[serde(alias = "max")]
    Maximal,
}

impl JobLevel {
    /// Suffix of the metric names (as `kbuild`'s).
    pub fn name(self) -> &'static str {
        match self {
            JobLevel::Half => "half",
            JobLevel::Optimal => "optimal",
            JobLevel::Maximal => "maximal",
        }
    }

    fn from_name(s: &str) -> Option<JobLevel> {
        match s {
            "half" => Some(JobLevel::Half),
            "optimal" => Some(JobLevel::Optimal),
            "maximal" | "max" => Some(JobLevel::Maximal),
            _ => None,
        }
    }

    /// make's job limit on `cpus` online CPUs: half is CPUs/2 but at
    /// least 1 (kernbench 0.42 skipped it below 2 jobs; here every level
    /// runs on every machine), optimal 4 × CPUs, maximal unbounded.
    pub fn limit(self, cpus: u32) -> JobLimit {
        let cpus = cpus.max(1) as usize;
        match self {
            JobLevel::Half => JobLimit::Jobs((cpus / 2).max(1)),
            JobLevel::Optimal => JobLimit::Jobs(cpus.saturating_mul(4)),
            JobLevel::Maximal => JobLimit::Unbounded,
        }
    }

    /// Compile jobs that run at once when building `target`: the limit,
    /// but never more than the target has objects (with no limit make
    /// starts every object of a directory at once, and kbuild descends
    /// into every directory at once).
    pub fn concurrent_jobs(self, target: Target, cpus: u32) -> u64 {
        pack_build::concurrent_compilers(self.limit(cpus), target)
    }
}

/// MiB of memory a build of `target` at `level` on `cpus` CPUs needs:
/// [`BASE_MIB`] plus [`JOB_MIB`] for each job that runs at once
/// ([`JobLevel::concurrent_jobs`]). The output tree is not included: on
/// the scratch disk it takes none; on the work tmpfs add
/// [`Target::work_tree_mib`]. `maximal` of `standard` or `full` runs
/// hundreds or thousands of compilers at once, as kernbench's maximal run
/// did; the figure says so.
pub fn memory_needed_mib(target: Target, level: JobLevel, cpus: u32) -> u64 {
    pack_build::memory_needed_mib(level.concurrent_jobs(target, cpus))
}

fn levels_from_list_or_words<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<JobLevel>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrWords {
        List(Vec<JobLevel>),
        Words(String),
    }
    match ListOrWords::deserialize(d)? {
        ListOrWords::List(l) => Ok(l),
        ListOrWords::Words(w) => w
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                JobLevel::from_name(s).ok_or_else(|| {
                    serde::de::Error::custom(format!("unknown job level '{s}' (half, optimal, maximal)"))
                })
            })
            .collect(),
    }
}

/// Parameters of `kernbench`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernbenchParams {
    /// Where the userland pack is mounted.
    pub pack: String,
    /// What one build compiles: `quick` (four objects), `standard`
    /// (kernel/, mm/, fs/ext4/) or `full` (vmlinux).
    pub target: Target,
    /// The runs of each iteration, in this order (a list, or words
    /// separated by commas on the cmdline).
    #[serde(deserialize_with = "levels_from_list_or_words")]
    pub jobs: Vec<JobLevel>,
    /// Where the output tree goes: `auto` (/scratch when mounted, else
    /// the work directory) or a directory.
    pub dir: String,
}

impl Default for KernbenchParams {
    fn default() -> Self {
        KernbenchParams {
            pack: userland_pack::DEFAULT_PACK.to_string(),
            target: Target::Quick,
            jobs: vec![JobLevel::Half, JobLevel::Optimal, JobLevel::Maximal],
            dir: "auto".to_string(),
        }
    }
}

/// kernbench's errors.
#[derive(Debug, thiserror::Error)]
pub enum KernbenchError {
    /// The pack missing, or lacking what the build needs.
    #[error(transparent)]
    Pack(#[from] PackError),
    /// The build: the copy, a reset, make, the objects' count.
    #[error(transparent)]
    Build(#[from] PackBuildError),
    /// The output tree's directory.
    #[error("output tree")]
    Scratch(#[from] ScratchError),
    /// The machine has less memory than the builds asked for need.
    #[error("the {target} target at the {level} job level ({jobs} on {cpus} CPUs, {concurrent} compilers at once) needs about {need_mib} MiB ({BASE_MIB} MiB + {JOB_MIB} MiB per compiler{tree}), but MemTotal is {have_mib} MiB: give the machine more memory, or leave {level} out of `jobs`")]
    Memory {
        /// The target.
        target: &'static str,
        /// The level that needs the most.
        level: &'static str,
        /// Its make flag.
        jobs: String,
        /// Online CPUs.
        cpus: u32,
        /// Compilers at once.
        concurrent: u64,
        /// MiB needed.
        need_mib: u64,
        /// MemTotal in MiB.
        have_mib: u64,
        /// The output tree's share when it is in memory.
        tree: String,
    },
}

fn failed(e: impl Into<KernbenchError>) -> WorkloadError {
    WorkloadError::Failed { workload: NAME, source: Box::new(e.into()) }
}

fn bad(why: String) -> WorkloadError {
    WorkloadError::Invalid { workload: NAME, why }
}

/// The level of `levels` that needs the most memory on `cpus` CPUs, and
/// the MiB of MemTotal it needs ([`memory_needed_mib`], plus the output
/// tree when it is in memory); `None` for no levels.
pub fn memory_need(target: Target, levels: &[JobLevel], cpus: u32, tree_in_memory: bool) -> Option<(JobLevel, u64)> {
    let tree = if tree_in_memory { target.work_tree_mib() } else { 0 };
    let level = levels.iter().copied().max_by_key(|l| memory_needed_mib(target, *l, cpus))?;
    Some((level, memory_needed_mib(target, level, cpus).saturating_add(tree)))
}

/// Refuses when `have_mib` is below what the most demanding level of
/// `levels` needs (plus the output tree when it is in memory).
pub fn check_memory(
    target: Target,
    levels: &[JobLevel],
    cpus: u32,
    have_mib: u64,
    tree_in_memory: bool,
) -> Result<(), KernbenchError> {
    let Some((level, need_mib)) = memory_need(target, levels, cpus, tree_in_memory) else { return Ok(()) };
    if have_mib >= need_mib {
        return Ok(());
    }
    let tree = target.work_tree_mib();
    Err(KernbenchError::Memory {
        target: target.name(),
        level: level.name(),
        jobs: level.limit(cpus).flag(),
        cpus,
        concurrent: level.concurrent_jobs(target, cpus),
        need_mib,
        have_mib,
        tree: if tree_in_memory { format!(" + {tree} MiB of output tree in memory") } else { String::new() },
    })
}

/// One timed build's metrics, named as `kbuild`'s: elapsed, user, system,
/// %CPU, context switches (involuntary, time(1)'s %c) and sleeps
/// (voluntary, %w), each suffixed with the level.
pub fn build_metrics(level: JobLevel, ran: &Ran) -> Vec<(String, Metric)> {
    let m = level.name();
    let u: &Usage = &ran.usage;
    let cpu_percent = ran.cpu_percent();
    vec![
        (format!("elapsed_{m}"), Metric::lower(ran.elapsed_s, "s")),
        (format!("user_{m}"), Metric::lower(u.user_s, "s")),
        (format!("system_{m}"), Metric::lower(u.sys_s, "s")),
        (format!("cpu_percent_{m}"), Metric::higher(cpu_percent, "%")),
        (format!("context_switches_{m}"), Metric::lower(u.involuntary_switches as f64, "switches")),
        (format!("sleeps_{m}"), Metric::lower(u.voluntary_switches as f64, "switches")),
    ]
}

/// The prepared workload: the output tree is a copy of the pack's.
pub struct Kernbench {
    params: KernbenchParams,
    pack: PathBuf,
    cpus: u32,
    space: ScratchSpace,
    build: PackBuild,
}

impl Kernbench {
    /// Checks the parameters, the pack and the memory, and copies the
    /// pack's prepared output tree to the output directory.
    pub fn new(params: KernbenchParams, ctx: &RunContext) -> Result<Self, WorkloadError> {
        if params.jobs.is_empty() {
            return Err(bad("jobs is empty; give some of half, optimal, maximal".into()));
        }
        let mut sorted = params.jobs.clone();
        sorted.sort();
        sorted.dedup();
        if sorted.len() != params.jobs.len() {
            return Err(bad(format!("jobs lists a level twice: {:?}", params.jobs)));
        }
        let pack = PathBuf::from(&params.pack);
        pack_build::check_pack(&pack, NAME).map_err(failed)?;
        let cpus = u32::try_from(online_cpus()).unwrap_or(u32::MAX);
        let space = scratch_space::choose(&params.dir, &ctx.work_dir).map_err(failed)?;
        let tree_in_memory = !space.scratch_disk && matches!(space.fs.as_str(), "tmpfs" | "ramfs");
        let have_mib =
            crate::provenance::mem_total().ok_or_else(|| bad("cannot read MemTotal from /proc/meminfo".into()))? >> 20;
        check_memory(params.target, &params.jobs, cpus, have_mib, tree_in_memory).map_err(failed)?;
        space.require(params.target.work_tree_mib() << 20, "kernbench's output tree", "").map_err(failed)?;
        let build = PackBuild::prepare(&pack, params.target, &space.dir.join(NAME)).map_err(failed)?;
        Ok(Kernbench { params, pack, cpus, space, build })
    }
}

impl Workload for Kernbench {
    fn name(&self) -> &'static str {
        NAME
    }

    /// The parameters, and the pack's identity: builds by different
    /// compilers or of different trees are never compared.
    fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut p = params_map(&self.params);
        // Where the pack is mounted is not what was measured (it is in
        // each iteration's detail); what is in it is.
        p.remove("pack");
        p.insert(pack_build::PACK_ID_PARAM.into(), self.build.pack_id().into());
        p
    }

    fn run_iteration(&mut self) -> Result<Iteration, WorkloadError> {
        let mut it = Iteration::default();
        let goals = self.params.target.goals();
        for &level in &self.params.jobs {
            self.build.reset().map_err(failed)?;
            let built = self.build.timed_build(level.limit(self.cpus)).map_err(failed)?;
            it.metrics.extend(build_metrics(level, &built.ran));
            let m = level.name();
            let d = &mut it.detail;
            d.insert(format!("jobs_{m}"), built.jobs.into());
            d.insert(format!("objects_{m}"), built.objects.into());
            d.insert(format!("minor_faults_{m}"), built.ran.usage.minor_faults.into());
            d.insert(format!("major_faults_{m}"), built.ran.usage.major_faults.into());
        }
        let d = &mut it.detail;
        d.insert("target".into(), self.params.target.name().into());
        d.insert("goals".into(), goals.into());
        d.insert("cpus".into(), self.cpus.into());
        d.insert("pack".into(), self.pack.display().to_string().into());
        d.insert("dir".into(), self.space.dir.display().to_string().into());
        d.insert("fs".into(), self.space.fs.clone().into());
        d.insert("scratch_disk".into(), self.space.scratch_disk.into());
        d.insert("skeleton_files".into(), self.build.skeleton_files().into());
        Ok(it)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernbench_job_levels_are_make_flags() {
        let flag = |l: JobLevel, cpus| l.limit(cpus).flag();
        assert_eq!([1, 2, 3, 4, 8].map(|c| flag(JobLevel::Half, c)), ["-j1", "-j1", "-j1", "-j2", "-j4"]);
        assert_eq!([1, 2, 8].map(|c| flag(JobLevel::Optimal, c)), ["-j4", "-j8", "-j32"]);
        assert_eq!(flag(JobLevel::Maximal, 2), "-j");
        assert_eq!(flag(JobLevel::Half, 0), "-j1", "no CPU count still makes a valid flag");
        let p: KernbenchParams = crate::workload::parse_params(NAME, &Default::default()).unwrap();
        assert_eq!(p.jobs, [JobLevel::Half, JobLevel::Optimal, JobLevel::Maximal], "kernbench's three by default");
        let mut m = serde_json::Map::new();
        m.insert("jobs".into(), serde_json::json!("optimal, max"));
        let p: KernbenchParams = crate::workload::parse_params(NAME, &m).unwrap();
        assert_eq!(p.jobs, [JobLevel::Optimal, JobLevel::Maximal], "cmdline words, `max` for maximal");
        m.insert("jobs".into(), serde_json::json!(["half", "max"]));
        let p: KernbenchParams = crate::workload::parse_params(NAME, &m).unwrap();
        assert_eq!(p.jobs, [JobLevel::Half, JobLevel::Maximal]);
        assert_eq!(params_map(&p)["jobs"], serde_json::json!(["half", "maximal"]), "results name it maximal");
        m.insert("jobs".into(), serde_json::json!("half,single"));
        let e = crate::workload::parse_params::<KernbenchParams>(NAME, &m).unwrap_err();
        assert!(crate::error_chain::error_chain(&e).contains("unknown job level 'single'"), "{e:?}");
    }

    #[test]
    fn kernbench_metrics_come_from_the_rusage() {
        // SAFETY: a zeroed rusage is a valid value of this plain C struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        ru.ru_utime = libc::timeval { tv_sec: 3, tv_usec: 500_000 };
        ru.ru_stime = libc::timeval { tv_sec: 0, tv_usec: 500_000 };
        ru.ru_nvcsw = 1200;
        ru.ru_nivcsw = 340;
        let ran = Ran { elapsed_s: 2.0, from_exec_s: 2.0, usage: Usage::from_rusage(&ru) };
        let m: std::collections::BTreeMap<String, Metric> =
            build_metrics(JobLevel::Optimal, &ran).into_iter().collect();
        let v = |k: &str| m[k].value;
        assert_eq!(m.len(), 6);
        assert_eq!(v("elapsed_optimal"), 2.0);
        assert_eq!(v("user_optimal"), 3.5);
        assert_eq!(v("system_optimal"), 0.5);
        assert_eq!(v("cpu_percent_optimal"), 200.0, "(3.5 + 0.5) / 2.0 × 100");
        assert_eq!(v("context_switches_optimal"), 340.0, "involuntary, as time(1)'s %c");
        assert_eq!(v("sleeps_optimal"), 1200.0, "voluntary, as time(1)'s %w");
        assert_eq!(m["cpu_percent_optimal"].better, crate::schema::Better::Higher);
        assert_eq!(m["elapsed_optimal"].better, crate::schema::Better::Lower);
        let idle = Ran { elapsed_s: 0.0, from_exec_s: 0.0, usage: Usage::default() };
        let m: std::collections::BTreeMap<String, Metric> = build_metrics(JobLevel::Half, &idle).into_iter().collect();
        assert_eq!(m["cpu_percent_half"].value, 0.0, "no division by a zero elapsed time");
    }

    #[test]
    fn kernbench_memory_bound_counts_the_compilers_that_run_at_once() {
        assert_eq!(memory_needed_mib(Target::Quick, JobLevel::Half, 2), BASE_MIB + JOB_MIB);
        assert_eq!(memory_needed_mib(Target::Quick, JobLevel::Optimal, 2), BASE_MIB + 4 * JOB_MIB, "8 jobs, 4 objects");
        assert_eq!(memory_needed_mib(Target::Quick, JobLevel::Maximal, 64), BASE_MIB + 4 * JOB_MIB);
        assert_eq!(memory_needed_mib(Target::Standard, JobLevel::Optimal, 2), BASE_MIB + 8 * JOB_MIB);
        assert_eq!(memory_needed_mib(Target::Standard, JobLevel::Maximal, 2), BASE_MIB + 303 * JOB_MIB);
        assert_eq!(memory_needed_mib(Target::Full, JobLevel::Half, 8), BASE_MIB + 4 * JOB_MIB);
        let all = [JobLevel::Half, JobLevel::Optimal, JobLevel::Maximal];
        check_memory(Target::Quick, &all, 2, BASE_MIB + 4 * JOB_MIB, false).unwrap();
        let e = check_memory(Target::Quick, &all, 2, 900, false).unwrap_err().to_string();
        assert!(e.contains("needs about 960 MiB") && e.contains("MemTotal is 900 MiB"), "{e}");
        assert!(e.contains("4 compilers at once") && e.contains("maximal"), "the worst level is named: {e}");
        let e = check_memory(Target::Quick, &[JobLevel::Half], 2, 300, true).unwrap_err().to_string();
        assert!(e.contains("needs about 464 MiB") && e.contains("32 MiB of output tree in memory"), "{e}");
        check_memory(Target::Standard, &[JobLevel::Half, JobLevel::Optimal], 2, 2048, false).unwrap();
    }

    #[test]
    fn kernbench_without_a_pack_says_the_run_needs_one() {
        let tmp = tempfile::tempdir().unwrap();
        let mut m = serde_json::Map::new();
        let pack = tmp.path().join("no-pack");
        m.insert("pack".into(), pack.display().to_string().into());
        let ctx = RunContext::new(1, tmp.path().to_path_buf());
        let e = crate::workloads::prepare(NAME, &m, &ctx).err().unwrap();
        let chain = crate::error_chain::error_chain(&e);
        assert!(chain.contains(&format!("{}/usr/bin/make is missing", pack.display())), "{chain}");
        assert!(chain.contains("bootbench run --pack"), "{chain}");
        // A pack without the prepared output tree is refused the same way.
        for d in ["usr/bin", "bin", "usr/src/linux"] {
            std::fs::create_dir_all(pack.join(d)).unwrap();
        }
        for f in ["usr/bin/make", "bin/cp", "usr/src/linux/Makefile"] {
            std::fs::write(pack.join(f), "").unwrap();
        }
        let e = crate::workloads::prepare(NAME, &m, &ctx).err().unwrap();
        let chain = crate::error_chain::error_chain(&e);
        assert!(chain.contains("usr/src/linux-obj/.config is missing"), "{chain}");
    }

    #[test]
    fn kernbench_bad_params_are_refused_before_any_work() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = RunContext::new(1, tmp.path().to_path_buf());
        let refused = |p: KernbenchParams| Kernbench::new(p, &ctx).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(refused(KernbenchParams { jobs: vec![], ..Default::default() }).contains("jobs is empty"));
        let twice = KernbenchParams { jobs: vec![JobLevel::Half, JobLevel::Half], ..Default::default() };
        assert!(refused(twice).contains("twice"));
        let mut m = serde_json::Map::new();
        m.insert("targte".into(), "quick".into());
        assert!(crate::workload::parse_params::<KernbenchParams>(NAME, &m).is_err(), "unknown field");
    }
}
