//! The framing that carries result documents over a console or a serial
//! port, where kernel printk lines may be interleaved with ours (protocol
//! v2). Owns the line format, its encoder (run by PID 1, so it never panics)
//! and the host's decoder; knows nothing of what a document contains.
//!
//! A stream is one header line and one line per chunk of the document:
//! ```text
//! @@BOOTBENCH HEAD <kind> <total> <bytes> <sha256> <crc32> <id>
//! @@BOOTBENCH <kind> <tag> <seq>/<total> <crc32> <payload>
//! ```
//! - `<kind>` is `R` for the run's whole result document and `W` for one
//!   workload's result ([`StreamKind`]); the guest prints each workload's
//!   stream when that workload finishes, and the result stream at the end.
//! - `<tag>` is the first 8 hex digits of the document's sha256. It is the
//!   stream's key (a stream is known by kind and tag, so its chunks group
//!   without the boot id, and a stream printed twice counts once), and what
//!   a document rebuilt without its header is checked against. Two streams
//!   with the same document are one: the init makes workload documents
//!   distinct by putting the workload's position in them
//!   (`schema::WorkloadStreamDocument`).
//! - `<total>` is at most [`MAX_CHUNKS`]; a line announcing more is damaged.
//! - `<seq>/<total>` numbers the chunks from 1; every chunk carries the
//!   total, so the header is not the only copy of it.
//! - Each line's CRC32 (lowercase hex) covers every other field of the
//!   line, joined by single spaces, from the keyword on: `HEAD <kind>
//!   <total> <bytes> <sha256> <id>` for a header, `<kind> <tag>
//!   <seq>/<total> <payload>` for a chunk. A damaged kind, tag, sequence
//!   number or total is therefore detected, not misfiled.
//! - `<id>` (the boot id) is only in the header, and runs to the end of the
//!   line; `<payload>` runs to the end of its line. A document must not
//!   contain a newline (compact JSON never does).
//!
//! Decoding: the marker may appear anywhere in a line (a printk fragment may
//! precede it). Chunks are kept only when their CRC matches, and may be
//! merged from several channels (console and virtio port) carrying the same
//! stream. When the header arrived intact, the reassembly must match its
//! sha256 and length; when it was lost or damaged, the document is still
//! rebuilt from the data lines alone and must match the tag. Otherwise the
//! decoder names exactly which chunk numbers are missing and which arrived
//! only damaged ([`StreamError`]).
//!
//! Besides streams, the guest prints single-line events
//! (`@@BOOTBENCH EVENT <name> <text> crc=<crc32>`, the CRC over `EVENT
//! <name> <text>`) that the host uses for timeouts and reports, e.g.
//! `hello` when the init starts. An event whose CRC does not match is
//! ignored (and kept as damaged). An event without a CRC is the older
//! format, still printed by `trivial-init`: it is accepted, except for the
//! names this crate's init always checksums ([`CHECKSUMMED_EVENTS`]),
//! because for those a missing CRC means the line was cut, typically by a
//! printk landing in it.
//!
//! Protocol v1 (`BEGIN`/`DATA`/`END` lines, the boot id on every line) is
//! not decoded any more; its lines are ignored.

// PID 1 runs this module (the encoder): no panics (see ARCHITECTURE.md,
// "PID 1"). The host's decoder keeps to the same rule.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;

