//! What one boot produced and the verdict on it. The verdict is a pure
//! function of what was observed ([`RunFacts`]), so every rule is tested on
//! canned console transcripts without booting anything. QEMU's exit status
//! is evidence, never the verdict: a boot is `ok` only with an intact result
//! stream.

use crate::console_scan::{kernel_message, ConsoleScan, KernelMessage, MAX_KERNEL_ERRORS};
use loads::console_protocol::{
    parse_line, Decoder, Line, StreamError, StreamKind, EVENT_INIT_PANIC, EVENT_LATE_STEP, MARKER, TAG_HEX,
};
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
    /// A hardware watchdog the candidate armed reset the machine (a lab
    /// machine's agent reports it when it comes back).
    Watchdog,
}

impl fmt::Display for HangKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HangKind::Boot => "boot",
            HangKind::Silence => "silence",
            HangKind::Total => "total",
            HangKind::Poweroff => "poweroff",
            HangKind::Watchdog => "watchdog",
        })
    }
}

/// The verdict on one boot. Serialises as `{"kind": "ok" | "init_panic" |
/// "boot_failure" | "panic" | "oops" | "hang" | "qemu_failure" |
/// "incomplete", ...details}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Classification {
    /// An intact result stream arrived and nothing went wrong that would
    /// cast doubt on it (kernel errors that did not stop the run are in
    /// [`BootOutcome::kernel_errors`]).
    Ok,
    /// The appliance's own init (PID 1) panicked: a bootbench bug, not the
    /// kernel's. Never counted against the kernel.
    InitPanic {
        /// Where in the init's source, `file:line:col` (empty if unknown).
        location: String,
        /// The panic message.
        message: String,
    },
    /// The kernel panicked before any init ran: it found no init it could
    /// start (`rdinit=` names nothing, the image lacks `/init` or holds one
    /// for another arch) or no root to mount. Counted against the kernel
    /// like a panic (the same image runs on a good kernel), but named
    /// apart: the first thing to check is the image and the cmdline.
    BootFailure {
        /// The `Kernel panic - not syncing` line.
        line: String,
    },
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
    /// The lowercase name: `ok`, `init_panic`, `boot_failure`, `panic`,
    /// `oops`, `hang`, `qemu_failure`, `incomplete`.
    pub fn name(&self) -> &'static str {
        match self {
            Classification::Ok => "ok",
            Classification::InitPanic { .. } => "init_panic",
            Classification::BootFailure { .. } => "boot_failure",
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
            Classification::InitPanic { location, message } => write!(
                f,
                "init panic: the appliance's init (PID 1) panicked{}: {message}; a bootbench failure, not the kernel's",
                if location.is_empty() { String::new() } else { format!(" at {location}") }
            ),
            Classification::BootFailure { line } => {
                write!(f, "boot failure: the kernel started no init ({line}); check the image and the cmdline")
            }
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
    /// The JSON text of each intact per-workload result stream, in the
    /// order the guest first printed them, without repeats (a workload
    /// may arrive on both the console and the results port).
    #[serde(default)]
    pub workload_results: Vec<String>,
    /// Protocol events `(name, text)`, console first, then any only the
    /// results port carried.
    pub events: Vec<(String, String)>,
    /// Oops, BUG and general-protection-fault lines the kernel printed.
    pub kernel_errors: Vec<String>,
    /// What went wrong after the result was complete (a timeout, a kernel
    /// panic or oops, the init's own panic), when the verdict is `ok`
    /// anyway: the measurements are intact, the failure is recorded beside
    /// them.
    #[serde(default)]
    pub late_failure: Option<String>,
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

/// The init's report of its own panic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InitPanicReport {
    /// `file:line:col` in the init's source (empty if unknown).
    pub location: String,
    /// The panic message.
    pub message: String,
}

