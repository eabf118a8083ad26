//! The contest report as text (the layout of the 2003 contest reports:
//! per row a `R:` header, `Kernel [runs] Time CPU% Loads LCPU% Ratio`, one
//! line per kernel), as Markdown, and as JSON. Formatting only: every
//! figure comes from [`ContestReport`].
//!
//! The text keeps its own layout rather than a table crate's: a kernel
//! without figures has a text (`error: ...`, `not measured`) running on
//! from its `[runs]` across the figure columns, which no table crate
//! spans without widening or wrapping those columns. It pads by display
//! width ([`crate::terminal_table`]), as the tables do.

use super::{Column, ContestReport, RatioBase, RowEntry, RowState, RowTable};
use crate::compare::text::params_words;
use crate::stats::fieller::RatioInterval;
use crate::terminal_table::{display_width, pad_left, pad_right};
use anyhow::bail;
use std::fmt::Write;

/// Errors of the data formats.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// JSON serialisation failed.
    #[error("cannot write the contest report as JSON")]
    Json(#[source] serde_json::Error),
}

const HEADER: [&str; 7] = ["Kernel", "[runs]", "Time", "CPU%", "Loads", "LCPU%", "Ratio"];

/// The header of the Ratio intervals' column.
const RATIO_INTERVAL: &str = "Ratio 95%";

fn mean_or_dash(c: Option<Column>, digits: usize) -> String {
    c.filter(|c| c.mean.is_finite()).map_or_else(|| "-".into(), |c| format!("{:.*}", digits, c.mean))
}

/// The figures of a measured entry, as the columns after `[runs]`.
fn figures(e: &RowEntry) -> [String; 5] {
    [
        // One decimal, where the reports printed whole seconds: their
        // builds took 30-250 s, a TCG guest's build takes a few, and
        // whole seconds would hide differences of tens of percent.
        mean_or_dash(e.time, 1),
        mean_or_dash(e.cpu_percent, 1),
        // Loads counts work (archives, MiB, forks): a fraction of a unit
        // is noise.
        e.loads.filter(|c| c.mean.is_finite()).map_or_else(|| "-".into(), |c| format!("{}", c.mean.round() as i64)),
        mean_or_dash(e.lcpu_percent, 1),
        mean_or_dash(e.ratio, 2),
    ]
}

/// What a kernel's line says instead of figures, when it has none.
fn no_figures(e: &RowEntry) -> Option<String> {
    match e.state {
        RowState::Measured => None,
        RowState::Failed => {
            let messages = super::distinct(e.errors.iter().map(|x| x.message.as_str()));
            Some(format!("error: {}", messages.join("; ")))
        }
        RowState::NotMeasured => Some("not measured".into()),
    }
}

/// The footnote of an entry with failures.
fn footnote(e: &RowEntry) -> Option<String> {
    if e.errors.is_empty() {
        return None;
    }
    let total = e.runs + e.failed;
    let places: Vec<String> = e.errors.iter().map(|x| format!("{}: {}", x.location, x.message)).collect();
    Some(format!("{}: failed in {} of {} iteration(s): {}", e.kernel, e.failed, total, places.join("; ")))
}

fn ratio_sentence(r: &ContestReport) -> String {
    match (r.ratio_base, r.baseline_no_load_s) {
        (RatioBase::Baseline, Some(t)) => {
            format!("Ratio: Time over the mean no_load Time of the baseline {} ({t:.1} s).", r.baseline)
        }
        (RatioBase::Baseline, None) => {
            format!("Ratio: none, the baseline {} has no good no_load run.", r.baseline)
        }
        (RatioBase::Own, _) => {
            "Ratio: Time over the same iteration's no_load Time of the same kernel, averaged over the runs.".into()
        }
    }
}

const LEGEND: &str = "Time: the foreground build's wall time in seconds; CPU%: its CPU use (over 100 on SMP); \
Loads: work the load completed; LCPU%: the load's CPU time over its running time. \
[runs] counts the iterations that measured the row; the columns are their means.";

fn units_of(t: &RowTable) -> String {
    let u: Vec<&str> = t.load_units.iter().map(|s| if s.is_empty() { "-" } else { s.as_str() }).collect();
    if u.is_empty() {
        "-".into()
    } else {
        u.join(", ")
    }
}

