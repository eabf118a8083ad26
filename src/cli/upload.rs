//! `bootbench upload`: sends saved results to a receiver. A results file
//! (`bootbench run -o`) goes boot by boot, each as a one-boot results file
//! keyed by its guest document's run id (host envelope included); a bare
//! result document goes as it is. Uploading again is harmless: the
//! receiver answers "already stored". The file-to-uploads mapping is
//! [`crate::results::upload_plan`]'s, the HTTP work `results_uploader`'s.

use crate::results::upload_plan::plan;
use crate::service::receiver::read_token;
use anyhow::bail;
use results_uploader::{upload, UploadRequest, UploadSettings, Verdict};
use std::path::PathBuf;
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
