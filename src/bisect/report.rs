//! The bisection's report, from its state: what was found and how sure it
//! is, every test with its verdict and evidence, and the cost. Rendered as
//! text, JSON, and a self-contained HTML page whose inline SVG plots show
//! the metric along the bisection path and the range narrowing step by
//! step. This module only reads the state; it never changes it.

use super::changes::{found_changes, FoundChange, Searched};
use super::driver::fmt_value;
use super::state::{short, BisectState, Mode, Outcome, Role, TestKind, Verdict};
use plotters::prelude::*;
use serde::Serialize;
use std::fmt::Write;

/// The `format` field of the JSON report.
pub const REPORT_FORMAT: &str = "bootbench-bisect-report";

/// Errors rendering a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The plot could not be drawn.
    #[error("cannot draw the {which} plot: {detail}")]
    Plot {
        /// Which plot.
        which: &'static str,
        /// What the plotting library said.
        detail: String,
    },
    /// The JSON could not be produced.
    #[error("cannot serialise the report")]
    Json(#[source] serde_json::Error),
}

/// A commit as the report names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommitSummary {
    /// Full object name.
    pub sha: String,
    /// Subject line.
    pub subject: String,
    /// Position in the range (0 = good end).
    pub position: Option<u64>,
}

/// One end's boots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReferenceSummary {
    /// Usable boots.
    pub boots: usize,
    /// Mean of the per-boot values.
    pub mean: f64,
    /// Coefficient of variation between boots, in %.
    pub cv_pct: f64,
}

/// One test in the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestSummary {
    /// Test number.
    pub number: u32,
    /// Step or confirmation.
    pub kind: TestKind,
    /// The commit.
    pub commit: CommitSummary,
    /// The verdict (`None`: still running).
    pub verdict: Option<Verdict>,
    /// Why.
    pub reason: Option<String>,
    /// Candidate boots.
    pub boots: usize,
    /// Candidate boots that failed.
    pub failed_boots: usize,
    /// Mean of the candidate's per-boot values.
    pub mean: Option<f64>,
    /// Its error rates (α = β).
    pub alpha: f64,
    /// Candidates left when it started.
    pub remaining: Option<u64>,
    /// Where the candidate measured, from the good end (0) to the bad end
    /// (1), when it measured between them: decided, but with evidence at
    /// the test's level against the end it was called like.
    pub between_ends: Option<f64>,
}

/// The report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Always [`REPORT_FORMAT`].
    pub format: &'static str,
    /// Perf or boot.
    pub mode: Mode,
    /// The metric (perf mode).
    pub metric: Option<String>,
    /// How it ended (`None`: still running).
    pub outcome: Option<Outcome>,
    /// The first bad commit, when one was named.
    pub culprit: Option<CommitSummary>,
    /// The good end.
    pub good: CommitSummary,
    /// The bad end.
    pub bad: CommitSummary,
    /// Candidate commits in the range.
    pub range_commits: u64,
    /// The promised highest rate of wrong culprits.
    pub wrong_culprit_rate: f64,
    /// Tests the budget planned for.
    pub planned_tests: u32,
    /// α = β of each planned test (the first ones' share of the budget).
    pub planned_alpha: f64,
    /// Whether every test drew on the budget (no `--step-rate`).
    pub budgeted: bool,
    /// The good end's boots.
    pub good_reference: Option<ReferenceSummary>,
    /// The bad end's boots.
    pub bad_reference: Option<ReferenceSummary>,
    /// bad/good − 1, in %.
    pub change_pct: Option<f64>,
    /// p-value of the ends' difference.
    pub ends_p_value: Option<f64>,
    /// The host's drift as the bisection took it out (none without the
    /// drift term, or before it could be fitted).
    pub drift: Option<DriftSummary>,
    /// Every test.
    pub tests: Vec<TestSummary>,
    /// Boots in all.
    pub boots: usize,
    /// Candidate boots.
    pub candidate_boots: usize,
    /// Reference boots.
    pub reference_boots: usize,
    /// Boots that failed.
    pub failed_boots: usize,
    /// Builds in all.
    pub builds: usize,
    /// Builds that failed or gave an unsuitable kernel.
    pub unusable_builds: usize,
    /// Host time spent building, in seconds.
    pub build_seconds: f64,
    /// Host time spent booting, in seconds.
    pub boot_seconds: f64,
    /// When the bisection started.
    pub started_at: String,
    /// When the state was last written.
    pub updated_at: String,
    /// Every change confirmed in the range, in range order: the first
    /// bisection's culprit and those the searches of its sides confirmed
    /// (empty until [`with_searches`] adds them).
    pub changes: Vec<ChangeSummary>,
    /// The sides searched for the rest of the change, in the order run.
    pub searches: Vec<SearchSummary>,
}

