//! A linear drift of the host over a bisection, estimated from the boots
//! and taken out of every comparison. Pure numerics: nothing here boots or
//! touches files, and nothing here panics on data.
//!
//! # The model
//! On the log scale, boot `i` of a group of boots of one kernel (an end, or
//! one test's candidate) measures `a_g + β·t_i + ε`: each group keeps its
//! own level `a_g` and the host adds a common slope β per boot (`t` is the
//! boot's place in the bisection, failed boots included, since they take
//! time too). β is the within-group least-squares slope (analysis of
//! covariance with a common slope):
//!
//! ```text
//! β̂ = Σ_g Σ_i (t_i − t̄_g)(x_i − x̄_g) / S,   S = Σ_g Σ_i (t_i − t̄_g)²
//! ```
//!
//! Every value is then moved to one time, `x − β̂ (t − now)`, and the tests
//! run on the moved values. A comparison of two groups' moved means,
//! `x̄_A − x̄_B − β̂ (t̄_A − t̄_B)`, has the variance
//! `σ² (1/n_A + 1/n_B + (t̄_A − t̄_B)² / S)`: β̂ rests on the deviations
//! within groups, so its error is independent of the groups' means. The
//! last term is what the drift term costs; [`DriftTerm`] carries it into
//! the sequential test. The residual σ loses one degree of freedom.
//!
//! Without drift the term costs precision: the ends' boots are spread over
//! the whole bisection while a candidate's are the latest, so the lag is
//! about half of it, and early on S is small. So the slope has a prior:
//! normal, mean 0, standard deviation τ per boot (`--drift-scale`). Its
//! posterior mean and variance are those above with S replaced by
//! `S + σ²/τ²`: while the boots say little about the slope (early, when
//! the lags are short too), it stays near 0 and costs little; once they
//! measure it better than τ, the fit follows them. σ is the fit's residual
//! σ. The interleaved reference boots keep S growing with the bisection.

use serde::{Deserialize, Serialize};
use statrs::distribution::ContinuousCDF;

/// The fitted slope, and what its error adds to a comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftFit {
    /// β̂: change of the log value per boot.
    pub slope: f64,
    /// S: the sum of squared time deviations within the groups.
    pub sxx: f64,
    /// The time every value is moved to (the bisection's next boot).
    pub now: f64,
    /// The residual standard deviation of the fit (log scale).
    pub sigma: f64,
    /// Its degrees of freedom: boots less groups less one.
    pub df: usize,
    /// The prior's weight σ²/τ², included in [`DriftFit::sxx`] (0 with a
    /// flat prior).
    pub prior: f64,
}

/// One boot of a group: its time (place in the bisection) and its value
/// (the metric, not its log).
pub type TimedValue = (usize, f64);

impl DriftFit {
    /// Fits the common slope of `groups` (each the boots of one kernel),
    /// moving values to `now`, with a normal prior of standard deviation
    /// `scale` per boot on the slope (0: flat). None when no group has
    /// boots at two different times, or a value is not a positive finite
    /// number (the tests that take the values report those).
    pub fn fit(groups: &[&[TimedValue]], now: usize, scale: f64) -> Option<DriftFit> {
        let (mut sxy, mut sxx, mut syy, mut boots, mut levels) = (0.0, 0.0, 0.0, 0usize, 0usize);
        for group in groups {
            if group.iter().any(|&(_, v)| !(v.is_finite() && v > 0.0)) {
                return None;
            }
            if group.len() < 2 {
                continue;
            }
            let n = group.len() as f64;
            boots += group.len();
            levels += 1;
            let tm = group.iter().map(|&(t, _)| t as f64).sum::<f64>() / n;
            let xm = group.iter().map(|&(_, v)| v.ln()).sum::<f64>() / n;
            for &(t, v) in group.iter() {
                let dt = t as f64 - tm;
                sxx += dt * dt;
                sxy += dt * (v.ln() - xm);
                syy += (v.ln() - xm).powi(2);
            }
        }
        if sxx <= 0.0 {
            return None;
        }
        let slope = sxy / sxx;
        let df = boots.saturating_sub(levels + 1);
        let sigma = if df > 0 { ((syy - slope * sxy).max(0.0) / df as f64).sqrt() } else { f64::NAN };
        // The prior's weight in units of S: σ²/τ² (the posterior of β
        // with a N(0, τ²) prior and σ known).
        let prior = if scale > 0.0 && sigma.is_finite() { (sigma / scale).powi(2) } else { 0.0 };
        let sxx = sxx + prior;
        Some(DriftFit { slope: sxy / sxx, sxx, now: now as f64, sigma, df, prior })
    }

    /// The least-squares slope, the prior left out.
    pub fn least_squares_slope(&self) -> f64 {
        self.slope * self.sxx / (self.sxx - self.prior)
    }

    /// Two-sided p-value of "the host does not drift" (a t test of the
    /// least-squares slope, the prior left out); NaN without degrees of
    /// freedom.
    pub fn p_steady(&self) -> f64 {
        let (slope, se) = (self.least_squares_slope(), self.sigma / (self.sxx - self.prior).sqrt());
        match statrs::distribution::StudentsT::new(0.0, 1.0, self.df as f64) {
            Ok(t) if se > 0.0 => 2.0 * t.cdf(-(slope / se).abs()),
            _ => f64::NAN,
        }
    }

    /// `value` as it would have measured at [`DriftFit::now`].
    pub fn moved(&self, (t, value): TimedValue) -> f64 {
        value * (-self.slope * (t as f64 - self.now)).exp()
    }

    /// The variance the slope's error adds to a comparison of two groups
    /// whose boots' mean times are `a` and `b`, in units of σ².
    pub fn lag_variance(&self, a: f64, b: f64) -> f64 {
        (a - b).powi(2) / self.sxx
    }
}

