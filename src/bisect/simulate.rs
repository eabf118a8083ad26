//! The bisection on synthetic histories, for measuring the strategy rather
//! than a kernel: a linear history with one regressing commit, a lab whose
//! "boots" draw noisy measurements from a model of the real noise, and the
//! benchmark behind `bootbench bisect-sim` that runs the real [`Driver`]
//! many times and counts boots and wrong culprits, against the classic fixed
//! number of boots per step. Nothing here touches git, QEMU or the disk.

use super::changes;
use super::driver::Driver;
use super::history::{pick, History, HistoryError, NextStep};
use super::journal::MemoryJournal;
use super::lab::{BootObservation, Lab, LabError};
use super::state::{BisectState, BuildRecord, BuildStatus, DriftModel, Outcome, Plan, StepPolicy};
use rand::distr::Distribution;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use statrs::distribution::{Beta, ContinuousCDF, Normal};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// Errors of the simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// A parameter out of range.
    #[error("bad simulation parameter {name} = {value}: {why}")]
    BadParameter {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        why: &'static str,
    },
    /// The driver failed on a synthetic history (a bug).
    #[error("simulated bisection {run} failed")]
    Driver {
        /// Which run.
        run: usize,
        /// The error.
        #[source]
        source: super::driver::DriverError,
    },
    /// A side's bisection could not be started (a bug).
    #[error("simulated bisection {run} could not search a side")]
    Side {
        /// Which run.
        run: usize,
        /// The error.
        #[source]
        source: super::changes::ChangesError,
    },
}

/// How noisy a simulated boot is. Both parts are multiplicative (log-normal):
/// a boot has its own factor (host state, placement, caches), and each
/// iteration in it another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseModel {
    /// Coefficient of variation of one iteration within a boot.
    pub iteration_cv: f64,
    /// Coefficient of variation of a boot's level, between boots.
    pub boot_cv: f64,
    /// Measured iterations per boot.
    pub iterations: u32,
}

impl NoiseModel {
    /// The coefficient of variation of a per-boot mean.
    pub fn per_boot_cv(&self) -> f64 {
        (self.boot_cv.powi(2) + self.iteration_cv.powi(2) / f64::from(self.iterations.max(1))).sqrt()
    }
}

/// What the noise model leaves out, to measure the strategy beyond it.
/// The default disturbs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Disturbance {
    /// Host drift: every kernel's level changes by this fraction per boot
    /// (in boot order), e.g. -0.0002 for -0.02% per boot.
    pub drift_per_boot: f64,
    /// Fraction of boots that are outliers ...
    pub outlier_rate: f64,
    /// ... and the factor an outlier multiplies its boot's level by.
    pub outlier_factor: f64,
    /// Heavier tails than log-normal: a boot's factor drawn from Student's
    /// t with these degrees of freedom (above 2; scaled to the same
    /// standard deviation); 0 keeps the normal.
    pub tail_df: f64,
    /// Unequal σ at the ends: the noise of commits at and after the
    /// culprit, over that of commits before it (0 or 1: equal).
    pub bad_sigma_factor: f64,
}

impl Disturbance {
    fn validate(&self) -> Result<(), SimulateError> {
        let bad = |name, value: f64, why| Err(SimulateError::BadParameter { name, value: value.to_string(), why });
        if self.drift_per_boot.is_nan() || self.drift_per_boot.abs() >= 0.01 {
            return bad("drift", self.drift_per_boot, "a fraction per boot between -1% and 1%");
        }
        if !(0.0..0.5).contains(&self.outlier_rate) {
            return bad("outliers", self.outlier_rate, "a rate in [0, 50%)");
        }
        if self.outlier_rate > 0.0 && !(self.outlier_factor > 0.0 && self.outlier_factor.is_finite()) {
            return bad("outliers", self.outlier_factor, "a positive factor");
        }
        if !(self.tail_df == 0.0 || (self.tail_df > 2.0 && self.tail_df.is_finite())) {
            return bad("tail-df", self.tail_df, "0 (normal) or degrees of freedom above 2");
        }
        if !(self.bad_sigma_factor >= 0.0 && self.bad_sigma_factor <= 10.0) {
            return bad("bad-sigma", self.bad_sigma_factor, "a factor in [0, 10]");
        }
        Ok(())
    }

    /// The disturbances in words, for the table's header.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.drift_per_boot != 0.0 {
            parts.push(format!("drift {:+.3}% per boot", 100.0 * self.drift_per_boot));
        }
        if self.outlier_rate > 0.0 {
            parts.push(format!("{:.1}% outlier boots x{}", 100.0 * self.outlier_rate, self.outlier_factor));
        }
        if self.tail_df > 0.0 {
            parts.push(format!("t-tailed boots ({} df)", self.tail_df));
        }
        if self.bad_sigma_factor > 0.0 && self.bad_sigma_factor != 1.0 {
            parts.push(format!("bad side's noise x{}", self.bad_sigma_factor));
        }
        if parts.is_empty() {
            "no disturbance".into()
        } else {
            parts.join(", ")
        }
    }
}

/// A linear history `c0` (good end) … `cN` (bad end).
#[derive(Debug, Clone)]
pub struct LinearHistory {
    n: u64,
}

impl LinearHistory {
    /// A history of `n` commits after the good end.
    pub fn new(n: u64) -> LinearHistory {
        LinearHistory { n }
    }

    /// The name of commit `i`.
    pub fn name(&self, i: u64) -> String {
        format!("c{i:07}")
    }

    /// Commits after the good end.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether the history has no commit after the good end.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn index(&self, name: &str) -> Option<u64> {
        name.strip_prefix('c').and_then(|d| d.parse().ok()).filter(|i| *i <= self.n)
    }
}

