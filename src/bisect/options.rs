//! The statistical plan of a bisection as options (shared by `bisect`,
//! `bisect-run` and `bisect-sim`), with the parsers of their values.

use crate::bisect::sequential_test::VarianceBound;
use crate::bisect::state::{DriftModel, Mode, Plan};
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

/// The statistical options shared by `bisect`, `bisect-run` and
/// `bisect-sim`, with the ones the command line gave.
#[derive(Debug, Clone)]
pub struct PlanArgs {
    /// Their values (the defaults where not given).
    pub options: PlanOptions,
    /// The long names of the options given on the command line (`bisect
    /// --resume` refuses one whose value differs from the state's plan).
    pub given: Vec<String>,
}

impl clap::FromArgMatches for PlanArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let given = <PlanOptions as clap::Args>::augment_args(clap::Command::new("plan"))
            .get_arguments()
            .filter(|a| m.value_source(a.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine))
            .map(|a| a.get_long().unwrap_or(a.get_id().as_str()).to_string())
            .collect();
        Ok(PlanArgs { options: PlanOptions::from_arg_matches(m)?, given })
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = PlanArgs::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for PlanArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        PlanOptions::augment_args(cmd)
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        PlanOptions::augment_args_for_update(cmd)
    }
}

impl PlanArgs {
    /// The plan these options describe.
    pub fn plan(&self) -> anyhow::Result<Plan> {
        self.options.plan()
    }

    /// The options given on the command line whose values differ from
    /// `stored`'s: (`--flag`, given, stored).
    ///
    /// Each given option is compared alone, over the stored plan: the
    /// options left out keep the state's values (not the defaults), so a
    /// resume that repeats part of the first command line is no change.
    pub fn differing_from(&self, stored: &Plan) -> anyhow::Result<Vec<(String, String, String)>> {
        let mut out = Vec::new();
        for flag in &self.given {
            let mut alone = stored_options(stored);
            alone.set_from(&self.options, flag);
            let given = alone.plan()?;
            if let (Some(g), Some(s)) = (plan_value(&given, flag), plan_value(stored, flag)) {
                if g != s {
                    out.push((format!("--{flag}"), g, s));
                }
            }
        }
        Ok(out)
    }
}

/// The options that give `p` back (the inverse of [`PlanOptions::plan`]).
fn stored_options(p: &Plan) -> PlanOptions {
    let text = |flag: &str| plan_value(p, flag).unwrap_or_default();
    PlanOptions {
        metric: p.metric.clone(),
        threshold: text("threshold"),
        wrong_culprit_rate: text("wrong-culprit-rate"),
        step_rate: text("step-rate"),
        max_boots: p.max_boots,
        min_boots: p.min_boots,
        reference_boots: p.reference_boots,
        max_reference_boots: p.max_reference_boots,
        reference_cap: p.reference_cap,
        ends_alpha: text("ends-alpha"),
        reference_every: p.reference_every,
        reference_window: p.reference_window,
        drift_term: p.drift,
        drift_scale: text("drift-scale"),
        variance: text("variance"),
        max_revisions: p.max_revisions,
        max_changes: p.max_changes,
        mode: p.mode,
        boot_tries: p.boot_tries,
    }
}

impl PlanOptions {
    /// Takes the value of the option `flag` (its long name) from `from`.
    fn set_from(&mut self, from: &PlanOptions, flag: &str) {
        match flag {
            "metric" => self.metric = from.metric.clone(),
            "threshold" => self.threshold = from.threshold.clone(),
            "wrong-culprit-rate" => self.wrong_culprit_rate = from.wrong_culprit_rate.clone(),
            "step-rate" => self.step_rate = from.step_rate.clone(),
            "max-boots" => self.max_boots = from.max_boots,
            "min-boots" => self.min_boots = from.min_boots,
            "reference-boots" => self.reference_boots = from.reference_boots,
            "max-reference-boots" => self.max_reference_boots = from.max_reference_boots,
            "reference-cap" => self.reference_cap = from.reference_cap,
            "ends-alpha" => self.ends_alpha = from.ends_alpha.clone(),
            "reference-every" => self.reference_every = from.reference_every,
            "reference-window" => self.reference_window = from.reference_window,
            "drift-term" => self.drift_term = from.drift_term,
            "drift-scale" => self.drift_scale = from.drift_scale.clone(),
            "variance" => self.variance = from.variance.clone(),
            "max-revisions" => self.max_revisions = from.max_revisions,
            "max-changes" => self.max_changes = from.max_changes,
            "mode" => self.mode = from.mode,
            "boot-tries" => self.boot_tries = from.boot_tries,
            _ => {}
        }
    }
}

