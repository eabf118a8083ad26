//! The HTTP receiver for uploaded runs, in front of the
//! results store. Owns the HTTP side only: authentication (a bearer
//! token, compared in constant time), the size limit, status codes and
//! messages, and the listing pages. What is storable and how runs are
//! kept is `store`'s.
//!
//! Endpoints:
//! - `PUT /runs/{id}`: store a run (token required). 201 stored, 200
//!   already stored (same content), 400 malformed, 401 no token, 403 wrong
//!   token, 409 other content under this id, 413 too big, 500 store error,
//!   507 the store is full (disk or page limit; the uploader retries later).
//! - `GET /runs` (JSON list), `GET /runs/{id}` (the stored JSON; the host
//!   envelope when there is one, `?kind=document` for the guest's), `GET /`
//!   (an HTML table). Reads are not authenticated: listen on an address
//!   only trusted machines reach (the default is 127.0.0.1).

use crate::service::listener::{self, ConnectionLimits, ListenerError, TlsFiles};
use crate::service::store::{PutOutcome, RunKind, RunSummary, Store, StoreError};
use axum::body::Body;
use axum::extract::{ConnectInfo, Path as UrlPath, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Default listen address: this machine only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// How much larger a console log is as a JSON string than as console
/// bytes, at most, for the logs the limit is sized for: a line end, quote
/// or backslash takes two bytes escaped (`\n`), other printable text one.
/// A log made mostly of other control characters (six bytes each, as
/// `\u001b`) can exceed it.
pub const CONSOLE_LOG_JSON_GROWTH: u64 = 2;
/// Room in an envelope for all but its console log: the guest's document,
/// QEMU's argv, hashes and the boot's record.
pub const ENVELOPE_ROOM_BYTES: u64 = 16 << 20;
/// Default body limit: the envelope of a boot whose console log reached
/// the host's cap ([`qemu::console_scan::MAX_LOG_BYTES`]), that log as
/// JSON, plus the rest of the envelope. So what `run` records for one boot,
/// however noisy, is accepted (144 MiB).
pub const DEFAULT_MAX_BYTES: u64 =
    qemu::console_scan::MAX_LOG_BYTES as u64 * CONSOLE_LOG_JSON_GROWTH + ENVELOPE_ROOM_BYTES;
/// Most runs `GET /runs` and the page list.
const LIST_LIMIT: usize = 1000;

/// Errors starting or running the receiver.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address cannot be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The store cannot be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The TLS certificate or key cannot be used.
    #[error(transparent)]
    Tls(#[from] ListenerError),
    /// The async runtime or the server failed.
    #[error("the receiver on {addr} failed")]
    Server {
        /// Its address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The server thread died.
    #[error("the receiver thread on {addr} panicked")]
    Panicked {
        /// Its address.
        addr: SocketAddr,
    },
    /// A token that cannot work.
    #[error("bad token{from}: {why}")]
    BadToken {
        /// Where it came from (`" in FILE"`), or empty.
        from: String,
        /// What is wrong.
        why: &'static str,
    },
    /// The token file cannot be read.
    #[error("cannot read the token file {path}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The token from `--token` or `--token-file`, checked: non-empty,
/// printable ASCII without spaces (it travels in a header and on the
/// kernel cmdline).
pub fn read_token(token: Option<&str>, token_file: Option<&Path>) -> Result<String, ServeError> {
    let (text, from) = match (token, token_file) {
        (Some(t), _) => (t.to_string(), String::new()),
        (None, Some(p)) => {
            let text =
                std::fs::read_to_string(p).map_err(|source| ServeError::TokenFile { path: p.to_path_buf(), source })?;
            (text.lines().next().unwrap_or_default().trim().to_string(), format!(" in {}", p.display()))
        }
        (None, None) => (String::new(), String::new()),
    };
    if text.is_empty() {
        return Err(ServeError::BadToken { from, why: "it is empty (give --token or --token-file)" });
    }
    if !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ServeError::BadToken { from, why: "use printable ASCII without spaces" });
    }
    Ok(text)
}

/// How to run a receiver.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The store file.
    pub db: PathBuf,
    /// The token uploads must carry.
    pub token: String,
    /// Where to listen (port 0: any free port).
    pub listen: SocketAddr,
    /// Largest body accepted.
    pub max_bytes: u64,
    /// Prefix of the one line logged per upload on stderr; `None` logs
    /// nothing.
    pub log_prefix: Option<String>,
    /// Connection cap and timeouts.
    pub limits: ConnectionLimits,
    /// Speak https with this certificate and key; `None`: plain http.
    pub tls: Option<TlsFiles>,
}

