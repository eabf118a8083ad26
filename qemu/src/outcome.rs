//! What one boot produced and the verdict on it. The verdict is a pure
//! function of what was observed ([`RunFacts`]), so every rule is tested on
//! canned console transcripts without booting anything. QEMU's exit status
//! is evidence, never the verdict: a boot is `ok` only with an intact result
//! stream.

use crate::console_scan::ConsoleScan;
use loads::console_protocol::StreamError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Which timeout ended a boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HangKind {
    /// The init never said hello.
    Boot,
    /// The console stayed silent too long.
    Silence,
    /// The whole boot took too long.
    Total,
    /// The init announced power-off, but QEMU did not stop.
    Poweroff,
}

impl fmt::Display for HangKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HangKind::Boot => "boot",
            HangKind::Silence => "silence",
            HangKind::Total => "total",
            HangKind::Poweroff => "poweroff",
        })
    }
}

/// The verdict on one boot. Serialises as `{"kind": "ok" | "panic" | "oops"
/// | "hang" | "qemu_failure" | "incomplete", ...details}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Classification {
    /// An intact result stream arrived and nothing went wrong that would
    /// cast doubt on it (kernel errors that did not stop the run are in
    /// [`BootOutcome::kernel_errors`]).
    Ok,
    /// The kernel panicked.
    Panic {
        /// The `Kernel panic - not syncing` line.
        line: String,
    },
    /// The kernel oopsed (or hit a BUG) and the result stream is incomplete.
    Oops {
        /// The oops and BUG lines, in order.
        lines: Vec<String>,
    },
    /// A timeout fired and QEMU was killed.
    Hang {
        /// Which timeout.
        which: HangKind,
        /// What was waited for, and how long.
        detail: String,
    },
    /// QEMU failed (could not start the guest, or died abnormally) without
    /// a result stream.
    QemuFailure {
        /// QEMU's exit code, if it exited rather than being killed by a signal.
        status: Option<i32>,
        /// QEMU's stderr and what was missing.
        detail: String,
    },
    /// QEMU exited normally, but the result stream is missing or damaged.
    Incomplete {
        /// Exactly what is missing, from the stream decoder.
        detail: String,
    },
}

impl Classification {
    /// The lowercase name: `ok`, `panic`, `oops`, `hang`, `qemu_failure`,
    /// `incomplete`.
    pub fn name(&self) -> &'static str {
        match self {
            Classification::Ok => "ok",
            Classification::Panic { .. } => "panic",
            Classification::Oops { .. } => "oops",
            Classification::Hang { .. } => "hang",
            Classification::QemuFailure { .. } => "qemu_failure",
            Classification::Incomplete { .. } => "incomplete",
        }
    }

    /// Whether the boot is usable.
    pub fn is_ok(&self) -> bool {
        matches!(self, Classification::Ok)
    }
}

impl fmt::Display for Classification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Classification::Ok => f.write_str("ok"),
            Classification::Panic { line } => write!(f, "panic: {line}"),
            Classification::Oops { lines } => {
                write!(f, "oops: {}", lines.first().map(String::as_str).unwrap_or(""))?;
                if lines.len() > 1 {
                    write!(f, " (+{} more)", lines.len() - 1)?;
                }
                Ok(())
            }
            Classification::Hang { which, detail } => write!(f, "hang ({which}): {detail}"),
            Classification::QemuFailure { status: Some(s), detail } => write!(f, "qemu failure (exit {s}): {detail}"),
            Classification::QemuFailure { status: None, detail } => write!(f, "qemu failure: {detail}"),
            Classification::Incomplete { detail } => write!(f, "incomplete: {detail}"),
        }
    }
}

/// Wall-clock timings of one boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// From spawning QEMU to its exit (or to killing it), in seconds when
    /// serialised.
    #[serde(with = "secs")]
    pub wall: Duration,
    /// From spawning QEMU to the init's `hello` event.
    #[serde(with = "opt_secs")]
    pub to_hello: Option<Duration>,
    /// From spawning QEMU to the init's `poweroff` event.
    #[serde(with = "opt_secs")]
    pub to_poweroff: Option<Duration>,
}