/// The marker every protocol line carries.
pub const MARKER: &str = "@@BOOTBENCH";
/// Payload bytes per chunk line (at most; chunks end at char boundaries).
///
/// Why 448: a chunk line is then at most 490 bytes for documents up to
/// 4.4 MB (9 999 chunks) and 492 up to 44 MB, 494 with the serial
/// console's CR LF: under 512 bytes, well inside what line-oriented relays
/// of a console keep whole (syslog allows 1024 bytes a message, RFC 3164).
/// A printk landing in a line destroys that chunk on that channel, so the
/// data one printk costs grows with the chunk, while the fixed framing (42
/// bytes a line) shrinks relative to it: at 448 bytes the framing is under
/// 10% of the line. Protocol v1 spent about 40% (192-byte chunks, each line
/// repeating the 36-byte boot id); `loads/examples/framing_overhead.rs`
/// measures both.
pub const CHUNK_BYTES: usize = 448;
/// Hex digits of a stream's tag (a prefix of the document's sha256).
pub const TAG_HEX: usize = 8;
/// The most chunks a stream may announce (about 117 MB of document, far
/// above any result): a line announcing more is damaged, so a forged or
/// garbled total cannot make the decoder list billions of missing chunks.
pub const MAX_CHUNKS: u32 = 1 << 18;
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
/// Event name the init prints when it panics (from its panic hook).
pub const EVENT_INIT_PANIC: &str = "init-panic";
/// Event name the init prints when a step after the result (late module
/// loads, the results port, the scratch disk's teardown, the upload) fails
/// or passes its time bound: `step=NAME status=failed|timeout|died|not-run
/// detail=TEXT`. The result is complete by then; the host records it
/// beside the result.
pub const EVENT_LATE_STEP: &str = "late-step";
/// Event name a lab agent prints when the receiver answered its hello:
/// `machine=NAME closed_job=ID|- ms=N` (`ms`: since the agent's start).
pub const EVENT_AGENT_HELLO: &str = "agent-hello";
/// Event name a lab agent prints when it got a job:
/// `id=N kernel_bytes=N initrd_bytes=N`.
pub const EVENT_AGENT_JOB: &str = "agent-job";
/// Event name a lab agent prints right before it kexecs a job's kernel:
/// `id=N`.
pub const EVENT_AGENT_KEXEC: &str = "agent-kexec";
/// Event name a lab agent prints once a job's userland pack is in the
/// machine's pack store: `id=N cached=0|1 bytes=N s=SECONDS removed=N`
/// (`cached=1`: it was there already; `removed`: older packs deleted to
/// make room).
pub const EVENT_AGENT_PACK: &str = "agent-pack";
/// Event name a lab agent prints when the receiver has no job for it:
/// `s=N` (the seconds it waits before asking again).
pub const EVENT_AGENT_WAIT: &str = "agent-wait";
/// Event name a lab agent prints when a job cannot be booted here (it
/// reports it and asks for the next one): `id=N reason=TEXT`.
pub const EVENT_AGENT_FAILED: &str = "agent-failed";
/// Event name a lab agent prints when talking to the receiver failed:
/// `url=URL retry_in_s=N|- error=TEXT` (`-`: it gives up).
pub const EVENT_AGENT_ERROR: &str = "agent-error";
/// Event name a lab agent prints before it powers the machine off:
/// `reason=TEXT`.
pub const EVENT_AGENT_POWEROFF: &str = "agent-poweroff";
/// Event name the init prints once netconsole sends the kernel's
/// messages: `target=IP:PORT iface=NAME`, or `failed error=TEXT`.
pub const EVENT_NETCONSOLE: &str = "netconsole";
/// Event name the init prints about the hardware watchdog:
/// `armed device=PATH identity=TEXT timeout_s=N`, `disarmed`, or
/// `failed error=TEXT`.
pub const EVENT_HW_WATCHDOG: &str = "hw-watchdog";
/// Events the init always prints with a CRC (through [`event`]): a line
/// with one of these names but no CRC was cut, and is not accepted. The
/// upload and network events are `results-uploader`'s `EVENT_UPLOAD` and
/// `EVENT_NETWORK`. A new event printed with [`event`] belongs here.
pub const CHECKSUMMED_EVENTS: [&str; 18] = [
    EVENT_HELLO,
    EVENT_ALIVE,
    EVENT_POWEROFF,
    EVENT_INIT_PANIC,
    EVENT_LATE_STEP,
    "upload",
    "upload-attempt",
    "network",
    EVENT_AGENT_HELLO,
    EVENT_AGENT_JOB,
    EVENT_AGENT_KEXEC,
    EVENT_AGENT_PACK,
    EVENT_AGENT_WAIT,
    EVENT_AGENT_FAILED,
    EVENT_AGENT_ERROR,
    EVENT_AGENT_POWEROFF,
    EVENT_NETCONSOLE,
    EVENT_HW_WATCHDOG,
];

