//! Every change in the range, not only the first one found. A confirmed
//! culprit whose step carries significantly less (or more) than the whole
//! change between the ends leaves the rest of the change before its parent
//! or after it. Each side where the evidence puts it (the parent against
//! the good end, the culprit against the bad end; both sides when neither
//! test is significant) is bisected on its own, with its own ends, as a
//! new [`BisectState`] that starts with the builds already made. A side
//! whose ends do not differ holds no change of `--threshold`'s size. The
//! search stops when no side is left or [`Plan::max_changes`] changes are
//! confirmed.
//!
//! This module decides which sides to search and sums up what was found;
//! running a side's bisection is the caller's (the session with the real
//! lab, the simulation with its model), so both walk the same search.

use super::sequential_test::{compare_pair, PairComparison, SequentialTestError};
use super::state::{BisectState, Group, Mode, Outcome, Role, TestKind, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Errors of the search for more changes.
#[derive(Debug, thiserror::Error)]
pub enum ChangesError {
    /// A side's state could not be made.
    #[error("cannot start the search between {good} and {bad}: {source}")]
    Side {
        /// The side's good end.
        good: String,
        /// Its bad end.
        bad: String,
        /// The cause.
        #[source]
        source: SequentialTestError,
    },
}

/// A part of the range to bisect on its own: `good` is its good end,
/// `bad` its bad end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Side {
    /// Its good end.
    pub good: String,
    /// Its bad end.
    pub bad: String,
}

/// Why a side is searched: the test that put part of the change there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideEvidence {
    /// The side.
    pub side: Side,
    /// Two-sided p-value of "this side's ends have the same mean", from
    /// the boots the finished bisection made of them (none: not testable).
    pub p_value: Option<f64>,
}

/// The sides a finished bisection leaves to search. Both sides of a step
/// that measured between the ends ([`Outcome::Split`]). Else none unless it named
/// a culprit that measured bad again and whose parent measured good again,
/// and either the culprit was confirmed with a share of the ends' change
/// whose interval excludes 1, or the direct test of the two found no step
/// between them (both sit between the ends: the changes are elsewhere).
/// Then each side whose ends measured different (at `plan.ends_alpha`),
/// or both when neither did.
pub fn sides_left(state: &BisectState) -> Vec<SideEvidence> {
    if let Some(Outcome::Split { at, p_value, .. }) = &state.outcome {
        return [(&state.good, at), (at, &state.bad)]
            .into_iter()
            .map(|(good, bad)| SideEvidence {
                side: Side { good: good.clone(), bad: bad.clone() },
                p_value: Some(*p_value),
            })
            .collect();
    }
    let Some((culprit, parent)) = partial_culprit(state) else { return Vec::new() };
    let mut sides = Vec::new();
    if parent != state.good {
        let p = confirmation_test(state, &parent, TestKind::ConfirmParent)
            .and_then(|t| side_p(state, Group::Reference(Role::GoodReference), Group::Test(t)));
        sides.push(SideEvidence { side: Side { good: state.good.clone(), bad: parent.clone() }, p_value: p });
    }
    if culprit != state.bad {
        let p = confirmation_test(state, &culprit, TestKind::ConfirmCulprit)
            .and_then(|t| side_p(state, Group::Test(t), Group::Reference(Role::BadReference)));
        sides.push(SideEvidence { side: Side { good: culprit.clone(), bad: state.bad.clone() }, p_value: p });
    }
    let alpha = state.plan.ends_alpha;
    if sides.iter().any(|s| s.p_value.is_some_and(|p| p < alpha)) {
        sides.retain(|s| s.p_value.is_some_and(|p| p < alpha));
    }
    sides
}

/// The culprit and parent of a bisection that found only part of the
/// change (see [`sides_left`]).
fn partial_culprit(state: &BisectState) -> Option<(String, String)> {
    match &state.outcome {
        Some(Outcome::Confirmed { culprit, parent, step: Some(step) }) => {
            let (lo, hi) = step.share_interval;
            (hi < 1.0 || lo > 1.0).then(|| (culprit.clone(), parent.clone()))
        }
        Some(Outcome::Unconfirmed { culprit, .. }) if state.plan.mode == Mode::Perf => {
            // Its last confirmation measured it bad, then its parent good:
            // only the direct test can have refused it.
            let ct = state.tests.iter().rfind(|t| t.commit == *culprit && t.kind == TestKind::ConfirmCulprit)?;
            let pt = state.tests.iter().rfind(|t| t.kind == TestKind::ConfirmParent && t.number > ct.number)?;
            (ct.verdict == Some(Verdict::Bad) && pt.verdict == Some(Verdict::Good))
                .then(|| (culprit.clone(), pt.commit.clone()))
        }
        _ => None,
    }
}

