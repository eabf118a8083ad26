//! The self-contained HTML report: the reference tables, the changes, and
//! per metric two plots drawn as inline SVG (no script, no external
//! resource): each candidate's change with its interval against the
//! ±threshold band, and every kernel's values — per iteration, per boot
//! (in run order, so drift shows) and the mean with its confidence
//! interval. Formatting only.

use super::text::{arrow, fmt_interval, fmt_p, fmt_pct, fmt_spread, fmt_value, params_words};
use super::{MetricReport, Report, Verdict};
use crate::html_page::{colour, escape, id_token, padded, plot_err, PlotError, BASE_STYLE};
use crate::stats::{t_critical, SampleSummary};
use plotters::prelude::*;
use std::fmt::Write;

/// Errors drawing the report.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    /// A plot could not be drawn.
    #[error(transparent)]
    Plot(#[from] PlotError),
}

fn verdict_colour(v: Verdict) -> RGBColor {
    match v {
        Verdict::Better => RGBColor(0x2c, 0xa0, 0x2c),
        Verdict::Worse => RGBColor(0xd6, 0x27, 0x28),
        Verdict::NoChange => RGBColor(0x1f, 0x77, 0xb4),
        Verdict::Unsure => RGBColor(0x88, 0x88, 0x88),
    }
}

/// Each candidate's change (%) with its interval, against ±threshold.
fn change_plot(r: &Report, m: &MetricReport) -> Result<String, HtmlError> {
    let name = format!("{} {}", m.key.workload.name, m.key.metric);
    let subject = format!("metric {name}");
    let err = plot_err("change", &subject);
    let t = r.settings.threshold_pct;
    let mut lo = -t;
    let mut hi = t;
    for c in &m.changes {
        for v in [Some(c.change_pct), c.interval_pct.map(|i| i.0), c.interval_pct.map(|i| i.1)].into_iter().flatten() {
            if v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
    }
    if lo == hi {
        (lo, hi) = (-1.0, 1.0);
    }
    let (lo, hi) = padded(lo, hi);
    let rows = m.changes.len().max(1);
    let names: Vec<String> = m.changes.iter().map(|c| r.kernels[c.candidate].name.clone()).collect();
    let height = 90 + 40 * rows as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{name}: change against the baseline (%)"), ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(170)
            .build_cartesian_2d(lo..hi, -0.5f64..(rows as f64 - 0.5))
            .map_err(|e| err(e.to_string()))?;
        let label = |y: &f64| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 16))
            .disable_y_mesh()
            .y_labels(rows * 2 + 1)
            .y_label_formatter(&label)
            .x_desc("change in % (interval at the corrected level)")
            .draw()
            .map_err(|e| err(e.to_string()))?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(-t, -0.5), (t, rows as f64 - 0.5)],
                RGBColor(0xdd, 0xee, 0xff).filled(),
            )))
            .map_err(|e| err(e.to_string()))?;
        chart
            .draw_series(LineSeries::new(vec![(0.0, -0.5), (0.0, rows as f64 - 0.5)], BLACK.stroke_width(1)))
            .map_err(|e| err(e.to_string()))?;
        for (i, c) in m.changes.iter().enumerate() {
            let col = verdict_colour(c.verdict);
            let y = i as f64;
            if let Some((a, b)) = c.interval_pct {
                chart
                    .draw_series(std::iter::once(ErrorBar::new_horizontal(
                        y,
                        a,
                        c.change_pct,
                        b,
                        col.stroke_width(2),
                        12,
                    )))
                    .map_err(|e| err(e.to_string()))?;
            }
            if c.change_pct.is_finite() {
                chart
                    .draw_series(std::iter::once(Circle::new((c.change_pct, y), 5, col.filled())))
                    .map_err(|e| err(e.to_string()))?;
            }
        }
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// Interval of a kernel's mean from its per-boot means.
fn mean_interval(means: &[f64], confidence: f64) -> Option<(f64, f64)> {
    let s = SampleSummary::of(means)?;
    if s.n < 2 {
        return None;
    }
    let half = t_critical(1.0 - confidence, (s.n - 1) as f64) * s.var_of_mean().sqrt();
    Some((s.mean - half, s.mean + half))
}

