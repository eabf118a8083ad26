//! The kernel command line as a typed builder (after rust-vmm's
//! linux-loader `Cmdline`): every word is validated as it is added, a key
//! cannot appear twice, and the kernel's length limit is enforced. Nothing
//! here formats a command line by hand or spawns anything.

use std::fmt;

/// Errors building a kernel command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CmdlineError {
    /// A capacity of zero leaves no room even for the NUL.
    #[error("kernel cmdline capacity must be at least 1 (it counts the terminating NUL)")]
    ZeroCapacity,
    /// A key (or flag word) with characters the kernel's parser would split
    /// or misread.
    #[error("invalid kernel cmdline key '{key}': {why}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A value with characters the kernel's parser would split or misread.
    #[error("invalid value '{value}' for kernel cmdline key '{key}': {why}")]
    InvalidValue {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The key is already on the command line.
    #[error("kernel cmdline key '{key}' is already set (as '{existing}'); a key may appear only once")]
    DuplicateKey {
        /// The key being added.
        key: String,
        /// The word already present.
        existing: String,
    },
    /// Adding the word would exceed the kernel's `COMMAND_LINE_SIZE`.
    #[error(
        "kernel cmdline would be {len} bytes plus its NUL after adding '{word}', over the kernel's limit of {capacity}"
    )]
    TooLong {
        /// The word that did not fit.
        word: String,
        /// The length the command line would have had, without the NUL.
        len: usize,
        /// The capacity, including the NUL.
        capacity: usize,
    },
    /// User-supplied text with an opening `"` and no closing one.
    #[error("unterminated double quote in kernel cmdline text '{0}'")]
    UnterminatedQuote(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Param {
    key: String,
    value: Option<String>,
    quoted: bool,
}

impl Param {
    fn render(&self) -> String {
        match (&self.value, self.quoted) {
            (None, _) => self.key.clone(),
            (Some(v), false) => format!("{}={v}", self.key),
            (Some(v), true) => format!("{}=\"{v}\"", self.key),
        }
    }
}

/// A validated kernel command line.
///
/// Keys are compared the way the kernel compares parameter names, with `-`
/// and `_` equal, so `no_hz` and `no-hz` count as the same key. Words after
/// `--` are arguments for the init, rendered last and never deduplicated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCmdline {
    capacity: usize,
    params: Vec<Param>,
    init_args: Vec<String>,
    rendered: String,
}

/// Normalises a key the way the kernel's `parameq` compares names.
fn normalise(key: &str) -> String {
    key.replace('-', "_")
}

fn check_key(key: &str) -> Result<(), CmdlineError> {
    let bad = |why| Err(CmdlineError::InvalidKey { key: key.to_string(), why });
    if key.is_empty() {
        return bad("it is empty");
    }
    if key == "--" {
        return bad("'--' separates init arguments; use push_init_arg");
    }
    for c in key.chars() {
        match c {
            '"' => return bad("it contains a double quote"),
            '=' => return bad("it contains '='"),
            c if c.is_whitespace() => return bad("it contains whitespace"),
            '\0' => return bad("it contains a NUL byte"),
            c if !c.is_ascii_graphic() => return bad("it contains a character that is not printable ASCII"),
            _ => {}
        }
    }
    Ok(())
}

fn check_value(key: &str, value: &str, quoted: bool) -> Result<(), CmdlineError> {
    let bad = |why| Err(CmdlineError::InvalidValue { key: key.to_string(), value: value.to_string(), why });
    if value.is_empty() && !quoted {
        return bad("it is empty (use push_flag for a bare word, or push_quoted for an empty string)");
    }
    for c in value.chars() {
        match c {
            '"' if quoted => return bad("it contains a double quote, which the kernel cannot escape"),
            '"' => return bad("it contains a double quote (use push_quoted)"),
            '\0' => return bad("it contains a NUL byte"),
            ' ' if quoted => {}
            c if c.is_whitespace() && !quoted => return bad("it contains whitespace (use push_quoted)"),
            c if c.is_whitespace() => return bad("it contains whitespace other than spaces"),
            c if !c.is_ascii_graphic() => return bad("it contains a character that is not printable ASCII"),
            _ => {}
        }
    }
    Ok(())
}

