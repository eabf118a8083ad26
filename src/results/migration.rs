//! Reading results written by other versions of bootbench: the guest
//! document's `schema_version` is dispatched through a chain of migration
//! steps, each turning version k into k + 1, up to the version this build
//! understands. A document newer than that, or older than the oldest step,
//! is refused with a message that says which. Owns the JSON-level upgrade
//! only; it never changes a file on disk.

use crate::results::{ResultsFile, ENVELOPE_VERSION, FORMAT};
use loads::schema::{RunDocument, SCHEMA_VERSION};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One upgrade step: a document of version k in, version k + 1 out.
pub type Step = fn(Value) -> Result<Value, String>;

/// The migration chain of this build: `STEPS[i]` upgrades version
/// `OLDEST + i`. Version 1 is the first published layout, so the chain is
/// empty; add a step here (and bump `SCHEMA_VERSION`) when the layout
/// changes.
pub const STEPS: &[Step] = &[];
/// The oldest document version this build can read.
pub const OLDEST: u32 = SCHEMA_VERSION - STEPS.len() as u32;

/// Errors reading a document or results file of another version.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    /// The document has no `schema_version`.
    #[error("{context}: the result document has no numeric schema_version")]
    NoVersion {
        /// Where the document came from.
        context: String,
    },
    /// Written by a newer bootbench.
    #[error("{context}: result schema version {version} is newer than this bootbench reads (up to {current}); use a newer bootbench")]
    Newer {
        /// Where the document came from.
        context: String,
        /// Its version.
        version: u64,
        /// The newest this build reads.
        current: u32,
    },
    /// Older than any migration step.
    #[error(
        "{context}: result schema version {version} is older than any this bootbench can migrate (oldest: {oldest})"
    )]
    TooOld {
        /// Where the document came from.
        context: String,
        /// Its version.
        version: u64,
        /// The oldest readable version.
        oldest: u32,
    },
    /// A step failed.
    #[error("{context}: migrating the result document from schema version {from} failed: {why}")]
    Step {
        /// Where the document came from.
        context: String,
        /// The step's source version.
        from: u32,
        /// What the step said.
        why: String,
    },
    /// After migration the document does not have the current shape.
    #[error("{context}: the result document (schema version {version}) is not valid")]
    Invalid {
        /// Where the document came from.
        context: String,
        /// The version it claimed.
        version: u64,
        /// Parser error.
        #[source]
        source: serde_json::Error,
    },
    /// The results file cannot be read.
    #[error("cannot read results file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The results file is not JSON or not a results envelope.
    #[error("{origin} is not a bootbench results file")]
    NotResults {
        /// Where it came from: the file, or the stored run.
        origin: String,
        /// Parser error.
        #[source]
        source: serde_json::Error,
    },
    /// Wrong format marker or a newer envelope.
    #[error("{origin}: unsupported results format '{format}' version {version} (this bootbench reads '{FORMAT}' up to version {ENVELOPE_VERSION})")]
    Envelope {
        /// Where it came from: the file, or the stored run.
        origin: String,
        /// Its format field.
        format: String,
        /// Its version.
        version: u64,
    },
}

/// Upgrades a document through `steps` (which start at version `oldest`)
/// to `current` and parses it. Separate from [`migrate_document`] so the
/// dispatch can be tested with a chain of its own.
pub fn migrate_with(
    mut doc: Value,
    steps: &[Step],
    oldest: u32,
    current: u32,
    context: &str,
) -> Result<RunDocument, MigrationError> {
    let context = context.to_string();
    let version = doc
        .get("schema_version")
        .and_then(Value::as_u64)
        .ok_or_else(|| MigrationError::NoVersion { context: context.clone() })?;
    if version > u64::from(current) {
        return Err(MigrationError::Newer { context, version, current });
    }
    if version < u64::from(oldest) {
        return Err(MigrationError::TooOld { context, version, oldest });
    }
    let mut at = version as u32;
    while at < current {
        let step = steps.get((at - oldest) as usize).ok_or_else(|| MigrationError::Step {
            context: context.clone(),
            from: at,
            why: "no step".into(),
        })?;
        doc = step(doc).map_err(|why| MigrationError::Step { context: context.clone(), from: at, why })?;
        at += 1;
        if let Some(obj) = doc.as_object_mut() {
            obj.insert("schema_version".into(), at.into());
        }
    }
    serde_json::from_value(doc).map_err(|source| MigrationError::Invalid { context, version, source })
}

