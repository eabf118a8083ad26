//! `bootbench bisect` (an unattended, resumable bisection of a kernel tree),
//! `bootbench bisect-run` (one step for `git bisect run`: exit 0 good, 1 bad,
//! 125 skip, 128 to abort) and `bootbench bisect-sim` (the strategy measured
//! on synthetic histories). The CLI's edge: it turns options into a plan and
//! a lab, runs [`crate::bisect::driver::Driver`], restores the tree and
//! writes the reports.

use crate::bisect::driver::Driver;
use crate::bisect::history::{git, resolve, GitHistory};
use crate::bisect::journal::{Event, FileJournal, Journal};
use crate::bisect::lab::{BootOptions, LabSettings, QemuLab};
use crate::bisect::report;
use crate::bisect::sequential_test::{ErrorBudget, VarianceBound};
use crate::bisect::simulate::{self, NoiseModel, Scenario};
use crate::bisect::state::{BisectState, BuildStatus, Mode, Outcome, Phase, Plan, Verdict};
use anyhow::{bail, Context};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit status of `bootbench bisect` when a culprit was named but not
/// confirmed, or only skipped commits were left.
pub const EXIT_UNCONFIRMED: u8 = 3;
/// `git bisect run`: skip this commit.
pub const EXIT_SKIP: u8 = 125;
/// `git bisect run`: abort the bisection (any status above 127 does).
pub const EXIT_ABORT: u8 = 128;

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
    /// Error rate of each bisection step (α = β), e.g. 3%: the confirmation
    /// at the end guarantees --wrong-culprit-rate (a wrong culprit is only
    /// confirmed if a confirmation test errs), and a wrong step it catches
    /// is revised. `union` instead splits --wrong-culprit-rate over every
    /// test (steps and confirmations), so no test may err: costlier.
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
    /// σ used by the sequential test: plugin, or upper:CONFIDENCE.
    #[arg(long, default_value = "upper:0.75")]
    pub variance: String,
    /// Verdicts a failed confirmation may revise (each revision bisects on
    /// from the corrected bound) before the culprit is reported unconfirmed.
    #[arg(long, default_value_t = 2)]
    pub max_revisions: u32,
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
            variance: parse_variance(&self.variance)?,
            boot_tries: self.boot_tries.max(1),
            max_revisions: self.max_revisions,
            ..Plan::default()
        })
    }
}

/// Options of `bootbench bisect`.
#[derive(Debug, Clone, clap::Args)]
pub struct BisectArgs {
    /// The kernel tree: a git work tree without uncommitted changes to
    /// tracked files.
    #[arg(long)]
    pub tree: Option<PathBuf>,
    /// A good revision (the regression is not there).
    #[arg(long)]
    pub good: Option<String>,
    /// A bad revision (it descends from the good one).
    #[arg(long)]
    pub bad: Option<String>,
    /// The build command, run with `sh -c` in the tree after each checkout
    /// (BOOTBENCH_BISECT_COMMIT holds the commit). Failure skips the commit.
    #[arg(long)]
    pub build: Option<String>,
    /// The kernel image the build leaves, relative to the tree (e.g.
    /// arch/x86/boot/bzImage).
    #[arg(long)]
    pub kernel_image: Option<PathBuf>,
    /// The kernel config the build leaves, relative to the tree.
    #[arg(long, default_value = ".config")]
    pub kernel_config: PathBuf,
    /// A file the build leaves with extra kernel cmdline words for that
    /// commit, relative to the tree.
    #[arg(long)]
    pub append_file: Option<PathBuf>,
    /// Follow only first parents (bisect merges as units).
    #[arg(long)]
    pub first_parent: bool,
    /// Seconds a build may take before it is killed (and the commit skipped).
    #[arg(long, default_value_t = 3 * 3600)]
    pub build_timeout: u64,
    /// Do not measure the culprit and its parent again at the end.
    #[arg(long)]
    pub no_confirm: bool,
    /// Continue the bisection in --state after an interruption.
    #[arg(long)]
    pub resume: bool,
    /// The state file; kernels, build logs, results and the log go beside it.
    #[arg(long, default_value = "bootbench-bisect/state.json")]
    pub state: PathBuf,
    /// Report prefix: writes PREFIX.txt, PREFIX.json and PREFIX.html
    /// (default: report.* beside the state file).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The statistics.
    #[command(flatten)]
    pub plan: PlanArgs,
    /// How kernels are booted.
    #[command(flatten)]
    pub boot: BootOptions,
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("cannot make {} absolute", p.display()))
}

fn require<'a, T>(v: &'a Option<T>, flag: &str) -> anyhow::Result<&'a T> {
    v.as_ref().with_context(|| format!("{flag} is required to start a bisection (or give --resume)"))
}

