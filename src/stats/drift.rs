//! Iteration drift: how much of the spread of iterations within a boot is a
//! reproducible trend over the iteration's position (the same in every
//! boot: page cache, slab and PID state grow as a boot goes on) and how much
//! is noise. A two-way decomposition of the boots × positions table without
//! replication, on the log scale like every comparison (a slower boot slows
//! every iteration in proportion): ln value = overall mean + boot effect +
//! position effect + residual, with an F test of the position effect and a
//! t interval for the change from the first position to the last.
//!
//! Why it matters: a boot's summary is the mean of its iterations, so when
//! iterations drift, two kernels compare fairly only over the same iteration
//! positions (equal `--iterations` and `--warmup`); and the within-boot CV
//! then overstates the noise a comparison sees.

use super::SampleSummary;

/// Errors of the decomposition.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DriftError {
    /// Fewer than two boots.
    #[error("iteration drift needs at least 2 boots; got {0}")]
    TooFewBoots(usize),
    /// Some boot has fewer than two iterations.
    #[error("iteration drift needs at least 2 iterations in every boot; the shortest boot has {0}")]
    TooFewIterations(usize),
    /// A value is NaN, infinite, zero or negative (it has no log).
    #[error("iteration drift: boot {boot} iteration {iteration} is {value}, not a positive finite number (the decomposition is on the log scale)")]
    NonFinite {
        /// Boot index in the input (0-based).
        boot: usize,
        /// Iteration index (0-based).
        iteration: usize,
        /// The value.
        value: f64,
    },
}

/// The decomposition of one metric.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IterationDrift {
    /// Boots analysed.
    pub boots: usize,
    /// Iteration positions analysed: the first this many of every boot
    /// (the shortest boot's count).
    pub positions: usize,
    /// Geometric mean of the analysed values.
    pub mean: f64,
    /// Geometric mean of each position over the boots, in iteration order.
    pub position_means: Vec<f64>,
    /// Standard deviation of the residuals on the log scale (boot and
    /// position effects removed), with (boots − 1)(positions − 1) degrees
    /// of freedom.
    pub residual_sd: f64,
    /// 95% interval of the change from the first position to the last, in
    /// % (a t interval on the log scale, back-transformed); NaN without
    /// residual degrees of freedom.
    pub drift_interval_pct: (f64, f64),
    /// F statistic of the position effect.
    pub f: f64,
    /// p-value of the position effect (F distribution with positions − 1
    /// and (boots − 1)(positions − 1) degrees of freedom).
    pub p_value: f64,
}

impl IterationDrift {
    /// The change from the first position to the last, in % of the first
    /// (ratio of their geometric means).
    pub fn drift_pct(&self) -> f64 {
        let first = self.position_means.first().copied().unwrap_or(f64::NAN);
        let last = self.position_means.last().copied().unwrap_or(f64::NAN);
        100.0 * (last / first - 1.0)
    }

    /// The residuals' coefficient of variation in % (log-normal): the
    /// within-boot noise once the trend over positions is taken out.
    pub fn residual_cv_pct(&self) -> f64 {
        100.0 * self.residual_sd.powi(2).exp_m1().sqrt()
    }
}