impl History for LinearHistory {
    fn next(&mut self, bad: &str, goods: &[String], skipped: &[String]) -> Result<NextStep, HistoryError> {
        let hi = self.index(bad).ok_or_else(|| HistoryError::Contradiction { bad: bad.into() })?;
        let lo = goods.iter().filter_map(|g| self.index(g)).max().unwrap_or(0);
        if lo >= hi {
            return Err(HistoryError::Contradiction { bad: bad.into() });
        }
        let count = hi - lo;
        // git's order: by distance min(reach, count − reach), best first.
        let mut ks: Vec<u64> = (lo + 1..=hi).collect();
        ks.sort_by_key(|k| {
            let reach = k - lo;
            (std::cmp::Reverse(reach.min(count - reach)), std::cmp::Reverse(*k))
        });
        let names: Vec<String> = ks.iter().map(|k| self.name(*k)).collect();
        let listed: Vec<&str> = names.iter().map(String::as_str).collect();
        pick(bad, &listed, skipped)
    }

    fn first_parent(&mut self, commit: &str) -> Result<Option<String>, HistoryError> {
        Ok(self.index(commit).filter(|i| *i > 0).map(|i| self.name(i - 1)))
    }

    fn subject(&mut self, commit: &str) -> Result<String, HistoryError> {
        Ok(format!("synthetic commit {commit}"))
    }

    fn position(&self, commit: &str) -> Option<u64> {
        self.index(commit)
    }
}

/// A lab whose kernels are a model: commits from `culprit` on are slower by
/// `regression` (a higher-is-better metric drops by that fraction).
#[derive(Debug, Clone)]
pub struct ModelLab {
    n: u64,
    culprit: u64,
    regression: f64,
    noise: NoiseModel,
    rng: Pcg64,
    /// Commits whose build fails.
    pub broken: BTreeSet<u64>,
    /// Commits whose boots hang.
    pub hanging: BTreeSet<u64>,
    /// Boot mode: commits from this one on panic.
    pub panic_from: Option<u64>,
    /// Commits whose next boots end in the appliance's own init panic
    /// (`init_panic`, a bootbench bug), and how many of them.
    pub init_panics: BTreeMap<u64, u32>,
    /// The workload version ok boots report: `(version, from_call)`, the
    /// version changing to `version` from that lab call on (as if the
    /// image were rebuilt by another bootbench), for version tests.
    pub version_change: Option<(u32, usize)>,
    /// With `version_change`: boots before the change report no version
    /// at all, as boots recorded before versions existed.
    pub unversioned_before: bool,
    /// The pack ok boots built in: `(pack, from_call)`, [`SIMULATED_PACK`]
    /// before that lab call and `pack` (`None`: no pack) from it on, for
    /// the tests of a pack changed mid-bisection. Without it, no pack.
    pub pack_change: Option<(Option<String>, usize)>,
    /// The machine boots measured on: `(machine, from_call)`,
    /// [`SIMULATED_MACHINE`] before that lab call and `machine` (`None`:
    /// not recorded) from it on, for the tests of a QEMU or host changed
    /// mid-bisection. Without it, none recorded.
    pub machine_change: Option<(Option<String>, usize)>,
    /// A second regression in the range: `(commit, fraction)`, the level
    /// falling again from that commit on.
    pub second: Option<(u64, f64)>,
    /// What the noise model leaves out.
    pub disturb: Disturbance,
    /// Boots so far (drift runs on them).
    pub boots: usize,
    /// Fail (as if the host went down) on this lab call, for resume tests.
    pub fail_after: Option<usize>,
    /// Lab calls so far.
    pub calls: usize,
}

const TRUE_MEAN: f64 = 1000.0;

/// The pack a [`ModelLab`] with a `pack_change` builds in first.
pub const SIMULATED_PACK: &str = "simulated-pack-a";

/// The machine a [`ModelLab`] with a `machine_change` measures on first.
pub const SIMULATED_MACHINE: &str = "QEMU 10.0.2; pc-q35-10.0, CPU max, 1 vCPU, 1024 MiB, icount";

impl ModelLab {
    /// A lab for a history of `n` commits, regressing at `culprit`.
    pub fn new(n: u64, culprit: u64, regression: f64, noise: NoiseModel, seed: u64) -> ModelLab {
        ModelLab {
            n,
            culprit,
            regression,
            noise,
            rng: Pcg64::seed_from_u64(seed),
            broken: BTreeSet::new(),
            hanging: BTreeSet::new(),
            panic_from: None,
            init_panics: BTreeMap::new(),
            version_change: None,
            unversioned_before: false,
            pack_change: None,
            machine_change: None,
            second: None,
            disturb: Disturbance::default(),
            boots: 0,
            fail_after: None,
            calls: 0,
        }
    }

    /// Breaks the build of each commit strictly between the ends with
    /// probability `rate`.
    pub fn break_builds(&mut self, rate: f64) {
        for i in 1..self.n {
            if self.rng.random_bool(rate) {
                self.broken.insert(i);
            }
        }
    }

    fn index(&self, name: &str) -> u64 {
        name.strip_prefix('c').and_then(|d| d.parse().ok()).unwrap_or(0)
    }

    fn call(&mut self, commit: &str) -> Result<(), LabError> {
        self.calls += 1;
        if self.fail_after.is_some_and(|n| self.calls >= n) {
            self.calls -= 1;
            return Err(LabError::Boot { commit: commit.into(), source: "simulated host failure".into() });
        }
        Ok(())
    }
}

fn normal(sd: f64) -> Normal {
    // sd > 0 is checked by the caller's parameters; a zero sd is a point mass.
    Normal::new(0.0, sd.max(1e-12)).unwrap_or_else(|_| Normal::standard())
}

