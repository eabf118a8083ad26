//! Per-boot samples of every metric of one kernel group: iterations are
//! kept within their boot (the boot is the unit of replication), and every
//! value is checked. Owns extraction and its checks; it computes no
//! statistics beyond a boot's mean.

use crate::results::BootRecord;
use loads::schema::Better;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Errors extracting samples from a group's boots.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SampleError {
    /// A metric value is NaN or infinite.
    #[error("{group}: boot #{boot}, workload {workload}, iteration {iteration}: metric '{metric}' is {value}")]
    NonFinite {
        /// Group name.
        group: String,
        /// Boot index in its file.
        boot: u32,
        /// Workload (with parameters).
        workload: String,
        /// Metric name.
        metric: String,
        /// 0-based iteration.
        iteration: usize,
        /// The value.
        value: f64,
    },
    /// A metric present elsewhere is missing here.
    #[error("{group}: boot #{boot}, workload {workload}: metric '{metric}' is missing ({where_})")]
    MissingMetric {
        /// Group name.
        group: String,
        /// Boot index in its file.
        boot: u32,
        /// Workload (with parameters).
        workload: String,
        /// Metric name.
        metric: String,
        /// Which iteration or boot lacks it, and where it was seen.
        where_: String,
    },
    /// A workload stopped early or measured nothing in one boot.
    #[error("{group}: boot #{boot}: workload {workload} is incomplete: {why}")]
    Incomplete {
        /// Group name.
        group: String,
        /// Boot index in its file.
        boot: u32,
        /// Workload (with parameters).
        workload: String,
        /// The workload's error, or "no iterations".
        why: String,
    },
    /// The same workload ran in different versions within one group.
    #[error("{group}: boot #{boot} ran workload {name} version {got}, boot #{seen_in} version {want}: different versions measure different things, so they are never compared")]
    MixedVersions {
        /// Group name.
        group: String,
        /// The boot with the other version.
        boot: u32,
        /// Workload name.
        name: String,
        /// Its version there.
        got: String,
        /// A boot with the group's first version.
        seen_in: u32,
        /// That version.
        want: String,
    },
    /// A workload instance is in some boots of the group but not others.
    #[error("{group}: boot #{boot} lacks workload {workload}, which boot #{seen_in} ran")]
    MissingWorkload {
        /// Group name.
        group: String,
        /// Boot lacking it.
        boot: u32,
        /// Workload (with parameters).
        workload: String,
        /// A boot that has it.
        seen_in: u32,
    },
    /// A metric changes unit or direction between boots.
    #[error("{group}: boot #{boot}, workload {workload}: metric '{metric}' is in {got}, but in {want} elsewhere")]
    Inconsistent {
        /// Group name.
        group: String,
        /// Boot index.
        boot: u32,
        /// Workload (with parameters).
        workload: String,
        /// Metric name.
        metric: String,
        /// Unit/direction here.
        got: String,
        /// Unit/direction seen first.
        want: String,
    },
    /// A workload asked for with `--workloads` is not in the group.
    #[error("{group}: no workload named '{name}' (the group has: {have})")]
    UnknownWorkload {
        /// Group name.
        group: String,
        /// The name asked for.
        name: String,
        /// Workload names present.
        have: String,
    },
    /// No boot of the group has a usable result.
    #[error("{group}: no boot has a usable result ({why})")]
    NoUsableBoots {
        /// Group name.
        group: String,
        /// Why each boot was left out.
        why: String,
    },
}

/// A workload run with given parameters: the unit that may be compared.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct WorkloadKey {
    /// Workload name.
    pub name: String,
    /// Its version (`loads::workloads::VERSIONS`; results without one are
    /// version 1); `None` when the result's version is not a number.
    pub version: Option<u32>,
    /// Its effective parameters as canonical JSON (keys sorted), the
    /// version left out.
    pub params: String,
}

/// A workload version as messages show it.
pub fn version_text(v: Option<u32>) -> String {
    v.map_or_else(|| "unreadable".to_string(), |v| v.to_string())
}

impl WorkloadKey {
    /// The key of a workload result.
    pub fn of(w: &loads::schema::WorkloadResult) -> WorkloadKey {
        let params = loads::workload::params_without_version(&w.params);
        WorkloadKey {
            name: w.name.clone(),
            version: loads::workload::version_in(&w.params),
            params: canonical_json(&serde_json::Value::Object(params)),
        }
    }
}

impl std::fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.name)?;
        // Version 1 (or none, which is the same) goes without saying.
        if self.version != Some(loads::workload::UNVERSIONED) {
            write!(f, " (version {})", version_text(self.version))?;
        }
        if self.params != "{}" {
            write!(f, " {}", self.params)?;
        }
        Ok(())
    }
}

