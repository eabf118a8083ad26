//! One upload: `PUT {base}/runs/{run_id}` with a bearer token, transient
//! failures retried per [`RetryPolicy`], and an [`UploadOutcome`] that says
//! what every attempt saw. Nothing here panics on network input and nothing
//! is returned as an error: the outcome is the report (the guest prints it,
//! `bootbench upload` prints it).
//!
//! Idempotence is the receiver's side of the contract: the run id is in the
//! path and in [`RUN_ID_HEADER`], so a retry after a lost response stores
//! nothing twice (`bootbench serve` answers 200 "already stored").

use crate::name_resolution::{self, Resolution};
use crate::retry_policy::RetryPolicy;
use crate::tls_roots::{self, TlsRoots};
use crate::upload_url::{self, ATTEMPT_HEADER, RUN_ID_HEADER};
use backon::BlockingRetryable;
use reqwest::blocking::Client;
use reqwest::Url;
use rustls::pki_types::CertificateDer;
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::io::Read;
use std::time::{Duration, Instant};

/// Longest server message kept from an error response.
const MAX_MESSAGE_CHARS: usize = 300;

/// Where and how to upload.
#[derive(Debug, Clone, PartialEq)]
pub struct UploadSettings {
    /// Attempts, backoff, timeouts.
    pub policy: RetryPolicy,
    /// How the URL's host name is resolved.
    pub resolution: Resolution,
    /// Trusted certificate authorities for https.
    pub roots: TlsRoots,
    /// PEM text of more certificate authorities to trust for https, on top
    /// of `roots` (a lab's own CA). PEM that holds no usable certificate
    /// fails the upload before anything is sent ([`crate::parse_ca_pem`]
    /// checks it ahead).
    pub extra_ca_pem: Option<Vec<u8>>,
}

impl UploadSettings {
    /// For the guest: bundled roots, host names only through `dns_servers`.
    pub fn guest(dns_servers: Vec<std::net::IpAddr>) -> Self {
        UploadSettings {
            policy: RetryPolicy::default(),
            resolution: Resolution::Servers(dns_servers),
            roots: TlsRoots::Bundled,
            extra_ca_pem: None,
        }
    }

    /// For a host: the system's resolver and certificate store.
    pub fn host() -> Self {
        UploadSettings {
            policy: RetryPolicy::default(),
            resolution: Resolution::System,
            roots: TlsRoots::System,
            extra_ca_pem: None,
        }
    }
}

/// How the upload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The receiver stored the run (201, or another 2xx).
    Stored,
    /// The receiver already had this run with this body (200).
    AlreadyStored,
    /// The receiver refused it for good (wrong token, bad body, conflict).
    Refused,
    /// Every attempt failed transiently (no connection, 5xx, timeouts).
    GaveUp,
    /// Nothing was sent: bad URL, token or run id, or no way to resolve
    /// or connect that retrying could fix.
    Failed,
}

impl Verdict {
    /// The verdict's name as it appears in events and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Stored => "stored",
            Verdict::AlreadyStored => "already-stored",
            Verdict::Refused => "refused",
            Verdict::GaveUp => "gave-up",
            Verdict::Failed => "failed",
        }
    }

    /// Parses [`Verdict::name`].
    pub fn from_name(name: &str) -> Option<Verdict> {
        [Verdict::Stored, Verdict::AlreadyStored, Verdict::Refused, Verdict::GaveUp, Verdict::Failed]
            .into_iter()
            .find(|v| v.name() == name)
    }

    /// Whether the receiver has the run now.
    pub fn delivered(self) -> bool {
        matches!(self, Verdict::Stored | Verdict::AlreadyStored)
    }
}

/// The field of a receiver's 2xx answer that names the run it stored.
pub const ACK_RUN_ID: &str = "run_id";
/// The field of a receiver's 2xx answer that holds the sha256 (hex) of the
/// body it received, byte for byte.
pub const ACK_BODY_SHA256: &str = "body_sha256";

