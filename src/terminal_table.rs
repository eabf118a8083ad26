//! Terminal output that lines up: borderless tables measured by display
//! width (an arrow, an accented or a wide character takes the columns it
//! shows in, not its bytes), the terminal's width when stdout is one, and
//! per-boot strips of eighth blocks. Formatting only; knows nothing of
//! results.

use comfy_table::{presets, CellAlignment, ColumnConstraint, ContentArrangement, Table, Width};
use std::io::IsTerminal;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use unicode_width::UnicodeWidthStr;

/// The terminal's width, set by the command line when stdout is a
/// terminal; 0 (unset), tables are never wrapped, so what goes to a file,
/// a pipe or a test is the same on every machine.
static TERMINAL_WIDTH: AtomicU16 = AtomicU16::new(0);

/// The terminal's size (TIOCGWINSZ).
mod window {
    nix::ioctl_read_bad!(size, nix::libc::TIOCGWINSZ, nix::libc::winsize);
}

/// Makes tables fit the terminal when stdout is one. Called once by the
/// binary, never by library code or tests.
pub fn fit_to_stdout() {
    let out = std::io::stdout();
    if !out.is_terminal() {
        return;
    }
    let mut size = nix::libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one `winsize` to the pointer, which points
    // to a live, writable one; the descriptor is stdout's, open for the
    // call's duration.
    let read = unsafe { window::size(out.as_raw_fd(), &mut size) };
    if read.is_ok() {
        TERMINAL_WIDTH.store(size.ws_col, Ordering::Relaxed);
    }
}

/// Tables are not fitted to the terminal any more: for output that goes
/// to a file although stdout is a terminal.
pub fn never_wrap() {
    TERMINAL_WIDTH.store(0, Ordering::Relaxed);
}

/// How a column's cells sit in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text, read left to right.
    Left,
    /// Figures, lined up on their last digit.
    Right,
}

/// A borderless table: columns `gap` spaces apart, each at least its
/// minimum width, lines without trailing spaces.
#[derive(Debug, Clone)]
pub struct TextTable {
    aligns: Vec<Align>,
    min_widths: Vec<usize>,
    gap: u16,
    rows: Vec<Vec<String>>,
}

impl TextTable {
    /// A table whose columns are aligned as `aligns` says, each at least
    /// as wide as `min_widths` (display columns; missing entries are 0).
    pub fn new(aligns: &[Align], min_widths: &[usize], gap: u16) -> TextTable {
        TextTable { aligns: aligns.to_vec(), min_widths: min_widths.to_vec(), gap, rows: Vec::new() }
    }

    /// Adds a row of cells.
    pub fn row<S: ToString>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        self.rows.push(cells.into_iter().map(|c| c.to_string()).collect());
        self
    }

    /// The table's lines, each with `indent` before it and nothing after
    /// its last character.
    pub fn lines(&self, indent: &str) -> Vec<String> {
        let mut table = Table::new();
        table.load_preset(presets::NOTHING);
        match Some(TERMINAL_WIDTH.load(Ordering::Relaxed)).filter(|w| *w > 0) {
            Some(w) => {
                let w = w.saturating_sub(u16::try_from(display_width(indent)).unwrap_or(u16::MAX));
                table.set_content_arrangement(ContentArrangement::Dynamic).set_width(w);
            }
            None => {
                table.set_content_arrangement(ContentArrangement::Disabled);
            }
        }
        table.add_rows(self.rows.iter().cloned());
        let columns = table.column_count();
        let last = columns.saturating_sub(1);
        for (i, col) in table.column_iter_mut().enumerate() {
            let right = if i == last { 0 } else { self.gap };
            col.set_padding((0, right));
            col.set_cell_alignment(match self.aligns.get(i) {
                Some(Align::Right) => CellAlignment::Right,
                _ => CellAlignment::Left,
            });
            if let Some(w) = self.min_widths.get(i).filter(|w| **w > 0) {
                let w = u16::try_from(*w).unwrap_or(u16::MAX).saturating_add(right);
                col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(w)));
            }
        }
        table.lines().map(|l| format!("{indent}{}", l.trim_end())).collect()
    }

    /// The table as text, a newline after each line.
    pub fn render(&self, indent: &str) -> String {
        self.lines(indent).into_iter().map(|l| l + "\n").collect()
    }
}

/// Display columns `s` takes on a terminal.
pub fn display_width(s: &str) -> usize {
    s.width()
}

/// `s` padded with spaces to `width` display columns (left-aligned).
pub fn pad_right(s: &str, width: usize) -> String {
    format!("{s}{}", " ".repeat(width.saturating_sub(display_width(s))))
}

