//! The HTTP channel for the result: after the document went to the console
//! (and the virtio port), bring the network up and upload the very same
//! bytes to `bootbench.upload=URL`, then report both steps as console
//! events (`network`, `upload`) and one readable line. The document is not
//! touched: it was sent before, and a failed upload loses nothing. Never
//! panics; every failure ends up in the `upload` event.

use crate::network::{self, NetRequest};
use crate::result_channels::{console_line, say};
use crate::secrets::Secrets;
use loads::console_protocol;
use loads::error_chain::error_chain;
use loads::suite::CmdlineConfig;
use results_uploader::{
    RetryPolicy, UploadOutcome, UploadReport, UploadRequest, UploadSettings, Verdict, EVENT_NETWORK, EVENT_UPLOAD,
    EVENT_UPLOAD_ATTEMPT,
};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Where and how to upload, from the cmdline and the secrets segment.
#[derive(Clone, PartialEq)]
pub struct UploadPlan {
    /// The receiver's base URL.
    pub url: String,
    /// The bearer token: the secrets segment's, else `bootbench.token`;
    /// empty when neither has one (the upload then fails, saying so).
    pub token: String,
    /// Extra certificate authorities (PEM) from the secrets segment.
    pub ca_pem: Option<Vec<u8>>,
    /// Network settings.
    pub net: NetRequest,
    /// Retry bounds.
    pub policy: RetryPolicy,
}

impl std::fmt::Debug for UploadPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadPlan")
            .field("url", &self.url)
            .field("token", &loads::suite::REDACTED)
            .field("ca_pem_bytes", &self.ca_pem.as_ref().map(Vec::len))
            .field("net", &self.net)
            .field("policy", &self.policy)
            .finish()
    }
}

/// The plan, when the cmdline asks for an upload.
pub fn plan(cmdline: &CmdlineConfig, secrets: Secrets) -> Option<UploadPlan> {
    let url = cmdline.upload.clone()?;
    let mut policy = RetryPolicy::default();
    if let Some(n) = cmdline.upload_attempts {
        policy.max_attempts = n;
    }
    if let Some(s) = cmdline.upload_timeout_s {
        policy.request_timeout = Duration::from_secs(s);
        policy.connect_timeout = policy.connect_timeout.min(policy.request_timeout);
    }
    Some(UploadPlan {
        url,
        token: secrets.upload_token.or_else(|| cmdline.token.clone()).unwrap_or_default(),
        ca_pem: secrets.upload_ca_pem,
        net: net_request(cmdline),
        policy,
    })
}

/// The network settings of the cmdline (the upload's, the lab agent's and
/// netconsole's).
pub fn net_request(cmdline: &CmdlineConfig) -> NetRequest {
    NetRequest {
        iface: cmdline.iface.clone(),
        ip: cmdline.ip,
        gw: cmdline.gw,
        dns: cmdline.dns.clone(),
        qemu: matches!(cmdline.accel.as_deref(), Some("kvm" | "tcg" | "icount")),
    }
}

/// A report for an upload that never got to send anything.
fn not_attempted(url: &str, started: Instant, error: String) -> UploadReport {
    UploadReport {
        verdict: Verdict::Failed,
        http_status: None,
        attempts: 0,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        history: Vec::new(),
        delays_ms: Vec::new(),
        url: url.to_string(),
        error: Some(error),
    }
}

/// The longest network bring-up: interface, carrier and DHCP waits
/// (network.rs and dhcp_client.rs bound each).
pub const NETWORK_LIMIT: Duration = Duration::from_secs(40);

impl UploadPlan {
    /// How long the whole delivery may take: the network, then the upload
    /// within its policy's budget, plus a margin for name resolution.
    pub fn limit(&self) -> Duration {
        NETWORK_LIMIT + self.policy.worst_case() + 2 * self.policy.connect_timeout.min(Duration::from_secs(10))
    }
}

