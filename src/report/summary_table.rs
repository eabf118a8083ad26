//! The table `bootbench run` and `bootbench local` print: per kernel group,
//! workload and metric, the mean and spread, saying how many boots and
//! iterations each figure rests on. Iterations are summarised within a boot;
//! boots are the unit of replication.

use crate::results::BootRecord;
use crate::terminal_table::{Align, TextTable};
use loads::schema::{Better, RunDocument};
use statrs::statistics::Statistics;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One metric's values, per boot, each boot a list of iteration values.
#[derive(Debug, Default)]
struct MetricSamples {
    unit: String,
    better: Option<Better>,
    per_boot: Vec<Vec<f64>>,
}

/// Summary figures of one metric.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSummary {
    /// Mean of the per-boot means.
    pub mean: f64,
    /// Standard deviation of the per-boot means when there are 2+ boots,
    /// else of the iterations of the single boot.
    pub stddev: f64,
    /// Coefficient of variation in %.
    pub cv_pct: f64,
    /// Boots with values.
    pub boots: usize,
    /// Iterations in all.
    pub iterations: usize,
    /// Whether `stddev` is between boots (true) or between iterations.
    pub between_boots: bool,
}

fn summarise(per_boot: &[Vec<f64>]) -> Option<MetricSummary> {
    let boots: Vec<&Vec<f64>> = per_boot.iter().filter(|b| !b.is_empty()).collect();
    let iterations = boots.iter().map(|b| b.len()).sum();
    let means: Vec<f64> = boots.iter().map(|b| b.iter().mean()).collect();
    let (mean, stddev, between_boots) = match boots.as_slice() {
        [] => return None,
        [only] => (only.iter().mean(), if only.len() > 1 { only.iter().std_dev() } else { f64::NAN }, false),
        _ => (means.iter().mean(), means.iter().std_dev(), true),
    };
    let cv_pct = if mean != 0.0 { 100.0 * stddev / mean.abs() } else { f64::NAN };
    Some(MetricSummary { mean, stddev, cv_pct, boots: boots.len(), iterations, between_boots })
}

fn collect<'a>(docs: impl Iterator<Item = &'a RunDocument>) -> BTreeMap<(String, String), MetricSamples> {
    let mut out: BTreeMap<(String, String), MetricSamples> = BTreeMap::new();
    for doc in docs {
        let mut this_boot: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for w in &doc.workloads {
            for it in &w.iterations {
                for (name, m) in &it.metrics {
                    let key = (w.name.clone(), name.clone());
                    this_boot.entry(key.clone()).or_default().push(m.value);
                    let s = out.entry(key).or_default();
                    s.unit = m.unit.clone();
                    s.better = Some(m.better);
                }
            }
        }
        for (key, values) in this_boot {
            out.entry(key).or_default().per_boot.push(values);
        }
    }
    out
}

fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn render_metrics(out: &mut String, samples: &BTreeMap<(String, String), MetricSamples>) {
    use Align::{Left, Right};
    let mut table =
        TextTable::new(&[Left, Left, Right, Right, Right, Left, Right, Left], &[10, 16, 12, 10, 7, 9, 7], 1);
    table.row(["workload", "metric", "mean", "stddev", "cv%", "unit", "boots", "iters (sd over)"]);
    for ((workload, metric), s) in samples {
        let Some(sum) = summarise(&s.per_boot) else { continue };
        let better = match s.better {
            Some(Better::Higher) => "↑",
            Some(Better::Lower) => "↓",
            None => "",
        };
        table.row([
            workload.clone(),
            format!("{metric} {better}"),
            fmt_num(sum.mean),
            fmt_num(sum.stddev),
            if sum.cv_pct.is_finite() { format!("{:.2}", sum.cv_pct) } else { "-".into() },
            s.unit.clone(),
            sum.boots.to_string(),
            format!("{} ({})", sum.iterations, if sum.between_boots { "boots" } else { "iterations" }),
        ]);
    }
    out.push_str(&table.render("  "));
}

