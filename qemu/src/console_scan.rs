//! Reading a guest console: the log kept verbatim, the bootbench protocol
//! lines fed to the [`Decoder`], and the kernel's own panic and oops
//! messages picked out. Owns no process and no clock; the runner feeds it
//! bytes and decides what they mean for timeouts.

use loads::console_protocol::{
    parse_line, Decoder, Line, StreamError, StreamKind, EVENT_ALIVE, EVENT_HELLO, EVENT_POWEROFF, MARKER,
};
use std::collections::BTreeSet;

/// Console bytes kept in the log; a guest that floods its console beyond
/// this is cut off in the log (the protocol decoder still sees every line).
pub const MAX_LOG_BYTES: usize = 64 << 20;

/// Bytes of one console line that are read; the rest of a longer line is
/// only in the log. Protocol lines are under 512 bytes and printk's under
/// 1 KiB: without this bound a guest printing without a newline would grow
/// the line buffer for as long as it runs (the log alone is bounded).
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// Kernel-error lines kept; later ones are counted but not stored.
pub const MAX_KERNEL_ERRORS: usize = 200;

/// What the kernel printed that matters for the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelMessage {
    /// `Kernel panic - not syncing: ...`.
    Panic,
    /// An oops, BUG or general protection fault.
    Oops,
}

/// Drops the printk decorations (`<3>`, `[    1.234567]`) from a line.
fn message_text(line: &str) -> &str {
    let mut s = line.trim_start();
    if let Some(rest) = s.strip_prefix('<') {
        if let Some((level, after)) = rest.split_once('>') {
            if !level.is_empty() && level.chars().all(|c| c.is_ascii_digit()) {
                s = after;
            }
        }
    }
    if let Some(rest) = s.strip_prefix('[') {
        if let Some((_, after)) = rest.split_once(']') {
            s = after;
        }
    }
    s.trim_start()
}

/// Recognises a kernel panic or oops line. Only text before a protocol
/// marker counts: a result payload may quote kernel messages.
///
/// ```
/// # use qemu::console_scan::{kernel_message, KernelMessage};
/// let l = "[    2.1] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100";
/// assert_eq!(kernel_message(l), Some(KernelMessage::Panic));
/// assert_eq!(kernel_message("[ 3.0] BUG: kernel NULL pointer dereference, address: 0"), Some(KernelMessage::Oops));
/// assert_eq!(kernel_message("bootbench: no BUG: here"), None);
/// ```
pub fn kernel_message(line: &str) -> Option<KernelMessage> {
    let kernel_part = match line.find(MARKER) {
        Some(at) => &line[..at],
        None => line,
    };
    if kernel_part.contains("Kernel panic - not syncing") {
        return Some(KernelMessage::Panic);
    }
    let text = message_text(kernel_part);
    const OOPS_PREFIXES: [&str; 6] =
        ["BUG:", "Oops:", "Oops ", "general protection fault", "kernel BUG at", "Unable to handle kernel"];
    OOPS_PREFIXES.iter().any(|p| text.starts_with(p)).then_some(KernelMessage::Oops)
}

/// What the guest is doing, as far as the console has shown it so far:
/// for a progress display, never for a verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestProgress {
    /// The init said hello.
    pub hello: bool,
    /// Workload streams whose last chunk arrived intact: the workloads
    /// finished, in the suite's order.
    pub workloads_done: usize,
    /// The workload the last `alive` event named.
    pub alive_workload: Option<String>,
}

/// The state of one console read so far.
#[derive(Debug, Default)]
pub struct ConsoleScan {
    progress: GuestProgress,
    ended_streams: BTreeSet<String>,
    log: Vec<u8>,
    log_dropped: usize,
    partial: Vec<u8>,
    decoder: Decoder,
    events: Vec<(String, String)>,
    hello: bool,
    poweroff: bool,
    panic_line: Option<String>,
    kernel_errors: Vec<String>,
    kernel_errors_dropped: usize,
}

