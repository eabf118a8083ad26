//! The per-step classifier of a performance bisection: Wald's sequential
//! probability ratio test (SPRT) of "this commit performs like the good end"
//! against "like the bad end", on the logs of per-boot means, plus the error
//! budget that spreads the bisection's allowed rate of wrong culprits over its
//! steps. Pure numerics over slices of numbers: nothing here boots, builds or
//! touches files, and nothing here panics on data (bad input is an error).
//!
//! # The test
//! Each boot gives one value per metric: the mean of its iterations (the boot
//! is the unit of replication). On the log scale a kernel's boots are modelled
//! as normal with a kernel-specific mean and a common standard deviation σ:
//! the noise of a TCG boot is multiplicative (a slower host slows everything
//! in proportion), so logs make σ the same for both ends.
//!
//! The hypotheses are "the candidate has the good end's mean" and "the
//! candidate has the bad end's mean"; the ends' means are not known, only
//! estimated from their boots (n_G and n_B of them, means x̄_G and x̄_B).
//! The test does not plug the estimates in as if they were exact: that would
//! make every step overconfident when the ends rest on a few boots. Its
//! statistic is the likelihood ratio of everything observed (both ends'
//! boots and the candidate's n boots, mean x̄), with the unknown means
//! integrated out (flat priors, i.e. the likelihood ratio of the data's
//! location-invariant part, Cox 1952):
//!
//! ```text
//! Λ = [ w_G (x̄ − x̄_G)² − w_B (x̄ − x̄_B)² ] / 2σ²  +  ½ ln[ (n_G + n) n_B / ((n_B + n) n_G) ]
//! w_G = n_G n / (n_G + n),   w_B = n_B n / (n_B + n)
//! ```
//!
//! With precisely known ends (n_G, n_B → ∞) this is the textbook
//! Λ = (μ_B − μ_G)/σ² · Σ (xᵢ − (μ_G + μ_B)/2); with few reference boots the
//! weights w shrink and the test asks for more boots before it decides. It
//! stays a likelihood ratio when reference boots are added during the test
//! (interleaved boots are simply more data).
//!
//! After every boot the test stops with **bad** when Λ ≥ ln(1/α), with
//! **good** when Λ ≤ ln(β), and otherwise asks for another boot, up to a
//! cap; still undecided at the cap, it says **unsure** (the bisection skips
//! the commit). Wald's inequalities bound the errors of these boundaries
//! without approximation: P(bad | commit is good) ≤ α and
//! P(good | commit is bad) ≤ β, however many boots are taken, and stopping
//! at the cap with "unsure" can only lower them. That is what a fixed-sample
//! test re-run after every boot does not give.
//!
//! σ is pooled from every group of boots of one kernel (ends and candidates
//! alike) and, early on, inflated to an upper confidence bound
//! ([`VarianceBound`]), so a lucky small spread in the first boots does not
//! make the test overconfident. When an F test finds the spread of the
//! boots like the good end and of those like the bad end unequal
//! ([`UNEQUAL_SPREAD_ALPHA`]), each end keeps its own σ ([`PerEndSigma`])
//! and Λ becomes the log ratio of the candidate mean's densities,
//! `(x̄ − x̄_G)²/2v_G − (x̄ − x̄_B)²/2v_B + ½ ln(v_G/v_B)` with
//! `v_E = σ_E² (1/n + 1/n_E)`, which is the formula above when σ_G = σ_B. The simulation (`bootbench bisect-sim`)
//! measures the resulting rate of wrong culprits with all of this included.
//!
//! # The error budget
//! A wrong verdict at any step sends the bisection into the wrong half, so
//! the bisection names a wrong culprit only if some test erred; by the union
//! bound P(wrong culprit) ≤ Σₖ max(αₖ, βₖ). [`ErrorBudget`] gives test k an
//! αₖ = βₖ such that the sum over any number of tests stays within the
//! requested rate: the planned tests (⌈log₂ N⌉ steps for N commits, plus the
//! two confirmation tests) share 90 % of it evenly, and every test beyond the
//! plan (after skips or a revised verdict) gets half of what is left.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ChiSquared, ContinuousCDF, StudentsT};

use super::drift_term::DriftTerm;

/// Tests the plan always adds to the steps: the culprit and its parent are
/// measured again at the end.
pub const CONFIRMATION_TESTS: u32 = 2;

/// Share of the budget the planned tests get; the rest is a reserve spent
/// geometrically on tests beyond the plan.
const PLANNED_SHARE: f64 = 0.9;

/// Errors of the sequential test.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SequentialTestError {
    /// A value that cannot be a per-boot mean of a rate or a time.
    #[error("{what}: value {value} is not a positive finite number (per-boot means must be > 0 to take logs)")]
    BadValue {
        /// Which sample it is in.
        what: &'static str,
        /// The value.
        value: f64,
    },
    /// A reference without enough boots to estimate its mean and spread.
    #[error("the {which} reference has {n} usable boot(s); at least {need} are needed")]
    TooFewReferenceBoots {
        /// `good` or `bad`.
        which: &'static str,
        /// Boots it has.
        n: usize,
        /// Boots needed.
        need: usize,
    },
    /// One of two commits compared directly has no usable boot.
    #[error("the {which} of the two commits compared has no usable boot")]
    NoBoots {
        /// `earlier` (the parent) or `later` (the culprit).
        which: &'static str,
    },
    /// The references are identical in mean: the test cannot tell them apart.
    #[error("the good and bad references have the same mean ({mean}); there is no regression to classify against")]
    NoDifference {
        /// The common mean (log scale).
        mean: f64,
    },
    /// An error rate outside (0, 0.5).
    #[error("error rate {0} is out of range: it must be in (0, 0.5)")]
    BadRate(f64),
    /// A boot cap below the minimum.
    #[error("max boots {max} is below min boots {min} (or zero)")]
    BadCap {
        /// The cap.
        max: u32,
        /// The minimum.
        min: u32,
    },
}

