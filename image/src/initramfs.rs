//! The initramfs archive: validated entries written as a reproducible newc
//! cpio. Owns path validation, entry order and metadata, and the guard that
//! no entry is ever written with fewer or more bytes than its header
//! declares. It must not read anything at write time that could differ
//! between two writes: file contents are read when they are added.

use crate::compression::{Compression, Encoder};
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Mode of directories created implicitly as parents of an added path.
const IMPLICIT_DIR_MODE: u32 = 0o755;
/// Permission bits an entry may carry; the file type comes from the `add_*` call.
const PERMISSION_BITS: u32 = 0o7777;
/// The kernel's PATH_MAX, including the terminating NUL.
const PATH_MAX: usize = 4096;
/// Mode of the image file written by [`Initramfs::write_file`].
const IMAGE_FILE_MODE: u32 = 0o644;

/// Size of a newc header before the name.
const NEWC_HEADER_LEN: usize = 110;
/// The name of the newc end-of-archive entry.
const NEWC_TRAILER_NAME: &str = "TRAILER!!!";

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFCHR: u32 = 0o020_000;

/// Errors while building or writing an initramfs.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The archive path is empty, absolute, or has a bad component.
    #[error("invalid archive path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The mode has bits besides the permission bits.
    #[error("invalid mode {mode:#o} for {path:?}: give permission bits only (at most 0o7777); the file type comes from the add_* call")]
    InvalidMode {
        /// The archive path.
        path: String,
        /// The mode as given.
        mode: u32,
    },
    /// The symlink target cannot be stored.
    #[error("invalid symlink target {target:?} for {path:?}: {reason}")]
    InvalidSymlinkTarget {
        /// The archive path of the symlink.
        path: String,
        /// The target as given.
        target: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Something of another kind, or a file, already sits at the path.
    #[error("cannot add {new} {path:?}: a {existing} is already there")]
    Conflict {
        /// The archive path.
        path: String,
        /// Kind of the entry already there.
        existing: &'static str,
        /// Kind of the entry being added.
        new: &'static str,
    },
    /// The same directory was added twice with different modes.
    #[error("directory {path:?} added twice with different modes ({existing:#o} and {new:#o})")]
    DirectoryModeConflict {
        /// The archive path.
        path: String,
        /// Mode given first.
        existing: u32,
        /// Mode given now.
        new: u32,
    },
    /// A parent of the path is not a directory.
    #[error("cannot add {path:?}: its parent {parent:?} is a {kind}, not a directory")]
    ParentNotDirectory {
        /// The archive path being added.
        path: String,
        /// The parent that is in the way.
        parent: String,
        /// What the parent is.
        kind: &'static str,
    },
    /// A file larger than newc's 32-bit size field.
    #[error("file {path:?} is {size} bytes; a newc archive holds at most 4 GiB - 1 per file")]
    FileTooLarge {
        /// The archive path.
        path: String,
        /// Its size.
        size: u64,
    },
    /// More entries than newc's 32-bit inode numbers can count.
    #[error("too many entries for a newc archive ({count})")]
    TooManyEntries {
        /// Number of entries.
        count: usize,
    },
    /// The host file for [`Initramfs::add_file_from`] cannot be read.
    #[error("cannot read {src} (for archive path {path:?})")]
    ReadSource {
        /// The host file.
        src: PathBuf,
        /// The archive path it was to be stored at.
        path: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// An entry's data ended before the size its header declares. Writing on
    /// would shift every following header and corrupt the archive.
    #[error("entry {path:?}: data ended after {written} of the {declared} bytes its header declares")]
    ShortData {
        /// The archive path.
        path: String,
        /// Size in the header.
        declared: u32,
        /// Bytes the data actually had.
        written: u64,
    },
    /// An entry's data is longer than the size its header declares.
    #[error("entry {path:?}: data is longer than the {declared} bytes its header declares")]
    LongData {
        /// The archive path.
        path: String,
        /// Size in the header.
        declared: u32,
    },
    /// Writing an entry (header, data or padding) to the output failed.
    #[error("cannot write entry {path:?} to the archive")]
    WriteEntry {
        /// The archive path, or `TRAILER!!!` for the end marker.
        path: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Setting up or finishing the compressed stream failed.
    #[error("cannot {what} the {compression} stream")]
    Compress {
        /// "start" or "finish".
        what: &'static str,
        /// The compression in use.
        compression: Compression,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The output path of [`Initramfs::write_file`] names no file.
    #[error("output path {0} does not name a file")]
    BadOutputPath(PathBuf),
    /// The temporary file beside the output cannot be created.
    #[error("cannot create a temporary file in {dir}")]
    CreateTemp {
        /// The output's directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Writing the image file failed; the output path was left untouched.
    #[error("cannot write image {path}")]
    WriteImage {
        /// The output path.
        path: PathBuf,
        /// What failed.
        #[source]
        source: Box<ImageError>,
    },
    /// Syncing, chmod-ing or renaming the finished temporary file failed; the
    /// output path was left untouched.
    #[error("cannot {what} image {path}")]
    FinishImage {
        /// What was being done: "sync", "set permissions of", "stat", "rename into place".
        what: &'static str,
        /// The output path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
}

/// A validated archive path, compared component by component so that a
/// directory sorts right before its own children.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ArchivePath(Vec<String>);

impl ArchivePath {
    fn parse(path: &str) -> Result<ArchivePath, ImageError> {
        let invalid = |reason| Err(ImageError::InvalidPath { path: path.to_owned(), reason });
        if path.is_empty() {
            return invalid("empty path");
        }
        if path.contains('\0') {
            return invalid("contains a NUL byte");
        }
        if path.starts_with('/') {
            return invalid("absolute; archive paths are relative to the initramfs root, e.g. \"init\"");
        }
        if path.len() >= PATH_MAX {
            return invalid("longer than the kernel's PATH_MAX");
        }
        let mut components = Vec::new();
        for component in path.split('/') {
            match component {
                "" => return invalid("empty component (a trailing or doubled '/')"),
                "." => return invalid("'.' component"),
                ".." => return invalid("'..' component"),
                c => components.push(c.to_owned()),
            }
        }
        Ok(ArchivePath(components))
    }

    /// Every proper ancestor, outermost first.
    fn parents(&self) -> impl Iterator<Item = ArchivePath> + '_ {
        (1..self.0.len()).map(|n| ArchivePath(self.0[..n].to_vec()))
    }
}

impl fmt::Display for ArchivePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("/"))
    }
}

#[derive(Clone)]
enum Node {
    /// `explicit` is false for a parent created implicitly; an explicit
    /// `add_dir` then sets its mode, whichever call came first.
    Dir {
        mode: u32,
        explicit: bool,
    },
    File {
        mode: u32,
        data: Vec<u8>,
    },
    Symlink {
        target: String,
    },
    CharDevice {
        mode: u32,
        major: u32,
        minor: u32,
    },
}

impl Node {
    fn kind(&self) -> &'static str {
        match self {
            Node::Dir { .. } => "directory",
            Node::File { .. } => "file",
            Node::Symlink { .. } => "symlink",
            Node::CharDevice { .. } => "character device",
        }
    }

    /// The full newc mode (type and permission bits).
    fn newc_mode(&self) -> u32 {
        match self {
            Node::Dir { mode, .. } => S_IFDIR | mode,
            Node::File { mode, .. } => S_IFREG | mode,
            Node::Symlink { .. } => S_IFLNK | 0o777,
            Node::CharDevice { mode, .. } => S_IFCHR | mode,
        }
    }

    /// The entry's data: file contents or symlink target.
    fn data(&self) -> &[u8] {
        match self {
            Node::File { data, .. } => data,
            Node::Symlink { target } => target.as_bytes(),
            Node::Dir { .. } | Node::CharDevice { .. } => &[],
        }
    }
}

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
        let entries: usize = self
            .entries
            .iter()
            .map(|(path, node)| header_size(path.to_string().len()) + padded(node.data().len()))
            .sum();
        entries + header_size(NEWC_TRAILER_NAME.len())
    }

    /// Writes the archive, compressed as asked, to `out`. On error, what was
    /// written to `out` so far is not a valid archive.
    pub fn write_to<W: Write>(&self, out: W, compression: Compression) -> Result<(), ImageError> {
        let encoder = Encoder::new(BufWriter::new(out), compression).map_err(|source| ImageError::Compress {
            what: "start",
            compression,
            source,
        })?;
        let encoder = self.write_archive(encoder)?;
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

    /// Writes every entry and the trailer as newc into `out`.
    fn write_archive<W: Write>(&self, mut out: W) -> Result<W, ImageError> {
        for (index, (path, node)) in self.entries.iter().enumerate() {
            let ino = u32::try_from(index + 1).map_err(|_| ImageError::TooManyEntries { count: self.entries.len() })?;
            let name = path.to_string();
            let (nlink, rdev_major, rdev_minor) = match node {
                Node::Dir { .. } => (2, 0, 0),
                Node::CharDevice { major, minor, .. } => (1, *major, *minor),
                Node::File { .. } | Node::Symlink { .. } => (1, 0, 0),
            };
            let data = node.data();
            // add_file checked the size; symlink targets are short.
            let declared = u32::try_from(data.len())
                .map_err(|_| ImageError::FileTooLarge { path: name.clone(), size: data.len() as u64 })?;
            let builder = cpio::newc::Builder::new(&name)
                .ino(ino)
                .mode(node.newc_mode())
                .uid(0)
                .gid(0)
                .nlink(nlink)
                .mtime(0)
                .rdev_major(rdev_major)
                .rdev_minor(rdev_minor);
            out = write_entry(out, builder, &name, declared, data)?;
        }
        cpio::newc::trailer(out).map_err(|source| ImageError::WriteEntry { path: NEWC_TRAILER_NAME.to_owned(), source })
    }
}