impl InitPanicReport {
    /// Reads the text of an `init-panic` event: `location=<file:line:col>
    /// message=<text>` (a text without `location=` is all message).
    ///
    /// ```
    /// # use qemu::outcome::InitPanicReport;
    /// let r = InitPanicReport::from_event_text("location=init/src/main.rs:108:36 message=overflow when adding");
    /// assert_eq!((r.location.as_str(), r.message.as_str()), ("init/src/main.rs:108:36", "overflow when adding"));
    /// ```
    pub fn from_event_text(text: &str) -> InitPanicReport {
        let text = text.trim();
        let Some(rest) = text.strip_prefix("location=") else {
            return InitPanicReport {
                location: String::new(),
                message: text.strip_prefix("message=").unwrap_or(text).into(),
            };
        };
        match rest.split_once(" message=") {
            Some((location, message)) => InitPanicReport { location: location.trim().into(), message: message.into() },
            None => match rest.split_once(' ') {
                Some((location, message)) => InitPanicReport { location: location.into(), message: message.into() },
                None => InitPanicReport { location: rest.into(), message: String::new() },
            },
        }
    }
}

/// Where things happened on the console, as 0-based line numbers, so that
/// a failure can be ordered against the result: one after the result
/// stream's last line is a late failure, one before it is the verdict.
/// Lines the results port carried have no place here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsoleOrder {
    /// The last console line (header or chunk) of the result document's
    /// stream, when the document is intact.
    pub result_end: Option<usize>,
    /// The first `Kernel panic - not syncing` line.
    pub kernel_panic: Option<usize>,
    /// The init's panic report: its `init-panic` event, or (old images)
    /// std's `panicked at` line.
    pub init_panic: Option<usize>,
    /// Oops, BUG and general-protection-fault lines with their line numbers
    /// (the first [`MAX_KERNEL_ERRORS`]).
    pub oops: Vec<(usize, String)>,
    /// The init's `late-step` events (a step after the result that failed
    /// or passed its bound), with their line numbers; one only the results
    /// port carried has `usize::MAX`.
    pub late_steps: Vec<(usize, String)>,
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
    /// The init's own panic: its `init-panic` event, or std's `panicked
    /// at` line followed by the kernel's "Attempted to kill init".
    pub init_panic: Option<InitPanicReport>,
    /// Oops/BUG lines.
    pub kernel_errors: Vec<String>,
    /// The decoder's verdict on the last stream.
    pub stream: Result<(), StreamError>,
    /// Where the result, panics and oopses were on the console.
    pub order: ConsoleOrder,
    /// QEMU's stderr.
    pub stderr: String,
}

impl RunFacts {
    /// Facts from a finished console scan and how QEMU ended.
    pub fn from_scan(scan: &ConsoleScan, end: RunEnd, hang_detail: String, stderr: String) -> RunFacts {
        let document = scan.decoder().last_document();
        let (mut order, std_panic) = read_console(&scan.log_text(), document.as_deref().ok());
        for (name, text) in scan.events() {
            if name == EVENT_LATE_STEP && !order.late_steps.iter().any(|(_, t)| t == text) {
                order.late_steps.push((usize::MAX, text.clone()));
            }
        }
        let stream = document.map(drop);
        let init_panic = scan
            .events()
            .iter()
            .find(|(name, _)| name == EVENT_INIT_PANIC)
            .map(|(_, text)| InitPanicReport::from_event_text(text))
            .or(std_panic);
        RunFacts {
            end,
            hang_detail,
            saw_hello: scan.hello_seen(),
            panic_line: scan.panic_line().map(str::to_string),
            init_panic,
            kernel_errors: scan.kernel_errors().to_vec(),
            stream,
            order,
            stderr,
        }
    }
}

