//! Booting kernels: the initramfs and the static init it packs, the kernels
//! to boot, the plan of boots, QEMU runs with their envelopes, scratch disks
//! the upload arrangement of a run, and what an interrupt (Ctrl-C) keeps.
//! Depends on the results model, the
//! kernel cache, the suite choice, the `qemu`/`image`/`loads` crates, and
//! (for `run --serve` only) the results service; never on statistics,
//! reports, bisection or a command.

pub mod image;
pub mod init_build;
pub mod interrupt;
pub mod kernels;
pub mod options;
pub mod order;
pub mod pack_disk;
pub mod run_upload;
pub mod scratch_disk;
pub mod session;
