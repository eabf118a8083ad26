//! Welch's unequal-variance t-test of two independent samples, and the
//! ratio of two means from Welch's test on the logarithms. Only the
//! numerics: the caller picks the samples (per-boot means) and the level.

use super::{t_critical, SampleSummary};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Errors of the t-test.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WelchError {
    /// A sample has fewer than two values, so it has no variance estimate.
    #[error("the {which} sample has {n} value(s); Welch's test needs at least 2")]
    TooFew {
        /// `baseline` or `candidate`.
        which: &'static str,
        /// Its size.
        n: usize,
    },
    /// A value is NaN or infinite.
    #[error("the {which} sample's value #{index} is {value}")]
    NonFinite {
        /// `baseline` or `candidate`.
        which: &'static str,
        /// 0-based index of the value.
        index: usize,
        /// The value.
        value: f64,
    },
    /// A log-ratio was asked of a sample with a value that is not positive.
    #[error("the {which} sample's value #{index} is {value}; a ratio on logs needs positive values")]
    NotPositive {
        /// `baseline` or `candidate`.
        which: &'static str,
        /// 0-based index of the value.
        index: usize,
        /// The value.
        value: f64,
    },
}

/// The result of Welch's test of candidate − baseline.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct WelchTest {
    /// Difference of means, candidate − baseline.
    pub diff: f64,
    /// Its standard error, sqrt(s_b²/n_b + s_c²/n_c).
    pub se: f64,
    /// The t statistic, diff / se (±inf when se is 0 and diff is not).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom. When both samples have zero
    /// variance there is no t distribution; then `n_b + n_c − 2`, recorded
    /// only so the field is defined.
    pub df: f64,
    /// Two-sided p-value. With zero variance in both samples: 1 when the
    /// means are equal, 0 when they differ (the data leave no doubt).
    pub p_value: f64,
}

impl WelchTest {
    /// Two-sided confidence interval of the difference at level
    /// `1 - alpha`. Degenerate (a point) when both samples have zero
    /// variance.
    pub fn interval(&self, alpha: f64) -> (f64, f64) {
        if self.se == 0.0 {
            return (self.diff, self.diff);
        }
        let half = t_critical(alpha, self.df) * self.se;
        (self.diff - half, self.diff + half)
    }
}

fn check(which: &'static str, values: &[f64]) -> Result<SampleSummary, WelchError> {
    if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(WelchError::NonFinite { which, index, value });
    }
    match SampleSummary::of(values) {
        Some(s) if s.n >= 2 => Ok(s),
        _ => Err(WelchError::TooFew { which, n: values.len() }),
    }
}

/// Welch's t-test of `candidate` − `baseline` (the order matters for the
/// sign of `diff` and `t`; SciPy's `ttest_ind(candidate, baseline,
/// equal_var=False)` gives the same numbers).
pub fn welch_test(baseline: &[f64], candidate: &[f64]) -> Result<WelchTest, WelchError> {
    let b = check("baseline", baseline)?;
    let c = check("candidate", candidate)?;
    Ok(from_summaries(&b, &c))
}

/// Welch's test from two summaries with n ≥ 2 each.
pub fn from_summaries(b: &SampleSummary, c: &SampleSummary) -> WelchTest {
    let (vb, vc) = (b.var_of_mean(), c.var_of_mean());
    let diff = c.mean - b.mean;
    let se = (vb + vc).sqrt();
    if se == 0.0 {
        let p_value = if diff == 0.0 { 1.0 } else { 0.0 };
        let t = if diff == 0.0 { 0.0 } else { diff.signum() * f64::INFINITY };
        return WelchTest { diff, se, t, df: (b.n + c.n - 2) as f64, p_value };
    }
    // With one variance zero this reduces to the other sample's n − 1.
    let df = (vb + vc).powi(2) / (vb.powi(2) / (b.n - 1) as f64 + vc.powi(2) / (c.n - 1) as f64);
    let t = diff / se;
    let p_value = match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * dist.sf(t.abs())).min(1.0),
        Err(_) => f64::NAN,
    };
    WelchTest { diff, se, t, df, p_value }
}

/// The ratio candidate/baseline of geometric means, from Welch's test on
/// the natural logs of the values.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LogRatio {
    /// The test on the logs (its `diff` is the log of the ratio).
    pub test: WelchTest,
}

impl LogRatio {
    /// The ratio estimate, exp(mean log candidate − mean log baseline).
    pub fn ratio(&self) -> f64 {
        self.test.diff.exp()
    }

    /// Confidence interval of the ratio at level `1 - alpha`.
    pub fn interval(&self, alpha: f64) -> (f64, f64) {
        let (lo, hi) = self.test.interval(alpha);
        (lo.exp(), hi.exp())
    }
}

