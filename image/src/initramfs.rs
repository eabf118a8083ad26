//! The initramfs archive: validated entries written as a reproducible newc
//! cpio. Owns path validation, entry order and metadata, and the guard that
//! no entry is ever written with fewer or more bytes than its header
//! declares. It must not read anything at write time that could differ
//! between two writes: file contents are read when they are added.
//!
//! Layout: `error` (the error type), `entry` (archive paths and the nodes
//! stored at them) and `newc` (the cpio encoding), each using only the
//! ones before it; this module collects the entries and writes the image.

mod entry;
mod error;
mod newc;
#[cfg(test)]
mod tests;

pub use error::ImageError;

use crate::compression::{Compression, Encoder};
use entry::{check_mode, ArchivePath, Node, PATH_MAX};
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Mode of directories created implicitly as parents of an added path.
const IMPLICIT_DIR_MODE: u32 = 0o755;
/// Mode of the image file written by [`Initramfs::write_file`].
const IMAGE_FILE_MODE: u32 = 0o644;

/// An initramfs under construction: directories, files, symlinks and device
/// nodes under relative archive paths.
///
/// The archive is reproducible: entries are written sorted by path (each
/// directory before its children) whatever order they were added in, with
/// mtime 0, uid and gid 0, inode numbers 1..n in that order, and nlink 1
/// (2 for directories). Missing parent directories are created with mode
/// 0o755. File contents are held in memory from the moment they are added.
///
/// ```
/// use image::{Compression, Initramfs};
///
/// let mut fs = Initramfs::new();
/// fs.add_file("init", 0o755, b"\x7fELF...".to_vec())?;
/// // Creates etc/ and etc/bootbench/ (mode 0o755) on the way.
/// fs.add_file("etc/bootbench/suite.json", 0o644, br#"{"name":"quick"}"#.to_vec())?;
/// fs.add_symlink("sbin/init", "/init")?;
///
/// let gz = fs.to_bytes(Compression::Gzip)?;
/// assert_eq!(gz, fs.to_bytes(Compression::Gzip)?, "same input, same bytes");
/// assert_eq!(fs.to_bytes(Compression::None)?.len(), fs.raw_size());
///
/// // Paths are checked as they are added.
/// assert!(fs.add_file("/init", 0o755, Vec::new()).is_err());
/// assert!(fs.add_dir("init", 0o755).is_err(), "init is already a file");
/// # Ok::<(), image::ImageError>(())
/// ```
#[derive(Clone, Default)]
pub struct Initramfs {
    entries: BTreeMap<ArchivePath, Node>,
}

impl fmt::Debug for Initramfs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // File contents are deliberately left out: they can be megabytes.
        f.debug_struct("Initramfs")
            .field("entries", &self.entries.len())
            .field("raw_size", &self.raw_size())
            .finish_non_exhaustive()
    }
}

impl Initramfs {
    /// An empty archive.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a directory with permission bits `mode`. Adding a directory that
    /// is already there is fine as long as the modes agree; a parent created
    /// implicitly takes the mode given here.
    pub fn add_dir(&mut self, path: &str, mode: u32) -> Result<(), ImageError> {
        check_mode(path, mode)?;
        self.insert(path, Node::Dir { mode, explicit: true })
    }

    /// Adds a regular file with permission bits `mode` and contents `data`.
    pub fn add_file(&mut self, path: &str, mode: u32, data: Vec<u8>) -> Result<(), ImageError> {
        check_mode(path, mode)?;
        if u32::try_from(data.len()).is_err() {
            return Err(ImageError::FileTooLarge { path: path.to_owned(), size: data.len() as u64 });
        }
        self.insert(path, Node::File { mode, data })
    }

    /// Adds a regular file with permission bits `mode` (not the host file's)
    /// whose contents are read now from the host file `src`.
    pub fn add_file_from(&mut self, path: &str, mode: u32, src: &Path) -> Result<(), ImageError> {
        // Validate before reading, so a bad path is reported as such and
        // does not cost a read of a large file.
        ArchivePath::parse(path)?;
        check_mode(path, mode)?;
        let data = fs::read(src).map_err(|source| ImageError::ReadSource {
            src: src.to_owned(),
            path: path.to_owned(),
            source,
        })?;
        self.add_file(path, mode, data)
    }

    /// Adds a symbolic link at `path` pointing to `target`, which may be
    /// absolute (`/init`) or relative (`../lib`); it is stored as given.
    pub fn add_symlink(&mut self, path: &str, target: &str) -> Result<(), ImageError> {
        let invalid =
            |reason| Err(ImageError::InvalidSymlinkTarget { path: path.to_owned(), target: target.to_owned(), reason });
        if target.is_empty() {
            return invalid("empty target");
        }
        if target.contains('\0') {
            return invalid("contains a NUL byte");
        }
        if target.len() >= PATH_MAX {
            return invalid("longer than the kernel's PATH_MAX");
        }
        self.insert(path, Node::Symlink { target: target.to_owned() })
    }

