//! The contest table: for each contest row (no_load, cacherun, the nine
//! loads), each kernel's runs and the means of Time, CPU%, Loads, LCPU% and
//! Ratio, as the 2002-2003 contest reports printed them, plus the spread
//! of each column, the rows that failed, and what the figures rest on
//! (load units, storage, accel, excluded boots).
//!
//! Owns which boots count, the per-row figures and the ratios; the report
//! as data is in `model`, which computes nothing. It reads no files and
//! picks no groups (that is `crate::group_inputs`, through
//! `crate::compare::selector`), and the renderers in [`render`] only format
//! a [`ContestReport`].
//!
//! The contest workload's contract: one iteration is one pass over all
//! rows; per row R the iteration carries `time_R`, `cpu_percent_R`,
//! `loads_R`, `lcpu_percent_R` and `ratio_R` (over the same iteration's
//! no_load), or, when the row failed, an entry `R: message` in the
//! iteration's `errors` and no metrics for R.

mod model;
pub mod render;
#[cfg(test)]
pub(crate) mod test_fixtures;
#[cfg(test)]
mod tests;

use crate::compare::compat;
use crate::compare::samples::canonical_json;
use crate::results::BootRecord;
use crate::stats::fieller::RatioInterval;
use crate::stats::SampleSummary;
use loads::schema::{Iteration, StorageInfo, WorkloadResult};
use std::collections::{BTreeMap, BTreeSet};

pub use model::{
    Column, ContestReport, ContestReportError, ExcludedBoot, InputBoot, KernelInput, KernelSummary, RatioBase,
    RowEntry, RowError, RowState, RowTable, Settings, NO_LOAD, REPORT_FORMAT, REPORT_VERSION, WORKLOAD,
};

/// contest's rows in the order the reports print them (the workload's
/// own list, so the two cannot drift apart).
fn row_names() -> impl Iterator<Item = &'static str> {
    loads::workloads::contest::ROWS.iter().map(|r| r.name())
}

/// Whether `name` is one of contest's rows.
fn is_row(name: &str) -> bool {
    row_names().any(|r| r == name)
}

/// Metric name prefixes of a row's columns (`time_io_load`, ...).
const TIME: &str = "time_";
const CPU: &str = "cpu_percent_";
const LOADS: &str = "loads_";
const LCPU: &str = "lcpu_percent_";
const RATIO: &str = "ratio_";

impl Column {
    fn of(values: &[f64]) -> Option<Column> {
        SampleSummary::of(values).map(|s| Column { mean: s.mean, sd: (s.n >= 2).then(|| s.std_dev()), n: s.n })
    }
}

/// Why a boot does not count, or `None` when it does: it must be
/// classified ok and hold a contest workload with at least one iteration.
pub fn exclusion(boot: &BootRecord) -> Option<String> {
    if boot.boot.classification != "ok" {
        let detail = boot.boot.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default();
        return Some(format!("boot classified {}{detail}", boot.boot.classification));
    }
    let Some(doc) = &boot.result else {
        let why = boot.result_error.as_deref().unwrap_or("none arrived");
        return Some(format!("no result document ({why})"));
    };
    let contest: Vec<&WorkloadResult> = doc.workloads.iter().filter(|w| w.name == WORKLOAD).collect();
    if contest.is_empty() {
        let ran: Vec<&str> = doc.workloads.iter().map(|w| w.name.as_str()).collect();
        let ran = if ran.is_empty() { "nothing".to_string() } else { ran.join(", ") };
        return Some(format!("no {WORKLOAD} workload (it ran {ran})"));
    }
    if contest.iter().all(|w| w.iterations.is_empty()) {
        let why: Vec<&str> = contest.iter().filter_map(|w| w.error.as_deref()).collect();
        let why = if why.is_empty() { "no iterations".to_string() } else { why.join("; ") };
        return Some(format!("{WORKLOAD} measured nothing: {why}"));
    }
    None
}

