//! An unattended, resumable bisection of a kernel tree: options turned into
//! a plan and a lab, [`Driver`] run to the end, the tree restored and the
//! reports written.

use crate::bisect::changes;
use crate::bisect::driver::{Driver, DriverError};
use crate::bisect::history::{git, resolve, GitHistory, History};
use crate::bisect::journal::{Event, FileJournal, Journal};
use crate::bisect::lab::{LabError, QemuLab};
use crate::bisect::lab_settings::{BootOptions, LabSettings};
use crate::bisect::options::PlanArgs;
use crate::bisect::report;
use crate::bisect::state::{BisectState, Outcome, Phase};
use crate::bisect::tree_lease::{Running, StateLock, TreeLease, TreeLock};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a resume waits for a git process of the stopped run that still
/// works in the tree (a checkout takes seconds even on a large tree).
const GIT_WAIT: Duration = Duration::from_secs(30);

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

/// `p` made absolute against the current directory.
pub fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
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
    // A side's state left by an earlier bisection with this state name
    // would be taken for this one's.
    let left = side_states_of(&absolute(&args.state)?);
    if let Some(first) = left.first() {
        bail!(
            "{} is gone but {} of its side searches remain (e.g. {}): remove them or choose another --state, so that a new bisection does not take an old side's boots for its own",
            args.state.display(),
            left.len(),
            first.display()
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
    let differs = |flag: &str, given: String, stored: String| {
        anyhow::anyhow!(
            "--resume continues the bisection in {} as it was started, but {flag} differs (started with '{stored}', given '{given}'); leave it out",
            args.state.display()
        )
    };
    if let Some((flag, given, stored)) = args.plan.differing_from(&state.plan)?.into_iter().next() {
        return Err(differs(&flag, given, stored));
    }
    let Some(lab) = &state.lab else { bail!("{} has no lab settings (a simulation's state?)", args.state.display()) };
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

/// What an interrupt (Ctrl-C) of the bisection does, once the state write
/// in progress has ended: logs and says how many boots the state holds and
/// how to resume (the build or boot in progress is not recorded; the
/// lab's own hook has killed a running build), and checks the tree's
/// original head out again, as when the bisection stops on an error.
fn interrupted_says_how_to_resume(
    state_path: &Path,
    state_arg: &Path,
    journal: &FileJournal,
    tree: &Path,
    state: &BisectState,
) -> crate::interrupt::OnInterrupt {
    let (state_path, state_arg, mut journal) = (state_path.to_path_buf(), state_arg.to_path_buf(), journal.clone());
    let (tree, head) = (tree.to_path_buf(), state.original_head.clone());
    crate::interrupt::on_interrupt(move || {
        let boots = BisectState::load(&state_path).map_or_else(|e| format!("? ({e})"), |s| s.boots.len().to_string());
        let message = format!(
            "interrupted: {} holds every finished boot ({boots}); the build or boot in progress is not recorded; continue with `bootbench bisect --resume --state {}`",
            state_path.display(),
            state_arg.display()
        );
        if journal.event_unguarded(Event::new("interrupted", None, message.clone(), serde_json::Value::Null)).is_err() {
            log::info!("{message}");
        }
        if let Some(head) = &head {
            if let Err(e) = git(&tree, &["checkout", "--quiet", head]) {
                log::warn!("could not check {head} out again in {}: {e}", tree.display());
            }
        }
    })
}

fn write_reports(state: &BisectState, searched: &[changes::Searched], prefix: &Path) -> anyhow::Result<String> {
    let mut r = report::build(state);
    if !searched.is_empty() {
        // Positions in the whole range, which a side's own history numbers
        // from its good end.
        let history =
            state.lab.as_ref().and_then(|l| GitHistory::open(&l.tree, &state.good, &state.bad, l.first_parent).ok());
        report::with_searches(&mut r, state, searched, |c| history.as_ref().and_then(|h| h.position(c)));
    }
    let text = report::render_text(&r);
    let with = |ext: &str| {
        let mut p = prefix.as_os_str().to_owned();
        p.push(ext);
        PathBuf::from(p)
    };
    for (path, body) in [
        (with(".txt"), text.clone()),
        (with(".json"), report::render_json(&r)?),
        (with(".html"), report::render_html(state, &r)?),
    ] {
        std::fs::write(&path, body).with_context(|| format!("cannot write report {}", path.display()))?;
    }
    Ok(text)
}

/// The bisection stopped on an error with its state saved: `--resume`
/// continues it once the cause is fixed.
#[derive(Debug, thiserror::Error)]
#[error("the bisection stopped; its state is saved: continue with `bootbench bisect --resume --state {}`", state.display())]
pub struct Stopped {
    /// The state file.
    pub state: PathBuf,
    /// Why it stopped.
    #[source]
    pub source: DriverError,
}

/// How a whole bisection ended: the first bisection's outcome and what
/// the searches of the range's other changes gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    /// The first bisection's outcome (`None`: it ended without one).
    pub outcome: Option<Outcome>,
    /// Changes confirmed in all (the first culprit included).
    pub changes_confirmed: usize,
    /// Sides searched that named no confirmed commit and did not show
    /// their ends alike: unconfirmed, ambiguous, gave up, or split with a
    /// side left unsearched.
    pub sides_open: usize,
    /// Sides searched in all.
    pub sides_searched: usize,
}

impl Ended {
    /// Sums up `root` and its searches.
    pub fn of(root: &BisectState, searched: &[changes::Searched]) -> Ended {
        let confirmed = |s: &BisectState| matches!(s.outcome, Some(Outcome::Confirmed { .. }));
        // A split is closed once both its sides were searched.
        let split_searched = |s: &BisectState, at: &str| {
            let side =
                |good: &str, bad: &str| searched.iter().any(|x| x.why.side.good == good && x.why.side.bad == bad);
            side(&s.good, at) && side(at, &s.bad)
        };
        let open = |s: &BisectState| match &s.outcome {
            Some(Outcome::Unconfirmed { .. } | Outcome::Ambiguous { .. }) => true,
            Some(Outcome::Split { at, .. }) => !split_searched(s, at),
            // Closed only when its ends were measured and found alike; a
            // side that gave up otherwise may hide a change.
            Some(Outcome::Failed { .. }) => !(s.tests.is_empty() && s.ends.is_some()),
            _ => false,
        };
        let root_split_open = matches!(&root.outcome, Some(Outcome::Split { at, .. }) if !split_searched(root, at));
        Ended {
            outcome: root.outcome.clone(),
            changes_confirmed: usize::from(confirmed(root)) + searched.iter().filter(|s| confirmed(&s.state)).count(),
            sides_open: usize::from(root_split_open) + searched.iter().filter(|s| open(&s.state)).count(),
            sides_searched: searched.len(),
        }
    }
}

/// Runs (or resumes) the bisection `args` describes to its end, searches
/// the range for its other changes where the first bisection found only
/// part of the change or split ([`changes`]), writes the reports, and says
/// how it ended.
pub fn bisect(args: &BisectArgs) -> anyhow::Result<Ended> {
    let state_path = absolute(&args.state)?;
    if let Some(dir) = state_path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // Held to the end: no other run shares this state or its tree, and the
    // run that wrote the tree's lease is gone.
    let _lock = StateLock::take(&state_path)?;
    let mut state = if args.resume {
        let s = BisectState::load(&args.state)?;
        check_resume_args(args, &s)?;
        s
    } else {
        start(args)?
    };
    let settings = state.lab.clone().context("the state has no lab settings")?;
    let dir = settings.artifacts.clone();
    // And no other bisection (another state) works in this tree.
    let _tree_lock = TreeLock::take(&settings.tree)?;
    for done in TreeLease::new(&dir, &settings.tree).recover(GIT_WAIT)? {
        log::info!("{done}");
    }
    let mut journal = FileJournal::new(&state_path, &dir.join("log.jsonl"), false);
    let prefix = args.output.clone().unwrap_or_else(|| dir.join("report"));
    crate::interrupt::install()?;
    let _interrupt = interrupted_says_how_to_resume(&state_path, &args.state, &journal, &settings.tree, &state);
    let mut lab = None;
    if state.phase != Phase::Finished {
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
        if let Err(source) = run_to_end(&mut state, &settings, &mut lab, &mut journal) {
            let _ = write_reports(&state, &[], &prefix);
            return Err(Stopped { state: args.state.clone(), source }.into());
        }
    }
    let searched = changes::search(&state, |from, side| {
        let path = side_state_path(&state_path, side);
        let mut journal = FileJournal::new(&path, &dir.join("log.jsonl"), false);
        let mut side_state = if path.exists() {
            BisectState::load(&path)?
        } else {
            let lab_settings = from.lab.as_ref().context("the state has no lab settings")?;
            // A side git cannot bisect (its good end not an ancestor of its
            // bad end, as after a merge) is recorded as such: the search
            // goes on elsewhere.
            let (n, unusable) =
                match GitHistory::open(&lab_settings.tree, &side.good, &side.bad, lab_settings.first_parent) {
                    Ok(h) => (h.range_commits(), None),
                    Err(e) => (1, Some(e.to_string())),
                };
            let mut s = changes::side_state(from, side, n)?;
            let message = match &unusable {
                None => format!(
                    "searching {}..{} ({n} commits) for the range's other changes (state {})",
                    short_of(&side.good),
                    short_of(&side.bad),
                    path.display()
                ),
                Some(why) => format!("cannot search {}..{}: {why}", short_of(&side.good), short_of(&side.bad)),
            };
            if let Some(why) = unusable {
                s.outcome = Some(Outcome::Failed { reason: format!("git cannot bisect this side: {why}") });
                s.phase = Phase::Finished;
            }
            s.save(&path)?;
            journal.event(Event::new("side", None, message, serde_json::to_value(side).unwrap_or_default()))?;
            s
        };
        if side_state.phase != Phase::Finished {
            if let Err(source) = run_to_end(&mut side_state, &settings, &mut lab, &mut journal) {
                return Err(anyhow::Error::from(Stopped { state: args.state.clone(), source }));
            }
        }
        Ok(side_state)
    });
    let searched = match searched {
        Ok(s) => s,
        Err(e) => {
            let _ = write_reports(&state, &[], &prefix);
            return Err(e);
        }
    };
    let text = write_reports(&state, &searched, &prefix)?;
    print!("{text}");
    log::info!("reports {}.{{txt,json,html}}; log {}", prefix.display(), journal.log_path().display());
    Ok(Ended::of(&state, &searched))
}

fn short_of(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}

/// The side states beside `state_path` (see [`side_state_path`]).
fn side_states_of(state_path: &Path) -> Vec<PathBuf> {
    let stem = state_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "state".into());
    let prefix = format!("{stem}.side-");
    let Some(dir) = state_path.parent() else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".json"))
        })
        .collect();
    found.sort();
    found
}

