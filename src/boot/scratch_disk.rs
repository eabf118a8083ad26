//! The host side of the guest's scratch disk and swap (`bootbench run
//! --scratch-disk/--swap/--zram/--iosched`): the sizes, what a kernel's config
//! offers (modules to pack early, block schedulers, page size), the disk
//! images made with mke2fs and mkswap, the cmdline keys that tell the init
//! what to set up, and the record of it in the host envelope. It boots
//! nothing and holds no guest code (init's scratch_storage does that).

pub use crate::results::storage::{DiskRecord, HostStorage};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The workload whose presence in the suite switches `auto` disks on.
pub const CONTEST_WORKLOAD: &str = "contest";
/// The filesystem the scratch image is made with (and the init mounts).
pub const SCRATCH_FS: &str = "ext4";
/// Filesystem label of the scratch image (ext4 labels hold 16 bytes).
pub const SCRATCH_LABEL: &str = "bb-scratch";
/// Label of the swap image.
pub const SWAP_LABEL: &str = "bb-swap";
/// Fixed UUID (and ext4 directory hash seed) of every image: each boot gets
/// a byte-identical filesystem, so htree layout and checksum seeds cannot
/// differ between the boots being compared.
pub const IMAGE_UUID: &str = "b007be9c-5c7a-4c1d-8a11-000000000001";
/// Smallest scratch disk: ext4 with a journal needs some room to be useful.
pub const MIN_SCRATCH_BYTES: u64 = 32 << 20;
/// Smallest swap (mkswap wants at least ten pages of the largest size).
pub const MIN_SWAP_BYTES: u64 = 1 << 20;
/// Smallest zram swap (what the init accepts as `bootbench.zram`).
pub const MIN_ZRAM_BYTES: u64 = loads::suite::MIN_ZRAM_BYTES;
/// Largest disk accepted (the images are sparse, but a typo should not
/// ask for an exabyte).
pub const MAX_DISK_BYTES: u64 = 64 << 40;

/// Errors in storage options, kernel support and image making.
#[derive(Debug, thiserror::Error)]
pub enum ScratchDiskError {
    /// A size option does not parse or is out of range.
    #[error("bad value '{value}' for {flag}: {why}")]
    BadSize {
        /// The option, e.g. `--scratch-disk`.
        flag: &'static str,
        /// The value as given.
        value: String,
        /// What was expected.
        why: String,
    },
    /// `--iosched` was given but no scratch disk is attached.
    #[error("--iosched {name} selects the scratch disk's block scheduler, but there is no scratch disk (give --scratch-disk SIZE)")]
    IoschedWithoutDisk {
        /// The scheduler asked for.
        name: String,
    },
    /// A scheduler name no kernel knows.
    #[error("unknown block scheduler '{name}' (this kernel offers: {offered})")]
    UnknownScheduler {
        /// The name given.
        name: String,
        /// What the kernel config offers.
        offered: String,
    },
    /// A scheduler the kernel was built without.
    #[error(
        "block scheduler '{name}' is not built in {config} (CONFIG_{option} is not set; this kernel offers: {offered})"
    )]
    SchedulerNotBuilt {
        /// The name given.
        name: String,
        /// Its config option.
        option: &'static str,
        /// The kernel config file.
        config: PathBuf,
        /// What the kernel config offers.
        offered: String,
    },
    /// The kernel lacks a driver or filesystem the storage needs.
    #[error("the kernel has no {module} (CONFIG_{option} is not set in {config}): it cannot use {what}")]
    NotBuilt {
        /// The module name.
        module: &'static str,
        /// Its config option.
        option: &'static str,
        /// The kernel config file.
        config: PathBuf,
        /// What it is needed for.
        what: &'static str,
    },
    /// A needed module cannot be packed without the modules tree.
    #[error(
        "the guest needs the {module} module for {what}, but the kernel's modules tree is unknown (give --modules-dir)"
    )]
    ModulesDirUnknown {
        /// The module name.
        module: &'static str,
        /// What it is needed for.
        what: &'static str,
    },
    /// The kernel config cannot be read.
    #[error("cannot read kernel config {path}")]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The image file cannot be created.
    #[error("cannot create disk image {path}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// mke2fs or mkswap cannot be started.
    #[error("cannot run {program} (install {package}: scripts/setup does)")]
    Spawn {
        /// The program.
        program: &'static str,
        /// The Debian package providing it.
        package: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// mke2fs or mkswap failed.
    #[error("{command} failed ({status}): {stderr}")]
    ToolFailed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it printed on stderr.
        stderr: String,
    },
}