/// The number of `commit`'s latest test of `kind`.
fn confirmation_test(state: &BisectState, commit: &str, kind: TestKind) -> Option<u32> {
    state.tests.iter().rfind(|t| t.commit == commit && t.kind == kind).map(|t| t.number)
}

/// `culprit` against `parent` (their confirmation boots in `state`, the
/// root or one of its searches) as a share of `root`'s change. Each side of
/// the ratio is taken as its own bisection compares it: the step with
/// `state`'s drift term (differences of moved values do not depend on the
/// time they are moved to), the ends with `root`'s; for the root itself this
/// is the step its confirmation measured.
fn share_of_root(
    root: &BisectState,
    state: &BisectState,
    parent: &str,
    culprit: &str,
    confidence: f64,
) -> Result<PairComparison, SequentialTestError> {
    let test = |commit: &str, kind: TestKind, which: &'static str| {
        confirmation_test(state, commit, kind).ok_or(SequentialTestError::NoBoots { which })
    };
    let (pt, ct) =
        (test(parent, TestKind::ConfirmParent, "earlier")?, test(culprit, TestKind::ConfirmCulprit, "later")?);
    let (own, e, l) = state.pair_inputs(Group::Test(pt), Group::Test(ct))?;
    let (mut model, _, _) =
        root.pair_inputs(Group::Reference(Role::GoodReference), Group::Reference(Role::BadReference))?;
    if let Some(d) = model.drift.as_mut() {
        d.pair = own.drift.map_or(0.0, |o| o.pair);
    }
    compare_pair(&model, root.plan.variance, &e, &l, confidence)
}

/// Two-sided p of "`earlier` and `later` have the same mean", with the
/// state's pooled σ.
fn side_p(state: &BisectState, earlier: Group, later: Group) -> Option<f64> {
    let step = pair_in(state, earlier, later, 0.5).ok()?;
    Some((2.0 * step.p_one_sided.min(1.0 - step.p_one_sided)).min(1.0))
}

/// `later` against `earlier` with `state`'s ends as the model (σ pooled
/// over every group of its boots, the drift term when the plan has one),
/// the share being of `state`'s change.
fn pair_in(
    state: &BisectState,
    earlier: Group,
    later: Group,
    confidence: f64,
) -> Result<PairComparison, SequentialTestError> {
    let (model, e, l) = state.pair_inputs(earlier, later)?;
    compare_pair(&model, state.plan.variance, &e, &l, confidence)
}

/// A new bisection of `side`, with `from`'s plan and lab, and the builds
/// `from` made (a kernel is built once).
pub fn side_state(from: &BisectState, side: &Side, range_commits: u64) -> Result<BisectState, ChangesError> {
    let mut s = BisectState::new(from.plan.clone(), from.lab.clone(), &side.good, &side.bad, range_commits)
        .map_err(|source| ChangesError::Side { good: side.good.clone(), bad: side.bad.clone(), source })?;
    s.original_head = from.original_head.clone();
    for (sha, c) in &from.commits {
        if c.build.is_some() {
            s.commits.insert(sha.clone(), c.clone());
        }
    }
    Ok(s)
}

/// One side searched: why, and its bisection (finished, unless the caller
/// stopped it).
#[derive(Debug, Clone)]
pub struct Searched {
    /// The side and the evidence that sent the search there.
    pub why: SideEvidence,
    /// Its bisection.
    pub state: BisectState,
}

/// Walks the search from the finished `root`: for each side left (oldest
/// first), `run` gets the state the side came from and the side, and
/// returns the side's bisection, run to its end (or loaded, when a resume
/// finds it done). Stops when no side is left, `root.plan.max_changes`
/// changes are confirmed, or 2·max_changes + 1 sides were searched.
pub fn search<E>(
    root: &BisectState,
    mut run: impl FnMut(&BisectState, &Side) -> Result<BisectState, E>,
) -> Result<Vec<Searched>, E> {
    let confirmed = |s: &BisectState| matches!(s.outcome, Some(Outcome::Confirmed { .. }));
    let mut found = usize::from(confirmed(root));
    let mut done: Vec<Searched> = Vec::new();
    // (side, index of the state it came from in `done`, None: the root)
    let mut queue: VecDeque<(SideEvidence, Option<usize>)> = sides_left(root).into_iter().map(|s| (s, None)).collect();
    // A slow drift can keep measuring commits between the ends: the sides
    // searched are capped too.
    let max_sides = 2 * root.plan.max_changes as usize + 1;
    while let Some((why, from)) = queue.pop_front() {
        if found >= root.plan.max_changes as usize || done.len() >= max_sides {
            break;
        }
        let parent = from.map_or(root, |i| &done[i].state);
        let state = run(parent, &why.side)?;
        found += usize::from(confirmed(&state));
        let at = done.len();
        queue.extend(sides_left(&state).into_iter().map(|s| (s, Some(at))));
        done.push(Searched { why, state });
    }
    Ok(done)
}

