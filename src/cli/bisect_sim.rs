//! `bootbench bisect-sim`: the bisection strategy measured on synthetic
//! noisy histories.

use crate::bisect::options::{parse_fraction, PlanArgs};
use crate::bisect::simulate::{self, NoiseModel, Scenario};
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
    /// The sequential strategy's statistics.
    #[command(flatten)]
    pub plan: PlanArgs,
}

/// Runs `bootbench bisect-sim`.
pub fn bisect_sim(args: &SimArgs) -> anyhow::Result<ExitCode> {
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
    };
    let plan = args.plan.plan()?;
    let t0 = std::time::Instant::now();
    let seq = simulate::run_strategy("sequential", &plan, &scenario)?;
    let fixed = simulate::run_strategy(
        &format!("fixed-{}", args.fixed_boots),
        &simulate::fixed_plan(&plan, args.fixed_boots),
        &scenario,
    )?;
    print!("{}", simulate::render(&scenario, &[seq, fixed]));
    eprintln!("bisect-sim: {:.1} s", t0.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}
