//! `bootbench run`: boots one or more kernels in QEMU with the appliance,
//! interleaving their boots, and writes each boot's guest document inside a
//! host envelope. The results file is rewritten after every boot, so an
//! interrupted run keeps every boot that finished.

use crate::image_cmd::{self, ImageSpec, RESULT_PORT_MODULES};
use crate::kernel::{self, DebianArch, FetchedKernel};
use crate::local_cmd::{apply_overrides, load_suite};
use crate::results_file::{
    BootInfo, BootRecord, ChannelReport, InitramfsRef, KernelRef, MachineShape, QemuRef, ResultsFile,
};
use crate::summary_table;
use anyhow::{bail, Context};
use image::Compression;
use loads::console_protocol::{ALIVE_CMDLINE_KEY, ICOUNT_ALIVE_INTERVAL_S};
use loads::schema::RunDocument;
use qemu::accel::{choose, Accel, AccelRequest};
use qemu::{Arch, BootSpec, Clock, Timeouts};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Default vCPUs: enough for the workloads' parallel phases, and what the
/// machine notes' timings were measured with.
pub const DEFAULT_SMP: u32 = 2;
/// Default guest memory.
pub const DEFAULT_MEM: &str = "1G";

/// Options of `bootbench run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Kernel image to boot; repeat for several kernels (their boots are
    /// interleaved). Default: the cached Debian kernel for --arch, fetched
    /// if missing.
    #[arg(long = "kernel")]
    pub kernels: Vec<PathBuf>,
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
    /// Run only these workloads, comma-separated.
    #[arg(long)]
    pub workloads: Option<String>,
    /// Boots per kernel; the boot is the unit of replication.
    #[arg(long, default_value_t = 1)]
    pub boots: u32,
    /// vCPUs.
    #[arg(long, default_value_t = DEFAULT_SMP)]
    pub smp: u32,
    /// Guest memory, e.g. 1G, 512M (a bare number is MiB).
    #[arg(long, default_value = DEFAULT_MEM)]
    pub mem: String,
    /// QEMU CPU model (default: the arch profile's).
    #[arg(long)]
    pub cpu: Option<String>,
    /// Extra kernel cmdline words (validated; a key given twice is an error).
    #[arg(long)]
    pub append: Option<String>,
    /// Label for this kernel group in results and tables.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Boot every kernel once per variant, each variant a group of its
    /// own: `LABEL=WORDS` adds WORDS to the cmdline (after --append) and
    /// names the group LABEL (after --label). Repeatable; boots interleave
    /// over kernels × variants, so a knob's A/B runs in one session, e.g.
    /// `--variant base= --variant nosmt=nosmt`.
    #[arg(long = "variant", value_name = "LABEL=WORDS")]
    pub variants: Vec<String>,
    /// Accelerator: auto (KVM only where it really works), kvm or tcg.
    #[arg(long, default_value = "auto")]
    pub accel: String,
    /// Guest clock: real, or icount[:SHIFT] (instruction counting: measures
    /// code-path length and hides cache and lock effects).
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
    /// Retries for a boot that hangs or panics.
    #[arg(long, default_value_t = 0)]
    pub retries: u32,
    /// Use this initramfs instead of building one.
    #[arg(long)]
    pub initramfs: Option<PathBuf>,
    /// The kernel's lib/modules/RELEASE tree (for a kernel not from the cache).
    #[arg(long)]
    pub modules_dir: Option<PathBuf>,
    /// Do not add a virtio-serial results port (console only).
    #[arg(long)]
    pub no_port: bool,
    /// Write the results file here.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Start a results receiver on 127.0.0.1 for this run and have the
    /// guest upload its result to it over QEMU user networking (the NIC
    /// modules are packed); the envelope says whether it arrived.
    #[arg(long, conflicts_with = "upload_url")]
    pub serve: bool,
    /// With --serve: keep the received runs in this SQLite store (default:
    /// a temporary one, gone after the run).
    #[arg(long, requires = "serve")]
    pub serve_db: Option<PathBuf>,
    /// Have the guest upload to this receiver (as the guest sees it: the
    /// host's 127.0.0.1 is 10.0.2.2).
    #[arg(long, requires = "upload_token")]
    pub upload_url: Option<String>,
    /// The bearer token for --upload-url.
    #[arg(long, requires = "upload_url")]
    pub upload_token: Option<String>,
    /// Boot order with several kernels: interleaved (A B A B ...),
    /// sequential (A A ... B B ...) or random (each round in a random order).
    #[arg(long, value_enum, default_value = "interleaved")]
    pub order: crate::boot_order::BootOrder,
    /// Scratch disk (ext4 on virtio-blk, mounted at /scratch in the guest):
    /// auto (on when the suite runs contest: 2 × --mem + 1 GiB), none, or a
    /// size such as 4G. A fresh sparse image is made for every boot.
    #[arg(long, default_value = "auto")]
    pub scratch_disk: String,
    /// Swap disk: auto (as large as --mem when there is a scratch disk and
    /// no --zram), none, or a size such as 512M.
    #[arg(long, default_value = "auto")]
    pub swap: String,
    /// Compressed RAM swap in the guest (zram0, used before any swap
    /// disk): none, auto (half of --mem), or an uncompressed size such as
    /// 256M. contest's mem_load then swaps to RAM instead of the disk.
    #[arg(long, default_value = "none")]
    pub zram: String,
    /// Block scheduler of the scratch disk: none, mq-deadline, kyber or bfq,
    /// as the kernel config offers (a module is packed when needed).
    #[arg(long)]
    pub iosched: Option<String>,
}

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
    /// none, gzip or zstd.
    #[arg(long, default_value = "gzip")]
    pub compression: String,
    /// Output file.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Parses a memory size: `1G`, `512M`, `2048` (MiB).
