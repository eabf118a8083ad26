//! DOS wildcard matching for FIND_FIRST, with the semantics an SMB server
//! applies (Samba's `ms_fnmatch`, MS-FSA 2.1.4.4), case-insensitively:
//! - `*` matches any run of characters, `?` exactly one;
//! - `<` (DOS_STAR) matches any run of characters up to and including the
//!   name's last `.`, but never past it (`<.JNK` matches `A.B.JNK`);
//! - `>` (DOS_QM) matches one character, but matches nothing at a `.` or at
//!   the end of the name (`>>>.txt` matches `a.txt`);
//! - `"` (DOS_DOT) matches a `.`, or nothing at the end of the name.
//!
//! Owns matching only; it never touches the filesystem.

/// The characters that make a FIND_FIRST name a pattern.
pub const WILDCARDS: &[char] = &['*', '?', '<', '>', '"'];

/// True when `s` holds any DOS wildcard character.
pub fn has_wildcards(s: &str) -> bool {
    s.contains(WILDCARDS)
}

/// Longest ASCII name matched without allocating (a name component is at
/// most 255 bytes on Linux).
const ASCII_MAX: usize = 255;

/// Whether the file name `name` matches the DOS pattern `pattern`. ASCII
/// names (every name a loadfile makes) are matched on the stack, without
/// allocating, so FIND_FIRST costs about what dbench's directory read
/// costs; others are matched by Unicode characters.
pub fn matches(pattern: &str, name: &str) -> bool {
    if pattern.is_ascii() && name.is_ascii() && name.len() <= ASCII_MAX {
        let mut rows = [[false; ASCII_MAX + 1]; 2];
        let [next, cur] = &mut rows;
        let width = name.len() + 1;
        match (next.get_mut(..width), cur.get_mut(..width)) {
            (Some(next), Some(cur)) => {
                table(pattern.as_bytes(), name.as_bytes(), next, cur, |a, b| a.eq_ignore_ascii_case(&b))
            }
            _ => false,
        }
    } else {
        let p: Vec<char> = pattern.chars().collect();
        let n: Vec<char> = name.chars().collect();
        let (mut next, mut cur) = (vec![false; n.len() + 1], vec![false; n.len() + 1]);
        table(&p, &n, &mut next, &mut cur, |a, b| a == b || a.to_lowercase().eq(b.to_lowercase()))
    }
}

/// A pattern or name element: a byte of ASCII text or a character.
trait Symbol: Copy + PartialEq {
    fn is(self, c: char) -> bool;
}

impl Symbol for u8 {
    fn is(self, c: char) -> bool {
        char::from(self) == c
    }
}

impl Symbol for char {
    fn is(self, c: char) -> bool {
        self == c
    }
}