/// Reads a guest document of any version this build can migrate.
pub fn migrate_document(doc: Value, context: &str) -> Result<RunDocument, MigrationError> {
    migrate_with(doc, STEPS, OLDEST, SCHEMA_VERSION, context)
}

/// Reads a results file, migrating every boot's guest document.
pub fn read_results(path: &Path) -> Result<ResultsFile, MigrationError> {
    let text = std::fs::read_to_string(path).map_err(|source| MigrationError::Read { path: path.into(), source })?;
    let origin = path.display().to_string();
    let value: Value =
        serde_json::from_str(&text).map_err(|source| MigrationError::NotResults { origin: origin.clone(), source })?;
    migrate_results(value, &origin)
}

/// Reads what the analysis commands (`compare`, `report`,
/// `contest-report`, `calibrate`) take: a results file written by
/// `bootbench run -o`, or the document `bootbench local -o` writes (a
/// guest document, with the userland pack beside its fields), which is
/// read as a results file of one boot on this host ([`host_run_record`]).
/// `upload` keeps to [`read_results`]: a local document is not an
/// envelope to store.
pub fn read_results_or_local(path: &Path) -> Result<ResultsFile, MigrationError> {
    let text = std::fs::read_to_string(path).map_err(|source| MigrationError::Read { path: path.into(), source })?;
    let origin = path.display().to_string();
    let mut value: Value =
        serde_json::from_str(&text).map_err(|source| MigrationError::NotResults { origin: origin.clone(), source })?;
    let is_document = value.get("format").is_none() && value.get("schema_version").is_some();
    if !is_document {
        return migrate_results(value, &origin);
    }
    let pack = match value.as_object_mut().and_then(|o| o.remove("pack")) {
        None | Some(Value::Null) => None,
        Some(p) => Some(
            serde_json::from_value(p)
                .map_err(|source| MigrationError::NotResults { origin: format!("{origin}: its pack"), source })?,
        ),
    };
    let doc = migrate_document(value, &format!("{origin} (a bootbench local document)"))?;
    Ok(ResultsFile { boots: vec![host_run_record(doc, pack)], ..ResultsFile::default() })
}

/// The accel mode of a run on the host itself (`bootbench local`): no
/// virtual machine, so `compare` warns when it meets a guest's boots.
pub const HOST_ACCEL: &str = "none (host)";

/// A `bootbench local` document as one boot of a results file: the
/// machine and kernel are the host's, as the document's provenance says;
/// there is no QEMU, initramfs or console.
pub fn host_run_record(doc: RunDocument, pack: Option<crate::results::pack::PackRecord>) -> crate::results::BootRecord {
    use crate::results::{BootInfo, BootRecord, KernelRef, MachineShape};
    let p = &doc.provenance;
    let kernel = KernelRef {
        path: PathBuf::new(),
        image_sha256: p.kernel.image_sha256.clone().unwrap_or_default(),
        config_sha256: p.kernel.config_sha256.clone(),
        package: Some(format!("the host's running kernel {} (bootbench local)", p.kernel.release)),
        release: Some(p.kernel.release.clone()),
        commit: None,
    };
    let machine = MachineShape {
        arch: p.machine.arch.clone(),
        smp: p.machine.cpus,
        mem_mib: p.machine.mem_bytes >> 20,
        cpu: None,
        accel: HOST_ACCEL.into(),
        accel_reason: "bootbench local: the workloads ran on the host, without a virtual machine".into(),
        machine_type: None,
        cpu_model: Some(p.machine.cpu_model.clone()).filter(|m| !m.is_empty()),
    };
    let boot = BootInfo { classification: "ok".into(), ..BootInfo::default() };
    BootRecord {
        cmdline: p.kernel.cmdline.clone(),
        kernel,
        machine,
        boot,
        result: Some(doc),
        pack,
        ..BootRecord::default()
    }
}

