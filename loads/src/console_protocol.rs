//! The framing that carries a result document over a console or a serial
//! port, where kernel printk lines may be interleaved with ours.
//!
//! A stream is:
//! ```text
//! @@BOOTBENCH BEGIN <id> chunks=<n> bytes=<len> sha256=<hex>
//! @@BOOTBENCH DATA <id> <seq>/<n> <crc32-hex> <payload>
//! @@BOOTBENCH END <id>
//! ```
//! The marker may appear anywhere in a line (a printk fragment may precede
//! it). Each DATA line carries its own CRC32 and the whole document its
//! sha256, so a line damaged by interleaving is detected and the decoder says
//! exactly which chunks are missing or corrupt. Chunks may be merged from
//! several channels (console and virtio port) carrying the same stream.
//!
//! Besides streams, the guest prints single-line events
//! (`@@BOOTBENCH EVENT <name> <text>`) that the host uses for timeouts, e.g.
//! `hello` when the init starts.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The marker every protocol line carries.
pub const MARKER: &str = "@@BOOTBENCH";
/// Payload bytes per DATA line. Small enough that one line is written to the
/// console in one go.
pub const CHUNK_BYTES: usize = 192;
/// Event name the init prints as soon as it starts.
pub const EVENT_HELLO: &str = "hello";
/// Event name the init prints while a workload runs, at most
/// [`ALIVE_INTERVAL_S`] apart, so a long workload is not taken for a
/// silent hang. One short line a minute is all the console sees.
pub const EVENT_ALIVE: &str = "alive";
/// Seconds between `alive` events: well inside the host's default
/// 300 s silence timeout.
pub const ALIVE_INTERVAL_S: u64 = 60;
/// Seconds between `alive` events in icount boots, which the host asks for
/// with [`ALIVE_CMDLINE_KEY`]. There a guest second is 10^9 instructions
/// (shift 0), which TCG took 14 host seconds to run for hackbench on the
/// Debian amd64 kernel, so 60 guest seconds outlast the host's 300 s
/// silence timeout; 2 guest seconds leave room for a host 10 times slower.
pub const ICOUNT_ALIVE_INTERVAL_S: u64 = 2;
/// The shortest `alive` interval the init accepts: the icount one. Shorter
/// would mostly fill the console.
pub const MIN_ALIVE_INTERVAL_S: u64 = ICOUNT_ALIVE_INTERVAL_S;
/// Kernel cmdline key that sets the seconds between `alive` events.
pub const ALIVE_CMDLINE_KEY: &str = "bootbench.alive";
/// Event name the init prints just before powering off.
pub const EVENT_POWEROFF: &str = "poweroff";

/// Errors a stream can have, naming exactly what was lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// No BEGIN line was seen for any stream.
    #[error("no result stream found (no '{MARKER} BEGIN' line)")]
    NoStream,
    /// Chunks are missing or damaged.
    #[error("result stream {id} is incomplete: {} of {total} chunks missing {missing:?}, {} damaged {corrupt:?}{}",
        missing.len(), corrupt.len(), if *ended { "" } else { ", and no END line" })]
    Incomplete {
        /// Stream id.
        id: String,
        /// Chunks announced.
        total: u32,
        /// Sequence numbers never seen intact nor damaged.
        missing: Vec<u32>,
        /// Sequence numbers seen only with a bad checksum.
        corrupt: Vec<u32>,
        /// Whether the END line arrived.
        ended: bool,
    },
    /// All chunks arrived, but the whole does not match the announced hash.
    #[error(
        "result stream {id}: reassembled {got_bytes} bytes do not match the announced sha256 ({want_bytes} bytes)"
    )]
    HashMismatch {
        /// Stream id.
        id: String,
        /// Bytes announced.
        want_bytes: usize,
        /// Bytes reassembled.
        got_bytes: usize,
    },
}

/// Frames `document` as protocol lines (without newlines).
pub fn encode(id: &str, document: &str) -> Vec<String> {
    let chunks = split_chunks(document, CHUNK_BYTES);
    let n = chunks.len();
    let mut lines = Vec::with_capacity(n + 2);
    lines.push(format!(
        "{MARKER} BEGIN {id} chunks={n} bytes={} sha256={}",
        document.len(),
        hex::encode(Sha256::digest(document.as_bytes()))
    ));
    for (i, chunk) in chunks.iter().enumerate() {
        lines.push(format!("{MARKER} DATA {id} {}/{n} {:08x} {chunk}", i + 1, crc32fast::hash(chunk.as_bytes())));
    }
    lines.push(format!("{MARKER} END {id}"));
    lines
}

