//! The contest report as data: the inputs (kernels and their boots), the
//! settings, and the report itself (per-row tables, kernel summaries,
//! excluded boots, warnings), as the JSON report serialises it. Plain data:
//! it computes no figure and names nothing else in `contest`; the figures
//! come from `contest` itself and the formatting from `contest::render`.

use crate::results::BootRecord;
use crate::stats::fieller::RatioInterval;
use loads::schema::StorageInfo;
use serde::Serialize;

/// The workload whose results are tabled.
pub const WORKLOAD: &str = "contest";
/// The row every ratio divides by.
pub const NO_LOAD: &str = "no_load";
/// Format marker of the JSON report.
pub const REPORT_FORMAT: &str = "bootbench-contest-report";
/// Version of the JSON report's layout.
pub const REPORT_VERSION: u32 = 1;

/// Errors building the contest table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ContestReportError {
    /// An input holds no boot with contest results.
    #[error("{input}: no contest results to table; its boots:\n{why}")]
    NoContest {
        /// The file (or file and selector) given.
        input: String,
        /// Each boot and why it does not count.
        why: String,
    },
    /// The boots ran different versions of contest.
    #[error("contest ran in different versions: {versions}; different versions or foreground builds measure different things, so they are never tabled together (rerun with the same bootbench, build and pack)")]
    MixedVersions {
        /// Each version with the kernels (and boots) that ran it.
        versions: String,
    },
    /// No kernel has a usable contest boot.
    #[error("no kernel has a usable contest boot")]
    NothingToTable,
    /// `--baseline` names no kernel.
    #[error("no kernel named '{name}' for the baseline; the kernels are: {names}")]
    UnknownBaseline {
        /// The name asked for.
        name: String,
        /// The kernels' names.
        names: String,
    },
    /// `--baseline` names several kernels.
    #[error("'{name}' names several kernels ({names}) for the baseline; use a full name from the table")]
    AmbiguousBaseline {
        /// The name asked for.
        name: String,
        /// The kernels it matches.
        names: String,
    },
    /// `--baseline` names a kernel whose boots all were excluded.
    #[error("the baseline {name} has no usable contest boot")]
    UnusableBaseline {
        /// The kernel.
        name: String,
    },
    /// `--ratio-base` is neither `baseline` nor `own`.
    #[error("unknown ratio base '{0}' (expected baseline or own)")]
    RatioBase(String),
}

/// What Ratio divides a row's time by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RatioBase {
    /// The baseline kernel's mean no_load time (reference 001: a faster
    /// kernel's no_load shows below 1.00).
    Baseline,
    /// The kernel's own no_load of the same iteration, averaged over the
    /// iterations (the workload's `ratio_R`).
    Own,
}

impl std::str::FromStr for RatioBase {
    type Err = ContestReportError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "baseline" => Ok(RatioBase::Baseline),
            "own" => Ok(RatioBase::Own),
            other => Err(ContestReportError::RatioBase(other.into())),
        }
    }
}

/// One boot given for a kernel, with where it was read from.
#[derive(Debug, Clone)]
pub struct InputBoot {
    /// The file (or store run) it came from, for messages.
    pub origin: String,
    /// The boot.
    pub record: BootRecord,
}

/// A kernel to table: its display name and its boots.
#[derive(Debug, Clone)]
pub struct KernelInput {
    /// Name in the tables.
    pub name: String,
    /// The arguments that selected it.
    pub sources: Vec<String>,
    /// Its boots, usable or not.
    pub boots: Vec<InputBoot>,
}

/// Settings of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// What Ratio divides by.
    pub ratio_base: RatioBase,
    /// The baseline's name (display name or label); `None`: the first
    /// kernel with a usable boot.
    pub baseline: Option<String>,
    /// The text shows each Ratio's 95% interval in a last column.
    pub intervals: bool,
}

/// Mean and spread of one column over the runs that measured it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Column {
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation; `None` with a single value.
    pub sd: Option<f64>,
    /// Values averaged.
    pub n: usize,
}

/// One failed measurement of a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowError {
    /// Which boot and iteration, e.g. `boot #1 iteration 2`.
    #[serde(rename = "where")]
    pub location: String,
    /// What the workload said.
    pub message: String,
}