/// Everything one boot produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootOutcome {
    /// The verdict.
    pub classification: Classification,
    /// The whole console, as text.
    pub console_log: String,
    /// The result document (JSON text), whenever the stream decoded intact,
    /// even if the verdict is not `ok` (e.g. a panic at power-off).
    pub document: Option<String>,
    /// Why there is no document, from the stream decoder.
    pub stream_error: Option<String>,
    /// Protocol events `(name, text)`, console first, then any only the
    /// results port carried.
    pub events: Vec<(String, String)>,
    /// Oops, BUG and general-protection-fault lines the kernel printed.
    pub kernel_errors: Vec<String>,
    /// Timings.
    pub timings: Timings,
    /// QEMU's exit code; `None` if a signal ended it (including our kill).
    pub qemu_status: Option<i32>,
    /// The program and arguments QEMU was run with.
    pub argv: Vec<String>,
    /// QEMU's stderr.
    pub qemu_stderr: String,
    /// What the runner did or noticed that is not in the console, e.g. that
    /// it killed QEMU, and why.
    pub notes: Vec<String>,
}

/// How the QEMU process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// It exited by itself (`code` is `None` if a signal we did not send
    /// killed it).
    Exited {
        /// The exit code.
        code: Option<i32>,
        /// The terminating signal.
        signal: Option<i32>,
    },
    /// The runner killed it because a timeout fired.
    TimedOut(HangKind),
    /// The runner killed it after a panic line, when it did not exit by
    /// itself within the grace period.
    KilledAfterPanic,
}

/// What was observed during a boot: the input of [`classify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFacts {
    /// How QEMU ended.
    pub end: RunEnd,
    /// The timeout that fired, for the message (e.g. "no console output
    /// for 300 s").
    pub hang_detail: String,
    /// Whether the init said hello.
    pub saw_hello: bool,
    /// The first panic line.
    pub panic_line: Option<String>,
    /// Oops/BUG lines.
    pub kernel_errors: Vec<String>,
    /// The decoder's verdict on the last stream.
    pub stream: Result<(), StreamError>,
    /// QEMU's stderr.
    pub stderr: String,
}

impl RunFacts {
    /// Facts from a finished console scan and how QEMU ended.
    pub fn from_scan(scan: &ConsoleScan, end: RunEnd, hang_detail: String, stderr: String) -> RunFacts {
        RunFacts {
            end,
            hang_detail,
            saw_hello: scan.hello_seen(),
            panic_line: scan.panic_line().map(str::to_string),
            kernel_errors: scan.kernel_errors().to_vec(),
            stream: scan.decoder().last_document().map(drop),
            stderr,
        }
    }
}