/// The location in std's panic line (`thread 'main' panicked at
/// src/main.rs:2:5:`, or with a thread id `thread 'main' (1) panicked
/// at ...`), and the message when the line holds it (the form before Rust
/// 1.73: `panicked at 'msg', src/main.rs:2:5`). Std's two aborts that no
/// panic hook sees count too, with no location: `thread 'main' has
/// overflowed its stack` and `memory allocation of N bytes failed`.
fn std_panic_line(line: &str) -> Option<(String, Option<String>)> {
    if line.contains(MARKER) {
        return None;
    }
    let text = line.trim();
    if (text.starts_with("thread '") && text.contains("' has overflowed its stack"))
        || (text.starts_with("memory allocation of ") && text.ends_with(" bytes failed"))
    {
        return Some((String::new(), Some(text.to_string())));
    }
    let at = line.find("panicked at ")?;
    if !line[..at].contains("thread '") {
        return None;
    }
    let rest = line[at + "panicked at ".len()..].trim();
    if let Some(quoted) = rest.strip_prefix('\'') {
        if let Some((message, location)) = quoted.rsplit_once("', ") {
            return Some((location.trim().to_string(), Some(message.to_string())));
        }
    }
    Some((rest.trim_end_matches(':').to_string(), None))
}

/// The console line where the stream that carried `document` ended: the
/// last line of the result stream (header or chunk) whose lines alone
/// rebuild `document`, or of the only result stream the console showed
/// (the results port repaired what the console lost of it). `streams`
/// holds each result stream's lines, by tag.
fn result_end(streams: &[(&str, Vec<(usize, &str)>)], document: &str) -> Option<usize> {
    let last_line = |lines: &Vec<(usize, &str)>| lines.last().map(|(at, _)| *at);
    // Latest first: the decoder prefers the last intact result stream.
    let mut by_last: Vec<&(&str, Vec<(usize, &str)>)> = streams.iter().collect();
    by_last.sort_by_key(|(_, lines)| std::cmp::Reverse(last_line(lines)));
    let rebuilt = by_last.into_iter().find_map(|(_, lines)| {
        let mut d = Decoder::new();
        for (_, line) in lines {
            d.feed_line(line);
        }
        (d.last_document().ok().as_deref() == Some(document)).then(|| last_line(lines)).flatten()
    });
    match streams {
        [(_, only)] => rebuilt.or_else(|| last_line(only)),
        _ => rebuilt,
    }
}

/// Walks the console log once: where the stream carrying the result
/// `document` ended, where the kernel panicked and oopsed, where the init
/// reported its own panic; and, for images without the init's panic hook,
/// std's panic report when the kernel's next panic is "Attempted to kill
/// init" (PID 1 died of it).
fn read_console(log: &str, document: Option<&str>) -> (ConsoleOrder, Option<InitPanicReport>) {
    let mut order = ConsoleOrder::default();
    // The console lines of each result stream, by tag.
    let mut streams: Vec<(&str, Vec<(usize, &str)>)> = Vec::new();
    // The latest std panic report seen before the kernel's first panic, and
    // how many lines may still hold its message.
    let mut std_panic: Option<(usize, InitPanicReport)> = None;
    let mut awaiting_message = 0;
    let mut old_style = None;
    for (i, line) in log.split('\n').map(|l| l.trim_end_matches('\r')).enumerate() {
        match parse_line(line) {
            Some(Line::Event { name, .. }) if name == EVENT_INIT_PANIC => {
                order.init_panic.get_or_insert(i);
            }
            Some(Line::Event { name, text }) if name == EVENT_LATE_STEP => order.late_steps.push((i, text.to_string())),
            Some(
                Line::Header { kind: StreamKind::Result, sha256: tag, .. }
                | Line::Data { kind: StreamKind::Result, tag, intact: true, .. },
            ) if document.is_some() => {
                let tag = tag.get(..TAG_HEX).unwrap_or(tag);
                match streams.iter_mut().find(|(t, _)| *t == tag) {
                    Some((_, lines)) => lines.push((i, line)),
                    None => streams.push((tag, vec![(i, line)])),
                }
            }
            _ => {}
        }
        // A line of PID 1's after a std panic report proves PID 1 outlived
        // it: the report was a child's (a workload's, or a late step's),
        // and the kernel's later "Attempted to kill init" is not its doing.
        if std_panic.as_ref().is_some_and(|(at, _)| *at < i)
            && (line.contains(MARKER) || line.trim_start().starts_with("bootbench:"))
        {
            std_panic = None;
            awaiting_message = 0;
        }
        if order.kernel_panic.is_none() {
            if let Some((location, message)) = std_panic_line(line) {
                awaiting_message = if message.is_some() { 0 } else { 3 };
                std_panic = Some((i, InitPanicReport { location, message: message.unwrap_or_default() }));
                continue;
            }
            let text = line.trim();
            if awaiting_message > 0 && !text.is_empty() && !text.starts_with('[') && !text.starts_with('<') {
                awaiting_message = 0;
                if let Some((_, report)) = &mut std_panic {
                    if !text.starts_with("note: ") && !text.contains(MARKER) {
                        report.message = text.to_string();
                    }
                }
            } else if awaiting_message > 0 {
                awaiting_message -= 1;
            }
        }
        match kernel_message(line) {
            Some(KernelMessage::Panic) if order.kernel_panic.is_none() => {
                order.kernel_panic = Some(i);
                if line.contains("Attempted to kill init") {
                    // Ordered by the kernel's line: PID 1 died there.
                    old_style = std_panic.take().map(|(_, report)| (i, report));
                }
            }
            Some(KernelMessage::Oops) if order.oops.len() < MAX_KERNEL_ERRORS => {
                order.oops.push((i, line.trim().to_string()));
            }
            _ => {}
        }
    }
    order.result_end = document.and_then(|doc| result_end(&streams, doc));
    if let Some((at, report)) = old_style {
        order.init_panic.get_or_insert(at);
        return (order, Some(report));
    }
    (order, None)
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

/// The verdict on a boot, and what went wrong after its result was
/// complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// The verdict.
    pub classification: Classification,
    /// With an `ok` verdict: the failures after the result was complete
    /// (the first of them in console order, a timeout last), in words.
    pub late_failure: Option<String>,
}

