//! NBENCH loadfiles: dbench's text format (one operation per line, SMB-style
//! absolute paths, the expected NT status last) parsed into typed operations
//! with normalised paths. Owns the syntax and path containment; it does no
//! I/O on a work directory and knows nothing about timing or clients.
//!
//! The format is the one dbench 3/4 reads, e.g. Debian's
//! `/usr/share/dbench/client.txt`:
//! ```text
//! NTCreateX "\clients\client1\~dmtmp\WORD\CHAP10.DOC" 0x40 0x2 9938 NT_STATUS_OK
//! ReadX 9938 0 4096 4096 NT_STATUS_OK
//! ```
//! - Operation names compare case-insensitively, as dbench's `strcasecmp`
//!   does; dbench's short display names (`Qpathinfo`, `Find`, ...) are
//!   accepted too.
//! - Numbers are C literals as `strtol(s, NULL, 0)` reads them (`0x40`,
//!   `010` octal, `-1`), but the whole token must be a number.
//! - A line may start with a timestamp (seconds since the loop started); the
//!   replay then paces itself to it, as dbench does.
//! - Blank lines and lines starting with `#` are skipped. Anything else that
//!   does not parse is an error naming the line: dbench skips some such lines
//!   with a warning, but a benchmark that silently skips work measures
//!   something else.
//! - Paths are split on `\` (and `/`), `.` is dropped and `..` climbs one
//!   level; a `..` that would climb above the client's directory is refused.
//!   A component equal to `client1` names "this client" and is replaced per
//!   client at replay time (dbench substitutes the same string).

use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};

/// The path component that stands for "this client" in a loadfile.
pub const CLIENT_PLACEHOLDER: &str = "client1";

/// Largest ReadX/WriteX size accepted (dbench's own buffers are 64 KiB-ish;
/// this only stops a corrupt line from allocating gigabytes).
pub const MAX_IO_SIZE: u32 = 16 * 1024 * 1024;

/// Errors while reading or parsing a loadfile. Every parse error names the
/// loadfile and the 1-based line number.
#[derive(Debug, thiserror::Error)]
pub enum LoadfileError {
    /// The file could not be read.
    #[error("cannot read loadfile {path}")]
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
    /// A path that would leave the client's directory.
    #[error("loadfile {name} line {line}: path '{path}' leaves the client's directory")]
    Escape {
        /// Loadfile name.
        name: String,
        /// Line number.
        line: u32,
        /// The path as written.
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

/// The status a line expects. dbench checks success against failure (any
/// status other than `NT_STATUS_OK` means "this call must fail"); the name is
/// kept for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NtStatus {
    /// `NT_STATUS_OK` (or `0x0`).
    Ok,
    /// Any failure status, as written (`NT_STATUS_OBJECT_NAME_NOT_FOUND`,
    /// `0xC0000034`).
    Error(Box<str>),
}

impl NtStatus {
    /// Parses a status field: `NT_STATUS_` followed by upper-case letters,
    /// digits and `_`, or `0x` followed by hex digits.
    pub fn parse(field: &str) -> Option<NtStatus> {
        if let Some(rest) = field.strip_prefix("NT_STATUS_") {
            let ok =
                !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            return match (ok, rest) {
                (false, _) => None,
                (true, "OK") => Some(NtStatus::Ok),
                (true, _) => Some(NtStatus::Error(field.into())),
            };
        }
        let hex = field.strip_prefix("0x").or_else(|| field.strip_prefix("0X"))?;
        let code = u32::from_str_radix(hex, 16).ok()?;
        Some(if code == 0 { NtStatus::Ok } else { NtStatus::Error(field.into()) })
    }

    /// True for `NT_STATUS_OK`.
    pub fn is_ok(&self) -> bool {
        matches!(self, NtStatus::Ok)
    }
}

impl fmt::Display for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NtStatus::Ok => f.write_str("NT_STATUS_OK"),
            NtStatus::Error(s) => f.write_str(s),
        }
    }
}

/// Why a path was refused (turned into a [`LoadfileError`] with its line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathProblem {
    /// Not an absolute SMB path (must start with `\`).
    NotAbsolute,
    /// A `..` climbs above the client's directory.
    Escape,
    /// The path names the replay directory itself.
    Root,
    /// A NUL byte, which no file name may hold.
    Nul,
}

