//! The driver itself and its record-keeping: the [`Driver`] over a state,
//! a lab, a history and a journal, and the primitives every phase uses to
//! build a commit, boot it once and write an event, each followed by a
//! checkpoint so that the state alone says what was done. It decides no
//! verdict and chooses no commit: the phases (`driver`) and the test of one
//! commit (`driver::commit_test`) do, so it names neither.

use super::wording::fmt_value;
use crate::bisect::history::{History, HistoryError};
use crate::bisect::journal::{Event, Journal, JournalError};
use crate::bisect::lab::{BootObservation, Lab, LabError};
use crate::bisect::sequential_test::SequentialTestError;
use crate::bisect::state::{now, short, BisectState, BootEntry, BuildRecord, BuildStatus, CommitRecord, Mode, Role};

/// Errors that stop a bisection without deciding it (the state stays
/// resumable).
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The lab could not build or boot at all.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// git failed.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The state or log could not be written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The numbers could not be tested.
    #[error(transparent)]
    Test(#[from] SequentialTestError),
    /// A reference kernel stopped booting in the middle of the bisection.
    #[error("the {which} end {commit} failed {n} boots in a row (last: {last}); the host or lab is broken, so later verdicts would be worthless: fix it and resume")]
    ReferenceBroken {
        /// `good` or `bad`.
        which: &'static str,
        /// The end.
        commit: String,
        /// Failures in a row.
        n: usize,
        /// The last failure.
        last: String,
    },
    /// The appliance's own init (PID 1) panicked on every try of one boot:
    /// a bootbench bug, so the commit cannot be judged, and must not be
    /// blamed.
    #[error("boot {boot} of {commit}: bootbench's own init (PID 1) panicked {attempts} times in a row ({detail}). This is a bootbench bug, not the kernel's: the commit was not judged and nothing was counted against it. Please report it to bootbench with the boot's console log (the lab keeps it with the commit's results); after a fix, resume")]
    AppliancePanic {
        /// 1-based number of the boot in the bisection.
        boot: usize,
        /// The commit booted.
        commit: String,
        /// Boots tried.
        attempts: u32,
        /// The last try's classification in words: where and what.
        detail: String,
    },
    /// A boot ran another version of the metric's workload than the boots
    /// before it (the image was rebuilt by another bootbench): its numbers
    /// cannot be set against theirs.
    #[error("boot {boot} of {commit} ran {workload} version {got}, but earlier boots of this bisection ran version {want}: different versions measure different things, so they are never compared. Start a new bisection with this bootbench, or resume with the one that started it")]
    MixedVersions {
        /// 1-based number of the boot in the bisection.
        boot: usize,
        /// The commit booted.
        commit: String,
        /// The workload.
        workload: String,
        /// Its version in this boot.
        got: u32,
        /// Its version in the earlier boots.
        want: u32,
    },
    /// A boot built in another userland pack than the boots before it (the
    /// pack was made again from another lockfile): another compiler or
    /// tree, so its times cannot be set against theirs.
    #[error("boot {boot} of {commit} ran {workload} in userland pack {got}, but earlier boots of this bisection built in pack {want}: builds with another compiler or tree are never compared. Resume with the bootbench that started it (the lockfile built into it makes that pack), or start a new bisection")]
    MixedPacks {
        /// 1-based number of the boot in the bisection.
        boot: usize,
        /// The commit booted.
        commit: String,
        /// The workload.
        workload: String,
        /// The pack's identity in this boot (`none`: it built in none).
        got: String,
        /// The pack's identity in the earlier boots.
        want: String,
    },
    /// A boot measured on another machine than the boots before it.
    #[error("boot {boot} of {commit} measured on {got}, but earlier boots of this bisection measured on {want}: figures of two machines are never compared. Resume where the bisection started (the same QEMU, and for real-clock boots the same host), or start a new bisection")]
    MixedMachines {
        /// 1-based number of the boot in the bisection.
        boot: usize,
        /// The commit booted.
        commit: String,
        /// This boot's machine.
        got: String,
        /// The earlier boots' machine.
        want: String,
    },
    /// The state says the bisection is over.
    #[error("the bisection has finished; start a new one to bisect again")]
    Finished,
}

/// Tries of one boot while the appliance's own init panics: one retry (the
/// bug may be transient), then the bisection stops.
pub const APPLIANCE_TRIES: u32 = 2;

/// Drives one bisection over a state, a lab, a history and a journal.
pub struct Driver<'a, L: Lab, H: History, J: Journal> {
    pub(super) state: &'a mut BisectState,
    pub(super) lab: &'a mut L,
    pub(super) history: &'a mut H,
    pub(super) journal: &'a mut J,
}

/// The mean of a boot's iteration values.
pub(super) fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

impl<'a, L: Lab, H: History, J: Journal> Driver<'a, L, H, J> {
    /// A driver over these parts.
    pub fn new(state: &'a mut BisectState, lab: &'a mut L, history: &'a mut H, journal: &'a mut J) -> Self {
        Driver { state, lab, history, journal }
    }