/// How σ is taken from its estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "confidence")]
pub enum VarianceBound {
    /// The pooled estimate as it is.
    PlugIn,
    /// The one-sided upper confidence bound of σ² at this confidence
    /// (e.g. 0.75) from the χ² distribution of the pooled estimate: with
    /// few degrees of freedom σ is inflated, so the test asks for more boots
    /// rather than trusting a lucky small spread.
    Upper(f64),
}

impl VarianceBound {
    /// The factor σ² is multiplied by at `df` degrees of freedom.
    pub fn factor(self, df: usize) -> f64 {
        match self {
            VarianceBound::PlugIn => 1.0,
            VarianceBound::Upper(conf) => match ChiSquared::new(df as f64) {
                Ok(chi) if df > 0 => df as f64 / chi.inverse_cdf(1.0 - conf),
                _ => 1.0,
            },
        }
    }
}

/// What one test may spend and how long it may run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TestPlan {
    /// Highest probability of calling a good commit bad.
    pub alpha: f64,
    /// Highest probability of calling a bad commit good.
    pub beta: f64,
    /// Candidate boots before any verdict (guards against one wild boot
    /// deciding a step alone when the regression is large).
    pub min_boots: u32,
    /// Candidate boots after which the test gives up ("unsure").
    pub max_boots: u32,
    /// How σ is taken from its estimate.
    pub variance: VarianceBound,
}

impl TestPlan {
    /// Checks the rates and caps.
    pub fn validate(&self) -> Result<(), SequentialTestError> {
        for r in [self.alpha, self.beta] {
            if !(r > 0.0 && r < 0.5) {
                return Err(SequentialTestError::BadRate(r));
            }
        }
        if self.max_boots == 0 || self.max_boots < self.min_boots {
            return Err(SequentialTestError::BadCap { max: self.max_boots, min: self.min_boots });
        }
        Ok(())
    }

    /// The boundary at or above which the test says "bad": ln(1/α).
    pub fn upper(&self) -> f64 {
        -self.alpha.ln()
    }

    /// The boundary at or below which the test says "good": ln(β).
    pub fn lower(&self) -> f64 {
        self.beta.ln()
    }
}

/// The bisection's allowed rate of wrong culprits, spread over its tests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ErrorBudget {
    /// Highest probability that the bisection names a wrong culprit.
    pub wrong_culprit_rate: f64,
    /// Tests planned: ⌈log₂ N⌉ steps plus the confirmation tests.
    pub planned_tests: u32,
}

impl ErrorBudget {
    /// The budget for a range of `commits` candidate commits (the commits
    /// reachable from the bad end and not from the good one, bad included).
    pub fn for_range(wrong_culprit_rate: f64, commits: u64) -> Result<ErrorBudget, SequentialTestError> {
        if !(wrong_culprit_rate > 0.0 && wrong_culprit_rate < 0.5) {
            return Err(SequentialTestError::BadRate(wrong_culprit_rate));
        }
        Ok(ErrorBudget { wrong_culprit_rate, planned_tests: planned_steps(commits) + CONFIRMATION_TESTS })
    }

    /// α = β of the `k`-th test (1-based). The sum over all k ≥ 1 is at most
    /// [`ErrorBudget::wrong_culprit_rate`].
    pub fn per_test(&self, k: u32) -> f64 {
        let planned = self.planned_tests.max(1);
        let total = self.wrong_culprit_rate;
        if k <= planned {
            PLANNED_SHARE * total / f64::from(planned)
        } else {
            let beyond = (k - planned).min(1000) as i32;
            (1.0 - PLANNED_SHARE) * total * 0.5f64.powi(beyond)
        }
    }
}

/// Steps a bisection of `commits` candidates takes without skips: the
/// number of halvings until one commit is left.
pub fn planned_steps(commits: u64) -> u32 {
    if commits <= 1 {
        0
    } else {
        64 - (commits - 1).leading_zeros()
    }
}

/// Mean, variance and size of the logs of one group of boots.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LogSummary {
    /// Boots.
    pub n: usize,
    /// Mean of the logs.
    pub mean: f64,
    /// Unbiased variance of the logs (0 for one boot).
    pub variance: f64,
}

impl LogSummary {
    /// Summarises the logs of `values`; an empty slice gives `n = 0`.
    pub fn of(what: &'static str, values: &[f64]) -> Result<LogSummary, SequentialTestError> {
        let mut logs = Vec::with_capacity(values.len());
        for &v in values {
            if !(v.is_finite() && v > 0.0) {
                return Err(SequentialTestError::BadValue { what, value: v });
            }
            logs.push(v.ln());
        }
        let n = logs.len();
        if n == 0 {
            return Ok(LogSummary { n, mean: f64::NAN, variance: f64::NAN });
        }
        let mean = logs.iter().sum::<f64>() / n as f64;
        let variance = if n > 1 { logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        Ok(LogSummary { n, mean, variance })
    }
}

/// The two references and the noise, as the test uses them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReferenceModel {
    /// The good reference's boots.
    pub good: LogSummary,
    /// The bad reference's boots.
    pub bad: LogSummary,
    /// Pooled within-kernel standard deviation of the logs, before any bound.
    pub sigma: f64,
    /// Degrees of freedom of the pooled variance.
    pub df: usize,
    /// Each end's own σ, when the boots like the good end and those like
    /// the bad end differ in spread (an F test at [`UNEQUAL_SPREAD_ALPHA`]);
    /// the test then weighs a candidate's distance from each end by that
    /// end's σ. None: the pooled σ serves both (and in states written
    /// before per-end σ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_end: Option<PerEndSigma>,
    /// The host's drift taken out of the comparison (values moved to one
    /// time by a common slope, see [`drift_term`](super::drift_term)):
    /// what the slope's error adds to each variance. None: no drift term
    /// (and in states written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftTerm>,
}

/// The F test's level at which the ends' spreads count as unequal: below
/// it the pooled σ would understate one end's noise (a bad side twice as
/// noisy made bad commits pass as good 13% of the time at a nominal 3%).
pub const UNEQUAL_SPREAD_ALPHA: f64 = 0.01;

