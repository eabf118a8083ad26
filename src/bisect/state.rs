//! The bisection's whole state: the plan it follows, every build, boot and
//! test with its evidence, and where it is. It is the single source of truth
//! for `--resume`: the driver decides its next action from this state alone,
//! so a run interrupted at any point (even during a write: the file is
//! replaced atomically) continues where it stopped. This module owns the
//! file format and the questions asked of it ("which commits are good?");
//! it never builds, boots or runs git.

use super::drift_term::{mean_time, DriftFit, DriftTerm, TimedValue};
use super::lab_settings::LabSettings;
use super::sequential_test::{
    EndsComparison, ErrorBudget, Evaluation, OtherGroups, PairComparison, ReferenceModel, SequentialTestError,
    VarianceBound,
};
use serde::{Deserialize, Serialize};
use statrs::statistics::{Data, Median};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The `format` field of every state file.
pub const STATE_FORMAT: &str = "bootbench-bisect-state";
/// Version of the state layout.
pub const STATE_VERSION: u32 = 1;

/// Errors reading or writing a state file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The file cannot be read.
    #[error("cannot read bisection state {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Not JSON of the expected shape.
    #[error("{path} is not a bisection state file")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Parser error.
        #[source]
        source: serde_json::Error,
    },
    /// Another format or a newer version.
    #[error("{path}: unsupported state format '{format}' version {version} (this bootbench reads '{STATE_FORMAT}' up to version {STATE_VERSION})")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// Its format field.
        format: String,
        /// Its version.
        version: u32,
    },
    /// The file cannot be written.
    #[error("cannot write bisection state {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// What is bisected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A performance regression in one metric.
    Perf,
    /// Boot failures: good boots, bad panics or hangs.
    Boot,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "perf" => Ok(Mode::Perf),
            "boot" => Ok(Mode::Boot),
            other => Err(format!("unknown mode '{other}' (expected perf or boot)")),
        }
    }
}

/// How a bisection takes the host's drift out of its comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftModel {
    /// Every boot as it measured (states from before the drift term).
    #[default]
    None,
    /// A common linear slope per boot, fitted to every group's boots and
    /// taken out, its error added to each comparison's variance (see
    /// [`drift_term`](super::drift_term)).
    Linear,
}

impl std::str::FromStr for DriftModel {
    type Err = String;
    fn from_str(s: &str) -> Result<DriftModel, String> {
        match s {
            "none" => Ok(DriftModel::None),
            "linear" => Ok(DriftModel::Linear),
            other => Err(format!("unknown drift model '{other}' (expected linear or none)")),
        }
    }
}

/// A group of boots a comparison takes: an end's (the recent ones, with
/// a window) or one test's candidate boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// An end's boots.
    Reference(Role),
    /// Test `number`'s boots.
    Test(u32),
}

/// How steps are classified.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StepPolicy {
    /// The sequential test: boots only while unsure (the default).
    Sequential,
    /// The classic way, kept for comparison: exactly `boots` boots per step,
    /// then the closer reference (by the mean of the logs) wins.
    Fixed {
        /// Boots per step.
        boots: u32,
    },
}

/// Everything that decides how the bisection proceeds (the lab's own
/// settings, such as the build command, live in [`LabSettings`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Perf or boot.
    pub mode: Mode,
    /// `WORKLOAD.METRIC` (perf mode).
    pub metric: String,
    /// Smallest regression between the ends worth bisecting, as a fraction
    /// (0.03 = 3 %).
    pub threshold: f64,
    /// Highest rate of wrong culprits the bisection may have.
    pub wrong_culprit_rate: f64,
    /// How the rate is guaranteed. `None`: every test (steps and
    /// confirmations) gets a share of it, so that by the union bound no test
    /// errs with at most that probability. `Some(a)`: steps run at α = β = a
    /// and only the confirmation guarantees the rate: a wrong culprit can
    /// only be confirmed if a confirmation test errs, so each confirmation
    /// round gets rate / (1 + max_revisions).
    #[serde(default)]
    pub step_rate: Option<f64>,
    /// Step classification.
    pub policy: StepPolicy,
    /// Candidate boots before a step may decide.
    pub min_boots: u32,
    /// Candidate boots after which a step is skipped as unsure.
    pub max_boots: u32,
    /// Boots of each end before the bisection starts.
    pub reference_boots: u32,
    /// Boots of each end at most, while the ends do not yet differ clearly.
    pub max_reference_boots: u32,
    /// Boots of each end at most over the whole bisection: a step boots the
    /// ends again while they are known too imprecisely for its test to
    /// decide within `max_boots`.
    pub reference_cap: u32,
    /// One reference boot (alternating good and bad) after this many
    /// candidate boots; 0 never interleaves.
    pub reference_every: u32,
    /// Tests compare a candidate with the ends' boots among the last this
    /// many boots of the bisection (at least the [`NEAR_LEAST`] most recent
    /// of each end), so a host that drifts overnight shifts both alike; 0
    /// takes every boot of the ends (states from before it). Only without
    /// the drift term: with it every boot of the ends counts.
    #[serde(default)]
    pub reference_window: u32,
    /// How the host's drift is taken out of the comparisons (none in
    /// states from before the drift term).
    #[serde(default)]
    pub drift: DriftModel,
    /// The drift per boot thought typical (log scale): the standard
    /// deviation of the slope's prior (see [`drift_term`](super::drift_term)).
    #[serde(default = "default_drift_scale")]
    pub drift_scale: f64,
    /// Significance the ends must differ at before bisecting.
    pub ends_alpha: f64,
    /// How σ is taken from its estimate.
    pub variance: VarianceBound,
    /// Boot mode: boots a commit must pass to be good.
    pub boot_tries: u32,
    /// Whether the culprit and its parent are measured again at the end.
    pub confirm: bool,
    /// Verdicts a failed confirmation may revise before giving up.
    pub max_revisions: u32,
    /// Changes to find at most: after a confirmed culprit that carries
    /// only part of the ends' change, the rest of the range is bisected
    /// for the others (see [`changes`](super::changes)); 1 stops at the
    /// first (states from before the search).
    #[serde(default = "one_change")]
    pub max_changes: u32,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            mode: Mode::Perf,
            metric: "fork.fork_rate".into(),
            threshold: 0.02,
            wrong_culprit_rate: 0.05,
            step_rate: Some(0.03),
            policy: StepPolicy::Sequential,
            min_boots: 2,
            max_boots: 8,
            reference_boots: 6,
            max_reference_boots: 16,
            reference_cap: 40,
            reference_every: DEFAULT_REFERENCE_EVERY,
            reference_window: DEFAULT_REFERENCE_WINDOW,
            drift: DriftModel::Linear,
            drift_scale: DEFAULT_DRIFT_SCALE,
            ends_alpha: 0.05,
            variance: VarianceBound::Upper(0.75),
            boot_tries: 2,
            confirm: true,
            max_revisions: 2,
            max_changes: DEFAULT_MAX_CHANGES,
        }
    }
}