/// The host's drift over the bisection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftSummary {
    /// The slope taken out (with its prior), in % per boot.
    pub pct_per_boot: f64,
    /// The least-squares slope alone, in % per boot.
    pub measured_pct_per_boot: f64,
    /// Two-sided p of "the host did not drift" (the least-squares slope).
    pub p_steady: f64,
    /// The prior's standard deviation, in % per boot.
    pub scale_pct: f64,
}

/// One change confirmed in the range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangeSummary {
    /// The commit that makes it.
    pub commit: CommitSummary,
    /// The change against its parent and its share of the whole.
    #[serde(flatten)]
    pub change: FoundChange,
}

/// One side searched for the rest of the change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchSummary {
    /// Its good end.
    pub good: String,
    /// Its bad end.
    pub bad: String,
    /// Two-sided p of "this side's ends measured alike" in the bisection
    /// it came from (what sent the search there; none: not testable).
    pub evidence_p: Option<f64>,
    /// How its bisection ended (`None`: still running).
    pub outcome: Option<Outcome>,
    /// bad/good − 1 of its ends, in %.
    pub change_pct: Option<f64>,
    /// Boots it took.
    pub boots: usize,
}

fn commit(state: &BisectState, sha: &str) -> CommitSummary {
    let c = state.commits.get(sha);
    CommitSummary {
        sha: sha.to_string(),
        subject: c.map(|c| c.subject.clone()).unwrap_or_default(),
        position: c.and_then(|c| c.position),
    }
}

fn reference(values: &[f64]) -> Option<ReferenceSummary> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let sd = if values.len() > 1 {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        f64::NAN
    };
    Some(ReferenceSummary { boots: values.len(), mean, cv_pct: 100.0 * sd / mean })
}

/// The host's drift in words, for the text and HTML reports.
fn drift_line(d: &DriftSummary) -> String {
    format!(
        "{:+.4}% per boot taken out (measured {:+.4}% per boot, p = {:.2e} for a steady host; prior σ {:.3}% per boot)",
        d.pct_per_boot, d.measured_pct_per_boot, d.p_steady, d.scale_pct
    )
}

/// Builds the report of `state`.
pub fn build(state: &BisectState) -> Report {
    let culprit = match &state.outcome {
        Some(Outcome::Confirmed { culprit, .. } | Outcome::Unconfirmed { culprit, .. }) => Some(commit(state, culprit)),
        _ => None,
    };
    let tests = state
        .tests
        .iter()
        .map(|t| {
            let values = state.test_values(t.number);
            TestSummary {
                number: t.number,
                kind: t.kind,
                commit: commit(state, &t.commit),
                verdict: t.verdict,
                reason: t.reason.clone(),
                boots: state.test_boots(t.number).count(),
                failed_boots: state.test_boots(t.number).filter(|b| b.classification != "ok").count(),
                mean: (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64),
                alpha: t.alpha,
                remaining: t.remaining,
                between_ends: t.evidence.filter(|e| e.between_ends()).and_then(|e| e.position),
            }
        })
        .collect();
    let builds: Vec<_> = state.commits.values().filter_map(|c| c.build.as_ref()).collect();
    Report {
        format: REPORT_FORMAT,
        mode: state.plan.mode,
        metric: (state.plan.mode == Mode::Perf).then(|| state.plan.metric.clone()),
        outcome: state.outcome.clone(),
        culprit,
        good: commit(state, &state.good),
        bad: commit(state, &state.bad),
        range_commits: state.range_commits,
        wrong_culprit_rate: state.plan.wrong_culprit_rate,
        planned_tests: state.budget.planned_tests,
        planned_alpha: state.budget.per_test(1),
        budgeted: state.plan.step_rate.is_none(),
        good_reference: reference(&state.reference_values(Role::GoodReference)),
        bad_reference: reference(&state.reference_values(Role::BadReference)),
        change_pct: state.ends.map(|e| 100.0 * (e.ratio - 1.0)),
        ends_p_value: state.ends.map(|e| e.p_value),
        drift: state.drift_fit().map(|f| DriftSummary {
            pct_per_boot: 100.0 * f.slope.exp_m1(),
            measured_pct_per_boot: 100.0 * f.least_squares_slope().exp_m1(),
            p_steady: f.p_steady(),
            scale_pct: 100.0 * state.plan.drift_scale,
        }),
        tests,
        boots: state.boots.len(),
        candidate_boots: state.candidate_boots(),
        reference_boots: state.boots.len() - state.candidate_boots(),
        failed_boots: state.boots.iter().filter(|b| b.classification != "ok").count(),
        builds: builds.len(),
        unusable_builds: builds.iter().filter(|b| b.status != super::state::BuildStatus::Built).count(),
        build_seconds: builds.iter().map(|b| b.seconds).sum(),
        boot_seconds: state.boots.iter().map(|b| b.wall_s).sum(),
        started_at: state.started_at.clone(),
        updated_at: state.updated_at.clone(),
        changes: Vec::new(),
        searches: Vec::new(),
    }
}

