//! The userland pack: a read-only ext4 image of Debian's build userland
//! (gcc, binutils, make, a shell and the tools a kernel build runs) and a
//! prepared Linux source tree, for the guest's workloads to exec. The host
//! builds it with `mmdebstrap` from a checked-in lockfile of exact package
//! versions, reproducibly, and caches it by content. This module never installs a package on the host and
//! never names a mirror (the machine's apt sources give it); it knows
//! nothing of booting (besides `apt_sources`, the only module of the crate it
//! names is the results model's record of a pack).
//!
//! - [`lockfile`]: the lockfile's format, and its comparison with a root;
//! - [`dpkg_status`]: the packages a built root has;
//! - [`mirror`]: the mirror, from the machine's apt sources;
//! - [`bootstrap`]: mmdebstrap's run and its failures;
//! - [`linux_tree`]: the Linux source unpacked and its output tree
//!   prepared, in a chroot of the root;
//! - [`image`]: the reproducible ext4 image;
//! - [`cache`]: the content-addressed cache and the manifest;
//! - [`targets`]: the packs there are and the packages they ask for;
//! - [`build`]: `lock` and `build`, the two operations;
//! - [`choice`]: `--pack auto|none|PATH`, the pack a suite gets and what the
//!   results record of it (for `run` and `local` alike).

pub mod bootstrap;
pub mod build;
pub mod cache;
pub mod choice;
pub mod dpkg_status;
pub mod image;
pub mod linux_tree;
pub mod lockfile;
pub mod mirror;
pub mod targets;

pub use build::{build, lock, BuildError, BuiltPack, PackOptions};
pub use targets::{target, PackTarget, BUILDER_VERSION};
