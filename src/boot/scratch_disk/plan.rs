//! The plan of a run's storage: the size options (`--scratch-disk`,
//! `--swap`, `--zram`, `--iosched`), the disks decided from them before any
//! boot, their guest devices and the cmdline keys that tell the init what to
//! set up. Plain decisions: it reads no kernel config and makes no image.

use super::error::ScratchDiskError;

/// The workload whose presence in the suite switches `auto` disks on.
pub const CONTEST_WORKLOAD: &str = "contest";
/// The filesystem the scratch image is made with (and the init mounts).
pub const SCRATCH_FS: &str = "ext4";
/// Smallest scratch disk: ext4 with a journal needs some room to be useful.
pub const MIN_SCRATCH_BYTES: u64 = 32 << 20;
/// Smallest swap (mkswap wants at least ten pages of the largest size).
pub const MIN_SWAP_BYTES: u64 = 1 << 20;
/// Smallest zram swap (what the init accepts as `bootbench.zram`).
pub const MIN_ZRAM_BYTES: u64 = loads::suite::MIN_ZRAM_BYTES;
/// Largest disk accepted (the images are sparse, but a typo should not
/// ask for an exabyte).
pub const MAX_DISK_BYTES: u64 = 64 << 40;

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