/// The default [`Plan::reference_window`], in boots.
/// 0, every boot of the ends: the drift term ([`Plan::drift`]) takes the
/// host's drift out instead. A window of 40 kept the rate of wrong
/// culprits under drift too, but holds only about 4 boots of each end, so
/// it cost boots and confirmations on a steady host (README).
pub const DEFAULT_REFERENCE_WINDOW: u32 = 0;

/// The default [`Plan::drift_scale`]: 0.03% per boot, 3% over 100 boots;
/// chosen by simulation against 0.02%, 0.05% and a flat prior (README).
pub const DEFAULT_DRIFT_SCALE: f64 = 0.0003;

fn default_drift_scale() -> f64 {
    DEFAULT_DRIFT_SCALE
}

/// The default [`Plan::reference_every`]: one reference boot after every
/// two candidate boots keeps the drift term's slope measured (with 4, on a
/// steady host, 26-27 of 300 simulated bisections gave up instead of 10,
/// and 65-66% confirmed every change instead of 81-83%).
pub const DEFAULT_REFERENCE_EVERY: u32 = 2;

/// The default [`Plan::max_changes`] on the command line: the first change
/// and up to two more.
pub const DEFAULT_MAX_CHANGES: u32 = 3;

/// [`Plan::max_changes`] of states from before the search for more
/// changes: one change.
fn one_change() -> u32 {
    1
}

/// Boots of each end a windowed test takes at least: the most recent ones.
pub const NEAR_LEAST: usize = 4;

/// A boot whose value lies more than this many robust σ (from the median
/// difference between two boots of one end) outside the span of the ends'
/// medians is an outlier: a host hiccup, not the kernel. No commit of a
/// range with one direction of change measures outside its ends; at 6σ a
/// log-normal boot is called one about once in 10^9, a boot 1.5 times its
/// kernel's level at a per-boot CV of 2.9% always is.
pub const OUTLIER_SIGMAS: f64 = 6.0;

/// Good boots each end needs before boots are checked for outliers.
pub const OUTLIER_MIN_BOOTS: usize = 4;

/// Why a boot was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A boot of the good end, for the reference.
    GoodReference,
    /// A boot of the bad end, for the reference.
    BadReference,
    /// A boot of the commit under test.
    Candidate,
}

impl Role {
    /// The other reference.
    pub fn other(self) -> Role {
        match self {
            Role::GoodReference => Role::BadReference,
            _ => Role::GoodReference,
        }
    }
}

/// One boot and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootEntry {
    /// 0-based, in the order boots ran.
    pub index: usize,
    /// The commit whose kernel booted.
    pub commit: String,
    /// Why.
    pub role: Role,
    /// The test it belongs to (candidate boots).
    #[serde(default)]
    pub test: Option<u32>,
    /// `ok`, or how it failed: `panic`, `oops`, `hang`, `qemu_failure`,
    /// `incomplete`, `partial` (a workload failed), `no_metric`,
    /// `bad_value`. Never `init_panic`: a boot whose appliance init
    /// panicked is a bootbench bug, booted again and never recorded.
    pub classification: String,
    /// What failed, for a failed boot.
    #[serde(default)]
    pub detail: Option<String>,
    /// Per-boot mean of the metric (perf mode, when the boot measured it).
    #[serde(default)]
    pub value: Option<f64>,
    /// The metric's iterations in this boot.
    #[serde(default)]
    pub iterations: Vec<f64>,
    /// Host wall time of the boot.
    pub wall_s: f64,
    /// When it finished (RFC 3339).
    pub at: String,
    /// The version of the metric's workload that ran (absent: not known,
    /// as in states from before versions); a bisection never mixes two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_version: Option<u32>,
    /// The userland pack the metric's workload built in (absent: none, or
    /// a state from before packs were recorded); a bisection never mixes
    /// two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_id: Option<String>,
    /// The machine it measured on (QEMU, machine type, CPU model, shape
    /// and, for real-clock boots, the host; absent: not recorded, as in
    /// states from before); a bisection never mixes two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
}

