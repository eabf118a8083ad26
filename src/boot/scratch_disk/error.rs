//! The error of the scratch disk's options, kernel support and image
//! making. It names nothing else in `scratch_disk`, which all report
//! through it.

use std::path::PathBuf;

/// Errors in storage options, kernel support and image making.
#[derive(Debug, thiserror::Error)]
pub enum ScratchDiskError {
    /// A size option does not parse or is out of range.
    #[error("bad value '{value}' for {flag}: {why}")]
    BadSize {
        /// The option, e.g. `--scratch-disk`.
        flag: &'static str,
        /// The value as given.
        value: String,
        /// What was expected.
        why: String,
    },
    /// `--iosched` was given but no scratch disk is attached.
    #[error("--iosched {name} selects the scratch disk's block scheduler, but there is no scratch disk (give --scratch-disk SIZE)")]
    IoschedWithoutDisk {
        /// The scheduler asked for.
        name: String,
    },
    /// `--disk-throttle` was given but no disk is attached.
    #[error(
        "--disk-throttle {value} limits the scratch and swap disks, but there is none (give --scratch-disk SIZE or --swap SIZE)"
    )]
    ThrottleWithoutDisk {
        /// The value given.
        value: String,
    },
    /// `--disk-throttle` with an instruction-counted guest clock.
    #[error(
        "--disk-throttle {value} cannot be used with {clock}: the throttle runs on host time, while {clock} \
         runs the guest's clock by instructions, so the guest would not see a steady disk speed (drop one of the two)"
    )]
    ThrottleUnderIcount {
        /// The throttle given.
        value: String,
        /// The option that asked for icount, e.g. `--clock icount`.
        clock: &'static str,
    },
    /// A scheduler name no kernel knows.
    #[error("unknown block scheduler '{name}' (this kernel offers: {offered})")]
    UnknownScheduler {
        /// The name given.
        name: String,
        /// What the kernel config offers.
        offered: String,
    },
    /// A scheduler the kernel was built without.
    #[error(
        "block scheduler '{name}' is not built in {config} (CONFIG_{option} is not set; this kernel offers: {offered})"
    )]
    SchedulerNotBuilt {
        /// The name given.
        name: String,
        /// Its config option.
        option: &'static str,
        /// The kernel config file.
        config: PathBuf,
        /// What the kernel config offers.
        offered: String,
    },
    /// The kernel lacks a driver or filesystem the storage needs.
    #[error("the kernel has no {module} (CONFIG_{option} is not set in {config}): it cannot use {what}")]
    NotBuilt {
        /// The module name.
        module: &'static str,
        /// Its config option.
        option: &'static str,
        /// The kernel config file.
        config: PathBuf,
        /// What it is needed for.
        what: &'static str,
    },
    /// A needed module cannot be packed without the modules tree.
    #[error(
        "the guest needs the {module} module for {what}, but the kernel's modules tree is unknown (give --modules-dir)"
    )]
    ModulesDirUnknown {
        /// The module name.
        module: &'static str,
        /// What it is needed for.
        what: &'static str,
    },
    /// The kernel config cannot be read.
    #[error("cannot read kernel config {path}")]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The image file cannot be created.
    #[error("cannot create disk image {path}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// mke2fs or mkswap cannot be started.
    #[error("cannot run {program} (install {package}: scripts/setup does)")]
    Spawn {
        /// The program.
        program: &'static str,
        /// The Debian package providing it.
        package: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// mke2fs or mkswap failed.
    #[error("{command} failed ({status}): {stderr}")]
    ToolFailed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it printed on stderr.
        stderr: String,
    },
}