/// σ of the boots like each end, estimated apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PerEndSigma {
    /// σ of the good end's boots and of the candidates judged good.
    pub good: f64,
    /// Its degrees of freedom.
    pub good_df: usize,
    /// σ of the bad end's boots and of the candidates judged bad.
    pub bad: f64,
    /// Its degrees of freedom.
    pub bad_df: usize,
    /// Two-sided p-value of the F test of equal spreads.
    pub p_equal: f64,
}

/// Which end of the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The good end.
    Good,
    /// The bad end.
    Bad,
}

/// Groups of boots of one kernel each, by what they were judged like.
#[derive(Debug, Clone, Copy, Default)]
pub struct OtherGroups<'a> {
    /// Groups judged like the good end.
    pub good_like: &'a [&'a [f64]],
    /// Groups judged like the bad end.
    pub bad_like: &'a [&'a [f64]],
    /// Groups with no verdict (they count only towards the pooled σ).
    pub unjudged: &'a [&'a [f64]],
}

/// Sum of squares about each group's mean and its degrees of freedom.
fn within(groups: &[&[f64]]) -> Result<(f64, usize), SequentialTestError> {
    let (mut ss, mut df) = (0.0, 0);
    for group in groups {
        let s = LogSummary::of("candidate", group)?;
        if s.n > 1 {
            ss += s.variance * (s.n - 1) as f64;
            df += s.n - 1;
        }
    }
    Ok((ss, df))
}

impl ReferenceModel {
    /// Estimates the model from the references' per-boot values and any
    /// other groups of boots of one kernel each (they add to the pooled σ).
    /// Every other group counts towards the pooled σ only (see
    /// [`ReferenceModel::estimate_judged`] for per-end σ).
    pub fn estimate(good: &[f64], bad: &[f64], others: &[&[f64]]) -> Result<ReferenceModel, SequentialTestError> {
        ReferenceModel::estimate_judged(good, bad, OtherGroups { unjudged: others, ..OtherGroups::default() })
    }

    /// Estimates the model from the references' boots and the other groups
    /// by what they were judged like: the pooled σ from all of them, and
    /// each end's own σ (its boots and the groups judged like it) kept
    /// when an F test finds the two spreads unequal at
    /// [`UNEQUAL_SPREAD_ALPHA`].
    pub fn estimate_judged(
        good: &[f64],
        bad: &[f64],
        others: OtherGroups,
    ) -> Result<ReferenceModel, SequentialTestError> {
        let g = LogSummary::of("good reference", good)?;
        let b = LogSummary::of("bad reference", bad)?;
        for (which, s) in [("good", &g), ("bad", &b)] {
            if s.n < 2 {
                return Err(SequentialTestError::TooFewReferenceBoots { which, n: s.n, need: 2 });
            }
        }
        let (gl, gl_df) = within(others.good_like)?;
        let (bl, bl_df) = within(others.bad_like)?;
        let (un, un_df) = within(others.unjudged)?;
        let good_ss = g.variance * (g.n - 1) as f64 + gl;
        let good_df = g.n - 1 + gl_df;
        let bad_ss = b.variance * (b.n - 1) as f64 + bl;
        let bad_df = b.n - 1 + bl_df;
        let (ss, df) = (good_ss + bad_ss + un, good_df + bad_df + un_df);
        if g.mean == b.mean {
            return Err(SequentialTestError::NoDifference { mean: g.mean });
        }
        let per_end = unequal_spreads(good_ss / good_df as f64, good_df, bad_ss / bad_df as f64, bad_df);
        Ok(ReferenceModel { good: g, bad: b, sigma: (ss / df as f64).sqrt(), df, per_end, drift: None })
    }

    /// The model with a drift term: the values it was estimated from were
    /// moved by a fitted slope, so σ's sums of squares are residuals of
    /// that fit and lose one degree of freedom (taken from the pooled σ
    /// and from the larger of the per-end ones).
    pub fn with_drift(mut self, term: DriftTerm) -> ReferenceModel {
        let less = |sigma: f64, df: usize| {
            if df > 1 {
                (sigma * (df as f64 / (df - 1) as f64).sqrt(), df - 1)
            } else {
                (sigma, df)
            }
        };
        (self.sigma, self.df) = less(self.sigma, self.df);
        if let Some(p) = self.per_end.as_mut() {
            if p.good_df >= p.bad_df {
                (p.good, p.good_df) = less(p.good, p.good_df);
            } else {
                (p.bad, p.bad_df) = less(p.bad, p.bad_df);
            }
        }
        self.drift = Some(term);
        self
    }

    /// The variance of the difference between a candidate's mean over `n`
    /// boots and `end`'s mean, as a test with `bound` uses it: that end's
    /// σ² × (1/n + 1/n_E), plus the drift term's lag variance. The slope
    /// rests on every group's boots, so its share is taken with the larger
    /// of the two ends' σ², never the quieter end's alone.
    pub fn difference_variance(&self, end: End, n: usize, bound: VarianceBound) -> f64 {
        let (var, _) = self.variance_of(end, bound);
        let (s, extra) = match end {
            End::Good => (&self.good, self.drift.map_or(0.0, |d| d.good)),
            End::Bad => (&self.bad, self.drift.map_or(0.0, |d| d.bad)),
        };
        let widest = self.variance_of(End::Good, bound).0.max(self.variance_of(End::Bad, bound).0);
        var * (1.0 / n as f64 + 1.0 / s.n as f64) + widest * extra
    }

    /// σ² of the boots like `end` as a test uses it (after `bound`), and
    /// the degrees of freedom it rests on.
    pub fn variance_of(&self, end: End, bound: VarianceBound) -> (f64, usize) {
        let (sigma, df) = match (self.per_end, end) {
            (Some(p), End::Good) => (p.good, p.good_df),
            (Some(p), End::Bad) => (p.bad, p.bad_df),
            (None, _) => (self.sigma, self.df),
        };
        ((sigma.powi(2) * bound.factor(df)).max(1e-12), df)
    }

