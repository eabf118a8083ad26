//! The bisection itself: measure both ends, then test midpoints with the
//! sequential test (interleaving reference boots), skip what cannot be
//! judged, and confirm the first bad commit by measuring it and its parent
//! again. Every decision is taken from the [`BisectState`] alone and the
//! state is checkpointed after every build, boot and verdict, so a run
//! resumes exactly where it stopped. The driver owns the order of work and
//! the verdicts; building, booting and reading history are the lab's and the
//! history's, so the simulation runs this same code.

use super::history::{History, HistoryError, NextStep};
use super::journal::{Event, Journal, JournalError};
use super::lab::{Lab, LabError};
use super::sequential_test::{
    compare_ends, evaluate, Decision, Evaluation, ReferenceModel, SequentialTestError, TestPlan,
};
use super::state::{
    now, short, BisectState, BootEntry, BuildRecord, BuildStatus, CommitRecord, Mode, Outcome, Phase, Role, StepPolicy,
    TestKind, TestRecord, Verdict,
};
use serde_json::json;

/// Reference boots in a row that may fail before the bisection stops: the
/// reference kernels booted before, so repeated failures mean the host (or
/// the lab) broke, and every later verdict would be worthless.
const MAX_REFERENCE_FAILURES_IN_A_ROW: usize = 3;

/// Candidate boots of one test that may fail before it is skipped: a hang
/// or panic is retried once.
const MAX_CANDIDATE_FAILURES: u32 = 2;

/// Boots added to each end between two looks at whether the ends differ.
const ENDS_STEP: u32 = 2;

/// Steps in a row that may end unsure before the bisection stops: the
/// metric is then too noisy for the regression, and going on would boot
/// all night for nothing.
const MAX_UNSURE_IN_A_ROW: usize = 4;

/// How far beyond its boundary a test must be able to get within its cap of
/// boots, given how well the ends are known, before it boots the candidate:
/// below this the ends get more boots first (see [`Driver::ends_too_imprecise`]).
const REACH: f64 = 1.25;

/// Errors that stop a bisection without deciding it (the state stays
/// resumable).
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The lab could not build or boot at all.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// git failed.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The state or log could not be written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The numbers could not be tested.
    #[error(transparent)]
    Test(#[from] SequentialTestError),
    /// A reference kernel stopped booting in the middle of the bisection.
    #[error("the {which} end {commit} failed {n} boots in a row (last: {last}); the host or lab is broken, so later verdicts would be worthless: fix it and resume")]
    ReferenceBroken {
        /// `good` or `bad`.
        which: &'static str,
        /// The end.
        commit: String,
        /// Failures in a row.
        n: usize,
        /// The last failure.
        last: String,
    },
    /// The state says the bisection is over.
    #[error("the bisection has finished; start a new one to bisect again")]
    Finished,
}

/// Drives one bisection over a state, a lab, a history and a journal.
pub struct Driver<'a, L: Lab, H: History, J: Journal> {
    state: &'a mut BisectState,
    lab: &'a mut L,
    history: &'a mut H,
    journal: &'a mut J,
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// How an evaluation reads in words.
pub fn explain(e: &Evaluation) -> String {
    let g = e.model.good.mean.exp();
    let b = e.model.bad.mean.exp();
    let c = e.candidate_log_mean.map(f64::exp).unwrap_or(f64::NAN);
    let verdict = match e.decision {
        Decision::Bad => format!("Λ = {:.2} ≥ ln(1/α) = {:.2}", e.llr, e.upper),
        Decision::Good => format!("Λ = {:.2} ≤ ln β = {:.2}", e.llr, e.lower),
        Decision::Unsure | Decision::Continue => {
            format!("Λ = {:.2} between ln β = {:.2} and ln(1/α) = {:.2}", e.llr, e.lower, e.upper)
        }
    };
    format!(
        "{verdict} after {} boot(s); mean {} is {:.0}% of the way from good {} to bad {} (σ {:.2}%)",
        e.n,
        fmt_value(c),
        100.0 * e.position.unwrap_or(f64::NAN),
        fmt_value(g),
        fmt_value(b),
        100.0 * e.sigma_used
    )
}

/// A metric value with sensible digits.
pub fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 1000.0 {
        format!("{v:.1}")
    } else if v.abs() >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

impl<'a, L: Lab, H: History, J: Journal> Driver<'a, L, H, J> {
    /// A driver over these parts.
    pub fn new(state: &'a mut BisectState, lab: &'a mut L, history: &'a mut H, journal: &'a mut J) -> Self {
        Driver { state, lab, history, journal }
    }

    /// Runs the bisection to its end (or until an error that leaves it
    /// resumable) and returns the outcome.
    pub fn run(&mut self) -> Result<Outcome, DriverError> {
        loop {
            match self.state.phase.clone() {
                Phase::References => {
                    if let Err(reason) = self.references()? {
                        self.finish(Outcome::Failed { reason })?;
                    } else {
                        self.state.phase = Phase::Bisecting;
                        self.checkpoint()?;
                    }
                }
                Phase::Bisecting => self.bisect_step()?,
                Phase::Confirming { culprit } => self.confirm(&culprit)?,
                Phase::Finished => {
                    return Ok(self
                        .state
                        .outcome
                        .clone()
                        .unwrap_or(Outcome::Failed { reason: "the state is finished but has no outcome".into() }));
                }
            }
        }
    }

