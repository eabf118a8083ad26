//! A/A calibration: many boots of one kernel, split at random into two
//! halves over and over, each split compared exactly as `bootbench compare`
//! compares two kernels. Since both halves are the same kernel, every
//! "better" or "worse" is a false positive; their rate checks the whole
//! method (boot-to-boot drift, non-normal noise, dependence) on this
//! machine. Also reports the spread within and between boots, how much of
//! the spread within a boot is a reproducible drift over the iterations,
//! the smallest change a given number of boots can detect, and the boots a
//! threshold needs. Owns the analysis; where the boots come from is [`sources`]'s.

pub mod sources;
pub mod verdict_power;

use crate::compare::samples::{self, MetricKey, SampleError};
use crate::compare::{test_metric, verdict, Method, Settings, Verdict};
use crate::results::BootRecord;
use crate::stats::boot_order::{self, BootOrder};
use crate::stats::drift::{iteration_drift, IterationDrift};
use crate::stats::multiple_testing::adjust;
use crate::stats::power::{self, BootsNeeded, PowerError};
use crate::stats::proportion::{clopper_pearson, RateInterval};
use crate::stats::SampleSummary;
use crate::terminal_table::TextTable;
use loads::schema::Better;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;
use verdict_power::VerdictPower;

/// The fewest boots a calibration accepts: with fewer, each half has too
/// few boots for the false-positive rate to mean much.
pub const MIN_BOOTS: usize = 20;
/// Power asked of the detectable change.
pub const POWER: f64 = 0.8;
/// Significance at which the render calls an iteration drift real.
pub const DRIFT_ALPHA: f64 = 0.01;

/// Errors of a calibration.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    /// The boots are unusable.
    #[error(transparent)]
    Samples(#[from] SampleError),
    /// Too few usable boots.
    #[error("calibration needs at least {MIN_BOOTS} usable boots of one kernel; got {0}")]
    TooFewBoots(usize),
    /// The boots are of several kernels.
    #[error("calibration is A/A on one kernel, but the boots are of {0} kernel groups; pick one")]
    SeveralKernels(usize),
    /// No splits asked for.
    #[error("--splits must be at least 1")]
    NoSplits,
    /// The boot-order checks failed.
    #[error("boot-order checks of metric {metric}")]
    BootOrder {
        /// The metric.
        metric: String,
        /// Why.
        #[source]
        source: boot_order::BootOrderError,
    },
    /// The power calculation failed.
    #[error("power calculation for metric {metric}")]
    Power {
        /// The metric.
        metric: String,
        /// Why.
        #[source]
        source: PowerError,
    },
}

/// Figures of one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricCalibration {
    /// Workload instance and metric.
    pub key: MetricKey,
    /// Unit.
    pub unit: String,
    /// Direction.
    pub better: Better,
    /// Mean of the per-boot means.
    pub mean: f64,
    /// Spread of iterations within a boot, in % of the mean (root mean
    /// square of the boots' own CVs).
    pub cv_within_boot_pct: f64,
    /// Spread of the per-boot means, in % of the mean.
    pub cv_between_boots_pct: f64,
    /// The within-boot spread split into a trend over iteration positions
    /// (the same in every boot) and the noise left; `None` when some boot
    /// has a single iteration.
    pub drift: Option<IterationDrift>,
    /// Standard deviation of the logs of per-boot means (the power model's
    /// input); NaN for metrics with values ≤ 0.
    pub sd_log: f64,
    /// Splits whose verdict was "better" or "worse" (a false change at the
    /// threshold), with its Clopper–Pearson interval.
    pub false_change: RateInterval,
    /// Splits whose interval excluded 0 (the corrected test rejected),
    /// with its interval: for one metric alone this should be near
    /// 1 − confidence, and less after the correction.
    pub excludes_zero: RateInterval,
    /// Smallest change (in %) detectable with `for_boots` boots per kernel,
    /// 95% confidence and 80% power, for this metric alone.
    pub min_detectable_pct: Option<f64>,
    /// Boots per kernel to detect a change of the threshold.
    pub boots_for_threshold: Option<BootsNeeded>,
    /// Drift and dependence across the boots in the order they ran (what
    /// the random splits cannot see).
    pub boot_order: BootOrder,
    /// How often `compare`'s verdict says `worse` for a true change, under
    /// its rule and the correction over this calibration's metrics; None
    /// without a spread on the log scale.
    pub verdict_power: Option<VerdictPower>,
}