    /// The regression between the ends as a ratio bad/good of the metric.
    pub fn ratio(&self) -> f64 {
        (self.bad.mean - self.good.mean).exp()
    }

    /// The standardised distance between the ends, |μ_B − μ_G| / σ: how many
    /// noise widths separate them.
    pub fn separation(&self) -> f64 {
        (self.bad.mean - self.good.mean).abs() / self.sigma
    }
}

/// Each end's σ when the F test of their variances rejects equality.
fn unequal_spreads(good_var: f64, good_df: usize, bad_var: f64, bad_df: usize) -> Option<PerEndSigma> {
    if good_df == 0 || bad_df == 0 || !(good_var > 0.0 && bad_var > 0.0) {
        return None;
    }
    let f = statrs::distribution::FisherSnedecor::new(bad_df as f64, good_df as f64).ok()?;
    let c = f.cdf(bad_var / good_var);
    let p_equal = (2.0 * c.min(1.0 - c)).min(1.0);
    (p_equal < UNEQUAL_SPREAD_ALPHA).then(|| PerEndSigma {
        good: good_var.sqrt(),
        good_df,
        bad: bad_var.sqrt(),
        bad_df,
        p_equal,
    })
}

/// What a test concluded so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Boot the candidate again.
    Continue,
    /// Like the good reference.
    Good,
    /// Like the bad reference.
    Bad,
    /// The cap was reached without a verdict.
    Unsure,
}

/// A test's state after the candidate's boots so far: the decision with
/// the figures it rests on (recorded as the step's evidence).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The decision.
    pub decision: Decision,
    /// Candidate boots used.
    pub n: usize,
    /// Log-likelihood ratio Λₙ of bad against good.
    pub llr: f64,
    /// ln(1/α): at or above, bad.
    pub upper: f64,
    /// ln(β): at or below, good.
    pub lower: f64,
    /// Mean of the candidate's logs (none before the first boot).
    pub candidate_log_mean: Option<f64>,
    /// Where the candidate sits between the ends: 0 at the good mean, 1 at
    /// the bad mean (none before the first boot).
    pub position: Option<f64>,
    /// σ as the test used it (after the variance bound); with per-end σ,
    /// the larger end's.
    pub sigma_used: f64,
    /// The model it was evaluated against.
    pub model: ReferenceModel,
    /// After a good or bad decision: the two-sided p-value of "the
    /// candidate has the mean of the end it was called like" (pooled σ,
    /// t with the model's degrees of freedom). Below the test's α the
    /// candidate lies between the ends: the range holds more than one
    /// change, or the change is not a step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_like_end: Option<f64>,
    /// After the test ended (decided or unsure): the p-value of "the
    /// candidate lies between the ends" (both one-sided tests, past the
    /// good end and short of the bad one, at once). Small: the range holds
    /// more than one change, on either side of this commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_between: Option<f64>,
}

impl Evaluation {
    /// Whether the candidate measured between the ends: decided, but with
    /// evidence at the test's own level against the end it was called
    /// like.
    pub fn between_ends(&self) -> bool {
        self.p_like_end.is_some_and(|p| p < (-self.upper).exp())
    }
}

/// A direct comparison of two commits' boots on the log scale, with the
/// σ pooled over every group of boots (the model's): the step from the
/// earlier commit to the later one, and its share of the ends' change.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairComparison {
    /// ln(later / earlier) of the geometric means.
    pub log_change: f64,
    /// Its standard error.
    pub se: f64,
    /// Degrees of freedom of σ (Welch's with per-end σ).
    pub df: usize,
    /// One-sided p-value of "no change in the ends' direction".
    pub p_one_sided: f64,
    /// The step's share of the ends' change, ln-scale: 1 when it carries
    /// all of it.
    pub share: f64,
    /// The share's interval at [`PairComparison::confidence`] (delta
    /// method over the step's and the ends' independent errors).
    pub share_interval: (f64, f64),
    /// The interval's confidence.
    pub confidence: f64,
}

/// Compares `later`'s boots with `earlier`'s directly (the culprit with its
/// parent), one-sided in the direction of the ends' change, with the
/// model's pooled σ; and the step's share of the ends' change with a
/// two-sided interval at `confidence`.
pub fn compare_pair(
    model: &ReferenceModel,
    variance: VarianceBound,
    earlier: &[f64],
    later: &[f64],
    confidence: f64,
) -> Result<PairComparison, SequentialTestError> {
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(SequentialTestError::BadRate(confidence));
    }
    let e = LogSummary::of("earlier commit", earlier)?;
    let l = LogSummary::of("later commit", later)?;
    for (which, s) in [("earlier", &e), ("later", &l)] {
        if s.n < 1 {
            return Err(SequentialTestError::NoBoots { which });
        }
    }
    let delta = model.bad.mean - model.good.mean;
    if delta == 0.0 {
        return Err(SequentialTestError::NoDifference { mean: model.good.mean });
    }
    // σ bounded as the sequential tests bound it: the earlier commit (the
    // parent) is taken as like the good end, the later (the culprit) as
    // like the bad one; with per-end σ the degrees of freedom are Welch's.
    let (var_g, df_g) = model.variance_of(End::Good, variance);
    let (var_b, df_b) = model.variance_of(End::Bad, variance);
    let log_change = l.mean - e.mean;
    // The drift term's share of each variance goes with the larger σ².
    let drift = model.drift.unwrap_or_default();
    let (ve, vl) = (var_g / e.n as f64, var_b / l.n as f64 + var_g.max(var_b) * drift.pair);
    let se = (ve + vl).sqrt();
    let se_ends = (var_g / model.good.n as f64 + var_b / model.bad.n as f64 + var_g.max(var_b) * drift.ends).sqrt();
    let df = match model.per_end {
        None => model.df,
        Some(_) => {
            let welch = (ve + vl).powi(2) / (ve.powi(2) / df_g.max(1) as f64 + vl.powi(2) / df_b.max(1) as f64);
            (welch.floor() as usize).max(1)
        }
    };
    let t = StudentsT::new(0.0, 1.0, df.max(1) as f64).map_err(|_| SequentialTestError::BadRate(confidence))?;
    // In the ends' direction: a regression of a rate is a negative step.
    let toward = log_change * delta.signum() / se;
    let p_one_sided = 1.0 - t.cdf(toward);
    let share = log_change / delta;
    let se_share = (se.powi(2) + share.powi(2) * se_ends.powi(2)).sqrt() / delta.abs();
    let q = t.inverse_cdf(0.5 + confidence / 2.0);
    Ok(PairComparison {
        log_change,
        se,
        df,
        p_one_sided,
        share,
        share_interval: (share - q * se_share, share + q * se_share),
        confidence,
    })
}

