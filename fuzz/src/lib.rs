//! What the fuzz targets share: an allocator that measures what one input
//! makes a parser allocate, so that "no unbounded allocation" is asserted
//! rather than left to libFuzzer's RSS limit, and the kernel's quoting of
//! cmdline words. Owns no parser: each target in `fuzz_targets/` calls the
//! project's own code and asserts that parser's invariants.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes live and their peak.
pub struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to `System` unchanged; the counters only
// observe the sizes.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `layout` is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with this `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

/// Fixed allowance per input, whatever its length: a parser's tables, a
/// JSON value's nodes, a formatted error message.
pub const ALLOC_BASE: usize = 4 << 20;

/// Allowance per input byte. A parser may keep a few copies of its input
/// (text, parsed value, typed value, re-serialised form for a round trip);
/// what grows faster than that with the input is what a hostile sender
/// could use to exhaust memory.
pub const ALLOC_PER_INPUT_BYTE: usize = 64;

/// Runs `f` and panics (a libFuzzer crash) when the bytes it kept live at
/// once went beyond [`ALLOC_BASE`] + [`ALLOC_PER_INPUT_BYTE`] per byte of
/// an input of `input_len` bytes.
pub fn bounded_alloc<T>(what: &str, input_len: usize, f: impl FnOnce() -> T) -> T {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    let used = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let bound = ALLOC_BASE + ALLOC_PER_INPUT_BYTE.saturating_mul(input_len);
    assert!(
        used <= bound,
        "{what}: an input of {input_len} bytes made the parser hold {used} bytes at once (bound {bound})"
    );
    out
}

/// Joins cmdline words so that the kernel's splitting (and
/// `loads::suite::split_cmdline`) reads them back unchanged: a word with
/// whitespace, or an empty one, is put in double quotes. Words as that
/// split returns them never hold a quote.
pub fn join_cmdline_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| if w.is_empty() || w.chars().any(char::is_whitespace) { format!("\"{w}\"") } else { w.clone() })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Splits fuzz input into `n` parts at its first `n - 1` NUL bytes (the
/// last part takes the rest), so one input can carry a header, a URL and a
/// body; missing parts are empty.
pub fn split_parts(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts: Vec<&[u8]> = data.splitn(n, |&b| b == 0).collect();
    parts.resize(n, &[]);
    parts
}
