//! The options of a run of boots, shared by every command that boots
//! (`run`, `calibrate`, `overhead`, `bisect`): one flag set, so the commands
//! cannot drift apart, with the parsers of its values (memory sizes,
//! `--variant`). It derives clap's `Args` so that each command flattens the
//! same flags; nothing here runs anything.

use crate::kernel;
use anyhow::{bail, Context};
use std::path::PathBuf;

/// Default vCPUs: enough for the workloads' parallel phases, and what the
/// machine notes' timings were measured with.
pub const DEFAULT_SMP: u32 = 2;
/// Default vCPUs under `--clock icount`: with two, boots differ (most
/// likely task placement follows QEMU's turns between the vCPUs; not traced
/// further). Measured (x86_64, Debian 6.1, fork, 10 boots each): fork's
/// rate varied 0.0096% across boots at 1 vCPU and 0.35% at 2.
pub const ICOUNT_SMP: u32 = 1;

/// The vCPUs a run gets: `given`, else [`ICOUNT_SMP`] when the `clock` or
/// the `accel` asks for icount, and [`DEFAULT_SMP`] otherwise.
pub fn smp_for(given: Option<u32>, clock: &str, accel: &str) -> u32 {
    let icount = clock.starts_with("icount") || accel.starts_with("icount");
    given.unwrap_or(if icount { ICOUNT_SMP } else { DEFAULT_SMP })
}
/// Default guest memory: `auto`, [`BASE_MEM_MIB`] or what the suite's
/// kernel builds need, when more.
pub const DEFAULT_MEM: &str = "auto";
/// Guest memory of `--mem auto` when the suite needs no more, MiB.
pub const BASE_MEM_MIB: u64 = 1024;

/// Options of `bootbench run` (and of every command that boots).
#[derive(Debug, Clone, clap::Args)]
pub struct RunOptions {
    /// Kernel to boot: an image file, or a kernel tree you built (the
    /// source tree, or the build directory of `make O=DIR`): its boot
    /// image, .config and release, and the modules the run needs installed
    /// from it. Repeat for several kernels (their boots are interleaved).
    /// Default: the cached Debian kernel for --arch, fetched if missing.
    #[arg(long = "kernel", value_name = "IMAGE|TREE")]
    pub kernels: Vec<PathBuf>,
    /// Guest arch: x86_64, i386, ppc64le or ppc64 [default: the arch of a
    /// --kernel tree's .config, else x86_64].
    #[arg(long)]
    pub arch: Option<String>,
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
    /// vCPUs [default: 2, or 1 with --clock icount, where a second vCPU
    /// makes boots differ: fork's rate 0.35% across boots instead of 0.01%;
    /// the config file's machine.smp when set].
    #[arg(long)]
    pub smp: Option<u32>,
    /// Guest memory, e.g. 1G, 512M (a bare number is MiB), or auto: 1G,
    /// or what the suite's kernel builds need when that is more. A size
    /// too small for them is refused before booting. The config file's
    /// machine.mem, when set, replaces the default.
    #[arg(long, default_value = DEFAULT_MEM)]
    pub mem: String,
    /// QEMU CPU model (default: the config file's machine.cpu, else the
    /// arch profile's).
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
    /// Accelerator: auto (KVM only where it really works), kvm or tcg. The
    /// config file's machine.accel, when set, replaces the default.
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
    /// host's 127.0.0.1 is 10.0.2.2); the host also uploads each boot's
    /// envelope there. Default: the config file's upload.url.
    #[arg(long)]
    pub upload_url: Option<String>,
    /// Do not upload, even to the config file's upload.url.
    #[arg(long, conflicts_with = "upload_url")]
    pub no_upload: bool,
    /// The bearer token for --upload-url. It reaches the guest in a
    /// secrets segment of the initramfs, never on the kernel cmdline; but
    /// on this host's command line `ps` shows it: prefer
    /// --upload-token-file.
    #[arg(long, conflicts_with = "upload_token_file")]
    pub upload_token: Option<String>,
    /// Read the bearer token for --upload-url from this file (its first
    /// line; the file must not be readable by group or others). Default:
    /// the config file's upload.token_file.
    #[arg(long)]
    pub upload_token_file: Option<PathBuf>,
    /// Extra certificate authorities (PEM) the guest trusts for an https
    /// --upload-url, besides the bundled public roots: a lab's own CA.
    /// Packed in the secrets segment. Default: the config file's
    /// upload.ca_file.
    #[arg(long)]
    pub upload_ca_file: Option<PathBuf>,
    /// Boot order with several kernels: interleaved (A B A B ...),
    /// sequential (A A ... B B ...) or random (each round in a random order).
    #[arg(long, value_enum, default_value = "interleaved")]
    pub order: crate::boot::order::BootOrder,
    /// Scratch disk (ext4 on virtio-blk, mounted at /scratch in the guest):
    /// auto (on when the suite runs contest: 2 × --mem + 1 GiB, plus 40 MiB
    /// per dbench_load client), none, or a size such as 4G. A fresh sparse
    /// image is made for every boot.
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
    /// The userland pack (Debian's gcc, make, shell, coreutils and a
    /// prepared Linux tree, a read-only ext4 disk the guest finds by its
    /// serial): auto (attached when the suite runs kernbench, sdet, or
    /// contest with build or load_tools pack; built on first use and
    /// cached), none (the built-in suites then run synthetically, as on
    /// arches without a pack), or the path of a pack image.
    #[arg(long, default_value = "auto")]
    pub pack: String,
    /// Block scheduler of the scratch disk: none, mq-deadline, kyber or bfq,
    /// as the kernel config offers (a module is packed when needed).
    #[arg(long)]
    pub iosched: Option<String>,
    /// Throttle each disk (scratch and swap) to BPS bytes per second and,
    /// optionally, IOPS operations per second, so the guest has a disk of
    /// known, steady speed: e.g. 40M (40 MiB/s) or 40M,500. QEMU applies it
    /// in host time, so it cannot be combined with --clock icount.
    #[arg(long, value_name = "BPS[,IOPS]")]
    pub disk_throttle: Option<String>,
    /// The kernel cache the default kernel comes from. Not a flag: the
    /// command line fills it from `$BOOTBENCH_CACHE` or the config file's
    /// kernel.cache; `None` is [`kernel::default_cache_root`].
    #[arg(skip)]
    pub kernel_cache: Option<PathBuf>,
    /// Where the boots run: QEMU, or a lab machine.
    #[command(flatten)]
    pub lab: crate::boot::target::LabTargetArgs,
}

