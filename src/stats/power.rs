//! Power of the two-sample t-test: the smallest change a given number of
//! boots can detect, and the number of boots a given change needs. Uses the
//! exact noncentral-t power (integrated numerically over the chi-square
//! variable), not the usual "t_{1-α/2} + t_{power}" shortcut, which is
//! several percent optimistic with 2–3 boots.
//!
//! Model: equal boots per kernel, equal between-boot spread (the A/A
//! estimate), pooled-variance t with 2n − 2 degrees of freedom, two-sided.

use super::t_critical;
use serde::Serialize;
use statrs::distribution::{ChiSquared, Continuous, ContinuousCDF, Normal};

/// Largest boot count [`boots_needed`] searches.
pub const MAX_BOOTS: usize = 100_000;

/// Errors of the power calculations.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PowerError {
    /// Fewer than 2 boots per kernel leave no variance estimate.
    #[error("{0} boot(s) per kernel: a t-test needs at least 2")]
    TooFewBoots(usize),
    /// The spread is not a positive finite number.
    #[error("between-boot spread {0} is not a positive finite number")]
    BadSpread(f64),
    /// A probability outside (0, 1).
    #[error("{what} {value} is not between 0 and 1")]
    BadProbability {
        /// `alpha` or `power`.
        what: &'static str,
        /// The value.
        value: f64,
    },
}

/// The chi distribution of sqrt(V) (V ~ χ²(df)) as quadrature nodes: the
/// power of every noncentrality for one `df` is then a weighted sum.
struct ChiNodes {
    /// sqrt(V/df) at each node.
    scale: Vec<f64>,
    /// Simpson weight × density × step.
    weight: Vec<f64>,
}

impl ChiNodes {
    fn new(df: f64) -> Option<ChiNodes> {
        let chi = ChiSquared::new(df).ok()?;
        // Integrate over u = sqrt(V): the density 2u·f(u²) is smooth at 0
        // for every df ≥ 1, so Simpson's rule converges fast.
        let upper = chi.inverse_cdf(1.0 - 1e-13).sqrt();
        const STEPS: usize = 1200;
        let h = upper / STEPS as f64;
        let mut scale = Vec::with_capacity(STEPS + 1);
        let mut weight = Vec::with_capacity(STEPS + 1);
        for i in 0..=STEPS {
            let u = i as f64 * h;
            let density = if u == 0.0 { 0.0 } else { 2.0 * u * chi.pdf(u * u) };
            let w = if i == 0 || i == STEPS {
                1.0
            } else if i % 2 == 1 {
                4.0
            } else {
                2.0
            };
            scale.push(u / df.sqrt());
            weight.push(w * density * h / 3.0);
        }
        Some(ChiNodes { scale, weight })
    }

    fn power(&self, c: f64, ncp: f64) -> f64 {
        let normal = Normal::standard();
        let sum: f64 = self
            .scale
            .iter()
            .zip(&self.weight)
            .map(|(s, w)| w * (normal.sf(c * s - ncp) + normal.cdf(-c * s - ncp)))
            .sum();
        sum.clamp(0.0, 1.0)
    }
}

/// Power of the two-sided t-test at level `alpha` with `df` degrees of
/// freedom for noncentrality `ncp`:
/// P(|T'| > t_{1-α/2, df}), T' = (Z + ncp) / sqrt(V/df), V ~ χ²(df).
pub fn power_of_t_test(ncp: f64, df: f64, alpha: f64) -> f64 {
    match ChiNodes::new(df) {
        Some(nodes) => nodes.power(t_critical(alpha, df), ncp),
        None => f64::NAN,
    }
}

fn check(boots: usize, sd: f64, alpha: f64, power: f64) -> Result<(), PowerError> {
    if boots < 2 {
        return Err(PowerError::TooFewBoots(boots));
    }
    if !(sd.is_finite() && sd > 0.0) {
        return Err(PowerError::BadSpread(sd));
    }
    for (what, value) in [("alpha", alpha), ("power", power)] {
        if !(value > 0.0 && value < 1.0) {
            return Err(PowerError::BadProbability { what, value });
        }
    }
    Ok(())
}

