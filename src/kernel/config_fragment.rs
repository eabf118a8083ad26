//! The kernel configuration the appliance needs, per guest arch: one table,
//! [`REQUIREMENTS`], that `bootbench kernel config` prints as a Kconfig
//! fragment, `bootbench kernel build` merges into the arch's defconfig, and
//! `bootbench kernel check` compares a kernel's config against. Pure data and
//! text rendering; it reads no files and runs nothing.

use qemu::Arch;
use std::fmt::Write as _;

/// How strongly the appliance needs an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Must be `=y`: the appliance cannot boot or report without it, and a
    /// module cannot help (it would be needed before the init could load it).
    BuiltIn,
    /// `=y`, or `=m` with the module packed into the image
    /// (`bootbench image --modules NAME`; `bootbench run` packs the
    /// results port's modules itself). The fragment asks for `=y`.
    BuiltInOrModule,
    /// Wanted, not fatal when missing: results are still produced, but a part
    /// of the suite or of its reporting is weaker.
    Recommended,
}

impl Need {
    /// Short name used in tables.
    pub fn name(self) -> &'static str {
        match self {
            Need::BuiltIn => "built-in",
            Need::BuiltInOrModule => "built-in or module",
            Need::Recommended => "recommended",
        }
    }
}

/// Which arches a requirement applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arches {
    /// Every arch.
    All,
    /// x86_64 and i386.
    X86,
    /// ppc64 and ppc64le (pseries).
    Power,
    /// One arch.
    Only(Arch),
}

impl Arches {
    /// Whether `arch` is in the set.
    pub fn contains(self, arch: Arch) -> bool {
        match self {
            Arches::All => true,
            Arches::X86 => matches!(arch, Arch::X86_64 | Arch::I386),
            Arches::Power => matches!(arch, Arch::Ppc64 | Arch::Ppc64le),
            Arches::Only(only) => only == arch,
        }
    }
}

/// One Kconfig option the appliance needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirement {
    /// The option without the `CONFIG_` prefix.
    pub option: &'static str,
    /// How strongly it is needed.
    pub need: Need,
    /// Where it applies.
    pub arches: Arches,
    /// The module a `=m` build of it produces, for [`Need::BuiltInOrModule`].
    pub module: Option<&'static str>,
    /// Why the appliance needs it, for the fragment's comments and `check`.
    pub why: &'static str,
}

const fn req(option: &'static str, need: Need, arches: Arches, why: &'static str) -> Requirement {
    Requirement { option, need, arches, module: None, why }
}

const fn module(option: &'static str, module: &'static str, why: &'static str) -> Requirement {
    Requirement { option, need: Need::BuiltInOrModule, arches: Arches::All, module: Some(module), why }
}

use Arches::{All, Power, X86};
use Need::{BuiltIn, Recommended};

/// Every option the appliance needs, in the order the fragment lists them.
/// Dependencies come before the options that depend on them, so a merge
/// into a sparse defconfig keeps them all.
pub const REQUIREMENTS: &[Requirement] = &[
    // What the kernel is built for; `check` reports a config for another arch.
    req("X86_64", BuiltIn, Arches::Only(Arch::X86_64), "the guest arch is 64-bit x86"),
    req("X86_32", BuiltIn, Arches::Only(Arch::I386), "the guest arch is 32-bit x86 (qemu-system-i386)"),
    req("PPC64", BuiltIn, Power, "the guest is a 64-bit POWER pseries machine"),
    req("CPU_BIG_ENDIAN", BuiltIn, Arches::Only(Arch::Ppc64), "the guest arch is big-endian ppc64"),
    req("CPU_LITTLE_ENDIAN", BuiltIn, Arches::Only(Arch::Ppc64le), "the guest arch is little-endian ppc64le"),
    req("PPC_PSERIES", BuiltIn, Power, "QEMU boots POWER guests as -M pseries"),
    // Booting the appliance.
    req("BLK_DEV_INITRD", BuiltIn, All, "the appliance is an initramfs"),
    req("RD_GZIP", BuiltIn, All, "bootbench run packs the initramfs with gzip for a kernel without RD_ZSTD"),
    req("RD_ZSTD", Recommended, All, "zstd initramfs, the default: the guest starts faster than with gzip"),
    req("BINFMT_ELF", BuiltIn, All, "/init is a static ELF executable"),
    req("PRINTK", BuiltIn, All, "panics and oopses must reach the console to classify a failed boot"),
    req("TTY", BuiltIn, All, "the init writes its results to /dev/console"),
    req("SERIAL_8250", BuiltIn, X86, "the x86 console is the 8250 UART (console=ttyS0)"),
    req("SERIAL_8250_CONSOLE", BuiltIn, X86, "kernel messages and results on ttyS0"),
    req("HVC_CONSOLE", BuiltIn, Power, "the pseries console is the hypervisor console (console=hvc0)"),
    // What PID 1 sets up.
    req("PROC_FS", BuiltIn, All, "the init mounts /proc for provenance and rusage of children"),
    req("SYSFS", BuiltIn, All, "the init mounts /sys for CPU and vulnerability provenance"),
    req("DEVTMPFS", BuiltIn, All, "the init mounts /dev as devtmpfs"),
    req("UNIX98_PTYS", BuiltIn, All, "the init mounts devpts on /dev/pts"),
    req("SHMEM", BuiltIn, All, "tmpfs must be the full shmem filesystem, with size limits and swap"),
    req("TMPFS", BuiltIn, All, "/run and the workloads' /work are tmpfs"),
    req("FUTEX", BuiltIn, All, "Rust's std locks, condition variables and thread parking"),
    req("SIGNALFD", BuiltIn, All, "PID 1 takes its signals through signalfd"),
    req("EPOLL", BuiltIn, All, "waiting on many descriptors (messaging and network workloads)"),
    req("TIMERFD", BuiltIn, All, "timers as descriptors in workloads' event loops"),
    req("EVENTFD", BuiltIn, All, "event notification between workload processes"),
    req("POSIX_TIMERS", BuiltIn, All, "per-process CPU clocks and timers"),
    req("MULTIUSER", BuiltIn, All, "uid/gid system calls (file ownership in the work directory)"),
    req("FILE_LOCKING", BuiltIn, All, "dbench's lock operations and flock/fcntl locks"),
    req("NET", BuiltIn, All, "sockets"),
    req("UNIX", BuiltIn, All, "Unix-domain sockets (messaging workloads)"),
    req("INET", BuiltIn, All, "tbench runs over loopback TCP; results can be uploaded over HTTP"),
    req("SMP", Recommended, All, "parallel phases of the suite run on 2 vCPUs by default"),
    req("HIGHMEM", Recommended, Arches::Only(Arch::I386), "a 32-bit guest uses memory above 896 MiB"),
    // Storage and devices.
    req("BLOCK", BuiltIn, All, "block devices: the scratch disk and swap"),
    req("SWAP", BuiltIn, All, "memory loads push pages to swap"),
    req("PCI", BuiltIn, All, "QEMU's virtio devices sit on PCI (q35, pc and pseries)"),
    req("VIRTIO_MENU", BuiltIn, All, "virtio drivers"),
    module("VIRTIO_PCI", "virtio_pci", "transport of every virtio device"),
    module("VIRTIO_CONSOLE", "virtio_console", "the virtio-serial results port"),
    module("VIRTIO_BLK", "virtio_blk", "the scratch disk for block-layer loads"),
    module("EXT4_FS", "ext4", "the scratch disk's file system"),
    req("NETDEVICES", BuiltIn, All, "network devices"),
    req("NET_CORE", BuiltIn, All, "network device core"),
    module("VIRTIO_NET", "virtio_net", "guest networking to the host (result upload)"),
    req("IP_PNP", Recommended, All, "ip=dhcp on the kernel command line"),
    req("IP_PNP_DHCP", Recommended, All, "ip=dhcp on the kernel command line"),
];

