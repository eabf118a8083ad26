//! dbench's client: carries out loadfile operations with POSIX calls on a
//! directory, as Debian's dbench 4.0 does on a local filesystem, and checks
//! each one against the status the loadfile expects. Owns one client's open
//! handles and paths; timing, phases and other clients belong to the
//! driver.
//!
//! Mapping (what dbench 4.0's `fileio.c` does, checked with strace):
//! NTCreateX is `mkdir` for directory creation plus `open`, Close is
//! `close`, ReadX/WriteX are `pread`/`pwrite` of the requested size,
//! QUERY_PATH_INFORMATION is `stat`, QUERY_FILE_INFORMATION `fstat`,
//! QUERY_FS_INFORMATION `statfs`, SET_FILE_INFORMATION (level 1004) sets
//! the times, FIND_FIRST reads the directory, Flush is `fsync`, LockX and
//! UnlockX are `fcntl` byte-range locks, Rename, Unlink, Mkdir, Rmdir and
//! Deltree are what they say. Like dbench, every named file is first
//! looked up with `stat`, and when that fails the parent directory is
//! searched case-insensitively (SMB names are case-insensitive), so the
//! kernel sees the same lookups.
//!
//! Status checks follow dbench: a line expecting `NT_STATUS_OK` must
//! succeed and any other status must fail; a mismatch is an error naming
//! the line and the operation. Mkdir of an existing directory and Deltree
//! of a missing one are not errors (clients share `\clients`).
//!
//! Containment: the loadfile parser already refused paths that climb out
//! of the directory. Every call here is relative to a descriptor of the
//! replay directory (`openat`, `fstatat`, ...), never follows a symbolic
//! link in the last component (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`), and a
//! symbolic link met in a lookup is an error naming the line. No loadfile
//! operation can create a link and each client starts from an empty
//! directory, so a link can only come from outside the benchmark. We do
//! not use `openat2(RESOLVE_BENEATH)`: it needs Linux 5.6 and has no
//! counterpart for stat, unlink, rename or mkdir, so older kernels would
//! do different (incomparable) work and newer ones an extra `open` per
//! operation.

use super::dos_wildcard;
use super::loadfile::{Handle, Line, NtStatus, Op, SmbPath};
use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{openat, renameat, FcntlArg, OFlag};
use nix::sys::stat::{fstatat, futimens, mkdirat, Mode, SFlag};
use nix::sys::statvfs::fstatvfs;
use nix::sys::time::TimeSpec;
use nix::unistd::{unlinkat, UnlinkatFlags};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::fmt;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// NT create option: the object is a directory.
const FILE_DIRECTORY_FILE: u32 = 0x1;
/// NT create option: the object must not be a directory.
const FILE_NON_DIRECTORY_FILE: u32 = 0x40;
/// SMB information level "basic information": times and attributes.
const SMB_FILE_BASIC_INFO: u32 = 1004;

