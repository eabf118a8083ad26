//! Fieller's confidence interval for the ratio of two independent means,
//! candidate mean / baseline mean. Offered beside the log-scale ratio
//! because it works on raw values (zero or negative values allowed) and
//! says honestly when the baseline mean is too uncertain for a bounded
//! interval.

use super::{t_critical, SampleSummary};

/// Errors of Fieller's interval.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FiellerError {
    /// A sample has fewer than two values.
    #[error("the {which} sample has {n} value(s); Fieller's interval needs at least 2")]
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
        /// 0-based index.
        index: usize,
        /// The value.
        value: f64,
    },
    /// The baseline mean is exactly zero: there is no ratio.
    #[error("the baseline mean is 0; a ratio to it is undefined")]
    ZeroBaseline,
}

/// A ratio interval: bounded, or not (the baseline mean is not
/// distinguishable from zero at the chosen level).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RatioInterval {
    /// `lo ≤ ratio ≤ hi`.
    Bounded {
        /// Lower end.
        lo: f64,
        /// Upper end.
        hi: f64,
    },
    /// The confidence set is unbounded (two half-lines or the whole line).
    Unbounded,
}

/// Fieller's analysis of candidate mean / baseline mean.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Fieller {
    /// Baseline summary.
    pub baseline: SampleSummary,
    /// Candidate summary.
    pub candidate: SampleSummary,
}

fn check(which: &'static str, values: &[f64]) -> Result<SampleSummary, FiellerError> {
    if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(FiellerError::NonFinite { which, index, value });
    }
    match SampleSummary::of(values) {
        Some(s) if s.n >= 2 => Ok(s),
        _ => Err(FiellerError::TooFew { which, n: values.len() }),
    }
}

/// Prepares Fieller's interval for two independent samples.
pub fn fieller(baseline: &[f64], candidate: &[f64]) -> Result<Fieller, FiellerError> {
    let b = check("baseline", baseline)?;
    let c = check("candidate", candidate)?;
    if b.mean == 0.0 {
        return Err(FiellerError::ZeroBaseline);
    }
    Ok(Fieller { baseline: b, candidate: c })
}

impl Fieller {
    /// The point estimate, candidate mean / baseline mean.
    pub fn ratio(&self) -> f64 {
        self.candidate.mean / self.baseline.mean
    }

    /// Welch–Satterthwaite degrees of freedom of candidate − ρ·baseline at
    /// the point estimate ρ (the usual choice for unequal variances).
    pub fn df(&self) -> f64 {
        let rho = self.ratio();
        let vc = self.candidate.var_of_mean();
        let vb = rho * rho * self.baseline.var_of_mean();
        let num = (vc + vb).powi(2);
        let den = vc.powi(2) / (self.candidate.n - 1) as f64 + vb.powi(2) / (self.baseline.n - 1) as f64;
        if den == 0.0 {
            (self.candidate.n + self.baseline.n - 2) as f64
        } else {
            num / den
        }
    }

    /// Two-sided p-value of "the ratio is 1": the statistic the interval
    /// inverts, |c̄ − b̄| / sqrt(s_c²/n_c + s_b²/n_b), with the interval's
    /// degrees of freedom, so that it is below α exactly when a bounded
    /// interval at 1 − α leaves 1 out.
    pub fn p_value_at_one(&self) -> f64 {
        use statrs::distribution::{ContinuousCDF, StudentsT};
        let se = (self.candidate.var_of_mean() + self.baseline.var_of_mean()).sqrt();
        let d = (self.candidate.mean - self.baseline.mean).abs();
        if se == 0.0 {
            return if d == 0.0 { 1.0 } else { 0.0 };
        }
        StudentsT::new(0.0, 1.0, self.df()).map_or(f64::NAN, |t| 2.0 * t.sf(d / se))
    }