impl KernelCmdline {
    /// An empty command line for a kernel whose buffer holds `capacity`
    /// bytes including the terminating NUL (`COMMAND_LINE_SIZE`, see
    /// [`crate::arch::COMMAND_LINE_SIZE`]).
    ///
    /// ```
    /// # use qemu::KernelCmdline;
    /// let c = KernelCmdline::new(2048).unwrap();
    /// assert_eq!(c.as_str(), "");
    /// assert!(KernelCmdline::new(0).is_err());
    /// ```
    pub fn new(capacity: usize) -> Result<KernelCmdline, CmdlineError> {
        if capacity == 0 {
            return Err(CmdlineError::ZeroCapacity);
        }
        Ok(KernelCmdline { capacity, params: Vec::new(), init_args: Vec::new(), rendered: String::new() })
    }

    /// Adds `key=value`. The value may not contain whitespace, quotes or
    /// NUL; the key may not already be present.
    ///
    /// ```
    /// # use qemu::KernelCmdline;
    /// let mut c = KernelCmdline::new(2048).unwrap();
    /// c.push("console", "ttyS0").unwrap().push("panic", "-1").unwrap();
    /// assert_eq!(c.to_string(), "console=ttyS0 panic=-1");
    /// assert!(c.push("console", "hvc0").is_err());
    /// assert!(c.push("bootbench.suite", "a b").is_err());
    /// ```
    pub fn push(&mut self, key: &str, value: &str) -> Result<&mut Self, CmdlineError> {
        check_key(key)?;
        check_value(key, value, false)?;
        self.add(Param { key: key.to_string(), value: Some(value.to_string()), quoted: false })
    }

    /// Adds `key="value"`, for a value with spaces. The value may not
    /// contain a double quote (the kernel has no escape for one), a NUL, or
    /// whitespace other than spaces.
    ///
    /// ```
    /// # use qemu::KernelCmdline;
    /// let mut c = KernelCmdline::new(2048).unwrap();
    /// c.push_quoted("bootbench.label", "before fix").unwrap();
    /// assert_eq!(c.as_str(), r#"bootbench.label="before fix""#);
    /// assert!(c.push_quoted("x", r#"say "hi""#).is_err());
    /// ```
    pub fn push_quoted(&mut self, key: &str, value: &str) -> Result<&mut Self, CmdlineError> {
        check_key(key)?;
        check_value(key, value, true)?;
        self.add(Param { key: key.to_string(), value: Some(value.to_string()), quoted: true })
    }

    /// Adds a bare word such as `quiet`.
    ///
    /// ```
    /// # use qemu::KernelCmdline;
    /// let mut c = KernelCmdline::new(2048).unwrap();
    /// c.push_flag("quiet").unwrap();
    /// assert!(c.push_flag("quiet").is_err());
    /// assert!(c.push_flag("a=b").is_err());
    /// ```
    pub fn push_flag(&mut self, word: &str) -> Result<&mut Self, CmdlineError> {
        check_key(word)?;
        self.add(Param { key: word.to_string(), value: None, quoted: false })
    }

    /// Adds a word after `--`, which the kernel passes to the init as an
    /// argument. Such words may repeat; they may not contain whitespace,
    /// quotes or NUL.
    ///
    /// ```
    /// # use qemu::KernelCmdline;
    /// let mut c = KernelCmdline::new(2048).unwrap();
    /// c.push_flag("quiet").unwrap().push_init_arg("-v").unwrap();
    /// assert_eq!(c.as_str(), "quiet -- -v");
    /// ```
    pub fn push_init_arg(&mut self, word: &str) -> Result<&mut Self, CmdlineError> {
        if word.is_empty() || word.chars().any(|c| c == '"' || !c.is_ascii_graphic()) {
            return Err(CmdlineError::InvalidKey {
                key: word.to_string(),
                why: "an init argument must be non-empty printable ASCII without spaces or quotes",
            });
        }
        let mut init_args = self.init_args.clone();
        init_args.push(word.to_string());
        let rendered = render(&self.params, &init_args);
        self.check_len(word, &rendered)?;
        self.init_args = init_args;
        self.rendered = rendered;
        Ok(self)
    }