/// Refuses an input (a file, or one group of it) in which no boot counts,
/// listing why each boot does not.
pub fn check_has_contest(input: &str, boots: &[BootRecord]) -> Result<(), ContestReportError> {
    if boots.iter().any(|b| exclusion(b).is_none()) {
        return Ok(());
    }
    let why = if boots.is_empty() {
        "  (no boots)".to_string()
    } else {
        boots
            .iter()
            .map(|b| format!("  boot #{}: {}", b.boot.index, exclusion(b).unwrap_or_default()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Err(ContestReportError::NoContest { input: input.into(), why })
}

/// The row's name when `metric` is one of its columns.
fn row_of_metric(metric: &str) -> Option<&str> {
    [TIME, CPU, LOADS, LCPU, RATIO].iter().find_map(|p| metric.strip_prefix(p)).filter(|r| !r.is_empty())
}

/// The row an iteration error names (`io_load: the load died`), when it
/// names one of `rows`.
fn row_of_error<'a>(error: &'a str, rows: &[String]) -> Option<(&'a str, &'a str)> {
    let (row, message) = error.split_once(": ")?;
    rows.iter().any(|r| r == row).then_some((row, message))
}

/// Row names of the detail's `rows` array.
fn detail_rows(it: &Iteration) -> impl Iterator<Item = &str> {
    it.detail
        .get("rows")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("row").and_then(|v| v.as_str()))
}

/// The detail's `load_unit` of `row`, when it states one.
fn detail_unit<'a>(it: &'a Iteration, row: &str) -> Option<&'a str> {
    it.detail
        .get("rows")?
        .as_array()?
        .iter()
        .find_map(|r| (r.get("row")?.as_str()? == row).then(|| r.get("load_unit").and_then(|u| u.as_str())).flatten())
}

/// A counted boot's contest workloads.
struct Counted<'a> {
    boot: &'a InputBoot,
    workloads: Vec<&'a WorkloadResult>,
}

/// One kernel's boots, sorted into counted and excluded.
struct KernelBoots<'a> {
    input: &'a KernelInput,
    counted: Vec<Counted<'a>>,
    /// Whether boots came from more than one origin (messages then name it).
    several_origins: bool,
}

impl KernelBoots<'_> {
    fn place(&self, boot: &InputBoot, iteration: Option<usize>) -> String {
        let origin = if self.several_origins { format!("{} ", boot.origin) } else { String::new() };
        match iteration {
            Some(i) => format!("{origin}boot #{} iteration {}", boot.record.boot.index, i + 1),
            None => format!("{origin}boot #{}", boot.record.boot.index),
        }
    }

    fn iterations(&self) -> impl Iterator<Item = (&InputBoot, usize, &Iteration)> {
        self.counted.iter().flat_map(|c| {
            c.workloads.iter().flat_map(|w| w.iterations.iter().enumerate()).map(move |(i, it)| (c.boot, i, it))
        })
    }
}

/// The rows present anywhere: contest's known rows in their order, then
/// unknown rows (found by a `time_` metric or the detail) as first seen.
fn rows_present(kernels: &[KernelBoots]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    let mut note = |r: &str| {
        if !seen.iter().any(|s| s == r) {
            seen.push(r.to_string());
        }
    };
    for k in kernels {
        for (_, _, it) in k.iterations() {
            for m in it.metrics.keys() {
                match row_of_metric(m) {
                    Some(r) if is_row(r) => note(r),
                    _ => {
                        if let Some(r) = m.strip_prefix(TIME) {
                            note(r)
                        }
                    }
                }
            }
            detail_rows(it).for_each(&mut note);
            for e in &it.errors {
                if let Some((r, _)) = e.split_once(": ") {
                    if is_row(r) {
                        note(r);
                    }
                }
            }
        }
    }
    let mut out: Vec<String> = row_names().filter(|r| seen.iter().any(|s| s == r)).map(str::to_string).collect();
    out.extend(seen.into_iter().filter(|s| !is_row(s)));
    out
}

/// One kernel's raw values of one row.
#[derive(Default)]
struct RowValues {
    time: Vec<f64>,
    cpu: Vec<f64>,
    loads: Vec<f64>,
    lcpu: Vec<f64>,
    own_ratio: Vec<f64>,
    units: BTreeSet<String>,
    errors: Vec<RowError>,
}

