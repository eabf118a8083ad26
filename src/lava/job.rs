//! `bootbench lava job`: a LAVA job definition (YAML) that boots a kernel
//! with the appliance's initramfs, both given by URL, and reads the
//! appliance's `monitors` lines ([`loads::lava_lines`]).
//!
//! The job:
//! - deploys the kernel and initramfs (`tmpfs` for a QEMU device, `tftp`
//!   for a board), each with its sha256 so LAVA checks what it fetched;
//! - boots with the appliance's cmdline: the console, `panic=0` (a guest
//!   that reboots after a panic would run the suite again; LAVA's timeouts
//!   catch the hang instead), `bootbench.lava=1`, the suite, the accel and
//!   the user's words;
//! - runs one `monitors` test action, whose start line the init prints when
//!   it starts and whose end line it prints after the result document;
//! - has timeouts from the suite's watchdog;
//! - carries in its metadata what `bootbench lava import` and `compare`
//!   need: the kernel's and initramfs's sha256, the label, the kernel
//!   commit when given, the suite.

use super::LavaError;
use crate::suite_choice;
use loads::{console_protocol, lava_lines};
use qemu::{Arch, ArchProfile, KernelCmdline};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How a device boots, as LAVA's boot action names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BootMethod {
    /// A QEMU device of the lab: LAVA starts QEMU itself.
    Qemu,
    /// A board whose bootloader is U-Boot (kernel, initramfs and DTB by TFTP).
    #[value(name = "u-boot")]
    UBoot,
    /// A machine that boots through GRUB (kernel and initramfs by TFTP).
    Grub,
    /// A machine that boots through iPXE (kernel and initramfs by TFTP).
    Ipxe,
}

impl BootMethod {
    /// The name LAVA gives it.
    pub fn lava_name(self) -> &'static str {
        match self {
            BootMethod::Qemu => "qemu",
            BootMethod::UBoot => "u-boot",
            BootMethod::Grub => "grub",
            BootMethod::Ipxe => "ipxe",
        }
    }
}

/// The LAVA device types a job can be written for without
/// `--boot-method`, with the boot method their device-type templates
/// (lava-server 2023.01) offer for a kernel and initramfs. The x86 boards
/// boot through iPXE or GRUB; the first method listed is the default.
pub const DEVICE_TYPES: &[(&str, &[BootMethod])] = &[
    ("qemu", &[BootMethod::Qemu]),
    ("x86", &[BootMethod::Ipxe, BootMethod::Grub]),
    ("x86-pentium4", &[BootMethod::Grub]),
    ("x86-x5-z8350", &[BootMethod::Grub]),
    ("upsquare", &[BootMethod::Grub]),
    ("minnowboard-turbot-E3826", &[BootMethod::Grub]),
    ("seco-b68", &[BootMethod::Ipxe]),
    ("beaglebone-black", &[BootMethod::UBoot]),
    ("bcm2711-rpi-4-b", &[BootMethod::UBoot]),
    ("am57xx-beagle-x15", &[BootMethod::UBoot]),
];

