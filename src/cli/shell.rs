//! `bootbench completions SHELL` and `bootbench man`: the shell's
//! completion script and the manual pages, made from the command line's
//! own definition (`clap_complete`, `clap_mangen`), so they never drift
//! from what the commands take.

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `bootbench completions`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// Options of `bootbench man`.
#[derive(Debug, Clone, clap::Args)]
pub struct ManArgs {
    /// The directory to write the pages to (created if missing):
    /// `bootbench.1` and one page per subcommand (`bootbench-run.1`, ...).
    #[arg(short, long, default_value = ".")]
    pub output_dir: PathBuf,
}

/// Prints the completion script of `cli` (the whole command line) for
/// `args.shell` on stdout.
pub fn completions(args: &CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    // Made in memory first: clap_complete panics when its writer fails,
    // and stdout may be a pipe that closes early (`| head`).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "bootbench", &mut script);
    match std::io::stdout().lock().write_all(&script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write the completion script to standard output")
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Writes the manual pages of `cli` (the whole command line) into
/// `args.output_dir`.
pub fn man(args: &ManArgs, cli: clap::Command) -> anyhow::Result<ExitCode> {
    let dir = &args.output_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create the man page directory {}", dir.display()))?;
    clap_mangen::generate_to(cli, dir).with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
    log::info!("wrote the man pages into {} (read one with `man -l {}/bootbench-run.1`)", dir.display(), dir.display());
    Ok(ExitCode::SUCCESS)
}