struct AppState {
    store: Mutex<Store>,
    token: String,
    max_bytes: u64,
    log_prefix: Option<String>,
}

type Shared = Arc<AppState>;

/// A receiver running on its own thread until [`Receiver::stop`] (or drop).
#[derive(Debug)]
pub struct Receiver {
    addr: SocketAddr,
    tls: bool,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Receiver {
    /// Opens the store, binds the address (so the port is known and in use
    /// when this returns), and serves on a background thread.
    pub fn start(cfg: ServeConfig) -> Result<Receiver, ServeError> {
        let store = Store::open(&cfg.db)?;
        Receiver::start_with(store, cfg)
    }

    /// [`Receiver::start`] with the store already open (`cfg.db` unused).
    fn start_with(store: Store, cfg: ServeConfig) -> Result<Receiver, ServeError> {
        // Before the port is taken: a certificate that cannot work fails
        // the start.
        let tls = cfg.tls.as_ref().map(listener::tls_acceptor).transpose()?;
        let listener =
            std::net::TcpListener::bind(cfg.listen).map_err(|source| ServeError::Bind { addr: cfg.listen, source })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Bind { addr: cfg.listen, source })?;
        listener.set_nonblocking(true).map_err(|source| ServeError::Bind { addr, source })?;
        let state = Arc::new(AppState {
            store: Mutex::new(store),
            token: cfg.token,
            max_bytes: cfg.max_bytes,
            log_prefix: cfg.log_prefix,
        });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| ServeError::Server { addr, source })?;
        let limits = cfg.limits;
        let is_tls = tls.is_some();
        let thread = std::thread::Builder::new()
            .name(format!("bootbench-serve-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)?;
                    let shutdown = async {
                        let _ = rx.await;
                    };
                    listener::serve(listener, router(state), &limits, tls, shutdown).await
                })
            })
            .map_err(|source| ServeError::Server { addr, source })?;
        Ok(Receiver { addr, tls: is_tls, shutdown: Some(tx), thread: Some(thread) })
    }

    /// Its base URL on the address it listens on: `https://` with TLS.
    pub fn url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn join(&mut self) -> Result<(), ServeError> {
        match self.thread.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(r)) => r.map_err(|source| ServeError::Server { addr: self.addr, source }),
            Some(Err(_)) => Err(ServeError::Panicked { addr: self.addr }),
        }
    }

    /// Stops accepting, finishes requests in flight (each bounded by the
    /// limits' timeouts), and joins the thread.
    pub fn stop(mut self) -> Result<(), ServeError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.join()
    }

    /// Blocks until the server ends (only on an error: it has no other end).
    pub fn wait(mut self) -> Result<(), ServeError> {
        self.join()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = self.join();
    }
}

fn router(state: Shared) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/runs", get(list_runs))
        .route("/runs/{id}", get(get_run).put(put_run))
        .fallback(no_route)
        .with_state(state)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

fn chain(e: &dyn std::error::Error) -> String {
    loads::error_chain::error_chain(e)
}

async fn no_route(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("no such endpoint: {method} {uri} (endpoints: PUT /runs/{{id}}, GET /runs, GET /runs/{{id}}, GET /)"),
    )
}

