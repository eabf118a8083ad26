//! dbench's client: carries out loadfile operations with POSIX calls on a
//! directory, as dbench 4.0's `fileio.c` does on a local filesystem, and
//! checks each one against the status the loadfile expects. Owns one
//! client's open handles and paths; timing, phases and other clients
//! belong to the driver.
//!
//! Mapping (dbench 4.0's `fileio.c`):
//! - Every named file is first looked up as dbench's `resolve_name` does:
//!   a `stat`, and when that fails a search of the parent directory that
//!   compares names case-insensitively (SMB names are case-insensitive;
//!   we also use the name found). QUERY_PATH_INFORMATION and FIND_FIRST of
//!   a plain name are that lookup alone.
//! - NTCreateX opens `O_RDWR`, adding `O_CREAT` for FILE_CREATE (no
//!   `O_EXCL`) and `O_CREAT|O_TRUNC` for FILE_OVERWRITE and
//!   FILE_OVERWRITE_IF; FILE_SUPERSEDE, FILE_OPEN and FILE_OPEN_IF add
//!   nothing. With FILE_DIRECTORY_FILE it makes the directory (`mkdir`,
//!   0700, whatever the disposition; an existing one is fine) and opens it
//!   `O_RDONLY|O_DIRECTORY`. An open that fails with `EISDIR` is retried
//!   as a directory open. A successful open is followed by an `fstat`.
//! - Close is `close`; ReadX and WriteX are `pread` and `pwrite` of the
//!   requested size; Flush is `fsync`; LockX and UnlockX are `fcntl`
//!   `F_SETLKW` byte-range locks; QUERY_FILE_INFORMATION is `fstat`.
//! - SET_FILE_INFORMATION, at any level, is an `fstat` of the handle and
//!   then a `utime` of the path it was opened by, setting the access time
//!   10 s and the modification time 12 s before their current values
//!   (whole seconds): a path walk plus a setattr.
//! - QUERY_FS_INFORMATION is `statvfs` of the replay directory by its
//!   path, as dbench's is of its `-D` directory.
//! - FIND_FIRST with wildcards is the lookup (which fails and searches
//!   the directory), then a listing of up to the requested number of
//!   entries.
//! - Rename, Unlink, Mkdir and Rmdir are what they say, after the lookup.
//! - Deltree removes the files of a tree, recursing into its directories,
//!   which stay: entries are examined with `stat` and directories listed
//!   with `opendir`/`readdir`, as dbench's recursion does.
//!
//! Status checks are stricter than dbench's: a line expecting
//! `NT_STATUS_OK` must succeed and any other status must fail, or the
//! replay stops with an error naming the line (dbench checks only some
//! operations and prints the rest). Three allowances follow dbench: Mkdir
//! of an existing directory and Deltree of a missing one are not errors
//! (clients share `\clients`), and since Deltree leaves directories
//! standing, a lookup (QUERY_PATH_INFORMATION, FIND_FIRST of a plain name)
//! that expects a name to be missing and finds a directory a Deltree left
//! is accepted and counted (`deltree_leftovers_found`). client.txt's
//! second pass meets one: `\clients\client1\~dmtmp` before it is made
//! again.
//!
//! Containment: the loadfile parser already refused paths that leave the
//! client's directory and changes outside it (`loadfile`'s `paths` has the
//! rule). Every call here is relative to a descriptor of the replay
//! directory (`openat`, `fstatat`, ...), never follows a symbolic link in
//! the last component (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`), and a
//! symbolic link met in a lookup is an error naming the line; Deltree
//! unlinks links like files and never recurses through one. No loadfile
//! operation can create a link and each client starts from a fresh
//! directory, so a link can only come from outside the benchmark, while
//! it runs. We do not use `openat2(RESOLVE_BENEATH)`: it needs Linux 5.6
//! and has no counterpart for stat, unlink, rename or mkdir, so older
//! kernels would do different (incomparable) work and newer ones an extra
//! `open` per operation.