    /// `git bisect run` mode: measures the references if that was not done
    /// yet, then tests `commit` alone. `Err(reason)` inside means the
    /// references cannot be used.
    pub fn run_single(&mut self, commit: &str) -> Result<Result<Verdict, String>, DriverError> {
        if self.state.phase == Phase::References {
            if let Err(reason) = self.references()? {
                return Ok(Err(reason));
            }
            self.state.phase = Phase::Bisecting;
            self.checkpoint()?;
        }
        Ok(Ok(self.test_commit(commit, TestKind::Run, None, 0)?))
    }

    fn checkpoint(&mut self) -> Result<(), DriverError> {
        Ok(self.journal.checkpoint(self.state)?)
    }

    fn event(
        &mut self,
        kind: &'static str,
        commit: Option<&str>,
        message: String,
        data: serde_json::Value,
    ) -> Result<(), DriverError> {
        Ok(self.journal.event(Event::new(kind, commit, message, data))?)
    }

    fn finish(&mut self, outcome: Outcome) -> Result<(), DriverError> {
        let message = match &outcome {
            Outcome::Confirmed { culprit, .. } => {
                format!("first bad commit {} (confirmed)", self.state.describe(culprit))
            }
            Outcome::Unconfirmed { culprit, reason } => {
                format!("first bad commit {} (NOT confirmed: {reason})", self.state.describe(culprit))
            }
            Outcome::Ambiguous { candidates } => format!(
                "only skipped commits are left; the first bad commit is one of: {}",
                candidates.iter().map(|c| short(c)).collect::<Vec<_>>().join(" ")
            ),
            Outcome::Failed { reason } => format!("bisection failed: {reason}"),
        };
        self.event("outcome", None, message, serde_json::to_value(&outcome).unwrap_or_default())?;
        self.state.outcome = Some(outcome);
        self.state.phase = Phase::Finished;
        self.checkpoint()
    }

    /// Makes sure the state knows `commit`'s subject and position.
    fn note_commit(&mut self, commit: &str) -> Result<(), DriverError> {
        if !self.state.commits.contains_key(commit) {
            let subject = self.history.subject(commit)?;
            let position = self.history.position(commit);
            self.state
                .commits
                .insert(commit.to_string(), CommitRecord { sha: commit.to_string(), subject, position, build: None });
        }
        Ok(())
    }

    /// The commit's build, building it the first time.
    fn ensure_built(&mut self, commit: &str) -> Result<BuildRecord, DriverError> {
        self.note_commit(commit)?;
        if let Some(b) = self.state.commits.get(commit).and_then(|c| c.build.clone()) {
            return Ok(b);
        }
        let rec = self.lab.build(commit)?;
        let what = match rec.status {
            BuildStatus::Built => format!(
                "built {} in {:.0} s{}",
                self.state.describe(commit),
                rec.seconds,
                rec.cmdline.as_deref().map(|c| format!(" (cmdline: {c})")).unwrap_or_default()
            ),
            BuildStatus::Failed => {
                format!("build of {} failed: {}", self.state.describe(commit), rec.reason.as_deref().unwrap_or("?"))
            }
            BuildStatus::Unsuitable => format!(
                "kernel of {} is unsuitable: {}",
                self.state.describe(commit),
                rec.reason.as_deref().unwrap_or("?")
            ),
        };
        self.event("build", Some(commit), what, serde_json::to_value(&rec).unwrap_or_default())?;
        if let Some(c) = self.state.commits.get_mut(commit) {
            c.build = Some(rec.clone());
        }
        self.checkpoint()?;
        Ok(rec)
    }

    /// Boots `commit` once and records the boot.
    fn boot_once(&mut self, commit: &str, role: Role, test: Option<u32>) -> Result<BootEntry, DriverError> {
        let build = self.ensure_built(commit)?;
        let index = self.state.boots.len();
        let obs = self.lab.boot(commit, &build, index)?;
        let mut classification = obs.classification.clone();
        let mut detail = obs.detail.clone();
        let value = if self.state.plan.mode == Mode::Perf && classification == "ok" {
            let v = mean(&obs.iterations);
            if v.is_finite() && v > 0.0 {
                Some(v)
            } else {
                classification = "bad_value".into();
                detail = Some(format!("per-boot mean {v} of {:?} is not a positive number", obs.iterations));
                None
            }
        } else {
            None
        };
        let entry = BootEntry {
            index,
            commit: commit.to_string(),
            role,
            test,
            classification,
            detail,
            value,
            iterations: obs.iterations,
            wall_s: obs.wall_s,
            at: now(),
        };
        let what = match role {
            Role::GoodReference => "good end".to_string(),
            Role::BadReference => "bad end".to_string(),
            Role::Candidate => format!("test {}", test.unwrap_or(0)),
        };
        let result = match (&entry.value, &entry.detail) {
            (Some(v), _) => {
                format!("{} = {} ({} iterations)", self.state.plan.metric, fmt_value(*v), entry.iterations.len())
            }
            (None, Some(d)) => format!("{}: {d}", entry.classification),
            (None, None) => entry.classification.clone(),
        };
        let message = format!("boot {} of {} ({what}): {result} in {:.0} s", index + 1, short(commit), entry.wall_s);
        self.event("boot", Some(commit), message, serde_json::to_value(&entry).unwrap_or_default())?;
        // Everything a boot changes goes into the same checkpoint, so a
        // crash right after it resumes with the same schedule.
        match role {
            Role::Candidate => {
                self.state.since_reference += 1;
                if entry.value.is_none() {
                    if let Some(t) = test.and_then(|n| self.state.test_mut(n)) {
                        t.boot_failures += 1;
                    }
                }
            }
            Role::GoodReference | Role::BadReference => {
                self.state.since_reference = 0;
                self.state.next_reference = role.other();
            }
        }
        self.state.boots.push(entry.clone());
        self.checkpoint()?;
        Ok(entry)
    }

