//! The host side of bootbench, as a library: the `bootbench` binary is a
//! thin CLI ([`cli`]) over these modules, and the end-to-end tests in
//! `tests/` use them directly. ARCHITECTURE.md at the repository root maps
//! them and says which way they may depend.

pub mod apt_sources;
pub mod bisect;
pub mod boot;
pub mod calibration;
pub mod cli;
pub mod compare;
pub mod group_inputs;
pub mod html_page;
pub mod interrupt;
pub mod kcidb_export;
pub mod kernel;
pub mod lab;
pub mod lava;
pub mod local;
pub mod nbench_compat;
pub mod overhead;
pub mod pack;
pub mod report;
pub mod results;
pub mod saved_upload;
pub mod service;
pub mod settings;
pub mod stats;
pub mod suite_choice;
pub mod terminal;
pub mod terminal_table;