/// The noncentrality at which the test with `df` degrees of freedom
/// reaches `power` (bisection; power grows with ncp).
fn ncp_for_power(df: f64, alpha: f64, power: f64) -> f64 {
    let Some(nodes) = ChiNodes::new(df) else { return f64::NAN };
    let c = t_critical(alpha, df);
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while nodes.power(c, hi) < power && hi < 1e6 {
        hi *= 2.0;
    }
    for _ in 0..48 {
        let mid = 0.5 * (lo + hi);
        if nodes.power(c, mid) < power {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The smallest true difference (in the units of `sd`, e.g. natural-log
/// units for per-boot means on logs) that `boots` boots of each kernel
/// detect with probability `power` at two-sided level `alpha`.
pub fn min_detectable_difference(sd: f64, boots: usize, alpha: f64, power: f64) -> Result<f64, PowerError> {
    check(boots, sd, alpha, power)?;
    let df = (2 * boots - 2) as f64;
    Ok(ncp_for_power(df, alpha, power) * sd * (2.0 / boots as f64).sqrt())
}

/// A boot count, or the statement that even [`MAX_BOOTS`] are not enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BootsNeeded {
    /// This many boots per kernel.
    Boots(usize),
    /// More than [`MAX_BOOTS`].
    MoreThanMax,
}

/// The fewest boots per kernel that detect a true difference `difference`
/// (same units as `sd`) with probability `power` at level `alpha`.
pub fn boots_needed(sd: f64, difference: f64, alpha: f64, power: f64) -> Result<BootsNeeded, PowerError> {
    check(2, sd, alpha, power)?;
    let detects = |n: usize| min_detectable_difference(sd, n, alpha, power).map(|d| d <= difference.abs());
    // Start from the normal approximation, which never asks for more boots
    // than the t-test needs, then walk to the exact answer (a step or two).
    let normal = Normal::standard();
    let z = normal.inverse_cdf(1.0 - alpha / 2.0) + normal.inverse_cdf(power);
    let guess = 2.0 * (z * sd / difference.abs()).powi(2);
    if !guess.is_finite() || guess > MAX_BOOTS as f64 {
        return Ok(BootsNeeded::MoreThanMax);
    }
    let mut n = (guess.floor() as usize).max(2);
    while n > 2 && detects(n - 1)? {
        n -= 1;
    }
    while !detects(n)? {
        n += 1;
        if n > MAX_BOOTS {
            return Ok(BootsNeeded::MoreThanMax);
        }
    }
    Ok(BootsNeeded::Boots(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_matches_scipy_noncentral_t() {
        // c = t.ppf(0.975, df); nct.sf(c, df, ncp) + nct.cdf(-c, df, ncp)
        //   ncp=2.5 df=18 -> 0.6573260278417462
        //   ncp=1.0 df=4  -> 0.1222491520733127
        //   ncp=3.0 df=2  -> 0.38740012852597105
        for (ncp, df, want) in
            [(2.5, 18.0, 0.6573260278417462), (1.0, 4.0, 0.1222491520733127), (3.0, 2.0, 0.38740012852597105)]
        {
            let got = power_of_t_test(ncp, df, 0.05);
            assert!((got - want).abs() < 2e-6, "ncp {ncp} df {df}: {got} vs {want}");
        }
        // No effect: the power is the level.
        assert!((power_of_t_test(0.0, 10.0, 0.05) - 0.05).abs() < 1e-6);
    }

    #[test]
    fn detectable_difference_matches_scipy() {
        // ncp = brentq(lambda x: power(x, 2n-2) - 0.8, ...); mdd = ncp*sd*sqrt(2/n)
        //   sd=0.02 n=10 -> 0.026498947851584614
        //   sd=0.01 n=3  -> 0.030708922663636874
        //   sd=0.05 n=20 -> 0.04545645163410395
        //   sd=0.01 n=2  -> 0.05653489266197128
        for (sd, n, want) in [
            (0.02, 10, 0.026498947851584614),
            (0.01, 3, 0.030708922663636874),
            (0.05, 20, 0.04545645163410395),
            (0.01, 2, 0.05653489266197128),
        ] {
            let got = min_detectable_difference(sd, n, 0.05, 0.8).unwrap();
            assert!((got / want - 1.0).abs() < 1e-5, "sd {sd} n {n}: {got} vs {want}");
        }
    }

    #[test]
    fn boots_needed_is_the_first_count_that_detects() {
        let sd = 0.02;
        let need = boots_needed(sd, 0.02, 0.05, 0.8).unwrap();
        let BootsNeeded::Boots(n) = need else { panic!("{need:?}") };
        assert!(min_detectable_difference(sd, n, 0.05, 0.8).unwrap() <= 0.02);
        assert!(min_detectable_difference(sd, n - 1, 0.05, 0.8).unwrap() > 0.02);
        assert_eq!(boots_needed(0.001, 0.5, 0.05, 0.8).unwrap(), BootsNeeded::Boots(2));
        assert_eq!(boots_needed(1.0, 1e-6, 0.05, 0.8).unwrap(), BootsNeeded::MoreThanMax);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert_eq!(min_detectable_difference(0.1, 1, 0.05, 0.8), Err(PowerError::TooFewBoots(1)));
        assert_eq!(min_detectable_difference(0.0, 5, 0.05, 0.8), Err(PowerError::BadSpread(0.0)));
        assert!(min_detectable_difference(0.1, 5, 0.05, 1.0).unwrap_err().to_string().contains("power 1"));
    }
}