impl BootEntry {
    /// A boot for tests: number `index` of `commit` in `role` (and `test`),
    /// `ok` with `value`, or a hang without one.
    #[cfg(test)]
    pub(crate) fn for_test(index: usize, commit: &str, role: Role, test: Option<u32>, value: Option<f64>) -> BootEntry {
        BootEntry {
            index,
            commit: commit.into(),
            role,
            test,
            classification: if value.is_some() { "ok".into() } else { "hang".into() },
            detail: None,
            value,
            iterations: vec![],
            wall_s: 1.0,
            at: now(),
            workload_version: None,
            pack_id: None,
            machine: None,
        }
    }

    /// Whether the boot ended as a boot failure the kernel is to blame for
    /// (what boot mode calls bad). The appliance's own init panic
    /// (`init_panic`) never is: that is bootbench's failure.
    pub fn kernel_failed(&self) -> bool {
        matches!(self.classification.as_str(), "panic" | "boot_failure" | "oops" | "hang")
    }
}

/// How a commit's build went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildStatus {
    /// A kernel the appliance can boot.
    Built,
    /// The build command failed or produced no image.
    Failed,
    /// Built, but the kernel cannot run the appliance (config lacks what
    /// the init needs).
    Unsuitable,
}

/// One commit's build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// Outcome.
    pub status: BuildStatus,
    /// Why it failed or is unsuitable.
    #[serde(default)]
    pub reason: Option<String>,
    /// The kernel image, copied out of the tree.
    #[serde(default)]
    pub image: Option<PathBuf>,
    /// sha256 of the image.
    #[serde(default)]
    pub image_sha256: Option<String>,
    /// The kernel config, copied beside the image.
    #[serde(default)]
    pub config: Option<PathBuf>,
    /// Extra kernel cmdline words for this commit (from `--append-file`).
    #[serde(default)]
    pub cmdline: Option<String>,
    /// Whether the kernel has the virtio results port built in.
    #[serde(default)]
    pub results_port: bool,
    /// The build's output.
    #[serde(default)]
    pub log: Option<PathBuf>,
    /// How long the build took.
    pub seconds: f64,
}

/// What is known about one commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitRecord {
    /// Full object name.
    pub sha: String,
    /// Subject line.
    pub subject: String,
    /// Index in the range, oldest first (0 = the good end), when known.
    #[serde(default)]
    pub position: Option<u64>,
    /// The build, once done.
    #[serde(default)]
    pub build: Option<BuildRecord>,
}

/// Why a commit was tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// A bisection step.
    Step,
    /// The first bad commit, measured again.
    ConfirmCulprit,
    /// Its parent, measured again.
    ConfirmParent,
    /// One `git bisect run` invocation.
    Run,
}

/// A test's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Like the good end.
    Good,
    /// Like the bad end.
    Bad,
    /// No verdict: build failure, unsuitable kernel, repeated boot failure,
    /// or still unsure at the cap.
    Skip,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Good => "good",
            Verdict::Bad => "bad",
            Verdict::Skip => "skip",
        })
    }
}

/// One test of one commit: a bisection step or a confirmation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRecord {
    /// 1-based; decides its share of the error budget.
    pub number: u32,
    /// The commit tested.
    pub commit: String,
    /// Why.
    pub kind: TestKind,
    /// Highest probability of calling a good commit bad.
    pub alpha: f64,
    /// Highest probability of calling a bad commit good.
    pub beta: f64,
    /// Candidate commits left when the test started.
    #[serde(default)]
    pub remaining: Option<u64>,
    /// Positions of the good and bad bounds when the test started.
    #[serde(default)]
    pub bounds: Option<(u64, u64)>,
    /// The verdict; `None` while running.
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// The verdict's reason in words.
    #[serde(default)]
    pub reason: Option<String>,
    /// The sequential test's last evaluation.
    #[serde(default)]
    pub evidence: Option<Evaluation>,
    /// Boots of the candidate that failed.
    #[serde(default)]
    pub boot_failures: u32,
    /// When it started and ended (RFC 3339).
    pub started_at: String,
    /// When it ended.
    #[serde(default)]
    pub finished_at: Option<String>,
}

/// Where the bisection is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "phase")]
pub enum Phase {
    /// Measuring the ends.
    References,
    /// Testing midpoints.
    Bisecting,
    /// Measuring the named culprit and its parent again.
    Confirming {
        /// The culprit named by the bisection.
        culprit: String,
    },
    /// Done; see the outcome.
    Finished,
}

/// How the bisection ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// The first bad commit, confirmed by measuring it and its parent again
    /// and by a direct test of it against its parent.
    Confirmed {
        /// The first bad commit.
        culprit: String,
        /// Its (first) parent.
        parent: String,
        /// The direct test of the culprit against its parent: the step and
        /// its share of the ends' change (absent in states from before it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<PairComparison>,
    },
    /// The first bad commit as the bisection found it, without confirmation.
    Unconfirmed {
        /// The first bad commit.
        culprit: String,
        /// Why it is not confirmed.
        reason: String,
    },
    /// A step measured between the ends: the range holds more than one
    /// change, at least one on each side of `at`. The bisection of this
    /// range ends here; each side is bisected on its own
    /// ([`changes`](super::changes)).
    Split {
        /// The commit that measured between the ends.
        at: String,
        /// Where it measured, from the good end (0) to the bad end (1).
        position: f64,
        /// The p-value of "it lies between the ends".
        p_value: f64,
    },
    /// Only skipped commits are left: the first bad commit is one of these.
    Ambiguous {
        /// The possible first bad commits.
        candidates: Vec<String>,
    },
    /// The bisection could not proceed.
    Failed {
        /// Why.
        reason: String,
    },
}

