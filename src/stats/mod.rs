//! Statistics for comparing kernels: Welch's t-test, ratio intervals (on
//! logs, or Fieller's), multiple-testing corrections, intervals for a rate,
//! power, and the drift of iterations within a boot. Pure numerics over
//! slices of numbers: nothing here knows about results files, kernels or
//! output formats, and nothing here panics on data (bad input is an error
//! value).
//!
//! Reference values in the tests were computed independently with SciPy
//! (statsmodels for the drift's ANOVA); each test cites the command used.

pub mod boot_order;
pub mod drift;
pub mod fieller;
pub mod multiple_testing;
pub mod power;
pub mod proportion;
pub mod welch;

/// Mean, variance and size of one sample.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SampleSummary {
    /// Number of values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Unbiased sample variance (n − 1 denominator); 0 for one value.
    pub variance: f64,
}

impl SampleSummary {
    /// Summarises `values`; `None` when empty. The caller is responsible for
    /// rejecting non-finite values first (they would poison every figure).
    pub fn of(values: &[f64]) -> Option<SampleSummary> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        // Two-pass variance: the one-pass formula loses digits when the
        // spread is tiny against the mean, which is exactly the icount case.
        let variance =
            if n > 1 { values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        Some(SampleSummary { n, mean, variance })
    }

    /// Sample standard deviation.
    pub fn std_dev(&self) -> f64 {
        self.variance.sqrt()
    }

    /// Squared standard error of the mean.
    pub fn var_of_mean(&self) -> f64 {
        self.variance / self.n as f64
    }
}

/// Two-sided critical value of Student's t: the `1 - alpha/2` quantile with
/// `df` degrees of freedom. `df` may be fractional (Welch).
pub fn t_critical(alpha: f64, df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(1.0 - alpha / 2.0),
        Err(_) => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_textbook_values() {
        let s = SampleSummary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert_eq!(s.mean, 5.0);
        assert!((s.variance - 32.0 / 7.0).abs() < 1e-12);
        assert_eq!(SampleSummary::of(&[3.0]).unwrap().variance, 0.0);
        assert!(SampleSummary::of(&[]).is_none());
        // Tiny spread on a large mean survives (two-pass variance).
        let big = SampleSummary::of(&[1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0]).unwrap();
        assert!((big.variance - 1.0).abs() < 1e-9, "{}", big.variance);
    }

    #[test]
    fn t_quantiles_match_scipy() {
        // python3 -c "from scipy.stats import t; print(t.ppf(0.975,4), t.ppf(0.975,10.5), t.ppf(0.995,2))"
        // 2.7764451051977934 2.2138402929187886 9.924843200918287
        assert!((t_critical(0.05, 4.0) - 2.7764451051977934).abs() < 1e-9);
        assert!((t_critical(0.05, 10.5) - 2.2138402929187886).abs() < 1e-8);
        assert!((t_critical(0.01, 2.0) - 9.924843200918287).abs() < 1e-8);
        assert!(t_critical(0.05, 0.0).is_nan());
    }
}
