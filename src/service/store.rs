//! The results store: runs received by `bootbench serve` (or put there by
//! `bootbench run --serve`), in one SQLite file. Owns the table, what a
//! storable run is (validation), and idempotence: a run is keyed by its run
//! id and kind, the same content stored twice is one row, different content
//! under the same key is a conflict. No HTTP here (that is `receiver`'s).
//!
//! Two kinds of rows can share a run id: the guest's bare document
//! (uploaded by the init) and the host's envelope (a results file holding
//! that one boot, from `bootbench upload` or `run --serve`). The envelope
//! carries the document plus what only the host knows, so readers prefer
//! it; keeping both means a guest upload and a later host upload of the
//! same run are not a conflict.

use crate::results::migration::{migrate_document, migrate_results, MigrationError};
use crate::results::{BootRecord, ResultsFile, ENVELOPE_VERSION, FORMAT, HOST_ID_PREFIX};
use crate::service::tokens::{Scope, TokenDigest};
use loads::schema::{RunDocument, SCHEMA_VERSION};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Layout version of the store (SQLite `user_version`).
pub const STORE_VERSION: i64 = 5;

/// The steps from one layout to the next: the version each makes and its
/// SQL. [`Store::open`] runs the ones above the file's `user_version`, in
/// order, in one transaction, so a store an older bootbench made is brought
/// up to date when a writer opens it (readers read either layout).
const MIGRATIONS: &[(i64, &str)] = &[(1, LAYOUT_1), (2, LAYOUT_2), (3, LAYOUT_3), (4, LAYOUT_4), (5, LAYOUT_5)];

/// The runs table.
const LAYOUT_1: &str = "
CREATE TABLE IF NOT EXISTS runs (
    run_id          TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('document', 'envelope')),
    sha256          TEXT NOT NULL,
    body            BLOB NOT NULL,
    bytes           INTEGER NOT NULL,
    received_at     TEXT NOT NULL,
    remote          TEXT,
    schema_version  INTEGER NOT NULL,
    status          TEXT NOT NULL,
    kernel_release  TEXT NOT NULL,
    arch            TEXT NOT NULL,
    suite           TEXT NOT NULL,
    label           TEXT,
    PRIMARY KEY (run_id, kind)
);
CREATE INDEX IF NOT EXISTS runs_received ON runs (received_at);
";

/// Named tokens (only a digest of each secret) and which one stored a run.
const LAYOUT_2: &str = "
ALTER TABLE runs ADD COLUMN token_name TEXT;
CREATE TABLE tokens (
    name        TEXT PRIMARY KEY,
    sha256      TEXT NOT NULL UNIQUE,
    can_upload  INTEGER NOT NULL,
    can_read    INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
);
";

/// A lab machine's pack store, by the label of its filesystem, and the
/// pack each job needs from it.
const LAYOUT_5: &str = "
ALTER TABLE lab_machines ADD COLUMN pack_label TEXT;
ALTER TABLE lab_jobs ADD COLUMN pack_sha256 TEXT;
ALTER TABLE lab_jobs ADD COLUMN pack_bytes INTEGER;
ALTER TABLE lab_jobs ADD COLUMN pack_label TEXT;
";

/// A lab machine's scratch partition, by the label of its filesystem.
const LAYOUT_4: &str = "
ALTER TABLE lab_machines ADD COLUMN scratch_label TEXT;
";

/// The lab's machines and their job queues (`crate::service::lab_queue`).
const LAYOUT_3: &str = "
CREATE TABLE lab_machines (
    name            TEXT PRIMARY KEY REFERENCES tokens (name),
    arch            TEXT NOT NULL,
    console         TEXT NOT NULL,
    accel           TEXT NOT NULL,
    poll_s          INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    last_hello_at   TEXT,
    last_hello      TEXT,
    agent_addr      TEXT,
    base_url        TEXT,
    netconsole_port INTEGER
);
CREATE TABLE lab_jobs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    machine         TEXT NOT NULL REFERENCES lab_machines (name),
    state           TEXT NOT NULL CHECK (state IN ('queued', 'sent', 'kexec', 'done', 'failed', 'returned', 'timed_out')),
    created_at      TEXT NOT NULL,
    sent_at         TEXT,
    kexec_at        TEXT,
    ended_at        TEXT,
    returned_at     TEXT,
    kernel_sha256   TEXT NOT NULL,
    kernel_bytes    INTEGER NOT NULL,
    initrd_sha256   TEXT NOT NULL,
    initrd_bytes    INTEGER NOT NULL,
    cmdline         TEXT NOT NULL,
    token_sha256    TEXT NOT NULL,
    run_id          TEXT,
    agent_kernel    TEXT,
    failure         TEXT,
    watchdog_reset  INTEGER,
    console         BLOB NOT NULL DEFAULT x''
);
CREATE INDEX lab_jobs_queue ON lab_jobs (machine, state, id);
";

/// The pragmas every writing connection runs with, in order. WAL lets a
/// reader (`compare --store`) read while `serve` writes. `synchronous=FULL`
/// fsyncs the WAL at every commit, so a run is on disk before its 201 goes
/// out, power loss included; NORMAL would be faster and could lose the last
/// acknowledged runs on power loss. It is SQLite's default today, and set
/// here so that no build option or later "optimisation" changes it.
pub const WRITER_PRAGMAS: &[(&str, &str)] = &[("journal_mode", "wal"), ("synchronous", "2")];

/// How long a statement waits for another connection's lock (a reader
/// beside `serve`, or `run --serve-db` beside it) before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be opened or set up.
    #[error("cannot open the results store {path}")]
    Open {
        /// The file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A reader was given a path where there is no file.
    #[error("there is no results store at {path} (no such file)")]
    Missing {
        /// The path.
        path: PathBuf,
    },
    /// A reader was given a file that is not a results store.
    #[error("{path} is not a bootbench results store (a `bootbench serve --db` file): {why}")]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        why: &'static str,
    },
    /// A pragma did not take the value the store needs.
    #[error("results store {path}: PRAGMA {name} is '{got}' after setting it to '{wanted}'")]
    Pragma {
        /// The file.
        path: PathBuf,
        /// The pragma.
        name: &'static str,
        /// The value set.
        wanted: &'static str,
        /// The value SQLite reports.
        got: String,
    },
    /// The file is a store of a newer layout.
    #[error("results store {path} has layout version {found}; this bootbench knows up to {STORE_VERSION}")]
    NewerLayout {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: i64,
    },
    /// A query failed.
    #[error("results store {path}: {what} failed")]
    Query {
        /// The file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// No such run.
    #[error("run '{run_id}' is not in the results store {path}")]
    NotFound {
        /// The file.
        path: PathBuf,
        /// The run id.
        run_id: String,
    },
    /// A stored body is not JSON (written by another program?).
    #[error("run '{run_id}' ({kind}) in {path} is not JSON")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The run id.
        run_id: String,
        /// Its kind.
        kind: &'static str,
        /// Parser error.
        #[source]
        source: serde_json::Error,
    },
    /// A stored body does not read through the results schema migration
    /// (its error names the store and the run).
    #[error(transparent)]
    Migration(MigrationError),
    /// A token of this name is stored already (revoked ones stay, so the
    /// runs they stored keep a name that means one token).
    #[error("results store {path} has a token named '{name}' already; choose another name")]
    TokenExists {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// The same secret is stored under another name.
    #[error("results store {path} has this token under another name already; use a fresh one")]
    TokenReused {
        /// The file.
        path: PathBuf,
    },
    /// No token of this name.
    #[error("results store {path} has no token named '{name}' (bootbench serve token list)")]
    NoSuchToken {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
    },
}

impl StoreError {
    /// Whether SQLite ran out of room (`SQLITE_FULL`: the disk, or the
    /// database's page limit): nothing is wrong with the run, and storing
    /// it may work later.
    pub fn is_full(&self) -> bool {
        match self {
            StoreError::Open { source, .. } | StoreError::Query { source, .. } => {
                source.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
            }
            _ => false,
        }
    }
}