/// Welch's test on the logs: the interval of candidate/baseline includes
/// the baseline's own uncertainty, and is symmetric in the sense that
/// swapping the kernels inverts it exactly.
pub fn log_ratio(baseline: &[f64], candidate: &[f64]) -> Result<LogRatio, WelchError> {
    let logs = |which: &'static str, values: &[f64]| -> Result<Vec<f64>, WelchError> {
        values
            .iter()
            .enumerate()
            .map(|(index, &value)| {
                if !value.is_finite() {
                    Err(WelchError::NonFinite { which, index, value })
                } else if value <= 0.0 {
                    Err(WelchError::NotPositive { which, index, value })
                } else {
                    Ok(value.ln())
                }
            })
            .collect()
    };
    let test = welch_test(&logs("baseline", baseline)?, &logs("candidate", candidate)?)?;
    Ok(LogRatio { test })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    const BASE: [f64; 5] = [384.4, 379.1, 390.2, 386.0, 381.7];
    const CAND: [f64; 4] = [395.3, 401.2, 392.8, 398.9];

    #[test]
    fn matches_scipy_welch() {
        // r = scipy.stats.ttest_ind(CAND, BASE, equal_var=False); ci = r.confidence_interval(0.95)
        // -> 4.807335480998382 0.0020435870068176974 6.882259619377507 6.466863777024748 19.0731362229751
        let w = welch_test(&BASE, &CAND).unwrap();
        assert!(close(w.t, 4.807335480998382, 1e-10), "{w:?}");
        assert!(close(w.p_value, 0.0020435870068176974, 1e-7), "{w:?}");
        assert!(close(w.df, 6.882259619377507, 1e-10), "{w:?}");
        let (lo, hi) = w.interval(0.05);
        assert!(close(lo, 6.466863777024748, 1e-7), "{lo}");
        assert!(close(hi, 19.0731362229751, 1e-7), "{hi}");
    }

    #[test]
    fn log_ratio_matches_scipy_on_logs() {
        // Same samples, np.log applied, then ttest_ind(..., equal_var=False)
        // and np.exp of the interval ends:
        // -> 4.8090364677425335 0.0019991941326355013 6.932156521322969 1.0167307735652362 1.0500309523385216
        let r = log_ratio(&BASE, &CAND).unwrap();
        assert!(close(r.test.t, 4.8090364677425335, 1e-10));
        assert!(close(r.test.p_value, 0.0019991941326355013, 1e-7));
        assert!(close(r.test.df, 6.932156521322969, 1e-10));
        let (lo, hi) = r.interval(0.05);
        assert!(close(lo, 1.0167307735652362, 1e-9), "{lo}");
        assert!(close(hi, 1.0500309523385216, 1e-9), "{hi}");
        // Swapping the kernels inverts the interval exactly.
        let (slo, shi) = log_ratio(&CAND, &BASE).unwrap().interval(0.05);
        assert!(close(slo, 1.0 / hi, 1e-12) && close(shi, 1.0 / lo, 1e-12));
    }

    #[test]
    fn two_boots_each_matches_scipy() {
        // ttest_ind([10.0,10.5],[10.2,9.9],equal_var=False), confidence_interval(0.99)
        // -> 0.6859943405700335 0.5768078135430069 1.637393767705379 -4.047620471897673 4.447620471897672
        let w = welch_test(&[10.2, 9.9], &[10.0, 10.5]).unwrap();
        assert!(close(w.t, 0.6859943405700335, 1e-9));
        assert!(close(w.p_value, 0.5768078135430069, 1e-6));
        assert!(close(w.df, 1.637393767705379, 1e-9));
        let (lo, hi) = w.interval(0.01);
        assert!(close(lo, -4.047620471897673, 1e-6), "{lo}");
        assert!(close(hi, 4.447620471897672, 1e-6), "{hi}");
    }

    #[test]
    fn one_sample_without_variance_matches_scipy() {
        // ttest_ind([5,5,5],[5.5,5.7,5.2,5.9],equal_var=False): df is the other
        // sample's n − 1.
        // -> -3.851204448083033 0.030915207201608046 3.0 -1.0501517739986452 -0.09984822600135324
        let w = welch_test(&[5.5, 5.7, 5.2, 5.9], &[5.0, 5.0, 5.0]).unwrap();
        assert!(close(w.t, -3.851204448083033, 1e-9));
        assert!(close(w.p_value, 0.030915207201608046, 1e-7));
        assert!(close(w.df, 3.0, 1e-12));
        let (lo, hi) = w.interval(0.05);
        assert!(close(lo, -1.0501517739986452, 1e-8) && close(hi, -0.09984822600135324, 1e-8));
    }

    #[test]
    fn zero_variance_in_both_samples_is_defined() {
        let same = welch_test(&[7.0, 7.0, 7.0], &[7.0, 7.0]).unwrap();
        assert_eq!((same.diff, same.p_value, same.t), (0.0, 1.0, 0.0));
        assert_eq!(same.interval(0.05), (0.0, 0.0));
        let apart = welch_test(&[7.0, 7.0], &[8.0, 8.0]).unwrap();
        assert_eq!((apart.diff, apart.p_value), (1.0, 0.0));
        assert_eq!(apart.t, f64::INFINITY);
        assert_eq!(apart.interval(0.05), (1.0, 1.0));
    }

    #[test]
    fn identical_samples_give_no_difference() {
        let w = welch_test(&BASE, &BASE).unwrap();
        assert_eq!(w.diff, 0.0);
        assert!(close(w.p_value, 1.0, 1e-12));
        let (lo, hi) = w.interval(0.05);
        assert!(lo < 0.0 && hi > 0.0 && close(-lo, hi, 1e-12));
    }

    #[test]
    fn bad_samples_are_errors_that_say_which() {
        assert_eq!(welch_test(&[1.0], &[1.0, 2.0]), Err(WelchError::TooFew { which: "baseline", n: 1 }));
        assert_eq!(welch_test(&[1.0, 2.0], &[]), Err(WelchError::TooFew { which: "candidate", n: 0 }));
        let e = welch_test(&[1.0, f64::NAN], &[1.0, 2.0]).unwrap_err();
        assert!(matches!(e, WelchError::NonFinite { which: "baseline", index: 1, .. }), "{e:?}");
        assert!(e.to_string().contains("#1 is NaN"), "{e}");
        let e = log_ratio(&[1.0, 2.0], &[0.0, 2.0]).unwrap_err();
        assert!(matches!(e, WelchError::NotPositive { which: "candidate", index: 0, .. }), "{e}");
    }
}