    fn end_of(&self, role: Role) -> (String, &'static str) {
        match role {
            Role::BadReference => (self.state.bad.clone(), "bad"),
            _ => (self.state.good.clone(), "good"),
        }
    }

    /// Failures at the end of a reference's boots, and the last one's
    /// description.
    fn failures_in_a_row(&self, role: Role) -> (usize, String) {
        let boots: Vec<&BootEntry> = self.state.boots.iter().filter(|b| b.role == role).collect();
        let n = boots.iter().rev().take_while(|b| b.value.is_none()).count();
        let last = boots
            .last()
            .map(|b| {
                format!("{}{}", b.classification, b.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())
            })
            .unwrap_or_default();
        (n, last)
    }

    /// Measures the ends; `Ok(Err(reason))` when they cannot be bisected.
    fn references(&mut self) -> Result<Result<(), String>, DriverError> {
        for role in [Role::GoodReference, Role::BadReference] {
            let (commit, which) = self.end_of(role);
            let b = self.ensure_built(&commit)?;
            if b.status != BuildStatus::Built {
                return Ok(Err(format!(
                    "the {which} end {} cannot be used: {}",
                    self.state.describe(&commit),
                    b.reason.unwrap_or_default()
                )));
            }
        }
        match self.state.plan.mode {
            Mode::Perf => self.perf_references(),
            Mode::Boot => self.boot_references(),
        }
    }

    fn perf_references(&mut self) -> Result<Result<(), String>, DriverError> {
        let plan = self.state.plan.clone();
        let first = match plan.policy {
            StepPolicy::Sequential => plan.reference_boots,
            StepPolicy::Fixed { boots } => boots,
        }
        .max(2);
        let last = plan.max_reference_boots.max(first);
        // Each look after ENDS_STEP more boots per end; Bonferroni over the
        // looks keeps the chance of bisecting pure noise at ends_alpha.
        let looks = f64::from((last - first).div_ceil(ENDS_STEP) + 1);
        let mut want = first;
        loop {
            // Interleaved, good and bad in turn, so host drift shows in both.
            while [Role::GoodReference, Role::BadReference]
                .iter()
                .any(|r| (self.state.reference_values(*r).len() as u32) < want)
            {
                for role in [Role::GoodReference, Role::BadReference] {
                    if self.state.reference_values(role).len() as u32 >= want {
                        continue;
                    }
                    let (commit, which) = self.end_of(role);
                    let e = self.boot_once(&commit, role, None)?;
                    if e.classification == "no_metric" {
                        return Ok(Err(format!(
                            "the {which} end does not report {}: {}",
                            plan.metric,
                            e.detail.unwrap_or_default()
                        )));
                    }
                    let (n, last) = self.failures_in_a_row(role);
                    if n >= 2 {
                        return Ok(Err(format!(
                            "the {which} end {} failed to boot twice in a row ({last}); fix it or choose another end",
                            self.state.describe(&commit)
                        )));
                    }
                }
            }
            let good = self.state.reference_values(Role::GoodReference);
            let bad = self.state.reference_values(Role::BadReference);
            let ends = compare_ends(&good, &bad)?;
            self.state.ends = Some(ends);
            let change = ends.ratio - 1.0;
            let significant = ends.p_value < plan.ends_alpha / looks;
            let big_enough = change.abs() >= plan.threshold;
            let summary = format!(
                "ends: good {} ({} boots), bad {} ({} boots): {:+.2}% (p = {:.2e}, needs < {:.2e}; threshold {:.1}%)",
                fmt_value(mean(&good)),
                good.len(),
                fmt_value(mean(&bad)),
                bad.len(),
                100.0 * change,
                ends.p_value,
                plan.ends_alpha / looks,
                100.0 * plan.threshold
            );
            self.event("ends", None, summary.clone(), serde_json::to_value(ends).unwrap_or_default())?;
            self.checkpoint()?;
            if significant && big_enough {
                return Ok(Ok(()));
            }
            if want >= last {
                let why = if !significant {
                    "the difference is not significant"
                } else {
                    "the difference is below --threshold"
                };
                return Ok(Err(format!(
                    "the ends do not differ enough to bisect ({why}) after {want} boots each: {summary}"
                )));
            }
            want = (want + ENDS_STEP).min(last);
        }
    }

