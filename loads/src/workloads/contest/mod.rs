//! `contest`: Con Kolivas' contest (shared/reference/001 and 003) rebuilt
//! inside the appliance. The foreground job is a kernel build at `make -j`
//! 4 × ncpus (the job count contest used) on the scratch filesystem, of
//! one of two kinds (the `build` parameter, recorded in every result's
//! params so that the two are never compared):
//! - `synthetic`: kbuild's seeded tree compiled by the init's own `make`,
//!   `cc` and `ld` applets (`kernel_build`), for arches without a pack;
//! - `pack`: Linux compiled by Debian's gcc and make from the userland
//!   pack, chrooted, as kernbench builds it (`pack_build`; the `target`
//!   parameter, `quick` by default), its Time and CPU% from make's rusage.
//!
//! Each row times the build once with no load (no_load), again with warm
//! caches (cacherun), and under each of nine background loads started a
//! few seconds before it and stopped after it; before each, the build is
//! undone (untimed). ctar_load, xtar_load and list_load run the userland
//! pack's tar and ls on a real tree (`real_tree`, the `load_tools`
//! parameter `pack`, the pack build's default) or the `tar` crate and a
//! walk on a synthetic one (`synthetic`). Per row: Time, CPU% of the build, the load's
//! completed work (Loads) and CPU share (LCPU%), and the ratio to no_load.
//! A row whose load fails is an error of that row, never a silent no_load.
//! Owns the rows, their order and metrics, and the memory bound of a pack
//! build beside mem_load; the loads are in `background_loads`, their
//! processes in `load_process`.

pub mod background_loads;
pub mod load_process;
pub mod page_cache;
pub mod real_tree;
pub mod ring;
mod shared_page;

use super::nbench::params::{load as load_loadfile, loadfile_in_image};
use crate::error_chain::error_chain;
use crate::kernel_build::make::{build_once, prepare_build, timed_build, BuildStats, JobLimit};
use crate::kernel_build::online_cpus;
use crate::kernel_build::source_tree::{SourceTree, TreeSpec};
use crate::known_loadfiles::CLIENT_TXT;
use crate::pack_build::target::Target;
use crate::pack_build::{self, Built, PackBuild, BASE_MIB, JOB_MIB};
use crate::reap::Usage;
use crate::schema::{Iteration, Metric, SystemDeltas};
use crate::scratch_space::{self, ScratchSpace};
use crate::suite::WorkloadSpec;
use crate::system_counters::IterationCounters;
use crate::userland_pack;
use crate::workload::{params_map, ImageFile, RunContext, Workload, WorkloadError};
use background_loads::{mem_load_bytes, LoadEnv, LoadKind, MIB};
use load_process::{LoadReport, LoadWindow};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The workload's name.
pub const NAME: &str = "contest";

/// The /proc/vmstat counters each row records: block IO in KiB (pgpgin,
/// pgpgout), swap traffic in pages (pswpin, pswpout), major faults, OOM
/// kills and direct reclaim stalls. They show what a load did to the
/// block layer and the VM, which its wall-time effect alone cannot.
const ROW_VMSTAT: &[&str] = &["pgpgin", "pgpgout", "pswpin", "pswpout", "pgmajfault", "oom_kill", "allocstall_normal"];

/// A row of contest's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    /// The build alone, caches dropped.
    NoLoad,
    /// The build alone again, caches kept warm from no_load.
    Cacherun,
    /// The build under a background load.
    Load(LoadKind),
}

/// Every row, in contest's order.
pub const ROWS: &[Row] = &[
    Row::NoLoad,
    Row::Cacherun,
    Row::Load(LoadKind::Process),
    Row::Load(LoadKind::Ctar),
    Row::Load(LoadKind::Xtar),
    Row::Load(LoadKind::Io),
    Row::Load(LoadKind::Read),
    Row::Load(LoadKind::List),
    Row::Load(LoadKind::Mem),
    Row::Load(LoadKind::Dbench),
    Row::Load(LoadKind::Fork),
];

impl Row {
    /// The row's name in tables and metric names.
    pub fn name(self) -> &'static str {
        match self {
            Row::NoLoad => "no_load",
            Row::Cacherun => "cacherun",
            Row::Load(k) => k.name(),
        }
    }

    /// The row called `name`.
    pub fn from_name(name: &str) -> Option<Row> {
        ROWS.iter().copied().find(|r| r.name() == name)
    }

    /// The unit of the row's Loads column, with the pack's programs on
    /// the real tree or not ([`LoadKind::unit`]).
    pub fn load_unit(self, real_tree: bool) -> &'static str {
        match self {
            Row::Load(k) => k.unit(real_tree),
            _ => "none",
        }
    }
}

/// The foreground build's kind: contest's `build` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Foreground {
    /// kbuild's seeded tree, compiled by the init's own applets.
    #[default]
    Synthetic,
    /// Linux, compiled by the userland pack's gcc and make.
    Pack,
}

impl Foreground {
    /// The parameter's value.
    pub fn name(self) -> &'static str {
        match self {
            Foreground::Synthetic => "synthetic",
            Foreground::Pack => "pack",
        }
    }
}

impl ContestParams {
    /// The pack build's target: `target`, quick when not given.
    pub fn pack_target(&self) -> Target {
        self.target.unwrap_or(Target::Quick)
    }
}

/// The programs ctar_load, xtar_load and list_load run: contest's
/// `load_tools` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadTools {
    /// The `tar` crate and a directory walk in the load's process, on a
    /// seeded synthetic tree of `tar_files` files.
    Synthetic,
    /// The userland pack's GNU tar, rm and ls (`ls -lR`) on a real tree:
    /// `tar_dirs` of the pack's Linux tree copied to the scratch disk, and
    /// the whole pack for the listing (`real_tree`).
    Pack,
}

impl ContestParams {
    /// The loads' programs: `load_tools`, else the foreground's kind.
    pub fn effective_load_tools(&self) -> LoadTools {
        self.load_tools.unwrap_or(match self.build {
            Foreground::Pack => LoadTools::Pack,
            Foreground::Synthetic => LoadTools::Synthetic,
        })
    }
}

/// Whether the contest of `spec` runs the userland pack's programs (its
/// `build` or its `load_tools` parameter is `pack`), so the run must attach
/// the pack. Reads only those parameters: the others are checked when it is
/// prepared.
pub fn needs_pack(spec: &WorkloadSpec) -> bool {
    let is = |key: &str| spec.params.get(key).and_then(|v| v.as_str()) == Some(Foreground::Pack.name());
    spec.name == NAME && (is("build") || (is("load_tools") && has_tree_row(spec)))
}