/// Why a body cannot be stored. The messages go back to the uploader.
#[derive(Debug, thiserror::Error)]
pub enum ValidationError {
    /// Not JSON.
    #[error("the body is not JSON")]
    NotJson(#[source] serde_json::Error),
    /// JSON, but neither a result document nor a results file.
    #[error("the body is not a bootbench result document nor a results file")]
    Shape(#[source] MigrationError),
    /// A results file of another format or a newer envelope.
    #[error("unsupported results format '{format}' version {version} (this receiver takes '{FORMAT}' up to version {ENVELOPE_VERSION})")]
    Envelope {
        /// Its format field.
        format: String,
        /// Its version.
        version: u64,
    },
    /// A results file that is not exactly one boot.
    #[error("a results file upload must hold exactly one boot (this one has {boots})")]
    EnvelopeBoots {
        /// Boots in it.
        boots: usize,
    },
    /// A boot without a guest document and without the host's id for it
    /// (a file written before boots had one): nothing names the run.
    #[error("the boot has no guest document and no host-made id (boot.envelope_id): nothing names the run")]
    Unnamed,
    /// A boot without a guest document under an id that is not a
    /// host-made one.
    #[error("the boot has no guest document, so its id must be a host-made one ('{HOST_ID_PREFIX}...'), not '{id}'")]
    NotHostId {
        /// The id it has.
        id: String,
    },
    /// A document of a schema version the results migration cannot read
    /// (newer than this build, or older than its oldest step).
    #[error("the result's schema_version is not one this receiver reads (up to {SCHEMA_VERSION})")]
    SchemaVersion(#[source] MigrationError),
    /// The run id is not a valid one.
    #[error(transparent)]
    RunId(#[from] results_uploader::UrlError),
    /// The URL's run id and the document's differ.
    #[error("the URL names run '{url_id}' but the upload is run '{doc_id}'")]
    IdMismatch {
        /// From the URL.
        url_id: String,
        /// From the document.
        doc_id: String,
    },
}

/// The two kinds of stored runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// The guest's result document alone.
    Document,
    /// A results file holding one boot: envelope plus document.
    Envelope,
}

impl RunKind {
    /// The name stored in the table.
    pub fn name(self) -> &'static str {
        match self {
            RunKind::Document => "document",
            RunKind::Envelope => "envelope",
        }
    }

    fn from_name(s: &str) -> RunKind {
        if s == "envelope" {
            RunKind::Envelope
        } else {
            RunKind::Document
        }
    }
}

/// A body that passed validation, with what the listing shows.
#[derive(Debug, Clone)]
pub struct ValidatedRun {
    /// The run id.
    pub run_id: String,
    /// Its kind.
    pub kind: RunKind,
    /// sha256 of the canonical JSON (keys sorted, no whitespace), so the
    /// same content compact or pretty-printed is the same run.
    pub sha256: String,
    /// The body as received.
    pub body: Vec<u8>,
    /// The document's schema version (0: a boot without one).
    pub schema_version: u32,
    /// complete, partial or error; for a boot without a document, its
    /// classification (panic, hang, ...).
    pub status: String,
    /// Kernel release.
    pub kernel_release: String,
    /// Guest arch.
    pub arch: String,
    /// Suite name.
    pub suite: String,
    /// The envelope's label.
    pub label: Option<String>,
}

/// One row of the listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    /// The run id.
    pub run_id: String,
    /// Its kind.
    pub kind: RunKind,
    /// sha256 of the canonical JSON.
    pub sha256: String,
    /// Size as received.
    pub bytes: u64,
    /// When it was stored (RFC 3339, UTC).
    pub received_at: String,
    /// Who sent it.
    pub remote: Option<String>,
    /// complete, partial or error.
    pub status: String,
    /// Kernel release.
    pub kernel_release: String,
    /// Guest arch.
    pub arch: String,
    /// Suite name.
    pub suite: String,
    /// The envelope's label.
    pub label: Option<String>,
    /// The name of the token that stored it (`None`: stored before tokens
    /// had names, or by `run --serve`'s host side).
    pub token_name: Option<String>,
}

/// Which runs a listing takes: at most `limit`, newest first, after the
/// cursor, matching every filter given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Most runs returned.
    pub limit: usize,
    /// Start after this run (the `next` of the page before).
    pub after: Option<Cursor>,
    /// Kernel release, exactly.
    pub kernel: Option<String>,
    /// The envelope's label, exactly.
    pub label: Option<String>,
    /// Received at or after (RFC 3339, UTC, whole seconds).
    pub since: Option<String>,
    /// Received before (RFC 3339, UTC, whole seconds).
    pub until: Option<String>,
}

/// A place in the listing's order (received time, newest first; then run
/// id and kind), as a keyset: it stays valid however many runs arrive
/// after it was handed out, and across a `VACUUM` or a backup copy.
/// Written as `RECEIVED_AT,RUN_ID,KIND`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    received_at: String,
    run_id: String,
    kind: RunKind,
}

impl Cursor {
    /// The place of `run` in the order.
    pub fn of(run: &RunSummary) -> Cursor {
        Cursor { received_at: run.received_at.clone(), run_id: run.run_id.clone(), kind: run.kind }
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{},{}", self.received_at, self.run_id, self.kind.name())
    }
}

impl std::str::FromStr for Cursor {
    type Err = ();

    /// Reads what [`Cursor`]'s `Display` writes; `Err` for anything else.
    fn from_str(s: &str) -> Result<Cursor, ()> {
        let mut parts = s.split(',');
        let (Some(at), Some(id), Some(kind), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(());
        };
        let kind = match kind {
            "document" => RunKind::Document,
            "envelope" => RunKind::Envelope,
            _ => return Err(()),
        };
        humantime::parse_rfc3339(at).map_err(|_| ())?;
        results_uploader::check_run_id(id).map_err(|_| ())?;
        Ok(Cursor { received_at: at.to_string(), run_id: id.to_string(), kind })
    }
}

/// One page of the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPage {
    /// The runs, newest first.
    pub runs: Vec<RunSummary>,
    /// How many runs match the filters, on every page.
    pub total: u64,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<Cursor>,
}

/// A token in the store's table (its digest stays inside the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredToken {
    /// Its name.
    pub name: String,
    /// What it may do.
    pub scope: Scope,
    /// When it was added (RFC 3339, UTC).
    pub created_at: String,
    /// When it was revoked, if it was.
    pub revoked_at: Option<String>,
    /// The secret's digest.
    pub digest: TokenDigest,
}

/// What [`Store::revoke_token`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revocation {
    /// Revoked now.
    Revoked,
    /// It was revoked already, at this time.
    Already(String),
}

/// What [`Store::put`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutOutcome {
    /// A new row.
    Stored,
    /// The same content was there already.
    AlreadyStored,
    /// Other content is stored under this run id and kind.
    Conflict {
        /// sha256 of what is stored.
        existing_sha256: String,
    },
}

/// A run read back from the store.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredRun {
    /// Only the guest's document is stored.
    Document(Box<RunDocument>),
    /// The host's envelope (one boot, with the guest's document or, for a
    /// boot that sent none, under the host's id for it).
    Envelope(ResultsFile),
}