    pub(super) fn checkpoint(&mut self) -> Result<(), DriverError> {
        Ok(self.journal.checkpoint(self.state)?)
    }

    pub(super) fn event(
        &mut self,
        kind: &'static str,
        commit: Option<&str>,
        message: String,
        data: serde_json::Value,
    ) -> Result<(), DriverError> {
        Ok(self.journal.event(Event::new(kind, commit, message, data))?)
    }

    /// Makes sure the state knows `commit`'s subject and position.
    pub(super) fn note_commit(&mut self, commit: &str) -> Result<(), DriverError> {
        if !self.state.commits.contains_key(commit) {
            let subject = self.history.subject(commit)?;
            let position = self.history.position(commit);
            self.state
                .commits
                .insert(commit.to_string(), CommitRecord { sha: commit.to_string(), subject, position, build: None });
        }
        Ok(())
    }

    /// The commit's build, building it the first time.
    pub(super) fn ensure_built(&mut self, commit: &str) -> Result<BuildRecord, DriverError> {
        self.note_commit(commit)?;
        if let Some(b) = self.state.commits.get(commit).and_then(|c| c.build.clone()) {
            return Ok(b);
        }
        let rec = self.lab.build(commit)?;
        let what = match rec.status {
            BuildStatus::Built => format!(
                "built {} in {:.0} s{}",
                self.state.describe(commit),
                rec.seconds,
                rec.cmdline.as_deref().map(|c| format!(" (cmdline: {c})")).unwrap_or_default()
            ),
            BuildStatus::Failed => {
                format!("build of {} failed: {}", self.state.describe(commit), rec.reason.as_deref().unwrap_or("?"))
            }
            BuildStatus::Unsuitable => format!(
                "kernel of {} is unsuitable: {}",
                self.state.describe(commit),
                rec.reason.as_deref().unwrap_or("?")
            ),
        };
        self.event("build", Some(commit), what, serde_json::to_value(&rec).unwrap_or_default())?;
        if let Some(c) = self.state.commits.get_mut(commit) {
            c.build = Some(rec.clone());
        }
        self.checkpoint()?;
        Ok(rec)
    }

    /// Boots `commit` once and records the boot.
    pub(super) fn boot_once(&mut self, commit: &str, role: Role, test: Option<u32>) -> Result<BootEntry, DriverError> {
        let build = self.ensure_built(commit)?;
        let index = self.state.boots.len();
        let obs = self.boot_blaming_no_one_for_our_bugs(commit, &build, index)?;
        let mut classification = obs.classification.clone();
        let mut detail = obs.detail.clone();
        let value = if self.state.plan.mode == Mode::Perf && classification == "ok" {
            let v = mean(&obs.iterations);
            if v.is_finite() && v > 0.0 {
                match self.state.outlier(v) {
                    Some(why) => {
                        classification = "outlier".into();
                        detail = Some(why);
                        None
                    }
                    None => Some(v),
                }
            } else {
                classification = "bad_value".into();
                detail = Some(format!("per-boot mean {v} of {:?} is not a positive number", obs.iterations));
                None
            }
        } else {
            None
        };
        let entry = BootEntry {
            index,
            commit: commit.to_string(),
            role,
            test,
            classification,
            detail,
            value,
            iterations: obs.iterations,
            wall_s: obs.wall_s,
            at: now(),
            workload_version: obs.workload_version,
            pack_id: obs.pack_id.clone(),
            machine: obs.machine.clone(),
        };
        let what = match role {
            Role::GoodReference => "good end".to_string(),
            Role::BadReference => "bad end".to_string(),
            Role::Candidate => format!("test {}", test.unwrap_or(0)),
        };
        let result = match (&entry.value, &entry.detail) {
            (Some(v), _) => {
                format!("{} = {} ({} iterations)", self.state.plan.metric, fmt_value(*v), entry.iterations.len())
            }
            (None, Some(d)) => format!("{}: {d}", entry.classification),
            (None, None) => entry.classification.clone(),
        };
        let message = format!("boot {} of {} ({what}): {result} in {:.0} s", index + 1, short(commit), entry.wall_s);
        self.event("boot", Some(commit), message, serde_json::to_value(&entry).unwrap_or_default())?;
        // Everything a boot changes goes into the same checkpoint, so a
        // crash right after it resumes with the same schedule.
        match role {
            Role::Candidate => {
                self.state.since_reference += 1;
                if entry.value.is_none() {
                    if let Some(t) = test.and_then(|n| self.state.test_mut(n)) {
                        t.boot_failures += 1;
                    }
                }
            }
            Role::GoodReference | Role::BadReference => {
                self.state.since_reference = 0;
                self.state.next_reference = role.other();
            }
        }
        self.state.boots.push(entry.clone());
        self.checkpoint()?;
        Ok(entry)
    }