/// What `bootbench lava job` takes.
#[derive(Debug, Clone, clap::Args)]
pub struct JobArgs {
    /// The LAVA device type to run on (`qemu`, or a board's type, e.g.
    /// `x86`, `beaglebone-black`).
    #[arg(long, value_name = "NAME")]
    pub device_type: String,
    /// How the device boots; needed for a device type bootbench does not
    /// know, and to pick one of several a known type offers.
    #[arg(long, value_enum, value_name = "METHOD")]
    pub boot_method: Option<BootMethod>,
    /// The kernel's architecture (as `bootbench run --arch` spells it).
    #[arg(long, default_value = "x86_64", value_name = "ARCH")]
    pub arch: String,
    /// Where LAVA fetches the kernel image.
    #[arg(long, value_name = "URL")]
    pub kernel_url: String,
    /// A local copy of that kernel image, to hash (or give --kernel-sha256).
    #[arg(long, value_name = "FILE", conflicts_with = "kernel_sha256")]
    pub kernel: Option<PathBuf>,
    /// The kernel image's sha256.
    #[arg(long, value_name = "HEX")]
    pub kernel_sha256: Option<String>,
    /// The kernel's full git commit (40 hex digits, e.g. `git rev-parse
    /// HEAD`), when known: job metadata, kept by `lava import` for the
    /// KCIDB export.
    #[arg(long, value_name = "SHA")]
    pub kernel_commit: Option<String>,
    /// Where LAVA fetches the initramfs `bootbench image` wrote.
    #[arg(long, value_name = "URL")]
    pub initramfs_url: String,
    /// A local copy of that initramfs, to hash (or give --initramfs-sha256).
    #[arg(long, value_name = "FILE", conflicts_with = "initramfs_sha256")]
    pub initramfs: Option<PathBuf>,
    /// The initramfs's sha256.
    #[arg(long, value_name = "HEX")]
    pub initramfs_sha256: Option<String>,
    /// The device tree blob a U-Boot board needs, by URL.
    #[arg(long, value_name = "URL")]
    pub dtb_url: Option<String>,
    /// The suite: a built-in name or a suite file (the one packed in the
    /// initramfs). A built-in name is also put on the cmdline.
    #[arg(long, default_value = "quick", value_name = "NAME|FILE")]
    pub suite: String,
    /// The serial console the device's kernel writes to (default: the
    /// arch's, `ttyS0,115200n8` on x86, `hvc0` on POWER).
    #[arg(long, value_name = "DEVICE")]
    pub console: Option<String>,
    /// Extra kernel cmdline words (`bootbench.*` keys are checked).
    #[arg(long, value_name = "WORDS")]
    pub append: Option<String>,
    /// A QEMU device without KVM: the job asks LAVA's template for no
    /// `-enable-kvm`, and the appliance records `tcg`.
    #[arg(long)]
    pub no_kvm: bool,
    /// The label the boots get in results (`compare` groups by it).
    #[arg(long, default_value = "lava", value_name = "LABEL")]
    pub label: String,
    /// The job's name (default: from the suite, device type and label).
    #[arg(long, value_name = "NAME")]
    pub job_name: Option<String>,
    /// Who may see the job: `public` or `personal`.
    #[arg(long, default_value = "public", value_parser = ["public", "personal"])]
    pub visibility: String,
    /// Minutes LAVA allows for fetching and booting, before the suite.
    #[arg(long, default_value_t = 10, value_name = "MINUTES")]
    pub boot_minutes: u64,
    /// Minutes LAVA allows the suite, and waits at most between two of its
    /// lines (default: the suite's watchdog plus 5 for the result's way
    /// out). A kernel that panics or hangs is caught after this long.
    #[arg(long, value_name = "MINUTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub suite_minutes: Option<u64>,
}

/// The metadata keys a job carries (read back by `bootbench lava import`).
pub mod metadata {
    /// The kernel image's sha256.
    pub const KERNEL_SHA256: &str = "bootbench.kernel.sha256";
    /// The kernel image's URL.
    pub const KERNEL_URL: &str = "bootbench.kernel.url";
    /// The kernel's git commit.
    pub const KERNEL_COMMIT: &str = "bootbench.kernel.commit";
    /// The initramfs's sha256.
    pub const INITRAMFS_SHA256: &str = "bootbench.initramfs.sha256";
    /// The initramfs's URL.
    pub const INITRAMFS_URL: &str = "bootbench.initramfs.url";
    /// The boots' label.
    pub const LABEL: &str = "bootbench.label";
    /// The suite's name.
    pub const SUITE: &str = "bootbench.suite";
    /// The guest arch.
    pub const ARCH: &str = "bootbench.arch";
    /// The boot method.
    pub const BOOT_METHOD: &str = "bootbench.boot_method";
    /// The kernel cmdline the job boots with.
    pub const CMDLINE: &str = "bootbench.cmdline";
    /// bootbench's version that wrote the job.
    pub const VERSION: &str = "bootbench.version";
}