    /// Adds user-supplied text (`--append`): split on whitespace outside
    /// double quotes, each word validated as if pushed one by one. A key
    /// already present is an error naming it. On error nothing is added.
    ///
    /// ```
    /// # use qemu::KernelCmdline;
    /// let mut c = KernelCmdline::new(2048).unwrap();
    /// c.push("console", "ttyS0").unwrap();
    /// c.extend_raw(r#"quiet mitigations=off bootbench.label="two words""#).unwrap();
    /// assert_eq!(c.as_str(), r#"console=ttyS0 quiet mitigations=off bootbench.label="two words""#);
    /// let err = c.extend_raw("console=tty0").unwrap_err();
    /// assert!(err.to_string().contains("'console'"));
    /// ```
    pub fn extend_raw(&mut self, text: &str) -> Result<&mut Self, CmdlineError> {
        let mut next = self.clone();
        let mut after_separator = false;
        for word in split_words(text)? {
            if after_separator {
                next.push_init_arg(&word.text)?;
                continue;
            }
            if word.text == "--" && !word.had_quotes {
                after_separator = true;
                continue;
            }
            match word.text.split_once('=') {
                None => next.push_flag(&word.text)?,
                Some((k, v)) if word.had_quotes || v.contains(' ') || v.is_empty() => next.push_quoted(k, v)?,
                Some((k, v)) => next.push(k, v)?,
            };
        }
        *self = next;
        Ok(self)
    }

    /// Whether `key` is present (as `key=value` or as a bare word).
    pub fn contains(&self, key: &str) -> bool {
        let k = normalise(key);
        self.params.iter().any(|p| normalise(&p.key) == k)
    }

    /// The value of `key=value`, unquoted; `None` if absent or a bare word.
    pub fn value(&self, key: &str) -> Option<&str> {
        let k = normalise(key);
        self.params.iter().find(|p| normalise(&p.key) == k).and_then(|p| p.value.as_deref())
    }

    /// The command line as the kernel will see it (without the NUL).
    pub fn as_str(&self) -> &str {
        &self.rendered
    }

    /// The capacity, including the NUL.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn add(&mut self, param: Param) -> Result<&mut Self, CmdlineError> {
        let norm = normalise(&param.key);
        if let Some(existing) = self.params.iter().find(|p| normalise(&p.key) == norm) {
            return Err(CmdlineError::DuplicateKey { key: param.key, existing: existing.render() });
        }
        let word = param.render();
        let mut params = self.params.clone();
        params.push(param);
        let rendered = render(&params, &self.init_args);
        self.check_len(&word, &rendered)?;
        self.params = params;
        self.rendered = rendered;
        Ok(self)
    }

    fn check_len(&self, word: &str, rendered: &str) -> Result<(), CmdlineError> {
        if rendered.len() + 1 > self.capacity {
            return Err(CmdlineError::TooLong { word: word.to_string(), len: rendered.len(), capacity: self.capacity });
        }
        Ok(())
    }
}

fn render(params: &[Param], init_args: &[String]) -> String {
    let mut words: Vec<String> = params.iter().map(Param::render).collect();
    if !init_args.is_empty() {
        words.push("--".to_string());
        words.extend(init_args.iter().cloned());
    }
    words.join(" ")
}

impl fmt::Display for KernelCmdline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rendered)
    }
}

impl AsRef<str> for KernelCmdline {
    fn as_ref(&self) -> &str {
        &self.rendered
    }
}

struct Word {
    text: String,
    had_quotes: bool,
}

