//! The command line: one small file per subcommand, each turning its
//! arguments into a call of the library and the outcome into an exit
//! status. Nothing below `cli` depends on it.

pub mod bisect;
pub mod bisect_run;
pub mod bisect_sim;
pub mod calibrate;
pub mod compare;
pub mod config;
pub mod contest_report;
pub mod export;
pub mod image;
pub mod kernel;
pub mod lab;
pub mod lava;
pub mod local;
pub mod nbench_compat;
pub mod overhead;
pub mod pack;
pub mod report;
pub mod run;
pub mod serve;
pub mod shell;
pub mod upload;

use crate::bisect::session::BisectArgs;
use crate::boot::options::RunOptions;
use crate::nbench_compat::NbenchCompatOptions;
use crate::overhead::OverheadOptions;
use clap::{ArgMatches, Parser, Subcommand};
use std::process::ExitCode;

/// Bootable benchmark appliance for Linux kernels.
#[derive(Debug, Parser)]
#[command(name = "bootbench", version, about)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
    /// `-q` (warnings and errors only, no progress), `-qq` (errors only),
    /// `-v` (debug), `-vv` (trace); on every subcommand.
    #[command(flatten)]
    pub verbosity: clap_verbosity_flag::Verbosity<clap_verbosity_flag::InfoLevel>,
}