    fn boot_references(&mut self) -> Result<Result<(), String>, DriverError> {
        let tries = self.state.plan.boot_tries.max(1) as usize;
        // The good end must boot every time, the bad end must fail at least
        // once in as many tries.
        loop {
            let boots: Vec<&BootEntry> = self.state.boots.iter().filter(|b| b.role == Role::GoodReference).collect();
            if let Some(f) = boots.iter().find(|b| b.kernel_failed()) {
                return Ok(Err(format!(
                    "the good end {} fails to boot ({}: {}); boot mode needs a good end that boots",
                    self.state.describe(&self.state.good),
                    f.classification,
                    f.detail.clone().unwrap_or_default()
                )));
            }
            if boots.iter().filter(|b| b.classification == "ok").count() >= tries {
                break;
            }
            if boots.len() >= tries + 2 {
                return Ok(Err("the good end's boots keep failing for reasons other than the kernel".into()));
            }
            let good = self.state.good.clone();
            self.boot_once(&good, Role::GoodReference, None)?;
        }
        loop {
            let boots: Vec<&BootEntry> = self.state.boots.iter().filter(|b| b.role == Role::BadReference).collect();
            if boots.iter().any(|b| b.kernel_failed()) {
                return Ok(Ok(()));
            }
            if boots.iter().filter(|b| b.classification == "ok").count() >= tries {
                return Ok(Err(format!(
                    "the bad end {} booted {tries} time(s) without a panic or hang; nothing to bisect in boot mode",
                    self.state.describe(&self.state.bad)
                )));
            }
            if boots.len() >= tries + 2 {
                return Ok(Err("the bad end's boots keep failing for reasons other than the kernel".into()));
            }
            let bad = self.state.bad.clone();
            self.boot_once(&bad, Role::BadReference, None)?;
        }
    }

    /// One bisection step.
    fn bisect_step(&mut self) -> Result<(), DriverError> {
        let bad = self.state.current_bad();
        let goods = self.state.goods();
        let skipped = self.state.skipped();
        let next = match self.history.next(&bad, &goods, &skipped) {
            Ok(n) => n,
            Err(HistoryError::Contradiction { bad }) => {
                return self.finish(Outcome::Failed {
                    reason: format!(
                        "the verdicts contradict each other: bad commit {} is an ancestor of a good one (a noisy or drifting metric?)",
                        short(&bad)
                    ),
                });
            }
            Err(e) => return Err(e.into()),
        };
        match next {
            NextStep::FirstBad(c) => {
                self.note_commit(&c)?;
                if self.state.plan.confirm {
                    let message =
                        format!("bisection names {}; measuring it and its parent again", self.state.describe(&c));
                    self.event("phase", Some(&c), message, json!({"since": self.state.tests.len()}))?;
                    self.state.phase = Phase::Confirming { culprit: c };
                    self.checkpoint()
                } else {
                    self.finish(Outcome::Unconfirmed { culprit: c, reason: "confirmation was switched off".into() })
                }
            }
            NextStep::OnlySkipped(candidates) => {
                // A commit skipped only because its test stayed unsure is not
                // broken: measure it once more before giving up on a single
                // culprit.
                let retry = candidates.iter().find_map(|c| {
                    let done: Vec<&TestRecord> = self
                        .state
                        .tests
                        .iter()
                        .filter(|t| &t.commit == c && t.kind == TestKind::Step && t.verdict.is_some())
                        .collect();
                    match done.as_slice() {
                        [only] if only.evidence.is_some_and(|e| e.decision == Decision::Unsure) => {
                            Some((c.clone(), only.number))
                        }
                        _ => None,
                    }
                });
                match retry {
                    Some((c, since)) => {
                        let message =
                            format!("only skipped commits are left; {} was only unsure: testing it again", short(&c));
                        self.event("phase", Some(&c), message, serde_json::Value::Null)?;
                        self.test_commit(&c, TestKind::Step, Some(candidates.len() as u64), since)?;
                        Ok(())
                    }
                    None => self.finish(Outcome::Ambiguous { candidates }),
                }
            }
            NextStep::Test { commit, remaining } => {
                let unsure = self
                    .state
                    .tests
                    .iter()
                    .rev()
                    .filter(|t| t.kind == TestKind::Step && t.verdict.is_some())
                    .take_while(|t| t.evidence.is_some_and(|e| e.decision == Decision::Unsure))
                    .count();
                if unsure >= MAX_UNSURE_IN_A_ROW {
                    let max = self.state.plan.max_boots;
                    return self.finish(Outcome::Failed {
                        reason: format!(
                            "{unsure} steps in a row stayed unsure after {max} boots each: the metric is too noisy for this regression; raise --max-boots or --iterations, or bisect a larger regression"
                        ),
                    });
                }
                self.test_commit(&commit, TestKind::Step, Some(remaining), 0)?;
                Ok(())
            }
        }
    }

