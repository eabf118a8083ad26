//! `kbuild`: kernbench rebuilt inside the appliance. A seeded source tree
//! (generated once, at preparation, in the work directory) is built by the
//! `make` applet at kernbench's job counts; every compile is an exec'd
//! `cc` applet and the link an exec'd `ld`. One warmup build first, then
//! each iteration cleans and times one build per job count and reports
//! elapsed, user, system, %CPU and context switches per count, as
//! kernbench's log did. Owns the parameters, the job counts and the
//! metrics; the build itself is [`build_once`] of the shared
//! `kernel_build`, which contest also times as its foreground job.

use crate::kernel_build::make::{build_once, BuildError, BuildStats, JobLimit};
use crate::kernel_build::online_cpus;
use crate::kernel_build::source_tree::{SourceTree, TreeSpec};
use crate::schema::{Iteration, Metric};
use crate::workload::{params_map, RunContext, Workload, WorkloadError};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The job counts kernbench 0.42 derives from the CPU count.
///
/// kernbench 0.42 (Con Kolivas; the script in LTP's
/// `utils/benchmark/kernbench-0.42/kernbench`) counts `^processor` lines
/// of /proc/cpuinfo, then sets `halfjobs=$(( cpus / 2 ))` and
/// `optijobs=${optijobs:=$(( cpus * 4 ))}` (`-o N` overrides it). The half
/// run is disabled when `halfjobs < 2` ("Half load is no greater than
/// single") and 2 becomes 3 ("a kernel compile won't guarantee 2 jobs").
/// The maximal run is `make -j` with no limit, the single run `make`
/// (only with `-s`), and the warmup is one `make -j $optijobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobCounts {
    /// `-j` of the half-load run; `None` when kernbench skips it.
    pub half: Option<usize>,
    /// `-j` of the optimal run.
    pub optimal: usize,
}

impl JobCounts {
    /// kernbench's rule for `cpus` CPUs, with `-o` as `optimal_override`.
    pub fn kernbench(cpus: usize, optimal_override: Option<usize>) -> JobCounts {
        let half = match cpus / 2 {
            h if h < 2 => None,
            2 => Some(3),
            h => Some(h),
        };
        JobCounts { half, optimal: optimal_override.unwrap_or(cpus.saturating_mul(4)).max(1) }
    }
}

/// One kind of kernbench run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuildMode {
    /// `make` (one job), kernbench's `-s`.
    Single,
    /// `make -j ncpus/2` (skipped below 2, 2 becomes 3).
    Half,
    /// `make -j 4*ncpus`.
    Optimal,
    /// `make -j` (unbounded).
    Maximal,
}

impl BuildMode {
    /// Suffix of the metric names.
    pub fn name(self) -> &'static str {
        match self {
            BuildMode::Single => "single",
            BuildMode::Half => "half",
            BuildMode::Optimal => "optimal",
            BuildMode::Maximal => "maximal",
        }
    }

    /// The job limit of this mode, `None` when kernbench skips it.
    pub fn limit(self, counts: &JobCounts) -> Option<JobLimit> {
        match self {
            BuildMode::Single => Some(JobLimit::Jobs(1)),
            BuildMode::Half => counts.half.map(JobLimit::Jobs),
            BuildMode::Optimal => Some(JobLimit::Jobs(counts.optimal)),
            BuildMode::Maximal => Some(JobLimit::Unbounded),
        }
    }
}

/// Parameters of `kbuild`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KbuildParams {
    /// Source files in the tree (compile jobs per build).
    pub files: u32,
    /// Headers in the tree; 0 means one per three files.
    pub headers: u32,
    /// Runs per iteration, in kernbench's order.
    pub modes: Vec<BuildMode>,
    /// Jobs of the optimal run (kernbench `-o`); default 4 × CPUs.
    pub optimal_jobs: Option<u32>,
    /// CPU count for the job rule; default the online CPUs (what
    /// kernbench counted in /proc/cpuinfo).
    pub cpus: Option<u32>,
    /// One discarded build at the optimal job count after generating the
    /// tree (kernbench's warmup run).
    pub warmup_build: bool,
}

