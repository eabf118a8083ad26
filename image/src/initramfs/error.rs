//! The initramfs writer's error type: what was being done and with which
//! path. It must not depend on anything else of the writer.

use crate::compression::Compression;
use std::io;
use std::path::PathBuf;

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
    /// The host file for [`Initramfs::add_file_from`](super::Initramfs::add_file_from) cannot be read.
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
    /// The output path of [`Initramfs::write_file`](super::Initramfs::write_file) names no file.
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
