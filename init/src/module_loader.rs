//! Loads the kernel modules `bootbench image` packed, in the order it
//! listed them (dependencies first), with finit_module. Three lists: the
//! early one (what the scratch disk needs, loaded before the workloads),
//! the late one (the results port and NIC, loaded after them), and the lab
//! one (netconsole and the hardware watchdogs' drivers, loaded only when
//! `bootbench.netconsole`, `bootbench.hw_watchdog` or the agent role asks).

use nix::kmod::{finit_module, ModuleInitFlags};
use std::fs;

/// The late list `bootbench image` writes: one archive path per line.
pub const MODULES_LIST: &str = "/etc/bootbench/modules.load";
/// The early list, same format: modules the storage setup needs.
pub const EARLY_MODULES_LIST: &str = "/etc/bootbench/modules-early.load";
/// The lab list, same format: netconsole and watchdog drivers.
pub const LAB_MODULES_LIST: &str = "/etc/bootbench/modules-lab.load";

/// Errors while loading modules.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// The list exists but cannot be read.
    #[error("cannot read module list {list}")]
    ReadList {
        /// The list file.
        list: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A module file cannot be opened.
    #[error("cannot open module {path}")]
    Open {
        /// The module file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused a module.
    #[error("finit_module {path} failed")]
    Load {
        /// The module file.
        path: String,
        /// errno.
        #[source]
        source: nix::Error,
    },
}

/// The module files `list_path` names, as absolute paths (a missing list
/// names none).
fn listed(list_path: &'static str) -> Result<Vec<String>, ModuleError> {
    let list = match fs::read_to_string(list_path) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(ModuleError::ReadList { list: list_path, source }),
    };
    Ok(list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|rel| format!("/{}", rel.trim_start_matches('/')))
        .collect())
}

/// The module name of a module file: its file name up to `.ko`, with `-`
/// as `_` (as the kernel names modules).
pub fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.split(".ko").next().unwrap_or(file).replace('-', "_")
}

/// Loads every module of `list_path` (a missing list means none); a
/// module already present (EEXIST) is fine. Returns how many were loaded
/// and the errors (loading goes on after one).
pub fn load_listed(list_path: &'static str) -> (usize, Vec<ModuleError>) {
    load_listed_except(list_path, &[])
}

/// [`load_listed`], leaving out the modules named in `except` (loaded
/// elsewhere with parameters, or not at all).
pub fn load_listed_except(list_path: &'static str, except: &[&str]) -> (usize, Vec<ModuleError>) {
    let paths = match listed(list_path) {
        Ok(p) => p,
        Err(e) => return (0, vec![e]),
    };
    let mut loaded = 0;
    let mut errors = Vec::new();
    for path in paths.into_iter().filter(|p| !except.contains(&module_name(p).as_str())) {
        match load_file(&path, c"") {
            Ok(true) => loaded += 1,
            Ok(false) => {}
            Err(e) => errors.push(e),
        }
    }
    (loaded, errors)
}

/// Loads the modules `list_path` names before module `name` (its
/// dependencies, as `bootbench image` orders a closure), and returns the
/// file of `name`, if the list has it.
pub fn load_dependencies_of(list_path: &'static str, name: &str) -> Result<Option<String>, ModuleError> {
    let paths = listed(list_path)?;
    let Some(at) = paths.iter().position(|p| module_name(p) == name) else { return Ok(None) };
    for dep in paths.iter().take(at) {
        load_file(dep, c"")?;
    }
    Ok(paths.get(at).cloned())
}

/// Loads one module file with `params`; `Ok(false)` when it was loaded
/// already (EEXIST: the parameters were not applied).
pub fn load_file(path: &str, params: &std::ffi::CStr) -> Result<bool, ModuleError> {
    let file = fs::File::open(path).map_err(|source| ModuleError::Open { path: path.to_string(), source })?;
    match finit_module(&file, params, ModuleInitFlags::empty()) {
        Ok(()) => Ok(true),
        Err(nix::Error::EEXIST) => Ok(false),
        Err(source) => Err(ModuleError::Load { path: path.to_string(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_come_from_the_file_name() {
        assert_eq!(module_name("/lib/modules/6.1/kernel/drivers/net/netconsole.ko"), "netconsole");
        assert_eq!(module_name("/lib/modules/6.1/kernel/drivers/watchdog/iTCO_wdt.ko.xz"), "iTCO_wdt");
        assert_eq!(module_name("x/crc32c-generic.ko.zst"), "crc32c_generic");
    }
}