impl Default for KbuildParams {
    fn default() -> Self {
        KbuildParams {
            files: 300,
            headers: 0,
            modes: vec![BuildMode::Half, BuildMode::Optimal, BuildMode::Maximal],
            optimal_jobs: None,
            cpus: None,
            warmup_build: true,
        }
    }
}

/// The prepared workload: the tree exists and has been built once.
pub struct Kbuild {
    params: KbuildParams,
    tree: SourceTree,
    cpus: usize,
    counts: JobCounts,
    runs: Vec<(BuildMode, JobLimit)>,
    skipped: Vec<BuildMode>,
    applet_exe: PathBuf,
}

fn bad(why: String) -> WorkloadError {
    WorkloadError::Invalid { workload: "kbuild", why }
}

fn build_err(e: BuildError) -> WorkloadError {
    WorkloadError::Failed { workload: "kbuild", source: Box::new(e) }
}

impl Kbuild {
    /// Checks the parameters, generates the tree under the work directory
    /// and runs the warmup build.
    pub fn new(params: KbuildParams, ctx: &RunContext) -> Result<Self, WorkloadError> {
        if params.modes.is_empty() {
            return Err(bad("modes is empty; give some of single, half, optimal, maximal".into()));
        }
        let mut sorted = params.modes.clone();
        sorted.sort();
        sorted.dedup();
        if sorted.len() != params.modes.len() {
            return Err(bad(format!("modes lists a mode twice: {:?}", params.modes)));
        }
        if params.optimal_jobs == Some(0) || params.cpus == Some(0) {
            return Err(bad("optimal_jobs and cpus must be at least 1".into()));
        }
        let cpus = params.cpus.map(|c| c as usize).unwrap_or_else(online_cpus);
        let counts = JobCounts::kernbench(cpus, params.optimal_jobs.map(|o| o as usize));
        let mut runs = Vec::new();
        let mut skipped = Vec::new();
        for m in sorted {
            match m.limit(&counts) {
                Some(l) => runs.push((m, l)),
                None => skipped.push(m),
            }
        }
        if runs.is_empty() {
            return Err(bad(format!(
                "nothing to run on {cpus} CPUs: kernbench skips the half run when ncpus/2 < 2; add optimal or maximal"
            )));
        }
        let spec = TreeSpec { files: params.files, headers: params.headers };
        let tree = SourceTree::generate(&ctx.work_dir.join("kbuild"), &spec, ctx.seed)
            .map_err(|e| WorkloadError::Failed { workload: "kbuild", source: Box::new(e) })?;
        let me = Kbuild { params, tree, cpus, counts, runs, skipped, applet_exe: ctx.applet_exe.clone() };
        if me.params.warmup_build {
            build_once(&me.tree, JobLimit::Jobs(me.counts.optimal), &me.applet_exe).map_err(build_err)?;
        }
        Ok(me)
    }

    /// The generated tree.
    pub fn tree(&self) -> &SourceTree {
        &self.tree
    }
}

fn record(it: &mut Iteration, mode: BuildMode, b: &BuildStats) {
    let m = mode.name();
    let u = &b.usage;
    it.metrics.insert(format!("elapsed_{m}"), Metric::lower(b.elapsed_s, "s"));
    it.metrics.insert(format!("user_{m}"), Metric::lower(u.user_s, "s"));
    it.metrics.insert(format!("system_{m}"), Metric::lower(u.sys_s, "s"));
    it.metrics.insert(format!("cpu_percent_{m}"), Metric::higher(b.cpu_percent, "%"));
    // kernbench's "Context Switches" is time(1)'s %c (involuntary) and its
    // "Sleeps" is %w (voluntary waits).
    it.metrics.insert(format!("context_switches_{m}"), Metric::lower(u.involuntary_switches as f64, "switches"));
    it.metrics.insert(format!("sleeps_{m}"), Metric::lower(u.voluntary_switches as f64, "switches"));
    let d = &mut it.detail;
    d.insert(format!("jobs_{m}"), b.limit.flag().into());
    d.insert(format!("execs_{m}"), b.execs.into());
    d.insert(format!("max_running_{m}"), b.max_running.into());
    d.insert(format!("minor_faults_{m}"), u.minor_faults.into());
    d.insert(format!("major_faults_{m}"), u.major_faults.into());
}