    /// Adds a character device node, e.g. `dev/console` (5, 1), so the
    /// kernel can open an initial console before anything is mounted.
    pub fn add_char_device(&mut self, path: &str, mode: u32, major: u32, minor: u32) -> Result<(), ImageError> {
        check_mode(path, mode)?;
        self.insert(path, Node::CharDevice { mode, major, minor })
    }

    /// Number of entries, implicit parent directories included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing has been added.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every archive path, in the order they are written.
    pub fn paths(&self) -> impl Iterator<Item = String> + '_ {
        self.entries.keys().map(ArchivePath::to_string)
    }

    /// Size in bytes of the uncompressed archive, trailer included.
    pub fn raw_size(&self) -> usize {
        newc::archive_size(&self.entries)
    }

    /// Writes the archive, compressed as asked, to `out`. On error, what was
    /// written to `out` so far is not a valid archive.
    pub fn write_to<W: Write>(&self, out: W, compression: Compression) -> Result<(), ImageError> {
        let encoder = Encoder::new(BufWriter::new(out), compression).map_err(|source| ImageError::Compress {
            what: "start",
            compression,
            source,
        })?;
        let encoder = newc::write_archive(&self.entries, encoder)?;
        let buffered =
            encoder.finish().map_err(|source| ImageError::Compress { what: "finish", compression, source })?;
        buffered.into_inner().map_err(|e| ImageError::Compress {
            what: "finish",
            compression,
            source: e.into_error(),
        })?;
        Ok(())
    }

    /// The archive, compressed as asked, in memory.
    pub fn to_bytes(&self, compression: Compression) -> Result<Vec<u8>, ImageError> {
        let mut out = Vec::with_capacity(match compression {
            Compression::None => self.raw_size(),
            Compression::Gzip | Compression::Zstd => self.raw_size() / 3,
        });
        self.write_to(&mut out, compression)?;
        Ok(out)
    }

    /// Writes the archive, compressed as asked, to the file `path` and
    /// returns its size in bytes. The data goes to a temporary file in the
    /// same directory, which is synced and then renamed over `path`, so a
    /// failure never leaves a half-written image at `path`. The file gets
    /// mode 0o644.
    pub fn write_file(&self, path: &Path, compression: Compression) -> Result<u64, ImageError> {
        let file_name = path.file_name().ok_or_else(|| ImageError::BadOutputPath(path.to_owned()))?;
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(file_name);
        prefix.push(".");
        // Dropping `tmp` on any early return removes the temporary file.
        let mut tmp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(|source| ImageError::CreateTemp { dir: dir.to_owned(), source })?;
        self.write_to(tmp.as_file_mut(), compression)
            .map_err(|e| ImageError::WriteImage { path: path.to_owned(), source: Box::new(e) })?;
        let finish = |what, source| ImageError::FinishImage { what, path: path.to_owned(), source };
        let file = tmp.as_file();
        file.sync_all().map_err(|e| finish("sync", e))?;
        file.set_permissions(fs::Permissions::from_mode(IMAGE_FILE_MODE))
            .map_err(|e| finish("set permissions of", e))?;
        let size = file.metadata().map_err(|e| finish("stat", e))?.len();
        tmp.persist(path).map_err(|e| finish("rename into place", e.error))?;
        Ok(size)
    }

    /// Checks `path` and its parents, then inserts `node` and any missing
    /// parents. Nothing changes unless everything checks out.
    fn insert(&mut self, path: &str, node: Node) -> Result<(), ImageError> {
        let key = ArchivePath::parse(path)?;
        for parent in key.parents() {
            match self.entries.get(&parent) {
                None | Some(Node::Dir { .. }) => {}
                Some(other) => {
                    return Err(ImageError::ParentNotDirectory {
                        path: path.to_owned(),
                        parent: parent.to_string(),
                        kind: other.kind(),
                    })
                }
            }
        }
        match (self.entries.get(&key), &node) {
            (None, _) | (Some(Node::Dir { explicit: false, .. }), Node::Dir { .. }) => {}
            (Some(Node::Dir { mode: existing, explicit: true }), Node::Dir { mode: new, .. }) => {
                if existing == new {
                    return Ok(());
                }
                return Err(ImageError::DirectoryModeConflict {
                    path: path.to_owned(),
                    existing: *existing,
                    new: *new,
                });
            }
            (Some(existing), _) => {
                return Err(ImageError::Conflict { path: path.to_owned(), existing: existing.kind(), new: node.kind() })
            }
        }
        for parent in key.parents() {
            self.entries.entry(parent).or_insert(Node::Dir { mode: IMPLICIT_DIR_MODE, explicit: false });
        }
        self.entries.insert(key, node);
        Ok(())
    }
}
