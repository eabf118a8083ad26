//! bootbench's workloads, the suite runner, measurement and the result
//! schema. Linked into both the guest init and the host CLI, so every
//! workload also runs on the host (`bootbench local`).

pub mod applets;
pub mod compiler;
pub mod console_protocol;
pub mod file_tools;
pub mod measure;
pub mod provenance;
pub mod quiet;
pub mod reap;
pub mod runner;
pub mod schema;
pub mod suite;
pub mod system_counters;
pub mod workloads;