/// What a size option asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeChoice {
    /// Decide from the suite and the guest's memory.
    Auto,
    /// No disk.
    None,
    /// A disk of this many bytes.
    Bytes(u64),
}

impl SizeChoice {
    /// Parses `auto`, `none` or a size: a number with a binary suffix K, M,
    /// G or T (`300M`, `4G`); a bare number is MiB, as with `--mem`.
    ///
    /// ```
    /// use bootbench::boot::scratch_disk::SizeChoice;
    /// assert_eq!(SizeChoice::parse("--swap", "64M").unwrap(), SizeChoice::Bytes(64 << 20));
    /// assert_eq!(SizeChoice::parse("--swap", "auto").unwrap(), SizeChoice::Auto);
    /// assert!(SizeChoice::parse("--swap", "64X").is_err());
    /// ```
    pub fn parse(flag: &'static str, value: &str) -> Result<SizeChoice, ScratchDiskError> {
        let bad = |why: &str| ScratchDiskError::BadSize { flag, value: value.to_string(), why: why.to_string() };
        let t = value.trim();
        match t {
            "auto" => return Ok(SizeChoice::Auto),
            "none" => return Ok(SizeChoice::None),
            _ => {}
        }
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, suffix) = t.split_at(split);
        let shift = match suffix.to_ascii_uppercase().as_str() {
            "" | "M" | "MIB" => 20,
            "K" | "KIB" => 10,
            "G" | "GIB" => 30,
            "T" | "TIB" => 40,
            _ => return Err(bad(
                "expected auto, none or a size such as 300M, 4G (K, M, G, T are powers of 1024; a bare number is MiB)",
            )),
        };
        let n: u64 = num.parse().map_err(|_| bad("expected auto, none or a size such as 300M, 4G"))?;
        let bytes = n.checked_mul(1 << shift).filter(|b| *b <= MAX_DISK_BYTES).ok_or_else(|| bad("larger than 64T"))?;
        if bytes == 0 {
            return Err(bad("must be more than 0 (use none for no disk)"));
        }
        Ok(SizeChoice::Bytes(bytes))
    }
}

/// What storage a run gives its guests, decided before any boot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoragePlan {
    /// Size of the scratch disk, when there is one.
    pub scratch_bytes: Option<u64>,
    /// Size of the swap disk, when there is one.
    pub swap_bytes: Option<u64>,
    /// Size of the guest's compressed RAM swap (zram0), when there is one.
    pub zram_bytes: Option<u64>,
    /// Block scheduler for the scratch disk (`--iosched`).
    pub iosched: Option<String>,
}

impl StoragePlan {
    /// Decides the disks: `auto` scratch is on when the suite runs
    /// [`CONTEST_WORKLOAD`], sized 2 × guest RAM + 1 GiB (room for io_load's
    /// RAM-sized file and the build tree); `auto` swap is as large as the
    /// guest RAM when there is a scratch disk (mem_load touches 110% of
    /// RAM) and no zram, none otherwise. zram is off unless asked for;
    /// `auto` zram is half the guest RAM (uncompressed).
    pub fn decide(
        scratch: SizeChoice,
        swap: SizeChoice,
        zram: SizeChoice,
        iosched: Option<&str>,
        suite_runs_contest: bool,
        mem_mib: u64,
    ) -> Result<StoragePlan, ScratchDiskError> {
        let mem = mem_mib << 20;
        let scratch_bytes = match scratch {
            SizeChoice::Auto => suite_runs_contest.then_some(2 * mem + (1 << 30)),
            SizeChoice::None => None,
            SizeChoice::Bytes(b) if b < MIN_SCRATCH_BYTES => {
                return Err(ScratchDiskError::BadSize {
                    flag: "--scratch-disk",
                    value: format!("{} MiB", b >> 20),
                    why: format!("an ext4 scratch disk needs at least {} MiB", MIN_SCRATCH_BYTES >> 20),
                })
            }
            SizeChoice::Bytes(b) => Some(b),
        };
        let zram_bytes = match zram {
            SizeChoice::Auto => Some(mem / 2),
            SizeChoice::None => None,
            SizeChoice::Bytes(b) if b < MIN_ZRAM_BYTES || b > mem.saturating_mul(4) => {
                return Err(ScratchDiskError::BadSize {
                    flag: "--zram",
                    value: format!("{} MiB", b >> 20),
                    why: format!(
                        "zram swap must be between {} MiB and 4 × --mem ({} MiB): it lives in the guest's RAM",
                        MIN_ZRAM_BYTES >> 20,
                        mem.saturating_mul(4) >> 20
                    ),
                })
            }
            SizeChoice::Bytes(b) => Some(b),
        };
        let swap_bytes = match swap {
            SizeChoice::Auto => scratch_bytes.filter(|_| zram_bytes.is_none()).map(|_| mem),
            SizeChoice::None => None,
            SizeChoice::Bytes(b) if b < MIN_SWAP_BYTES => {
                return Err(ScratchDiskError::BadSize {
                    flag: "--swap",
                    value: format!("{b} bytes"),
                    why: format!("swap needs at least {} MiB", MIN_SWAP_BYTES >> 20),
                })
            }
            SizeChoice::Bytes(b) => Some(b),
        };
        if let (Some(name), None) = (iosched, scratch_bytes) {
            return Err(ScratchDiskError::IoschedWithoutDisk { name: name.to_string() });
        }
        Ok(StoragePlan { scratch_bytes, swap_bytes, zram_bytes, iosched: iosched.map(str::to_string) })
    }