/// 401 without a bearer token, 403 with a wrong one.
fn check_token(headers: &HeaderMap, token: &str) -> Result<(), Response> {
    let unauthorized = |msg: &str| {
        let mut r = error(StatusCode::UNAUTHORIZED, msg);
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer realm=\"bootbench\""));
        r
    };
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(unauthorized("missing token: send 'Authorization: Bearer TOKEN' (bootbench.token= in the guest, --token for bootbench upload)"));
    };
    let text = value.to_str().unwrap_or_default();
    let given = match text.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        _ => return Err(unauthorized("the Authorization header must be 'Bearer TOKEN'")),
    };
    if !constant_time_eq::constant_time_eq(given.as_bytes(), token.as_bytes()) {
        return Err(error(StatusCode::FORBIDDEN, "wrong token for this receiver"));
    }
    Ok(())
}

async fn put_run(
    State(st): State<Shared>,
    UrlPath(id): UrlPath<String>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (resp, note) = match store_upload(&st, &id, peer, &headers, body).await {
        Ok((status, body, note)) => ((status, Json(body)).into_response(), note),
        Err(resp) => {
            let note = format!("refused ({})", resp.status().as_u16());
            (resp, note)
        }
    };
    if let Some(prefix) = &st.log_prefix {
        let attempt = headers
            .get(results_uploader::ATTEMPT_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|a| format!(", attempt {a}"))
            .unwrap_or_default();
        // The id is the client's, refused ones included: escaped, so that
        // it cannot forge or break log lines.
        eprintln!("{prefix}PUT /runs/{} from {peer}{attempt}: {} {note}", id.escape_debug(), resp.status().as_u16());
    }
    resp
}

async fn store_upload(
    st: &Shared,
    id: &str,
    peer: SocketAddr,
    headers: &HeaderMap,
    body: Body,
) -> Result<(StatusCode, serde_json::Value, String), Response> {
    check_token(headers, &st.token)?;
    if let Err(e) = results_uploader::check_run_id(id) {
        return Err(error(StatusCode::BAD_REQUEST, e.to_string()));
    }
    if let Some(h) = headers.get(results_uploader::RUN_ID_HEADER) {
        let h = h.to_str().unwrap_or_default();
        if h != id {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("the URL names run '{id}' but {} says '{h}'", results_uploader::RUN_ID_HEADER),
            ));
        }
    }
    let too_big = |what: String| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{what} exceeds this receiver's limit of {} bytes (bootbench serve --max-bytes)", st.max_bytes),
        )
    };
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| *n > st.max_bytes) {
        return Err(too_big(format!("a body of {n} bytes")));
    }
    let limit = usize::try_from(st.max_bytes).unwrap_or(usize::MAX);
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(e) => {
            let inner = e.into_inner();
            if inner.is::<http_body_util::LengthLimitError>() {
                return Err(too_big("the body".into()));
            }
            return Err(error(StatusCode::BAD_REQUEST, format!("cannot read the body: {}", chain(&*inner))));
        }
    };
    let n = bytes.len();
    let run = crate::service::store::validate(bytes.to_vec(), id)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("run '{id}' refused: {}", chain(&e))))?;
    let st2 = st.clone();
    let remote = peer.ip().to_string();
    let run2 = run.clone();
    let put = tokio::task::spawn_blocking(move || {
        let mut store = st2.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        store.put(&run2, Some(&remote))
    })
    .await;
    let outcome = match put {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return Err(store_error(&e)),
        Err(e) => return Err(error(StatusCode::INTERNAL_SERVER_ERROR, format!("store task failed: {e}"))),
    };
    // The uploader takes a 2xx as delivered only with this acknowledgement:
    // the run id and the sha256 of the bytes received.
    let mut base = results_uploader::acknowledgement(&run.run_id, &run.body);
    base.extend([
        ("kind".to_string(), json!(run.kind.name())),
        ("sha256".to_string(), json!(run.sha256)),
        ("bytes".to_string(), json!(n)),
    ]);
    let base = serde_json::Value::Object(base);
    let with = |key: &str| {
        let mut v = base.clone();
        if let Some(m) = v.as_object_mut() {
            m.insert(key.to_string(), json!(true));
        }
        v
    };
    match outcome {
        PutOutcome::Stored => Ok((StatusCode::CREATED, with("stored"), format!("stored {} ({n} bytes)", run.kind.name()))),
        PutOutcome::AlreadyStored => {
            Ok((StatusCode::OK, with("already_stored"), format!("already stored {}", run.kind.name())))
        }
        PutOutcome::Conflict { existing_sha256 } => Err(error(
            StatusCode::CONFLICT,
            format!(
                "run '{id}' ({}) is already stored with different content (stored sha256 {existing_sha256}, this upload {}); a run id names one result and is never overwritten",
                run.kind.name(),
                run.sha256
            ),
        )),
    }
}