/// Adds the search for the range's other changes to `r`, the report of
/// `root`: every confirmed change with its share of `root`'s whole change,
/// in range order (`position`: a commit's place in `root`'s range), and
/// each side searched.
pub fn with_searches(
    r: &mut Report,
    root: &BisectState,
    searched: &[Searched],
    position: impl Fn(&str) -> Option<u64>,
) {
    let all: Vec<&BisectState> = std::iter::once(root).chain(searched.iter().map(|s| &s.state)).collect();
    r.changes = found_changes(root, searched, &position)
        .into_iter()
        .map(|c| {
            let known = all.iter().find(|s| s.commits.contains_key(&c.culprit)).copied().unwrap_or(root);
            // A side numbers commits from its own good end: the range's
            // position is the root's.
            let summary = CommitSummary { position: position(&c.culprit), ..commit(known, &c.culprit) };
            ChangeSummary { commit: summary, change: c }
        })
        .collect();
    r.searches = searched
        .iter()
        .map(|s| SearchSummary {
            good: s.why.side.good.clone(),
            bad: s.why.side.bad.clone(),
            evidence_p: s.why.p_value,
            outcome: s.state.outcome.clone(),
            change_pct: s.state.ends.map(|e| 100.0 * (e.ratio - 1.0)),
            boots: s.state.boots.len(),
        })
        .collect();
}

fn kind_name(k: TestKind) -> &'static str {
    match k {
        TestKind::Step => "step",
        TestKind::ConfirmCulprit => "confirm",
        TestKind::ConfirmParent => "parent",
        TestKind::Run => "run",
    }
}

fn duration(s: f64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(s.max(0.0).round() as u64)).to_string()
}

/// The outcome in one line.
pub fn headline(r: &Report) -> String {
    let name = |c: &str| {
        let subject = r.tests.iter().find(|t| t.commit.sha == c).map(|t| t.commit.subject.clone());
        let subject = subject.or_else(|| r.culprit.as_ref().filter(|x| x.sha == c).map(|x| x.subject.clone()));
        match subject.filter(|s| !s.is_empty()) {
            Some(s) => format!("{c} (\"{s}\")"),
            None => c.to_string(),
        }
    };
    match &r.outcome {
        None => "still running".into(),
        Some(Outcome::Confirmed { culprit, parent, step }) => {
            let direct = match step {
                Some(s) => {
                    let (lo, hi) = s.share_interval;
                    let part = if !r.searches.is_empty() {
                        "; it carries only part of the ends' change: the range's other changes are listed below"
                            .to_string()
                    } else if hi < 1.0 {
                        format!(
                            "; it carries only part of the ends' change, so the range holds another change: bisect from {} to the bad end, or from the good end to {}, again",
                            short(culprit),
                            short(parent)
                        )
                    } else {
                        String::new()
                    };
                    format!(
                        ", and it is {:+.2}% against its parent directly (one-sided p = {:.2e}): {:.0}% of the ends' change ({:.0}% interval {:.0}% to {:.0}%){part}",
                        100.0 * s.log_change.exp_m1(),
                        s.p_one_sided,
                        100.0 * s.share,
                        100.0 * s.confidence,
                        100.0 * lo,
                        100.0 * hi
                    )
                }
                None => String::new(),
            };
            format!(
                "first bad commit: {}; confirmed: it measured bad again and its parent {} good{direct}",
                name(culprit),
                short(parent)
            )
        }
        Some(Outcome::Unconfirmed { culprit, reason }) => {
            format!("first bad commit: {}; NOT confirmed: {reason}", name(culprit))
        }
        Some(Outcome::Split { at, position, p_value }) => format!(
            "more than one change: {} measured between the ends ({:.0}% of the way from good to bad, p = {p_value:.2e}), so each side of it was bisected on its own{}",
            name(at),
            100.0 * position,
            if r.searches.is_empty() { " (not yet)" } else { ": the changes are listed below" }
        ),
        Some(Outcome::Ambiguous { candidates }) => format!(
            "no single culprit: only skipped commits are left; the first bad commit is one of {}",
            candidates.iter().map(|c| short(c)).collect::<Vec<_>>().join(", ")
        ),
        Some(Outcome::Failed { reason }) => format!("bisection failed: {reason}"),
    }
}

