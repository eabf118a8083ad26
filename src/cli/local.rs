//! `bootbench local`: the suite's workloads on this host, without booting.

use crate::boot::options::parse_mem_mib;
use crate::local::LocalDocument;
use crate::pack::choice::PackChoice;
use crate::report::summary_table;
use crate::suite_choice::{apply_overrides, bound_contest_memory, load_suite_for, mem_available_bytes};
use anyhow::Context;
use std::path::PathBuf;

/// Options of `bootbench local`.
#[derive(Debug, Clone, clap::Args)]
pub struct LocalArgs {
    /// The suite, as a word: `bootbench local contest` is `--suite contest`.
    #[arg(value_name = "SUITE", conflicts_with = "suite")]
    pub suite_word: Option<String>,
    /// Built-in suite name (quick, standard, full, contest) or a suite JSON file.
    #[arg(long, default_value = "quick")]
    pub suite: String,
    /// Measured iterations per workload (overrides the suite).
    #[arg(long)]
    pub iterations: Option<u32>,
    /// Warmup iterations per workload (overrides the suite).
    #[arg(long)]
    pub warmup: Option<u32>,
    /// Run only these workloads, comma-separated.
    #[arg(long)]
    pub workloads: Option<String>,
    /// Directory the workloads write in (default: a fresh temporary one).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Write the result document here (with the userland pack it used
    /// beside its fields, as `pack`).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The RAM size contest's loads are sized from on this host (io_load's
    /// and read_load's files, mem_load touches 110% of it), e.g. 1G or
    /// 512M; at most half of the host's available memory, so a local
    /// contest never takes the host down. A suite's own `mem_bytes` wins.
    #[arg(long, default_value = "1G")]
    pub mem: String,
    /// The userland pack (Debian's gcc, make and a prepared Linux tree, the
    /// same image `run` attaches), mounted read-only on this host for the
    /// builds in it (needs root): auto (when the suite runs kernbench or
    /// contest's pack foreground; built on first use and cached), none (the
    /// built-in suites then build synthetically, as on arches without a
    /// pack), or the path of a pack image.
    #[arg(long, default_value = "auto")]
    pub pack: String,
}

/// Exit status of `local` when a workload failed (the document is not
/// `complete`); the same status `run` gives a boot whose result is not
/// complete. The document is still printed and written.
pub const EXIT_WORKLOAD_FAILED: u8 = crate::cli::run::EXIT_BOOT_FAILED;

/// `local`'s exit status for its document: 0 when every workload ran
/// every iteration, [`EXIT_WORKLOAD_FAILED`] otherwise.
pub fn exit_status(doc: &loads::schema::RunDocument) -> u8 {
    if doc.status == loads::schema::Status::Complete {
        0
    } else {
        EXIT_WORKLOAD_FAILED
    }
}

/// Runs `bootbench local`: the workloads, the table, and `-o`'s document
/// (with the pack it used, if any).
pub fn run(args: &LocalArgs) -> anyhow::Result<LocalDocument> {
    let pack_choice: PackChoice = args.pack.parse()?;
    // --pack none: the built-in suites build synthetically.
    let real_builds = pack_choice != PackChoice::None;
    let mut suite = apply_overrides(
        load_suite_for(args.suite_word.as_ref().unwrap_or(&args.suite), std::env::consts::ARCH, real_builds)?,
        args.iterations,
        args.warmup,
        args.workloads.as_deref(),
    )?;
    let mem_mib = parse_mem_mib(&args.mem).context("--mem")?;
    bound_contest_memory(&mut suite, mem_mib, mem_available_bytes())?;
    let pack = crate::pack::choice::resolve(&pack_choice, &suite, std::env::consts::ARCH)?;
    let doc = crate::local::run_suite(&suite, args.work_dir.as_deref(), pack.as_ref())?;
    print!("{}", summary_table::render_document(&doc.document));
    if let Some(out) = &args.output {
        let json = serde_json::to_vec_pretty(&doc)?;
        std::fs::write(out, json).with_context(|| format!("cannot write {}", out.display()))?;
        log::info!("wrote {}", out.display());
    }
    Ok(doc)
}