impl Cli {
    /// Parses the process's arguments (exiting with clap's message on a
    /// bad one), and names the subcommand they chose: `run`, `kernel
    /// fetch`, `serve token add`: what each log line starts with. The
    /// matches come back too: they tell which flags the command line gave,
    /// which the config file's values do not override.
    pub fn parse_with_name() -> (Cli, String, ArgMatches) {
        use clap::{CommandFactory, FromArgMatches};
        let matches = Cli::command().get_matches();
        let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        let mut names = Vec::new();
        let mut at = &matches;
        while let Some((name, sub)) = at.subcommand() {
            names.push(name.to_string());
            at = sub;
        }
        (cli, names.join(" "), matches)
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Kernels: fetch Debian kernels, build one for the appliance, check a config.
    #[command(subcommand)]
    Kernel(kernel::KernelCommand),
    /// Build an initramfs with the static init, a suite and kernel modules.
    Image(image::ImageArgs),
    /// The userland pack: lock Debian package versions, build the read-only
    /// ext4 image the guest's real builds run from.
    #[command(subcommand)]
    Pack(pack::PackCommand),
    /// Boot kernels in QEMU, run the suite, and collect checked results.
    Run(Box<RunOptions>),
    /// Run the suite's workloads on this host, without booting.
    Local(local::LocalArgs),
    /// Bisect a kernel tree for a performance regression (or boot failures),
    /// unattended and resumable.
    Bisect(Box<BisectArgs>),
    /// One step for `git bisect run`: exit 0 good, 1 bad, 125 skip, 128 abort
    /// (`bootbench bisect-run --help` for its options).
    #[command(disable_help_flag = true)]
    BisectRun {
        /// Options, parsed by bisect-run itself so that even a bad option
        /// exits 128 (abort) rather than a status git reads as "bad".
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Measure the bisection strategy on synthetic noisy histories.
    BisectSim(Box<bisect_sim::SimArgs>),
    /// Measure the appliance's own cost: image sizes, boot-to-init and
    /// init-to-workload times, PID 1's wake-ups, run wall time, fork-rate CV.
    Overhead(OverheadOptions),
    /// Our dbench and tbench side by side with Debian's on this host (same
    /// loadfile, clients, directory and time, interleaved): throughput ratio.
    NbenchCompat(NbenchCompatOptions),
    /// Compare kernels: % of baseline ± stddev, change with its interval,
    /// p-value corrected for the number of metrics, and a verdict.
    Compare(compare::CompareArgs),
    /// contest's table (Time, CPU%, Loads, LCPU%, Ratio per row and kernel)
    /// from results files, in the layout of the 2003 contest reports.
    ContestReport(contest_report::ContestReportArgs),
    /// A/A calibration on one kernel: false-positive rate, spread, the
    /// smallest detectable change and the boots to ask for.
    Calibrate(Box<calibrate::CalibrateArgs>),
    /// Receive uploaded runs over HTTP into a SQLite store, and list them.
    Serve(serve::ServeArgs),
    /// Upload saved results (a results file or one document) to a receiver.
    Upload(upload::UploadArgs),
    /// Print the completion script for a shell (bash, zsh, fish, ...):
    /// `bootbench completions bash > ~/.local/share/bash-completion/completions/bootbench`.
    Completions(shell::CompletionsArgs),
    /// Write the manual pages (`bootbench.1`, `bootbench-run.1`, ...) into a directory.
    Man(shell::ManArgs),
    /// LAVA labs: write a job that boots a kernel with the appliance, and
    /// read a finished job's log back into a results file.
    #[command(subcommand)]
    Lava(lava::LavaCommand),
    /// bootbench's own lab of real machines, each booting candidates by
    /// kexec from a resident agent: add machines, see the job queue, write
    /// an agent's boot files (runs go there with `run --target lab:NAME`).
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// Print the table of a results file written by `bootbench run -o`,
    /// or its page of per-iteration plots and system counters.
    Report(report::ReportArgs),
    /// Write results files in another system's format: `--format kcidb`,
    /// KernelCI's KCIDB JSON (checkouts, builds, and a test per boot,
    /// workload and metric).
    Export(export::ExportArgs),
    /// The config file (what a lab sets once: the receiver, the kernel
    /// cache, the machine): its path, and the values in effect.
    #[command(subcommand)]
    Config(config::ConfigCommand),
}

impl Command {
    /// Whether the command only reads files and prints (to stdout, or to
    /// the file `-o` names instead): a closed stdout may end it at once
    /// ([`crate::terminal::end_when_stdout_closes`]), as it ends `cat`.
    pub fn only_reads_and_prints(&self) -> bool {
        matches!(
            self,
            Command::Compare(_)
                | Command::ContestReport(_)
                | Command::Report(_)
                | Command::Export(_)
                | Command::Config(_)
                | Command::Completions(_)
                | Command::BisectSim(_)
        )
    }
}

/// Fills the options of the command in `cli` (parsed from `m`) from the
/// config file where its command line left them out. Commands that take
/// nothing from the file do not read it.
pub fn apply_config(cli: &mut Cli, m: &ArgMatches) -> anyhow::Result<()> {
    let sub = m.subcommand().map_or(m, |(_, s)| s);
    let settings = crate::settings::Settings::load_default;
    match &mut cli.command {
        Command::Run(a) => settings()?.apply_to_run(a, sub, config::env),
        Command::Calibrate(a) => settings()?.apply_to_run(&mut a.run, sub, config::env),
        Command::Bisect(a) => settings()?.apply_to_bisect_boot(&mut a.boot, sub),
        Command::Upload(a) => {
            settings()?.fill_upload(&mut a.url, a.token.is_some(), &mut a.token_file, &mut a.ca_file);
        }
        Command::Image(a) => a.kernel_cache = Some(settings()?.kernel_cache(None, config::env)),
        Command::Overhead(a) => a.kernel_cache = Some(settings()?.kernel_cache(None, config::env)),
        Command::Kernel(k) => {
            use kernel::KernelCommand as K;
            if let K::Fetch { cache, .. } | K::Source { cache, .. } | K::Build { cache, .. } | K::Check { cache, .. } =
                k
            {
                *cache = Some(settings()?.kernel_cache(cache.take(), config::env));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Runs the subcommand `cli` names: its exit status, or an error for the
/// caller to print.
pub fn dispatch(cli: &Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Kernel(k) => kernel::run(k),
        Command::Image(a) => image::run(a),
        Command::Pack(p) => pack::run(p),
        Command::Lava(c) => lava::run(c),
        Command::Lab(c) => lab::run(c),
        Command::Run(a) => run::run(a),
        Command::Local(a) => local::run(a).map(|d| ExitCode::from(local::exit_status(&d.document))),
        Command::Bisect(a) => bisect::run(a),
        Command::BisectRun { args } => Ok(bisect_run::bisect_run(args)),
        Command::BisectSim(a) => bisect_sim::bisect_sim(a),
        Command::Overhead(a) => overhead::run(a),
        Command::NbenchCompat(a) => nbench_compat::run(a),
        Command::Compare(a) => compare::run(a),
        Command::ContestReport(a) => contest_report::run(a),
        Command::Calibrate(a) => calibrate::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Upload(a) => upload::run(a),
        Command::Completions(a) => shell::completions(a, <Cli as clap::CommandFactory>::command()),
        Command::Man(a) => shell::man(a, <Cli as clap::CommandFactory>::command()),
        Command::Report(a) => report::run(a),
        Command::Export(a) => export::run(a),
        Command::Config(c) => config::run(c),
    }
}