/// Every kernel's values: iterations (small hollow), boot means (filled, in
/// run order across the kernel's slot) and the mean with its interval.
fn values_plot(r: &Report, m: &MetricReport) -> Result<String, HtmlError> {
    let name = format!("{} {}", m.key.workload.name, m.key.metric);
    let subject = format!("metric {name}");
    let err = plot_err("values", &subject);
    let all: Vec<f64> = m
        .kernels
        .iter()
        .flat_map(|k| k.per_boot.iter().flat_map(|b| b.iterations.iter().copied()))
        .filter(|v| v.is_finite())
        .collect();
    let intervals: Vec<Option<(f64, f64)>> = m
        .kernels
        .iter()
        .map(|k| mean_interval(&k.per_boot.iter().map(|b| b.mean).collect::<Vec<_>>(), r.settings.confidence))
        .collect();
    let lo = all.iter().copied().chain(intervals.iter().flatten().map(|i| i.0)).fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().chain(intervals.iter().flatten().map(|i| i.1)).fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() && hi.is_finite() { padded(lo, hi) } else { (0.0, 1.0) };
    let n = m.kernels.len();
    let names: Vec<String> = r.kernels.iter().map(|k| k.name.clone()).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 380)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{name}: values per iteration and per boot ({})", m.unit), ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), lo..hi)
            .map_err(|e| err(e.to_string()))?;
        let label = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 16))
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&label)
            .y_desc(format!(
                "{} ({}, {} is better)",
                m.key.metric,
                m.unit,
                if arrow(m.better) == "↑" { "higher" } else { "lower" }
            ))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        for (k, fig) in m.kernels.iter().enumerate() {
            let col = colour(k);
            let boots = fig.per_boot.len().max(1);
            let x_of = |b: usize| k as f64 - 0.32 + 0.56 * (b as f64 + 0.5) / boots as f64;
            let iterations: Vec<(f64, f64)> = fig
                .per_boot
                .iter()
                .enumerate()
                .flat_map(|(b, p)| p.iterations.iter().map(move |v| (x_of(b), *v)))
                .collect();
            chart
                .draw_series(iterations.into_iter().map(|p| Circle::new(p, 3, col.mix(0.45).stroke_width(1))))
                .map_err(|e| err(e.to_string()))?
                .label(format!("{} iterations", names.get(k).cloned().unwrap_or_default()));
            chart
                .draw_series(
                    fig.per_boot.iter().enumerate().map(|(b, p)| Circle::new((x_of(b), p.mean), 5, col.filled())),
                )
                .map_err(|e| err(e.to_string()))?;
            if let Some((a, b)) = intervals[k] {
                chart
                    .draw_series(std::iter::once(ErrorBar::new_vertical(
                        k as f64 + 0.4,
                        a,
                        fig.mean,
                        b,
                        BLACK.stroke_width(2),
                        10,
                    )))
                    .map_err(|e| err(e.to_string()))?;
            }
        }
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// What the comparison adds to the page's style: the verdicts' colours.
const VERDICT_STYLE: &str = ".verdict-better{color:#1a7f1a;font-weight:bold}.verdict-worse{color:#c00;font-weight:bold}.verdict-unsure{color:#777}";