    /// Number of the latest test that ended a bisection phase, so a
    /// confirmation round only reuses its own tests.
    fn round_start(&self) -> u32 {
        self.state.tests.iter().filter(|t| t.kind == TestKind::Step).map(|t| t.number).max().unwrap_or(0)
    }

    fn confirm(&mut self, culprit: &str) -> Result<(), DriverError> {
        let since = self.round_start();
        let revisions_left = self.state.revisions < self.state.plan.max_revisions;
        // The culprit first: if it is good after all, its parent needs no
        // boots; and a parent found bad gets the later test number, which
        // makes it the bad bound.
        let vc = self.test_commit(culprit, TestKind::ConfirmCulprit, None, since)?;
        match vc {
            Verdict::Skip => {
                return self.finish(Outcome::Unconfirmed {
                    culprit: culprit.into(),
                    reason: "measuring it again gave no verdict (see its confirmation test)".into(),
                })
            }
            Verdict::Good if revisions_left => {
                self.state.revisions += 1;
                let message =
                    format!("{} measured good on confirmation: its verdict is revised, bisecting on", short(culprit));
                self.event("phase", Some(culprit), message, json!({"revisions": self.state.revisions}))?;
                self.state.phase = Phase::Bisecting;
                return self.checkpoint();
            }
            Verdict::Good => {
                return self.finish(Outcome::Unconfirmed {
                    culprit: culprit.into(),
                    reason: format!(
                        "it measured good on confirmation, and {} verdict(s) were already revised",
                        self.state.revisions
                    ),
                })
            }
            Verdict::Bad => {}
        }
        let Some(parent) = self.history.first_parent(culprit)? else {
            return self.finish(Outcome::Unconfirmed { culprit: culprit.into(), reason: "it has no parent".into() });
        };
        // The parent's standing verdict before this round: a tested good
        // commit can be revised; the good end or an untested ancestor cannot.
        let parent_step_good = parent != self.state.good
            && self.state.verdicts().get(parent.as_str()).is_some_and(|(v, _)| *v == Verdict::Good);
        let vp = self.test_commit(&parent, TestKind::ConfirmParent, None, since)?;
        match vp {
            Verdict::Good => self.finish(Outcome::Confirmed { culprit: culprit.into(), parent }),
            Verdict::Skip => self.finish(Outcome::Unconfirmed {
                culprit: culprit.into(),
                reason: format!("its parent {} gave no verdict when measured again", short(&parent)),
            }),
            Verdict::Bad if parent_step_good && revisions_left => {
                self.state.revisions += 1;
                let message = format!(
                    "parent {} measured bad on confirmation: its verdict is revised, bisecting on",
                    short(&parent)
                );
                self.event("phase", Some(&parent), message, json!({"revisions": self.state.revisions}))?;
                self.state.phase = Phase::Bisecting;
                self.checkpoint()
            }
            Verdict::Bad => {
                let why = if parent == self.state.good {
                    "its parent is the good end, which measured bad this time (host drift or a noisy metric?)"
                        .to_string()
                } else if !parent_step_good {
                    format!(
                        "its parent {} measured bad, but was never tested (an ancestor of a good commit: a merge?)",
                        short(&parent)
                    )
                } else {
                    format!(
                        "its parent {} measured bad, and {} verdict(s) were already revised",
                        short(&parent),
                        self.state.revisions
                    )
                };
                self.finish(Outcome::Unconfirmed { culprit: culprit.into(), reason: why })
            }
        }
    }

    /// The sequential test's plan for test `number`.
    fn test_plan(&self, t: &TestRecord) -> TestPlan {
        let p = &self.state.plan;
        let (min_boots, max_boots) = match p.policy {
            StepPolicy::Sequential => {
                let max = p.max_boots.max(p.min_boots.max(1));
                // A confirmation is the last word on the culprit: it may
                // take twice the boots before giving up.
                match t.kind {
                    // Confirmations never rest on one boot.
                    TestKind::ConfirmCulprit | TestKind::ConfirmParent => (p.min_boots.max(2), 2 * max),
                    _ => (p.min_boots.max(1), max),
                }
            }
            StepPolicy::Fixed { boots } => (boots.max(1), boots.max(1)),
        };
        TestPlan { alpha: t.alpha, beta: t.beta, min_boots, max_boots, variance: p.variance }
    }

    /// Tests `commit` (resuming a test in progress, or returning the verdict
    /// of one already finished since test number `since`).
    fn test_commit(
        &mut self,
        commit: &str,
        kind: TestKind,
        remaining: Option<u64>,
        since: u32,
    ) -> Result<Verdict, DriverError> {
        let existing = self.state.tests.iter().find(|t| t.commit == commit && t.kind == kind && t.number > since);
        let number = match existing {
            Some(t) if t.verdict.is_some() => return Ok(t.verdict.unwrap_or(Verdict::Skip)),
            Some(t) => t.number,
            None => self.start_test(commit, kind, remaining)?,
        };
        let build = self.ensure_built(commit)?;
        if build.status != BuildStatus::Built {
            let reason = match build.status {
                BuildStatus::Failed => format!("build failed: {}", build.reason.unwrap_or_default()),
                _ => format!("unsuitable kernel: {}", build.reason.unwrap_or_default()),
            };
            return self.finish_test(number, Verdict::Skip, reason, None);
        }
        match self.state.plan.mode {
            Mode::Perf => self.perf_test(commit, number),
            Mode::Boot => self.boot_test(commit, number),
        }
    }

