//! `bootbench kernel ...`: the kernel cache from the command line: fetch
//! Debian kernels and sources, print the appliance's config fragment, build
//! a kernel from a tree, and check whether a kernel can run the appliance.

use crate::kernel::build::{self, BuildSpec};
use crate::kernel::{self, config_fragment, source, DebianArch};
use std::path::PathBuf;
use std::process::ExitCode;

/// Kernel subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum KernelCommand {
    /// Download a stock Debian kernel (never installed) into the cache and
    /// print where it is. A cached kernel is reused unless --update is given.
    Fetch {
        /// Guest arch: x86_64 (amd64), i386 or ppc64le.
        #[arg(long, default_value = "x86_64")]
        arch: String,
        /// Fetch the newest kernel even if one is cached, and make it the default.
        #[arg(long)]
        update: bool,
        /// Cache directory (default: $BOOTBENCH_CACHE, else the config file's
        /// kernel.cache, else ~/.cache/bootbench/kernels).
        #[arg(long)]
        cache: Option<PathBuf>,
    },
    /// Print the Kconfig fragment the appliance needs for an arch (merge it
    /// into a defconfig with scripts/kconfig/merge_config.sh, then run
    /// `make olddefconfig`; `bootbench kernel build` does all of it).
    Config {
        /// Guest arch: x86_64, i386, ppc64 or ppc64le.
        #[arg(long)]
        arch: String,
    },
    /// Download Debian's kernel source package (never installed) into the
    /// cache, unpack it, and print the tree's path (for `kernel build --tree`).
    Source {
        /// The source package.
        #[arg(long, default_value = source::DEFAULT_PACKAGE)]
        package: String,
        /// Cache directory (default: $BOOTBENCH_CACHE, else the config file's
        /// kernel.cache, else ~/.cache/bootbench/kernels).
        #[arg(long)]
        cache: Option<PathBuf>,
    },
    /// Build a kernel for the appliance from a kernel source tree: the
    /// arch's defconfig (pseries_defconfig for ppc64), no modules, large
    /// subsystems off, the appliance's fragment merged, built out of tree
    /// with the cross compiler. Installs it into the cache as the arch's
    /// built default (what `bootbench run --arch ppc64` boots), or into -o.
    Build {
        /// The kernel source tree (e.g. from `bootbench kernel source`).
        #[arg(long)]
        tree: PathBuf,
        /// Guest arch: x86_64, i386, ppc64 or ppc64le.
        #[arg(long)]
        arch: String,
        /// Parallel make jobs (default: the number of CPUs).
        #[arg(long)]
        jobs: Option<u32>,
        /// Install into this directory instead of the cache.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Out-of-tree build directory (default: TREE/.bootbench-build-ARCH).
        #[arg(long)]
        build_dir: Option<PathBuf>,
        /// Another Kconfig fragment to merge after the appliance's (repeatable).
        #[arg(long = "fragment")]
        fragments: Vec<PathBuf>,
        /// Cache directory (default: $BOOTBENCH_CACHE, else the config file's
        /// kernel.cache, else ~/.cache/bootbench/kernels).
        #[arg(long)]
        cache: Option<PathBuf>,
    },
    /// Tell from a kernel's config whether it can run the appliance, naming
    /// each missing option; exits 1 when it cannot.
    Check {
        /// A kernel config, a kernel image (its config is found beside it, in
        /// its build tree, or embedded), or a cache entry. Default: the
        /// cached default kernel of --arch.
        kernel: Option<PathBuf>,
        /// Guest arch to check for (default: the config's own).
        #[arg(long)]
        arch: Option<String>,
        /// List the options that are fine too.
        #[arg(long)]
        all: bool,
        /// Cache directory, for the default kernel (default: as for `kernel
        /// fetch`).
        #[arg(long)]
        cache: Option<PathBuf>,
    },
}

/// Runs a kernel subcommand.
pub fn run(cmd: &KernelCommand) -> anyhow::Result<ExitCode> {
    let root = |cache: &Option<PathBuf>| cache.clone().unwrap_or_else(kernel::default_cache_root);
    match cmd {
        KernelCommand::Fetch { arch, update, cache } => {
            let arch: DebianArch = arch.parse()?;
            let k = kernel::fetch(arch, *update, &root(cache))?;
            println!("kernel   {} {} ({})", k.info.package, k.info.version, k.info.release);
            println!("image    {}", k.image().display());
            println!("config   {}", k.config().display());
            println!("modules  {}", k.modules_dir().display());
            Ok(ExitCode::SUCCESS)
        }
        KernelCommand::Config { arch } => {
            let arch: qemu::Arch = arch.parse()?;
            print!("{}", config_fragment::fragment(arch));
            Ok(ExitCode::SUCCESS)
        }
        KernelCommand::Source { package, cache } => {
            let tree = source::source_tree(package, &root(cache))?;
            println!("{}", tree.display());
            Ok(ExitCode::SUCCESS)
        }
        KernelCommand::Build { tree, arch, jobs, output, build_dir, fragments, cache } => {
            let arch: qemu::Arch = arch.parse()?;
            let spec = BuildSpec::from_choices(
                tree.clone(),
                arch,
                *jobs,
                output.clone(),
                build_dir.clone(),
                fragments.clone(),
                root(cache),
            )?;
            let k = build::build(&spec)?;
            println!("kernel   {} {} (built in {:.0} s)", arch, k.info.release, k.info.build_seconds);
            println!("image    {}", k.image().display());
            println!("config   {}", k.config().display());
            println!("pages    {}", k.info.page_size.map_or("unknown".to_string(), |p| format!("{} KiB", p / 1024)));
            Ok(ExitCode::SUCCESS)
        }
        KernelCommand::Check { kernel, arch, all, cache } => {
            let arch: Option<qemu::Arch> = arch.as_deref().map(str::parse).transpose()?;
            let (located, report) = kernel::defaults::check_given_or_default(kernel.as_deref(), arch, &root(cache))?;
            println!(
                "config   {}{}",
                located.source.display(),
                if located.embedded { " (embedded in the image)" } else { "" }
            );
            print!("{}", report.render(*all));
            Ok(if report.can_run() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}