/// The verdict, in this order of precedence:
/// 1. the init's own panic → `init_panic` (a bootbench bug; it wins over
///    the kernel's "Attempted to kill init" panic that follows it);
/// 2. a kernel panic line → `boot_failure` when it says no init could be
///    started or no root mounted ([`is_no_init_panic`]), else `panic`;
/// 3. an intact result stream → `ok` (oops lines are reported, not fatal);
/// 4. a boot, silence, total or power-off timeout → `hang`;
/// 5. oops lines → `oops`;
/// 6. QEMU exited non-zero or by a signal → `qemu_failure`;
/// 7. otherwise → `incomplete`, with the decoder's exact error.
///
/// A complete result is never a hang: a panic (kernel or init) whose line
/// comes after the result stream's last line on the console does not
/// count in 1 and 2, and with an intact stream no timeout counts. Such
/// failures after the result are [`Judgement::late_failure`], beside an
/// `ok` verdict; the order is by console position, so a panic before the
/// stream's end (or with no console position to order it by) stays the
/// verdict.
///
/// ```
/// # use qemu::outcome::{classify, Classification, ConsoleOrder, HangKind, RunEnd, RunFacts};
/// # use loads::console_protocol::StreamError;
/// let mut facts = RunFacts {
///     end: RunEnd::Exited { code: Some(0), signal: None },
///     hang_detail: String::new(),
///     saw_hello: true,
///     panic_line: None,
///     init_panic: None,
///     kernel_errors: vec![],
///     stream: Err(StreamError::NoStream),
///     order: ConsoleOrder::default(),
///     stderr: String::new(),
/// };
/// assert_eq!(classify(&facts).name(), "incomplete");
/// // A silence timeout after a complete result is not a hang.
/// facts.end = RunEnd::TimedOut(HangKind::Silence);
/// assert_eq!(classify(&facts).name(), "hang");
/// facts.stream = Ok(());
/// assert_eq!(classify(&facts), Classification::Ok);
/// ```
pub fn classify(facts: &RunFacts) -> Classification {
    judge(facts).classification
}