    fn start_test(&mut self, commit: &str, kind: TestKind, remaining: Option<u64>) -> Result<u32, DriverError> {
        self.note_commit(commit)?;
        let number = self.state.tests.len() as u32 + 1;
        let p = &self.state.plan;
        let rate = match (p.step_rate, kind) {
            (Some(a), TestKind::Step) => a,
            (Some(_), TestKind::ConfirmCulprit | TestKind::ConfirmParent) => {
                p.wrong_culprit_rate / f64::from(1 + p.max_revisions)
            }
            _ => self.state.budget.per_test(number),
        };
        let good_pos = self.state.goods().iter().filter_map(|g| self.history.position(g)).max();
        let bad_pos = self.history.position(&self.state.current_bad());
        let bounds = good_pos.zip(bad_pos);
        let t = TestRecord {
            number,
            commit: commit.to_string(),
            kind,
            alpha: rate,
            beta: rate,
            remaining,
            bounds,
            verdict: None,
            reason: None,
            evidence: None,
            boot_failures: 0,
            started_at: now(),
            finished_at: None,
        };
        let what = match kind {
            TestKind::Step => format!(
                "step {number}: testing {}{}",
                self.state.describe(commit),
                remaining.map(|r| format!(", {r} candidates left")).unwrap_or_default()
            ),
            TestKind::ConfirmCulprit => format!("test {number}: confirming {} is bad", self.state.describe(commit)),
            TestKind::ConfirmParent => {
                format!("test {number}: confirming parent {} is good", self.state.describe(commit))
            }
            TestKind::Run => format!("test {number}: testing {}", self.state.describe(commit)),
        };
        self.event(
            "test",
            Some(commit),
            format!("{what} (α = β = {rate:.2e})"),
            serde_json::to_value(&t).unwrap_or_default(),
        )?;
        self.state.tests.push(t);
        self.checkpoint()?;
        Ok(number)
    }

    fn finish_test(
        &mut self,
        number: u32,
        verdict: Verdict,
        reason: String,
        evidence: Option<Evaluation>,
    ) -> Result<Verdict, DriverError> {
        let mut commit = String::new();
        if let Some(t) = self.state.test_mut(number) {
            t.verdict = Some(verdict);
            t.reason = Some(reason.clone());
            if evidence.is_some() {
                t.evidence = evidence;
            }
            t.finished_at = Some(now());
            commit = t.commit.clone();
        }
        let candidate_boots = self.state.test_boots(number).count();
        let message = format!("test {number}: {} is {verdict}: {reason}", short(&commit));
        let data = json!({"test": number, "verdict": verdict, "reason": reason, "evidence": evidence, "candidate_boots": candidate_boots});
        self.event("verdict", Some(&commit), message, data)?;
        self.checkpoint()?;
        Ok(verdict)
    }

    /// One interleaved reference boot, when it is due.
    fn maybe_reference_boot(&mut self) -> Result<(), DriverError> {
        let every = self.state.plan.reference_every;
        if every == 0 || self.state.since_reference < every || self.state.plan.mode == Mode::Boot {
            return Ok(());
        }
        let role = self.state.next_reference;
        let (commit, which) = self.end_of(role);
        self.boot_once(&commit, role, None)?;
        let (n, last) = self.failures_in_a_row(role);
        if n >= MAX_REFERENCE_FAILURES_IN_A_ROW {
            return Err(DriverError::ReferenceBroken { which, commit, n, last });
        }
        Ok(())
    }

    /// Whether the ends are known too imprecisely for this test: even at its
    /// cap of candidate boots, a candidate exactly like one end could not
    /// take the ratio [`REACH`] times past the boundary, because the test
    /// weighs each end's mean by how many boots it rests on. Then another
    /// boot of the end with fewer boots is worth more than a candidate boot
    /// (and serves every later step too).
    fn ends_too_imprecise(&self, model: &ReferenceModel, plan: &TestPlan) -> bool {
        let p = &self.state.plan;
        if !matches!(p.policy, StepPolicy::Sequential) {
            return false;
        }
        let nr = model.good.n.min(model.bad.n) as f64;
        if nr >= f64::from(p.reference_cap) {
            return false;
        }
        let cap = f64::from(plan.max_boots);
        let var = (model.sigma.powi(2) * plan.variance.factor(model.df)).max(1e-12);
        let delta = model.bad.mean - model.good.mean;
        let w = nr * cap / (nr + cap);
        let attainable = w * delta * delta / (2.0 * var);
        attainable < REACH * plan.upper().max(-plan.lower())
    }