/// One metric of one workload instance.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct MetricKey {
    /// The workload instance.
    pub workload: WorkloadKey,
    /// The metric's stable name.
    pub metric: String,
}

/// One boot's values of one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BootValues {
    /// Boot index in its results file.
    pub boot: u32,
    /// Measured iterations, in order.
    pub iterations: Vec<f64>,
}

impl BootValues {
    /// The boot's summary value: the mean of its iterations.
    pub fn mean(&self) -> f64 {
        self.iterations.iter().sum::<f64>() / self.iterations.len() as f64
    }
}

/// One metric's values across a group's boots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricSeries {
    /// Unit.
    pub unit: String,
    /// Which direction is better.
    pub better: Better,
    /// Per boot, in run order.
    pub boots: Vec<BootValues>,
}

impl MetricSeries {
    /// The per-boot means: the samples of every comparison.
    pub fn boot_means(&self) -> Vec<f64> {
        self.boots.iter().map(BootValues::mean).collect()
    }

    /// Iterations in all.
    pub fn iterations(&self) -> usize {
        self.boots.iter().map(|b| b.iterations.len()).sum()
    }
}

/// A boot left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkippedBoot {
    /// Boot index in its file.
    pub boot: u32,
    /// Why.
    pub reason: String,
}

/// Everything a group contributes to a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupSamples {
    /// Metrics by workload instance and name.
    pub metrics: BTreeMap<MetricKey, MetricSeries>,
    /// Workload instances with their parameters.
    pub workloads: BTreeSet<WorkloadKey>,
    /// Boots used.
    pub used: Vec<u32>,
    /// Boots left out.
    pub skipped: Vec<SkippedBoot>,
}

