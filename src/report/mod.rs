//! Measurement reports from results: the summary table of a run, its
//! HTML page and contest's table. Depends on the results model, statistics and the
//! comparison's sample extraction; never on booting or a command.

pub mod contest;
pub mod delivery;
pub mod html;
pub mod summary_table;
