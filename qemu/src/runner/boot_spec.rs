//! What one boot is: the spec (arch profile, accelerator, machine size,
//! kernel, initramfs, cmdline, disks, results port), its time limits, the
//! QEMU command built from it, and the errors that keep a boot from
//! starting. It must not spawn or watch a process.

use crate::accel::Accel;
use crate::arch::ArchProfile;
use crate::argv::{ArgvError, DiskFormat, QemuCommand};
use crate::cmdline::{CmdlineError, KernelCmdline};
use crate::disk_io::DriveIo;
use crate::kernel_image::{check_kernel, KernelImageError};
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// The name of the virtio-serial port that carries the result stream; the
/// init finds it under /sys/class/virtio-ports/*/name.
pub const RESULTS_PORT_NAME: &str = "org.bootbench.results";

/// The cmdline key that tells the init which virtio port to write results
/// to (parsed by `loads::suite`); [`BootSpec::qemu_command`] adds it when
/// the spec has a results port.
pub const PORT_CMDLINE_KEY: &str = "bootbench.port";

/// Errors that keep a boot from happening at all. Everything that happens
/// once QEMU runs (panic, hang, QEMU failing) is a [`crate::outcome::Classification`].
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The QEMU binary is not installed.
    #[error("QEMU binary '{}' not found; run scripts/setup to install QEMU", binary.display())]
    QemuNotFound {
        /// The binary looked for.
        binary: PathBuf,
    },
    /// QEMU could not be started for another reason.
    #[error("cannot start QEMU binary '{}'", binary.display())]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// The error from exec.
        #[source]
        source: io::Error,
    },
    /// The QEMU argv is invalid (e.g. a missing initramfs).
    #[error(transparent)]
    Argv(#[from] ArgvError),
    /// The kernel cmdline is invalid.
    #[error(transparent)]
    Cmdline(#[from] CmdlineError),
    /// The kernel image is unreadable or for another arch.
    #[error(transparent)]
    Kernel(#[from] KernelImageError),
    /// The cmdline would send the console somewhere the host does not read.
    #[error("kernel cmdline '{cmdline}' does not set console={console}, so the host would see no console output")]
    NoConsole {
        /// The cmdline.
        cmdline: String,
        /// The console the profile reads.
        console: &'static str,
    },
    /// Waiting for QEMU failed.
    #[error("cannot wait for QEMU (pid {pid})")]
    Wait {
        /// QEMU's pid.
        pid: u32,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// `qemu --version` failed.
    #[error("'{} --version' failed: {detail}", binary.display())]
    Version {
        /// The binary.
        binary: PathBuf,
        /// Its stderr or exit status.
        detail: String,
    },
}

/// The limits of one boot.
///
/// The defaults suit TCG on a slow host: `boot` 60 s (a Debian kernel
/// reaches the init in about 4 s under TCG), `silence` 300 s (so the init
/// must print something, e.g. a progress event, at least every 5 minutes),
/// `total` 30 minutes, `after_panic` 5 s, `after_poweroff` 30 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From spawning QEMU until the init's `hello` event.
    pub boot: Duration,
    /// Without any console byte.
    pub silence: Duration,
    /// The whole boot, from spawning QEMU.
    pub total: Duration,
    /// For QEMU to exit by itself after a kernel panic line (with `panic=-1`
    /// and `-no-reboot` it normally does at once).
    pub after_panic: Duration,
    /// For QEMU to exit after the init's `poweroff` event.
    pub after_poweroff: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            boot: Duration::from_secs(60),
            silence: Duration::from_secs(300),
            total: Duration::from_secs(30 * 60),
            after_panic: Duration::from_secs(5),
            after_poweroff: Duration::from_secs(30),
        }
    }
}

/// Everything needed to boot a kernel once.
#[derive(Debug, Clone, PartialEq)]
pub struct BootSpec {
    /// The arch profile; its `qemu_binary` may be overridden.
    pub profile: ArchProfile,
    /// The accelerator.
    pub accel: Accel,
    /// vCPUs.
    pub smp: u32,
    /// Guest memory in MiB.
    pub mem_mib: u64,
    /// The CPU model; `None` uses [`Accel::default_cpu`].
    pub cpu: Option<String>,
    /// The kernel image.
    pub kernel: PathBuf,
    /// The initramfs.
    pub initrd: PathBuf,
    /// The kernel command line; it must set `console=` to the profile's
    /// console. With a results port, `bootbench.port=` is added to it.
    pub cmdline: KernelCmdline,
    /// A host file for the virtio results port ([`RESULTS_PORT_NAME`]); it is
    /// removed before the boot and read after it.
    pub results_port: Option<PathBuf>,
    /// virtio-blk disks, in order (the first is /dev/vda).
    pub disks: Vec<(PathBuf, DiskFormat)>,
    /// Read-only virtio-blk disks the guest finds by serial (the userland
    /// pack), as (image, serial); attached after [`Self::disks`].
    pub read_only_disks: Vec<(PathBuf, String)>,
    /// How QEMU does every disk's I/O (cache mode, AIO engine, throttle).
    pub disk_io: DriveIo,
    /// Whether to give the guest a virtio-net NIC on QEMU's user network.
    pub user_net: bool,
    /// The limits.
    pub timeouts: Timeouts,
    /// Extra QEMU arguments, appended verbatim.
    pub extra_args: Vec<OsString>,
}