impl Outcome {
    /// The culprit it names, and its parent, when it is a confirmed one.
    pub fn confirmed(&self) -> Option<(&str, &str)> {
        match self {
            Outcome::Confirmed { culprit, parent, .. } => Some((culprit, parent)),
            _ => None,
        }
    }
}

/// The whole state of one bisection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectState {
    /// Always [`STATE_FORMAT`].
    pub format: String,
    /// Layout version.
    pub version: u32,
    /// How to proceed.
    pub plan: Plan,
    /// How to build and boot (absent in simulations).
    #[serde(default)]
    pub lab: Option<LabSettings>,
    /// The good end (full object name).
    pub good: String,
    /// The bad end.
    pub bad: String,
    /// What the tree had checked out before, restored at the end.
    #[serde(default)]
    pub original_head: Option<String>,
    /// Candidate commits in the range at the start (bad end included).
    pub range_commits: u64,
    /// The error budget.
    pub budget: ErrorBudget,
    /// Every commit seen, by object name.
    pub commits: BTreeMap<String, CommitRecord>,
    /// Every boot, in order.
    pub boots: Vec<BootEntry>,
    /// Every test, in order.
    pub tests: Vec<TestRecord>,
    /// The check that the ends differ.
    #[serde(default)]
    pub ends: Option<EndsComparison>,
    /// Where it is.
    pub phase: Phase,
    /// Verdicts revised after a failed confirmation.
    #[serde(default)]
    pub revisions: u32,
    /// How it ended.
    #[serde(default)]
    pub outcome: Option<Outcome>,
    /// Which end the next interleaved reference boot is of.
    pub next_reference: Role,
    /// Candidate boots since the last reference boot.
    #[serde(default)]
    pub since_reference: u32,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// When the state was last written.
    pub updated_at: String,
}

/// The current time, RFC 3339 with seconds.
pub fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

impl BisectState {
    /// A fresh state for the range `good..bad`.
    pub fn new(
        plan: Plan,
        lab: Option<LabSettings>,
        good: &str,
        bad: &str,
        range_commits: u64,
    ) -> Result<Self, super::sequential_test::SequentialTestError> {
        let budget = ErrorBudget::for_range(plan.wrong_culprit_rate, range_commits)?;
        let t = now();
        Ok(BisectState {
            format: STATE_FORMAT.into(),
            version: STATE_VERSION,
            plan,
            lab,
            good: good.into(),
            bad: bad.into(),
            original_head: None,
            range_commits,
            budget,
            commits: BTreeMap::new(),
            boots: Vec::new(),
            tests: Vec::new(),
            ends: None,
            phase: Phase::References,
            revisions: 0,
            outcome: None,
            next_reference: Role::GoodReference,
            since_reference: 0,
            started_at: t.clone(),
            updated_at: t,
        })
    }

    /// Reads and checks a state file.
    pub fn load(path: &Path) -> Result<BisectState, StateError> {
        let text = std::fs::read_to_string(path).map_err(|source| StateError::Read { path: path.into(), source })?;
        let state: BisectState =
            serde_json::from_str(&text).map_err(|source| StateError::Parse { path: path.into(), source })?;
        if state.format != STATE_FORMAT || state.version > STATE_VERSION {
            return Err(StateError::Unsupported { path: path.into(), format: state.format, version: state.version });
        }
        Ok(state)
    }

    /// Writes the state atomically and durably: a temp file in the same
    /// directory, fsync, rename over the old file, fsync of the directory.
    /// A crash or power cut at any moment leaves either the old or the new
    /// state, never a torn one.
    pub fn save(&mut self, path: &Path) -> Result<(), StateError> {
        self.updated_at = now();
        let err = |source| StateError::Write { path: path.into(), source };
        let json = serde_json::to_vec_pretty(self).map_err(|e| err(std::io::Error::other(e)))?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
        tmp.write_all(&json).map_err(err)?;
        tmp.as_file().sync_all().map_err(err)?;
        tmp.persist(path).map_err(|e| err(e.error))?;
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(err)?;
        Ok(())
    }

    /// Each commit's standing verdict: the one of its latest finished test.
    /// A confirmation overrides the step it contradicts.
    pub fn verdicts(&self) -> BTreeMap<&str, (Verdict, u32)> {
        let mut out = BTreeMap::new();
        for t in &self.tests {
            if let (Some(v), TestKind::Step | TestKind::ConfirmCulprit | TestKind::ConfirmParent) = (t.verdict, t.kind)
            {
                out.insert(t.commit.as_str(), (v, t.number));
            }
        }
        out
    }

    /// The bad bound: the commit most recently found bad, else the bad end.
    pub fn current_bad(&self) -> String {
        self.verdicts()
            .into_iter()
            .filter(|(_, (v, _))| *v == Verdict::Bad)
            .max_by_key(|(_, (_, n))| *n)
            .map(|(c, _)| c.to_string())
            .unwrap_or_else(|| self.bad.clone())
    }

    /// The good end and every commit found good.
    pub fn goods(&self) -> Vec<String> {
        let mut out = vec![self.good.clone()];
        out.extend(
            self.verdicts()
                .into_iter()
                .filter(|(c, (v, _))| *v == Verdict::Good && *c != self.good)
                .map(|(c, _)| c.to_string()),
        );
        out
    }