/// Writes one newc entry whose header declares `declared` bytes, copying its
/// data from `data`, and fails unless `data` holds exactly that many bytes.
///
/// This guards against a pitfall of the `cpio` crate: a `Writer` finished
/// after fewer bytes than declared silently skips the padding and leaves the
/// archive corrupt from that entry on. Here a short entry is never finished.
fn write_entry<W: Write, R: Read>(
    out: W,
    builder: cpio::newc::Builder,
    path: &str,
    declared: u32,
    mut data: R,
) -> Result<W, ImageError> {
    let write_error = |source| ImageError::WriteEntry { path: path.to_owned(), source };
    let mut writer = builder.write(out, declared);
    let written = io::copy(&mut (&mut data).take(u64::from(declared)), &mut writer).map_err(write_error)?;
    if written != u64::from(declared) {
        return Err(ImageError::ShortData { path: path.to_owned(), declared, written });
    }
    let mut probe = [0u8; 1];
    if data.read(&mut probe).map_err(write_error)? != 0 {
        return Err(ImageError::LongData { path: path.to_owned(), declared });
    }
    writer.finish().map_err(write_error)
}

fn check_mode(path: &str, mode: u32) -> Result<(), ImageError> {
    if mode & !PERMISSION_BITS != 0 {
        return Err(ImageError::InvalidMode { path: path.to_owned(), mode });
    }
    Ok(())
}

