//! `bootbench report --format html`: one results file as a self-contained
//! page. Per kernel group, per workload metric: its value in each measured
//! iteration, plotted in run order (one colour per boot), and beside each
//! value the system counters' changes over that iteration (context
//! switches, forks, CPU time, interrupts, softirqs, vmstat). Formatting
//! only; everything read from the file is escaped.

use crate::compare::selector;
use crate::html_page::{escape, id_token, sequence_plot, PlotError, Series, BASE_STYLE};
use crate::results::BootRecord;
use loads::schema::{Better, SystemDeltas};
use std::fmt::Write;

/// Errors drawing the page.
#[derive(Debug, thiserror::Error)]
pub enum ReportHtmlError {
    /// A plot could not be drawn.
    #[error(transparent)]
    Plot(#[from] PlotError),
}

const PAGE_STYLE: &str =
    "td.counters{text-align:left;font-size:.85em;max-width:34em}td.counters span{white-space:nowrap}
h2.kernel{margin-top:1.5em}";

/// One iteration's value of a metric, where it was measured.
struct Point<'a> {
    boot: u32,
    iteration: usize,
    value: f64,
    system: Option<&'a SystemDeltas>,
}

/// A metric of one workload over a group's boots.
struct MetricRows<'a> {
    workload: String,
    metric: String,
    unit: String,
    better: Better,
    points: Vec<Point<'a>>,
}

