//! `bootbench`: the host side of the bootable benchmark appliance. Builds
//! the initramfs, boots kernels in QEMU, runs the suite locally, and prints
//! what it measured. The commands are [`bootbench::cli`]'s.

use std::process::ExitCode;

fn main() -> ExitCode {
    // `bootbench local` workloads re-exec this binary as applets, as the
    // guest's workloads re-exec the init.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = loads::applets::main(&argv) {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let (mut cli, name, matches) = bootbench::cli::Cli::parse_with_name();
    if let Err(e) = bootbench::terminal::init(&name, cli.verbosity.log_level_filter()) {
        eprintln!("bootbench: error: {e}");
        return ExitCode::FAILURE;
    }
    if cli.command.only_reads_and_prints() {
        if let Err(e) = bootbench::terminal::end_when_stdout_closes() {
            log::warn!("{e}");
        }
    }
    bootbench::terminal_table::fit_to_stdout();
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
