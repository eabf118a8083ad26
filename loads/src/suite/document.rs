//! The suite document: the JSON shape of a suite and its workload
//! entries, the checks a parsed suite must pass, its canonical JSON and
//! hash, and the errors of suites and cmdline overrides. It must not
//! depend on the built-in suites or on the cmdline keys.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Errors in suite files and cmdline overrides.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// Not one of [`super::BUILTIN_SUITES`].
    #[error("unknown suite '{0}' (built-in suites: quick, standard, full, contest)")]
    UnknownSuite(String),
    /// The suite JSON does not parse or has unknown fields.
    #[error("suite '{name}' is not valid")]
    BadSuite {
        /// File or suite name.
        name: String,
        /// Parser error.
        #[source]
        source: serde_json::Error,
    },
    /// A cmdline key this init does not know.
    #[error("unknown kernel cmdline key '{key}' (known: {known})")]
    UnknownKey {
        /// The key as given.
        key: String,
        /// Known keys, for the message.
        known: String,
    },
    /// A cmdline key with a value that does not parse or is out of range.
    #[error("bad value '{value}' for kernel cmdline key '{key}': {why}")]
    BadValue {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What was expected.
        why: String,
    },
    /// A workload name that no workload has.
    #[error("unknown workload '{name}' (known: {known})")]
    UnknownWorkload {
        /// The name as given.
        name: String,
        /// Known workloads, for the message.
        known: String,
    },
    /// A number in a suite file outside the range the init accepts.
    #[error("suite '{suite}': {field} = {value} is out of range ({range})")]
    OutOfRange {
        /// Suite name.
        suite: String,
        /// The field, e.g. `watchdog_s` or `workloads[2].iterations`.
        field: String,
        /// The value given.
        value: u64,
        /// The accepted range, for the message.
        range: String,
    },
    /// A suite with nothing to run.
    #[error("suite '{0}' has no workloads")]
    Empty(String),
}

/// One workload entry of a suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Workload name, e.g. `fork`.
    pub name: String,
    /// Measured iterations; the suite's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// Discarded warmup iterations; the suite's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u32>,
    /// Workload parameters; the workload fills in and validates defaults.
    #[serde(default)]
    pub params: serde_json::Map<String, serde_json::Value>,
}

/// A whole suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Suite name, recorded in every result.
    pub name: String,
    /// Seed for every generated input.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Default measured iterations per workload.
    #[serde(default = "default_iterations")]
    pub iterations: u32,
    /// Default warmup iterations per workload.
    #[serde(default = "default_warmup")]
    pub warmup: u32,
    /// Bound on the whole run inside the guest, in seconds.
    #[serde(default = "default_watchdog")]
    pub watchdog_s: u64,
    /// Workloads in the order they run.
    pub workloads: Vec<WorkloadSpec>,
}

pub(super) fn default_seed() -> u64 {
    0x5eed_b007
}
fn default_iterations() -> u32 {
    5
}
pub(super) fn default_warmup() -> u32 {
    1
}
/// The inclusive ranges of every number a suite or a `bootbench.*` cmdline
/// key may set. PID 1 adds, multiplies and sleeps with these values, so each
/// has an upper bound that keeps that arithmetic far from overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Watchdog seconds: 1 s to 7 days.
    pub watchdog_s: (u64, u64),
    /// Measured iterations per workload.
    pub iterations: (u64, u64),
    /// Warmup iterations per workload.
    pub warmup: (u64, u64),
    /// Seconds between `alive` events.
    pub alive_s: (u64, u64),
    /// Upload attempts in all.
    pub upload_attempts: (u64, u64),
    /// Seconds allowed for one upload request.
    pub upload_timeout_s: (u64, u64),
    /// zram device bytes: 1 MiB to 1 TiB.
    pub zram_bytes: (u64, u64),
    /// Hardware watchdog seconds (0 = off; WDIOC_SETTIMEOUT takes an int,
    /// and no driver we know of goes past an hour).
    pub hw_watchdog_s: (u64, u64),
}

/// The ranges the init accepts; see [`Limits`].
pub const LIMITS: Limits = Limits {
    watchdog_s: (1, 7 * 24 * 3600),
    iterations: (1, 100_000),
    warmup: (0, 10_000),
    alive_s: (crate::console_protocol::MIN_ALIVE_INTERVAL_S, 3600),
    upload_attempts: (1, 20),
    upload_timeout_s: (1, 600),
    zram_bytes: (1 << 20, 1 << 40),
    hw_watchdog_s: (0, 3600),
};

fn default_watchdog() -> u64 {
    1800
}

impl Suite {
    /// Parses a suite file's JSON; `name` is used in errors, and every
    /// workload must be one of `workloads`.
    pub fn from_json_for(name: &str, json: &str, workloads: &[&str]) -> Result<Suite, SuiteError> {
        let suite: Suite =
            serde_json::from_str(json).map_err(|source| SuiteError::BadSuite { name: name.to_string(), source })?;
        suite.validate_for(workloads)?;
        Ok(suite)
    }

    /// Checks that the suite names only `workloads`, is not empty, and
    /// keeps its numbers within [`LIMITS`] (PID 1 does arithmetic with
    /// them: an unbounded watchdog overflowed its deadline).
    pub fn validate_for(&self, workloads: &[&str]) -> Result<(), SuiteError> {
        if self.workloads.is_empty() {
            return Err(SuiteError::Empty(self.name.clone()));
        }
        let check = |field: String, value: u64, range: (u64, u64)| {
            if (range.0..=range.1).contains(&value) {
                Ok(())
            } else {
                Err(SuiteError::OutOfRange {
                    suite: self.name.clone(),
                    field,
                    value,
                    range: format!("{}..={}", range.0, range.1),
                })
            }
        };
        check("watchdog_s".into(), self.watchdog_s, LIMITS.watchdog_s)?;
        check("iterations".into(), self.iterations.into(), LIMITS.iterations)?;
        check("warmup".into(), self.warmup.into(), LIMITS.warmup)?;
        for (i, w) in self.workloads.iter().enumerate() {
            if !workloads.contains(&w.name.as_str()) {
                return Err(SuiteError::UnknownWorkload { name: w.name.clone(), known: workloads.join(", ") });
            }
            if let Some(n) = w.iterations {
                check(format!("workloads[{i}].iterations"), n.into(), LIMITS.iterations)?;
            }
            if let Some(n) = w.warmup {
                check(format!("workloads[{i}].warmup"), n.into(), LIMITS.warmup)?;
            }
        }
        Ok(())
    }

    /// Canonical JSON of the suite (what its sha256 is taken over).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// sha256 of [`Suite::to_json`], hex.
    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(self.to_json().as_bytes()))
    }

    /// Iterations for `spec`, the suite default when it has none.
    pub fn iterations_for(&self, spec: &WorkloadSpec) -> u32 {
        spec.iterations.unwrap_or(self.iterations)
    }

    /// Warmup iterations for `spec`.
    pub fn warmup_for(&self, spec: &WorkloadSpec) -> u32 {
        spec.warmup.unwrap_or(self.warmup)
    }
}