fn uniform_params(r: &ContestReport) -> Option<String> {
    let all = super::distinct(r.kernels.iter().flat_map(|k| k.params.iter().map(|p| super::timing_params(p))));
    match all.as_slice() {
        [one] => Some(params_words(one)),
        _ => None,
    }
}

fn kernel_line(k: &super::KernelSummary) -> String {
    let role = if k.baseline { " (baseline)" } else { "" };
    format!(
        "{}{role}: {} of {} boot(s), {} iteration(s); accel {}; {}",
        k.name,
        k.boots_used,
        k.boots_total,
        k.iterations,
        k.accel.join(", "),
        k.storage.join(" | ")
    )
}

/// A Ratio interval as the last column shows it: `[lo, hi]`, `unbounded`,
/// or `-` with fewer than two runs.
fn interval_cell(e: &RowEntry) -> String {
    match e.ratio_interval {
        Some(RatioInterval::Bounded { lo, hi }) => format!("[{lo:.2}, {hi:.2}]"),
        Some(RatioInterval::Unbounded) => "unbounded".into(),
        None => "-".into(),
    }
}

/// One row's block: `R:`, the header, a line per kernel (aligned), then
/// its footnotes, numbered from `*next_note`; with `intervals`, a last
/// column of each Ratio's 95% interval.
fn text_block(out: &mut String, t: &RowTable, next_note: &mut usize, intervals: bool) {
    let mut lines: Vec<(Vec<String>, Option<String>)> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for e in &t.kernels {
        let marker = footnote(e).map(|n| {
            notes.push(format!("[{next_note}] {n}"));
            *next_note += 1;
            format!("[{}]", *next_note - 1)
        });
        let mut cells = vec![e.kernel.clone(), e.runs.to_string()];
        let tail = match no_figures(e) {
            Some(text) => Some(match marker {
                Some(m) => format!("{text} {m}"),
                None => text,
            }),
            None => {
                cells.extend(figures(e));
                if intervals {
                    cells.push(interval_cell(e));
                }
                marker
            }
        };
        lines.push((cells, tail));
    }
    let header: Vec<String> =
        HEADER.iter().map(|h| h.to_string()).chain(intervals.then(|| RATIO_INTERVAL.to_string())).collect();
    // Measured in display columns: a name with an arrow, an accent or a
    // wide character takes the columns it shows in.
    let mut widths: Vec<usize> = header.iter().map(|h| display_width(h)).collect();
    for (cells, _) in &lines {
        for (w, c) in widths.iter_mut().zip(cells) {
            *w = (*w).max(display_width(c));
        }
    }
    let render = |cells: &[String], tail: Option<&str>| {
        let mut parts: Vec<String> = Vec::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            // The name reads left to right, the figures line up on their
            // last digit.
            parts.push(if i == 0 { pad_right(c, *w) } else { pad_left(c, *w) });
        }
        if let Some(t) = tail {
            parts.push(t.to_string());
        }
        parts.join("  ").trim_end().to_string()
    };
    let _ = writeln!(out, "{}:", t.row);
    let _ = writeln!(out, "{}", render(&header, None));
    for (cells, tail) in &lines {
        let _ = writeln!(out, "{}", render(cells, tail.as_deref()));
    }
    for n in notes {
        let _ = writeln!(out, "  {n}");
    }
}

/// The report in the reference layout, then what it rests on.
pub fn text(r: &ContestReport) -> String {
    let mut out = String::new();
    let mut next_note = 1;
    for t in &r.rows {
        text_block(&mut out, t, &mut next_note, r.intervals);
        out.push('\n');
    }
    let _ = writeln!(out, "{LEGEND}");
    let _ = writeln!(out, "{}", ratio_sentence(r));
    if let Some(p) = uniform_params(r) {
        let _ = writeln!(out, "contest parameters: {p}");
    }
    let _ = writeln!(out, "\nLoad units:");
    let width = r.rows.iter().map(|t| display_width(&t.row)).max().unwrap_or(0);
    for t in &r.rows {
        let _ = writeln!(out, "  {}  {}", pad_right(&t.row, width), units_of(t));
    }
    let _ = writeln!(out, "\nKernels:");
    for k in &r.kernels {
        let _ = writeln!(out, "  {}", kernel_line(k));
        for e in &k.errors {
            let _ = writeln!(out, "    error: {}: {}", e.location, e.message);
        }
    }
    if !r.excluded.is_empty() {
        let _ = writeln!(out, "\nExcluded boots:");
        for x in &r.excluded {
            let _ = writeln!(out, "  {} {} boot #{}: {}", x.kernel, x.origin, x.boot, x.reason);
        }
    }
    if !r.warnings.is_empty() {
        out.push('\n');
        for w in &r.warnings {
            let _ = writeln!(out, "WARNING: {w}");
        }
    }
    out
}