/// What a stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StreamKind {
    /// The run's whole result document, printed at the end.
    Result,
    /// One workload's result, printed when that workload finishes.
    Workload,
}

impl StreamKind {
    /// The letter that names the kind on the wire.
    pub fn letter(self) -> &'static str {
        match self {
            StreamKind::Result => "R",
            StreamKind::Workload => "W",
        }
    }

    fn from_letter(s: &str) -> Option<StreamKind> {
        match s {
            "R" => Some(StreamKind::Result),
            "W" => Some(StreamKind::Workload),
            _ => None,
        }
    }
}

impl fmt::Display for StreamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StreamKind::Result => "result",
            StreamKind::Workload => "workload",
        })
    }
}

/// How an error names a stream: kind, tag, and the boot id when its header
/// arrived intact.
fn stream_label(kind: &StreamKind, tag: &str, id: &Option<String>) -> String {
    match id {
        Some(id) => format!("{kind} stream {tag} of boot {id}"),
        None => format!("{kind} stream {tag} (no intact header)"),
    }
}

/// Sorted chunk numbers as runs: `2, 4-6, 9`.
fn seq_ranges(seqs: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &s in seqs {
        match runs.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(s) => *end = s,
            _ => runs.push((s, s)),
        }
    }
    let parts: Vec<String> =
        runs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    parts.join(", ")
}

fn mismatch_detail(want_bytes: &Option<usize>, got_bytes: &usize) -> String {
    match want_bytes {
        Some(want) => {
            format!("reassembled {got_bytes} bytes do not match the announced sha256 ({want} bytes)")
        }
        None => format!("reassembled {got_bytes} bytes do not match the tag its chunks carry"),
    }
}

/// Errors a stream can have, naming exactly what was lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// No line of any result stream was seen, intact or damaged.
    #[error("no result stream found (no '{MARKER} HEAD R' or '{MARKER} R' line)")]
    NoStream,
    /// Lines of this kind were seen, but only damaged, and none belongs to
    /// a stream seen intact: not even which document they carried is known.
    #[error("{damaged} damaged {kind} stream lines match no {kind} stream seen intact")]
    Unreadable {
        /// Which kind of stream the lines claim.
        kind: StreamKind,
        /// How many such lines.
        damaged: usize,
    },
    /// Chunks are missing or damaged.
    #[error("{} is incomplete: {} of {total} chunks missing [{}], {} damaged [{}]",
        stream_label(kind, tag, id), missing.len(), seq_ranges(missing), corrupt.len(), seq_ranges(corrupt))]
    Incomplete {
        /// Stream kind.
        kind: StreamKind,
        /// Stream tag.
        tag: String,
        /// Boot id, from the header when it arrived intact.
        id: Option<String>,
        /// Chunks announced.
        total: u32,
        /// Sequence numbers never seen intact nor damaged.
        missing: Vec<u32>,
        /// Sequence numbers seen only with a bad checksum.
        corrupt: Vec<u32>,
    },
    /// All chunks arrived, but the whole does not match the header's sha256
    /// (or, without a header, the tag).
    #[error("{}: {}", stream_label(kind, tag, id), mismatch_detail(want_bytes, got_bytes))]
    HashMismatch {
        /// Stream kind.
        kind: StreamKind,
        /// Stream tag.
        tag: String,
        /// Boot id, from the header when it arrived intact.
        id: Option<String>,
        /// Bytes announced by the header, when it arrived intact.
        want_bytes: Option<usize>,
        /// Bytes reassembled.
        got_bytes: usize,
    },
}

