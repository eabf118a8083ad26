//! `bootbench lab ...`: bootbench's own lab of real machines (an agent on
//! each boots candidates by kexec): add machines, see the queue, write the
//! agent's boot files. Runs go to a machine with `run --target lab:NAME`.

use crate::lab::bundle::{self, BundleArgs};
use crate::service::lab_queue::MachineSpec;
use crate::service::store::{Store, StoreError};
use crate::service::tokens;
use std::path::PathBuf;
use std::process::ExitCode;

/// Lab subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum LabCommand {
    /// The lab's machines.
    #[command(subcommand)]
    Machine(MachineCommand),
    /// Each machine's last hello and its newest jobs.
    Status(StatusArgs),
    /// Queue boots on a machine without waiting for them: `run`'s options
    /// (kernels, suite, variants, boots), each boot a job; prints the
    /// jobs' ids. The candidates upload to the receiver as the jobs of
    /// `run --target lab:NAME` do, but nobody judges them or resets a
    /// machine that hangs: use `run --target lab:NAME` for that.
    Submit(Box<SubmitArgs>),
    /// Write a machine's agent: kernel, initramfs (the machine's token in
    /// its secrets segment), cmdline, and GRUB, iPXE and PXELINUX entries
    /// to make it the machine's default boot.
    Bundle(BundleArgs),
}

/// `bootbench lab machine ...`.
#[derive(Debug, clap::Subcommand)]
pub enum MachineCommand {
    /// Add a machine: a fresh token of its name, printed once on stdout
    /// (or the one in --token-file), stored only as a digest. Revoke it
    /// with `bootbench serve token revoke NAME`.
    Add(MachineAddArgs),
    /// List the machines.
    List(StoreArg),
}

/// The store argument.
#[derive(Debug, clap::Args)]
pub struct StoreArg {
    /// The receiver's store (`bootbench serve --db`).
    #[arg(long)]
    pub db: PathBuf,
}

/// `bootbench lab machine add`.
#[derive(Debug, clap::Args)]
pub struct MachineAddArgs {
    /// The machine's name.
    pub name: String,
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
    /// The machine's arch.
    #[arg(long, default_value = "x86_64")]
    pub arch: String,
    /// The console the candidates' cmdline names.
    #[arg(long, default_value = "ttyS0,115200n8")]
    pub console: String,
    /// What the candidates record as `bootbench.accel`: bare-metal, or kvm
    /// or tcg for a virtual machine playing a lab machine.
    #[arg(long, default_value = "bare-metal")]
    pub accel: String,
    /// Seconds the agent waits between two asks when nothing is queued.
    #[arg(long, default_value_t = 10)]
    pub poll: u64,
    /// The volume label of the ext2/3/4 filesystem on the partition (or
    /// disk) the lab gives bootbench for scratch space, made with `mke2fs
    /// -t ext4 -L LABEL`: every candidate mounts the one filesystem with
    /// that label as its scratch space (contest's disk loads, builds) and
    /// empties it first; nothing else on the machine is touched. Without
    /// it, suites that need a scratch disk are refused for the machine.
    #[arg(long, value_name = "LABEL")]
    pub scratch_label: Option<String>,
    /// The volume label of the ext2/3/4 filesystem on the partition (or
    /// disk) the lab gives bootbench for userland packs, made with `mke2fs
    /// -t ext4 -L LABEL` (a few GiB per arch's pack): the agent fetches the
    /// pack a job needs into it once (a new filesystem is claimed with a
    /// `.bootbench-packs` file; one holding other files is never written
    /// to), and the candidate mounts it read-only. Without it, suites that
    /// run the pack's programs (kernbench, sdet) are refused for the
    /// machine.
    #[arg(long, value_name = "LABEL")]
    pub pack_label: Option<String>,
    /// Use the token in this file instead of a fresh one.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

/// `bootbench lab submit`.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The machine that boots the jobs.
    #[arg(long = "machine", value_name = "NAME")]
    pub lab_machine: String,
    /// How to boot (`bootbench run`'s options; the store is --lab-db).
    #[command(flatten)]
    pub run: crate::boot::options::RunOptions,
}

/// `bootbench lab status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
    /// Only this machine.
    #[arg(long)]
    pub machine: Option<String>,
    /// How many of each machine's newest jobs to show.
    #[arg(long, default_value_t = 10)]
    pub jobs: usize,
}

fn existing(db: &std::path::Path) -> Result<Store, StoreError> {
    if !db.exists() {
        return Err(StoreError::Missing { path: db.to_path_buf() });
    }
    Store::open(db)
}

/// Runs a lab subcommand.
pub fn run(command: &LabCommand) -> anyhow::Result<ExitCode> {
    match command {
        LabCommand::Machine(MachineCommand::Add(a)) => {
            let spec = MachineSpec {
                arch: a.arch.clone(),
                console: a.console.clone(),
                accel: a.accel.clone(),
                poll_s: a.poll,
                scratch_label: a.scratch_label.clone(),
                pack_label: a.pack_label.clone(),
            };
            crate::lab::check_machine(&a.name, &spec)?;
            let secret = match &a.token_file {
                Some(f) => tokens::read_token_file(f)?,
                None => tokens::generate(),
            };
            tokens::check_secret(&secret, &format!("for machine '{}'", a.name))?;
            Store::open(&a.store.db)?.add_machine(&a.name, &tokens::digest(&secret), &spec)?;
            if a.token_file.is_some() {
                log::info!("machine '{}' added", a.name);
            } else {
                log::info!(
                    "machine '{}' added; its token is printed below once and stored only as a digest: keep it in a file only you can read (chmod 600) for `bootbench lab bundle --token-file`",
                    a.name
                );
                println!("{secret}");
            }
        }
        LabCommand::Machine(MachineCommand::List(s)) => {
            for m in existing(&s.db)?.machines()? {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    m.name,
                    m.spec.arch,
                    m.spec.console,
                    if m.revoked { "revoked" } else { "active" },
                    m.last_hello_at.as_deref().unwrap_or("never")
                );
            }
        }
        LabCommand::Status(s) => {
            print!("{}", crate::lab::status(&existing(&s.store.db)?, s.machine.as_deref(), s.jobs)?);
        }
        LabCommand::Submit(a) => {
            let mut run = a.run.clone();
            let target = format!("lab:{}", a.lab_machine);
            if run.lab.target != "qemu" && run.lab.target != target {
                anyhow::bail!("--target {}: lab submit boots on --machine {}", run.lab.target, a.lab_machine);
            }
            run.lab.target = target;
            let crate::boot::target::Target::Lab(name) = run.lab.target()? else {
                anyhow::bail!("--machine {}: not a machine name", a.lab_machine);
            };
            crate::boot::lab_target::submit_lab_boots(&run, &name, |job| {
                println!("{}\t{}\t{}", job.id, job.label, job.kernel.display());
            })?;
            log::info!("queued for machine '{name}'; `bootbench lab status --db DB` shows the jobs");
        }
        LabCommand::Bundle(b) => {
            let written = bundle::write(b)?;
            log::info!(
                "agent for machine '{}' written to {}: {}; cmdline: {}",
                b.machine,
                written.dir.display(),
                written.files.join(", "),
                written.cmdline
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