/// The rows that run on the real tree with `load_tools: pack`.
pub const TREE_ROWS: [LoadKind; 3] = [LoadKind::Ctar, LoadKind::Xtar, LoadKind::List];

/// Whether the contest of `spec` has a row of [`TREE_ROWS`]: its `rows`
/// (a list or comma-separated words) name one, or it gives none (all rows).
fn has_tree_row(spec: &WorkloadSpec) -> bool {
    let tree = |r: &str| TREE_ROWS.iter().any(|k| k.name() == r.trim());
    match spec.params.get("rows") {
        None => true,
        Some(serde_json::Value::String(words)) => words.split(',').any(tree),
        Some(serde_json::Value::Array(list)) => list.iter().filter_map(|v| v.as_str()).any(tree),
        Some(_) => true,
    }
}

/// Parameters of `contest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContestParams {
    /// Rows to run, in contest's order (a subset of the eleven): a list,
    /// or one comma-separated word (`bootbench.contest.rows=no_load,io_load`).
    #[serde(deserialize_with = "list_or_words")]
    pub rows: Vec<String>,
    /// The foreground build: `synthetic` (kbuild's seeded tree, the
    /// init's applets) or `pack` (Linux, the userland pack's gcc and make).
    pub build: Foreground,
    /// With `build: pack`: what one build compiles, as kernbench's
    /// `target` (`quick`, `standard`, `full`); `quick` by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// With `build: pack`: where the userland pack is mounted; the init's
    /// mount point by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pack: Option<String>,
    /// Source files of the synthetic build's tree.
    pub files: u32,
    /// `make -j` of the foreground build; default 4 × CPUs.
    pub jobs: Option<u32>,
    /// Seconds a load runs before the build starts.
    pub lead_s: f64,
    /// Seconds a load gets to stop after the build before it is killed.
    pub stop_grace_s: f64,
    /// Where the files go: `auto` (/scratch when mounted, else the work
    /// directory) or a directory.
    pub dir: String,
    /// The RAM size the loads are sized from (io_load and read_load files,
    /// mem_load's 110%); default the machine's MemTotal.
    pub mem_bytes: Option<u64>,
    /// Drop the page cache before every row but cacherun.
    pub drop_caches: bool,
    /// OOM kills of mem_load's worker tolerated (it is restarted after
    /// each) before the row is an error.
    pub max_oom_kills: u64,
    /// Source files of the synthetic tree ctar_load archives and xtar_load
    /// extracts (`load_tools: synthetic`).
    pub tar_files: u32,
    /// The programs of ctar_load, xtar_load and list_load: `synthetic` or
    /// `pack`; by default `pack` with the pack build, else `synthetic`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_tools: Option<LoadTools>,
    /// With `load_tools: pack`: the parts of the pack's Linux tree (under
    /// /usr/src, each `linux/...`) that ctar_load archives and xtar_load
    /// extracts (a list, or words separated by commas).
    #[serde(deserialize_with = "list_or_words")]
    pub tar_dirs: Vec<String>,
    /// Exec'd processes in process_load's ring (N); default 4 × CPUs, as
    /// contest. The ring carries max(1, N / 8) chunks (`ring::chunks`).
    pub ring_procs: Option<u32>,
    /// dbench_load's clients; default 16 × CPUs.
    pub dbench_clients: Option<u32>,
    /// dbench_load's loadfile: dbench's own `client.txt` by default (the
    /// host packs it into the image), `builtin` for the seeded built-in
    /// one, or another path.
    pub dbench_loadfile: String,
    /// The sha256 (hex) dbench_load's loadfile must have; filled in the
    /// result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dbench_loadfile_sha256: Option<String>,
}

impl ContestParams {
    /// The files the guest must find in the image: dbench_load's loadfile
    /// when that row runs and the loadfile is not the built-in one.
    pub fn image_files(&self) -> Vec<ImageFile> {
        let dbench_row = LoadKind::Dbench.name();
        if !self.rows.iter().any(|r| r == dbench_row) {
            return Vec::new();
        }
        let reader = format!("{NAME}'s {dbench_row}");
        loadfile_in_image(&self.dbench_loadfile, self.dbench_loadfile_sha256.as_deref(), &reader).into_iter().collect()
    }
}

/// A list of strings, or one string of comma-separated words (what a
/// kernel cmdline can carry).
fn list_or_words<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrWords {
        List(Vec<String>),
        Words(String),
    }
    Ok(match ListOrWords::deserialize(d)? {
        ListOrWords::List(l) => l,
        ListOrWords::Words(w) => w.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect(),
    })
}

impl Default for ContestParams {
    fn default() -> Self {
        ContestParams {
            rows: ROWS.iter().map(|r| r.name().to_string()).collect(),
            build: Foreground::Synthetic,
            target: None,
            pack: None,
            files: 300,
            jobs: None,
            lead_s: 3.0,
            stop_grace_s: 10.0,
            dir: "auto".into(),
            mem_bytes: None,
            drop_caches: true,
            max_oom_kills: 3,
            tar_files: 300,
            load_tools: None,
            tar_dirs: real_tree::TREE_DIRS.iter().map(|d| d.to_string()).collect(),
            ring_procs: None,
            dbench_clients: None,
            dbench_loadfile: CLIENT_TXT.to_string(),
            dbench_loadfile_sha256: None,
        }
    }
}

/// The machine's MemTotal in bytes.
pub fn mem_total_bytes() -> Option<u64> {
    meminfo_bytes("MemTotal")
}

