//! The loadfile's data model: NT statuses, operation kinds, operations with
//! their arguments, parsed lines and the whole loadfile with its
//! per-pass statistics. It must not depend on the text format (`syntax`),
//! which produces it.

use super::paths::SmbPath;
use std::fmt;

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

/// A client's open-file handle number, as the loadfile writes it.
pub type Handle = i64;

/// NT create option: the object is a directory.
pub const FILE_DIRECTORY_FILE: u32 = 0x1;
/// NT create option: the object must not be a directory.
pub const FILE_NON_DIRECTORY_FILE: u32 = 0x40;
/// NT create disposition: replace the file if it exists, else create it.
pub const FILE_SUPERSEDE: u32 = 0;
/// NT create disposition: open an existing object.
pub const FILE_OPEN: u32 = 1;
/// NT create disposition: create an object that must not exist.
pub const FILE_CREATE: u32 = 2;
/// NT create disposition: open the object, creating it if missing.
pub const FILE_OPEN_IF: u32 = 3;
/// NT create disposition: open and truncate an existing file.
pub const FILE_OVERWRITE: u32 = 4;
/// NT create disposition: open and truncate the file, creating it if
/// missing.
pub const FILE_OVERWRITE_IF: u32 = 5;

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
    /// `Deltree`: remove a tree's files.
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

    pub(super) fn loadfile_names() -> String {
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
    /// Remove the files of a directory tree; its directories stay, as in
    /// dbench (which does not check its status either).
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
    /// Set file information (dbench sets the times at every level).
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

    /// The path this operation names outside the client's directory where
    /// the containment rule (see `paths`) does not allow it: anything but
    /// a look (QUERY_PATH_INFORMATION, FIND_FIRST), a Mkdir, or an
    /// NTCreateX that opens a directory with FILE_OPEN or FILE_OPEN_IF.
    pub fn outside_client_dir(&self) -> Option<&SmbPath> {
        let outside = |p: &SmbPath| !p.in_client_dir();
        match self {
            Op::NtCreateX { path, create_options, disposition, .. } => {
                let opens_a_directory =
                    create_options & FILE_DIRECTORY_FILE != 0 && matches!(*disposition, FILE_OPEN | FILE_OPEN_IF);
                (outside(path) && !opens_a_directory).then_some(path)
            }
            Op::Rename { from, to } => [from, to].into_iter().find(|p| outside(p)),
            Op::Unlink { path, .. } | Op::Deltree { path } | Op::Rmdir { path } => outside(path).then_some(path),
            Op::Mkdir { .. } | Op::QueryPathInfo { .. } | Op::FindFirst { .. } => None,
            Op::Close { .. }
            | Op::QueryFileInfo { .. }
            | Op::QueryFsInfo { .. }
            | Op::SetFileInfo { .. }
            | Op::WriteX { .. }
            | Op::ReadX { .. }
            | Op::LockX { .. }
            | Op::UnlockX { .. }
            | Op::Flush { .. }
            | Op::Sleep { .. } => None,
        }
    }

    /// Bytes this operation moves, as dbench counts throughput: the
    /// requested size of every ReadX and WriteX (tbench counts a ReadX's
    /// `ret_size` instead).
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
    /// Where the text came from, so a client can read it again on each
    /// pass, as dbench does.
    pub origin: Origin,
    /// Length of the text in bytes.
    pub text_len: u64,
}

/// Where a loadfile's text lives.
#[derive(Debug, Clone)]
pub enum Origin {
    /// A file, read again from its path.
    File(std::path::PathBuf),
    /// Text held in memory (the built-in loadfile).
    Text(std::sync::Arc<[u8]>),
}

impl Loadfile {
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

    /// An upper bound on the bytes of files one client keeps at once, for
    /// sizing the space a run of many clients needs: two passes over the
    /// loadfile are followed as a client makes them (a file grows to the
    /// furthest byte written, moves with Rename, goes with Unlink or
    /// Deltree once no handle holds it; truncation is ignored), and the
    /// peak of the live files' sizes is returned. About 24 MB per client
    /// for dbench's `client.txt`.
    pub fn files_bytes_bound(&self) -> u64 {
        use std::collections::HashMap;
        let mut handles: HashMap<Handle, String> = HashMap::new();
        let mut live: HashMap<String, u64> = HashMap::new();
        let (mut total, mut peak) = (0u64, 0u64);
        let held = |handles: &HashMap<Handle, String>, path: &str| handles.values().any(|p| p == path);
        for l in self.lines.iter().chain(&self.lines) {
            let ok = l.status.is_ok();
            match &l.op {
                Op::NtCreateX { path, handle, .. } if ok => {
                    live.entry(path.as_str().to_string()).or_insert(0);
                    handles.insert(*handle, path.as_str().to_string());
                }
                Op::Close { handle } => {
                    handles.remove(handle);
                }
                Op::WriteX { handle, offset, size, .. } => {
                    if let Some(size_now) = handles.get(handle).and_then(|p| live.get_mut(p)) {
                        let end = offset.saturating_add(u64::from(*size));
                        if end > *size_now {
                            total = total.saturating_add(end - *size_now);
                            *size_now = end;
                            peak = peak.max(total);
                        }
                    }
                }
                Op::Rename { from, to } if ok => {
                    if let Some(moved) = live.remove(from.as_str()) {
                        if let Some(replaced) = live.insert(to.as_str().to_string(), moved) {
                            total = total.saturating_sub(replaced);
                        }
                        for p in handles.values_mut().filter(|p| p.as_str() == from.as_str()) {
                            *p = to.as_str().to_string();
                        }
                    }
                }
                Op::Unlink { path, .. } if ok && !held(&handles, path.as_str()) => {
                    total = total.saturating_sub(live.remove(path.as_str()).unwrap_or(0));
                }
                Op::Deltree { path } => {
                    let prefix = format!("{}/", path.as_str());
                    let gone: Vec<String> =
                        live.keys().filter(|k| k.starts_with(&prefix) && !held(&handles, k)).cloned().collect();
                    for k in gone {
                        total = total.saturating_sub(live.remove(&k).unwrap_or(0));
                    }
                }
                _ => {}
            }
        }
        peak
    }
}
