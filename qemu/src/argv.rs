//! QEMU's argv as a typed builder: every flag and its value are separate
//! argv elements, values are validated when they are set, and file names
//! inside QEMU option strings are escaped (`,` becomes `,,`). This module
//! builds the argv; it never spawns QEMU.

use crate::accel::Accel;
use crate::arch::ArchProfile;
use crate::cmdline::KernelCmdline;
use crate::disk_io::{DiskAio, DiskCache, DriveIo, THROTTLE_VALUE_MAX};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// Errors building a QEMU argv.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgvError {
    /// An option that may be given once was given again.
    #[error("QEMU option {option} is already set")]
    AlreadySet {
        /// The option, e.g. `-kernel`.
        option: &'static str,
    },
    /// A file QEMU must read does not exist or is not a regular file.
    #[error("{what} {path} does not exist or is not a regular file")]
    MissingFile {
        /// What the file is for, e.g. "kernel image".
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// The directory a file would be created in does not exist.
    #[error("{what} {path}: its directory does not exist")]
    MissingDir {
        /// What the file is for.
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// A path that must go inside a QEMU option string is not UTF-8.
    #[error("{what} {path} is not valid UTF-8, which QEMU option strings need")]
    NonUtf8Path {
        /// What the file is for.
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// A value QEMU would reject or misparse.
    #[error("invalid value '{value}' for QEMU option {option}: {why}")]
    InvalidValue {
        /// The option, e.g. `-smp`.
        option: &'static str,
        /// The value as given.
        value: String,
        /// What was expected.
        why: &'static str,
    },
}

/// The image format of a virtio-blk disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiskFormat {
    /// A raw image.
    Raw,
    /// A qcow2 image.
    Qcow2,
}

impl DiskFormat {
    /// QEMU's name for the format.
    pub fn name(self) -> &'static str {
        match self {
            DiskFormat::Raw => "raw",
            DiskFormat::Qcow2 => "qcow2",
        }
    }
}

/// Escapes a value for a QEMU option string (`key=value,key=value`), where a
/// literal comma is written twice.
///
/// ```
/// assert_eq!(qemu::argv::escape_option_value("/tmp/a,b"), "/tmp/a,,b");
/// ```
pub fn escape_option_value(value: &str) -> String {
    value.replace(',', ",,")
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Drive {
    path: PathBuf,
    format: DiskFormat,
    io: DriveIo,
    /// A read-only drive named by its virtio serial (`None`: a writable
    /// drive, named by probe order).
    read_only_serial: Option<String>,
}

/// The longest virtio-blk serial the guest sees whole (VIRTIO_BLK_ID_BYTES).
pub const VIRTIO_BLK_SERIAL_MAX: usize = 20;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Port {
    name: String,
    host_file: PathBuf,
}

/// A QEMU command line for one boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QemuCommand {
    program: PathBuf,
    machine: String,
    pvpanic: Option<&'static str>,
    accel: Accel,
    smp: Option<u32>,
    mem_mib: Option<u64>,
    cpu: Option<String>,
    kernel: Option<PathBuf>,
    initrd: Option<PathBuf>,
    append: Option<String>,
    ports: Vec<Port>,
    disks: Vec<Drive>,
    user_net: bool,
    extra: Vec<OsString>,
}

fn existing_file(what: &'static str, path: &Path) -> Result<PathBuf, ArgvError> {
    if path.is_file() {
        Ok(path.to_path_buf())
    } else {
        Err(ArgvError::MissingFile { what, path: path.to_path_buf() })
    }
}

fn utf8_path<'a>(what: &'static str, path: &'a Path) -> Result<&'a str, ArgvError> {
    path.to_str().ok_or_else(|| ArgvError::NonUtf8Path { what, path: path.to_path_buf() })
}

