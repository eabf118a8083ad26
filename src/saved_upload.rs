//! Sending a saved results file (or one result document) to a receiver,
//! run by run, each with retry and backoff; what each attempt came to is
//! printed. Which runs a file makes is [`crate::results::upload_plan`]'s;
//! the HTTP work is `results_uploader`'s. Depends on the results model
//! only.

use crate::results::upload_plan::plan;
use anyhow::bail;
use results_uploader::{upload, UploadRequest, UploadSettings, Verdict};
use std::path::Path;
use std::time::Duration;

/// Where and how to send.
#[derive(Debug, Clone)]
pub struct Destination<'a> {
    /// The receiver's base URL (runs go to URL/runs/ID).
    pub url: &'a str,
    /// Its bearer token.
    pub token: &'a str,
    /// Attempts per run, the first included (at least 1).
    pub attempts: u32,
    /// Seconds allowed for one request.
    pub timeout_s: u64,
    /// A PEM file of more certificate authorities to trust for https (a
    /// lab's own CA), besides the system's.
    pub ca_file: Option<&'a Path>,
}

/// Sends every run `file` holds to `to`, printing a line per run: how many
/// runs were not delivered, and how many were sent.
pub fn send_saved(file: &Path, to: &Destination<'_>) -> anyhow::Result<(usize, usize)> {
    if to.attempts == 0 {
        bail!("--attempts must be at least 1");
    }
    results_uploader::parse_base_url(to.url)?;
    let extra_ca_pem = to.ca_file.map(results_uploader::read_ca_file).transpose()?;
    let (uploads, skipped) = plan(file)?;
    for s in &skipped {
        log::info!("{s}");
    }
    if uploads.is_empty() {
        bail!("{} holds no run to upload (no boot has a guest document or a host-made id)", file.display());
    }
    let mut settings = UploadSettings::host();
    settings.policy.max_attempts = to.attempts;
    settings.policy.request_timeout = Duration::from_secs(to.timeout_s.max(1));
    settings.extra_ca_pem = extra_ca_pem;
    let mut failed = 0;
    for u in &uploads {
        let req = UploadRequest { base_url: to.url, token: to.token, run_id: &u.run_id, body: &u.body };
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
    Ok((failed, uploads.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{BootRecord, ResultsFile};

    fn to(url: &str, attempts: u32) -> Destination<'_> {
        Destination { url, token: "t", attempts, timeout_s: 1, ca_file: None }
    }

    #[test]
    fn bad_settings_and_files_with_nothing_to_send_are_refused_before_any_request() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("r.json");
        // A boot that ended without a guest document: nothing names it.
        ResultsFile { boots: vec![BootRecord::default()], ..Default::default() }.write(&f).unwrap();
        let e = send_saved(&f, &to("http://127.0.0.1:9", 0)).unwrap_err().to_string();
        assert!(e.contains("--attempts must be at least 1"), "{e}");
        let e = format!("{:#}", send_saved(&f, &to("ftp://lab", 1)).unwrap_err());
        assert!(e.contains("ftp://lab"), "{e}");
        let e = send_saved(&f, &to("http://127.0.0.1:9", 1)).unwrap_err().to_string();
        assert!(e.contains("holds no run to upload"), "{e}");
        let e = format!("{:#}", send_saved(&dir.path().join("none.json"), &to("http://127.0.0.1:9", 1)).unwrap_err());
        assert!(e.contains("none.json"), "{e}");
        let ca = dir.path().join("ca.pem");
        let with_ca = |ca: &Path| {
            format!("{:#}", send_saved(&f, &Destination { ca_file: Some(ca), ..to("https://lab", 1) }).unwrap_err())
        };
        let e = with_ca(&ca);
        assert!(e.contains("cannot read the CA file") && e.contains("ca.pem"), "{e}");
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n").unwrap();
        let e = with_ca(&ca);
        assert!(e.contains("ca.pem cannot be used") && e.contains("not valid PEM"), "{e}");
        std::fs::write(&ca, "no PEM here\n").unwrap();
        assert!(with_ca(&ca).contains("holds no certificate"));
    }
}
