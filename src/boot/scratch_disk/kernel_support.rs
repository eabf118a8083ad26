//! What a kernel offers for a storage plan: its config's drivers,
//! filesystems, block schedulers and zram compressors, which of them must be
//! packed as modules and loaded early, and its page size. It checks a plan
//! and makes no image.

use super::error::ScratchDiskError;
use super::plan::StoragePlan;
use std::path::{Path, PathBuf};

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

/// What a lab machine's scratch partition needs: the disk controllers
/// real machines and VMs have (whichever the kernel builds as modules are
/// packed: which one the machine has is not known here), ext4 and its
/// checksum. Only ext4 is required.
const LAB_SCRATCH_NEEDS: &[(&str, &str, &str)] = &[
    ("SATA_AHCI", "ahci", "SATA disks"),
    ("BLK_DEV_SD", "sd_mod", "SCSI/SATA disks"),
    ("BLK_DEV_NVME", "nvme", "NVMe disks"),
    ("VIRTIO_PCI", "virtio_pci", "virtio disks"),
    ("VIRTIO_BLK", "virtio_blk", "virtio disks"),
    ("EXT4_FS", "ext4", "the ext4 scratch partition"),
    ("CRYPTO_CRC32C", "crc32c_generic", "ext4 metadata checksums"),
];

/// The modules a lab machine's candidate loads early to find and mount its
/// scratch partition by label: every one of [`LAB_SCRATCH_NEEDS`] the
/// kernel builds as a module. A kernel without ext4 cannot mount it.
pub fn lab_scratch_modules(
    config: &KernelConfig,
    modules_dir_known: bool,
    iosched: Option<&str>,
) -> Result<Vec<String>, ScratchDiskError> {
    let mut needs: Vec<(&'static str, &'static str, &'static str)> = LAB_SCRATCH_NEEDS.to_vec();
    let mut required = vec!["EXT4_FS"];
    if let Some(wanted) = iosched {
        match SCHEDULERS.iter().find(|(name, _)| *name == wanted) {
            Some((_, Some((option, module)))) => {
                needs.push((option, module, "the block scheduler (--iosched)"));
                required.push(option);
            }
            Some((_, None)) => {}
            None => {
                return Err(ScratchDiskError::UnknownScheduler {
                    name: wanted.to_string(),
                    offered: offered_schedulers(config).join(", "),
                })
            }
        }
    }
    modules_needed(config, modules_dir_known, &needs, &required)
}

/// Every module of `needs` (option, module, purpose) the kernel builds as
/// a module; an option of `required` it does not build at all is an error.
fn modules_needed(
    config: &KernelConfig,
    modules_dir_known: bool,
    needs: &[(&'static str, &'static str, &'static str)],
    required: &[&str],
) -> Result<Vec<String>, ScratchDiskError> {
    let mut modules = Vec::new();
    for &(option, module, what) in needs {
        match config.state(option) {
            'm' if !modules_dir_known => return Err(ScratchDiskError::ModulesDirUnknown { module, what }),
            'm' => modules.push(module.to_string()),
            'n' if required.contains(&option) => {
                return Err(ScratchDiskError::NotBuilt { module, option, config: config.path.clone(), what })
            }
            _ => {}
        }
    }
    Ok(modules)
}

/// The modules a lab machine's candidate loads early to mount its userland
/// pack from the machine's pack store: the disk and ext4 ones of
/// [`LAB_SCRATCH_NEEDS`], and the loop driver the pack's file is attached
/// to. A kernel without ext4 or loop cannot mount it.
pub fn lab_pack_modules(config: &KernelConfig, modules_dir_known: bool) -> Result<Vec<String>, ScratchDiskError> {
    let mut needs = LAB_SCRATCH_NEEDS.to_vec();
    needs.push(("BLK_DEV_LOOP", "loop", "the pack's loop device"));
    modules_needed(config, modules_dir_known, &needs, &["EXT4_FS", "BLK_DEV_LOOP"])
}

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
        if plan.any_storage() || plan.pack {
            log::info!(
                "no kernel config found: assuming virtio_blk, ext4, zram and the schedulers are built in, 4 KiB pages"
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
    if plan.pack {
        for (option, module, _) in SCRATCH_NEEDS {
            if !needs.iter().any(|(o, _, _)| o == option) {
                needs.push((option, module, "the userland pack (--pack)"));
            }
        }
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
