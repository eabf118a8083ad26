//! The run's configuration: the suite packed by `bootbench image`, then the
//! `bootbench.*` keys of the kernel cmdline on top. Any problem is an error
//! for the result, never a silent default.

use loads::suite::{CmdlineConfig, Suite, SuiteError};
use std::fs;

/// Where `bootbench image` packs the suite.
pub const SUITE_PATH: &str = "/etc/bootbench/suite.json";

/// Errors while reading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The packed suite file is missing or unreadable.
    #[error("cannot read the packed suite {SUITE_PATH}")]
    ReadSuite(#[source] std::io::Error),
    /// /proc/cmdline is unreadable.
    #[error("cannot read /proc/cmdline")]
    ReadCmdline(#[source] std::io::Error),
    /// The suite or a cmdline key is bad.
    #[error(transparent)]
    Suite(#[from] SuiteError),
}

/// The effective configuration.
#[derive(Debug)]
pub struct RunConfig {
    /// The suite to run, overrides applied.
    pub suite: Suite,
}

/// Reads the cmdline keys alone (so the accel mode and result port are
/// known even when the suite is bad).
pub fn read_cmdline() -> Result<CmdlineConfig, ConfigError> {
    let text = fs::read_to_string("/proc/cmdline").map_err(ConfigError::ReadCmdline)?;
    Ok(CmdlineConfig::parse(&text)?)
}

/// Reads the packed suite and applies `cmdline` to it.
pub fn load(cmdline: &CmdlineConfig) -> Result<RunConfig, ConfigError> {
    let packed = match fs::read_to_string(SUITE_PATH) {
        Ok(json) => Suite::from_json(SUITE_PATH, &json)?,
        // Without a packed suite, a cmdline `bootbench.suite=` still works.
        Err(e) if cmdline.suite.is_none() => return Err(ConfigError::ReadSuite(e)),
        Err(_) => Suite::builtin("quick")?,
    };
    Ok(RunConfig { suite: cmdline.apply(packed)? })
}