/// A line of /proc/meminfo (`KEY: N kB`), in bytes.
fn meminfo_bytes(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.split_once(':').is_some_and(|(k, _)| k == key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// contest's errors of its own (the build's and the loads' are theirs).
#[derive(Debug, thiserror::Error)]
pub enum ContestError {
    /// The machine has less memory than the pack build (beside mem_load)
    /// needs.
    #[error("the pack build of the {target} target at {jobs} ({compilers} compilers at once) needs about {build_mib} MiB ({BASE_MIB} MiB + {JOB_MIB} MiB per compiler{tree}){mem_load}, {need_mib} MiB in all, but {have} is {have_mib} MiB: give the machine more memory{swap}, or fewer jobs")]
    Memory {
        /// The target.
        target: &'static str,
        /// make's job flag.
        jobs: String,
        /// Compilers at once.
        compilers: u64,
        /// The build's MiB, the output tree included.
        build_mib: u64,
        /// mem_load's share, when it runs.
        mem_load: String,
        /// MiB needed in all.
        need_mib: u64,
        /// What is compared (`MemTotal`, `MemTotal + SwapTotal`).
        have: &'static str,
        /// Its MiB.
        have_mib: u64,
        /// The output tree's share when it is in memory.
        tree: String,
        /// The remedy mem_load adds.
        swap: &'static str,
    },
}

/// What a pack build of `target` at `jobs` needs, MiB, beside mem_load's
/// mapping of `mem_load_bytes` when that row runs: kernbench's bound
/// ([`pack_build::memory_needed_mib`] for the compilers that run at once,
/// plus the output tree when it is in memory) plus mem_load's 110% of
/// `mem_bytes`, which it keeps touching while the build runs. With
/// mem_load the build and the load share RAM and swap (`ram_mib +
/// swap_mib`; mem_load is the OOM killer's first choice, so what does not
/// fit is its loop of OOM kills, not the build's failure); without it the
/// build has RAM alone.
pub fn check_pack_memory(
    target: Target,
    jobs: u32,
    tree_in_memory: bool,
    mem_load_bytes: Option<u64>,
    ram_mib: u64,
    swap_mib: u64,
) -> Result<(), ContestError> {
    let limit = JobLimit::Jobs(jobs as usize);
    let compilers = pack_build::concurrent_compilers(limit, target);
    let tree = if tree_in_memory { target.work_tree_mib() } else { 0 };
    let build_mib = pack_build::memory_needed_mib(compilers).saturating_add(tree);
    let mem_load_mib = mem_load_bytes.map(|b| b.div_ceil(MIB));
    let need_mib = build_mib.saturating_add(mem_load_mib.unwrap_or(0));
    let (have, have_mib) = match mem_load_mib {
        Some(_) => ("MemTotal + SwapTotal", ram_mib.saturating_add(swap_mib)),
        None => ("MemTotal", ram_mib),
    };
    if have_mib >= need_mib {
        return Ok(());
    }
    Err(ContestError::Memory {
        target: target.name(),
        jobs: limit.flag(),
        compilers,
        build_mib,
        mem_load: mem_load_mib.map_or(String::new(), |m| format!(" + {m} MiB for mem_load (110% of mem_bytes)")),
        need_mib,
        have,
        have_mib,
        tree: if tree_in_memory { format!(" + {tree} MiB of output tree in memory") } else { String::new() },
        swap: if mem_load_mib.is_some() {
            " or swap (bootbench run --swap), lower mem_bytes, leave mem_load out of rows"
        } else {
            ""
        },
    })
}

/// The foreground build, prepared.
enum ForegroundBuild {
    /// kbuild's seeded tree and the applets that build it.
    Synthetic {
        /// The tree.
        tree: SourceTree,
        /// The executable that is the applets.
        applet_exe: PathBuf,
    },
    /// A copy of the pack's prepared Linux tree.
    Pack {
        /// The build.
        build: PackBuild,
        /// Where the pack is mounted.
        pack: PathBuf,
    },
}

/// What a row records of one timed foreground build.
#[derive(Debug, Clone, PartialEq)]
struct Timed {
    /// Wall seconds, start to reap.
    elapsed_s: f64,
    /// (user + system) / elapsed, percent.
    cpu_percent: f64,
    /// The build's rusage.
    usage: Usage,
    /// Programs exec'd (the synthetic build counts them).
    execs: Option<u64>,
    /// Objects made (the pack build counts them).
    objects: Option<u64>,
}

impl From<BuildStats> for Timed {
    fn from(b: BuildStats) -> Timed {
        Timed {
            elapsed_s: b.elapsed_s,
            cpu_percent: b.cpu_percent,
            usage: b.usage,
            execs: Some(b.execs),
            objects: None,
        }
    }
}

impl From<Built> for Timed {
    fn from(b: Built) -> Timed {
        Timed {
            elapsed_s: b.ran.elapsed_s,
            cpu_percent: b.cpu_percent(),
            usage: b.ran.usage,
            execs: None,
            objects: Some(b.objects),
        }
    }
}

impl ForegroundBuild {
    /// Undoes the last build and syncs (untimed).
    fn reset(&self) -> Result<(), WorkloadError> {
        match self {
            ForegroundBuild::Synthetic { tree, .. } => prepare_build(tree).map_err(failed),
            ForegroundBuild::Pack { build, .. } => build.reset().map_err(failed),
        }
    }

    /// Times one build of what [`ForegroundBuild::reset`] left.
    fn timed(&self, jobs: u32) -> Result<Timed, WorkloadError> {
        let limit = JobLimit::Jobs(jobs as usize);
        match self {
            ForegroundBuild::Synthetic { tree, applet_exe } => {
                timed_build(tree, limit, applet_exe).map(Timed::from).map_err(failed)
            }
            ForegroundBuild::Pack { build, .. } => build.timed_build(limit).map(Timed::from).map_err(failed),
        }
    }
}

/// The prepared workload.
pub struct Contest {
    params: ContestParams,
    rows: Vec<Row>,
    space: ScratchSpace,
    foreground: ForegroundBuild,
    jobs: u32,
    cpus: usize,
    env: LoadEnv,
    /// The pack's identity when the build or the loads run its programs.
    pack_id: Option<String>,
}

fn bad(why: String) -> WorkloadError {
    WorkloadError::Invalid { workload: NAME, why }
}

fn failed(source: impl std::error::Error + Send + Sync + 'static) -> WorkloadError {
    WorkloadError::Failed { workload: NAME, source: Box::new(source) }
}

/// A file operation of contest's preparation failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what} {path}")]
pub struct PrepareError {
    what: &'static str,
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

fn prep<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> WorkloadError + 'a {
    move |source| failed(PrepareError { what, path: path.to_path_buf(), source })
}

/// Writes `bytes` (whole MiB) of data to `path` and syncs it.
fn write_sized(path: &Path, bytes: u64) -> Result<(), WorkloadError> {
    use std::io::Write;
    let mut f = std::fs::File::create(path).map_err(prep("create", path))?;
    let chunk = vec![0x3c_u8; MIB as usize];
    for _ in 0..(bytes / MIB).max(1) {
        f.write_all(&chunk).map_err(prep("write", path))?;
    }
    f.sync_all().map_err(prep("sync", path))
}

fn fresh_dir(path: &Path) -> Result<(), WorkloadError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(prep("remove", path)(e)),
    }
    std::fs::create_dir_all(path).map_err(prep("create", path))
}