impl QemuCommand {
    /// A command for `profile`'s binary and machine, under TCG until
    /// [`QemuCommand::accel`] says otherwise.
    ///
    /// Every command has no display, no default devices (no NIC, VGA or
    /// drives QEMU would otherwise add), the first serial port (or pseries'
    /// hypervisor console) on stdout, `-no-reboot`, and
    /// `-action panic=exit-failure`, so a guest that panics makes QEMU exit.
    ///
    /// ```
    /// # use qemu::{Arch, QemuCommand};
    /// let cmd = QemuCommand::new(&Arch::Ppc64le.profile());
    /// let argv = cmd.argv();
    /// assert_eq!(cmd.program().to_str(), Some("qemu-system-ppc64"));
    /// assert_eq!(argv[..2], ["-machine", "pseries"]);
    /// assert!(argv.iter().any(|a| a == "-no-reboot"));
    /// ```
    pub fn new(profile: &ArchProfile) -> QemuCommand {
        QemuCommand {
            program: profile.qemu_binary.clone(),
            machine: profile.machine.clone(),
            pvpanic: profile.pvpanic,
            accel: Accel::Tcg,
            smp: None,
            mem_mib: None,
            cpu: None,
            kernel: None,
            initrd: None,
            append: None,
            ports: Vec::new(),
            disks: Vec::new(),
            user_net: false,
            extra: Vec::new(),
        }
    }

    /// Sets the accelerator: `-accel kvm`, `-accel tcg`, or for icount
    /// `-accel tcg -icount shift=N,sleep=off`.
    ///
    /// ```
    /// # use qemu::{Accel, Arch, QemuCommand};
    /// let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
    /// cmd.accel(Accel::Icount { shift: 0 });
    /// let argv = cmd.argv();
    /// let i = argv.iter().position(|a| a == "-icount").unwrap();
    /// assert_eq!(argv[i + 1], "shift=0,sleep=off");
    /// ```
    pub fn accel(&mut self, accel: Accel) -> &mut Self {
        self.accel = accel;
        self
    }

    /// Sets the number of vCPUs (`-smp N`), 1..=1024.
    ///
    /// ```
    /// # use qemu::{Arch, QemuCommand};
    /// let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
    /// cmd.smp(2).unwrap();
    /// assert!(cmd.argv().windows(2).any(|w| w == ["-smp", "2"]));
    /// assert!(QemuCommand::new(&Arch::X86_64.profile()).smp(0).is_err());
    /// ```
    pub fn smp(&mut self, cpus: u32) -> Result<&mut Self, ArgvError> {
        if !(1..=1024).contains(&cpus) {
            return Err(ArgvError::InvalidValue { option: "-smp", value: cpus.to_string(), why: "must be 1..=1024" });
        }
        set_once(&mut self.smp, cpus, "-smp")?;
        Ok(self)
    }

    /// Sets guest memory in MiB (`-m NM`), at least 32.
    ///
    /// ```
    /// # use qemu::{Arch, QemuCommand};
    /// let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
    /// cmd.memory_mib(512).unwrap();
    /// assert!(cmd.argv().windows(2).any(|w| w == ["-m", "512M"]));
    /// ```
    pub fn memory_mib(&mut self, mib: u64) -> Result<&mut Self, ArgvError> {
        if mib < 32 {
            return Err(ArgvError::InvalidValue {
                option: "-m",
                value: mib.to_string(),
                why: "must be at least 32 MiB",
            });
        }
        set_once(&mut self.mem_mib, mib, "-m")?;
        Ok(self)
    }

    /// Sets the CPU model (`-cpu MODEL`), e.g. `max` or `Skylake-Client,-hle`.
    ///
    /// ```
    /// # use qemu::{Arch, QemuCommand};
    /// let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
    /// cmd.cpu("max").unwrap();
    /// assert!(cmd.argv().windows(2).any(|w| w == ["-cpu", "max"]));
    /// assert!(QemuCommand::new(&Arch::X86_64.profile()).cpu("max -smp 4").is_err());
    /// ```
    pub fn cpu(&mut self, model: &str) -> Result<&mut Self, ArgvError> {
        if model.is_empty() || model.starts_with('-') || !model.chars().all(|c| c.is_ascii_graphic()) {
            return Err(ArgvError::InvalidValue {
                option: "-cpu",
                value: model.to_string(),
                why: "must be a non-empty model name without spaces, not starting with '-'",
            });
        }
        set_once(&mut self.cpu, model.to_string(), "-cpu")?;
        Ok(self)
    }