/// Errors of one client's replay. Each names the loadfile line.
#[derive(Debug, thiserror::Error)]
pub enum FsClientError {
    /// The replay directory could not be opened or prepared.
    #[error("cannot prepare the replay directory {path}")]
    Setup {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The call succeeded where the loadfile expects a failure, or failed
    /// where it expects success.
    #[error("line {line}: {op} {target}: expected {expected}, got {got}")]
    Status {
        /// Line number.
        line: u32,
        /// Operation (loadfile name).
        op: &'static str,
        /// Path or handle.
        target: String,
        /// The loadfile's status.
        expected: String,
        /// What happened (`success` or the errno).
        got: String,
    },
    /// A handle that is not open in this client.
    #[error("line {line}: {op}: handle {handle} is not open")]
    UnknownHandle {
        /// Line number.
        line: u32,
        /// Operation.
        op: &'static str,
        /// The handle.
        handle: Handle,
    },
    /// An NTCreateX that reuses a handle still open.
    #[error("line {line}: NTCreateX {target}: handle {handle} is already open")]
    HandleInUse {
        /// Line number.
        line: u32,
        /// The path.
        target: String,
        /// The handle.
        handle: Handle,
    },
    /// A symbolic link in a path: never followed.
    #[error("line {line}: {op} {target}: the path is (or runs through) a symbolic link, refused")]
    Symlink {
        /// Line number.
        line: u32,
        /// Operation.
        op: &'static str,
        /// The path.
        target: String,
    },
    /// A write that wrote less than the loadfile says it must.
    #[error("line {line}: WriteX handle {handle}: wrote {got} of {want} bytes")]
    ShortWrite {
        /// Line number.
        line: u32,
        /// The handle.
        handle: Handle,
        /// Bytes expected.
        want: u32,
        /// Bytes written.
        got: usize,
    },
    /// A lock range this platform's `off_t` cannot hold.
    #[error("line {line}: {op} handle {handle}: range {offset}+{size} does not fit this platform's file offsets")]
    LockRange {
        /// Line number.
        line: u32,
        /// Operation.
        op: &'static str,
        /// The handle.
        handle: Handle,
        /// Range start.
        offset: u64,
        /// Range length.
        size: u64,
    },
    /// Deltree could not remove a tree.
    #[error("line {line}: Deltree {target} failed")]
    Deltree {
        /// Line number.
        line: u32,
        /// The path.
        target: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Which path buffer a lookup uses (Rename needs two).
#[derive(Clone, Copy)]
enum Slot {
    A,
    B,
}

/// One client of the filesystem replay.
pub struct FsClient {
    root: OwnedFd,
    root_path: PathBuf,
    name: String,
    handles: HashMap<Handle, File>,
    path_a: Vec<u8>,
    path_b: Vec<u8>,
    buf: Vec<u8>,
    find_count_mismatches: u64,
    read_size_mismatches: u64,
    names_resolved: u64,
}

fn nix_io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

/// What a call did, for a status message.
fn outcome_text<T>(r: &Result<T, Errno>) -> String {
    match r {
        Ok(_) => "success".to_string(),
        Err(e) => format!("{} ({})", e, e.desc()),
    }
}

struct HandleTarget(Handle);

impl fmt::Display for HandleTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handle {}", self.0)
    }
}

impl FsClient {
    /// Opens the replay directory `root` (created by the caller, shared by
    /// all clients) for client `id` (named `client<id>`, as dbench 4.0
    /// numbers them), and empties the client's own directory
    /// `clients/client<id>` so no earlier content (or link) survives.
    /// `max_io` sizes the I/O buffer.
    pub fn open(root: &Path, id: u32, max_io: usize) -> Result<FsClient, FsClientError> {
        let setup = |source| FsClientError::Setup { path: root.to_path_buf(), source };
        let meta = std::fs::symlink_metadata(root).map_err(setup)?;
        if !meta.is_dir() {
            return Err(setup(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a directory")));
        }
        let fd = nix::fcntl::open(
            root,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| setup(nix_io(e)))?;
        let name = format!("client{id}");
        // `clients` is shared by every client and created by the loadfile;
        // if it exists it must be a real directory, or the removal below
        // could reach outside through it.
        match std::fs::symlink_metadata(root.join("clients")) {
            Ok(m) if !m.is_dir() => {
                return Err(setup(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "its 'clients' entry is not a directory (a symbolic link?)",
                )))
            }
            _ => {}
        }
        let own = root.join("clients").join(&name);
        match std::fs::symlink_metadata(&own) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&own).map_err(setup)?,
            Ok(_) => std::fs::remove_file(&own).map_err(setup)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(setup(e)),
        }
        Ok(FsClient {
            root: fd,
            root_path: root.to_path_buf(),
            name,
            handles: HashMap::new(),
            path_a: Vec::with_capacity(256),
            path_b: Vec::with_capacity(256),
            buf: vec![0u8; max_io],
            find_count_mismatches: 0,
            read_size_mismatches: 0,
            names_resolved: 0,
        })
    }