/// CRC32 of `fields` joined by single spaces.
fn crc_of(fields: &[&str]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            h.update(b" ");
        }
        h.update(f.as_bytes());
    }
    h.finalize()
}

/// Frames `document` as protocol lines (without newlines): the header,
/// then one line per chunk of at most [`CHUNK_BYTES`] bytes.
///
/// ```
/// # use loads::console_protocol::{encode, Decoder, StreamKind};
/// let lines = encode(StreamKind::Result, "boot-1", r#"{"status":"complete"}"#);
/// assert_eq!(lines.len(), 2);
/// assert!(lines[0].starts_with("@@BOOTBENCH HEAD R 1 21 "));
/// let mut d = Decoder::new();
/// d.feed_line(&lines[1]); // the header is not needed
/// assert_eq!(d.last_document().unwrap(), r#"{"status":"complete"}"#);
/// ```
pub fn encode(kind: StreamKind, id: &str, document: &str) -> Vec<String> {
    let sha = hex::encode(Sha256::digest(document.as_bytes()));
    let tag = sha.get(..TAG_HEX).unwrap_or(&sha);
    let chunks = split_chunks(document, CHUNK_BYTES);
    let k = kind.letter();
    let total = chunks.len().to_string();
    let bytes = document.len().to_string();
    let mut lines = Vec::with_capacity(chunks.len() + 1);
    let crc = crc_of(&["HEAD", k, &total, &bytes, &sha, id]);
    lines.push(format!("{MARKER} HEAD {k} {total} {bytes} {sha} {crc:08x} {id}"));
    for (i, chunk) in chunks.iter().enumerate() {
        let seq = format!("{}/{total}", i + 1);
        let crc = crc_of(&[k, tag, &seq, chunk]);
        lines.push(format!("{MARKER} {k} {tag} {seq} {crc:08x} {chunk}"));
    }
    lines
}

/// A one-line event, with the CRC that lets the host tell a damaged one.
///
/// ```
/// # use loads::console_protocol::{event, parse_line, Line};
/// let l = event("hello", "version=1");
/// assert!(l.starts_with("@@BOOTBENCH EVENT hello version=1 crc="));
/// assert_eq!(parse_line(&l), Some(Line::Event { name: "hello", text: "version=1" }));
/// ```
pub fn event(name: &str, text: &str) -> String {
    let crc = crc_of(&["EVENT", name, text]);
    format!("{MARKER} EVENT {name} {text} crc={crc:08x}")
}

