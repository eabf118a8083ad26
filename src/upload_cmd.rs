//! `bootbench upload`: sends saved results to a receiver. A results file
//! (`bootbench run -o`) goes boot by boot, each as a one-boot results file
//! keyed by its guest document's run id (host envelope included); a bare
//! result document goes as it is. Uploading again is harmless: the
//! receiver answers "already stored". Owns the file-to-uploads mapping and
//! the printed report; the HTTP work is `results_uploader`'s.

use crate::results_file::{ResultsFile, FORMAT};
use crate::serve_cmd::read_token;
use anyhow::{bail, Context};
use loads::schema::RunDocument;
use results_uploader::{upload, UploadRequest, UploadSettings, Verdict};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Options of `bootbench upload`.
#[derive(Debug, Clone, clap::Args)]
pub struct UploadArgs {
    /// A results file written by `bootbench run -o`, or one result document.
    pub file: PathBuf,
    /// The receiver's base URL, e.g. http://lab:8080 (runs go to URL/runs/ID).
    #[arg(long)]
    pub url: String,
    /// The receiver's bearer token.
    #[arg(long, required_unless_present = "token_file", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the token from this file (its first line).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Attempts per run, the first included.
    #[arg(long, default_value_t = 6)]
    pub attempts: u32,
    /// Seconds allowed for one request.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

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
/// uploaded (no guest document: nothing names them).
pub fn plan(file: &Path) -> anyhow::Result<(Vec<PlannedUpload>, Vec<String>)> {
    let text = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let value: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    if value.get("format").is_some_and(|f| f == FORMAT) {
        let results = crate::schema_migration::read_results(file)?;
        let mut uploads = Vec::new();
        let mut skipped = Vec::new();
        for (i, boot) in results.boots.iter().enumerate() {
            let what = if boot.label.is_empty() {
                format!("boot {}", i + 1)
            } else {
                format!("boot {} ({})", i + 1, boot.label)
            };
            let Some(doc) = &boot.result else {
                skipped.push(format!(
                    "{what}: no guest document ({}{}), nothing to upload",
                    boot.boot.classification,
                    boot.result_error.as_deref().map(|e| format!(": {e}")).unwrap_or_default()
                ));
                continue;
            };
            let one = ResultsFile { boots: vec![boot.clone()], ..results.clone() };
            let body = serde_json::to_vec(&one).context("cannot serialise a boot")?;
            uploads.push(PlannedUpload { run_id: doc.run_id.clone(), what, body });
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

/// Runs `bootbench upload`: exit 0 when every run is on the receiver.
pub fn run(args: &UploadArgs) -> anyhow::Result<ExitCode> {
    let token = read_token(args.token.as_deref(), args.token_file.as_deref())?;
    if args.attempts == 0 {
        bail!("--attempts must be at least 1");
    }
    results_uploader::parse_base_url(&args.url)?;
    let (uploads, skipped) = plan(&args.file)?;
    for s in &skipped {
        eprintln!("upload: {s}");
    }
    if uploads.is_empty() {
        bail!("{} holds no run with a guest document to upload", args.file.display());
    }
    let mut settings = UploadSettings::host();
    settings.policy.max_attempts = args.attempts;
    settings.policy.request_timeout = Duration::from_secs(args.timeout.max(1));
    let mut failed = 0;
    for u in &uploads {
        let req = UploadRequest { base_url: &args.url, token: &token, run_id: &u.run_id, body: &u.body };
        let o = upload(&req, &settings);
        let status = o.status.map(|s| format!("HTTP {s}")).unwrap_or_else(|| "no response".into());
        match o.verdict {
            Verdict::Stored | Verdict::AlreadyStored => println!(
                "upload: {} run {}: {} ({status}), {} attempt(s), {} ms",
                u.what,
                u.run_id,
                o.verdict.name(),
                o.attempts.len(),
                o.elapsed_ms
            ),
            _ => {
                failed += 1;
                println!(
                    "upload: {} run {}: {} ({status}) after {} attempt(s): {}",
                    u.what,
                    u.run_id,
                    o.verdict.name(),
                    o.attempts.len(),
                    o.error.as_deref().unwrap_or("no reason recorded")
                );
            }
        }
    }
    if failed > 0 {
        eprintln!("upload: {failed} of {} run(s) not delivered to {}", uploads.len(), args.url);
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