/// A loadfile path, normalised: relative to the replay directory,
/// components separated by `/`, no `.`, `..` or empty components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmbPath(Box<str>);

impl SmbPath {
    /// Normalises an SMB absolute path such as `\clients\client1\a\..\b`.
    pub fn parse(raw: &str) -> Result<SmbPath, PathProblem> {
        if raw.contains('\0') {
            return Err(PathProblem::Nul);
        }
        if !raw.starts_with(['\\', '/']) {
            return Err(PathProblem::NotAbsolute);
        }
        // Built in one string: a loadfile has hundreds of thousands of paths.
        let mut out = String::with_capacity(raw.len());
        for comp in raw.split(['\\', '/']) {
            match comp {
                "" | "." => {}
                ".." => {
                    if out.is_empty() {
                        return Err(PathProblem::Escape);
                    }
                    out.truncate(out.rfind('/').unwrap_or(0));
                }
                c => {
                    if !out.is_empty() {
                        out.push('/');
                    }
                    out.push_str(c);
                }
            }
        }
        if out.is_empty() {
            return Err(PathProblem::Root);
        }
        Ok(SmbPath(out.into()))
    }

    /// The normalised relative path, `/`-separated, with the placeholder
    /// component unreplaced.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Appends the path for the client named `client` (e.g. `client3`) to
    /// `out`: every component equal to [`CLIENT_PLACEHOLDER`] (ignoring
    /// ASCII case) becomes `client`.
    pub fn render(&self, client: &str, out: &mut Vec<u8>) {
        for (i, comp) in self.0.split('/').enumerate() {
            if i > 0 {
                out.push(b'/');
            }
            if comp.eq_ignore_ascii_case(CLIENT_PLACEHOLDER) {
                out.extend_from_slice(client.as_bytes());
            } else {
                out.extend_from_slice(comp.as_bytes());
            }
        }
    }

    /// Length in bytes of what [`SmbPath::render`] appends for `client`.
    pub fn rendered_len(&self, client: &str) -> usize {
        self.0
            .split('/')
            .map(|c| if c.eq_ignore_ascii_case(CLIENT_PLACEHOLDER) { client.len() } else { c.len() })
            .sum::<usize>()
            + self.0.matches('/').count()
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }
}

impl fmt::Display for SmbPath {
    /// Shows the path as the loadfile spells it, `\a\b`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for comp in self.0.split('/') {
            write!(f, "\\{comp}")?;
        }
        Ok(())
    }
}

/// A client's open-file handle number, as the loadfile writes it.
pub type Handle = i64;

/// Operation kinds, in the order dbench prints its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// `NTCreateX`: open or create a file or directory.
    NtCreateX,
    /// `Close`.
    Close,
    /// `Rename`.
    Rename,
    /// `Unlink`.
    Unlink,
    /// `Deltree`: remove a tree.
    Deltree,
    /// `Rmdir`.
    Rmdir,
    /// `Mkdir`.
    Mkdir,
    /// `QUERY_PATH_INFORMATION` (stat by name).
    Qpathinfo,
    /// `QUERY_FILE_INFORMATION` (stat by handle).
    Qfileinfo,
    /// `QUERY_FS_INFORMATION` (statfs).
    Qfsinfo,
    /// `SET_FILE_INFORMATION` (set times).
    Sfileinfo,
    /// `FIND_FIRST` (directory search with DOS wildcards).
    Find,
    /// `WriteX`.
    WriteX,
    /// `ReadX`.
    ReadX,
    /// `LockX`.
    LockX,
    /// `UnlockX`.
    UnlockX,
    /// `Flush`.
    Flush,
    /// `Sleep` (microseconds).
    Sleep,
}

impl OpKind {
    /// Every kind, in table order.
    pub const ALL: [OpKind; 18] = [
        OpKind::NtCreateX,
        OpKind::Close,
        OpKind::Rename,
        OpKind::Unlink,
        OpKind::Deltree,
        OpKind::Rmdir,
        OpKind::Mkdir,
        OpKind::Qpathinfo,
        OpKind::Qfileinfo,
        OpKind::Qfsinfo,
        OpKind::Sfileinfo,
        OpKind::Find,
        OpKind::WriteX,
        OpKind::ReadX,
        OpKind::LockX,
        OpKind::UnlockX,
        OpKind::Flush,
        OpKind::Sleep,
    ];