    /// Counters worth reporting: FIND_FIRST results whose entry count
    /// differs from the recording, ReadX calls that returned a different
    /// size than recorded (both tolerated, as dbench tolerates them), and
    /// names found only by the case-insensitive search.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([
            ("find_count_mismatches".to_string(), self.find_count_mismatches),
            ("read_size_mismatches".to_string(), self.read_size_mismatches),
            ("names_resolved_case_insensitively".to_string(), self.names_resolved),
        ])
    }

    /// Closes every open handle (a new pass of the loadfile starts clean).
    pub fn close_all(&mut self) {
        self.handles.clear();
    }

    fn render(&mut self, path: &SmbPath, slot: Slot) {
        let buf = match slot {
            Slot::A => &mut self.path_a,
            Slot::B => &mut self.path_b,
        };
        buf.clear();
        path.render(&self.name, buf);
    }

    fn path(&self, slot: Slot) -> &[u8] {
        match slot {
            Slot::A => &self.path_a,
            Slot::B => &self.path_b,
        }
    }

    /// dbench's name resolution: a `stat`, and when the name is missing a
    /// case-insensitive search of its directory that fixes the name's case
    /// in place. Returns whether the name exists.
    fn resolve(&mut self, line: &Line, op: &'static str, target: &SmbPath, slot: Slot) -> Result<(), FsClientError> {
        match fstatat(&self.root, self.path(slot), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => {
                if (st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFLNK.bits() {
                    return Err(FsClientError::Symlink { line: line.number, op, target: target.to_string() });
                }
                Ok(())
            }
            Err(Errno::ELOOP) => Err(FsClientError::Symlink { line: line.number, op, target: target.to_string() }),
            Err(Errno::ENOENT) => {
                self.search_case_insensitively(slot);
                Ok(())
            }
            Err(_) => Ok(()),
        }
    }

    fn search_case_insensitively(&mut self, slot: Slot) {
        let path = self.path(slot);
        let (dir, name_at): (&[u8], usize) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (path.get(..i).unwrap_or(b"."), i + 1),
            None => (b".", 0),
        };
        let Ok(mut d) = Dir::openat(
            &self.root,
            dir,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            return;
        };
        let wanted = path.get(name_at..).unwrap_or_default().to_vec();
        let mut found: Option<Vec<u8>> = None;
        for entry in d.iter().flatten() {
            let n = entry.file_name().to_bytes();
            if n.len() == wanted.len() && n.eq_ignore_ascii_case(&wanted) && n != wanted.as_slice() {
                found = Some(n.to_vec());
                break;
            }
        }
        if let Some(real) = found {
            let buf = match slot {
                Slot::A => &mut self.path_a,
                Slot::B => &mut self.path_b,
            };
            buf.truncate(name_at);
            buf.extend_from_slice(&real);
            self.names_resolved += 1;
        }
    }

    /// Compares a call's outcome with the status the line expects.
    fn check<T>(
        line: &Line,
        op: &'static str,
        target: &dyn fmt::Display,
        result: Result<T, Errno>,
    ) -> Result<Option<T>, FsClientError> {
        if result.as_ref().err() == Some(&Errno::ELOOP) {
            return Err(FsClientError::Symlink { line: line.number, op, target: target.to_string() });
        }
        match (&line.status, result) {
            (NtStatus::Ok, Ok(v)) => Ok(Some(v)),
            (NtStatus::Error(_), Err(_)) => Ok(None),
            (expected, r) => Err(FsClientError::Status {
                line: line.number,
                op,
                target: target.to_string(),
                expected: expected.to_string(),
                got: outcome_text(&r),
            }),
        }
    }

    fn file(&self, line: &Line, op: &'static str, handle: Handle) -> Result<&File, FsClientError> {
        self.handles.get(&handle).ok_or(FsClientError::UnknownHandle { line: line.number, op, handle })
    }

    /// Carries out one line. `Sleep` is the driver's business and does
    /// nothing here.
    pub fn execute(&mut self, line: &Line) -> Result<(), FsClientError> {
        let op = line.op.kind().loadfile_name();
        match &line.op {
            Op::NtCreateX { path, create_options, disposition, handle } => {
                self.nt_create(line, path, *create_options, *disposition, *handle)
            }
            Op::Close { handle } => match self.handles.remove(handle) {
                Some(f) => {
                    drop(f);
                    Ok(())
                }
                None => Err(FsClientError::UnknownHandle { line: line.number, op, handle: *handle }),
            },
            Op::Rename { from, to } => {
                self.render(from, Slot::A);
                self.render(to, Slot::B);
                self.resolve(line, op, from, Slot::A)?;
                self.resolve(line, op, to, Slot::B)?;
                let r = renameat(&self.root, self.path_a.as_slice(), &self.root, self.path_b.as_slice());
                Self::check(line, op, from, r).map(drop)
            }
            Op::Unlink { path, .. } => {
                self.render(path, Slot::A);
                self.resolve(line, op, path, Slot::A)?;
                let r = unlinkat(&self.root, self.path_a.as_slice(), UnlinkatFlags::NoRemoveDir);
                Self::check(line, op, path, r).map(drop)
            }
            Op::Rmdir { path } => {
                self.render(path, Slot::A);
                self.resolve(line, op, path, Slot::A)?;
                let r = unlinkat(&self.root, self.path_a.as_slice(), UnlinkatFlags::RemoveDir);
                Self::check(line, op, path, r).map(drop)
            }
            Op::Mkdir { path } => {
                self.render(path, Slot::A);
                self.resolve(line, op, path, Slot::A)?;
                let r = match mkdirat(&self.root, self.path_a.as_slice(), Mode::from_bits_truncate(0o777)) {
                    Err(Errno::EEXIST) => Ok(()),
                    other => other,
                };
                Self::check(line, op, path, r).map(drop)
            }
            Op::Deltree { path } => {
                self.render(path, Slot::A);
                let full = self.root_path.join(OsStr::from_bytes(&self.path_a));
                let removed = match std::fs::symlink_metadata(&full) {
                    Ok(m) if m.is_dir() => std::fs::remove_dir_all(&full),
                    Ok(_) => std::fs::remove_file(&full),
                    Err(e) => Err(e),
                };
                match removed {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(source) => Err(FsClientError::Deltree { line: line.number, target: path.to_string(), source }),
                }
            }
            Op::QueryPathInfo { path, .. } => {
                self.render(path, Slot::A);
                self.resolve(line, op, path, Slot::A)?;
                let r = fstatat(&self.root, self.path_a.as_slice(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW);
                Self::check(line, op, path, r).map(drop)
            }
            Op::QueryFileInfo { handle, .. } => {
                let f = self.file(line, op, *handle)?;
                let r = nix::sys::stat::fstat(f).map(drop);
                Self::check(line, op, &HandleTarget(*handle), r).map(drop)
            }
            Op::QueryFsInfo { .. } => {
                let r = fstatvfs(&self.root).map(drop);
                Self::check(line, op, &"the filesystem", r).map(drop)
            }
            Op::SetFileInfo { handle, level } => {
                let f = self.file(line, op, *handle)?;
                let r = if *level == SMB_FILE_BASIC_INFO {
                    futimens(f, &TimeSpec::UTIME_NOW, &TimeSpec::UTIME_NOW)
                } else {
                    // dbench sets nothing for other levels either.
                    Ok(())
                };
                Self::check(line, op, &HandleTarget(*handle), r).map(drop)
            }
            Op::FindFirst { pattern, max_count, count, .. } => self.find_first(line, pattern, *max_count, *count),
            Op::WriteX { handle, offset, size, ret_size } => {
                let f = self.handles.get(handle).ok_or(FsClientError::UnknownHandle {
                    line: line.number,
                    op,
                    handle: *handle,
                })?;
                let data = self.buf.get(..*size as usize).unwrap_or(&self.buf);
                let r = f.write_at(data, *offset).map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)));
                if let Some(n) = Self::check(line, op, &HandleTarget(*handle), r)? {
                    if n != *ret_size as usize {
                        return Err(FsClientError::ShortWrite {
                            line: line.number,
                            handle: *handle,
                            want: *ret_size,
                            got: n,
                        });
                    }
                }
                Ok(())
            }
            Op::ReadX { handle, offset, size, ret_size } => {
                let f = self.handles.get(handle).ok_or(FsClientError::UnknownHandle {
                    line: line.number,
                    op,
                    handle: *handle,
                })?;
                let len = (*size as usize).min(self.buf.len());
                let data = self.buf.get_mut(..len).unwrap_or_default();
                let r = f.read_at(data, *offset).map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)));
                if let Some(n) = Self::check(line, op, &HandleTarget(*handle), r)? {
                    if n != *ret_size as usize {
                        self.read_size_mismatches += 1;
                    }
                }
                Ok(())
            }
            Op::LockX { handle, offset, size } | Op::UnlockX { handle, offset, size } => {
                let unlock = matches!(line.op, Op::UnlockX { .. });
                let f = self.file(line, op, *handle)?;
                let range = |v: u64| libc::off_t::try_from(v).ok();
                let (Some(start), Some(len)) = (range(*offset), range(*size)) else {
                    return Err(FsClientError::LockRange {
                        line: line.number,
                        op,
                        handle: *handle,
                        offset: *offset,
                        size: *size,
                    });
                };
                // SAFETY: a zeroed flock is a valid value of this C struct.
                let mut fl: libc::flock = unsafe { std::mem::zeroed() };
                fl.l_type = if unlock { libc::F_UNLCK } else { libc::F_WRLCK } as libc::c_short;
                fl.l_whence = libc::SEEK_SET as libc::c_short;
                fl.l_start = start;
                fl.l_len = len;
                let r = nix::fcntl::fcntl(f.as_fd(), FcntlArg::F_SETLK(&fl)).map(drop);
                Self::check(line, op, &HandleTarget(*handle), r).map(drop)
            }
            Op::Flush { handle } => {
                let f = self.file(line, op, *handle)?;
                let r = nix::unistd::fsync(f);
                Self::check(line, op, &HandleTarget(*handle), r).map(drop)
            }
            Op::Sleep { .. } => Ok(()),
        }
    }

    fn nt_create(
        &mut self,
        line: &Line,
        path: &SmbPath,
        options: u32,
        disposition: u32,
        handle: Handle,
    ) -> Result<(), FsClientError> {
        const OP: &str = "NTCreateX";
        self.render(path, Slot::A);
        self.resolve(line, OP, path, Slot::A)?;
        let p = self.path_a.as_slice();
        let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let result: Result<OwnedFd, Errno> = if options & FILE_DIRECTORY_FILE != 0 {
            // Directory: create (must not exist), open-if (create when
            // missing) or open; the overwrite dispositions are invalid.
            let made = match disposition {
                2 => mkdirat(&self.root, p, Mode::from_bits_truncate(0o700)),
                3 => match mkdirat(&self.root, p, Mode::from_bits_truncate(0o700)) {
                    Err(Errno::EEXIST) => Ok(()),
                    other => other,
                },
                1 => Ok(()),
                _ => Err(Errno::EINVAL),
            };
            made.and_then(|()| openat(&self.root, p, dir_flags, Mode::empty()))
        } else {
            let extra = match disposition {
                0 | 5 => OFlag::O_CREAT | OFlag::O_TRUNC,
                1 => OFlag::empty(),
                2 => OFlag::O_CREAT | OFlag::O_EXCL,
                3 => OFlag::O_CREAT,
                4 => OFlag::O_TRUNC,
                _ => return self.bad_disposition(line, path, disposition),
            };
            let flags = OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | extra;
            match openat(&self.root, p, flags, Mode::from_bits_truncate(0o600)) {
                // An SMB open of a directory without FILE_NON_DIRECTORY_FILE
                // succeeds; POSIX needs a read-only directory open.
                Err(Errno::EISDIR) if options & FILE_NON_DIRECTORY_FILE == 0 && matches!(disposition, 1 | 3) => {
                    openat(&self.root, p, dir_flags, Mode::empty())
                }
                other => other,
            }
        };
        if let Some(fd) = Self::check(line, OP, path, result)? {
            if self.handles.contains_key(&handle) {
                return Err(FsClientError::HandleInUse { line: line.number, target: path.to_string(), handle });
            }
            self.handles.insert(handle, File::from(fd));
        }
        Ok(())
    }

    fn bad_disposition(&self, line: &Line, path: &SmbPath, disposition: u32) -> Result<(), FsClientError> {
        Err(FsClientError::Status {
            line: line.number,
            op: "NTCreateX",
            target: path.to_string(),
            expected: line.status.to_string(),
            got: format!("create disposition {disposition} is not one of 0..5"),
        })
    }

    fn find_first(&mut self, line: &Line, pattern: &SmbPath, max_count: u32, count: u32) -> Result<(), FsClientError> {
        const OP: &str = "FIND_FIRST";
        self.render(pattern, Slot::A);
        let mask = pattern.file_name();
        if !dos_wildcard::has_wildcards(mask) {
            // A plain name: SMB's FIND_FIRST finds it or not.
            self.resolve(line, OP, pattern, Slot::A)?;
            let r = fstatat(&self.root, self.path_a.as_slice(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW);
            return Self::check(line, OP, pattern, r).map(drop);
        }
        let dir_len = self.path_a.iter().rposition(|&b| b == b'/').unwrap_or(0);
        let dir: &[u8] = if dir_len == 0 { b"." } else { self.path_a.get(..dir_len).unwrap_or(b".") };
        let listed = Dir::openat(
            &self.root,
            dir,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map(|mut d| {
            d.iter()
                .flatten()
                .filter(|e| dos_wildcard::matches(mask, &String::from_utf8_lossy(e.file_name().to_bytes())))
                .count()
        });
        // An SMB server answers "no such file" when nothing matches.
        let r = match listed {
            Ok(0) => Err(Errno::ENOENT),
            other => other,
        };
        if let Some(found) = Self::check(line, OP, pattern, r)? {
            let returned = u32::try_from(found).unwrap_or(u32::MAX).min(max_count);
            if returned != count {
                self.find_count_mismatches += 1;
            }
        }
        Ok(())
    }
}

impl super::client_driver::Replayer for FsClient {
    type Error = FsClientError;

    fn execute(&mut self, line: &Line) -> Result<(), FsClientError> {
        FsClient::execute(self, line)
    }

    fn new_pass(&mut self) {
        self.close_all();
    }

    fn counters(&self) -> BTreeMap<String, u64> {
        FsClient::counters(self)
    }
}

#[cfg(test)]
mod tests;
