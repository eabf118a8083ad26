//! Corrections for comparing many metrics at once: Holm's step-down
//! (family-wise error) and Benjamini–Hochberg (false discovery rate).
//! Besides adjusted p-values, each test gets the per-test level at which
//! its confidence interval must be drawn so that "the interval excludes the
//! null" and "the corrected test rejects" always agree.

use serde::Serialize;

/// Which correction to apply over a family of tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Correction {
    /// Holm's step-down: controls the chance of any false claim.
    Holm,
    /// Benjamini–Hochberg: controls the expected share of false claims;
    /// intervals are Benjamini–Yekutieli's FCR-adjusted intervals.
    BenjaminiHochberg,
    /// No correction (each test at the nominal level).
    None,
}

/// Errors parsing a correction's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown correction '{0}' (expected holm, bh or none)")]
pub struct UnknownCorrection(pub String);

impl std::str::FromStr for Correction {
    type Err = UnknownCorrection;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "holm" => Ok(Correction::Holm),
            "bh" | "benjamini-hochberg" | "fdr" => Ok(Correction::BenjaminiHochberg),
            "none" => Ok(Correction::None),
            other => Err(UnknownCorrection(other.to_string())),
        }
    }
}

impl std::fmt::Display for Correction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Correction::Holm => "Holm",
            Correction::BenjaminiHochberg => "Benjamini-Hochberg",
            Correction::None => "no correction",
        })
    }
}

/// One test after correction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Adjusted {
    /// The adjusted p-value (Holm: step-down; BH: step-up); NaN input
    /// counts as 1.
    pub p_adjusted: f64,
    /// The per-test level: draw this test's interval at `1 - alpha`.
    pub alpha: f64,
    /// Whether the corrected test rejects at the family level.
    pub rejected: bool,
}

/// Corrects the p-values of one family at family level `alpha`. A NaN
/// p-value (a test that could not be run) is treated as 1: it still counts
/// in the family size, so leaving a metric untested cannot buy power.
pub fn adjust(p_values: &[f64], alpha: f64, method: Correction) -> Vec<Adjusted> {
    let m = p_values.len();
    let p: Vec<f64> = p_values.iter().map(|&x| if x.is_nan() { 1.0 } else { x.clamp(0.0, 1.0) }).collect();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![Adjusted { p_adjusted: 1.0, alpha, rejected: false }; m];
    match method {
        Correction::None => {
            for (o, &x) in out.iter_mut().zip(&p) {
                *o = Adjusted { p_adjusted: x, alpha, rejected: x <= alpha };
            }
        }
        Correction::Holm => {
            // Rank k (1-based) is tested at alpha/(m-k+1) while every
            // smaller rank was rejected; from the first failure on, every
            // later test uses that failure's level, at which it cannot
            // reject either (its p is at least as large).
            let mut running = 0.0f64;
            let mut stopped: Option<usize> = None;
            for (rank0, &i) in order.iter().enumerate() {
                let k = rank0 + 1;
                running = running.max(((m - k + 1) as f64 * p[i]).min(1.0));
                let own_level = alpha / (m - k + 1) as f64;
                if stopped.is_none() && p[i] > own_level {
                    stopped = Some(k);
                }
                let level_rank = stopped.map_or(k, |s| s.min(k));
                out[i] = Adjusted {
                    p_adjusted: running,
                    alpha: alpha / (m - level_rank + 1) as f64,
                    rejected: stopped.is_none(),
                };
            }
        }
        Correction::BenjaminiHochberg => {
            let mut running = 1.0f64;
            for (rank0, &i) in order.iter().enumerate().rev() {
                let k = rank0 + 1;
                running = running.min((m as f64 * p[i] / k as f64).min(1.0));
                out[i].p_adjusted = running;
            }
            let r = out.iter().filter(|a| a.p_adjusted <= alpha).count();
            // FCR-adjusted level (Benjamini & Yekutieli 2005): R·alpha/m for
            // every interval; with no rejection, alpha/m.
            let level = r.max(1) as f64 * alpha / m as f64;
            for a in &mut out {
                a.rejected = a.p_adjusted <= alpha;
                a.alpha = level;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: [f64; 6] = [0.009, 0.04, 0.03, 0.005, 0.20, 0.6];

    #[test]
    fn holm_by_hand() {
        // Sorted: 0.005·6=0.030, 0.009·5=0.045, 0.03·4=0.12, 0.04·3=0.12,
        // 0.2·2=0.4, 0.6·1=0.6, running maximum; ranks 1 and 2 reject at
        // 0.05/6 and 0.05/5, rank 3 fails at 0.05/4 and fixes the level of
        // every later rank.
        let a = adjust(&P, 0.05, Correction::Holm);
        let want = [0.045, 0.12, 0.12, 0.03, 0.4, 0.6];
        for (got, w) in a.iter().zip(want) {
            assert!((got.p_adjusted - w).abs() < 1e-12, "{a:?}");
        }
        let rejected: Vec<bool> = a.iter().map(|x| x.rejected).collect();
        assert_eq!(rejected, [true, false, false, true, false, false]);
        let levels: Vec<f64> = a.iter().map(|x| x.alpha).collect();
        let want = [0.05 / 5.0, 0.05 / 4.0, 0.05 / 4.0, 0.05 / 6.0, 0.05 / 4.0, 0.05 / 4.0];
        for (g, w) in levels.iter().zip(want) {
            assert!((g - w).abs() < 1e-15, "{levels:?}");
        }
        // The interval rule agrees with the rejections: p ≤ level ⇔ rejected.
        for ((x, &p), a) in a.iter().zip(&P).zip(&a) {
            assert_eq!(p <= x.alpha, a.rejected);
        }
    }

    #[test]
    fn bh_matches_scipy() {
        // scipy.stats.false_discovery_control([0.009,0.04,0.03,0.005,0.20,0.6])
        // -> 0.027 0.06 0.06 0.027 0.24 0.6
        let a = adjust(&P, 0.05, Correction::BenjaminiHochberg);
        let want = [0.027, 0.06, 0.06, 0.027, 0.24, 0.6];
        for (got, w) in a.iter().zip(want) {
            assert!((got.p_adjusted - w).abs() < 1e-12, "{a:?}");
        }
        // Two rejections: every interval at 2·0.05/6.
        assert!(a.iter().all(|x| (x.alpha - 2.0 * 0.05 / 6.0).abs() < 1e-15));
        for (x, &p) in a.iter().zip(&P) {
            assert_eq!(p <= x.alpha, x.rejected);
        }
    }

    #[test]
    fn single_test_and_untested_metrics() {
        let a = adjust(&[0.03], 0.05, Correction::Holm);
        assert_eq!(a[0], Adjusted { p_adjusted: 0.03, alpha: 0.05, rejected: true });
        // An untested metric (NaN) counts in the family but never rejects.
        let a = adjust(&[0.03, f64::NAN], 0.05, Correction::Holm);
        assert_eq!(a[0].p_adjusted, 0.06);
        assert!(!a[0].rejected && !a[1].rejected);
        assert!(adjust(&[], 0.05, Correction::Holm).is_empty());
        let none = adjust(&[0.03, 0.2], 0.05, Correction::None);
        assert!(none[0].rejected && !none[1].rejected && none[1].alpha == 0.05);
        assert_eq!("bh".parse::<Correction>().unwrap(), Correction::BenjaminiHochberg);
        assert!("bonferoni".parse::<Correction>().unwrap_err().to_string().contains("bonferoni"));
    }
}