/// `n` rounded up to newc's 4-byte alignment.
fn padded(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// Size of a newc header with its NUL-terminated, padded name.
fn header_size(name_len: usize) -> usize {
    padded(NEWC_HEADER_LEN + name_len + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry as read back with the `cpio` crate's reader.
    #[derive(Debug, PartialEq)]
    struct ReadEntry {
        name: String,
        ino: u32,
        mode: u32,
        nlink: u32,
        rdev: (u32, u32),
        data: Vec<u8>,
    }

    fn read_back(mut archive: &[u8]) -> Vec<ReadEntry> {
        let mut entries = Vec::new();
        loop {
            let mut reader = cpio::NewcReader::new(archive).unwrap();
            let e = reader.entry();
            if e.is_trailer() {
                break;
            }
            assert_eq!((e.uid(), e.gid(), e.mtime()), (0, 0, 0), "{}", e.name());
            assert_eq!((e.dev_major(), e.dev_minor()), (0, 0), "{}", e.name());
            let mut entry = ReadEntry {
                name: e.name().to_owned(),
                ino: e.ino(),
                mode: e.mode(),
                nlink: e.nlink(),
                rdev: (e.rdev_major(), e.rdev_minor()),
                data: Vec::new(),
            };
            reader.read_to_end(&mut entry.data).unwrap();
            entries.push(entry);
            archive = reader.finish().unwrap();
        }
        entries
    }

    fn sample() -> Initramfs {
        let mut fs = Initramfs::new();
        fs.add_file("init", 0o755, b"#!init\n".to_vec()).unwrap();
        fs.add_file("etc/bootbench/suite.json", 0o644, br#"{"name":"quick"}"#.to_vec()).unwrap();
        fs.add_dir("tmp", 0o1777).unwrap();
        fs.add_symlink("sbin/init", "/init").unwrap();
        fs.add_char_device("dev/console", 0o600, 5, 1).unwrap();
        fs.add_file("lib/modules/6.1.0-28-amd64/kernel/drivers/virtio/virtio.ko", 0o644, vec![0x7f; 1001]).unwrap();
        fs.add_file("empty", 0o600, Vec::new()).unwrap();
        fs
    }

    /// The same entries as [`sample`], added in another order.
    fn sample_reordered() -> Initramfs {
        let mut fs = Initramfs::new();
        fs.add_file("empty", 0o600, Vec::new()).unwrap();
        fs.add_file("lib/modules/6.1.0-28-amd64/kernel/drivers/virtio/virtio.ko", 0o644, vec![0x7f; 1001]).unwrap();
        fs.add_char_device("dev/console", 0o600, 5, 1).unwrap();
        fs.add_symlink("sbin/init", "/init").unwrap();
        fs.add_dir("tmp", 0o1777).unwrap();
        fs.add_file("etc/bootbench/suite.json", 0o644, br#"{"name":"quick"}"#.to_vec()).unwrap();
        fs.add_file("init", 0o755, b"#!init\n".to_vec()).unwrap();
        fs
    }

    #[test]
    fn same_bytes_whatever_the_order_of_adds() {
        for c in Compression::ALL {
            let a = sample().to_bytes(c).unwrap();
            assert_eq!(a, sample().to_bytes(c).unwrap(), "{c}: twice");
            assert_eq!(a, sample_reordered().to_bytes(c).unwrap(), "{c}: reordered");
        }
    }

    #[test]
    fn read_back_with_the_cpio_crate() {
        let archive = sample().to_bytes(Compression::None).unwrap();
        assert_eq!(archive.len(), sample().raw_size());
        assert_eq!(archive.len() % 4, 0);
        let entries = read_back(&archive);
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "dev",
                "dev/console",
                "empty",
                "etc",
                "etc/bootbench",
                "etc/bootbench/suite.json",
                "init",
                "lib",
                "lib/modules",
                "lib/modules/6.1.0-28-amd64",
                "lib/modules/6.1.0-28-amd64/kernel",
                "lib/modules/6.1.0-28-amd64/kernel/drivers",
                "lib/modules/6.1.0-28-amd64/kernel/drivers/virtio",
                "lib/modules/6.1.0-28-amd64/kernel/drivers/virtio/virtio.ko",
                "sbin",
                "sbin/init",
                "tmp",
            ]
        );
        let inos: Vec<u32> = entries.iter().map(|e| e.ino).collect();
        assert_eq!(inos, (1..=entries.len() as u32).collect::<Vec<_>>());
        let by_name = |n: &str| entries.iter().find(|e| e.name == n).unwrap();
        let init = by_name("init");
        assert_eq!((init.mode, init.nlink, init.data.as_slice()), (0o100755, 1, &b"#!init\n"[..]));
        let etc = by_name("etc");
        assert_eq!((etc.mode, etc.nlink, etc.data.len()), (0o040755, 2, 0));
        assert_eq!(by_name("tmp").mode, 0o041777);
        let link = by_name("sbin/init");
        assert_eq!((link.mode, link.data.as_slice()), (0o120777, &b"/init"[..]));
        let console = by_name("dev/console");
        assert_eq!((console.mode, console.rdev, console.data.len()), (0o020600, (5, 1), 0));
        let ko = by_name("lib/modules/6.1.0-28-amd64/kernel/drivers/virtio/virtio.ko");
        assert_eq!(ko.data, vec![0x7f; 1001]);
        assert_eq!(by_name("empty").data.len(), 0);
    }

    #[test]
    fn directories_sort_before_their_children_and_siblings_with_longer_names() {
        let mut fs = Initramfs::new();
        fs.add_file("a-b", 0o644, Vec::new()).unwrap();
        fs.add_file("a/b", 0o644, Vec::new()).unwrap();
        fs.add_file("a.txt", 0o644, Vec::new()).unwrap();
        assert_eq!(fs.paths().collect::<Vec<_>>(), ["a", "a/b", "a-b", "a.txt"]);
    }

    #[test]
    fn an_explicit_directory_mode_wins_over_an_implicit_parent() {
        for explicit_first in [true, false] {
            let mut fs = Initramfs::new();
            if explicit_first {
                fs.add_dir("etc", 0o700).unwrap();
                fs.add_file("etc/x", 0o644, Vec::new()).unwrap();
            } else {
                fs.add_file("etc/x", 0o644, Vec::new()).unwrap();
                fs.add_dir("etc", 0o700).unwrap();
            }
            let entries = read_back(&fs.to_bytes(Compression::None).unwrap());
            assert_eq!(entries[0].name, "etc");
            assert_eq!(entries[0].mode, 0o040700, "explicit_first={explicit_first}");
        }
        let mut fs = Initramfs::new();
        fs.add_dir("etc", 0o700).unwrap();
        fs.add_dir("etc", 0o700).unwrap();
        let err = fs.add_dir("etc", 0o755).unwrap_err();
        assert!(matches!(err, ImageError::DirectoryModeConflict { existing: 0o700, new: 0o755, .. }), "{err}");
    }

    #[test]
    fn bad_paths_are_rejected_with_the_path_named() {
        let cases = [
            ("", "empty path"),
            ("/init", "absolute"),
            ("etc//x", "empty component"),
            ("etc/", "empty component"),
            ("./init", "'.' component"),
            ("a/./b", "'.' component"),
            ("../etc", "'..' component"),
            ("lib/../../etc", "'..' component"),
            ("a\0b", "NUL"),
        ];
        for (path, why) in cases {
            let mut fs = Initramfs::new();
            let err = fs.add_file(path, 0o644, Vec::new()).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, ImageError::InvalidPath { .. }), "{path:?}: {msg}");
            assert!(msg.contains(why), "{path:?}: {msg}");
            assert!(msg.contains(&format!("{path:?}")), "{path:?}: {msg}");
            assert!(fs.add_dir(path, 0o755).is_err());
            assert!(fs.add_symlink(path, "x").is_err());
            assert!(fs.is_empty(), "a rejected path leaves nothing behind");
        }
        let long = "x/".repeat(PATH_MAX / 2) + "x";
        assert!(Initramfs::new().add_file(&long, 0o644, Vec::new()).is_err());
    }

    #[test]
    fn conflicting_entries_are_rejected_in_either_order() {
        let mut fs = Initramfs::new();
        fs.add_file("etc/x", 0o644, Vec::new()).unwrap();
        let err = fs.add_file("etc", 0o644, Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), r#"cannot add file "etc": a directory is already there"#);
        let err = fs.add_dir("etc/x", 0o755).unwrap_err();
        assert_eq!(err.to_string(), r#"cannot add directory "etc/x": a file is already there"#);
        let err = fs.add_file("etc/x", 0o644, b"again".to_vec()).unwrap_err();
        assert!(matches!(err, ImageError::Conflict { existing: "file", new: "file", .. }), "{err}");
        let err = fs.add_file("etc/x/y", 0o644, Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), r#"cannot add "etc/x/y": its parent "etc/x" is a file, not a directory"#);
        fs.add_symlink("bin", "usr/bin").unwrap();
        let err = fs.add_file("bin/sh", 0o755, Vec::new()).unwrap_err();
        assert!(matches!(err, ImageError::ParentNotDirectory { kind: "symlink", .. }), "{err}");
        // Nothing was half-added by the failures.
        assert_eq!(fs.paths().collect::<Vec<_>>(), ["bin", "etc", "etc/x"]);
    }

    #[test]
    fn modes_and_symlink_targets_are_checked() {
        let mut fs = Initramfs::new();
        let err = fs.add_file("init", 0o100755, Vec::new()).unwrap_err();
        assert!(err.to_string().contains("0o100755"), "{err}");
        assert!(fs.add_dir("d", 0o10000).is_err());
        assert!(fs.add_file("suid", 0o4755, Vec::new()).is_ok());
        assert!(matches!(fs.add_symlink("l", "").unwrap_err(), ImageError::InvalidSymlinkTarget { .. }));
        assert!(matches!(fs.add_symlink("l", "a\0b").unwrap_err(), ImageError::InvalidSymlinkTarget { .. }));
    }

    #[test]
    fn add_file_from_names_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("init.bin");
        fs::write(&src, b"binary").unwrap();
        let mut fs = Initramfs::new();
        fs.add_file_from("init", 0o755, &src).unwrap();
        let entries = read_back(&fs.to_bytes(Compression::None).unwrap());
        assert_eq!(entries[0].data, b"binary");

        let missing = dir.path().join("nope");
        let err = fs.add_file_from("other", 0o755, &missing).unwrap_err();
        assert!(matches!(err, ImageError::ReadSource { .. }));
        assert!(err.to_string().contains(&missing.display().to_string()), "{err}");
        // A bad archive path is reported before the source is even read.
        assert!(matches!(fs.add_file_from("/x", 0o755, &missing).unwrap_err(), ImageError::InvalidPath { .. }));
    }

    #[test]
    fn compressed_archives_decompress_to_the_raw_one() {
        let fs = sample();
        let raw = fs.to_bytes(Compression::None).unwrap();
        let mut gunzipped = Vec::new();
        flate2::read::GzDecoder::new(&fs.to_bytes(Compression::Gzip).unwrap()[..]).read_to_end(&mut gunzipped).unwrap();
        assert_eq!(gunzipped, raw);
        assert_eq!(zstd::decode_all(&fs.to_bytes(Compression::Zstd).unwrap()[..]).unwrap(), raw);
    }

    #[test]
    fn empty_archive_is_just_a_trailer() {
        let fs = Initramfs::new();
        let raw = fs.to_bytes(Compression::None).unwrap();
        assert_eq!(raw.len(), fs.raw_size());
        assert!(read_back(&raw).is_empty());
    }

    fn builder() -> cpio::newc::Builder {
        cpio::newc::Builder::new("f").mode(S_IFREG | 0o644).ino(1)
    }

    #[test]
    fn guard_rejects_data_shorter_than_declared() {
        // Left to the cpio crate alone, this would write a header for 10
        // bytes, 4 bytes of data, no padding, and succeed.
        let err = write_entry(Vec::new(), builder(), "f", 10, &b"four"[..]).unwrap_err();
        assert!(matches!(err, ImageError::ShortData { declared: 10, written: 4, .. }), "{err}");
        assert_eq!(err.to_string(), r#"entry "f": data ended after 4 of the 10 bytes its header declares"#);
    }

    #[test]
    fn guard_rejects_data_longer_than_declared() {
        let err = write_entry(Vec::new(), builder(), "f", 3, &b"four"[..]).unwrap_err();
        assert!(matches!(err, ImageError::LongData { declared: 3, .. }), "{err}");
    }

    #[test]
    fn guard_passes_exact_data_with_padding() {
        let out = write_entry(Vec::new(), builder(), "f", 5, &b"five!"[..]).unwrap();
        assert_eq!(out.len(), header_size(1) + padded(5));
        let out = cpio::newc::trailer(out).unwrap();
        assert_eq!(read_back(&out)[0].data, b"five!");
    }

    #[test]
    fn write_file_replaces_the_target_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("initramfs.cpio.gz");
        fs::write(&path, b"old").unwrap();
        let fs_ = sample();
        let size = fs_.write_file(&path, Compression::Gzip).unwrap();
        let written = fs::read(&path).unwrap();
        assert_eq!(size, written.len() as u64);
        assert_eq!(written, fs_.to_bytes(Compression::Gzip).unwrap());
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o644);
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["initramfs.cpio.gz"], "no temporary file is left behind");
    }

    #[test]
    fn write_file_failures_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let err = sample().write_file(&dir.path().join("missing/initramfs.cpio"), Compression::None).unwrap_err();
        assert!(matches!(err, ImageError::CreateTemp { .. }), "{err}");
        assert!(err.to_string().contains("missing"), "{err}");
        // Renaming over a directory fails after the data was written: the
        // temporary file is removed and the directory is untouched.
        let target = dir.path().join("taken");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), b"x").unwrap();
        let err = sample().write_file(&target, Compression::None).unwrap_err();
        assert!(matches!(err, ImageError::FinishImage { what: "rename into place", .. }), "{err}");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["taken"]);
        assert!(matches!(sample().write_file(Path::new("/"), Compression::None), Err(ImageError::BadOutputPath(_))));
    }
}
