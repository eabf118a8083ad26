//! The newc cpio encoding of the entries: headers with fixed metadata,
//! each entry's data with the guard that no entry is ever written with
//! fewer or more bytes than its header declares, padding, the trailer, and
//! the archive's size. It must not depend on the `Initramfs` collection
//! that holds the entries.

use super::entry::{ArchivePath, Node};
use super::error::ImageError;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};

/// Size of a newc header before the name.
const NEWC_HEADER_LEN: usize = 110;
/// The name of the newc end-of-archive entry.
const NEWC_TRAILER_NAME: &str = "TRAILER!!!";

const S_IFDIR: u32 = 0o040_000;
pub(super) const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFCHR: u32 = 0o020_000;

/// The full newc mode (type and permission bits) of `node`.
fn newc_mode(node: &Node) -> u32 {
    match node {
        Node::Dir { mode, .. } => S_IFDIR | mode,
        Node::File { mode, .. } => S_IFREG | mode,
        Node::Symlink { .. } => S_IFLNK | 0o777,
        Node::CharDevice { mode, .. } => S_IFCHR | mode,
    }
}

/// Size in bytes of the uncompressed archive of `entries`, trailer included.
pub(super) fn archive_size(entries: &BTreeMap<ArchivePath, Node>) -> usize {
    let total: usize =
        entries.iter().map(|(path, node)| header_size(path.to_string().len()) + padded(node.data().len())).sum();
    total + header_size(NEWC_TRAILER_NAME.len())
}

/// Writes every entry of `entries` and the trailer as newc into `out`.
pub(super) fn write_archive<W: Write>(entries: &BTreeMap<ArchivePath, Node>, mut out: W) -> Result<W, ImageError> {
    for (index, (path, node)) in entries.iter().enumerate() {
        let ino = u32::try_from(index + 1).map_err(|_| ImageError::TooManyEntries { count: entries.len() })?;
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
            .mode(newc_mode(node))
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

/// Writes one newc entry whose header declares `declared` bytes, copying its
/// data from `data`, and fails unless `data` holds exactly that many bytes.
///
/// This guards against a pitfall of the `cpio` crate: a `Writer` finished
/// after fewer bytes than declared silently skips the padding and leaves the
/// archive corrupt from that entry on. Here a short entry is never finished.
pub(super) fn write_entry<W: Write, R: Read>(
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

/// `n` rounded up to newc's 4-byte alignment.
pub(super) fn padded(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// Size of a newc header with its NUL-terminated, padded name.
pub(super) fn header_size(name_len: usize) -> usize {
    padded(NEWC_HEADER_LEN + name_len + 1)
}