/// A check of boot order that rejected after Holm's correction over every
/// metric's four checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrderFlag {
    /// Workload and metric.
    pub metric: String,
    /// The check: trend, lag-1, halves or odd/even.
    pub check: &'static str,
    /// Its figure (see [`crate::stats::boot_order::OrderCheck`]).
    pub estimate: f64,
    /// Its Holm-adjusted p-value.
    pub p_adjusted: f64,
}

/// A whole calibration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// Settings each split was compared with.
    pub settings: Settings,
    /// Boots used.
    pub boots: usize,
    /// Iterations in all (of the first metric).
    pub iterations: usize,
    /// Boots left out, with why.
    pub skipped: Vec<samples::SkippedBoot>,
    /// Random splits.
    pub splits: usize,
    /// Seed of the splits.
    pub seed: u64,
    /// Boots per kernel for the detectable change.
    pub for_boots: usize,
    /// Splits in which any metric had a false change.
    pub any_false_change: RateInterval,
    /// Per metric.
    pub metrics: Vec<MetricCalibration>,
    /// The boot-order checks that rejected (Holm over all metrics' checks
    /// at 1 − confidence): any one makes the machine unfit for A/B runs.
    pub order_flags: Vec<OrderFlag>,
}

fn rms(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64).sqrt()
}