    /// Commits skipped (and not decided by a later test).
    pub fn skipped(&self) -> Vec<String> {
        self.verdicts().into_iter().filter(|(_, (v, _))| *v == Verdict::Skip).map(|(c, _)| c.to_string()).collect()
    }

    /// The span a boot's log value must lie in to count, `(low, high)`:
    /// the ends' medians widened by [`OUTLIER_SIGMAS`] robust σ. `None`
    /// until each end has [`OUTLIER_MIN_BOOTS`] good boots.
    pub fn outlier_span(&self) -> Option<(f64, f64)> {
        let logs = |role| self.reference_values(role).iter().map(|v| v.ln()).collect::<Vec<f64>>();
        let (good, bad) = (logs(Role::GoodReference), logs(Role::BadReference));
        if good.len() < OUTLIER_MIN_BOOTS || bad.len() < OUTLIER_MIN_BOOTS {
            return None;
        }
        let median = |xs: &[f64]| Data::new(xs.to_vec()).median();
        let (mg, mb) = (median(&good), median(&bad));
        // σ from the differences of pairs of boots of one end: their median
        // is 0.6745·√2·σ for a normal, unbiased with few boots (deviations
        // from a small sample's own median are not), and an outlier spoils
        // only its own pairs. Floored at 0.01%, so that a deterministic
        // clock (icount) does not call its last digit wild.
        let pairs = |xs: &[f64]| {
            xs.iter()
                .enumerate()
                .flat_map(|(i, a)| xs[i + 1..].iter().map(move |b| (a - b).abs()))
                .collect::<Vec<f64>>()
        };
        let differences: Vec<f64> = pairs(&good).into_iter().chain(pairs(&bad)).collect();
        let sigma = (median(&differences) / (0.6745 * std::f64::consts::SQRT_2)).max(1e-4);
        Some((mg.min(mb) - OUTLIER_SIGMAS * sigma, mg.max(mb) + OUTLIER_SIGMAS * sigma))
    }

    /// Why `value` is an outlier (see [`BisectState::outlier_span`]), if it is.
    pub fn outlier(&self, value: f64) -> Option<String> {
        let (lo, hi) = self.outlier_span()?;
        let x = value.ln();
        (x < lo || x > hi).then(|| {
            format!(
                "{value} lies outside what the ends allow ({} to {}: their medians widened by {OUTLIER_SIGMAS} robust σ); a host hiccup, not the kernel",
                lo.exp(),
                hi.exp()
            )
        })
    }

    /// Per-boot values of one reference.
    pub fn reference_values(&self, role: Role) -> Vec<f64> {
        self.boots.iter().filter(|b| b.role == role).filter_map(|b| b.value).collect()
    }

    /// The boots of one reference, with their places, as a test run now
    /// compares them: those among the last [`Plan::reference_window`] boots,
    /// and at least the [`NEAR_LEAST`] most recent ones (every one with no
    /// window, or with the drift term).
    fn timed_reference_near(&self, role: Role) -> Vec<TimedValue> {
        let all = self.timed(|b| b.role == role);
        let window = self.plan.reference_window as usize;
        // The drift term takes every boot of the ends (its lag variance
        // assumes the whole group), so it leaves no room for a window.
        if window == 0 || self.plan.drift == DriftModel::Linear {
            return all;
        }
        let from = self.boots.len().saturating_sub(window);
        let near = all.iter().filter(|(i, _)| *i >= from).count().max(NEAR_LEAST).min(all.len());
        all.get(all.len() - near..).unwrap_or_default().to_vec()
    }

    /// The values of the boots `which` takes, with their places.
    fn timed(&self, which: impl Fn(&BootEntry) -> bool) -> Vec<TimedValue> {
        self.boots.iter().enumerate().filter(|(_, b)| which(b)).filter_map(|(i, b)| b.value.map(|v| (i, v))).collect()
    }

    /// The host's drift as the plan takes it out now (None without the
    /// drift term, or before any group has boots at two times): fitted to
    /// every boot of the ends and of each test, values moved to the next
    /// boot's place.
    pub fn drift_fit(&self) -> Option<DriftFit> {
        if self.plan.drift == DriftModel::None {
            return None;
        }
        let mut groups =
            vec![self.timed(|b| b.role == Role::GoodReference), self.timed(|b| b.role == Role::BadReference)];
        groups.extend(self.tests.iter().map(|t| self.timed_test(t.number)));
        let views: Vec<&[TimedValue]> = groups.iter().map(Vec::as_slice).collect();
        DriftFit::fit(&views, self.boots.len(), self.plan.drift_scale)
    }

    fn timed_test(&self, number: u32) -> Vec<TimedValue> {
        self.timed(|b| b.role == Role::Candidate && b.test == Some(number))
    }

    /// The values of `group` as the comparisons take them (moved by the
    /// drift fit, when there is one), and their boots' mean place (the
    /// next boot's for a group with none yet).
    fn compared_values(&self, group: Group, fit: Option<&DriftFit>) -> (Vec<f64>, f64) {
        let timed = match group {
            Group::Reference(role) => self.timed_reference_near(role),
            Group::Test(number) => self.timed_test(number),
        };
        let at = if timed.is_empty() { self.boots.len() as f64 } else { mean_time(&timed) };
        let values = timed.iter().map(|&tv| fit.map_or(tv.1, |f| f.moved(tv))).collect();
        (values, at)
    }