    /// Number of kinds.
    pub const COUNT: usize = OpKind::ALL.len();

    /// Position in [`OpKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name dbench prints in its result table (and our stable metric
    /// and detail key).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::NtCreateX => "NTCreateX",
            OpKind::Close => "Close",
            OpKind::Rename => "Rename",
            OpKind::Unlink => "Unlink",
            OpKind::Deltree => "Deltree",
            OpKind::Rmdir => "Rmdir",
            OpKind::Mkdir => "Mkdir",
            OpKind::Qpathinfo => "Qpathinfo",
            OpKind::Qfileinfo => "Qfileinfo",
            OpKind::Qfsinfo => "Qfsinfo",
            OpKind::Sfileinfo => "Sfileinfo",
            OpKind::Find => "Find",
            OpKind::WriteX => "WriteX",
            OpKind::ReadX => "ReadX",
            OpKind::LockX => "LockX",
            OpKind::UnlockX => "UnlockX",
            OpKind::Flush => "Flush",
            OpKind::Sleep => "Sleep",
        }
    }

    /// The name a loadfile uses.
    pub fn loadfile_name(self) -> &'static str {
        match self {
            OpKind::Qpathinfo => "QUERY_PATH_INFORMATION",
            OpKind::Qfileinfo => "QUERY_FILE_INFORMATION",
            OpKind::Qfsinfo => "QUERY_FS_INFORMATION",
            OpKind::Sfileinfo => "SET_FILE_INFORMATION",
            OpKind::Find => "FIND_FIRST",
            other => other.name(),
        }
    }

    /// The kind a loadfile's operation field names (case-insensitive;
    /// loadfile and display names both work).
    pub fn from_field(field: &str) -> Option<OpKind> {
        OpKind::ALL
            .into_iter()
            .find(|k| field.eq_ignore_ascii_case(k.loadfile_name()) || field.eq_ignore_ascii_case(k.name()))
    }

    fn loadfile_names() -> String {
        OpKind::ALL.iter().map(|k| k.loadfile_name()).collect::<Vec<_>>().join(", ")
    }
}

/// One operation with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Open or create `path`; on success the file is known as `handle`.
    NtCreateX {
        /// The file or directory.
        path: SmbPath,
        /// NT create options (0x1 directory, 0x40 non-directory).
        create_options: u32,
        /// NT create disposition (0 supersede .. 5 overwrite-if).
        disposition: u32,
        /// Handle number for later operations.
        handle: Handle,
    },
    /// Close a handle.
    Close {
        /// The handle.
        handle: Handle,
    },
    /// Rename `from` to `to`.
    Rename {
        /// Old name.
        from: SmbPath,
        /// New name.
        to: SmbPath,
    },
    /// Remove a file.
    Unlink {
        /// The file.
        path: SmbPath,
        /// SMB search attributes (recorded, unused).
        attributes: u32,
    },
    /// Remove a directory tree (errors ignored, as in dbench).
    Deltree {
        /// The tree.
        path: SmbPath,
    },
    /// Remove an empty directory.
    Rmdir {
        /// The directory.
        path: SmbPath,
    },
    /// Create a directory (an existing one is fine, as in dbench).
    Mkdir {
        /// The directory.
        path: SmbPath,
    },
    /// Stat by name.
    QueryPathInfo {
        /// The file.
        path: SmbPath,
        /// Information level.
        level: u32,
    },
    /// Stat by handle.
    QueryFileInfo {
        /// The handle.
        handle: Handle,
        /// Information level.
        level: u32,
    },
    /// Filesystem statistics.
    QueryFsInfo {
        /// Information level.
        level: u32,
    },
    /// Set file information (level 1004, basic information, sets times).
    SetFileInfo {
        /// The handle.
        handle: Handle,
        /// Information level.
        level: u32,
    },
    /// Search a directory: `pattern`'s last component holds DOS wildcards.
    FindFirst {
        /// Directory and wildcard pattern.
        pattern: SmbPath,
        /// Information level.
        level: u32,
        /// Most entries the client asked for.
        max_count: u32,
        /// Entries the recorded server returned.
        count: u32,
    },
    /// Write `size` bytes at `offset`; `ret_size` is what must be written.
    WriteX {
        /// The handle.
        handle: Handle,
        /// File offset.
        offset: u64,
        /// Bytes to write.
        size: u32,
        /// Bytes the write must return.
        ret_size: u32,
    },
    /// Read `size` bytes at `offset`; `ret_size` is what the recorded
    /// server returned.
    ReadX {
        /// The handle.
        handle: Handle,
        /// File offset.
        offset: u64,
        /// Bytes to read.
        size: u32,
        /// Bytes the recorded read returned.
        ret_size: u32,
    },
    /// Lock a byte range.
    LockX {
        /// The handle.
        handle: Handle,
        /// Range start.
        offset: u64,
        /// Range length.
        size: u64,
    },
    /// Unlock a byte range.
    UnlockX {
        /// The handle.
        handle: Handle,
        /// Range start.
        offset: u64,
        /// Range length.
        size: u64,
    },
    /// Flush a file to stable storage (fsync).
    Flush {
        /// The handle.
        handle: Handle,
    },
    /// Pause.
    Sleep {
        /// Microseconds.
        micros: u64,
    },
}

