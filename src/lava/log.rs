//! LAVA's job log: one YAML flow mapping per line, `{"dt": TIME, "lvl":
//! LEVEL, "msg": MESSAGE}`, as `lava-run` prints it on stderr and a LAVA
//! server keeps it (there each line is a list item, `- {...}`).
//!
//! The device's console is in the `target` lines, one per console line,
//! and in the `feedback` lines of what LAVA read after its test action
//! ended (the appliance's `poweroff` event is one of those).
//! LAVA's shell logger changes the text on the way (lava-dispatcher
//! 2023.01, `ShellLogger.write`): it drops `\r` and ESC, turns blank lines
//! into one, and writes each `"` as `\"`. [`JobLog::console_text`] undoes
//! the last, so the appliance's checksummed lines (whose JSON payload has
//! quotes) check again; it is undone only where that makes the line a
//! protocol line that checks (a LAVA that stops escaping stays readable).
//! `results` lines carry LAVA's test cases; the last one, `lava`/`job`,
//! says how the job ended.

use super::LavaError;
use loads::console_protocol;
use serde::Deserialize;

/// One log line.
#[derive(Debug, Clone, Deserialize)]
pub struct Entry {
    /// When LAVA logged it (UTC, ISO 8601 without a zone).
    #[serde(default)]
    pub dt: Option<String>,
    /// `target`, `info`, `debug`, `results`, `error`, ...
    pub lvl: String,
    /// A string, or a mapping for `results`.
    pub msg: serde_yaml_ng::Value,
}

/// A test case LAVA recorded (a `results` line).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CaseResult {
    /// The test definition (suite) it belongs to; `lava` for LAVA's own.
    pub definition: String,
    /// The case id.
    pub case: String,
    /// `pass`, `fail`, `skip` or `unknown`.
    pub result: String,
    /// The measurement, when the case had one.
    #[serde(default)]
    pub measurement: Option<serde_yaml_ng::Value>,
    /// Its units.
    #[serde(default)]
    pub units: Option<String>,
    /// Why LAVA's own case failed.
    #[serde(default)]
    pub error_msg: Option<String>,
    /// LAVA's class of that failure (`Infrastructure`, `Job`, `Test`, ...).
    #[serde(default)]
    pub error_type: Option<String>,
    /// What else LAVA recorded (a download's label and checksums).
    #[serde(default)]
    pub extra: Option<serde_yaml_ng::Value>,
}

/// A file LAVA downloaded for the job, as its `file-download` result and
/// the `downloading URL` line before it say.
#[derive(Debug, Clone, PartialEq)]
pub struct Download {
    /// The job's name for it: `kernel`, `ramdisk`, `dtb`, ...
    pub label: String,
    /// Where it came from, when the log says.
    pub url: Option<String>,
    /// The sha256 LAVA computed of what it fetched.
    pub sha256: String,
    /// Its size in bytes, when the log says.
    pub bytes: Option<u64>,
}

/// A parsed job log.
#[derive(Debug, Clone, Default)]
pub struct JobLog {
    /// Every line, in order.
    pub entries: Vec<Entry>,
}