/// What the tree had checked out: its branch, else its commit.
fn current_head(tree: &Path) -> anyhow::Result<String> {
    if let Ok(b) = git(tree, &["symbolic-ref", "--quiet", "--short", "HEAD"]) {
        if !b.trim().is_empty() {
            return Ok(b.trim().to_string());
        }
    }
    Ok(git(tree, &["rev-parse", "HEAD"])?.trim().to_string())
}

fn check_clean(tree: &Path) -> anyhow::Result<()> {
    let dirty = git(tree, &["status", "--porcelain", "--untracked-files=no"])?;
    if !dirty.trim().is_empty() {
        let files: Vec<&str> = dirty.lines().take(5).collect();
        bail!(
            "the tree {} has uncommitted changes to tracked files ({}); commit or stash them first: the bisection checks out other commits",
            tree.display(),
            files.join(", ")
        );
    }
    Ok(())
}

fn start(args: &BisectArgs) -> anyhow::Result<BisectState> {
    if args.state.exists() {
        bail!(
            "{} already exists: give --resume to continue that bisection, or another --state for a new one",
            args.state.display()
        );
    }
    let tree = absolute(require(&args.tree, "--tree")?)?;
    let good_rev = require(&args.good, "--good")?;
    let bad_rev = require(&args.bad, "--bad")?;
    let build = require(&args.build, "--build")?;
    let kernel_image = require(&args.kernel_image, "--kernel-image")?;
    if kernel_image.is_absolute() {
        bail!("--kernel-image {} must be relative to the tree (e.g. arch/x86/boot/bzImage)", kernel_image.display());
    }
    git(&tree, &["rev-parse", "--show-toplevel"])
        .with_context(|| format!("--tree {} is not a git work tree", tree.display()))?;
    check_clean(&tree)?;
    let good = resolve(&tree, good_rev)?;
    let bad = resolve(&tree, bad_rev)?;
    if good == bad {
        bail!("--good {good_rev} and --bad {bad_rev} are the same commit");
    }
    let history = GitHistory::open(&tree, &good, &bad, args.first_parent)?;
    let mut plan = args.plan.plan()?;
    plan.confirm = !args.no_confirm;
    let state_path = absolute(&args.state)?;
    let artifacts = state_path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&artifacts).with_context(|| format!("cannot create {}", artifacts.display()))?;
    let mut settings = LabSettings {
        tree: tree.clone(),
        build: Some(build.clone()),
        kernel_image: kernel_image.clone(),
        kernel_config: args.kernel_config.clone(),
        append_file: args.append_file.clone(),
        checkout: true,
        first_parent: args.first_parent,
        build_timeout_s: args.build_timeout,
        artifacts,
        boot: args.boot.clone(),
        initramfs: None,
        initramfs_sha256: None,
    };
    // Builds the initramfs now, so a bad suite or metric fails before the
    // first kernel build.
    QemuLab::open(&mut settings, plan.mode, &plan.metric)?;
    let mut state = BisectState::new(plan, Some(settings), &good, &bad, history.range_commits())?;
    state.original_head = Some(current_head(&tree)?);
    state.save(&state_path)?;
    Ok(state)
}

fn check_resume_args(args: &BisectArgs, state: &BisectState) -> anyhow::Result<()> {
    let Some(lab) = &state.lab else { bail!("{} has no lab settings (a simulation's state?)", args.state.display()) };
    let differs = |flag: &str, given: String, stored: String| {
        anyhow::anyhow!(
            "--resume continues the bisection in {} as it was started, but {flag} differs (started with '{stored}', given '{given}'); leave it out",
            args.state.display()
        )
    };
    if let Some(t) = &args.tree {
        if absolute(t)? != lab.tree {
            return Err(differs("--tree", t.display().to_string(), lab.tree.display().to_string()));
        }
    }
    if let Some(b) = &args.build {
        if Some(b) != lab.build.as_ref() {
            return Err(differs("--build", b.clone(), lab.build.clone().unwrap_or_default()));
        }
    }
    for (flag, given, stored) in [("--good", &args.good, &state.good), ("--bad", &args.bad, &state.bad)] {
        if let Some(g) = given {
            if resolve(&lab.tree, g)? != *stored {
                return Err(differs(flag, g.clone(), stored.clone()));
            }
        }
    }
    Ok(())
}

fn write_reports(state: &BisectState, prefix: &Path) -> anyhow::Result<String> {
    let r = report::build(state);
    let text = report::render_text(&r);
    let with = |ext: &str| {
        let mut p = prefix.as_os_str().to_owned();
        p.push(ext);
        PathBuf::from(p)
    };
    for (path, body) in [
        (with(".txt"), text.clone()),
        (with(".json"), report::render_json(&r)?),
        (with(".html"), report::render_html(state)?),
    ] {
        std::fs::write(&path, body).with_context(|| format!("cannot write report {}", path.display()))?;
    }
    Ok(text)
}

