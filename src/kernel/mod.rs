//! Kernels to boot: stock Debian kernels fetched into a local cache
//! ([`fetch`]), kernels built from a source tree for the appliance
//! ([`build`], with [`config_fragment`] saying what the appliance needs and
//! [`source`] fetching Debian's kernel source), and checks of a kernel's
//! config ([`check`]); and a tree the user built, booted as it is
//! ([`tree`]). This module owns the kernel cache; it never installs
//! packages or changes the system's apt/dpkg configuration.

pub mod arch;
pub mod build;
pub mod check;
pub mod config_fragment;
pub mod defaults;
pub mod fetch;
pub mod source;
pub mod tree;

pub use arch::DebianArch;
pub use fetch::{cached, default_cache_root, fetch, FetchedKernel};