impl Op {
    /// The operation's kind.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::NtCreateX { .. } => OpKind::NtCreateX,
            Op::Close { .. } => OpKind::Close,
            Op::Rename { .. } => OpKind::Rename,
            Op::Unlink { .. } => OpKind::Unlink,
            Op::Deltree { .. } => OpKind::Deltree,
            Op::Rmdir { .. } => OpKind::Rmdir,
            Op::Mkdir { .. } => OpKind::Mkdir,
            Op::QueryPathInfo { .. } => OpKind::Qpathinfo,
            Op::QueryFileInfo { .. } => OpKind::Qfileinfo,
            Op::QueryFsInfo { .. } => OpKind::Qfsinfo,
            Op::SetFileInfo { .. } => OpKind::Sfileinfo,
            Op::FindFirst { .. } => OpKind::Find,
            Op::WriteX { .. } => OpKind::WriteX,
            Op::ReadX { .. } => OpKind::ReadX,
            Op::LockX { .. } => OpKind::LockX,
            Op::UnlockX { .. } => OpKind::UnlockX,
            Op::Flush { .. } => OpKind::Flush,
            Op::Sleep { .. } => OpKind::Sleep,
        }
    }

    /// Bytes this operation moves, as dbench counts throughput: the
    /// requested size of every ReadX and WriteX.
    pub fn payload_bytes(&self) -> u64 {
        match self {
            Op::ReadX { size, .. } | Op::WriteX { size, .. } => u64::from(*size),
            _ => 0,
        }
    }
}

/// One parsed line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// 1-based line number in the loadfile.
    pub number: u32,
    /// Seconds since the loop started at which the line was recorded, when
    /// the loadfile carries timestamps.
    pub at_s: Option<f64>,
    /// The operation.
    pub op: Op,
    /// The status it must end with.
    pub status: NtStatus,
}

/// A parsed loadfile.
#[derive(Debug, Clone)]
pub struct Loadfile {
    /// Name used in messages and results (`builtin` or the file's path).
    pub name: String,
    /// sha256 of the loadfile's bytes, hex.
    pub sha256: String,
    /// The operations, in order.
    pub lines: Vec<Line>,
}

impl Loadfile {
    /// Reads and parses the loadfile at `path`.
    pub fn read(path: &Path) -> Result<Loadfile, LoadfileError> {
        let bytes = std::fs::read(path).map_err(|source| LoadfileError::Read { path: path.to_path_buf(), source })?;
        Loadfile::parse(&path.display().to_string(), &bytes)
    }