/// The last `max` bytes of `s`, at a char boundary, trimmed.
fn tail(s: &str, max: usize) -> &str {
    let s = s.trim();
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// The verdict, in this order of precedence:
/// 1. a panic line → `panic` (the kernel is broken whatever else happened);
/// 2. a boot, silence or total timeout → `hang`; a stuck power-off → `hang`
///    unless the stream is intact;
/// 3. an intact stream → `ok` (oops lines are reported, not fatal);
/// 4. oops lines → `oops`;
/// 5. QEMU exited non-zero or by a signal → `qemu_failure`;
/// 6. otherwise → `incomplete`, with the decoder's exact error.
///
/// ```
/// # use qemu::outcome::{classify, Classification, RunEnd, RunFacts};
/// # use loads::console_protocol::StreamError;
/// let facts = RunFacts {
///     end: RunEnd::Exited { code: Some(0), signal: None },
///     hang_detail: String::new(),
///     saw_hello: true,
///     panic_line: None,
///     kernel_errors: vec![],
///     stream: Err(StreamError::NoStream),
///     stderr: String::new(),
/// };
/// assert_eq!(classify(&facts).name(), "incomplete");
/// ```
pub fn classify(facts: &RunFacts) -> Classification {
    if let Some(line) = &facts.panic_line {
        return Classification::Panic { line: line.clone() };
    }
    match facts.end {
        RunEnd::TimedOut(which @ (HangKind::Boot | HangKind::Silence | HangKind::Total)) => {
            return Classification::Hang { which, detail: facts.hang_detail.clone() };
        }
        RunEnd::TimedOut(HangKind::Poweroff) if facts.stream.is_err() => {
            return Classification::Hang { which: HangKind::Poweroff, detail: facts.hang_detail.clone() };
        }
        _ => {}
    }
    let stream_err = match &facts.stream {
        Ok(()) => return Classification::Ok,
        Err(e) => e,
    };
    if !facts.kernel_errors.is_empty() {
        return Classification::Oops { lines: facts.kernel_errors.clone() };
    }
    let before_hello = if facts.saw_hello { "" } else { " before the init said hello" };
    match facts.end {
        RunEnd::Exited { code, signal } if code != Some(0) => {
            let how = match (code, signal) {
                (Some(c), _) => format!("QEMU exited with status {c}{before_hello}"),
                (None, Some(s)) => format!("QEMU was killed by signal {s}{before_hello}"),
                (None, None) => format!("QEMU ended abnormally{before_hello}"),
            };
            let stderr = tail(&facts.stderr, 2000);
            let detail = if stderr.is_empty() {
                format!("{how}; {stream_err}")
            } else {
                format!("{how}; stderr: {stderr}; {stream_err}")
            };
            Classification::QemuFailure { status: code, detail }
        }
        _ => Classification::Incomplete {
            detail: if facts.saw_hello {
                stream_err.to_string()
            } else {
                format!("QEMU exited{before_hello}: {stream_err}")
            },
        },
    }
}

/// Serde for a `Duration` as fractional seconds.
mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}

