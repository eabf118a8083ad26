//! The host side of bootbench, as a library: the `bootbench` binary is a
//! thin CLI over these modules, and the end-to-end tests in `tests/` use
//! them directly.

pub mod bisect;
pub mod bisect_cmd;
pub mod boot_order;
pub mod calibrate_cmd;
pub mod calibration;
pub mod compare;
pub mod compare_cmd;
pub mod contest_cmd;
pub mod contest_report;
pub mod image_cmd;
pub mod init_build;
pub mod kernel;
pub mod kernel_cmd;
pub mod local_cmd;
pub mod nbench_compat_cmd;
pub mod overhead_cmd;
pub mod results_file;
pub mod run_cmd;
pub mod run_receiver;
pub mod schema_migration;
pub mod scratch_disk;
pub mod serve_cmd;
pub mod stats;
pub mod store;
pub mod summary_table;
pub mod upload_cmd;