/// sha256 (lower-case hex) of an upload's body, as the receiver echoes it.
pub fn body_sha256(body: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(body))
}

/// What a receiver answers with a 2xx to acknowledge run `run_id` with
/// body `body` (besides its own fields): the run id and the body's sha256.
pub fn acknowledgement(run_id: &str, body: &[u8]) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert(ACK_RUN_ID.into(), run_id.into());
    m.insert(ACK_BODY_SHA256.into(), body_sha256(body).into());
    m
}

/// Whether `answer` (a 2xx response's body) acknowledges `run_id` with
/// `body`.
fn acknowledges(answer: &serde_json::Value, run_id: &str, body: &[u8]) -> bool {
    let field = |k: &str| answer.get(k).and_then(serde_json::Value::as_str);
    field(ACK_RUN_ID) == Some(run_id) && field(ACK_BODY_SHA256) == Some(body_sha256(body).as_str())
}

/// One attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1-based.
    pub number: u32,
    /// Backoff slept before this attempt.
    pub delay_before_ms: u64,
    /// Time the attempt took.
    pub took_ms: u64,
    /// HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// Without a response: `dns`, `refused`, `timeout`, `tls`, `connect`
    /// or `io`.
    pub error_class: Option<String>,
    /// What went wrong, when something did (the server's message for an
    /// error status).
    pub message: Option<String>,
}

impl Attempt {
    /// Short form for event lines: the status, or the error class.
    pub fn code(&self) -> String {
        match (self.status, &self.error_class) {
            (Some(s), _) => s.to_string(),
            (None, Some(c)) => c.clone(),
            (None, None) => "?".into(),
        }
    }
}

/// What an upload did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadOutcome {
    /// The URL of the run (`{base}/runs/{id}`), or the base URL as given
    /// when it was unusable.
    pub url: String,
    /// The run id.
    pub run_id: String,
    /// How it ended.
    pub verdict: Verdict,
    /// The last HTTP status seen.
    pub status: Option<u16>,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
    /// Why it did not succeed (the last attempt's failure), if it did not.
    pub error: Option<String>,
    /// Wall time of the whole upload, backoff included.
    pub elapsed_ms: u64,
}

/// One run to upload.
#[derive(Debug, Clone, Copy)]
pub struct UploadRequest<'a> {
    /// The receiver's base URL, e.g. `http://10.0.2.2:8080`.
    pub base_url: &'a str,
    /// The bearer token.
    pub token: &'a str,
    /// The run id (the document's `run_id`).
    pub run_id: &'a str,
    /// The JSON body.
    pub body: &'a [u8],
}

/// Why one attempt failed.
#[derive(Debug, Clone)]
struct AttemptFailure {
    transient: bool,
    status: Option<u16>,
    class: Option<&'static str>,
    message: String,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(cause) = src {
        let text = cause.to_string();
        // hyper and reqwest repeat their inner error in their own message.
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        src = cause.source();
    }
    s
}

/// Whether `e` is a rustls error or an `io::Error` carrying one, however
/// deeply nested: hyper-rustls wraps tokio-rustls's `io::Error` in another,
/// and an `io::Error`'s `source` skips the error it carries.
fn is_tls_error(e: &(dyn std::error::Error + 'static)) -> bool {
    if e.is::<rustls::Error>() {
        return true;
    }
    e.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref).is_some_and(|inner| is_tls_error(inner))
}