/// Serde for an `Option<Duration>` as fractional seconds or null.
mod opt_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<f64>::deserialize(d)?
            .map(|v| Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loads::console_protocol::{encode, event, EVENT_HELLO, EVENT_POWEROFF};

    const PANIC: &str = include_str!("fixtures/panic.txt");
    const OOPS: &str = include_str!("fixtures/oops.txt");
    const CLEAN: &str = include_str!("fixtures/clean.txt");

    fn exited(code: i32) -> RunEnd {
        RunEnd::Exited { code: Some(code), signal: None }
    }

    fn scan(text: &str) -> ConsoleScan {
        let mut s = ConsoleScan::new();
        s.feed_bytes(text.as_bytes());
        s.finish();
        s
    }

    fn verdict(text: &str, end: RunEnd) -> Classification {
        classify(&RunFacts::from_scan(&scan(text), end, "test timeout".into(), String::new()))
    }

    fn stream_text(doc: &str) -> String {
        encode("run", doc).into_iter().map(|l| l + "\n").collect()
    }

    #[test]
    fn clean_console_capture_is_ok() {
        // A real x86_64 TCG boot of Debian's 6.1 kernel, whose init printed a
        // stream framed by an independent (Python) encoder.
        let s = scan(CLEAN);
        assert!(s.hello_seen() && s.poweroff_seen());
        assert!(s.decoder().last_document().unwrap().contains("\"status\": \"complete\""));
        assert_eq!(verdict(CLEAN, exited(0)), Classification::Ok);
        // The exit status is not the verdict.
        assert_eq!(verdict(CLEAN, exited(1)), Classification::Ok);
    }

    #[test]
    fn panic_capture_is_panic_whatever_qemu_did() {
        let want = Classification::Panic {
            line: "[    4.722662] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100".into(),
        };
        assert_eq!(verdict(PANIC, exited(0)), want);
        assert_eq!(verdict(PANIC, RunEnd::KilledAfterPanic), want);
        assert_eq!(verdict(PANIC, RunEnd::TimedOut(HangKind::Silence)), want);
    }

    #[test]
    fn oops_without_stream_is_oops_with_stream_is_ok() {
        match verdict(OOPS, exited(0)) {
            Classification::Oops { lines } => {
                assert_eq!(lines.len(), 3, "{lines:?}");
                assert!(lines[0].contains("BUG: kernel NULL pointer dereference"));
                assert!(lines[1].contains("Oops: 0000 [#1] PREEMPT SMP NOPTI"));
            }
            other => panic!("expected oops, got {other:?}"),
        }
        let with_stream = format!("{OOPS}{}", stream_text("{\"status\":\"complete\"}"));
        let s = scan(&with_stream);
        assert_eq!(classify(&RunFacts::from_scan(&s, exited(0), String::new(), String::new())), Classification::Ok);
        assert_eq!(s.kernel_errors().len(), 3);
    }

    #[test]
    fn timeouts_are_hangs_and_power_off_stuck_is_ok_with_stream() {
        let hello = format!("{}\n", event(EVENT_HELLO, "x"));
        assert!(matches!(
            verdict("", RunEnd::TimedOut(HangKind::Boot)),
            Classification::Hang { which: HangKind::Boot, .. }
        ));
        assert!(matches!(
            verdict(&hello, RunEnd::TimedOut(HangKind::Silence)),
            Classification::Hang { which: HangKind::Silence, .. }
        ));
        let done = format!("{hello}{}{}\n", stream_text("{}"), event(EVENT_POWEROFF, ""));
        assert_eq!(verdict(&done, RunEnd::TimedOut(HangKind::Poweroff)), Classification::Ok);
        // A total timeout is a hang even with an intact stream.
        assert!(matches!(verdict(&done, RunEnd::TimedOut(HangKind::Total)), Classification::Hang { .. }));
        let partial = format!("{hello}{}\n", event(EVENT_POWEROFF, ""));
        assert!(matches!(
            verdict(&partial, RunEnd::TimedOut(HangKind::Poweroff)),
            Classification::Hang { which: HangKind::Poweroff, .. }
        ));
    }

    #[test]
    fn incomplete_names_the_missing_chunks() {
        let doc = "y".repeat(800);
        let lines = encode("r", &doc);
        let mut text = format!("{}\n", event(EVENT_HELLO, "x"));
        for (i, l) in lines.iter().enumerate() {
            if i != 3 {
                text.push_str(l);
                text.push('\n');
            }
        }
        match verdict(&text, exited(0)) {
            Classification::Incomplete { detail } => {
                assert!(detail.contains("1 of 5 chunks missing [3]"), "{detail}");
            }
            other => panic!("expected incomplete, got {other:?}"),
        }
        match verdict("SeaBIOS\n", exited(0)) {
            Classification::Incomplete { detail } => {
                assert!(detail.starts_with("QEMU exited before the init said hello: no result stream"), "{detail}")
            }
            other => panic!("expected incomplete, got {other:?}"),
        }
    }

    #[test]
    fn qemu_failure_carries_stderr() {
        let facts = RunFacts::from_scan(
            &scan(""),
            exited(1),
            String::new(),
            "qemu-system-x86_64: -kernel /k: could not load kernel\n".into(),
        );
        match classify(&facts) {
            Classification::QemuFailure { status: Some(1), detail } => {
                assert!(
                    detail.contains("before the init said hello") && detail.contains("could not load kernel"),
                    "{detail}"
                )
            }
            other => panic!("expected qemu failure, got {other:?}"),
        }
    }

    #[test]
    fn serialises_with_lowercase_kind() {
        let j = serde_json::to_value(Classification::Hang { which: HangKind::Boot, detail: "d".into() }).unwrap();
        assert_eq!(j, serde_json::json!({"kind": "hang", "which": "boot", "detail": "d"}));
        let j = serde_json::to_value(Classification::QemuFailure { status: Some(1), detail: "x".into() }).unwrap();
        assert_eq!(j["kind"], "qemu_failure");
        assert_eq!(serde_json::to_value(Classification::Ok).unwrap(), serde_json::json!({"kind": "ok"}));
        let t =
            Timings { wall: Duration::from_millis(1500), to_hello: None, to_poweroff: Some(Duration::from_secs(1)) };
        let j = serde_json::to_string(&t).unwrap();
        assert_eq!(j, r#"{"wall":1.5,"to_hello":null,"to_poweroff":1.0}"#);
        assert_eq!(serde_json::from_str::<Timings>(&j).unwrap(), t);
    }
}
