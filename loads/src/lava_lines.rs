//! Console lines for LAVA's `monitors` test action: one line per workload
//! outcome and one per metric, in a fixed format that a single pattern
//! ([`PATTERN`]) matches, between a start line ([`START`]) and an end line
//! ([`END`]). The checked result stream stays the record; these lines are
//! what a LAVA server shows as the job's test cases.
//!
//! Off by default; `bootbench.lava=1` on the kernel cmdline
//! ([`CMDLINE_KEY`]) turns them on, and the job `bootbench lava job` writes
//! sets it. A line:
//! ```text
//! bootbench-lava case=dbench_throughput units=MB/s measurement=123.4 result=pass
//! bootbench-lava case=dbench result=pass
//! ```
//! - `case` is the test case id: `[a-z0-9_]` only, so LAVA's own clean-up
//!   (lowercase, each run of non-word characters made one `_`) leaves it
//!   unchanged. A metric's id is `<workload>_<metric>`, a workload's own
//!   id its name; a workload the suite runs more than once gets its
//!   position too (`fork_2_fork_rate`).
//! - `measurement` is the mean of the measured iterations (warmups are not
//!   among them); LAVA keeps one number per test case. The samples
//!   themselves are in the checked document.
//! - `result` comes last, so the pattern cannot match a line cut short
//!   (LAVA matches its pattern against what has arrived so far).
//! - A workload's result is `pass` when it measured every iteration
//!   without an error, `skip` when the suite did not run it, else `fail`.
//!   A metric's is `pass`: it was measured. A metric whose mean is not a
//!   finite number is `fail`, without a measurement.
//!
//! Pure formatting: the init prints the lines, the host puts the strings in
//! the jobs it writes, and tests match one against the other.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use crate::schema::{RunDocument, Status, WorkloadResult};
use std::collections::BTreeMap;

/// The cmdline key that turns the lines on (`bootbench.lava=1`).
pub const CMDLINE_KEY: &str = "bootbench.lava";

/// What every line starts with.
pub const PREFIX: &str = "bootbench-lava";

/// The line printed when the init starts: the monitor's `start`. No regex
/// metacharacters, since LAVA reads it as a pattern.
pub const START: &str = "bootbench-lava start";

/// The line printed after the whole result document: the monitor's `end`.
pub const END: &str = "bootbench-lava end";

/// The monitor's `pattern` (Python `re` syntax, which LAVA uses; the
/// `regex` crate reads it alike). The named groups are the ones LAVA's
/// monitor reads.
pub const PATTERN: &str = r"bootbench-lava case=(?P<test_case_id>[a-z0-9_]+)(?: units=(?P<units>\S+) measurement=(?P<measurement>[-+0-9.eE]+))? result=(?P<result>pass|fail|skip)";

/// The line of a run's own outcome (the id of the case LAVA lists last).
pub const RUN_CASE: &str = "bootbench_run";

/// A test case id from any text: lowercase ASCII letters, digits and `_`
/// only, runs of anything else one `_`, none at either end (`run` when
/// nothing is left).
pub fn case_id(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if gap && !out.is_empty() {
                out.push('_');
            }
            gap = false;
            out.push(c.to_ascii_lowercase());
        } else {
            gap = true;
        }
    }
    if out.is_empty() {
        out.push_str("run");
    }
    out
}

/// A unit without whitespace (the pattern's `\S+`); `none` when empty.
fn unit_text(unit: &str) -> String {
    let unit: String = unit.chars().map(|c| if c.is_whitespace() { '_' } else { c }).collect();
    if unit.is_empty() {
        "none".into()
    } else {
        unit
    }
}

/// What LAVA records for a workload as a whole.
fn workload_result(w: &WorkloadResult) -> &'static str {
    match &w.error {
        Some(e) if e.starts_with("not run:") => "skip",
        Some(_) => "fail",
        None if w.iterations.is_empty() || w.iterations.iter().any(|i| !i.errors.is_empty()) => "fail",
        None => "pass",
    }
}

/// The id a workload's lines start with: its name, with its 1-based
/// `position` when the suite runs it more than once.
pub fn workload_case(name: &str, position: usize, repeated: bool) -> String {
    if repeated {
        case_id(&format!("{name}_{position}"))
    } else {
        case_id(name)
    }
}

/// The lines of one finished workload: its outcome, then each metric's
/// mean in name order.
pub fn workload_lines(w: &WorkloadResult, case: &str) -> Vec<String> {
    let mut lines = vec![format!("{PREFIX} case={case} result={}", workload_result(w))];
    let mut sums: BTreeMap<&str, (f64, usize, &str)> = BTreeMap::new();
    for it in &w.iterations {
        for (name, m) in &it.metrics {
            let e = sums.entry(name.as_str()).or_insert((0.0, 0, m.unit.as_str()));
            e.0 += m.value;
            e.1 += 1;
        }
    }
    for (name, (sum, n, unit)) in sums {
        let id = case_id(&format!("{case}_{name}"));
        let mean = sum / n.max(1) as f64;
        if mean.is_finite() {
            lines.push(format!("{PREFIX} case={id} units={} measurement={mean} result=pass", unit_text(unit)));
        } else {
            lines.push(format!("{PREFIX} case={id} result=fail"));
        }
    }
    lines
}

/// Whether the suite runs the workload named `name` more than once.
pub fn is_repeated<'a>(names: impl Iterator<Item = &'a str>, name: &str) -> bool {
    names.filter(|n| *n == name).nth(1).is_some()
}

/// The line of the whole run: `pass` when the document is complete.
pub fn run_line(doc: &RunDocument) -> String {
    let result = if doc.status == Status::Complete { "pass" } else { "fail" };
    format!("{PREFIX} case={RUN_CASE} result={result}")
}

