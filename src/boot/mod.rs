//! Booting kernels: the initramfs and the static init it packs, the kernels
//! to boot, the plan of boots, QEMU runs with their envelopes, scratch disks
//! and the upload arrangement of a run. Depends on the results model, the
//! kernel cache, the suite choice, the userland pack (which one a run gets:
//! `crate::pack::choice`), the interrupt handling, the `qemu`/`image`/`loads`
//! crates, and (for `run --serve` only) the results service; never on
//! statistics, reports, bisection or a command.

pub mod host_facts;
pub mod image;
pub mod init_build;
pub mod kernels;
pub mod lab_target;
pub mod options;
pub mod order;
pub mod prepared_image;
pub mod redaction;
pub mod run_upload;
pub mod scratch_disk;
pub mod secrets_segment;
pub mod session;
pub mod target;