/// The answer to a store that failed: 507 when it is full (the upload may
/// work later: the client retries it), 500 otherwise. The reply names
/// neither the database's path nor SQLite's text (a client has no use for
/// them, and the path tells it where the host keeps its files); the
/// receiver's log gets the whole error.
fn store_error(e: &StoreError) -> Response {
    eprintln!("serve: results store error: {}", chain(e));
    if e.is_full() {
        error(StatusCode::INSUFFICIENT_STORAGE, "the results store is full; retry later")
    } else {
        error(StatusCode::INTERNAL_SERVER_ERROR, "the results store failed; the receiver's log has the error")
    }
}

fn summaries(st: &Shared) -> Result<Vec<RunSummary>, Response> {
    let store = st.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    store.list(LIST_LIMIT).map_err(|e| store_error(&e))
}

async fn list_runs(State(st): State<Shared>) -> Response {
    match tokio::task::spawn_blocking(move || summaries(&st)).await {
        Ok(Ok(runs)) => Json(json!({ "runs": runs })).into_response(),
        Ok(Err(resp)) => resp,
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("store task failed: {e}")),
    }
}

#[derive(serde::Deserialize)]
struct KindQuery {
    kind: Option<String>,
}

async fn get_run(State(st): State<Shared>, UrlPath(id): UrlPath<String>, Query(q): Query<KindQuery>) -> Response {
    if let Err(e) = results_uploader::check_run_id(&id) {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    let kind = match q.kind.as_deref() {
        None => None,
        Some("document") => Some(RunKind::Document),
        Some("envelope") => Some(RunKind::Envelope),
        Some(other) => return error(StatusCode::BAD_REQUEST, format!("unknown kind '{other}' (document or envelope)")),
    };
    let found = tokio::task::spawn_blocking(move || {
        let store = st.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        store.body(&id, kind).map(|b| (id, b))
    })
    .await;
    match found {
        Ok(Ok((_, Some((kind, body))))) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::HeaderName::from_static("x-bootbench-kind"), kind.name()),
            ],
            body,
        )
            .into_response(),
        Ok(Ok((id, None))) => error(StatusCode::NOT_FOUND, format!("run '{id}' is not stored here")),
        Ok(Err(e)) => store_error(&e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("store task failed: {e}")),
    }
}

async fn page(State(st): State<Shared>) -> Response {
    let runs = match tokio::task::spawn_blocking(move || summaries(&st)).await {
        Ok(Ok(runs)) => runs,
        Ok(Err(resp)) => return resp,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, format!("store task failed: {e}")),
    };
    Html(render_page(&runs)).into_response()
}

