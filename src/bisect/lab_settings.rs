//! What a bisection's lab is, as data kept in the state so that `--resume`
//! rebuilds the same lab: the tree, the build, and how kernels are booted.
//! Below both the lab (which acts on it) and the state (which stores it).

use crate::boot::options as run_options;
use crate::boot::target::LabTargetArgs;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How each kernel is booted: the options of `bootbench run` that make
/// sense for a bisection (the initramfs is built once, so the kernel cannot
/// be chosen here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct BootOptions {
    /// Guest arch: x86_64, i386, ppc64le or ppc64.
    #[arg(long, default_value = "x86_64")]
    pub arch: String,
    /// Built-in suite (quick, standard, full) or a suite JSON file.
    #[arg(long, default_value = "quick")]
    pub suite: String,
    /// Measured iterations per workload (overrides the suite).
    #[arg(long)]
    pub iterations: Option<u32>,
    /// Warmup iterations per workload (overrides the suite).
    #[arg(long)]
    pub warmup: Option<u32>,
    /// Workloads to run, comma-separated (default: the metric's workload).
    #[arg(long)]
    pub workloads: Option<String>,
    /// vCPUs [default: 2, or 1 with --clock icount (see `bootbench run
    /// --help`)].
    #[arg(long)]
    #[serde(default)]
    pub smp: Option<u32>,
    /// Guest memory, e.g. 1G, 512M.
    #[arg(long, default_value = run_options::DEFAULT_MEM)]
    pub mem: String,
    /// QEMU CPU model (default: the arch profile's).
    #[arg(long)]
    pub cpu: Option<String>,
    /// Extra kernel cmdline words for every boot, e.g. bootbench.* keys
    /// (`bootbench.fork.count=200`).
    #[arg(long)]
    pub append: Option<String>,
    /// Accelerator: auto, kvm or tcg.
    #[arg(long, default_value = "auto")]
    pub accel: String,
    /// Guest clock: real, or icount[:SHIFT].
    #[arg(long, default_value = "real")]
    pub clock: String,
    /// Seconds until the init must say hello.
    #[arg(long, default_value_t = 120)]
    pub timeout_boot: u64,
    /// Seconds the console may stay silent.
    #[arg(long, default_value_t = 300)]
    pub timeout_silence: u64,
    /// Seconds a whole boot may take.
    #[arg(long, default_value_t = 3600)]
    pub timeout_total: u64,
    /// The candidates' lib/modules/RELEASE tree, for the modules a boot
    /// needs that the candidates do not build in (a lab machine's NIC,
    /// netconsole and watchdog drivers): relative to the tree, where each
    /// commit's build installs its own (e.g. `make modules_install
    /// INSTALL_MOD_PATH=out/mods` and `out/mods/lib/modules/RELEASE`), or
    /// absolute for one tree every candidate shares (the same release).
    #[arg(long)]
    #[serde(default)]
    pub modules_dir: Option<PathBuf>,
    /// Where the candidates boot (QEMU here, or a lab machine).
    #[command(flatten)]
    #[serde(default)]
    pub lab: LabTargetArgs,
}

/// Everything the real lab needs, kept in the state so `--resume` rebuilds
/// the same lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabSettings {
    /// The kernel tree (a git work tree).
    pub tree: PathBuf,
    /// The build command, run with `sh -c` in the tree.
    #[serde(default)]
    pub build: Option<String>,
    /// The kernel image the build leaves, relative to the tree.
    pub kernel_image: PathBuf,
    /// The kernel config the build leaves, relative to the tree.
    pub kernel_config: PathBuf,
    /// A file the build leaves with extra kernel cmdline words, relative to
    /// the tree.
    #[serde(default)]
    pub append_file: Option<PathBuf>,
    /// Whether the lab checks commits out (false under `git bisect run`).
    pub checkout: bool,
    /// Whether the history follows first parents only.
    #[serde(default)]
    pub first_parent: bool,
    /// Longest a build may take.
    pub build_timeout_s: u64,
    /// Directory for kernels, logs and results.
    pub artifacts: PathBuf,
    /// How kernels are booted.
    pub boot: BootOptions,
    /// The initramfs, once built.
    #[serde(default)]
    pub initramfs: Option<PathBuf>,
    /// Its sha256.
    #[serde(default)]
    pub initramfs_sha256: Option<String>,
}