/// The error rates as they were run: each kind of test's α = β (the
/// smallest and largest, when they differ), and the bound on wrong culprits
/// only where one applies: a confirmed culprit of a bisection whose tests
/// all drew on the budget.
pub fn error_rates(r: &Report) -> String {
    let rates = |kinds: &[TestKind]| {
        let a: Vec<f64> = r.tests.iter().filter(|t| kinds.contains(&t.kind)).map(|t| t.alpha).collect();
        let lo = a.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        match a.len() {
            0 => None,
            _ if lo == hi => Some(format!("{} at α = β = {lo:.2e}", a.len())),
            _ => Some(format!("{} at α = β = {lo:.2e} to {hi:.2e}", a.len())),
        }
    };
    let mut run = Vec::new();
    for (what, kinds) in [
        ("steps", &[TestKind::Step][..]),
        ("confirmations", &[TestKind::ConfirmCulprit, TestKind::ConfirmParent][..]),
        ("single tests", &[TestKind::Run][..]),
    ] {
        if let Some(s) = rates(kinds) {
            run.push(format!("{what} {s}"));
        }
    }
    let run = if run.is_empty() { "no test ran yet".to_string() } else { run.join(", ") };
    let bound = match &r.outcome {
        Some(Outcome::Confirmed { step: None, .. }) if !r.budgeted => format!(
            "at most {:.1}% wrong culprits rests on the confirmation alone (the steps ran at --step-rate): a commit is confirmed only when it measures bad and its parent good",
            100.0 * r.wrong_culprit_rate
        ),
        Some(Outcome::Confirmed { .. }) if r.budgeted => {
            format!("at most {:.1}% wrong culprits (the union of the tests' α)", 100.0 * r.wrong_culprit_rate)
        }
        Some(Outcome::Confirmed { .. }) => format!(
            "at most {:.1}% wrong culprits rests on the confirmation alone (the steps ran at --step-rate): a commit is confirmed only when it measures bad, its parent good, and it is worse than its parent in a direct test",
            100.0 * r.wrong_culprit_rate
        ),
        Some(Outcome::Split { .. } | Outcome::Unconfirmed { .. }) if !r.changes.is_empty() => format!(
            "each change listed was confirmed as a first culprit is, at most {:.1}% wrong each (at most {:.1}% that any of the {} is)",
            100.0 * r.wrong_culprit_rate,
            100.0 * r.wrong_culprit_rate * r.changes.len() as f64,
            r.changes.len()
        ),
        Some(_) => "no bound on wrong culprits applies: no culprit was confirmed".to_string(),
        None => format!("budget: at most {:.1}% wrong culprits if a culprit is confirmed", 100.0 * r.wrong_culprit_rate),
    };
    let others = match (&r.outcome, r.changes.len()) {
        (Some(Outcome::Confirmed { .. }), n) if n > 1 => format!(
            "; each other change listed has the same bound of its own (at most {:.1}% that any of the {n} is wrong)",
            100.0 * r.wrong_culprit_rate * n as f64
        ),
        _ => String::new(),
    };
    format!("error rates as run: {run}; {bound}{others}")
}

/// The text report.
pub fn render_text(r: &Report) -> String {
    let mut out = String::new();
    let what = match &r.metric {
        Some(m) => format!("{m} (perf mode)"),
        None => "boot failures (boot mode)".into(),
    };
    let _ = writeln!(
        out,
        "bootbench bisect: {what}; {} commits from good {} to bad {}",
        r.range_commits,
        short(&r.good.sha),
        short(&r.bad.sha)
    );
    let _ = writeln!(out, "{}", headline(r));
    if let (Some(g), Some(b)) = (&r.good_reference, &r.bad_reference) {
        let _ = writeln!(
            out,
            "ends: good {} ({} boots, CV {:.2}%), bad {} ({} boots, CV {:.2}%){}",
            fmt_value(g.mean),
            g.boots,
            g.cv_pct,
            fmt_value(b.mean),
            b.boots,
            b.cv_pct,
            match (r.change_pct, r.ends_p_value) {
                (Some(c), Some(p)) => format!(": {c:+.2}%, p = {p:.2e}"),
                _ => String::new(),
            }
        );
    }
    if let Some(d) = &r.drift {
        let _ = writeln!(out, "host drift: {}", drift_line(d));
    }
    let _ = writeln!(
        out,
        "cost: {} boots ({} of candidates, {} of the ends, {} failed), {} builds ({} unusable); {} building, {} booting",
        r.boots,
        r.candidate_boots,
        r.reference_boots,
        r.failed_boots,
        r.builds,
        r.unusable_builds,
        duration(r.build_seconds),
        duration(r.boot_seconds)
    );
    let _ = writeln!(out, "{}", error_rates(r));
    if !r.searches.is_empty() {
        let _ = writeln!(
            out,
            "changes in the range: {} (each against its parent, and its share of the ends' whole change):",
            r.changes.len()
        );
        for c in &r.changes {
            let _ = writeln!(out, "  {}", change_line(c));
        }
        let _ = writeln!(out, "{}", searched_line(r));
        for s in &r.searches {
            let _ = writeln!(out, "  {}", search_line(s));
        }
    }
    for t in r.tests.iter().filter(|t| t.between_ends.is_some()) {
        let _ = writeln!(
            out,
            "between the ends: test {} ({}) measured {:.0}% of the way from good to bad, with evidence against the end it was called like: the range may hold more than one change",
            t.number,
            short(&t.commit.sha),
            100.0 * t.between_ends.unwrap_or(f64::NAN)
        );
    }
    let _ = writeln!(
        out,
        "{:>3} {:<7} {:<12} {:>7} {:<7} {:>5} {:>10}  reason",
        "#", "kind", "commit", "pos", "verdict", "boots", "mean"
    );
    for t in &r.tests {
        let _ = writeln!(
            out,
            "{:>3} {:<7} {:<12} {:>7} {:<7} {:>5} {:>10}  {}",
            t.number,
            kind_name(t.kind),
            short(&t.commit.sha),
            t.commit.position.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            t.verdict.map(|v| v.to_string()).unwrap_or_else(|| "running".into()),
            if t.failed_boots > 0 { format!("{}/{}", t.boots - t.failed_boots, t.boots) } else { t.boots.to_string() },
            t.mean.map(fmt_value).unwrap_or_else(|| "-".into()),
            t.reason.as_deref().unwrap_or("")
        );
    }
    out
}