    /// Whether any disk is attached.
    pub fn any(&self) -> bool {
        self.scratch_bytes.is_some() || self.swap_bytes.is_some()
    }

    /// Whether the guest sets up any storage (disks or zram).
    pub fn any_storage(&self) -> bool {
        self.any() || self.zram_bytes.is_some()
    }

    /// The guest device of the scratch disk and of the swap disk: virtio-blk
    /// names disks in the order they are attached, scratch first.
    pub fn devices(&self) -> (Option<&'static str>, Option<&'static str>) {
        let scratch = self.scratch_bytes.map(|_| "/dev/vda");
        let swap = self.swap_bytes.map(|_| if scratch.is_some() { "/dev/vdb" } else { "/dev/vda" });
        (scratch, swap)
    }

    /// The `bootbench.*` cmdline keys that tell the init what to set up.
    pub fn cmdline_keys(&self) -> Vec<(&'static str, String)> {
        let (scratch, swap) = self.devices();
        let mut keys = Vec::new();
        if let Some(d) = scratch {
            keys.push(("bootbench.scratch", d.to_string()));
            keys.push(("bootbench.scratch_fs", SCRATCH_FS.to_string()));
        }
        if let Some(d) = swap {
            keys.push(("bootbench.swap", d.to_string()));
        }
        if let Some(s) = &self.iosched {
            keys.push(("bootbench.iosched", s.clone()));
        }
        if let Some(b) = self.zram_bytes {
            keys.push(("bootbench.zram", b.to_string()));
        }
        keys
    }
}

/// A kernel config file, read once.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    path: PathBuf,
    text: String,
}

impl KernelConfig {
    /// Reads `path`.
    pub fn read(path: &Path) -> Result<KernelConfig, ScratchDiskError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ScratchDiskError::ReadConfig { path: path.to_path_buf(), source })?;
        Ok(KernelConfig { path: path.to_path_buf(), text })
    }

    /// A config from text (for tests and kernels built here).
    pub fn from_text(path: &Path, text: &str) -> KernelConfig {
        KernelConfig { path: path.to_path_buf(), text: text.to_string() }
    }

    /// `y`, `m`, or `n` (not set or absent) for `CONFIG_<option>`.
    pub fn state(&self, option: &str) -> char {
        let set = format!("CONFIG_{option}=");
        self.text.lines().find_map(|l| l.strip_prefix(&set).and_then(|v| v.chars().next())).unwrap_or('n')
    }

    /// The value of a string option (`CONFIG_<option>="text"`), unquoted.
    pub fn string(&self, option: &str) -> Option<&str> {
        let set = format!("CONFIG_{option}=");
        self.text.lines().find_map(|l| l.strip_prefix(&set)).map(|v| v.trim_matches('"'))
    }

    /// The guest's page size: mkswap must write the swap header for it.
    pub fn page_size(&self) -> u64 {
        if self.state("PPC_64K_PAGES") == 'y' {
            65536
        } else if self.state("PPC_16K_PAGES") == 'y' {
            16384
        } else {
            4096
        }
    }
}