/// Splits at char boundaries into pieces of at most `max` bytes; an empty
/// document is one empty chunk.
fn split_chunks(s: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while rest.len() > max {
        // The last char boundary at or before `max` (within 4 bytes of it);
        // a `max` shorter than the first char still cuts after that char.
        let first_char = rest.chars().next().map_or(rest.len(), char::len_utf8);
        let cut = (1..=max).rev().find(|&c| rest.is_char_boundary(c)).unwrap_or(first_char);
        let Some((a, b)) = rest.split_at_checked(cut) else { break };
        out.push(a);
        rest = b;
    }
    if out.is_empty() || !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// A parsed protocol line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line<'a> {
    /// A stream's header, CRC verified.
    Header {
        /// What the stream carries.
        kind: StreamKind,
        /// Chunk count.
        total: u32,
        /// Document length.
        bytes: usize,
        /// Document sha256 (64 lowercase hex digits).
        sha256: &'a str,
        /// Boot id.
        id: &'a str,
    },
    /// A chunk. When `intact` is false its CRC failed and every field is
    /// only what the line claims.
    Data {
        /// What the stream carries.
        kind: StreamKind,
        /// The stream's tag.
        tag: &'a str,
        /// 1-based sequence number.
        seq: u32,
        /// Chunk count.
        total: u32,
        /// Whether the CRC matched.
        intact: bool,
        /// Payload.
        payload: &'a str,
    },
    /// A single-line event, CRC verified (or of the older format without
    /// one, for a name not in [`CHECKSUMMED_EVENTS`]).
    Event {
        /// Event name.
        name: &'a str,
        /// Free text.
        text: &'a str,
    },
    /// A header, chunk or event line that fails its CRC, lacks it, or is
    /// cut or garbled so that its fields do not parse.
    Damaged {
        /// The stream kind the line claims, for header and chunk lines.
        kind: Option<StreamKind>,
    },
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn parse_crc(s: &str) -> Option<u32> {
    is_hex(s, 8).then(|| u32::from_str_radix(s, 16).ok()).flatten()
}

/// A decimal number without sign or leading zero, as the encoder writes it.
fn parse_count<T: std::str::FromStr>(s: &str) -> Option<T> {
    let canonical = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

/// Parses one line of console text. Lines without the marker, or with an
/// unknown keyword after it (protocol v1's included), give `None`.
pub fn parse_line(line: &str) -> Option<Line<'_>> {
    let at = line.find(MARKER)?;
    let rest = line.get(at + MARKER.len()..)?.trim_end_matches(['\r', '\n']);
    let rest = rest.strip_prefix(' ')?;
    let (keyword, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    if keyword == "HEAD" {
        let kind = rest.split(' ').next().and_then(StreamKind::from_letter);
        return Some(parse_header(rest).unwrap_or(Line::Damaged { kind }));
    }
    if keyword == "EVENT" {
        return Some(parse_event(rest));
    }
    let kind = StreamKind::from_letter(keyword)?;
    Some(parse_data(kind, rest).unwrap_or(Line::Damaged { kind: Some(kind) }))
}

fn parse_header(rest: &str) -> Option<Line<'_>> {
    let mut it = rest.splitn(7, ' ');
    let (k, total_s, bytes_s, sha256, crc, id) =
        (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
    if parse_crc(crc)? != crc_of(&["HEAD", k, total_s, bytes_s, sha256, id]) || !is_hex(sha256, 64) {
        return None;
    }
    let total = parse_count(total_s).filter(|&t: &u32| (1..=MAX_CHUNKS).contains(&t))?;
    Some(Line::Header { kind: StreamKind::from_letter(k)?, total, bytes: parse_count(bytes_s)?, sha256, id })
}

fn parse_data(kind: StreamKind, rest: &str) -> Option<Line<'_>> {
    let mut it = rest.splitn(4, ' ');
    let (tag, seq_total, crc, payload) = (it.next()?, it.next()?, it.next()?, it.next()?);
    let (seq, total) = seq_total.split_once('/')?;
    let (seq, total) = (parse_count(seq)?, parse_count(total)?);
    if !is_hex(tag, TAG_HEX) || seq < 1 || seq > total || total > MAX_CHUNKS {
        return None;
    }
    let intact = parse_crc(crc)? == crc_of(&[kind.letter(), tag, seq_total, payload]);
    Some(Line::Data { kind, tag, seq, total, intact, payload })
}

fn parse_event(rest: &str) -> Line<'_> {
    const TRAILER: &str = " crc=";
    let checked = rest
        .len()
        .checked_sub(TRAILER.len() + 8)
        .and_then(|at| Some((rest.get(..at)?, rest.get(at..)?.strip_prefix(TRAILER)?)));
    match checked {
        Some((body, crc)) if parse_crc(crc).is_some() => {
            let (name, text) = body.split_once(' ').unwrap_or((body, ""));
            if parse_crc(crc) == Some(crc_of(&["EVENT", name, text])) && !name.is_empty() {
                Line::Event { name, text }
            } else {
                Line::Damaged { kind: None }
            }
        }
        _ => {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            if name.is_empty() || CHECKSUMMED_EVENTS.contains(&name) {
                Line::Damaged { kind: None }
            } else {
                Line::Event { name, text }
            }
        }
    }
}