    /// The interval at level `1 - alpha`: the set of ρ for which
    /// |c̄ − ρ b̄| / sqrt(s_c²/n_c + ρ² s_b²/n_b) ≤ t, solved as a quadratic.
    pub fn interval(&self, alpha: f64) -> RatioInterval {
        let (mb, mc) = (self.baseline.mean, self.candidate.mean);
        let (vb, vc) = (self.baseline.var_of_mean(), self.candidate.var_of_mean());
        let t = t_critical(alpha, self.df());
        let t2 = if vb == 0.0 && vc == 0.0 { 0.0 } else { t * t };
        let a = mb * mb - t2 * vb;
        let b = -2.0 * mc * mb;
        let c = mc * mc - t2 * vc;
        if a <= 0.0 || !t2.is_finite() {
            return RatioInterval::Unbounded;
        }
        let disc = b * b - 4.0 * a * c;
        // a > 0 implies disc ≥ 0 in exact arithmetic; clamp rounding noise.
        let root = disc.max(0.0).sqrt();
        // The numerically stable pair of roots.
        let q = -0.5 * (b + b.signum() * root);
        let (r1, r2) = if q == 0.0 { (0.0, 0.0) } else { (q / a, c / q) };
        RatioInterval::Bounded { lo: r1.min(r2), hi: r1.max(r2) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: [f64; 5] = [384.4, 379.1, 390.2, 386.0, 381.7];
    const CAND: [f64; 4] = [395.3, 401.2, 392.8, 398.9];

    /// The defining property: at each end the pivot equals the t quantile.
    fn pivot(f: &Fieller, rho: f64) -> f64 {
        (f.candidate.mean - rho * f.baseline.mean).abs()
            / (f.candidate.var_of_mean() + rho * rho * f.baseline.var_of_mean()).sqrt()
    }

    #[test]
    fn ends_satisfy_the_fieller_pivot() {
        let f = fieller(&BASE, &CAND).unwrap();
        let t = t_critical(0.05, f.df());
        let RatioInterval::Bounded { lo, hi } = f.interval(0.05) else { panic!("unbounded") };
        assert!(lo < f.ratio() && f.ratio() < hi);
        assert!((pivot(&f, lo) - t).abs() < 1e-9, "{} vs {t}", pivot(&f, lo));
        assert!((pivot(&f, hi) - t).abs() < 1e-9);
    }

    #[test]
    fn matches_an_independent_computation() {
        // Independent check with SciPy: solve the pivot equation by root
        // finding instead of the quadratic formula.
        //   import numpy as np; from scipy import stats, optimize
        //   b=np.array(BASE); c=np.array(CAND); vb=b.var(ddof=1)/5; vc=c.var(ddof=1)/4
        //   r=c.mean()/b.mean(); df=(vc+r*r*vb)**2/(vc**2/3+(r*r*vb)**2/4); t=stats.t.ppf(.975,df)
        //   g=lambda x: abs(c.mean()-x*b.mean())/np.sqrt(vc+x*x*vb)-t
        //   optimize.brentq(g,0.9,r), optimize.brentq(g,r,1.2)
        // -> (1.016714362647589, 1.050028474973753), df 6.93368122464187
        let f = fieller(&BASE, &CAND).unwrap();
        assert!((f.df() - 6.93368122464187).abs() < 1e-9, "{}", f.df());
        let RatioInterval::Bounded { lo, hi } = f.interval(0.05) else { panic!("unbounded") };
        assert!((lo - 1.016714362647589).abs() < 1e-10, "{lo}");
        assert!((hi - 1.050028474973753).abs() < 1e-10, "{hi}");
    }

    #[test]
    fn uncertain_baseline_gives_an_unbounded_interval() {
        let f = fieller(&[-1.0, 0.5, 1.2], &[3.0, 3.1, 2.9]).unwrap();
        assert_eq!(f.interval(0.05), RatioInterval::Unbounded);
    }

    #[test]
    fn zero_variance_gives_the_exact_ratio() {
        let f = fieller(&[4.0, 4.0], &[5.0, 5.0]).unwrap();
        assert_eq!(f.interval(0.05), RatioInterval::Bounded { lo: 1.25, hi: 1.25 });
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        assert_eq!(fieller(&[0.0, 0.0], &[1.0, 2.0]).unwrap_err(), FiellerError::ZeroBaseline);
        assert_eq!(fieller(&[1.0], &[1.0, 2.0]).unwrap_err(), FiellerError::TooFew { which: "baseline", n: 1 });
        let e = fieller(&[1.0, 2.0], &[1.0, f64::INFINITY]).unwrap_err();
        assert!(e.to_string().contains("candidate sample's value #1 is inf"), "{e}");
    }
}