impl StoredRun {
    /// As a results file, so `compare` and `report` take store runs like
    /// file runs. A bare document gets an envelope with what the document
    /// itself knows (no QEMU argv, no console log).
    pub fn into_results_file(self) -> ResultsFile {
        match self {
            StoredRun::Envelope(f) => f,
            StoredRun::Document(doc) => {
                let mut boot = BootRecord { cmdline: doc.provenance.kernel.cmdline.clone(), ..Default::default() };
                boot.kernel.image_sha256 = doc.provenance.kernel.image_sha256.clone().unwrap_or_default();
                boot.kernel.config_sha256 = doc.provenance.kernel.config_sha256.clone();
                boot.kernel.release = Some(doc.provenance.kernel.release.clone());
                boot.machine.arch = doc.provenance.machine.arch.clone();
                boot.machine.smp = doc.provenance.machine.cpus;
                boot.machine.mem_mib = doc.provenance.machine.mem_bytes / (1024 * 1024);
                boot.machine.accel = doc.provenance.machine.accel.clone().unwrap_or_default();
                boot.boot.classification = "ok".into();
                boot.boot.detail = Some("from the results store: the guest's document only, no host envelope".into());
                boot.result = Some(*doc);
                ResultsFile { boots: vec![boot], ..ResultsFile::default() }
            }
        }
    }
}

/// Sorts object keys recursively, so equal content hashes equally whatever
/// the serializer's key order or whitespace.
fn canonical(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, canonical(v))).collect())
        }
        serde_json::Value::Array(items) => serde_json::Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// A migration error as the uploader should read it.
fn refusal(e: MigrationError) -> ValidationError {
    match e {
        MigrationError::Envelope { format, version, .. } => ValidationError::Envelope { format, version },
        MigrationError::Newer { .. } | MigrationError::TooOld { .. } | MigrationError::Step { .. } => {
            ValidationError::SchemaVersion(e)
        }
        other => ValidationError::Shape(other),
    }
}

/// Checks `body` as an upload for run `url_id`: a result document, or a
/// results file with exactly one boot (with a document, or without one
/// under the host's `host-` id for it); read through
/// the results schema migration as a results file is; the run id the URL
/// names.
pub fn validate(body: Vec<u8>, url_id: &str) -> Result<ValidatedRun, ValidationError> {
    results_uploader::check_run_id(url_id)?;
    let value: serde_json::Value = serde_json::from_slice(&body).map_err(ValidationError::NotJson)?;
    let origin = format!("the upload of run '{url_id}'");
    let is_envelope = value.get("format").is_some();
    let (kind, index, label) = if is_envelope {
        let file = migrate_results(value.clone(), &origin).map_err(refusal)?;
        let boot = match (file.boots.len(), file.boots.into_iter().next()) {
            (1, Some(b)) => b,
            (boots, _) => return Err(ValidationError::EnvelopeBoots { boots }),
        };
        let label = Some(boot.label.clone());
        let index = match boot.result {
            Some(doc) => Index::of_document(doc),
            None => Index::of_docless_boot(boot)?,
        };
        (RunKind::Envelope, index, label)
    } else {
        (RunKind::Document, Index::of_document(migrate_document(value.clone(), &origin).map_err(refusal)?), None)
    };
    results_uploader::check_run_id(&index.run_id)?;
    if index.run_id != url_id {
        return Err(ValidationError::IdMismatch { url_id: url_id.to_string(), doc_id: index.run_id });
    }
    let canon = serde_json::to_vec(&canonical(value)).unwrap_or_default();
    Ok(ValidatedRun {
        run_id: index.run_id,
        kind,
        sha256: hex::encode(Sha256::digest(&canon)),
        body,
        schema_version: index.schema_version,
        status: index.status,
        kernel_release: index.kernel_release,
        arch: index.arch,
        suite: index.suite,
        label,
    })
}

/// What the listing indexes a run by.
struct Index {
    run_id: String,
    schema_version: u32,
    status: String,
    kernel_release: String,
    arch: String,
    suite: String,
}

impl Index {
    /// From the guest's document.
    fn of_document(doc: RunDocument) -> Index {
        Index {
            status: format!("{:?}", doc.status).to_lowercase(),
            run_id: doc.run_id,
            schema_version: doc.schema_version,
            kernel_release: doc.provenance.kernel.release,
            arch: doc.provenance.machine.arch,
            suite: doc.provenance.suite.name,
        }
    }

    /// From a boot without a guest document (it panicked, hung, lost its
    /// result): the host's id for the boot, its classification as the
    /// status, schema version 0 (no document).
    fn of_docless_boot(boot: BootRecord) -> Result<Index, ValidationError> {
        let run_id = boot.boot.envelope_id.ok_or(ValidationError::Unnamed)?;
        // Never a guest's id: the envelope would stand in for its document.
        if !run_id.starts_with(HOST_ID_PREFIX) {
            return Err(ValidationError::NotHostId { id: run_id });
        }
        // The suite is in the image; the cmdline names it only when the
        // run chose one there. Otherwise the listing leaves it blank.
        let suite = loads::suite::split_cmdline(&boot.cmdline)
            .into_iter()
            .find_map(|w| w.strip_prefix("bootbench.suite=").map(str::to_string))
            .unwrap_or_default();
        // An `ok` boot whose document was lost or unreadable has no result:
        // not to be listed as if it had one.
        let status = match boot.boot.classification.as_str() {
            "ok" => "no_document".to_string(),
            _ => boot.boot.classification,
        };
        Ok(Index {
            run_id,
            schema_version: 0,
            status,
            kernel_release: boot.kernel.release.unwrap_or_default(),
            arch: boot.machine.arch,
            suite,
        })
    }
}

/// sha256 of `json`'s canonical form (what [`RunSummary::sha256`] holds),
/// or `None` if it is not JSON.
pub fn canonical_sha256(json: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(json).ok()?;
    let canon = serde_json::to_vec(&canonical(value)).ok()?;
    Some(hex::encode(Sha256::digest(&canon)))
}

/// An open store.
pub struct Store {
    /// The connection (the lab queue's queries use it too).
    pub(in crate::service) conn: Connection,
    /// The file.
    pub(in crate::service) path: PathBuf,
    /// The file's layout version: a writer's is [`STORE_VERSION`], a
    /// reader's what it found.
    layout: i64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

const SUMMARY_COLUMNS: &str =
    "run_id, kind, sha256, bytes, received_at, remote, status, kernel_release, arch, suite, label, token_name";
/// [`SUMMARY_COLUMNS`] in a layout 1 store, which a reader does not migrate.
const SUMMARY_COLUMNS_LAYOUT_1: &str =
    "run_id, kind, sha256, bytes, received_at, remote, status, kernel_release, arch, suite, label, NULL";

/// The listing's filters, `?1` to `?4`: kernel, label, since, until (each
/// NULL when not given).
const LIST_FILTERS: &str = "(?1 IS NULL OR kernel_release = ?1) AND (?2 IS NULL OR label = ?2)
    AND (?3 IS NULL OR received_at >= ?3) AND (?4 IS NULL OR received_at < ?4)";
/// The rows after a [`Cursor`] (`?5` to `?7`, NULL for the first page) in
/// the listing's order, `ORDER BY received_at DESC, run_id, kind`.
const LIST_AFTER: &str = "(?5 IS NULL OR received_at < ?5
    OR (received_at = ?5 AND (run_id > ?6 OR (run_id = ?6 AND kind > ?7))))";

fn summary_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunSummary> {
    Ok(RunSummary {
        run_id: row.get(0)?,
        kind: RunKind::from_name(&row.get::<_, String>(1)?),
        sha256: row.get(2)?,
        bytes: row.get::<_, i64>(3)?.max(0) as u64,
        received_at: row.get(4)?,
        remote: row.get(5)?,
        status: row.get(6)?,
        kernel_release: row.get(7)?,
        arch: row.get(8)?,
        suite: row.get(9)?,
        label: row.get(10)?,
        token_name: row.get(11)?,
    })
}

fn token_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredToken> {
    let text: String = row.get(1)?;
    let mut digest = [0u8; 32];
    hex::decode_to_slice(&text, &mut digest)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(StoredToken {
        name: row.get(0)?,
        scope: Scope { upload: row.get(2)?, read: row.get(3)? },
        created_at: row.get(4)?,
        revoked_at: row.get(5)?,
        digest,
    })
}

