//! The lab's job queue in the results store: the machines (each a named
//! upload token plus what the lab said of it) and their jobs, one queue per
//! machine, oldest first. The agent's requests ([`loads::lab_protocol`])
//! move a job through its states; the host that queued it reads them.
//!
//! States: `queued` → `sent` (the agent took it) → `kexec` (the agent
//! checked its files and boots it) → `done` (the candidate uploaded its
//! document). Ends without a document: `failed` (the agent could not boot
//! it), `returned` (the agent came back before a document arrived: a
//! panic, a reset, a boot failure), `timed_out` (the host gave up on it).
//! The job files (kernel, initramfs) live beside the store, named by
//! their sha256 ([`Store::lab_files_dir`]).

use crate::service::store::{now, Store, StoreError};
use crate::service::tokens::{Scope, TokenDigest};
use loads::lab_protocol::{Hello, HelloReply, JobEvent, JobFile, JobOffer, JobPack, CAPABILITY_PACK_STORE};
use rusqlite::{params, OptionalExtension};
use std::path::PathBuf;

/// The most console (netconsole) bytes kept per job; later ones are
/// dropped and a line says so.
pub const MAX_JOB_CONSOLE_BYTES: usize = 16 << 20;

/// Errors of the lab queue.
#[derive(Debug, thiserror::Error)]
pub enum LabQueueError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No machine of this name.
    #[error("no lab machine named '{0}' in this store (bootbench lab machine list)")]
    NoSuchMachine(String),
    /// A machine of this name exists already.
    #[error("a lab machine named '{0}' exists already")]
    MachineExists(String),
    /// The machine's token was revoked: it takes no jobs.
    #[error("lab machine '{0}' has a revoked token: it takes no jobs (add it again under a new name)")]
    Revoked(String),
    /// The job's cmdline could not be made.
    #[error("the cmdline of lab job {job}: {why}")]
    Cmdline {
        /// The job.
        job: u64,
        /// Why.
        why: String,
    },
    /// No job with this id.
    #[error("no lab job {0} in this store")]
    NoSuchJob(u64),
    /// The job is another machine's.
    #[error("lab job {job} is machine '{owner}'s, not '{asked}'s")]
    NotYours {
        /// The job.
        job: u64,
        /// Its machine.
        owner: String,
        /// The machine that asked.
        asked: String,
    },
    /// The job is not in a state that allows this.
    #[error("lab job {job} is {state}: {what} needs it {needs}")]
    WrongState {
        /// The job.
        job: u64,
        /// Its state.
        state: String,
        /// What was asked.
        what: &'static str,
        /// The states that allow it.
        needs: &'static str,
    },
}

/// What the lab says of a machine when it is added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineSpec {
    /// The machine's arch (`x86_64`, `i386`, `ppc64`, `ppc64le`).
    pub arch: String,
    /// Its console for the candidates' cmdline (`ttyS0,115200n8`).
    pub console: String,
    /// What `bootbench.accel` its candidates record (`bare-metal`, or
    /// `tcg`/`kvm` for a virtual machine playing one).
    pub accel: String,
    /// Seconds the agent waits between two asks when nothing is queued.
    pub poll_s: u64,
    /// The volume label of the ext2/3/4 filesystem on the partition the
    /// lab gave bootbench for scratch space (`mke2fs -L LABEL`), if any:
    /// every candidate mounts the one filesystem with that label, and
    /// empties it first.
    pub scratch_label: Option<String>,
    /// The volume label of the ext2/3/4 filesystem the lab gave bootbench
    /// for userland packs, if any: the agent keeps the packs its jobs need
    /// there, and their candidates mount them from it read-only.
    pub pack_label: Option<String>,
}

/// A machine as the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// Its name (also its token's).
    pub name: String,
    /// What the lab said of it.
    pub spec: MachineSpec,
    /// Whether its token was revoked.
    pub revoked: bool,
    /// When its agent last said hello.
    pub last_hello_at: Option<String>,
    /// What it said.
    pub last_hello: Option<Hello>,
    /// The address its agent's requests came from.
    pub agent_addr: Option<String>,
    /// The receiver's base URL as the agent reached it (scheme and Host).
    pub base_url: Option<String>,
    /// The UDP port of the receiver's netconsole sink when the agent
    /// last said hello (none: the receiver had none).
    pub netconsole_port: Option<u16>,
}

/// A new job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// The machine.
    pub machine: String,
    /// The kernel file, already in [`Store::lab_files_dir`].
    pub kernel: JobFile,
    /// The initramfs file, likewise.
    pub initrd: JobFile,
    /// The userland pack, its image likewise, and the machine's pack store.
    pub pack: Option<JobPack>,
    /// The digest of the job's upload token.
    pub token: TokenDigest,
}

