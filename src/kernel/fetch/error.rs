//! What a fetch reports: its error, and its progress lines on stderr. Both
//! the kernel cache (`fetch`) and the apt mechanics (`fetch::apt`) report
//! through this module, so it names nothing else in `fetch`.

use std::io;
use std::path::PathBuf;

use crate::kernel::arch::DebianArch;

/// Errors while fetching or looking up a cached kernel.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// `scripts/setup` has not written the private apt configuration.
    #[error("the private apt configuration {dir} does not exist: run scripts/setup first")]
    NoAptConfig {
        /// The directory looked for.
        dir: PathBuf,
    },
    /// The private sources.list has no usable `deb` line.
    #[error("{path} has no 'deb URI SUITE COMPONENT' line: run scripts/setup again")]
    BadSources {
        /// The sources.list.
        path: PathBuf,
    },
    /// A file system operation failed.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done, e.g. "create directory".
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A program could not be started at all.
    #[error("cannot run {program} while {doing} for {arch}")]
    Spawn {
        /// The program, e.g. `apt-get`.
        program: String,
        /// What it was for.
        doing: String,
        /// The architecture being fetched.
        arch: DebianArch,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A program ran and failed.
    #[error("`{command}` failed ({status}) while {doing} for {arch}:\n{output_tail}")]
    Command {
        /// The command line, without the private apt options.
        command: String,
        /// Its exit status.
        status: String,
        /// What it was for, naming the package.
        doing: String,
        /// The architecture being fetched.
        arch: DebianArch,
        /// The last lines of its stderr (or of stdout when stderr is empty).
        output_tail: String,
    },
    /// apt's answer did not name a kernel package.
    #[error("cannot resolve the {arch} kernel from {metapackage}: {why}")]
    Resolve {
        /// The architecture being fetched.
        arch: DebianArch,
        /// The metapackage asked about.
        metapackage: String,
        /// What was missing.
        why: String,
    },
    /// The unpacked package does not look like a Debian kernel image package.
    #[error("package {package} ({arch}) unpacked in {dir} has no usable kernel: {why}")]
    Layout {
        /// The package.
        package: String,
        /// The architecture being fetched.
        arch: DebianArch,
        /// Where it was unpacked.
        dir: PathBuf,
        /// What was missing.
        why: String,
    },
    /// The image in the package is not a kernel for the arch.
    #[error("package {package} ({arch}) holds an unusable kernel image")]
    Image {
        /// The package.
        package: String,
        /// The architecture being fetched.
        arch: DebianArch,
        /// Why.
        #[source]
        source: qemu::kernel_image::KernelImageError,
    },
    /// A cache entry that cannot be used as it is.
    #[error("kernel cache entry {path} is unusable ({why}); run `bootbench kernel fetch --update` or delete it")]
    Corrupt {
        /// The entry or its metadata file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// Prints a progress line of the fetch on stderr.
pub(super) fn log(message: std::fmt::Arguments<'_>) {
    log::info!("{message}");
}