impl JobLog {
    /// Parses `text` (the whole log); `path` names it in errors.
    pub fn parse(path: &str, text: &str) -> Result<JobLog, LavaError> {
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim_end();
            let line = line.strip_prefix("- ").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            if !line.starts_with('{') {
                return Err(LavaError::LogLine {
                    path: path.into(),
                    line: i + 1,
                    problem: "expected a {\"dt\": ..., \"lvl\": ..., \"msg\": ...} mapping".into(),
                });
            }
            let entry: Entry = serde_yaml_ng::from_str(line).map_err(|e| LavaError::LogLine {
                path: path.into(),
                line: i + 1,
                problem: e.to_string(),
            })?;
            entries.push(entry);
        }
        if entries.is_empty() {
            return Err(LavaError::Log { path: path.into(), problem: "the log is empty".into() });
        }
        Ok(JobLog { entries })
    }

    /// The device's console as the appliance wrote it (one line per
    /// `target` or `feedback` line), LAVA's quote escaping undone where it
    /// hides a protocol line.
    pub fn console_text(&self) -> String {
        let mut out = String::new();
        for e in self.entries.iter().filter(|e| is_console(&e.lvl)) {
            if let Some(line) = e.msg.as_str() {
                out.push_str(&unescape_protocol_line(line));
                out.push('\n');
            }
        }
        out
    }

    /// The `target` lines' timestamps: the first and the one of the first
    /// line containing `needle`.
    pub fn first_target_time(&self, needle: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| is_console(&e.lvl) && e.msg.as_str().is_some_and(|m| m.contains(needle)))
            .and_then(|e| e.dt.as_deref())
    }

    /// Every test case LAVA recorded, in order.
    pub fn results(&self) -> Vec<CaseResult> {
        self.entries
            .iter()
            .filter(|e| e.lvl == "results")
            .filter_map(|e| serde_yaml_ng::from_value(e.msg.clone()).ok())
            .collect()
    }

    /// The files LAVA fetched, with the sha256 it computed of each.
    pub fn downloads(&self) -> Vec<Download> {
        let mut out = Vec::new();
        let mut last_url = None;
        for e in &self.entries {
            if let Some(url) = e.msg.as_str().and_then(|m| m.strip_prefix("downloading ")) {
                last_url = Some(url.trim().to_string());
                continue;
            }
            if e.lvl != "results" {
                continue;
            }
            let Ok(r) = serde_yaml_ng::from_value::<CaseResult>(e.msg.clone()) else { continue };
            let Some(extra) = r.extra.filter(|_| r.definition == "lava" && r.case.ends_with("-download")) else {
                continue;
            };
            let text = |key: &str| extra.get(key).and_then(scalar_text);
            if let (Some(label), Some(sha256)) = (text("label"), text("sha256sum")) {
                let bytes = text("size").and_then(|s| s.parse().ok());
                out.push(Download { label, url: last_url.take(), sha256, bytes });
            }
        }
        out
    }

    /// LAVA's own verdict on the job (its `lava`/`job` case), when the log
    /// reaches the job's end.
    pub fn job_result(&self) -> Option<CaseResult> {
        self.results().into_iter().rev().find(|r| r.definition == "lava" && r.case == "job")
    }

    /// Seconds between the first and the last line.
    pub fn span_s(&self) -> Option<f64> {
        let first = self.entries.first()?.dt.as_deref()?;
        let last = self.entries.last()?.dt.as_deref()?;
        seconds_between(first, last)
    }
}

/// A scalar's text (LAVA tags some numbers as strings: `! "8247232"`).
fn scalar_text(v: &serde_yaml_ng::Value) -> Option<String> {
    match v {
        serde_yaml_ng::Value::String(s) => Some(s.clone()),
        serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
        serde_yaml_ng::Value::Tagged(t) => scalar_text(&t.value),
        _ => None,
    }
}

/// Whether a line of this level is console text.
pub fn is_console(lvl: &str) -> bool {
    lvl == "target" || lvl == "feedback"
}

/// `b - a` in seconds, for LAVA's timestamps (`2026-12-04T19:40:01.123456`);
/// `None` when either is not such a timestamp (a field out of its range
/// included: a log's year of 19 digits must not overflow the arithmetic).
pub fn seconds_between(a: &str, b: &str) -> Option<f64> {
    let parse = |t: &str| -> Option<f64> {
        let (date, time) = t.split_once('T')?;
        let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
        let (y, m, day) = (d.next()??, d.next()??, d.next()??);
        let mut hms = time.split(':');
        let (h, min, s) =
            (hms.next()?.parse::<f64>().ok()?, hms.next()?.parse::<f64>().ok()?, hms.next()?.parse::<f64>().ok()?);
        // ISO 8601's four-digit years; 60 seconds for a leap second.
        let in_range = (0..=9999).contains(&y)
            && (1..=12).contains(&m)
            && (1..=31).contains(&day)
            && (0.0..24.0).contains(&h)
            && (0.0..60.0).contains(&min)
            && (0.0..61.0).contains(&s);
        if !in_range {
            return None;
        }
        // Days from the civil date (Howard Hinnant's algorithm).
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146097 + doe;
        Some(days as f64 * 86400.0 + h * 3600.0 + min * 60.0 + s)
    };
    Some(parse(b)? - parse(a)?)
}

/// `line` with LAVA's `\"` turned back into `"`, when that makes it a
/// protocol line whose checksum holds and it does not hold as it is;
/// otherwise as it is.
fn unescape_protocol_line(line: &str) -> String {
    if !line.contains("\\\"") || !line.contains(console_protocol::MARKER) || is_intact_protocol_line(line) {
        return line.to_string();
    }
    let unescaped = line.replace("\\\"", "\"");
    if is_intact_protocol_line(&unescaped) {
        unescaped
    } else {
        line.to_string()
    }
}