/// [`classify`]'s verdict, with the late failure beside an `ok` one.
pub fn judge(facts: &RunFacts) -> Judgement {
    let order = &facts.order;
    let intact = facts.stream.is_ok();
    // After the result: the line comes after the stream's last console line.
    let late = |at: Option<usize>| intact && matches!((at, order.result_end), (Some(a), Some(end)) if a > end);
    if let Some(p) = facts.init_panic.as_ref().filter(|_| !late(order.init_panic)) {
        let classification = Classification::InitPanic { location: p.location.clone(), message: p.message.clone() };
        return Judgement { classification, late_failure: None };
    }
    if let Some(line) = facts.panic_line.as_ref().filter(|_| !late(order.kernel_panic)) {
        let classification = if is_no_init_panic(line) {
            Classification::BootFailure { line: line.clone() }
        } else {
            Classification::Panic { line: line.clone() }
        };
        return Judgement { classification, late_failure: None };
    }
    let classification = match &facts.stream {
        Ok(()) => return Judgement { classification: Classification::Ok, late_failure: late_failures(facts) },
        Err(e) => without_result(facts, e),
    };
    Judgement { classification, late_failure: None }
}

/// Whether a kernel panic line says the kernel could start no init or
/// mount no root: the panics of `kernel_init` and `mount_root`, which come
/// before any userspace ran.
pub fn is_no_init_panic(line: &str) -> bool {
    ["No working init found", "Requested init ", "Unable to mount root fs", "VFS: Unable to mount root"]
        .iter()
        .any(|m| line.contains(m))
}

/// What went wrong after an intact result: the init's or the kernel's
/// panic and oopses after its last console line and the init's failed
/// late steps, in console order, then a timeout.
fn late_failures(facts: &RunFacts) -> Option<String> {
    let order = &facts.order;
    let mut found: Vec<(usize, String)> = Vec::new();
    if let (Some(p), Some(at)) = (&facts.init_panic, order.init_panic) {
        found.push((
            at,
            Classification::InitPanic { location: p.location.clone(), message: p.message.clone() }.to_string(),
        ));
    }
    if let (Some(line), Some(at)) = (&facts.panic_line, order.kernel_panic) {
        found.push((at, format!("kernel panic: {line}")));
    }
    let after = |at: usize| order.result_end.is_some_and(|end| at > end);
    let oopses: Vec<&(usize, String)> = order.oops.iter().filter(|(at, _)| after(*at)).collect();
    if let Some((at, first)) = oopses.first() {
        let more = if oopses.len() > 1 { format!(" (+{} more)", oopses.len() - 1) } else { String::new() };
        found.push((*at, format!("oops: {first}{more}")));
    }
    found.retain(|(at, _)| after(*at));
    // The init reports a late step only once the result is out.
    found.extend(order.late_steps.iter().map(|(at, text)| (*at, format!("late step failed: {text}"))));
    found.sort_by_key(|(at, _)| *at);
    let mut parts: Vec<String> = found.into_iter().map(|(_, what)| what).collect();
    if let RunEnd::TimedOut(which) = facts.end {
        parts.push(format!("hang ({which}): {}", facts.hang_detail));
    }
    (!parts.is_empty()).then(|| format!("after the result was complete: {}", parts.join("; then ")))
}