/// Runs `bootbench bisect`.
pub fn bisect(args: &BisectArgs) -> anyhow::Result<ExitCode> {
    let mut state = if args.resume {
        let s = BisectState::load(&args.state)?;
        check_resume_args(args, &s)?;
        s
    } else {
        start(args)?
    };
    let state_path = absolute(&args.state)?;
    let mut settings = state.lab.clone().context("the state has no lab settings")?;
    let dir = settings.artifacts.clone();
    let mut journal = FileJournal::new(&state_path, &dir.join("log.jsonl"), false);
    let prefix = args.output.clone().unwrap_or_else(|| dir.join("report"));
    if state.phase != Phase::Finished {
        let mut lab = QemuLab::open(&mut settings, state.plan.mode, &state.plan.metric)?;
        state.lab = Some(settings.clone());
        let mut history = GitHistory::open(&settings.tree, &state.good, &state.bad, settings.first_parent)?;
        let message = if args.resume {
            format!(
                "resuming {} ({} boots, {} tests so far)",
                state_path.display(),
                state.boots.len(),
                state.tests.len()
            )
        } else {
            format!(
                "bisecting {} commits from good {} to bad {} (state {}; at most {:.1}% wrong culprits, {} tests planned)",
                state.range_commits,
                &state.good[..12.min(state.good.len())],
                &state.bad[..12.min(state.bad.len())],
                state_path.display(),
                100.0 * state.plan.wrong_culprit_rate,
                state.budget.planned_tests
            )
        };
        journal.event(Event::new(
            if args.resume { "resume" } else { "start" },
            None,
            message,
            serde_json::Value::Null,
        ))?;
        let result = Driver::new(&mut state, &mut lab, &mut history, &mut journal).run();
        // Put the tree back as it was, finished or not (a resume checks out
        // again whatever it needs).
        if let Some(head) = &state.original_head {
            if let Err(e) = git(&settings.tree, &["checkout", "--quiet", head]) {
                eprintln!("bisect: warning: could not check {head} out again in {}: {e}", settings.tree.display());
            }
        }
        if let Err(e) = result {
            let _ = write_reports(&state, &prefix);
            return Err(anyhow::Error::new(e).context(format!(
                "the bisection stopped; its state is saved: continue with `bootbench bisect --resume --state {}`",
                args.state.display()
            )));
        }
    }
    let text = write_reports(&state, &prefix)?;
    print!("{text}");
    eprintln!("bisect: reports {}.{{txt,json,html}}; log {}", prefix.display(), journal.log_path().display());
    Ok(match state.outcome {
        Some(Outcome::Confirmed { .. }) => ExitCode::SUCCESS,
        Some(Outcome::Unconfirmed { .. } | Outcome::Ambiguous { .. }) => ExitCode::from(EXIT_UNCONFIRMED),
        Some(Outcome::Failed { .. }) | None => ExitCode::FAILURE,
    })
}

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

fn bisect_run_inner(args: &BisectRunArgs) -> anyhow::Result<Verdict> {
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
    match Driver::new(&mut state, &mut lab, &mut history, &mut journal).run_single(&head)? {
        Ok(v) => Ok(v),
        Err(reason) => bail!("the reference kernels cannot be used: {reason}"),
    }
}

/// Runs `bootbench bisect-run` with its raw arguments. Never fails: every
/// error becomes exit status 128, which makes `git bisect run` stop (a
/// plain failure status would read as "bad").
pub fn bisect_run(raw: &[String]) -> ExitCode {
    let argv = std::iter::once("bootbench bisect-run".to_string()).chain(raw.iter().cloned());
    let args = match BisectRunArgs::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::from(EXIT_ABORT),
            };
        }
    };
    match bisect_run_inner(&args) {
        Ok(v) => {
            eprintln!("bisect-run: {v}");
            ExitCode::from(match v {
                Verdict::Good => 0,
                Verdict::Bad => 1,
                Verdict::Skip => EXIT_SKIP,
            })
        }
        Err(e) => {
            eprintln!("bootbench bisect-run: error (aborting git bisect): {e:#}");
            ExitCode::from(EXIT_ABORT)
        }
    }
}

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

    #[test]
    fn bisect_run_turns_errors_into_abort() {
        // A bad option must not read as "bad commit" (exit 1) to git.
        assert_eq!(bisect_run(&["--no-such-option".into()]), ExitCode::from(EXIT_ABORT));
        let dir = tempfile::tempdir().unwrap();
        // Not a git tree: an error, so abort.
        let code =
            bisect_run(&["--tree".into(), dir.path().display().to_string(), "--kernel-image".into(), "bzImage".into()]);
        assert_eq!(code, ExitCode::from(EXIT_ABORT));
    }
}
