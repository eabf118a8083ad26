//! The loadfile text format: lines split into fields, C integer literals,
//! timestamps and operation arguments checked and turned into typed
//! operations, every error naming the loadfile and the line. It must not
//! depend on anything that replays a loadfile.

use super::operations::{Line, Loadfile, NtStatus, Op, OpKind, Origin, FILE_OVERWRITE_IF};
use super::paths::{PathProblem, SmbPath};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Largest ReadX/WriteX size accepted (dbench's own buffers are 64 KiB-ish;
/// this only stops a corrupt line from allocating gigabytes).
pub const MAX_IO_SIZE: u32 = 16 * 1024 * 1024;

/// Errors while reading or parsing a loadfile. Every parse error names the
/// loadfile and the 1-based line number.
#[derive(Debug, thiserror::Error)]
pub enum LoadfileError {
    /// The file could not be read.
    #[error("cannot read loadfile {path} (in a guest: the image holds the loadfiles of the suite it was built with; a suite chosen on the kernel cmdline needs an image built with it)")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not UTF-8 text.
    #[error("loadfile {name} line {line} is not UTF-8 text")]
    NotText {
        /// Loadfile name.
        name: String,
        /// Line number.
        line: u32,
    },
    /// A client read other text than was checked before the run.
    #[error("loadfile {name} changed during the run: a pass read {read} bytes where {checked} were checked")]
    Changed {
        /// Loadfile name.
        name: String,
        /// Bytes the pass read.
        read: u64,
        /// Bytes checked before the run.
        checked: u64,
    },
    /// A client could not parse a line that parsed before the run.
    #[error("loadfile {name} changed during the run: line {line} no longer parses as it did before the run")]
    ChangedLine {
        /// Loadfile name.
        name: String,
        /// Line number.
        line: u32,
        /// What is wrong with it now.
        #[source]
        source: Box<LoadfileError>,
    },
    /// The file has no operation at all.
    #[error("loadfile {name} has no operations")]
    Empty {
        /// Loadfile name.
        name: String,
    },
    /// A line does not have the shape its operation needs.
    #[error("loadfile {name} line {line}: {why}: '{text}'")]
    Malformed {
        /// Loadfile name.
        name: String,
        /// Line number.
        line: u32,
        /// What is wrong.
        why: String,
        /// The line (shortened).
        text: String,
    },
    /// An operation this replay does not know.
    #[error("loadfile {name} line {line}: unknown operation '{op}' (known: {known})", known = OpKind::loadfile_names())]
    UnknownOp {
        /// Loadfile name.
        name: String,
        /// Line number.
        line: u32,
        /// The operation as written.
        op: String,
    },
    /// The last field is not an NT status.
    #[error("loadfile {name} line {line}: '{status}' is not an NT status (expected NT_STATUS_NAME or 0xHEX)")]
    BadStatus {
        /// Loadfile name.
        name: String,
        /// Line number.
        line: u32,
        /// The field as written.
        status: String,
    },
    /// A path that would leave the client's directory or name another
    /// client's (see `paths` for the rule).
    #[error("loadfile {name} line {line}: path '{path}' {why}")]
    Escape {
        /// Loadfile name.
        name: String,
        /// Line number.
        line: u32,
        /// The path as written.
        path: String,
        /// Which part of the rule it breaks.
        why: &'static str,
    },
    /// An operation that would change something outside the client's
    /// directory (see `paths` for what may be done there).
    #[error(
        "loadfile {name} line {line}: {op} '{path}' is outside the client's directory \\clients\\client1, \
         where a line may only look, make a directory or open one"
    )]
    OutsideClientDir {
        /// Loadfile name.
        name: String,
        /// Line number.
        line: u32,
        /// Operation.
        op: &'static str,
        /// The path, normalised.
        path: String,
    },
    /// A dbench 1 loadfile (`SMB...` operations), which this format is not.
    #[error(
        "loadfile {name} line {line}: '{op}' is a dbench 1 operation; only the NBENCH format of dbench 3/4 is read"
    )]
    OldFormat {
        /// Loadfile name.
        name: String,
        /// Line number.
        line: u32,
        /// The operation.
        op: String,
    },
}

