//! The lines LAVA's `monitors` test action reads ([`loads::lava_lines`]),
//! printed only when the cmdline asks (`bootbench.lava=1`): the start line
//! once the cmdline is read, each workload's lines right after its result
//! stream, and the run's line and the end line after the whole document
//! and the late steps (LAVA powers the device off at the end line).
//! The end line also says how many lines were printed and the time they
//! took on the console, which is what the feature costs a boot.

use crate::result_channels;
use loads::lava_lines;
use loads::schema::{RunDocument, WorkloadResult};
use std::time::{Duration, Instant};

/// The LAVA lines of one boot.
pub struct LavaMonitor {
    on: bool,
    printed: usize,
    spent: Duration,
}

impl LavaMonitor {
    /// Whether `keys` (or, when the cmdline could not be parsed, its raw
    /// text) asks for the lines. A bad cmdline still gets its start and end
    /// lines, so a LAVA job sees the failed run end rather than time out.
    pub fn new(keys: Option<bool>) -> LavaMonitor {
        let on = keys.unwrap_or_else(|| {
            let wanted = format!("{}=1", lava_lines::CMDLINE_KEY);
            std::fs::read_to_string("/proc/cmdline").is_ok_and(|t| t.split_whitespace().any(|w| w == wanted))
        });
        LavaMonitor { on, printed: 0, spent: Duration::ZERO }
    }

    fn print(&mut self, lines: &[String]) {
        if !self.on {
            return;
        }
        let t0 = Instant::now();
        result_channels::emit_console(lines);
        self.spent += t0.elapsed();
        self.printed += lines.len();
    }

    /// The start line.
    pub fn start(&mut self) {
        self.print(&[lava_lines::START.to_string()]);
    }

    /// One workload's lines; `names` are the suite's workloads, in order.
    pub fn workload<'a>(&mut self, result: &WorkloadResult, position: usize, names: impl Iterator<Item = &'a str>) {
        if self.on {
            let case = lava_lines::workload_case(&result.name, position, lava_lines::is_repeated(names, &result.name));
            self.print(&lava_lines::workload_lines(result, &case));
        }
    }

    /// The run's line, then the end line with what the lines cost.
    pub fn finish(&mut self, doc: &RunDocument) {
        if self.on {
            self.print(&[lava_lines::run_line(doc)]);
            let end = format!(
                "{} lines={} console_ms={:.1}",
                lava_lines::END,
                self.printed + 1,
                self.spent.as_secs_f64() * 1e3
            );
            self.print(&[end]);
        }
    }
}
