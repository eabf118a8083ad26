//! Unattended bisection of a performance regression (or of boot failures)
//! over a kernel tree. Both ends are measured first; each step builds the
//! midpoint with the user's command and boots it with a sequential test
//! against both ends, interleaved with reference boots, adding boots only
//! while the step is unsure; the first bad commit is confirmed by measuring
//! it and its parent again. Everything is checkpointed, so a run resumes
//! after a crash or a host reboot, and a report (text, JSON, HTML) says what
//! was found and how sure it is.
//!
//! - [`sequential_test`]: the SPRT and the error budget (pure numerics).
//! - [`drift_term`]: the host's linear drift over a bisection, taken out
//!   of every comparison (pure numerics).
//! - [`state`]: the state file, the single source of truth for `--resume`.
//! - [`driver`]: the order of work and the verdicts.
//! - [`history`]: which commit next (git's own bisection order).
//! - [`lab`]: checkout, build, config check, boot (the real lab).
//! - [`kernel_config`]: what a candidate kernel must build in.
//! - [`journal`]: the state file and the event log on disk.
//! - [`report`]: text, JSON and HTML reports.
//! - [`simulate`]: synthetic histories for `bootbench bisect-sim`.
//! - [`lab_settings`]: what the lab is, as data the state keeps.
//! - [`options`]: the statistical plan as options, shared by the commands.
//! - [`changes`]: after a culprit that carries only part of the change,
//!   which sides of it to bisect for the rest, and every change found.
//! - [`session`]: a whole bisection run (`bootbench bisect`).
//! - [`git_run`]: one step for `git bisect run` (`bootbench bisect-run`).
//! - [`tree_lease`]: what runs in the tree, so a resume after a kill cleans
//!   up (git's index lock, an orphaned build); the state's exclusive lock.
//!
//! This module never runs `git bisect` itself (its verdicts live in its own
//! state) and never changes anything outside the tree it bisects and its
//! artifacts directory.

pub mod changes;
pub mod drift_term;
pub mod driver;
pub mod git_run;
pub mod history;
pub mod journal;
pub mod kernel_config;
pub mod lab;
pub mod lab_settings;
pub mod options;
pub mod report;
pub mod sequential_test;
pub mod session;
pub mod simulate;
pub mod state;
pub mod tree_lease;