impl Loadfile {
    /// Reads and parses the loadfile at `path`; clients read it again
    /// from there.
    pub fn read(path: &Path) -> Result<Loadfile, LoadfileError> {
        let bytes = std::fs::read(path).map_err(|source| LoadfileError::Read { path: path.to_path_buf(), source })?;
        Loadfile::parse_as(&path.display().to_string(), &bytes, Origin::File(path.to_path_buf()))
    }

    /// Parses loadfile text held in memory; `name` is used in errors and
    /// results.
    pub fn parse(name: &str, bytes: &[u8]) -> Result<Loadfile, LoadfileError> {
        Loadfile::parse_as(name, bytes, Origin::Text(bytes.into()))
    }

    fn parse_as(name: &str, bytes: &[u8], origin: Origin) -> Result<Loadfile, LoadfileError> {
        let sha256 = hex::encode(Sha256::digest(bytes));
        let mut lines = Vec::new();
        for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let number = u32::try_from(i + 1).unwrap_or(u32::MAX);
            if let Some(line) = parse_raw_line(name, number, raw)? {
                lines.push(line);
            }
        }
        if lines.iter().all(|l| matches!(l.op, Op::Sleep { .. })) {
            return Err(LoadfileError::Empty { name: name.to_string() });
        }
        Ok(Loadfile { name: name.to_string(), sha256, lines, origin, text_len: bytes.len() as u64 })
    }
}

/// Parses one line's bytes (without its newline); `None` for a blank or
/// comment line.
pub(super) fn parse_raw_line(name: &str, number: u32, raw: &[u8]) -> Result<Option<Line>, LoadfileError> {
    let text = std::str::from_utf8(raw).map_err(|_| LoadfileError::NotText { name: name.to_string(), line: number })?;
    parse_line(name, number, text)
}

/// Most fields a line may have: dbench reads at most 19; the longest
/// operation takes 7 with a timestamp.
const MAX_FIELDS: usize = 19;

/// A line's fields, held on the stack (a client parses every line again
/// on every pass, so this costs what dbench's fixed parameter buffers do).
struct Fields<'a> {
    all: [&'a str; MAX_FIELDS],
    len: usize,
    /// More fields followed than are kept; the line is refused once its
    /// operation is known, so the error can name it.
    overflow: bool,
}

impl<'a> Fields<'a> {
    fn push(&mut self, field: &'a str) {
        match self.all.get_mut(self.len) {
            Some(slot) => {
                *slot = field;
                self.len += 1;
            }
            None => self.overflow = true,
        }
    }

    fn as_slice(&self) -> &[&'a str] {
        self.all.get(..self.len).unwrap_or_default()
    }
}

/// Splits a line into fields: whitespace-separated, and a field that starts
/// with `"` runs to the next `"` that ends the field (followed by
/// whitespace or the end), so a DOS_DOT wildcard `"` can sit inside it.
fn fields(text: &str) -> Result<Fields<'_>, &'static str> {
    let mut out = Fields { all: [""; MAX_FIELDS], len: 0, overflow: false };
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        if let Some(body) = rest.strip_prefix('"') {
            let mut end = None;
            for (i, c) in body.char_indices() {
                if c == '"' {
                    let after = body.get(i + 1..).unwrap_or("");
                    if after.is_empty() || after.starts_with(char::is_whitespace) {
                        end = Some(i);
                        break;
                    }
                }
            }
            let end = end.ok_or("unterminated quoted field")?;
            out.push(body.get(..end).unwrap_or(""));
            rest = body.get(end + 1..).unwrap_or("").trim_start();
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            out.push(rest.get(..end).unwrap_or(""));
            rest = rest.get(end..).unwrap_or("").trim_start();
        }
    }
    Ok(out)
}

/// A C integer literal as `strtol(s, NULL, 0)` reads it, but the whole
/// field must be the number.
pub fn c_integer(field: &str) -> Option<i64> {
    let (neg, body) = match field.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, field.strip_prefix('+').unwrap_or(field)),
    };
    let (radix, digits) = if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        (16, hex)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, body.get(1..)?)
    } else {
        (10, body)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i64::from_str_radix(digits, radix).ok()?;
    Some(if neg { -magnitude } else { magnitude })
}

struct LineParser<'a> {
    name: &'a str,
    number: u32,
    text: &'a str,
}

