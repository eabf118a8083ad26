//! The test of one commit: the sequential test's plan for it, its candidate
//! boots (with reference boots interleaved, and more boots of the ends when
//! they are known too imprecisely), the retry of a failed boot, and the
//! verdict. In boot mode, the boots until a panic or hang or enough clean
//! boots. It chooses no commit and ends no phase; it names only the driver's
//! record-keeping and wording, never the phases (`driver`) that call it.

use super::recording::{Driver, DriverError};
use super::wording::explain;
use crate::bisect::history::History;
use crate::bisect::journal::Journal;
use crate::bisect::lab::Lab;
use crate::bisect::sequential_test::{evaluate, Decision, End, Evaluation, ReferenceModel, TestPlan};
use crate::bisect::state::{now, short, BootEntry, BuildStatus, Mode, Role, StepPolicy, TestKind, TestRecord, Verdict};
use serde_json::json;

/// Reference boots in a row that may fail before the bisection stops: the
/// reference kernels booted before, so repeated failures mean the host (or
/// the lab) broke, and every later verdict would be worthless.
const MAX_REFERENCE_FAILURES_IN_A_ROW: usize = 3;

/// Candidate boots of one test that may fail before it is skipped: a hang
/// or panic is retried once.
const MAX_CANDIDATE_FAILURES: u32 = 2;

/// How far beyond its boundary a test must be able to get within its cap of
/// boots, given how well the ends are known, before it boots the candidate:
/// below this the ends get more boots first (see [`Driver::ends_too_imprecise`]).
const REACH: f64 = 1.25;

impl<L: Lab, H: History, J: Journal> Driver<'_, L, H, J> {
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
    pub(super) fn test_commit(
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
        // The cap counts every boot of the ends; the test weighs those it
        // compares with (the recent ones, with a window).
        let total = [Role::GoodReference, Role::BadReference].map(|r| self.state.reference_values(r).len());
        if total.iter().min().copied().unwrap_or(0) as f64 >= f64::from(p.reference_cap) {
            return false;
        }
        // The best a candidate can do at the cap: its mean exactly at one
        // end, against the variance of its difference from either (the
        // ends' boots and the drift term's lag included).
        let cap = plan.max_boots as usize;
        let var = model.difference_variance(End::Good, cap, plan.variance).max(model.difference_variance(
            End::Bad,
            cap,
            plan.variance,
        ));
        let delta = model.bad.mean - model.good.mean;
        let attainable = delta * delta / (2.0 * var);
        attainable < REACH * plan.upper().max(-plan.lower())
    }

    fn perf_test(&mut self, commit: &str, number: u32) -> Result<Verdict, DriverError> {
        loop {
            let Some(t) = self.state.tests.iter().find(|t| t.number == number).cloned() else {
                return Ok(Verdict::Skip);
            };
            let (model, values) = self.state.step_inputs(number)?;
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
                let role = if model.good.n <= model.bad.n { Role::GoodReference } else { Role::BadReference };
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
