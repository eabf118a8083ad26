//! A saved results file as the uploads it makes: boot by boot, each as a
//! one-boot results file keyed by its guest document's run id (host
//! envelope included), or by the host's id for a boot that sent no
//! document; a bare result document goes as it is. Each body
//! holds the file's own JSON content (its top-level fields and that boot's,
//! as written, only re-encoded compactly), never this bootbench's model of
//! it: a file written by an older one, uploaded again, is the same run
//! ("already stored"), not other content under its run id (409) for fields
//! this version adds.

use super::FORMAT;
use anyhow::{bail, Context};
use loads::schema::RunDocument;
use std::path::Path;

/// One run to send.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedUpload {
    /// The run id.
    pub run_id: String,
    /// What the report calls it (`boot 3, label base`).
    pub what: String,
    /// The JSON body.
    pub body: Vec<u8>,
}

/// What `file` holds, as uploads, plus notes about boots that cannot be
/// uploaded (no guest document and, in older files, no host-made id:
/// nothing names them).
pub fn plan(file: &Path) -> anyhow::Result<(Vec<PlannedUpload>, Vec<String>)> {
    let text = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let value: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    if value.get("format").is_some_and(|f| f == FORMAT) {
        // Which boots have a document, and their run ids, come from the
        // file read as this bootbench reads it (migrated); the bodies from
        // the file as written.
        let results = crate::results::migration::read_results(file)?;
        // The boots taken out of the file's value, so that each body copies
        // only its own boot (console logs can be tens of MiB each).
        let mut value = value;
        let raw_boots = match value.get_mut("boots").map(serde_json::Value::take) {
            Some(serde_json::Value::Array(boots)) => boots,
            _ => Vec::new(),
        };
        if raw_boots.len() != results.boots.len() {
            bail!(
                "{}: {} boots as written but {} as read; cannot tell which is which",
                file.display(),
                raw_boots.len(),
                results.boots.len()
            );
        }
        let mut uploads = Vec::new();
        let mut skipped = Vec::new();
        for (i, boot) in results.boots.iter().enumerate() {
            let what = if boot.label.is_empty() {
                format!("boot {}", i + 1)
            } else {
                format!("boot {} ({})", i + 1, boot.label)
            };
            let run_id = match (&boot.result, &boot.boot.envelope_id) {
                (Some(doc), _) => Some(&doc.run_id),
                // A boot that sent no document goes under the host's id
                // for it.
                (None, id) => id.as_ref(),
            };
            let Some(run_id) = run_id else {
                // The receiver stores runs by their document's run id, which
                // a boot without one, written before boots had a host-made
                // id, does not have: its finished workloads stay in the
                // file only, and the note says so.
                let kept = boot.workloads_kept.as_ref().map_or(0, |k| k.workloads.len());
                let kept = match kept {
                    0 => String::new(),
                    n => format!("; its {n} finished workload(s) stay in {} only", file.display()),
                };
                skipped.push(format!(
                    "{what}: no guest document ({}{}), nothing to upload{kept}",
                    boot.boot.classification,
                    boot.result_error.as_deref().map(|e| format!(": {e}")).unwrap_or_default()
                ));
                continue;
            };
            let mut one = value.clone();
            one["boots"] = serde_json::Value::Array(vec![raw_boots[i].clone()]);
            // (`value` no longer holds any boot: the clone is the small top level.)
            let body = serde_json::to_vec(&one).context("cannot serialise a boot")?;
            uploads.push(PlannedUpload { run_id: run_id.clone(), what, body });
        }
        return Ok((uploads, skipped));
    }
    if value.get("format").is_some() {
        bail!("{} has format {} (expected '{FORMAT}' or a result document)", file.display(), value["format"]);
    }
    let doc: RunDocument = serde_json::from_value(value)
        .with_context(|| format!("{} is neither a bootbench results file nor a result document", file.display()))?;
    // The document exactly as saved: re-uploading the same file is then
    // byte-for-byte the same run.
    Ok((vec![PlannedUpload { run_id: doc.run_id.clone(), what: "document".into(), body: text }], Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{BootRecord, KeptWorkloads, ResultsFile};
    use loads::schema::WorkloadResult;

    #[test]
    fn a_boot_without_a_document_goes_under_its_host_id_or_is_skipped_and_its_kept_workloads_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let mut file = ResultsFile::default();
        let mut ok = BootRecord::default();
        ok.boot.classification = "ok".into();
        ok.result = Some(loads::runner::begin_document("run-1", None, None));
        let mut panicked = BootRecord::default();
        panicked.boot.classification = "panic".into();
        let fork = WorkloadResult { name: "fork".into(), ..Default::default() };
        panicked.workloads_kept = Some(KeptWorkloads { workloads: vec![fork], errors: Vec::new() });
        let mut silent = BootRecord::default();
        silent.boot.classification = "hang".into();
        let mut named = silent.clone();
        named.boot.envelope_id = Some("host-0123".into());
        file.boots = vec![ok, panicked, silent, named];
        file.write(&path).unwrap();
        let (uploads, skipped) = plan(&path).unwrap();
        assert_eq!(uploads.iter().map(|u| u.run_id.as_str()).collect::<Vec<_>>(), ["run-1", "host-0123"]);
        assert_eq!(uploads[1].what, "boot 4");
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(skipped[0].starts_with("boot 2: no guest document (panic)"), "{}", skipped[0]);
        assert!(
            skipped[0].contains("; its 1 finished workload(s) stay in ") && skipped[0].ends_with("r.json only"),
            "{}",
            skipped[0]
        );
        assert!(!skipped[1].contains("finished workload"), "{}", skipped[1]);
    }

    #[test]
    fn each_body_is_the_files_own_json_not_this_versions_serialisation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        let mut file = ResultsFile::default();
        let mut boot = BootRecord::default();
        boot.boot.classification = "ok".into();
        boot.result = Some(loads::runner::begin_document("run-7", None, None));
        file.boots = vec![boot.clone(), boot];
        file.boots[1].result.as_mut().unwrap().run_id = "run-8".into();
        file.write(&path).unwrap();
        // As an older bootbench wrote it: without a field this one always
        // writes (and reads as its default).
        let mut raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for b in raw["boots"].as_array_mut().unwrap() {
            assert!(b.as_object_mut().unwrap().remove("result_error").is_some(), "the field to leave out");
        }
        std::fs::write(&path, serde_json::to_vec(&raw).unwrap()).unwrap();
        let (uploads, _) = plan(&path).unwrap();
        assert_eq!(uploads.iter().map(|u| u.run_id.as_str()).collect::<Vec<_>>(), ["run-7", "run-8"]);
        for (i, u) in uploads.iter().enumerate() {
            // The file's own top-level fields and this boot as written: the
            // same content, so the receiver's "same run".
            let mut want = raw.clone();
            want["boots"] = serde_json::json!([raw["boots"][i].clone()]);
            let body: serde_json::Value = serde_json::from_slice(&u.body).unwrap();
            assert_eq!(body, want, "boot {i}");
        }
    }
}
