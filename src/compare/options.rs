//! The user's choices for a comparison, parsed from their words: the
//! threshold, the confidence, the output format; and the report rendered
//! in the chosen format.

use super::{html, tabular, text, Report};
use anyhow::{bail, Context};

/// Parses `2%`, `2` or `0.5%` into percent.
pub fn parse_threshold(s: &str) -> anyhow::Result<f64> {
    let t = s.trim().trim_end_matches('%');
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => bail!("bad threshold '{s}': expected a percentage like 2% or 0.5"),
    }
}

/// Parses `95`, `95%` or `0.95` into a fraction.
pub fn parse_confidence(s: &str) -> anyhow::Result<f64> {
    let t = s.trim().trim_end_matches('%');
    let v: f64 = t
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .with_context(|| format!("bad confidence '{s}': expected e.g. 95"))?;
    let frac = if v > 1.0 { v / 100.0 } else { v };
    if !(0.5..1.0).contains(&frac) {
        bail!("bad confidence '{s}': must be at least 50% and below 100%");
    }
    Ok(frac)
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The reference layout.
    Text,
    /// The whole report as JSON.
    Json,
    /// One row per metric and kernel.
    Csv,
    /// Markdown tables.
    Markdown,
    /// Self-contained HTML with plots.
    Html,
}

impl std::str::FromStr for Format {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Format> {
        Ok(match s {
            "text" => Format::Text,
            "json" => Format::Json,
            "csv" => Format::Csv,
            "markdown" | "md" => Format::Markdown,
            "html" => Format::Html,
            other => bail!("unknown format '{other}' (expected text, json, csv, markdown or html)"),
        })
    }
}

/// `report` in `format`.
pub fn render(report: &Report, format: Format) -> anyhow::Result<String> {
    Ok(match format {
        Format::Text => text::render(report),
        Format::Json => tabular::json(report)?,
        Format::Csv => tabular::csv(report)?,
        Format::Markdown => tabular::markdown(report),
        Format::Html => html::render(report)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_and_confidences() {
        assert_eq!(parse_threshold("2%").unwrap(), 2.0);
        assert_eq!(parse_threshold("0.5").unwrap(), 0.5);
        assert!(parse_threshold("-1%").is_err());
        assert!(parse_threshold("lots").unwrap_err().to_string().contains("lots"));
        assert_eq!(parse_confidence("95").unwrap(), 0.95);
        assert_eq!(parse_confidence("99%").unwrap(), 0.99);
        assert_eq!(parse_confidence("0.9").unwrap(), 0.9);
        assert!(parse_confidence("100").is_err());
        assert!(parse_confidence("30").is_err());
        assert!("pdf".parse::<Format>().unwrap_err().to_string().contains("pdf"));
    }
}
