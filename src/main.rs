//! `bootbench`: the host side of the bootable benchmark appliance. Builds
//! the initramfs, boots kernels in QEMU, runs the suite locally, and prints
//! what it measured.

use bootbench::{kernel_cmd, local_cmd, run_cmd, summary_table};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Bootable benchmark appliance for Linux kernels.
#[derive(Debug, Parser)]
#[command(name = "bootbench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Kernels: fetch Debian kernels, build one for the appliance, check a config.
    #[command(subcommand)]
    Kernel(kernel_cmd::KernelCommand),
    /// Build an initramfs with the static init, a suite and kernel modules.
    Image(run_cmd::ImageArgs),
    /// Boot kernels in QEMU, run the suite, and collect checked results.
    Run(Box<run_cmd::RunArgs>),
    /// Run the suite's workloads on this host, without booting.
    Local(local_cmd::LocalArgs),
    /// Bisect a kernel tree for a performance regression (or boot failures),
    /// unattended and resumable.
    Bisect(Box<bootbench::bisect_cmd::BisectArgs>),
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
    BisectSim(bootbench::bisect_cmd::SimArgs),
    /// Measure the appliance's own cost: image sizes, boot-to-init and
    /// init-to-workload times, PID 1's wake-ups, run wall time, fork-rate CV.
    Overhead(bootbench::overhead_cmd::OverheadArgs),
    /// Our dbench and tbench side by side with Debian's on this host (same
    /// loadfile, clients, directory and time, interleaved): throughput ratio.
    NbenchCompat(bootbench::nbench_compat_cmd::NbenchCompatArgs),
    /// Compare kernels: % of baseline ± stddev, change with its interval,
    /// p-value corrected for the number of metrics, and a verdict.
    Compare(bootbench::compare_cmd::CompareArgs),
    /// contest's table (Time, CPU%, Loads, LCPU%, Ratio per row and kernel)
    /// from results files, in the layout of the 2003 contest reports.
    ContestReport(bootbench::contest_cmd::ContestReportArgs),
    /// A/A calibration on one kernel: false-positive rate, spread, the
    /// smallest detectable change and the boots to ask for.
    Calibrate(Box<bootbench::calibrate_cmd::CalibrateArgs>),
    /// Receive uploaded runs over HTTP into a SQLite store, and list them.
    Serve(bootbench::serve_cmd::ServeArgs),
    /// Upload saved results (a results file or one document) to a receiver.
    Upload(bootbench::upload_cmd::UploadArgs),
    /// Print the table of a results file written by `bootbench run -o`.
    Report {
        /// The results file.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    // `bootbench local` workloads re-exec this binary as applets, as the
    // guest's workloads re-exec the init.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = loads::applets::main(&argv) {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Kernel(k) => kernel_cmd::run(k),
        Command::Image(a) => run_cmd::image(a),
        Command::Run(a) => run_cmd::run(a),
        Command::Local(a) => local_cmd::run(a).map(|_| ExitCode::SUCCESS),
        Command::Bisect(a) => bootbench::bisect_cmd::bisect(a),
        Command::BisectRun { args } => Ok(bootbench::bisect_cmd::bisect_run(args)),
        Command::BisectSim(a) => bootbench::bisect_cmd::bisect_sim(a),
        Command::Overhead(a) => bootbench::overhead_cmd::run(a),
        Command::NbenchCompat(a) => bootbench::nbench_compat_cmd::run(a),
        Command::Compare(a) => bootbench::compare_cmd::run(a),
        Command::ContestReport(a) => bootbench::contest_cmd::run(a),
        Command::Calibrate(a) => bootbench::calibrate_cmd::run(a),
        Command::Serve(a) => bootbench::serve_cmd::run(a),
        Command::Upload(a) => bootbench::upload_cmd::run(a),
        Command::Report { file } => bootbench::schema_migration::read_results(file)
            .map(|f| {
                print!("{}", summary_table::render_boots(&f.boots));
                ExitCode::SUCCESS
            })
            .map_err(Into::into),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bootbench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