/// The JSON report.
pub fn render_json(r: &Report) -> Result<String, ReportError> {
    serde_json::to_string_pretty(r).map_err(ReportError::Json)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn verdict_color(v: Option<Verdict>) -> RGBColor {
    match v {
        Some(Verdict::Good) => RGBColor(0x1a, 0x8f, 0x3c),
        Some(Verdict::Bad) => RGBColor(0xc6, 0x28, 0x28),
        Some(Verdict::Skip) => RGBColor(0x88, 0x88, 0x88),
        None => RGBColor(0x1f, 0x5f, 0xbf),
    }
}

fn plot_err(which: &'static str) -> impl Fn(String) -> ReportError {
    move |detail| ReportError::Plot { which, detail }
}

/// The metric along the bisection path: each test's candidate boots (dots)
/// and mean, against the two ends' means and spread.
pub fn metric_plot(state: &BisectState) -> Result<String, ReportError> {
    let err = plot_err("metric");
    let good = state.reference_values(Role::GoodReference);
    let bad = state.reference_values(Role::BadReference);
    let mut all: Vec<f64> = good.iter().chain(&bad).copied().collect();
    all.extend(state.boots.iter().filter(|b| b.role == Role::Candidate).filter_map(|b| b.value));
    let (lo, hi) = all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(*v), b.max(*v)));
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 1e-3).max(1e-9);
    let n = state.tests.len().max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{} along the bisection path", state.plan.metric), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0.5f64..n + 0.5, (lo - pad)..(hi + pad))
            .map_err(|e| err(e.to_string()))?;
        let fmt_x = |x: &f64| if (x - x.round()).abs() < 1e-9 { format!("{}", x.round()) } else { String::new() };
        let fmt_y = |y: &f64| fmt_value(*y);
        chart
            .configure_mesh()
            .x_desc("test (bisection step or confirmation)")
            .y_desc(state.plan.metric.clone())
            .x_labels(state.tests.len().clamp(1, 30))
            .x_label_formatter(&fmt_x)
            .y_label_formatter(&fmt_y)
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        for (values, color, label) in
            [(&good, RGBColor(0x1a, 0x8f, 0x3c), "good end"), (&bad, RGBColor(0xc6, 0x28, 0x28), "bad end")]
        {
            if let Some(r) = reference(values) {
                let sd = r.mean * r.cv_pct / 100.0;
                if sd.is_finite() {
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [(0.5, r.mean - sd), (n + 0.5, r.mean + sd)],
                            color.mix(0.12).filled(),
                        )))
                        .map_err(|e| err(e.to_string()))?;
                }
                chart
                    .draw_series(LineSeries::new([(0.5, r.mean), (n + 0.5, r.mean)], color.stroke_width(2)))
                    .map_err(|e| err(e.to_string()))?
                    .label(format!("{label}: {} ({} boots)", fmt_value(r.mean), r.boots))
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
            }
        }
        for t in &state.tests {
            let color = verdict_color(t.verdict);
            let values = state.test_values(t.number);
            let k = values.len().max(1) as f64;
            let x = f64::from(t.number);
            chart
                .draw_series(values.iter().enumerate().map(|(i, v)| {
                    let dx = if k > 1.0 { (i as f64 / (k - 1.0) - 0.5) * 0.3 } else { 0.0 };
                    Circle::new((x + dx, *v), 3, color.filled())
                }))
                .map_err(|e| err(e.to_string()))?;
            if !values.is_empty() {
                let m = values.iter().sum::<f64>() / k;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        [(x - 0.25, m), (x + 0.25, m)],
                        color.stroke_width(3),
                    )))
                    .map_err(|e| err(e.to_string()))?;
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// The range narrowing: per test, the span between the good and bad bounds
/// (by position in the range) and the commit tested.
pub fn range_plot(state: &BisectState) -> Result<String, ReportError> {
    let err = plot_err("range");
    let n = state.tests.len().max(1) as f64;
    let top = state.range_commits.max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption("the range narrowing (position in the range, 0 = good end)", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0.5f64..n + 0.5, 0f64..top)
            .map_err(|e| err(e.to_string()))?;
        let fmt_x = |x: &f64| if (x - x.round()).abs() < 1e-9 { format!("{}", x.round()) } else { String::new() };
        chart
            .configure_mesh()
            .x_desc("test")
            .y_desc("commit position")
            .x_labels(state.tests.len().clamp(1, 30))
            .x_label_formatter(&fmt_x)
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        for t in &state.tests {
            let x = f64::from(t.number);
            if let Some((g, b)) = t.bounds {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        [(x, g as f64), (x, b as f64)],
                        RGBColor(0x99, 0x99, 0xbb).stroke_width(6),
                    )))
                    .map_err(|e| err(e.to_string()))?;
            }
            if let Some(p) = state.commits.get(&t.commit).and_then(|c| c.position) {
                chart
                    .draw_series(std::iter::once(Circle::new((x, p as f64), 5, verdict_color(t.verdict).filled())))
                    .map_err(|e| err(e.to_string()))?;
            }
        }
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// One change found in the range, as the reports print it.
fn change_line(ChangeSummary { commit, change: c }: &ChangeSummary) -> String {
    let (lo, hi) = c.share_interval;
    let subject = if commit.subject.is_empty() { String::new() } else { format!(" \"{}\"", commit.subject) };
    format!(
        "{}{subject}: {:+.2}% against its parent {} (one-sided p = {:.2e}); {:.0}% of the change ({:.0}% interval {:.0}% to {:.0}%)",
        short(&commit.sha),
        c.change_pct,
        short(&c.parent),
        c.p_one_sided,
        100.0 * c.share,
        100.0 * c.confidence,
        100.0 * lo,
        100.0 * hi
    )
}

