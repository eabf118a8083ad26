//! One step for `git bisect run`: build HEAD (optionally), boot it against
//! the reference kernels, and give the verdict; the state shared by the
//! steps lives in a file.

use super::session::absolute;
use crate::bisect::driver::Driver;
use crate::bisect::history::{git, resolve, GitHistory};
use crate::bisect::journal::FileJournal;
use crate::bisect::lab::QemuLab;
use crate::bisect::lab_settings::{BootOptions, LabSettings};
use crate::bisect::options::PlanArgs;
use crate::bisect::sequential_test::ErrorBudget;
use crate::bisect::state::{BisectState, BuildStatus, Mode, Phase, Verdict};
use anyhow::{bail, Context};
use clap::Parser;
use std::path::{Path, PathBuf};

/// Options of `bootbench bisect-run`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "bootbench bisect-run",
    about = "One step of `git bisect run`: build (optional), boot against the reference kernels, exit 0 good, 1 bad, 125 skip, 128 abort"
)]
pub struct BisectRunArgs {
    /// The tree git bisect runs in.
    #[arg(long, default_value = ".")]
    pub tree: PathBuf,
    /// The build command (optional: without it the image in the tree is used).
    #[arg(long)]
    pub build: Option<String>,
    /// The kernel image, relative to the tree.
    #[arg(long)]
    pub kernel_image: PathBuf,
    /// The kernel config, relative to the tree.
    #[arg(long, default_value = ".config")]
    pub kernel_config: PathBuf,
    /// A file the build leaves with extra kernel cmdline words.
    #[arg(long)]
    pub append_file: Option<PathBuf>,
    /// A prebuilt kernel of the good end (perf mode).
    #[arg(long)]
    pub good_kernel: Option<PathBuf>,
    /// Its config (default: config-* beside it, or none).
    #[arg(long)]
    pub good_config: Option<PathBuf>,
    /// A prebuilt kernel of the bad end (perf mode).
    #[arg(long)]
    pub bad_kernel: Option<PathBuf>,
    /// Its config.
    #[arg(long)]
    pub bad_config: Option<PathBuf>,
    /// Tests to plan the error budget for (default: from git's bisect refs).
    #[arg(long)]
    pub steps: Option<u32>,
    /// The state file shared by the invocations (default: in the git dir).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Seconds a build may take.
    #[arg(long, default_value_t = 3 * 3600)]
    pub build_timeout: u64,
    /// The statistics.
    #[command(flatten)]
    pub plan: PlanArgs,
    /// How kernels are booted.
    #[command(flatten)]
    pub boot: BootOptions,
}

/// The config beside a prebuilt image: `config-SUFFIX` for `vmlinuz-SUFFIX`.
fn config_beside(image: &Path) -> Option<PathBuf> {
    let name = image.file_name()?.to_str()?;
    let suffix = name.strip_prefix("vmlinuz-").or_else(|| name.strip_prefix("vmlinux-"))?;
    Some(image.with_file_name(format!("config-{suffix}"))).filter(|p| p.is_file())
}

/// Candidate commits git bisect still has, from its refs.
fn git_bisect_remaining(tree: &Path) -> Option<u64> {
    let bad = git(tree, &["rev-parse", "--verify", "--quiet", "refs/bisect/bad"]).ok()?;
    let goods = git(tree, &["for-each-ref", "--format=%(objectname)", "refs/bisect/good-*"]).ok()?;
    let mut args = vec!["rev-list", "--count", bad.trim(), "--not"];
    args.extend(goods.lines().map(str::trim));
    git(tree, &args).ok()?.trim().parse().ok()
}