    fn perf_test(&mut self, commit: &str, number: u32) -> Result<Verdict, DriverError> {
        loop {
            let Some(t) = self.state.tests.iter().find(|t| t.number == number).cloned() else {
                return Ok(Verdict::Skip);
            };
            let values = self.state.test_values(number);
            let good = self.state.reference_values(Role::GoodReference);
            let bad = self.state.reference_values(Role::BadReference);
            let others = self.state.other_groups(number);
            let others: Vec<&[f64]> = others.iter().map(Vec::as_slice).collect();
            let model = ReferenceModel::estimate(&good, &bad, &others)?;
            let plan = self.test_plan(&t);
            let mut eval = evaluate(&model, &plan, &values)?;
            if let StepPolicy::Fixed { .. } = self.state.plan.policy {
                // The classic rule: after the fixed boots, the closer end.
                if values.len() >= plan.max_boots as usize {
                    eval.decision = if eval.position.unwrap_or(0.0) < 0.5 { Decision::Good } else { Decision::Bad };
                }
            }
            if let Some(tm) = self.state.test_mut(number) {
                tm.evidence = Some(eval);
            }
            match eval.decision {
                Decision::Good => return self.finish_test(number, Verdict::Good, explain(&eval), Some(eval)),
                Decision::Bad => return self.finish_test(number, Verdict::Bad, explain(&eval), Some(eval)),
                Decision::Unsure => {
                    let reason = format!("still unsure at the cap of {} boots: {}", plan.max_boots, explain(&eval));
                    return self.finish_test(number, Verdict::Skip, reason, Some(eval));
                }
                Decision::Continue => {}
            }
            if self.ends_too_imprecise(&model, &plan) {
                let role = if good.len() <= bad.len() { Role::GoodReference } else { Role::BadReference };
                let (commit, which) = self.end_of(role);
                self.boot_once(&commit, role, None)?;
                let (n, last) = self.failures_in_a_row(role);
                if n >= MAX_REFERENCE_FAILURES_IN_A_ROW {
                    return Err(DriverError::ReferenceBroken { which, commit, n, last });
                }
                continue;
            }
            if t.boot_failures >= MAX_CANDIDATE_FAILURES {
                let failures: Vec<String> = self
                    .state
                    .test_boots(number)
                    .filter(|b| b.value.is_none())
                    .map(|b| {
                        format!(
                            "{}{}",
                            b.classification,
                            b.detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
                        )
                    })
                    .collect();
                let reason = format!("{} boots failed: {}", failures.len(), failures.join("; "));
                return self.finish_test(number, Verdict::Skip, reason, Some(eval));
            }
            self.maybe_reference_boot()?;
            self.boot_once(commit, Role::Candidate, Some(number))?;
        }
    }