impl ConsoleScan {
    /// A scan with nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds console bytes as they arrive; complete lines are processed at
    /// once, a trailing partial line when more bytes (or [`Self::finish`])
    /// come.
    pub fn feed_bytes(&mut self, bytes: &[u8]) {
        let room = MAX_LOG_BYTES.saturating_sub(self.log.len());
        self.log.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.log_dropped += bytes.len().saturating_sub(room);
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            self.extend_line(&rest[..nl]);
            let line = std::mem::take(&mut self.partial);
            self.line(&line);
            rest = &rest[nl + 1..];
        }
        self.extend_line(rest);
    }

    /// Adds `piece` to the line being read, up to [`MAX_LINE_BYTES`].
    fn extend_line(&mut self, piece: &[u8]) {
        let room = MAX_LINE_BYTES.saturating_sub(self.partial.len());
        self.partial.extend_from_slice(&piece[..piece.len().min(room)]);
    }

    /// Processes a final line that has no newline.
    pub fn finish(&mut self) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line);
        }
    }

    fn line(&mut self, raw: &[u8]) {
        let text = String::from_utf8_lossy(raw);
        let line = text.trim_end_matches('\r');
        match parse_line(line) {
            Some(Line::Event { name, text }) => {
                self.hello |= name == EVENT_HELLO;
                self.progress.hello = self.hello;
                self.poweroff |= name == EVENT_POWEROFF;
                if name == EVENT_ALIVE {
                    let named = text.split(' ').find_map(|w| w.strip_prefix("workload="));
                    self.progress.alive_workload = named.map(str::to_string);
                }
                self.events.push((name.to_string(), text.to_string()));
            }
            Some(Line::Data { kind: StreamKind::Workload, tag, seq, total, intact: true, .. }) if seq == total => {
                self.ended_streams.insert(tag.to_string());
                self.progress.workloads_done = self.ended_streams.len();
            }
            _ => {}
        }
        self.decoder.feed_line(line);
        match kernel_message(line) {
            Some(KernelMessage::Panic) if self.panic_line.is_none() => {
                self.panic_line = Some(line.trim().to_string());
            }
            Some(KernelMessage::Panic) => {}
            Some(KernelMessage::Oops) if self.kernel_errors.len() < MAX_KERNEL_ERRORS => {
                self.kernel_errors.push(line.trim().to_string());
            }
            Some(KernelMessage::Oops) => self.kernel_errors_dropped += 1,
            None => {}
        }
    }

    /// Feeds the text a second channel (the virtio results port) carried.
    /// Its stream chunks merge with the console's; its events are added only
    /// if the console did not already show them; it is not kernel output.
    pub fn feed_port_text(&mut self, text: &str) {
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            if let Some(Line::Event { name, text }) = parse_line(line) {
                let ev = (name.to_string(), text.to_string());
                if !self.events.contains(&ev) {
                    self.events.push(ev);
                }
            }
            self.decoder.feed_line(line);
        }
    }

    /// What the guest is doing, as far as the console has shown it.
    pub fn progress(&self) -> &GuestProgress {
        &self.progress
    }

    /// Whether the init's `hello` event has been seen.
    pub fn hello_seen(&self) -> bool {
        self.hello
    }

    /// Whether the init's `poweroff` event has been seen.
    pub fn poweroff_seen(&self) -> bool {
        self.poweroff
    }

    /// The first `Kernel panic - not syncing` line.
    pub fn panic_line(&self) -> Option<&str> {
        self.panic_line.as_deref()
    }

    /// Oops, BUG and general-protection-fault lines, in order.
    pub fn kernel_errors(&self) -> &[String] {
        &self.kernel_errors
    }

    /// Kernel-error lines beyond [`MAX_KERNEL_ERRORS`], not stored.
    pub fn kernel_errors_dropped(&self) -> usize {
        self.kernel_errors_dropped
    }

    /// Events seen, console first.
    pub fn events(&self) -> &[(String, String)] {
        &self.events
    }

    /// The protocol decoder holding every stream chunk seen.
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The JSON text of each intact per-workload stream, in the order first
    /// seen on either channel, each once.
    pub fn workload_documents(&self) -> Vec<String> {
        self.decoder.workload_documents()
    }

    /// What is wrong with each workload stream that did not arrive intact.
    pub fn workload_stream_errors(&self) -> Vec<StreamError> {
        self.decoder.workload_stream_errors()
    }

    /// Console bytes beyond [`MAX_LOG_BYTES`] left out of the log.
    pub fn log_dropped(&self) -> usize {
        self.log_dropped
    }

    /// The console log as text (invalid UTF-8 replaced).
    pub fn log_text(&self) -> String {
        String::from_utf8_lossy(&self.log).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loads::console_protocol::{encode, event, StreamKind};
    use loads::schema::{RunDocument, WorkloadResult};

    /// A boot of two workloads as the serial console carries it (CR LF),
    /// framed by an encoder independent of ours (`fixtures/frame_v2.py`):
    /// each workload's stream when it finished, then the 13-chunk result
    /// stream, with printk lines between our lines.
    const STREAMS: &str = include_str!("fixtures/streams.txt");
    const BOOT_ID: &str = "6f1c2a7e-3b9d-4e0f-a5c8-2d71b04e9f36";

    #[test]
    fn progress_follows_hello_alive_events_and_each_workload_stream_that_ends_intact() {
        let mut s = ConsoleScan::new();
        assert_eq!(*s.progress(), GuestProgress::default());
        s.feed_bytes(format!("{}\r\n", event(EVENT_HELLO, "version=1")).as_bytes());
        s.feed_bytes(format!("{}\r\n", event(EVENT_ALIVE, "workload=dbench elapsed_s=60")).as_bytes());
        assert_eq!(
            *s.progress(),
            GuestProgress { hello: true, workloads_done: 0, alive_workload: Some("dbench".into()) }
        );
        // Two workload streams end in the fixture (the result stream is
        // not a workload's).
        s.feed_bytes(STREAMS.as_bytes());
        assert_eq!(s.progress().workloads_done, 2, "{:?}", s.progress());
        // A last chunk that fails its CRC ends nothing.
        let mut damaged = ConsoleScan::new();
        let doc = r#"{"name":"fork"}"#;
        let mut lines = encode(StreamKind::Workload, "w9", doc);
        let last = lines.last_mut().unwrap();
        last.push('X');
        damaged.feed_bytes(lines.join("\n").as_bytes());
        damaged.finish();
        assert_eq!(damaged.progress().workloads_done, 0);
    }

    fn scan(text: &str) -> ConsoleScan {
        let mut s = ConsoleScan::new();
        s.feed_bytes(text.as_bytes());
        s.finish();
        s
    }

    /// The fixture's result document and workload documents, decoded from
    /// the intact recording.
    fn intact() -> (String, Vec<String>) {
        let s = scan(STREAMS);
        (s.decoder().last_document().unwrap(), s.workload_documents())
    }

    /// The tag of the fixture's stream of `kind` whose header names `total`
    /// chunks, e.g. `("R", 13)`.
    fn tag(kind: &str, total: u32) -> String {
        let head = format!("{MARKER} HEAD {kind} {total} ");
        let line = STREAMS.lines().find(|l| l.starts_with(&head)).unwrap();
        line.split(' ').nth(5).unwrap()[..8].to_string()
    }

    /// The fixture with `edit` applied to the line that starts with `prefix`.
    fn edited(text: &str, prefix: &str, edit: impl Fn(&str) -> String) -> String {
        let mut hits = 0;
        let out = text
            .split_inclusive('\n')
            .map(|l| {
                if l.starts_with(prefix) {
                    hits += 1;
                    edit(l)
                } else {
                    l.to_string()
                }
            })
            .collect();
        assert_eq!(hits, 1, "{prefix}");
        out
    }

    /// Only the protocol lines of `text`, as the results port carries them.
    fn port_copy(text: &str) -> String {
        text.split_inclusive('\n').filter(|l| l.starts_with(MARKER) && !l.contains(" EVENT ")).collect()
    }

    fn incomplete(err: StreamError) -> (Option<String>, u32, Vec<u32>, Vec<u32>) {
        match err {
            StreamError::Incomplete { id, total, missing, corrupt, .. } => (id, total, missing, corrupt),
            other => panic!("expected incomplete, got {other:?}"),
        }
    }

    #[test]
    fn recorded_boot_gives_the_result_and_each_workload_once() {
        let s = scan(STREAMS);
        assert!(s.hello_seen() && s.poweroff_seen());
        assert_eq!(s.events().len(), 3, "{:?}", s.events());
        assert!(s.decoder().damaged_events().is_empty());
        let doc: RunDocument = serde_json::from_str(&s.decoder().last_document().unwrap()).unwrap();
        assert_eq!(doc.run_id, BOOT_ID);
        let workloads: Vec<WorkloadResult> =
            s.workload_documents().iter().map(|w| serde_json::from_str(w).unwrap()).collect();
        assert_eq!(workloads, doc.workloads, "each workload's own stream holds what the result holds");
        assert_eq!(s.workload_stream_errors(), vec![]);
        // The same streams on the results port too: still each once.
        let mut both = scan(STREAMS);
        both.feed_port_text(&port_copy(STREAMS));
        assert_eq!(both.workload_documents(), s.workload_documents());
        assert_eq!(both.events().len(), 3);
    }

    #[test]
    fn truncated_console_names_the_missing_chunks() {
        // The console stops half way through the result's chunk 8.
        let r = tag("R", 13);
        let at = STREAMS.find(&format!("{MARKER} R {r} 8/13 ")).unwrap() + 200;
        let s = scan(&STREAMS[..at]);
        let err = s.decoder().last_document().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("result stream {r} of boot {BOOT_ID} is incomplete: 5 of 13 chunks missing [9-13], 1 damaged [8]")
        );
        // The workloads that finished before are kept.
        assert_eq!(s.workload_documents(), intact().1);
    }

    #[test]
    fn a_corrupted_data_line_is_listed_as_damaged() {
        let r = tag("R", 13);
        let text = edited(STREAMS, &format!("{MARKER} R {r} 4/13 "), |l| l.replacen("\"cpu\":0", "\"cpu\":1", 1));
        assert_eq!(
            incomplete(scan(&text).decoder().last_document().unwrap_err()),
            (Some(BOOT_ID.into()), 13, vec![], vec![4])
        );
    }

    #[test]
    fn a_header_destroyed_by_a_printk_does_not_lose_the_result() {
        // A printk lands in the header line: the console shows our line's
        // start, the printk, and our line's rest on a line of its own.
        let text = edited(STREAMS, &format!("{MARKER} HEAD R 13 "), |l| {
            let (a, b) = l.split_at(50);
            format!("{a}[   71.9] ata1.00: configured for UDMA/100\r\n{b}")
        });
        let s = scan(&text);
        assert_eq!(s.decoder().last_document().unwrap(), intact().0);
        // Without the header the error names the stream by its tag.
        let r = tag("R", 13);
        let text = edited(&text, &format!("{MARKER} R {r} 13/13 "), |_| String::new());
        let err = scan(&text).decoder().last_document().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("result stream {r} (no intact header) is incomplete: 1 of 13 chunks missing [13], 0 damaged []")
        );
    }

    #[test]
    fn a_data_line_with_an_altered_seq_or_total_is_rejected_by_its_crc() {
        let r = tag("R", 13);
        let prefix = format!("{MARKER} R {r} 3/13 ");
        // Chunk 3's payload is never used. With its seq changed to 4, the
        // line claims a chunk that arrived intact, so 3 is missing; with its
        // total changed, it still claims 3, which is listed as damaged.
        for (to, missing, corrupt) in [("4/13", vec![3], vec![]), ("3/14", vec![], vec![3]), ("3/12", vec![], vec![3])]
        {
            let text = edited(STREAMS, &prefix, |l| l.replacen("3/13", to, 1));
            let s = scan(&text);
            let (_, total, got_missing, got_corrupt) = incomplete(s.decoder().last_document().unwrap_err());
            assert_eq!(total, 13);
            assert_eq!((got_missing, got_corrupt), (missing, corrupt), "{to}");
            assert_eq!(s.workload_documents(), intact().1);
            // The port's intact chunk 3 completes the stream: nothing of the
            // altered line was filed under the seq or total it claimed.
            let mut s = s;
            s.feed_port_text(STREAMS.lines().find(|l| l.starts_with(&prefix)).unwrap());
            assert_eq!(s.decoder().last_document().unwrap(), intact().0, "{to}");
        }
    }

    #[test]
    fn console_and_port_repair_each_other() {
        let (result, workloads) = intact();
        let r = tag("R", 13);
        let w = tag("W", 5);
        // The console lost the result's chunk 2 to a printk and hackbench's
        // chunk 1 entirely.
        let console = edited(STREAMS, &format!("{MARKER} R {r} 2/13 "), |l| format!("{}[ 9.9] x\r\n", &l[..90]));
        let console = edited(&console, &format!("{MARKER} W {w} 1/5 "), |_| String::new());
        // The port lost the result's header and its chunk 5.
        let port = edited(&port_copy(STREAMS), &format!("{MARKER} HEAD R "), |_| String::new());
        let port = edited(&port, &format!("{MARKER} R {r} 5/13 "), |_| String::new());

        let alone = scan(&console);
        assert_eq!(incomplete(alone.decoder().last_document().unwrap_err()).3, vec![2]);
        assert_eq!(alone.workload_documents().len(), 1);
        assert!(
            matches!(&alone.workload_stream_errors()[..], [StreamError::Incomplete { missing, .. }] if *missing == [1])
        );
        let mut port_alone = ConsoleScan::new();
        port_alone.feed_port_text(&port);
        assert_eq!(incomplete(port_alone.decoder().last_document().unwrap_err()), (None, 13, vec![5], vec![]));

        let mut both = scan(&console);
        both.feed_port_text(&port);
        assert_eq!(both.decoder().last_document().unwrap(), result);
        assert_eq!(both.workload_documents(), workloads);
        assert_eq!(both.workload_stream_errors(), vec![]);
    }

    #[test]
    fn a_damaged_workload_stream_is_reported_and_the_rest_kept() {
        let w = tag("W", 5);
        let text = edited(STREAMS, &format!("{MARKER} W {w} 3/5 "), |l| l.replacen('{', "[", 1));
        let s = scan(&text);
        assert_eq!(s.decoder().last_document().unwrap(), intact().0);
        assert_eq!(s.workload_documents(), intact().1[..1]);
        let errors: Vec<String> = s.workload_stream_errors().iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [format!("workload stream {w} of boot {BOOT_ID} is incomplete: 0 of 5 chunks missing [], 1 damaged [3]")]
        );
    }

    #[test]
    fn a_damaged_event_is_ignored_not_misread() {
        // A printk cuts the poweroff event before its CRC.
        let text = edited(STREAMS, &format!("{MARKER} EVENT poweroff "), |l| {
            format!("{}[   72.0] e1000: link up\r\n{}", &l[..34], &l[34..])
        });
        let s = scan(&text);
        assert!(!s.poweroff_seen());
        assert_eq!(s.events().len(), 2);
        assert_eq!(s.decoder().damaged_events(), ["@@BOOTBENCH EVENT poweroff status=[   72.0] e1000: link up"]);
    }

    #[test]
    fn decorations_are_stripped_before_matching() {
        assert_eq!(kernel_message("<1>[   12.5] Oops: 0000 [#1] PREEMPT SMP NOPTI"), Some(KernelMessage::Oops));
        assert_eq!(
            kernel_message("general protection fault, probably for non-canonical address"),
            Some(KernelMessage::Oops)
        );
        assert_eq!(kernel_message("[ 1.0] kernel BUG at mm/slub.c:435!"), Some(KernelMessage::Oops));
        assert_eq!(kernel_message("[ 1.0] WARNING: CPU: 0 PID: 1 at kernel/fork.c:1"), None);
        // A payload quoting a kernel message is not one.
        let quoted = format!("{MARKER} R 0123abcd 1/1 00000000 Kernel panic - not syncing BUG: x");
        assert_eq!(kernel_message(&quoted), None);
        // A printk fragment in front of a marker is kernel text.
        let frag = format!("[ 9.9] Kernel panic - not syncing: Fatal exception{MARKER} R 0123abcd 2/2 0 x");
        assert_eq!(kernel_message(&frag), Some(KernelMessage::Panic));
    }

    #[test]
    fn lines_split_across_reads_and_crlf() {
        let mut s = ConsoleScan::new();
        let hello = format!("{}\r\n", event(EVENT_HELLO, "v=1"));
        let (a, b) = hello.as_bytes().split_at(7);
        s.feed_bytes(a);
        assert!(!s.hello_seen());
        s.feed_bytes(b);
        assert!(s.hello_seen());
        assert_eq!(s.events(), &[("hello".to_string(), "v=1".to_string())]);
        s.feed_bytes(b"[ 1.0] Kernel panic - not syncing: Attempted to kill init!");
        assert_eq!(s.panic_line(), None);
        s.finish();
        assert_eq!(s.panic_line(), Some("[ 1.0] Kernel panic - not syncing: Attempted to kill init!"));
        assert_eq!(s.log_text().len(), hello.len() + 58);
    }

    #[test]
    fn port_text_merges_and_does_not_repeat_events() {
        let doc = "x".repeat(1000);
        let lines = encode(StreamKind::Result, "r", &doc);
        let mut s = ConsoleScan::new();
        s.feed_bytes(format!("{}\n", event(EVENT_HELLO, "a")).as_bytes());
        for (i, l) in lines.iter().enumerate() {
            if i != 2 {
                s.feed_bytes(format!("{l}\n").as_bytes());
            }
        }
        assert!(s.decoder().last_document().is_err());
        let mut port = format!("{}\n", event(EVENT_HELLO, "a"));
        for l in &lines {
            port.push_str(l);
            port.push('\n');
        }
        s.feed_port_text(&port);
        assert_eq!(s.decoder().last_document().unwrap(), doc);
        assert_eq!(s.events().len(), 1);
    }

    /// A guest printing without a newline (a wedged console, binary
    /// garbage) must not grow the line buffer without bound: the line is
    /// cut at MAX_LINE_BYTES, the log keeps what it can, and the next line
    /// reads normally.
    #[test]
    fn a_line_without_end_is_bounded_and_the_next_line_still_reads() {
        let mut s = ConsoleScan::new();
        let garbage = vec![b'x'; 64 << 10];
        for _ in 0..128 {
            s.feed_bytes(&garbage);
        }
        assert!(s.partial.len() <= MAX_LINE_BYTES, "the line buffer holds {} bytes", s.partial.len());
        assert_eq!((s.log.len(), s.log_dropped), (8 << 20, 0));
        s.feed_bytes(format!("\n{}\n", event(EVENT_HELLO, "version=1")).as_bytes());
        assert!(s.hello_seen());
    }
}
