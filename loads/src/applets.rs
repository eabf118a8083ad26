//! Applet mode: the one binary re-executed as a small program, busybox
//! style, so workloads that exec'd programs in the original benchmarks
//! still make the kernel do real fork, exec and page-fault work.
//!
//! A workload starts an applet with [`command_in`]; the new process runs
//! `<self> --applet NAME ARGS...`, and the binary's `main` hands such an
//! argv to [`main`] before anything else. Applets run in a fresh process:
//! they may exit, but never return into the caller's code.
//!
//! This is the dispatcher, above everything it runs (the compiler, the
//! `make` applet, the file tools). Code below it that starts an applet
//! takes the argv from `applet_argv` and must not use this module.

use crate::applet_argv::{command_in, APPLET_FLAG, SELF_EXE};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

/// Errors of applet dispatch.
#[derive(Debug, thiserror::Error)]
pub enum AppletError {
    /// No applet has this name.
    #[error("unknown applet '{0}' (known: {known})", known = NAMES.join(", "))]
    Unknown(String),
    /// The executable of this process cannot be found.
    #[error("cannot find this program's executable (/proc/self/exe)")]
    SelfExe(#[source] std::io::Error),
}

/// Names of every applet.
pub const NAMES: &[&str] =
    &["true", "cc", "ld", "make", "ls", "cp", "cat", "grep", "sort", "wc", "mkdir", "rm", "ring"];

/// If `args` (a whole argv) selects applet mode, runs the applet and
/// returns its exit code; otherwise `None`.
pub fn main(args: &[OsString]) -> Option<i32> {
    if args.get(1).map(|a| a == APPLET_FLAG) != Some(true) {
        return None;
    }
    let name = args.get(2).map(|a| a.to_string_lossy().into_owned()).unwrap_or_default();
    let rest = args.get(3..).unwrap_or_default();
    Some(match run(&name, rest) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("applet {name}: {e}");
            127
        }
    })
}

/// Runs applet `name` with `args` in this process.
pub fn run(name: &str, args: &[OsString]) -> Result<i32, AppletError> {
    match name {
        // Does nothing: the cheapest exec, for exec-rate measurements.
        "true" => Ok(0),
        // The build workload's toolchain and scheduler (kbuild, sdet).
        "cc" => Ok(crate::compiler::cc_main(args)),
        "ld" => Ok(crate::compiler::ld_main(args)),
        "make" => Ok(crate::kernel_build::make::main(args)),
        // A member of contest's process_load ring.
        "ring" => Ok(crate::workloads::contest::ring::member_main(args)),
        // SDET's commands.
        other if crate::file_tools::NAMES.contains(&other) => Ok(crate::file_tools::run(other, args).unwrap_or(127)),
        other => Err(AppletError::Unknown(other.to_string())),
    }
}

/// The executable to re-exec: this process's own image.
pub fn self_exe() -> Result<PathBuf, AppletError> {
    std::fs::read_link(SELF_EXE).map_err(AppletError::SelfExe)
}

/// A `Command` that runs applet `name` in a new process.
pub fn command(name: &str) -> Result<Command, AppletError> {
    Ok(command_in(&self_exe()?, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_only_in_applet_mode() {
        let argv = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(main(&argv(&["bootbench", "run"])), None);
        assert_eq!(main(&argv(&["init", "--applet", "true"])), Some(0));
        assert_eq!(main(&argv(&["init", "--applet", "nope"])), Some(127));
        assert!(run("nope", &[]).unwrap_err().to_string().contains("true"));
    }
}