/// The report as one HTML document.
pub fn render(r: &Report) -> Result<String, HtmlError> {
    let mut out = String::new();
    let title = format!(
        "bootbench compare: {} vs {}",
        r.kernels.first().map(|k| k.name.as_str()).unwrap_or_default(),
        r.kernels.iter().skip(1).map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = writeln!(out, "<title>{}</title><style>{BASE_STYLE}\n{VERDICT_STYLE}</style></head><body>", escape(&title));
    let _ = writeln!(out, "<h1>{}</h1>", escape(&title));
    let _ = writeln!(out, "<p id=\"method\">{}.</p>", escape(&r.method_sentence()));
    if !r.warnings.is_empty() {
        let _ = writeln!(
            out,
            "<div class=\"warning\" id=\"warnings\">Warning: these runs differ in more than the kernel.<ul>"
        );
        for w in &r.warnings {
            let _ = writeln!(out, "<li>{}</li>", escape(w));
        }
        let _ = writeln!(out, "</ul></div>");
    }
    let _ = writeln!(
        out,
        "<table id=\"kernels\"><tr><th class=\"name\">Role</th><th class=\"name\">Kernel</th><th class=\"name\">Release</th><th class=\"name\">Machine</th><th>Boots used</th><th class=\"name\">cmdline</th></tr>"
    );
    for k in &r.kernels {
        let _ = writeln!(
            out,
            "<tr><td class=\"name\">{}</td><td class=\"name kernel-name\">{}</td><td class=\"name\">{}</td><td class=\"name\">{}</td><td>{} of {}</td><td class=\"name\"><code>{}</code></td></tr>",
            k.role,
            escape(&k.name),
            escape(&k.release),
            escape(&k.machine),
            k.boots_used,
            k.boots_total,
            escape(&k.cmdline)
        );
        for s in &k.skipped {
            let _ = writeln!(
                out,
                "<tr><td></td><td class=\"name\" colspan=\"5\">left out: boot #{}: {}</td></tr>",
                s.boot,
                escape(&s.reason)
            );
        }
    }
    let _ = writeln!(out, "</table>");
    for m in &r.metrics {
        let id = format!("m-{}-{}", id_token(&m.key.workload.name), id_token(&m.key.metric));
        let params = params_words(&m.key.workload.params);
        let _ = writeln!(
            out,
            "<section class=\"metric\" id=\"{}\" data-workload=\"{}\" data-metric=\"{}\">",
            escape(&id),
            escape(&m.key.workload.name),
            escape(&m.key.metric)
        );
        let _ = writeln!(
            out,
            "<h2>{} {} <small>{} — {}, {} is better</small></h2>",
            escape(&m.key.workload.name),
            escape(&m.key.metric),
            escape(&params),
            escape(&m.unit),
            if arrow(m.better) == "↑" { "higher" } else { "lower" }
        );
        let _ = writeln!(
            out,
            "<table class=\"reference\"><tr><th class=\"name\">Config</th><th>% of baseline</th><th>± sd %</th><th>Mean</th><th>Boots</th><th>Iterations</th></tr>"
        );
        let order: Vec<usize> = (1..r.kernels.len()).chain(std::iter::once(0)).collect();
        for k in order {
            let f = &m.kernels[k];
            let name = if k == 0 { format!("{} (baseline)", r.kernels[0].name) } else { r.kernels[k].name.clone() };
            let _ = writeln!(
                out,
                "<tr><td class=\"name\">{}</td><td>{:.2}</td><td>{}{}</td><td>{} {}</td><td>{}</td><td>{}</td></tr>",
                escape(&name),
                f.pct_of_baseline,
                fmt_spread(f.sd_pct_of_baseline),
                if f.sd_between_boots { "" } else { " (one boot: over iterations)" },
                fmt_value(f.mean),
                escape(&m.unit),
                f.boots,
                f.iterations
            );
        }
        let _ = writeln!(out, "</table>");
        let _ = writeln!(
            out,
            "<table class=\"changes\"><tr><th class=\"name\">Candidate</th><th>Change</th><th>Interval</th><th>Conf.</th><th>p</th><th>p adj.</th><th class=\"name\">Verdict</th><th>Boots</th><th>Iterations</th><th class=\"name\">Note</th></tr>"
        );
        for c in &m.changes {
            let v = c.verdict.to_string();
            let _ = writeln!(
                out,
                "<tr><td class=\"name\">{}</td><td>{}</td><td>{}</td><td>{:.1}%</td><td>{}</td><td>{}</td><td class=\"name verdict-{}\">{}</td><td>{} v {}</td><td>{} v {}</td><td class=\"name\">{}</td></tr>",
                escape(&r.kernels[c.candidate].name),
                fmt_pct(c.change_pct),
                escape(&fmt_interval(c)),
                100.0 * c.interval_confidence,
                fmt_p(c.p_value),
                fmt_p(c.p_adjusted),
                v.replace(' ', "-"),
                v,
                c.boots.0,
                c.boots.1,
                c.iterations.0,
                c.iterations.1,
                escape(c.note.as_deref().unwrap_or_default())
            );
        }
        let _ = writeln!(out, "</table>");
        let _ = writeln!(
            out,
            "<figure class=\"plot change-plot\">{}<figcaption>Change of each candidate with its interval; the band is ±{}% (no change).</figcaption></figure>",
            change_plot(r, m)?,
            r.settings.threshold_pct
        );
        let _ = writeln!(
            out,
            "<figure class=\"plot values-plot\">{}<figcaption>Hollow: iterations; filled: boot means in run order; black: mean with its {:.0}% interval.</figcaption></figure>",
            values_plot(r, m)?,
            100.0 * r.settings.confidence
        );
        let _ = writeln!(out, "</section>");
    }
    let _ = writeln!(out, "</body></html>");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::test_fixtures::fork_boots;
    use super::super::{compare, GroupInput, Settings};
    use super::*;

    #[test]
    fn self_contained_with_plots_and_labels() {
        let base = GroupInput {
            name: "base <old>".into(),
            source: "a.json".into(),
            boots: fork_boots(0, "b", "aaaa", &[&[100.0, 100.4], &[99.0, 99.2], &[101.0, 100.6]]),
        };
        let cand = GroupInput {
            name: "cand".into(),
            source: "b.json".into(),
            boots: fork_boots(3, "c", "bbbb", &[&[90.0, 90.2], &[91.0, 91.4], &[89.0, 89.4]]),
        };
        let r = compare(&base, &[cand], Settings::default(), None, false).unwrap();
        let html = render(&r).unwrap();
        if let Ok(path) = std::env::var("BOOTBENCH_DUMP_HTML") {
            std::fs::write(path, &html).unwrap();
        }
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert_eq!(html.matches("<svg").count(), 4, "two plots per metric");
        // Self-contained: no script, no reference to anything outside (the only
        // URL is the SVG namespace).
        assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="), "self-contained");
        assert_eq!(html.matches("http").count(), html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count());
        assert!(html.contains("base &lt;old&gt; (baseline)"));
        assert!(html.contains("id=\"m-fork-fork_rate\""));
        assert!(html.contains("fork fork_rate: change against the baseline (%)"));
        assert!(html.contains("verdict-worse"));
        // The kernel names label the plots' category axes.
        let texts: Vec<&str> = html
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>'))
            .map(|(_, rest)| rest.split("</text>").next().unwrap_or("").trim())
            .collect();
        assert_eq!(texts.iter().filter(|t| **t == "cand").count(), 4, "{texts:?}");
        assert_eq!(texts.iter().filter(|t| **t == "base &lt;old&gt;").count(), 2, "{texts:?}");
    }
}