#[derive(Serialize)]
struct Job {
    device_type: String,
    job_name: String,
    timeouts: Timeouts,
    priority: &'static str,
    visibility: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    context: BTreeMap<&'static str, serde_json::Value>,
    metadata: BTreeMap<&'static str, String>,
    actions: Vec<Action>,
}

#[derive(Serialize)]
struct Timeouts {
    job: Minutes,
    connection: Minutes,
}

#[derive(Serialize, Clone, Copy)]
struct Minutes {
    minutes: u64,
}

/// One action: a mapping with one key, as LAVA's schema wants it.
#[derive(Serialize, Default)]
struct Action {
    #[serde(skip_serializing_if = "Option::is_none")]
    deploy: Option<Deploy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    boot: Option<Boot>,
    #[serde(skip_serializing_if = "Option::is_none")]
    test: Option<Test>,
}

#[derive(Serialize)]
struct Deploy {
    timeout: Minutes,
    to: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    images: Option<BTreeMap<&'static str, Image>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel: Option<Image>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ramdisk: Option<Image>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dtb: Option<Image>,
}

#[derive(Serialize)]
struct Image {
    url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256sum: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_arg: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
}

#[derive(Serialize)]
struct Boot {
    timeout: Minutes,
    method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    media: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    commands: Option<&'static str>,
    prompts: Vec<String>,
}

#[derive(Serialize)]
struct Test {
    timeout: Minutes,
    monitors: Vec<Monitor>,
}

#[derive(Serialize)]
struct Monitor {
    name: &'static str,
    start: &'static str,
    end: &'static str,
    pattern: &'static str,
}

/// The LAVA test suite name the monitors' results go under.
pub const MONITOR_NAME: &str = "bootbench";

