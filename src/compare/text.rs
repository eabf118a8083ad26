//! The plain-text comparison: the layout of the LKML reports bootbench
//! reproduces (per workload, each kernel's metrics as % of the baseline ±
//! the standard deviation in % of the baseline, baseline last at 100.00)
//! and each boot's mean as a strip of eighth blocks, followed by the table
//! of changes with intervals, p-values and verdicts.
//! Formatting only.

use super::{Change, MetricReport, Report};
use crate::terminal_table::{range, strip, Align, TextTable};
use loads::schema::Better;
use std::fmt::Write;

/// Metric columns per table row before the block is split.
const COLUMNS_PER_TABLE: usize = 4;
const RULE_WIDTH: usize = 80;

/// `{"count":1000,"mode":"pipe"}` → `count=1000 mode=pipe`.
pub fn params_words(canonical: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(canonical) {
        Ok(serde_json::Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => canonical.to_string(),
    }
}

/// An arrow for the metric's good direction.
pub fn arrow(b: Better) -> &'static str {
    match b {
        Better::Higher => "↑",
        Better::Lower => "↓",
    }
}

/// A spread in % with enough digits to be more than 0.0 when it is not.
pub fn fmt_spread(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v == 0.0 || v >= 0.1 {
        format!("{v:.1}")
    } else if v >= 0.01 {
        format!("{v:.2}")
    } else if v >= 0.001 {
        format!("{v:.3}")
    } else {
        format!("{v:.1e}")
    }
}

/// An absolute value with sensible digits.
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "-".into()
    } else if a >= 1000.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// A signed percentage.
pub fn fmt_pct(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() < 0.01 && v != 0.0 {
        format!("{v:+.4}%")
    } else {
        format!("{v:+.2}%")
    }
}

/// A p-value.
pub fn fmt_p(p: Option<f64>) -> String {
    match p {
        None => "-".into(),
        Some(p) if p < 1e-4 => format!("{p:.1e}"),
        Some(p) => format!("{p:.4}"),
    }
}

/// The interval of a change, `[lo, hi]` in %.
pub fn fmt_interval(c: &Change) -> String {
    match c.interval_pct {
        Some((lo, hi)) => format!("[{}, {}]", fmt_pct(lo), fmt_pct(hi)),
        None => "(none)".into(),
    }
}

/// The `102.11 +- 1.9` cell.
fn cell(m: &MetricReport, k: usize) -> String {
    let f = &m.kernels[k];
    let star = if f.sd_between_boots { "" } else { "*" };
    if f.pct_of_baseline.is_finite() {
        format!("{:.2} +- {}{star}", f.pct_of_baseline, fmt_spread(f.sd_pct_of_baseline))
    } else {
        "-".into()
    }
}

/// Each boot's mean of each metric as one eighth block, in boot order,
/// per kernel, scaled over the metric's range across every kernel: a
/// boot far from the others stands out.
fn boot_strips(r: &Report, metrics: &[&MetricReport]) -> String {
    let mut table = TextTable::new(&[Align::Left, Align::Left, Align::Left, Align::Left], &[], 2);
    for m in metrics {
        let Some((lo, hi)) = range(m.kernels.iter().flat_map(|f| f.per_boot.iter().map(|b| b.mean))) else {
            continue;
        };
        for (k, f) in m.kernels.iter().enumerate() {
            let means: Vec<f64> = f.per_boot.iter().map(|b| b.mean).collect();
            let scale =
                if k == 0 { format!("{} .. {} {}", fmt_value(lo), fmt_value(hi), m.unit) } else { String::new() };
            let metric = if k == 0 { format!("{} {}", m.key.metric, arrow(m.better)) } else { String::new() };
            table.row([metric, r.kernels[k].name.clone(), strip(&means, lo, hi), scale]);
        }
    }
    let lines = table.lines("  ");
    if lines.is_empty() {
        return String::new();
    }
    format!("\nPer boot, in boot order (lowest ▁ to highest █ of each metric):\n{}\n", lines.join("\n"))
}