/// Reads a results file's JSON, migrating every boot's guest document:
/// what [`read_results`] does after reading the file, and what the results
/// store does with an envelope it receives or reads back. `origin` names
/// where the JSON came from in errors.
pub fn migrate_results(mut value: Value, origin: &str) -> Result<ResultsFile, MigrationError> {
    let format = value.get("format").and_then(Value::as_str).unwrap_or_default().to_string();
    let version = value.get("version").and_then(Value::as_u64).unwrap_or(0);
    if format != FORMAT || version == 0 || version > u64::from(ENVELOPE_VERSION) {
        return Err(MigrationError::Envelope { origin: origin.to_string(), format, version });
    }
    let mut docs = Vec::new();
    if let Some(boots) = value.get_mut("boots").and_then(Value::as_array_mut) {
        for (i, boot) in boots.iter_mut().enumerate() {
            let doc = boot.get_mut("result").map(Value::take).unwrap_or(Value::Null);
            docs.push(if doc.is_null() { None } else { Some(migrate_document(doc, &format!("{origin} boot #{i}"))?) });
        }
    }
    let mut file: ResultsFile = serde_json::from_value(value)
        .map_err(|source| MigrationError::NotResults { origin: origin.to_string(), source })?;
    for (boot, doc) in file.boots.iter_mut().zip(docs) {
        boot.result = doc;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::BootRecord;
    use loads::schema::{GuestTimings, Provenance, Status};

    fn current_doc() -> RunDocument {
        RunDocument {
            schema_version: SCHEMA_VERSION,
            run_id: "r1".into(),
            status: Status::Complete,
            errors: vec![],
            provenance: Provenance::default(),
            timings: GuestTimings::default(),
            workloads: vec![],
        }
    }

    #[test]
    fn current_version_reads_unchanged() {
        let doc = current_doc();
        let v = serde_json::to_value(&doc).unwrap();
        assert_eq!(migrate_document(v, "t").unwrap(), doc);
    }

    #[test]
    fn newer_missing_and_too_old_versions_are_refused_clearly() {
        let mut v = serde_json::to_value(current_doc()).unwrap();
        v["schema_version"] = (SCHEMA_VERSION + 1).into();
        let e = migrate_document(v.clone(), "run.json boot #3").unwrap_err();
        assert!(matches!(e, MigrationError::Newer { .. }), "{e}");
        assert!(e.to_string().contains("run.json boot #3") && e.to_string().contains("newer"), "{e}");
        v.as_object_mut().unwrap().remove("schema_version");
        assert!(matches!(migrate_document(v.clone(), "t"), Err(MigrationError::NoVersion { .. })));
        v["schema_version"] = 0.into();
        let e = migrate_document(v, "t").unwrap_err();
        assert!(matches!(e, MigrationError::TooOld { version: 0, .. }), "{e}");
    }

    /// The dispatch walks a chain step by step; tested with a chain of its
    /// own (a step renaming `id` to `run_id`), since this build has no
    /// older version yet.
    #[test]
    fn dispatch_runs_each_step_in_order() {
        fn rename_id(mut v: Value) -> Result<Value, String> {
            let obj = v.as_object_mut().ok_or("not an object")?;
            let id = obj.remove("id").ok_or("no id")?;
            obj.insert("run_id".into(), id);
            Ok(v)
        }
        fn nothing(v: Value) -> Result<Value, String> {
            Ok(v)
        }
        let mut v = serde_json::to_value(current_doc()).unwrap();
        let obj = v.as_object_mut().unwrap();
        let id = obj.remove("run_id").unwrap();
        obj.insert("id".into(), id);
        obj.insert("schema_version".into(), 7.into());
        let steps: &[Step] = &[rename_id, nothing];
        let doc = migrate_with(v.clone(), steps, 7, 9, "t").unwrap();
        assert_eq!(doc.run_id, "r1");
        assert_eq!(doc.schema_version, 9);
        // A failing step names its source version and reason.
        let e = migrate_with(serde_json::json!({"schema_version": 7}), steps, 7, 9, "t").unwrap_err();
        assert!(e.to_string().contains("from schema version 7 failed: no id"), "{e}");
        // After migration the shape is still checked.
        let e = migrate_with(serde_json::json!({"schema_version": 8}), steps, 7, 9, "t").unwrap_err();
        assert!(matches!(e, MigrationError::Invalid { version: 8, .. }), "{e}");
    }

    #[test]
    fn results_files_are_read_through_the_migration() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        let mut f = ResultsFile::default();
        f.boots.push(BootRecord { label: "a".into(), result: Some(current_doc()), ..Default::default() });
        f.boots.push(BootRecord { label: "b".into(), ..Default::default() });
        f.write(&p).unwrap();
        assert_eq!(read_results(&p).unwrap(), f);

        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["boots"][0]["result"]["schema_version"] = 99.into();
        std::fs::write(&p, v.to_string()).unwrap();
        let e = read_results(&p).unwrap_err().to_string();
        assert!(e.contains("r.json boot #0") && e.contains("99"), "{e}");

        std::fs::write(&p, r#"{"format":"bootbench-results","version":9,"boots":[]}"#).unwrap();
        assert!(matches!(read_results(&p), Err(MigrationError::Envelope { version: 9, .. })));
        std::fs::write(&p, "{").unwrap();
        assert!(matches!(read_results(&p), Err(MigrationError::NotResults { .. })));
    }

    #[test]
    fn a_local_document_reads_as_one_host_boot_with_its_pack_and_an_envelope_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let mut doc = current_doc();
        doc.provenance.kernel.release = "6.1.0-host".into();
        doc.provenance.machine.cpus = 8;
        doc.provenance.machine.mem_bytes = 16 << 30;
        let mut v = serde_json::to_value(&doc).unwrap();
        v["pack"] = serde_json::json!({"image": "/p.img", "image_sha256": "ab", "image_bytes": 5});
        let local = dir.path().join("local.json");
        std::fs::write(&local, v.to_string()).unwrap();
        let f = read_results_or_local(&local).unwrap();
        assert_eq!(f.boots.len(), 1);
        let b = &f.boots[0];
        assert_eq!(b.result.as_ref(), Some(&doc));
        assert_eq!((b.machine.accel.as_str(), b.machine.smp, b.machine.mem_mib), (HOST_ACCEL, 8, 16 << 10));
        assert_eq!(b.kernel.release.as_deref(), Some("6.1.0-host"));
        assert_eq!(b.boot.classification, "ok");
        assert_eq!(b.pack.as_ref().map(|p| p.image_bytes), Some(5));
        // `upload` keeps to envelopes.
        assert!(matches!(read_results(&local), Err(MigrationError::Envelope { .. })));
        let env = dir.path().join("run.json");
        let file = ResultsFile { boots: vec![b.clone()], ..ResultsFile::default() };
        std::fs::write(&env, serde_json::to_string(&file).unwrap()).unwrap();
        assert_eq!(read_results_or_local(&env).unwrap(), file);
        // A document of a newer schema is refused, naming the file.
        v["schema_version"] = (SCHEMA_VERSION + 1).into();
        std::fs::write(&local, v.to_string()).unwrap();
        let e = read_results_or_local(&local).unwrap_err().to_string();
        assert!(e.contains("local.json") && e.contains("newer"), "{e}");
    }

    /// Found by the `results_migration` fuzz target: a results file
    /// written (as `ResultsFile::write` writes it) and read again was not
    /// the same when a number read one ULP off.
    #[test]
    fn a_written_results_file_reads_back_unchanged() {
        for number in ["29999999999999999999999999999999999999", "5.9629039448892714e+84"] {
            let mut doc = current_doc();
            doc.timings.init_start_s = number.parse().unwrap();
            let file = ResultsFile {
                boots: vec![BootRecord { result: Some(doc), ..Default::default() }],
                ..ResultsFile::default()
            };
            let written = serde_json::to_vec_pretty(&file).unwrap();
            let read = migrate_results(serde_json::from_slice(&written).unwrap(), "t").unwrap();
            assert_eq!(read, file, "{number}");
        }
    }
}