fn row_values(k: &KernelBoots, row: &str, rows: &[String]) -> RowValues {
    let mut v = RowValues::default();
    for (boot, i, it) in k.iterations() {
        let place = || k.place(boot, Some(i));
        for e in &it.errors {
            if let Some((r, message)) = row_of_error(e, rows) {
                if r == row {
                    v.errors.push(RowError { location: place(), message: message.to_string() });
                }
            }
        }
        let get = |prefix: &str| it.metrics.get(&format!("{prefix}{row}"));
        let columns = [get(TIME), get(CPU), get(LOADS), get(LCPU), get(RATIO)];
        if columns.iter().all(Option::is_none) {
            continue;
        }
        // A value that is not a number cannot be averaged: the run counts
        // as failed, visibly, rather than poisoning the mean or vanishing.
        let bad: Vec<String> = [TIME, CPU, LOADS, LCPU, RATIO]
            .iter()
            .zip(&columns)
            .filter_map(|(p, m)| m.filter(|m| !m.value.is_finite()).map(|m| format!("{p}{row} is {}", m.value)))
            .collect();
        if !bad.is_empty() {
            v.errors.push(RowError { location: place(), message: bad.join(", ") });
            continue;
        }
        let [time, cpu, loads, lcpu, ratio] = columns;
        let Some(time) = time else {
            v.errors.push(RowError { location: place(), message: format!("has no {TIME}{row} metric") });
            continue;
        };
        v.time.push(time.value);
        cpu.into_iter().for_each(|m| v.cpu.push(m.value));
        lcpu.into_iter().for_each(|m| v.lcpu.push(m.value));
        if let Some(m) = loads {
            v.loads.push(m.value);
            v.units.insert(m.unit.clone());
        } else if let Some(u) = detail_unit(it, row) {
            v.units.insert(u.to_string());
        }
        // The workload's own ratio pairs the row with the same iteration's
        // no_load, which cancels drift between iterations and boots; when
        // it is missing, the same quotient is formed here.
        let no_load = it.metrics.get(&format!("{TIME}{NO_LOAD}")).map(|m| m.value).filter(|t| *t > 0.0);
        match (ratio, no_load) {
            (Some(r), _) => v.own_ratio.push(r.value),
            (None, Some(base)) => v.own_ratio.push(time.value / base),
            (None, None) => {}
        }
    }
    v
}

/// Where a row's Ratio comes from, for its interval.
#[derive(Clone, Copy, PartialEq)]
enum RatioSource {
    /// Each iteration's own ratio (`--ratio-base own`, or the baseline
    /// kernel's rows against its own no_load of the same iterations:
    /// paired, not independent samples).
    Paired,
    /// Another kernel's rows over the baseline's no_load: independent.
    Independent,
    /// A no_load over itself (any kernel's with `own`, the baseline's with
    /// `baseline`): 1 by construction.
    Itself,
}

/// The 95% interval of a Ratio: Student's t over per-iteration ratios
/// (paired), Fieller's for mean Time over the baseline's mean no_load
/// Time (independent); `None` with fewer than two values on either side,
/// and for the baseline's no_load, 1 by construction.
fn ratio_interval(v: &RowValues, source: RatioSource, base_no_load: &[f64]) -> Option<RatioInterval> {
    match source {
        RatioSource::Paired => {
            let s = SampleSummary::of(&v.own_ratio).filter(|s| s.n >= 2)?;
            let half = crate::stats::t_critical(0.05, (s.n - 1) as f64) * s.var_of_mean().sqrt();
            Some(RatioInterval::Bounded { lo: s.mean - half, hi: s.mean + half })
        }
        RatioSource::Independent => {
            crate::stats::fieller::fieller(base_no_load, &v.time).ok().map(|f| f.interval(0.05))
        }
        RatioSource::Itself => None,
    }
}

fn entry(kernel: &str, v: &RowValues, source: RatioSource, ratio_base: RatioBase, base_no_load: &[f64]) -> RowEntry {
    let time = Column::of(&v.time);
    let base_mean = Column::of(base_no_load).map(|c| c.mean);
    let ratio = match ratio_base {
        RatioBase::Own => Column::of(&v.own_ratio),
        RatioBase::Baseline => match (time, base_mean) {
            (Some(t), Some(b)) => Some(Column { mean: t.mean / b, sd: t.sd.map(|s| s / b), n: t.n }),
            _ => None,
        },
    };
    let ratio_interval = ratio.and_then(|_| ratio_interval(v, source, base_no_load));
    let state = match (v.time.is_empty(), v.errors.is_empty()) {
        (false, _) => RowState::Measured,
        (true, false) => RowState::Failed,
        (true, true) => RowState::NotMeasured,
    };
    RowEntry {
        kernel: kernel.into(),
        state,
        runs: v.time.len(),
        failed: v.errors.len(),
        time,
        cpu_percent: Column::of(&v.cpu),
        loads: Column::of(&v.loads),
        lcpu_percent: Column::of(&v.lcpu),
        ratio,
        ratio_interval,
        errors: v.errors.clone(),
    }
}