/// The guest memory asked for with `--mem`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemChoice {
    /// [`BASE_MEM_MIB`], or what the suite needs when that is more.
    Auto,
    /// Exactly this many MiB.
    Mib(u64),
}

impl MemChoice {
    /// Parses `auto` or a size ([`parse_mem_mib`]).
    pub fn parse(s: &str) -> anyhow::Result<MemChoice> {
        if s.trim() == "auto" {
            return Ok(MemChoice::Auto);
        }
        parse_mem_mib(s).map(MemChoice::Mib)
    }

    /// The MiB to boot with when the suite needs `need_mib` (none: no
    /// need). A size below the need is refused with the need and `why`.
    pub fn resolve(self, need_mib: Option<u64>, why: &str) -> anyhow::Result<u64> {
        match (self, need_mib) {
            (MemChoice::Auto, need) => Ok(need.map_or(BASE_MEM_MIB, |n| n.max(BASE_MEM_MIB))),
            (MemChoice::Mib(m), Some(n)) if m < n => {
                bail!("--mem {m} MiB is too small: {why} needs --mem {n}M or more (or give --mem auto)")
            }
            (MemChoice::Mib(m), _) => Ok(m),
        }
    }
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
pub(crate) fn group_label(label: &str, variant: &Variant) -> String {
    match (label.is_empty(), variant.label.is_empty()) {
        (_, true) => label.to_string(),
        (true, false) => variant.label.clone(),
        (false, false) => format!("{label}/{}", variant.label),
    }
}

impl RunOptions {
    /// The vCPUs each boot gets (see [`smp_for`]).
    pub fn smp(&self) -> u32 {
        smp_for(self.smp, &self.clock, &self.accel)
    }

    /// The kernel cache root (see [`RunOptions::kernel_cache`]).
    pub fn kernel_cache_root(&self) -> PathBuf {
        self.kernel_cache.clone().unwrap_or_else(kernel::default_cache_root)
    }
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
    fn mem_auto_takes_what_the_suite_needs_and_a_size_below_it_is_refused() {
        assert_eq!(MemChoice::parse("auto").unwrap(), MemChoice::Auto);
        assert_eq!(MemChoice::parse("2G").unwrap(), MemChoice::Mib(2048));
        assert!(MemChoice::parse("lots").is_err());
        assert_eq!(MemChoice::Auto.resolve(None, "").unwrap(), BASE_MEM_MIB);
        assert_eq!(MemChoice::Auto.resolve(Some(512), "").unwrap(), BASE_MEM_MIB, "never below the base");
        assert_eq!(MemChoice::Auto.resolve(Some(1536), "").unwrap(), 1536);
        assert_eq!(MemChoice::Mib(512).resolve(None, "").unwrap(), 512, "a size is kept when nothing needs more");
        assert_eq!(MemChoice::Mib(2048).resolve(Some(1536), "").unwrap(), 2048);
        let e = MemChoice::Mib(1024).resolve(Some(1536), "kernbench's build").unwrap_err().to_string();
        assert!(e.contains("--mem 1024 MiB is too small") && e.contains("kernbench's build needs --mem 1536M"), "{e}");
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
}