    fn boot_test(&mut self, commit: &str, number: u32) -> Result<Verdict, DriverError> {
        let tries = self.state.plan.boot_tries.max(1) as usize;
        loop {
            let boots: Vec<BootEntry> = self.state.test_boots(number).cloned().collect();
            if let Some(f) = boots.iter().find(|b| b.kernel_failed()) {
                let reason = format!(
                    "boot {} ended in {}{}",
                    f.index + 1,
                    f.classification,
                    f.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default()
                );
                return self.finish_test(number, Verdict::Bad, reason, None);
            }
            let ok = boots.iter().filter(|b| b.classification == "ok").count();
            if ok >= tries {
                return self.finish_test(number, Verdict::Good, format!("booted cleanly {ok} time(s)"), None);
            }
            let other = boots.len() - ok;
            if other as u32 >= MAX_CANDIDATE_FAILURES {
                let why: Vec<String> = boots
                    .iter()
                    .filter(|b| b.classification != "ok")
                    .map(|b| {
                        format!(
                            "{}{}",
                            b.classification,
                            b.detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
                        )
                    })
                    .collect();
                return self.finish_test(
                    number,
                    Verdict::Skip,
                    format!("boots failed for other reasons: {}", why.join("; ")),
                    None,
                );
            }
            self.boot_once(commit, Role::Candidate, Some(number))?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::journal::MemoryJournal;
    use crate::bisect::simulate::{LinearHistory, ModelLab, NoiseModel};
    use crate::bisect::state::Plan;

    fn run(lab: &mut ModelLab, history: &mut LinearHistory, plan: Plan) -> (BisectState, Outcome) {
        let mut state =
            BisectState::new(plan, None, &history.name(0), &history.name(history.len()), history.len()).unwrap();
        let mut journal = MemoryJournal { keep: true, ..Default::default() };
        let outcome = Driver::new(&mut state, lab, history, &mut journal).run().unwrap();
        (state, outcome)
    }

    fn noise() -> NoiseModel {
        NoiseModel { iteration_cv: 0.06, boot_cv: 0.01, iterations: 5 }
    }

    #[test]
    fn finds_and_confirms_a_clear_regression() {
        let mut history = LinearHistory::new(100);
        let mut lab = ModelLab::new(100, 37, 0.10, noise(), 1);
        let (state, outcome) = run(&mut lab, &mut history, Plan::default());
        assert_eq!(outcome, Outcome::Confirmed { culprit: history.name(37), parent: history.name(36) });
        // Every step decided; the references were interleaved.
        assert!(state.tests.iter().all(|t| t.verdict.is_some()));
        assert!(state.reference_values(Role::GoodReference).len() > Plan::default().reference_boots as usize);
    }

    #[test]
    fn build_failures_are_skipped_and_can_leave_an_ambiguous_end() {
        let mut history = LinearHistory::new(16);
        let mut lab = ModelLab::new(16, 9, 0.2, noise(), 2);
        lab.broken = [8].into_iter().collect();
        let (state, outcome) = run(&mut lab, &mut history, Plan::default());
        assert_eq!(outcome, Outcome::Ambiguous { candidates: vec![history.name(8), history.name(9)] });
        let skipped = state.tests.iter().find(|t| t.commit == history.name(8)).unwrap();
        assert_eq!(skipped.verdict, Some(Verdict::Skip));
        assert!(skipped.reason.as_deref().unwrap().contains("build failed"), "{:?}", skipped.reason);
    }

    #[test]
    fn hangs_are_retried_once_then_skipped() {
        let mut history = LinearHistory::new(8);
        let mut lab = ModelLab::new(8, 6, 0.2, noise(), 3);
        lab.hanging = [4].into_iter().collect();
        let (state, outcome) = run(&mut lab, &mut history, Plan::default());
        assert_eq!(outcome, Outcome::Confirmed { culprit: history.name(6), parent: history.name(5) });
        let t = state.tests.iter().find(|t| t.commit == history.name(4)).unwrap();
        assert_eq!(t.verdict, Some(Verdict::Skip));
        assert_eq!(state.test_boots(t.number).count(), 2);
        assert!(t.reason.as_deref().unwrap().contains("hang"), "{:?}", t.reason);
    }

    #[test]
    fn ends_that_do_not_differ_stop_the_bisection() {
        let mut history = LinearHistory::new(50);
        let mut lab = ModelLab::new(50, 20, 0.0, noise(), 4);
        let (state, outcome) = run(&mut lab, &mut history, Plan::default());
        match outcome {
            Outcome::Failed { reason } => assert!(reason.contains("do not differ"), "{reason}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(state.reference_values(Role::GoodReference).len(), Plan::default().max_reference_boots as usize);
        assert!(state.tests.is_empty());
    }

    #[test]
    fn a_metric_too_noisy_for_the_cap_stops_instead_of_booting_all_night() {
        // A large regression the ends show clearly, but single boots so noisy
        // that two boots can never decide a step.
        let mut history = LinearHistory::new(200);
        let noise = NoiseModel { iteration_cv: 0.2, boot_cv: 0.1, iterations: 1 };
        let mut lab = ModelLab::new(200, 120, 0.3, noise, 8);
        let plan = Plan { max_boots: 2, min_boots: 1, reference_cap: 8, ..Plan::default() };
        let (state, outcome) = run(&mut lab, &mut history, plan);
        match outcome {
            Outcome::Failed { reason } => assert!(reason.contains("too noisy"), "{reason}"),
            other => panic!("{other:?}"),
        }
        assert!(state.boots.len() < 80, "{} boots", state.boots.len());
    }

    #[test]
    fn boot_mode_bisects_panics() {
        let mut history = LinearHistory::new(30);
        let mut lab = ModelLab::new(30, 11, 0.0, noise(), 5);
        lab.panic_from = Some(11);
        let plan = Plan { mode: Mode::Boot, ..Plan::default() };
        let (state, outcome) = run(&mut lab, &mut history, plan);
        assert_eq!(outcome, Outcome::Confirmed { culprit: history.name(11), parent: history.name(10) });
        assert!(state.boots.iter().all(|b| b.value.is_none()));
    }

    #[test]
    fn a_run_interrupted_anywhere_resumes_to_the_same_answer() {
        // Interrupt after every possible number of lab calls, resume from
        // the checkpointed state, and check the answer and the boots are
        // those of an uninterrupted run.
        let mut history = LinearHistory::new(40);
        let mut lab = ModelLab::new(40, 25, 0.15, noise(), 6);
        let (full, outcome) = run(&mut lab, &mut history, Plan::default());
        let calls = lab.calls;
        for stop in (1..calls).step_by(3) {
            let mut lab = ModelLab::new(40, 25, 0.15, noise(), 6);
            lab.fail_after = Some(stop);
            let mut state = BisectState::new(Plan::default(), None, &history.name(0), &history.name(40), 40).unwrap();
            let mut journal = MemoryJournal { snapshot: true, ..Default::default() };
            let e = Driver::new(&mut state, &mut lab, &mut history, &mut journal).run();
            assert!(e.is_err(), "stop {stop}");
            // Resume from what the last checkpoint wrote, as after a crash
            // (before the first checkpoint: the state the CLI saved at start).
            let mut state: BisectState = match journal.last.as_deref() {
                Some(json) => serde_json::from_str(json).unwrap(),
                None => BisectState::new(Plan::default(), None, &history.name(0), &history.name(40), 40).unwrap(),
            };
            lab.fail_after = None;
            let again = Driver::new(&mut state, &mut lab, &mut history, &mut journal).run().unwrap();
            assert_eq!(again, outcome, "stop {stop}");
            assert_eq!(state.boots.len(), full.boots.len(), "stop {stop}");
        }
    }
}