impl Lab for ModelLab {
    fn build(&mut self, commit: &str) -> Result<BuildRecord, LabError> {
        self.call(commit)?;
        let i = self.index(commit);
        let broken = self.broken.contains(&i);
        Ok(BuildRecord {
            status: if broken { BuildStatus::Failed } else { BuildStatus::Built },
            reason: broken.then(|| "simulated build failure".to_string()),
            image: None,
            image_sha256: None,
            config: None,
            cmdline: None,
            results_port: false,
            log: None,
            seconds: 0.0,
        })
    }

    fn boot(&mut self, commit: &str, _build: &BuildRecord, _index: usize) -> Result<BootObservation, LabError> {
        self.call(commit)?;
        let i = self.index(commit);
        let fail = |c: &str| BootObservation {
            classification: c.into(),
            detail: Some(format!("simulated {c}")),
            iterations: vec![],
            wall_s: 1.0,
            workload_version: None,
            pack_id: None,
            machine: None,
        };
        if let Some(left) = self.init_panics.get_mut(&i).filter(|n| **n > 0) {
            *left -= 1;
            return Ok(BootObservation {
                classification: "init_panic".into(),
                detail: Some(
                    "init panic: the appliance's init (PID 1) panicked at init/src/main.rs:1:1: simulated; a bootbench failure, not the kernel's"
                        .into(),
                ),
                iterations: vec![],
                wall_s: 1.0,
                workload_version: None,
                pack_id: None,
                machine: None,
            });
        }
        if self.hanging.contains(&i) {
            return Ok(fail("hang"));
        }
        if self.panic_from.is_some_and(|p| i >= p) {
            return Ok(fail("panic"));
        }
        let mut level = if i >= self.culprit { TRUE_MEAN * (1.0 - self.regression) } else { TRUE_MEAN };
        if let Some((_, r)) = self.second.filter(|(from, _)| i >= *from) {
            level *= 1.0 - r;
        }
        let d = self.disturb;
        level *= (1.0 + d.drift_per_boot).powi(self.boots.min(i32::MAX as usize) as i32);
        self.boots += 1;
        let scale = if i >= self.culprit && d.bad_sigma_factor > 0.0 { d.bad_sigma_factor } else { 1.0 };
        let boot_sd = scale * self.noise.boot_cv;
        let boot = if d.tail_df > 2.0 {
            // Student's t scaled to the same standard deviation.
            let t = statrs::distribution::StudentsT::new(0.0, 1.0, d.tail_df)
                .map(|t| t.sample(&mut self.rng))
                .unwrap_or_default();
            (boot_sd * t * ((d.tail_df - 2.0) / d.tail_df).sqrt()).exp()
        } else {
            normal(boot_sd).sample(&mut self.rng).exp()
        };
        if d.outlier_rate > 0.0 && self.rng.random_bool(d.outlier_rate) {
            level *= d.outlier_factor;
        }
        let it = normal(scale * self.noise.iteration_cv);
        let iterations =
            (0..self.noise.iterations.max(1)).map(|_| level * boot * it.sample(&mut self.rng).exp()).collect();
        let workload_version = match self.version_change {
            Some((v, from)) if self.calls >= from => Some(v),
            Some(_) if self.unversioned_before => None,
            Some(_) => Some(1),
            None => None,
        };
        let pack_id = match &self.pack_change {
            Some((_, from)) if self.calls < *from => Some(SIMULATED_PACK.to_string()),
            Some((other, _)) => other.clone(),
            None => None,
        };
        let machine = match &self.machine_change {
            Some((_, from)) if self.calls < *from => Some(SIMULATED_MACHINE.to_string()),
            Some((other, _)) => other.clone(),
            None => None,
        };
        Ok(BootObservation {
            classification: "ok".into(),
            detail: None,
            iterations,
            wall_s: 1.0,
            workload_version,
            pack_id,
            machine,
        })
    }
}

/// What the benchmark simulates.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Commits in the range.
    pub commits: u64,
    /// The regression as a fraction.
    pub regression: f64,
    /// The noise.
    pub noise: NoiseModel,
    /// Probability that a commit's build fails.
    pub build_failure_rate: f64,
    /// Bisections per strategy.
    pub runs: usize,
    /// Seed of the first run.
    pub seed: u64,
    /// A second regression in the range, at another random commit.
    pub second_regression: Option<f64>,
    /// What the noise model leaves out.
    pub disturb: Disturbance,
}

impl Scenario {
    fn validate(&self) -> Result<(), SimulateError> {
        let bad = |name, value: String, why| Err(SimulateError::BadParameter { name, value, why });
        if self.commits < 2 {
            return bad("commits", self.commits.to_string(), "at least 2");
        }
        if !(0.0..1.0).contains(&self.regression) {
            return bad("regression", self.regression.to_string(), "a fraction in [0, 1)");
        }
        for (name, v) in [("iteration-cv", self.noise.iteration_cv), ("boot-cv", self.noise.boot_cv)] {
            if !(0.0..1.0).contains(&v) {
                return bad(name, v.to_string(), "a fraction in [0, 1)");
            }
        }
        if !(0.0..0.9).contains(&self.build_failure_rate) {
            return bad("build-failure-rate", self.build_failure_rate.to_string(), "a fraction in [0, 0.9)");
        }
        if self.runs == 0 {
            return bad("runs", "0".into(), "at least 1");
        }
        if let Some(r) = self.second_regression {
            if !(r > 0.0 && r < 1.0) {
                return bad(
                    "second-regression",
                    r.to_string(),
                    "a fraction in (0, 1): a commit with no effect is no regression",
                );
            }
            if self.commits < 3 {
                return bad("commits", self.commits.to_string(), "at least 3 with a second regression");
            }
        }
        self.disturb.validate()
    }
}