/// The matching table over `p` and `n`, with rows of `n.len() + 1`
/// entries supplied by the caller.
fn table<T: Symbol>(p: &[T], n: &[T], next: &mut [bool], cur: &mut [bool], same: impl Fn(T, T) -> bool) -> bool {
    let last_dot = n.iter().rposition(|c| c.is('.'));
    // next[j] after processing pattern position i: can p[i..] match n[j..]?
    // Filled from the end of the pattern backwards (dynamic programming
    // instead of Samba's backtracking, so no pattern is exponential).
    let width = n.len() + 1;
    next.fill(false);
    if let Some(end) = next.last_mut() {
        *end = true;
    }
    let (mut next, mut cur) = (next, cur);
    for &pc in p.iter().rev() {
        // `cur[j]` is written from the end down, so `cur[j + 1]` is always
        // this row's before it is read.
        for j in (0..width).rev() {
            let at = n.get(j).copied();
            let after = |k: usize| next.get(k).copied().unwrap_or(false);
            let here_on = cur.get(j + 1).copied().unwrap_or(false);
            let v = if pc.is('*') {
                after(j) || here_on
            } else if pc.is('?') {
                at.is_some() && after(j + 1)
            } else if pc.is('<') {
                match last_dot {
                    // Up to and including the last dot, never beyond it.
                    Some(d) if j <= d => after(j) || (j < d && here_on) || (j == d && after(d + 1)),
                    // Past the last dot, or no dot at all: like `*`.
                    _ => after(j) || here_on,
                }
            } else if pc.is('>') {
                match at {
                    None => after(j),
                    Some(c) if c.is('.') => after(j) || (j + 1 == n.len() && after(j + 1)),
                    Some(_) => after(j + 1),
                }
            } else if pc.is('"') {
                match at {
                    None => after(j),
                    Some(c) if c.is('.') => after(j + 1),
                    Some(_) => false,
                }
            } else {
                at.is_some_and(|c| same(c, pc)) && after(j + 1)
            };
            if let Some(slot) = cur.get_mut(j) {
                *slot = v;
            }
        }
        std::mem::swap(&mut next, &mut cur);
    }
    next.first().copied().unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_and_question_mark() {
        assert!(matches("*", "anything.txt"));
        assert!(matches("*", "."));
        assert!(matches("*", ""));
        assert!(matches("FILLER.*", "filler.000"), "case-insensitive");
        assert!(!matches("FILLER.*", "fillers.000"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(matches("*.DOC", "chap10.doc"));
        assert!(!matches("*.DOC", "chap10.docx"));
        assert!(matches("plain", "PLAIN"));
        assert!(!matches("plain", "plains"));
    }

    #[test]
    fn dos_star_stops_at_the_last_dot() {
        assert!(matches("<.JNK", "foo.jnk"));
        assert!(matches("<.JNK", "a.b.JNK"), "earlier dots are consumed");
        assert!(!matches("<.JNK", "foo.jnk.bak"));
        assert!(!matches("<.JNK", "CHAP10.DOC"));
        assert!(matches("<", "nodot"), "no dot: like *");
        assert!(!matches("<", "a.b"), "cannot run past the last dot");
        assert!(matches("<.", "a.b."), "the last dot itself may be matched by the rest");
        assert!(matches("<b", "a.b"), "DOS_STAR may consume the last dot and stop there");
        assert!(!matches("<c", "a.bc"), "but not go further");
    }

    #[test]
    fn dos_qm_and_dos_dot() {
        assert!(matches(">>>.txt", "a.txt"), "DOS_QM matches nothing before a dot");
        assert!(matches(">>>.txt", "abc.txt"));
        assert!(!matches(">>>.txt", "abcd.txt"));
        assert!(matches("abc>>", "abc"), "DOS_QM matches nothing at the end");
        assert!(matches("a\"", "a"), "DOS_DOT matches nothing at the end");
        assert!(matches("a\"b", "a.b"));
        assert!(!matches("a\"b", "axb"));
        assert!(matches("<\"*", "readme"), "the *. translation matches names without an extension");
    }

    #[test]
    fn non_ascii_names_match_case_insensitively() {
        assert!(matches("ÉTÉ.*", "été.txt"));
        assert!(matches("?t?.txt", "été.txt"));
    }

    /// The matcher as it was before the stack path: a fresh row per
    /// pattern symbol, characters compared with `to_lowercase`. The
    /// reference the fast path is checked against.
    fn reference(pattern: &str, name: &str) -> bool {
        let p: Vec<char> = pattern.chars().collect();
        let n: Vec<char> = name.chars().collect();
        let last_dot = n.iter().rposition(|&c| c == '.');
        let width = n.len() + 1;
        let mut next = vec![false; width];
        next[width - 1] = true;
        for &pc in p.iter().rev() {
            let mut cur = vec![false; width];
            for j in (0..width).rev() {
                let at = n.get(j).copied();
                let after = |k: usize| next.get(k).copied().unwrap_or(false);
                let here_on = cur.get(j + 1).copied().unwrap_or(false);
                cur[j] = match pc {
                    '*' => after(j) || here_on,
                    '?' => at.is_some() && after(j + 1),
                    '<' => match last_dot {
                        Some(d) if j <= d => after(j) || (j < d && here_on) || (j == d && after(d + 1)),
                        _ => after(j) || here_on,
                    },
                    '>' => match at {
                        None => after(j),
                        Some('.') => after(j) || (j + 1 == n.len() && after(j + 1)),
                        Some(_) => after(j + 1),
                    },
                    '"' => match at {
                        None => after(j),
                        Some('.') => after(j + 1),
                        Some(_) => false,
                    },
                    lit => at.is_some_and(|c| c == lit || c.to_lowercase().eq(lit.to_lowercase())) && after(j + 1),
                };
            }
            next = cur;
        }
        next[0]
    }

    #[test]
    fn ascii_names_match_as_the_character_table_matches_them() {
        // Every pattern of up to 4 symbols over a small alphabet against
        // every name of up to 4 bytes: both paths must agree with the
        // reference matcher.
        let pattern_symbols = ['a', 'B', '.', '*', '?', '<', '>', '"'];
        let name_symbols = ['a', 'b', 'A', '.'];
        let all = |symbols: &[char], max: usize| {
            let mut out = vec![String::new()];
            let mut last = vec![String::new()];
            for _ in 0..max {
                last = last.iter().flat_map(|s| symbols.iter().map(move |c| format!("{s}{c}"))).collect();
                out.extend(last.iter().cloned());
            }
            out
        };
        let (patterns, names) = (all(&pattern_symbols, 4), all(&name_symbols, 4));
        let mut checked = 0;
        for p in &patterns {
            let pc: Vec<char> = p.chars().collect();
            for n in &names {
                let nc: Vec<char> = n.chars().collect();
                let (mut next, mut cur) = (vec![false; nc.len() + 1], vec![false; nc.len() + 1]);
                let general = table(&pc, &nc, &mut next, &mut cur, |a, b| a.to_lowercase().eq(b.to_lowercase()));
                let want = reference(p, n);
                assert_eq!(matches(p, n), want, "pattern {p:?} name {n:?}");
                assert_eq!(general, want, "pattern {p:?} name {n:?} (character path)");
                checked += 1;
            }
        }
        assert_eq!(checked, patterns.len() * names.len());
    }

    #[test]
    fn wildcard_detection() {
        assert!(has_wildcards("FILLER.*") && has_wildcards("<.JNK") && has_wildcards("a\"b"));
        assert!(!has_wildcards("CHAP10.DOC"));
    }
}
