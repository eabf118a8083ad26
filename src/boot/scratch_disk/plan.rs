//! The plan of a run's storage: the size options (`--scratch-disk`,
//! `--swap`, `--zram`, `--iosched`, `--disk-throttle`), the disks decided
//! from them before any boot, their guest devices and the cmdline keys that
//! tell the init what to set up. Plain decisions: it reads no kernel config,
//! probes nothing and makes no image.

use super::error::ScratchDiskError;
use qemu::disk_io::{DiskThrottle, THROTTLE_VALUE_MAX};

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
        let bytes = match parse_binary_size(t) {
            Ok(b) => b,
            Err(SizeSyntax::Suffix) => return Err(bad(
                "expected auto, none or a size such as 300M, 4G (K, M, G, T are powers of 1024; a bare number is MiB)",
            )),
            Err(SizeSyntax::Number) => return Err(bad("expected auto, none or a size such as 300M, 4G")),
            Err(SizeSyntax::Overflow) => return Err(bad("larger than 64T")),
        };
        if bytes > MAX_DISK_BYTES {
            return Err(bad("larger than 64T"));
        }
        if bytes == 0 {
            return Err(bad("must be more than 0 (use none for no disk)"));
        }
        Ok(SizeChoice::Bytes(bytes))
    }
}

/// What is wrong with a size's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SizeSyntax {
    /// A suffix other than K, M, G, T (or KiB ... TiB).
    Suffix,
    /// No number before the suffix.
    Number,
    /// The number or its bytes do not fit in 64 bits.
    Overflow,
}

/// Bytes of a size written as digits and an optional binary suffix K, M, G
/// or T (also KiB ... TiB, any case); a bare number is MiB, as with `--mem`.
/// The one spelling of sizes that every storage option shares.
fn parse_binary_size(t: &str) -> Result<u64, SizeSyntax> {
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let shift = match suffix.to_ascii_uppercase().as_str() {
        "" | "M" | "MIB" => 20,
        "K" | "KIB" => 10,
        "G" | "GIB" => 30,
        "T" | "TIB" => 40,
        _ => return Err(SizeSyntax::Suffix),
    };
    if num.is_empty() {
        return Err(SizeSyntax::Number);
    }
    // Only digits are left, so a number that does not parse is too long.
    let n: u64 = num.parse().map_err(|_| SizeSyntax::Overflow)?;
    n.checked_mul(1 << shift).ok_or(SizeSyntax::Overflow)
}

/// What `--disk-throttle BPS[,IOPS]` expects, for its errors.
const THROTTLE_SYNTAX: &str = "expected BPS[,IOPS]: bytes per second as a size such as 40M (K, M, G, T are powers \
    of 1024; a bare number is MiB), then optionally a whole number of I/O operations per second, e.g. 40M,500";