    /// Boots once through the lab; when the appliance's own init panicked
    /// (`init_panic`: a bootbench bug), boots again, up to
    /// [`APPLIANCE_TRIES`] in all, and then stops the bisection with
    /// [`DriverError::AppliancePanic`]. Such boots are logged as events but
    /// never enter the state: they say nothing about the commit, and a
    /// resumed bisection boots again in their place.
    fn boot_blaming_no_one_for_our_bugs(
        &mut self,
        commit: &str,
        build: &BuildRecord,
        index: usize,
    ) -> Result<BootObservation, DriverError> {
        let mut attempt = 1;
        loop {
            let obs = self.lab.boot(commit, build, index)?;
            if obs.classification != "init_panic" {
                self.check_same_version(commit, index, &obs)?;
                self.check_same_pack(commit, index, &obs)?;
                self.check_same_machine(commit, index, &obs)?;
                return Ok(obs);
            }
            let detail = obs.detail.clone().unwrap_or_else(|| "init_panic".into());
            let message = format!(
                "boot {} of {}: bootbench's own init panicked (try {attempt} of {APPLIANCE_TRIES}); an appliance failure, not counted against the commit: {detail}",
                index + 1,
                short(commit)
            );
            let data = serde_json::json!({"boot": index + 1, "commit": commit, "attempt": attempt, "detail": detail});
            self.event("appliance_failure", Some(commit), message, data)?;
            if attempt >= APPLIANCE_TRIES {
                return Err(DriverError::AppliancePanic {
                    boot: index + 1,
                    commit: commit.to_string(),
                    attempts: attempt,
                    detail,
                });
            }
            attempt += 1;
        }
    }

    /// Refuses a boot whose workload version differs from the earlier
    /// boots' (before it enters the state, so a resume boots again).
    fn check_same_version(&self, commit: &str, index: usize, obs: &BootObservation) -> Result<(), DriverError> {
        let Some(got) = obs.workload_version else { return Ok(()) };
        // A boot with a value from a state written before versions ran
        // version 1 (all that existed then).
        let recorded = |b: &BootEntry| b.workload_version.or(b.value.map(|_| loads::workload::UNVERSIONED));
        let Some(want) = self.state.boots.iter().find_map(recorded) else { return Ok(()) };
        if got == want {
            return Ok(());
        }
        let workload = self.state.plan.metric.split('.').next().unwrap_or_default().to_string();
        Err(DriverError::MixedVersions { boot: index + 1, commit: commit.to_string(), workload, got, want })
    }

    /// Refuses a boot that built in another userland pack than the earlier
    /// boots (another lockfile: another compiler or tree), or in none where
    /// they built in one (before it enters the state, so a resume boots
    /// again). Boots of states from before packs were recorded say nothing.
    fn check_same_pack(&self, commit: &str, index: usize, obs: &BootObservation) -> Result<(), DriverError> {
        if obs.classification != "ok" {
            return Ok(());
        }
        // Only boots that measured the metric set the pack.
        let Some(want) = self.state.boots.iter().filter(|b| b.value.is_some()).find_map(|b| b.pack_id.as_deref())
        else {
            return Ok(());
        };
        if obs.pack_id.as_deref() == Some(want) {
            return Ok(());
        }
        let workload = self.state.plan.metric.split('.').next().unwrap_or_default().to_string();
        Err(DriverError::MixedPacks {
            boot: index + 1,
            commit: commit.to_string(),
            workload,
            got: obs.pack_id.clone().unwrap_or_else(|| "none".into()),
            want: want.to_string(),
        })
    }

    /// Refuses a boot that measured on another machine than the boots
    /// before it: another QEMU (an upgrade overnight), machine type, CPU
    /// model or shape, or for real-clock boots another host (a resume
    /// elsewhere). Before it enters the state, so a resume on the first
    /// machine boots again. Boots that recorded no machine say nothing.
    fn check_same_machine(&self, commit: &str, index: usize, obs: &BootObservation) -> Result<(), DriverError> {
        let Some(got) = obs.machine.as_deref() else { return Ok(()) };
        let Some(want) = self.state.boots.iter().find_map(|b| b.machine.as_deref()) else { return Ok(()) };
        if got == want {
            return Ok(());
        }
        Err(DriverError::MixedMachines {
            boot: index + 1,
            commit: commit.to_string(),
            got: got.into(),
            want: want.into(),
        })
    }

    pub(super) fn end_of(&self, role: Role) -> (String, &'static str) {
        match role {
            Role::BadReference => (self.state.bad.clone(), "bad"),
            _ => (self.state.good.clone(), "good"),
        }
    }

    /// Failures at the end of a reference's boots, and the last one's
    /// description.
    pub(super) fn failures_in_a_row(&self, role: Role) -> (usize, String) {
        let boots: Vec<&BootEntry> = self.state.boots.iter().filter(|b| b.role == role).collect();
        let n = boots.iter().rev().take_while(|b| b.value.is_none()).count();
        let last = boots
            .last()
            .map(|b| {
                format!("{}{}", b.classification, b.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())
            })
            .unwrap_or_default();
        (n, last)
    }
}