/// Classifies a transport error: TLS failures are permanent (retrying
/// cannot fix a certificate), everything else is worth another try.
pub(crate) fn classify(e: &reqwest::Error) -> (&'static str, bool) {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut refused = false;
    while let Some(cause) = src {
        if is_tls_error(cause) {
            return ("tls", false);
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            refused |= io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        src = cause.source();
    }
    let class = if e.is_timeout() {
        "timeout"
    } else if refused {
        "refused"
    } else if e.is_connect() {
        "connect"
    } else {
        "io"
    };
    (class, true)
}

/// Statuses worth retrying: the receiver is overloaded, restarting, or a
/// proxy in front of it is; or its store is full (507), which an operator
/// can fix while the upload waits.
pub(crate) fn transient_status(status: u16) -> bool {
    matches!(status, 408 | 425 | 429 | 500 | 502 | 503 | 504 | 507)
}

/// The receiver's message from an error response: `{"error": "..."}` as
/// `bootbench serve` sends it, or the first part of the text.
pub(crate) fn server_message(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: String,
    }
    let text = match serde_json::from_slice::<ErrorBody>(body) {
        Ok(b) => b.error,
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.chars().take(MAX_MESSAGE_CHARS).collect()
}

pub(crate) fn build_client(
    settings: &UploadSettings,
    extra_roots: &[CertificateDer<'static>],
    url: &Url,
    resolved: Option<&[std::net::SocketAddr]>,
) -> Result<Client, String> {
    let mut b = Client::builder()
        .connect_timeout(settings.policy.connect_timeout)
        .timeout(settings.policy.request_timeout)
        // A redirect would silently change where the run is stored: refuse it.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("bootbench-results-uploader/", env!("CARGO_PKG_VERSION")));
    match settings.roots {
        TlsRoots::Bundled => {
            b = b.tls_backend_preconfigured(tls_roots::bundled_config(extra_roots).map_err(|e| chain(&e))?)
        }
        TlsRoots::System => {
            // reqwest is built without a crypto provider; it takes the
            // process default. Err means one is installed already: fine.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let extra = extra_roots
                .iter()
                .map(|der| reqwest::Certificate::from_der(der))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("cannot use the extra CA certificates: {}", chain(&e)))?;
            // The platform verifier, with these roots beside the system's.
            b = b.tls_certs_merge(extra);
        }
    }
    if let (Some(addrs), Some(host)) = (resolved, url.domain()) {
        b = b.resolve_to_addrs(host, addrs);
    }
    if is_loopback(url) {
        // A proxy from the environment would connect to its own loopback.
        b = b.no_proxy();
    }
    b.build().map_err(|e| format!("cannot set up the HTTP client: {}", chain(&e)))
}

/// Whether `url` names this machine: a loopback address (an IPv4 one
/// written as IPv4-mapped IPv6 included) or `localhost`.
fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return ip.to_canonical().is_loopback();
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// Checks what can be checked before sending anything: the URL, token and
/// body, and the extra CA certificates (returned).
fn preflight(
    req: &UploadRequest<'_>,
    settings: &UploadSettings,
) -> Result<(Url, Vec<CertificateDer<'static>>), String> {
    let base = upload_url::parse_base_url(req.base_url).map_err(|e| e.to_string())?;
    let url = upload_url::run_url(&base, req.run_id).map_err(|e| e.to_string())?;
    if req.token.is_empty() {
        return Err("the upload token is empty".into());
    }
    if !req.token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the upload token must be printable ASCII without spaces".into());
    }
    if req.body.is_empty() {
        return Err("the body to upload is empty".into());
    }
    let extra_roots = match &settings.extra_ca_pem {
        Some(pem) => tls_roots::parse_ca_pem(pem).map_err(|e| chain(&e))?,
        None => Vec::new(),
    };
    Ok((url, extra_roots))
}

struct Sender<'a> {
    req: &'a UploadRequest<'a>,
    settings: &'a UploadSettings,
    extra_roots: Vec<CertificateDer<'static>>,
    url: Url,
    client: Option<Client>,
}