/// `s` padded with spaces to `width` display columns (right-aligned).
pub fn pad_left(s: &str, width: usize) -> String {
    format!("{}{s}", " ".repeat(width.saturating_sub(display_width(s))))
}

const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// One eighth block per value, scaled from `lo` (the lowest block) to `hi`
/// (the full block). A value that is not finite is a space; with `lo ==
/// hi` every value is the middle block.
pub fn strip(values: &[f64], lo: f64, hi: f64) -> String {
    values
        .iter()
        .map(|v| {
            if !v.is_finite() {
                ' '
            } else if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
                BLOCKS[3]
            } else {
                let at = ((v - lo) / (hi - lo) * (BLOCKS.len() - 1) as f64).round();
                BLOCKS[(at.max(0.0) as usize).min(BLOCKS.len() - 1)]
            }
        })
        .collect()
}

/// The lowest and highest finite values of `values`, if any.
pub fn range(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    values.into_iter().filter(|v| v.is_finite()).fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The display column where each cell of `line` starts, given the
    /// cells' texts in order.
    fn starts(line: &str, cells: &[&str]) -> Vec<usize> {
        let mut at = 0;
        let mut rest = line;
        let mut out = Vec::new();
        for c in cells {
            let i = rest.find(c).unwrap_or_else(|| panic!("{c:?} not in {line:?}"));
            at += rest[..i].width();
            out.push(at);
            at += c.width();
            rest = &rest[i + c.len()..];
        }
        out
    }

    #[test]
    fn columns_line_up_by_display_width() {
        let rows: [[&str; 3]; 4] = [
            ["metric", "kernel", "change"],
            ["fork fork_rate ↑", "6.1.0 (bzImage)", "+2.13%"],
            ["fork fork_latency ↓", "ünïcödé-名前", "-0.4%"],
            ["x", "y", "1"],
        ];
        let mut t = TextTable::new(&[Align::Left, Align::Left, Align::Right], &[], 2);
        for r in &rows {
            t.row(r.iter());
        }
        let lines = t.lines("  ");
        assert_eq!(lines.len(), rows.len());
        // Left-aligned columns start at the same display column on every
        // line; the right-aligned one ends at the same display column.
        let first: Vec<Vec<usize>> = lines.iter().zip(&rows).map(|(l, r)| starts(l, r)).collect();
        for (l, s) in lines.iter().zip(&first) {
            assert_eq!(s[..2], first[0][..2], "{lines:#?}");
            assert_eq!(l.width(), lines[0].width(), "right column ends line up: {lines:#?}");
        }
        assert!(lines[0].starts_with("  metric"), "{lines:#?}");
        // Two spaces between the widest cell of a column and the next.
        assert_eq!(first[0][1] - first[0][0], "fork fork_latency ↓".width() + 2, "{lines:#?}");
    }

    #[test]
    fn minimum_widths_and_no_wrap_without_a_terminal() {
        let mut t = TextTable::new(&[Align::Left, Align::Left], &[10, 0], 1);
        let long = "a".repeat(300);
        t.row(["ab", long.as_str()]);
        let lines = t.lines("");
        assert_eq!(lines, [format!("ab{}{long}", " ".repeat(9))]);
    }

    #[test]
    fn padding_counts_display_columns() {
        assert_eq!(pad_right("↑↓", 4), "↑↓  ");
        assert_eq!(pad_left("名", 4), "  名");
        assert_eq!(display_width("名前"), 4);
    }

    #[test]
    fn an_outlier_gets_the_tallest_block_and_the_rest_stay_low() {
        let values = [10.0, 10.2, 9.9, 14.0, 10.1];
        let (lo, hi) = range(values).unwrap();
        let s: Vec<char> = strip(&values, lo, hi).chars().collect();
        assert_eq!(s.len(), values.len());
        assert_eq!(s[3], '█');
        assert!(s.iter().enumerate().all(|(i, c)| i == 3 || BLOCKS[..2].contains(c)), "{s:?}");
        let low = [10.0, 10.2, 2.0, 10.1];
        let (lo, hi) = range(low).unwrap();
        let s: Vec<char> = strip(&low, lo, hi).chars().collect();
        assert_eq!(s[2], '▁');
        assert!(s.iter().enumerate().all(|(i, c)| i == 2 || BLOCKS[6..].contains(c)), "{s:?}");
    }

    #[test]
    fn constant_values_and_gaps_do_not_divide_by_zero() {
        assert_eq!(strip(&[5.0, 5.0, 5.0], 5.0, 5.0), "▄▄▄");
        assert_eq!(strip(&[1.0, f64::NAN, 2.0], 1.0, 2.0), "▁ █");
        assert_eq!(range([f64::NAN]), None);
        assert_eq!(range([3.0, f64::INFINITY, 1.0]), Some((1.0, 3.0)));
    }
}