/// What one strategy did over all runs.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyFigures {
    /// Its name.
    pub name: String,
    /// Boots per bisection, sorted.
    pub boots: Vec<usize>,
    /// Tests (steps and confirmations) per bisection.
    pub tests: Vec<usize>,
    /// Skipped tests in all.
    pub skips: usize,
    /// Boots of the ends in all.
    pub reference_boots: usize,
    /// Bisections that named a wrong commit (confirmed or not, or an
    /// ambiguous set without the culprit; after a split, a side's).
    pub wrong: usize,
    /// Bisections that confirmed a commit that is no change (the first
    /// bisection's culprit or a side's).
    pub wrong_confirmed: usize,
    /// Bisections that named the right commit.
    pub right: usize,
    /// Bisections that ended with only skipped commits left.
    pub ambiguous: usize,
    /// Bisections whose answer was not confirmed.
    pub unconfirmed: usize,
    /// Bisections that stopped (ends not different enough).
    pub failed: usize,
    /// Decided steps at commits truly like the good end, and how many of
    /// them were called bad (one regression only: with two, commits
    /// between them are like neither end).
    pub steps_at_good: (usize, usize),
    /// Decided steps at commits truly like the bad end, and how many of
    /// them were called good.
    pub steps_at_bad: (usize, usize),
    /// The steps' nominal α = β (the largest, with the budget).
    pub step_alpha: f64,
    /// Bisections that confirmed every planted change (the first
    /// bisection's culprit and the searches of its sides together).
    pub found_every_change: usize,
    /// Bisections whose side searches confirmed a commit that is no
    /// planted change.
    pub false_changes: usize,
    /// Side searches run in all.
    pub side_searches: usize,
    /// Bisections that split at a step measured between the ends.
    pub splits: usize,
}

impl StrategyFigures {
    fn runs(&self) -> usize {
        self.boots.len()
    }

    /// Wrong culprits (confirmed or not) over bisections.
    pub fn wrong_rate(&self) -> f64 {
        self.wrong as f64 / self.runs().max(1) as f64
    }

    /// Wrong culprits that were confirmed, over bisections: what the
    /// promise of `--wrong-culprit-rate` covers.
    pub fn wrong_confirmed_rate(&self) -> f64 {
        self.wrong_confirmed as f64 / self.runs().max(1) as f64
    }

    /// Mean boots per bisection.
    pub fn mean_boots(&self) -> f64 {
        self.boots.iter().sum::<usize>() as f64 / self.runs().max(1) as f64
    }

    fn quantile(&self, q: f64) -> usize {
        let i = ((self.boots.len() as f64 - 1.0) * q).round() as usize;
        self.boots.get(i).copied().unwrap_or(0)
    }
}

/// Clopper–Pearson interval of a rate `k / n`.
pub fn clopper_pearson(k: usize, n: usize, confidence: f64) -> (f64, f64) {
    let a = (1.0 - confidence) / 2.0;
    let (k, n) = (k as f64, n as f64);
    let lo = if k == 0.0 { 0.0 } else { Beta::new(k, n - k + 1.0).map(|b| b.inverse_cdf(a)).unwrap_or(0.0) };
    let hi = if k == n { 1.0 } else { Beta::new(k + 1.0, n - k).map(|b| b.inverse_cdf(1.0 - a)).unwrap_or(1.0) };
    (lo, hi)
}

