//! `bootbench bisect-sim`: the bisection strategy measured on synthetic
//! noisy histories.

use crate::bisect::options::{parse_fraction, PlanArgs};
use crate::bisect::simulate::{self, Disturbance, NoiseModel, Scenario};
use anyhow::Context;
use std::process::ExitCode;

/// Options of `bootbench bisect-sim`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Commits in the range.
    #[arg(long, default_value_t = 1000)]
    pub commits: u64,
    /// The regression at the culprit (a higher-is-better metric drops by it).
    #[arg(long, default_value = "5%")]
    pub regression: String,
    /// Noise of one iteration (coefficient of variation).
    #[arg(long, default_value = "6%")]
    pub iteration_cv: String,
    /// Noise of a boot's level, between boots.
    #[arg(long, default_value = "1%")]
    pub boot_cv: String,
    /// Iterations per boot.
    #[arg(long, default_value_t = 5)]
    pub iterations: u32,
    /// Probability that a commit fails to build.
    #[arg(long, default_value = "0%")]
    pub build_failure_rate: String,
    /// Bisections per strategy.
    #[arg(long, default_value_t = 1000)]
    pub runs: usize,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Boots per step of the fixed strategy compared against.
    #[arg(long, default_value_t = 10)]
    pub fixed_boots: u32,
    /// Also find the fixed strategy (2, 4, ... boots per step, up to this
    /// many) that reaches the sequential strategy's measured rate of wrong
    /// culprits, and compare at that matched rate; 0 does not.
    #[arg(long, default_value_t = 40)]
    pub match_up_to: u32,
    /// A second regression at another random commit in the range (e.g. 5%).
    #[arg(long)]
    pub second_regression: Option<String>,
    /// Host drift: every kernel's level changes by this much per boot
    /// (e.g. -0.02%).
    #[arg(long, default_value = "0%", allow_hyphen_values = true)]
    pub drift: String,
    /// Outlier boots: RATExFACTOR, e.g. `1%x1.5` (1% of boots at 1.5 times
    /// their level).
    #[arg(long)]
    pub outliers: Option<String>,
    /// Heavier tails than log-normal: boot factors from Student's t with
    /// these degrees of freedom (above 2); 0 keeps the normal.
    #[arg(long, default_value_t = 0.0)]
    pub tail_df: f64,
    /// Unequal σ at the ends: the noise of commits at and after the culprit
    /// is this many times the noise before it.
    #[arg(long, default_value_t = 1.0)]
    pub bad_sigma: f64,
    /// The sequential strategy's statistics.
    #[command(flatten)]
    pub plan: PlanArgs,
}

/// Runs `bootbench bisect-sim`.
pub fn bisect_sim(args: &SimArgs) -> anyhow::Result<ExitCode> {
    let outliers = match args.outliers.as_deref() {
        None => (0.0, 1.0),
        Some(s) => {
            let (rate, factor) = s
                .split_once('x')
                .with_context(|| format!("bad --outliers '{s}': expected RATExFACTOR, e.g. 1%x1.5"))?;
            let factor: f64 = factor
                .trim()
                .parse()
                .ok()
                .filter(|f: &f64| f.is_finite() && *f > 0.0)
                .with_context(|| format!("bad --outliers '{s}': the factor must be a positive number"))?;
            (parse_fraction("--outliers rate", rate)?, factor)
        }
    };
    let scenario = Scenario {
        commits: args.commits,
        regression: parse_fraction("--regression", &args.regression)?,
        noise: NoiseModel {
            iteration_cv: parse_fraction("--iteration-cv", &args.iteration_cv)?,
            boot_cv: parse_fraction("--boot-cv", &args.boot_cv)?,
            iterations: args.iterations.max(1),
        },
        build_failure_rate: parse_fraction("--build-failure-rate", &args.build_failure_rate)?,
        runs: args.runs,
        seed: args.seed,
        second_regression: args
            .second_regression
            .as_deref()
            .map(|r| parse_fraction("--second-regression", r))
            .transpose()?,
        disturb: Disturbance {
            drift_per_boot: parse_drift(&args.drift)?,
            outlier_rate: outliers.0,
            outlier_factor: outliers.1,
            tail_df: args.tail_df,
            bad_sigma_factor: args.bad_sigma,
        },
    };
    let plan = args.plan.plan()?;
    let t0 = std::time::Instant::now();
    let seq = simulate::run_strategy("sequential", &plan, &scenario)?;
    let fixed = simulate::run_strategy(
        &format!("fixed-{}", args.fixed_boots),
        &simulate::fixed_plan(&plan, args.fixed_boots),
        &scenario,
    )?;
    let mut figures = vec![seq, fixed];
    let mut unmatched = None;
    if args.match_up_to > 0 {
        let rate = figures[0].wrong_rate();
        match simulate::matched_fixed(&plan, &scenario, rate, args.match_up_to)? {
            Some(m) => figures.push(m),
            None => unmatched = Some(rate),
        }
    }
    print!("{}", simulate::render(&scenario, &figures));
    if let Some(rate) = unmatched {
        println!(
            "no fixed strategy of up to {} boots per step reached the sequential strategy's {:.2}% wrong culprits",
            args.match_up_to,
            100.0 * rate
        );
    }
    log::info!("{:.1} s", t0.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

/// A drift per boot: a signed percentage or fraction, below 1% in size.
fn parse_drift(s: &str) -> anyhow::Result<f64> {
    let t = s.trim();
    let (sign, rest) = match t.strip_prefix('-') {
        Some(r) => (-1.0, r),
        None => (1.0, t.strip_prefix('+').unwrap_or(t)),
    };
    let why = || anyhow::anyhow!("bad --drift '{s}': expected a signed percentage below 1% in size, e.g. -0.02%");
    let v = sign * parse_fraction("--drift", rest).map_err(|_| why())?;
    if v.abs() >= 0.01 {
        return Err(why());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_takes_a_sign_and_refuses_what_is_not_a_small_rate() {
        assert_eq!(parse_drift("-0.02%").unwrap(), -0.0002);
        assert_eq!(parse_drift("+0.04%").unwrap(), 0.0004);
        assert_eq!(parse_drift("0").unwrap(), 0.0);
        for bad in ["-2%", "x", "--1%", "5%"] {
            let e = parse_drift(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("bad --drift '{bad}': ")), "{e}");
        }
    }
}