/// The mean time of a group's boots (NaN for none).
pub fn mean_time(group: &[TimedValue]) -> f64 {
    group.iter().map(|&(t, _)| t as f64).sum::<f64>() / group.len() as f64
}

/// What the drift term adds to one comparison's variances, in units of σ²
/// (see the module doc); the sequential test adds each to the matching
/// `1/n`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct DriftTerm {
    /// β̂, per boot on the log scale (reported).
    pub slope: f64,
    /// Added to the good end's `1/n` in a candidate's test.
    pub good: f64,
    /// Added to the bad end's `1/n` in a candidate's test.
    pub bad: f64,
    /// Added to the two commits' `1/n_A + 1/n_B` in a direct comparison.
    #[serde(default)]
    pub pair: f64,
    /// Added to the ends' `1/n_G + 1/n_B` (the change a share is of).
    #[serde(default)]
    pub ends: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prior_shrinks_a_slope_the_boots_measure_poorly_and_not_one_they_measure_well() {
        let noise = [0.01, -0.02, 0.015, 0.0, -0.01, 0.02, -0.015, 0.005];
        let short = group(0, 1, 1.0, -0.002, &noise[..4]);
        let long: Vec<TimedValue> = (0..8).flat_map(|k| group(k * 40, 5, 1.0, -0.002, &noise)).collect();
        let flat = DriftFit::fit(&[&short], 4, 0.0).unwrap();
        let held = DriftFit::fit(&[&short], 4, 0.0003).unwrap();
        // σ²/τ² against S = 5: the slope all but vanishes, and so does the
        // variance it adds.
        assert!(held.slope.abs() < 0.01 * flat.slope.abs(), "{held:?} {flat:?}");
        assert!(held.lag_variance(10.0, 0.0) < 0.01 * flat.lag_variance(10.0, 0.0));
        assert!((held.prior - (held.sigma / 0.0003).powi(2)).abs() < 1e-9);
        // The same slope measured over 320 boots: the prior hardly moves it.
        let flat = DriftFit::fit(&[&long], 320, 0.0).unwrap();
        let held = DriftFit::fit(&[&long], 320, 0.0003).unwrap();
        assert!((held.slope / flat.slope - 1.0).abs() < 0.05, "{held:?} {flat:?}");
        // The test of a steady host leaves the prior out.
        assert!((held.p_steady() - flat.p_steady()).abs() < 1e-12);
        assert!(held.p_steady() < 1e-6);
    }

    fn group(start: usize, step: usize, level: f64, slope: f64, noise: &[f64]) -> Vec<TimedValue> {
        noise
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let t = start + i * step;
                (t, (level + slope * t as f64 + e).exp())
            })
            .collect()
    }

    #[test]
    fn the_common_slope_is_found_whatever_each_group_s_level() {
        let a = group(0, 2, 4.0, -0.001, &[0.0; 6]);
        let b = group(1, 2, 3.9, -0.001, &[0.0; 6]);
        let c = group(20, 1, 3.95, -0.001, &[0.0; 3]);
        let fit = DriftFit::fit(&[&a, &b, &c], 23, 0.0).unwrap();
        assert!((fit.slope + 0.001).abs() < 1e-12, "{fit:?}");
        // Moved to now, every boot of a group measures the group's level there.
        for &(t, v) in &a {
            assert!((fit.moved((t, v)).ln() - (4.0 - 0.001 * 23.0)).abs() < 1e-12);
        }
        // S counts deviations within the groups only.
        let within = |g: &[TimedValue]| {
            let m = mean_time(g);
            g.iter().map(|&(t, _)| (t as f64 - m).powi(2)).sum::<f64>()
        };
        assert!((fit.sxx - within(&a) - within(&b) - within(&c)).abs() < 1e-9);
        assert_eq!(fit.lag_variance(10.0, 4.0), 36.0 / fit.sxx);
    }

    #[test]
    fn the_slope_matches_least_squares_with_a_level_per_group() {
        // Noisy groups: β̂ equals the slope of an ordinary least-squares
        // fit of x on t with one dummy per group, solved here by projecting
        // out the group means (Frisch–Waugh).
        let a = group(0, 3, 1.0, 0.002, &[0.01, -0.02, 0.015, 0.0, -0.01]);
        let b = group(1, 3, 1.2, 0.002, &[-0.01, 0.02, 0.0, 0.01]);
        let fit = DriftFit::fit(&[&a, &b], 16, 0.0).unwrap();
        let mut rows = Vec::new();
        for g in [&a, &b] {
            let (tm, xm) = (mean_time(g), g.iter().map(|&(_, v)| v.ln()).sum::<f64>() / g.len() as f64);
            rows.extend(g.iter().map(|&(t, v)| (t as f64 - tm, v.ln() - xm)));
        }
        let ols = rows.iter().map(|(t, x)| t * x).sum::<f64>() / rows.iter().map(|(t, _)| t * t).sum::<f64>();
        assert!((fit.slope - ols).abs() < 1e-12);
        assert!((fit.slope - 0.002).abs() < 0.002, "{fit:?}");
    }

    #[test]
    fn no_slope_without_two_times_in_a_group_or_with_a_bad_value() {
        assert!(DriftFit::fit(&[&[(0, 1.0)], &[(3, 2.0)]], 4, 0.0).is_none());
        assert!(DriftFit::fit(&[], 0, 0.0).is_none());
        assert!(DriftFit::fit(&[&[(0, 1.0), (1, -1.0)]], 2, 0.0).is_none());
        assert!(DriftFit::fit(&[&[(0, 1.0), (1, f64::NAN)]], 2, 0.0).is_none());
    }
}