/// A header that arrived intact.
#[derive(Debug, Clone)]
struct Header {
    total: u32,
    bytes: usize,
    sha256: String,
    id: String,
}

/// One stream: the header if seen intact and the chunks seen intact.
#[derive(Debug)]
struct Stream {
    kind: StreamKind,
    tag: String,
    header: Option<Header>,
    /// The total the first intact chunk announced.
    data_total: Option<u32>,
    /// Payloads by (total, seq). Only the stream's total is read: chunks
    /// announcing another one under the same tag (a tag collision, or a
    /// guest bug) cannot be part of it, whichever arrived first.
    chunks: BTreeMap<(u32, u32), String>,
}

impl Stream {
    /// The header's total, else the first intact chunk's.
    fn total(&self) -> u32 {
        self.header.as_ref().map(|h| h.total).or(self.data_total).unwrap_or(0)
    }

    fn has(&self, seq: u32) -> bool {
        self.chunks.contains_key(&(self.total(), seq))
    }
}

/// A chunk line that failed its CRC: what it claims.
#[derive(Debug)]
struct DamagedChunk {
    kind: StreamKind,
    tag: String,
    seq: u32,
}

/// Damaged event lines kept verbatim; later ones are only counted.
pub const MAX_DAMAGED_EVENTS: usize = 100;

/// Collects streams from any number of lines and channels.
#[derive(Debug, Default)]
pub struct Decoder {
    /// In order of the first intact line of each.
    streams: Vec<Stream>,
    damaged_chunks: Vec<DamagedChunk>,
    /// Damaged lines whose kind is known but whose fields are not.
    damaged_unparsed: BTreeMap<StreamKind, usize>,
    events: Vec<(String, String)>,
    damaged_events: Vec<String>,
    damaged_events_dropped: usize,
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

    /// The stream of `kind` and `tag`, added if new (always `Some`).
    fn stream_mut(&mut self, kind: StreamKind, tag: &str) -> Option<&mut Stream> {
        let at = match self.streams.iter().position(|s| s.kind == kind && s.tag == tag) {
            Some(at) => at,
            None => {
                let tag = tag.to_string();
                self.streams.push(Stream { kind, tag, header: None, data_total: None, chunks: BTreeMap::new() });
                self.streams.len() - 1
            }
        };
        self.streams.get_mut(at)
    }

    /// Feeds one line.
    pub fn feed_line(&mut self, line: &str) {
        let Some(parsed) = parse_line(line) else { return };
        match parsed {
            Line::Header { kind, total, bytes, sha256, id } => {
                let tag = sha256.get(..TAG_HEX).unwrap_or(sha256);
                if let Some(st) = self.stream_mut(kind, tag).filter(|st| st.header.is_none()) {
                    st.header = Some(Header { total, bytes, sha256: sha256.to_string(), id: id.to_string() });
                }
            }
            Line::Data { kind, tag, seq, total, intact: true, payload } => {
                if let Some(st) = self.stream_mut(kind, tag) {
                    st.data_total.get_or_insert(total);
                    st.chunks.entry((total, seq)).or_insert_with(|| payload.to_string());
                }
            }
            Line::Data { kind, tag, seq, intact: false, .. } => {
                self.damaged_chunks.push(DamagedChunk { kind, tag: tag.to_string(), seq })
            }
            Line::Event { name, text } => self.events.push((name.to_string(), text.to_string())),
            Line::Damaged { kind: Some(kind) } => *self.damaged_unparsed.entry(kind).or_default() += 1,
            Line::Damaged { kind: None } => {
                if self.damaged_events.len() < MAX_DAMAGED_EVENTS {
                    self.damaged_events.push(line.trim().to_string());
                } else {
                    self.damaged_events_dropped += 1;
                }
            }
        }
    }

    /// Events seen intact, in order.
    pub fn events(&self) -> &[(String, String)] {
        &self.events
    }

