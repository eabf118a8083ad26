//! A small blocking client for a lab machine's agent: JSON requests and
//! job-file downloads against the lab receiver (`loads::lab_protocol`
//! names the paths and bodies), each with the machine's bearer token. It
//! shares the upload's TLS roots, name resolution and timeouts. One
//! request is one attempt: retrying is the agent's decision. Never panics
//! on what the network sends; every error names the method, the URL and
//! what came back (the receiver's `{"error": ...}` message included).

use crate::name_resolution::{self, Resolution, ResolveError};
use crate::tls_roots::{self, CaError};
use crate::upload::{build_client, chain, classify, server_message, transient_status, UploadSettings};
use crate::upload_url::{self, UrlError};
use reqwest::blocking::{Client, Response};
use reqwest::Url;
use rustls::pki_types::CertificateDer;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::Digest;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest JSON answer read from the receiver.
pub const MAX_JSON_BYTES: u64 = 1 << 20;

/// The slowest transfer a download is given time for, in bytes per
/// second, on top of the request timeout: a 100 MiB initramfs then has
/// about 7 minutes.
pub const MIN_DOWNLOAD_RATE: u64 = 256 * 1024;

/// Errors of one request to the lab receiver.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The base URL cannot be used.
    #[error("the lab receiver's URL is not usable")]
    Url(#[source] UrlError),
    /// The token is empty or not printable ASCII.
    #[error("the machine token is empty or not printable ASCII without spaces")]
    BadToken,
    /// The extra CA certificates are unusable.
    #[error("cannot use the lab's CA certificates")]
    Ca(#[source] CaError),
    /// The receiver's host name could not be resolved.
    #[error("cannot resolve the lab receiver's host")]
    Resolve(#[source] ResolveError),
    /// The HTTP client could not be built.
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
    /// No answer: refused, timed out, reset, TLS.
    #[error("{method} {url}: no answer ({class}): {message}")]
    Transport {
        /// GET or POST.
        method: &'static str,
        /// The URL.
        url: String,
        /// `refused`, `timeout`, `connect`, `tls` or `io`.
        class: &'static str,
        /// What went wrong.
        message: String,
        /// Whether trying again may help (not for TLS).
        transient: bool,
    },
    /// The receiver answered with an error status.
    #[error("{method} {url}: HTTP {status}: {message}")]
    Status {
        /// GET or POST.
        method: &'static str,
        /// The URL.
        url: String,
        /// The status.
        status: u16,
        /// The receiver's message (`{"error": ...}`) or the body's start.
        message: String,
    },
    /// A 2xx answer that is not the JSON expected.
    #[error("{method} {url}: the answer is not the JSON expected ({why}): {body}")]
    Json {
        /// GET or POST.
        method: &'static str,
        /// The URL.
        url: String,
        /// The parser's complaint.
        why: String,
        /// The answer's start.
        body: String,
    },
    /// A file bigger than the job says or than an agent downloads.
    #[error("GET {url}: {got} bytes or more, over the limit of {limit} bytes ({why})")]
    TooLarge {
        /// The URL.
        url: String,
        /// Bytes announced or received so far.
        got: u64,
        /// The limit passed.
        limit: u64,
        /// Which limit.
        why: &'static str,
    },
    /// The body ended before the size the job gives.
    #[error("GET {url}: the file ended after {got} of its {expected} bytes{detail}")]
    Truncated {
        /// The URL.
        url: String,
        /// Bytes received.
        got: u64,
        /// Bytes the job announced.
        expected: u64,
        /// What the transfer reported, if anything (`: ...`).
        detail: String,
    },
    /// The file's sha256 is not the job's.
    #[error("GET {url}: the file's sha256 is {got}, the job's is {expected}")]
    Sha256 {
        /// The URL.
        url: String,
        /// The job's.
        expected: String,
        /// The file's.
        got: String,
    },
    /// The downloaded file could not be written.
    #[error("cannot write the downloaded file {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl LabError {
    /// The HTTP status the receiver answered with, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            LabError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the receiver refused the machine's token (401 or 403):
    /// asking again with the same token is pointless.
    pub fn is_auth_refusal(&self) -> bool {
        matches!(self.status(), Some(401 | 403))
    }

    /// Whether the receiver could not be reached or was overloaded, so
    /// that the same request later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            LabError::Transport { transient, .. } => *transient,
            LabError::Status { status, .. } => transient_status(*status),
            LabError::Resolve(e) => !matches!(e, ResolveError::NoServers { .. } | ResolveError::NoResolver { .. }),
            _ => false,
        }
    }
}

