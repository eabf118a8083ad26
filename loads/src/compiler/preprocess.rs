//! The preprocessor: `#include "..."` (searched beside the including file,
//! then in the `-I` directories), object-like and function-like `#define`,
//! `#undef`, and `#ifdef`/`#ifndef`/`#else`/`#endif`. Every include is a
//! real open and read of a file, as in a compiler. Owns macro expansion;
//! must not parse the language itself.

use super::lexer::{lex, LexError, Punct, Tok, Token};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Deepest include nesting accepted (guards against include cycles
/// without guards).
const MAX_INCLUDE_DEPTH: usize = 64;

/// Errors while preprocessing.
#[derive(Debug, thiserror::Error)]
pub enum PreprocessError {
    /// A source or header cannot be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A lexical error in a file.
    #[error("{path}")]
    Lex {
        /// The file.
        path: PathBuf,
        /// What the lexer found.
        #[source]
        source: LexError,
    },
    /// An `#include` that no search directory satisfies.
    #[error("{path}:{line}: included file \"{name}\" not found")]
    IncludeNotFound {
        /// The including file.
        path: PathBuf,
        /// Its line.
        line: u32,
        /// The name as written.
        name: String,
    },
    /// A malformed or unknown directive.
    #[error("{path}:{line}: {what}")]
    Directive {
        /// The file.
        path: PathBuf,
        /// Its line.
        line: u32,
        /// What is wrong.
        what: String,
    },
    /// `#if...` without `#endif` at the end of a file.
    #[error("{path}: unterminated conditional")]
    Unterminated {
        /// The file.
        path: PathBuf,
    },
    /// Includes nested deeper than [`MAX_INCLUDE_DEPTH`].
    #[error("{path}: includes nested deeper than {MAX_INCLUDE_DEPTH}")]
    TooDeep {
        /// The file at which the limit was hit.
        path: PathBuf,
    },
    /// A function-like macro called with the wrong number of arguments.
    #[error("{path}:{line}: macro {name} takes {want} arguments, got {got}")]
    MacroArgs {
        /// The file.
        path: PathBuf,
        /// Its line.
        line: u32,
        /// The macro.
        name: String,
        /// Parameters it has.
        want: usize,
        /// Arguments given.
        got: usize,
    },
}

#[derive(Debug, Clone)]
enum Macro {
    Object(Vec<Tok>),
    Function { params: Vec<String>, body: Vec<Tok> },
}

/// The result of preprocessing one translation unit.
#[derive(Debug, Default)]
pub struct Preprocessed {
    /// The expanded token stream.
    pub tokens: Vec<Token>,
    /// Every file read, index = `Token::file`.
    pub files: Vec<PathBuf>,
    /// Bytes of source read.
    pub bytes_read: u64,
    /// `#include` directives followed (including those skipped by guards).
    pub includes: u32,
    /// Macro expansions performed.
    pub expansions: u64,
}

/// Preprocesses one translation unit.
pub struct Preprocessor<'a> {
    include_dirs: &'a [PathBuf],
    macros: HashMap<String, Macro>,
    out: Preprocessed,
}

struct Cond {
    active: bool,
    parent_active: bool,
    seen_else: bool,
}

impl<'a> Preprocessor<'a> {
    /// A preprocessor searching `include_dirs` after the including file's
    /// own directory.
    pub fn new(include_dirs: &'a [PathBuf]) -> Self {
        Preprocessor { include_dirs, macros: HashMap::new(), out: Preprocessed::default() }
    }

    /// Preprocesses `path` and everything it includes.
    pub fn run(mut self, path: &Path) -> Result<Preprocessed, PreprocessError> {
        self.file(path, 0)?;
        Ok(self.out)
    }

