//! Comparing kernels honestly: for every metric, each candidate group's
//! change against the baseline group with an interval that includes the
//! baseline's own uncertainty, a p-value corrected for the number of
//! metrics, and a verdict against a threshold. Replication is by boot:
//! iterations are averaged within their boot, and the per-boot means are
//! the samples.
//!
//! Owns the analysis and the report's data; the renderers (`text`,
//! `tabular`, `html`) only format a [`Report`], and the CLI
//! (`crate::cli::compare`, with `crate::group_inputs`) only reads files and
//! picks groups.
//!
//! Method (default `welch-log`): Welch's t on the natural logs of the
//! per-boot means; the interval of the difference of log means is
//! exponentiated into an interval of the ratio of geometric means. Kernel
//! metrics are positive and ratio-scaled, spreads grow with the mean, and
//! on logs the answer does not depend on which kernel is the baseline.
//! `fieller` gives Fieller's interval for the ratio of arithmetic means
//! (with a Welch t-test for the p-value); it is used automatically for a
//! metric with a value ≤ 0, where logs do not exist.

pub mod compat;
pub mod html;
pub mod options;
pub mod samples;
pub mod selector;
pub mod tabular;
#[cfg(test)]
pub(crate) mod test_fixtures;
pub mod text;

use crate::results::BootRecord;
use crate::stats::fieller::{self, RatioInterval};
use crate::stats::multiple_testing::{adjust, Adjusted, Correction};
use crate::stats::{welch, SampleSummary};
use loads::schema::Better;
use samples::{GroupSamples, MetricKey, SampleError};
use serde::Serialize;

/// Format marker of the JSON report.
pub const REPORT_FORMAT: &str = "bootbench-comparison";
/// Version of the JSON report's layout.
pub const REPORT_VERSION: u32 = 1;

/// Errors of a comparison.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A group's samples are unusable.
    #[error(transparent)]
    Samples(#[from] SampleError),
    /// Two groups are not comparable.
    #[error("cannot compare {base} with {cand}")]
    Incompatible {
        /// Baseline name.
        base: String,
        /// Candidate name.
        cand: String,
        /// Why.
        #[source]
        source: compat::CompatError,
    },
    /// A setting is out of range.
    #[error("bad setting: {0}")]
    Setting(String),
}

/// How the ratio's interval is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Welch's t on logs of per-boot means (ratio of geometric means).
    WelchLog,
    /// Fieller's interval for the ratio of arithmetic means.
    Fieller,
}

impl std::str::FromStr for Method {
    type Err = CompareError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "welch-log" | "welch" | "log" => Ok(Method::WelchLog),
            "fieller" => Ok(Method::Fieller),
            other => Err(CompareError::Setting(format!("unknown method '{other}' (expected welch-log or fieller)"))),
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Method::WelchLog => "Welch's t on logs of per-boot means",
            Method::Fieller => "Fieller's interval for the ratio of means",
        })
    }
}

/// Settings of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Settings {
    /// A change inside ±threshold (in %) is "no change".
    pub threshold_pct: f64,
    /// Family confidence, e.g. 0.95.
    pub confidence: f64,
    /// Correction over each candidate's metrics.
    pub correction: Correction,
    /// Interval method.
    pub method: Method,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { threshold_pct: 2.0, confidence: 0.95, correction: Correction::Holm, method: Method::WelchLog }
    }
}

impl Settings {
    fn check(&self) -> Result<(), CompareError> {
        if !(self.confidence > 0.5 && self.confidence < 1.0) {
            return Err(CompareError::Setting(format!("confidence {} must be between 0.5 and 1", self.confidence)));
        }
        if !(self.threshold_pct.is_finite() && self.threshold_pct >= 0.0) {
            return Err(CompareError::Setting(format!("threshold {}% must be a number ≥ 0", self.threshold_pct)));
        }
        Ok(())
    }
}

/// A group to compare: its display name, where it came from, its boots.
#[derive(Debug, Clone)]
pub struct GroupInput {
    /// Name in tables.
    pub name: String,
    /// The argument that selected it.
    pub source: String,
    /// Its boots (all of them; unusable ones are listed as skipped).
    pub boots: Vec<BootRecord>,
}