/// Now, as the store writes times (RFC 3339, UTC, whole seconds).
pub(in crate::service) fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Brings the store on `conn` up to [`STORE_VERSION`] with the
/// [`MIGRATIONS`] above its `user_version`: one IMMEDIATE transaction that
/// reads the version inside it, so two writers opening an older store at
/// once migrate it once.
fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (to, sql) in MIGRATIONS.iter().filter(|(to, _)| *to > version) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", to)?;
    }
    tx.commit()
}

/// What an opened SQLite file holds, before it is taken as a store.
struct Found {
    /// Its `user_version`: the store layout, 0 for a new file.
    version: i64,
    /// Whether it has the runs table.
    has_runs: bool,
    /// How many tables it has.
    tables: i64,
}

impl Found {
    /// Reads it: a file that is not SQLite, or a layout newer than this
    /// build's, is an error naming the file.
    fn read(conn: &Connection, path: &Path) -> Result<Found, StoreError> {
        let open_err = |source| StoreError::Open { path: path.to_path_buf(), source };
        let version: i64 = match conn.query_row("PRAGMA user_version", [], |r| r.get(0)) {
            Ok(v) => v,
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) => {
                return Err(StoreError::NotAStore { path: path.to_path_buf(), why: "it is not an SQLite database" })
            }
            Err(e) => return Err(open_err(e)),
        };
        let (tables, has_runs): (i64, bool) = conn
            .query_row(
                "SELECT COUNT(*), COALESCE(SUM(name = 'runs'), 0) > 0 FROM sqlite_master \
                 WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(open_err)?;
        if version > STORE_VERSION && has_runs {
            return Err(StoreError::NewerLayout { path: path.to_path_buf(), found: version });
        }
        if version > STORE_VERSION {
            return Err(StoreError::NotAStore {
                path: path.to_path_buf(),
                why: "it is an SQLite database of another program (no runs table)",
            });
        }
        Ok(Found { version, has_runs, tables })
    }
}

impl Store {
    /// Opens (creating if needed) the store at `path` for writing: the
    /// receiver's. Runs [`WRITER_PRAGMAS`] and brings the layout up to
    /// [`STORE_VERSION`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |source| StoreError::Open { path: path.to_path_buf(), source };
        let mut conn = Connection::open(path).map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // Another program's database is left as it is: no tables of ours
        // added, no journal mode changed.
        let found = Found::read(&conn, path)?;
        if !found.has_runs && found.tables > 0 {
            return Err(StoreError::NotAStore {
                path: path.to_path_buf(),
                why: "it is an SQLite database with other tables and no runs table",
            });
        }
        set_writer_pragmas(&conn, path)?;
        migrate(&mut conn).map_err(open_err)?;
        Ok(Store { conn, path: path.to_path_buf(), layout: STORE_VERSION })
    }

    /// Opens the existing store at `path` for reading only: what `compare
    /// --store` and `contest-report --store` use. It never creates a file
    /// and runs no schema set-up (an older layout is read as it is), and a
    /// path that is no store is an error naming it. SQLite still needs the
    /// store's `-shm` file, which it makes when `serve` is not running: a
    /// store in a directory this user cannot write, with no `-shm` beside
    /// it, does not open.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing { path: path.to_path_buf() });
        }
        let not_a_store = |why| StoreError::NotAStore { path: path.to_path_buf(), why };
        if !path.is_file() {
            return Err(not_a_store("it is not a file"));
        }
        let open_err = |source| StoreError::Open { path: path.to_path_buf(), source };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        let found = Found::read(&conn, path)?;
        if !found.has_runs {
            return Err(not_a_store("it has no runs table"));
        }
        Ok(Store { conn, path: path.to_path_buf(), layout: found.version })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(in crate::service) fn query_err(&self, what: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError + '_ {
        move |source| StoreError::Query { path: self.path.clone(), what, source }
    }

    fn summary_columns(&self) -> &'static str {
        if self.layout >= 2 {
            SUMMARY_COLUMNS
        } else {
            SUMMARY_COLUMNS_LAYOUT_1
        }
    }

    /// Stores `run` unless its run id and kind are there already; then it
    /// says whether the stored content is the same. `remote` is who sent
    /// it, `token_name` the name of the token it came with. One
    /// transaction, so two concurrent uploads of one run store it once.
    pub fn put(
        &mut self,
        run: &ValidatedRun,
        remote: Option<&str>,
        token_name: Option<&str>,
    ) -> Result<PutOutcome, StoreError> {
        let path = &self.path;
        let err = |what| move |source| StoreError::Query { path: path.clone(), what, source };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err("starting a transaction"))?;
        let existing: Option<String> = tx
            .query_row(
                "SELECT sha256 FROM runs WHERE run_id = ?1 AND kind = ?2",
                params![run.run_id, run.kind.name()],
                |r| r.get(0),
            )
            .optional()
            .map_err(err("looking up the run"))?;
        let outcome = match existing {
            Some(sha) if sha == run.sha256 => PutOutcome::AlreadyStored,
            Some(sha) => PutOutcome::Conflict { existing_sha256: sha },
            None => {
                tx.execute(
                    "INSERT INTO runs (run_id, kind, sha256, body, bytes, received_at, remote, schema_version, status, kernel_release, arch, suite, label, token_name)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                    params![
                        run.run_id,
                        run.kind.name(),
                        run.sha256,
                        run.body,
                        run.body.len() as i64,
                        now(),
                        remote,
                        run.schema_version,
                        run.status,
                        run.kernel_release,
                        run.arch,
                        run.suite,
                        run.label,
                        token_name
                    ],
                )
                .map_err(err("inserting the run"))?;
                PutOutcome::Stored
            }
        };
        tx.commit().map_err(err("committing"))?;
        Ok(outcome)
    }

    /// Runs, newest first, at most `limit`.
    pub fn list(&self, limit: usize) -> Result<Vec<RunSummary>, StoreError> {
        Ok(self.page(&ListQuery { limit, ..ListQuery::default() })?.runs)
    }

    /// One page of the listing (see [`ListQuery`]), with the number of
    /// runs that match and where the next page starts.
    pub fn page(&self, q: &ListQuery) -> Result<RunPage, StoreError> {
        let what = "listing runs";
        let total: i64 = self
            .conn
            .query_row(
                &format!("SELECT count(*) FROM runs WHERE {LIST_FILTERS}"),
                params![q.kernel, q.label, q.since, q.until],
                |r| r.get(0),
            )
            .map_err(self.query_err(what))?;
        let sql = format!(
            "SELECT {} FROM runs WHERE {LIST_FILTERS} AND {LIST_AFTER} ORDER BY received_at DESC, run_id, kind LIMIT ?8",
            self.summary_columns()
        );
        let after = q.after.as_ref();
        // One more than asked, to know whether there is a next page.
        let limit = i64::try_from(q.limit.saturating_add(1)).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare(&sql).map_err(self.query_err(what))?;
        let mut runs = stmt
            .query_map(
                params![
                    q.kernel,
                    q.label,
                    q.since,
                    q.until,
                    after.map(|c| &c.received_at),
                    after.map(|c| &c.run_id),
                    after.map(|c| c.kind.name()),
                    limit
                ],
                summary_row,
            )
            .map_err(self.query_err(what))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.query_err(what))?;
        let next = if runs.len() > q.limit {
            runs.truncate(q.limit);
            runs.last().map(Cursor::of)
        } else {
            None
        };
        Ok(RunPage { runs, total: total.max(0) as u64, next })
    }

    /// The summaries stored for `run_id` (none, one or both kinds).
    pub fn summaries(&self, run_id: &str) -> Result<Vec<RunSummary>, StoreError> {
        let sql = format!("SELECT {} FROM runs WHERE run_id = ?1 ORDER BY kind DESC", self.summary_columns());
        let mut stmt = self.conn.prepare(&sql).map_err(self.query_err("looking up a run"))?;
        let rows = stmt
            .query_map([run_id], summary_row)
            .map_err(self.query_err("looking up a run"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.query_err("looking up a run"))?;
        Ok(rows)
    }

    /// Answers a trivial query on both tables: whether the store works.
    pub fn ping(&self) -> Result<(), StoreError> {
        self.conn
            .query_row("SELECT EXISTS (SELECT 1 FROM runs), EXISTS (SELECT 1 FROM tokens)", [], |_| Ok(()))
            .map_err(self.query_err("checking the store"))
    }

    /// Adds a token named `name` (checked by the caller with
    /// [`crate::service::tokens::check_name`]) with the secret's `digest`.
    pub fn add_token(&self, name: &str, digest: &TokenDigest, scope: Scope) -> Result<(), StoreError> {
        let what = "adding a token";
        let inserted = self.conn.execute(
            "INSERT INTO tokens (name, sha256, can_upload, can_read, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![name, hex::encode(digest), scope.upload, scope.read, now()],
        );
        match inserted {
            Ok(_) => Ok(()),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ConstraintViolation) => {
                let named: bool = self
                    .conn
                    .query_row("SELECT EXISTS (SELECT 1 FROM tokens WHERE name = ?1)", [name], |r| r.get(0))
                    .map_err(self.query_err(what))?;
                Err(if named {
                    StoreError::TokenExists { path: self.path.clone(), name: name.to_string() }
                } else {
                    StoreError::TokenReused { path: self.path.clone() }
                })
            }
            Err(e) => Err(self.query_err(what)(e)),
        }
    }

    /// Every stored token, revoked ones included, oldest first.
    pub fn tokens(&self) -> Result<Vec<StoredToken>, StoreError> {
        let what = "reading the tokens";
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT name, sha256, can_upload, can_read, created_at, revoked_at FROM tokens ORDER BY created_at, name",
            )
            .map_err(self.query_err(what))?;
        let rows = stmt
            .query_map([], token_row)
            .map_err(self.query_err(what))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.query_err(what))?;
        Ok(rows)
    }

    /// Revokes token `name`: from now on it is refused. Its row stays, so
    /// the runs it stored keep their token's name.
    pub fn revoke_token(&self, name: &str) -> Result<Revocation, StoreError> {
        let what = "revoking a token";
        let revoked_at: Option<Option<String>> = self
            .conn
            .query_row("SELECT revoked_at FROM tokens WHERE name = ?1", [name], |r| r.get(0))
            .optional()
            .map_err(self.query_err(what))?;
        match revoked_at {
            None => Err(StoreError::NoSuchToken { path: self.path.clone(), name: name.to_string() }),
            Some(Some(at)) => Ok(Revocation::Already(at)),
            Some(None) => {
                self.conn
                    .execute(
                        "UPDATE tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at IS NULL",
                        params![name, now()],
                    )
                    .map_err(self.query_err(what))?;
                Ok(Revocation::Revoked)
            }
        }
    }

    /// The body stored for `run_id`: the envelope if there is one, else
    /// the document; or exactly `kind`.
    pub fn body(&self, run_id: &str, kind: Option<RunKind>) -> Result<Option<(RunKind, Vec<u8>)>, StoreError> {
        let kinds: &[RunKind] = match kind {
            Some(RunKind::Envelope) => &[RunKind::Envelope],
            Some(RunKind::Document) => &[RunKind::Document],
            None => &[RunKind::Envelope, RunKind::Document],
        };
        for k in kinds {
            let body: Option<Vec<u8>> = self
                .conn
                .query_row("SELECT body FROM runs WHERE run_id = ?1 AND kind = ?2", params![run_id, k.name()], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(self.query_err("reading a run"))?;
            if let Some(b) = body {
                return Ok(Some((*k, b)));
            }
        }
        Ok(None)
    }

    /// Reads run `run_id`: the envelope if stored, else the document; read
    /// through the results schema migration as a results file is.
    pub fn load(&self, run_id: &str) -> Result<StoredRun, StoreError> {
        let (kind, body) = self
            .body(run_id, None)?
            .ok_or_else(|| StoreError::NotFound { path: self.path.clone(), run_id: run_id.to_string() })?;
        let value: serde_json::Value = serde_json::from_slice(&body).map_err(|source| StoreError::Corrupt {
            path: self.path.clone(),
            run_id: run_id.to_string(),
            kind: kind.name(),
            source,
        })?;
        let origin = format!("run '{run_id}' ({}) in the results store {}", kind.name(), self.path.display());
        Ok(match kind {
            RunKind::Envelope => StoredRun::Envelope(migrate_results(value, &origin).map_err(StoreError::Migration)?),
            RunKind::Document => {
                StoredRun::Document(Box::new(migrate_document(value, &origin).map_err(StoreError::Migration)?))
            }
        })
    }
}