/// A one-line event.
pub fn event(name: &str, text: &str) -> String {
    format!("{MARKER} EVENT {name} {text}")
}

/// Splits at char boundaries into pieces of at most `max` bytes; an empty
/// document is one empty chunk.
fn split_chunks(s: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (a, b) = rest.split_at(cut);
        out.push(a);
        rest = b;
    }
    out.push(rest);
    out
}

/// A parsed protocol line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line<'a> {
    /// Stream start.
    Begin {
        /// Stream id.
        id: &'a str,
        /// Chunk count.
        chunks: u32,
        /// Document length.
        bytes: usize,
        /// Document sha256.
        sha256: &'a str,
    },
    /// A chunk, checksum not yet verified.
    Data {
        /// Stream id.
        id: &'a str,
        /// 1-based sequence number.
        seq: u32,
        /// Whether the CRC matched the payload.
        intact: bool,
        /// Payload.
        payload: &'a str,
    },
    /// Stream end.
    End {
        /// Stream id.
        id: &'a str,
    },
    /// A single-line event.
    Event {
        /// Event name.
        name: &'a str,
        /// Free text.
        text: &'a str,
    },
}

/// Parses one line of console text. Lines without the marker, and marker
/// lines too damaged to parse, give `None`.
pub fn parse_line(line: &str) -> Option<Line<'_>> {
    let at = line.find(MARKER)?;
    let rest = line[at + MARKER.len()..].trim_end_matches(['\r', '\n']);
    let rest = rest.strip_prefix(' ')?;
    let (kind, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    match kind {
        "BEGIN" => {
            let mut it = rest.split(' ');
            let id = it.next()?;
            let chunks = it.next()?.strip_prefix("chunks=")?.parse().ok()?;
            let bytes = it.next()?.strip_prefix("bytes=")?.parse().ok()?;
            let sha256 = it.next()?.strip_prefix("sha256=")?;
            Some(Line::Begin { id, chunks, bytes, sha256 })
        }
        "DATA" => {
            let mut it = rest.splitn(4, ' ');
            let id = it.next()?;
            let (seq, _) = it.next()?.split_once('/')?;
            let seq = seq.parse().ok()?;
            let crc = u32::from_str_radix(it.next()?, 16).ok()?;
            let payload = it.next().unwrap_or("");
            let intact = crc32fast::hash(payload.as_bytes()) == crc;
            Some(Line::Data { id, seq, intact, payload })
        }
        "END" => Some(Line::End { id: rest.split(' ').next()? }),
        "EVENT" => {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            Some(Line::Event { name, text })
        }
        _ => None,
    }
}

#[derive(Debug, Default)]
struct StreamState {
    chunks: u32,
    bytes: usize,
    sha256: String,
    intact: BTreeMap<u32, String>,
    damaged: Vec<u32>,
    ended: bool,
}

/// Collects streams from any number of lines and channels.
#[derive(Debug, Default)]
pub struct Decoder {
    streams: BTreeMap<String, StreamState>,
    order: Vec<String>,
    events: Vec<(String, String)>,
}

impl Decoder {
    /// A decoder with nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds every line of `text`.
    pub fn feed_text(&mut self, text: &str) {
        for line in text.lines() {
            self.feed_line(line);
        }
    }

    /// Feeds one line.
    pub fn feed_line(&mut self, line: &str) {
        let Some(parsed) = parse_line(line) else { return };
        match parsed {
            Line::Begin { id, chunks, bytes, sha256 } => {
                if !self.streams.contains_key(id) {
                    self.order.push(id.to_string());
                }
                let st = self.streams.entry(id.to_string()).or_default();
                st.chunks = chunks;
                st.bytes = bytes;
                st.sha256 = sha256.to_string();
            }
            Line::Data { id, seq, intact, payload } => {
                if !self.streams.contains_key(id) {
                    self.order.push(id.to_string());
                }
                let st = self.streams.entry(id.to_string()).or_default();
                if intact {
                    st.intact.insert(seq, payload.to_string());
                } else {
                    st.damaged.push(seq);
                }
            }
            Line::End { id } => {
                if let Some(st) = self.streams.get_mut(id) {
                    st.ended = true;
                }
            }
            Line::Event { name, text } => self.events.push((name.to_string(), text.to_string())),
        }
    }