/// Whether the protocol line in `line` (the marker may come after other
/// text) checks: a header, an event, or a chunk whose CRC matches.
fn is_intact_protocol_line(line: &str) -> bool {
    use console_protocol::Line;
    let Some(at) = line.find(console_protocol::MARKER) else { return false };
    matches!(
        console_protocol::parse_line(&line[at..]),
        Some(Line::Header { .. } | Line::Event { .. } | Line::Data { intact: true, .. })
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lavas_quote_escaping_is_undone_only_where_the_checksum_then_holds() {
        let lines = console_protocol::encode(console_protocol::StreamKind::Result, "b1", r#"{"a":"x\"y"}"#);
        let chunk = &lines[1];
        let escaped = chunk.replace('"', "\\\"");
        assert_ne!(&escaped, chunk);
        assert_eq!(&unescape_protocol_line(&escaped), chunk);
        // Not a protocol line: left alone.
        assert_eq!(unescape_protocol_line(r#"say \"hi\""#), r#"say \"hi\""#);
        // A protocol line that was never escaped stays intact.
        assert_eq!(&unescape_protocol_line(chunk), chunk);
    }

    #[test]
    fn log_lines_parse_with_or_without_the_list_dash_and_bad_ones_are_named() {
        let text = concat!(
            "{\"dt\": \"2026-12-04T19:00:00.000000\", \"lvl\": \"info\", \"msg\": \"start\"}\n",
            "- {\"dt\": \"2026-12-04T19:00:02.500000\", \"lvl\": \"target\", \"msg\": \"say \\\\\\\"x\\\\\\\"\"}\n",
            "{\"dt\": \"2026-12-04T19:01:00.000000\", \"lvl\": \"results\", \"msg\": {\"definition\": \"lava\", \"case\": \"job\", \"result\": \"pass\"}}\n",
        );
        let log = JobLog::parse("job.log", text).unwrap();
        assert_eq!(log.entries.len(), 3);
        assert_eq!(log.console_text(), "say \\\"x\\\"\n");
        assert_eq!(log.job_result().unwrap().result, "pass");
        assert_eq!(log.span_s(), Some(60.0));
        let e = JobLog::parse("job.log", "{\"dt\": \"x\", \"lvl\": \"info\", \"msg\": \"a\"}\nnot yaml\n").unwrap_err();
        assert!(e.to_string().contains("job.log: line 2"), "{e}");
        let e = JobLog::parse("job.log", "\n\n").unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
    }

    #[test]
    fn timestamps_subtract_across_midnight_and_month_ends() {
        assert_eq!(seconds_between("2026-12-31T23:59:59.5", "2027-01-01T00:00:00.5"), Some(1.0));
        assert_eq!(seconds_between("2024-02-28T12:00:00", "2024-03-01T12:00:00"), Some(2.0 * 86400.0));
        assert_eq!(seconds_between("bad", "2024-03-01T12:00:00"), None);
    }

    /// Found by the `lava_import` fuzz target: a year (or month, day) too
    /// large overflowed the day count (a panic in a debug build, a wrong
    /// span in a release one).
    #[test]
    fn timestamps_out_of_range_are_not_timestamps() {
        let fine = "2026-12-04T19:01:00.000000";
        for bad in [
            "9223372036854775807-01-01T00:00:00",
            "2026-9223372036854775807-01T00:00:00",
            "2026-01-9223372036854775807T00:00:00",
            "-9223372036854775808-01-01T00:00:00",
            "2026-13-01T00:00:00",
            "2026-01-00T00:00:00",
            "2026-01-01T24:00:00",
            "2026-01-01T00:00:NaN",
            "2026-01-01T00:00:inf",
        ] {
            assert_eq!(seconds_between(bad, fine), None, "{bad}");
            assert_eq!(seconds_between(fine, bad), None, "{bad}");
        }
        assert_eq!(seconds_between("2026-12-04T19:00:59", "2026-12-04T19:01:00.5"), Some(1.5));
    }

    proptest::proptest! {
        /// The span of any two strings is a number or `None`, never a
        /// panic; a timestamp is 0 s from itself.
        #[test]
        fn any_two_timestamps_subtract_or_are_refused(
            a in "-?[0-9]{1,20}-[0-9]{1,20}-[0-9]{1,20}T[0-9]{1,3}:[0-9]{1,3}:[0-9.]{1,8}",
            b in "[ -~]{0,30}",
        ) {
            if let Some(s) = seconds_between(&a, &a) {
                proptest::prop_assert_eq!(s, 0.0);
            }
            let _ = seconds_between(&a, &b);
            let _ = seconds_between(&b, &a);
        }
    }
}