    /// Parses loadfile text; `name` is used in errors and results.
    pub fn parse(name: &str, bytes: &[u8]) -> Result<Loadfile, LoadfileError> {
        let sha256 = hex::encode(Sha256::digest(bytes));
        let mut lines = Vec::new();
        for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let number = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let text = std::str::from_utf8(raw)
                .map_err(|_| LoadfileError::NotText { name: name.to_string(), line: number })?;
            if let Some(line) = parse_line(name, number, text)? {
                lines.push(line);
            }
        }
        if lines.iter().all(|l| matches!(l.op, Op::Sleep { .. })) {
            return Err(LoadfileError::Empty { name: name.to_string() });
        }
        Ok(Loadfile { name: name.to_string(), sha256, lines })
    }

    /// The largest ReadX or WriteX size, so clients size their buffer once.
    pub fn max_io_size(&self) -> usize {
        self.lines
            .iter()
            .map(|l| match l.op {
                Op::ReadX { size, .. } | Op::WriteX { size, .. } => size as usize,
                _ => 0,
            })
            .max()
            .unwrap_or(0)
    }

    /// How many lines of each kind, indexed by [`OpKind::index`].
    pub fn op_counts(&self) -> [u64; OpKind::COUNT] {
        let mut counts = [0u64; OpKind::COUNT];
        for l in &self.lines {
            if let Some(c) = counts.get_mut(l.op.kind().index()) {
                *c += 1;
            }
        }
        counts
    }

    /// Bytes one pass over the loadfile moves (see [`Op::payload_bytes`]).
    pub fn payload_bytes_per_pass(&self) -> u64 {
        self.lines.iter().map(|l| l.op.payload_bytes()).sum()
    }
}

