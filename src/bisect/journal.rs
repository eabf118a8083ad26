//! Where a bisection leaves its traces: the state file, written after every
//! boot and every verdict, and the event log (`log.jsonl`, one JSON object a
//! line) that records every build, boot and verdict with its evidence, each
//! also told on stderr. This module owns those two files; it does not
//! decide anything.

use super::state::{BisectState, StateError};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Errors writing the journal.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The state could not be saved.
    #[error(transparent)]
    State(#[from] StateError),
    /// The event log could not be written.
    #[error("cannot append to the bisection log {path}")]
    Log {
        /// The log file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// `build`, `boot`, `verdict`, `ends`, `phase`, `resume`, `outcome`, `note`,
    /// `appliance_failure` (bootbench's own init panicked in a boot).
    pub kind: &'static str,
    /// The commit it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// One line for people.
    pub message: String,
    /// The evidence, as data.
    pub data: serde_json::Value,
}

impl Event {
    /// An event about `commit`.
    pub fn new(kind: &'static str, commit: Option<&str>, message: impl Into<String>, data: serde_json::Value) -> Event {
        Event { kind, commit: commit.map(str::to_string), message: message.into(), data }
    }
}

/// Receives the state after every change and every event.
pub trait Journal {
    /// Persists the state (called after every boot, build and verdict).
    fn checkpoint(&mut self, state: &mut BisectState) -> Result<(), JournalError>;
    /// Records an event.
    fn event(&mut self, event: Event) -> Result<(), JournalError>;
}

/// The on-disk journal of a real bisection.
#[derive(Debug, Clone)]
pub struct FileJournal {
    state_path: PathBuf,
    log_path: PathBuf,
    quiet: bool,
    /// Steps done of about how many, on a terminal (made at the first
    /// checkpoint, when the range is known).
    bar: Option<indicatif::ProgressBar>,
}

impl FileJournal {
    /// A journal writing `state_path` and appending to `log_path`; events
    /// are also printed on stderr unless `quiet`.
    pub fn new(state_path: &Path, log_path: &Path, quiet: bool) -> FileJournal {
        FileJournal { state_path: state_path.into(), log_path: log_path.into(), quiet, bar: None }
    }

    /// The event log's path.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Updates the progress bar: tests with a verdict of about how many
    /// (the plan's, else ⌈log2(range)⌉), boots so far, the last verdict,
    /// the commits left; the time left from the tests done so far.
    fn show_progress(&mut self, state: &BisectState) {
        let planned = match state.budget.planned_tests {
            0 => crate::terminal::progress::bisection_steps(state.range_commits as usize),
            n => u64::from(n),
        };
        let bar = self.bar.get_or_insert_with(|| crate::terminal::steps(planned, "bisect"));
        let done = state.tests.iter().filter(|t| t.verdict.is_some()).count() as u64;
        bar.set_length(planned.max(done + 1));
        bar.set_position(done);
        bar.set_message(crate::terminal::progress::bisect_status(
            state.boots.len(),
            state.tests.iter().rev().find_map(|t| t.verdict.map(|v| (t.commit.as_str(), v.to_string()))),
            state.tests.last().and_then(|t| t.remaining),
        ));
    }
}

impl Drop for FileJournal {
    fn drop(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

#[derive(Serialize)]
struct LogLine<'a> {
    at: String,
    #[serde(flatten)]
    event: &'a Event,
}

impl Journal for FileJournal {
    fn checkpoint(&mut self, state: &mut BisectState) -> Result<(), JournalError> {
        if !self.quiet {
            self.show_progress(state);
        }
        // An interrupt waits for the save, so it leaves no temp file behind.
        Ok(crate::interrupt::critical(|| state.save(&self.state_path))?)
    }

    fn event(&mut self, event: Event) -> Result<(), JournalError> {
        // An interrupt waits for the line, and no line follows its own.
        crate::interrupt::critical(|| self.event_unguarded(event))
    }
}

impl FileJournal {
    /// [`Journal::event`] without waiting for an interrupt in progress: for
    /// the interrupt's own hook, which runs while writes are held (see
    /// `interrupt::on_interrupt`).
    pub fn event_unguarded(&mut self, event: Event) -> Result<(), JournalError> {
        if !self.quiet {
            log::info!("{}", event.message);
        }
        let err = |source| JournalError::Log { path: self.log_path.clone(), source };
        let mut line = serde_json::to_string(&LogLine { at: super::state::now(), event: &event })
            .map_err(|e| err(std::io::Error::other(e)))?;
        line.push('\n');
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&self.log_path).map_err(err)?;
        // One write of the whole line: an interrupt never leaves half a line.
        f.write_all(line.as_bytes()).map_err(err)?;
        // The log is evidence for a night's work: make each line durable
        // like the state it explains.
        f.sync_data().map_err(err)
    }
}

/// A journal that keeps events in memory and persists nothing (simulations
/// and tests).
#[derive(Debug, Default, Clone)]
pub struct MemoryJournal {
    /// Events so far.
    pub events: Vec<Event>,
    /// Whether to keep events at all (simulations run thousands of
    /// bisections and need none).
    pub keep: bool,
    /// Checkpoints taken.
    pub checkpoints: usize,
    /// Whether to keep the last checkpoint as JSON (what a crash would
    /// leave on disk).
    pub snapshot: bool,
    /// The last checkpoint, when `snapshot` is set.
    pub last: Option<String>,
}

impl Journal for MemoryJournal {
    fn checkpoint(&mut self, state: &mut BisectState) -> Result<(), JournalError> {
        self.checkpoints += 1;
        if self.snapshot {
            self.last = Some(serde_json::to_string(state).map_err(|e| JournalError::Log {
                path: PathBuf::from("<memory>"),
                source: std::io::Error::other(e),
            })?);
        }
        Ok(())
    }

    fn event(&mut self, event: Event) -> Result<(), JournalError> {
        if self.keep {
            self.events.push(event);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_json_with_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = FileJournal::new(&dir.path().join("s.json"), &dir.path().join("log.jsonl"), true);
        j.event(Event::new("boot", Some("abc"), "boot 1 ok", serde_json::json!({"value": 1.5}))).unwrap();
        j.event(Event::new("note", None, "second", serde_json::Value::Null)).unwrap();
        let text = std::fs::read_to_string(j.log_path()).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["kind"], "boot");
        assert_eq!(lines[0]["commit"], "abc");
        assert_eq!(lines[0]["data"]["value"], 1.5);
        assert!(lines[0]["at"].as_str().unwrap().contains('T'));
        assert!(lines[1].get("commit").is_none());
    }

    #[test]
    fn unwritable_log_is_a_clear_error() {
        let mut j = FileJournal::new(Path::new("/nonexistent/s.json"), Path::new("/nonexistent/log.jsonl"), true);
        let e = j.event(Event::new("note", None, "x", serde_json::Value::Null)).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/log.jsonl"), "{e}");
    }
}