    /// Events seen, in order.
    pub fn events(&self) -> &[(String, String)] {
        &self.events
    }

    /// Ids of the streams seen, in order of first appearance.
    pub fn stream_ids(&self) -> Vec<String> {
        self.order.clone()
    }

    /// The last stream's document, or exactly what is wrong with it.
    pub fn last_document(&self) -> Result<String, StreamError> {
        let id = self.order.last().ok_or(StreamError::NoStream)?;
        self.document(id)
    }

    /// Reassembles stream `id`, verifying every chunk and the whole.
    pub fn document(&self, id: &str) -> Result<String, StreamError> {
        let st = self.streams.get(id).ok_or(StreamError::NoStream)?;
        if st.sha256.is_empty() {
            return Err(StreamError::NoStream);
        }
        let missing: Vec<u32> =
            (1..=st.chunks).filter(|s| !st.intact.contains_key(s) && !st.damaged.contains(s)).collect();
        let mut corrupt: Vec<u32> = st.damaged.iter().copied().filter(|s| !st.intact.contains_key(s)).collect();
        corrupt.sort_unstable();
        corrupt.dedup();
        if !missing.is_empty() || !corrupt.is_empty() || !st.ended {
            return Err(StreamError::Incomplete {
                id: id.to_string(),
                total: st.chunks,
                missing,
                corrupt,
                ended: st.ended,
            });
        }
        let doc: String = (1..=st.chunks).filter_map(|s| st.intact.get(&s).map(String::as_str)).collect();
        if hex::encode(Sha256::digest(doc.as_bytes())) != st.sha256 {
            return Err(StreamError::HashMismatch { id: id.to_string(), want_bytes: st.bytes, got_bytes: doc.len() });
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> String {
        let mut s = String::from("{\"k\":\"");
        for i in 0..700 {
            s.push(char::from(b'a' + (i % 26) as u8));
            if i % 97 == 0 {
                s.push('é');
            }
        }
        s.push_str("\"}");
        s
    }

    #[test]
    fn round_trip_with_printk_noise() {
        let doc = sample();
        let lines = encode("run1", &doc);
        assert!(lines.len() > 4);
        let mut text = String::from("[    0.1] booting\n");
        for (i, l) in lines.iter().enumerate() {
            if i == 2 {
                text.push_str("[    1.2] random: crng init done\n");
                text.push_str("[    1.3] virtio: ");
            }
            text.push_str(l);
            text.push('\n');
        }
        let mut d = Decoder::new();
        d.feed_text(&text);
        assert_eq!(d.last_document().unwrap(), doc);
    }

    #[test]
    fn reports_exactly_what_is_missing_and_damaged() {
        let doc = sample();
        let lines = encode("r", &doc);
        let mut d = Decoder::new();
        for (i, l) in lines.iter().enumerate() {
            match i {
                2 => continue,                                     // chunk 2 lost
                3 => d.feed_line(&format!("{l}[    9.9] printk")), // chunk 3 damaged
                _ => d.feed_line(l),
            }
        }
        match d.last_document() {
            Err(StreamError::Incomplete { missing, corrupt, ended, .. }) => {
                assert_eq!(missing, vec![2]);
                assert_eq!(corrupt, vec![3]);
                assert!(ended);
            }
            other => panic!("expected incomplete, got {other:?}"),
        }
        // A second channel with the same stream repairs it.
        let mut second = String::new();
        for l in &lines {
            second.push_str(l);
            second.push('\n');
        }
        d.feed_text(&second);
        assert_eq!(d.last_document().unwrap(), doc);
    }

    #[test]
    fn truncated_stream_says_no_end() {
        let lines = encode("t", &sample());
        let mut d = Decoder::new();
        for l in &lines[..lines.len() - 2] {
            d.feed_line(l);
        }
        let err = d.last_document().unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("no END line"), "{msg}");
        assert!(matches!(err, StreamError::Incomplete { ref missing, .. } if missing.len() == 1));
    }

    #[test]
    fn no_stream_and_events() {
        let mut d = Decoder::new();
        d.feed_line(&event(EVENT_HELLO, "version=1"));
        assert_eq!(d.events(), &[("hello".to_string(), "version=1".to_string())]);
        assert_eq!(d.last_document(), Err(StreamError::NoStream));
    }

    #[test]
    fn empty_document_round_trips() {
        let mut d = Decoder::new();
        for l in encode("e", "") {
            d.feed_line(&l);
        }
        assert_eq!(d.last_document().unwrap(), "");
    }
}
