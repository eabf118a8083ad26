//! `bootbench image`: builds an initramfs and prints what it packed.

use crate::boot::image::{self as boot_image, ImageSpec};
use crate::suite_choice::load_suite;
use image::Compression;
use qemu::Arch;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `bootbench image`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImageArgs {
    /// Guest arch the init is built for.
    #[arg(long, default_value = "x86_64")]
    pub arch: String,
    /// Built-in suite (quick, standard, full) or a suite JSON file.
    #[arg(long, default_value = "quick")]
    pub suite: String,
    /// Kernel modules to pack with their dependencies, comma-separated
    /// (loaded after the workloads).
    #[arg(long, value_delimiter = ',')]
    pub modules: Vec<String>,
    /// Kernel modules to load before the workloads (e.g. a disk driver and
    /// filesystem), with their dependencies, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub early_modules: Vec<String>,
    /// The kernel's lib/modules/RELEASE tree (default: the cached kernel's).
    #[arg(long)]
    pub modules_dir: Option<PathBuf>,
    /// Pack this static init instead of building one.
    #[arg(long)]
    pub init: Option<PathBuf>,
    /// none, gzip or zstd. The default, none, starts the guest soonest (as
    /// `bootbench overhead` measures) and needs no decompressor in the
    /// kernel; zstd or gzip make the file about 3x smaller, for slow links.
    #[arg(long, default_value = "none")]
    pub compression: String,
    /// Output file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// The kernel cache the default modules tree comes from. Not a flag:
    /// `$BOOTBENCH_CACHE` or the config file's kernel.cache fill it.
    #[arg(skip)]
    pub kernel_cache: Option<PathBuf>,
}

/// Runs `bootbench image`.
pub fn run(args: &ImageArgs) -> anyhow::Result<ExitCode> {
    let arch: Arch = args.arch.parse()?;
    let compression: Compression = args.compression.parse()?;
    let needs_modules = !(args.modules.is_empty() && args.early_modules.is_empty());
    let cache_root = args.kernel_cache.clone().unwrap_or_else(crate::kernel::default_cache_root);
    let modules_dir = boot_image::modules_dir_for(arch, args.modules_dir.as_deref(), needs_modules, &cache_root)?;
    let spec = ImageSpec {
        arch,
        suite: load_suite(&args.suite, arch.name())?,
        modules: args.modules.clone(),
        early_modules: args.early_modules.clone(),
        modules_dir,
        init: args.init.clone(),
        compression,
    };
    let built = boot_image::build(&spec, &args.output)?;
    println!("image    {}", built.path.display());
    println!("sha256   {}", built.sha256);
    println!(
        "size     {} bytes ({compression}); {} bytes uncompressed; init {} bytes",
        built.bytes, built.raw_bytes, built.init_bytes
    );
    println!("modules  {}", if built.modules.is_empty() { "none".to_string() } else { built.modules.join(", ") });
    if !built.early_modules.is_empty() {
        println!("early    {}", built.early_modules.join(", "));
    }
    if !built.lab_modules.is_empty() {
        println!("lab      {} (loaded only when the cmdline asks)", built.lab_modules.join(", "));
    }
    for (path, sha256) in &built.files {
        println!("file     {path} (sha256 {sha256})");
    }
    Ok(ExitCode::SUCCESS)
}