    /// Event lines that failed their CRC or were cut (up to
    /// [`MAX_DAMAGED_EVENTS`]), verbatim: they were ignored.
    pub fn damaged_events(&self) -> &[String] {
        &self.damaged_events
    }

    /// Damaged event lines beyond [`MAX_DAMAGED_EVENTS`], not kept.
    pub fn damaged_events_dropped(&self) -> usize {
        self.damaged_events_dropped
    }

    /// The last result stream's document, preferring the last intact one;
    /// otherwise exactly what is wrong with the last one seen.
    pub fn last_document(&self) -> Result<String, StreamError> {
        let results = || self.streams.iter().filter(|s| s.kind == StreamKind::Result);
        if let Some(doc) = results().rev().find_map(|s| self.check(s).ok()) {
            return Ok(doc);
        }
        match results().next_back() {
            Some(last) => self.check(last),
            None => match self.unattributed(StreamKind::Result) {
                0 => Err(StreamError::NoStream),
                damaged => Err(StreamError::Unreadable { kind: StreamKind::Result, damaged }),
            },
        }
    }

    /// The documents of the intact workload streams, in the order first
    /// seen. A stream that arrived on several channels is one stream, so
    /// each document appears once.
    pub fn workload_documents(&self) -> Vec<String> {
        self.streams.iter().filter(|s| s.kind == StreamKind::Workload).filter_map(|s| self.check(s).ok()).collect()
    }

    /// What is wrong with each workload stream that is not intact, in the
    /// order first seen, then damaged workload lines that match no stream.
    pub fn workload_stream_errors(&self) -> Vec<StreamError> {
        let mut errors: Vec<StreamError> = self
            .streams
            .iter()
            .filter(|s| s.kind == StreamKind::Workload)
            .filter_map(|s| self.check(s).err())
            .collect();
        match self.unattributed(StreamKind::Workload) {
            0 => {}
            damaged => errors.push(StreamError::Unreadable { kind: StreamKind::Workload, damaged }),
        }
        errors
    }

    /// Damaged lines of `kind` that belong to no stream seen intact.
    fn unattributed(&self, kind: StreamKind) -> usize {
        let orphans = self
            .damaged_chunks
            .iter()
            .filter(|d| d.kind == kind && !self.streams.iter().any(|s| s.kind == kind && s.tag == d.tag))
            .count();
        orphans + self.damaged_unparsed.get(&kind).copied().unwrap_or(0)
    }

    /// Reassembles `st`, verifying every chunk and the whole.
    fn check(&self, st: &Stream) -> Result<String, StreamError> {
        let total = st.total();
        let id = st.header.as_ref().map(|h| h.id.clone());
        let mut corrupt: Vec<u32> = self
            .damaged_chunks
            .iter()
            .filter(|d| d.kind == st.kind && d.tag == st.tag && d.seq <= total && !st.has(d.seq))
            .map(|d| d.seq)
            .collect();
        corrupt.sort_unstable();
        corrupt.dedup();
        let missing: Vec<u32> = (1..=total).filter(|&s| !st.has(s) && corrupt.binary_search(&s).is_err()).collect();
        if !missing.is_empty() || !corrupt.is_empty() {
            return Err(StreamError::Incomplete { kind: st.kind, tag: st.tag.clone(), id, total, missing, corrupt });
        }
        let doc: String = st.chunks.range((total, 1)..=(total, total)).map(|(_, c)| c.as_str()).collect();
        let sha = hex::encode(Sha256::digest(doc.as_bytes()));
        let good = match &st.header {
            Some(h) => sha == h.sha256 && doc.len() == h.bytes,
            None => sha.starts_with(&st.tag),
        };
        if !good {
            return Err(StreamError::HashMismatch {
                kind: st.kind,
                tag: st.tag.clone(),
                id,
                want_bytes: st.header.as_ref().map(|h| h.bytes),
                got_bytes: doc.len(),
            });
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