/// What the report says about one kernel group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelInfo {
    /// Display name.
    pub name: String,
    /// `baseline` or `candidate`.
    pub role: &'static str,
    /// The argument that selected it.
    pub source: String,
    /// Kernel release.
    pub release: String,
    /// Image sha256.
    pub image_sha256: String,
    /// Kernel cmdline.
    pub cmdline: String,
    /// Label.
    pub label: String,
    /// Arch, accel, vCPUs, memory of its first boot, then its machine type
    /// and the host that ran it, when recorded.
    pub machine: String,
    /// Boots in the group.
    pub boots_total: usize,
    /// Boots used.
    pub boots_used: usize,
    /// Boots left out.
    pub skipped: Vec<samples::SkippedBoot>,
}

/// One boot's values, for plots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BootPoint {
    /// Boot index in its file.
    pub boot: u32,
    /// Mean of its iterations.
    pub mean: f64,
    /// Its iterations.
    pub iterations: Vec<f64>,
}

/// One kernel's figures for one metric (the reference table's cell).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelFigures {
    /// Mean of the per-boot means.
    pub mean: f64,
    /// Standard deviation of the per-boot means (between boots); with a
    /// single boot, of its iterations.
    pub sd: f64,
    /// Whether `sd` is between boots.
    pub sd_between_boots: bool,
    /// `mean` as % of the baseline's mean.
    pub pct_of_baseline: f64,
    /// `sd` as % of the baseline's mean.
    pub sd_pct_of_baseline: f64,
    /// Boots.
    pub boots: usize,
    /// Iterations in all.
    pub iterations: usize,
    /// Per boot.
    pub per_boot: Vec<BootPoint>,
}

/// The verdict on one candidate's metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// The interval lies inside ±threshold.
    #[serde(rename = "no change")]
    NoChange,
    /// The interval excludes 0, the estimate is beyond the threshold, in
    /// the metric's good direction.
    #[serde(rename = "better")]
    Better,
    /// Likewise, in the bad direction.
    #[serde(rename = "worse")]
    Worse,
    /// Anything else: more boots needed to say.
    #[serde(rename = "unsure")]
    Unsure,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::NoChange => "no change",
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::Unsure => "unsure",
        })
    }
}

/// Decides the verdict from the change and its interval (all in %).
pub fn verdict(change_pct: f64, interval_pct: Option<(f64, f64)>, threshold_pct: f64, better: Better) -> Verdict {
    let Some((lo, hi)) = interval_pct else { return Verdict::Unsure };
    if lo >= -threshold_pct && hi <= threshold_pct {
        return Verdict::NoChange;
    }
    let excludes_zero = lo > 0.0 || hi < 0.0;
    if excludes_zero && change_pct.abs() > threshold_pct {
        let up = change_pct > 0.0;
        return match (up, better) {
            (true, Better::Higher) | (false, Better::Lower) => Verdict::Better,
            _ => Verdict::Worse,
        };
    }
    Verdict::Unsure
}

/// One candidate's change on one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Index into [`Report::kernels`] (≥ 1).
    pub candidate: usize,
    /// Method actually used for this metric.
    pub method: Method,
    /// Estimated change in % (ratio − 1).
    pub change_pct: f64,
    /// Interval of the change in %, at `interval_confidence`; `None` when
    /// there is none (too few boots, or Fieller unbounded).
    pub interval_pct: Option<(f64, f64)>,
    /// Confidence of the interval after the correction for multiple
    /// metrics (e.g. 0.9875 for Holm's first of four at 0.95).
    pub interval_confidence: f64,
    /// Raw two-sided p-value.
    pub p_value: Option<f64>,
    /// p-value corrected over the candidate's metrics.
    pub p_adjusted: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// Boots (baseline, candidate).
    pub boots: (usize, usize),
    /// Iterations (baseline, candidate).
    pub iterations: (usize, usize),
    /// Anything the reader must know about this figure.
    pub note: Option<String>,
}