/// One `git bisect run` step on the tree's HEAD: its verdict.
pub fn run_step(args: &BisectRunArgs) -> anyhow::Result<Verdict> {
    // Ctrl-C then kills a running build too, and never cuts a state write.
    crate::interrupt::install()?;
    let tree = absolute(&args.tree)?;
    let head = resolve(&tree, "HEAD")?;
    let state_path = match &args.state {
        Some(p) => absolute(p)?,
        None => {
            let p = git(&tree, &["rev-parse", "--git-path", "bootbench-bisect-run/state.json"])?;
            absolute(&tree.join(p.trim()))?
        }
    };
    let plan = args.plan.plan()?;
    let artifacts = state_path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&artifacts).with_context(|| format!("cannot create {}", artifacts.display()))?;
    let (mut state, mut lab) = if state_path.exists() {
        let mut s = BisectState::load(&state_path)?;
        let mut settings = s.lab.clone().context("the state has no lab settings")?;
        let lab = QemuLab::open(&mut settings, s.plan.mode, &s.plan.metric)?;
        s.lab = Some(settings);
        (s, lab)
    } else {
        let mut settings = LabSettings {
            tree: tree.clone(),
            build: args.build.clone(),
            kernel_image: args.kernel_image.clone(),
            kernel_config: args.kernel_config.clone(),
            append_file: args.append_file.clone(),
            checkout: false,
            first_parent: false,
            build_timeout_s: args.build_timeout,
            artifacts: artifacts.clone(),
            boot: args.boot.clone(),
            initramfs: None,
            initramfs_sha256: None,
        };
        let lab = QemuLab::open(&mut settings, plan.mode, &plan.metric)?;
        let range = git_bisect_remaining(&tree);
        let mut s =
            BisectState::new(plan.clone(), Some(settings), "reference:good", "reference:bad", range.unwrap_or(2))?;
        if let (None, Some(steps)) = (range, args.steps) {
            s.budget = ErrorBudget { wrong_culprit_rate: plan.wrong_culprit_rate, planned_tests: steps.max(1) };
        } else if let Some(steps) = args.steps {
            s.budget.planned_tests = steps.max(1);
        } else {
            // git bisect run never confirms: the planned tests are the steps.
            s.budget.planned_tests = s.budget.planned_tests.saturating_sub(2).max(1);
        }
        match (&args.good_kernel, &args.bad_kernel) {
            (Some(g), Some(b)) => {
                for (key, image, config) in [
                    ("reference:good", g, args.good_config.clone().or_else(|| config_beside(g))),
                    ("reference:bad", b, args.bad_config.clone().or_else(|| config_beside(b))),
                ] {
                    let rec = lab.adopt(key.trim_start_matches("reference:"), &absolute(image)?, config.as_deref())?;
                    if rec.status != BuildStatus::Built {
                        bail!("{} ({key}) cannot be used: {}", image.display(), rec.reason.unwrap_or_default());
                    }
                    s.commits.insert(
                        key.into(),
                        crate::bisect::state::CommitRecord {
                            sha: key.into(),
                            subject: format!("{} kernel {}", key.trim_start_matches("reference:"), image.display()),
                            position: None,
                            build: Some(rec),
                        },
                    );
                }
            }
            (None, None) if plan.mode == Mode::Boot => s.phase = Phase::Bisecting,
            _ => bail!("perf mode needs --good-kernel and --bad-kernel: prebuilt kernels of the good and bad ends to measure against"),
        }
        s.save(&state_path)?;
        (s, lab)
    };
    let mut history = GitHistory::without_range(&tree);
    let mut journal = FileJournal::new(&state_path, &artifacts.join("log.jsonl"), false);
    let verdict = Driver::new(&mut state, &mut lab, &mut history, &mut journal).run_single(&head)?;
    if let Some(notice) = step_rate_notice(&state) {
        log::warn!("{notice}");
    }
    match verdict {
        Ok(v) => Ok(v),
        Err(reason) => bail!("the reference kernels cannot be used: {reason}"),
    }
}

/// What `bisect-run` says when the plan has a `--step-rate`: it does not
/// apply, since `git bisect run` has no confirmation to rest a bound on; each
/// commit is tested at its share of `--wrong-culprit-rate` instead.
pub fn step_rate_notice(state: &BisectState) -> Option<String> {
    let rate = state.plan.step_rate?;
    let test = state.tests.iter().rfind(|t| t.kind == crate::bisect::state::TestKind::Run)?;
    Some(format!(
        "--step-rate {:.1}% does not apply here (git bisect run confirms nothing, so no bound could rest on a confirmation): this commit was tested at α = β = {:.2e}, its share of --wrong-culprit-rate {:.1}% over {} planned steps",
        100.0 * rate,
        test.alpha,
        100.0 * state.plan.wrong_culprit_rate,
        state.budget.planned_tests
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::journal::MemoryJournal;
    use crate::bisect::simulate::{LinearHistory, ModelLab, NoiseModel};
    use crate::bisect::state::Plan;

    #[test]
    fn bisect_run_says_it_ignores_the_step_rate_and_what_it_tested_at() {
        let noise = NoiseModel { iteration_cv: 0.06, boot_cv: 0.01, iterations: 5 };
        let mut history = LinearHistory::new(40);
        let mut lab = ModelLab::new(40, 25, 0.10, noise, 3);
        let mut state = BisectState::new(Plan::default(), None, &history.name(0), &history.name(40), 40).unwrap();
        state.budget.planned_tests = 6;
        let mut journal = MemoryJournal::default();
        let commit = history.name(30);
        let v = Driver::new(&mut state, &mut lab, &mut history, &mut journal).run_single(&commit).unwrap();
        assert_eq!(v, Ok(Verdict::Bad));
        let said = step_rate_notice(&state).expect("a notice while --step-rate is set");
        let alpha = state.budget.per_test(1);
        assert!(said.contains("--step-rate 3.0% does not apply"), "{said}");
        assert!(said.contains(&format!("tested at α = β = {alpha:.2e}")) && alpha < 0.03, "{said}");
        state.plan.step_rate = None;
        assert_eq!(step_rate_notice(&state), None, "with --step-rate union there is nothing to say");
    }
}