/// Runs `scenario.runs` simulated bisections with `plan`.
pub fn run_strategy(name: &str, plan: &Plan, scenario: &Scenario) -> Result<StrategyFigures, SimulateError> {
    scenario.validate()?;
    let mut fig = StrategyFigures {
        name: name.into(),
        boots: Vec::new(),
        tests: Vec::new(),
        skips: 0,
        reference_boots: 0,
        wrong: 0,
        wrong_confirmed: 0,
        right: 0,
        ambiguous: 0,
        unconfirmed: 0,
        failed: 0,
        steps_at_good: (0, 0),
        steps_at_bad: (0, 0),
        step_alpha: 0.0,
        found_every_change: 0,
        false_changes: 0,
        side_searches: 0,
        splits: 0,
    };
    let mut picker = Pcg64::seed_from_u64(scenario.seed);
    for run in 0..scenario.runs {
        let n = scenario.commits;
        // The culprit anywhere after the good end, the bad end included.
        let culprit = picker.random_range(1..=n);
        let second = scenario.second_regression.map(|r| {
            let at = loop {
                let c = picker.random_range(1..=n);
                if c != culprit {
                    break c;
                }
            };
            (at, r)
        });
        let seed = picker.random_range(0..u64::MAX);
        let mut history = LinearHistory::new(n);
        let mut lab = ModelLab::new(n, culprit, scenario.regression, scenario.noise, seed);
        lab.break_builds(scenario.build_failure_rate);
        lab.second = second;
        lab.disturb = scenario.disturb;
        let mut state = BisectState::new(plan.clone(), None, &history.name(0), &history.name(n), n)
            .map_err(|e| SimulateError::Driver { run, source: e.into() })?;
        let mut journal = MemoryJournal::default();
        let outcome = Driver::new(&mut state, &mut lab, &mut history, &mut journal)
            .run()
            .map_err(|source| SimulateError::Driver { run, source })?;
        // The rest of the change, where the first culprit carries only part.
        let searched = changes::search(&state, |from, side| {
            let at = |c: &str| history.position(c).unwrap_or(0);
            let mut side_state = changes::side_state(from, side, at(&side.bad) - at(&side.good))
                .map_err(|source| SimulateError::Side { run, source })?;
            Driver::new(&mut side_state, &mut lab, &mut history, &mut journal)
                .run()
                .map_err(|source| SimulateError::Driver { run, source })?;
            Ok(side_state)
        })?;
        let side_boots: usize = searched.iter().map(|s| s.state.boots.len()).sum();
        fig.side_searches += searched.len();
        fig.boots.push(state.boots.len() + side_boots);
        fig.tests.push(state.tests.len() + searched.iter().map(|s| s.state.tests.len()).sum::<usize>());
        fig.reference_boots += state.boots.len() - state.candidate_boots()
            + searched.iter().map(|s| s.state.boots.len() - s.state.candidate_boots()).sum::<usize>();
        fig.skips += state.tests.iter().filter(|t| t.verdict == Some(super::state::Verdict::Skip)).count();
        for t in state.tests.iter().filter(|t| t.kind == super::state::TestKind::Step) {
            if plan.policy == StepPolicy::Sequential {
                fig.step_alpha = fig.step_alpha.max(t.alpha);
            }
            let Some(at) = history.position(&t.commit).filter(|_| second.is_none()) else { continue };
            let (tally, wrong) = match t.verdict {
                Some(super::state::Verdict::Bad) if at < culprit => (&mut fig.steps_at_good, true),
                Some(super::state::Verdict::Bad) => (&mut fig.steps_at_bad, false),
                Some(super::state::Verdict::Good) if at < culprit => (&mut fig.steps_at_good, false),
                Some(super::state::Verdict::Good) => (&mut fig.steps_at_bad, true),
                _ => continue,
            };
            tally.0 += 1;
            tally.1 += usize::from(wrong);
        }
        // With two regressions, naming either is right.
        let truths: Vec<String> =
            std::iter::once(culprit).chain(second.map(|(c, _)| c)).map(|c| history.name(c)).collect();
        let is_truth = |c: &String| truths.contains(c);
        let confirmed: Vec<String> = std::iter::once(&state)
            .chain(searched.iter().map(|s| &s.state))
            .filter_map(|s| s.outcome.as_ref().and_then(|o| o.confirmed()).map(|(c, _)| c.to_string()))
            .collect();
        if truths.iter().all(|t| confirmed.contains(t)) {
            fig.found_every_change += 1;
        }
        if searched
            .iter()
            .filter_map(|s| s.state.outcome.as_ref().and_then(|o| o.confirmed()))
            .any(|(c, _)| !is_truth(&c.to_string()))
        {
            fig.false_changes += 1;
        }
        // What `--wrong-culprit-rate` promises: no confirmed commit, of the
        // first bisection or of a side's, is no change.
        if confirmed.iter().any(|c| !is_truth(c)) {
            fig.wrong_confirmed += 1;
        }
        match outcome {
            Outcome::Confirmed { culprit, .. } => {
                if is_truth(&culprit) {
                    fig.right += 1;
                } else {
                    fig.wrong += 1;
                }
            }
            Outcome::Unconfirmed { culprit, .. } => {
                fig.unconfirmed += 1;
                if is_truth(&culprit) {
                    fig.right += 1;
                } else {
                    fig.wrong += 1;
                }
            }
            Outcome::Split { .. } => {
                // The answer is what the sides confirmed.
                fig.splits += 1;
                if confirmed.iter().any(|c| !is_truth(c)) {
                    fig.wrong += 1;
                } else if !confirmed.is_empty() {
                    fig.right += 1;
                }
            }
            Outcome::Ambiguous { candidates } => {
                fig.ambiguous += 1;
                if !candidates.iter().any(is_truth) {
                    fig.wrong += 1;
                }
            }
            Outcome::Failed { .. } => fig.failed += 1,
        }
    }
    fig.boots.sort_unstable();
    Ok(fig)
}

/// The fixed strategy with the fewest boots per step (2, 4, 6, ... up to
/// `max_boots`) whose measured rate of wrong culprits is at most `rate`:
/// the baseline at a matched error rate. `None` when even `max_boots` does
/// not reach it.
pub fn matched_fixed(
    base: &Plan,
    scenario: &Scenario,
    rate: f64,
    max_boots: u32,
) -> Result<Option<StrategyFigures>, SimulateError> {
    for boots in (2..=max_boots.max(2)).step_by(2) {
        let f = run_strategy(&format!("fixed-{boots} matched"), &fixed_plan(base, boots), scenario)?;
        if f.wrong_rate() <= rate {
            return Ok(Some(f));
        }
    }
    Ok(None)
}

/// The ratio of two strategies' mean boots per bisection, with a 95%
/// interval (delta method over the two independent means).
pub fn boots_ratio(a: &StrategyFigures, b: &StrategyFigures) -> (f64, f64, f64) {
    let stats = |f: &StrategyFigures| {
        let n = f.runs().max(1) as f64;
        let m = f.mean_boots();
        let var = f.boots.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        (m, var / n)
    };
    let ((ma, va), (mb, vb)) = (stats(a), stats(b));
    let r = ma / mb;
    let se = r * (va / (ma * ma) + vb / (mb * mb)).sqrt();
    (r, r - 1.96 * se, r + 1.96 * se)
}

/// The fixed strategy the sequential one is measured against: `boots`
/// boots of each end first, then `boots` boots per step, the closer end
/// wins; no interleaving, no confirmation, no drift term (with no
/// interleaving the ends' boots would all lie at the start, and the slope's
/// error would decide every step).
pub fn fixed_plan(base: &Plan, boots: u32) -> Plan {
    Plan {
        policy: StepPolicy::Fixed { boots },
        reference_boots: boots,
        max_reference_boots: boots.max(base.max_reference_boots),
        reference_every: 0,
        reference_window: 0,
        drift: DriftModel::None,
        confirm: false,
        ..base.clone()
    }
}