/// Everything about one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricReport {
    /// Workload instance and metric name.
    pub key: MetricKey,
    /// Unit.
    pub unit: String,
    /// Which direction is better.
    pub better: Better,
    /// One per kernel, baseline first.
    pub kernels: Vec<KernelFigures>,
    /// One per candidate.
    pub changes: Vec<Change>,
}

/// A whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Always [`REPORT_FORMAT`].
    pub format: &'static str,
    /// [`REPORT_VERSION`].
    pub version: u32,
    /// Settings used.
    pub settings: Settings,
    /// Kernels, baseline first.
    pub kernels: Vec<KernelInfo>,
    /// Environment differences (machine shape, accel, arch, QEMU).
    pub warnings: Vec<String>,
    /// Metrics in workload/metric order.
    pub metrics: Vec<MetricReport>,
}

impl Report {
    /// The sentence saying how intervals and verdicts were made.
    pub fn method_sentence(&self) -> String {
        let s = &self.settings;
        let family = "the metrics tested for each candidate, one that is an exact function of another (fork's latency of its rate) counted once";
        let correction = match s.correction {
            Correction::Holm => format!("Holm's step-down over {family} (intervals drawn at Holm's per-metric level)"),
            Correction::BenjaminiHochberg => format!("Benjamini-Hochberg over {family} (FCR-adjusted intervals)"),
            Correction::None => "no correction for multiple metrics".into(),
        };
        format!(
            "{}; {:.0}% confidence, {correction}; threshold ±{}%; the boot is the sample (iterations averaged within each boot); the tables' means are arithmetic means of the boot means, a change is the ratio of their geometric means (Welch on logs) or, for values ≤ 0, of the arithmetic ones (Fieller)",
            s.method,
            s.confidence * 100.0,
            s.threshold_pct
        )
    }
}

/// `x86_64 icount, 1 vCPU, 1024 MiB`, then `, pc-q35-10.0` and `, on HOST`
/// when the boot recorded them.
fn machine_text(b: &BootRecord) -> String {
    let mut text = format!("{} {}, {} vCPU, {} MiB", b.machine.arch, b.machine.accel, b.machine.smp, b.machine.mem_mib);
    if let Some(t) = &b.machine.machine_type {
        text.push_str(&format!(", {t}"));
    }
    if let Some(h) = b.host.as_ref().filter(|h| !h.name.is_empty()) {
        text.push_str(&format!(", on {}", h.name));
    }
    text
}

fn figures(series: &samples::MetricSeries, baseline_mean: f64) -> KernelFigures {
    let means = series.boot_means();
    let summary = SampleSummary::of(&means);
    let mean = summary.map_or(f64::NAN, |s| s.mean);
    let (sd, between) = if means.len() >= 2 {
        (summary.map_or(f64::NAN, |s| s.std_dev()), true)
    } else {
        let its = series.boots.first().map(|b| b.iterations.as_slice()).unwrap_or_default();
        let s = SampleSummary::of(its);
        (s.filter(|s| s.n >= 2).map_or(f64::NAN, |s| s.std_dev()), false)
    };
    KernelFigures {
        mean,
        sd,
        sd_between_boots: between,
        pct_of_baseline: 100.0 * mean / baseline_mean,
        sd_pct_of_baseline: 100.0 * sd / baseline_mean.abs(),
        boots: means.len(),
        iterations: series.iterations(),
        per_boot: series
            .boots
            .iter()
            .map(|b| BootPoint { boot: b.boot, mean: b.mean(), iterations: b.iterations.clone() })
            .collect(),
    }
}

/// The test of one metric, before the correction.
pub(crate) struct Tested {
    pub(crate) method: Method,
    pub(crate) estimate_ratio: f64,
    pub(crate) p_value: Option<f64>,
    /// Interval of the ratio at a given alpha.
    pub(crate) interval: Box<dyn Fn(f64) -> Option<(f64, f64)>>,
    pub(crate) note: Option<String>,
}