pub fn parse_mem_mib(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'G' | 'g')) => (&t[..i], 1024),
        Some((i, 'M' | 'm')) => (&t[..i], 1),
        _ => (t, 1),
    };
    let n: u64 = num.parse().with_context(|| format!("bad memory size '{s}' (expected e.g. 1G, 512M, 2048)"))?;
    if n == 0 {
        bail!("bad memory size '{s}': must be more than 0");
    }
    Ok(n * mult)
}

/// One cmdline variant of `--variant LABEL=WORDS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// The group's label.
    pub label: String,
    /// Extra cmdline words.
    pub words: String,
}

/// Parses the `--variant` values: each `LABEL=WORDS` with a non-empty,
/// unique label and words the cmdline builder accepts. No variants means
/// one unnamed variant (the kernel as given).
pub fn parse_variants(values: &[String]) -> anyhow::Result<Vec<Variant>> {
    let mut out: Vec<Variant> = Vec::new();
    for v in values {
        let Some((label, words)) = v.split_once('=') else {
            bail!("bad --variant '{v}': expected LABEL=WORDS (e.g. 'nosmt=nosmt', or 'base=' for none)");
        };
        let label = label.trim();
        if label.is_empty() || label.contains(char::is_whitespace) {
            bail!("bad --variant '{v}': the label must be one non-empty word");
        }
        if out.iter().any(|o| o.label == label) {
            bail!("--variant label '{label}' is given twice");
        }
        qemu::KernelCmdline::new(qemu::arch::COMMAND_LINE_SIZE)?
            .extend_raw(words)
            .with_context(|| format!("bad --variant '{v}': its words are not a valid kernel cmdline"))?;
        out.push(Variant { label: label.to_string(), words: words.trim().to_string() });
    }
    if out.is_empty() {
        out.push(Variant { label: String::new(), words: String::new() });
    }
    Ok(out)
}

/// The group label of a boot: `--label`, then the variant's label.
fn group_label(label: &str, variant: &Variant) -> String {
    match (label.is_empty(), variant.label.is_empty()) {
        (_, true) => label.to_string(),
        (true, false) => variant.label.clone(),
        (false, false) => format!("{label}/{}", variant.label),
    }
}

fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(hex::encode(Sha256::digest(&data)))
}

/// A kernel to boot, with what the host knows about it.
#[derive(Debug, Clone)]
struct KernelUnderTest {
    image: PathBuf,
    image_sha256: String,
    config: Option<PathBuf>,
    config_sha256: Option<String>,
    modules_dir: Option<PathBuf>,
    package: Option<String>,
    release: Option<String>,
}

impl KernelUnderTest {
    fn from_fetched(k: &FetchedKernel) -> KernelUnderTest {
        KernelUnderTest {
            image: k.image(),
            image_sha256: k.info.image_sha256.clone(),
            config: Some(k.config()),
            config_sha256: Some(k.info.config_sha256.clone()),
            modules_dir: Some(k.modules_dir()),
            package: Some(format!("{} {}", k.info.package, k.info.version)),
            release: Some(k.info.release.clone()),
        }
    }

