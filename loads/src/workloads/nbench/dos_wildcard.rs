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

fn same_char(a: char, b: char) -> bool {
    a == b || a.to_lowercase().eq(b.to_lowercase())
}

/// Whether the file name `name` matches the DOS pattern `pattern`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let last_dot = n.iter().rposition(|&c| c == '.');
    // ok[j] after processing pattern position i: can p[i..] match n[j..]?
    // Filled from the end of the pattern backwards (dynamic programming
    // instead of Samba's backtracking, so no pattern is exponential).
    let width = n.len() + 1;
    let mut next = vec![false; width];
    if let Some(end) = next.last_mut() {
        *end = true;
    }
    for &pc in p.iter().rev() {
        let mut cur = vec![false; width];
        for j in (0..width).rev() {
            let at = n.get(j).copied();
            let after = |k: usize| next.get(k).copied().unwrap_or(false);
            cur[j] = match pc {
                '*' => after(j) || cur.get(j + 1).copied().unwrap_or(false),
                '?' => at.is_some() && after(j + 1),
                '<' => match last_dot {
                    // Up to and including the last dot, never beyond it.
                    Some(d) if j <= d => {
                        after(j) || (j < d && cur.get(j + 1).copied().unwrap_or(false)) || (j == d && after(d + 1))
                    }
                    // Past the last dot, or no dot at all: like `*`.
                    _ => after(j) || cur.get(j + 1).copied().unwrap_or(false),
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
                lit => at.is_some_and(|c| same_char(c, lit)) && after(j + 1),
            };
        }
        next = cur;
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

    #[test]
    fn wildcard_detection() {
        assert!(has_wildcards("FILLER.*") && has_wildcards("<.JNK") && has_wildcards("a\"b"));
        assert!(!has_wildcards("CHAP10.DOC"));
    }
}