/// Decomposes `boots` (each boot's iterations, in order). Uses the first
/// `min(len)` iterations of every boot, so that every position has a value
/// in every boot.
pub fn iteration_drift(boots: &[&[f64]]) -> Result<IterationDrift, DriftError> {
    let b = boots.len();
    if b < 2 {
        return Err(DriftError::TooFewBoots(b));
    }
    let j = boots.iter().map(|v| v.len()).min().unwrap_or(0);
    if j < 2 {
        return Err(DriftError::TooFewIterations(j));
    }
    for (boot, values) in boots.iter().enumerate() {
        if let Some((iteration, &value)) = values[..j].iter().enumerate().find(|(_, v)| !(v.is_finite() && **v > 0.0)) {
            return Err(DriftError::NonFinite { boot, iteration, value });
        }
    }
    let logs: Vec<Vec<f64>> = boots.iter().map(|v| v[..j].iter().map(|x| x.ln()).collect()).collect();
    let boots: Vec<&[f64]> = logs.iter().map(Vec::as_slice).collect();
    let cells: Vec<f64> = boots.iter().flat_map(|v| v.iter().copied()).collect();
    let mean = SampleSummary::of(&cells).map_or(f64::NAN, |s| s.mean);
    let boot_means: Vec<f64> = boots.iter().map(|v| v[..j].iter().sum::<f64>() / j as f64).collect();
    let position_means: Vec<f64> = (0..j).map(|p| boots.iter().map(|v| v[p]).sum::<f64>() / b as f64).collect();

    let ss_position = b as f64 * position_means.iter().map(|p| (p - mean).powi(2)).sum::<f64>();
    let ss_residual: f64 = boots
        .iter()
        .zip(&boot_means)
        .flat_map(|(v, bm)| v[..j].iter().zip(&position_means).map(move |(x, pm)| (x - bm - pm + mean).powi(2)))
        .sum();
    let ss_total: f64 = cells.iter().map(|x| (x - mean).powi(2)).sum();
    let df_position = (j - 1) as f64;
    let df_residual = ((b - 1) * (j - 1)) as f64;
    // Residuals at rounding level count as none: the values are exactly
    // additive (boot level + position level), as in an icount boot.
    let no_residual = ss_residual <= 1e-20 * ss_total;
    use statrs::distribution::{ContinuousCDF, FisherSnedecor, StudentsT};
    let (f, p_value) = if ss_position <= 1e-20 * ss_total || ss_total == 0.0 {
        (0.0, 1.0)
    } else if no_residual {
        (f64::INFINITY, 0.0)
    } else {
        let f = (ss_position / df_position) / (ss_residual / df_residual);
        let p = FisherSnedecor::new(df_position, df_residual).map_or(f64::NAN, |d| d.sf(f));
        (f, p)
    };
    let residual_sd = if no_residual { 0.0 } else { (ss_residual / df_residual).sqrt() };
    // Last position against the first: each mean over b boots, so the
    // contrast's standard error is s·√(2/b).
    let change = position_means[j - 1] - position_means[0];
    let half = StudentsT::new(0.0, 1.0, df_residual)
        .map_or(f64::NAN, |t| t.inverse_cdf(0.975) * residual_sd * (2.0 / b as f64).sqrt());
    Ok(IterationDrift {
        boots: b,
        positions: j,
        mean: mean.exp(),
        position_means: position_means.iter().map(|m| m.exp()).collect(),
        residual_sd,
        drift_interval_pct: (100.0 * (change - half).exp_m1(), 100.0 * (change + half).exp_m1()),
        f,
        p_value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    /// Four icount boots of fork_rate (3 iterations each): the rate falls
    /// from iteration to iteration in every boot alike.
    const FORK: [[f64; 3]; 4] = [
        [2937.4793, 2905.31291, 2894.20896],
        [2936.32751, 2903.89925, 2894.10608],
        [2936.30567, 2902.47706, 2893.76666],
        [2935.93085, 2902.57951, 2896.20634],
    ];

    #[test]
    fn matches_statsmodels_two_way_anova_on_the_logs() {
        // Reference: statsmodels 0.15.0, long table of FORK with columns
        // y = ln(value), boot, pos; fit = ols('y ~ C(boot) + C(pos)', df).fit();
        // anova_lm(fit) -> C(pos): F 1656.3245730533745, PR(>F)
        // 5.909758445437001e-09; sqrt of the residual mean_sq
        // 0.0003720128682363048 (df 6); fit.t_test of C(pos)[T.2]: effect
        // -0.014384857595033971, 95% interval -0.015028524662218906 to
        // -0.013741190527849036.
        let rows: Vec<&[f64]> = FORK.iter().map(|r| r.as_slice()).collect();
        let d = iteration_drift(&rows).unwrap();
        assert_eq!((d.boots, d.positions), (4, 3));
        assert!(close(d.f, 1656.3245730533745, 1e-9), "{d:?}");
        assert!(close(d.p_value, 5.909758445437001e-09, 1e-6), "{d:?}");
        assert!(close(d.residual_sd, 0.0003720128682363048, 1e-9), "{d:?}");
        let pct = |log: f64| 100.0 * log.exp_m1();
        assert!(close(d.drift_pct(), pct(-0.014384857595033971), 1e-9), "{}", d.drift_pct());
        assert!(close(d.drift_interval_pct.0, pct(-0.015028524662218906), 1e-9), "{d:?}");
        assert!(close(d.drift_interval_pct.1, pct(-0.013741190527849036), 1e-9), "{d:?}");
        // Geometric means: the first iteration's over the four boots.
        let first: f64 = FORK.iter().map(|r| r[0].ln()).sum::<f64>() / 4.0;
        assert!(close(d.position_means[0], first.exp(), 1e-12), "{d:?}");
        // −1.43% from the first iteration to the last, noise 0.04%.
        assert!(d.residual_cv_pct() < 0.04, "{}", d.residual_cv_pct());
    }

    #[test]
    fn unequal_boots_use_the_common_positions_and_noise_alone_is_not_drift() {
        // statsmodels as above on the logs of the first 3 iterations:
        // -> C(pos): F 0.08339724092550159, PR(>F) 0.9215434612540924;
        // last against first -6.734687028383762e-05, 95% interval
        // -0.05189881929621877 to 0.05176412555565109.
        let a = [10.0, 10.3, 9.8, 55.0];
        let b = [10.2, 9.9, 10.1];
        let c = [9.9, 10.1, 10.2, 1.0, 2.0];
        let d = iteration_drift(&[&a, &b, &c]).unwrap();
        assert_eq!(d.positions, 3);
        assert!(close(d.f, 0.08339724092550159, 1e-9), "{d:?}");
        assert!(close(d.p_value, 0.9215434612540924, 1e-7), "{d:?}");
        let (lo, hi) = d.drift_interval_pct;
        assert!(close(lo, 100.0 * (-0.05189881929621877f64).exp_m1(), 1e-9), "{d:?}");
        assert!(close(hi, 100.0 * 0.05176412555565109f64.exp_m1(), 1e-9), "{d:?}");
    }

    #[test]
    fn exact_cases() {
        // Identical values everywhere: no drift, no noise.
        let same = [5.0, 5.0, 5.0];
        let d = iteration_drift(&[&same, &same]).unwrap();
        assert_eq!((d.f, d.p_value, d.residual_sd, d.drift_pct()), (0.0, 1.0, 0.0, 0.0));
        // Boot level × position level exactly: pure drift, certain.
        let d = iteration_drift(&[&[10.0, 9.0, 8.0], &[11.0, 9.9, 8.8]]).unwrap();
        assert_eq!((d.f, d.p_value, d.residual_sd), (f64::INFINITY, 0.0, 0.0));
        assert!(close(d.drift_pct(), -20.0, 1e-12), "{}", d.drift_pct());
        assert!(close(d.drift_interval_pct.0, -20.0, 1e-12) && close(d.drift_interval_pct.1, -20.0, 1e-12), "{d:?}");
        // Boots differ, positions do not: no drift.
        let d = iteration_drift(&[&[10.0, 10.0], &[12.0, 12.0]]).unwrap();
        assert_eq!((d.f, d.p_value), (0.0, 1.0));
    }

    #[test]
    fn bad_input_is_an_error_naming_it() {
        assert_eq!(iteration_drift(&[&[1.0, 2.0]]), Err(DriftError::TooFewBoots(1)));
        assert_eq!(iteration_drift(&[&[1.0, 2.0], &[3.0]]), Err(DriftError::TooFewIterations(1)));
        let e = iteration_drift(&[&[1.0, 2.0], &[3.0, f64::NAN]]).unwrap_err();
        assert!(matches!(e, DriftError::NonFinite { boot: 1, iteration: 1, .. }), "{e:?}");
        assert!(e.to_string().contains("boot 1 iteration 1 is NaN"), "{e}");
        let e = iteration_drift(&[&[1.0, 0.0], &[3.0, 2.0]]).unwrap_err();
        assert!(e.to_string().contains("boot 0 iteration 1 is 0, not a positive"), "{e}");
    }
}
