//! `bootbench upload`: sends saved results to a receiver. A results file
//! (`bootbench run -o`) goes boot by boot, each as a one-boot results file
//! keyed by its guest document's run id (host envelope included); a bare
//! result document goes as it is. Uploading again is harmless: the
//! receiver answers "already stored". The sending is
//! [`crate::saved_upload`]'s.

use crate::saved_upload::{send_saved, Destination};
use crate::service::receiver::read_token;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `bootbench upload`.
#[derive(Debug, Clone, clap::Args)]
pub struct UploadArgs {
    /// A results file written by `bootbench run -o`, or one result document.
    pub file: PathBuf,
    /// The receiver's base URL, e.g. http://lab:8080 (runs go to URL/runs/ID).
    /// Default: the config file's upload.url.
    #[arg(long)]
    pub url: Option<String>,
    /// The receiver's bearer token.
    #[arg(long, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the token from this file (its first line). Default: the config
    /// file's upload.token_file.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Attempts per run, the first included.
    #[arg(long, default_value_t = 6)]
    pub attempts: u32,
    /// Seconds allowed for one request.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Also trust the certificate authorities in this PEM file for https
    /// (a lab's own CA, e.g. the one that signed `serve --tls-cert`).
    /// Default: the config file's upload.ca_file.
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
}

/// Runs `bootbench upload`: exit 0 when every run is on the receiver.
pub fn run(args: &UploadArgs) -> anyhow::Result<ExitCode> {
    let Some(url) = &args.url else {
        anyhow::bail!("no receiver: give --url, or set upload.url in the config file (`bootbench config path`)");
    };
    let token = read_token(args.token.as_deref(), args.token_file.as_deref())?;
    let to = Destination {
        url,
        token: &token,
        attempts: args.attempts,
        timeout_s: args.timeout,
        ca_file: args.ca_file.as_deref(),
    };
    let (failed, sent) = send_saved(&args.file, &to)?;
    if failed > 0 {
        log::warn!("{failed} of {sent} run(s) not delivered to {url}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