/// A job as the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Its id.
    pub id: u64,
    /// Its machine.
    pub machine: String,
    /// `queued`, `sent`, `kexec`, `done`, `failed`, `returned`, `timed_out`.
    pub state: String,
    /// When it was queued, sent, kexec'd, ended, and the machine came back.
    pub created_at: String,
    /// When the agent took it.
    pub sent_at: Option<String>,
    /// When the agent reported the kexec.
    pub kexec_at: Option<String>,
    /// When it ended.
    pub ended_at: Option<String>,
    /// When the agent came back after it.
    pub returned_at: Option<String>,
    /// The kernel.
    pub kernel: JobFile,
    /// The initramfs.
    pub initrd: JobFile,
    /// The userland pack.
    pub pack: Option<JobPack>,
    /// The cmdline.
    pub cmdline: String,
    /// The run its candidate uploaded.
    pub run_id: Option<String>,
    /// The agent's kernel when it took the job.
    pub agent_kernel: Option<String>,
    /// Why it failed or ended without a document.
    pub failure: Option<String>,
    /// Whether the agent reported a watchdog reset on its return.
    pub watchdog_reset: Option<bool>,
    /// What netconsole sent while it ran, with the receiver's own lines.
    pub console: Vec<u8>,
}

impl Job {
    /// Whether it has ended (nothing will change its state any more).
    pub fn ended(&self) -> bool {
        matches!(self.state.as_str(), "done" | "failed" | "returned" | "timed_out")
    }
}

const JOB_COLUMNS: &str = "id, machine, state, created_at, sent_at, kexec_at, ended_at, returned_at, kernel_sha256, \
     kernel_bytes, initrd_sha256, initrd_bytes, cmdline, run_id, agent_kernel, failure, watchdog_reset, console, \
     pack_sha256, pack_bytes, pack_label";

fn job_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Job> {
    Ok(Job {
        id: r.get::<_, i64>(0)? as u64,
        machine: r.get(1)?,
        state: r.get(2)?,
        created_at: r.get(3)?,
        sent_at: r.get(4)?,
        kexec_at: r.get(5)?,
        ended_at: r.get(6)?,
        returned_at: r.get(7)?,
        kernel: JobFile { sha256: r.get(8)?, bytes: r.get::<_, i64>(9)? as u64 },
        initrd: JobFile { sha256: r.get(10)?, bytes: r.get::<_, i64>(11)? as u64 },
        cmdline: r.get(12)?,
        run_id: r.get(13)?,
        agent_kernel: r.get(14)?,
        failure: r.get(15)?,
        watchdog_reset: r.get(16)?,
        console: r.get(17)?,
        pack: match (r.get::<_, Option<String>>(18)?, r.get::<_, Option<i64>>(19)?, r.get::<_, Option<String>>(20)?) {
            (Some(sha256), Some(bytes), Some(label)) => {
                Some(JobPack { file: JobFile { sha256, bytes: bytes as u64 }, label })
            }
            _ => None,
        },
    })
}

fn machine_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Machine> {
    let hello: Option<String> = r.get(7)?;
    Ok(Machine {
        name: r.get(0)?,
        spec: MachineSpec {
            arch: r.get(1)?,
            console: r.get(2)?,
            accel: r.get(3)?,
            poll_s: r.get::<_, i64>(4)? as u64,
            scratch_label: r.get(11)?,
            pack_label: r.get(12)?,
        },
        revoked: r.get::<_, Option<String>>(5)?.is_some(),
        last_hello_at: r.get(6)?,
        last_hello: hello.and_then(|h| serde_json::from_str(&h).ok()),
        agent_addr: r.get(8)?,
        base_url: r.get(9)?,
        netconsole_port: r.get(10)?,
    })
}

const MACHINE_SELECT: &str = "SELECT m.name, m.arch, m.console, m.accel, m.poll_s, t.revoked_at, m.last_hello_at, \
     m.last_hello, m.agent_addr, m.base_url, m.netconsole_port, m.scratch_label, m.pack_label FROM lab_machines m \
     JOIN tokens t ON t.name = m.name";