/// JSON with object keys sorted at every level, so equal parameters compare
/// equal whatever order they were written in.
pub fn canonical_json(v: &serde_json::Value) -> String {
    fn sorted(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => {
                let ordered: BTreeMap<&String, serde_json::Value> = m.iter().map(|(k, v)| (k, sorted(v))).collect();
                serde_json::Value::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

type BootMetrics = BTreeMap<MetricKey, (String, Better, Vec<f64>)>;

/// One boot's metrics, checked; `Err` says why the boot cannot be used.
fn boot_metrics(
    group: &str,
    index: u32,
    record: &BootRecord,
    only: Option<&[String]>,
) -> Result<BootMetrics, SampleError> {
    let mut out: BootMetrics = BTreeMap::new();
    let Some(doc) = &record.result else { return Ok(out) };
    for w in &doc.workloads {
        if only.is_some_and(|names| !names.contains(&w.name)) {
            continue;
        }
        let key = WorkloadKey::of(w);
        if let Some(why) = &w.error {
            return Err(SampleError::Incomplete {
                group: group.into(),
                boot: index,
                workload: key.to_string(),
                why: why.clone(),
            });
        }
        if w.iterations.is_empty() {
            return Err(SampleError::Incomplete {
                group: group.into(),
                boot: index,
                workload: key.to_string(),
                why: "no iterations".into(),
            });
        }
        let names: BTreeSet<&String> = w.iterations.iter().flat_map(|it| it.metrics.keys()).collect();
        for (i, it) in w.iterations.iter().enumerate() {
            for name in &names {
                let Some(m) = it.metrics.get(*name) else {
                    return Err(SampleError::MissingMetric {
                        group: group.into(),
                        boot: index,
                        workload: key.to_string(),
                        metric: (*name).clone(),
                        where_: format!("iteration {i} lacks it; other iterations have it"),
                    });
                };
                if !m.value.is_finite() {
                    return Err(SampleError::NonFinite {
                        group: group.into(),
                        boot: index,
                        workload: key.to_string(),
                        metric: (*name).clone(),
                        iteration: i,
                        value: m.value,
                    });
                }
                let entry = out
                    .entry(MetricKey { workload: key.clone(), metric: (*name).clone() })
                    .or_insert_with(|| (m.unit.clone(), m.better, Vec::new()));
                if entry.0 != m.unit || entry.1 != m.better {
                    return Err(SampleError::Inconsistent {
                        group: group.into(),
                        boot: index,
                        workload: key.to_string(),
                        metric: (*name).clone(),
                        got: format!("{} ({:?})", m.unit, m.better),
                        want: format!("{} ({:?})", entry.0, entry.1),
                    });
                }
                entry.2.push(m.value);
            }
        }
    }
    Ok(out)
}

/// Extracts a group's samples. Boots that did not end `ok` with a result
/// are left out and listed. A boot with a NaN, a missing metric or an
/// incomplete workload is an error, unless `skip_incomplete` is set, in
/// which case it is left out with the error as the reason. `only` keeps
/// just the named workloads.
pub fn extract(
    group: &str,
    boots: &[BootRecord],
    only: Option<&[String]>,
    skip_incomplete: bool,
) -> Result<GroupSamples, SampleError> {
    let mut samples =
        GroupSamples { metrics: BTreeMap::new(), workloads: BTreeSet::new(), used: vec![], skipped: vec![] };
    let mut first: Option<(u32, BTreeSet<MetricKey>)> = None;
    for record in boots {
        let index = record.boot.index;
        if record.result.is_none() || record.boot.classification != "ok" {
            let why = record.result_error.clone().or_else(|| record.boot.detail.clone()).unwrap_or_default();
            samples.skipped.push(SkippedBoot {
                boot: index,
                reason: format!(
                    "{}{}",
                    record.boot.classification,
                    if why.is_empty() { String::new() } else { format!(": {why}") }
                ),
            });
            continue;
        }
        let metrics = match boot_metrics(group, index, record, only) {
            Ok(m) => m,
            Err(e) if skip_incomplete => {
                samples.skipped.push(SkippedBoot { boot: index, reason: e.to_string() });
                continue;
            }
            Err(e) => return Err(e),
        };
        let keys: BTreeSet<MetricKey> = metrics.keys().cloned().collect();
        if let Some((seen_in, want)) = &first {
            if let Some(err) = compare_keys(group, index, *seen_in, want, &keys) {
                if skip_incomplete {
                    samples.skipped.push(SkippedBoot { boot: index, reason: err.to_string() });
                    continue;
                }
                return Err(err);
            }
        } else {
            first = Some((index, keys));
        }
        for (key, (unit, better, values)) in metrics {
            samples.workloads.insert(key.workload.clone());
            let series = samples.metrics.entry(key.clone()).or_insert_with(|| MetricSeries {
                unit: unit.clone(),
                better,
                boots: Vec::new(),
            });
            if series.unit != unit || series.better != better {
                return Err(SampleError::Inconsistent {
                    group: group.into(),
                    boot: index,
                    workload: key.workload.to_string(),
                    metric: key.metric.clone(),
                    got: format!("{unit} ({better:?})"),
                    want: format!("{} ({:?})", series.unit, series.better),
                });
            }
            series.boots.push(BootValues { boot: index, iterations: values });
        }
        samples.used.push(index);
    }
    if let Some(names) = only {
        let have: BTreeSet<&str> = boots
            .iter()
            .filter_map(|b| b.result.as_ref())
            .flat_map(|d| d.workloads.iter().map(|w| w.name.as_str()))
            .collect();
        if let Some(missing) = names.iter().find(|n| !have.contains(n.as_str())) {
            return Err(SampleError::UnknownWorkload {
                group: group.into(),
                name: missing.clone(),
                have: have.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
    }
    if samples.used.is_empty() {
        let why =
            samples.skipped.iter().map(|s| format!("boot #{}: {}", s.boot, s.reason)).collect::<Vec<_>>().join("; ");
        return Err(SampleError::NoUsableBoots {
            group: group.into(),
            why: if why.is_empty() { "the group has no boots".into() } else { why },
        });
    }
    Ok(samples)
}

/// A boot whose metric set differs from the first boot's.
fn compare_keys(
    group: &str,
    boot: u32,
    seen_in: u32,
    want: &BTreeSet<MetricKey>,
    got: &BTreeSet<MetricKey>,
) -> Option<SampleError> {
    if let Some(k) = want.difference(got).next() {
        let other_version =
            got.iter().find(|g| g.workload.name == k.workload.name && g.workload.version != k.workload.version);
        if let Some(g) = other_version {
            return Some(SampleError::MixedVersions {
                group: group.into(),
                boot,
                name: k.workload.name.clone(),
                got: version_text(g.workload.version),
                seen_in,
                want: version_text(k.workload.version),
            });
        }
        let workload_present = got.iter().any(|g| g.workload == k.workload);
        return Some(if workload_present {
            SampleError::MissingMetric {
                group: group.into(),
                boot,
                workload: k.workload.to_string(),
                metric: k.metric.clone(),
                where_: format!("boot #{seen_in} has it"),
            }
        } else {
            SampleError::MissingWorkload { group: group.into(), boot, workload: k.workload.to_string(), seen_in }
        });
    }
    got.difference(want).next().map(|k| SampleError::MissingMetric {
        group: group.into(),
        boot: seen_in,
        workload: k.workload.to_string(),
        metric: k.metric.clone(),
        where_: format!("boot #{boot} has it"),
    })
}
