//! `bootbench lava ...`: write a LAVA job for a kernel and the appliance,
//! and read a finished job's log back into a results file.

use crate::lava::import::{self, ImportArgs, JobSource};
use crate::lava::job::{self, JobArgs};
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;

/// LAVA subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum LavaCommand {
    /// Write a LAVA job definition (YAML) that boots a kernel with the
    /// appliance's initramfs, both by URL, and reads its results through
    /// LAVA's `monitors` test action.
    Job(Box<JobCommand>),
    /// Read a finished LAVA job's log (the file `lava-run` or a LAVA
    /// server writes) into a results file like `bootbench run -o` writes.
    Import(ImportCommand),
}

/// `bootbench lava job`.
#[derive(Debug, clap::Args)]
pub struct JobCommand {
    /// What the job boots and how.
    #[command(flatten)]
    pub job: JobArgs,
    /// Write the job here instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `bootbench lava import`.
#[derive(Debug, clap::Args)]
pub struct ImportCommand {
    /// The job's log file.
    #[arg(value_name = "JOB-LOG")]
    pub log: PathBuf,
    /// What else is known of the job.
    #[command(flatten)]
    pub import: ImportArgs,
    /// The results file to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

/// Runs a LAVA subcommand.
pub fn run(command: &LavaCommand) -> anyhow::Result<ExitCode> {
    match command {
        LavaCommand::Job(c) => {
            let yaml = job::render(&c.job)?;
            match &c.output {
                Some(path) => {
                    std::fs::write(path, &yaml).with_context(|| format!("cannot write {}", path.display()))?
                }
                None => print!("{yaml}"),
            }
        }
        LavaCommand::Import(c) => {
            let name = c.log.display().to_string();
            let log = std::fs::read_to_string(&c.log).with_context(|| format!("cannot read the job log {name}"))?;
            let (definition, definition_name) = match &c.import.job {
                Some(p) => (
                    Some(
                        std::fs::read_to_string(p)
                            .with_context(|| format!("cannot read the job definition {}", p.display()))?,
                    ),
                    p.display().to_string(),
                ),
                None => (None, String::new()),
            };
            let source = JobSource { name, log, definition, definition_name, ..Default::default() };
            let file = import::import(&source, &c.import)?;
            file.write(&c.output)?;
            let b = &file.boots[0];
            let workloads = b.result.as_ref().map_or(0, |d| d.workloads.len());
            log::info!(
                "{}: {} ({} workloads); LAVA said {}; wrote {}",
                source.name,
                b.boot.classification,
                workloads,
                b.lab.as_ref().and_then(|l| l.result.clone()).unwrap_or_default(),
                c.output.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