impl Contest {
    /// Checks the parameters and the space, generates the trees and files
    /// the rows need, and runs one warmup build.
    pub fn new(params: ContestParams, ctx: &RunContext) -> Result<Contest, WorkloadError> {
        if params.rows.is_empty() {
            return Err(bad("rows is empty; give some of no_load, cacherun, process_load, ...".into()));
        }
        let mut rows = Vec::new();
        for name in &params.rows {
            let row = Row::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = ROWS.iter().map(|r| r.name()).collect();
                bad(format!("unknown row '{name}' in rows (known: {})", known.join(", ")))
            })?;
            if rows.contains(&row) {
                return Err(bad(format!("rows lists '{name}' twice")));
            }
            rows.push(row);
        }
        // Always contest's order, whatever order the list has.
        rows.sort_by_key(|r| ROWS.iter().position(|x| x == r));
        for (param, v) in [("lead_s", params.lead_s), ("stop_grace_s", params.stop_grace_s)] {
            if !v.is_finite() || !(0.0..=600.0).contains(&v) {
                return Err(bad(format!("{param} must be between 0 and 600 seconds, not {v}")));
            }
        }
        if params.files < 2 || params.tar_files < 2 {
            return Err(bad(format!(
                "files and tar_files must be at least 2 (got {}, {})",
                params.files, params.tar_files
            )));
        }
        if [params.jobs, params.ring_procs, params.dbench_clients].contains(&Some(0)) {
            return Err(bad("jobs, ring_procs and dbench_clients must be at least 1".into()));
        }
        let load_tools = params.effective_load_tools();
        let pack_target = match params.build {
            Foreground::Pack => Some(params.pack_target()),
            Foreground::Synthetic if params.target.is_some() => {
                return Err(bad("target is a parameter of the pack build: give build \"pack\" too".into()))
            }
            Foreground::Synthetic if params.pack.is_some() && load_tools == LoadTools::Synthetic => {
                return Err(bad(
                    "pack is a parameter of the pack build and the pack's loads: give build or load_tools \"pack\" too"
                        .into(),
                ))
            }
            Foreground::Synthetic => None,
        };
        let pack = PathBuf::from(params.pack.as_deref().unwrap_or(userland_pack::DEFAULT_PACK));
        if pack_target.is_some() {
            pack_build::check_pack(&pack, NAME).map_err(failed)?;
        }
        // The loads' programs matter only to the rows on the tree: without
        // one, `load_tools` is neither used nor recorded.
        let tree_rows = rows.iter().any(|r| TREE_ROWS.iter().any(|k| *r == Row::Load(*k)));
        let real_tree = load_tools == LoadTools::Pack && tree_rows;
        if real_tree {
            real_tree::check_dirs(&params.tar_dirs).map_err(failed)?;
            userland_pack::check(&pack, &real_tree::PACK_NEEDS, NAME).map_err(failed)?;
        }
        let pack_id = (pack_target.is_some() || real_tree)
            .then(|| userland_pack::pack_identity(&pack))
            .transpose()
            .map_err(failed)?;
        let mem_bytes = match params.mem_bytes {
            Some(0) => return Err(bad("mem_bytes must be more than 0".into())),
            Some(b) => b,
            None => mem_total_bytes()
                .ok_or_else(|| bad("cannot read MemTotal from /proc/meminfo; give mem_bytes".into()))?,
        };
        let file_bytes = (mem_bytes / MIB).max(1) * MIB;
        let cpus = online_cpus();
        let jobs = params.jobs.unwrap_or((cpus as u32).saturating_mul(4));
        let dbench_clients = params.dbench_clients.unwrap_or((cpus as u32).saturating_mul(16));
        let dbench_loadfile = rows
            .contains(&Row::Load(LoadKind::Dbench))
            .then(|| load_loadfile(&params.dbench_loadfile, params.dbench_loadfile_sha256.as_deref()))
            .transpose()
            .map_err(failed)?;
        let space = scratch_space::choose(&params.dir, &ctx.work_dir).map_err(failed)?;
        let has = |k: LoadKind| rows.contains(&Row::Load(k));
        if let Some(target) = pack_target {
            let tree_in_memory = !space.scratch_disk && matches!(space.fs.as_str(), "tmpfs" | "ramfs");
            let page_size = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096);
            let mem_load = has(LoadKind::Mem).then(|| mem_load_bytes(mem_bytes, page_size as u64));
            let ram_mib = mem_total_bytes().ok_or_else(|| bad("cannot read MemTotal from /proc/meminfo".into()))? >> 20;
            let swap_mib = meminfo_bytes("SwapTotal").unwrap_or(0) >> 20;
            check_pack_memory(target, jobs, tree_in_memory, mem_load, ram_mib, swap_mib).map_err(failed)?;
        }
        // Files the rows keep at once: io_load's and read_load's RAM-sized
        // files, dbench_load's clients' files, plus trees and archives
        // (64 MiB slack).
        let dbench_bytes =
            dbench_loadfile.as_ref().map_or(0, |lf| lf.files_bytes_bound().saturating_mul(u64::from(dbench_clients)));
        let need = [(has(LoadKind::Io), file_bytes), (has(LoadKind::Read), file_bytes)]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, b)| *b)
            .sum::<u64>()
            .saturating_add(dbench_bytes)
            .saturating_add(pack_target.map_or(0, |t| t.work_tree_mib() * MIB))
            .saturating_add(if real_tree { real_tree::ROOM_BYTES } else { 0 })
            .saturating_add(64 * MIB);
        space.require(need, "contest's rows", ", or lower mem_bytes").map_err(failed)?;

        let root = space.dir.join("contest");
        fresh_dir(&root)?;
        let foreground = match pack_target {
            Some(target) => {
                let build = PackBuild::prepare(&pack, target, &root.join("linux")).map_err(failed)?;
                ForegroundBuild::Pack { build, pack: pack.clone() }
            }
            None => {
                let spec = TreeSpec { files: params.files, headers: 0 };
                let tree = SourceTree::generate(&root.join("build"), &spec, ctx.seed).map_err(failed)?;
                ForegroundBuild::Synthetic { tree, applet_exe: ctx.applet_exe.clone() }
            }
        };
        let tar_source = root.join("tar-source");
        let tar_archive = root.join("tar-source.tar");
        let real_tree = if real_tree {
            let t =
                real_tree::RealTree::prepare(&pack, &root, &params.tar_dirs, has(LoadKind::Xtar)).map_err(failed)?;
            // The room reserved for the tree was a guess for the default
            // tar_dirs: now that it is made, one more copy of it (ctar's
            // archive or xtar's extraction) and the rows' files must fit.
            let other = need.saturating_sub(real_tree::ROOM_BYTES);
            let want = t.bytes.saturating_add(other);
            // u64::from: the count and the size are u32 on 32-bit guests.
            #[allow(clippy::useless_conversion)]
            let free = nix::sys::statvfs::statvfs(&root)
                .map(|v| u64::from(v.blocks_available()).saturating_mul(u64::from(v.fragment_size())))
                .unwrap_or(u64::MAX);
            if free < want {
                return Err(bad(format!(
                    "tar_dirs make a tree of {} MiB: the tar loads need one more copy of it beside it and the other \
                     rows {} MiB, {} MiB in all, but {} has {} MiB free: give a larger scratch disk or fewer tar_dirs",
                    t.bytes >> 20,
                    other >> 20,
                    want >> 20,
                    root.display(),
                    free >> 20
                )));
            }
            Some(t)
        } else {
            None
        };
        if real_tree.is_none() && (has(LoadKind::Ctar) || has(LoadKind::Xtar)) {
            let seed = ctx.seed.wrapping_add(1);
            SourceTree::generate(&tar_source, &TreeSpec { files: params.tar_files, headers: 0 }, seed)
                .map_err(failed)?;
            let f = std::fs::File::create(&tar_archive).map_err(prep("create", &tar_archive))?;
            let mut b = tar::Builder::new(std::io::BufWriter::new(f));
            b.append_dir_all("tree", &tar_source).map_err(prep("archive", &tar_source))?;
            b.into_inner().map_err(prep("write", &tar_archive))?;
        }
        let read_file = root.join("read_load.dat");
        if has(LoadKind::Read) {
            write_sized(&read_file, file_bytes)?;
        }
        let env = LoadEnv {
            dir: root.join("load"),
            ring_procs: params.ring_procs.unwrap_or((cpus as u32).saturating_mul(4)),
            applet_exe: ctx.applet_exe.clone(),
            file_bytes,
            mem_bytes,
            max_oom_kills: params.max_oom_kills,
            tar_source,
            tar_archive,
            read_file,
            list_root: PathBuf::from("/"),
            dbench_clients,
            dbench_loadfile,
            real_tree,
        };
        let mut params = params;
        params.mem_bytes = Some(mem_bytes);
        params.jobs = Some(jobs);
        params.ring_procs = Some(env.ring_procs);
        params.dbench_clients = Some(env.dbench_clients);
        params.dbench_loadfile_sha256 = env.dbench_loadfile.as_ref().map(|lf| lf.sha256.clone());
        params.rows = rows.iter().map(|r| r.name().to_string()).collect();
        params.target = pack_target;
        params.pack = pack_id.as_ref().map(|_| pack.display().to_string());
        params.load_tools = tree_rows.then_some(load_tools);
        // As kernbench did: one untimed build first, so the first row does
        // not pay for cold binaries.
        match &foreground {
            ForegroundBuild::Synthetic { tree, applet_exe } => {
                build_once(tree, JobLimit::Jobs(jobs as usize), applet_exe).map_err(failed)?;
            }
            ForegroundBuild::Pack { build, .. } => {
                build.reset().map_err(failed)?;
                build.timed_build(JobLimit::Jobs(jobs as usize)).map_err(failed)?;
            }
        }
        Ok(Contest { params, rows, space, foreground, jobs, cpus, env, pack_id })
    }

    /// Runs one row: the build is undone, everything synced and the caches
    /// dropped (unless the row is cacherun) before anything else, so the
    /// load's head start is all the load's: what it dirties then meets the
    /// build. Then the load (if any) gets its head start, the build is
    /// timed, and the load is stopped and reaped; its Loads and LCPU% are
    /// what it did while the build ran. A failed cache drop is noted in
    /// `drop_error` and the row goes on.
    fn run_row(
        &mut self,
        row: Row,
        drop_error: &mut Option<String>,
    ) -> Result<(Timed, Option<LoadReport>), WorkloadError> {
        fresh_dir(&self.env.dir)?;
        self.foreground.reset()?;
        if self.params.drop_caches && row != Row::Cacherun {
            if let Err(e) = page_cache::drop_caches() {
                drop_error.get_or_insert(error_chain(&e));
            }
        }
        let Row::Load(kind) = row else {
            return self.foreground.timed(self.jobs).map(|b| (b, None));
        };
        let mut load = load_process::start(kind, &self.env).map_err(failed)?;
        load.lead(Duration::from_secs_f64(self.params.lead_s)).map_err(failed)?;
        let from = load.mark();
        let build = self.foreground.timed(self.jobs);
        let to = load.mark();
        let report = load.stop(Duration::from_secs_f64(self.params.stop_grace_s));
        let build = build?;
        let mut report = report.map_err(failed)?;
        report.window = Some(LoadWindow::between(&from, &to));
        Ok((build, Some(report)))
    }
}