    /// Sets the kernel image (`-kernel PATH`); it must exist.
    ///
    /// ```
    /// # use qemu::{Arch, QemuCommand};
    /// let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
    /// assert!(cmd.kernel("/nonexistent/vmlinuz".as_ref()).is_err());
    /// ```
    pub fn kernel(&mut self, path: &Path) -> Result<&mut Self, ArgvError> {
        let p = existing_file("kernel image", path)?;
        set_once(&mut self.kernel, p, "-kernel")?;
        Ok(self)
    }

    /// Sets the initramfs (`-initrd PATH`); it must exist.
    ///
    /// ```
    /// # use qemu::{Arch, QemuCommand};
    /// let dir = tempfile::tempdir().unwrap();
    /// let initrd = dir.path().join("initramfs,1.cpio.gz");
    /// std::fs::write(&initrd, b"").unwrap();
    /// let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
    /// cmd.initrd(&initrd).unwrap();
    /// assert!(cmd.argv().windows(2).any(|w| w[0] == "-initrd" && w[1] == initrd.as_os_str()));
    /// ```
    pub fn initrd(&mut self, path: &Path) -> Result<&mut Self, ArgvError> {
        let p = existing_file("initramfs", path)?;
        set_once(&mut self.initrd, p, "-initrd")?;
        Ok(self)
    }

    /// Sets the kernel command line (`-append TEXT`, one argv element).
    ///
    /// ```
    /// # use qemu::{Arch, QemuCommand};
    /// let profile = Arch::X86_64.profile();
    /// let mut cmd = QemuCommand::new(&profile);
    /// cmd.append(&profile.base_cmdline().unwrap()).unwrap();
    /// assert!(cmd.argv().windows(2).any(|w| w == ["-append", "console=ttyS0 panic=-1"]));
    /// ```
    pub fn append(&mut self, cmdline: &KernelCmdline) -> Result<&mut Self, ArgvError> {
        set_once(&mut self.append, cmdline.as_str().to_string(), "-append")?;
        Ok(self)
    }