/// Brings the network up, uploads `document` as run `run_id`, and prints
/// the outcome. Returns the report (also printed).
pub fn deliver(plan: &UploadPlan, run_id: &str, document: &str) -> UploadReport {
    let started = Instant::now();
    if plan.token.is_empty() {
        let report = not_attempted(
            &plan.url,
            started,
            format!(
                "no upload token: the initramfs has no {} (the host's secrets segment) and the cmdline no bootbench.token",
                loads::guest_secrets::UPLOAD_TOKEN_FILE
            ),
        );
        finish(&report);
        return report;
    }
    let configured = match network::bring_up(&plan.net) {
        Ok(c) => c,
        Err((step, e)) => {
            let msg = format!("network: {step}: {}", error_chain(&e));
            console_line(&console_protocol::event(EVENT_NETWORK, &format!("failed step={step:?} error={msg}")));
            let report = not_attempted(&plan.url, started, msg);
            finish(&report);
            return report;
        }
    };
    console_line(&console_protocol::event(EVENT_NETWORK, &configured.event_text()));
    let settings = UploadSettings {
        policy: plan.policy.clone(),
        resolution: results_uploader::Resolution::Servers(configured.dns.iter().map(|a| IpAddr::V4(*a)).collect()),
        roots: results_uploader::TlsRoots::Bundled,
        extra_ca_pem: plan.ca_pem.clone(),
    };
    let req = UploadRequest { base_url: &plan.url, token: &plan.token, run_id, body: document.as_bytes() };
    let url = plan.url.clone();
    let mut announce = |n: u32| {
        console_line(&console_protocol::event(EVENT_UPLOAD_ATTEMPT, &format!("attempt={n} url={url}")));
    };
    let outcome: UploadOutcome = results_uploader::upload_with_progress(&req, &settings, &mut announce);
    let mut report = UploadReport::from(&outcome);
    // The network bring-up is part of what the upload cost.
    report.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    finish(&report);
    report
}

/// Prints the event and a line for people reading the console.
fn finish(report: &UploadReport) {
    console_line(&console_protocol::event(EVENT_UPLOAD, &report.to_event_text()));
    let human = match report.verdict {
        Verdict::Stored | Verdict::AlreadyStored => format!(
            "upload to {}: {} (HTTP {}) after {} attempt(s) in {} ms",
            report.url,
            report.verdict.name(),
            report.http_status.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            report.attempts,
            report.elapsed_ms
        ),
        _ => format!(
            "upload to {} failed ({}): {}; the result above on the console is complete",
            report.url,
            report.verdict.name(),
            report.error.as_deref().unwrap_or("no reason recorded")
        ),
    };
    say(&human);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmdline(text: &str) -> CmdlineConfig {
        CmdlineConfig::parse(text).unwrap()
    }

    #[test]
    fn the_segments_token_wins_over_the_cmdlines_and_neither_is_printed() {
        let seg = Secrets { upload_token: Some("from-the-segment-0123".into()), upload_ca_pem: Some(b"PEM".to_vec()) };
        let p = plan(&cmdline("bootbench.upload=http://10.0.2.2:9 bootbench.token=from-cmdline"), seg.clone()).unwrap();
        assert_eq!(p.token, "from-the-segment-0123");
        assert_eq!(p.ca_pem.as_deref(), Some(&b"PEM"[..]));
        let shown = format!("{p:?}");
        assert!(!shown.contains("from-the-segment") && !shown.contains("PEM"), "{shown}");
        let p = plan(&cmdline("bootbench.upload=http://10.0.2.2:9 bootbench.token=from-cmdline"), Secrets::default());
        assert_eq!(p.unwrap().token, "from-cmdline");
        assert!(plan(&cmdline("quiet"), seg).is_none(), "no upload asked for");
    }

    #[test]
    fn an_upload_without_any_token_fails_before_the_network_saying_why() {
        let p = plan(&cmdline("bootbench.upload=http://10.0.2.2:9"), Secrets::default()).unwrap();
        assert!(p.token.is_empty());
        let r = deliver(&p, "run-1", "{}");
        assert_eq!(r.verdict, Verdict::Failed);
        assert_eq!(r.attempts, 0);
        let why = r.error.unwrap_or_default();
        assert!(why.contains("no upload token") && why.contains("upload-token"), "{why}");
    }
}
