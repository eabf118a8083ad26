//! Running in LAVA labs: the job definitions bootbench writes for a LAVA
//! server or `lava-run` (`job`), LAVA's job logs (`log`), and the results
//! file rebuilt from a finished job's log (`import`), with the same checks
//! and classification as a boot under QEMU.

pub mod import;
pub mod job;
pub mod log;
pub mod server;

use std::path::PathBuf;

/// What can go wrong writing a job or reading one back.
#[derive(Debug, thiserror::Error)]
pub enum LavaError {
    /// A device type bootbench does not know, without `--boot-method`.
    #[error(
        "unknown LAVA device type '{name}': bootbench knows how to boot {known}; for another, say how it boots with --boot-method qemu|u-boot|grub|ipxe"
    )]
    UnknownDeviceType {
        /// The name given.
        name: String,
        /// The known ones.
        known: String,
    },
    /// A boot method the device type does not offer.
    #[error("device type '{device_type}' does not boot with {method}; it offers {offered}")]
    BootMethod {
        /// The device type.
        device_type: String,
        /// The method asked for.
        method: &'static str,
        /// What it offers.
        offered: String,
    },
    /// A known device type with no method (a bug in the table).
    #[error("the device type table has an entry without a boot method")]
    NoBootMethod,
    /// The arch is not one bootbench builds for.
    #[error("{0}")]
    Arch(String),
    /// Neither a file nor a sha256 for an image.
    #[error("{what} needs its sha256, so that results group by kernel and LAVA checks the download: give the local file or the sha256")]
    NoSha256 {
        /// Which image.
        what: String,
    },
    /// A sha256 that is not 64 hex digits.
    #[error("'{value}' is not a sha256 for {what} (64 hex digits)")]
    BadSha256 {
        /// Which image.
        what: String,
        /// The value given.
        value: String,
    },
    /// A job name LAVA refuses (1 to 200 characters).
    #[error("the job name must have 1 to 200 characters (LAVA's limit); give a shorter --label or --job-name: '{0}'")]
    JobName(String),
    /// A commit that is not a full hash.
    #[error("--kernel-commit '{0}' is not a full git commit (40 hex digits: git rev-parse HEAD)")]
    BadCommit(String),
    /// A U-Boot job without a DTB.
    #[error("a U-Boot job for '{device_type}' needs --dtb-url (the board's device tree)")]
    NoDtb {
        /// The device type.
        device_type: String,
    },
    /// The suite cannot be read.
    #[error("{0}")]
    Suite(String),
    /// A suite needs the userland pack, which a LAVA job cannot attach.
    #[error("suite '{suite}' runs {workload}, which needs the userland pack's disk; a LAVA job has no such disk")]
    NeedsPack {
        /// The suite.
        suite: String,
        /// The workload.
        workload: String,
    },
    /// The cmdline words are bad.
    #[error("bad kernel cmdline for the job: {0}")]
    Cmdline(String),
    /// The YAML writer failed.
    #[error("cannot write the job as YAML: {0}")]
    Yaml(String),
    /// A local image cannot be hashed.
    #[error("cannot hash {path}: {problem}")]
    Hash {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        problem: String,
    },
    /// A LAVA log line is not what LAVA writes.
    #[error("{path}: line {line} is not a LAVA log line: {problem}")]
    LogLine {
        /// The log.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// The log holds no console output of the appliance.
    #[error("{path}: {problem}")]
    Log {
        /// The log.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The job definition given with the log cannot be used.
    #[error("{path}: {problem}")]
    JobDefinition {
        /// The job file or URL.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The result stream in the log is damaged or cut.
    #[error("{path}: the result in the log is not intact ({problem}); nothing written")]
    TruncatedResult {
        /// The log.
        path: String,
        /// The decoder's words: which chunks are missing.
        problem: String,
    },
    /// Fetching from a LAVA server failed.
    #[error("cannot fetch {url}: {problem}")]
    Fetch {
        /// The URL.
        url: String,
        /// What went wrong.
        problem: String,
    },
}