impl Store {
    /// Where the job files live: a directory beside the store file.
    pub fn lab_files_dir(&self) -> PathBuf {
        let mut name = self.path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".lab-files");
        self.path.with_file_name(name)
    }

    /// The path of the job file with this sha256.
    pub fn lab_file(&self, sha256: &str) -> PathBuf {
        self.lab_files_dir().join(sha256)
    }

    /// Adds machine `name` with its token's digest (an upload token of the
    /// same name): one transaction.
    pub fn add_machine(&mut self, name: &str, digest: &TokenDigest, spec: &MachineSpec) -> Result<(), LabQueueError> {
        let path = &self.path;
        let err = |what| move |source| StoreError::Query { path: path.clone(), what, source };
        let exists: bool = self
            .conn
            .query_row("SELECT EXISTS (SELECT 1 FROM lab_machines WHERE name = ?1)", [name], |r| r.get(0))
            .map_err(err("looking up the machine"))?;
        if exists {
            return Err(LabQueueError::MachineExists(name.to_string()));
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err("starting a transaction"))?;
        tx.execute(
            "INSERT INTO tokens (name, sha256, can_upload, can_read, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![name, hex::encode(digest), Scope::UPLOAD.upload, Scope::UPLOAD.read, now()],
        )
        .map_err(|e| {
            if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) {
                StoreError::TokenExists { path: self.path.clone(), name: name.to_string() }
            } else {
                err("adding the machine's token")(e)
            }
        })?;
        tx.execute(
            "INSERT INTO lab_machines (name, arch, console, accel, poll_s, created_at, scratch_label, pack_label) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                name,
                spec.arch,
                spec.console,
                spec.accel,
                spec.poll_s as i64,
                now(),
                spec.scratch_label,
                spec.pack_label
            ],
        )
        .map_err(err("adding the machine"))?;
        tx.commit().map_err(err("committing"))?;
        Ok(())
    }

    /// Every machine, by name.
    pub fn machines(&self) -> Result<Vec<Machine>, LabQueueError> {
        let what = "reading the lab machines";
        let mut stmt = self.conn.prepare(&format!("{MACHINE_SELECT} ORDER BY m.name")).map_err(self.query_err(what))?;
        let rows = stmt
            .query_map([], machine_row)
            .map_err(self.query_err(what))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.query_err(what))?;
        Ok(rows)
    }

    /// Machine `name`.
    pub fn machine(&self, name: &str) -> Result<Machine, LabQueueError> {
        self.conn
            .query_row(&format!("{MACHINE_SELECT} WHERE m.name = ?1"), [name], machine_row)
            .optional()
            .map_err(self.query_err("reading a lab machine"))?
            .ok_or_else(|| LabQueueError::NoSuchMachine(name.to_string()))
    }

    /// The agent of `machine` came up: records what it said and from
    /// where, and closes the job it was running when it left: one sent but
    /// not booted fails, one booted without a document is `returned`, one
    /// done gets its return time.
    pub fn lab_hello(
        &mut self,
        machine: &str,
        hello: &Hello,
        addr: &str,
        base_url: &str,
        netconsole_port: Option<u16>,
    ) -> Result<HelloReply, LabQueueError> {
        self.machine(machine)?;
        let path = &self.path;
        let err = |what| move |source| StoreError::Query { path: path.clone(), what, source };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err("starting a transaction"))?;
        let at = now();
        tx.execute(
            "UPDATE lab_machines SET last_hello_at = ?2, last_hello = ?3, agent_addr = ?4, base_url = ?5, \
             netconsole_port = ?6 WHERE name = ?1",
            params![machine, at, serde_json::to_string(hello).unwrap_or_default(), addr, base_url, netconsole_port],
        )
        .map_err(err("recording the hello"))?;
        let open: Option<(i64, String)> = tx
            .query_row(
                "SELECT id, state FROM lab_jobs WHERE machine = ?1 AND state IN ('sent', 'kexec') ORDER BY id DESC LIMIT 1",
                [machine],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(err("finding the machine's job"))?;
        let closed = match open {
            Some((id, state)) if state == "sent" => {
                tx.execute(
                    "UPDATE lab_jobs SET state = 'failed', ended_at = ?2, returned_at = ?2, \
                     failure = 'the agent started again before it booted the job' WHERE id = ?1",
                    params![id, at],
                )
                .map_err(err("closing the job"))?;
                Some(id as u64)
            }
            Some((id, _)) => {
                let why = if hello.watchdog_reset == Some(true) {
                    format!(
                        "the machine came back to its agent without a result; {} reports that it reset the machine",
                        hello.watchdog.as_deref().unwrap_or("a hardware watchdog")
                    )
                } else {
                    "the machine came back to its agent without a result from the candidate".to_string()
                };
                tx.execute(
                    "UPDATE lab_jobs SET state = 'returned', ended_at = ?2, returned_at = ?2, failure = ?3, \
                     watchdog_reset = ?4 WHERE id = ?1",
                    params![id, at, why, hello.watchdog_reset],
                )
                .map_err(err("closing the job"))?;
                Some(id as u64)
            }
            None => {
                // The machine's last job that ended while it was away.
                tx.execute(
                    "UPDATE lab_jobs SET returned_at = ?2, watchdog_reset = ?3 WHERE id = (SELECT MAX(id) FROM \
                     lab_jobs WHERE machine = ?1 AND kexec_at IS NOT NULL) AND returned_at IS NULL",
                    params![machine, at, hello.watchdog_reset],
                )
                .map_err(err("recording the return"))?;
                None
            }
        };
        tx.commit().map_err(err("committing"))?;
        Ok(HelloReply { closed_job: closed })
    }

    /// The next job for `machine`, now `sent`; `None` when its queue is
    /// empty. A job sent before and never reported on fails first.
    pub fn lab_next(&mut self, machine: &str, addr: &str) -> Result<Option<JobOffer>, LabQueueError> {
        self.machine(machine)?;
        let path = &self.path;
        let err = |what| move |source| StoreError::Query { path: path.clone(), what, source };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err("starting a transaction"))?;
        let at = now();
        tx.execute(
            "UPDATE lab_jobs SET state = 'failed', ended_at = ?2, \
             failure = 'the agent asked for another job without booting this one or reporting why' \
             WHERE machine = ?1 AND state = 'sent'",
            params![machine, at],
        )
        .map_err(err("closing an unreported job"))?;
        let job = tx
            .query_row(
                &format!(
                    "SELECT {JOB_COLUMNS} FROM lab_jobs WHERE machine = ?1 AND state = 'queued' ORDER BY id LIMIT 1"
                ),
                [machine],
                job_row,
            )
            .optional()
            .map_err(err("taking the next job"))?;
        let Some(job) = job else {
            tx.commit().map_err(err("committing"))?;
            return Ok(None);
        };
        let hello: Option<Hello> = tx
            .query_row("SELECT last_hello FROM lab_machines WHERE name = ?1", [machine], |r| {
                r.get::<_, Option<String>>(0)
            })
            .map_err(err("reading the agent's hello"))?
            .and_then(|h| serde_json::from_str::<Hello>(&h).ok());
        let can_pack = hello.as_ref().is_some_and(|h| h.capabilities.iter().any(|c| c == CAPABILITY_PACK_STORE));
        if job.pack.is_some() && !can_pack {
            // It would boot the candidate without its pack: the job fails
            // here, and the agent asks again for the next one.
            tx.execute(
                "UPDATE lab_jobs SET state = 'failed', ended_at = ?2, failure = ?3 WHERE id = ?1",
                params![
                    job.id as i64,
                    at,
                    "the machine's agent cannot fetch a userland pack into a pack store: it is older than this \
                     bootbench; make its boot files again (bootbench lab bundle)"
                ],
            )
            .map_err(err("failing the job"))?;
            tx.commit().map_err(err("committing"))?;
            return Ok(None);
        }
        let agent_kernel = hello.map(|h| h.agent_kernel);
        tx.execute(
            "UPDATE lab_jobs SET state = 'sent', sent_at = ?2, agent_kernel = ?3 WHERE id = ?1",
            params![job.id as i64, at, agent_kernel],
        )
        .map_err(err("sending the job"))?;
        tx.execute("UPDATE lab_machines SET agent_addr = ?2 WHERE name = ?1", params![machine, addr])
            .map_err(err("recording the agent's address"))?;
        tx.commit().map_err(err("committing"))?;
        Ok(Some(JobOffer { id: job.id, kernel: job.kernel, initrd: job.initrd, cmdline: job.cmdline, pack: job.pack }))
    }

    /// Job `id`.
    pub fn lab_job(&self, id: u64) -> Result<Job, LabQueueError> {
        self.conn
            .query_row(&format!("SELECT {JOB_COLUMNS} FROM lab_jobs WHERE id = ?1"), [id as i64], job_row)
            .optional()
            .map_err(self.query_err("reading a lab job"))?
            .ok_or(LabQueueError::NoSuchJob(id))
    }

    /// The jobs of `machine` (all machines when `None`), newest first, at
    /// most `limit`.
    pub fn lab_jobs(&self, machine: Option<&str>, limit: usize) -> Result<Vec<Job>, LabQueueError> {
        let what = "listing lab jobs";
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {JOB_COLUMNS} FROM lab_jobs WHERE (?1 IS NULL OR machine = ?1) ORDER BY id DESC LIMIT ?2"
            ))
            .map_err(self.query_err(what))?;
        let rows = stmt
            .query_map(params![machine, limit as i64], job_row)
            .map_err(self.query_err(what))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.query_err(what))?;
        Ok(rows)
    }

    /// Job `id` checked to be `machine`'s.
    pub fn machines_job(&self, machine: &str, id: u64) -> Result<Job, LabQueueError> {
        let job = self.lab_job(id)?;
        if job.machine != machine {
            return Err(LabQueueError::NotYours { job: id, owner: job.machine, asked: machine.to_string() });
        }
        Ok(job)
    }

    /// The agent's report on job `id` of `machine`.
    pub fn lab_event(&mut self, machine: &str, id: u64, event: &JobEvent) -> Result<(), LabQueueError> {
        let job = self.machines_job(machine, id)?;
        if job.state != "sent" {
            return Err(LabQueueError::WrongState {
                job: id,
                state: job.state,
                what: "an agent's report",
                needs: "sent",
            });
        }
        let at = now();
        let (sql, failure) = match event {
            JobEvent::Kexec => ("UPDATE lab_jobs SET state = 'kexec', kexec_at = ?2 WHERE id = ?1", None),
            JobEvent::Failed { reason } => (
                "UPDATE lab_jobs SET state = 'failed', ended_at = ?2, failure = ?3 WHERE id = ?1",
                Some(format!("the agent could not boot it: {reason}")),
            ),
        };
        let mut stmt = self.conn.prepare(sql).map_err(self.query_err("reporting on a job"))?;
        match failure {
            None => stmt.execute(params![id as i64, at]),
            Some(f) => stmt.execute(params![id as i64, at, f]),
        }
        .map_err(self.query_err("reporting on a job"))?;
        Ok(())
    }

    /// The digest of job `id`'s upload token, while the job may upload
    /// (sent or booted, or done: a retried upload of the same run).
    pub fn lab_upload_token(&self, id: u64) -> Result<(Job, TokenDigest), LabQueueError> {
        let job = self.lab_job(id)?;
        let text: String = self
            .conn
            .query_row("SELECT token_sha256 FROM lab_jobs WHERE id = ?1", [id as i64], |r| r.get(0))
            .map_err(self.query_err("reading a job's token"))?;
        let mut digest = [0u8; 32];
        hex::decode_to_slice(&text, &mut digest).map_err(|_| LabQueueError::WrongState {
            job: id,
            state: job.state.clone(),
            what: "an upload",
            needs: "a valid token",
        })?;
        Ok((job, digest))
    }

    /// Job `id`'s candidate uploaded run `run_id`: the job is done, and
    /// its console gets a line saying so (where the result ended, for the
    /// host's verdict).
    pub fn lab_done(&mut self, id: u64, run_id: &str, sha256: &str) -> Result<(), LabQueueError> {
        let job = self.lab_job(id)?;
        if !matches!(job.state.as_str(), "sent" | "kexec" | "done") {
            return Err(LabQueueError::WrongState { job: id, state: job.state, what: "an upload", needs: "kexec" });
        }
        if job.state == "done" {
            return Ok(());
        }
        self.lab_console(id, format!("{RESULT_UPLOADED_LINE} run={run_id} sha256={sha256}\n").as_bytes())?;
        self.conn
            .execute(
                "UPDATE lab_jobs SET state = 'done', ended_at = ?2, run_id = ?3 WHERE id = ?1",
                params![id as i64, now(), run_id],
            )
            .map_err(self.query_err("ending a job"))?;
        Ok(())
    }

    /// Appends `bytes` to job `id`'s console, up to
    /// [`MAX_JOB_CONSOLE_BYTES`].
    pub fn lab_console(&mut self, id: u64, bytes: &[u8]) -> Result<(), LabQueueError> {
        let have: i64 = self
            .conn
            .query_row("SELECT length(console) FROM lab_jobs WHERE id = ?1", [id as i64], |r| r.get(0))
            .optional()
            .map_err(self.query_err("reading a job's console"))?
            .ok_or(LabQueueError::NoSuchJob(id))?;
        let have = have as usize;
        if have >= MAX_JOB_CONSOLE_BYTES {
            return Ok(());
        }
        let room = MAX_JOB_CONSOLE_BYTES - have;
        let mut add = bytes.get(..bytes.len().min(room)).unwrap_or_default().to_vec();
        if bytes.len() > room {
            add.extend_from_slice(b"\nbootbench-lab: console cap reached; later bytes dropped\n");
        }
        self.conn
            .execute("UPDATE lab_jobs SET console = CAST(console || ?2 AS BLOB) WHERE id = ?1", params![id as i64, add])
            .map_err(self.query_err("appending to a job's console"))?;
        Ok(())
    }

    /// The job running on the machine whose agent spoke from `addr` (the
    /// IP, without port): where a netconsole datagram from there belongs.
    /// `None` when no machine or several have a job running from there.
    pub fn lab_job_from(&self, addr: &str) -> Result<Option<u64>, LabQueueError> {
        let what = "finding the job of a netconsole sender";
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT j.id, m.agent_addr FROM lab_jobs j JOIN lab_machines m ON m.name = j.machine \
                 WHERE j.state IN ('sent', 'kexec', 'done') AND j.returned_at IS NULL AND m.agent_addr IS NOT NULL",
            )
            .map_err(self.query_err(what))?;
        let rows: Vec<(i64, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(self.query_err(what))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.query_err(what))?;
        let ip = |a: &str| a.parse::<std::net::SocketAddr>().map(|s| s.ip().to_string()).unwrap_or_else(|_| a.into());
        let mine: Vec<i64> = rows.into_iter().filter(|(_, a)| ip(a) == addr).map(|(id, _)| id).collect();
        Ok(match mine.as_slice() {
            [one] => Some(*one as u64),
            _ => None,
        })
    }

    /// Queues a job; returns its id. The machine must exist and its token
    /// not be revoked. `cmdline` makes the job's cmdline from its id (it
    /// names the job), in the same transaction: no agent sees the job
    /// before it has its cmdline.
    pub fn lab_submit(
        &mut self,
        job: &NewJob,
        cmdline: impl FnOnce(u64) -> Result<String, String>,
    ) -> Result<u64, LabQueueError> {
        let m = self.machine(&job.machine)?;
        if m.revoked {
            return Err(LabQueueError::Revoked(job.machine.clone()));
        }
        let path = &self.path;
        let err = |what| move |source| StoreError::Query { path: path.clone(), what, source };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err("starting a transaction"))?;
        tx.execute(
            "INSERT INTO lab_jobs (machine, state, created_at, kernel_sha256, kernel_bytes, initrd_sha256, \
             initrd_bytes, cmdline, token_sha256, pack_sha256, pack_bytes, pack_label) \
             VALUES (?1, 'queued', ?2, ?3, ?4, ?5, ?6, '', ?7, ?8, ?9, ?10)",
            params![
                job.machine,
                now(),
                job.kernel.sha256,
                job.kernel.bytes as i64,
                job.initrd.sha256,
                job.initrd.bytes as i64,
                hex::encode(job.token),
                job.pack.as_ref().map(|p| p.file.sha256.clone()),
                job.pack.as_ref().map(|p| p.file.bytes as i64),
                job.pack.as_ref().map(|p| p.label.clone()),
            ],
        )
        .map_err(err("queuing a job"))?;
        let id = tx.last_insert_rowid() as u64;
        let line = cmdline(id).map_err(|why| LabQueueError::Cmdline { job: id, why })?;
        tx.execute("UPDATE lab_jobs SET cmdline = ?2 WHERE id = ?1", params![id as i64, line])
            .map_err(err("setting the job's cmdline"))?;
        tx.commit().map_err(err("committing"))?;
        Ok(id)
    }

    /// The host gave up on job `id`: it ends `timed_out` unless it ended
    /// meanwhile. Returns the job as it is now.
    pub fn lab_time_out(&mut self, id: u64, why: &str) -> Result<Job, LabQueueError> {
        self.conn
            .execute(
                "UPDATE lab_jobs SET state = 'timed_out', ended_at = ?2, failure = ?3 WHERE id = ?1 \
                 AND state IN ('queued', 'sent', 'kexec')",
                params![id as i64, now(), why],
            )
            .map_err(self.query_err("timing out a job"))?;
        self.lab_job(id)
    }
}