/// Where the bisection of `side` keeps its state: beside the first one,
/// named by the side's ends, so a resume finds it again.
pub fn side_state_path(state_path: &Path, side: &changes::Side) -> PathBuf {
    let stem = state_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "state".into());
    state_path.with_file_name(format!("{stem}.side-{}-{}.json", short_of(&side.good), short_of(&side.bad)))
}

/// Runs `state`'s bisection to its end with the QEMU lab (opened on first
/// use), then puts the tree back as it was, finished or not (a resume
/// checks out again whatever it needs).
fn run_to_end(
    state: &mut BisectState,
    settings: &LabSettings,
    lab: &mut Option<QemuLab>,
    journal: &mut FileJournal,
) -> Result<(), DriverError> {
    let lab = match lab {
        Some(lab) => lab,
        None => {
            let mut settings = settings.clone();
            lab.insert(QemuLab::open(&mut settings, state.plan.mode, &state.plan.metric)?)
        }
    };
    state.lab = Some(lab.settings().clone());
    let mut history = GitHistory::open(&settings.tree, &state.good, &state.bad, settings.first_parent)?;
    let result = Driver::new(state, lab, &mut history, journal).run();
    if let Some(head) = &state.original_head {
        // Under the lease as the lab's checkouts are: a kill in it is
        // cleaned up by the resume.
        let lease = TreeLease::new(&settings.artifacts, &settings.tree);
        let _held = lease.hold(Running::Checkout).map_err(LabError::from)?;
        if let Err(e) = git(&settings.tree, &["checkout", "--quiet", head]) {
            log::warn!("could not check {head} out again in {}: {e}", settings.tree.display());
        }
    }
    result.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sides_state_sits_beside_the_first_named_by_its_ends() {
        let side = changes::Side { good: "a".repeat(40), bad: "b".repeat(40) };
        let p = side_state_path(Path::new("/x/bisect/state.json"), &side);
        assert_eq!(p, Path::new(&format!("/x/bisect/state.side-{}-{}.json", "a".repeat(12), "b".repeat(12))));
        // Another side, another file.
        let other = changes::Side { good: "b".repeat(40), bad: "c".repeat(40) };
        assert_ne!(side_state_path(Path::new("/x/bisect/state.json"), &other), p);
    }

    #[test]
    fn a_resume_refuses_a_plan_option_that_differs_from_the_states() {
        #[derive(clap::Parser)]
        struct Cmd {
            #[command(flatten)]
            bisect: BisectArgs,
        }
        let args = |extra: &[&str]| {
            let words = ["bisect", "--resume", "--state", "/x/state.json"].into_iter().chain(extra.iter().copied());
            <Cmd as clap::Parser>::try_parse_from(words).unwrap().bisect
        };
        let (root, _, _) = changes::tests::bisect(10, 0.10, None, 1);
        assert_eq!(root.plan.max_changes, 3);
        let e = check_resume_args(&args(&["--max-changes", "1"]), &root).unwrap_err().to_string();
        assert!(e.contains("--max-changes differs (started with '3', given '1')"), "{e}");
        // The same value, or none, passes on to the lab's checks (this
        // state, a simulation's, has no lab).
        for extra in [&["--max-changes", "3"][..], &[]] {
            let e = check_resume_args(&args(extra), &root).unwrap_err().to_string();
            assert!(e.contains("has no lab settings"), "{extra:?}: {e}");
        }
    }

    #[test]
    fn a_split_range_counts_its_confirmed_changes_and_the_sides_left_open() {
        let (root, mut searched, _) = changes::tests::bisect(10, 0.10, Some((30, 0.10)), 1);
        let ended = Ended::of(&root, &searched);
        assert_eq!((ended.changes_confirmed, ended.sides_open), (2, 0), "{searched:?}");
        // A side that named a commit it could not confirm stays open.
        let confirmed = searched.iter().position(|s| s.state.outcome.as_ref().and_then(|o| o.confirmed()).is_some());
        let i = confirmed.unwrap();
        searched[i].state.outcome = Some(Outcome::Unconfirmed { culprit: "c0000030".into(), reason: "x".into() });
        let ended = Ended::of(&root, &searched);
        assert_eq!((ended.changes_confirmed, ended.sides_open), (1, 1));
        // A side that split again is open until its own sides are searched.
        searched[i].state.outcome = Some(Outcome::Split { at: "c0000035".into(), position: 0.5, p_value: 1e-3 });
        assert_eq!(Ended::of(&root, &searched).sides_open, 1);
        // A side that gave up while bisecting is open; one whose ends
        // measured alike before any step is not.
        searched[i].state.outcome = Some(Outcome::Failed { reason: "4 steps in a row stayed unsure".into() });
        assert_eq!(Ended::of(&root, &searched).sides_open, 1);
        searched[i].state.tests.clear();
        assert_eq!(Ended::of(&root, &searched).sides_open, 0);
        // The root's split with one side never searched is open.
        searched.remove(i);
        assert_eq!(Ended::of(&root, &searched).sides_open, 1);
    }
}
