//! NBENCH replay shared by `dbench` and `tbench`: the loadfile format, DOS
//! wildcards, the built-in loadfile, the per-client executors (filesystem
//! for dbench, loopback TCP for tbench) and the multi-process driver that
//! runs clients through a warmup and a timed phase.

pub mod builtin_loadfile;
pub mod client_driver;
#[cfg(test)]
pub mod completed_lines;
pub mod dos_wildcard;
pub mod fs_client;
pub mod loadfile;
pub mod params;
pub mod results;
#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
pub mod seen_syscalls;
pub mod tcp_wire;