/// Analyses the boots of one kernel (all boots must be of one group).
pub fn analyse(
    boots: &[BootRecord],
    settings: Settings,
    splits: usize,
    seed: u64,
    for_boots: usize,
    only: Option<&[String]>,
    skip_incomplete: bool,
) -> Result<Calibration, CalibrationError> {
    let groups = crate::compare::selector::groups(boots);
    if groups.len() > 1 {
        return Err(CalibrationError::SeveralKernels(groups.len()));
    }
    if splits == 0 {
        return Err(CalibrationError::NoSplits);
    }
    let s = samples::extract("A/A", boots, only, skip_incomplete)?;
    let n = s.used.len();
    if n < MIN_BOOTS {
        return Err(CalibrationError::TooFewBoots(n));
    }
    let keys: Vec<&MetricKey> = s.metrics.keys().collect();
    let means: Vec<Vec<f64>> = s.metrics.values().map(|m| m.boot_means()).collect();
    let alpha = 1.0 - settings.confidence;

    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..n).collect();
    let mut false_change = vec![0u64; keys.len()];
    let mut excludes_zero = vec![0u64; keys.len()];
    let mut any = 0u64;
    for _ in 0..splits {
        order.shuffle(&mut rng);
        let (a_idx, b_idx) = order.split_at(n / 2);
        let tested: Vec<_> = means
            .iter()
            .map(|m| {
                let a: Vec<f64> = a_idx.iter().map(|&i| m[i]).collect();
                let b: Vec<f64> = b_idx.iter().map(|&i| m[i]).collect();
                test_metric(&a, &b, settings.method)
            })
            .collect();
        let p: Vec<f64> = tested.iter().map(|t| t.p_value.unwrap_or(f64::NAN)).collect();
        let adjusted = adjust(&p, alpha, settings.correction);
        let mut flagged = false;
        for (i, (t, a)) in tested.iter().zip(&adjusted).enumerate() {
            let interval = (t.interval)(a.alpha).map(|(lo, hi)| (100.0 * (lo - 1.0), 100.0 * (hi - 1.0)));
            let change = 100.0 * (t.estimate_ratio - 1.0);
            let better = s.metrics[keys[i]].better;
            if matches!(verdict(change, interval, settings.threshold_pct, better), Verdict::Better | Verdict::Worse) {
                false_change[i] += 1;
                flagged = true;
            }
            if interval.is_some_and(|(lo, hi)| lo > 0.0 || hi < 0.0) {
                excludes_zero[i] += 1;
            }
        }
        any += u64::from(flagged);
    }
    let rate = |k: u64| clopper_pearson(k, splits as u64, 0.05).expect("k ≤ splits and splits ≥ 1");

    let mut metrics = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let series = &s.metrics[*key];
        let summary = SampleSummary::of(&means[i]).expect("at least MIN_BOOTS boots");
        let mean = summary.mean;
        let within = rms(series.boots.iter().filter_map(|b| {
            let s = SampleSummary::of(&b.iterations)?;
            (s.n >= 2 && s.mean != 0.0).then(|| 100.0 * s.std_dev() / s.mean.abs())
        }));
        let per_boot: Vec<&[f64]> = series.boots.iter().map(|b| b.iterations.as_slice()).collect();
        // Samples are finite and there are ≥ MIN_BOOTS boots, so the only
        // way this fails is a boot with one iteration: no drift to speak of.
        let drift = iteration_drift(&per_boot).ok();
        let positive = means[i].iter().all(|v| *v > 0.0);
        let sd_log = if positive {
            SampleSummary::of(&means[i].iter().map(|v| v.ln()).collect::<Vec<_>>()).map_or(f64::NAN, |s| s.std_dev())
        } else {
            f64::NAN
        };
        // The power model works on logs; on raw values with a value ≤ 0
        // the relative spread stands in for it.
        let spread = if sd_log.is_finite() { sd_log } else { summary.std_dev() / mean.abs() };
        let metric_name = format!("{} {}", key.workload.name, key.metric);
        let (mdp, need) = if spread > 0.0 && spread.is_finite() {
            let d = power::min_detectable_difference(spread, for_boots, alpha, POWER)
                .map_err(|source| CalibrationError::Power { metric: metric_name.clone(), source })?;
            let need = power::boots_needed(spread, (1.0 + settings.threshold_pct / 100.0).ln(), alpha, POWER)
                .map_err(|source| CalibrationError::Power { metric: metric_name.clone(), source })?;
            (Some(100.0 * (d.exp() - 1.0)), Some(need))
        } else {
            // No spread at all: any change is visible with 2 boots.
            (Some(0.0), Some(BootsNeeded::Boots(2)))
        };
        let order = boot_order::check(&means[i], settings.confidence)
            .map_err(|source| CalibrationError::BootOrder { metric: metric_name.clone(), source })?;
        let verdict_power = (sd_log.is_finite() && sd_log > 0.0)
            .then(|| verdict_power::verdict_power(sd_log, &settings, keys.len(), series.better, for_boots, seed));
        metrics.push(MetricCalibration {
            key: (*key).clone(),
            unit: series.unit.clone(),
            better: series.better,
            mean,
            cv_within_boot_pct: within,
            cv_between_boots_pct: 100.0 * summary.std_dev() / mean.abs(),
            drift,
            sd_log,
            false_change: rate(false_change[i]),
            excludes_zero: rate(excludes_zero[i]),
            min_detectable_pct: mdp,
            boots_for_threshold: need,
            boot_order: order,
            verdict_power,
        });
    }
    let order_flags = order_flags(&metrics, alpha);
    Ok(Calibration {
        settings,
        boots: n,
        iterations: s.metrics.values().next().map_or(0, |m| m.iterations()),
        skipped: s.skipped,
        splits,
        seed,
        for_boots,
        any_false_change: rate(any),
        metrics,
        order_flags,
    })
}

