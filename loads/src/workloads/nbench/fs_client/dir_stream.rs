//! Reading a directory with the system calls glibc's `opendir`, `readdir`
//! and `closedir` make for dbench: `openat`, an `fstat` of what was
//! opened, `getdents64` into a 32 KiB buffer until it returns nothing,
//! `close`. (nix's `Dir` goes through `fdopendir`, which adds two `fcntl`
//! calls per directory, and rewinds with `lseek` after `iter`.) Owns the
//! buffer and the record format; what to do with the entries is the
//! caller's.

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, Mode};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// glibc's buffer for a directory on a filesystem with small blocks.
const BUFFER: usize = 32 * 1024;
/// Where a `linux_dirent64` record's fields sit.
const RECLEN_AT: usize = 16;
const TYPE_AT: usize = 18;
const NAME_AT: usize = 19;

/// An open directory being read.
pub(super) struct DirStream {
    fd: OwnedFd,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
}

/// One entry: its name and its `d_type` (`DT_DIR`, `DT_LNK`, ...).
pub(super) struct Entry<'a> {
    pub name: &'a [u8],
    pub d_type: u8,
}

impl DirStream {
    /// Opens `path` relative to `dir` with `flags` (which should hold
    /// `O_DIRECTORY`).
    pub(super) fn open(dir: impl AsFd, path: &[u8], flags: OFlag) -> Result<DirStream, Errno> {
        let fd = openat(dir, path, flags, Mode::empty())?;
        // glibc's opendir checks that it opened a directory.
        fstat(&fd)?;
        // Uninitialised, as glibc's `malloc` of it: zeroing 32 KiB per
        // directory would be work dbench does not do.
        Ok(DirStream { fd, buf: Vec::with_capacity(BUFFER), pos: 0, len: 0 })
    }

    /// The next entry (`.` and `..` included), or `None` at the end.
    pub(super) fn next_entry(&mut self) -> Result<Option<Entry<'_>>, Errno> {
        if self.pos >= self.len {
            self.buf.clear();
            let room = self.buf.capacity();
            // SAFETY: the kernel writes at most `room` bytes into the
            // vector's allocation, which lives across the call.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    self.fd.as_raw_fd(),
                    self.buf.spare_capacity_mut().as_mut_ptr(),
                    room,
                )
            };
            if n < 0 {
                return Err(Errno::last());
            }
            let n = usize::try_from(n).unwrap_or(0).min(room);
            // SAFETY: the kernel initialised the first `n` bytes.
            unsafe { self.buf.set_len(n) };
            self.pos = 0;
            self.len = n;
            if self.len == 0 {
                return Ok(None);
            }
        }
        let record = self.buf.get(self.pos..self.len).unwrap_or_default();
        let reclen = match record.get(RECLEN_AT..RECLEN_AT + 2) {
            Some(&[a, b]) => usize::from(u16::from_ne_bytes([a, b])),
            _ => 0,
        };
        let Some(record) = record.get(..reclen).filter(|_| reclen > NAME_AT) else {
            // A record the kernel would never write: stop reading.
            self.pos = self.len;
            return Err(Errno::EIO);
        };
        self.pos += reclen;
        let field = record.get(NAME_AT..).unwrap_or_default();
        let name = field.split(|&b| b == 0).next().unwrap_or_default();
        Ok(Some(Entry { name, d_type: record.get(TYPE_AT).copied().unwrap_or(libc::DT_UNKNOWN) }))
    }
}