impl Sender<'_> {
    fn client(&mut self) -> Result<&Client, AttemptFailure> {
        if self.client.is_none() {
            let resolved = match name_resolution::name_to_resolve(&self.url, &self.settings.resolution) {
                Some(host) => {
                    let servers = match &self.settings.resolution {
                        Resolution::Servers(s) => s.as_slice(),
                        Resolution::System => &[],
                    };
                    let port = self.url.port_or_known_default().unwrap_or(80);
                    let addrs = name_resolution::resolve(host, port, servers, self.settings.policy.connect_timeout)
                        .map_err(|e| AttemptFailure {
                            transient: !matches!(
                                e,
                                name_resolution::ResolveError::NoServers { .. }
                                    | name_resolution::ResolveError::NoResolver { .. }
                            ),
                            status: None,
                            class: Some("dns"),
                            message: chain(&e),
                        })?;
                    Some(addrs)
                }
                None => None,
            };
            let client = build_client(self.settings, &self.extra_roots, &self.url, resolved.as_deref())
                .map_err(|message| AttemptFailure { transient: false, status: None, class: Some("io"), message })?;
            self.client = Some(client);
        }
        self.client.as_ref().ok_or_else(|| AttemptFailure {
            transient: false,
            status: None,
            class: Some("io"),
            message: "no HTTP client".into(),
        })
    }

    fn send(&mut self, number: u32, timeout: Duration) -> Result<(u16, Verdict), AttemptFailure> {
        let (url, run_id, token, body) = (self.url.clone(), self.req.run_id, self.req.token, self.req.body.to_vec());
        let client = self.client()?;
        let resp = client
            .put(url)
            .timeout(timeout)
            .bearer_auth(token)
            .header(RUN_ID_HEADER, run_id)
            .header(ATTEMPT_HEADER, number.to_string())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .map_err(|e| {
                let (class, transient) = classify(&e);
                AttemptFailure { transient, status: None, class: Some(class), message: chain(&e) }
            })?;
        let status = resp.status().as_u16();
        let mut text = Vec::new();
        // Only the start of the answer matters (a message or a small JSON).
        let read = resp.take(64 * 1024).read_to_end(&mut text);
        if (200..300).contains(&status) {
            let answer = serde_json::from_slice::<serde_json::Value>(&text).unwrap_or_default();
            if !acknowledges(&answer, run_id, self.req.body) {
                // Sending again would get the same page: final.
                return Err(AttemptFailure {
                    transient: false,
                    status: Some(status),
                    class: None,
                    message: format!(
                        "HTTP {status}, but the answer does not acknowledge run '{run_id}' and its {} bytes (no `{ACK_RUN_ID}` and `{ACK_BODY_SHA256}` echoed back): not a bootbench receiver, a wrong URL, or a proxy's page? It said: {}",
                        self.req.body.len(),
                        server_message(&text)
                    ),
                });
            }
            let already = answer.get("already_stored").and_then(serde_json::Value::as_bool).unwrap_or(false);
            let verdict = if status == 200 && already { Verdict::AlreadyStored } else { Verdict::Stored };
            return Ok((status, verdict));
        }
        let mut message = server_message(&text);
        if let Err(e) = read {
            message = format!("{message} (reading the response failed: {e})");
        }
        let message = match status {
            300..=399 => format!("HTTP {status}: the receiver redirects; give its final URL ({message})"),
            401 => format!("HTTP 401: the receiver wants a token: {message}"),
            403 => format!("HTTP 403: the receiver refused the token: {message}"),
            _ => format!("HTTP {status}: {message}"),
        };
        Err(AttemptFailure { transient: transient_status(status), status: Some(status), class: None, message })
    }
}

/// Uploads one run and reports what happened. Transient failures (no
/// connection, timeouts, 408/425/429/500/502/503/504, DNS) are retried per
/// `settings.policy`; anything else ends the upload at once.
pub fn upload(req: &UploadRequest<'_>, settings: &UploadSettings) -> UploadOutcome {
    upload_with_progress(req, settings, &mut |_| {})
}