/// The benchmark's table.
pub fn render(scenario: &Scenario, figures: &[StrategyFigures]) -> String {
    let mut out = String::new();
    let s = scenario;
    let _ = writeln!(
        out,
        "bisect-sim: {} commits, {:.1}% regression{}; noise {:.1}% per iteration, {:.1}% per boot, {} iterations a boot (per-boot CV {:.2}%), {}; build failures {:.1}%; {} bisections per strategy, seed {}",
        s.commits,
        100.0 * s.regression,
        s.second_regression.map(|r| format!(" and a second of {:.1}% at another commit", 100.0 * r)).unwrap_or_default(),
        100.0 * s.noise.iteration_cv,
        100.0 * s.noise.boot_cv,
        s.noise.iterations,
        100.0 * s.noise.per_boot_cv(),
        s.disturb.describe(),
        100.0 * s.build_failure_rate,
        s.runs,
        s.seed
    );
    let _ = writeln!(
        out,
        "{:<16} {:>8} {:>6} {:>5} {:>5} {:>6} {:>7} {:>6} {:>24} {:>7} {:>6} {:>6} {:>6}",
        "strategy",
        "boots",
        "median",
        "p90",
        "max",
        "ends",
        "tests",
        "skips",
        "wrong culprit (95% CI)",
        "of them",
        "unconf",
        "ambig",
        "failed"
    );
    for f in figures {
        let n = f.runs();
        let (lo, hi) = clopper_pearson(f.wrong, n, 0.95);
        let tests = f.tests.iter().sum::<usize>() as f64 / n.max(1) as f64;
        let _ = writeln!(
            out,
            "{:<16} {:>8.1} {:>6} {:>5} {:>5} {:>6.1} {:>7.1} {:>6.2} {:>24} {:>7} {:>6} {:>6} {:>6}",
            f.name,
            f.mean_boots(),
            f.quantile(0.5),
            f.quantile(0.9),
            f.boots.last().copied().unwrap_or(0),
            f.reference_boots as f64 / n.max(1) as f64,
            tests,
            f.skips as f64 / n.max(1) as f64,
            format!("{:.2}% ({:.2}–{:.2}%)", 100.0 * f.wrong as f64 / n as f64, 100.0 * lo, 100.0 * hi),
            format!("{} conf", f.wrong_confirmed),
            f.unconfirmed,
            f.ambiguous,
            f.failed
        );
    }
    for f in figures.iter().filter(|f| f.steps_at_good.0 + f.steps_at_bad.0 > 0) {
        let rate = |(n, k): (usize, usize)| {
            let (lo, hi) = clopper_pearson(k, n, 0.95);
            format!("{k}/{n} ({:.2}%, 95% CI {:.2}–{:.2}%)", 100.0 * k as f64 / n.max(1) as f64, 100.0 * lo, 100.0 * hi)
        };
        let nominal = if f.step_alpha > 0.0 {
            format!("; nominal α = β ≤ {:.2}%", 100.0 * f.step_alpha)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{} steps as run: good commits called bad {}, bad commits called good {}{nominal}",
            f.name,
            rate(f.steps_at_good),
            rate(f.steps_at_bad)
        );
    }
    for f in figures.iter().filter(|f| s.second_regression.is_some() || f.side_searches > 0) {
        let n = f.runs();
        let rate = |k: usize| {
            let (lo, hi) = clopper_pearson(k, n, 0.95);
            format!("{k}/{n} ({:.1}%, 95% CI {:.1}–{:.1}%)", 100.0 * k as f64 / n.max(1) as f64, 100.0 * lo, 100.0 * hi)
        };
        let _ = writeln!(
            out,
            "{} changes: every planted change confirmed in {}; a side search confirmed a commit that is no change in {}; {} split at a step between the ends; {} side searches",
            f.name,
            rate(f.found_every_change),
            rate(f.false_changes),
            f.splits,
            f.side_searches
        );
    }
    if let [first, rest @ ..] = figures {
        for other in rest {
            let (r, lo, hi) = boots_ratio(first, other);
            let _ = writeln!(
                out,
                "boots per bisection, {} / {}: {r:.3} (95% CI {lo:.3}–{hi:.3}), at {:.2}% and {:.2}% wrong culprits",
                first.name,
                other.name,
                100.0 * first.wrong_rate(),
                100.0 * other.wrong_rate()
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(runs: usize) -> Scenario {
        Scenario {
            commits: 1000,
            regression: 0.05,
            noise: NoiseModel { iteration_cv: 0.06, boot_cv: 0.01, iterations: 5 },
            build_failure_rate: 0.0,
            runs,
            seed: 11,
            second_regression: None,
            disturb: Disturbance::default(),
        }
    }

    #[test]
    fn linear_history_picks_git_midpoints() {
        let mut h = LinearHistory::new(8);
        let step = h.next(&h.name(8), &[h.name(0)], &[]).unwrap();
        assert_eq!(step, NextStep::Test { commit: h.name(4), remaining: 8 });
        assert_eq!(h.next(&h.name(5), &[h.name(4)], &[]).unwrap(), NextStep::FirstBad(h.name(5)));
        assert_eq!(h.first_parent(&h.name(3)).unwrap(), Some(h.name(2)));
        assert!(h.next(&h.name(2), &[h.name(5)], &[]).is_err());
    }

    #[test]
    fn model_lab_draws_the_modelled_levels() {
        let noise = NoiseModel { iteration_cv: 0.05, boot_cv: 0.0, iterations: 5 };
        let mut lab = ModelLab::new(10, 5, 0.2, noise, 3);
        let b = lab.build("c0000004").unwrap();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let good: Vec<f64> = (0..200).map(|i| mean(&lab.boot("c0000004", &b, i).unwrap().iterations)).collect();
        let bad: Vec<f64> = (0..200).map(|i| mean(&lab.boot("c0000005", &b, i).unwrap().iterations)).collect();
        let ratio = mean(&bad) / mean(&good);
        assert!((ratio - 0.8).abs() < 0.01, "{ratio}");
    }

    #[test]
    fn clopper_pearson_matches_scipy() {
        // SciPy: stats.binomtest(3, 100).proportion_ci(0.95, 'exact')
        // → (0.006229, 0.085176).
        let (lo, hi) = clopper_pearson(3, 100, 0.95);
        assert!((lo - 0.006229).abs() < 1e-5 && (hi - 0.085176).abs() < 1e-5, "{lo} {hi}");
        assert_eq!(clopper_pearson(0, 10, 0.95).0, 0.0);
        assert_eq!(clopper_pearson(10, 10, 0.95).1, 1.0);
    }

    #[test]
    fn a_small_benchmark_runs_and_the_sequential_test_is_cheaper() {
        let s = scenario(30);
        let seq = run_strategy("sequential", &Plan::default(), &s).unwrap();
        let fixed = run_strategy("fixed-10", &fixed_plan(&Plan::default(), 10), &s).unwrap();
        assert_eq!(seq.boots.len(), 30);
        // Cheaper at a matched rate of wrong culprits: `bisect-sim --runs
        // 300` (seed 1) matched the sequential strategy's 0.67% with fixed
        // steps of 22 boots, at 2.2 times its boots. (Fixed-10 costs about
        // as many boots as the sequential strategy, which boots the ends
        // more to take the host's drift out, and names a wrong commit in
        // 12.7% of bisections.)
        let matched = run_strategy("fixed-20", &fixed_plan(&Plan::default(), 20), &s).unwrap();
        assert!(seq.mean_boots() < matched.mean_boots(), "{} vs {}", seq.mean_boots(), matched.mean_boots());
        assert!(seq.wrong <= fixed.wrong, "{} vs {} wrong", seq.wrong, fixed.wrong);
        // 5 of 300 such bisections stopped (bisect-sim --runs 300: the
        // steps stayed unsure or contradicted each other), 7 with a
        // reference window of 40; more than 3 of 30 is not that.
        assert!(seq.failed <= 3, "{} of 30 bisections stopped", seq.failed);
        let table = render(&s, &[seq, fixed]);
        assert!(table.contains("boots per bisection, sequential / fixed-10: "), "{table}");
        assert!(table.contains("sequential steps as run: good commits called bad "), "{table}");
        assert!(!table.contains("goal"), "only measured figures: {table}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        let mut s = scenario(1);
        s.regression = 1.5;
        let e = run_strategy("x", &Plan::default(), &s).unwrap_err().to_string();
        assert!(e.contains("regression") && e.contains("1.5"), "{e}");
        s.regression = 0.05;
        s.commits = 1;
        assert!(run_strategy("x", &Plan::default(), &s).is_err());
    }

    /// Two regressions of 5% in 100 commits: a step between them splits the
    /// range and each side is bisected on its own. Before the search, 0.5
    /// to 1.5% of such bisections (seeds 1 and 2, 200 runs) confirmed both
    /// (only the first was ever looked for) and 57-60% named a commit that
    /// is no change; measured after: 54-58% found both, 8-9% named a wrong
    /// one, 1% confirmed a wrong one. With one regression the
    /// split must be rare (it costs the boots of a side with no change)
    /// and never confirm a second change.
    #[test]
    fn a_second_change_in_range_is_found_and_one_change_seldom_splits() {
        let promise = Plan::default().wrong_culprit_rate;
        for seed in [1, 2] {
            let two = Scenario { commits: 100, runs: 200, seed, second_regression: Some(0.05), ..scenario(1) };
            let f = run_strategy("sequential", &Plan::default(), &two).unwrap();
            let (lo, hi) = clopper_pearson(f.found_every_change, f.runs(), 0.95);
            eprintln!(
                "two changes, seed {seed}: both confirmed in {}/{} ({:.1}-{:.1}%), {} split, {} wrong confirmed, {} wrong named, {:.1} boots",
                f.found_every_change,
                f.runs(),
                100.0 * lo,
                100.0 * hi,
                f.splits,
                f.wrong_confirmed,
                f.wrong,
                f.mean_boots()
            );
            assert!(
                f.found_every_change as f64 >= 0.4 * f.runs() as f64,
                "both found in only {}",
                f.found_every_change
            );
            assert!(f.wrong_confirmed_rate() <= promise, "{} wrong confirmed", f.wrong_confirmed);
            assert!(f.wrong_rate() <= 0.15, "{} named a wrong commit", f.wrong);

            let one = Scenario { commits: 100, runs: 200, seed, ..scenario(1) };
            let f = run_strategy("sequential", &Plan::default(), &one).unwrap();
            eprintln!(
                "one change, seed {seed}: {} split, {} side searches, {} extra changes confirmed, {:.1} boots",
                f.splits,
                f.side_searches,
                f.false_changes,
                f.mean_boots()
            );
            assert!(f.splits as f64 <= 0.05 * f.runs() as f64, "{} of {} split", f.splits, f.runs());
            assert_eq!(f.false_changes, 0, "a side search confirmed a change that is not there");
        }
    }

    /// One boot in a hundred 1.5 times its kernel's level (a host hiccup):
    /// such boots are set aside as outliers and booted again. Before that,
    /// 96 of 300 such bisections (1000 commits, seed 1) gave up (σ blown up
    /// by the outliers: steps unsure, ends not different) and 47% confirmed
    /// the culprit; after, 9 and 84%, as without outliers (86%).
    #[test]
    fn outlier_boots_are_set_aside_and_the_bisection_goes_on() {
        let d = Disturbance { outlier_rate: 0.01, outlier_factor: 1.5, ..Disturbance::default() };
        for seed in [1, 2] {
            let s = Scenario { commits: 100, runs: 200, seed, disturb: d, ..scenario(1) };
            let f = run_strategy("sequential", &Plan::default(), &s).unwrap();
            eprintln!(
                "outliers, seed {seed}: {} failed, {} confirmed the culprit, {} wrong, {:.1} boots",
                f.failed,
                f.found_every_change,
                f.wrong,
                f.mean_boots()
            );
            assert!(f.failed as f64 <= 0.06 * f.runs() as f64, "{} of {} gave up", f.failed, f.runs());
            assert!(f.found_every_change as f64 >= 0.75 * f.runs() as f64, "{} confirmed", f.found_every_change);
        }
    }

    /// A bad side twice as noisy as the good one: with one pooled σ the
    /// test understates the bad commits' noise and calls them good far
    /// above its nominal β, and named a wrong commit in about 15% of
    /// bisections of 1000 commits; with each end's own σ (kept once an F
    /// test finds the spreads unequal) both fall. Bounds between the two
    /// measured figures, seeds 1 and 2, 200 bisections of 100 commits.
    #[test]
    fn a_noisier_bad_side_is_weighed_with_its_own_sigma() {
        const STEP_BOUND: f64 = 0.105;
        const WRONG_BOUND: f64 = 0.09;
        let d = Disturbance { bad_sigma_factor: 2.0, ..Disturbance::default() };
        let mut lines = Vec::new();
        let mut worst: (f64, f64) = (0.0, 0.0);
        for seed in [1, 2] {
            let s = Scenario { commits: 100, runs: 200, seed, disturb: d, ..scenario(1) };
            let f = run_strategy("sequential", &Plan::default(), &s).unwrap();
            let (n, called_good) = f.steps_at_bad;
            let step_rate = called_good as f64 / n.max(1) as f64;
            lines.push(format!(
                "seed {seed}: bad commits called good {called_good}/{n} ({:.1}%, nominal {:.1}%), wrong named {:.1}%, {} gave up, {:.1} boots",
                100.0 * step_rate,
                100.0 * f.step_alpha,
                100.0 * f.wrong_rate(),
                f.failed,
                f.mean_boots()
            ));
            worst = (worst.0.max(step_rate), worst.1.max(f.wrong_rate()));
        }
        let text = lines.join("\n");
        eprintln!("{text}");
        assert!(worst.0 <= STEP_BOUND, "bad commits called good above {STEP_BOUND}:\n{text}");
        assert!(worst.1 <= WRONG_BOUND, "wrong commits named above {WRONG_BOUND}:\n{text}");
    }

    /// "K of N (P%, 95% CI LO-HI%)": a count of bisections with its
    /// Clopper-Pearson interval.
    fn count_with_interval(count: usize, runs: usize) -> String {
        let (lo, hi) = clopper_pearson(count, runs, 0.95);
        let pct = 100.0 * count as f64 / runs.max(1) as f64;
        format!("{count} of {runs} ({pct:.1}%, 95% CI {:.1}-{:.1}%)", 100.0 * lo, 100.0 * hi)
    }

    /// A host that drifts by -0.04% per boot (about 4% over a bisection of
    /// 100 commits): with every value compared as it measured, 16.5-29% of
    /// bisections named a wrong commit (seeds 1 and 2, 200 bisections);
    /// with the drift term 1.0%. Bound: the promised rate of wrong culprits,
    /// here for every commit named, confirmed or not.
    #[test]
    fn a_drifting_host_does_not_send_the_bisection_to_a_wrong_commit() {
        let promise = Plan::default().wrong_culprit_rate;
        let d = Disturbance { drift_per_boot: -0.0004, ..Disturbance::default() };
        let mut lines = Vec::new();
        let mut worst: f64 = 0.0;
        for seed in [1, 2] {
            let s = Scenario { commits: 100, runs: 200, seed, disturb: d, ..scenario(1) };
            let f = run_strategy("sequential", &Plan::default(), &s).unwrap();
            lines.push(format!(
                "seed {seed}: {} named a wrong commit, {} gave up, {:.1} boots",
                count_with_interval(f.wrong, f.boots.len()),
                f.failed,
                f.mean_boots()
            ));
            worst = worst.max(f.wrong_rate());
        }
        let text = lines.join("\n");
        eprintln!("{text}");
        assert!(worst <= promise, "wrong commits named above {promise} on a drifting host:\n{text}");
    }

    /// Wrong confirmed culprits (what `--wrong-culprit-rate` promises) over
    /// bisections of 100 commits with the default plan, for noise the
    /// model leaves out (a drifting host has its own test above).
    #[test]
    fn measured_wrong_culprit_rates_keep_the_promise_beyond_the_noise_model() {
        let promise = Plan::default().wrong_culprit_rate;
        let d = Disturbance::default();
        let cases = [
            ("one regression of 5%", None, d),
            ("two regressions of 5%", Some(0.05), d),
            ("1% of boots x1.5", None, Disturbance { outlier_rate: 0.01, outlier_factor: 1.5, ..d }),
            ("t-tailed boots, 4 df", None, Disturbance { tail_df: 4.0, ..d }),
            ("the bad side twice as noisy", None, Disturbance { bad_sigma_factor: 2.0, ..d }),
        ];
        let mut failed = Vec::new();
        for seed in [1, 2] {
            for (what, second, disturb) in cases {
                let s = Scenario { commits: 100, runs: 200, seed, second_regression: second, disturb, ..scenario(1) };
                let f = run_strategy("sequential", &Plan::default(), &s).unwrap();
                let line = format!(
                    "{what}, seed {seed}: {} bisections confirmed a wrong culprit, {} named a wrong one in all; {:.1} boots each",
                    count_with_interval(f.wrong_confirmed, f.boots.len()),
                    f.wrong,
                    f.mean_boots()
                );
                eprintln!("{line}");
                if f.wrong_confirmed_rate() > promise {
                    failed.push(line);
                }
            }
        }
        assert!(failed.is_empty(), "promised at most {promise}:\n{}", failed.join("\n"));
    }
}