/// The requirements that apply to `arch`, in table order.
pub fn requirements(arch: Arch) -> impl Iterator<Item = &'static Requirement> {
    REQUIREMENTS.iter().filter(move |r| r.arches.contains(arch))
}

/// The Kconfig fragment for `arch`: every requirement as `CONFIG_X=y`
/// (modules are asked for built in, so a kernel built with it needs no
/// modules at all), each preceded by a comment saying why.
pub fn fragment(arch: Arch) -> String {
    let mut out = format!(
        "# bootbench appliance options for {arch}; merge into the arch's defconfig\n\
         # (bootbench kernel build does), then run `make olddefconfig`.\n"
    );
    for r in requirements(arch) {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "# {} ({})\nCONFIG_{}=y", r.why, r.need.name(), r.option);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn options_are_unique_per_arch_and_well_formed() {
        for arch in Arch::ALL {
            let mut seen = HashSet::new();
            for r in requirements(arch) {
                assert!(seen.insert(r.option), "{arch}: {} twice", r.option);
                assert!(!r.option.starts_with("CONFIG_"), "{}", r.option);
                assert!(r.option.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
                assert!(!r.why.is_empty());
                assert_eq!(r.module.is_some(), r.need == Need::BuiltInOrModule, "{}", r.option);
            }
        }
    }

    #[test]
    fn consoles_match_the_qemu_profiles() {
        let x86: Vec<&str> = requirements(Arch::I386).map(|r| r.option).collect();
        assert!(x86.contains(&"SERIAL_8250_CONSOLE") && !x86.contains(&"HVC_CONSOLE"));
        let power: Vec<&str> = requirements(Arch::Ppc64).map(|r| r.option).collect();
        assert!(power.contains(&"HVC_CONSOLE") && !power.contains(&"SERIAL_8250_CONSOLE"));
        assert_eq!(Arch::Ppc64.profile().console, "hvc0");
        assert_eq!(Arch::I386.profile().console, "ttyS0");
    }

    #[test]
    fn endianness_is_pinned_per_power_arch() {
        let be = fragment(Arch::Ppc64);
        assert!(be.contains("\nCONFIG_CPU_BIG_ENDIAN=y\n") && !be.contains("LITTLE_ENDIAN"));
        let le = fragment(Arch::Ppc64le);
        assert!(le.contains("\nCONFIG_CPU_LITTLE_ENDIAN=y\n") && !le.contains("BIG_ENDIAN"));
    }

    #[test]
    fn fragment_asks_for_everything_built_in() {
        let text = fragment(Arch::Ppc64);
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.starts_with("CONFIG_") && line.ends_with("=y"), "{line}");
        }
        for wanted in
            ["VIRTIO_CONSOLE", "VIRTIO_NET", "VIRTIO_BLK", "VIRTIO_PCI", "DEVTMPFS", "TMPFS", "EXT4_FS", "SWAP"]
        {
            assert!(text.contains(&format!("\nCONFIG_{wanted}=y\n")), "{wanted}");
        }
        // Each option is preceded by the comment that explains it.
        assert!(text.contains("# the virtio-serial results port (built-in or module)\nCONFIG_VIRTIO_CONSOLE=y\n"));
    }
}
