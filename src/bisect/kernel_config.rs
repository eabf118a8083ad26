//! Whether a built kernel can run the appliance: a bisection builds its
//! initramfs once, without modules (a module tree belongs to one kernel
//! build), so every candidate must have built in what the init needs to
//! mount its filesystems, talk on the console and run its workloads. This
//! module reads kernel `.config` text and answers that question with the
//! options that are missing; it never changes a config.
//!
//! A fuller check with the fragment to add (`bootbench kernel check` /
//! `bootbench kernel config`) belongs to the kernel module; this is the
//! minimal list a bisection cannot do without.

use qemu::Arch;
use std::collections::BTreeMap;

/// Options the init needs built in on every arch, with why.
const COMMON: &[(&str, &str)] = &[
    ("BLK_DEV_INITRD", "the appliance is an initramfs"),
    ("BINFMT_ELF", "the init is an ELF binary"),
    ("PROC_FS", "the init mounts /proc"),
    ("SYSFS", "the init mounts /sys"),
    ("DEVTMPFS", "the init mounts /dev as devtmpfs"),
    ("UNIX98_PTYS", "the init mounts /dev/pts"),
    ("TMPFS", "the workloads' work directory is a tmpfs"),
    ("TTY", "results go out on the console"),
    ("PRINTK", "panics and oopses must reach the console to be classified"),
    ("FUTEX", "the init's Rust runtime uses futexes"),
    ("SIGNALFD", "the init takes signals through a signalfd"),
];

/// Options one arch needs in addition.
fn arch_specific(arch: Arch) -> &'static [(&'static str, &'static str)] {
    match arch {
        Arch::X86_64 => &[
            ("64BIT", "the x86_64 init is a 64-bit binary"),
            ("SERIAL_8250", "the console is the 8250 serial port ttyS0"),
            ("SERIAL_8250_CONSOLE", "the kernel console must be ttyS0"),
        ],
        Arch::I386 => &[
            ("SERIAL_8250", "the console is the 8250 serial port ttyS0"),
            ("SERIAL_8250_CONSOLE", "the kernel console must be ttyS0"),
        ],
        Arch::Ppc64le => &[
            ("PPC64", "the init is a 64-bit binary"),
            ("CPU_LITTLE_ENDIAN", "the ppc64le init is little-endian"),
            ("HVC_CONSOLE", "the pseries console is hvc0"),
        ],
        Arch::Ppc64 => &[
            ("PPC64", "the init is a 64-bit binary"),
            ("CPU_BIG_ENDIAN", "the ppc64 init is big-endian"),
            ("HVC_CONSOLE", "the pseries console is hvc0"),
        ],
    }
}

/// A kernel config's option values (`y`, `m`, a number, a string), by name
/// without the `CONFIG_` prefix; options `# ... is not set` are absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelConfig {
    values: BTreeMap<String, String>,
}

impl KernelConfig {
    /// Parses `.config` text.
    pub fn parse(text: &str) -> KernelConfig {
        let values = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("CONFIG_"))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
            .collect();
        KernelConfig { values }
    }

    /// The value of `name` (without `CONFIG_`).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Whether `name` is built in.
    pub fn builtin(&self, name: &str) -> bool {
        self.get(name) == Some("y")
    }

    /// Whether the virtio-serial results port can work without modules.
    pub fn has_results_port(&self) -> bool {
        self.builtin("VIRTIO_PCI") && self.builtin("VIRTIO_CONSOLE")
    }
}

/// One missing option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// Option name with `CONFIG_`.
    pub option: String,
    /// Its value in the config (`m`, or `not set`).
    pub found: String,
    /// Why the appliance needs it.
    pub why: &'static str,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is {} ({})", self.option, self.found, self.why)
    }
}

/// The options the appliance needs on `arch` that `config` does not build
/// in; empty when the kernel can run it.
pub fn missing_for_appliance(config: &KernelConfig, arch: Arch) -> Vec<Missing> {
    COMMON
        .iter()
        .chain(arch_specific(arch))
        .filter(|(name, _)| !config.builtin(name))
        .map(|(name, why)| Missing {
            option: format!("CONFIG_{name}"),
            found: config.get(name).map(|v| format!("={v}")).unwrap_or_else(|| "not set".into()),
            why,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(arch: Arch) -> String {
        COMMON.iter().chain(arch_specific(arch)).map(|(n, _)| format!("CONFIG_{n}=y\n")).collect()
    }

    #[test]
    fn a_complete_config_passes_and_gaps_are_named() {
        for arch in [Arch::X86_64, Arch::I386, Arch::Ppc64le, Arch::Ppc64] {
            assert!(missing_for_appliance(&KernelConfig::parse(&full(arch)), arch).is_empty(), "{arch}");
        }
        let text = full(Arch::X86_64)
            .replace("CONFIG_DEVTMPFS=y", "# CONFIG_DEVTMPFS is not set")
            .replace("CONFIG_SERIAL_8250=y", "CONFIG_SERIAL_8250=m");
        let missing = missing_for_appliance(&KernelConfig::parse(&text), Arch::X86_64);
        let words: Vec<String> = missing.iter().map(|m| m.to_string()).collect();
        assert_eq!(words.len(), 2, "{words:?}");
        assert!(words[0].starts_with("CONFIG_DEVTMPFS is not set ("), "{words:?}");
        assert!(words[1].starts_with("CONFIG_SERIAL_8250 is =m ("), "{words:?}");
        // An x86_64 config is not a ppc64le one.
        assert!(!missing_for_appliance(&KernelConfig::parse(&full(Arch::X86_64)), Arch::Ppc64le).is_empty());
    }

    #[test]
    fn results_port_needs_virtio_console_and_pci_built_in() {
        let c = KernelConfig::parse("CONFIG_VIRTIO_PCI=y\nCONFIG_VIRTIO_CONSOLE=m\n");
        assert!(!c.has_results_port());
        let c = KernelConfig::parse("CONFIG_VIRTIO_PCI=y\nCONFIG_VIRTIO_CONSOLE=y\n");
        assert!(c.has_results_port());
        assert_eq!(c.get("VIRTIO_PCI"), Some("y"));
        assert_eq!(KernelConfig::parse("CONFIG_LOCALVERSION=\"-x\"\n").get("LOCALVERSION"), Some("-x"));
    }
}