pub(crate) fn test_metric(base: &[f64], cand: &[f64], method: Method) -> Tested {
    let plain_ratio = |b: &[f64], c: &[f64]| {
        let m = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        m(c) / m(b)
    };
    if base.len() < 2 || cand.len() < 2 {
        return Tested {
            method,
            estimate_ratio: plain_ratio(base, cand),
            p_value: None,
            interval: Box::new(|_| None),
            note: Some(format!(
                "no interval: needs at least 2 boots per kernel (baseline {}, candidate {})",
                base.len(),
                cand.len()
            )),
        };
    }
    let positive = base.iter().chain(cand).all(|v| *v > 0.0);
    if method == Method::WelchLog && positive {
        if let Ok(r) = welch::log_ratio(base, cand) {
            let note =
                (r.test.se == 0.0).then(|| "no spread between boots in either kernel: the figure is exact".into());
            return Tested {
                method,
                estimate_ratio: r.ratio(),
                p_value: Some(r.test.p_value),
                interval: Box::new(move |alpha| Some(r.interval(alpha))),
                note,
            };
        }
    }
    let fallback = (method == Method::WelchLog).then(|| "values ≤ 0: Fieller's interval on raw means".to_string());
    match fieller::fieller(base, cand) {
        // The p-value is Fieller's own test of a ratio of 1, with the
        // interval's degrees of freedom: p < α exactly when a bounded
        // interval at 1 − α leaves 1 out.
        Ok(f) => Tested {
            method: Method::Fieller,
            estimate_ratio: f.ratio(),
            p_value: Some(f.p_value_at_one()),
            interval: Box::new(move |alpha| match f.interval(alpha) {
                RatioInterval::Bounded { lo, hi } => Some((lo, hi)),
                RatioInterval::Unbounded => None,
            }),
            note: fallback,
        },
        Err(e) => Tested {
            method: Method::Fieller,
            estimate_ratio: f64::NAN,
            p_value: None,
            interval: Box::new(|_| None),
            note: Some(e.to_string()),
        },
    }
}