fn distinct<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes / (1024 * 1024))
}

/// `ext4 on /dev/vda (2048 MiB), scheduler mq-deadline, swap /dev/vdb (512 MiB)`.
pub fn describe_storage(s: Option<&StorageInfo>) -> String {
    let Some(s) = s else { return "no scratch disk recorded".into() };
    let mut parts = Vec::new();
    let fs = s.scratch_fs.as_deref().unwrap_or("unknown filesystem");
    let mut disk = fs.to_string();
    if let Some(d) = &s.scratch_device {
        disk.push_str(&format!(" on {d}"));
    }
    if let Some(b) = s.scratch_bytes {
        disk.push_str(&format!(" ({})", mib(b)));
    }
    parts.push(disk);
    parts.push(format!("scheduler {}", s.scheduler.as_deref().unwrap_or("unknown")));
    parts.push(match (&s.swap_device, s.swap_bytes) {
        (None, None) | (None, Some(0)) if s.zram.is_some() => "no swap disk".into(),
        (None, None) | (None, Some(0)) => "no swap".into(),
        (Some(d), Some(b)) => format!("swap {d} ({})", mib(b)),
        (Some(d), None) => format!("swap {d}"),
        (None, Some(b)) => format!("swap ({})", mib(b)),
    });
    if let Some(z) = &s.zram {
        let algorithm = z.algorithm.as_deref().unwrap_or("unknown compressor");
        parts.push(format!("zram swap {} ({}, {algorithm}, used first)", z.device, mib(z.disksize_bytes)));
    }
    parts.join(", ")
}

fn summary(k: &KernelBoots) -> KernelSummary {
    let docs = || k.counted.iter().filter_map(|c| c.boot.record.result.as_ref());
    let accel = distinct(k.counted.iter().map(|c| {
        let r = &c.boot.record;
        if !r.machine.accel.is_empty() {
            return r.machine.accel.clone();
        }
        r.result.as_ref().and_then(|d| d.provenance.machine.accel.clone()).unwrap_or_else(|| "unknown".into())
    }));
    let storage_info = distinct(docs().map(|d| d.provenance.storage.clone()));
    let release = docs().map(|d| d.provenance.kernel.release.clone()).next().unwrap_or_default();
    let params = distinct(
        k.counted
            .iter()
            .flat_map(|c| &c.workloads)
            .map(|w| canonical_json(&serde_json::Value::Object(w.params.clone()))),
    );
    let mut errors = Vec::new();
    for c in &k.counted {
        for w in &c.workloads {
            if let Some(e) = &w.error {
                errors.push(RowError {
                    location: k.place(c.boot, None),
                    message: format!("{WORKLOAD} stopped early: {e}"),
                });
            }
        }
    }
    KernelSummary {
        name: k.input.name.clone(),
        baseline: false,
        sources: k.input.sources.clone(),
        release,
        boots_used: k.counted.len(),
        boots_total: k.input.boots.len(),
        iterations: k.iterations().count(),
        accel,
        storage: storage_info.iter().map(|s| describe_storage(s.as_ref())).collect(),
        storage_info,
        params,
        errors,
    }
}