/// The boot method for `args`: the one given, else the device type's
/// first; an unknown device type without one is an error that lists the
/// known ones.
fn boot_method(args: &JobArgs) -> Result<BootMethod, LavaError> {
    let known = DEVICE_TYPES.iter().find(|(name, _)| *name == args.device_type);
    match (known, args.boot_method) {
        (Some((name, methods)), Some(m)) if !methods.contains(&m) => Err(LavaError::BootMethod {
            device_type: (*name).to_string(),
            method: m.lava_name(),
            offered: methods.iter().map(|m| m.lava_name()).collect::<Vec<_>>().join(", "),
        }),
        (_, Some(m)) => Ok(m),
        (Some((_, methods)), None) => methods.first().copied().ok_or(LavaError::NoBootMethod),
        (None, None) => Err(LavaError::UnknownDeviceType {
            name: args.device_type.clone(),
            known: DEVICE_TYPES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// A sha256 from a local file or as given (checked to be 64 hex digits).
fn sha256_of(what: &str, file: Option<&PathBuf>, given: Option<&String>) -> Result<String, LavaError> {
    match (file, given) {
        (Some(path), _) => crate::boot::kernels::sha256_file(path)
            .map_err(|e| LavaError::Hash { path: path.clone(), problem: format!("{e:#}") }),
        (None, Some(hex)) if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) => Ok(hex.to_lowercase()),
        (None, Some(hex)) => Err(LavaError::BadSha256 { what: what.to_string(), value: hex.clone() }),
        (None, None) => Err(LavaError::NoSha256 { what: what.to_string() }),
    }
}

/// LAVA's QEMU template's name for an arch.
fn qemu_template_arch(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "amd64",
        Arch::I386 => "i386",
        Arch::Ppc64 | Arch::Ppc64le => "ppc64",
    }
}

/// The job definition for `args`, as YAML.
pub fn render(args: &JobArgs) -> Result<String, LavaError> {
    let method = boot_method(args)?;
    let arch: Arch = args.arch.parse().map_err(|e: qemu::arch::ArchError| LavaError::Arch(e.to_string()))?;
    let kernel_sha = sha256_of("the kernel", args.kernel.as_ref(), args.kernel_sha256.as_ref())?;
    let initramfs_sha = sha256_of("the initramfs", args.initramfs.as_ref(), args.initramfs_sha256.as_ref())?;
    if method == BootMethod::UBoot && args.dtb_url.is_none() {
        return Err(LavaError::NoDtb { device_type: args.device_type.clone() });
    }
    let suite = suite_choice::load_suite_for(&args.suite, &arch.to_string(), false)
        .map_err(|e| LavaError::Suite(format!("{e:#}")))?;
    if let Some(w) = suite.workloads.iter().find(|w| loads::workloads::needs_pack(w)) {
        return Err(LavaError::NeedsPack { suite: args.suite.clone(), workload: w.name.clone() });
    }
    let cmdline = kernel_cmdline(args, arch, method)?;
    let effective = loads::suite::CmdlineConfig::parse(cmdline.as_str())
        .and_then(|c| c.apply(suite))
        .map_err(|e| LavaError::Cmdline(e.to_string()))?;
    // The suite's own watchdog, plus the result's way out (the late
    // steps' bounds: at most about 5 minutes), rounded up.
    let suite_minutes = args.suite_minutes.unwrap_or(effective.watchdog_s.div_ceil(60) + 5);
    let boot = Minutes { minutes: args.boot_minutes.max(1) };
    let test = Minutes { minutes: suite_minutes };
    // LAVA's monitor waits for each of its lines with the timeout of the
    // action that started the device's connection (lava_dispatcher's
    // `monitor.py` takes `test_connection.timeout`; for a QEMU device that
    // is `execute-qemu`'s, a part of the boot action), one deadline per
    // wait that no other output resets, and nothing it matches comes while
    // a workload runs. So the boot action gets the suite's time too: the
    // price is that a kernel which never reaches the init is given up
    // after boot plus suite minutes rather than boot minutes.
    let boot_action = Minutes { minutes: boot.minutes + test.minutes };
    let job_minutes = Minutes { minutes: boot.minutes + boot_action.minutes + test.minutes };
    let kernel =
        Image { url: args.kernel_url.clone(), sha256sum: Some(kernel_sha.clone()), image_arg: None, kind: None };
    let ramdisk =
        Image { url: args.initramfs_url.clone(), sha256sum: Some(initramfs_sha.clone()), image_arg: None, kind: None };
    let mut context = BTreeMap::new();
    let deploy = match method {
        BootMethod::Qemu => {
            context.insert("arch", serde_json::Value::from(qemu_template_arch(arch)));
            if args.no_kvm {
                context.insert("no_kvm", serde_json::Value::from(true));
            }
            let kernel =
                Image { image_arg: Some(format!("-kernel {{kernel}} -append '{}'", cmdline.as_str())), ..kernel };
            let ramdisk = Image { image_arg: Some("-initrd {ramdisk}".into()), ..ramdisk };
            let images = BTreeMap::from([("kernel", kernel), ("ramdisk", ramdisk)]);
            Deploy { timeout: boot, to: "tmpfs", images: Some(images), kernel: None, ramdisk: None, dtb: None }
        }
        BootMethod::UBoot | BootMethod::Grub | BootMethod::Ipxe => {
            context.insert("extra_kernel_args", serde_json::Value::from(cmdline.as_str()));
            let kind = (method == BootMethod::UBoot).then_some(match arch {
                Arch::X86_64 | Arch::I386 => "zimage",
                Arch::Ppc64 | Arch::Ppc64le => "image",
            });
            let dtb = args.dtb_url.as_ref().map(|url| Image {
                url: url.clone(),
                sha256sum: None,
                image_arg: None,
                kind: None,
            });
            Deploy {
                timeout: boot,
                to: "tftp",
                images: None,
                kernel: Some(Image { kind, ..kernel }),
                ramdisk: Some(ramdisk),
                dtb,
            }
        }
    };
    let boot_step = Boot {
        timeout: boot_action,
        method: method.lava_name(),
        media: (method == BootMethod::Qemu).then_some("tmpfs"),
        commands: (method != BootMethod::Qemu).then_some("ramdisk"),
        // The boot is done when the init says hello (the monitor then
        // finds its start line, printed after it).
        prompts: vec![format!("{} EVENT {}", console_protocol::MARKER, console_protocol::EVENT_HELLO)],
    };
    let mut meta = BTreeMap::from([
        (metadata::KERNEL_SHA256, kernel_sha),
        (metadata::KERNEL_URL, args.kernel_url.clone()),
        (metadata::INITRAMFS_SHA256, initramfs_sha),
        (metadata::INITRAMFS_URL, args.initramfs_url.clone()),
        (metadata::LABEL, args.label.clone()),
        (metadata::SUITE, effective.name.clone()),
        (metadata::ARCH, arch.to_string()),
        (metadata::BOOT_METHOD, method.lava_name().to_string()),
        (metadata::CMDLINE, cmdline.as_str().to_string()),
        (metadata::VERSION, env!("CARGO_PKG_VERSION").to_string()),
    ]);
    if let Some(c) = &args.kernel_commit {
        if c.len() != 40 || !c.chars().all(|x| x.is_ascii_hexdigit()) {
            return Err(LavaError::BadCommit(c.clone()));
        }
        meta.insert(metadata::KERNEL_COMMIT, c.to_lowercase());
    }
    let job_name = args
        .job_name
        .clone()
        .unwrap_or_else(|| format!("bootbench {} on {} ({})", effective.name, args.device_type, args.label));
    if job_name.is_empty() || job_name.chars().count() > 200 {
        return Err(LavaError::JobName(job_name));
    }
    let job = Job {
        device_type: args.device_type.clone(),
        job_name,
        timeouts: Timeouts { job: job_minutes, connection: test },
        priority: "medium",
        visibility: args.visibility.clone(),
        context,
        metadata: meta,
        actions: vec![
            Action { deploy: Some(deploy), ..Default::default() },
            Action { boot: Some(boot_step), ..Default::default() },
            Action {
                test: Some(Test {
                    timeout: test,
                    monitors: vec![Monitor {
                        name: MONITOR_NAME,
                        start: lava_lines::START,
                        end: lava_lines::END,
                        pattern: lava_lines::PATTERN,
                    }],
                }),
                ..Default::default()
            },
        ],
    };
    serde_yaml_ng::to_string(&job).map_err(|e| LavaError::Yaml(e.to_string()))
}

/// The appliance's cmdline on the device.
fn kernel_cmdline(args: &JobArgs, arch: Arch, method: BootMethod) -> Result<KernelCmdline, LavaError> {
    let profile = ArchProfile::for_arch(arch);
    let bad = |e: qemu::cmdline::CmdlineError| LavaError::Cmdline(e.to_string());
    let mut c = KernelCmdline::new(profile.cmdline_capacity).map_err(bad)?;
    let console = match (&args.console, arch) {
        (Some(c), _) => c.clone(),
        (None, Arch::X86_64 | Arch::I386) => format!("{},115200n8", profile.console),
        (None, Arch::Ppc64 | Arch::Ppc64le) => profile.console.to_string(),
    };
    c.push("console", &console).map_err(bad)?;
    c.push("panic", "0").map_err(bad)?;
    c.push(lava_lines::CMDLINE_KEY, "1").map_err(bad)?;
    if loads::suite::BUILTIN_SUITES.contains(&args.suite.as_str()) {
        c.push("bootbench.suite", &args.suite).map_err(bad)?;
    }
    let accel = match method {
        BootMethod::Qemu if args.no_kvm => "tcg",
        BootMethod::Qemu => "kvm",
        _ => "bare-metal",
    };
    c.push("bootbench.accel", accel).map_err(bad)?;
    if let Some(words) = &args.append {
        c.extend_raw(words).map_err(bad)?;
    }
    // A QEMU job's cmdline goes inside `-append '...'`, which LAVA splits
    // like a shell, after putting file paths in for `{...}`.
    if let Some(ch) = c.as_str().chars().find(|ch| "'{}".contains(*ch)) {
        return Err(LavaError::Cmdline(format!(
            "'{ch}' cannot be in a LAVA job's cmdline (LAVA splits it like a shell and fills in {{...}}): {}",
            c.as_str()
        )));
    }
    Ok(c)
}
