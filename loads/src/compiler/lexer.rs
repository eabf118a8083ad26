//! Tokeniser of the build workload's C-like source language. Owns turning
//! text into tokens with their line numbers; must not interpret directives
//! or macros (that is the preprocessor's job).

/// Punctuation and operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Punct {
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `,`
    Comma,
    /// `;`
    Semi,
    /// `=`
    Assign,
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `*`
    Star,
    /// `/`
    Slash,
    /// `%`
    Percent,
    /// `&`
    Amp,
    /// `|`
    Pipe,
    /// `^`
    Caret,
    /// `~`
    Tilde,
    /// `!`
    Bang,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `<=`
    Le,
    /// `>=`
    Ge,
    /// `==`
    EqEq,
    /// `!=`
    Ne,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `&&`
    AndAnd,
    /// `||`
    OrOr,
    /// `#`
    Hash,
}

/// One token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Tok {
    /// Identifier or keyword.
    Ident(String),
    /// Integer literal.
    Num(i64),
    /// A string literal (only `#include "..."` uses them).
    Str(String),
    /// Punctuation.
    Punct(Punct),
}

/// A token with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// 1-based line.
    pub line: u32,
    /// First token on its line (a `#` there starts a directive).
    pub bol: bool,
    /// Index of the file in the preprocessor's file list.
    pub file: u16,
}

/// A lexical error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LexError {
    /// A character the language does not have.
    #[error("line {line}: unexpected character {ch:?}")]
    BadChar {
        /// 1-based line.
        line: u32,
        /// The character.
        ch: char,
    },
    /// A number that does not fit in 64 bits.
    #[error("line {line}: integer literal {text} out of range")]
    BadNumber {
        /// 1-based line.
        line: u32,
        /// The literal.
        text: String,
    },
    /// `/*` without `*/`, or `"` without its closing quote.
    #[error("line {line}: unterminated {what}")]
    Unterminated {
        /// 1-based line where it started.
        line: u32,
        /// `comment` or `string`.
        what: &'static str,
    },
}

fn punct2(a: u8, b: u8) -> Option<Punct> {
    Some(match (a, b) {
        (b'<', b'=') => Punct::Le,
        (b'>', b'=') => Punct::Ge,
        (b'=', b'=') => Punct::EqEq,
        (b'!', b'=') => Punct::Ne,
        (b'<', b'<') => Punct::Shl,
        (b'>', b'>') => Punct::Shr,
        (b'&', b'&') => Punct::AndAnd,
        (b'|', b'|') => Punct::OrOr,
        _ => return None,
    })
}

fn punct1(a: u8) -> Option<Punct> {
    Some(match a {
        b'(' => Punct::LParen,
        b')' => Punct::RParen,
        b'{' => Punct::LBrace,
        b'}' => Punct::RBrace,
        b',' => Punct::Comma,
        b';' => Punct::Semi,
        b'=' => Punct::Assign,
        b'+' => Punct::Plus,
        b'-' => Punct::Minus,
        b'*' => Punct::Star,
        b'/' => Punct::Slash,
        b'%' => Punct::Percent,
        b'&' => Punct::Amp,
        b'|' => Punct::Pipe,
        b'^' => Punct::Caret,
        b'~' => Punct::Tilde,
        b'!' => Punct::Bang,
        b'<' => Punct::Lt,
        b'>' => Punct::Gt,
        b'#' => Punct::Hash,
        _ => return None,
    })
}

/// Tokenises `text`, tagging every token with `file`.
pub fn lex(text: &str, file: u16) -> Result<Vec<Token>, LexError> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len() / 4);
    let mut i = 0usize;
    let mut line = 1u32;
    let mut bol = true;
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    while i < b.len() {
        let c = at(i);
        match c {
            b'\n' => {
                line += 1;
                bol = true;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'/' if at(i + 1) == b'/' => {
                while i < b.len() && at(i) != b'\n' {
                    i += 1;
                }
            }
            b'/' if at(i + 1) == b'*' => {
                let start = line;
                i += 2;
                loop {
                    if i + 1 >= b.len() {
                        return Err(LexError::Unterminated { line: start, what: "comment" });
                    }
                    if at(i) == b'*' && at(i + 1) == b'/' {
                        i += 2;
                        break;
                    }
                    if at(i) == b'\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && at(j) != b'"' && at(j) != b'\n' {
                    j += 1;
                }
                if at(j) != b'"' {
                    return Err(LexError::Unterminated { line, what: "string" });
                }
                let s = text.get(start..j).unwrap_or_default().to_string();
                out.push(Token { tok: Tok::Str(s), line, bol, file });
                bol = false;
                i = j + 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while at(i).is_ascii_alphanumeric() || at(i) == b'_' {
                    i += 1;
                }
                let s = text.get(start..i).unwrap_or_default().to_string();
                out.push(Token { tok: Tok::Ident(s), line, bol, file });
                bol = false;
            }
            c if c.is_ascii_digit() => {
                let start = i;
                let hex = c == b'0' && (at(i + 1) == b'x' || at(i + 1) == b'X');
                if hex {
                    i += 2;
                }
                while at(i).is_ascii_hexdigit() && (hex || at(i).is_ascii_digit()) {
                    i += 1;
                }
                let s = text.get(start..i).unwrap_or_default();
                let parsed =
                    if hex { s.get(2..).and_then(|h| i64::from_str_radix(h, 16).ok()) } else { s.parse::<i64>().ok() };
                let v = parsed.ok_or_else(|| LexError::BadNumber { line, text: s.to_string() })?;
                out.push(Token { tok: Tok::Num(v), line, bol, file });
                bol = false;
            }
            _ => {
                let p = if let Some(p) = punct2(c, at(i + 1)) {
                    i += 2;
                    p
                } else if let Some(p) = punct1(c) {
                    i += 1;
                    p
                } else {
                    let ch = text.get(i..).and_then(|s| s.chars().next()).unwrap_or('?');
                    return Err(LexError::BadChar { line, ch });
                };
                out.push(Token { tok: Tok::Punct(p), line, bol, file });
                bol = false;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s, 0).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn tokens_lines_and_line_starts() {
        let t = lex("#define X 0x1f // c\nint a<=b; /* multi\nline */ y", 3).unwrap();
        assert_eq!(t[0].tok, Tok::Punct(Punct::Hash));
        assert!(t[0].bol);
        assert_eq!(t[2].tok, Tok::Ident("X".into()));
        assert!(!t[2].bol);
        assert_eq!(t[3].tok, Tok::Num(31));
        assert_eq!((t[4].line, t[4].bol), (2, true));
        assert_eq!(t[6].tok, Tok::Punct(Punct::Le));
        let y = t.last().unwrap();
        assert_eq!((y.line, y.bol, y.file), (3, false, 3));
        assert_eq!(toks("a&&b||!c>>2"), toks("a && b || ! c >> 2"));
        assert_eq!(toks("\"linux/x.h\""), vec![Tok::Str("linux/x.h".into())]);
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(lex("a\n@", 0).unwrap_err(), LexError::BadChar { line: 2, ch: '@' });
        assert!(matches!(lex("/* x", 0), Err(LexError::Unterminated { what: "comment", .. })));
        assert!(matches!(lex("99999999999999999999", 0), Err(LexError::BadNumber { .. })));
    }
}
