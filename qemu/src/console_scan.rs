//! Reading a guest console: the log kept verbatim, the bootbench protocol
//! lines fed to the [`Decoder`], and the kernel's own panic and oops
//! messages picked out. Owns no process and no clock; the runner feeds it
//! bytes and decides what they mean for timeouts.

use loads::console_protocol::{parse_line, Decoder, Line, EVENT_HELLO, EVENT_POWEROFF, MARKER};

/// Console bytes kept in the log; a guest that floods its console beyond
/// this is cut off in the log (the protocol decoder still sees every line).
pub const MAX_LOG_BYTES: usize = 64 << 20;

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

/// The state of one console read so far.
#[derive(Debug, Default)]
pub struct ConsoleScan {
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
            self.partial.extend_from_slice(&rest[..nl]);
            let line = std::mem::take(&mut self.partial);
            self.line(&line);
            rest = &rest[nl + 1..];
        }
        self.partial.extend_from_slice(rest);
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
        if let Some(Line::Event { name, text }) = parse_line(line) {
            self.hello |= name == EVENT_HELLO;
            self.poweroff |= name == EVENT_POWEROFF;
            self.events.push((name.to_string(), text.to_string()));
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
    use loads::console_protocol::{encode, event};

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
        let quoted = format!("{MARKER} DATA r 1/1 00000000 Kernel panic - not syncing BUG: x");
        assert_eq!(kernel_message(&quoted), None);
        // A printk fragment in front of a marker is kernel text.
        let frag = format!("[ 9.9] Kernel panic - not syncing: Fatal exception{MARKER} END r");
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
        let lines = encode("r", &doc);
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
}