/// Block schedulers: name, config option, module name (`none` is always
/// there).
const SCHEDULERS: &[(&str, Option<(&str, &str)>)] = &[
    ("none", None),
    ("mq-deadline", Some(("MQ_IOSCHED_DEADLINE", "mq-deadline"))),
    ("kyber", Some(("MQ_IOSCHED_KYBER", "kyber-iosched"))),
    ("bfq", Some(("IOSCHED_BFQ", "bfq"))),
];

/// What the scratch disk needs from the kernel: option, module, purpose.
/// ext4's crc32c is only a soft dependency (crypto API lookup), which the
/// module tree does not follow, and without it a metadata_csum ext4 does
/// not mount; the generic implementation loads on every CPU.
const SCRATCH_NEEDS: &[(&str, &str, &str)] = &[
    ("VIRTIO_PCI", "virtio_pci", "virtio disks"),
    ("VIRTIO_BLK", "virtio_blk", "virtio disks"),
    ("EXT4_FS", "ext4", "the ext4 scratch filesystem"),
    ("CRYPTO_CRC32C", "crc32c_generic", "ext4 metadata checksums"),
];

/// zram's compressors by `CONFIG_ZRAM_DEF_COMP` name: config option and
/// module. The crypto API finds a compressor through a modprobe request,
/// which the appliance has no modprobe to answer, so a modular one is
/// packed and loaded early like the drivers.
const ZRAM_COMPRESSORS: &[(&str, &str, &str)] = &[
    ("lzo", "CRYPTO_LZO", "lzo"),
    ("lzo-rle", "CRYPTO_LZO", "lzo-rle"),
    ("lz4", "CRYPTO_LZ4", "lz4"),
    ("lz4hc", "CRYPTO_LZ4HC", "lz4hc"),
    ("zstd", "CRYPTO_ZSTD", "zstd"),
    ("842", "CRYPTO_842", "842"),
];

/// The schedulers `config` offers, for messages.
pub fn offered_schedulers(config: &KernelConfig) -> Vec<&'static str> {
    SCHEDULERS
        .iter()
        .filter(|(_, opt)| opt.is_none_or(|(option, _)| config.state(option) != 'n'))
        .map(|(name, _)| *name)
        .collect()
}

/// What one kernel needs for the plan: modules to pack early (names; the
/// image adds their dependencies) and its page size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelStorage {
    /// Modules to load before the workloads, in this order.
    pub early_modules: Vec<String>,
    /// Guest page size in bytes.
    pub page_size: u64,
}