/// The heading of the sides searched.
fn searched_line(r: &Report) -> String {
    let boots: usize = r.searches.iter().map(|s| s.boots).sum();
    format!("searched for the rest of the change: {} side(s), {boots} boots more", r.searches.len())
}

/// One side searched, as the reports print it.
fn search_line(s: &SearchSummary) -> String {
    let found = match &s.outcome {
        Some(Outcome::Confirmed { culprit, .. }) => format!("found {}", short(culprit)),
        Some(Outcome::Unconfirmed { culprit, reason }) => {
            format!("named {} but did not confirm it: {reason}", short(culprit))
        }
        Some(Outcome::Split { at, .. }) => format!("split again at {}", short(at)),
        Some(Outcome::Ambiguous { candidates }) => {
            format!("no single commit: one of {}", candidates.iter().map(|c| short(c)).collect::<Vec<_>>().join(", "))
        }
        Some(Outcome::Failed { reason }) => format!("nothing found: {reason}"),
        None => "still running".into(),
    };
    format!(
        "{}..{} ({} boots{}): {found}",
        short(&s.good),
        short(&s.bad),
        s.boots,
        s.evidence_p.map(|p| format!(", sent there at p = {p:.2e}")).unwrap_or_default()
    )
}

/// The HTML report of `state`, whose report (with the search for its
/// other changes, if any) is `r`: one self-contained page (inline CSS and
/// SVG, nothing fetched).
pub fn render_html(state: &BisectState, r: &Report) -> Result<String, ReportError> {
    let mut out = String::new();
    let title = match &r.metric {
        Some(m) => format!("bootbench bisect: {m}"),
        None => "bootbench bisect: boot failures".into(),
    };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>\
         body{{font-family:sans-serif;margin:2em;max-width:1100px}} table{{border-collapse:collapse;font-size:90%}}\
         td,th{{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}} .good{{color:#1a8f3c}}\
         .bad{{color:#c62828}} .skip{{color:#888}} .headline{{font-size:120%;font-weight:bold}} code{{font-size:95%}}\
         </style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let _ = writeln!(out, "<p class=\"headline\" id=\"outcome\">{}</p>", escape(&headline(r)));
    let _ = writeln!(
        out,
        "<p>{} commits from good <code>{}</code> to bad <code>{}</code>. Error budget: at most {:.1}% wrong culprits over {} planned tests.</p>",
        r.range_commits,
        escape(short(&r.good.sha)),
        escape(short(&r.bad.sha)),
        100.0 * r.wrong_culprit_rate,
        r.planned_tests
    );
    if let (Some(g), Some(b)) = (&r.good_reference, &r.bad_reference) {
        let _ = writeln!(
            out,
            "<p>Ends: good {} ({} boots, CV {:.2}%), bad {} ({} boots, CV {:.2}%){}.</p>",
            fmt_value(g.mean),
            g.boots,
            g.cv_pct,
            fmt_value(b.mean),
            b.boots,
            b.cv_pct,
            r.change_pct.map(|c| format!(": {c:+.2}%")).unwrap_or_default()
        );
    }
    if let Some(d) = &r.drift {
        let _ = writeln!(out, "<p id=\"drift\">Host drift: {}.</p>", escape(&drift_line(d)));
    }
    let _ = writeln!(
        out,
        "<p>Cost: {} boots ({} of candidates, {} of the ends, {} failed), {} builds ({} unusable).</p>",
        r.boots, r.candidate_boots, r.reference_boots, r.failed_boots, r.builds, r.unusable_builds
    );
    if !r.searches.is_empty() {
        let _ = writeln!(
            out,
            "<h2>Changes in the range: {}</h2>\n<p>Each against its parent, and its share of the ends' whole change.</p>\n<ul id=\"changes\">",
            r.changes.len()
        );
        for c in &r.changes {
            let _ = writeln!(out, "<li>{}</li>", escape(&change_line(c)));
        }
        let _ = writeln!(out, "</ul>\n<p>{}</p>\n<ul id=\"searches\">", escape(&searched_line(r)));
        for s in &r.searches {
            let _ = writeln!(out, "<li>{}</li>", escape(&search_line(s)));
        }
        out.push_str("</ul>\n");
    }
    if state.plan.mode == Mode::Perf {
        let _ = writeln!(out, "<figure id=\"metric-plot\">{}</figure>", metric_plot(state)?);
    }
    let _ = writeln!(out, "<figure id=\"range-plot\">{}</figure>", range_plot(state)?);
    let _ = writeln!(
        out,
        "<table id=\"tests\"><tr><th>#</th><th>kind</th><th>commit</th><th>subject</th><th>position</th><th>verdict</th><th>boots</th><th>mean</th><th>evidence</th></tr>"
    );
    for t in &r.tests {
        let v = t.verdict.map(|v| v.to_string()).unwrap_or_else(|| "running".into());
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            t.number,
            kind_name(t.kind),
            escape(short(&t.commit.sha)),
            escape(&t.commit.subject),
            t.commit.position.map(|p| p.to_string()).unwrap_or_default(),
            v,
            v,
            t.boots,
            t.mean.map(fmt_value).unwrap_or_default(),
            escape(t.reason.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</table>\n</body></html>\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::driver::Driver;
    use crate::bisect::journal::MemoryJournal;
    use crate::bisect::simulate::{LinearHistory, ModelLab, NoiseModel};
    use crate::bisect::state::Plan;

    fn finished() -> BisectState {
        let mut history = LinearHistory::new(64);
        let noise = NoiseModel { iteration_cv: 0.05, boot_cv: 0.01, iterations: 5 };
        // Seed 10: a bisection that confirmed its culprit (27 of seeds 1-29
        // did with the default plan; 5 and 9 left it unconfirmed, the
        // direct test short of its level after two boots each).
        let mut lab = ModelLab::new(64, 21, 0.1, noise, 10);
        let mut state = BisectState::new(Plan::default(), None, &history.name(0), &history.name(64), 64).unwrap();
        let mut journal = MemoryJournal::default();
        Driver::new(&mut state, &mut lab, &mut history, &mut journal).run().unwrap();
        state
    }

    #[test]
    fn text_and_json_name_the_culprit_and_every_test() {
        let state = finished();
        let r = build(&state);
        assert_eq!(r.culprit.as_ref().unwrap().sha, "c0000021");
        let text = render_text(&r);
        assert!(text.contains("first bad commit: c0000021"), "{text}");
        assert!(text.contains("confirmed"), "{text}");
        assert_eq!(
            text.lines().filter(|l| l.contains(" step ")).count(),
            r.tests.iter().filter(|t| t.kind == TestKind::Step).count()
        );
        let json: serde_json::Value = serde_json::from_str(&render_json(&r).unwrap()).unwrap();
        assert_eq!(json["format"], REPORT_FORMAT);
        assert_eq!(json["outcome"]["outcome"], "confirmed");
        assert_eq!(json["tests"].as_array().unwrap().len(), state.tests.len());
        assert_eq!(json["boots"], state.boots.len());
    }

    #[test]
    fn the_error_rates_are_those_run_and_a_bound_only_where_one_applies() {
        let state = finished();
        let mut r = build(&state);
        let text = render_text(&r);
        // The default plan runs steps at --step-rate 3% and each
        // confirmation round at 5% / (1 + 2 revisions).
        assert!(text.contains("steps") && text.contains("at α = β = 3.00e-2"), "{text}");
        assert!(text.contains("confirmations 2 at α = β = 1.67e-2"), "{text}");
        assert!(!text.contains("tests planned, α = β"), "the union budget's α is not what ran: {text}");
        assert!(text.contains("rests on the confirmation alone"), "{text}");
        // The direct test's figures are in the headline.
        assert!(text.contains("against its parent directly (one-sided p = "), "{text}");
        r.outcome = Some(Outcome::Unconfirmed { culprit: "c0000021".into(), reason: "x".into() });
        assert!(error_rates(&r).ends_with("no bound on wrong culprits applies: no culprit was confirmed"));
        r.outcome = Some(Outcome::Ambiguous { candidates: vec!["c1".into()] });
        assert!(error_rates(&r).ends_with("no bound on wrong culprits applies: no culprit was confirmed"));
    }

    #[test]
    fn a_split_range_reports_every_change_with_its_share_and_each_side_searched() {
        let (root, searched, _) = crate::bisect::changes::tests::bisect(10, 0.10, Some((30, 0.10)), 1);
        assert!(matches!(root.outcome, Some(Outcome::Split { .. })), "{:?}", root.outcome);
        let mut r = build(&root);
        use crate::bisect::history::History;
        let h = crate::bisect::simulate::LinearHistory::new(40);
        // Positions and order are the caller's (the root's range): counted
        // from the bad end here, the later change comes first.
        let mut backwards = r.clone();
        with_searches(&mut backwards, &root, &searched, |c| h.position(c).map(|p| 100 - p));
        let listed: Vec<(&str, Option<u64>)> =
            backwards.changes.iter().map(|c| (c.commit.sha.as_str(), c.commit.position)).collect();
        assert_eq!(listed, [("c0000030", Some(70)), ("c0000010", Some(90))]);
        with_searches(&mut r, &root, &searched, |c| h.position(c));
        let text = render_text(&r);
        assert!(text.contains("more than one change: c0000020"), "{text}");
        assert!(text.contains("changes in the range: 2"), "{text}");
        let line = |c: &str| text.lines().find(|l| l.starts_with(&format!("  {c}"))).unwrap_or_default().to_string();
        for c in ["c0000010", "c0000030"] {
            assert!(line(c).contains("against its parent") && line(c).contains("% of the change"), "{c}: {text}");
        }
        assert!(text.contains(&format!("searched for the rest of the change: {} side(s)", searched.len())), "{text}");
        assert!(text.contains("c0000000..c0000020") && text.contains("c0000020..c0000040"), "{text}");
        assert!(error_rates(&r).contains("each change listed was confirmed"), "{}", error_rates(&r));
        let json: serde_json::Value = serde_json::from_str(&render_json(&r).unwrap()).unwrap();
        assert_eq!(json["outcome"]["outcome"], "split");
        assert_eq!(json["changes"].as_array().unwrap().len(), 2);
        assert_eq!(json["changes"][0]["commit"]["sha"], "c0000010");
        let share = json["changes"][1]["share"].as_f64().unwrap();
        assert!((0.3..0.7).contains(&share), "{share}");
        assert_eq!(json["searches"].as_array().unwrap().len(), searched.len());
        let html = render_html(&root, &r).unwrap();
        let list = |id: &str| {
            let start = html.find(&format!("<ul id=\"{id}\">")).unwrap_or_else(|| panic!("no list {id}: {html}"));
            html[start..].split("</ul>").next().unwrap_or_default().matches("<li>").count()
        };
        assert_eq!((list("changes"), list("searches")), (2, searched.len()), "{html}");
        assert!(html.contains("Changes in the range: 2") && html.contains("c0000030"), "{html}");
        let one = render_html(&root, &build(&root)).unwrap();
        assert!(!one.contains("id=\"changes\""), "a report without searches lists no changes");
    }

    #[test]
    fn html_is_self_contained_with_both_plots() {
        let state = finished();
        let html = render_html(&state, &build(&state)).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert_eq!(html.matches("<svg").count(), 2, "two inline plots");
        assert!(html.contains("along the bisection path") && html.contains("good end:") && html.contains("bad end:"));
        assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="), "nothing fetched");
        assert!(html.contains("c0000021"));
        // Every tested commit appears in the table.
        for t in &state.tests {
            assert!(html.contains(&format!("<code>{}</code>", short(&t.commit))), "{}", t.commit);
        }
    }

    #[test]
    fn subjects_are_escaped() {
        let mut state = finished();
        let tested = state.tests[0].commit.clone();
        if let Some(c) = state.commits.get_mut(&tested) {
            c.subject = "<script>alert(1)</script> & co".into();
        }
        let html = render_html(&state, &build(&state)).unwrap();
        assert!(!html.contains("<script>alert"));
        assert!(html.contains("&lt;script&gt;"));
    }
}