    fn file(&mut self, path: &Path, depth: usize) -> Result<(), PreprocessError> {
        if depth > MAX_INCLUDE_DEPTH {
            return Err(PreprocessError::TooDeep { path: path.to_path_buf() });
        }
        let text =
            std::fs::read_to_string(path).map_err(|source| PreprocessError::Read { path: path.into(), source })?;
        self.out.bytes_read += text.len() as u64;
        let idx = u16::try_from(self.out.files.len()).unwrap_or(u16::MAX);
        self.out.files.push(path.to_path_buf());
        let toks = lex(&text, idx).map_err(|source| PreprocessError::Lex { path: path.into(), source })?;
        drop(text);
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut conds: Vec<Cond> = Vec::new();
        let mut chunk: Vec<Token> = Vec::new();
        let mut i = 0usize;
        while let Some(t) = toks.get(i) {
            if t.bol && t.tok == Tok::Punct(Punct::Hash) {
                let line = t.line;
                let mut j = i + 1;
                while toks.get(j).is_some_and(|n| n.line == line) {
                    j += 1;
                }
                let directive = toks.get(i + 1..j).unwrap_or_default();
                i = j;
                let active = conds.last().is_none_or(|c| c.active);
                if active && !chunk.is_empty() {
                    let c = std::mem::take(&mut chunk);
                    self.expand(&c, &mut Vec::new(), path)?;
                }
                self.directive(directive, line, path, &dir, depth, &mut conds, active)?;
                continue;
            }
            if conds.last().is_none_or(|c| c.active) {
                chunk.push(t.clone());
            }
            i += 1;
        }
        if !conds.is_empty() {
            return Err(PreprocessError::Unterminated { path: path.into() });
        }
        if !chunk.is_empty() {
            self.expand(&chunk, &mut Vec::new(), path)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn directive(
        &mut self,
        d: &[Token],
        line: u32,
        path: &Path,
        dir: &Path,
        depth: usize,
        conds: &mut Vec<Cond>,
        active: bool,
    ) -> Result<(), PreprocessError> {
        let bad = |what: &str| PreprocessError::Directive { path: path.into(), line, what: what.to_string() };
        let name = match d.first().map(|t| &t.tok) {
            Some(Tok::Ident(n)) => n.as_str(),
            _ => return Err(bad("expected a directive name after #")),
        };
        let ident_arg = || match d.get(1).map(|t| &t.tok) {
            Some(Tok::Ident(n)) => Ok(n.clone()),
            _ => Err(bad(&format!("#{name} needs a macro name"))),
        };
        match name {
            "ifdef" | "ifndef" => {
                let defined = self.macros.contains_key(&ident_arg()?);
                let want = name == "ifdef";
                conds.push(Cond { active: active && defined == want, parent_active: active, seen_else: false });
            }
            "else" => {
                let c = conds.last_mut().ok_or_else(|| bad("#else without #if"))?;
                if c.seen_else {
                    return Err(bad("second #else"));
                }
                c.seen_else = true;
                c.active = c.parent_active && !c.active;
            }
            "endif" => {
                conds.pop().ok_or_else(|| bad("#endif without #if"))?;
            }
            _ if !active => {}
            "include" => {
                let inc = match d.get(1).map(|t| &t.tok) {
                    Some(Tok::Str(s)) => s.clone(),
                    _ => return Err(bad("#include expects \"file\"")),
                };
                self.out.includes += 1;
                let found = std::iter::once(dir)
                    .chain(self.include_dirs.iter().map(PathBuf::as_path))
                    .map(|d| d.join(&inc))
                    .find(|p| p.is_file())
                    .ok_or_else(|| PreprocessError::IncludeNotFound { path: path.into(), line, name: inc.clone() })?;
                self.file(&found, depth + 1)?;
            }
            "define" => {
                let mname = ident_arg()?;
                let rest = d.get(2..).unwrap_or_default();
                // A function-like macro has its `(` right after the name; the
                // generator never puts a space there, and the lexer cannot
                // see spaces, so any `(` directly following counts.
                let m = match rest.first().map(|t| &t.tok) {
                    Some(Tok::Punct(Punct::LParen)) => {
                        let mut params = Vec::new();
                        let mut k = 1;
                        loop {
                            match rest.get(k).map(|t| &t.tok) {
                                Some(Tok::Ident(p)) => params.push(p.clone()),
                                Some(Tok::Punct(Punct::RParen)) if params.is_empty() => break,
                                _ => return Err(bad(&format!("bad parameter list of macro {mname}"))),
                            }
                            match rest.get(k + 1).map(|t| &t.tok) {
                                Some(Tok::Punct(Punct::Comma)) => k += 2,
                                Some(Tok::Punct(Punct::RParen)) => {
                                    k += 1;
                                    break;
                                }
                                _ => return Err(bad(&format!("bad parameter list of macro {mname}"))),
                            }
                        }
                        let body = rest.get(k + 1..).unwrap_or_default().iter().map(|t| t.tok.clone()).collect();
                        Macro::Function { params, body }
                    }
                    _ => Macro::Object(rest.iter().map(|t| t.tok.clone()).collect()),
                };
                self.macros.insert(mname, m);
            }
            "undef" => {
                self.macros.remove(&ident_arg()?);
            }
            other => return Err(bad(&format!("unknown directive #{other}"))),
        }
        Ok(())
    }

    /// Expands macros in `toks` into the output, not re-expanding any macro
    /// in `active` (the ones being expanded), as C's rescanning rule says.
    fn expand(&mut self, toks: &[Token], active: &mut Vec<String>, path: &Path) -> Result<(), PreprocessError> {
        let mut out = Vec::with_capacity(toks.len());
        self.expand_into(toks, active, path, &mut out)?;
        self.out.tokens.append(&mut out);
        Ok(())
    }

    fn expand_into(
        &mut self,
        toks: &[Token],
        active: &mut Vec<String>,
        path: &Path,
        out: &mut Vec<Token>,
    ) -> Result<(), PreprocessError> {
        let mut i = 0usize;
        while let Some(t) = toks.get(i) {
            let name = match &t.tok {
                Tok::Ident(n) if !active.contains(n) => n,
                _ => {
                    out.push(t.clone());
                    i += 1;
                    continue;
                }
            };
            let Some(m) = self.macros.get(name).cloned() else {
                out.push(t.clone());
                i += 1;
                continue;
            };
            let at = |tok: &Tok| Token { tok: tok.clone(), line: t.line, bol: false, file: t.file };
            match m {
                Macro::Object(body) => {
                    self.out.expansions += 1;
                    let body: Vec<Token> = body.iter().map(at).collect();
                    active.push(name.clone());
                    self.expand_into(&body, active, path, out)?;
                    active.pop();
                    i += 1;
                }
                Macro::Function { params, body } => {
                    if toks.get(i + 1).map(|n| &n.tok) != Some(&Tok::Punct(Punct::LParen)) {
                        // A function-like macro's name without a call is
                        // an ordinary identifier.
                        out.push(t.clone());
                        i += 1;
                        continue;
                    }
                    let (args, next) = split_args(toks, i + 2);
                    let args = match args {
                        Some(a) => a,
                        None => {
                            return Err(PreprocessError::Directive {
                                path: path.into(),
                                line: t.line,
                                what: format!("unterminated call of macro {name}"),
                            })
                        }
                    };
                    let got =
                        if args.len() == 1 && args.first().is_some_and(|a| a.is_empty()) { 0 } else { args.len() };
                    if got != params.len() {
                        return Err(PreprocessError::MacroArgs {
                            path: path.into(),
                            line: t.line,
                            name: name.clone(),
                            want: params.len(),
                            got,
                        });
                    }
                    self.out.expansions += 1;
                    // Arguments are fully expanded before substitution.
                    let mut expanded_args = Vec::with_capacity(args.len());
                    for a in &args {
                        let mut e = Vec::new();
                        self.expand_into(a, active, path, &mut e)?;
                        expanded_args.push(e);
                    }
                    let mut subst = Vec::with_capacity(body.len() * 2);
                    for bt in &body {
                        match bt {
                            Tok::Ident(p) => match params.iter().position(|q| q == p) {
                                Some(k) => subst.extend(expanded_args.get(k).into_iter().flatten().cloned()),
                                None => subst.push(at(bt)),
                            },
                            _ => subst.push(at(bt)),
                        }
                    }
                    active.push(name.clone());
                    self.expand_into(&subst, active, path, out)?;
                    active.pop();
                    i = next;
                }
            }
        }
        Ok(())
    }
}

/// Splits macro arguments starting after the `(` at `start`; returns the
/// arguments and the index after the closing `)`, or `None` when the call
/// is unterminated.
fn split_args(toks: &[Token], start: usize) -> (Option<Vec<Vec<Token>>>, usize) {
    let mut args = vec![Vec::new()];
    let mut depth = 0usize;
    let mut i = start;
    while let Some(t) = toks.get(i) {
        match t.tok {
            Tok::Punct(Punct::LParen) => depth += 1,
            Tok::Punct(Punct::RParen) if depth == 0 => return (Some(args), i + 1),
            Tok::Punct(Punct::RParen) => depth -= 1,
            Tok::Punct(Punct::Comma) if depth == 0 => {
                args.push(Vec::new());
                i += 1;
                continue;
            }
            _ => {}
        }
        if let Some(a) = args.last_mut() {
            a.push(t.clone());
        }
        i += 1;
    }
    (None, i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn defined(p: &Preprocessor<'_>) -> HashSet<String> {
        p.macros.keys().cloned().collect()
    }

    fn texts(p: &Preprocessed) -> String {
        p.tokens
            .iter()
            .map(|t| match &t.tok {
                Tok::Ident(s) => s.clone(),
                Tok::Num(n) => n.to_string(),
                Tok::Str(s) => format!("{s:?}"),
                Tok::Punct(p) => format!("{p:?}"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn includes_guards_and_macros() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("include/linux")).unwrap();
        std::fs::write(
            d.path().join("include/linux/a.h"),
            "#ifndef A_H\n#define A_H\n#define LIMIT 4\n#define TWICE(x) ((x) + (x))\n#define SELF SELF\nint a;\n#endif\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("include/linux/b.h"),
            "#ifndef B_H\n#define B_H\n#include \"linux/a.h\"\n#ifdef NOPE\nbroken ( ;\n#else\nint b;\n#endif\n#endif\n",
        )
        .unwrap();
        let src = d.path().join("x.c");
        std::fs::write(&src, "#include \"linux/a.h\"\n#include \"linux/b.h\"\nint y = TWICE(LIMIT) + SELF + TWICE;\n")
            .unwrap();
        let inc = vec![d.path().join("include")];
        let p = Preprocessor::new(&inc).run(&src).unwrap();
        assert_eq!(
            texts(&p),
            "int a Semi int b Semi int y Assign LParen LParen 4 RParen Plus LParen 4 RParen RParen Plus SELF Plus TWICE Semi"
        );
        assert_eq!(p.files.len(), 4, "a.h is read twice: the guard skips its body the second time");
        assert_eq!(p.includes, 3);
        assert!(p.bytes_read > 100);
    }

    #[test]
    fn errors_name_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("x.c");
        std::fs::write(&src, "int a;\n#include \"missing.h\"\n").unwrap();
        let e = Preprocessor::new(&[]).run(&src).unwrap_err().to_string();
        assert!(e.contains("x.c:2") && e.contains("missing.h"), "{e}");
        std::fs::write(&src, "#define F(a,b) a\nint x = F(1);\n").unwrap();
        let e = Preprocessor::new(&[]).run(&src).unwrap_err().to_string();
        assert!(e.contains("x.c:2") && e.contains("takes 2 arguments, got 1"), "{e}");
        std::fs::write(&src, "#ifdef X\n").unwrap();
        assert!(matches!(Preprocessor::new(&[]).run(&src), Err(PreprocessError::Unterminated { .. })));
        std::fs::write(&src, "#pragma once\n").unwrap();
        let e = Preprocessor::new(&[]).run(&src).unwrap_err().to_string();
        assert!(e.contains("unknown directive #pragma"), "{e}");
        std::fs::write(&src, "#include \"x.c\"\n").unwrap();
        assert!(matches!(Preprocessor::new(&[]).run(&src), Err(PreprocessError::TooDeep { .. })));
    }

    #[test]
    fn undef_removes() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("x.c");
        std::fs::write(&src, "#define A 1\n#define B 2\n#undef A\n").unwrap();
        let inc = vec![];
        let mut p = Preprocessor::new(&inc);
        p.file(&src, 0).unwrap();
        assert_eq!(defined(&p), HashSet::from(["B".to_string()]));
    }
}
