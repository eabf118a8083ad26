//! The host side of the guest's scratch disk and swap (`bootbench run
//! --scratch-disk/--swap/--zram/--iosched/--disk-throttle`): the sizes, what
//! a kernel's config offers (modules to pack early, block schedulers, page
//! size), the disk images made with mke2fs and mkswap, where they are made
//! and how QEMU does their I/O (cache mode, AIO engine, throttle), the
//! cmdline keys that tell the init what to set up, and the record of it in
//! the host envelope. It boots nothing and holds no guest code (init's
//! scratch_storage does that).
//!
//! - `plan`: the size and throttle options and the plan of disks, decided
//!   before any boot, and the cmdline keys that tell the init what to set
//!   up.
//! - `kernel_support`: what a kernel's config offers for the plan (modules
//!   to pack early, block schedulers, page size).
//! - `images`: the disk images made for each boot, and their record.
//! - `io_setup`: the images' directory and QEMU's cache mode and AIO engine
//!   for them, probed once per run, and their record.
//! - `error`: the error they all report.

mod error;
mod images;
mod io_setup;
mod kernel_support;
mod plan;
#[cfg(test)]
mod tests;

pub use crate::results::storage::{DiskIoRecord, DiskRecord, HostStorage, ThrottleRecord};
pub use error::ScratchDiskError;
pub use images::{describe, make_disks, BootDisks, IMAGE_UUID, SCRATCH_LABEL, SWAP_LABEL};
pub use io_setup::{DiskIoSetup, FALLBACK_DIR};
pub use kernel_support::{
    for_kernel, lab_pack_modules, lab_scratch_modules, offered_schedulers, KernelConfig, KernelStorage,
};
pub use plan::{
    parse_disk_throttle, SizeChoice, StoragePlan, CONTEST_WORKLOAD, MAX_DISK_BYTES, MIN_SCRATCH_BYTES, MIN_SWAP_BYTES,
    MIN_ZRAM_BYTES, SCRATCH_FS,
};