/// The HTML listing: one row per stored run, newest first.
pub fn render_page(runs: &[RunSummary]) -> String {
    let esc = |s: &str| html_escape::encode_text(s).into_owned();
    let mut rows = String::new();
    for r in runs {
        let id = esc(&r.run_id);
        let href = format!("/runs/{}?kind={}", html_escape::encode_double_quoted_attribute(&r.run_id), r.kind.name());
        rows.push_str(&format!(
            "<tr><td><a href=\"{href}\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            r.kind.name(),
            esc(&r.received_at),
            esc(&r.status),
            esc(&r.kernel_release),
            esc(&r.arch),
            esc(&r.suite),
            esc(r.label.as_deref().unwrap_or("")),
            r.bytes,
            esc(r.remote.as_deref().unwrap_or("")),
        ));
    }
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>bootbench runs</title>\
<style>body{{font-family:sans-serif}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}}</style>\
</head><body><h1>bootbench runs</h1><p>{} run(s), newest first. JSON: <a href=\"/runs\">/runs</a>.</p>\n\
<table><tr><th>run id</th><th>kind</th><th>received</th><th>status</th><th>kernel</th><th>arch</th><th>suite</th><th>label</th><th>bytes</th><th>from</th></tr>\n{rows}</table></body></html>\n",
        runs.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{BootRecord, ResultsFile};
    use results_uploader::{upload, RetryPolicy, UploadReport, UploadRequest, UploadSettings, Verdict};
    use std::time::Duration;

    fn envelope(id: &str, console_bytes: usize) -> Vec<u8> {
        let doc = crate::service::store::tests::doc(id);
        let mut boot = BootRecord { label: "base".into(), result: Some(doc), ..Default::default() };
        boot.console_log = "[    1.234567] a console line\r\n".repeat(console_bytes / 31 + 1);
        serde_json::to_vec(&ResultsFile { boots: vec![boot], ..ResultsFile::default() }).unwrap()
    }

    /// A store that runs out of room answers 507, which the uploader
    /// retries (and, the store staying full, gives up on: never "refused").
    #[test]
    fn a_full_store_answers_507_and_the_uploader_retries_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("full.db");
        let store = Store::open(&db).unwrap();
        store.limit_pages(8);
        let cfg = ServeConfig {
            db,
            token: "t0ken".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_bytes: DEFAULT_MAX_BYTES,
            log_prefix: None,
            limits: ConnectionLimits::default(),
            tls: None,
        };
        let receiver = Receiver::start_with(store, cfg).unwrap();
        let url = format!("http://{}", receiver.addr());
        let body = envelope("run-full", 1 << 20);
        let mut settings = UploadSettings::host();
        settings.policy = RetryPolicy {
            max_attempts: 2,
            initial_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(40),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(20),
            jitter_seed: Some(1),
            total_budget: Duration::from_secs(60),
        };
        let o = upload(&UploadRequest { base_url: &url, token: "t0ken", run_id: "run-full", body: &body }, &settings);
        assert_eq!(UploadReport::from(&o).history, ["507", "507"], "{o:?}");
        assert_eq!(o.verdict, Verdict::GaveUp, "{o:?}");
        assert!(o.error.as_deref().unwrap_or_default().contains("store is full"), "{o:?}");
        // A small run still fits: the receiver is not broken, only full.
        let small = envelope("run-small", 0);
        let o = upload(&UploadRequest { base_url: &url, token: "t0ken", run_id: "run-small", body: &small }, &settings);
        assert_eq!(o.verdict, Verdict::Stored, "{o:?}");
        receiver.stop().unwrap();
    }

    /// The default limit takes an envelope whose console log reached the
    /// host's cap, in the console's usual shape (lines ending in CR LF).
    #[test]
    fn the_default_limit_takes_an_envelope_with_a_capped_console_log() {
        let body = envelope("run-noisy", qemu::console_scan::MAX_LOG_BYTES);
        assert!(body.len() as u64 > qemu::console_scan::MAX_LOG_BYTES as u64);
        assert!(body.len() as u64 <= DEFAULT_MAX_BYTES, "{} > {DEFAULT_MAX_BYTES}", body.len());
    }

    #[test]
    fn a_failed_store_is_answered_without_its_path_or_sqlites_text() {
        let path = std::path::PathBuf::from("/srv/private-lab-dir/runs.db");
        let body = |e: StoreError| {
            let resp = store_error(&e);
            let status = resp.status().as_u16();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let bytes = rt.block_on(axum::body::to_bytes(resp.into_body(), usize::MAX)).unwrap();
            (status, String::from_utf8(bytes.to_vec()).unwrap())
        };
        let query = |code| StoreError::Query {
            path: path.clone(),
            what: "inserting the run",
            source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some("disk I/O error".into())),
        };
        for (code, status) in [(rusqlite::ffi::SQLITE_IOERR, 500), (rusqlite::ffi::SQLITE_FULL, 507)] {
            let (got, text) = body(query(code));
            assert_eq!(got, status, "{text}");
            assert!(!text.contains("private-lab-dir") && !text.contains("disk I/O"), "{text}");
        }
    }
}