/// A plan's value of the option `flag` (its long name), as text.
fn plan_value(p: &Plan, flag: &str) -> Option<String> {
    let pct = |v: f64| {
        let t = format!("{:.6}", 100.0 * v);
        format!("{}%", t.trim_end_matches('0').trim_end_matches('.'))
    };
    Some(match flag {
        "metric" => p.metric.clone(),
        "threshold" => pct(p.threshold),
        "wrong-culprit-rate" => pct(p.wrong_culprit_rate),
        "step-rate" => p.step_rate.map_or("union".into(), pct),
        "max-boots" => p.max_boots.to_string(),
        "min-boots" => p.min_boots.to_string(),
        "reference-boots" => p.reference_boots.to_string(),
        "max-reference-boots" => p.max_reference_boots.to_string(),
        "reference-cap" => p.reference_cap.to_string(),
        "ends-alpha" => pct(p.ends_alpha),
        "reference-every" => p.reference_every.to_string(),
        "reference-window" => p.reference_window.to_string(),
        "drift-term" => format!("{:?}", p.drift).to_lowercase(),
        "drift-scale" => pct(p.drift_scale),
        "variance" => match p.variance {
            VarianceBound::PlugIn => "plugin".into(),
            VarianceBound::Upper(c) => format!("upper:{c}"),
        },
        "max-revisions" => p.max_revisions.to_string(),
        "max-changes" => p.max_changes.to_string(),
        "mode" => format!("{:?}", p.mode).to_lowercase(),
        "boot-tries" => p.boot_tries.to_string(),
        _ => return None,
    })
}

/// The values of the statistical options.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanOptions {
    /// The metric to bisect, WORKLOAD.METRIC.
    #[arg(long, default_value = "fork.fork_rate")]
    pub metric: String,
    /// Smallest change between the ends worth bisecting (e.g. 3%): the ends
    /// must differ significantly and by at least this much.
    #[arg(long, default_value = "2%")]
    pub threshold: String,
    /// Highest rate at which the whole bisection may confirm a wrong
    /// culprit (the level of the confirmation; an unconfirmed culprit
    /// carries no such bound).
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
    #[arg(long, default_value_t = crate::bisect::state::DEFAULT_REFERENCE_EVERY)]
    pub reference_every: u32,
    /// Tests compare a candidate with the ends' boots among the last this
    /// many boots (at least the 4 most recent of each end), so a host that
    /// drifts overnight moves both alike; 0 takes every boot of the ends.
    /// Only with --drift-term none.
    #[arg(long, default_value_t = crate::bisect::state::DEFAULT_REFERENCE_WINDOW)]
    pub reference_window: u32,
    /// How the host's drift over the bisection is taken out: linear fits
    /// one slope per boot to every kernel's boots, moves every value to
    /// the present and adds the slope's error to each test's variance;
    /// none compares the boots as they measured.
    #[arg(long, default_value = "linear")]
    pub drift_term: DriftModel,
    /// The drift per boot thought typical: the standard deviation of the
    /// slope's prior. While the boots measure the slope less precisely
    /// than this, it stays near 0 and costs few boots; once they measure
    /// it better, the fit follows them.
    #[arg(long, default_value = "0.03%")]
    pub drift_scale: String,
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

