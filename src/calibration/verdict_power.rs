//! How often `compare` calls a true change `worse`, under its own rule: the
//! interval (at the per-test level the multiple-comparison correction
//! gives this metric) must exclude 0 *and* the estimate must lie past the
//! threshold. Significance alone (what [`crate::stats::power`] computes)
//! overstates it: a true change of exactly the threshold has its estimate
//! past the threshold only about half the time, however many boots. A
//! seeded simulation through `compare`'s own test and verdict functions,
//! with per-boot noise normal on the log scale.

use crate::compare::{test_metric, verdict, Settings, Verdict};
use crate::stats::multiple_testing::Correction;
use loads::schema::Better;
use rand::distr::Distribution;
use rand::SeedableRng;
use serde::Serialize;
use statrs::distribution::Normal;

/// Comparisons simulated per figure.
pub const RUNS: usize = 4000;
/// The power a "smallest change" is asked to reach.
pub const TARGET: f64 = 0.8;

/// Verdict power figures of one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictPower {
    /// Metrics in the family the correction runs over.
    pub metrics: usize,
    /// The per-test level the interval is drawn at (Holm's and BH's first
    /// step when only this metric changed: α / metrics).
    pub alpha: f64,
    /// (boots per kernel, share of comparisons called worse) for a true
    /// change of the threshold in the bad direction.
    pub at_threshold: Vec<(usize, f64)>,
    /// The smallest true change (in %, in the bad direction) called worse
    /// in [`TARGET`] of comparisons at `boots` boots per kernel; None when
    /// even 50% is not reached.
    pub change_for_target: Option<f64>,
    /// Boots per kernel of `change_for_target`.
    pub boots: usize,
}

/// The share of comparisons of `n` boots per kernel, per-boot log noise
/// `sd`, and a true change of `change_pct` % in the bad direction, that
/// `compare` calls worse with its interval at level `alpha`.
pub fn worse_rate(
    sd: f64,
    n: usize,
    change_pct: f64,
    alpha: f64,
    settings: &Settings,
    better: Better,
    seed: u64,
) -> f64 {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let noise = Normal::new(0.0, sd.max(1e-12)).unwrap_or_else(|_| Normal::standard());
    let shift = match better {
        Better::Higher => (1.0 - change_pct / 100.0).ln(),
        _ => (1.0 + change_pct / 100.0).ln(),
    };
    let mut worse = 0;
    let mut base = vec![0.0; n];
    let mut cand = vec![0.0; n];
    for _ in 0..RUNS {
        for v in base.iter_mut() {
            *v = noise.sample(&mut rng).exp();
        }
        for v in cand.iter_mut() {
            *v = (shift + noise.sample(&mut rng)).exp();
        }
        let t = test_metric(&base, &cand, settings.method);
        let interval = (t.interval)(alpha).map(|(lo, hi)| (100.0 * (lo - 1.0), 100.0 * (hi - 1.0)));
        if verdict(100.0 * (t.estimate_ratio - 1.0), interval, settings.threshold_pct, better) == Verdict::Worse {
            worse += 1;
        }
    }
    worse as f64 / RUNS as f64
}

/// The per-test level of one changed metric among `metrics` under
/// `settings`' correction.
pub fn per_test_alpha(settings: &Settings, metrics: usize) -> f64 {
    let alpha = 1.0 - settings.confidence;
    match settings.correction {
        Correction::None => alpha,
        Correction::Holm | Correction::BenjaminiHochberg => alpha / metrics.max(1) as f64,
    }
}

/// The figures for one metric of noise `sd` (log scale) among `metrics`.
pub fn verdict_power(
    sd: f64,
    settings: &Settings,
    metrics: usize,
    better: Better,
    for_boots: usize,
    seed: u64,
) -> VerdictPower {
    let alpha = per_test_alpha(settings, metrics);
    let mut boots = vec![6, 10, for_boots];
    boots.sort_unstable();
    boots.dedup();
    let at_threshold =
        boots.iter().map(|&n| (n, worse_rate(sd, n, settings.threshold_pct, alpha, settings, better, seed))).collect();
    // The rate rises with the change: bisect on it, from the threshold
    // (about half at best) to where it is certain.
    let rate = |c: f64| worse_rate(sd, for_boots, c, alpha, settings, better, seed);
    let (mut lo, mut hi) = (settings.threshold_pct, settings.threshold_pct.max(1.0) * 2.0);
    while rate(hi) < TARGET && hi < 90.0 {
        lo = hi;
        hi = (hi * 2.0).min(90.0);
    }
    let change_for_target = (rate(hi) >= TARGET).then(|| {
        for _ in 0..14 {
            let mid = (lo + hi) / 2.0;
            if rate(mid) >= TARGET {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    });
    VerdictPower { metrics, alpha, at_threshold, change_for_target, boots: for_boots }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phi(z: f64) -> f64 {
        use statrs::distribution::ContinuousCDF;
        Normal::standard().cdf(z)
    }

    #[test]
    fn past_the_threshold_the_rate_is_the_estimates_chance_of_lying_past_it() {
        // 1% noise, 6 boots, one metric: the interval's half-width (about
        // 1.3%) is below the threshold, so `worse` needs the estimate past
        // -2%: a normal probability with se = sd * sqrt(2/6).
        let s = Settings::default();
        let se = 0.01 * (2.0f64 / 6.0).sqrt();
        for change in [2.3, 3.0] {
            let expected = phi(((1.0 - 0.02f64).ln() - (1.0 - change / 100.0f64).ln()) / se);
            let got = worse_rate(0.01, 6, change, 0.05, &s, Better::Higher, 1);
            assert!((got - expected).abs() < 0.04, "change {change}%: {got} against {expected}");
        }
        // At the threshold itself, about half, however many boots.
        for n in [6, 30] {
            let at = worse_rate(0.01, n, 2.0, 0.05, &s, Better::Higher, 2);
            assert!((0.45..=0.55).contains(&at), "{n} boots: {at}");
        }
        // A lower-is-better metric is worse when it rises.
        let up = worse_rate(0.01, 6, 3.0, 0.05, &s, Better::Lower, 1);
        assert!(up > 0.9, "{up}");
    }

    #[test]
    fn the_correction_lowers_the_rate_and_the_target_change_reaches_it() {
        let s = Settings::default();
        // 2% noise: the interval, not the threshold, decides at 6 boots.
        let one = verdict_power(0.02, &s, 1, Better::Higher, 10, 3);
        let ten = verdict_power(0.02, &s, 10, Better::Higher, 10, 3);
        assert!((ten.alpha - 0.005).abs() < 1e-12, "{}", ten.alpha);
        for ((n, a), (_, b)) in one.at_threshold.iter().zip(&ten.at_threshold) {
            assert!(b < a && *a <= 0.55, "{n} boots: {a} for one metric, {b} for ten");
        }
        let c = ten.change_for_target.unwrap();
        let at = worse_rate(0.02, 10, c, ten.alpha, &s, Better::Higher, 3);
        assert!(at >= TARGET && c > s.threshold_pct, "{c}%: {at}");
        let below = worse_rate(0.02, 10, c * 0.9, ten.alpha, &s, Better::Higher, 3);
        assert!(below < TARGET, "{below}");
    }
}