/// Splits like the kernel's `next_arg`: whitespace ends a word except inside
/// double quotes, and the quotes themselves are dropped.
fn split_words(text: &str) -> Result<Vec<Word>, CmdlineError> {
    let mut words = Vec::new();
    let mut cur: Option<Word> = None;
    let mut in_quotes = false;
    for c in text.chars() {
        if c == '"' {
            in_quotes = !in_quotes;
            cur.get_or_insert_with(|| Word { text: String::new(), had_quotes: false }).had_quotes = true;
        } else if c.is_whitespace() && !in_quotes {
            words.extend(cur.take());
        } else {
            cur.get_or_insert_with(|| Word { text: String::new(), had_quotes: false }).text.push(c);
        }
    }
    if in_quotes {
        return Err(CmdlineError::UnterminatedQuote(text.to_string()));
    }
    words.extend(cur);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cl() -> KernelCmdline {
        KernelCmdline::new(2048).unwrap()
    }

    #[test]
    fn duplicate_key_is_refused_in_every_form() {
        let mut c = cl();
        c.push("console", "ttyS0").unwrap();
        assert!(matches!(c.push("console", "hvc0"), Err(CmdlineError::DuplicateKey { .. })));
        assert!(matches!(c.push_flag("console"), Err(CmdlineError::DuplicateKey { .. })));
        assert!(matches!(c.push_quoted("console", "a b"), Err(CmdlineError::DuplicateKey { .. })));
        c.push("no_hz_full", "1").unwrap();
        let err = c.push("no-hz-full", "2").unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel cmdline key 'no-hz-full' is already set (as 'no_hz_full=1'); a key may appear only once"
        );
        assert_eq!(c.as_str(), "console=ttyS0 no_hz_full=1");
    }

    #[test]
    fn bad_characters_are_refused() {
        let mut c = cl();
        for v in ["a b", "a\tb", "a\"b", "a\0b", "é", ""] {
            assert!(matches!(c.push("k", v), Err(CmdlineError::InvalidValue { .. })), "{v:?}");
        }
        for k in ["", "a b", "a=b", "a\"", "--", "k\n"] {
            assert!(matches!(c.push(k, "v"), Err(CmdlineError::InvalidKey { .. })), "{k:?}");
        }
        assert!(c.push_quoted("k", "a\nb").is_err());
        assert!(c.push_quoted("k", "a\"b").is_err());
        assert_eq!(c.as_str(), "");
    }

    #[test]
    fn quoting() {
        let mut c = cl();
        c.push_quoted("label", "a b  c").unwrap().push_quoted("empty", "").unwrap();
        assert_eq!(c.as_str(), r#"label="a b  c" empty="""#);
        assert_eq!(c.value("label"), Some("a b  c"));
    }

    #[test]
    fn length_limit_counts_the_nul() {
        let mut c = KernelCmdline::new(12).unwrap();
        c.push("a", "123456789").unwrap(); // 11 bytes + NUL = 12
        assert_eq!(c.as_str().len(), 11);
        let err = c.push_flag("q").unwrap_err();
        assert_eq!(err, CmdlineError::TooLong { word: "q".into(), len: 13, capacity: 12 });
        assert_eq!(c.as_str(), "a=123456789");
        let mut c = KernelCmdline::new(11).unwrap();
        assert!(c.push("a", "123456789").is_err());
    }

    #[test]
    fn extend_raw_parses_like_the_kernel() {
        let mut c = cl();
        c.push("console", "ttyS0").unwrap();
        c.extend_raw("  quiet\tloglevel=3 \"bootbench.label=x y\" k=\"\" -- init1 init1 ").unwrap();
        assert_eq!(c.as_str(), r#"console=ttyS0 quiet loglevel=3 bootbench.label="x y" k="" -- init1 init1"#);
        assert!(c.contains("quiet"));
        assert_eq!(c.value("loglevel"), Some("3"));
    }

    #[test]
    fn extend_raw_is_all_or_nothing() {
        let mut c = cl();
        c.push("console", "ttyS0").unwrap();
        let before = c.clone();
        let err = c.extend_raw("quiet panic=10 console=tty0").unwrap_err();
        assert!(matches!(&err, CmdlineError::DuplicateKey { key, .. } if key == "console"), "{err}");
        assert_eq!(c, before);
        assert_eq!(c.extend_raw("a=\"open").unwrap_err(), CmdlineError::UnterminatedQuote("a=\"open".into()));
        assert!(matches!(c.extend_raw("quiet quiet"), Err(CmdlineError::DuplicateKey { .. })));
        assert_eq!(c, before);
    }
}
