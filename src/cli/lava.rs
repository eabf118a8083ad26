//! `bootbench lava ...`: write a LAVA job for a kernel and the appliance,
//! and read a finished job's log back into a results file.

use crate::lava::import::{self, ImportArgs, JobSource};
use crate::lava::job::{self, JobArgs};
use crate::lava::server;
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
    /// The job's log file, or the job's URL on a LAVA server (its page,
    /// `https://SERVER/scheduler/job/ID`), whose API gives the log, the
    /// definition and the device.
    #[arg(value_name = "JOB-LOG|URL")]
    pub log: String,
    /// A file holding the LAVA server's API token, for a private job.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// What else is known of the job.
    #[command(flatten)]
    pub import: ImportArgs,
    /// The results file to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

fn read_definition(path: &std::path::Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read the job definition {}", path.display()))
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
            let source = if c.log.starts_with("http://") || c.log.starts_with("https://") {
                let token = match &c.token_file {
                    Some(p) => Some(
                        std::fs::read_to_string(p)
                            .with_context(|| format!("cannot read the token file {}", p.display()))?
                            .trim()
                            .to_string(),
                    ),
                    None => None,
                };
                let mut source = server::fetch(&c.log, token.as_deref(), std::time::Duration::from_secs(120))?;
                if let Some(p) = &c.import.job {
                    source.definition = Some(read_definition(p)?);
                    source.definition_name = p.display().to_string();
                }
                source
            } else {
                let name = c.log.clone();
                let log = std::fs::read_to_string(&c.log).with_context(|| format!("cannot read the job log {name}"))?;
                let (definition, definition_name) = match &c.import.job {
                    Some(p) => (Some(read_definition(p)?), p.display().to_string()),
                    None => (None, String::new()),
                };
                JobSource { name, log, definition, definition_name, ..Default::default() }
            };
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