#[cfg(test)]
impl Store {
    /// Caps the database at its current size plus `extra_pages` (a
    /// per-connection limit), so a test can fill it up.
    pub(crate) fn limit_pages(&self, extra_pages: i64) {
        let pages: i64 = self.conn.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
        let _: i64 =
            self.conn.query_row(&format!("PRAGMA max_page_count = {}", pages + extra_pages), [], |r| r.get(0)).unwrap();
    }
}

/// The value of pragma `name` on `conn` as text (numbers in decimal,
/// names lower-cased), as [`WRITER_PRAGMAS`] writes them.
fn pragma_text(conn: &Connection, name: &str) -> rusqlite::Result<String> {
    conn.pragma_query_value(None, name, |r| r.get::<_, rusqlite::types::Value>(0)).map(|v| match v {
        rusqlite::types::Value::Integer(i) => i.to_string(),
        rusqlite::types::Value::Text(t) => t.to_lowercase(),
        other => format!("{other:?}"),
    })
}

/// Runs [`WRITER_PRAGMAS`] on `conn` (the store at `path`) and checks that
/// SQLite took each value: WAL cannot be set on every filesystem.
fn set_writer_pragmas(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    for (name, wanted) in WRITER_PRAGMAS {
        let err = |source| StoreError::Query { path: path.to_path_buf(), what: "setting a pragma", source };
        conn.pragma_update(None, name, wanted).map_err(err)?;
        let got = pragma_text(conn, name).map_err(err)?;
        if got != *wanted {
            return Err(StoreError::Pragma { path: path.to_path_buf(), name, wanted, got });
        }
    }
    Ok(())
}

