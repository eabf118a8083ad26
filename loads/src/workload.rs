//! What a workload is: the [`Workload`] trait, the [`RunContext`] the
//! runner gives every workload, [`WorkloadError`], and the parameter maps
//! a suite passes in. Every workload and the registry (`workloads`) build
//! on it; it must not depend on any workload, the registry, the suite or
//! the runner.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use crate::schema::Iteration;
use serde::{de::DeserializeOwned, Serialize};
use std::path::PathBuf;

/// Errors while preparing or running a workload.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// No workload has this name.
    #[error("unknown workload '{0}'")]
    Unknown(String),
    /// The parameters do not fit the workload.
    #[error("bad parameters for workload '{workload}'")]
    BadParams {
        /// Workload name.
        workload: String,
        /// What serde found wrong (names the field).
        #[source]
        source: serde_json::Error,
    },
    /// A system call failed while measuring.
    #[error("{workload}: {what} failed")]
    Sys {
        /// Workload name.
        workload: &'static str,
        /// The operation, e.g. `fork`.
        what: String,
        /// The errno.
        #[source]
        source: nix::Error,
    },
    /// A child did something other than exit 0.
    #[error("{workload}: child {pid} ended abnormally: {how}")]
    Child {
        /// Workload name.
        workload: &'static str,
        /// Child pid.
        pid: i32,
        /// Exit status or signal.
        how: String,
    },
    /// Parameters that parse but do not make sense (together or on this
    /// machine).
    #[error("{workload}: {why}")]
    Invalid {
        /// Workload name.
        workload: &'static str,
        /// What is wrong, naming the parameter.
        why: String,
    },
    /// Two workloads of a suite pin different sha256s for one file.
    #[error("{first_reader} pins {path} at sha256 {first}, but {second_reader} pins it at {second}")]
    ImageFileConflict {
        /// The file.
        path: String,
        /// Who pins it first.
        first_reader: String,
        /// Its pin.
        first: String,
        /// Who pins it differently.
        second_reader: String,
        /// That pin.
        second: String,
    },
    /// A suite asks for a version of a workload this build does not run.
    #[error("workload '{workload}' is version {runs} in this bootbench, but the suite asks for version {asked}: results of different versions measure different things")]
    Version {
        /// Workload name.
        workload: String,
        /// The version the suite names.
        asked: serde_json::Value,
        /// The version this build runs.
        runs: u32,
    },
    /// A workload's own error (its module's enum says what and where).
    #[error("{workload} failed")]
    Failed {
        /// Workload name.
        workload: &'static str,
        /// The workload module's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A file of the host's that a workload reads in the guest (a dbench
/// loadfile): the host packs it into the image at the same path, checked
/// against the sha256 the parameters pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFile {
    /// Absolute path, the same on the host and in the guest.
    pub path: String,
    /// The sha256 (hex) the parameters pin, if they do.
    pub sha256: Option<String>,
    /// Who reads it, for messages (`dbench's loadfile`).
    pub reader: String,
}

/// What every workload gets from the runner.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The suite's seed.
    pub seed: u64,
    /// A writable directory for the workload's files.
    pub work_dir: PathBuf,
    /// The executable that runs applets (`EXE --applet NAME ...`). In the
    /// guest and in `bootbench local` it is this process's own image; a
    /// test harness binary cannot dispatch applets, so tests point it at a
    /// binary that can.
    pub applet_exe: PathBuf,
}

impl RunContext {
    /// A context whose applets re-exec this process's own image.
    pub fn new(seed: u64, work_dir: PathBuf) -> RunContext {
        RunContext { seed, work_dir, applet_exe: PathBuf::from(crate::applet_argv::SELF_EXE) }
    }
}

/// One prepared workload.
pub trait Workload {
    /// Stable name (one of the registry's `NAMES`).
    fn name(&self) -> &'static str;
    /// Effective parameters, defaults included.
    fn params(&self) -> serde_json::Map<String, serde_json::Value>;
    /// Runs one iteration and returns its metrics.
    fn run_iteration(&mut self) -> Result<Iteration, WorkloadError>;
}

/// The parameter that carries a workload's version in its effective
/// parameters, and so in every result (see the registry's `VERSIONS`).
pub const VERSION_PARAM: &str = "version";

/// The version of results that carry none: those from before workloads had
/// versions, which measured as version 1 does.
pub const UNVERSIONED: u32 = 1;

/// The workload version a result's parameters carry: [`UNVERSIONED`] when
/// there is none; `None` when the value is not a version number.
pub fn version_in(params: &serde_json::Map<String, serde_json::Value>) -> Option<u32> {
    match params.get(VERSION_PARAM) {
        None => Some(UNVERSIONED),
        Some(v) => v.as_u64().and_then(|n| u32::try_from(n).ok()),
    }
}

/// `params` without the version: what else the workload ran with.
pub fn params_without_version(
    params: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut p = params.clone();
    p.remove(VERSION_PARAM);
    p
}

/// Deserialises a workload's parameter struct from a suite's map; the struct
/// supplies defaults and refuses unknown fields.
pub fn parse_params<P: DeserializeOwned>(
    workload: &str,
    params: &serde_json::Map<String, serde_json::Value>,
) -> Result<P, WorkloadError> {
    serde_json::from_value(serde_json::Value::Object(params.clone()))
        .map_err(|source| WorkloadError::BadParams { workload: workload.to_string(), source })
}

/// The parameter struct as a map, for results.
pub fn params_map<P: Serialize>(p: &P) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(p) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}
