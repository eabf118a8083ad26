//! What the self-contained HTML reports share: escaping, the page's style,
//! the plots' palette and axis padding, and a plot of values in the order
//! they were measured, drawn as inline SVG with plotters (no script, no
//! external resource). Formatting only; knows nothing of results.

use plotters::prelude::*;

/// A plot that could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the {what} plot of {subject}: {why}")]
pub struct PlotError {
    /// Which plot.
    pub what: &'static str,
    /// What it shows (a metric).
    pub subject: String,
    /// Plotters' error, as text (its type is generic over the backend).
    pub why: String,
}

/// The style every report page starts from.
pub const BASE_STYLE: &str = "body{font-family:sans-serif;margin:1.5em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #bbb;padding:.25em .6em;text-align:right}
td.name,th.name{text-align:left}.warning{background:#fff3cd;border:2px solid #d39e00;padding:.6em 1em;font-weight:bold}
figure{margin:.5em 0}figcaption{font-size:.9em;color:#555}section.metric{border-top:1px solid #ddd;margin-top:1em}";

const PALETTE: [RGBColor; 6] = [
    RGBColor(0x44, 0x44, 0x44),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
];

/// The colour of the `k`th series (kernel, boot).
pub fn colour(k: usize) -> RGBColor {
    PALETTE[k % PALETTE.len()]
}

/// Escapes text for HTML content and quoted attribute values.
pub fn escape(s: &str) -> String {
    html_escape::encode_quoted_attribute(s).into_owned()
}

/// A token usable in an HTML id.
pub fn id_token(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect()
}

/// `lo..hi` widened by 8% of the span each side (a span of nothing made
/// a little one), so no point sits on the frame.
pub fn padded(lo: f64, hi: f64) -> (f64, f64) {
    let span = (hi - lo).abs().max(1e-9 * hi.abs().max(1.0));
    (lo - 0.08 * span, hi + 0.08 * span)
}

/// Maps plotters' errors of plot `what` of `subject` to a [`PlotError`].
pub fn plot_err<'a>(what: &'static str, subject: &'a str) -> impl Fn(String) -> PlotError + 'a {
    move |why| PlotError { what, subject: subject.to_string(), why }
}

/// A series of values in the order they were measured: its legend and
/// its points, `(position, value)`.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// `(position, value)`; positions start at 1.
    pub points: Vec<(f64, f64)>,
}

/// Values in measurement order, one colour per series (points joined by
/// a line), under `caption`, the value axis described by `y_desc`.
pub fn sequence_plot(
    subject: &str,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> Result<String, PlotError> {
    let err = plot_err("sequence", subject);
    let values = series.iter().flat_map(|s| s.points.iter()).filter(|p| p.0.is_finite() && p.1.is_finite());
    let (mut x_hi, mut lo, mut hi) = (1.0f64, f64::INFINITY, f64::NEG_INFINITY);
    for (x, y) in values {
        x_hi = x_hi.max(*x);
        lo = lo.min(*y);
        hi = hi.max(*y);
    }
    let (lo, hi) = if lo.is_finite() && hi.is_finite() { padded(lo, hi) } else { (0.0, 1.0) };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 300)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0.5f64..(x_hi + 0.5), lo..hi)
            .map_err(|e| err(e.to_string()))?;
        let whole =
            |x: &f64| if (x - x.round()).abs() < 1e-6 { format!("{}", x.round() as i64) } else { String::new() };
        chart
            .configure_mesh()
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .disable_x_mesh()
            .x_labels((x_hi as usize).clamp(2, 20))
            .x_label_formatter(&whole)
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(|e| err(e.to_string()))?;
        for (k, s) in series.iter().enumerate() {
            let col = colour(k);
            let points: Vec<(f64, f64)> = s.points.iter().copied().filter(|p| p.1.is_finite()).collect();
            chart.draw_series(LineSeries::new(points.clone(), col.stroke_width(1))).map_err(|e| err(e.to_string()))?;
            chart
                .draw_series(points.into_iter().map(|p| Circle::new(p, 4, col.filled())))
                .map_err(|e| err(e.to_string()))?
                .label(s.label.clone())
                .legend(move |(x, y)| Circle::new((x, y), 4, col.filled()));
        }
        if series.len() > 1 {
            chart
                .configure_series_labels()
                .label_font(("sans-serif", 13))
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(e.to_string()))?;
        }
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(escape(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;&#x27;&lt;/a&gt;");
        assert_eq!(id_token("fork rate/1"), "fork-rate-1");
    }

    #[test]
    fn a_sequence_plot_has_each_series_and_survives_one_point() {
        let two = [
            Series { label: "boot 0".into(), points: vec![(1.0, 10.0), (2.0, 11.0)] },
            Series { label: "boot <1>".into(), points: vec![(3.0, 12.0), (4.0, f64::NAN)] },
        ];
        let svg = sequence_plot("m", "m per iteration", "iteration", "m (s)", &two).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("boot 0") && svg.contains("boot &lt;1&gt;"), "legend escaped by plotters");
        let one = [Series { label: "b".into(), points: vec![(1.0, 5.0)] }];
        assert!(sequence_plot("m", "c", "x", "y", &one).is_ok());
        assert!(sequence_plot("m", "c", "x", "y", &[]).is_ok());
    }
}
