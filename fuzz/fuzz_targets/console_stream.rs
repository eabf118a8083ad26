//! A guest's console as the host reads it (`qemu::console_scan::ConsoleScan`
//! over `loads::console_protocol`'s decoder): bytes in arbitrary pieces,
//! printk lines interleaved, lines cut, damaged, dropped or repeated.
//!
//! The first input byte picks a mode. Raw: the rest is the console.
//! Framed: the rest holds a document, which is framed as the init frames
//! it, then damaged as the rest of the input says. Invariants: a document
//! the scanner accepts has the sha256 an intact line of its stream
//! announces (the header's whole hash, else the chunks' tag); in the
//! framed mode it is the document that was framed, byte for byte, and an
//! undamaged stream is always accepted, whatever printk lines come
//! between its lines.
#![no_main]

use bootbench_fuzz::{bounded_alloc, split_parts};
use libfuzzer_sys::fuzz_target;
use loads::console_protocol::{encode, parse_line, Decoder, Line, StreamKind};
use qemu::console_scan::ConsoleScan;
use sha2::{Digest, Sha256};

/// Printk lines as a kernel in trouble prints them.
const PRINTK: &[&str] = &[
    "[    2.345678] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100",
    "<3>[   12.000001] BUG: kernel NULL pointer dereference, address: 0000000000000000",
    "[    0.000000] Linux version 6.1.0-28-amd64",
    "\u{1b}[0m\r",
    "@@BOOTBENCH EVENT alive workload=fork crc=00000000",
];

/// Feeds `bytes` to a fresh scan in pieces whose sizes `sizes` gives.
fn scan(bytes: &[u8], sizes: &[u8]) -> ConsoleScan {
    let mut s = ConsoleScan::new();
    let mut rest = bytes;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes.get(i % sizes.len().max(1)).map_or(rest.len(), |&b| usize::from(b) + 1).min(rest.len());
        let (piece, tail) = rest.split_at(n);
        s.feed_bytes(piece);
        rest = tail;
        i += 1;
    }
    s.finish();
    s
}

/// Every document `decoder` accepts carries the hash an intact line of its
/// stream in `text` announced.
fn check_accepted(decoder: &Decoder, text: &str) {
    let accepted = decoder.last_document().ok().into_iter().map(|d| (StreamKind::Result, d));
    let workloads = decoder.workload_documents().into_iter().map(|d| (StreamKind::Workload, d));
    for (kind, doc) in accepted.chain(workloads) {
        let sha = hex::encode(Sha256::digest(doc.as_bytes()));
        let mut tagged = false;
        for line in text.lines() {
            match parse_line(line.trim_end_matches('\r')) {
                Some(Line::Header { kind: k, sha256, bytes, .. }) if k == kind && sha.starts_with(&sha256[..8]) => {
                    // The first intact header of the stream is the one kept.
                    assert_eq!(sha256, sha, "accepted a {kind:?} document whose header announced another sha256");
                    assert_eq!(bytes, doc.len(), "accepted a {kind:?} document of another length than announced");
                    tagged = true;
                    break;
                }
                Some(Line::Data { kind: k, tag, intact: true, .. }) if k == kind && sha.starts_with(tag) => {
                    tagged = true;
                }
                _ => {}
            }
        }
        assert!(tagged, "accepted a {kind:?} document ({sha}) that no intact line announced");
    }
}

/// Frames a document from `doc`, damages it as `program` says, and checks
/// what the scanner makes of it.
fn framed(doc: &[u8], program: &[u8], sizes: &[u8]) {
    // A document is one line of text (compact JSON never holds a newline).
    let doc = String::from_utf8_lossy(doc).replace(['\n', '\r'], " ");
    let mut lines: Vec<Vec<u8>> =
        encode(StreamKind::Result, "fuzz-boot", &doc).into_iter().map(String::into_bytes).collect();
    let mut damaged = false;
    for op in program.chunks(3) {
        let (&what, at, arg) = match op {
            [w, a, g] => (w, usize::from(*a), *g),
            _ => break,
        };
        if lines.is_empty() {
            break;
        }
        let i = at % lines.len();
        let printk = PRINTK[usize::from(arg) % PRINTK.len()].as_bytes().to_vec();
        match what % 8 {
            // A printk line between two lines: harmless.
            0 => lines.insert(i, printk),
            // A printk landing inside a line.
            1 => {
                let line = &mut lines[i];
                let cut = usize::from(arg) % (line.len() + 1);
                line.splice(cut..cut, printk.iter().copied().chain(*b"\n"));
                damaged = true;
            }
            // A line cut short.
            2 => {
                let line = &mut lines[i];
                line.truncate(usize::from(arg) % (line.len() + 1));
                damaged = true;
            }
            // A line lost.
            3 => {
                lines.remove(i);
                damaged = true;
            }
            // A line repeated (a stream printed twice counts once).
            4 => {
                let copy = lines[i].clone();
                lines.insert(i, copy);
            }
            // One byte flipped.
            5 => {
                let line = &mut lines[i];
                if !line.is_empty() {
                    let j = usize::from(arg) % line.len();
                    line[j] ^= 1 << (arg % 8);
                    damaged = true;
                }
            }
            // Two lines swapped: order does not matter.
            6 => {
                let j = usize::from(arg) % lines.len();
                lines.swap(i, j);
            }
            // The console ends here (the guest died).
            _ => {
                lines.truncate(i);
                damaged = true;
            }
        }
    }
    let mut console = Vec::new();
    for line in &lines {
        console.extend_from_slice(line);
        console.extend_from_slice(b"\r\n");
    }
    let s = bounded_alloc("console scan", console.len(), || scan(&console, sizes));
    match s.decoder().last_document() {
        Ok(got) => assert_eq!(got, doc, "accepted a document other than the one framed"),
        Err(e) => assert!(damaged, "an undamaged stream was refused: {e}"),
    }
    check_accepted(s.decoder(), &String::from_utf8_lossy(&console));
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode % 2 == 0 {
        let s = bounded_alloc("console scan", rest.len(), || scan(rest, &[]));
        check_accepted(s.decoder(), &String::from_utf8_lossy(rest));
        let _ = (s.events(), s.kernel_errors(), s.panic_line(), s.progress(), s.workload_stream_errors(), s.log_text());
        // The same bytes in pieces read the same.
        let sizes: Vec<u8> = rest.iter().take(16).copied().collect();
        let t = scan(rest, &sizes);
        assert_eq!(t.decoder().last_document(), s.decoder().last_document(), "the pieces changed the result");
        assert_eq!(t.events(), s.events(), "the pieces changed the events");
    } else {
        let parts = split_parts(rest, 3);
        framed(parts[0], parts[1], parts[2]);
    }
});