    /// The model and the candidate's values for test `number`'s next
    /// decision: the recent ends, σ from every other test's boots by
    /// verdict, and the drift term when the plan has one.
    pub fn step_inputs(&self, number: u32) -> Result<(ReferenceModel, Vec<f64>), SequentialTestError> {
        let fit = self.drift_fit();
        let (good, tg) = self.compared_values(Group::Reference(Role::GoodReference), fit.as_ref());
        let (bad, tb) = self.compared_values(Group::Reference(Role::BadReference), fit.as_ref());
        let (candidate, tc) = self.compared_values(Group::Test(number), fit.as_ref());
        let model = self.judged_groups_with(number, fit.as_ref()).model(&good, &bad)?;
        let model = match fit {
            Some(f) => model.with_drift(DriftTerm {
                slope: f.slope,
                good: f.lag_variance(tc, tg),
                bad: f.lag_variance(tc, tb),
                pair: 0.0,
                ends: f.lag_variance(tg, tb),
            }),
            None => model,
        };
        Ok((model, candidate))
    }

    /// The model and both groups' values for a direct comparison of
    /// `earlier` with `later` (σ from every test's boots by verdict, the
    /// drift term when the plan has one).
    pub fn pair_inputs(
        &self,
        earlier: Group,
        later: Group,
    ) -> Result<(ReferenceModel, Vec<f64>, Vec<f64>), SequentialTestError> {
        let fit = self.drift_fit();
        let (good, tg) = self.compared_values(Group::Reference(Role::GoodReference), fit.as_ref());
        let (bad, tb) = self.compared_values(Group::Reference(Role::BadReference), fit.as_ref());
        let (e, te) = self.compared_values(earlier, fit.as_ref());
        let (l, tl) = self.compared_values(later, fit.as_ref());
        let model = self.judged_groups_with(0, fit.as_ref()).model(&good, &bad)?;
        let model = match fit {
            Some(f) => model.with_drift(DriftTerm {
                slope: f.slope,
                good: 0.0,
                bad: 0.0,
                pair: f.lag_variance(te, tl),
                ends: f.lag_variance(tg, tb),
            }),
            None => model,
        };
        Ok((model, e, l))
    }

    /// Per-boot values of test `number`'s candidate.
    pub fn test_values(&self, number: u32) -> Vec<f64> {
        self.boots
            .iter()
            .filter(|b| b.role == Role::Candidate && b.test == Some(number))
            .filter_map(|b| b.value)
            .collect()
    }

    /// The candidate boots of test `number`.
    pub fn test_boots(&self, number: u32) -> impl Iterator<Item = &BootEntry> {
        self.boots.iter().filter(move |b| b.role == Role::Candidate && b.test == Some(number))
    }

    /// The boots of every test but `except`, by verdict (those judged like
    /// the good end, like the bad end, and the rest: running or skipped),
    /// with values moved by `fit`.
    fn judged_groups_with(&self, except: u32, fit: Option<&DriftFit>) -> JudgedGroups {
        let mut out = JudgedGroups::default();
        for t in self.tests.iter().filter(|t| t.number != except) {
            let (values, _) = self.compared_values(Group::Test(t.number), fit);
            match t.verdict {
                Some(Verdict::Good) => out.good_like.push(values),
                Some(Verdict::Bad) => out.bad_like.push(values),
                _ => out.unjudged.push(values),
            }
        }
        out
    }

    /// The test with this number.
    pub fn test_mut(&mut self, number: u32) -> Option<&mut TestRecord> {
        self.tests.iter_mut().find(|t| t.number == number)
    }

    /// Short name of a commit for messages: 12 hex digits and the subject.
    pub fn describe(&self, commit: &str) -> String {
        let short = short(commit);
        match self.commits.get(commit) {
            Some(c) if !c.subject.is_empty() => format!("{short} (\"{}\")", c.subject),
            _ => short.to_string(),
        }
    }

    /// Candidate boots in all tests.
    pub fn candidate_boots(&self) -> usize {
        self.boots.iter().filter(|b| b.role == Role::Candidate).count()
    }
}

/// Groups of candidate boots by their test's verdict (see
/// `BisectState::judged_groups_with`).
#[derive(Debug, Clone, Default)]
pub struct JudgedGroups {
    /// Tests judged like the good end.
    pub good_like: Vec<Vec<f64>>,
    /// Tests judged like the bad end.
    pub bad_like: Vec<Vec<f64>>,
    /// Tests with no verdict.
    pub unjudged: Vec<Vec<f64>>,
}

impl JudgedGroups {
    /// The model of `good` and `bad` ends with these groups.
    pub fn model(&self, good: &[f64], bad: &[f64]) -> Result<ReferenceModel, SequentialTestError> {
        fn view(g: &[Vec<f64>]) -> Vec<&[f64]> {
            g.iter().map(Vec::as_slice).collect()
        }
        let (gl, bl, un) = (view(&self.good_like), view(&self.bad_like), view(&self.unjudged));
        ReferenceModel::estimate_judged(good, bad, OtherGroups { good_like: &gl, bad_like: &bl, unjudged: &un })
    }
}