/// Holm over every metric's four boot-order checks at `alpha`: those that
/// reject.
fn order_flags(metrics: &[MetricCalibration], alpha: f64) -> Vec<OrderFlag> {
    let all: Vec<(String, &'static str, f64, f64)> = metrics
        .iter()
        .flat_map(|m| {
            let name = format!("{} {}", m.key.workload.name, m.key.metric);
            m.boot_order.checks().map(|(check, c)| (name.clone(), check, c.estimate, c.p_value))
        })
        .collect();
    let p: Vec<f64> = all.iter().map(|a| a.3).collect();
    let adjusted = adjust(&p, alpha, crate::stats::multiple_testing::Correction::Holm);
    all.into_iter()
        .zip(adjusted)
        .filter(|(_, a)| a.rejected)
        .map(|((metric, check, estimate, _), a)| OrderFlag { metric, check, estimate, p_adjusted: a.p_adjusted })
        .collect()
}

fn fmt_rate(r: &RateInterval) -> String {
    format!("{:.1}% [{:.1}, {:.1}] ({}/{})", 100.0 * r.rate, 100.0 * r.lo, 100.0 * r.hi, r.k, r.n)
}

/// The calibration as text.
pub fn render(c: &Calibration, what: &str) -> String {
    use crate::compare::text::{arrow, fmt_value};
    use std::fmt::Write;
    let mut out = String::new();
    let s = &c.settings;
    let _ = writeln!(out, "A/A calibration of {what}: {} boots used, {} iterations", c.boots, c.iterations);
    for k in &c.skipped {
        let _ = writeln!(out, "  left out: boot #{}: {}", k.boot, k.reason);
    }
    let _ = writeln!(
        out,
        "{} random half-splits ({} v {} boots, seed {}), each compared as `bootbench compare` would: {}, {:.0}% confidence, {} over {} metric(s), threshold ±{}%.",
        c.splits,
        c.boots / 2,
        c.boots - c.boots / 2,
        c.seed,
        if s.method == Method::WelchLog { "Welch's t on logs of per-boot means" } else { "Fieller" },
        100.0 * s.confidence,
        s.correction,
        c.metrics.len(),
        s.threshold_pct
    );
    use crate::terminal_table::Align::{Left, Right};
    let mut table = TextTable::new(
        &[Left, Right, Right, Right, Right, Right, Left, Left, Right, Right],
        &[28, 16, 9, 9, 10, 9, 30, 30, 11, 9],
        1,
    );
    table.row([
        "Metric".to_string(),
        "Mean".into(),
        "CV boot".into(),
        "Resid".into(),
        "Drift".into(),
        "CV boots".into(),
        format!("False change at ±{}%", s.threshold_pct),
        "Interval excludes 0".into(),
        format!("MDC {} bt", c.for_boots),
        format!("Boots ±{}%", s.threshold_pct),
    ]);
    for m in &c.metrics {
        let need = match m.boots_for_threshold {
            Some(BootsNeeded::Boots(n)) => n.to_string(),
            Some(BootsNeeded::MoreThanMax) => format!(">{}", power::MAX_BOOTS),
            None => "-".into(),
        };
        let (resid, drift) = match &m.drift {
            Some(d) => (
                format!("{:.2}%", d.residual_cv_pct()),
                format!("{:+.2}%{}", d.drift_pct(), if d.p_value < DRIFT_ALPHA { "*" } else { " " }),
            ),
            None => ("-".into(), "- ".into()),
        };
        table.row([
            format!("{} {} {}", m.key.workload.name, m.key.metric, arrow(m.better)),
            format!("{} {}", fmt_value(m.mean), m.unit),
            format!("{:.2}%", m.cv_within_boot_pct),
            resid,
            drift,
            format!("{:.2}%", m.cv_between_boots_pct),
            fmt_rate(&m.false_change),
            fmt_rate(&m.excludes_zero),
            m.min_detectable_pct.map_or("-".into(), |v| format!("{v:.2}%")),
            need,
        ]);
    }
    let mut any = vec![String::new(); 6];
    any[0] = "any metric".into();
    any.push(fmt_rate(&c.any_false_change));
    table.row(any);
    out.push('\n');
    out.push_str(&table.render(""));
    let _ = writeln!(
        out,
        "\nCV boot: spread of iterations within a boot; Resid: what is left of it once the trend over iteration positions \
         (the same in every boot) is taken out; Drift: that trend, from the first iteration to the last, * where an F test \
         finds it at p < {DRIFT_ALPHA}; CV boots: spread of per-boot means (the noise a comparison sees).\n\
         False change: the split's verdict was 'better' or 'worse' although both halves are the same kernel; \
         interval excludes 0: the corrected test rejected. Rates carry 95% Clopper-Pearson intervals over splits; \
         the splits reuse the same {} boots, so those intervals show split-to-split variation, not the uncertainty of the boots themselves.\n\
         MDC: smallest change detectable with {} boots per kernel at {:.0}% confidence and {:.0}% power (exact noncentral t, one metric alone); \
         Boots: boots per kernel to detect a change of ±{}% likewise.",
        c.boots,
        c.for_boots,
        100.0 * s.confidence,
        100.0 * POWER,
        s.threshold_pct
    );
    let _ = writeln!(
        out,
        "\nVerdict power: how often `compare` says 'worse' for a true change in the bad direction, under its own rule \
         (the interval excludes 0 and the estimate lies past ±{}%), with each metric's interval at the level {} over \
         {} metric(s) gives it when it alone changed ({} seeded comparisons per figure). MDC above is significance \
         alone; at a true change of the threshold the estimate lies past it only about half the time.",
        s.threshold_pct,
        s.correction,
        c.metrics.len(),
        verdict_power::RUNS
    );
    for m in &c.metrics {
        let Some(v) = &m.verdict_power else { continue };
        let at =
            v.at_threshold.iter().map(|(n, r)| format!("{n} boots {:.0}%", 100.0 * r)).collect::<Vec<_>>().join(", ");
        let target = match v.change_for_target {
            Some(c) => format!(
                "{:.0}% of the time needs a true change of {c:.2}% at {} boots",
                100.0 * verdict_power::TARGET,
                v.boots
            ),
            None => format!("{:.0}% is out of reach at {} boots", 100.0 * verdict_power::TARGET, v.boots),
        };
        let _ = writeln!(
            out,
            "{:<28} worse for a true {}{}%: {at}; {target}",
            format!("{} {}", m.key.workload.name, m.key.metric),
            if m.better == Better::Higher { "-" } else { "+" },
            s.threshold_pct
        );
    }
    let _ = writeln!(
        out,
        "\nBoots in the order they ran (what random splits cannot see): trend = drift from the first boot to the last \
         ({:.0}% interval); lag-1 = autocorrelation of neighbouring boots (Ljung-Box); halves = second half against the \
         first; odd/even = even boots against odd ones (an interleaved A/B run's split). p-values as computed; * = \
         rejected after Holm over all {} checks at {:.0}%.",
        100.0 * s.confidence,
        4 * c.metrics.len(),
        100.0 * (1.0 - s.confidence)
    );
    for m in &c.metrics {
        let o = &m.boot_order;
        let name = format!("{} {}", m.key.workload.name, m.key.metric);
        let star = |check: &str| {
            if c.order_flags.iter().any(|f| f.metric == name && f.check == check) {
                "*"
            } else {
                " "
            }
        };
        let _ = writeln!(
            out,
            "{:<28} trend {:+.2}% [{:+.2}, {:+.2}] p {:.2e}{}  lag-1 {:+.2} p {:.2e}{}  halves {:+.2}% p {:.2e}{}  odd/even {:+.2}% p {:.2e}{}",
            name,
            o.trend.estimate,
            o.trend_interval.0,
            o.trend_interval.1,
            o.trend.p_value,
            star("trend"),
            o.lag1.estimate,
            o.lag1.p_value,
            star("lag-1"),
            o.halves.estimate,
            o.halves.p_value,
            star("halves"),
            o.odd_even.estimate,
            o.odd_even.p_value,
            star("odd/even")
        );
    }
    if c.order_flags.is_empty() {
        let _ = writeln!(out, "No drift or dependence between boots found.");
    } else {
        let _ = writeln!(
            out,
            "This machine is not fit for A/B runs: boots drift or depend on each other ({}). A comparison's \
             intervals assume independent boots; find the cause (other load, thermal or frequency changes, a clock \
             source) or use --clock icount.",
            c.order_flags
                .iter()
                .map(|f| format!("{} {} p = {:.2e}", f.metric, f.check, f.p_adjusted))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    let drifting: Vec<String> = c
        .metrics
        .iter()
        .filter_map(|m| {
            let d = m.drift.as_ref().filter(|d| d.p_value < DRIFT_ALPHA)?;
            Some(format!(
                "{} {} ({:+.2}% from iteration 1 to {}, 95% interval {:+.2}% to {:+.2}%; noise {:.2}%)",
                m.key.workload.name,
                m.key.metric,
                d.drift_pct(),
                d.positions,
                d.drift_interval_pct.0,
                d.drift_interval_pct.1,
                d.residual_cv_pct()
            ))
        })
        .collect();
    if !drifting.is_empty() {
        let _ = writeln!(
            out,
            "\nIterations drift within every boot alike for: {}.\n\
             A boot's mean then depends on which iterations it covers: compare kernels run with the same --iterations and --warmup.",
            drifting.join("; ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::test_fixtures::fork_boots;

    /// Deterministic noise: boots of one kernel whose rates vary by ~1%.
    fn aa_boots(n: usize, seed: u64) -> Vec<BootRecord> {
        use rand::RngExt;
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        let rates: Vec<Vec<f64>> = (0..n)
            .map(|_| {
                let boot_level = 100.0 * (1.0 + 0.01 * (rng.random::<f64>() - 0.5) * 3.4);
                (0..3).map(|_| boot_level * (1.0 + 0.004 * (rng.random::<f64>() - 0.5))).collect()
            })
            .collect();
        let refs: Vec<&[f64]> = rates.iter().map(|r| r.as_slice()).collect();
        fork_boots(0, "aa", "aaaa", &refs)
    }

    #[test]
    fn aa_false_positive_rate_is_small_and_figures_are_sane() {
        let boots = aa_boots(24, 7);
        let c = analyse(&boots, Settings::default(), 400, 1, 10, None, false).unwrap();
        assert_eq!(c.boots, 24);
        assert_eq!(c.iterations, 72);
        let rate = c.metrics.iter().find(|m| m.key.metric == "fork_rate").unwrap();
        // Uniform boot levels of ±1.7%: between-boot CV ≈ 1%, within ≈ 0.1%.
        assert!(rate.cv_between_boots_pct > 0.5 && rate.cv_between_boots_pct < 1.5, "{rate:?}");
        assert!(rate.cv_within_boot_pct < 0.3, "{rate:?}");
        // With Holm over 2 metrics at 95%, rejections stay near or below 5%.
        assert!(rate.excludes_zero.rate < 0.10, "{rate:?}");
        // A 2% threshold on ~1% noise: false changes are rare.
        assert!(rate.false_change.rate <= rate.excludes_zero.rate);
        assert!(rate.false_change.lo <= rate.false_change.rate && rate.false_change.rate <= rate.false_change.hi);
        let mdc = rate.min_detectable_pct.unwrap();
        assert!(mdc > 0.5 && mdc < 3.0, "{mdc}");
        let Some(BootsNeeded::Boots(need)) = rate.boots_for_threshold else { panic!("{rate:?}") };
        assert!((2..=20).contains(&need), "{need}");
        // The same seed gives the same splits.
        let again = analyse(&boots, Settings::default(), 400, 1, 10, None, false).unwrap();
        assert_eq!(again, c);
        let text = render(&c, "test kernel");
        assert!(
            text.contains("fork fork_rate ↑") && text.contains("any metric") && text.contains("400 random half-splits"),
            "{text}"
        );
        // About 1% noise: at the threshold about half the comparisons say
        // worse, and 80% needs a larger true change.
        let v = rate.verdict_power.as_ref().unwrap();
        assert_eq!(v.at_threshold.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [6, 10]);
        assert!(v.at_threshold.iter().all(|(_, r)| *r <= 0.55), "{v:?}");
        assert!(v.change_for_target.unwrap() > 2.0, "{v:?}");
        assert!(text.contains("fork fork_rate") && text.contains("worse for a true -2%: 6 boots"), "{text}");
    }

    #[test]
    fn a_real_difference_between_halves_is_not_hidden() {
        // Boots drift upward by 10% over the run: the A/A check must
        // flag this machine as unfit (splits that separate early and late
        // boots see a change).
        let mut boots = aa_boots(20, 3);
        for (i, b) in boots.iter_mut().enumerate() {
            for it in &mut b.result.as_mut().unwrap().workloads[0].iterations {
                it.metrics.get_mut("fork_rate").unwrap().value *= 1.0 + 0.01 * i as f64;
            }
        }
        let c = analyse(&boots, Settings::default(), 300, 1, 10, None, false).unwrap();
        let rate = c.metrics.iter().find(|m| m.key.metric == "fork_rate").unwrap();
        assert!(rate.cv_between_boots_pct > 4.0, "{rate:?}");
        assert!(rate.min_detectable_pct.unwrap() > 4.0);
        // The random splits hardly see it; the order checks must.
        let flagged: Vec<&str> =
            c.order_flags.iter().filter(|f| f.metric == "fork fork_rate").map(|f| f.check).collect();
        assert!(flagged.contains(&"trend") && flagged.contains(&"halves"), "{:?}", c.order_flags);
        let (lo, hi) = rate.boot_order.trend_interval;
        assert!(lo < 20.9 && 20.9 < hi, "1% per boot over 19 boots is +20.9%: [{lo}, {hi}]");
        let text = render(&c, "test kernel");
        assert!(text.contains("This machine is not fit for A/B runs: boots drift"), "{text}");
        // Boots without drift are not flagged.
        let steady = analyse(&aa_boots(20, 3), Settings::default(), 30, 1, 10, None, false).unwrap();
        assert!(steady.order_flags.is_empty(), "{:?}", steady.order_flags);
        assert!(render(&steady, "k").contains("No drift or dependence between boots found."));
    }

    #[test]
    fn a_drift_over_iterations_is_told_apart_from_noise() {
        // Every boot's iterations fall by 1% per position, as fork's do
        // under icount: the within-boot CV is mostly that trend.
        let mut boots = aa_boots(20, 5);
        for b in &mut boots {
            for (j, it) in b.result.as_mut().unwrap().workloads[0].iterations.iter_mut().enumerate() {
                it.metrics.get_mut("fork_rate").unwrap().value *= 1.0 - 0.01 * j as f64;
            }
        }
        let c = analyse(&boots, Settings::default(), 50, 1, 10, None, false).unwrap();
        let rate = c.metrics.iter().find(|m| m.key.metric == "fork_rate").unwrap();
        let d = rate.drift.as_ref().unwrap();
        assert_eq!((d.boots, d.positions), (20, 3));
        assert!((d.drift_pct() + 2.0).abs() < 0.1, "{d:?}");
        let (lo, hi) = d.drift_interval_pct;
        assert!(lo < -2.0 && -2.0 < hi && hi - lo < 0.5, "the interval holds the true -2%: {d:?}");
        assert!(d.p_value < 1e-6, "{d:?}");
        // The noise left is the ±0.2% uniform jitter's (sd ≈ 0.115%).
        assert!(d.residual_cv_pct() < 0.2 && rate.cv_within_boot_pct > 0.8, "{rate:?}");
        let text = render(&c, "test kernel");
        assert!(text.contains("Iterations drift within every boot alike for: fork fork_rate (-2.0"), "{text}");
        assert!(text.contains("from iteration 1 to 3") && text.contains("same --iterations and --warmup"), "{text}");
        // Without the trend no drift is reported.
        let flat = analyse(&aa_boots(20, 5), Settings::default(), 50, 1, 10, None, false).unwrap();
        let fr = flat.metrics.iter().find(|m| m.key.metric == "fork_rate").unwrap();
        assert!(fr.drift.as_ref().unwrap().p_value > DRIFT_ALPHA, "{fr:?}");
        assert!(!render(&flat, "k").contains("Iterations drift"));
    }

    #[test]
    fn refusals() {
        let e = analyse(&aa_boots(10, 1), Settings::default(), 10, 1, 10, None, false).unwrap_err();
        assert!(e.to_string().contains("at least 20 usable boots of one kernel; got 10"), "{e}");
        let mut two = aa_boots(20, 1);
        two[3].label = "other".into();
        assert!(matches!(
            analyse(&two, Settings::default(), 10, 1, 10, None, false),
            Err(CalibrationError::SeveralKernels(2))
        ));
        assert!(matches!(
            analyse(&aa_boots(20, 1), Settings::default(), 0, 1, 10, None, false),
            Err(CalibrationError::NoSplits)
        ));
    }
}