impl BootSpec {
    /// A spec with the defaults: TCG, 2 vCPUs, the profile's memory and CPU
    /// model, [`ArchProfile::base_cmdline`], no results port, no disks (and
    /// QEMU's default [`DriveIo`] for any added), no network, default
    /// [`Timeouts`].
    ///
    /// ```
    /// # use qemu::{Arch, BootSpec};
    /// let mut spec = BootSpec::new(Arch::X86_64.profile(), "/boot/vmlinuz", "/tmp/initramfs.cpio.gz").unwrap();
    /// spec.cmdline.extend_raw("quiet").unwrap();
    /// assert_eq!(spec.cmdline.as_str(), "console=ttyS0 panic=-1 quiet");
    /// ```
    pub fn new(
        profile: ArchProfile,
        kernel: impl Into<PathBuf>,
        initrd: impl Into<PathBuf>,
    ) -> Result<BootSpec, CmdlineError> {
        Ok(BootSpec {
            accel: Accel::Tcg,
            smp: 2,
            mem_mib: profile.default_mem_mib,
            cpu: None,
            kernel: kernel.into(),
            initrd: initrd.into(),
            cmdline: profile.base_cmdline()?,
            results_port: None,
            disks: Vec::new(),
            read_only_disks: Vec::new(),
            disk_io: DriveIo::default(),
            user_net: false,
            timeouts: Timeouts::default(),
            extra_args: Vec::new(),
            profile,
        })
    }

    /// The QEMU command this spec runs, after checking that the kernel
    /// image suits the arch and that the cmdline names the console. With a
    /// results port, the cmdline passed to the kernel also gets
    /// `bootbench.port=org.bootbench.results` (an error if it names another
    /// port).
    pub fn qemu_command(&self) -> Result<QemuCommand, RunnerError> {
        if self.cmdline.value("console") != Some(self.profile.console) {
            return Err(RunnerError::NoConsole { cmdline: self.cmdline.to_string(), console: self.profile.console });
        }
        check_kernel(&self.kernel, self.profile.arch)?;
        let mut cmd = QemuCommand::new(&self.profile);
        cmd.accel(self.accel).smp(self.smp)?.memory_mib(self.mem_mib)?;
        if let Some(cpu) = self.cpu.as_deref().or(self.accel.default_cpu(&self.profile)) {
            cmd.cpu(cpu)?;
        }
        let mut cmdline = self.cmdline.clone();
        if matches!(self.accel, Accel::Icount { .. }) {
            for (key, value) in crate::accel::ICOUNT_DERANDOMISE {
                if cmdline.contains(key) {
                    continue;
                }
                match value {
                    Some(v) => cmdline.push(key, v)?,
                    None => cmdline.push_flag(key)?,
                };
            }
        }
        if let Some(port) = &self.results_port {
            cmd.results_port(RESULTS_PORT_NAME, port)?;
            if cmdline.value(PORT_CMDLINE_KEY) != Some(RESULTS_PORT_NAME) {
                cmdline.push(PORT_CMDLINE_KEY, RESULTS_PORT_NAME)?;
            }
        }
        cmd.kernel(&self.kernel)?.initrd(&self.initrd)?.append(&cmdline)?;
        for (path, format) in &self.disks {
            cmd.drive_virtio_blk(path, *format, &self.disk_io)?;
        }
        // Read, never written, and read again from the guest's page cache
        // after the first build: QEMU's default I/O (the host's page cache
        // may hold it; no O_DIRECT needed where the image lives), never
        // throttled (the throttle is the scratch disks').
        let read_io = DriveIo::default();
        for (path, serial) in &self.read_only_disks {
            cmd.drive_virtio_blk_read_only(path, DiskFormat::Raw, &read_io, serial)?;
        }
        if self.user_net {
            cmd.netdev_user();
        }
        cmd.extra_args(&self.extra_args);
        Ok(cmd)
    }
}
