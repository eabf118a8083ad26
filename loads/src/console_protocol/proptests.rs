//! Property tests of the framing: the invariants the `console_stream`
//! fuzz target (`fuzz/`) asserts, checked on every `cargo test`. A
//! document the decoder accepts is the one that was framed, byte for
//! byte, however its lines were cut, damaged, dropped, repeated or
//! reordered; an undamaged stream is accepted whatever printk lines come
//! between its lines.

use super::*;
use proptest::prelude::*;

const PRINTK: &str = "[    2.345678] Kernel panic - not syncing: Attempted to kill init!";

/// What happens to the framed lines on the way to the host.
#[derive(Debug, Clone)]
enum Damage {
    /// A printk line between two lines (harmless).
    PrintkBetween(usize),
    /// A printk landing inside a line at a byte offset.
    PrintkInside(usize, usize),
    /// A line cut short.
    Cut(usize, usize),
    /// A line lost.
    Drop(usize),
    /// A line repeated (harmless).
    Repeat(usize),
    /// One bit of one byte flipped.
    Flip(usize, usize, u8),
    /// Two lines swapped (harmless).
    Swap(usize, usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    let i = 0usize..64;
    prop_oneof![
        i.clone().prop_map(Damage::PrintkBetween),
        (i.clone(), 0usize..600).prop_map(|(a, b)| Damage::PrintkInside(a, b)),
        (i.clone(), 0usize..600).prop_map(|(a, b)| Damage::Cut(a, b)),
        i.clone().prop_map(Damage::Drop),
        i.clone().prop_map(Damage::Repeat),
        (i.clone(), 0usize..600, 0u8..8).prop_map(|(a, b, c)| Damage::Flip(a, b, c)),
        (i.clone(), i).prop_map(|(a, b)| Damage::Swap(a, b)),
    ]
}

/// Applies `ops` to `lines`; whether any of them could have destroyed a
/// line of the stream.
fn apply(lines: &mut Vec<Vec<u8>>, ops: &[Damage]) -> bool {
    let mut damaged = false;
    for op in ops {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match *op {
            Damage::PrintkBetween(i) => lines.insert(i % n, PRINTK.as_bytes().to_vec()),
            Damage::PrintkInside(i, at) => {
                let line = &mut lines[i % n];
                let at = at % (line.len() + 1);
                line.splice(at..at, PRINTK.bytes().chain(*b"\n"));
                damaged = true;
            }
            Damage::Cut(i, at) => {
                let line = &mut lines[i % n];
                line.truncate(at % (line.len() + 1));
                damaged = true;
            }
            Damage::Drop(i) => {
                lines.remove(i % n);
                damaged = true;
            }
            Damage::Repeat(i) => {
                let copy = lines[i % n].clone();
                lines.insert(i % n, copy);
            }
            Damage::Flip(i, at, bit) => {
                let line = &mut lines[i % n];
                if !line.is_empty() {
                    let at = at % line.len();
                    line[at] ^= 1 << bit;
                    damaged = true;
                }
            }
            Damage::Swap(i, j) => lines.swap(i % n, j % n),
        }
    }
    damaged
}

proptest! {
    #[test]
    fn an_accepted_document_is_the_one_framed(
        doc in "[^\n\r]{0,1400}",
        ops in prop::collection::vec(damage(), 0..6),
    ) {
        let mut lines: Vec<Vec<u8>> =
            encode(StreamKind::Result, "boot-1", &doc).into_iter().map(String::into_bytes).collect();
        let damaged = apply(&mut lines, &ops);
        let mut console = Vec::new();
        for l in &lines {
            console.extend_from_slice(l);
            console.extend_from_slice(b"\r\n");
        }
        let mut d = Decoder::new();
        d.feed_text(&String::from_utf8_lossy(&console));
        match d.last_document() {
            Ok(got) => prop_assert_eq!(got, doc),
            Err(e) => prop_assert!(damaged, "an undamaged stream was refused: {}", e),
        }
    }
}
