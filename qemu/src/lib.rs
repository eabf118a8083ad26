//! bootbench's QEMU side: per-arch profiles, accelerator choice, the disks'
//! cache mode, AIO engine and throttle, typed builders for the kernel
//! command line and QEMU's argv, and the runner that boots a kernel, watches
//! its console and classifies the boot (ok, panic, oops, hang, QEMU failure,
//! incomplete).
//!
//! ```no_run
//! use qemu::{boot, Arch, BootSpec};
//! let profile = Arch::X86_64.profile();
//! let mut spec = BootSpec::new(profile, "/tmp/vmlinuz", "/tmp/initramfs.cpio.gz")?;
//! spec.accel = qemu::detect(Arch::X86_64).accel;
//! spec.cmdline.extend_raw("quiet")?;
//! let outcome = boot(&spec)?;
//! println!("{} in {:?}", outcome.classification, outcome.timings.wall);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod accel;
pub mod arch;
pub mod argv;
pub mod cmdline;
pub mod console_scan;
pub mod disk_io;
pub mod kernel_image;
pub mod outcome;
pub mod runner;

pub use accel::{detect, Accel, AccelChoice, AccelRequest, Clock};
pub use arch::{Arch, ArchProfile};
pub use argv::QemuCommand;
pub use cmdline::KernelCmdline;
pub use console_scan::GuestProgress;
pub use outcome::{BootOutcome, Classification, HangKind, Timings};
pub use runner::{
    boot, boot_observed, machine_facts, probe_disk_io, qemu_version, BootSpec, MachineFacts, MachineQueryError,
    RunnerError, Timeouts, PORT_CMDLINE_KEY, RESULTS_PORT_NAME,
};
