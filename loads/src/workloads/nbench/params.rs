//! The parameters dbench and tbench share (clients, phases, loadfile),
//! their validation, and loading the chosen loadfile. Owns what a suite
//! may say about an NBENCH workload; running it is the driver's.

use super::builtin_loadfile::{self, BUILTIN_NAME};
use super::client_driver::Phases;
use super::loadfile::{Loadfile, LoadfileError};
use crate::workload::ImageFile;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// Most clients a suite may ask for (dbench allows more, but each client
/// is a process with open files and, for tbench, a server process too).
pub const MAX_CLIENTS: u32 = 1024;
/// Longest phase, s.
pub const MAX_PHASE_S: f64 = 86_400.0;

/// Errors in NBENCH parameters.
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    /// `clients` out of range.
    #[error("clients must be between 1 and {MAX_CLIENTS}, not {0}")]
    Clients(u32),
    /// A phase length that is not a usable number of seconds.
    #[error("{param} must be a number of seconds in [{min}, {MAX_PHASE_S}], not {value}")]
    Seconds {
        /// Parameter name.
        param: &'static str,
        /// Smallest value allowed.
        min: f64,
        /// The value given.
        value: f64,
    },
    /// The loadfile could not be read or parsed.
    #[error("loadfile '{0}'")]
    Loadfile(String, #[source] LoadfileError),
    /// The loadfile is not the one the suite pinned.
    #[error("loadfile '{loadfile}' has sha256 {actual}, but loadfile_sha256 pins {expected}")]
    Pinned {
        /// The loadfile.
        loadfile: String,
        /// The pinned hash.
        expected: String,
        /// The file's hash.
        actual: String,
    },
}

/// Reads `loadfile` (`builtin` or a path) and checks it against the
/// sha256 `pinned`, if given.
pub fn load(loadfile: &str, pinned: Option<&str>) -> Result<Loadfile, ParamsError> {
    let lf = if loadfile == BUILTIN_NAME { builtin_loadfile::builtin() } else { Loadfile::read(Path::new(loadfile)) }
        .map_err(|e| ParamsError::Loadfile(loadfile.to_string(), e))?;
    if let Some(expected) = pinned {
        if !expected.eq_ignore_ascii_case(&lf.sha256) {
            return Err(ParamsError::Pinned {
                loadfile: loadfile.to_string(),
                expected: expected.to_string(),
                actual: lf.sha256.clone(),
            });
        }
    }
    Ok(lf)
}

/// The image file for `loadfile` (none for the built-in one), read by
/// `reader`.
pub fn loadfile_in_image(loadfile: &str, pinned: Option<&str>, reader: &str) -> Option<ImageFile> {
    (loadfile != BUILTIN_NAME).then(|| ImageFile {
        path: loadfile.to_string(),
        sha256: pinned.map(str::to_string),
        reader: reader.to_string(),
    })
}

/// Parameters of `dbench` and `tbench`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NbenchParams {
    /// Client processes (dbench's `nprocs`).
    pub clients: u32,
    /// Length of the timed phase, s.
    pub duration_s: f64,
    /// Untimed warmup before it, s.
    pub warmup_s: f64,
    /// `builtin` (generated from a fixed seed) or the path of a dbench
    /// loadfile, e.g. `/usr/share/dbench/client.txt`.
    pub loadfile: String,
    /// The loadfile's sha256 (hex). Optional on input: when given, a
    /// loadfile with another hash is refused. Always filled in the result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loadfile_sha256: Option<String>,
}

impl Default for NbenchParams {
    fn default() -> Self {
        NbenchParams {
            clients: 2,
            duration_s: 10.0,
            warmup_s: 2.0,
            loadfile: BUILTIN_NAME.to_string(),
            loadfile_sha256: None,
        }
    }
}

impl NbenchParams {
    /// Checks the values and loads the loadfile; returns it and the
    /// parameters with `loadfile_sha256` filled in.
    pub fn validate(mut self) -> Result<(NbenchParams, Loadfile), ParamsError> {
        if self.clients == 0 || self.clients > MAX_CLIENTS {
            return Err(ParamsError::Clients(self.clients));
        }
        for (param, value, min) in [("duration_s", self.duration_s, 0.001), ("warmup_s", self.warmup_s, 0.0)] {
            if !value.is_finite() || !(min..=MAX_PHASE_S).contains(&value) {
                return Err(ParamsError::Seconds { param, min, value });
            }
        }
        let lf = load(&self.loadfile, self.loadfile_sha256.as_deref())?;
        self.loadfile_sha256 = Some(lf.sha256.clone());
        Ok((self, lf))
    }

    /// The loadfile the guest must find in the image, unless it is the
    /// built-in one; `workload` names the reader in messages.
    pub fn image_file(&self, workload: &str) -> Option<ImageFile> {
        loadfile_in_image(&self.loadfile, self.loadfile_sha256.as_deref(), &format!("{workload}'s loadfile"))
    }

    /// The warmup and timed phases.
    pub fn phases(&self) -> Phases {
        Phases {
            warmup: Duration::from_secs_f64(self.warmup_s.max(0.0)),
            measure: Duration::from_secs_f64(self.duration_s.max(0.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: impl FnOnce(&mut NbenchParams)) -> Result<(NbenchParams, Loadfile), ParamsError> {
        let mut p = NbenchParams::default();
        f(&mut p);
        p.validate()
    }

    #[test]
    fn defaults_use_the_builtin_and_record_its_hash() {
        let (p, lf) = with(|_| {}).unwrap();
        assert_eq!(lf.name, "builtin");
        assert_eq!(p.loadfile_sha256.as_deref(), Some(lf.sha256.as_str()));
        let (again, _) = p.clone().validate().unwrap();
        assert_eq!(again, p, "a result's params validate to themselves");
    }

    #[test]
    fn bad_values_are_refused_naming_the_parameter() {
        assert!(with(|p| p.clients = 0).unwrap_err().to_string().contains("clients"));
        assert!(with(|p| p.clients = 5000).is_err());
        let e = with(|p| p.duration_s = 0.0).unwrap_err().to_string();
        assert!(e.contains("duration_s"), "{e}");
        let e = with(|p| p.warmup_s = f64::NAN).unwrap_err().to_string();
        assert!(e.contains("warmup_s"), "{e}");
        let e = with(|p| p.loadfile = "/nonexistent/client.txt".into()).unwrap_err();
        let chain = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(chain.contains("/nonexistent/client.txt"), "{chain}");
        let e = with(|p| p.loadfile_sha256 = Some("00".into())).unwrap_err();
        assert!(matches!(e, ParamsError::Pinned { .. }), "{e}");
    }

    #[test]
    fn unknown_parameters_are_refused() {
        let e = serde_json::from_value::<NbenchParams>(serde_json::json!({"client": 3})).unwrap_err();
        assert!(e.to_string().contains("client"), "{e}");
    }
}
