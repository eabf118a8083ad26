//! The comparison as data for other tools: JSON (the whole [`Report`]),
//! CSV (one row per metric and kernel) and Markdown (the reference table
//! and the changes, for a mailing-list post or a pull request).
//! Formatting only.

use super::text::{arrow, fmt_interval, fmt_p, fmt_pct, fmt_spread, fmt_value, params_words};
use super::Report;
use std::fmt::Write;

/// Errors of the data formats.
#[derive(Debug, thiserror::Error)]
pub enum TabularError {
    /// JSON serialisation failed.
    #[error("cannot write the comparison as JSON")]
    Json(#[source] serde_json::Error),
    /// CSV serialisation failed.
    #[error("cannot write the comparison as CSV")]
    Csv(#[source] csv::Error),
}

/// The whole report as pretty JSON.
pub fn json(r: &Report) -> Result<String, TabularError> {
    serde_json::to_string_pretty(r).map(|s| s + "\n").map_err(TabularError::Json)
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// One row per metric and kernel; the change columns are empty for the
/// baseline.
pub fn csv(r: &Report) -> Result<String, TabularError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let header = [
        "workload",
        "params",
        "metric",
        "unit",
        "better",
        "kernel",
        "role",
        "boots",
        "iterations",
        "mean",
        "sd",
        "sd_between_boots",
        "pct_of_baseline",
        "sd_pct_of_baseline",
        "change_pct",
        "interval_lo_pct",
        "interval_hi_pct",
        "interval_confidence",
        "p_value",
        "p_adjusted",
        "verdict",
        "method",
        "correction",
        "note",
    ];
    w.write_record(header).map_err(TabularError::Csv)?;
    for m in &r.metrics {
        for (k, f) in m.kernels.iter().enumerate() {
            let change = m.changes.iter().find(|c| c.candidate == k);
            let better = match m.better {
                loads::schema::Better::Higher => "higher",
                loads::schema::Better::Lower => "lower",
            };
            let row = [
                m.key.workload.name.clone(),
                m.key.workload.params.clone(),
                m.key.metric.clone(),
                m.unit.clone(),
                better.to_string(),
                r.kernels[k].name.clone(),
                r.kernels[k].role.to_string(),
                f.boots.to_string(),
                f.iterations.to_string(),
                f.mean.to_string(),
                f.sd.to_string(),
                f.sd_between_boots.to_string(),
                f.pct_of_baseline.to_string(),
                f.sd_pct_of_baseline.to_string(),
                change.map(|c| c.change_pct.to_string()).unwrap_or_default(),
                opt(change.and_then(|c| c.interval_pct.map(|i| i.0))),
                opt(change.and_then(|c| c.interval_pct.map(|i| i.1))),
                opt(change.map(|c| c.interval_confidence)),
                opt(change.and_then(|c| c.p_value)),
                opt(change.and_then(|c| c.p_adjusted)),
                change.map(|c| c.verdict.to_string()).unwrap_or_default(),
                change.map(|c| format!("{:?}", c.method).to_lowercase()).unwrap_or_default(),
                change.map(|_| r.settings.correction.to_string()).unwrap_or_default(),
                change.and_then(|c| c.note.clone()).unwrap_or_default(),
            ];
            w.write_record(&row).map_err(TabularError::Csv)?;
        }
    }
    let bytes = w.into_inner().map_err(|e| TabularError::Csv(e.into_error().into()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Markdown: warnings, kernels, the reference table per workload, then
/// the changes.
pub fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## bootbench compare\n");
    let _ = writeln!(out, "{}.\n", md_escape(&r.method_sentence()));
    if !r.warnings.is_empty() {
        let _ = writeln!(out, "> **Warning: these runs differ in more than the kernel.**");
        for w in &r.warnings {
            let _ = writeln!(out, "> - {}", md_escape(w));
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "| Role | Kernel | Release | Machine | Boots used | cmdline |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for k in &r.kernels {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} of {} | `{}` |",
            k.role,
            md_escape(&k.name),
            md_escape(&k.release),
            md_escape(&k.machine),
            k.boots_used,
            k.boots_total,
            md_escape(&k.cmdline)
        );
    }
    let mut workloads: Vec<&super::samples::WorkloadKey> = Vec::new();
    for m in &r.metrics {
        if !workloads.contains(&&m.key.workload) {
            workloads.push(&m.key.workload);
        }
    }
    for w in workloads {
        let metrics: Vec<&super::MetricReport> = r.metrics.iter().filter(|m| m.key.workload == *w).collect();
        let params = params_words(&w.params);
        let _ = writeln!(
            out,
            "\n### {}{}\n",
            w.name,
            if params.is_empty() { String::new() } else { format!(" ({params})") }
        );
        let mut head = "| Config |".to_string();
        let mut rule = "|---|".to_string();
        for m in &metrics {
            let _ = write!(head, " {} {} (%) |", m.key.metric, arrow(m.better));
            rule.push_str("---:|");
        }
        let _ = writeln!(out, "{head}\n{rule}");
        let order: Vec<usize> = (1..r.kernels.len()).chain(std::iter::once(0)).collect();
        for k in order {
            let name = if k == 0 { format!("{} (baseline)", r.kernels[0].name) } else { r.kernels[k].name.clone() };
            let mut line = format!("| {} |", md_escape(&name));
            for m in &metrics {
                let f = &m.kernels[k];
                let _ = write!(
                    line,
                    " {:.2} ± {}{} |",
                    f.pct_of_baseline,
                    fmt_spread(f.sd_pct_of_baseline),
                    if f.sd_between_boots { "" } else { "*" }
                );
            }
            let _ = writeln!(out, "{line}");
        }
        let mut line = "| baseline mean |".to_string();
        for m in &metrics {
            let _ = write!(line, " {} {} |", fmt_value(m.kernels[0].mean), md_escape(&m.unit));
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "\n### Changes\n");
    let _ =
        writeln!(out, "| Metric | Candidate | Change | Interval | Conf. | p | p adj. | Verdict | Boots | Iterations |");
    let _ = writeln!(out, "|---|---|---:|---|---:|---:|---:|---|---:|---:|");
    for m in &r.metrics {
        for c in &m.changes {
            let _ = writeln!(
                out,
                "| {} {} {} | {} | {} | {} | {:.1}% | {} | {} | **{}** | {} v {} | {} v {} |",
                m.key.workload.name,
                m.key.metric,
                arrow(m.better),
                md_escape(&r.kernels[c.candidate].name),
                fmt_pct(c.change_pct),
                fmt_interval(c),
                100.0 * c.interval_confidence,
                fmt_p(c.p_value),
                fmt_p(c.p_adjusted),
                c.verdict,
                c.boots.0,
                c.boots.1,
                c.iterations.0,
                c.iterations.1
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::test_fixtures::fork_boots;
    use super::super::{compare, GroupInput, Settings};
    use super::*;

    fn report() -> Report {
        let base = GroupInput {
            name: "base".into(),
            source: "a.json".into(),
            boots: fork_boots(0, "base", "aaaa", &[&[100.0, 100.4], &[99.0, 99.2], &[101.0, 100.6]]),
        };
        let cand = GroupInput {
            name: "new|kernel".into(),
            source: "b.json".into(),
            boots: fork_boots(3, "new", "bbbb", &[&[90.0, 90.2], &[91.0, 91.4], &[89.0, 89.4]]),
        };
        compare(&base, &[cand], Settings::default(), None, false).unwrap()
    }

    #[test]
    fn json_round_trips_as_data() {
        let v: serde_json::Value = serde_json::from_str(&json(&report()).unwrap()).unwrap();
        assert_eq!(v["format"], "bootbench-comparison");
        assert_eq!(v["settings"]["correction"], "holm");
        // Metrics are in name order: fork_latency (got longer: worse), fork_rate (lower: worse).
        assert_eq!(v["metrics"][0]["key"]["metric"], "fork_latency");
        assert_eq!(v["metrics"][0]["changes"][0]["verdict"], "worse");
        assert_eq!(v["metrics"][1]["changes"][0]["verdict"], "worse");
        assert_eq!(v["metrics"][1]["kernels"][0]["per_boot"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn csv_has_a_row_per_metric_and_kernel() {
        let text = csv(&report()).unwrap();
        let mut rd = ::csv::Reader::from_reader(text.as_bytes());
        let rows: Vec<::csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
        assert_eq!(rows.len(), 4);
        let h = rd.headers().unwrap().clone();
        let col = |name: &str| h.iter().position(|x| x == name).unwrap();
        let rate_cand =
            rows.iter().find(|r| &r[col("metric")] == "fork_rate" && &r[col("role")] == "candidate").unwrap();
        assert_eq!(&rate_cand[col("kernel")], "new|kernel");
        assert_eq!(&rate_cand[col("verdict")], "worse");
        assert_eq!(&rate_cand[col("params")], r#"{"count":1000}"#);
        let rate_base =
            rows.iter().find(|r| &r[col("metric")] == "fork_rate" && &r[col("role")] == "baseline").unwrap();
        assert_eq!(&rate_base[col("pct_of_baseline")], "100");
        assert_eq!(&rate_base[col("verdict")], "");
    }

    #[test]
    fn markdown_tables_are_well_formed() {
        let md = markdown(&report());
        assert!(md.contains("### fork (count=1000)"), "{md}");
        assert!(md.contains("| new\\|kernel |"), "{md}");
        assert!(md.contains("| base (baseline) | 100.00 ±"), "{md}");
        assert!(md.contains("**worse**"), "{md}");
        for table_line in md.lines().filter(|l| l.starts_with("| Config")) {
            assert_eq!(table_line.matches('|').count(), 4, "{table_line}");
        }
    }
}