/// The line the receiver adds to a job's console when the candidate's
/// document arrives: where the result ended, on the console's time line.
pub const RESULT_UPLOADED_LINE: &str = "bootbench-lab: result uploaded";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::tokens;

    fn spec() -> MachineSpec {
        MachineSpec {
            arch: "x86_64".into(),
            console: "ttyS0".into(),
            accel: "tcg".into(),
            poll_s: 5,
            scratch_label: None,
            pack_label: None,
        }
    }

    fn file(n: u8) -> JobFile {
        JobFile { sha256: format!("{n:02x}").repeat(32), bytes: u64::from(n) * 100 }
    }

    fn new_job(machine: &str, n: u8) -> NewJob {
        NewJob {
            machine: machine.into(),
            kernel: file(n),
            initrd: file(n + 1),
            pack: None,
            token: tokens::digest("job-token-0123456789"),
        }
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("lab.db")).unwrap();
        s.add_machine("box1", &tokens::digest("machine-token-box1-0123"), &spec()).unwrap();
        s.add_machine("box2", &tokens::digest("machine-token-box2-0123"), &spec()).unwrap();
        (dir, s)
    }

    #[test]
    fn a_job_with_a_pack_offers_it_to_the_agent_and_keeps_it() {
        let (_d, mut s) = store();
        let pack = JobPack { file: file(9), label: "bb-packs".into() };
        let with_pack = NewJob { pack: Some(pack.clone()), ..new_job("box1", 1) };
        // An agent older than pack stores: the job fails, saying why.
        s.lab_hello("box1", &hello(None), "10.0.2.15:1", "http://h", None).unwrap();
        let old = s.lab_submit(&with_pack, |id| Ok(format!("j={id}"))).unwrap();
        assert_eq!(s.lab_next("box1", "10.0.2.15:1").unwrap(), None);
        let failed = s.lab_job(old).unwrap();
        assert_eq!(failed.state, "failed");
        assert!(failed.failure.as_deref().is_some_and(|f| f.contains("lab bundle")), "{failed:?}");
        let new_agent = Hello { capabilities: vec![CAPABILITY_PACK_STORE.into()], ..hello(None) };
        s.lab_hello("box1", &new_agent, "10.0.2.15:1", "http://h", None).unwrap();
        let id = s.lab_submit(&with_pack, |id| Ok(format!("j={id}"))).unwrap();
        let plain = submit(&mut s, "box1", 3);
        let offer = s.lab_next("box1", "10.0.2.15:1").unwrap().unwrap();
        assert_eq!((offer.id, offer.pack), (id, Some(pack.clone())));
        assert_eq!(s.lab_job(id).unwrap().pack, Some(pack));
        assert_eq!(s.lab_job(plain).unwrap().pack, None);
    }

    fn hello(watchdog: Option<bool>) -> Hello {
        Hello { agent_kernel: "6.1.0 #1".into(), watchdog_reset: watchdog, ..Hello::default() }
    }

    fn submit(s: &mut Store, machine: &str, n: u8) -> u64 {
        s.lab_submit(&new_job(machine, n), |id| Ok(format!("console=ttyS0 bootbench.lab_job={id}"))).unwrap()
    }

    #[test]
    fn jobs_go_out_oldest_first_each_to_its_own_machine_with_the_cmdline_naming_it() {
        let (_d, mut s) = store();
        let a = submit(&mut s, "box1", 1);
        let b = submit(&mut s, "box2", 3);
        let c = submit(&mut s, "box1", 5);
        let offer = s.lab_next("box1", "10.0.0.1:5000").unwrap().unwrap();
        assert_eq!((offer.id, offer.kernel, offer.initrd), (a, file(1), file(2)));
        assert_eq!(offer.cmdline, format!("console=ttyS0 bootbench.lab_job={a}"));
        assert_eq!(s.lab_job(a).unwrap().state, "sent");
        assert_eq!(s.lab_job(a).unwrap().agent_kernel, None, "no hello yet");
        assert_eq!(s.lab_next("box2", "10.0.0.2:5000").unwrap().unwrap().id, b);
        s.lab_event("box1", a, &JobEvent::Kexec).unwrap();
        s.lab_hello("box1", &hello(None), "10.0.0.1:5001", "http://10.0.0.9:8080", None).unwrap();
        assert_eq!(s.lab_next("box1", "10.0.0.1:5002").unwrap().unwrap().id, c);
        assert_eq!(
            s.lab_next("box2", "10.0.0.2:5000").unwrap(),
            None,
            "box2's only job was taken; the unreported one failed"
        );
        assert_eq!(s.lab_job(b).unwrap().state, "failed");
    }

    #[test]
    fn a_machine_back_without_a_result_closes_its_job_and_a_watchdog_reset_is_kept() {
        let (_d, mut s) = store();
        let a = submit(&mut s, "box1", 1);
        s.lab_hello("box1", &hello(None), "10.0.0.1:1", "http://h:1", Some(6666)).unwrap();
        s.lab_next("box1", "10.0.0.1:2").unwrap();
        assert_eq!(s.lab_job(a).unwrap().agent_kernel.as_deref(), Some("6.1.0 #1"));
        s.lab_event("box1", a, &JobEvent::Kexec).unwrap();
        let reply = s.lab_hello("box1", &hello(Some(true)), "10.0.0.1:3", "http://h:1", Some(6666)).unwrap();
        assert_eq!(reply.closed_job, Some(a));
        let j = s.lab_job(a).unwrap();
        assert_eq!((j.state.as_str(), j.watchdog_reset), ("returned", Some(true)));
        assert!(j.returned_at.is_some() && j.ended());
        assert!(j.failure.unwrap().contains("watchdog"), "the reason names the watchdog");
        let m = s.machine("box1").unwrap();
        assert_eq!((m.netconsole_port, m.base_url.as_deref()), (Some(6666), Some("http://h:1")));
    }

    #[test]
    fn a_job_sent_but_not_booted_fails_when_the_agent_starts_again() {
        let (_d, mut s) = store();
        let a = submit(&mut s, "box1", 1);
        s.lab_next("box1", "a:1").unwrap();
        let reply = s.lab_hello("box1", &hello(None), "a:1", "http://h:1", None).unwrap();
        assert_eq!(reply.closed_job, Some(a));
        let j = s.lab_job(a).unwrap();
        assert_eq!(j.state, "failed");
        assert!(j.failure.unwrap().contains("before it booted"));
    }

    #[test]
    fn a_done_job_gets_its_marker_line_and_the_return_time_and_stays_done() {
        let (_d, mut s) = store();
        let a = submit(&mut s, "box1", 1);
        s.lab_next("box1", "a:1").unwrap();
        s.lab_event("box1", a, &JobEvent::Kexec).unwrap();
        s.lab_console(a, b"Linux version 6.1\n").unwrap();
        s.lab_done(a, "run-1", "abc").unwrap();
        s.lab_done(a, "run-1", "abc").unwrap();
        let j = s.lab_job(a).unwrap();
        assert_eq!((j.state.as_str(), j.run_id.as_deref()), ("done", Some("run-1")));
        let text = String::from_utf8(j.console).unwrap();
        assert_eq!(text, format!("Linux version 6.1\n{RESULT_UPLOADED_LINE} run=run-1 sha256=abc\n"), "one marker");
        assert_eq!(s.lab_hello("box1", &hello(None), "a:1", "http://h:1", None).unwrap().closed_job, None);
        let j = s.lab_job(a).unwrap();
        assert_eq!(j.state, "done");
        assert!(j.returned_at.is_some());
        // A timeout after the end changes nothing.
        assert_eq!(s.lab_time_out(a, "late").unwrap().state, "done");
    }

    #[test]
    fn reports_on_another_machines_job_or_in_the_wrong_state_are_refused() {
        let (_d, mut s) = store();
        let a = submit(&mut s, "box1", 1);
        assert!(matches!(s.lab_event("box2", a, &JobEvent::Kexec), Err(LabQueueError::NotYours { .. })));
        assert!(matches!(s.lab_event("box1", a, &JobEvent::Kexec), Err(LabQueueError::WrongState { .. })));
        s.lab_next("box1", "a:1").unwrap();
        s.lab_event("box1", a, &JobEvent::Failed { reason: "sha256 mismatch".into() }).unwrap();
        let j = s.lab_job(a).unwrap();
        assert_eq!(j.state, "failed");
        assert!(j.failure.unwrap().ends_with("sha256 mismatch"));
        assert!(matches!(s.lab_done(a, "r", "x"), Err(LabQueueError::WrongState { .. })), "a failed job takes no run");
        assert!(matches!(s.lab_job(999), Err(LabQueueError::NoSuchJob(999))));
        assert!(matches!(s.lab_next("nobody", "a:1"), Err(LabQueueError::NoSuchMachine(_))));
    }

    #[test]
    fn a_revoked_machine_takes_no_jobs_and_a_bad_cmdline_queues_nothing() {
        let (_d, mut s) = store();
        s.revoke_token("box2").unwrap();
        assert!(matches!(s.lab_submit(&new_job("box2", 1), |_| Ok(String::new())), Err(LabQueueError::Revoked(_))));
        let e = s.lab_submit(&new_job("box1", 1), |_| Err("too long".into())).unwrap_err();
        assert!(e.to_string().contains("too long"), "{e}");
        assert!(s.lab_jobs(None, 10).unwrap().is_empty(), "the transaction was rolled back");
        assert!(matches!(
            s.add_machine("box1", &tokens::digest("another-token-01234567"), &spec()),
            Err(LabQueueError::MachineExists(_))
        ));
    }

    #[test]
    fn netconsole_datagrams_go_to_the_one_job_running_from_their_address() {
        let (_d, mut s) = store();
        let a = submit(&mut s, "box1", 1);
        let b = submit(&mut s, "box2", 3);
        s.lab_next("box1", "10.0.0.1:4000").unwrap();
        assert_eq!(s.lab_job_from("10.0.0.1").unwrap(), Some(a));
        assert_eq!(s.lab_job_from("10.0.0.2").unwrap(), None);
        // Two machines behind one address: nobody's.
        s.lab_next("box2", "10.0.0.1:4001").unwrap();
        assert_eq!(s.lab_job_from("10.0.0.1").unwrap(), None);
        let _ = b;
    }

    #[test]
    fn a_jobs_console_stops_at_its_cap_and_says_so() {
        let (_d, mut s) = store();
        let a = submit(&mut s, "box1", 1);
        let chunk = vec![b'x'; MAX_JOB_CONSOLE_BYTES / 2 + 10];
        s.lab_console(a, &chunk).unwrap();
        s.lab_console(a, &chunk).unwrap();
        s.lab_console(a, &chunk).unwrap();
        let c = s.lab_job(a).unwrap().console;
        assert!(c.len() < MAX_JOB_CONSOLE_BYTES + 200, "{}", c.len());
        assert!(String::from_utf8_lossy(&c).ends_with("later bytes dropped\n"));
    }

    #[test]
    fn console_bytes_that_are_not_text_are_kept_as_they_came() {
        let (_d, mut s) = store();
        let a = submit(&mut s, "box1", 1);
        s.lab_console(a, &[0xff, 0x00, b'a']).unwrap();
        s.lab_console(a, &[0xfe, b'\n']).unwrap();
        assert_eq!(s.lab_job(a).unwrap().console, vec![0xff, 0x00, b'a', 0xfe, b'\n']);
    }
}