/// The first 12 characters of an object name.
pub fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(number: u32, commit: &str, kind: TestKind, verdict: Option<Verdict>) -> TestRecord {
        TestRecord {
            number,
            commit: commit.into(),
            kind,
            alpha: 0.01,
            beta: 0.01,
            remaining: None,
            bounds: None,
            verdict,
            reason: None,
            evidence: None,
            boot_failures: 0,
            started_at: now(),
            finished_at: None,
        }
    }

    #[test]
    fn verdicts_follow_the_latest_test_and_confirmations_revise() {
        let mut s = BisectState::new(Plan::default(), None, "g", "b", 100).unwrap();
        s.tests.push(test(1, "m", TestKind::Step, Some(Verdict::Bad)));
        s.tests.push(test(2, "n", TestKind::Step, Some(Verdict::Good)));
        s.tests.push(test(3, "o", TestKind::Step, Some(Verdict::Skip)));
        s.tests.push(test(4, "p", TestKind::Step, Some(Verdict::Bad)));
        s.tests.push(test(5, "q", TestKind::Step, None));
        assert_eq!(s.current_bad(), "p");
        assert_eq!(s.goods(), vec!["g".to_string(), "n".to_string()]);
        assert_eq!(s.skipped(), vec!["o".to_string()]);
        // Confirmation finds p good after all: the bad bound falls back to m.
        s.tests.push(test(6, "p", TestKind::ConfirmCulprit, Some(Verdict::Good)));
        assert_eq!(s.current_bad(), "m");
        assert!(s.goods().contains(&"p".to_string()));
        // A bisect-run test never counts as a bisection verdict.
        s.tests.push(test(7, "z", TestKind::Run, Some(Verdict::Bad)));
        assert_eq!(s.current_bad(), "m");
    }

    /// A state whose ends (1000 and 900) and one candidate (at the good
    /// end's level) all drift by `slope` per boot on the log scale, with a
    /// small alternating noise.
    fn drifting(slope: f64, drift: DriftModel) -> BisectState {
        let mut s = BisectState::new(Plan { drift, ..Plan::default() }, None, "g", "b", 10).unwrap();
        s.tests.push(test(1, "c", TestKind::Step, None));
        let level = |i: usize, base: f64| base * (slope * i as f64 + if i % 4 < 2 { 0.004 } else { -0.004 }).exp();
        for i in 0..60 {
            let (role, base) = match i % 2 {
                0 => (Role::GoodReference, 1000.0),
                _ => (Role::BadReference, 900.0),
            };
            s.boots.push(BootEntry::for_test(i, "x", role, None, Some(level(i, base))));
        }
        for i in 60..64 {
            s.boots.push(BootEntry::for_test(i, "c", Role::Candidate, Some(1), Some(level(i, 1000.0))));
        }
        s
    }

    #[test]
    fn the_drift_term_compares_a_candidate_with_the_ends_as_they_measure_now() {
        // -0.1% per boot: by the candidate's boots the good end measures
        // about 3% below its average over the night, a third of the way to
        // the bad end.
        let (model, values) = drifting(-0.001, DriftModel::None).step_inputs(1).unwrap();
        let raw = crate::bisect::sequential_test::LogSummary::of("c", &values).unwrap().mean;
        let position = (raw - model.good.mean) / (model.bad.mean - model.good.mean);
        assert!(position > 0.25, "without the term the candidate drifts toward the bad end: {position}");
        assert!(model.drift.is_none());
        let s = drifting(-0.001, DriftModel::Linear);
        let (model, values) = s.step_inputs(1).unwrap();
        let moved = crate::bisect::sequential_test::LogSummary::of("c", &values).unwrap().mean;
        let position = (moved - model.good.mean) / (model.bad.mean - model.good.mean);
        assert!(position.abs() < 0.05, "with the term it measures like the good end: {position}");
        let d = model.drift.unwrap();
        assert!((d.slope + 0.001).abs() < 1e-4, "{d:?}");
        // The slope's error counts: the candidate's boots lie after the
        // ends' average, so each end's mean carries a lag variance.
        let fit = s.drift_fit().unwrap();
        assert!((d.good - fit.lag_variance(61.5, 29.0)).abs() < 1e-12, "{d:?}");
        assert!((d.bad - fit.lag_variance(61.5, 30.0)).abs() < 1e-12, "{d:?}");
        assert!(d.good > 0.0 && d.pair == 0.0);
        // A direct comparison of the candidate with the good end.
        let (pair, e, l) = s.pair_inputs(Group::Reference(Role::GoodReference), Group::Test(1)).unwrap();
        assert_eq!((e.len(), l.len()), (30, 4));
        assert!((pair.drift.unwrap().pair - fit.lag_variance(29.0, 61.5)).abs() < 1e-12);
        // A state from before the drift term takes none, and the scale's default.
        let mut v = serde_json::to_value(&s.plan).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("drift");
        o.remove("drift_scale");
        let old: Plan = serde_json::from_value(v).unwrap();
        assert_eq!((old.drift, old.drift_scale), (DriftModel::None, DEFAULT_DRIFT_SCALE));
    }

    #[test]
    fn only_the_kernels_failures_count_against_it_never_the_appliances() {
        let entry = |c: &str| BootEntry {
            index: 0,
            commit: "c".into(),
            role: Role::Candidate,
            test: Some(1),
            classification: c.into(),
            detail: None,
            value: None,
            iterations: vec![],
            wall_s: 1.0,
            at: now(),
            workload_version: None,
            pack_id: None,
            machine: None,
        };
        for c in ["panic", "boot_failure", "oops", "hang"] {
            assert!(entry(c).kernel_failed(), "{c}");
        }
        for c in ["init_panic", "ok", "qemu_failure", "incomplete", "partial", "no_metric"] {
            assert!(!entry(c).kernel_failed(), "{c}");
        }
    }

    #[test]
    fn a_boot_far_outside_the_ends_is_an_outlier_and_one_between_them_is_not() {
        let mut s = BisectState::new(Plan::default(), None, "g", "b", 10).unwrap();
        let mut push =
            |role: Role, value: f64| s.boots.push(BootEntry::for_test(s.boots.len(), "x", role, None, Some(value)));
        // Ends at 1000 and 900, ±1%; one wild good boot among them.
        for (i, d) in [-1.0, 1.0, -0.5, 0.5].iter().enumerate() {
            push(Role::GoodReference, 1000.0 * (1.0 + 0.01 * d));
            push(Role::BadReference, 900.0 * (1.0 + 0.01 * d));
            if i == 1 {
                push(Role::GoodReference, 1500.0);
            }
        }
        let (lo, hi) = s.outlier_span().unwrap();
        // Robust: the wild boot does not widen the span.
        assert!(lo.exp() > 780.0 && hi.exp() < 1200.0, "{} {}", lo.exp(), hi.exp());
        assert!(s.outlier(1500.0).unwrap().contains("1500"));
        assert!(s.outlier(600.0).is_some());
        for v in [950.0, 1000.0, 900.0, 1040.0, 870.0] {
            assert_eq!(s.outlier(v), None, "{v}");
        }
        // Too few boots of an end: nothing is judged yet.
        let mut few = BisectState::new(Plan::default(), None, "g", "b", 10).unwrap();
        few.boots = s.boots[..5].to_vec();
        assert_eq!(few.outlier(1500.0), None);
    }

    fn near(s: &BisectState, role: Role) -> Vec<f64> {
        s.timed_reference_near(role).into_iter().map(|(_, v)| v).collect()
    }

    #[test]
    fn a_window_takes_the_ends_recent_boots_and_at_least_the_last_few() {
        let mut s = BisectState::new(
            Plan { reference_window: 10, drift: DriftModel::None, ..Plan::default() },
            None,
            "g",
            "b",
            10,
        )
        .unwrap();
        let boot = |index: usize, role: Role, value: Option<f64>| BootEntry::for_test(index, "x", role, None, value);
        // Boots 0-11: good 1..=6 then bad 1..=6; boots 12-29: candidates,
        // with good 7 at 20, a failed good boot at 25, bad 7 at 28.
        for i in 0..30 {
            let (role, value) = match i {
                0..=5 => (Role::GoodReference, Some(1.0 + i as f64)),
                6..=11 => (Role::BadReference, Some(1.0 + (i - 6) as f64)),
                20 => (Role::GoodReference, Some(7.0)),
                25 => (Role::GoodReference, None),
                28 => (Role::BadReference, Some(7.0)),
                _ => (Role::Candidate, Some(100.0)),
            };
            s.boots.push(boot(i, role, value));
        }
        // The last 10 boots (20-29) hold good 7 and bad 7; at least the 4
        // most recent of each end are taken.
        assert_eq!(near(&s, Role::GoodReference), [4.0, 5.0, 6.0, 7.0]);
        assert_eq!(near(&s, Role::BadReference), [4.0, 5.0, 6.0, 7.0]);
        s.plan.reference_window = 23;
        assert_eq!(near(&s, Role::BadReference), [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        assert_eq!(near(&s, Role::GoodReference), [4.0, 5.0, 6.0, 7.0]);
        // The drift term takes every boot: no window.
        s.plan.drift = DriftModel::Linear;
        assert_eq!(near(&s, Role::GoodReference), s.reference_values(Role::GoodReference));
        s.plan.drift = DriftModel::None;
        // No window: every boot, as states from before it.
        s.plan.reference_window = 0;
        assert_eq!(near(&s, Role::GoodReference), s.reference_values(Role::GoodReference));
        let old: Plan = serde_json::from_value({
            let mut v = serde_json::to_value(Plan::default()).unwrap();
            v.as_object_mut().unwrap().remove("reference_window");
            v
        })
        .unwrap();
        assert_eq!(old.reference_window, 0, "a state from before the window takes every boot");
    }

    #[test]
    fn save_is_atomic_and_load_refuses_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        let mut s = BisectState::new(Plan::default(), None, "g", "b", 10).unwrap();
        s.boots.push(BootEntry {
            index: 0,
            commit: "g".into(),
            role: Role::GoodReference,
            test: None,
            classification: "ok".into(),
            detail: None,
            value: Some(12.5),
            iterations: vec![12.0, 13.0],
            wall_s: 20.0,
            at: now(),
            workload_version: Some(1),
            pack_id: Some("ab".repeat(32)),
            machine: None,
        });
        s.save(&p).unwrap();
        let back = BisectState::load(&p).unwrap();
        assert_eq!(back.boots, s.boots);
        assert_eq!(back.reference_values(Role::GoodReference), vec![12.5]);
        // Only the state file is left in the directory: no temp files.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        std::fs::write(&p, r#"{"format":"other","version":1}"#).unwrap();
        assert!(matches!(BisectState::load(&p), Err(StateError::Parse { .. })));
        let mut v = serde_json::to_value(&s).unwrap();
        v["version"] = 99.into();
        std::fs::write(&p, v.to_string()).unwrap();
        let e = BisectState::load(&p).unwrap_err();
        assert!(matches!(e, StateError::Unsupported { version: 99, .. }), "{e}");
        assert!(e.to_string().contains("state.json"));
        assert!(matches!(BisectState::load(&dir.path().join("nope.json")), Err(StateError::Read { .. })));
    }
}