fn record(
    it: &mut Iteration,
    row: Row,
    build: &Timed,
    load: Option<&LoadReport>,
    real_tree: bool,
) -> serde_json::Value {
    let r = row.name();
    let m = &mut it.metrics;
    m.insert(format!("time_{r}"), Metric::lower(build.elapsed_s, "s"));
    m.insert(format!("cpu_percent_{r}"), Metric::higher(build.cpu_percent, "%"));
    // contest's Loads and LCPU%: the load's work and CPU while the build ran.
    let window = load.and_then(|l| l.window);
    m.insert(format!("loads_{r}"), Metric::higher(window.map_or(0, |w| w.work) as f64, row.load_unit(real_tree)));
    m.insert(format!("lcpu_percent_{r}"), Metric::higher(window.map_or(0.0, |w| w.cpu_percent), "%"));
    let mut detail = serde_json::json!({
        "row": r,
        "load_unit": row.load_unit(real_tree),
        "build_minor_faults": build.usage.minor_faults,
        "build_major_faults": build.usage.major_faults,
        "build_voluntary_switches": build.usage.voluntary_switches,
        "build_involuntary_switches": build.usage.involuntary_switches,
    });
    if let Some(obj) = detail.as_object_mut() {
        if let Some(n) = build.execs {
            obj.insert("build_execs".into(), n.into());
        }
        if let Some(n) = build.objects {
            obj.insert("build_objects".into(), n.into());
        }
    }
    if let (Some(l), Some(obj)) = (load, detail.as_object_mut()) {
        // The whole life of the load (head start, build, stop) beside the
        // build's window the metrics use.
        obj.insert("load_wall_s".into(), l.wall_s.into());
        obj.insert("load_cpu_s".into(), l.cpu_s.into());
        obj.insert("load_work_total".into(), l.work.into());
        if let Some(w) = l.window {
            obj.insert("load_window_s".into(), w.wall_s.into());
            obj.insert("load_window_cpu_s".into(), w.cpu_s.into());
        }
        obj.insert("load_oom_kills".into(), l.oom_kills.into());
        obj.insert("load_killed".into(), l.killed.into());
        obj.insert("load_stop_s".into(), l.stop_s.into());
        obj.insert("load_pgid".into(), l.pgid.into());
    }
    detail
}

