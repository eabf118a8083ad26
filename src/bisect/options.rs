//! The statistical plan of a bisection as options (shared by `bisect`,
//! `bisect-run` and `bisect-sim`), with the parsers of their values.

use crate::bisect::sequential_test::VarianceBound;
use crate::bisect::state::{Mode, Plan};
use anyhow::{bail, Context};

/// Parses `5%` or `0.05` as a fraction.
pub fn parse_fraction(what: &str, s: &str) -> anyhow::Result<f64> {
    let t = s.trim();
    let (num, pct) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let v: f64 = num
        .parse()
        .with_context(|| format!("bad {what} '{s}': expected a percentage like 5% or a fraction like 0.05"))?;
    let v = if pct { v / 100.0 } else { v };
    if !pct && v >= 1.0 {
        bail!("bad {what} '{s}': a bare number must be a fraction below 1 (write {v}% for a percentage)");
    }
    if !(v.is_finite() && (0.0..1.0).contains(&v)) {
        bail!("bad {what} '{s}': must be at least 0% and below 100%");
    }
    Ok(v)
}

fn parse_variance(s: &str) -> anyhow::Result<VarianceBound> {
    match s.split_once(':') {
        None if s == "plugin" => Ok(VarianceBound::PlugIn),
        Some(("upper", c)) => {
            let c = parse_fraction("--variance confidence", c)?;
            if !(0.5..1.0).contains(&c) {
                bail!("bad --variance '{s}': the confidence must be in [0.5, 1)");
            }
            Ok(VarianceBound::Upper(c))
        }
        _ => bail!("bad --variance '{s}': expected plugin or upper:CONFIDENCE (e.g. upper:0.75)"),
    }
}

/// The statistical options shared by `bisect`, `bisect-run` and `bisect-sim`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// The metric to bisect, WORKLOAD.METRIC.
    #[arg(long, default_value = "fork.fork_rate")]
    pub metric: String,
    /// Smallest change between the ends worth bisecting (e.g. 3%): the ends
    /// must differ significantly and by at least this much.
    #[arg(long, default_value = "2%")]
    pub threshold: String,
    /// Highest rate at which the whole bisection may name a wrong culprit.
    #[arg(long, default_value = "5%")]
    pub wrong_culprit_rate: String,
    /// Nominal error rate of each bisection step (α = β), e.g. 3%: the
    /// confirmation at the end (each commit against the ends, then the
    /// culprit against its parent) keeps --wrong-culprit-rate, and a wrong
    /// step it catches is revised. The rate the steps really have (σ
    /// estimated, ends selected) is what `bisect-sim` prints. `union`
    /// instead splits --wrong-culprit-rate over every test (steps and
    /// confirmations): costlier. `bisect-run` has no confirmation and
    /// ignores it.
    #[arg(long, default_value = "3%")]
    pub step_rate: String,
    /// Candidate boots per step at most; still unsure after them, the step
    /// is skipped.
    #[arg(long, default_value_t = 8)]
    pub max_boots: u32,
    /// Candidate boots before a step may decide.
    #[arg(long, default_value_t = 2)]
    pub min_boots: u32,
    /// Boots of each end before bisecting.
    #[arg(long, default_value_t = 6)]
    pub reference_boots: u32,
    /// Boots of each end at most while the ends' difference is unclear.
    #[arg(long, default_value_t = 16)]
    pub max_reference_boots: u32,
    /// Boots of each end at most over the whole bisection (steps add some
    /// while the ends are too imprecise for the test to decide).
    #[arg(long, default_value_t = 40)]
    pub reference_cap: u32,
    /// Significance the ends must differ at before bisecting (Bonferroni
    /// over the looks while boots are added).
    #[arg(long, default_value = "5%")]
    pub ends_alpha: String,
    /// One reference boot after this many candidate boots (0: none).
    #[arg(long, default_value_t = 4)]
    pub reference_every: u32,
    /// Tests compare a candidate with the ends' boots among the last this
    /// many boots (at least the 4 most recent of each end), so a host that
    /// drifts overnight moves both alike; 0 takes every boot of the ends.
    #[arg(long, default_value_t = crate::bisect::state::DEFAULT_REFERENCE_WINDOW)]
    pub reference_window: u32,
    /// σ used by the sequential test: plugin, or upper:CONFIDENCE.
    #[arg(long, default_value = "upper:0.75")]
    pub variance: String,
    /// Verdicts a failed confirmation may revise (each revision bisects on
    /// from the corrected bound) before the culprit is reported unconfirmed.
    #[arg(long, default_value_t = 2)]
    pub max_revisions: u32,
    /// Changes to find at most. A confirmed culprit that carries
    /// significantly less (or more) than the ends' whole change leaves the
    /// rest before its parent or after it; those sides are bisected with
    /// their own ends for the other changes, and every change found is
    /// reported with its share. 1 stops at the first; `bisect-run` (one
    /// step for `git bisect`) ignores it.
    #[arg(long, default_value_t = crate::bisect::state::DEFAULT_MAX_CHANGES)]
    pub max_changes: u32,
    /// perf (a metric) or boot (good boots, bad panics or hangs).
    #[arg(long, default_value = "perf")]
    pub mode: Mode,
    /// Boot mode: clean boots a commit needs to be good.
    #[arg(long, default_value_t = 2)]
    pub boot_tries: u32,
}

