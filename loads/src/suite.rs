//! Suite configuration: which workloads run, how often, with which
//! parameters. A suite comes from a built-in name or a JSON file packed into
//! the image, and `bootbench.*` keys on the kernel cmdline override it. An
//! unknown key or a bad value is an error, never a silent default.
//!
//! The workload names a suite may use are given to the functions that
//! check them (the `workloads` argument of the `*_for` functions): this
//! module must not depend on the workload registry or on any workload.
//! The registry binds its names to them as `Suite::from_json`,
//! `Suite::validate`, `CmdlineConfig::parse` and `CmdlineConfig::apply`.
//!
//! Layout: `document` (the suite's JSON shape, its checks and hash),
//! `builtin` (the built-in suites) and `cmdline` (the `bootbench.*` keys
//! and how they override a suite), each using only the ones before it.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod builtin;
mod cmdline;
mod document;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use builtin::{BUILTIN_SUITES, REAL_BUILD_ARCHES};
pub use cmdline::{
    is_secret_key, redact_secrets, secret_values, split_cmdline, valid_scratch_label, AfterRun, CmdlineConfig,
    IpSetting, Role, ACCEL_MODES, DEFAULT_SCRATCH_FS, IO_SCHEDULERS, MAX_SCRATCH_LABEL, MIN_ZRAM_BYTES, PACK_FS,
    PACK_MOUNT, PACK_SERIAL, REDACTED, TEST_FAULTS,
};
pub use document::{Limits, Suite, SuiteError, WorkloadSpec, LIMITS};