/// Whether a kernel has figures for a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowState {
    /// At least one run measured it.
    Measured,
    /// Every run of it failed.
    Failed,
    /// No iteration measured it or reported it failed.
    NotMeasured,
}

/// One kernel's line in one row's table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowEntry {
    /// Kernel display name.
    pub kernel: String,
    /// Measured, failed or absent.
    pub state: RowState,
    /// Iterations that measured the row (the reports' `[runs]`).
    pub runs: usize,
    /// Iterations in which the row failed.
    pub failed: usize,
    /// The build's wall time, seconds.
    pub time: Option<Column>,
    /// The build's CPU use in % (over 100 on SMP).
    pub cpu_percent: Option<Column>,
    /// Work the load completed, in the row's load unit.
    pub loads: Option<Column>,
    /// The load's CPU time over its running time, %.
    pub lcpu_percent: Option<Column>,
    /// Time over the ratio base. In `baseline` mode the spread is Time's
    /// spread over the baseline's no_load mean (the divisor is taken as
    /// fixed); in `own` mode it is the spread of the per-iteration ratios.
    pub ratio: Option<Column>,
    /// The 95% confidence interval of the Ratio, when there are two runs
    /// or more: Student's t over the per-iteration ratios in `own` mode,
    /// and for the baseline kernel's own rows in `baseline` mode (its rows
    /// and its no_load come from the same iterations: paired); Fieller's
    /// interval for the other kernels' mean Time over the baseline's mean
    /// no_load Time, both samples' spreads counted. None for a no_load over
    /// itself (1 by construction).
    pub ratio_interval: Option<RatioInterval>,
    /// The failures, each with where it happened.
    pub errors: Vec<RowError>,
}

/// One row's table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowTable {
    /// Row name, e.g. `io_load`.
    pub row: String,
    /// The Loads column's unit(s), as the kernels reported them.
    pub load_units: Vec<String>,
    /// One entry per kernel, in kernel order.
    pub kernels: Vec<RowEntry>,
}

/// A boot that does not count, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExcludedBoot {
    /// Kernel display name.
    pub kernel: String,
    /// Where the boot was read from.
    pub origin: String,
    /// Boot index in its file.
    pub boot: u32,
    /// Why it does not count.
    pub reason: String,
}

/// What one kernel's figures rest on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelSummary {
    /// Display name.
    pub name: String,
    /// Whether it is the ratio's baseline.
    pub baseline: bool,
    /// The arguments that selected it.
    pub sources: Vec<String>,
    /// Kernel release.
    pub release: String,
    /// Boots that count.
    pub boots_used: usize,
    /// Boots given.
    pub boots_total: usize,
    /// contest iterations in the boots that count.
    pub iterations: usize,
    /// Accel modes of its boots (one unless they differ).
    pub accel: Vec<String>,
    /// Storage of its boots, described (one unless they differ).
    pub storage: Vec<String>,
    /// The raw storage records, distinct.
    pub storage_info: Vec<Option<StorageInfo>>,
    /// contest's parameters as canonical JSON, distinct.
    pub params: Vec<String>,
    /// Failures not tied to one row (the workload stopping early, an
    /// iteration error naming no row).
    pub errors: Vec<RowError>,
}

/// The whole contest report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContestReport {
    /// Always [`REPORT_FORMAT`].
    pub format: &'static str,
    /// [`REPORT_VERSION`].
    pub version: u32,
    /// What Ratio divides by.
    pub ratio_base: RatioBase,
    /// The baseline kernel's name.
    pub baseline: String,
    /// The baseline's mean no_load time, when it has one.
    pub baseline_no_load_s: Option<f64>,
    /// Kernels with usable boots, in order.
    pub kernels: Vec<KernelSummary>,
    /// Rows in contest's order, then any rows this build does not know.
    pub rows: Vec<RowTable>,
    /// Boots that do not count.
    pub excluded: Vec<ExcludedBoot>,
    /// What the reader must know: different parameters or machines,
    /// kernels left out, units that differ.
    pub warnings: Vec<String>,
    /// Whether the text shows the Ratio intervals (the JSON always has
    /// them).
    #[serde(skip)]
    pub intervals: bool,
}