fn pick_baseline(kernels: &[KernelBoots], asked: Option<&str>) -> Result<usize, ContestReportError> {
    let Some(name) = asked else {
        return kernels.iter().position(|k| !k.counted.is_empty()).ok_or(ContestReportError::NothingToTable);
    };
    let names = || kernels.iter().map(|k| k.input.name.as_str()).collect::<Vec<_>>().join(", ");
    let exact: Vec<usize> = kernels.iter().enumerate().filter(|(_, k)| k.input.name == name).map(|(i, _)| i).collect();
    let matching = if exact.is_empty() {
        // A label or release names every group that carries it.
        kernels
            .iter()
            .enumerate()
            .filter(|(_, k)| {
                k.input.boots.first().is_some_and(|b| {
                    b.record.label == name
                        || b.record.result.as_ref().is_some_and(|d| d.provenance.kernel.release == name)
                })
            })
            .map(|(i, _)| i)
            .collect()
    } else {
        exact
    };
    match matching.as_slice() {
        [] => Err(ContestReportError::UnknownBaseline { name: name.into(), names: names() }),
        [one] => match kernels.get(*one) {
            Some(k) if k.counted.is_empty() => Err(ContestReportError::UnusableBaseline { name: k.input.name.clone() }),
            _ => Ok(*one),
        },
        many => Err(ContestReportError::AmbiguousBaseline {
            name: name.into(),
            names: many
                .iter()
                .filter_map(|i| kernels.get(*i))
                .map(|k| k.input.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// What a contest result's foreground build was: its version, and for the
/// pack build the target and the pack's identity. Different ones time
/// different builds.
fn foreground_identity(params: &serde_json::Map<String, serde_json::Value>) -> String {
    let v = crate::compare::samples::version_text(loads::workload::version_in(params));
    let word = |k: &str| params.get(k).and_then(|x| x.as_str()).map(str::to_string);
    match word("build").as_deref() {
        None | Some("synthetic") => v,
        Some(build) => format!(
            "{v} ({build} build of {} from pack {})",
            word("target").unwrap_or_else(|| "quick".into()),
            word(loads::pack_build::PACK_ID_PARAM)
                .map_or("unknown".to_string(), |id| id.chars().take(12).collect::<String>())
        ),
    }
}

/// Refuses boots of different contest versions (see
/// `loads::workloads::VERSIONS`) or different foreground builds (the
/// synthetic one, the pack's of another target or from another pack),
/// naming each and who ran it.
fn check_one_version(kernels: &[KernelBoots]) -> Result<(), ContestReportError> {
    let mut by_version: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for k in kernels {
        for c in &k.counted {
            // A result that measured nothing (not run, stopped at once) may
            // carry the suite's params rather than the workload's.
            for w in c.workloads.iter().filter(|w| !w.iterations.is_empty()) {
                let v = foreground_identity(&w.params);
                let who = format!("{} {}", k.input.name, k.place(c.boot, None));
                let list = by_version.entry(v).or_default();
                if !list.contains(&who) {
                    list.push(who);
                }
            }
        }
    }
    if by_version.len() < 2 {
        return Ok(());
    }
    let versions: Vec<String> =
        by_version.iter().map(|(v, who)| format!("version {v} in {}", who.join(", "))).collect();
    Err(ContestReportError::MixedVersions { versions: versions.join("; ") })
}

/// Parameters that decide the figures: all but the row selection, since
/// running fewer rows does not change how long one row's build takes.
fn timing_params(canonical: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(canonical) {
        Ok(serde_json::Value::Object(mut m)) => {
            m.remove("rows");
            m.remove(loads::workload::VERSION_PARAM);
            canonical_json(&serde_json::Value::Object(m))
        }
        _ => canonical.to_string(),
    }
}

fn params_warning(kernels: &[KernelSummary]) -> Option<String> {
    let all = distinct(kernels.iter().flat_map(|k| k.params.iter().map(|p| timing_params(p))));
    if all.len() < 2 {
        return None;
    }
    let per: Vec<String> = kernels
        .iter()
        .map(|k| {
            let p: Vec<String> = k.params.iter().map(|p| crate::compare::text::params_words(p)).collect();
            format!("{}: {}", k.name, p.join(" | "))
        })
        .collect();
    Some(format!(
        "{WORKLOAD} ran with different parameters, so times are not comparable across them (a different foreground build is a different benchmark): {}",
        per.join("; ")
    ))
}

/// Builds the report from the kernels' boots. Kernels whose boots all are
/// excluded are left out of the tables (with a warning); boots that do not
/// count are listed.
pub fn build(inputs: &[KernelInput], settings: &Settings) -> Result<ContestReport, ContestReportError> {
    let mut excluded = Vec::new();
    let mut kernels: Vec<KernelBoots> = Vec::new();
    for input in inputs {
        let mut counted = Vec::new();
        for b in &input.boots {
            match exclusion(&b.record) {
                Some(reason) => excluded.push(ExcludedBoot {
                    kernel: input.name.clone(),
                    origin: b.origin.clone(),
                    boot: b.record.boot.index,
                    reason,
                }),
                None => counted.push(Counted {
                    boot: b,
                    workloads: b
                        .record
                        .result
                        .iter()
                        .flat_map(|d| &d.workloads)
                        .filter(|w| w.name == WORKLOAD)
                        .collect(),
                }),
            }
        }
        let several_origins = distinct(input.boots.iter().map(|b| &b.origin)).len() > 1;
        kernels.push(KernelBoots { input, counted, several_origins });
    }
    check_one_version(&kernels)?;
    let base_index = pick_baseline(&kernels, settings.baseline.as_deref())?;
    let mut warnings = Vec::new();
    for k in kernels.iter().filter(|k| k.counted.is_empty()) {
        warnings.push(format!(
            "{} is left out: none of its {} boot(s) counts (see the excluded boots)",
            k.input.name,
            k.input.boots.len()
        ));
    }
    let usable: Vec<&KernelBoots> = kernels.iter().filter(|k| !k.counted.is_empty()).collect();
    let base = kernels.get(base_index).ok_or(ContestReportError::NothingToTable)?;
    if settings.intervals && usable.iter().any(|k| k.iterations().count() > k.counted.len()) {
        warnings.push(
            "the Ratio intervals take every iteration as independent, but some boots ran several: iterations of \
             one boot share that boot's noise, so the intervals may be too narrow (run one iteration a boot, more \
             boots)"
                .into(),
        );
    }
    let rows = rows_present(&kernels);
    let base_no_load_times = row_values(base, NO_LOAD, &rows).time;
    let base_no_load = Column::of(&base_no_load_times).map(|c| c.mean);
    if settings.ratio_base == RatioBase::Baseline && base_no_load.is_none() {
        warnings.push(format!("the baseline {} has no good no_load run: no ratios against it", base.input.name));
    }
    let mut tables = Vec::new();
    for row in &rows {
        let values: Vec<RowValues> = usable.iter().map(|k| row_values(k, row, &rows)).collect();
        let units: Vec<String> = distinct(values.iter().flat_map(|v| v.units.iter().cloned()));
        if units.len() > 1 {
            warnings.push(format!("{row}: the kernels report Loads in different units ({})", units.join(", ")));
        }
        let kernels_rows = usable
            .iter()
            .zip(&values)
            .map(|(k, v)| {
                let source = match settings.ratio_base {
                    RatioBase::Own if row == NO_LOAD => RatioSource::Itself,
                    RatioBase::Own => RatioSource::Paired,
                    RatioBase::Baseline if !std::ptr::eq(*k, base) => RatioSource::Independent,
                    RatioBase::Baseline if row == NO_LOAD => RatioSource::Itself,
                    RatioBase::Baseline => RatioSource::Paired,
                };
                entry(&k.input.name, v, source, settings.ratio_base, &base_no_load_times)
            })
            .collect();
        tables.push(RowTable { row: row.clone(), load_units: units, kernels: kernels_rows });
    }
    let mut summaries: Vec<KernelSummary> = usable.iter().map(|k| summary(k)).collect();
    for s in &mut summaries {
        s.baseline = s.name == base.input.name;
        // Iteration errors that name no row belong to the kernel.
        for k in usable.iter().filter(|k| k.input.name == s.name) {
            for (boot, i, it) in k.iterations() {
                for e in it.errors.iter().filter(|e| row_of_error(e, &rows).is_none()) {
                    s.errors.push(RowError { location: k.place(boot, Some(i)), message: e.clone() });
                }
            }
        }
        if s.storage.len() > 1 {
            warnings.push(format!(
                "{}'s boots used different storage ({}): its rows mix them",
                s.name,
                s.storage.join(" vs ")
            ));
        }
    }
    warnings.extend(params_warning(&summaries));
    let env_groups: Vec<(&str, Vec<BootRecord>)> = usable
        .iter()
        .map(|k| (k.input.name.as_str(), k.counted.iter().map(|c| c.boot.record.clone()).collect()))
        .collect();
    let env_refs: Vec<(&str, &[BootRecord])> = env_groups.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    warnings.extend(compat::environment_warnings(&env_refs));
    Ok(ContestReport {
        intervals: settings.intervals,
        format: REPORT_FORMAT,
        version: REPORT_VERSION,
        ratio_base: settings.ratio_base,
        baseline: base.input.name.clone(),
        baseline_no_load_s: base_no_load,
        kernels: summaries,
        rows: tables,
        excluded,
        warnings,
    })
}
