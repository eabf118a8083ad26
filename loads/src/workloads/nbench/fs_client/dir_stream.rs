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
use std::mem::MaybeUninit;
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
    /// Uninitialised, as glibc's `malloc` of it (zeroing 32 KiB per
    /// directory would be work dbench does not do); only the bytes the
    /// kernel writes are ever read.
    buf: Box<[MaybeUninit<u8>]>,
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
        Ok(DirStream { fd, buf: Box::new_uninit_slice(BUFFER), pos: 0, len: 0 })
    }

    /// The byte at `i` of the last `getdents64` result.
    ///
    /// # Safety
    /// `i` must be a byte the kernel wrote: a record's fixed fields, or its
    /// name and the NUL after it.
    unsafe fn written(&self, i: usize) -> Option<u8> {
        // SAFETY: the caller names a byte the kernel initialised.
        self.buf.get(i).filter(|_| i < self.len).map(|b| unsafe { b.assume_init() })
    }

    /// The next entry (`.` and `..` included), or `None` at the end.
    pub(super) fn next_entry(&mut self) -> Result<Option<Entry<'_>>, Errno> {
        if self.pos >= self.len {
            // SAFETY: the kernel writes at most `buf.len()` bytes into the
            // buffer, which lives across the call.
            let n = unsafe {
                libc::syscall(libc::SYS_getdents64, self.fd.as_raw_fd(), self.buf.as_mut_ptr(), self.buf.len())
            };
            if n < 0 {
                return Err(Errno::last());
            }
            self.pos = 0;
            self.len = usize::try_from(n).unwrap_or(0).min(self.buf.len());
            if self.len == 0 {
                return Ok(None);
            }
        }
        let at = self.pos;
        // SAFETY: a linux_dirent64's d_reclen and d_type are written for
        // every record the kernel returns, and its name is written up to
        // and including its NUL, which comes before the record's end.
        let (reclen, d_type) = unsafe {
            let lo = self.written(at + RECLEN_AT);
            let hi = self.written(at + RECLEN_AT + 1);
            let reclen = lo.zip(hi).map_or(0, |(a, b)| usize::from(u16::from_ne_bytes([a, b])));
            (reclen, self.written(at + TYPE_AT))
        };
        if reclen <= NAME_AT || at + reclen > self.len {
            // A record the kernel would never write: stop reading.
            self.pos = self.len;
            return Err(Errno::EIO);
        }
        let mut name_len = 0;
        // SAFETY: as above; the scan stops at the name's NUL.
        while unsafe { self.written(at + NAME_AT + name_len) }.is_some_and(|b| b != 0) {
            name_len += 1;
            if NAME_AT + name_len >= reclen {
                self.pos = self.len;
                return Err(Errno::EIO);
            }
        }
        self.pos += reclen;
        let name = match self.buf.get(at + NAME_AT..at + NAME_AT + name_len) {
            // SAFETY: these bytes were each read above as written by the
            // kernel; MaybeUninit<u8> has u8's layout.
            Some(bytes) => unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<u8>(), bytes.len()) },
            None => &[],
        };
        Ok(Some(Entry { name, d_type: d_type.unwrap_or(libc::DT_UNKNOWN) }))
    }
}