impl PlanArgs {
    /// The plan these options describe.
    pub fn plan(&self) -> anyhow::Result<Plan> {
        if self.max_boots == 0 || self.max_boots < self.min_boots {
            bail!("--max-boots {} must be at least 1 and at least --min-boots {}", self.max_boots, self.min_boots);
        }
        if self.reference_boots < 2 {
            bail!("--reference-boots must be at least 2 (the spread of the ends is estimated from them)");
        }
        if self.max_changes == 0 {
            bail!("--max-changes must be at least 1 (the first change)");
        }
        let rate = parse_fraction("--wrong-culprit-rate", &self.wrong_culprit_rate)?;
        let ends_alpha = parse_fraction("--ends-alpha", &self.ends_alpha)?;
        if ends_alpha <= 0.0 {
            bail!("--ends-alpha must be above 0%");
        }
        if !(rate > 0.0 && rate < 0.5) {
            bail!("--wrong-culprit-rate must be above 0% and below 50%");
        }
        let step_rate = match self.step_rate.as_str() {
            "union" => None,
            s => {
                let a = parse_fraction("--step-rate", s)?;
                if !(a > 0.0 && a < 0.5) {
                    bail!("--step-rate must be above 0% and below 50% (or union)");
                }
                Some(a)
            }
        };
        Ok(Plan {
            mode: self.mode,
            step_rate,
            metric: self.metric.clone(),
            threshold: parse_fraction("--threshold", &self.threshold)?,
            wrong_culprit_rate: rate,
            min_boots: self.min_boots,
            max_boots: self.max_boots,
            reference_boots: self.reference_boots,
            max_reference_boots: self.max_reference_boots.max(self.reference_boots),
            reference_cap: self.reference_cap.max(self.reference_boots),
            ends_alpha,
            reference_every: self.reference_every,
            reference_window: self.reference_window,
            variance: parse_variance(&self.variance)?,
            boot_tries: self.boot_tries.max(1),
            max_revisions: self.max_revisions,
            max_changes: self.max_changes,
            ..Plan::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_parse_and_refuse_nonsense() {
        assert_eq!(parse_fraction("x", "5%").unwrap(), 0.05);
        assert_eq!(parse_fraction("x", "0.05").unwrap(), 0.05);
        assert_eq!(parse_fraction("x", " 2.5 % ").unwrap(), 0.025);
        for bad in ["5", "abc", "-1%", "100%", "", "nan%"] {
            let e = parse_fraction("--threshold", bad).unwrap_err().to_string();
            assert!(e.contains("--threshold") && e.contains(&format!("'{bad}'")), "{bad}: {e}");
        }
    }

    #[test]
    fn variance_options_parse() {
        assert_eq!(parse_variance("plugin").unwrap(), VarianceBound::PlugIn);
        assert_eq!(parse_variance("upper:0.8").unwrap(), VarianceBound::Upper(0.8));
        assert_eq!(parse_variance("upper:75%").unwrap(), VarianceBound::Upper(0.75));
        assert!(parse_variance("upper:0.2").is_err());
        assert!(parse_variance("sometimes").is_err());
    }
}