impl LineParser<'_> {
    fn malformed(&self, why: impl Into<String>) -> LoadfileError {
        let mut text: String = self.text.trim().chars().take(120).collect();
        if self.text.trim().chars().count() > 120 {
            text.push_str("...");
        }
        LoadfileError::Malformed { name: self.name.to_string(), line: self.number, why: why.into(), text }
    }

    fn int(&self, field: &str, what: &str) -> Result<i64, LoadfileError> {
        c_integer(field).ok_or_else(|| self.malformed(format!("{what} '{field}' is not a number")))
    }

    fn unsigned<T: TryFrom<i64>>(&self, field: &str, what: &str) -> Result<T, LoadfileError> {
        let v = self.int(field, what)?;
        T::try_from(v).map_err(|_| self.malformed(format!("{what} {v} is out of range")))
    }

    fn io_size(&self, field: &str, what: &str) -> Result<u32, LoadfileError> {
        let v: u32 = self.unsigned(field, what)?;
        if v > MAX_IO_SIZE {
            return Err(self.malformed(format!("{what} {v} exceeds {MAX_IO_SIZE} bytes")));
        }
        Ok(v)
    }

    fn path(&self, field: &str, wildcards_in_last_only: bool) -> Result<SmbPath, LoadfileError> {
        let p = SmbPath::parse(field).map_err(|problem| match problem {
            PathProblem::AboveRoot | PathProblem::LeavesClient | PathProblem::OtherClient => LoadfileError::Escape {
                name: self.name.to_string(),
                line: self.number,
                path: field.to_string(),
                why: problem.why(),
            },
            PathProblem::NotAbsolute | PathProblem::Root => self.malformed(format!("path '{field}' {}", problem.why())),
            PathProblem::Nul => self.malformed("path holds a NUL byte"),
        })?;
        if wildcards_in_last_only {
            let s = p.as_str();
            let parent = s.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
            if super::super::dos_wildcard::has_wildcards(parent) {
                return Err(self.malformed(format!("wildcards in '{field}' outside its last component")));
            }
        }
        Ok(p)
    }
}

