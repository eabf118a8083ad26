//! `bootbench`: the host side of the bootable benchmark appliance. Builds
//! the initramfs, boots kernels in QEMU, runs the suite locally, and prints
//! what it measured. The commands are [`bootbench::cli`]'s.

use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

fn main() -> ExitCode {
    // `bootbench local` workloads re-exec this binary as applets, as the
    // guest's workloads re-exec the init.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = loads::applets::main(&argv) {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // Parsed in two steps, as `Cli::parse` does, to keep the matches: they
    // tell which flags the command line gave, which the config file's
    // values do not override.
    let matches = bootbench::cli::Cli::command().get_matches();
    let mut cli = bootbench::cli::Cli::from_arg_matches(&matches)
        .unwrap_or_else(|e| e.format(&mut bootbench::cli::Cli::command()).exit());
    let done = bootbench::cli::apply_config(&mut cli, &matches).and_then(|()| bootbench::cli::dispatch(&cli));
    // After a Ctrl-C the watcher ends the process with 130, once its
    // cleanups are done; an error that the interrupt caused is not ours.
    bootbench::interrupt::hold_if_interrupted();
    match done {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bootbench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