/// Compares every candidate against the baseline. `only` restricts the
/// comparison to the named workloads; `skip_incomplete` leaves out boots
/// with NaN or missing metrics instead of refusing.
pub fn compare(
    baseline: &GroupInput,
    candidates: &[GroupInput],
    settings: Settings,
    only: Option<&[String]>,
    skip_incomplete: bool,
) -> Result<Report, CompareError> {
    settings.check()?;
    if candidates.is_empty() {
        return Err(CompareError::Setting("no candidate to compare with the baseline".into()));
    }
    let all: Vec<&GroupInput> = std::iter::once(baseline).chain(candidates).collect();
    let mut extracted: Vec<GroupSamples> = Vec::new();
    for g in &all {
        extracted.push(samples::extract(&g.name, &g.boots, only, skip_incomplete)?);
    }
    let base = &extracted[0];
    for (g, s) in all.iter().zip(&extracted).skip(1) {
        compat::check_comparable(&baseline.name, base, &g.name, s).map_err(|source| CompareError::Incompatible {
            base: baseline.name.clone(),
            cand: g.name.clone(),
            source,
        })?;
    }
    let env: Vec<(&str, &[BootRecord])> = all.iter().map(|g| (g.name.as_str(), g.boots.as_slice())).collect();
    let mut warnings = compat::environment_warnings(&env);
    warnings.extend(compat::iteration_count_warnings(&env));

    let kernels = all
        .iter()
        .zip(&extracted)
        .enumerate()
        .map(|(i, (g, s))| {
            let first = g.boots.first();
            KernelInfo {
                name: g.name.clone(),
                role: if i == 0 { "baseline" } else { "candidate" },
                source: g.source.clone(),
                release: selector::FileGroup { number: 0, boots: g.boots.clone() }.release(),
                image_sha256: first.map(|b| b.kernel.image_sha256.clone()).unwrap_or_default(),
                cmdline: first.map(|b| b.cmdline.clone()).unwrap_or_default(),
                label: first.map(|b| b.label.clone()).unwrap_or_default(),
                machine: first.map(machine_text).unwrap_or_default(),
                boots_total: g.boots.len(),
                boots_used: s.used.len(),
                skipped: s.skipped.clone(),
            }
        })
        .collect();

    let alpha = 1.0 - settings.confidence;
    let mut metrics: Vec<MetricReport> = Vec::new();
    for (key, bseries) in &base.metrics {
        let bfig = figures(bseries, f64::NAN);
        let bmean = bfig.mean;
        let kernels_fig: Vec<KernelFigures> = extracted
            .iter()
            .map(|s| s.metrics.get(key).map(|series| figures(series, bmean)))
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default();
        metrics.push(MetricReport {
            key: key.clone(),
            unit: bseries.unit.clone(),
            better: bseries.better,
            kernels: kernels_fig,
            changes: Vec::new(),
        });
    }
    // Each candidate is one family: its metrics are corrected together.
    for (ci, cand) in extracted.iter().enumerate().skip(1) {
        let tested: Vec<Tested> = metrics
            .iter()
            .map(|m| {
                let b = base.metrics.get(&m.key).map(|s| s.boot_means()).unwrap_or_default();
                let c = cand.metrics.get(&m.key).map(|s| s.boot_means()).unwrap_or_default();
                test_metric(&b, &c, settings.method)
            })
            .collect();
        // The family: the metrics tested, each exact function of an earlier
        // one (fork's latency of its rate) counted once, with that one's
        // adjusted level.
        let pairs: Vec<_> = metrics.iter().map(|m| (base.metrics.get(&m.key), cand.metrics.get(&m.key))).collect();
        let same_as = exact_functions(&metrics.iter().map(|m| &m.key).collect::<Vec<_>>(), &pairs);
        let members: Vec<usize> =
            (0..tested.len()).filter(|&i| same_as[i].is_none() && tested[i].p_value.is_some()).collect();
        let p: Vec<f64> = members.iter().map(|&i| tested[i].p_value.unwrap_or(f64::NAN)).collect();
        let mut adjusted = vec![Adjusted { p_adjusted: 1.0, alpha, rejected: false }; tested.len()];
        for (&i, a) in members.iter().zip(adjust(&p, alpha, settings.correction)) {
            adjusted[i] = a;
        }
        for i in 0..adjusted.len() {
            if let Some(j) = same_as[i] {
                adjusted[i] = adjusted[j];
            }
        }
        for ((m, t), a) in metrics.iter_mut().zip(tested).zip(adjusted) {
            // A change is up or down in the values themselves: over a
            // negative baseline mean a ratio above 1 is a fall.
            let sign = if m.kernels.first().is_some_and(|b| b.mean < 0.0) { -1.0 } else { 1.0 };
            let interval_pct = (t.interval)(a.alpha).map(|(lo, hi)| {
                let (lo, hi) = (100.0 * sign * (lo - 1.0), 100.0 * sign * (hi - 1.0));
                (lo.min(hi), lo.max(hi))
            });
            let change_pct = 100.0 * sign * (t.estimate_ratio - 1.0);
            let note = match (&t.note, interval_pct, t.p_value) {
                (None, None, Some(_)) => {
                    Some("the baseline mean is not clearly nonzero: Fieller's interval is unbounded".into())
                }
                (n, _, _) => n.clone(),
            };
            let (b, c) = (&m.kernels[0], &m.kernels[ci]);
            m.changes.push(Change {
                candidate: ci,
                method: t.method,
                change_pct,
                interval_pct,
                interval_confidence: 1.0 - a.alpha,
                p_value: t.p_value,
                p_adjusted: t.p_value.map(|_| a.p_adjusted),
                verdict: verdict(change_pct, interval_pct, settings.threshold_pct, m.better),
                boots: (b.boots, c.boots),
                iterations: (b.iterations, c.iterations),
                note,
            });
        }
    }
    Ok(Report { format: REPORT_FORMAT, version: REPORT_VERSION, settings, kernels, warnings, metrics })
}