/// The report as text.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let n_cand = r.kernels.len().saturating_sub(1);
    let _ = writeln!(
        out,
        "bootbench compare: baseline '{}' vs {n_cand} candidate{}",
        r.kernels.first().map(|k| k.name.as_str()).unwrap_or_default(),
        if n_cand == 1 { "" } else { "s" }
    );
    let _ = writeln!(out, "Method: {}.", r.method_sentence());
    if !r.warnings.is_empty() {
        let bang = "!".repeat(RULE_WIDTH);
        let _ = writeln!(out, "\n{bang}");
        let _ = writeln!(
            out,
            "!! WARNING: these runs differ in more than the kernel; a difference may not be the kernel's:"
        );
        for w in &r.warnings {
            let _ = writeln!(out, "!!   {w}");
        }
        let _ = writeln!(out, "{bang}");
    }
    let _ = writeln!(out, "\nKernels:");
    for k in &r.kernels {
        let _ = writeln!(
            out,
            "  {:<9} {}: {} (sha256 {}), {}; {} of {} boots used; from {}",
            k.role,
            k.name,
            k.release,
            k.image_sha256.get(..12).unwrap_or(&k.image_sha256),
            k.machine,
            k.boots_used,
            k.boots_total,
            k.source
        );
        let _ = writeln!(out, "            cmdline: {}", k.cmdline);
        for s in &k.skipped {
            let _ = writeln!(out, "            left out: boot #{}: {}", s.boot, s.reason);
        }
    }

    let mut by_workload: Vec<(&super::samples::WorkloadKey, Vec<&MetricReport>)> = Vec::new();
    for m in &r.metrics {
        match by_workload.iter_mut().find(|(w, _)| **w == m.key.workload) {
            Some((_, v)) => v.push(m),
            None => by_workload.push((&m.key.workload, vec![m])),
        }
    }
    let mut any_star = false;
    for (w, metrics) in &by_workload {
        let _ = writeln!(out, "\n{}", "*".repeat(RULE_WIDTH));
        let _ = writeln!(out, "{}", w.name);
        let params = params_words(&w.params);
        if !params.is_empty() {
            let _ = writeln!(out, "{params}");
        }
        let _ = writeln!(out, "{}", "=".repeat(RULE_WIDTH));
        for chunk in metrics.chunks(COLUMNS_PER_TABLE) {
            // The reference's narrowest columns; wider content widens them.
            let mut mins = vec![28];
            mins.extend(chunk.iter().map(|_| 18));
            let mut table = TextTable::new(&vec![Align::Left; chunk.len() + 1], &mins, 1);
            table.row(
                std::iter::once("Config".to_string())
                    .chain(chunk.iter().map(|m| format!("{} {} (%)", m.key.metric, arrow(m.better)))),
            );
            // Candidates first, the baseline last, as in the reference.
            let order: Vec<usize> = (1..r.kernels.len()).chain(std::iter::once(0)).collect();
            for k in order {
                let name = if k == 0 { format!("{} (baseline)", r.kernels[0].name) } else { r.kernels[k].name.clone() };
                any_star |= chunk.iter().any(|m| !m.kernels[k].sd_between_boots);
                table.row(std::iter::once(name).chain(chunk.iter().map(|m| cell(m, k))));
            }
            table.row(
                std::iter::once("  baseline mean".to_string())
                    .chain(chunk.iter().map(|m| format!("{} {}", fmt_value(m.kernels[0].mean), m.unit))),
            );
            table.row(std::iter::once("  boots/iters (base, cand.)".to_string()).chain(chunk.iter().map(|m| {
                m.kernels.iter().map(|f| format!("{}/{}", f.boots, f.iterations)).collect::<Vec<_>>().join(" ")
            })));
            for (i, line) in table.lines("").into_iter().enumerate() {
                let _ = writeln!(out, "{line}");
                if i == 0 {
                    let _ = writeln!(out, "{}", "-".repeat(RULE_WIDTH));
                }
            }
        }
        out.push_str(&boot_strips(r, metrics));
    }
    if any_star {
        let _ = writeln!(out, "\n* a single boot: spread over its iterations, not between boots");
    }

    let _ = writeln!(out, "\nChanges against the baseline (boots/iterations: baseline vs candidate):");
    let mut table = TextTable::new(
        &[
            Align::Left,
            Align::Left,
            Align::Right,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Left,
            Align::Right,
            Align::Right,
        ],
        &[],
        2,
    );
    table.row(["Metric", "Candidate", "Change", "Interval", "Conf.", "p", "p adj.", "Verdict", "Boots", "Iterations"]);
    let mut notes = Vec::new();
    for m in &r.metrics {
        for c in &m.changes {
            table.row([
                format!("{} {} {}", m.key.workload.name, m.key.metric, arrow(m.better)),
                r.kernels[c.candidate].name.clone(),
                fmt_pct(c.change_pct),
                fmt_interval(c),
                format!("{:.1}%", 100.0 * c.interval_confidence),
                fmt_p(c.p_value),
                fmt_p(c.p_adjusted),
                c.verdict.to_string(),
                format!("{} v {}", c.boots.0, c.boots.1),
                format!("{} v {}", c.iterations.0, c.iterations.1),
            ]);
            if let Some(n) = &c.note {
                notes
                    .push(format!("  {} {} ({}): {n}", m.key.workload.name, m.key.metric, r.kernels[c.candidate].name));
            }
        }
    }
    out.push_str(&table.render(""));
    if !notes.is_empty() {
        let _ = writeln!(out, "Notes:");
        for n in notes {
            let _ = writeln!(out, "{n}");
        }
    }
    let _ = writeln!(
        out,
        "Verdicts: 'no change' = interval inside ±{t}%; 'better'/'worse' = interval excludes 0 and the change is beyond ±{t}%; 'unsure' = more boots needed.",
        t = r.settings.threshold_pct
    );
    out
}