/// One change found, with its share of the whole range's change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FoundChange {
    /// The commit that makes the change.
    pub culprit: String,
    /// Its parent.
    pub parent: String,
    /// The change from the parent, in percent.
    pub change_pct: f64,
    /// One-sided p of the direct test against the parent.
    pub p_one_sided: f64,
    /// Its share of the change between the whole range's ends (ln scale).
    pub share: f64,
    /// The share's interval.
    pub share_interval: (f64, f64),
    /// The interval's confidence.
    pub confidence: f64,
}

/// Every confirmed change of `root` and its searches, in range order
/// (`position` orders commits; unknown ones last), each with its share of
/// `root`'s whole change: the culprit's and parent's confirmation boots
/// against `root`'s ends.
pub fn found_changes(
    root: &BisectState,
    searched: &[Searched],
    position: impl Fn(&str) -> Option<u64>,
) -> Vec<FoundChange> {
    let mut out = Vec::new();
    for state in std::iter::once(root).chain(searched.iter().map(|s| &s.state)) {
        let Some(Outcome::Confirmed { culprit, parent, step: Some(step) }) = &state.outcome else { continue };
        let whole = share_of_root(root, state, parent, culprit, step.confidence).ok();
        let (share, share_interval) = whole.map_or((f64::NAN, (f64::NAN, f64::NAN)), |w| (w.share, w.share_interval));
        out.push(FoundChange {
            culprit: culprit.clone(),
            parent: parent.clone(),
            change_pct: 100.0 * step.log_change.exp_m1(),
            p_one_sided: step.p_one_sided,
            share,
            share_interval,
            confidence: step.confidence,
        });
    }
    out.sort_by_key(|c| position(&c.culprit).unwrap_or(u64::MAX));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bisect::driver::Driver;
    use crate::bisect::history::History;
    use crate::bisect::journal::MemoryJournal;
    use crate::bisect::simulate::{LinearHistory, ModelLab, NoiseModel};
    use crate::bisect::state::Plan;

    /// Bisects 40 commits with a regression of `first` at `a` (and of
    /// `second` at `b`), then searches the sides: the root, the searches,
    /// and every change found.
    pub(crate) fn bisect(
        a: u64,
        first: f64,
        second: Option<(u64, f64)>,
        seed: u64,
    ) -> (BisectState, Vec<Searched>, Vec<FoundChange>) {
        let noise = NoiseModel { iteration_cv: 0.02, boot_cv: 0.005, iterations: 5 };
        let mut history = LinearHistory::new(40);
        let mut lab = ModelLab::new(40, a, first, noise, seed);
        lab.second = second;
        let mut journal = MemoryJournal::default();
        let mut root = BisectState::new(Plan::default(), None, &history.name(0), &history.name(40), 40).unwrap();
        Driver::new(&mut root, &mut lab, &mut history, &mut journal).run().unwrap();
        let searched = search(&root, |from, side| {
            let at = |c: &str| history.position(c).unwrap_or(0);
            let mut s = side_state(from, side, at(&side.bad) - at(&side.good)).unwrap();
            Driver::new(&mut s, &mut lab, &mut history, &mut journal).run().map(|_| s)
        })
        .unwrap();
        let found = found_changes(&root, &searched, |c| history.position(c));
        (root, searched, found)
    }

    #[test]
    fn two_changes_are_both_found_each_with_about_half_the_change() {
        let h = LinearHistory::new(40);
        for seed in [1, 2, 3] {
            let (root, searched, found) = bisect(10, 0.10, Some((30, 0.10)), seed);
            let names: Vec<&str> = found.iter().map(|c| c.culprit.as_str()).collect();
            assert_eq!(
                names,
                [h.name(10), h.name(30)],
                "seed {seed}: {:?}; searched {:?}",
                root.outcome,
                searched.iter().map(|s| (&s.why.side, &s.state.outcome)).collect::<Vec<_>>()
            );
            for c in &found {
                // ln(0.9) of ln(0.81): half the change each.
                let (lo, hi) = c.share_interval;
                assert!(lo < 0.5 && 0.5 < hi && hi < 1.0, "seed {seed}: {c:?}");
                // −10% each, measured with a step σ of about 1.4%.
                assert!((c.change_pct + 10.0).abs() < 4.0, "seed {seed}: {c:?}");
            }
            // Builds made before a side started are not made again.
            for s in &searched {
                assert!(s.state.commits.get(&s.state.good).is_some_and(|c| c.build.is_some()), "{:?}", s.why.side);
            }
        }
    }

    /// A finished state over c0..c10: the ends at 1000 and 810, the
    /// culprit c5 confirmed bad at `culprit` and its parent c4 good at
    /// `parent` (six boots each, ±0.5%), and `outcome`.
    fn crafted(parent: f64, culprit: f64, outcome: impl Fn(PairComparison) -> Outcome) -> BisectState {
        use crate::bisect::state::{now, BootEntry, TestRecord};
        let mut s = BisectState::new(Plan::default(), None, "c0", "c10", 10).unwrap();
        let mut boot = |commit: &str, role: Role, test: Option<u32>, level: f64| {
            for k in 0..6 {
                let value = level * (1.0 + 0.005 * [-1.0, 1.0, -0.5, 0.5, 0.0, 0.2][k]);
                s.boots.push(BootEntry::for_test(s.boots.len(), commit, role, test, Some(value)));
            }
        };
        boot("c0", Role::GoodReference, None, 1000.0);
        boot("c10", Role::BadReference, None, 810.0);
        boot("c5", Role::Candidate, Some(1), culprit);
        boot("c4", Role::Candidate, Some(2), parent);
        for (number, commit, kind, verdict) in
            [(1, "c5", TestKind::ConfirmCulprit, Verdict::Bad), (2, "c4", TestKind::ConfirmParent, Verdict::Good)]
        {
            s.tests.push(TestRecord {
                number,
                commit: commit.into(),
                kind,
                alpha: 0.0167,
                beta: 0.0167,
                remaining: None,
                bounds: None,
                verdict: Some(verdict),
                reason: None,
                evidence: None,
                boot_failures: 0,
                started_at: now(),
                finished_at: None,
            });
        }
        let step = pair_in(&s, Group::Test(2), Group::Test(1), 0.98).unwrap();
        s.outcome = Some(outcome(step));
        s
    }

    #[test]
    fn a_partial_culprit_sends_the_search_where_the_rest_of_the_change_measured() {
        let confirmed = |step| Outcome::Confirmed { culprit: "c5".into(), parent: "c4".into(), step: Some(step) };
        let sides = |s: &BisectState| sides_left(s).into_iter().map(|e| (e.side.good, e.side.bad)).collect::<Vec<_>>();
        let (before, after) = (("c0".to_string(), "c4".to_string()), ("c5".to_string(), "c10".to_string()));
        // The whole change at c5: nothing left.
        assert_eq!(sides(&crafted(1000.0, 810.0, confirmed)), []);
        // Half of it: the rest is after the culprit (it measured above the
        // bad end), not before (its parent measured like the good end).
        assert_eq!(sides(&crafted(1000.0, 900.0, confirmed)), std::slice::from_ref(&after));
        // ... or before it.
        assert_eq!(sides(&crafted(900.0, 810.0, confirmed)), std::slice::from_ref(&before));
        // ... or on both sides.
        assert_eq!(sides(&crafted(950.0, 860.0, confirmed)), [before.clone(), after.clone()]);
        // Culprit and parent alike, both between the ends: refused by the
        // direct test, and the changes are on both sides.
        let refused = |_| Outcome::Unconfirmed { culprit: "c5".into(), reason: "the direct test".into() };
        assert_eq!(sides(&crafted(905.0, 905.0, refused)), [before, after]);
        // Any other unconfirmed culprit (its parent measured bad): none.
        let mut s = crafted(905.0, 905.0, refused);
        s.tests[1].verdict = Some(Verdict::Bad);
        assert_eq!(sides(&s), []);
    }

    #[test]
    fn one_change_leaves_no_side_to_search_and_carries_the_whole_change() {
        for seed in [1, 2, 3] {
            let (root, searched, found) = bisect(17, 0.10, None, seed);
            assert!(searched.is_empty(), "seed {seed}: {:?} searched {}", root.outcome, searched.len());
            assert!(sides_left(&root).is_empty());
            let [c] = found.as_slice() else { panic!("seed {seed}: {found:?}") };
            let (lo, hi) = c.share_interval;
            assert!(lo < 1.0 && 1.0 < hi, "seed {seed}: {c:?}");
        }
    }
}