fn parse_line(name: &str, number: u32, text: &str) -> Result<Option<Line>, LoadfileError> {
    let text = text.strip_suffix('\r').unwrap_or(text);
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Ok(None);
    }
    let p = LineParser { name, number, text };
    let fields = fields(text).map_err(|why| p.malformed(why))?;
    let all = fields.as_slice();
    let (at_s, f) = match all.first() {
        Some(first) if first.starts_with(|c: char| c.is_ascii_digit()) => {
            let t: f64 = first.parse().map_err(|_| p.malformed(format!("timestamp '{first}' is not a number")))?;
            if !t.is_finite() || t < 0.0 {
                return Err(p.malformed(format!("timestamp '{first}' is not a time")));
            }
            (Some(t), all.get(1..).unwrap_or_default())
        }
        _ => (None, all),
    };
    let (Some(op_field), Some(status_field)) = (f.first(), f.last()) else {
        return Err(p.malformed("no operation"));
    };
    if op_field.len() >= 3 && op_field.get(..3).is_some_and(|s| s.eq_ignore_ascii_case("SMB")) {
        return Err(LoadfileError::OldFormat { name: name.to_string(), line: number, op: op_field.to_string() });
    }
    let kind = OpKind::from_field(op_field).ok_or_else(|| LoadfileError::UnknownOp {
        name: name.to_string(),
        line: number,
        op: op_field.to_string(),
    })?;
    if fields.overflow {
        return Err(p.malformed(format!("{} has more than {MAX_FIELDS} fields", kind.loadfile_name())));
    }
    if f.len() < 2 {
        return Err(p.malformed(format!("{} needs an NT status as its last field", kind.loadfile_name())));
    }
    let status = NtStatus::parse(status_field).ok_or_else(|| LoadfileError::BadStatus {
        name: name.to_string(),
        line: number,
        status: status_field.to_string(),
    })?;
    let args = f.get(1..f.len() - 1).unwrap_or_default();
    let want = |n: &[usize], usage: &str| -> Result<(), LoadfileError> {
        if n.contains(&args.len()) {
            Ok(())
        } else {
            Err(p.malformed(format!("{} takes {usage}", kind.loadfile_name())))
        }
    };
    let arg = |i: usize| args.get(i).copied().unwrap_or("");
    let op = match kind {
        OpKind::NtCreateX => {
            want(&[4], "PATH CREATE_OPTIONS DISPOSITION HANDLE STATUS")?;
            let disposition = p.unsigned(arg(2), "create disposition")?;
            if disposition > FILE_OVERWRITE_IF {
                return Err(p.malformed(format!("create disposition {disposition} is not one of 0..5")));
            }
            Op::NtCreateX {
                path: p.path(arg(0), false)?,
                create_options: p.unsigned(arg(1), "create options")?,
                disposition,
                handle: p.int(arg(3), "handle")?,
            }
        }
        OpKind::Close => {
            want(&[1], "HANDLE STATUS")?;
            Op::Close { handle: p.int(arg(0), "handle")? }
        }
        OpKind::Rename => {
            want(&[2], "OLD NEW STATUS")?;
            Op::Rename { from: p.path(arg(0), false)?, to: p.path(arg(1), false)? }
        }
        OpKind::Unlink => {
            want(&[1, 2], "PATH [ATTRIBUTES] STATUS")?;
            let attributes = if args.len() == 2 { p.unsigned(arg(1), "attributes")? } else { 0 };
            Op::Unlink { path: p.path(arg(0), false)?, attributes }
        }
        OpKind::Deltree => {
            want(&[1], "PATH STATUS")?;
            Op::Deltree { path: p.path(arg(0), false)? }
        }
        OpKind::Rmdir => {
            want(&[1], "PATH STATUS")?;
            Op::Rmdir { path: p.path(arg(0), false)? }
        }
        OpKind::Mkdir => {
            want(&[1], "PATH STATUS")?;
            Op::Mkdir { path: p.path(arg(0), false)? }
        }
        OpKind::Qpathinfo => {
            want(&[2], "PATH LEVEL STATUS")?;
            Op::QueryPathInfo { path: p.path(arg(0), false)?, level: p.unsigned(arg(1), "level")? }
        }
        OpKind::Qfileinfo => {
            want(&[2], "HANDLE LEVEL STATUS")?;
            Op::QueryFileInfo { handle: p.int(arg(0), "handle")?, level: p.unsigned(arg(1), "level")? }
        }
        OpKind::Qfsinfo => {
            want(&[1], "LEVEL STATUS")?;
            Op::QueryFsInfo { level: p.unsigned(arg(0), "level")? }
        }
        OpKind::Sfileinfo => {
            want(&[2], "HANDLE LEVEL STATUS")?;
            Op::SetFileInfo { handle: p.int(arg(0), "handle")?, level: p.unsigned(arg(1), "level")? }
        }
        OpKind::Find => {
            want(&[4], "PATTERN LEVEL MAX_COUNT COUNT STATUS")?;
            Op::FindFirst {
                pattern: p.path(arg(0), true)?,
                level: p.unsigned(arg(1), "level")?,
                max_count: p.unsigned(arg(2), "max count")?,
                count: p.unsigned(arg(3), "count")?,
            }
        }
        OpKind::WriteX | OpKind::ReadX => {
            want(&[4], "HANDLE OFFSET SIZE RET_SIZE STATUS")?;
            let handle = p.int(arg(0), "handle")?;
            let offset = p.unsigned(arg(1), "offset")?;
            let size = p.io_size(arg(2), "size")?;
            let ret_size = p.io_size(arg(3), "returned size")?;
            if kind == OpKind::WriteX {
                Op::WriteX { handle, offset, size, ret_size }
            } else {
                Op::ReadX { handle, offset, size, ret_size }
            }
        }
        OpKind::LockX | OpKind::UnlockX => {
            want(&[3], "HANDLE OFFSET SIZE STATUS")?;
            let handle = p.int(arg(0), "handle")?;
            let offset = p.unsigned(arg(1), "offset")?;
            let size = p.unsigned(arg(2), "size")?;
            if kind == OpKind::LockX {
                Op::LockX { handle, offset, size }
            } else {
                Op::UnlockX { handle, offset, size }
            }
        }
        OpKind::Flush => {
            want(&[1], "HANDLE STATUS")?;
            Op::Flush { handle: p.int(arg(0), "handle")? }
        }
        OpKind::Sleep => {
            want(&[1], "MICROSECONDS STATUS")?;
            Op::Sleep { micros: p.unsigned(arg(0), "sleep time")? }
        }
    };
    if let Some(path) = op.outside_client_dir() {
        return Err(LoadfileError::OutsideClientDir {
            name: name.to_string(),
            line: number,
            op: kind.loadfile_name(),
            path: path.to_string(),
        });
    }
    Ok(Some(Line { number, at_s, op, status }))
}