impl PlanOptions {
    /// The plan these options describe.
    pub fn plan(&self) -> anyhow::Result<Plan> {
        if self.max_boots == 0 || self.max_boots < self.min_boots {
            bail!("--max-boots {} must be at least 1 and at least --min-boots {}", self.max_boots, self.min_boots);
        }
        if self.reference_boots < 2 {
            bail!("--reference-boots must be at least 2 (the spread of the ends is estimated from them)");
        }
        if self.reference_window > 0 && self.drift_term == DriftModel::Linear {
            bail!(
                "--reference-window {} needs --drift-term none: the drift term takes the host's drift out over every boot of the ends",
                self.reference_window
            );
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
            drift: self.drift_term,
            drift_scale: {
                let scale = parse_fraction("--drift-scale", &self.drift_scale)?;
                if !(0.0..0.01).contains(&scale) {
                    bail!("--drift-scale must be at least 0% (a flat prior: the slope as the boots measure it) and below 1% per boot");
                }
                scale
            },
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
    #[derive(clap::Parser)]
    struct Cmd {
        #[command(flatten)]
        plan: PlanArgs,
    }

    fn parsed(args: &[&str]) -> PlanArgs {
        <Cmd as clap::Parser>::try_parse_from(std::iter::once("bisect").chain(args.iter().copied())).unwrap().plan
    }

    #[test]
    fn a_resume_names_each_option_given_that_differs_from_the_plan_it_started_with() {
        let stored = parsed(&["--max-changes", "3", "--threshold", "2%"]).plan().unwrap();
        assert_eq!(parsed(&[]).given, Vec::<String>::new(), "defaults are not given");
        assert!(parsed(&[]).differing_from(&stored).unwrap().is_empty());
        let same = parsed(&["--max-changes", "3", "--threshold", "2%"]);
        assert_eq!(same.given, ["threshold", "max-changes"]);
        assert!(same.differing_from(&stored).unwrap().is_empty(), "the same values are no change");
        let other = parsed(&["--max-changes", "1", "--threshold", "7%", "--reference-window", "0"]);
        assert_eq!(
            other.differing_from(&stored).unwrap(),
            [("--threshold".into(), "7%".into(), "2%".into()), ("--max-changes".into(), "1".into(), "3".into())]
        );
        let e = parsed(&["--reference-window", "40"]).plan().unwrap_err().to_string();
        assert!(e.contains("--reference-window 40 needs --drift-term none"), "{e}");
        assert_eq!(parsed(&["--reference-window", "40", "--drift-term", "none"]).plan().unwrap().reference_window, 40);
        assert_eq!(parsed(&["--drift-scale", "0"]).plan().unwrap().drift_scale, 0.0, "a flat prior");
        let e =
            <Cmd as clap::Parser>::try_parse_from(["bisect", "--drift-term", "quadratic"]).err().unwrap().to_string();
        assert!(e.contains("unknown drift model 'quadratic' (expected linear or none)"), "{e}");
        let e = parsed(&["--drift-scale", "2%"]).plan().unwrap_err().to_string();
        assert!(e.contains("--drift-scale must be at least 0%"), "{e}");
        let drift = parsed(&["--drift-term", "none", "--drift-scale", "0.05%", "--reference-every", "2"]);
        assert_eq!(
            drift.differing_from(&stored).unwrap(),
            [
                ("--drift-term".into(), "none".into(), "linear".into()),
                ("--drift-scale".into(), "0.05%".into(), "0.03%".into())
            ]
        );
        // Options left out keep the state's values, not the defaults: part
        // of the first command line again is no change.
        let started = parsed(&[
            "--min-boots",
            "10",
            "--max-boots",
            "20",
            "--reference-boots",
            "20",
            "--max-reference-boots",
            "16",
        ]);
        let stored = started.plan().unwrap();
        for part in [&["--min-boots", "10"][..], &["--max-reference-boots", "16"], &["--max-boots", "20"]] {
            assert!(parsed(part).differing_from(&stored).unwrap().is_empty(), "{part:?}");
        }
        assert_eq!(
            parsed(&["--max-boots", "12"]).differing_from(&stored).unwrap(),
            [("--max-boots".into(), "12".into(), "20".into())]
        );
        // The state's plan read back through the options is the same plan.
        assert_eq!(stored_options(&stored).plan().unwrap(), stored);
        // Every option of the plan has its value here.
        let every = <PlanOptions as clap::Args>::augment_args(clap::Command::new("plan"));
        for a in every.get_arguments() {
            let flag = a.get_long().unwrap();
            assert!(plan_value(&stored, flag).is_some(), "--{flag} is not compared on --resume");
        }
    }

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