/// Checks the plan against a kernel's config and lists the early modules.
/// Without a config nothing can be checked: drivers are assumed built in,
/// pages 4 KiB, and the guest reports what it could not set up.
pub fn for_kernel(
    plan: &StoragePlan,
    config: Option<&KernelConfig>,
    modules_dir_known: bool,
) -> Result<KernelStorage, ScratchDiskError> {
    let Some(config) = config else {
        if plan.any_storage() {
            eprintln!(
                "run: no kernel config found: assuming virtio_blk, ext4, zram and the schedulers are built in, 4 KiB pages"
            );
        }
        return Ok(KernelStorage { early_modules: Vec::new(), page_size: 4096 });
    };
    let mut needs: Vec<(&'static str, &'static str, &'static str)> = Vec::new();
    if plan.scratch_bytes.is_some() {
        needs.extend_from_slice(SCRATCH_NEEDS);
    } else if plan.swap_bytes.is_some() {
        needs.extend(SCRATCH_NEEDS.iter().filter(|(o, _, _)| o.starts_with("VIRTIO")).copied());
    }
    if plan.zram_bytes.is_some() {
        needs.push(("ZRAM", "zram", "the zram swap (--zram)"));
        let compressor = config.string("ZRAM_DEF_COMP").unwrap_or_default();
        if let Some((_, option, module)) = ZRAM_COMPRESSORS.iter().find(|(name, _, _)| *name == compressor) {
            needs.push((option, module, "zram's compressor"));
        }
    }
    if let Some(name) = &plan.iosched {
        let offered = offered_schedulers(config).join(", ");
        match SCHEDULERS.iter().find(|(n, _)| n == name) {
            None => return Err(ScratchDiskError::UnknownScheduler { name: name.clone(), offered }),
            Some((_, None)) => {}
            Some((_, Some((option, module)))) => {
                if config.state(option) == 'n' {
                    return Err(ScratchDiskError::SchedulerNotBuilt {
                        name: name.clone(),
                        option,
                        config: config.path.clone(),
                        offered,
                    });
                }
                needs.push((option, module, "the block scheduler"));
            }
        }
    }
    let mut early_modules = Vec::new();
    for (option, module, what) in needs {
        match config.state(option) {
            'y' => {}
            'm' if modules_dir_known => early_modules.push(module.to_string()),
            'm' => return Err(ScratchDiskError::ModulesDirUnknown { module, what }),
            _ => return Err(ScratchDiskError::NotBuilt { module, option, config: config.path.clone(), what }),
        }
    }
    Ok(KernelStorage { early_modules, page_size: config.page_size() })
}

/// The disks made for one boot: files in attach order, and their record.
#[derive(Debug)]
pub struct BootDisks {
    /// Image files, scratch first.
    pub files: Vec<PathBuf>,
    /// What was made.
    pub record: HostStorage,
}

impl BootDisks {
    /// Deletes the images (they hold what the guest wrote, possibly GBs).
    pub fn remove(&self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// A one-line summary of the disks made for a boot, for progress output.
pub fn describe(r: &HostStorage) -> String {
    let disk = |d: &DiskRecord, what: &str| {
        format!("{what} {} MiB on {} (made in {:.2} s)", d.bytes >> 20, d.device, d.make_s)
    };
    let mut parts = Vec::new();
    if let Some(d) = &r.scratch {
        parts.push(disk(d, &format!("{SCRATCH_FS} scratch disk")));
    }
    if let Some(d) = &r.swap {
        parts.push(disk(d, &format!("swap ({} B pages)", r.page_size)));
    }
    if let Some(s) = &r.iosched {
        parts.push(format!("scheduler {s}"));
    }
    parts.join(", ")
}

fn version_line(program: &'static str, flag: &str) -> String {
    Command::new(program)
        .arg(flag)
        .output()
        .ok()
        .and_then(|o| {
            let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            text.lines().next().map(|l| l.trim().to_string())
        })
        .unwrap_or_default()
}

/// Creates a sparse file of `bytes` and runs `program` with `args` on it.
fn make(
    program: &'static str,
    package: &'static str,
    version_flag: &str,
    args: Vec<String>,
    path: &Path,
    bytes: u64,
    device: &str,
) -> Result<DiskRecord, ScratchDiskError> {
    let create = |source| ScratchDiskError::Create { path: path.to_path_buf(), source };
    let file = std::fs::File::create(path).map_err(create)?;
    file.set_len(bytes).map_err(create)?;
    drop(file);
    let t0 = Instant::now();
    let out = Command::new(program)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| ScratchDiskError::Spawn { program, package, source })?;
    let make_s = t0.elapsed().as_secs_f64();
    let command: Vec<String> = std::iter::once(program.to_string()).chain(args).collect();
    if !out.status.success() {
        return Err(ScratchDiskError::ToolFailed {
            command: command.join(" "),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(DiskRecord {
        device: device.to_string(),
        bytes,
        command,
        tool_version: version_line(program, version_flag),
        make_s,
    })
}

/// Makes the plan's disks in `dir` for boot `tag`: a fresh ext4 image and
/// a fresh swap image every boot, so no boot sees what an earlier one wrote.
/// The inode tables and journal are initialised here, not lazily by the
/// guest kernel's ext4lazyinit thread, which would write in the background
/// of the measurements.
pub fn make_disks(plan: &StoragePlan, page_size: u64, dir: &Path, tag: &str) -> Result<BootDisks, ScratchDiskError> {
    let (scratch_dev, swap_dev) = plan.devices();
    let mut disks = BootDisks {
        files: Vec::new(),
        record: HostStorage { iosched: plan.iosched.clone(), page_size, ..Default::default() },
    };
    if let (Some(bytes), Some(device)) = (plan.scratch_bytes, scratch_dev) {
        let path = dir.join(format!("scratch-{tag}.img"));
        let args = vec![
            "-q".into(),
            "-F".into(),
            "-t".into(),
            SCRATCH_FS.into(),
            "-L".into(),
            SCRATCH_LABEL.into(),
            "-U".into(),
            IMAGE_UUID.to_string(),
            "-E".into(),
            format!("lazy_itable_init=0,lazy_journal_init=0,hash_seed={IMAGE_UUID}"),
            path.display().to_string(),
            format!("{}k", bytes >> 10),
        ];
        disks.files.push(path.clone());
        match make("mke2fs", "e2fsprogs", "-V", args, &path, bytes, device) {
            Ok(r) => disks.record.scratch = Some(r),
            Err(e) => {
                disks.remove();
                return Err(e);
            }
        }
    }
    if let (Some(bytes), Some(device)) = (plan.swap_bytes, swap_dev) {
        let path = dir.join(format!("swap-{tag}.img"));
        let args = vec![
            "-q".into(),
            "-p".into(),
            page_size.to_string(),
            "-L".into(),
            SWAP_LABEL.into(),
            "-U".into(),
            IMAGE_UUID.to_string(),
            path.display().to_string(),
        ];
        disks.files.push(path.clone());
        match make("mkswap", "util-linux", "--version", args, &path, bytes, device) {
            Ok(r) => disks.record.swap = Some(r),
            Err(e) => {
                disks.remove();
                return Err(e);
            }
        }
    }
    Ok(disks)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN: &str = "CONFIG_MQ_IOSCHED_DEADLINE=y\nCONFIG_MQ_IOSCHED_KYBER=m\nCONFIG_IOSCHED_BFQ=m\n\
        CONFIG_VIRTIO_BLK=m\nCONFIG_VIRTIO_PCI=m\nCONFIG_EXT4_FS=m\nCONFIG_CRYPTO_CRC32C=m\n";

    fn cfg(text: &str) -> KernelConfig {
        KernelConfig::from_text(Path::new("/boot/config-test"), text)
    }

    fn plan(scratch: &str, swap: &str, iosched: Option<&str>) -> Result<StoragePlan, ScratchDiskError> {
        StoragePlan::decide(
            SizeChoice::parse("--scratch-disk", scratch)?,
            SizeChoice::parse("--swap", swap)?,
            SizeChoice::None,
            iosched,
            false,
            1024,
        )
    }

    #[test]
    fn sizes_parse() {
        let p = |s| SizeChoice::parse("--scratch-disk", s);
        assert_eq!(p("300M").unwrap(), SizeChoice::Bytes(300 << 20));
        assert_eq!(p("300").unwrap(), SizeChoice::Bytes(300 << 20));
        assert_eq!(p("4G").unwrap(), SizeChoice::Bytes(4 << 30));
        assert_eq!(p("4g").unwrap(), SizeChoice::Bytes(4 << 30));
        assert_eq!(p("2GiB").unwrap(), SizeChoice::Bytes(2 << 30));
        assert_eq!(p("1T").unwrap(), SizeChoice::Bytes(1 << 40));
        assert_eq!(p("65536K").unwrap(), SizeChoice::Bytes(64 << 20));
        assert_eq!(p("none").unwrap(), SizeChoice::None);
        assert_eq!(p("auto").unwrap(), SizeChoice::Auto);
        for bad in ["", "0", "0M", "lots", "10X", "-1G", "1.5G", "65T", "99999999999999999999G"] {
            let e = p(bad).unwrap_err().to_string();
            assert!(e.contains("--scratch-disk") && e.contains(&format!("'{bad}'")), "{bad}: {e}");
        }
    }

    #[test]
    fn auto_follows_contest_and_memory() {
        let auto = |contest, mem| {
            StoragePlan::decide(SizeChoice::Auto, SizeChoice::Auto, SizeChoice::None, None, contest, mem).unwrap()
        };
        assert_eq!(auto(false, 1024), StoragePlan::default());
        let p = auto(true, 1024);
        assert_eq!(p.scratch_bytes, Some(3 << 30));
        assert_eq!(p.swap_bytes, Some(1 << 30));
        assert_eq!(p.devices(), (Some("/dev/vda"), Some("/dev/vdb")));
        let p = plan("300M", "none", Some("bfq")).unwrap();
        assert_eq!((p.scratch_bytes, p.swap_bytes), (Some(300 << 20), None));
        let p = plan("none", "64M", None).unwrap();
        assert_eq!(p.devices(), (None, Some("/dev/vda")), "a lone swap disk is the first disk");
        let p = plan("300M", "auto", None).unwrap();
        assert_eq!(p.swap_bytes, Some(1 << 30), "auto swap is the guest RAM with a scratch disk");
    }

    #[test]
    fn bad_plans_are_refused() {
        let e = plan("none", "none", Some("bfq")).unwrap_err().to_string();
        assert!(e.contains("--iosched bfq") && e.contains("--scratch-disk"), "{e}");
        let e = plan("auto", "auto", Some("kyber")).unwrap_err().to_string();
        assert!(e.contains("no scratch disk"), "{e}");
        let e = plan("8M", "none", None).unwrap_err().to_string();
        assert!(e.contains("--scratch-disk") && e.contains("at least 32 MiB"), "{e}");
        let e = plan("none", "512K", None).unwrap_err().to_string();
        assert!(e.contains("--swap") && e.contains("at least 1 MiB"), "{e}");
    }

    #[test]
    fn cmdline_keys_describe_the_disks() {
        let p = plan("300M", "64M", Some("bfq")).unwrap();
        let keys: Vec<String> = p.cmdline_keys().iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            keys,
            [
                "bootbench.scratch=/dev/vda",
                "bootbench.scratch_fs=ext4",
                "bootbench.swap=/dev/vdb",
                "bootbench.iosched=bfq"
            ]
        );
        // The init's parser accepts every key the host writes.
        let line = keys.join(" ");
        let c = loads::suite::CmdlineConfig::parse(&line).unwrap();
        assert_eq!(c.iosched.as_deref(), Some("bfq"));
    }

    #[test]
    fn schedulers_are_checked_against_the_config() {
        let debian = cfg(DEBIAN);
        assert_eq!(offered_schedulers(&debian), ["none", "mq-deadline", "kyber", "bfq"]);
        let p = plan("300M", "none", Some("bfq")).unwrap();
        let k = for_kernel(&p, Some(&debian), true).unwrap();
        assert_eq!(k.early_modules, ["virtio_pci", "virtio_blk", "ext4", "crc32c_generic", "bfq"]);
        let p = plan("300M", "none", Some("kyber")).unwrap();
        assert_eq!(for_kernel(&p, Some(&debian), true).unwrap().early_modules.last().unwrap(), "kyber-iosched");
        for built_in in ["mq-deadline", "none"] {
            let p = plan("300M", "none", Some(built_in)).unwrap();
            assert_eq!(for_kernel(&p, Some(&debian), true).unwrap().early_modules.len(), 4, "{built_in}");
        }

        let p = plan("300M", "none", Some("cfq")).unwrap();
        let e = for_kernel(&p, Some(&debian), true).unwrap_err().to_string();
        assert!(e.contains("'cfq'") && e.contains("none, mq-deadline, kyber, bfq"), "{e}");
        let no_bfq = cfg(&DEBIAN.replace("CONFIG_IOSCHED_BFQ=m", "# CONFIG_IOSCHED_BFQ is not set"));
        let p = plan("300M", "none", Some("bfq")).unwrap();
        let e = for_kernel(&p, Some(&no_bfq), true).unwrap_err().to_string();
        assert!(
            e.contains("'bfq'") && e.contains("CONFIG_IOSCHED_BFQ") && e.contains("none, mq-deadline, kyber"),
            "{e}"
        );
        assert!(!e.contains("kyber, bfq"), "{e}");
    }

    #[test]
    fn drivers_built_in_need_no_modules_and_missing_ones_are_errors() {
        let built_in = cfg("CONFIG_VIRTIO_BLK=y\nCONFIG_VIRTIO_PCI=y\nCONFIG_EXT4_FS=y\nCONFIG_CRYPTO_CRC32C=y\n");
        let p = plan("300M", "64M", None).unwrap();
        assert!(for_kernel(&p, Some(&built_in), false).unwrap().early_modules.is_empty());
        let no_ext4 = cfg(&DEBIAN.replace("CONFIG_EXT4_FS=m", "# CONFIG_EXT4_FS is not set"));
        let e = for_kernel(&p, Some(&no_ext4), true).unwrap_err().to_string();
        assert!(e.contains("ext4") && e.contains("CONFIG_EXT4_FS") && e.contains("/boot/config-test"), "{e}");
        let e = for_kernel(&p, Some(&cfg(DEBIAN)), false).unwrap_err().to_string();
        assert!(e.contains("--modules-dir") && e.contains("virtio_pci"), "{e}");
        // A swap disk alone needs the virtio drivers, not ext4.
        let p = plan("none", "64M", None).unwrap();
        assert_eq!(for_kernel(&p, Some(&no_ext4), true).unwrap().early_modules, ["virtio_pci", "virtio_blk"]);
        // No disks, no needs.
        let p = plan("none", "none", None).unwrap();
        assert!(for_kernel(&p, Some(&no_ext4), true).unwrap().early_modules.is_empty());
    }

    #[test]
    fn zram_is_sized_from_memory_replaces_auto_swap_and_packs_its_modules() {
        let zram = |swap: &str, z: &str| {
            StoragePlan::decide(
                SizeChoice::Auto,
                SizeChoice::parse("--swap", swap)?,
                SizeChoice::parse("--zram", z)?,
                None,
                true,
                1024,
            )
        };
        let p = zram("auto", "auto").unwrap();
        assert_eq!((p.zram_bytes, p.swap_bytes), (Some(512 << 20), None), "zram instead of the swap disk");
        assert!(p.cmdline_keys().contains(&("bootbench.zram", (512u64 << 20).to_string())));
        let p = zram("64M", "256M").unwrap();
        assert_eq!((p.zram_bytes, p.swap_bytes), (Some(256 << 20), Some(64 << 20)), "both when both are asked");
        assert_eq!(zram("auto", "none").unwrap().zram_bytes, None);
        for bad in ["512K", "5G"] {
            let e = zram("auto", bad).unwrap_err().to_string();
            assert!(e.contains("--zram") && e.contains("between"), "{bad}: {e}");
        }
        let p = zram("none", "auto").unwrap();
        let debian = cfg(&format!("{DEBIAN}CONFIG_ZRAM=m\nCONFIG_ZRAM_DEF_COMP=\"lzo-rle\"\nCONFIG_CRYPTO_LZO=y\n"));
        assert!(for_kernel(&p, Some(&debian), true).unwrap().early_modules.ends_with(&["zram".to_string()]));
        let zstd = cfg(&format!("{DEBIAN}CONFIG_ZRAM=m\nCONFIG_ZRAM_DEF_COMP=\"zstd\"\nCONFIG_CRYPTO_ZSTD=m\n"));
        assert!(for_kernel(&p, Some(&zstd), true).unwrap().early_modules.ends_with(&["zram".into(), "zstd".into()]));
        let e = for_kernel(&p, Some(&cfg(DEBIAN)), true).unwrap_err().to_string();
        assert!(e.contains("CONFIG_ZRAM") && e.contains("--zram"), "{e}");
    }

    #[test]
    fn page_size_follows_the_config() {
        assert_eq!(cfg(DEBIAN).page_size(), 4096);
        assert_eq!(cfg("CONFIG_PPC_64K_PAGES=y\n").page_size(), 65536);
        assert_eq!(cfg("# CONFIG_PPC_64K_PAGES is not set\n").page_size(), 4096);
    }

    #[test]
    fn images_are_made_sparse_and_recorded() {
        if !["mke2fs", "mkswap"].iter().all(|p| Command::new(p).arg("-V").output().is_ok()) {
            panic!("missing prerequisite: mke2fs and mkswap (e2fsprogs, util-linux; run scripts/setup)");
        }
        let dir = tempfile::tempdir().unwrap();
        let p = plan("64M", "4M", None).unwrap();
        let disks = make_disks(&p, 4096, dir.path(), "t").unwrap();
        assert_eq!(disks.files.len(), 2);
        let s = disks.record.scratch.as_ref().unwrap();
        assert_eq!((s.device.as_str(), s.bytes), ("/dev/vda", 64 << 20));
        assert!(s.tool_version.starts_with("mke2fs"), "{s:?}");
        let img = std::fs::read(&disks.files[0]).unwrap();
        assert_eq!(img.len() as u64, 64 << 20);
        // ext4 superblock magic at 1024 + 0x38.
        assert_eq!(&img[1024 + 0x38..1024 + 0x3a], &[0x53, 0xef]);
        let w = disks.record.swap.as_ref().unwrap();
        assert_eq!((w.device.as_str(), w.bytes), ("/dev/vdb", 4 << 20));
        assert!(w.tool_version.contains("util-linux"), "{w:?}");
        let swap = std::fs::read(&disks.files[1]).unwrap();
        assert_eq!(&swap[4096 - 10..4096], b"SWAPSPACE2");
        disks.remove();
        assert!(!disks.files[0].exists() && !disks.files[1].exists());
    }

    #[test]
    fn tool_failure_names_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let p = plan("none", "4M", None).unwrap();
        // A page size mkswap refuses.
        let e = make_disks(&p, 3000, dir.path(), "bad").unwrap_err().to_string();
        assert!(e.contains("mkswap") && e.contains("-p 3000"), "{e}");
        assert!(!dir.path().join("swap-bad.img").exists(), "a failed image is removed");
    }
}