#[cfg(test)]
mod tests {
    use super::super::test_fixtures::fork_boots;
    use super::super::{compare, GroupInput, Settings};
    use super::*;

    #[test]
    fn reference_layout() {
        let base = GroupInput {
            name: "Baseline".into(),
            source: "a.json".into(),
            boots: fork_boots(0, "", "aaaa", &[&[100.0, 100.4], &[99.0, 99.2], &[101.0, 100.6]]),
        };
        let cand = GroupInput {
            name: "CKRM with 100 classes".into(),
            source: "b.json".into(),
            boots: fork_boots(3, "", "bbbb", &[&[102.0, 102.2], &[101.0, 101.4], &[103.0, 103.4]]),
        };
        let r = compare(&base, &[cand], Settings::default(), None, false).unwrap();
        let t = render(&r);
        let lines: Vec<&str> = t.lines().collect();
        let head = lines.iter().position(|l| l.starts_with("Config")).unwrap();
        assert!(lines[head - 2].starts_with("count=1000") && lines[head - 3] == "fork", "{t}");
        assert!(lines[head].contains("fork_rate ↑ (%)") && lines[head].contains("fork_latency ↓ (%)"), "{t}");
        assert!(
            lines[head + 2].starts_with("CKRM with 100 classes") && lines[head + 2].ends_with("102.13 +- 1.0"),
            "{t}"
        );
        assert!(
            lines[head + 3].starts_with("Baseline (baseline)") && lines[head + 3].ends_with("100.00 +- 0.9"),
            "{t}"
        );
        assert!(lines[head + 5].contains("3/6 3/6"), "{t}");
        assert!(t.contains("Holm"), "{t}");
        let row = lines.iter().find(|l| l.starts_with("fork fork_rate")).unwrap();
        assert!(row.contains("+2.13%") && row.contains("3 v 3") && row.contains("6 v 6"), "{row}");
    }

    #[test]
    fn an_outlier_boot_stands_out_in_its_strip() {
        let base = GroupInput {
            name: "base".into(),
            source: "a.json".into(),
            boots: fork_boots(0, "", "aaaa", &[&[100.0], &[100.2], &[99.9], &[100.1]]),
        };
        let cand = GroupInput {
            name: "名前 ↑".into(),
            source: "b.json".into(),
            boots: fork_boots(4, "", "bbbb", &[&[100.1], &[140.0], &[100.0], &[99.8]]),
        };
        let r = compare(&base, &[cand], Settings::default(), None, false).unwrap();
        let t = render(&r);
        let strip_of = |name: &str| -> Vec<char> {
            let line = t.lines().find(|l| l.contains("fork_rate ↑") && l.contains("..")).unwrap_or("");
            let line = if name == "base" { line } else { t.lines().skip_while(|l| *l != line).nth(1).unwrap_or("") };
            line.split_whitespace()
                .find(|w| w.chars().all(|c| ('▁'..='█').contains(&c)))
                .unwrap_or("")
                .chars()
                .collect()
        };
        let (b, c) = (strip_of("base"), strip_of("cand"));
        assert_eq!((b.len(), c.len()), (4, 4), "{t}");
        assert_eq!(c[1], '█', "{t}");
        assert!(b.iter().chain([c[0], c[2], c[3]].iter()).all(|x| *x == '▁'), "{t}");
        // Every line of the changes table has its columns where the
        // header has them, by display width.
        let head = t.lines().position(|l| l.starts_with("Metric")).unwrap();
        let col = |l: &str| {
            let i = l.find("名前 ↑").unwrap_or(l.find("Candidate").unwrap_or(0));
            crate::terminal_table::display_width(&l[..i])
        };
        let rows: Vec<&str> = t.lines().skip(head).take(3).collect();
        assert!(rows.iter().all(|l| col(l) == col(rows[0])), "{rows:#?}");
    }

    #[test]
    fn formatting_helpers() {
        assert_eq!(params_words(r#"{"count":1000,"mode":"pipe"}"#), "count=1000 mode=pipe");
        assert_eq!(params_words("{}"), "");
        assert_eq!(fmt_spread(0.04), "0.04");
        assert_eq!(fmt_spread(0.0004), "4.0e-4");
        assert_eq!(fmt_spread(1.94), "1.9");
        assert_eq!(fmt_pct(2.114), "+2.11%");
        assert_eq!(fmt_p(Some(0.00001)), "1.0e-5");
    }
}