/// The table for one local run.
pub fn render_document(doc: &RunDocument) -> String {
    let mut out = String::new();
    let p = &doc.provenance;
    let _ = writeln!(
        out,
        "{} {} — {} CPUs, {} MiB, suite {} — status {:?}",
        p.machine.arch,
        p.kernel.release,
        p.machine.cpus,
        p.machine.mem_bytes / (1024 * 1024),
        p.suite.name,
        doc.status
    );
    render_metrics(&mut out, &collect(std::iter::once(doc)));
    for e in &doc.errors {
        let _ = writeln!(out, "  error ({}): {}", e.location, e.message);
    }
    for w in doc.workloads.iter().filter(|w| w.error.is_some()) {
        let _ = writeln!(out, "  error ({}): {}", w.name, w.error.as_deref().unwrap_or_default());
    }
    out
}

/// Image hash, cmdline and label: boots that share it are one kernel group.
type GroupKey = (String, String, String);

/// The table for a run of one or more kernels: one block per group.
pub fn render_boots(boots: &[BootRecord]) -> String {
    let mut groups: Vec<(GroupKey, Vec<&BootRecord>)> = Vec::new();
    for b in boots {
        let key = b.group_key();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(b),
            None => groups.push((key, vec![b])),
        }
    }
    let mut out = String::new();
    for (_, members) in &groups {
        let Some(first) = members.first() else { continue };
        let ok = members.iter().filter(|b| b.boot.classification == "ok").count();
        let release = first
            .result
            .as_ref()
            .map(|d| d.provenance.kernel.release.clone())
            .or_else(|| first.kernel.release.clone())
            .unwrap_or_else(|| first.kernel.path.display().to_string());
        let _ = writeln!(
            out,
            "Kernel {release}{} — {} boot(s), {ok} ok — {} {} vCPU {} MiB, accel {}",
            if first.label.is_empty() { String::new() } else { format!(" [{}]", first.label) },
            members.len(),
            first.machine.arch,
            first.machine.smp,
            first.machine.mem_mib,
            first.machine.accel,
        );
        render_metrics(&mut out, &collect(members.iter().filter_map(|b| b.result.as_ref())));
        for b in members.iter().filter(|b| b.boot.classification != "ok" || b.result_error.is_some()) {
            let _ = writeln!(
                out,
                "  boot {}: {}{}",
                b.boot.index,
                b.boot.classification,
                b.boot.detail.as_deref().or(b.result_error.as_deref()).map(|d| format!(": {d}")).unwrap_or_default()
            );
        }
        for doc in members.iter().filter_map(|b| b.result.as_ref()) {
            for e in &doc.errors {
                let _ = writeln!(out, "  guest error ({}): {}", e.location, e.message);
            }
            for w in doc.workloads.iter().filter(|w| w.error.is_some()) {
                let _ = writeln!(out, "  guest error ({}): {}", w.name, w.error.as_deref().unwrap_or_default());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_between_iterations_and_boots() {
        let one = summarise(&[vec![1.0, 2.0, 3.0]]).unwrap();
        assert_eq!(one.mean, 2.0);
        assert!((one.stddev - 1.0).abs() < 1e-12);
        assert!(!one.between_boots);
        let two = summarise(&[vec![1.0, 3.0], vec![4.0, 6.0]]).unwrap();
        assert_eq!(two.mean, 3.5);
        assert!((two.stddev - (4.5f64).sqrt()).abs() < 1e-12);
        assert!(two.between_boots);
        assert_eq!(two.iterations, 4);
        assert!(summarise(&[vec![]]).is_none());
        assert!(summarise(&[vec![5.0]]).unwrap().stddev.is_nan());
    }

    #[test]
    fn columns_line_up_past_arrows_and_wide_names() {
        use crate::compare::test_fixtures::{doc, fork_workload};
        use unicode_width::UnicodeWidthStr;
        let mut w = fork_workload(1000, &[1.5]);
        w.iterations[0].metrics.clear();
        w.iterations[0].metrics.insert("rate".into(), loads::schema::Metric::higher(1.5, "ops/s"));
        w.iterations[0].metrics.insert("latency_名前".into(), loads::schema::Metric::lower(1.5, "µs"));
        let doc = doc(vec![w]);
        let text = render_document(&doc);
        let lines: Vec<&str> = text.lines().skip(1).take(3).collect();
        // The unit column starts at the same display column on every line.
        let at = |l: &str, word: &str| l.find(word).map(|i| l[..i].width());
        let units = [at(lines[0], "unit"), at(lines[1], "µs"), at(lines[2], "ops/s")];
        assert!(units.iter().all(|u| u.is_some() && *u == units[0]), "{text}");
    }
}