impl Workload for Kbuild {
    fn name(&self) -> &'static str {
        "kbuild"
    }

    fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        params_map(&self.params)
    }

    fn run_iteration(&mut self) -> Result<Iteration, WorkloadError> {
        let mut it = Iteration::default();
        let mut image: Option<String> = None;
        for &(mode, limit) in &self.runs {
            let b = build_once(&self.tree, limit, &self.applet_exe).map_err(build_err)?;
            // Every job count must produce the same image: a scheduler that
            // linked before all compiles ended would not.
            if let Some(prev) = &image {
                if *prev != b.image_sha256 {
                    return Err(bad(format!(
                        "{} build produced image {} but an earlier build produced {prev}",
                        limit.flag(),
                        b.image_sha256
                    )));
                }
            }
            image = Some(b.image_sha256.clone());
            record(&mut it, mode, &b);
        }
        let d = &mut it.detail;
        d.insert("cpus".into(), self.cpus.into());
        d.insert("tree_sha256".into(), self.tree.sha256.clone().into());
        d.insert("tree_files".into(), self.tree.sources.len().into());
        d.insert("tree_headers".into(), self.tree.headers.len().into());
        d.insert("tree_lines".into(), self.tree.lines.into());
        d.insert("image_sha256".into(), image.unwrap_or_default().into());
        if !self.skipped.is_empty() {
            let names: Vec<&str> = self.skipped.iter().map(|m| m.name()).collect();
            d.insert("skipped".into(), names.into());
        }
        Ok(it)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernbench_job_counts() {
        let c = |n| JobCounts::kernbench(n, None);
        assert_eq!(c(1), JobCounts { half: None, optimal: 4 });
        assert_eq!(c(2), JobCounts { half: None, optimal: 8 });
        assert_eq!(c(3), JobCounts { half: None, optimal: 12 });
        assert_eq!(c(4), JobCounts { half: Some(3), optimal: 16 }, "2 becomes 3");
        assert_eq!(c(5), JobCounts { half: Some(3), optimal: 20 });
        assert_eq!(c(8), JobCounts { half: Some(4), optimal: 32 });
        assert_eq!(c(64), JobCounts { half: Some(32), optimal: 256 });
        assert_eq!(JobCounts::kernbench(8, Some(10)).optimal, 10);
        assert_eq!(BuildMode::Maximal.limit(&c(2)), Some(JobLimit::Unbounded));
        assert_eq!(BuildMode::Half.limit(&c(2)), None);
    }

    fn ctx() -> RunContext {
        RunContext::new(1, std::env::temp_dir())
    }

    #[test]
    fn bad_params_are_refused_before_any_work() {
        let p = |f: &dyn Fn(&mut KbuildParams)| {
            let mut p = KbuildParams { warmup_build: false, ..Default::default() };
            f(&mut p);
            Kbuild::new(p, &ctx()).err().map(|e| e.to_string()).unwrap_or_default()
        };
        assert!(p(&|p| p.modes.clear()).contains("modes is empty"));
        assert!(p(&|p| p.modes = vec![BuildMode::Half, BuildMode::Half]).contains("twice"));
        assert!(p(&|p| p.optimal_jobs = Some(0)).contains("at least 1"));
        assert!(p(&|p| {
            p.modes = vec![BuildMode::Half];
            p.cpus = Some(2);
        })
        .contains("nothing to run on 2 CPUs"));
        let mut m = serde_json::Map::new();
        m.insert("modes".into(), serde_json::json!(["quick"]));
        assert!(crate::workload::parse_params::<KbuildParams>("kbuild", &m).is_err());
    }
}