/// Runs the test on the candidate's per-boot values so far.
pub fn evaluate(model: &ReferenceModel, plan: &TestPlan, candidate: &[f64]) -> Result<Evaluation, SequentialTestError> {
    plan.validate()?;
    let mut logs = Vec::with_capacity(candidate.len());
    for &v in candidate {
        if !(v.is_finite() && v > 0.0) {
            return Err(SequentialTestError::BadValue { what: "candidate", value: v });
        }
        logs.push(v.ln());
    }
    let delta = model.bad.mean - model.good.mean;
    // Each end's σ² (the pooled one for both unless their spreads differ),
    // floored at 1e-12: zero spread (identical boots) would make every boot
    // decisive.
    let (var_g, _) = model.variance_of(End::Good, plan.variance);
    let (var_b, _) = model.variance_of(End::Bad, plan.variance);
    let n = logs.len();
    let (llr, candidate_log_mean, position) = if n == 0 {
        (0.0, None, None)
    } else {
        let nc = n as f64;
        let m = logs.iter().sum::<f64>() / nc;
        // The variance of x̄ − x̄_G if the candidate is like the good end,
        // and of x̄ − x̄_B if like the bad end: with one σ this is the
        // invariant likelihood ratio above (v = σ²/w).
        let vg = model.difference_variance(End::Good, n, plan.variance);
        let vb = model.difference_variance(End::Bad, n, plan.variance);
        let llr = (m - model.good.mean).powi(2) / (2.0 * vg) - (m - model.bad.mean).powi(2) / (2.0 * vb)
            + 0.5 * (vg / vb).ln();
        (llr, Some(m), Some((m - model.good.mean) / delta))
    };
    let (upper, lower) = (plan.upper(), plan.lower());
    let plain = |end: End| model.variance_of(end, VarianceBound::PlugIn);
    let like_end = |m: f64, which: End, end: &LogSummary| {
        let (_, df) = plain(which);
        let se = model.difference_variance(which, n, VarianceBound::PlugIn).sqrt();
        StudentsT::new(0.0, 1.0, df.max(1) as f64).ok().map(|t| 2.0 * t.cdf(-((m - end.mean) / se).abs()))
    };
    let decision = if n < plan.min_boots as usize {
        Decision::Continue
    } else if llr >= upper {
        Decision::Bad
    } else if llr <= lower {
        Decision::Good
    } else if n >= plan.max_boots as usize {
        Decision::Unsure
    } else {
        Decision::Continue
    };
    let p_like_end = match (decision, candidate_log_mean) {
        (Decision::Good, Some(m)) => like_end(m, End::Good, &model.good),
        (Decision::Bad, Some(m)) => like_end(m, End::Bad, &model.bad),
        _ => None,
    };
    // Between the ends: past the good end toward the bad one, and short of
    // the bad end, each one-sided; both must hold, so the larger p is the
    // test's (an intersection-union test: no correction for the two).
    let p_between = match candidate_log_mean {
        Some(m) if decision != Decision::Continue && delta != 0.0 => {
            let toward = delta.signum();
            let one_sided = |which: End, d: f64| {
                let (_, df) = plain(which);
                let se = model.difference_variance(which, n, VarianceBound::PlugIn).sqrt();
                StudentsT::new(0.0, 1.0, df.max(1) as f64).ok().map(|t| 1.0 - t.cdf(d / se))
            };
            let past_good = one_sided(End::Good, (m - model.good.mean) * toward);
            let short_of_bad = one_sided(End::Bad, (model.bad.mean - m) * toward);
            past_good.zip(short_of_bad).map(|(a, b)| a.max(b))
        }
        _ => None,
    };
    Ok(Evaluation {
        decision,
        n,
        llr,
        upper,
        lower,
        candidate_log_mean,
        position,
        sigma_used: var_g.max(var_b).sqrt(),
        model: *model,
        p_like_end,
        p_between,
    })
}

/// Welch's test of the references on the log scale, used once before the
/// bisection to refuse ends that do not differ.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EndsComparison {
    /// bad/good ratio of the geometric means.
    pub ratio: f64,
    /// Two-sided p-value of "the ends have the same mean".
    pub p_value: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
}

