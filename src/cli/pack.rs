//! `bootbench pack ...`: the userland pack from the command line: lock the
//! package versions, and build (or verify the cached) image.

use crate::pack::build::{self as pack, PackOptions};
use std::process::ExitCode;

/// Pack subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum PackCommand {
    /// Install the pack's packages unpinned (mmdebstrap, as root) and write
    /// every installed package's exact version to the lockfile.
    Lock(PackOptions),
    /// Build the read-only ext4 image from exactly the locked versions, or
    /// verify the cached one; print its path, sha256, size and packages.
    Build(PackOptions),
}

/// Runs a pack subcommand.
pub fn run(command: &PackCommand) -> anyhow::Result<ExitCode> {
    match command {
        PackCommand::Lock(options) => {
            let locked = pack::lock(options)?;
            println!(
                "locked {} packages of {}/{} in {} ({:.0} s)",
                locked.lockfile.packages.len(),
                locked.lockfile.suite,
                locked.lockfile.arch,
                locked.path.display(),
                locked.elapsed.as_secs_f64()
            );
        }
        PackCommand::Build(options) => {
            let built = pack::build(options)?;
            let m = &built.entry.manifest;
            println!("image     {}", built.entry.image().display());
            println!("sha256    {}", m.image_sha256);
            println!("size      {} bytes ({} MiB)", m.image_bytes, m.image_bytes >> 20);
            println!("packages  {} ({}/{})", m.packages.len(), m.suite, m.arch);
            println!(
                "{} in {:.1} s",
                if built.was_cached { "cached, verified" } else { "built" },
                built.elapsed.as_secs_f64()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