use super::dos_wildcard;
use super::loadfile::{
    Handle, Line, NtStatus, Op, SmbPath, CLIENTS_DIR, FILE_CREATE, FILE_DIRECTORY_FILE, FILE_OVERWRITE,
    FILE_OVERWRITE_IF,
};
use dir_stream::DirStream;
use nix::errno::Errno;
use nix::fcntl::{openat, renameat, AtFlags, FcntlArg, OFlag};
use nix::sys::stat::{fstat, fstatat, mkdirat, utimensat, Mode, SFlag, UtimensatFlags};
use nix::sys::statvfs::statvfs;
use nix::sys::time::TimeSpec;
use nix::unistd::{unlinkat, UnlinkatFlags};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Flags of every directory open (dbench's `opendir`, plus never
/// following a link and not leaking into children).
const DIR_OPEN: OFlag = OFlag::O_RDONLY.union(OFlag::O_DIRECTORY).union(OFlag::O_NOFOLLOW).union(OFlag::O_CLOEXEC);

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
    /// Deltree could not list a directory or remove a file.
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

/// What a lookup found.
#[derive(Clone, Copy)]
enum Lookup {
    /// The name exists (maybe in another case); whether it is a directory.
    Found { dir: bool },
    /// It does not: the `stat`'s error.
    Missing(Errno),
}

/// An open handle and the path it was opened by (SET_FILE_INFORMATION
/// sets times through the path, as dbench does).
struct OpenFile {
    file: File,
    path: Box<[u8]>,
}

/// One client of the filesystem replay.
pub struct FsClient {
    root: OwnedFd,
    root_path: PathBuf,
    name: String,
    handles: HashMap<Handle, OpenFile>,
    path_a: Vec<u8>,
    path_b: Vec<u8>,
    /// Directories a Deltree left standing that no line has made again
    /// since (paths as rendered).
    left_by_deltree: HashSet<Vec<u8>>,
    find_count_mismatches: u64,
    read_size_mismatches: u64,
    names_resolved: u64,
    deltree_leftovers_found: u64,
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

/// `pread` into a buffer of `size` bytes allocated for this call and
/// freed after it, uninitialised, as dbench's `malloc(size)` and `free`.
fn pread_fresh(file: &File, size: usize, offset: u64) -> Result<usize, Errno> {
    let mut buf: Vec<u8> = Vec::with_capacity(size);
    let offset = libc::off_t::try_from(offset).map_err(|_| Errno::EINVAL)?;
    // SAFETY: the pointer and length are the vector's own allocation of
    // `size` bytes, which pread only writes into; the bytes are never read.
    let n = unsafe { libc::pread(file.as_raw_fd(), buf.spare_capacity_mut().as_mut_ptr().cast(), size, offset) };
    // errno before `free` can touch it.
    let r = if n < 0 { Err(Errno::last()) } else { Ok(n as usize) };
    drop(buf);
    r
}

/// Whether a directory entry's name matches a FIND_FIRST mask (a name that
/// is not UTF-8 is matched as its lossy text).
fn name_matches(mask: &str, name: &[u8]) -> bool {
    match std::str::from_utf8(name) {
        Ok(n) => dos_wildcard::matches(mask, n),
        Err(_) => dos_wildcard::matches(mask, &String::from_utf8_lossy(name)),
    }
}

fn file_type(mode: libc::mode_t) -> libc::mode_t {
    mode & SFlag::S_IFMT.bits()
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
    /// numbers them), and removes the client's own directory
    /// `clients/client<id>` entirely, without following links, so no
    /// earlier content (or link) survives.
    pub fn open(root: &Path, id: u32) -> Result<FsClient, FsClientError> {
        let setup = |source| FsClientError::Setup { path: root.to_path_buf(), source };
        let meta = std::fs::symlink_metadata(root).map_err(setup)?;
        if !meta.is_dir() {
            return Err(setup(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a directory")));
        }
        let fd = nix::fcntl::open(root, DIR_OPEN, Mode::empty()).map_err(|e| setup(nix_io(e)))?;
        let name = format!("client{id}");
        // `clients` is shared by every client and created by the loadfile;
        // if it exists it must be a real directory, or the removal below
        // could reach outside through it.
        match std::fs::symlink_metadata(root.join(CLIENTS_DIR)) {
            Ok(m) if !m.is_dir() => {
                return Err(setup(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "its 'clients' entry is not a directory (a symbolic link?)",
                )))
            }
            _ => {}
        }
        // Everything goes here, unlike a loadfile's Deltree: the client
        // starts from no directory at all, as from a fresh dbench run.
        let own = root.join(CLIENTS_DIR).join(&name);
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
            left_by_deltree: HashSet::new(),
            find_count_mismatches: 0,
            read_size_mismatches: 0,
            names_resolved: 0,
            deltree_leftovers_found: 0,
        })
    }

    /// Counters worth reporting: FIND_FIRST results whose entry count
    /// differs from the recording, ReadX calls that returned a different
    /// size than recorded (both tolerated, as dbench tolerates them),
    /// names found only by the case-insensitive search, and lookups that
    /// expected a missing name and found a directory a Deltree left.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([
            ("find_count_mismatches".to_string(), self.find_count_mismatches),
            ("read_size_mismatches".to_string(), self.read_size_mismatches),
            ("names_resolved_case_insensitively".to_string(), self.names_resolved),
            ("deltree_leftovers_found".to_string(), self.deltree_leftovers_found),
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

    /// dbench's `resolve_name`: a `stat`, and when it fails a
    /// case-insensitive search of the name's directory, which fixes the
    /// name's case in place.
    fn resolve(
        &mut self,
        line: &Line,
        op: &'static str,
        target: &SmbPath,
        slot: Slot,
    ) -> Result<Lookup, FsClientError> {
        let symlink = || FsClientError::Symlink { line: line.number, op, target: target.to_string() };
        match fstatat(&self.root, self.path(slot), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => match file_type(st.st_mode) {
                t if t == SFlag::S_IFLNK.bits() => Err(symlink()),
                t => Ok(Lookup::Found { dir: t == SFlag::S_IFDIR.bits() }),
            },
            Err(Errno::ELOOP) => Err(symlink()),
            Err(e) => match self.search_case_insensitively(slot) {
                None => Ok(Lookup::Missing(e)),
                Some(libc::DT_LNK) => Err(symlink()),
                Some(t) => Ok(Lookup::Found { dir: t == libc::DT_DIR }),
            },
        }
    }

    /// Reads the directory of the name in `slot` until an entry matches
    /// the name ignoring ASCII case, and puts that entry's name in the
    /// path. Returns the entry's `d_type` when one matched.
    fn search_case_insensitively(&mut self, slot: Slot) -> Option<u8> {
        let path = self.path(slot);
        let (dir, name_at): (&[u8], usize) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (path.get(..i).unwrap_or(b"."), i + 1),
            None => (b".", 0),
        };
        let mut d = DirStream::open(&self.root, dir, DIR_OPEN).ok()?;
        let wanted = path.get(name_at..).unwrap_or_default();
        let (real, d_type) = loop {
            match d.next_entry() {
                Ok(Some(e)) if e.name.eq_ignore_ascii_case(wanted) => break (e.name.to_vec(), e.d_type),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return None,
            }
        };
        if real != wanted {
            let buf = match slot {
                Slot::A => &mut self.path_a,
                Slot::B => &mut self.path_b,
            };
            buf.truncate(name_at);
            buf.extend_from_slice(&real);
            self.names_resolved += 1;
        }
        Some(d_type)
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

    /// Checks a lookup of the name in path A (QUERY_PATH_INFORMATION,
    /// FIND_FIRST of a plain name) against the line's status, accepting a
    /// directory a Deltree left where the line expects nothing.
    fn check_lookup(
        &mut self,
        line: &Line,
        op: &'static str,
        target: &SmbPath,
        found: Lookup,
    ) -> Result<(), FsClientError> {
        let r = match found {
            Lookup::Found { dir } => {
                if dir && !line.status.is_ok() && self.left_by_deltree.contains(self.path_a.as_slice()) {
                    self.deltree_leftovers_found += 1;
                    return Ok(());
                }
                Ok(())
            }
            Lookup::Missing(e) => Err(e),
        };
        Self::check(line, op, target, r).map(drop)
    }

    /// A line made the directory in path A (or found it there): it is no
    /// longer one only a Deltree left.
    fn directory_made(&mut self) {
        if !self.left_by_deltree.is_empty() {
            self.left_by_deltree.remove(self.path_a.as_slice());
        }
    }

    fn file(&self, line: &Line, op: &'static str, handle: Handle) -> Result<&OpenFile, FsClientError> {
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
                self.directory_made();
                Self::check(line, op, path, r).map(drop)
            }
            Op::Deltree { path } => {
                self.render(path, Slot::A);
                let mut walked = std::mem::take(&mut self.path_a);
                let r = self.deltree(&mut walked);
                self.path_a = walked;
                r.map_err(|e| FsClientError::Deltree { line: line.number, target: path.to_string(), source: nix_io(e) })
            }
            Op::QueryPathInfo { path, .. } => {
                self.render(path, Slot::A);
                let found = self.resolve(line, op, path, Slot::A)?;
                self.check_lookup(line, op, path, found)
            }
            Op::QueryFileInfo { handle, .. } => {
                let f = self.file(line, op, *handle)?;
                let r = fstat(&f.file).map(drop);
                Self::check(line, op, &HandleTarget(*handle), r).map(drop)
            }
            Op::QueryFsInfo { .. } => {
                let r = statvfs(self.root_path.as_path()).map(drop);
                Self::check(line, op, &"the replay directory's filesystem", r).map(drop)
            }
            Op::SetFileInfo { handle, .. } => {
                // Every level, as dbench: times set through the path.
                let f = self.file(line, op, *handle)?;
                let r = fstat(&f.file).and_then(|st| {
                    let atime = TimeSpec::new(st.st_atime - 10, 0);
                    let mtime = TimeSpec::new(st.st_mtime - 12, 0);
                    utimensat(&self.root, &*f.path, &atime, &mtime, UtimensatFlags::NoFollowSymlink)
                });
                Self::check(line, op, &HandleTarget(*handle), r).map(drop)
            }
            Op::FindFirst { pattern, max_count, count, .. } => self.find_first(line, pattern, *max_count, *count),
            Op::WriteX { handle, offset, size, ret_size } => {
                let f = self.handles.get(handle).ok_or(FsClientError::UnknownHandle {
                    line: line.number,
                    op,
                    handle: *handle,
                })?;
                // A zeroed buffer of the operation's size per call, as
                // dbench's `calloc(size, 1)` and `free`.
                let data = vec![0u8; *size as usize];
                let r = f.file.write_at(&data, *offset).map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)));
                drop(data);
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
                let r = pread_fresh(&f.file, *size as usize, *offset);
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
                // Each client's locks are on its own files, so waiting
                // (dbench's F_SETLKW) never blocks.
                let r = nix::fcntl::fcntl(f.file.as_fd(), FcntlArg::F_SETLKW(&fl)).map(drop);
                Self::check(line, op, &HandleTarget(*handle), r).map(drop)
            }
            Op::Flush { handle } => {
                let f = self.file(line, op, *handle)?;
                let r = nix::unistd::fsync(&f.file);
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
        let result: Result<OwnedFd, Errno> = if options & FILE_DIRECTORY_FILE != 0 {
            // dbench makes the directory whatever the disposition ("not
            // strictly correct, but close enough"), ignoring errors.
            let _ = mkdirat(&self.root, p, Mode::from_bits_truncate(0o700));
            let opened = openat(&self.root, p, DIR_OPEN, Mode::from_bits_truncate(0o600));
            self.directory_made();
            opened
        } else {
            let extra = match disposition {
                FILE_CREATE => OFlag::O_CREAT,
                FILE_OVERWRITE | FILE_OVERWRITE_IF => OFlag::O_CREAT | OFlag::O_TRUNC,
                _ => OFlag::empty(),
            };
            let flags = OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | extra;
            match openat(&self.root, p, flags, Mode::from_bits_truncate(0o600)) {
                // A directory opened as a file: dbench opens it again as
                // a directory.
                Err(Errno::EISDIR) => openat(&self.root, p, DIR_OPEN, Mode::from_bits_truncate(0o600)),
                other => other,
            }
        };
        if let Some(fd) = Self::check(line, OP, path, result)? {
            if self.handles.contains_key(&handle) {
                return Err(FsClientError::HandleInUse { line: line.number, target: path.to_string(), handle });
            }
            let file = File::from(fd);
            // dbench looks at what it opened (its result is unused there
            // too).
            let _ = fstat(&file);
            self.handles.insert(handle, OpenFile { file, path: self.path_a.as_slice().into() });
        }
        Ok(())
    }

    /// dbench's Deltree of the directory at `path` (relative to the
    /// replay directory; left as it was on success): every entry that is
    /// not a directory is unlinked, including symbolic links, which are
    /// never followed; directories are walked the same way and stay. A
    /// missing path or one that is not a directory is left alone.
    fn deltree(&mut self, path: &mut Vec<u8>) -> Result<(), Errno> {
        let mut dir = match DirStream::open(&self.root, path, DIR_OPEN) {
            Ok(d) => d,
            // Gone, or not a directory (O_NOFOLLOW: a link is not one).
            Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(()),
            Err(e) => return Err(e),
        };
        if !self.left_by_deltree.contains(path.as_slice()) {
            self.left_by_deltree.insert(path.clone());
        }
        let len = path.len();
        while let Some(entry) = dir.next_entry()? {
            if entry.name == b"." || entry.name == b".." {
                continue;
            }
            path.truncate(len);
            path.push(b'/');
            path.extend_from_slice(entry.name);
            // Gone since it was listed: skipped, as dbench skips it.
            let Ok(st) = fstatat(&self.root, path.as_slice(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
                continue;
            };
            if file_type(st.st_mode) == SFlag::S_IFDIR.bits() {
                self.deltree(path)?;
            } else {
                match unlinkat(&self.root, path.as_slice(), UnlinkatFlags::NoRemoveDir) {
                    Ok(()) | Err(Errno::ENOENT) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        path.truncate(len);
        Ok(())
    }

    fn find_first(&mut self, line: &Line, pattern: &SmbPath, max_count: u32, count: u32) -> Result<(), FsClientError> {
        const OP: &str = "FIND_FIRST";
        self.render(pattern, Slot::A);
        let found = self.resolve(line, OP, pattern, Slot::A)?;
        let mask = pattern.file_name();
        if !dos_wildcard::has_wildcards(mask) {
            // A plain name: SMB's FIND_FIRST finds it or not.
            return self.check_lookup(line, OP, pattern, found);
        }
        let dir_len = self.path_a.iter().rposition(|&b| b == b'/').unwrap_or(0);
        let dir: &[u8] = if dir_len == 0 { b"." } else { self.path_a.get(..dir_len).unwrap_or(b".") };
        // dbench reads up to `max_count` entries; the reply holds the
        // matches among them.
        let listed = DirStream::open(&self.root, dir, DIR_OPEN).and_then(|mut d| {
            let mut matched = 0usize;
            for _ in 0..max_count {
                match d.next_entry()? {
                    Some(e) if name_matches(mask, e.name) => matched += 1,
                    Some(_) => {}
                    None => break,
                }
            }
            Ok(matched)
        });
        // An SMB server answers "no such file" when nothing matches.
        let r = match listed {
            Ok(0) => Err(Errno::ENOENT),
            other => other,
        };
        if let Some(found) = Self::check(line, OP, pattern, r)? {
            let returned = u32::try_from(found).unwrap_or(u32::MAX);
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

mod dir_stream;
#[cfg(test)]
mod tests;