/// [`upload`], calling `before_attempt` with the attempt's number before
/// each one (the guest prints an event, so the host sees progress). No
/// attempt starts once `settings.policy.total_budget` is spent, and each
/// request's timeout is cut to what is left of it.
pub fn upload_with_progress(
    req: &UploadRequest<'_>,
    settings: &UploadSettings,
    before_attempt: &mut dyn FnMut(u32),
) -> UploadOutcome {
    let started = Instant::now();
    let (url, extra_roots) = match preflight(req, settings) {
        Ok(checked) => checked,
        Err(message) => {
            return UploadOutcome {
                url: req.base_url.to_string(),
                run_id: req.run_id.to_string(),
                verdict: Verdict::Failed,
                status: None,
                attempts: Vec::new(),
                error: Some(message),
                elapsed_ms: ms(started.elapsed()),
            }
        }
    };
    let url_text = url.to_string();
    let sender = RefCell::new(Sender { req, settings, extra_roots, url, client: None });
    let attempts = RefCell::new(Vec::<Attempt>::new());
    let delay = Cell::new(Duration::ZERO);
    let budget = settings.policy.total_budget;
    let before_attempt = RefCell::new(before_attempt);
    let result = (|| {
        let number = attempts.borrow().len() as u32 + 1;
        let left = budget.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(AttemptFailure {
                transient: false,
                status: None,
                class: Some("budget"),
                message: format!(
                    "the upload's time budget of {} s is spent after {} attempt(s)",
                    budget.as_secs(),
                    number - 1
                ),
            });
        }
        (before_attempt.borrow_mut())(number);
        let t0 = Instant::now();
        let r = sender.borrow_mut().send(number, settings.policy.request_timeout.min(left));
        attempts.borrow_mut().push(Attempt {
            number,
            delay_before_ms: ms(delay.get()),
            took_ms: ms(t0.elapsed()),
            status: match &r {
                Ok((s, _)) => Some(*s),
                Err(f) => f.status,
            },
            error_class: r.as_ref().err().and_then(|f| f.class).map(str::to_string),
            message: r.as_ref().err().map(|f| f.message.clone()),
        });
        r
    })
    .retry(settings.policy.backoff())
    .sleep(std::thread::sleep)
    .when(|f: &AttemptFailure| f.transient)
    .notify(|_, d| delay.set(d))
    .call();
    let attempts = attempts.into_inner();
    let (verdict, status, error) = match result {
        Ok((status, verdict)) => (verdict, Some(status), None),
        Err(f) => {
            let verdict = match (f.transient, f.status) {
                (true, _) => Verdict::GaveUp,
                (false, Some(_)) => Verdict::Refused,
                (false, None) => Verdict::Failed,
            };
            let message = if verdict == Verdict::GaveUp {
                format!("gave up after {} attempts; last: {}", attempts.len(), f.message)
            } else {
                f.message
            };
            (verdict, f.status, Some(message))
        }
    };
    UploadOutcome {
        url: url_text,
        run_id: req.run_id.to_string(),
        verdict,
        status,
        attempts,
        error,
        elapsed_ms: ms(started.elapsed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unusable_extra_ca_fails_the_upload_before_anything_is_sent() {
        let req = UploadRequest { base_url: "https://127.0.0.1:9", token: "t", run_id: "run-a", body: b"{}" };
        for roots in [TlsRoots::Bundled, TlsRoots::System] {
            let settings =
                UploadSettings { roots, extra_ca_pem: Some(b"no PEM here".to_vec()), ..UploadSettings::host() };
            let o = upload(&req, &settings);
            assert_eq!(o.verdict, Verdict::Failed, "{o:?}");
            assert!(o.attempts.is_empty(), "{o:?}");
            assert!(o.error.as_deref().unwrap_or_default().contains("holds no certificate"), "{o:?}");
        }
    }

    #[test]
    fn loopback_receivers_are_told_from_others() {
        let lo = |u: &str| is_loopback(&Url::parse(u).unwrap());
        for u in [
            "http://127.0.0.1:8080",
            "http://127.5.5.5",
            "http://[::1]:80",
            "http://[::ffff:127.0.0.1]:80",
            "http://LOCALHOST.",
            "http://a.localhost",
        ] {
            assert!(lo(u), "{u}");
        }
        for u in
            ["http://10.0.2.2:8080", "http://lab", "http://[::2]", "http://[::ffff:10.0.2.2]", "http://localhost.lab"]
        {
            assert!(!lo(u), "{u}");
        }
    }
}