/// Compares the ends' per-boot values with Welch's t-test on the logs.
pub fn compare_ends(good: &[f64], bad: &[f64]) -> Result<EndsComparison, SequentialTestError> {
    let g = LogSummary::of("good reference", good)?;
    let b = LogSummary::of("bad reference", bad)?;
    for (which, s) in [("good", &g), ("bad", &b)] {
        if s.n < 2 {
            return Err(SequentialTestError::TooFewReferenceBoots { which, n: s.n, need: 2 });
        }
    }
    let (vg, vb) = (g.variance / g.n as f64, b.variance / b.n as f64);
    let se2 = vg + vb;
    let diff = b.mean - g.mean;
    let ratio = diff.exp();
    if se2 == 0.0 {
        // Both ends perfectly repeatable: any difference is certain.
        let p_value = if diff == 0.0 { 1.0 } else { 0.0 };
        return Ok(EndsComparison { ratio, p_value, df: (g.n + b.n - 2) as f64 });
    }
    let df = se2.powi(2) / (vg.powi(2) / (g.n - 1) as f64 + vb.powi(2) / (b.n - 1) as f64);
    let t = diff / se2.sqrt();
    let p_value = match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => 2.0 * dist.cdf(-t.abs()),
        // Degenerate degrees of freedom: no evidence either way.
        Err(_) => 1.0,
    };
    Ok(EndsComparison { ratio, p_value, df })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(alpha: f64) -> TestPlan {
        TestPlan { alpha, beta: alpha, min_boots: 1, max_boots: 10, variance: VarianceBound::PlugIn }
    }

    fn model(good: f64, bad: f64, sigma: f64) -> ReferenceModel {
        ReferenceModel {
            good: LogSummary { n: 10, mean: good.ln(), variance: sigma * sigma },
            bad: LogSummary { n: 10, mean: bad.ln(), variance: sigma * sigma },
            sigma,
            df: 18,
            per_end: None,
            drift: None,
        }
    }

    /// Boots spread evenly around `mean` with standard deviation about `sd`
    /// on the log scale.
    fn spread(mean: f64, sd: f64, n: usize) -> Vec<f64> {
        (0..n).map(|i| (mean.ln() + sd * if i % 2 == 0 { 1.0 } else { -1.0 }).exp()).collect()
    }

    #[test]
    fn each_end_keeps_its_own_sigma_only_when_the_spreads_differ() {
        let (good, bad) = (spread(100.0, 0.01, 12), spread(95.0, 0.04, 12));
        let groups_g: Vec<Vec<f64>> = (0..4).map(|_| spread(100.0, 0.01, 6)).collect();
        let groups_b: Vec<Vec<f64>> = (0..4).map(|_| spread(95.0, 0.04, 6)).collect();
        let gl: Vec<&[f64]> = groups_g.iter().map(Vec::as_slice).collect();
        let bl: Vec<&[f64]> = groups_b.iter().map(Vec::as_slice).collect();
        let m =
            ReferenceModel::estimate_judged(&good, &bad, OtherGroups { good_like: &gl, bad_like: &bl, unjudged: &[] })
                .unwrap();
        let p = m.per_end.expect("spreads of 1% and 4% differ");
        assert!((p.good / p.bad - 0.25).abs() < 0.03, "{p:?}");
        assert_eq!((p.good_df, p.bad_df), (11 + 20, 11 + 20));
        // Groups without a verdict count only towards the pooled σ.
        let all: Vec<&[f64]> = gl.iter().chain(&bl).copied().collect();
        let unjudged = ReferenceModel::estimate(&good, &bad, &all).unwrap();
        assert_eq!(unjudged.per_end.map(|p| (p.good_df, p.bad_df)), Some((11, 11)));
        assert_eq!(unjudged.df, 22 + 40);
        // Equal spreads keep one σ.
        let even = ReferenceModel::estimate_judged(
            &good,
            &spread(95.0, 0.01, 12),
            OtherGroups { good_like: &gl, ..OtherGroups::default() },
        )
        .unwrap();
        assert_eq!(even.per_end, None);
    }

    #[test]
    fn with_per_end_sigma_the_llr_is_the_ratio_of_the_means_densities() {
        let mut m = model(100.0, 95.0, 0.02);
        m.per_end = Some(PerEndSigma { good: 0.01, good_df: 30, bad: 0.04, bad_df: 30, p_equal: 0.0 });
        let xs = [97.4, 97.6];
        let e = evaluate(&m, &plan(0.01), &xs).unwrap();
        let x = xs.iter().map(|v: &f64| v.ln()).sum::<f64>() / 2.0;
        let log_density = |mu: f64, var: f64| -(x - mu).powi(2) / (2.0 * var) - 0.5 * var.ln();
        let (vg, vb) = (0.01f64.powi(2) * (0.5 + 0.1), 0.04f64.powi(2) * (0.5 + 0.1));
        let direct = log_density(m.bad.mean, vb) - log_density(m.good.mean, vg);
        assert!((e.llr - direct).abs() < 1e-9, "{} vs {direct}", e.llr);
        // Halfway between the means the noisier bad end is the likelier.
        assert!(e.llr > 0.0, "{}", e.llr);
        let pooled = evaluate(&model(100.0, 95.0, 0.02), &plan(0.01), &xs).unwrap();
        assert!(pooled.llr.abs() < e.llr, "pooled {} vs per end {}", pooled.llr, e.llr);
    }

    #[test]
    fn llr_is_the_invariant_likelihood_ratio() {
        // Direct computation: the ratio of the likelihoods with each group's
        // mean integrated out (flat prior): a group of m values with sum of
        // squares SS about its mean contributes exp(−SS/2σ²)·sqrt(2πσ²/m).
        let m = model(100.0, 90.0, 0.03);
        let xs = [97.0, 93.0, 95.5];
        let e = evaluate(&m, &plan(0.01), &xs).unwrap();
        let s2 = m.sigma * m.sigma;
        let lx: Vec<f64> = xs.iter().map(|x: &f64| x.ln()).collect();
        // Stand-in reference samples with the model's means and n = 10.
        let ref_g: Vec<f64> = (0..10).map(|i| m.good.mean + if i % 2 == 0 { 0.01 } else { -0.01 }).collect();
        let ref_b: Vec<f64> = (0..10).map(|i| m.bad.mean + if i % 2 == 0 { 0.01 } else { -0.01 }).collect();
        let log_marginal = |v: &[f64]| {
            let k = v.len() as f64;
            let mean = v.iter().sum::<f64>() / k;
            let ss: f64 = v.iter().map(|x| (x - mean).powi(2)).sum();
            -ss / (2.0 * s2) - 0.5 * k.ln()
        };
        let joined = |a: &[f64], b: &[f64]| [a, b].concat();
        let direct = log_marginal(&joined(&ref_b, &lx)) + log_marginal(&ref_g)
            - log_marginal(&joined(&ref_g, &lx))
            - log_marginal(&ref_b);
        assert!((e.llr - direct).abs() < 1e-9, "{} vs {direct}", e.llr);
        assert!((e.upper - 100f64.ln()).abs() < 1e-12);
        assert!((e.lower - 0.01f64.ln()).abs() < 1e-12);
        // With exactly known ends it is the textbook ratio.
        let mut known = m;
        known.good.n = 100_000_000;
        known.bad.n = 100_000_000;
        let e = evaluate(&known, &plan(0.01), &xs).unwrap();
        let (g, b) = (m.good.mean, m.bad.mean);
        let textbook: f64 = lx.iter().map(|x| (b - g) / s2 * (x - (g + b) / 2.0)).sum();
        assert!((e.llr - textbook).abs() < 1e-4, "{} vs {textbook}", e.llr);
        // No candidate boot: no evidence.
        assert_eq!(evaluate(&m, &plan(0.01), &[]).unwrap().llr, 0.0);
    }

    #[test]
    fn decides_each_way_and_says_unsure_at_the_cap() {
        let m = model(100.0, 90.0, 0.02);
        let p = plan(0.001);
        assert_eq!(evaluate(&m, &p, &[100.0, 99.0, 101.0]).unwrap().decision, Decision::Good);
        assert_eq!(evaluate(&m, &p, &[90.0, 89.0, 91.0]).unwrap().decision, Decision::Bad);
        assert_eq!(evaluate(&m, &p, &[95.0]).unwrap().decision, Decision::Continue);
        // Exactly in the middle: never decides, so the cap makes it unsure.
        let mid = (100.0f64 * 90.0).sqrt();
        assert_eq!(evaluate(&m, &p, &[mid; 10]).unwrap().decision, Decision::Unsure);
        assert_eq!(evaluate(&m, &p, &[mid; 9]).unwrap().decision, Decision::Continue);
        // The minimum number of boots holds back even a decisive first boot.
        let p2 = TestPlan { min_boots: 2, ..p };
        assert_eq!(evaluate(&m, &p2, &[80.0]).unwrap().decision, Decision::Continue);
        assert_eq!(evaluate(&m, &p2, &[80.0, 90.0]).unwrap().decision, Decision::Bad);
    }

    #[test]
    fn position_places_the_candidate_between_the_ends() {
        let m = model(100.0, 80.0, 0.02);
        let e = evaluate(&m, &plan(0.01), &[80.0]).unwrap();
        assert!((e.position.unwrap() - 1.0).abs() < 1e-9);
        let e = evaluate(&m, &plan(0.01), &[100.0]).unwrap();
        assert!(e.position.unwrap().abs() < 1e-9);
        assert_eq!(evaluate(&m, &plan(0.01), &[]).unwrap().position, None);
    }

    #[test]
    fn bad_input_is_an_error() {
        let m = model(100.0, 90.0, 0.02);
        for v in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(evaluate(&m, &plan(0.01), &[v]), Err(SequentialTestError::BadValue { .. })), "{v}");
        }
        assert!(matches!(evaluate(&m, &plan(0.7), &[1.0]), Err(SequentialTestError::BadRate(_))));
        let p = TestPlan { max_boots: 1, min_boots: 2, ..plan(0.01) };
        assert!(matches!(evaluate(&m, &p, &[1.0]), Err(SequentialTestError::BadCap { .. })));
        assert!(matches!(
            ReferenceModel::estimate(&[1.0], &[2.0, 2.1], &[]),
            Err(SequentialTestError::TooFewReferenceBoots { which: "good", n: 1, need: 2 })
        ));
        assert!(matches!(
            ReferenceModel::estimate(&[1.0, 1.0], &[1.0, 1.0], &[]),
            Err(SequentialTestError::NoDifference { .. })
        ));
    }

    #[test]
    fn pooled_sigma_counts_every_group() {
        // Logs of e^0, e^0.02 → var 0.0002 (1 df); same for bad; a candidate
        // group e^1, e^1.04 → var 0.0008 (1 df). Pooled = 0.0012 / 3.
        let e = std::f64::consts::E;
        let good = [1.0, e.powf(0.02)];
        let bad = [e.powf(0.5), e.powf(0.52)];
        let cand = [e, e.powf(1.04)];
        let m = ReferenceModel::estimate(&good, &bad, &[&cand, &[5.0]]).unwrap();
        assert_eq!(m.df, 3);
        assert!((m.sigma - (0.0012f64 / 3.0).sqrt()).abs() < 1e-12, "{}", m.sigma);
        assert!((m.ratio() - e.powf(0.5)).abs() < 1e-9);
    }

    #[test]
    fn variance_bound_inflates_small_samples_more() {
        let f4 = VarianceBound::Upper(0.75).factor(4);
        let f40 = VarianceBound::Upper(0.75).factor(40);
        // χ²₄ 25th percentile is 1.9226 (tables): 4/1.9226 = 2.0805.
        assert!((f4 - 4.0 / 1.922558).abs() < 1e-3, "{f4}");
        assert!(f4 > f40 && f40 > 1.0);
        assert_eq!(VarianceBound::PlugIn.factor(3), 1.0);
    }

    #[test]
    fn budget_sums_to_at_most_the_rate() {
        let b = ErrorBudget::for_range(0.05, 1000).unwrap();
        assert_eq!(b.planned_tests, 10 + CONFIRMATION_TESTS);
        assert!((b.per_test(1) - 0.9 * 0.05 / 12.0).abs() < 1e-15);
        let total: f64 = (1..=2000).map(|k| b.per_test(k)).sum();
        assert!(total <= 0.05 + 1e-15, "{total}");
        assert!(total > 0.0499, "{total}");
        assert!(b.per_test(13) < b.per_test(12));
        assert_eq!(planned_steps(1), 0);
        assert_eq!(planned_steps(2), 1);
        assert_eq!(planned_steps(1024), 10);
        assert_eq!(planned_steps(1025), 11);
        assert!(ErrorBudget::for_range(0.0, 10).is_err());
    }

    #[test]
    fn wald_bound_holds_with_estimated_ends() {
        // The ends are estimated afresh from 3 boots each in every trial and
        // σ is known: the rate of calling a good commit bad must stay under α
        // although the estimates are rough (with the ends' estimates plugged
        // in as exact, it does not). Separation 1.5 σ, α = β = 0.02.
        use rand::distr::Distribution;
        use rand::SeedableRng;
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let sigma = 0.02;
        let noise = statrs::distribution::Normal::new(0.0, sigma).unwrap();
        let p = TestPlan { alpha: 0.02, beta: 0.02, min_boots: 1, max_boots: 200, variance: VarianceBound::PlugIn };
        let (good_mean, bad_mean) = (0.0, -1.5 * sigma);
        let (mut wrong, runs) = (0, 20000);
        for _ in 0..runs {
            let mut draw =
                |mu: f64, k: usize| -> Vec<f64> { (0..k).map(|_| (mu + noise.sample(&mut rng)).exp()).collect() };
            let g = LogSummary::of("g", &draw(good_mean, 3)).unwrap();
            let b = LogSummary::of("b", &draw(bad_mean, 3)).unwrap();
            let m = ReferenceModel { good: g, bad: b, sigma, df: 1_000_000, per_end: None, drift: None };
            let mut xs = Vec::new();
            loop {
                xs.extend(draw(good_mean, 1));
                match evaluate(&m, &p, &xs).unwrap().decision {
                    Decision::Continue => continue,
                    Decision::Bad => wrong += 1,
                    _ => {}
                }
                break;
            }
        }
        let rate = wrong as f64 / runs as f64;
        assert!(rate < 0.02, "false 'bad' rate {rate}");
        assert!(rate > 0.001, "suspiciously low false 'bad' rate {rate}");
    }

    #[test]
    fn ends_comparison_matches_welch() {
        // SciPy 1.x: stats.ttest_ind(np.log(b), np.log(g), equal_var=False)
        // for g = [100, 102, 98, 101], b = [95, 96, 94, 97] gives
        // statistic -4.450941, pvalue 0.0049006137, df 5.6977321.
        let g = [100.0, 102.0, 98.0, 101.0];
        let b = [95.0, 96.0, 94.0, 97.0];
        let c = compare_ends(&g, &b).unwrap();
        assert!((c.p_value - 0.004_900_613_7).abs() < 1e-8, "{}", c.p_value);
        assert!((c.df - 5.697_732_1).abs() < 1e-6, "{}", c.df);
        let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
        assert!((c.ratio - geo(&b) / geo(&g)).abs() < 1e-12);
        assert_eq!(compare_ends(&[1.0, 1.0], &[2.0, 2.0]).unwrap().p_value, 0.0);
        assert_eq!(compare_ends(&[1.0, 1.0], &[1.0, 1.0]).unwrap().p_value, 1.0);
    }

    #[test]
    fn a_direct_comparison_measures_the_step_and_its_share() {
        // Ends 100 and 90 (10 boots each), σ 1% on the log scale.
        let m = model(100.0, 90.0, 0.01);
        let parent = [100.0, 100.0, 100.0];
        let step = compare_pair(&m, VarianceBound::PlugIn, &parent, &[95.0, 95.0, 95.0], 0.95).unwrap();
        assert!((step.log_change - (95.0f64 / 100.0).ln()).abs() < 1e-12);
        assert!((step.se - 0.01 * (2.0f64 / 3.0).sqrt()).abs() < 1e-12, "{}", step.se);
        let share = (0.95f64).ln() / (0.9f64).ln();
        assert!((step.share - share).abs() < 1e-12, "{}", step.share);
        assert!(step.share_interval.0 < share && share < step.share_interval.1);
        // 5.1 standard errors in the ends' direction.
        assert!(step.p_one_sided < 1e-4, "{}", step.p_one_sided);
        // No step: p one half; a step the other way: p near one.
        let none = compare_pair(&m, VarianceBound::PlugIn, &parent, &parent, 0.95).unwrap();
        assert!((none.p_one_sided - 0.5).abs() < 1e-12 && none.share == 0.0);
        assert!(
            compare_pair(&m, VarianceBound::PlugIn, &parent, &[105.0, 105.0, 105.0], 0.95).unwrap().p_one_sided > 0.999
        );
        // A time that rises: the same step the other way round.
        let t = model(100.0, 110.0, 0.01);
        let rise = compare_pair(&t, VarianceBound::PlugIn, &parent, &[105.0, 105.0, 105.0], 0.95).unwrap();
        assert!(rise.log_change > 0.0 && rise.share > 0.0 && rise.p_one_sided < 1e-4, "{rise:?}");
        assert!(
            compare_pair(&t, VarianceBound::PlugIn, &parent, &[95.0, 95.0, 95.0], 0.95).unwrap().p_one_sided > 0.999
        );
        let e = compare_pair(&t, VarianceBound::PlugIn, &[], &parent, 0.95).unwrap_err().to_string();
        assert!(e.contains("the earlier of the two commits compared has no usable boot"), "{e}");
        // The whole change: the share's interval holds 1.
        let all = compare_pair(&m, VarianceBound::PlugIn, &parent, &[90.0, 90.0, 90.0], 0.95).unwrap();
        assert!(all.share_interval.0 < 1.0 && 1.0 < all.share_interval.1, "{:?}", all.share_interval);
    }

    #[test]
    fn a_candidate_called_bad_short_of_the_bad_end_is_between_the_ends() {
        let m = model(100.0, 90.0, 0.01);
        // A candidate at the bad end is not between them.
        let at_bad = evaluate(&m, &plan(0.03), &[90.0, 90.2, 89.8]).unwrap();
        assert_eq!(at_bad.decision, Decision::Bad);
        assert!(!at_bad.between_ends() && at_bad.p_like_end.unwrap() > 0.5, "{at_bad:?}");
        let near_bad = evaluate(&m, &plan(0.03), &[92.0, 92.1, 91.9]).unwrap();
        assert_eq!(near_bad.decision, Decision::Bad);
        assert!(near_bad.between_ends(), "2% from the bad end, σ 1%, 3 boots: {near_bad:?}");
    }
}