/// For each metric, the earlier metric of the same workload it is an exact
/// function of, if any: over every iteration of both kernels, the product
/// of the two (an inverse, like fork's latency and rate) or their ratio (a
/// rescaled copy) is the same to 1e-9. Such a metric tests the same
/// hypothesis, so it does not enlarge the family a correction runs over.
fn exact_functions(
    keys: &[&MetricKey],
    series: &[(Option<&samples::MetricSeries>, Option<&samples::MetricSeries>)],
) -> Vec<Option<usize>> {
    let values = |i: usize| -> Option<Vec<f64>> {
        let (b, c) = series.get(i)?;
        let all: Vec<f64> =
            [(*b)?, (*c)?].iter().flat_map(|s| s.boots.iter().flat_map(|b| b.iterations.iter().copied())).collect();
        (!all.is_empty() && all.iter().all(|v| v.is_finite() && *v != 0.0)).then_some(all)
    };
    let constant = |v: &[f64]| {
        let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| (l.min(x), h.max(x)));
        lo.signum() == hi.signum() && (hi - lo).abs() <= 1e-9 * hi.abs().max(lo.abs())
    };
    let all: Vec<Option<Vec<f64>>> = (0..keys.len()).map(values).collect();
    (0..keys.len())
        .map(|i| {
            let x = all[i].as_ref()?;
            (0..i).find(|&j| {
                keys[j].workload == keys[i].workload
                    && all[j].as_ref().is_some_and(|y| {
                        y.len() == x.len() && {
                            let product: Vec<f64> = x.iter().zip(y).map(|(a, b)| a * b).collect();
                            let ratio: Vec<f64> = x.iter().zip(y).map(|(a, b)| a / b).collect();
                            constant(&product) || constant(&ratio)
                        }
                    })
            })
        })
        .collect()
}

/// Display names for groups, so a reader can tell them apart: the label
/// when there is one, else the kernel release. Names still shared get, in
/// turn, the cmdline words the others lack, the image's file name (or the
/// shortest end of its path that differs), a short hash of the image, and
/// at last their position. Each step touches only names still shared, and
/// adds only what tells them apart.
pub fn display_names(groups: &[selector::FileGroup]) -> Vec<String> {
    let mut names: Vec<String> =
        groups.iter().map(|g| if g.label().is_empty() { g.release() } else { g.label().to_string() }).collect();
    let words: Vec<Vec<&str>> = groups.iter().map(|g| g.cmdline().split_whitespace().collect()).collect();
    qualify(&mut names, |i, set| {
        let others: Vec<&str> = set.iter().filter(|j| **j != i).flat_map(|j| words[*j].iter().copied()).collect();
        let extra: Vec<&str> = words[i].iter().copied().filter(|w| !others.contains(w)).collect();
        (!extra.is_empty()).then(|| format!("[{}]", extra.join(" ")))
    });
    let paths: Vec<Vec<String>> = groups
        .iter()
        .map(|g| g.image_path().components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect())
        .collect();
    qualify(&mut names, |i, set| {
        let own = &paths[i];
        let others: Vec<&Vec<String>> = set.iter().map(|j| &paths[*j]).filter(|p| *p != own).collect();
        if own.is_empty() || others.is_empty() {
            return None;
        }
        let tail = |p: &[String], k: usize| p[p.len().saturating_sub(k)..].join("/");
        (1..=own.len())
            .find(|k| others.iter().all(|p| tail(p, *k) != tail(own, *k)))
            .map(|k| format!("({})", tail(own, k)))
    });
    qualify(&mut names, |i, set| {
        let short = |j: usize| groups[j].sha().get(..12).unwrap_or(groups[j].sha()).to_string();
        let own = short(i);
        (!own.is_empty() && set.iter().any(|j| short(*j) != own)).then(|| format!("(image {own})"))
    });
    qualify(&mut names, |i, _| Some(format!("#{}", i + 1)));
    names
}

/// Gives each name that others share the qualifier `qualifier(i, set)`
/// finds for it (`set`: the indices of every group with that name).
fn qualify(names: &mut [String], qualifier: impl Fn(usize, &[usize]) -> Option<String>) {
    let added: Vec<Option<String>> = (0..names.len())
        .map(|i| {
            let set: Vec<usize> = (0..names.len()).filter(|j| names[*j] == names[i]).collect();
            if set.len() < 2 {
                None
            } else {
                qualifier(i, &set)
            }
        })
        .collect();
    for (name, q) in names.iter_mut().zip(added) {
        if let Some(q) = q {
            *name = format!("{name} {q}");
        }
    }
}

#[cfg(test)]
mod tests;
