//! bootbench's workloads, the suite runner, measurement and the result
//! schema. Linked into both the guest init and the host CLI, so every
//! workload also runs on the host (`bootbench local`).
//!
//! Modules in layers, each using only the layers below it (a `#[cfg(test)]`
//! module may use anything):
//! - `runner`: one workload's iterations, and the result document.
//! - `applets`, the applet dispatcher; `workloads`, the workload registry
//!   (names and `prepare`), which also gives the suite parser its names.
//! - The workloads, `workloads::{fork, dbench, tbench, kbuild, kernbench,
//!   sdet, sdet_applets, hackbench, contest}`: none uses another.
//! - What workloads share: `workloads::nbench` (NBENCH replay for dbench,
//!   tbench and contest), `kernel_build` (kbuild's and contest's synthetic
//!   build, SDET's source tree), `pack_build` (Linux built in the userland
//!   pack: kernbench's build and contest's `pack` foreground), `compiler`
//!   (the `cc` and `ld` applets),
//!   `file_tools` (sdet_applets' commands), `sdet_home` (both SDETs'
//!   homes), `scratch_space` (where contest's and
//!   kernbench's files live), `userland_pack` (a command chrooted into
//!   the read-only userland pack, reaped with its rusage).
//! - `workload` (the trait every workload implements), `suite`,
//!   `provenance`, `quiet`, `system_counters`.
//! - At the bottom: `schema`, `console_protocol`, `reap`, `measure`,
//!   `applet_argv` (how to exec an applet), `error_chain`, `known_loadfiles`,
//!   `fd_limit`, `guest_secrets` (where the guest finds its secrets),
//!   `lava_lines` (the console lines LAVA's `monitors` read), `lab_protocol`
//!   (what a lab machine's agent and the receiver say to each other).

pub mod applet_argv;
pub mod applets;
pub mod compiler;
pub mod console_protocol;
pub mod error_chain;
pub mod fd_limit;
pub mod file_tools;
pub mod guest_secrets;
pub mod kernel_build;
pub mod known_loadfiles;
pub mod lab_protocol;
pub mod lava_lines;
pub mod loop_device;
pub mod measure;
pub mod pack_build;
pub mod provenance;
pub mod quiet;
pub mod reap;
pub mod runner;
pub mod schema;
pub mod scratch_space;
pub mod sdet_home;
pub mod suite;
pub mod system_counters;
pub mod userland_pack;
pub mod workload;
pub mod workloads;
