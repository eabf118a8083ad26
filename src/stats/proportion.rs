//! Confidence intervals for a rate estimated from k successes in n trials
//! (the A/A false-positive rate): Clopper–Pearson (exact, conservative) and
//! Wilson's score interval.

use serde::Serialize;
use statrs::distribution::{Beta, ContinuousCDF, Normal};

/// A rate with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RateInterval {
    /// Successes.
    pub k: u64,
    /// Trials.
    pub n: u64,
    /// k / n.
    pub rate: f64,
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

/// Errors of the rate intervals.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProportionError {
    /// No trials, or more successes than trials.
    #[error("cannot estimate a rate from {k} successes in {n} trials")]
    BadCounts {
        /// Successes.
        k: u64,
        /// Trials.
        n: u64,
    },
}

fn checked(k: u64, n: u64) -> Result<f64, ProportionError> {
    if n == 0 || k > n {
        return Err(ProportionError::BadCounts { k, n });
    }
    Ok(k as f64 / n as f64)
}

/// Clopper–Pearson interval at level `1 - alpha`, from Beta quantiles.
pub fn clopper_pearson(k: u64, n: u64, alpha: f64) -> Result<RateInterval, ProportionError> {
    let rate = checked(k, n)?;
    let (kf, nf) = (k as f64, n as f64);
    let quantile = |a: f64, b: f64, q: f64| Beta::new(a, b).map(|d| d.inverse_cdf(q)).unwrap_or(f64::NAN);
    let lo = if k == 0 { 0.0 } else { quantile(kf, nf - kf + 1.0, alpha / 2.0) };
    let hi = if k == n { 1.0 } else { quantile(kf + 1.0, nf - kf, 1.0 - alpha / 2.0) };
    Ok(RateInterval { k, n, rate, lo, hi })
}

/// Wilson's score interval at level `1 - alpha`.
pub fn wilson(k: u64, n: u64, alpha: f64) -> Result<RateInterval, ProportionError> {
    let rate = checked(k, n)?;
    let z = Normal::standard().inverse_cdf(1.0 - alpha / 2.0);
    let nf = n as f64;
    let denom = 1.0 + z * z / nf;
    let centre = (rate + z * z / (2.0 * nf)) / denom;
    let half = z * (rate * (1.0 - rate) / nf + z * z / (4.0 * nf * nf)).sqrt() / denom;
    Ok(RateInterval { k, n, rate, lo: (centre - half).max(0.0), hi: (centre + half).min(1.0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    // r = scipy.stats.binomtest(k, n); r.proportion_ci(0.95, 'exact' | 'wilson')
    const CASES: [(u64, u64, f64, f64, f64, f64); 4] = [
        (3, 1000, 0.0006190999316499173, 0.008742023238657654, 0.0010207838811386186, 0.008783014053503173),
        (0, 200, 0.0, 0.018275340355148807, 0.0, 0.018845326377266575),
        (50, 100, 0.39832112950330095, 0.6016788704966991, 0.4038315303659956, 0.5961684696340044),
        (20, 20, 0.8315665290169145, 1.0, 0.8388748419471808, 1.0),
    ];

    #[test]
    fn match_scipy_binomtest() {
        for (k, n, cp_lo, cp_hi, w_lo, w_hi) in CASES {
            let cp = clopper_pearson(k, n, 0.05).unwrap();
            assert!((cp.lo - cp_lo).abs() < 1e-9 && (cp.hi - cp_hi).abs() < 1e-9, "{k}/{n}: {cp:?}");
            let w = wilson(k, n, 0.05).unwrap();
            assert!((w.lo - w_lo).abs() < 1e-9 && (w.hi - w_hi).abs() < 1e-9, "{k}/{n}: {w:?}");
        }
    }

    #[test]
    fn bad_counts_are_errors() {
        assert_eq!(clopper_pearson(1, 0, 0.05).unwrap_err(), ProportionError::BadCounts { k: 1, n: 0 });
        assert!(wilson(5, 4, 0.05).unwrap_err().to_string().contains("5 successes in 4 trials"));
    }
}