    /// Adds a virtio-serial port named `name` whose guest output QEMU writes
    /// to `host_file` (created or truncated by QEMU; its directory must
    /// exist). The guest finds it by name under /sys/class/virtio-ports.
    ///
    /// ```
    /// # use qemu::{Arch, QemuCommand};
    /// let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
    /// cmd.results_port("org.bootbench.results", "/tmp/a,b.out".as_ref()).unwrap();
    /// let argv = cmd.argv();
    /// assert!(argv.windows(2).any(|w| w == ["-chardev", "file,id=port0,path=/tmp/a,,b.out"]));
    /// assert!(argv.windows(2).any(|w| w == ["-device", "virtserialport,bus=vser0.0,chardev=port0,name=org.bootbench.results"]));
    /// ```
    pub fn results_port(&mut self, name: &str, host_file: &Path) -> Result<&mut Self, ArgvError> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) {
            return Err(ArgvError::InvalidValue {
                option: "virtserialport name",
                value: name.to_string(),
                why: "must be non-empty ASCII letters, digits, '.', '_' or '-'",
            });
        }
        if self.ports.iter().any(|p| p.name == name) {
            return Err(ArgvError::InvalidValue {
                option: "virtserialport name",
                value: name.to_string(),
                why: "already used",
            });
        }
        utf8_path("results port file", host_file)?;
        let dir = host_file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !dir.is_dir() {
            return Err(ArgvError::MissingDir { what: "results port file", path: host_file.to_path_buf() });
        }
        self.ports.push(Port { name: name.to_string(), host_file: host_file.to_path_buf() });
        Ok(self)
    }

    /// Adds a virtio-blk disk backed by the image at `path` (which must
    /// exist), with `io`'s cache mode, AIO engine and throttle. `aio=native`
    /// needs `cache=none`, and a throttle's values must be 1..=10^15 (what
    /// QEMU accepts).
    ///
    /// ```
    /// # use qemu::{argv::DiskFormat, disk_io::{DiskAio, DiskCache, DiskThrottle, DriveIo}, Arch, QemuCommand};
    /// let dir = tempfile::tempdir().unwrap();
    /// let img = dir.path().join("scratch.img");
    /// std::fs::write(&img, vec![0u8; 4096]).unwrap();
    /// let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
    /// let throttle = Some(DiskThrottle { bps: 40 << 20, iops: Some(500) });
    /// cmd.drive_virtio_blk(&img, DiskFormat::Raw, &DriveIo { cache: DiskCache::None, aio: DiskAio::IoUring, throttle })
    ///     .unwrap();
    /// let want = format!(
    ///     "file={},format=raw,if=none,id=disk0,cache=none,aio=io_uring,throttling.bps-total=41943040,throttling.iops-total=500",
    ///     img.display()
    /// );
    /// assert!(cmd.argv().windows(2).any(|w| w[0] == "-drive" && w[1] == want.as_str()));
    /// ```
    pub fn drive_virtio_blk(&mut self, path: &Path, format: DiskFormat, io: &DriveIo) -> Result<&mut Self, ArgvError> {
        let p = existing_file("disk image", path)?;
        utf8_path("disk image", &p)?;
        if io.aio == DiskAio::Native && io.cache != DiskCache::None {
            return Err(ArgvError::InvalidValue {
                option: "-drive aio",
                value: format!("aio=native,cache={}", io.cache.name()),
                why: "aio=native needs cache=none (O_DIRECT)",
            });
        }
        if let Some(t) = io.throttle {
            let in_range = |v: u64| (1..=THROTTLE_VALUE_MAX).contains(&v);
            if !in_range(t.bps) {
                return Err(ArgvError::InvalidValue {
                    option: "-drive throttling.bps-total",
                    value: t.bps.to_string(),
                    why: "must be 1..=10^15 bytes per second",
                });
            }
            if let Some(iops) = t.iops.filter(|v| !in_range(*v)) {
                return Err(ArgvError::InvalidValue {
                    option: "-drive throttling.iops-total",
                    value: iops.to_string(),
                    why: "must be 1..=10^15 operations per second",
                });
            }
        }
        self.disks.push(Drive { path: p, format, io: *io, read_only_serial: None });
        Ok(self)
    }

    /// Adds a read-only virtio-blk disk that the guest finds by its
    /// `serial` (`/sys/block/*/serial`), not by probe order: `-drive
    /// if=none,readonly=on` and a `virtio-blk-pci` device carrying the
    /// serial. Such disks come after every [`Self::drive_virtio_blk`] disk
    /// on the command line, so the writable disks keep their names.
    ///
    /// ```
    /// # use qemu::{argv::DiskFormat, disk_io::DriveIo, Arch, QemuCommand};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let img = dir.path().join("pack.ext4");
    /// # std::fs::write(&img, b"").unwrap();
    /// let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
    /// cmd.drive_virtio_blk_read_only(&img, DiskFormat::Raw, &DriveIo::default(), "bootbench-pack").unwrap();
    /// let argv = cmd.argv();
    /// assert!(argv.windows(2).any(|w| w[0] == "-device" && w[1] == "virtio-blk-pci,drive=ro0,serial=bootbench-pack"));
    /// ```
    pub fn drive_virtio_blk_read_only(
        &mut self,
        path: &Path,
        format: DiskFormat,
        io: &DriveIo,
        serial: &str,
    ) -> Result<&mut Self, ArgvError> {
        let serial_ok = !serial.is_empty()
            && serial.len() <= VIRTIO_BLK_SERIAL_MAX
            && serial.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c));
        if !serial_ok {
            return Err(ArgvError::InvalidValue {
                option: "-device virtio-blk-pci serial",
                value: serial.to_string(),
                why: "1 to 20 letters, digits, '_' or '-' (the guest reads at most 20 bytes)",
            });
        }
        if self.disks.iter().any(|d| d.read_only_serial.as_deref() == Some(serial)) {
            return Err(ArgvError::InvalidValue {
                option: "-device virtio-blk-pci serial",
                value: serial.to_string(),
                why: "another read-only disk already has this serial",
            });
        }
        // Checked as a writable drive is, then marked.
        self.drive_virtio_blk(path, format, io)?;
        if let Some(d) = self.disks.last_mut() {
            d.read_only_serial = Some(serial.to_string());
        }
        Ok(self)
    }

    /// Adds a virtio-net NIC on QEMU's user-mode network: the guest is
    /// 10.0.2.15 and reaches the host's 127.0.0.1 at 10.0.2.2.
    ///
    /// ```
    /// # use qemu::{Arch, QemuCommand};
    /// let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
    /// cmd.netdev_user();
    /// assert!(cmd.argv().windows(2).any(|w| w == ["-netdev", "user,id=net0"]));
    /// ```
    pub fn netdev_user(&mut self) -> &mut Self {
        self.user_net = true;
        self
    }

    /// Appends arguments verbatim, after everything else (an escape hatch;
    /// they are not validated).
    pub fn extra_args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.extra.extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// The QEMU binary.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Replaces the QEMU binary (e.g. with a test double).
    pub fn set_program(&mut self, program: &Path) -> &mut Self {
        self.program = program.to_path_buf();
        self
    }

    /// The arguments, without the program.
    pub fn argv(&self) -> Vec<OsString> {
        let mut a = Args::default();
        a.pair("-machine", &self.machine);
        match self.accel {
            Accel::Kvm => a.pair("-accel", "kvm"),
            Accel::Tcg => a.pair("-accel", "tcg"),
            Accel::Icount { shift } => {
                a.pair("-accel", "tcg");
                a.pair("-icount", format!("shift={shift},sleep=off"));
                a.pair("-seed", crate::accel::ICOUNT_QEMU_SEED.to_string());
            }
        }
        if let Some(cpu) = &self.cpu {
            a.pair("-cpu", cpu);
        }
        if let Some(n) = self.smp {
            a.pair("-smp", n.to_string());
        }
        if let Some(m) = self.mem_mib {
            a.pair("-m", format!("{m}M"));
        }
        // -nodefaults drops the default NIC, VGA, floppy and CD-ROM; the
        // console is then named explicitly. On pseries `-serial` becomes the
        // spapr-vty that the kernel calls hvc0.
        a.one("-nodefaults");
        a.pair("-display", "none");
        a.pair("-serial", "stdio");
        a.pair("-monitor", "none");
        a.one("-no-reboot");
        a.pair("-action", "panic=exit-failure");
        if let Some(dev) = self.pvpanic {
            a.pair("-device", dev);
        }
        if let Some(k) = &self.kernel {
            a.pair("-kernel", k);
        }
        if let Some(i) = &self.initrd {
            a.pair("-initrd", i);
        }
        if let Some(c) = &self.append {
            a.pair("-append", c);
        }
        if !self.ports.is_empty() {
            a.pair("-device", "virtio-serial-pci,id=vser0");
            for (i, p) in self.ports.iter().enumerate() {
                // Checked to be UTF-8 when the port was added.
                let path = escape_option_value(&p.host_file.to_string_lossy());
                a.pair("-chardev", format!("file,id=port{i},path={path}"));
                a.pair("-device", format!("virtserialport,bus=vser0.0,chardev=port{i},name={}", p.name));
            }
        }
        // The writable disks first, in order (the guest names them by probe
        // order: /dev/vda, /dev/vdb ...), then the read-only ones. Each is
        // a `-device` of its own, so PCI slots (and the probe order) follow
        // this order: `-drive if=virtio` devices are made after every
        // `-device`, which would put a read-only disk first.
        let writable = self.disks.iter().filter(|d| d.read_only_serial.is_none());
        let read_only = self.disks.iter().filter_map(|d| d.read_only_serial.as_deref().map(|s| (d, s)));
        let drives = writable
            .enumerate()
            .map(|(n, d)| (d, format!("disk{n}"), None))
            .chain(read_only.enumerate().map(|(n, (d, s))| (d, format!("ro{n}"), Some(s))));
        for (d, id, serial) in drives {
            // Checked to be UTF-8 when the disk was added.
            let path = escape_option_value(&d.path.to_string_lossy());
            let attach = match serial {
                None => format!("if=none,id={id}"),
                Some(_) => format!("if=none,id={id},readonly=on"),
            };
            let mut drive = format!(
                "file={path},format={},{attach},cache={},aio={}",
                d.format.name(),
                d.io.cache.name(),
                d.io.aio.name()
            );
            if let Some(t) = d.io.throttle {
                drive.push_str(&format!(",throttling.bps-total={}", t.bps));
                if let Some(iops) = t.iops {
                    drive.push_str(&format!(",throttling.iops-total={iops}"));
                }
            }
            a.pair("-drive", drive);
            a.pair(
                "-device",
                match serial {
                    None => format!("virtio-blk-pci,drive={id}"),
                    Some(serial) => format!("virtio-blk-pci,drive={id},serial={serial}"),
                },
            );
        }
        if self.user_net {
            a.pair("-netdev", "user,id=net0");
            a.pair("-device", "virtio-net-pci,netdev=net0");
        }
        a.0.extend(self.extra.iter().cloned());
        a.0
    }

    /// A `std::process::Command` with the program and arguments set.
    pub fn command(&self) -> std::process::Command {
        let mut c = std::process::Command::new(&self.program);
        c.args(self.argv());
        c
    }

    /// The program and arguments as one shell-readable line, for logs (not
    /// for execution).
    pub fn display_line(&self) -> String {
        std::iter::once(self.program.as_os_str().to_os_string())
            .chain(self.argv())
            .map(|a| shell_word(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn set_once<T>(slot: &mut Option<T>, value: T, option: &'static str) -> Result<(), ArgvError> {
    if slot.is_some() {
        return Err(ArgvError::AlreadySet { option });
    }
    *slot = Some(value);
    Ok(())
}

fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn one(&mut self, flag: &str) {
        self.0.push(flag.into());
    }

    fn pair(&mut self, flag: &str, value: impl AsRef<OsStr>) {
        self.0.push(flag.into());
        self.0.push(value.as_ref().to_os_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;

    fn strings(cmd: &QemuCommand) -> Vec<String> {
        cmd.argv().into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn every_flag_and_value_is_its_own_element() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("vmlinux");
        let i = dir.path().join("initrd");
        std::fs::write(&k, b"k").unwrap();
        std::fs::write(&i, b"i").unwrap();
        let profile = Arch::Ppc64le.profile();
        let mut cmd = QemuCommand::new(&profile);
        cmd.smp(2).unwrap().memory_mib(1024).unwrap().kernel(&k).unwrap().initrd(&i).unwrap();
        cmd.append(&profile.base_cmdline().unwrap()).unwrap();
        let argv = strings(&cmd);
        for a in &argv {
            if a.starts_with('-') {
                assert!(!a.contains(' '), "flag with a space: {a:?}");
            }
        }
        assert_eq!(argv[..4], ["-machine", "pseries", "-accel", "tcg"]);
        assert!(argv.windows(2).any(|w| w == ["-append", "console=hvc0 panic=-1"]));
        assert!(argv.windows(2).any(|w| w == ["-m", "1024M"]));
        assert!(!argv.iter().any(|a| a.contains("pvpanic")), "pseries has no pvpanic device");
        let x86 = strings(&QemuCommand::new(&Arch::X86_64.profile()));
        assert!(x86.windows(2).any(|w| w == ["-device", "pvpanic"]));
        assert!(x86.windows(2).any(|w| w == ["-action", "panic=exit-failure"]));
    }

    #[test]
    fn a_read_only_disk_comes_after_the_writable_ones_and_carries_its_serial() {
        let dir = tempfile::tempdir().unwrap();
        let [pack, scratch, swap] = ["pack.ext4", "scratch.img", "swap.img"].map(|n| dir.path().join(n));
        for f in [&pack, &scratch, &swap] {
            std::fs::write(f, b"").unwrap();
        }
        let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
        let io = DriveIo::default();
        // Added first, still after the writable disks on the command line.
        cmd.drive_virtio_blk_read_only(&pack, DiskFormat::Raw, &io, "bootbench-pack").unwrap();
        cmd.drive_virtio_blk(&scratch, DiskFormat::Raw, &io).unwrap();
        cmd.drive_virtio_blk(&swap, DiskFormat::Raw, &io).unwrap();
        let argv = strings(&cmd);
        let drives: Vec<&String> = argv.windows(2).filter(|w| w[0] == "-drive").map(|w| &w[1]).collect();
        assert_eq!(drives.len(), 3, "{argv:?}");
        assert!(
            drives[0].starts_with(&format!("file={},format=raw,if=none,id=disk0,", scratch.display())),
            "{drives:?}"
        );
        assert!(drives[1].starts_with(&format!("file={},format=raw,if=none,id=disk1,", swap.display())), "{drives:?}");
        assert!(
            drives[2].starts_with(&format!("file={},format=raw,if=none,id=ro0,readonly=on,", pack.display())),
            "{drives:?}"
        );
        let devices: Vec<&String> =
            argv.windows(2).filter(|w| w[0] == "-device" && w[1].starts_with("virtio-blk")).map(|w| &w[1]).collect();
        assert_eq!(
            devices,
            [
                "virtio-blk-pci,drive=disk0",
                "virtio-blk-pci,drive=disk1",
                "virtio-blk-pci,drive=ro0,serial=bootbench-pack"
            ]
        );
    }

    #[test]
    fn a_serial_the_guest_cannot_read_whole_or_a_second_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("pack.ext4");
        std::fs::write(&img, b"").unwrap();
        let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
        let io = DriveIo::default();
        for bad in ["", "a,b", "twenty-one-characters", "sp ace"] {
            let e = cmd.drive_virtio_blk_read_only(&img, DiskFormat::Raw, &io, bad).unwrap_err().to_string();
            assert!(e.contains("serial") && e.contains(&format!("'{bad}'")), "{e}");
        }
        cmd.drive_virtio_blk_read_only(&img, DiskFormat::Raw, &io, "twenty-characters-ok").unwrap();
        let e = cmd.drive_virtio_blk_read_only(&img, DiskFormat::Raw, &io, "twenty-characters-ok").unwrap_err();
        assert!(e.to_string().contains("already has this serial"), "{e}");
    }

    #[test]
    fn accel_flags() {
        let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
        assert!(strings(&cmd).windows(2).any(|w| w == ["-accel", "tcg"]));
        cmd.accel(Accel::Kvm);
        let a = strings(&cmd);
        assert!(a.windows(2).any(|w| w == ["-accel", "kvm"]) && !a.contains(&"-icount".to_string()));
        cmd.accel(Accel::Icount { shift: 3 });
        let a = strings(&cmd);
        assert!(a.windows(4).any(|w| w == ["-accel", "tcg", "-icount", "shift=3,sleep=off"]), "{a:?}");
        assert!(a.windows(2).any(|w| w == ["-seed", "1"]), "icount boots draw fixed random numbers: {a:?}");
    }

    #[test]
    fn commas_are_escaped_only_inside_option_strings() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("a,b.img");
        std::fs::write(&img, b"").unwrap();
        let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
        cmd.drive_virtio_blk(&img, DiskFormat::Qcow2, &DriveIo::default()).unwrap();
        cmd.kernel(&img).unwrap();
        let a = strings(&cmd);
        let drive =
            format!("file={}/a,,b.img,format=qcow2,if=none,id=disk0,cache=writeback,aio=threads", dir.path().display());
        assert!(a.windows(2).any(|w| w[0] == "-drive" && w[1] == drive), "{a:?}");
        // -kernel is not an option string: QEMU takes it verbatim.
        assert!(a.windows(2).any(|w| w[0] == "-kernel" && w[1] == img.to_str().unwrap()));
    }

    #[test]
    fn validation() {
        let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
        cmd.smp(1).unwrap();
        assert_eq!(cmd.smp(2).unwrap_err(), ArgvError::AlreadySet { option: "-smp" });
        assert!(cmd.memory_mib(8).is_err());
        assert!(cmd.cpu("").is_err());
        assert!(cmd.cpu("-smp").is_err());
        assert!(matches!(cmd.kernel(Path::new("/nonexistent")), Err(ArgvError::MissingFile { .. })));
        assert!(matches!(cmd.results_port("r", Path::new("/nonexistent/dir/out")), Err(ArgvError::MissingDir { .. })));
        assert!(cmd.results_port("bad name", Path::new("/tmp/x")).is_err());
        cmd.results_port("a", Path::new("/tmp/x")).unwrap();
        assert!(cmd.results_port("a", Path::new("/tmp/y")).is_err());
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(cmd.kernel(dir.path()), Err(ArgvError::MissingFile { .. })), "a directory is not a kernel");
    }

    fn drives(cmd: &QemuCommand) -> Vec<String> {
        let a = strings(cmd);
        a.windows(2).filter(|w| w[0] == "-drive").map(|w| w[1].clone()).collect()
    }

    #[test]
    fn drives_carry_cache_aio_and_a_throttle_only_when_asked() {
        use crate::disk_io::DiskThrottle;
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("d.img");
        std::fs::write(&img, b"").unwrap();
        let file = format!("file={}", img.display());
        let none = |aio, throttle| DriveIo { cache: DiskCache::None, aio, throttle };

        let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
        cmd.drive_virtio_blk(&img, DiskFormat::Raw, &none(DiskAio::IoUring, None)).unwrap();
        cmd.drive_virtio_blk(&img, DiskFormat::Raw, &none(DiskAio::Native, None)).unwrap();
        cmd.drive_virtio_blk(&img, DiskFormat::Raw, &none(DiskAio::Threads, None)).unwrap();
        assert_eq!(
            drives(&cmd),
            [
                format!("{file},format=raw,if=none,id=disk0,cache=none,aio=io_uring"),
                format!("{file},format=raw,if=none,id=disk1,cache=none,aio=native"),
                format!("{file},format=raw,if=none,id=disk2,cache=none,aio=threads"),
            ]
        );
        assert!(drives(&cmd).iter().all(|d| !d.contains("throttling")), "no throttle unless asked");

        let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
        let bps_only = Some(DiskThrottle { bps: 40 << 20, iops: None });
        cmd.drive_virtio_blk(&img, DiskFormat::Raw, &none(DiskAio::IoUring, bps_only)).unwrap();
        let both = Some(DiskThrottle { bps: 1 << 20, iops: Some(300) });
        cmd.drive_virtio_blk(&img, DiskFormat::Raw, &none(DiskAio::Native, both)).unwrap();
        assert_eq!(
            drives(&cmd),
            [
                format!("{file},format=raw,if=none,id=disk0,cache=none,aio=io_uring,throttling.bps-total=41943040"),
                format!(
                    "{file},format=raw,if=none,id=disk1,cache=none,aio=native,throttling.bps-total=1048576,throttling.iops-total=300"
                ),
            ]
        );
    }

    #[test]
    fn drives_qemu_would_refuse_are_refused_here() {
        use crate::disk_io::DiskThrottle;
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("d.img");
        std::fs::write(&img, b"").unwrap();
        let mut cmd = QemuCommand::new(&Arch::X86_64.profile());
        let native_writeback = DriveIo { cache: DiskCache::Writeback, aio: DiskAio::Native, throttle: None };
        let e = cmd.drive_virtio_blk(&img, DiskFormat::Raw, &native_writeback).unwrap_err();
        assert!(e.to_string().contains("aio=native needs cache=none"), "{e}");
        for (bps, iops, option) in [
            (0, None, "throttling.bps-total"),
            (THROTTLE_VALUE_MAX + 1, None, "throttling.bps-total"),
            (1, Some(0), "throttling.iops-total"),
            (1, Some(u64::MAX), "throttling.iops-total"),
        ] {
            let io = DriveIo { throttle: Some(DiskThrottle { bps, iops }), ..DriveIo::default() };
            let e = cmd.drive_virtio_blk(&img, DiskFormat::Raw, &io).unwrap_err().to_string();
            assert!(e.contains(option), "{bps} {iops:?}: {e}");
        }
        assert!(drives(&cmd).is_empty(), "nothing refused was added");
        let max =
            DriveIo { throttle: Some(DiskThrottle { bps: THROTTLE_VALUE_MAX, iops: Some(1) }), ..DriveIo::default() };
        cmd.drive_virtio_blk(&img, DiskFormat::Raw, &max).unwrap();
    }

    #[test]
    fn display_line_quotes_for_humans() {
        let profile = Arch::X86_64.profile();
        let mut cmd = QemuCommand::new(&profile);
        cmd.append(&profile.base_cmdline().unwrap()).unwrap();
        let line = cmd.display_line();
        assert!(line.starts_with("qemu-system-x86_64 -machine q35 "), "{line}");
        assert!(line.contains("-append 'console=ttyS0 panic=-1'"), "{line}");
    }
}
