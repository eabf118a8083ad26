//! bootbench's initramfs writer: a reproducible newc cpio archive, optionally
//! compressed, plus the kernel-module dependency closure that goes into it.
//!
//! This crate only builds bytes on the host. It never runs anything in the
//! guest and never decides what goes into an image; the `bootbench image`
//! subcommand does that.
//!
//! - [`Initramfs`] collects directories, files, symlinks and device nodes
//!   under validated archive paths and writes them in a fixed order with
//!   fixed metadata, so the same input always gives the same bytes.
//! - [`Compression`] selects none, gzip or zstd, each at a fixed level.
//! - [`modules::ModuleTree`] finds kernel modules and their dependencies in
//!   an extracted `lib/modules/<release>` directory.

mod compression;
mod initramfs;
pub mod modules;

pub use compression::{Compression, ParseCompressionError};
pub use initramfs::{ImageError, Initramfs};