/// Splits a line into fields: whitespace-separated, and a field that starts
/// with `"` runs to the next `"` that ends the field (followed by
/// whitespace or the end), so a DOS_DOT wildcard `"` can sit inside it.
fn fields(text: &str) -> Result<Vec<&str>, &'static str> {
    let mut out = Vec::new();
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
            PathProblem::Escape => {
                LoadfileError::Escape { name: self.name.to_string(), line: self.number, path: field.to_string() }
            }
            PathProblem::NotAbsolute => {
                self.malformed(format!("path '{field}' is not an absolute SMB path (must start with \\)"))
            }
            PathProblem::Root => self.malformed(format!("path '{field}' names the replay directory itself")),
            PathProblem::Nul => self.malformed("path holds a NUL byte"),
        })?;
        if wildcards_in_last_only {
            let s = p.as_str();
            let parent = s.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
            if super::dos_wildcard::has_wildcards(parent) {
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
    let all = fields(text).map_err(|why| p.malformed(why))?;
    let (at_s, f) = match all.first() {
        Some(first) if first.starts_with(|c: char| c.is_ascii_digit()) => {
            let t: f64 = first.parse().map_err(|_| p.malformed(format!("timestamp '{first}' is not a number")))?;
            if !t.is_finite() || t < 0.0 {
                return Err(p.malformed(format!("timestamp '{first}' is not a time")));
            }
            (Some(t), all.get(1..).unwrap_or_default())
        }
        _ => (None, all.as_slice()),
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
            Op::NtCreateX {
                path: p.path(arg(0), false)?,
                create_options: p.unsigned(arg(1), "create options")?,
                disposition: p.unsigned(arg(2), "create disposition")?,
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
    Ok(Some(Line { number, at_s, op, status }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Loadfile, LoadfileError> {
        Loadfile::parse("t", text.as_bytes())
    }

    #[test]
    fn parses_every_operation_of_client_txt_shape() {
        let lf = parse(
            r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1\~dmtmp" 0x1 0x2 9937 NT_STATUS_OK
Close 9937 NT_STATUS_OK
QUERY_PATH_INFORMATION "\clients\client1\~dmtmp" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
FIND_FIRST "\clients\client1\~dmtmp\<.JNK" 260 1366 0 NT_STATUS_NO_SUCH_FILE
QUERY_FS_INFORMATION 1 NT_STATUS_OK
WriteX 9938 65534 1 1 NT_STATUS_OK
ReadX 9938 0 4096 4096 NT_STATUS_OK
QUERY_FILE_INFORMATION 9938 258 NT_STATUS_OK
SET_FILE_INFORMATION 9938 1004 NT_STATUS_OK
LockX 10430 2147483538 1 NT_STATUS_OK
UnlockX 10430 2147483538 1 NT_STATUS_OK
Flush 9938 NT_STATUS_OK
Rename "\clients\client1\a" "\clients\client1\b" NT_STATUS_OK
Unlink "\clients\client1\b" 0x6 NT_STATUS_OK

# a comment
Rmdir "\clients\client1\d" 0xC0000034
Sleep 100 NT_STATUS_OK
"#,
        )
        .unwrap();
        assert_eq!(lf.lines.len(), 18);
        assert_eq!(lf.lines[0].number, 1);
        assert_eq!(lf.lines[16].number, 19, "comments and blank lines still count");
        assert_eq!(
            lf.lines[2].op,
            Op::NtCreateX {
                path: SmbPath::parse(r"\clients\client1\~dmtmp").unwrap(),
                create_options: 1,
                disposition: 2,
                handle: 9937
            }
        );
        assert_eq!(lf.lines[4].status, NtStatus::Error("NT_STATUS_OBJECT_NAME_NOT_FOUND".into()));
        assert_eq!(lf.lines[5].op.kind(), OpKind::Find);
        assert_eq!(lf.lines[11].op, Op::LockX { handle: 10430, offset: 2_147_483_538, size: 1 });
        assert_eq!(lf.lines[16].status, NtStatus::Error("0xC0000034".into()));
        assert_eq!(lf.max_io_size(), 4096);
        assert_eq!(lf.payload_bytes_per_pass(), 4097);
        assert_eq!(lf.op_counts()[OpKind::Find.index()], 1);
        assert_eq!(lf.sha256.len(), 64);
    }

    #[test]
    fn timestamps_crlf_and_display_names() {
        let lf =
            parse("0.250 Qpathinfo \"\\a\\b\" 1004 NT_STATUS_OK\r\nfind \"\\a\\*\" 260 10 3 NT_STATUS_OK\r\n").unwrap();
        assert_eq!(lf.lines[0].at_s, Some(0.25));
        assert_eq!(lf.lines[0].op.kind(), OpKind::Qpathinfo);
        assert_eq!(lf.lines[1].op.kind(), OpKind::Find);
        assert_eq!(lf.lines[1].at_s, None);
    }

    #[test]
    fn unknown_operation_names_line_and_op() {
        let e = parse("Close 1 NT_STATUS_OK\nFrobnicate \"\\a\" NT_STATUS_OK\n").unwrap_err();
        assert!(matches!(&e, LoadfileError::UnknownOp { line: 2, op, .. } if op == "Frobnicate"), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("line 2") && msg.contains("Frobnicate") && msg.contains("NTCreateX"), "{msg}");
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_line() {
        let cases = [
            ("Close NT_STATUS_OK", "takes HANDLE"),
            ("Close 12x NT_STATUS_OK", "not a number"),
            ("ReadX 1 -5 10 10 NT_STATUS_OK", "out of range"),
            ("ReadX 1 0 999999999 10 NT_STATUS_OK", "exceeds"),
            ("NTCreateX \"\\a 0x40 0x1 5 NT_STATUS_OK", "unterminated"),
            ("NTCreateX \"a\\b\" 0x40 0x1 5 NT_STATUS_OK", "absolute"),
            ("Unlink \"\\\" NT_STATUS_OK", "replay directory itself"),
            ("FIND_FIRST \"\\a*\\b\" 260 1 0 NT_STATUS_OK", "outside its last component"),
            ("1.x Close 1 NT_STATUS_OK", "timestamp"),
            ("Close", "NT status"),
        ];
        for (text, want) in cases {
            let e = parse(&format!("# header\n{text}\n")).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("line 2") && msg.contains(want), "{text}: {msg}");
        }
    }

    #[test]
    fn status_parsing() {
        assert_eq!(NtStatus::parse("NT_STATUS_OK"), Some(NtStatus::Ok));
        assert_eq!(NtStatus::parse("0x00000000"), Some(NtStatus::Ok));
        assert_eq!(NtStatus::parse("NT_STATUS_NO_SUCH_FILE"), Some(NtStatus::Error("NT_STATUS_NO_SUCH_FILE".into())));
        assert_eq!(NtStatus::parse("0xC000000F"), Some(NtStatus::Error("0xC000000F".into())));
        for bad in ["OK", "NT_STATUS_", "NT_STATUS_ok", "0x", "0xZZ", "STATUS_OK", "0x1FFFFFFFF"] {
            assert_eq!(NtStatus::parse(bad), None, "{bad}");
        }
        let e = parse("Close 1 STATUS_OK\n").unwrap_err();
        assert!(matches!(e, LoadfileError::BadStatus { line: 1, .. }), "{e}");
        assert!(NtStatus::parse("NT_STATUS_OK").unwrap().is_ok());
        assert_eq!(NtStatus::parse("NT_STATUS_NO_SUCH_FILE").unwrap().to_string(), "NT_STATUS_NO_SUCH_FILE");
    }

    #[test]
    fn escape_attempts_are_refused_with_the_line() {
        for path in [r"\..\etc\passwd", r"\clients\..\..\x", r"\a\b\..\..\..", r"/../x"] {
            let e = parse(&format!("Close 1 NT_STATUS_OK\nUnlink \"{path}\" 0x6 NT_STATUS_OK\n")).unwrap_err();
            assert!(matches!(&e, LoadfileError::Escape { line: 2, .. }), "{path}: {e}");
            assert!(e.to_string().contains("leaves the client's directory"), "{e}");
        }
        let e = parse("Rename \"\\a\" \"\\a\\..\\..\\b\" NT_STATUS_OK\n").unwrap_err();
        assert!(matches!(e, LoadfileError::Escape { line: 1, .. }), "{e}");
    }

    #[test]
    fn paths_normalise_inside_the_directory() {
        let p = SmbPath::parse(r"\clients\client1\a\.\b\..\c").unwrap();
        assert_eq!(p.as_str(), "clients/client1/a/c");
        assert_eq!(p.to_string(), r"\clients\client1\a\c");
        assert_eq!(p.file_name(), "c");
        let mut out = Vec::new();
        p.render("client7", &mut out);
        assert_eq!(out, b"clients/client7/a/c");
        assert_eq!(p.rendered_len("client7"), out.len());
        let mut out = Vec::new();
        SmbPath::parse(r"\clients\CLIENT1\client10").unwrap().render("client0", &mut out);
        assert_eq!(out, b"clients/client0/client10", "only whole components are the placeholder");
        assert_eq!(SmbPath::parse("a"), Err(PathProblem::NotAbsolute));
        assert_eq!(SmbPath::parse(r"\a\..\.."), Err(PathProblem::Escape));
        assert_eq!(SmbPath::parse(r"\a\.."), Err(PathProblem::Root));
        assert_eq!(SmbPath::parse("\\a\0"), Err(PathProblem::Nul));
    }

    #[test]
    fn numbers_read_like_strtol_base_zero() {
        assert_eq!(c_integer("0x40"), Some(64));
        assert_eq!(c_integer("010"), Some(8));
        assert_eq!(c_integer("0"), Some(0));
        assert_eq!(c_integer("-1"), Some(-1));
        assert_eq!(c_integer("2147483538"), Some(2_147_483_538));
        for bad in ["", "-", "0x", "0x-1", "08", "1e3", "--1", "+-1", " 1"] {
            assert_eq!(c_integer(bad), None, "{bad}");
        }
    }

    #[test]
    fn old_format_and_empty_files_are_refused() {
        let e = parse("SMBopenX 1 2 3\n").unwrap_err();
        assert!(matches!(e, LoadfileError::OldFormat { line: 1, .. }), "{e}");
        assert!(matches!(parse("# nothing\n\n").unwrap_err(), LoadfileError::Empty { .. }));
        let e = Loadfile::parse("bin", b"Close 1 NT_STATUS_OK\n\xff\n").unwrap_err();
        assert!(matches!(e, LoadfileError::NotText { line: 2, .. }), "{e}");
        let e = Loadfile::read(Path::new("/nonexistent/loadfile.txt")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/loadfile.txt"), "{e}");
    }

    #[test]
    fn a_quoted_field_may_hold_a_dos_dot() {
        let lf = parse("FIND_FIRST \"\\d\\a\"*\" 260 10 1 NT_STATUS_OK\n").unwrap();
        match &lf.lines[0].op {
            Op::FindFirst { pattern, .. } => assert_eq!(pattern.file_name(), "a\"*"),
            other => panic!("{other:?}"),
        }
    }
}