/// Every line of a finished document, as the init prints them over the
/// boot (without [`START`] and [`END`]): each workload's, then the run's.
pub fn document_lines(doc: &RunDocument) -> Vec<String> {
    let names = || doc.workloads.iter().map(|w| w.name.as_str());
    let mut lines = Vec::new();
    for (i, w) in doc.workloads.iter().enumerate() {
        let case = workload_case(&w.name, i + 1, is_repeated(names(), &w.name));
        lines.extend(workload_lines(w, &case));
    }
    lines.push(run_line(doc));
    lines
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::schema::{Iteration, Metric};

    fn workload(name: &str, values: &[f64]) -> WorkloadResult {
        let iterations = values
            .iter()
            .map(|v| {
                let mut it = Iteration::default();
                it.metrics.insert("throughput".into(), Metric::higher(*v, "MB/s"));
                it.metrics.insert("latency_NTCreateX".into(), Metric::lower(v / 10.0, "ms"));
                it
            })
            .collect();
        WorkloadResult { name: name.into(), iterations, ..Default::default() }
    }

    /// What LAVA's monitor does to an id (lava_dispatcher's
    /// `actions/test/monitor.py`): strip, lowercase, `\W+` to `_`.
    fn lava_clean(id: &str) -> String {
        regex::Regex::new(r"\W+").unwrap().replace_all(&id.trim().to_lowercase(), "_").into_owned()
    }

    #[test]
    fn the_pattern_reads_every_line_back_with_its_id_unchanged_by_lava() {
        let re = regex::Regex::new(PATTERN).unwrap();
        let w = workload("dbench", &[100.0, 200.0]);
        let lines = workload_lines(&w, "dbench");
        assert_eq!(lines.len(), 3, "{lines:?}");
        let got: Vec<_> = lines
            .iter()
            .map(|l| {
                let c = re.captures(l).unwrap_or_else(|| panic!("no match: {l}"));
                let id = c["test_case_id"].to_string();
                assert_eq!(lava_clean(&id), id);
                (id, c.name("measurement").map(|m| m.as_str().to_string()), c["result"].to_string())
            })
            .collect();
        assert_eq!(got[0], ("dbench".into(), None, "pass".into()));
        assert_eq!(got[1], ("dbench_latency_ntcreatex".into(), Some("15".into()), "pass".into()));
        assert_eq!(got[2], ("dbench_throughput".into(), Some("150".into()), "pass".into()));
        assert!(lines[2].contains("units=MB/s "));
    }

    #[test]
    fn a_line_cut_short_does_not_match() {
        let re = regex::Regex::new(PATTERN).unwrap();
        let line = &workload_lines(&workload("fork", &[1.5]), "fork")[1];
        assert!(re.is_match(line));
        for cut in 0..line.len() {
            assert!(!re.is_match(&line[..cut]), "{}", &line[..cut]);
        }
    }

    #[test]
    fn outcomes_are_pass_fail_and_skip() {
        let mut failed = workload("fork", &[1.0]);
        failed.error = Some("watchdog".into());
        assert!(workload_lines(&failed, "fork")[0].ends_with("result=fail"));
        let mut skipped = workload("fork", &[]);
        skipped.error = Some("not run: the watchdog ran out".into());
        assert_eq!(workload_lines(&skipped, "fork"), vec!["bootbench-lava case=fork result=skip"]);
        let empty = workload("fork", &[]);
        assert!(workload_lines(&empty, "fork")[0].ends_with("result=fail"));
        let mut iteration_error = workload("fork", &[1.0]);
        iteration_error.iterations[0].errors.push("short read".into());
        assert!(workload_lines(&iteration_error, "fork")[0].ends_with("result=fail"));
        let nan = workload("fork", &[f64::NAN]);
        assert!(workload_lines(&nan, "fork").iter().any(|l| l == "bootbench-lava case=fork_throughput result=fail"));
    }

    #[test]
    fn ids_survive_lava_and_repeated_workloads_get_their_position() {
        for text in ["Hackbench time_1", "contest.io-load", "x__y", "--", "Ä"] {
            let id = case_id(text);
            assert_eq!(lava_clean(&id), id, "{text}");
            assert!(id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'), "{id}");
        }
        assert_eq!(case_id("contest.io-load"), "contest_io_load");
        let mut doc = crate::runner::begin_document("r", None, None);
        doc.workloads = vec![workload("fork", &[1.0]), workload("dbench", &[2.0]), workload("fork", &[3.0])];
        doc.status = Status::Complete;
        let lines = document_lines(&doc);
        assert!(lines.iter().any(|l| l.starts_with("bootbench-lava case=fork_1_throughput ")), "{lines:?}");
        assert!(lines.iter().any(|l| l.starts_with("bootbench-lava case=fork_3_throughput ")), "{lines:?}");
        assert!(lines.iter().any(|l| l.starts_with("bootbench-lava case=dbench_throughput ")), "{lines:?}");
        assert_eq!(lines.last().unwrap(), "bootbench-lava case=bootbench_run result=pass");
    }

    #[test]
    fn units_with_spaces_stay_one_field() {
        let mut w = workload("x", &[1.0]);
        w.iterations[0].metrics.insert("odd".into(), Metric::higher(2.0, "per second"));
        let re = regex::Regex::new(PATTERN).unwrap();
        let line = workload_lines(&w, "x").into_iter().find(|l| l.contains("case=x_odd")).unwrap();
        assert_eq!(&re.captures(&line).unwrap()["units"], "per_second");
    }
}