/// Parses `--disk-throttle BPS[,IOPS]`: BPS a size in the spelling of the
/// other storage options (`40M` is 40 MiB/s; a bare number is MiB/s), IOPS
/// a whole number. Both must be more than 0 and at most QEMU's limit of
/// 10^15.
///
/// ```
/// use bootbench::boot::scratch_disk::parse_disk_throttle;
/// let t = parse_disk_throttle("40M,500").unwrap();
/// assert_eq!((t.bps, t.iops), (40 << 20, Some(500)));
/// assert_eq!(parse_disk_throttle("1G").unwrap().iops, None);
/// assert!(parse_disk_throttle("0").is_err());
/// ```
pub fn parse_disk_throttle(value: &str) -> Result<DiskThrottle, ScratchDiskError> {
    let bad = |why: String| ScratchDiskError::BadSize { flag: "--disk-throttle", value: value.to_string(), why };
    let t = value.trim();
    let (bps, iops) = match t.split_once(',') {
        Some((b, i)) => (b.trim(), Some(i.trim())),
        None => (t, None),
    };
    let bps = match parse_binary_size(bps) {
        Ok(b) if b > THROTTLE_VALUE_MAX => Err(SizeSyntax::Overflow),
        other => other,
    };
    let bps = match bps {
        Ok(0) => return Err(bad("BPS must be more than 0 (leave --disk-throttle out for an unthrottled disk)".into())),
        Ok(b) => b,
        Err(SizeSyntax::Overflow) => {
            return Err(bad(format!(
                "BPS is more than {THROTTLE_VALUE_MAX} bytes per second, the most a throttle takes"
            )))
        }
        Err(_) => return Err(bad(THROTTLE_SYNTAX.into())),
    };
    let iops = match iops {
        None => None,
        Some(i) if i.is_empty() || !i.bytes().all(|c| c.is_ascii_digit()) => return Err(bad(THROTTLE_SYNTAX.into())),
        Some(i) => match i.parse::<u64>() {
            Ok(0) => return Err(bad("IOPS must be more than 0 (give BPS alone to limit bytes only)".into())),
            Ok(n) if n <= THROTTLE_VALUE_MAX => Some(n),
            _ => {
                return Err(bad(format!(
                    "IOPS is more than {THROTTLE_VALUE_MAX} operations per second, the most a throttle takes"
                )))
            }
        },
    };
    Ok(DiskThrottle { bps, iops })
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
    /// The throttle of every disk (`--disk-throttle`), applied by QEMU in
    /// host time; see [`StoragePlan::with_throttle`].
    pub throttle: Option<DiskThrottle>,
    /// Whether the run attaches the read-only userland pack (its disk needs
    /// what a scratch disk's does from the kernel: virtio, ext4).
    pub pack: bool,
}

impl StoragePlan {
    /// Decides the disks: `auto` scratch is on when the suite runs
    /// [`CONTEST_WORKLOAD`] (`contest_room` is then the room its
    /// dbench_load clients need), sized 2 × guest RAM + 1 GiB (room for
    /// io_load's and read_load's RAM-sized files and the trees) plus that
    /// room; `auto` swap is as large as the
    /// guest RAM when there is a scratch disk (mem_load touches 110% of
    /// RAM) and no zram, none otherwise. zram is off unless asked for;
    /// `auto` zram is half the guest RAM (uncompressed).
    pub fn decide(
        scratch: SizeChoice,
        swap: SizeChoice,
        zram: SizeChoice,
        iosched: Option<&str>,
        contest_room: Option<u64>,
        mem_mib: u64,
    ) -> Result<StoragePlan, ScratchDiskError> {
        let mem = mem_mib << 20;
        let scratch_bytes = match scratch {
            SizeChoice::Auto => contest_room.map(|room| (2 * mem + (1 << 30)).saturating_add(room)),
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
        Ok(StoragePlan {
            scratch_bytes,
            swap_bytes,
            zram_bytes,
            iosched: iosched.map(str::to_string),
            throttle: None,
            pack: false,
        })
    }

    /// Adds `--disk-throttle VALUE` (see [`parse_disk_throttle`]) to the
    /// plan. `icount` names the option that put the guest on an
    /// instruction-counted clock (`--clock icount`), if any: QEMU throttles
    /// in host time, so under icount the guest would not see a steady
    /// speed, and the two are refused together. A throttle without a disk
    /// to throttle is refused too.
    pub fn with_throttle(
        mut self,
        value: Option<&str>,
        icount: Option<&'static str>,
    ) -> Result<StoragePlan, ScratchDiskError> {
        let Some(value) = value else {
            return Ok(self);
        };
        let throttle = parse_disk_throttle(value)?;
        if let Some(clock) = icount {
            return Err(ScratchDiskError::ThrottleUnderIcount { value: value.to_string(), clock });
        }
        if !self.any() {
            return Err(ScratchDiskError::ThrottleWithoutDisk { value: value.to_string() });
        }
        self.throttle = Some(throttle);
        Ok(self)
    }

    /// Notes whether the run attaches the userland pack.
    pub fn with_pack(mut self, pack: bool) -> StoragePlan {
        self.pack = pack;
        self
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
