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
    format!(
        "{verdict} after {} boot(s); mean {} is {:.0}% of the way from good {} to bad {} (σ {:.2}%)",
        e.n,
        fmt_value(c),
        100.0 * e.position.unwrap_or(f64::NAN),
        fmt_value(g),
        fmt_value(b),
        100.0 * e.sigma_used
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