/// Every metric of `boots`, in the order the workloads ran, then by name.
fn metric_rows<'a>(boots: &[&'a BootRecord]) -> Vec<MetricRows<'a>> {
    let mut out: Vec<MetricRows<'a>> = Vec::new();
    for b in boots {
        let Some(doc) = &b.result else { continue };
        for w in &doc.workloads {
            for (i, it) in w.iterations.iter().enumerate() {
                for (name, m) in &it.metrics {
                    let at = match out.iter().position(|r| r.workload == w.name && r.metric == *name) {
                        Some(at) => at,
                        None => {
                            out.push(MetricRows {
                                workload: w.name.clone(),
                                metric: name.clone(),
                                unit: m.unit.clone(),
                                better: m.better,
                                points: Vec::new(),
                            });
                            out.len() - 1
                        }
                    };
                    if let Some(rows) = out.get_mut(at) {
                        rows.points.push(Point {
                            boot: b.boot.index,
                            iteration: i + 1,
                            value: m.value,
                            system: it.system.as_ref(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// A value with digits enough to tell iterations apart.
fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 1000.0 {
        format!("{v:.1}")
    } else if v.abs() >= 10.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.5}")
    }
}

/// The columns of the system deltas, in the table's order.
const SYSTEM_HEADER: [&str; 7] =
    ["context switches", "forks", "user s", "system s", "idle s", "iowait s", "other counters (changed)"];

/// An iteration's system deltas as the table's cells (escaped), or `-`s.
fn system_cells(s: Option<&SystemDeltas>) -> [String; 7] {
    let Some(s) = s else {
        return std::array::from_fn(|i| if i + 1 == SYSTEM_HEADER.len() { "not recorded".into() } else { "-".into() });
    };
    let sum = |f: fn(&loads::schema::CpuTime) -> f64| format!("{:.2}", s.cpus.iter().map(f).sum::<f64>());
    let others: Vec<String> = s
        .interrupts
        .iter()
        .map(|(k, v)| format!("irq {k}: {v}"))
        .chain(s.softirqs.iter().map(|(k, v)| format!("softirq {k}: {v}")))
        .chain(s.vmstat.iter().map(|(k, v)| format!("{k}: {v}")))
        .map(|t| format!("<span>{}</span>", escape(&t)))
        .collect();
    [
        s.context_switches.to_string(),
        s.forks.to_string(),
        sum(|c| c.user_s),
        sum(|c| c.system_s),
        sum(|c| c.idle_s),
        sum(|c| c.iowait_s),
        others.join(", "),
    ]
}

/// The page for the boots of a results file; `title` names the file.
pub fn render(title: &str, boots: &[BootRecord]) -> Result<String, ReportHtmlError> {
    let groups = selector::groups(boots);
    let names = crate::compare::display_names(&groups);
    let mut out = String::new();
    let title = format!("bootbench report: {title}");
    let _ = writeln!(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = writeln!(out, "<title>{}</title><style>{BASE_STYLE}\n{PAGE_STYLE}</style></head><body>", escape(&title));
    let _ = writeln!(out, "<h1>{}</h1>", escape(&title));
    if groups.is_empty() {
        let _ = writeln!(out, "<p>The file holds no boots.</p>");
    }
    for (g, name) in groups.iter().zip(&names) {
        let members: Vec<&BootRecord> = g.boots.iter().collect();
        let first = members.first().copied();
        let _ = writeln!(out, "<h2 class=\"kernel\" id=\"k{}\">Kernel {}</h2>", g.number, escape(name));
        if let Some(b) = first {
            let _ = writeln!(
                out,
                "<p>{} boot(s); image sha256 <code>{}</code>; {} {} vCPU {} MiB, accel {}; cmdline <code>{}</code></p>",
                members.len(),
                escape(&b.kernel.image_sha256),
                escape(&b.machine.arch),
                b.machine.smp,
                b.machine.mem_mib,
                escape(&b.machine.accel),
                escape(&b.cmdline)
            );
        }
        for b in members.iter().filter(|b| b.boot.classification != "ok" || b.result_error.is_some()) {
            let why = b.boot.detail.as_deref().or(b.result_error.as_deref()).unwrap_or_default();
            let _ = writeln!(
                out,
                "<p class=\"warning\">boot {}: {} {}</p>",
                b.boot.index,
                escape(&b.boot.classification),
                escape(why)
            );
        }
        for m in metric_rows(&members) {
            let subject = format!("{} {}", m.workload, m.metric);
            let id = format!("k{}-{}-{}", g.number, id_token(&m.workload), id_token(&m.metric));
            let _ = writeln!(
                out,
                "<section class=\"metric\" id=\"{}\" data-workload=\"{}\" data-metric=\"{}\">",
                escape(&id),
                escape(&m.workload),
                escape(&m.metric)
            );
            let better = match m.better {
                Better::Higher => "higher",
                Better::Lower => "lower",
            };
            let _ = writeln!(
                out,
                "<h3>{} {} <small>{}, {better} is better</small></h3>",
                escape(&m.workload),
                escape(&m.metric),
                escape(&m.unit)
            );
            let mut series: Vec<Series> = Vec::new();
            for (x, p) in m.points.iter().enumerate() {
                let label = format!("boot {}", p.boot);
                match series.last_mut().filter(|s| s.label == label) {
                    Some(s) => s.points.push((x as f64 + 1.0, p.value)),
                    None => series.push(Series { label, points: vec![(x as f64 + 1.0, p.value)] }),
                }
            }
            let svg = sequence_plot(
                &subject,
                &format!("{subject} per iteration ({})", m.unit),
                "iteration, in run order",
                &format!("{} ({})", m.metric, m.unit),
                &series,
            )?;
            let _ = writeln!(
                out,
                "<figure class=\"plot iterations-plot\">{svg}<figcaption>Each measured iteration in run order; one colour per boot.</figcaption></figure>"
            );
            let _ = write!(
                out,
                "<table class=\"iterations\"><tr><th>Boot</th><th>Iteration</th><th>{}</th>",
                escape(&m.unit)
            );
            for h in SYSTEM_HEADER {
                let _ = write!(out, "<th>{h}</th>");
            }
            let _ = writeln!(out, "</tr>");
            for p in &m.points {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td class=\"value\">{}</td>",
                    p.boot,
                    p.iteration,
                    fmt_value(p.value)
                );
                let cells = system_cells(p.system);
                let last = cells.len() - 1;
                for (i, c) in cells.iter().enumerate() {
                    let class = if i == last { " class=\"counters\"" } else { "" };
                    let _ = write!(out, "<td{class}>{c}</td>");
                }
                let _ = writeln!(out, "</tr>");
            }
            let _ = writeln!(out, "</table>\n</section>");
        }
    }
    let _ = writeln!(out, "</body></html>");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::test_fixtures::fork_boots;
    use loads::schema::CpuTime;

    /// Two boots of one kernel, each iteration with its system deltas, the
    /// second with a label that needs escaping.
    pub(crate) fn fixture() -> Vec<BootRecord> {
        let mut boots = fork_boots(0, "<new>", "aaaa01", &[&[1000.5, 1010.4], &[990.75]]);
        let mut n = 0u64;
        for b in &mut boots {
            for w in &mut b.result.as_mut().unwrap().workloads {
                for it in &mut w.iterations {
                    n += 1;
                    it.system = Some(SystemDeltas {
                        context_switches: 4000 + n,
                        forks: 1000 + n,
                        cpus: vec![CpuTime { cpu: 0, user_s: 0.25, system_s: 0.5 + n as f64, ..Default::default() }],
                        interrupts: [("LOC".to_string(), 700 + n)].into(),
                        softirqs: [("TIMER".to_string(), 300 + n)].into(),
                        vmstat: [("pgfault<&>".to_string(), 50_000 + n as i64)].into(),
                    });
                }
            }
        }
        boots
    }

    #[test]
    fn every_metric_iteration_and_system_delta_is_on_the_page() {
        let html = render("runs <1>.json", &fixture()).unwrap();
        if let Ok(path) = std::env::var("BOOTBENCH_DUMP_REPORT_HTML") {
            std::fs::write(path, &html).unwrap();
        }
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<h1>bootbench report: runs &lt;1&gt;.json</h1>"), "title escaped");
        assert!(html.contains("Kernel &lt;new&gt;"), "label escaped");
        assert!(!html.contains("<new>") && !html.contains("pgfault<&>"), "nothing from the file unescaped");
        assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="), "self-contained");
        for metric in ["fork_rate", "fork_latency"] {
            assert!(html.contains(&format!("id=\"k1-fork-{metric}\"")), "{metric}");
        }
        assert_eq!(html.matches("<svg").count(), 2, "a plot per metric");
        for value in ["1000.5", "1010.4", "990.750"] {
            assert!(html.contains(&format!("<td class=\"value\">{value}")), "{value}");
        }
        // The latency of the second iteration: 1e6 / 1010.4.
        assert!(html.contains(&format!("<td class=\"value\">{:.3}", 1e6 / 1010.4)), "latency");
        // Each iteration's deltas, beside both metrics' values.
        for n in 1..=3u64 {
            for cell in [
                format!("<td>{}</td><td>{}</td><td>0.25</td><td>{:.2}</td>", 4000 + n, 1000 + n, 0.5 + n as f64),
                format!("irq LOC: {}", 700 + n),
                format!("softirq TIMER: {}", 300 + n),
                format!("pgfault&lt;&amp;&gt;: {}", 50_000 + n),
            ] {
                assert_eq!(html.matches(&cell).count(), 2, "{cell}");
            }
        }
        // Boots in order, iterations numbered within their boot.
        assert!(html.contains("<tr><td>0</td><td>2</td><td class=\"value\">1010.4"), "boot 0 iteration 2");
        assert!(html.contains("<tr><td>1</td><td>1</td><td class=\"value\">990.750"), "boot 1 iteration 1");
    }

    #[test]
    fn an_iteration_without_deltas_says_so() {
        let boots = fork_boots(0, "k", "aaaa01", &[&[100.0]]);
        let html = render("r.json", &boots).unwrap();
        assert_eq!(html.matches("not recorded").count(), 2, "{html}");
    }
}