/// Reads run `run_id` from the store file `db` (for `compare --store` and
/// `contest-report --store`), opened read-only: the host envelope when
/// stored, else the guest's document. Use [`StoredRun::into_results_file`]
/// to treat it like a results file.
pub fn load_run(db: &Path, run_id: &str) -> Result<StoredRun, StoreError> {
    Store::open_read_only(db)?.load(run_id)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use loads::schema::{Provenance, Status};

    /// A complete document of run `id` with nothing measured (for the
    /// receiver's tests too).
    pub(crate) fn doc(id: &str) -> RunDocument {
        let mut p = Provenance::default();
        p.kernel.release = "6.1.0-test".into();
        p.machine.arch = "x86_64".into();
        p.suite.name = "quick".into();
        RunDocument {
            schema_version: SCHEMA_VERSION,
            run_id: id.into(),
            status: Status::Complete,
            errors: vec![],
            provenance: p,
            timings: Default::default(),
            workloads: vec![],
        }
    }

    fn envelope(id: &str) -> ResultsFile {
        let boot = BootRecord { label: "base".into(), result: Some(doc(id)), ..Default::default() };
        ResultsFile { boots: vec![boot], ..ResultsFile::default() }
    }

    #[test]
    fn same_run_twice_is_stored_once_and_other_content_conflicts() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        let body = serde_json::to_vec(&doc("r1")).unwrap();
        let run = validate(body.clone(), "r1").unwrap();
        assert_eq!(store.put(&run, Some("10.0.2.15"), Some("lab-1")).unwrap(), PutOutcome::Stored);
        // Pretty-printed is the same content.
        let pretty = serde_json::to_vec_pretty(&doc("r1")).unwrap();
        assert_eq!(store.put(&validate(pretty, "r1").unwrap(), None, None).unwrap(), PutOutcome::AlreadyStored);
        let mut other = doc("r1");
        other.status = Status::Partial;
        let other = validate(serde_json::to_vec(&other).unwrap(), "r1").unwrap();
        assert!(
            matches!(store.put(&other, None, None).unwrap(), PutOutcome::Conflict { existing_sha256 } if existing_sha256 == run.sha256)
        );
        assert_eq!(store.list(10).unwrap().len(), 1);
        // The host's envelope of the same run is a second kind, not a conflict.
        let env = validate(serde_json::to_vec(&envelope("r1")).unwrap(), "r1").unwrap();
        assert_eq!(env.kind, RunKind::Envelope);
        assert_eq!(store.put(&env, None, None).unwrap(), PutOutcome::Stored);
        let rows = store.summaries("r1").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].kind, RunKind::Envelope);
        assert_eq!(rows[1].remote.as_deref(), Some("10.0.2.15"));
        assert_eq!(rows[1].token_name.as_deref(), Some("lab-1"));
        assert_eq!(rows[0].token_name, None);
        assert_eq!(rows[1].kernel_release, "6.1.0-test");
    }

    #[test]
    fn a_boot_without_a_document_is_stored_under_the_hosts_id_with_its_classification() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let mut boot = BootRecord { label: "cand".into(), ..Default::default() };
        boot.cmdline = "console=ttyS0 bootbench.suite=quick panic=-1".into();
        boot.kernel.release = Some("6.1.0-bad".into());
        boot.machine.arch = "x86_64".into();
        boot.boot.classification = "panic".into();
        boot.console_log = "Kernel panic - not syncing: VFS".into();
        let file = |b: &BootRecord| serde_json::to_vec(&ResultsFile { boots: vec![b.clone()], ..Default::default() });
        // Without the host's id, nothing names it.
        let e = validate(file(&boot).unwrap(), "host-1").unwrap_err();
        assert!(matches!(e, ValidationError::Unnamed), "{e:?}");
        boot.boot.envelope_id = Some("host-1".into());
        let e = validate(file(&boot).unwrap(), "host-2").unwrap_err().to_string();
        assert!(e.contains("names run 'host-2'") && e.contains("'host-1'"), "{e}");
        // Never under a guest's id: it would stand in for that run's document.
        let mut guest_id = boot.clone();
        guest_id.boot.envelope_id = Some("run-1".into());
        let e = validate(file(&guest_id).unwrap(), "run-1").unwrap_err();
        assert!(matches!(e, ValidationError::NotHostId { .. }), "{e:?}");
        // An `ok` boot whose document was lost is not listed as a result.
        let mut lost = boot.clone();
        lost.boot.classification = "ok".into();
        assert_eq!(validate(file(&lost).unwrap(), "host-1").unwrap().status, "no_document");
        let run = validate(file(&boot).unwrap(), "host-1").unwrap();
        assert_eq!((run.kind, run.schema_version, run.status.as_str()), (RunKind::Envelope, 0, "panic"));
        assert_eq!(
            (run.kernel_release.as_str(), run.arch.as_str(), run.suite.as_str()),
            ("6.1.0-bad", "x86_64", "quick")
        );
        let mut store = Store::open(&db).unwrap();
        assert_eq!(store.put(&run, None, None).unwrap(), PutOutcome::Stored);
        drop(store);
        let f = load_run(&db, "host-1").unwrap().into_results_file();
        assert_eq!(f.boots.len(), 1);
        assert_eq!(f.boots[0].console_log, "Kernel panic - not syncing: VFS");
        assert!(f.boots[0].result.is_none());
    }

    #[test]
    fn load_run_prefers_the_envelope_and_wraps_a_bare_document() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let mut store = Store::open(&db).unwrap();
        store.put(&validate(serde_json::to_vec(&doc("d1")).unwrap(), "d1").unwrap(), None, None).unwrap();
        store.put(&validate(serde_json::to_vec(&doc("e1")).unwrap(), "e1").unwrap(), None, None).unwrap();
        store.put(&validate(serde_json::to_vec(&envelope("e1")).unwrap(), "e1").unwrap(), None, None).unwrap();
        drop(store);
        let d = load_run(&db, "d1").unwrap();
        assert!(matches!(d, StoredRun::Document(_)));
        let f = d.into_results_file();
        assert_eq!(f.boots.len(), 1);
        assert_eq!(f.boots[0].result.as_ref().unwrap().run_id, "d1");
        assert_eq!(f.boots[0].kernel.release.as_deref(), Some("6.1.0-test"));
        let e = load_run(&db, "e1").unwrap();
        assert!(matches!(&e, StoredRun::Envelope(f) if f.boots[0].label == "base"));
        let missing = load_run(&db, "nope").unwrap_err().to_string();
        assert!(missing.contains("nope") && missing.contains("s.db"), "{missing}");
        let no_db = load_run(&dir.path().join("absent.db"), "d1").unwrap_err().to_string();
        assert!(no_db.contains("absent.db"), "{no_db}");
    }

    #[test]
    fn validation_refuses_what_cannot_be_stored() {
        let ok = serde_json::to_vec(&doc("r1")).unwrap();
        for (body, url_id, word) in [
            (b"not json".to_vec(), "r1", "not JSON"),
            (br#"{"a":1}"#.to_vec(), "r1", "not a bootbench result"),
            (ok.clone(), "r2", "names run 'r2'"),
            (ok.clone(), "../x", "run id"),
        ] {
            let e = validate(body, url_id).unwrap_err().to_string();
            assert!(e.contains(word), "{word}: {e}");
        }
        let mut newer = doc("r1");
        newer.schema_version = SCHEMA_VERSION + 1;
        let e = validate(serde_json::to_vec(&newer).unwrap(), "r1").unwrap_err().to_string();
        assert!(e.contains("schema_version"), "{e}");
        let mut two = envelope("r1");
        two.boots.push(two.boots[0].clone());
        let e = validate(serde_json::to_vec(&two).unwrap(), "r1").unwrap_err().to_string();
        assert!(e.contains("exactly one boot (this one has 2)"), "{e}");
        let mut other = envelope("r1");
        other.format = "something-else".into();
        let e = validate(serde_json::to_vec(&other).unwrap(), "r1").unwrap_err().to_string();
        assert!(e.contains("something-else"), "{e}");
    }

    #[test]
    fn a_newer_store_layout_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch("CREATE TABLE runs (run_id TEXT)").unwrap();
        conn.pragma_update(None, "user_version", STORE_VERSION + 1).unwrap();
        drop(conn);
        let e = Store::open(&db).unwrap_err().to_string();
        assert!(e.contains("layout version"), "{e}");
    }

    #[test]
    fn another_programs_database_or_a_text_file_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let foreign = dir.path().join("notes.db");
        let conn = Connection::open(&foreign).unwrap();
        conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me')").unwrap();
        drop(conn);
        let before = std::fs::read(&foreign).unwrap();
        let tagged = dir.path().join("tagged.db");
        let conn = Connection::open(&tagged).unwrap();
        conn.execute_batch("CREATE TABLE t (x)").unwrap();
        conn.pragma_update(None, "user_version", 42).unwrap();
        drop(conn);
        for db in [&foreign, &tagged] {
            for e in [Store::open(db).unwrap_err(), Store::open_read_only(db).unwrap_err()] {
                assert!(matches!(e, StoreError::NotAStore { .. }), "{e:?}");
                assert!(e.to_string().contains(&db.display().to_string()), "{e}");
            }
        }
        assert_eq!(std::fs::read(&foreign).unwrap(), before, "the foreign database was changed");
        let conn = Connection::open(&foreign).unwrap();
        assert_eq!(pragma(&conn, "journal_mode"), "delete");
        let text = dir.path().join("runs.txt");
        std::fs::write(&text, "not a database at all, but long enough to have a header of some sort\n".repeat(4))
            .unwrap();
        let e = Store::open(&text).unwrap_err().to_string();
        assert!(e.contains("not an SQLite database") && e.contains("runs.txt"), "{e}");
    }

    fn pragma(conn: &Connection, name: &str) -> String {
        pragma_text(conn, name).unwrap()
    }

    #[test]
    fn the_writer_runs_in_wal_mode_with_synchronous_full() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let store = Store::open(&db).unwrap();
        assert_eq!(pragma(&store.conn, "journal_mode"), "wal");
        assert_eq!(pragma(&store.conn, "synchronous"), "2", "synchronous=FULL");
        // Set explicitly, not left to SQLite's default: a connection that
        // starts elsewhere ends at WAL and FULL.
        let conn = Connection::open(dir.path().join("t.db")).unwrap();
        conn.execute_batch("PRAGMA journal_mode = DELETE; PRAGMA synchronous = OFF;").unwrap();
        set_writer_pragmas(&conn, &db).unwrap();
        assert_eq!(pragma(&conn, "journal_mode"), "wal");
        assert_eq!(pragma(&conn, "synchronous"), "2");
    }

    #[test]
    fn readers_open_read_only_and_never_create_or_change_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.db");
        let e = load_run(&missing, "r1").unwrap_err();
        assert!(matches!(e, StoreError::Missing { .. }), "{e}");
        assert!(e.to_string().contains("absent.db"), "{e}");
        assert!(!missing.exists(), "a reader created {}", missing.display());

        let other_db = dir.path().join("other.db");
        Connection::open(&other_db).unwrap().execute_batch("CREATE TABLE notes (t TEXT);").unwrap();
        for (name, content, why) in [
            ("empty.db", None, "no runs table"),
            ("text.db", Some(b"hello, not a database\n".repeat(100)), "not an SQLite database"),
            ("other.db", None, "no runs table"),
        ] {
            let path = dir.path().join(name);
            if let Some(c) = &content {
                std::fs::write(&path, c).unwrap();
            } else if !path.exists() {
                std::fs::write(&path, b"").unwrap();
            }
            let before = std::fs::read(&path).unwrap();
            let e = load_run(&path, "r1").unwrap_err();
            assert!(matches!(e, StoreError::NotAStore { .. }), "{name}: {e}");
            let text = e.to_string();
            assert!(
                text.contains(name) && text.contains("not a bootbench results store") && text.contains(why),
                "{text}"
            );
            assert_eq!(std::fs::read(&path).unwrap(), before, "{name} was changed by a reader");
        }

        let db = dir.path().join("s.db");
        let mut store = Store::open(&db).unwrap();
        store.put(&validate(serde_json::to_vec(&doc("r1")).unwrap(), "r1").unwrap(), None, None).unwrap();
        let reader = Store::open_read_only(&db).unwrap();
        assert!(reader.conn.is_readonly(rusqlite::MAIN_DB).unwrap());
        assert!(matches!(reader.load("r1").unwrap(), StoredRun::Document(_)));
    }

    #[test]
    fn bodies_go_through_the_results_migration_both_ways() {
        // In: a document the migration cannot read is refused with its reason.
        let mut old = doc("r1");
        old.schema_version = 0;
        let e = validate(serde_json::to_vec(&old).unwrap(), "r1").unwrap_err();
        assert!(matches!(&e, ValidationError::SchemaVersion(MigrationError::TooOld { .. })), "{e:?}");
        let mut env = envelope("r1");
        env.boots[0].result.as_mut().unwrap().schema_version = SCHEMA_VERSION + 1;
        let e = validate(serde_json::to_vec(&env).unwrap(), "r1").unwrap_err();
        assert!(matches!(&e, ValidationError::SchemaVersion(MigrationError::Newer { .. })), "{e:?}");

        // Out: a stored body (an older bootbench's) is read as files are.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let mut store = Store::open(&db).unwrap();
        store.conn.execute(
            "INSERT INTO runs (run_id, kind, sha256, body, bytes, received_at, schema_version, status, kernel_release, arch, suite)
             VALUES ('r0', 'document', 'x', ?1, 1, 'now', 0, 'complete', 'k', 'x86_64', 'quick')",
            [serde_json::to_vec(&old).unwrap()],
        ).unwrap();
        let e = store.load("r0").unwrap_err();
        assert!(matches!(&e, StoreError::Migration(MigrationError::TooOld { .. })), "{e:?}");
        assert!(e.to_string().contains("'r0'") && e.to_string().contains("s.db"), "{e}");

        // An envelope reads back exactly as the same bytes read as a file.
        let body = serde_json::to_vec_pretty(&envelope("r1")).unwrap();
        store.put(&validate(body.clone(), "r1").unwrap(), None, None).unwrap();
        let file = dir.path().join("r1.json");
        std::fs::write(&file, &body).unwrap();
        match store.load("r1").unwrap() {
            StoredRun::Envelope(f) => assert_eq!(f, crate::results::migration::read_results(&file).unwrap()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_full_store_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        store.limit_pages(4);
        let mut big = doc("r1");
        big.errors.push(loads::schema::RunError { location: "x".into(), message: "y".repeat(1 << 20) });
        let e = store.put(&validate(serde_json::to_vec(&big).unwrap(), "r1").unwrap(), None, None).unwrap_err();
        assert!(e.is_full(), "{e:?}");
        assert!(store.list(10).unwrap().is_empty(), "nothing half-stored");
        let other = StoreError::NotFound { path: "s.db".into(), run_id: "r1".into() };
        assert!(!other.is_full());
    }

    /// The layout 1 tables, as a bootbench before named tokens made them.
    fn layout_1_store(db: &Path) {
        let conn = Connection::open(db).unwrap();
        conn.execute_batch(LAYOUT_1).unwrap();
        conn.execute(
            "INSERT INTO runs (run_id, kind, sha256, body, bytes, received_at, remote, schema_version, status, kernel_release, arch, suite)
             VALUES ('old', 'document', 'x', ?1, 1, '2024-01-01T00:00:00Z', '10.0.2.15', 1, 'complete', 'k', 'x86_64', 'quick')",
            [serde_json::to_vec(&doc("old")).unwrap()],
        )
        .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
    }

    #[test]
    fn a_layout_1_store_is_migrated_by_a_writer_and_read_as_it_is_by_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("old.db");
        layout_1_store(&db);
        // A reader changes nothing, and lists the old rows without a token.
        let reader = Store::open_read_only(&db).unwrap();
        let old = reader.list(10).unwrap();
        assert_eq!((old.len(), old[0].token_name.clone()), (1, None));
        drop(reader);
        let version = |db: &Path| -> i64 {
            Connection::open(db).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
        };
        assert_eq!(version(&db), 1);
        // A writer brings it up to date, once.
        let mut store = Store::open(&db).unwrap();
        assert_eq!(version(&db), STORE_VERSION);
        store.add_token("lab-1", &crate::service::tokens::digest("0123456789abcdef"), Scope::UPLOAD).unwrap();
        store.put(&validate(serde_json::to_vec(&doc("new")).unwrap(), "new").unwrap(), None, Some("lab-1")).unwrap();
        drop(store);
        let store = Store::open(&db).unwrap();
        let rows = store.list(10).unwrap();
        let names: Vec<_> = rows.iter().map(|r| (r.run_id.as_str(), r.token_name.as_deref())).collect();
        assert_eq!(names, [("new", Some("lab-1")), ("old", None)]);
        assert_eq!(store.tokens().unwrap().len(), 1);
        store.ping().unwrap();
    }

    #[test]
    fn a_layout_3_lab_machine_is_kept_and_gains_no_scratch_label_and_a_new_one_keeps_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("lab3.db");
        let conn = Connection::open(&db).unwrap();
        for sql in [LAYOUT_1, LAYOUT_2, LAYOUT_3] {
            conn.execute_batch(sql).unwrap();
        }
        conn.execute_batch(
            "INSERT INTO tokens (name, sha256, can_upload, can_read, created_at) VALUES ('box0', 'aa', 1, 0, 't');
             INSERT INTO lab_machines (name, arch, console, accel, poll_s, created_at)
             VALUES ('box0', 'x86_64', 'ttyS0', 'bare-metal', 10, 't');",
        )
        .unwrap();
        conn.pragma_update(None, "user_version", 3).unwrap();
        drop(conn);
        let mut store = Store::open(&db).unwrap();
        let old = store.machine("box0").unwrap();
        assert_eq!((old.spec.poll_s, old.spec.scratch_label), (10, None));
        let spec = crate::service::lab_queue::MachineSpec {
            arch: "x86_64".into(),
            console: "ttyS0".into(),
            accel: "bare-metal".into(),
            poll_s: 10,
            scratch_label: Some("bb-scratch".into()),
            pack_label: Some("bb-packs".into()),
        };
        store.add_machine("box1", &crate::service::tokens::digest("0123456789abcdef-box1"), &spec).unwrap();
        assert_eq!(store.machine("box1").unwrap().spec, spec);
        assert_eq!(old.spec.pack_label, None);
    }

    #[test]
    fn a_layout_4_job_is_kept_without_a_pack() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("lab4.db");
        let conn = Connection::open(&db).unwrap();
        for sql in [LAYOUT_1, LAYOUT_2, LAYOUT_3, LAYOUT_4] {
            conn.execute_batch(sql).unwrap();
        }
        conn.execute_batch(
            "INSERT INTO tokens (name, sha256, can_upload, can_read, created_at) VALUES ('box0', 'aa', 1, 0, 't');
             INSERT INTO lab_machines (name, arch, console, accel, poll_s, created_at, scratch_label)
             VALUES ('box0', 'x86_64', 'ttyS0', 'bare-metal', 10, 't', 'bb-s');
             INSERT INTO lab_jobs (machine, state, created_at, kernel_sha256, kernel_bytes, initrd_sha256,
             initrd_bytes, cmdline, token_sha256) VALUES ('box0', 'queued', 't', 'k', 1, 'i', 2, 'c', 'tt');",
        )
        .unwrap();
        conn.pragma_update(None, "user_version", 4).unwrap();
        drop(conn);
        let mut store = Store::open(&db).unwrap();
        let m = store.machine("box0").unwrap();
        assert_eq!((m.spec.scratch_label.as_deref(), m.spec.pack_label.as_deref()), (Some("bb-s"), None));
        let offer = store.lab_next("box0", "10.0.2.15:1").unwrap().unwrap();
        assert_eq!((offer.cmdline.as_str(), offer.pack), ("c", None));
    }

    #[test]
    fn tokens_are_added_listed_and_revoked_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let (a, b) = (crate::service::tokens::digest("secret-a-0123456789"), crate::service::tokens::digest("b"));
        store.add_token("lab-a", &a, Scope::UPLOAD).unwrap();
        store.add_token("reader", &b, Scope { upload: false, read: true }).unwrap();
        let e = store.add_token("lab-a", &crate::service::tokens::digest("other"), Scope::UPLOAD).unwrap_err();
        assert!(matches!(e, StoreError::TokenExists { .. }), "{e}");
        let e = store.add_token("lab-c", &a, Scope::UPLOAD).unwrap_err();
        assert!(matches!(e, StoreError::TokenReused { .. }), "{e}");
        let all = store.tokens().unwrap();
        let listed: Vec<_> = all.iter().map(|t| (t.name.as_str(), t.scope.name(), t.revoked_at.is_some())).collect();
        assert_eq!(listed, [("lab-a", "upload", false), ("reader", "read", false)]);
        assert_eq!(all[0].digest, a);
        assert_eq!(store.revoke_token("lab-a").unwrap(), Revocation::Revoked);
        assert!(matches!(store.revoke_token("lab-a").unwrap(), Revocation::Already(_)));
        assert!(matches!(store.revoke_token("nope").unwrap_err(), StoreError::NoSuchToken { .. }));
        let all = store.tokens().unwrap();
        assert!(all[0].revoked_at.is_some() && all[1].revoked_at.is_none());
    }

    #[test]
    fn pages_follow_the_cursor_and_filters_hold_on_every_page() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("s.db")).unwrap();
        for (i, kernel) in ["6.1", "6.1", "6.2", "6.1", "6.1"].iter().enumerate() {
            let mut d = doc(&format!("r{i}"));
            d.provenance.kernel.release = kernel.to_string();
            store.put(&validate(serde_json::to_vec(&d).unwrap(), &d.run_id).unwrap(), None, None).unwrap();
            // r4 newest; r2 and r3 in the same second (the run id breaks the tie).
            let at = format!("2024-05-0{}T00:00:00Z", [1, 2, 3, 3, 4][i]);
            store.conn.execute("UPDATE runs SET received_at = ?1 WHERE run_id = ?2", params![at, d.run_id]).unwrap();
        }
        let ids = |p: &RunPage| p.runs.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>();
        let mut q = ListQuery { limit: 2, ..ListQuery::default() };
        let mut seen = Vec::new();
        loop {
            let page = store.page(&q).unwrap();
            assert_eq!(page.total, 5);
            seen.extend(ids(&page));
            match page.next {
                // A cursor survives its text form (what a client sends back).
                Some(c) => q.after = Some(c.to_string().parse().unwrap()),
                None => break,
            }
        }
        assert_eq!(seen, ["r4", "r2", "r3", "r1", "r0"]);
        // A run arriving between pages does not shift the pages after it.
        let q1 = ListQuery { limit: 2, ..ListQuery::default() };
        let first = store.page(&q1).unwrap();
        store.put(&validate(serde_json::to_vec(&doc("r9")).unwrap(), "r9").unwrap(), None, None).unwrap();
        let second = store.page(&ListQuery { after: first.next, ..q1 }).unwrap();
        assert_eq!(ids(&second), ["r3", "r1"]);

        let kernel = ListQuery { limit: 10, kernel: Some("6.1".into()), ..ListQuery::default() };
        let page = store.page(&kernel).unwrap();
        assert_eq!(
            (ids(&page), page.total, page.next),
            (vec!["r4".into(), "r3".into(), "r1".into(), "r0".into()], 4, None)
        );
        let window = ListQuery {
            limit: 1,
            kernel: Some("6.1".into()),
            since: Some("2024-05-02T00:00:00Z".into()),
            until: Some("2024-05-04T00:00:00Z".into()),
            ..ListQuery::default()
        };
        let page = store.page(&window).unwrap();
        assert_eq!((ids(&page), page.total), (vec!["r3".into()], 2));
        let page = store.page(&ListQuery { after: page.next, ..window }).unwrap();
        assert_eq!((ids(&page), page.next), (vec!["r1".into()], None));
        let label = ListQuery { limit: 10, label: Some("base".into()), ..ListQuery::default() };
        assert_eq!(store.page(&label).unwrap().total, 0);
        for bad in [
            "",
            "x",
            "2024-05-01T00:00:00Z,r1",
            "2024-05-01T00:00:00Z,r1,other",
            "now,r1,document",
            "2024-05-01T00:00:00Z,../x,document",
        ] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad}");
        }
    }

    /// Found by the `upload_request` fuzz target: the same JSON, written
    /// otherwise, hashed otherwise when a number read one ULP off (the
    /// store tells a re-upload of the same content from a conflict by
    /// this hash).
    #[test]
    fn the_same_json_written_otherwise_has_the_same_canonical_sha256() {
        for number in ["29999999999999999999999999999999999999", "5.9629039448892714e+84"] {
            let body = format!(r#"{{"b":[1,{{"x":{number}}}],"a":"z"}}"#);
            let value: serde_json::Value = serde_json::from_str(&body).unwrap();
            let pretty = serde_json::to_vec_pretty(&value).unwrap();
            assert_eq!(canonical_sha256(&pretty), canonical_sha256(body.as_bytes()), "{number}");
        }
    }
}
