//! The archive's entries: validated archive paths, ordered so that a
//! directory sorts right before its own children, the nodes stored at
//! them, and the check of an entry's permission bits. It must not depend
//! on the newc format or on how an archive is written.

use super::error::ImageError;
use std::fmt;

/// Permission bits an entry may carry; the file type comes from the `add_*` call.
const PERMISSION_BITS: u32 = 0o7777;
/// The kernel's PATH_MAX, including the terminating NUL.
pub(super) const PATH_MAX: usize = 4096;

/// A validated archive path, compared component by component so that a
/// directory sorts right before its own children.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct ArchivePath(Vec<String>);

impl ArchivePath {
    pub(super) fn parse(path: &str) -> Result<ArchivePath, ImageError> {
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
    pub(super) fn parents(&self) -> impl Iterator<Item = ArchivePath> + '_ {
        (1..self.0.len()).map(|n| ArchivePath(self.0[..n].to_vec()))
    }
}

impl fmt::Display for ArchivePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("/"))
    }
}

#[derive(Clone)]
pub(super) enum Node {
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
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Node::Dir { .. } => "directory",
            Node::File { .. } => "file",
            Node::Symlink { .. } => "symlink",
            Node::CharDevice { .. } => "character device",
        }
    }

    /// The entry's data: file contents or symlink target.
    pub(super) fn data(&self) -> &[u8] {
        match self {
            Node::File { data, .. } => data,
            Node::Symlink { target } => target.as_bytes(),
            Node::Dir { .. } | Node::CharDevice { .. } => &[],
        }
    }
}

pub(super) fn check_mode(path: &str, mode: u32) -> Result<(), ImageError> {
    if mode & !PERMISSION_BITS != 0 {
        return Err(ImageError::InvalidMode { path: path.to_owned(), mode });
    }
    Ok(())
}