/// The verdict on a boot without an intact result and without a panic.
fn without_result(facts: &RunFacts, stream_err: &StreamError) -> Classification {
    if let RunEnd::TimedOut(which) = facts.end {
        return Classification::Hang { which, detail: facts.hang_detail.clone() };
    }
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
    use loads::console_protocol::{encode, event, EVENT_ALIVE, EVENT_HELLO, EVENT_POWEROFF};

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
        encode(StreamKind::Result, "run", doc).into_iter().map(|l| l + "\n").collect()
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
        let partial = format!("{hello}{}\n", event(EVENT_POWEROFF, ""));
        assert!(matches!(
            verdict(&partial, RunEnd::TimedOut(HangKind::Poweroff)),
            Classification::Hang { which: HangKind::Poweroff, .. }
        ));
    }

    fn judged(text: &str, end: RunEnd) -> Judgement {
        judge(&RunFacts::from_scan(&scan(text), end, "no console output for 300s".into(), String::new()))
    }

    /// The stream of a small document, as console lines.
    fn stream_lines(doc: &str) -> Vec<String> {
        encode(StreamKind::Result, "run", doc)
    }

    const KILL_INIT: &str = "[    9.100000] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000006";

    #[test]
    fn init_panic_event_is_an_appliance_failure_and_wins_over_the_kernel_panic_after_it() {
        let text = format!(
            "{}\n{}\n{KILL_INIT}\n",
            event(EVENT_HELLO, "x"),
            event(
                EVENT_INIT_PANIC,
                "location=init/src/main.rs:108:36 message=overflow when adding duration to instant"
            )
        );
        let want = Classification::InitPanic {
            location: "init/src/main.rs:108:36".into(),
            message: "overflow when adding duration to instant".into(),
        };
        for end in [exited(0), RunEnd::KilledAfterPanic, RunEnd::TimedOut(HangKind::Silence)] {
            let j = judged(&text, end);
            assert_eq!(j.classification, want, "{end:?}");
            assert_eq!(j.late_failure, None);
        }
        // The hook powers off: no kernel panic at all.
        let clean_exit =
            format!("{}\n{}\n", event(EVENT_HELLO, "x"), event(EVENT_INIT_PANIC, "location=a.rs:1:2 message=m"));
        assert_eq!(verdict(&clean_exit, exited(0)).name(), "init_panic");
        let shown = want.to_string();
        assert!(shown.contains("bootbench") && shown.contains("not the kernel's"), "{shown}");
        assert!(shown.contains("init/src/main.rs:108:36"), "{shown}");
        let j = serde_json::to_value(&want).unwrap();
        assert_eq!(j["kind"], "init_panic");
    }

    #[test]
    fn old_images_std_panic_line_then_attempted_to_kill_init_is_init_panic() {
        let std_panic = "thread 'main' (1) panicked at init/src/main.rs:108:36:\n\
                         overflow when adding duration to instant\n\
                         note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace";
        let text = PANIC.replace("exiting to make the kernel panic", std_panic);
        assert_ne!(text, PANIC);
        let want = Classification::InitPanic {
            location: "init/src/main.rs:108:36".into(),
            message: "overflow when adding duration to instant".into(),
        };
        assert_eq!(verdict(&text, exited(0)), want);
        assert_eq!(verdict(&text, RunEnd::KilledAfterPanic), want);
        // The form before Rust 1.73 carries the message on the same line.
        let old =
            PANIC.replace("exiting to make the kernel panic", "thread 'main' panicked at 'boom', init/src/x.rs:3:9");
        assert_eq!(
            verdict(&old, exited(0)),
            Classification::InitPanic { location: "init/src/x.rs:3:9".into(), message: "boom".into() }
        );
        // Std's aborts that no panic hook catches are the init's too.
        for abort in ["thread 'main' has overflowed its stack", "memory allocation of 4096 bytes failed"] {
            let text = PANIC.replace("exiting to make the kernel panic", &format!("\n{abort}\nfatal runtime error: x"));
            assert_eq!(
                verdict(&text, exited(0)),
                Classification::InitPanic { location: String::new(), message: abort.into() },
                "{abort}"
            );
        }
        // A panic line that does not kill init (a workload child's) leaves a
        // later kernel panic to the kernel.
        let child = format!(
            "{}\nthread 'main' panicked at loads/src/fork.rs:1:1:\nchild\n[ 9.0] Kernel panic - not syncing: Fatal exception\n",
            event(EVENT_HELLO, "x")
        );
        assert_eq!(verdict(&child, exited(0)).name(), "panic");
        // A workload's panic, then PID 1 carrying on (its lines), then the
        // kernel killing init much later: the kernel's panic, not ours.
        let later = format!(
            "{}\nthread 'main' (212) panicked at loads/src/fork.rs:1:1:\nchild\nbootbench: workload fork failed: x\n\
             {}\n[ 90.0] Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b\n",
            event(EVENT_HELLO, "x"),
            event(EVENT_ALIVE, "workload=hackbench elapsed_s=60")
        );
        assert_eq!(verdict(&later, exited(0)).name(), "panic", "a child's panic was taken for PID 1's");
    }

    #[test]
    fn kernel_panic_before_the_result_completes_is_panic() {
        let lines = stream_lines(&"d".repeat(1500));
        assert!(lines.len() > 3);
        // The panic line sits before the stream's last line: by position, the
        // result was not complete when the kernel panicked.
        let mut text = format!("{}\n", event(EVENT_HELLO, "x"));
        for (i, l) in lines.iter().enumerate() {
            if i == lines.len() - 1 {
                text.push_str(KILL_INIT);
                text.push('\n');
            }
            text.push_str(l);
            text.push('\n');
        }
        let s = scan(&text);
        assert!(s.decoder().last_document().is_ok(), "the stream itself is intact");
        let j = judged(&text, exited(0));
        assert_eq!(j.classification, Classification::Panic { line: KILL_INIT.into() });
        assert_eq!(j.late_failure, None);
        // And without any result.
        let bare = format!("{}\n{KILL_INIT}\n", event(EVENT_HELLO, "x"));
        assert_eq!(verdict(&bare, RunEnd::KilledAfterPanic).name(), "panic");
    }

    #[test]
    fn a_kernel_that_starts_no_init_is_a_boot_failure_and_other_panics_stay_panics() {
        for line in [
            "[    1.9] Kernel panic - not syncing: Requested init /nonexistent failed (error -2).",
            "[    1.9] Kernel panic - not syncing: No working init found.  Try passing init= option to kernel.",
            "[    1.2] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)",
        ] {
            let v = verdict(&format!("{line}\n"), RunEnd::KilledAfterPanic);
            assert_eq!(v, Classification::BootFailure { line: line.into() }, "{line}");
            assert!(v.to_string().contains("started no init"), "{v}");
        }
        let other = "[    5.0] Kernel panic - not syncing: Fatal exception in interrupt";
        assert_eq!(verdict(&format!("{other}\n"), RunEnd::KilledAfterPanic).name(), "panic");
    }

    #[test]
    fn panic_after_a_complete_result_is_ok_with_the_late_failure_beside_it() {
        let text = format!(
            "{}\n{}{}\n{KILL_INIT}\n",
            event(EVENT_HELLO, "x"),
            stream_text("{\"status\":\"complete\"}"),
            event(EVENT_POWEROFF, "")
        );
        for end in [exited(0), RunEnd::KilledAfterPanic] {
            let j = judged(&text, end);
            assert_eq!(j.classification, Classification::Ok, "{end:?}");
            let late = j.late_failure.unwrap_or_default();
            assert!(late.contains("after the result was complete") && late.contains(KILL_INIT), "{late}");
        }
        // The init's own panic after the result is late too, and named as ours.
        let text = format!(
            "{}\n{}{}\n",
            event(EVENT_HELLO, "x"),
            stream_text("{}"),
            event(EVENT_INIT_PANIC, "location=init/src/result_upload.rs:9:9 message=runtime thread died")
        );
        let j = judged(&text, exited(0));
        assert_eq!(j.classification, Classification::Ok);
        let late = j.late_failure.unwrap_or_default();
        assert!(late.contains("result_upload.rs:9:9") && late.contains("not the kernel's"), "{late}");
    }

    #[test]
    fn a_result_the_port_repaired_is_ordered_by_its_console_lines() {
        // The console lost a chunk of the result (a printk landed in it), the
        // results port carried it whole; the kernel panicked after the
        // console's last line of the stream: a late failure.
        let lines = stream_lines(&"q".repeat(1500));
        let mut s = scan("");
        s.feed_bytes(format!("{}\n", event(EVENT_HELLO, "x")).as_bytes());
        for (i, l) in lines.iter().enumerate() {
            if i != 2 {
                s.feed_bytes(format!("{l}\n").as_bytes());
            }
        }
        s.feed_bytes(format!("{KILL_INIT}\n").as_bytes());
        s.finish();
        let port: String = lines.iter().map(|l| format!("{l}\n")).collect();
        s.feed_port_text(&port);
        let j = judge(&RunFacts::from_scan(&s, exited(0), String::new(), String::new()));
        assert_eq!(j.classification, Classification::Ok);
        assert!(j.late_failure.unwrap_or_default().contains(KILL_INIT));
    }

    #[test]
    fn oops_after_the_result_is_a_late_failure_and_before_it_only_reported() {
        let oops = "[ 5.0] BUG: kernel NULL pointer dereference, address: 0000000000000008";
        let after = format!("{}\n{}{oops}\n", event(EVENT_HELLO, "x"), stream_text("{}"));
        let j = judged(&after, exited(0));
        assert_eq!(j.classification, Classification::Ok);
        assert!(j.late_failure.unwrap_or_default().contains(oops));
        let before = format!("{}\n{oops}\n{}", event(EVENT_HELLO, "x"), stream_text("{}"));
        assert_eq!(judged(&before, exited(0)), Judgement { classification: Classification::Ok, late_failure: None });
    }

    #[test]
    fn timeouts_after_a_complete_result_are_late_failures_not_hangs() {
        let hello = format!("{}\n", event(EVENT_HELLO, "x"));
        let done = format!("{hello}{}", stream_text("{\"status\":\"complete\"}"));
        for which in [HangKind::Silence, HangKind::Total, HangKind::Poweroff] {
            let j = judged(&done, RunEnd::TimedOut(which));
            assert_eq!(j.classification, Classification::Ok, "{which}");
            let late = j.late_failure.unwrap_or_default();
            assert!(late.contains(&format!("hang ({which})")) && late.contains("300s"), "{late}");
        }
        // A clean end has nothing late.
        assert_eq!(judged(&done, exited(0)).late_failure, None);
    }

    #[test]
    fn a_late_step_the_init_reports_is_a_late_failure_beside_an_ok() {
        let step = "step=storage status=timeout detail=storage did not finish within 60 s";
        let text = format!(
            "{}\n{}{}\n{}\n",
            event(EVENT_HELLO, "x"),
            stream_text("{}"),
            event(EVENT_LATE_STEP, step),
            event(EVENT_POWEROFF, "")
        );
        let j = judged(&text, exited(0));
        assert_eq!(j.classification, Classification::Ok);
        let late = j.late_failure.unwrap_or_default();
        assert!(late.contains(&format!("late step failed: {step}")), "{late}");
        // Then a stuck power-off: both, in order.
        let late = judged(&text, RunEnd::TimedOut(HangKind::Poweroff)).late_failure.unwrap_or_default();
        assert!(
            late.contains("storage")
                && late.ends_with(": no console output for 300s")
                && late.contains("; then hang (poweroff)"),
            "{late}"
        );
    }

    #[test]
    fn silence_before_the_result_completes_is_a_hang() {
        let lines = stream_lines(&"p".repeat(1500));
        let mut text = format!("{}\n", event(EVENT_HELLO, "x"));
        for l in &lines[..lines.len() - 2] {
            text.push_str(l);
            text.push('\n');
        }
        let j = judged(&text, RunEnd::TimedOut(HangKind::Silence));
        assert!(matches!(j.classification, Classification::Hang { which: HangKind::Silence, .. }), "{j:?}");
        assert_eq!(j.late_failure, None);
    }

    #[test]
    fn incomplete_names_the_missing_chunks() {
        let doc = "y".repeat(2000);
        let lines = encode(StreamKind::Result, "r", &doc);
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
