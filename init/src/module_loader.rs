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

/// Loads every module of `list_path` (a missing list means none); a
/// module already present (EEXIST) is fine. Returns how many were loaded
/// and the errors (loading goes on after one).
pub fn load_listed(list_path: &'static str) -> (usize, Vec<ModuleError>) {
    let list = match fs::read_to_string(list_path) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (0, Vec::new()),
        Err(source) => return (0, vec![ModuleError::ReadList { list: list_path, source }]),
    };
    let mut loaded = 0;
    let mut errors = Vec::new();
    for rel in list.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let path = format!("/{}", rel.trim_start_matches('/'));
        let file = match fs::File::open(&path) {
            Ok(f) => f,
            Err(source) => {
                errors.push(ModuleError::Open { path, source });
                continue;
            }
        };
        match finit_module(&file, c"", ModuleInitFlags::empty()) {
            Ok(()) => loaded += 1,
            Err(nix::Error::EEXIST) => {}
            Err(source) => errors.push(ModuleError::Load { path, source }),
        }
    }
    (loaded, errors)
}