/// contest's Ratio: each row's Time over the no_load Time of the same
/// iteration (reference 003: cacherun's 29 s over no_load's 31 s is
/// 0.94), as `ratio_R` for every row of `rows` that has a `time_R`.
/// Without a no_load Time there is no ratio.
fn insert_ratios(metrics: &mut BTreeMap<String, Metric>, rows: &[Row]) {
    let Some(base) = metrics.get("time_no_load").map(|m| m.value).filter(|v| *v > 0.0) else { return };
    for row in rows {
        let r = row.name();
        if let Some(t) = metrics.get(&format!("time_{r}")).map(|m| m.value) {
            metrics.insert(format!("ratio_{r}"), Metric::lower(t / base, "ratio"));
        }
    }
}

/// The row's [`ROW_VMSTAT`] counters, 0 for those that did not change.
fn row_vmstat(d: &SystemDeltas) -> serde_json::Value {
    let counts: serde_json::Map<String, serde_json::Value> =
        ROW_VMSTAT.iter().map(|k| (k.to_string(), d.vmstat.get(*k).copied().unwrap_or(0).into())).collect();
    counts.into()
}

impl Workload for Contest {
    fn name(&self) -> &'static str {
        NAME
    }

    /// The parameters, and for the pack foreground the pack's identity:
    /// builds by different compilers or of different trees are never
    /// compared.
    fn params(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut p = params_map(&self.params);
        // Where the pack is mounted is not what was measured (it is in
        // each iteration's detail); what is in it is.
        p.remove("pack");
        // Each tree's size parameter only where that tree is used: two
        // runs that differ in an unused one still compare.
        if self.env.real_tree.is_some() {
            p.remove("tar_files");
        } else {
            p.remove("tar_dirs");
        }
        if let Some(id) = &self.pack_id {
            p.insert(pack_build::PACK_ID_PARAM.into(), id.clone().into());
        }
        p
    }

    fn run_iteration(&mut self) -> Result<Iteration, WorkloadError> {
        let mut it = Iteration::default();
        let mut rows = Vec::new();
        let mut drop_error = None;
        let mut counters = IterationCounters::default();
        let real = self.env.real_tree.is_some();
        for row in self.rows.clone() {
            counters.start();
            let mut detail = match self.run_row(row, &mut drop_error) {
                Ok((build, load)) => record(&mut it, row, &build, load.as_ref(), real),
                Err(e) => {
                    it.errors.push(format!("{}: {}", row.name(), error_chain(&e)));
                    serde_json::json!({ "row": row.name(), "load_unit": row.load_unit(real), "error": error_chain(&e) })
                }
            };
            if let Some(obj) = detail.as_object_mut() {
                match counters.finish() {
                    Ok(d) => obj.insert("vmstat".into(), row_vmstat(&d)),
                    Err(e) => obj.insert("vmstat_error".into(), error_chain(&e).into()),
                };
            }
            rows.push(detail);
        }
        insert_ratios(&mut it.metrics, &self.rows);
        let _ = std::fs::remove_dir_all(&self.env.dir);
        let d = &mut it.detail;
        d.insert("rows".into(), rows.into());
        d.insert("cpus".into(), self.cpus.into());
        d.insert("jobs".into(), self.jobs.into());
        d.insert("dir".into(), self.space.dir.display().to_string().into());
        d.insert("fs".into(), self.space.fs.clone().into());
        d.insert("scratch_disk".into(), self.space.scratch_disk.into());
        match &self.foreground {
            ForegroundBuild::Synthetic { tree, .. } => {
                d.insert("tree_sha256".into(), tree.sha256.clone().into());
            }
            ForegroundBuild::Pack { build, pack } => {
                d.insert("target".into(), build.target().name().into());
                d.insert("goals".into(), build.target().goals().into());
                d.insert("pack".into(), pack.display().to_string().into());
                d.insert("skeleton_files".into(), build.skeleton_files().into());
            }
        }
        if let Some(t) = &self.env.real_tree {
            d.insert("tree_entries".into(), t.entries.into());
            d.insert("tree_bytes".into(), t.bytes.into());
            d.insert("list_roots".into(), t.list_roots.clone().into());
        }
        d.insert("caches_dropped".into(), (self.params.drop_caches && drop_error.is_none()).into());
        if let Some(e) = drop_error {
            d.insert("drop_caches_error".into(), e.into());
        }
        Ok(it)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_lcpu_are_the_builds_window_and_the_whole_life_is_detail() {
        let build = Timed::from(BuildStats {
            limit: JobLimit::Jobs(4),
            elapsed_s: 10.0,
            usage: Default::default(),
            cpu_percent: 150.0,
            execs: 0,
            compiles: 0,
            max_running: 0,
            image_sha256: String::new(),
        });
        let window = LoadWindow { work: 40, wall_s: 10.0, cpu_s: 5.0, cpu_percent: 50.0 };
        let load = LoadReport {
            work: 100,
            wall_s: 14.0,
            cpu_s: 9.0,
            cpu_percent: 64.3,
            oom_kills: 0,
            killed: false,
            stop_s: 0.1,
            pgid: 7,
            window: Some(window),
        };
        let mut it = Iteration::default();
        let row = Row::Load(LoadKind::Fork);
        let detail = record(&mut it, row, &build, Some(&load), false);
        assert_eq!(it.metrics["loads_fork_load"].value, 40.0);
        assert_eq!(it.metrics["lcpu_percent_fork_load"].value, 50.0);
        assert_eq!(detail["load_work_total"], 100);
        assert_eq!(detail["load_cpu_s"], 9.0);
    }

    /// Reference 003's 2.5.60 rows (Time in s, and the Ratio the report
    /// printed): each ratio is the row's own time over no_load's, so a
    /// ratio over any other row (cacherun, the row before, the first row
    /// run) comes out wrong.
    #[test]
    fn ratios_are_each_rows_time_over_no_load_s() {
        let rows = [
            (Row::NoLoad, 31.0, 1.00),
            (Row::Cacherun, 29.0, 0.94),
            (Row::Load(LoadKind::Process), 38.0, 1.23),
            (Row::Load(LoadKind::Xtar), 40.0, 1.29),
            (Row::Load(LoadKind::Io), 93.0, 3.00),
            (Row::Load(LoadKind::List), 35.0, 1.13),
            (Row::Load(LoadKind::Mem), 50.0, 1.61),
        ];
        let times = |skip: Option<Row>| -> BTreeMap<String, Metric> {
            rows.iter()
                .filter(|(r, ..)| Some(*r) != skip)
                .map(|(r, t, _)| (format!("time_{}", r.name()), Metric::lower(*t, "s")))
                .collect()
        };
        let order: Vec<Row> = rows.iter().map(|(r, ..)| *r).collect();
        let mut m = times(None);
        insert_ratios(&mut m, &order);
        for (r, t, printed) in rows {
            let ratio = &m[&format!("ratio_{}", r.name())];
            assert_eq!((ratio.value, ratio.unit.as_str()), (t / 31.0, "ratio"), "{}", r.name());
            assert_eq!((ratio.value * 100.0).round() / 100.0, printed, "{}: as reference 003 printed it", r.name());
        }
        // A row that failed has no time and so no ratio; the others keep
        // theirs.
        let mut m = times(Some(Row::Load(LoadKind::Io)));
        insert_ratios(&mut m, &order);
        assert!(!m.contains_key("ratio_io_load"));
        assert_eq!(m["ratio_mem_load"].value, 50.0 / 31.0);
        // Without no_load (not among the rows, or failed) there is nothing
        // to divide by.
        for rows in [&order[1..], &order[..]] {
            let mut m = times(Some(Row::NoLoad));
            insert_ratios(&mut m, rows);
            assert!(!m.keys().any(|k| k.starts_with("ratio_")), "{m:?}");
        }
    }

    fn refused(f: &dyn Fn(&mut ContestParams)) -> String {
        let mut p = ContestParams { mem_bytes: Some(64 * MIB), ..Default::default() };
        f(&mut p);
        let tmp = tempfile::tempdir().unwrap();
        match Contest::new(p, &RunContext::new(1, tmp.path().to_path_buf())) {
            Ok(_) => String::new(),
            Err(e) => error_chain(&e),
        }
    }

    #[test]
    fn the_foreground_is_a_parameter_every_result_carries() {
        let parse = |m: serde_json::Value| {
            crate::workload::parse_params::<ContestParams>(NAME, m.as_object().unwrap()).map_err(|e| error_chain(&e))
        };
        let p = parse(serde_json::json!({})).unwrap();
        assert_eq!((p.build, p.target, p.pack.as_deref()), (Foreground::Synthetic, None, None), "synthetic by default");
        let m = params_map(&p);
        assert_eq!(m["build"], "synthetic", "the kind is in the params even when defaulted");
        assert!(!m.contains_key("target") && !m.contains_key("pack"), "the pack build's own are not: {m:?}");
        let p = parse(serde_json::json!({ "build": "pack", "target": "standard" })).unwrap();
        assert_eq!((p.build, p.target), (Foreground::Pack, Some(Target::Standard)));
        let m = params_map(&p);
        assert_eq!((&m["build"], &m["target"]), (&"pack".into(), &"standard".into()));
        let e = parse(serde_json::json!({ "build": "real" })).unwrap_err();
        assert!(e.contains("real"), "{e}");
        assert!(parse(serde_json::json!({ "build": "pack", "target": "vmlinux" })).is_err());
        // The foreground's meaning changed with `pack` (version 5), the
        // tar and list loads' with `load_tools` (6).
        assert_eq!(crate::workloads::version(NAME), Some(6));
        // The loads' programs follow the build unless given.
        assert_eq!(p.effective_load_tools(), LoadTools::Pack);
        let p = parse(serde_json::json!({ "load_tools": "pack", "tar_dirs": "linux/fs,linux/mm" })).unwrap();
        assert_eq!((p.build, p.effective_load_tools()), (Foreground::Synthetic, LoadTools::Pack));
        assert_eq!(p.tar_dirs, ["linux/fs", "linux/mm"]);
        let p = parse(serde_json::json!({ "build": "pack", "load_tools": "synthetic" })).unwrap();
        assert_eq!(p.effective_load_tools(), LoadTools::Synthetic);
        assert_eq!(parse(serde_json::json!({})).unwrap().effective_load_tools(), LoadTools::Synthetic);
        // What `--pack auto` reads (the built-in suite's choice per arch is
        // checked with the suites).
        let spec = |name: &str, params: serde_json::Value| WorkloadSpec {
            name: name.into(),
            iterations: None,
            warmup: None,
            params: params.as_object().cloned().unwrap_or_default(),
        };
        assert!(needs_pack(&spec(NAME, serde_json::json!({ "build": "pack" }))));
        assert!(crate::workloads::needs_pack(&spec(NAME, serde_json::json!({ "build": "pack" }))));
        assert!(!crate::workloads::needs_pack(&spec(NAME, serde_json::json!({ "build": "synthetic" }))));
        assert!(!crate::workloads::needs_pack(&spec(NAME, serde_json::json!({}))));
        assert!(needs_pack(&spec(NAME, serde_json::json!({ "load_tools": "pack" }))), "the loads' tar and ls");
        let tools = |rows: serde_json::Value| {
            needs_pack(&spec(NAME, serde_json::json!({ "load_tools": "pack", "rows": rows })))
        };
        assert!(tools("no_load,list_load".into()) && tools(serde_json::json!(["ctar_load"])));
        assert!(!tools("no_load,io_load".into()), "no row on the tree: the pack's loads are not run");
        assert!(!needs_pack(&spec(NAME, serde_json::json!({ "load_tools": "synthetic" }))));
        assert!(!needs_pack(&spec("kbuild", serde_json::json!({ "build": "pack" }))), "only contest's build");
        assert!(crate::workloads::needs_pack(&spec("kernbench", serde_json::json!({}))));
    }

    #[test]
    fn the_pack_builds_memory_bound_includes_mem_load_s_share() {
        let none = |target, jobs, tree, ram| check_pack_memory(target, jobs, tree, None, ram, 0);
        // kernbench's bound: 8 jobs on the quick target are 4 compilers.
        let quick = BASE_MIB + 4 * JOB_MIB;
        none(Target::Quick, 8, false, quick).unwrap();
        let e = none(Target::Quick, 8, false, quick - 1).unwrap_err().to_string();
        assert!(e.contains(&format!("needs about {quick} MiB")) && e.contains("4 compilers at once"), "{e}");
        assert!(e.contains("-j8") && e.contains(&format!("MemTotal is {} MiB", quick - 1)), "{e}");
        assert_eq!(quick, 960);
        none(Target::Standard, 8, false, BASE_MIB + 8 * JOB_MIB).unwrap();
        let e = none(Target::Quick, 2, true, 600).unwrap_err().to_string();
        assert!(e.contains("needs about 640 MiB") && e.contains("32 MiB of output tree in memory"), "{e}");
        // mem_load's 110% of mem_bytes comes on top, against RAM and swap.
        let mem_load = Some(2200 * MIB);
        let e = check_pack_memory(Target::Quick, 8, false, mem_load, 2000, 1000).unwrap_err().to_string();
        assert!(e.contains("960 MiB") && e.contains("2200 MiB for mem_load"), "{e}");
        assert!(e.contains("3160 MiB in all") && e.contains("MemTotal + SwapTotal is 3000 MiB"), "{e}");
        assert!(e.contains("--swap") && e.contains("mem_load out of rows"), "{e}");
        check_pack_memory(Target::Quick, 8, false, mem_load, 2000, 1160).unwrap();
        // Without mem_load, swap does not count for the build.
        assert!(check_pack_memory(Target::Quick, 8, false, None, 900, 4000).is_err());
    }

    #[test]
    fn a_pack_build_without_a_pack_is_refused_before_any_work() {
        let tmp = tempfile::tempdir().unwrap();
        let pack = tmp.path().join("no-pack");
        let e = refused(&|p| {
            p.build = Foreground::Pack;
            p.pack = Some(pack.display().to_string());
        });
        assert!(e.contains(&format!("{}/usr/bin/make is missing", pack.display())), "{e}");
        assert!(e.contains("contest") && e.contains("bootbench run --pack"), "{e}");
        let e = refused(&|p| p.target = Some(Target::Quick));
        assert!(e.contains("target is a parameter of the pack build"), "{e}");
        let e = refused(&|p| p.pack = Some("/pack".into()));
        assert!(e.contains("pack is a parameter of the pack build and the pack's loads"), "{e}");
        // The pack's loads without a pack: named before any work.
        let e = refused(&|p| {
            p.load_tools = Some(LoadTools::Pack);
            p.rows = vec!["ctar_load".into()];
            p.pack = Some(pack.display().to_string());
        });
        assert!(e.contains(&format!("{}/usr/bin/tar is missing", pack.display())), "{e}");
        let e = refused(&|p| {
            p.load_tools = Some(LoadTools::Pack);
            p.tar_dirs = vec!["/etc".into()];
        });
        assert!(e.contains("tar_dirs entry '/etc' is not a relative path under linux/"), "{e}");
    }

    #[test]
    fn rows_are_contests_eleven_in_order() {
        let names: Vec<&str> = ROWS.iter().map(|r| r.name()).collect();
        assert_eq!(
            names,
            [
                "no_load",
                "cacherun",
                "process_load",
                "ctar_load",
                "xtar_load",
                "io_load",
                "read_load",
                "list_load",
                "mem_load",
                "dbench_load",
                "fork_load"
            ]
        );
        assert_eq!(Row::from_name("io_load"), Some(Row::Load(LoadKind::Io)));
        assert_eq!(Row::from_name("io"), None);
        assert_eq!(Row::Load(LoadKind::Io).load_unit(false), "MiB written");
        assert_eq!(Row::Load(LoadKind::List).load_unit(false), "entries listed");
        assert_eq!(Row::Load(LoadKind::List).load_unit(true), "listings", "contest's unit for ls -lR");
    }

    #[test]
    fn bad_parameters_are_refused_before_any_work() {
        assert!(refused(&|p| p.rows.clear()).contains("rows is empty"));
        assert!(refused(&|p| p.rows = vec!["no_load".into(), "disk_load".into()]).contains("unknown row 'disk_load'"));
        assert!(refused(&|p| p.rows = vec!["no_load".into(), "no_load".into()]).contains("twice"));
        assert!(refused(&|p| p.lead_s = -1.0).contains("lead_s"));
        assert!(refused(&|p| p.stop_grace_s = f64::NAN).contains("stop_grace_s"));
        assert!(refused(&|p| p.files = 1).contains("at least 2"));
        assert!(refused(&|p| p.jobs = Some(0)).contains("at least 1"));
        assert!(refused(&|p| p.mem_bytes = Some(0)).contains("mem_bytes"));
        assert!(refused(&|p| p.dir = "/nonexistent/scratch".into()).contains("/nonexistent/scratch"));
        // A RAM size no disk here has room for twice.
        let e = refused(&|p| p.mem_bytes = Some(1 << 60));
        assert!(e.contains("MiB free in") && e.contains("--scratch-disk"), "{e}");
        let mut m = serde_json::Map::new();
        m.insert("rows".into(), serde_json::json!("no_load, io_load"));
        let p: ContestParams = crate::workload::parse_params("contest", &m).unwrap();
        assert_eq!(p.rows, ["no_load", "io_load"], "a cmdline word lists rows too");
        let mut m = serde_json::Map::new();
        m.insert("row".into(), serde_json::json!(["no_load"]));
        assert!(crate::workload::parse_params::<ContestParams>("contest", &m).is_err(), "unknown field");
    }
}
