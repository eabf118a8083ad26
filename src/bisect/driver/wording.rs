//! How the bisection's numbers read: metric values with sensible digits,
//! and a sequential test's evaluation in words, for the event log and the
//! reports. Pure formatting: it names nothing else in `driver`.

use crate::bisect::sequential_test::{Decision, Evaluation};

/// How an evaluation reads in words.
pub fn explain(e: &Evaluation) -> String {
    let g = e.model.good.mean.exp();
    let b = e.model.bad.mean.exp();
    let c = e.candidate_log_mean.map(f64::exp).unwrap_or(f64::NAN);
    let verdict = match e.decision {
        Decision::Bad => format!("Λ = {:.2} ≥ ln(1/α) = {:.2}", e.llr, e.upper),
        Decision::Good => format!("Λ = {:.2} ≤ ln β = {:.2}", e.llr, e.lower),
        Decision::Unsure | Decision::Continue => {
            format!("Λ = {:.2} between ln β = {:.2} and ln(1/α) = {:.2}", e.llr, e.lower, e.upper)
        }
    };
    let sigma = match e.model.per_end {
        Some(p) => format!(
            "σ good {:.2}%, bad {:.2}%: the ends' spreads differ, F test p = {:.2e}",
            100.0 * p.good,
            100.0 * p.bad,
            p.p_equal
        ),
        None => format!("σ {:.2}%", 100.0 * e.sigma_used),
    };
    let drift = match e.model.drift {
        Some(d) => format!("; the host's drift of {:+.3}% per boot taken out", 100.0 * d.slope.exp_m1()),
        None => String::new(),
    };
    format!(
        "{verdict} after {} boot(s); mean {} is {:.0}% of the way from good {} to bad {} ({sigma}{drift})",
        e.n,
        fmt_value(c),
        100.0 * e.position.unwrap_or(f64::NAN),
        fmt_value(g),
        fmt_value(b),
    )
}

/// A metric value with sensible digits.
pub fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 1000.0 {
        format!("{v:.1}")
    } else if v.abs() >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::sequential_test::{evaluate, LogSummary, PerEndSigma, ReferenceModel, TestPlan, VarianceBound};

    #[test]
    fn a_test_with_each_ends_sigma_says_so() {
        let mut model = ReferenceModel {
            good: LogSummary { n: 10, mean: 100f64.ln(), variance: 1e-4 },
            bad: LogSummary { n: 10, mean: 95f64.ln(), variance: 1.6e-3 },
            sigma: 0.03,
            df: 18,
            per_end: None,
            drift: None,
        };
        let plan = TestPlan { alpha: 0.01, beta: 0.01, min_boots: 1, max_boots: 10, variance: VarianceBound::PlugIn };
        assert!(explain(&evaluate(&model, &plan, &[99.0]).unwrap()).ends_with("(σ 3.00%)"));
        model.per_end = Some(PerEndSigma { good: 0.01, good_df: 9, bad: 0.04, bad_df: 9, p_equal: 2e-4 });
        let text = explain(&evaluate(&model, &plan, &[99.0]).unwrap());
        assert!(text.ends_with("(σ good 1.00%, bad 4.00%: the ends' spreads differ, F test p = 2.00e-4)"), "{text}");
        model.per_end = None;
        model.drift = Some(crate::bisect::drift_term::DriftTerm { slope: -2e-4, ..Default::default() });
        let text = explain(&evaluate(&model, &plan, &[99.0]).unwrap());
        assert!(text.ends_with("(σ 3.00%; the host's drift of -0.020% per boot taken out)"), "{text}");
    }
}