    fn from_built(k: &kernel::build::BuiltKernel) -> KernelUnderTest {
        KernelUnderTest {
            image: k.image(),
            image_sha256: k.info.image_sha256.clone(),
            config: Some(k.config()),
            config_sha256: Some(k.info.config_sha256.clone()),
            // Built for the appliance: everything it needs is built in.
            modules_dir: None,
            package: Some(format!("built from {} ({})", k.info.source_tree.display(), k.info.defconfig)),
            release: Some(k.info.release.clone()),
        }
    }

    /// A user-supplied image: its config is `config-SUFFIX` beside a
    /// `vmlinuz-SUFFIX`, or the `.config` of the kernel tree it was built in.
    fn from_path(path: &Path, modules_dir: Option<&PathBuf>) -> anyhow::Result<KernelUnderTest> {
        if !path.is_file() {
            bail!("kernel image {} does not exist or is not a file", path.display());
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let suffix = name.strip_prefix("vmlinuz-").or_else(|| name.strip_prefix("vmlinux-"));
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut candidates = Vec::new();
        if let Some(s) = suffix {
            candidates.push(dir.join(format!("config-{s}")));
        }
        candidates.extend(dir.ancestors().take(4).map(|d| d.join(".config")));
        let config = candidates.into_iter().find(|c| c.is_file());
        let config_sha256 = config.as_deref().map(sha256_file).transpose()?;
        // A kernel from the cache carries its modules at ../lib/modules/SUFFIX.
        let modules_dir =
            modules_dir.cloned().or_else(|| suffix.map(|s| dir.join("../lib/modules").join(s)).filter(|d| d.is_dir()));
        Ok(KernelUnderTest {
            image: path.to_path_buf(),
            image_sha256: sha256_file(path)?,
            config,
            config_sha256,
            modules_dir,
            package: None,
            release: suffix.map(str::to_string),
        })
    }

    /// How the kernel config builds the virtio console: `y`, `m`, or unknown.
    fn virtio_console(&self) -> Option<char> {
        let text = std::fs::read_to_string(self.config.as_ref()?).ok()?;
        text.lines().find_map(|l| l.strip_prefix("CONFIG_VIRTIO_CONSOLE=")).and_then(|v| v.chars().next())
    }
}

fn resolve_kernels(args: &RunArgs, arch: Arch) -> anyhow::Result<Vec<KernelUnderTest>> {
    if !args.kernels.is_empty() {
        return args
            .kernels
            .iter()
            .map(|p| {
                // Refuse a file that is no kernel for the arch before building
                // an image or starting QEMU.
                qemu::kernel_image::check_kernel(p, arch)?;
                KernelUnderTest::from_path(p, args.modules_dir.as_ref())
            })
            .collect();
    }
    let root = kernel::default_cache_root();
    if arch.profile().debian_arch.is_none() {
        // Debian has no kernel for this arch (big-endian ppc64): boot the
        // one `bootbench kernel build` installed into the cache.
        let built = kernel::build::cached(arch, &root)?.with_context(|| {
            format!(
                "no {arch} kernel: Debian ships none, and none was built into {}; build one with \
                 `bootbench kernel build --tree \"$(bootbench kernel source)\" --arch {arch}` or give --kernel",
                kernel::build::arch_dir(&root, arch).display()
            )
        })?;
        built.verify()?;
        return Ok(vec![KernelUnderTest::from_built(&built)]);
    }
    let debian = DebianArch::for_target(arch)?;
    let fetched = match kernel::cached(debian, &root)? {
        Some(k) => {
            k.verify()?;
            k
        }
        None => {
            eprintln!("run: no cached {debian} kernel; fetching the default one");
            kernel::fetch(debian, false, &root)?
        }
    };
    Ok(vec![KernelUnderTest::from_fetched(&fetched)])
}

/// The image for one kernel, with whether it carries the results port.
struct PreparedImage {
    built: image_cmd::BuiltImage,
    port: bool,
}

fn prepare_image(
    args: &RunArgs,
    arch: Arch,
    suite: &loads::suite::Suite,
    k: &KernelUnderTest,
    early_modules: &[String],
    dir: &Path,
) -> anyhow::Result<PreparedImage> {
    if let Some(p) = &args.initramfs {
        let data = std::fs::read(p).with_context(|| format!("cannot read initramfs {}", p.display()))?;
        let built = image_cmd::BuiltImage {
            path: p.clone(),
            sha256: hex::encode(Sha256::digest(&data)),
            bytes: data.len() as u64,
            raw_bytes: 0,
            init_bytes: 0,
            modules: Vec::new(),
            early_modules: Vec::new(),
        };
        return Ok(PreparedImage { built, port: !args.no_port });
    }
    let (modules, port) = match (args.no_port, k.virtio_console(), &k.modules_dir) {
        (true, _, _) => (Vec::new(), false),
        (false, Some('y'), _) => (Vec::new(), true),
        (false, Some('m'), Some(_)) => (RESULT_PORT_MODULES.iter().map(|s| s.to_string()).collect(), true),
        (false, state, _) => {
            eprintln!(
                "run: no results port for {}: virtio_console is {} (console only)",
                k.image.display(),
                match state {
                    Some('m') => "a module but the modules tree is unknown (give --modules-dir)",
                    Some(_) => "not built",
                    None => "unknown (no kernel config found)",
                }
            );
            (Vec::new(), false)
        }
    };
    let modules = if args.serve || args.upload_url.is_some() {
        crate::run_receiver::image_modules(k.config.as_deref(), k.modules_dir.is_some(), modules)?
    } else {
        modules
    };
    let spec = ImageSpec {
        arch,
        suite: suite.clone(),
        modules,
        early_modules: early_modules.to_vec(),
        modules_dir: k.modules_dir.clone(),
        init: None,
        compression: Compression::Gzip,
    };
    let out = dir.join(format!("initramfs-{}.cpio.gz", &k.image_sha256[..12]));
    let built = image_cmd::build(&spec, &out)?;
    Ok(PreparedImage { built, port })
}

/// The `-append` value QEMU was given.
fn appended(argv: &[String]) -> String {
    argv.iter().position(|a| a == "-append").and_then(|i| argv.get(i + 1)).cloned().unwrap_or_default()
}

/// Runs `bootbench run`: boots, prints the table, and exits 2 unless every
/// boot is `ok` with a complete result.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let file = run_boots(args)?;
    print!("{}", summary_table::render_boots(&file.boots));
    if let Some(out) = &args.output {
        eprintln!("run: wrote {}", out.display());
    }
    let all_ok = file.boots.iter().all(|b| {
        b.boot.classification == "ok" && b.result.as_ref().is_some_and(|d| d.status == loads::schema::Status::Complete)
    });
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

/// The boots of `bootbench run`, without printing the table: the results
/// (also written to `args.output` after every boot, when given).
pub fn run_boots(args: &RunArgs) -> anyhow::Result<ResultsFile> {
    let arch: Arch = args.arch.parse()?;
    if args.boots == 0 {
        bail!("--boots must be at least 1");
    }
    let mem_mib = parse_mem_mib(&args.mem)?;
    let clock: Clock = args.clock.parse()?;
    let request: AccelRequest = args.accel.parse()?;
    let choice = choose(request, clock, arch)?;
    if let (Some(p), true) =
        (&args.initramfs, args.iterations.is_some() || args.warmup.is_some() || args.workloads.is_some())
    {
        bail!(
            "--iterations, --warmup and --workloads change the suite of an image bootbench builds; the suite packed in --initramfs {} stays as it is: give them as --append bootbench.iterations=N etc. instead",
            p.display()
        );
    }
    let suite = apply_overrides(load_suite(&args.suite)?, args.iterations, args.warmup, args.workloads.as_deref())?;
    let variants = parse_variants(&args.variants)?;
    let storage = crate::scratch_disk::StoragePlan::decide(
        crate::scratch_disk::SizeChoice::parse("--scratch-disk", &args.scratch_disk)?,
        crate::scratch_disk::SizeChoice::parse("--swap", &args.swap)?,
        crate::scratch_disk::SizeChoice::parse("--zram", &args.zram)?,
        args.iosched.as_deref(),
        suite.workloads.iter().any(|w| w.name == crate::scratch_disk::CONTEST_WORKLOAD),
        mem_mib,
    )?;
    let kernels = resolve_kernels(args, arch)?;
    let kernel_storage = kernels
        .iter()
        .map(|k| {
            let config = k.config.as_deref().map(crate::scratch_disk::KernelConfig::read).transpose()?;
            // A user's --initramfs carries its own modules: only the
            // scheduler and page size are taken from the config then.
            crate::scratch_disk::for_kernel(
                &storage,
                config.as_ref(),
                k.modules_dir.is_some() || args.initramfs.is_some(),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let profile = arch.profile();
    let qemu_version = qemu::qemu_version(&profile.qemu_binary)?;
    let work = tempfile::Builder::new().prefix("bootbench-run-").tempdir().context("cannot create a temp dir")?;
    let mut images = Vec::new();
    for (k, ks) in kernels.iter().zip(&kernel_storage) {
        let img = prepare_image(args, arch, &suite, k, &ks.early_modules, work.path())?;
        eprintln!(
            "run: initramfs {} ({} bytes, modules: {}{})",
            img.built.path.display(),
            img.built.bytes,
            if img.built.modules.is_empty() { "none".to_string() } else { img.built.modules.join(",") },
            if img.built.early_modules.is_empty() {
                String::new()
            } else {
                format!("; early: {}", img.built.early_modules.join(","))
            }
        );
        images.push(img);
    }
    eprintln!("run: accel {} ({}); {} vCPU, {} MiB", choice.accel, choice.reason, args.smp, mem_mib);

    let mut uploads = match (&args.upload_url, &args.upload_token) {
        _ if args.serve => Some(crate::run_receiver::RunUpload::serve(args.serve_db.as_deref(), work.path())?),
        (Some(url), Some(token)) => Some(crate::run_receiver::RunUpload::elsewhere(url, token)?),
        _ => None,
    };
    let mut file = ResultsFile::default();
    let total = args.boots as usize * kernels.len() * variants.len();
    // Interleaved by default (A B A B ...), so host drift cannot pass for a
    // kernel difference; see boot_order.
    let order_seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let variants = &variants;
    let units: Vec<(usize, &Variant)> =
        (0..kernels.len()).flat_map(|ki| variants.iter().map(move |v| (ki, v))).collect();
    if args.order == crate::boot_order::BootOrder::Random && units.len() > 1 {
        eprintln!("run: random boot order, seed {order_seed}");
    }
    for (round, ui) in crate::boot_order::schedule(args.order, units.len(), args.boots, order_seed) {
        let (ki, variant) = units[ui];
        let (k, img) = (&kernels[ki], &images[ki]);
        let label = group_label(&args.label, variant);
        {
            let index = file.boots.len();
            let mut attempt = 0;
            let record = loop {
                let port_file = work.path().join(format!("port-{index}-{attempt}.out"));
                let disks = crate::scratch_disk::make_disks(
                    &storage,
                    kernel_storage[ki].page_size,
                    work.path(),
                    &format!("{index}-{attempt}"),
                )?;
                if storage.any() {
                    eprintln!("run: {}", crate::scratch_disk::describe(&disks.record));
                }
                let mut spec = BootSpec::new(profile.clone(), &k.image, &img.built.path)?;
                spec.disks = disks.files.iter().map(|f| (f.clone(), qemu::argv::DiskFormat::Raw)).collect();
                for (key, value) in storage.cmdline_keys() {
                    spec.cmdline.push(key, &value)?;
                }
                spec.accel = choice.accel;
                spec.smp = args.smp;
                spec.mem_mib = mem_mib;
                spec.cpu = args.cpu.clone();
                spec.cmdline.push_flag("quiet")?;
                spec.cmdline.push("bootbench.accel", &choice.accel.to_string())?;
                if let Some(extra) = &args.append {
                    spec.cmdline.extend_raw(extra)?;
                }
                if !variant.words.is_empty() {
                    spec.cmdline.extend_raw(&variant.words)?;
                }
                if icount_needs_alive_key(choice.accel, &spec.cmdline) {
                    spec.cmdline.push(ALIVE_CMDLINE_KEY, &ICOUNT_ALIVE_INTERVAL_S.to_string())?;
                }
                if img.port {
                    spec.results_port = Some(port_file.clone());
                }
                if let Some(u) = &uploads {
                    spec.user_net = true;
                    for (key, value) in u.cmdline_keys() {
                        spec.cmdline.push(key, value)?;
                    }
                }
                spec.timeouts = Timeouts {
                    boot: Duration::from_secs(args.timeout_boot),
                    silence: Duration::from_secs(args.timeout_silence),
                    total: Duration::from_secs(args.timeout_total),
                    ..Timeouts::default()
                };
                let outcome = qemu::boot(&spec);
                // The images hold what the guest wrote (up to GBs): gone
                // after each boot, and made fresh for the next.
                disks.remove();
                let outcome = outcome?;
                let upload_seen = uploads.as_ref().map(|_| (outcome.events.clone(), outcome.document.clone()));
                let mut record = envelope(args, &label, k, img, &qemu_version, &choice, mem_mib, arch, index, outcome);
                record.storage = storage.any().then(|| disks.record.clone());
                record.channels = channel_reports(&record.console_log, img.port.then_some(port_file.as_path()));
                if let (Some(u), Some((events, doc))) = (&mut uploads, &upload_seen) {
                    u.attach(&mut record, events, doc.as_deref());
                }
                let retry = matches!(record.boot.classification.as_str(), "hang" | "panic" | "oops");
                eprintln!(
                    "run: boot {}/{total} (kernel {}{}, round {}): {} in {:.1} s{}",
                    index + 1,
                    ki + 1,
                    if variant.label.is_empty() { String::new() } else { format!(" variant {}", variant.label) },
                    round + 1,
                    record.boot.classification,
                    record.boot.wall_s,
                    record.boot.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default()
                );
                if retry && attempt < args.retries {
                    attempt += 1;
                    eprintln!("run: retrying (attempt {} of {})", attempt + 1, args.retries + 1);
                    continue;
                }
                break record;
            };
            file.boots.push(record);
            if let Some(out) = &args.output {
                file.write(out)?;
            }
        }
    }
    if let Some(u) = uploads {
        u.finish()?;
    }
    Ok(file)
}

/// Whether an icount boot's cmdline needs the shorter `alive` interval:
/// under icount, guest seconds pass several times slower than the host's,
/// and the default interval would outlast the host's silence timeout. A
/// value the user set wins.
fn icount_needs_alive_key(accel: Accel, cmdline: &qemu::KernelCmdline) -> bool {
    matches!(accel, Accel::Icount { .. }) && !cmdline.contains(ALIVE_CMDLINE_KEY)
}

/// Decodes each channel on its own, so the envelope says which one
/// delivered the stream (the runner merges them into one verdict).
fn channel_reports(console_log: &str, port_file: Option<&Path>) -> Vec<ChannelReport> {
    let report = |name: &str, text: &str| {
        let mut d = loads::console_protocol::Decoder::new();
        d.feed_text(text);
        let verdict = d.last_document();
        ChannelReport { name: name.to_string(), intact: verdict.is_ok(), detail: verdict.err().map(|e| e.to_string()) }
    };
    let mut out = vec![report("console", console_log)];
    if let Some(p) = port_file {
        out.push(match std::fs::read(p) {
            Ok(bytes) => report("port", &String::from_utf8_lossy(&bytes)),
            Err(e) => ChannelReport {
                name: "port".to_string(),
                intact: false,
                detail: Some(format!("no data from the results port file {}: {e}", p.display())),
            },
        });
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn envelope(
    args: &RunArgs,
    label: &str,
    k: &KernelUnderTest,
    img: &PreparedImage,
    qemu_version: &str,
    choice: &qemu::AccelChoice,
    mem_mib: u64,
    arch: Arch,
    index: usize,
    outcome: qemu::BootOutcome,
) -> BootRecord {
    let (result, result_error) = match (&outcome.document, &outcome.stream_error) {
        (Some(text), _) => match serde_json::from_str::<RunDocument>(text) {
            Ok(mut doc) => {
                doc.provenance.kernel.image_sha256 = Some(k.image_sha256.clone());
                doc.provenance.kernel.config_sha256 = k.config_sha256.clone();
                (Some(doc), None)
            }
            Err(e) => (None, Some(format!("the guest's result is intact but not a valid result document: {e}"))),
        },
        (None, Some(e)) => (None, Some(e.clone())),
        (None, None) => (None, Some("no result stream".to_string())),
    };
    let detail = match &outcome.classification {
        qemu::Classification::Ok => None,
        other => Some(other.to_string()),
    };
    BootRecord {
        label: label.to_string(),
        cmdline: appended(&outcome.argv),
        kernel: KernelRef {
            path: k.image.clone(),
            image_sha256: k.image_sha256.clone(),
            config_sha256: k.config_sha256.clone(),
            package: k.package.clone(),
            release: k.release.clone(),
        },
        initramfs: InitramfsRef {
            path: img.built.path.clone(),
            sha256: img.built.sha256.clone(),
            bytes: img.built.bytes,
        },
        qemu: QemuRef { version: qemu_version.to_string(), argv: outcome.argv.clone() },
        machine: MachineShape {
            arch: arch.to_string(),
            smp: args.smp,
            mem_mib,
            cpu: args.cpu.clone(),
            accel: choice.accel.to_string(),
            accel_reason: choice.reason.clone(),
        },
        boot: BootInfo {
            index: index as u32,
            classification: outcome.classification.name().to_string(),
            detail,
            wall_s: outcome.timings.wall.as_secs_f64(),
            to_hello_s: outcome.timings.to_hello.map(|d| d.as_secs_f64()),
            qemu_status: outcome.qemu_status,
        },
        result,
        result_error,
        channels: Vec::new(),
        upload: None,
        storage: None,
        console_log: outcome.console_log,
    }
}

/// Runs `bootbench image`.
pub fn image(args: &ImageArgs) -> anyhow::Result<ExitCode> {
    let arch: Arch = args.arch.parse()?;
    let compression: Compression = args.compression.parse()?;
    let modules_dir = match (&args.modules_dir, args.modules.is_empty() && args.early_modules.is_empty()) {
        (Some(d), _) => Some(d.clone()),
        (None, true) => None,
        (None, false) => {
            let debian = DebianArch::for_target(arch)?;
            let k = kernel::cached(debian, &kernel::default_cache_root())?.with_context(|| {
                format!(
                    "--modules and --early-modules need a modules tree: give --modules-dir, or run `bootbench kernel fetch --arch {arch}`"
                )
            })?;
            Some(k.modules_dir())
        }
    };
    let spec = ImageSpec {
        arch,
        suite: load_suite(&args.suite)?,
        modules: args.modules.clone(),
        early_modules: args.early_modules.clone(),
        modules_dir,
        init: args.init.clone(),
        compression,
    };
    let built = image_cmd::build(&spec, &args.output)?;
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
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_name_groups_and_refuse_bad_input() {
        let v = |a: &[&str]| parse_variants(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let none = v(&[]).unwrap();
        assert_eq!(none, [Variant { label: String::new(), words: String::new() }]);
        let two = v(&["base=", "nosmt=nosmt mitigations=off"]).unwrap();
        assert_eq!(two[1], Variant { label: "nosmt".into(), words: "nosmt mitigations=off".into() });
        assert_eq!(group_label("", &two[0]), "base");
        assert_eq!(group_label("6.1", &two[1]), "6.1/nosmt");
        assert_eq!(group_label("6.1", &none[0]), "6.1");
        for (bad, says) in [
            (vec!["nosmt"], "LABEL=WORDS"),
            (vec!["=nosmt"], "non-empty word"),
            (vec!["a b=x"], "non-empty word"),
            (vec!["a=x", "a=y"], "twice"),
            (vec!["q=\"unterminated"], "not a valid kernel cmdline"),
        ] {
            let e = format!("{:#}", v(&bad).unwrap_err());
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn icount_boots_ask_for_frequent_alive_events_unless_told_otherwise() {
        let mut c = qemu::KernelCmdline::new(2048).unwrap();
        c.push("console", "ttyS0").unwrap();
        assert!(icount_needs_alive_key(Accel::Icount { shift: 0 }, &c));
        assert!(!icount_needs_alive_key(Accel::Tcg, &c), "real-clock boots keep the 60 s default");
        c.extend_raw("bootbench.alive=30").unwrap();
        assert!(!icount_needs_alive_key(Accel::Icount { shift: 3 }, &c), "the user's value wins");
    }

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_mem_mib("1G").unwrap(), 1024);
        assert_eq!(parse_mem_mib("512M").unwrap(), 512);
        assert_eq!(parse_mem_mib("2048").unwrap(), 2048);
        for bad in ["", "0", "lots", "1T", "-1G"] {
            let e = parse_mem_mib(bad).unwrap_err().to_string();
            assert!(e.contains("memory size"), "{bad}: {e}");
        }
    }

    #[test]
    fn missing_kernel_file_is_a_clear_error() {
        let e = KernelUnderTest::from_path(Path::new("/nonexistent/vmlinuz-x"), None).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/vmlinuz-x"), "{e}");
    }
}