/// A file a job needs, as the receiver announced it.
#[derive(Debug, Clone, Copy)]
pub struct ExpectedFile<'a> {
    /// Its size in bytes.
    pub bytes: u64,
    /// Its sha256, hex (either case).
    pub sha256: &'a str,
}

/// A client for one receiver and one machine token.
pub struct LabClient {
    base: Url,
    token: String,
    settings: UploadSettings,
    extra_roots: Vec<CertificateDer<'static>>,
    client: Option<Client>,
}

impl std::fmt::Debug for LabClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabClient").field("base", &self.base.as_str()).field("token", &"<redacted>").finish()
    }
}

impl LabClient {
    /// A client for the receiver at `base_url` (http or https, as
    /// [`upload_url::parse_base_url`] takes it). Nothing is sent yet; the
    /// host name is resolved at the first request.
    pub fn new(base_url: &str, token: &str, settings: UploadSettings) -> Result<LabClient, LabError> {
        let base = upload_url::parse_base_url(base_url).map_err(LabError::Url)?;
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(LabError::BadToken);
        }
        let extra_roots = match &settings.extra_ca_pem {
            Some(pem) => tls_roots::parse_ca_pem(pem).map_err(LabError::Ca)?,
            None => Vec::new(),
        };
        Ok(LabClient { base, token: token.to_string(), settings, extra_roots, client: None })
    }

    /// The URL of `path` (relative, e.g. `lab/machines/m/next`) under the
    /// base URL, keeping its path prefix.
    pub fn url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        url.set_path(&format!("{}/{}", self.base.path().trim_end_matches('/'), path.trim_start_matches('/')));
        url
    }

    fn client(&mut self) -> Result<&Client, LabError> {
        if self.client.is_none() {
            let resolved = match name_resolution::name_to_resolve(&self.base, &self.settings.resolution) {
                Some(host) => {
                    let servers = match &self.settings.resolution {
                        Resolution::Servers(s) => s.as_slice(),
                        Resolution::System => &[],
                    };
                    let port = self.base.port_or_known_default().unwrap_or(80);
                    Some(
                        name_resolution::resolve(host, port, servers, self.settings.policy.connect_timeout)
                            .map_err(LabError::Resolve)?,
                    )
                }
                None => None,
            };
            let client = build_client(&self.settings, &self.extra_roots, &self.base, resolved.as_deref())
                .map_err(LabError::Client)?;
            self.client = Some(client);
        }
        self.client.as_ref().ok_or_else(|| LabError::Client("no HTTP client".into()))
    }

    /// Sends one request; a non-2xx answer is an error with the
    /// receiver's message.
    fn send(
        &mut self,
        method: &'static str,
        path: &str,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<(Url, Response), LabError> {
        let url = self.url(path);
        let token = self.token.clone();
        let client = self.client()?;
        let req = match body {
            Some(b) => client.post(url.clone()).header(reqwest::header::CONTENT_TYPE, "application/json").body(b),
            None => client.get(url.clone()),
        };
        let resp = req.timeout(timeout).bearer_auth(token).send().map_err(|e| {
            let (class, transient) = classify(&e);
            LabError::Transport { method, url: url.to_string(), class, message: chain(&e), transient }
        })?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let mut text = Vec::new();
            let _ = resp.take(64 * 1024).read_to_end(&mut text);
            return Err(LabError::Status { method, url: url.to_string(), status, message: server_message(&text) });
        }
        Ok((url, resp))
    }

    fn json<R: DeserializeOwned>(
        &mut self,
        method: &'static str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<R, LabError> {
        let timeout = self.settings.policy.request_timeout;
        let (url, resp) = self.send(method, path, body, timeout)?;
        let mut text = Vec::new();
        resp.take(MAX_JSON_BYTES).read_to_end(&mut text).map_err(|e| LabError::Transport {
            method,
            url: url.to_string(),
            class: "io",
            message: format!("reading the answer failed: {e}"),
            transient: true,
        })?;
        serde_json::from_slice(&text).map_err(|e| LabError::Json {
            method,
            url: url.to_string(),
            why: e.to_string(),
            body: server_message(&text),
        })
    }

    /// `GET path`, its JSON answer.
    pub fn get_json<R: DeserializeOwned>(&mut self, path: &str) -> Result<R, LabError> {
        self.json("GET", path, None)
    }

    /// `POST path` with `body` as JSON, its JSON answer.
    pub fn post_json<B: Serialize, R: DeserializeOwned>(&mut self, path: &str, body: &B) -> Result<R, LabError> {
        let bytes = serde_json::to_vec(body).map_err(|e| LabError::Json {
            method: "POST",
            url: self.url(path).to_string(),
            why: format!("the request cannot be serialised: {e}"),
            body: String::new(),
        })?;
        self.json("POST", path, Some(bytes))
    }

    /// `GET path` streamed into `dest` (created or truncated), refused as
    /// soon as it passes `expect.bytes` or `limit`, checked against
    /// `expect.sha256` while it streams. On any error `dest` is removed.
    pub fn download(&mut self, path: &str, dest: &Path, expect: ExpectedFile<'_>, limit: u64) -> Result<(), LabError> {
        self.download_at(path, dest, expect, limit, MIN_DOWNLOAD_RATE)
    }

    /// [`LabClient::download`], given time for `expect.bytes` at
    /// `min_rate` bytes per second (a job's kernel and initramfs get
    /// [`MIN_DOWNLOAD_RATE`]; a userland pack the rate the host allows it).
    pub fn download_at(
        &mut self,
        path: &str,
        dest: &Path,
        expect: ExpectedFile<'_>,
        limit: u64,
        min_rate: u64,
    ) -> Result<(), LabError> {
        let r = self.download_into(path, dest, expect, limit, min_rate.max(1));
        if r.is_err() {
            let _ = std::fs::remove_file(dest);
        }
        r
    }

    fn download_into(
        &mut self,
        path: &str,
        dest: &Path,
        expect: ExpectedFile<'_>,
        limit: u64,
        min_rate: u64,
    ) -> Result<(), LabError> {
        let url_text = self.url(path).to_string();
        if expect.bytes > limit {
            return Err(LabError::TooLarge {
                url: url_text,
                got: expect.bytes,
                limit,
                why: "the job's size for it is over what an agent downloads",
            });
        }
        let timeout = self.settings.policy.request_timeout + Duration::from_secs(expect.bytes / min_rate);
        let (_, mut resp) = self.send("GET", path, None, timeout)?;
        if let Some(len) = resp.content_length().filter(|l| *l > expect.bytes) {
            return Err(LabError::TooLarge { url: url_text, got: len, limit: expect.bytes, why: "the job's size" });
        }
        let write_err = |source| LabError::Write { path: dest.to_path_buf(), source };
        let mut file = std::fs::File::create(dest).map_err(write_err)?;
        let mut hasher = sha2::Sha256::new();
        let mut got: u64 = 0;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match resp.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(LabError::Truncated {
                        url: url_text,
                        got,
                        expected: expect.bytes,
                        detail: format!(": {}", chain(&e)),
                    })
                }
            };
            got = got.saturating_add(n as u64);
            if got > expect.bytes {
                return Err(LabError::TooLarge { url: url_text, got, limit: expect.bytes, why: "the job's size" });
            }
            let chunk = buf.get(..n).unwrap_or_default();
            hasher.update(chunk);
            file.write_all(chunk).map_err(write_err)?;
        }
        if got < expect.bytes {
            return Err(LabError::Truncated { url: url_text, got, expected: expect.bytes, detail: String::new() });
        }
        file.sync_all().map_err(write_err)?;
        let sum = hex::encode(hasher.finalize());
        if !sum.eq_ignore_ascii_case(expect.sha256) {
            return Err(LabError::Sha256 { url: url_text, expected: expect.sha256.to_string(), got: sum });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_go_under_the_base_urls_prefix_and_the_token_is_not_shown() {
        let c = LabClient::new("http://10.0.2.2:8080/bb/", "s3cret-token", UploadSettings::host()).unwrap();
        assert_eq!(c.url("lab/machines/m/next").as_str(), "http://10.0.2.2:8080/bb/lab/machines/m/next");
        let c = LabClient::new("http://10.0.2.2:8080", "s3cret-token", UploadSettings::host()).unwrap();
        assert_eq!(c.url("lab/jobs/3/kernel").as_str(), "http://10.0.2.2:8080/lab/jobs/3/kernel");
        assert!(!format!("{c:?}").contains("s3cret"));
        assert!(matches!(LabClient::new("http://h", "two words", UploadSettings::host()), Err(LabError::BadToken)));
        assert!(matches!(LabClient::new("ftp://h", "t", UploadSettings::host()), Err(LabError::Url(_))));
    }

    #[test]
    fn only_401_and_403_are_refusals_and_only_overload_is_transient() {
        let status = |status| LabError::Status { method: "GET", url: "u".into(), status, message: String::new() };
        assert!(status(401).is_auth_refusal() && status(403).is_auth_refusal());
        assert!(!status(404).is_auth_refusal() && !status(503).is_auth_refusal());
        assert!(status(503).is_transient() && status(429).is_transient());
        assert!(!status(404).is_transient() && !status(403).is_transient());
    }
}