/// Escapes what would break a Markdown table cell.
fn md(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The tables as Markdown, for a mailing-list post or a pull request.
pub fn markdown(r: &ContestReport) -> String {
    let mut out = String::new();
    let mut next_note = 1;
    for t in &r.rows {
        let _ = writeln!(out, "### {}\n", md(&t.row));
        let _ = writeln!(out, "| Kernel | runs | Time (s) | CPU% | Loads ({}) | LCPU% | Ratio |", md(&units_of(t)));
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
        let mut notes = Vec::new();
        for e in &t.kernels {
            let marker = footnote(e).map(|n| {
                notes.push(format!("{next_note}. {}", md(&n)));
                next_note += 1;
                format!(" [{}]", next_note - 1)
            });
            let marker = marker.unwrap_or_default();
            match no_figures(e) {
                Some(text) => {
                    let _ = writeln!(out, "| {} | {} | {}{marker} | | | | |", md(&e.kernel), e.runs, md(&text));
                }
                None => {
                    let [time, cpu, loads, lcpu, ratio] = figures(e);
                    let _ = writeln!(
                        out,
                        "| {} | {} | {time} | {cpu} | {loads} | {lcpu} | {ratio}{marker} |",
                        md(&e.kernel),
                        e.runs
                    );
                }
            }
        }
        if !notes.is_empty() {
            out.push('\n');
            for n in notes {
                let _ = writeln!(out, "{n}");
            }
        }
        out.push('\n');
    }
    let _ = writeln!(out, "{}\n\n{}\n", md(LEGEND), md(&ratio_sentence(r)));
    if let Some(p) = uniform_params(r) {
        let _ = writeln!(out, "contest parameters: `{p}`\n");
    }
    let _ = writeln!(out, "| Kernel | Boots | Iterations | Accel | Storage |");
    let _ = writeln!(out, "|---|---:|---:|---|---|");
    for k in &r.kernels {
        let role = if k.baseline { " (baseline)" } else { "" };
        let _ = writeln!(
            out,
            "| {}{role} | {} of {} | {} | {} | {} |",
            md(&k.name),
            k.boots_used,
            k.boots_total,
            k.iterations,
            md(&k.accel.join(", ")),
            md(&k.storage.join(" / "))
        );
    }
    let extra: Vec<String> =
        r.kernels
            .iter()
            .flat_map(|k| {
                k.errors.iter().map(move |e| format!("- {}: {}: {}", md(&k.name), md(&e.location), md(&e.message)))
            })
            .chain(r.excluded.iter().map(|x| {
                format!("- excluded: {} {} boot #{}: {}", md(&x.kernel), md(&x.origin), x.boot, md(&x.reason))
            }))
            .chain(r.warnings.iter().map(|w| format!("- **warning**: {}", md(w))))
            .collect();
    if !extra.is_empty() {
        out.push('\n');
        for e in extra {
            let _ = writeln!(out, "{e}");
        }
    }
    out
}

/// The whole report as pretty JSON: the same figures with each column's
/// standard deviation.
pub fn json(r: &ContestReport) -> Result<String, RenderError> {
    serde_json::to_string_pretty(r).map(|s| s + "\n").map_err(RenderError::Json)
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The reference layout.
    Text,
    /// The report with each column's standard deviation.
    Json,
    /// Markdown tables.
    Markdown,
}

impl std::str::FromStr for Format {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Format> {
        Ok(match s {
            "text" => Format::Text,
            "json" => Format::Json,
            "markdown" | "md" => Format::Markdown,
            other => bail!("unknown format '{other}' (expected text, json or markdown)"),
        })
    }
}

/// `report` in `format`.
pub fn render(report: &ContestReport, format: Format) -> anyhow::Result<String> {
    Ok(match format {
        Format::Text => text(report),
        Format::Json => json(report)?,
        Format::Markdown => markdown(report),
    })
}
