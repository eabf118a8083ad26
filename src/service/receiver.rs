//! The HTTP receiver for uploaded runs, in front of the
//! results store. Owns the HTTP side only: authentication (bearer tokens,
//! found by digest in constant time, the store's table read on every
//! request so a revocation holds at once), the size limit, status codes
//! and messages, and the listing pages. What is storable and how runs are
//! kept is `store`'s; what a token is, `tokens`'.
//!
//! Endpoints:
//! - `PUT /runs/{id}`: store a run (a token that may upload). 201 stored,
//!   200 already stored (same content), 400 malformed, 401 no token, 403
//!   wrong, revoked or read-only token, 409 other content under this id,
//!   413 too big, 500 store error, 507 the store is full (disk or page
//!   limit; the uploader retries later).
//! - `GET /runs` (JSON list, paged: `limit`, `after`; filtered: `kernel`,
//!   `label`, `since`, `until`), `GET /runs/{id}` (the stored JSON; the
//!   host envelope when there is one, `?kind=document` for the guest's),
//!   `GET /` (an HTML table, paged and filtered the same way, its links
//!   relative so that it works behind a proxy's path prefix). These need a
//!   token that may read (401/403 as for uploads), unless reads are public.
//! - `GET /healthz`: `{"ok":true}` when the store answers, 503 when not.
//!   No token.
//!
//! No answer names the database's path or repeats the token sent.

use crate::service::listener::{self, ConnectionLimits, ListenerError, TlsFiles};
use crate::service::store::{Cursor, ListQuery, PutOutcome, RunKind, RunPage, Store, StoreError};
use crate::service::tokens::{self, Scope, TokenDigest, TokenError};
use axum::body::Body;
use axum::extract::{ConnectInfo, Path as UrlPath, Query, RawQuery, State};
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
/// Runs `GET /runs` and the page list without a `limit`.
pub const DEFAULT_PAGE: usize = 100;
/// The largest `limit` taken.
pub const MAX_PAGE: usize = 1000;
/// The query parameters of `GET /runs` and `GET /`.
const LIST_PARAMETERS: &str = "limit, after, kernel, label, since, until";

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
    /// A token, its file or its name is not usable.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// `--base-url` is not a usable base URL.
    #[error("bad --base-url")]
    BaseUrl(#[source] results_uploader::UrlError),
}

/// The token from `--token` or `--token-file` (every command that takes
/// one reads it here), checked: at least [`tokens::MIN_TOKEN_LEN`]
/// characters of printable ASCII without spaces (it travels in a header
/// and on the kernel cmdline), and a file must be private to its owner
/// (see [`tokens::read_token_file`]). Errors name the source, never the
/// token.
pub fn read_token(token: Option<&str>, token_file: Option<&Path>) -> Result<String, ServeError> {
    match (token, token_file) {
        (Some(t), _) => {
            tokens::check_secret(t, "given on the command line")?;
            Ok(t.to_string())
        }
        (None, Some(p)) => Ok(tokens::read_token_file(p)?),
        (None, None) => {
            Err(TokenError::Bad { from: "given".into(), why: "there is none (give --token or --token-file)".into() }
                .into())
        }
    }
}

/// A token given at start rather than stored in the store's table
/// (`serve --token`, `run --serve`'s own): kept in memory only. Its name
/// is what the listing shows for the runs it stored.
#[derive(Clone)]
pub struct GivenToken {
    /// Its name (one of [`tokens::RESERVED_NAMES`], which stored tokens
    /// cannot take).
    pub name: String,
    /// The secret.
    pub secret: String,
    /// What it may do.
    pub scope: Scope,
}

impl std::fmt::Debug for GivenToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GivenToken").field("name", &self.name).field("scope", &self.scope).finish_non_exhaustive()
    }
}

/// How to run a receiver.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The store file.
    pub db: PathBuf,
    /// Tokens besides the store's own (which are read from its table on
    /// every request).
    pub tokens: Vec<GivenToken>,
    /// Whether `GET /`, `/runs` and `/runs/{id}` are served without a token.
    pub public_reads: bool,
    /// The URL the page is reached at (behind a reverse proxy), for
    /// absolute links; `None`: the page's links are relative.
    pub base_url: Option<String>,
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
    /// The [`ServeConfig::tokens`], by digest.
    given: Vec<Known>,
    public_reads: bool,
    /// What the page's links start with: empty (relative) or the base URL
    /// ending in '/'.
    links_base: String,
    max_bytes: u64,
    log_prefix: Option<String>,
}

/// A token the receiver knows, as a request is checked against it.
struct Known {
    name: String,
    digest: TokenDigest,
    scope: Scope,
    revoked: bool,
}

impl AppState {
    /// The state of a receiver of `cfg` on `store`; checks the given
    /// tokens and the base URL.
    fn new(store: Store, cfg: &ServeConfig) -> Result<AppState, ServeError> {
        let mut given = Vec::new();
        for t in &cfg.tokens {
            tokens::check_secret(&t.secret, &format!("for '{}'", t.name))?;
            given.push(Known {
                name: t.name.clone(),
                digest: tokens::digest(&t.secret),
                scope: t.scope,
                revoked: false,
            });
        }
        let links_base = match &cfg.base_url {
            None => String::new(),
            Some(u) => {
                let url = results_uploader::parse_base_url(u).map_err(ServeError::BaseUrl)?;
                let s = url.to_string();
                if s.ends_with('/') {
                    s
                } else {
                    format!("{s}/")
                }
            }
        };
        Ok(AppState {
            store: Mutex::new(store),
            given,
            public_reads: cfg.public_reads,
            links_base,
            max_bytes: cfg.max_bytes,
            log_prefix: cfg.log_prefix.clone(),
        })
    }
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
        let state = Arc::new(AppState::new(store, &cfg)?);
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
        .route("/healthz", get(healthz))
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
    // The path only: a query is the client's and may hold anything.
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no such endpoint: {method} {} (endpoints: PUT /runs/{{id}}, GET /runs, GET /runs/{{id}}, GET /, GET /healthz)",
            uri.path()
        ),
    )
}

/// What a request's token must allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Upload,
    Read,
}

impl Need {
    fn allowed(self, scope: Scope) -> bool {
        match self {
            Need::Upload => scope.upload,
            Need::Read => scope.read,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Need::Upload => "upload",
            Need::Read => "read",
        }
    }
}

/// A 401 for `need` with `message`, asking for a Bearer token and, for
/// reads, for HTTP Basic too, so that a browser prompts for the token.
fn unauthorized(need: Need, message: impl Into<String>) -> Response {
    let mut r = error(StatusCode::UNAUTHORIZED, message);
    let h = r.headers_mut();
    h.append(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer realm=\"bootbench\""));
    if need == Need::Read {
        h.append(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Basic realm=\"bootbench\", charset=\"UTF-8\""),
        );
    }
    r
}

/// A token as the request gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenCredential {
    /// The token.
    pub token: String,
    /// It came as HTTP Basic's password (a browser's way).
    pub basic: bool,
}

/// The token of an `Authorization` header's value: `Bearer TOKEN`, or HTTP
/// Basic with the token as the password (any user name), which is how a
/// browser sends one. `None` when it is neither.
pub fn parse_authorization(value: &[u8]) -> Option<GivenCredential> {
    let text = std::str::from_utf8(value).unwrap_or_default();
    match text.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => {
            Some(GivenCredential { token: rest.trim().to_string(), basic: false })
        }
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("basic") => {
            use base64::Engine as _;
            let decoded = base64::engine::general_purpose::STANDARD.decode(rest.trim()).ok();
            let pair = decoded.and_then(|d| String::from_utf8(d).ok())?;
            let (_user, password) = pair.split_once(':')?;
            Some(GivenCredential { token: password.to_string(), basic: true })
        }
        _ => None,
    }
}

/// The token of `headers` ([`parse_authorization`]); 401 without one.
fn given_token(headers: &HeaderMap, need: Need) -> Result<GivenCredential, Response> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(unauthorized(need, match need {
            Need::Upload => "missing token: send 'Authorization: Bearer TOKEN' (bootbench.token= in the guest, --token for bootbench upload)",
            Need::Read => "missing token: reads need 'Authorization: Bearer TOKEN' (or HTTP Basic with the token as the password, as a browser asks for it) with a token that may read (bootbench serve token add NAME --read), unless the receiver runs with --public-reads",
        }));
    };
    // A value with bytes outside visible ASCII reads as empty, as before.
    let value = if value.to_str().is_ok() { value.as_bytes() } else { b"" };
    parse_authorization(value).ok_or_else(|| {
        unauthorized(
            need,
            "the Authorization header must be 'Bearer TOKEN' or HTTP Basic with the token as the password",
        )
    })
}

/// Checks the request's token for `need`: 401 without one, 403 when it is
/// unknown, revoked or not allowed to (401 with the challenge again when
/// it came as HTTP Basic, so that a browser asks anew instead of resending
/// what it cached). Reads pass without a token when they are public. The
/// store's tokens are read on every request, so a token revoked or added
/// while the receiver runs counts at once. Returns the token's name.
async fn authorize(st: &Shared, headers: &HeaderMap, need: Need) -> Result<Option<String>, Response> {
    if need == Need::Read && st.public_reads {
        return Ok(None);
    }
    let given = given_token(headers, need)?;
    let refuse = |message: String| {
        if given.basic {
            unauthorized(need, message)
        } else {
            error(StatusCode::FORBIDDEN, message)
        }
    };
    let stored = with_store(st, |s| s.tokens()).await?;
    let stored: Vec<Known> = stored
        .into_iter()
        .map(|t| Known { name: t.name, digest: t.digest, scope: t.scope, revoked: t.revoked_at.is_some() })
        .collect();
    let known: Vec<&Known> = st.given.iter().chain(&stored).collect();
    let digests: Vec<TokenDigest> = known.iter().map(|k| k.digest).collect();
    let Some(k) = tokens::find(&given.token, &digests).and_then(|i| known.get(i)) else {
        return Err(refuse("wrong token for this receiver".into()));
    };
    if k.revoked {
        return Err(refuse("this token was revoked".into()));
    }
    if !need.allowed(k.scope) {
        return Err(refuse(format!("this token may not {} here (it may: {})", need.verb(), k.scope.name())));
    }
    Ok(Some(k.name.clone()))
}

/// Runs `f` on the store on a blocking thread (the store's calls wait on
/// SQLite, and the runtime has one thread): a failed store is answered by
/// [`store_error`].
async fn with_store<T: Send + 'static>(
    st: &Shared,
    f: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, Response> {
    let st = st.clone();
    let done = tokio::task::spawn_blocking(move || {
        let mut store = st.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut store)
    })
    .await;
    match done {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(store_error(&e)),
        Err(e) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, format!("store task failed: {e}"))),
    }
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
        log::info!("{prefix}PUT /runs/{} from {peer}{attempt}: {} {note}", id.escape_debug(), resp.status().as_u16());
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
    let token_name = authorize(st, headers, Need::Upload).await?;
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
    let remote = peer.ip().to_string();
    let (run2, name2) = (run.clone(), token_name.clone());
    let outcome = with_store(st, move |s| s.put(&run2, Some(&remote), name2.as_deref())).await?;
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
    let by = token_name.map(|n| format!(" with token {n}")).unwrap_or_default();
    match outcome {
        PutOutcome::Stored => {
            Ok((StatusCode::CREATED, with("stored"), format!("stored {} ({n} bytes){by}", run.kind.name())))
        }
        PutOutcome::AlreadyStored => {
            Ok((StatusCode::OK, with("already_stored"), format!("already stored {}{by}", run.kind.name())))
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
    log::error!("results store error: {}", chain(e));
    if e.is_full() {
        error(StatusCode::INSUFFICIENT_STORAGE, "the results store is full; retry later")
    } else {
        error(StatusCode::INTERNAL_SERVER_ERROR, "the results store failed; the receiver's log has the error")
    }
}

/// The listing's query string: [`ListQuery`] with [`DEFAULT_PAGE`] runs
/// when no `limit` is given. 400 naming the parameter for an unknown,
/// repeated or bad one (the value is not repeated back).
fn list_query(raw: Option<&str>) -> Result<ListQuery, Response> {
    let mut q = ListQuery { limit: DEFAULT_PAGE, ..ListQuery::default() };
    let mut seen: Vec<String> = Vec::new();
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        let key = key.into_owned();
        // Named when it looks like a parameter's name: a key is the
        // client's text, and could be anything (a token pasted there).
        let named = key.len() <= 16 && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        let bad = |why: &str| {
            let which = if named { format!("query parameter '{key}'") } else { "a query parameter".into() };
            error(StatusCode::BAD_REQUEST, format!("{which}: {why}"))
        };
        if seen.contains(&key) {
            return Err(bad("given twice"));
        }
        let text = || Some(value.to_string()).filter(|v| !v.is_empty()).ok_or_else(|| bad("it is empty"));
        let time = || {
            humantime::parse_rfc3339_weak(&value)
                .map(|t| humantime::format_rfc3339_seconds(t).to_string())
                .map_err(|_| bad("not an RFC 3339 time in UTC, e.g. 2024-05-01T00:00:00Z"))
        };
        match key.as_str() {
            "limit" => {
                q.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| bad(&format!("use a whole number from 1 to {MAX_PAGE}")))?
            }
            "after" => {
                q.after = Some(
                    value
                        .parse::<Cursor>()
                        .map_err(|_| bad("not a cursor this receiver gave (a listing's \"next\")"))?,
                )
            }
            "kernel" => q.kernel = Some(text()?),
            "label" => q.label = Some(text()?),
            "since" => q.since = Some(time()?),
            "until" => q.until = Some(time()?),
            _ => return Err(bad(&format!("unknown (these are: {LIST_PARAMETERS})"))),
        }
        seen.push(key);
    }
    Ok(q)
}

/// The page of the listing a read asks for, after its token is checked.
async fn read_page(st: &Shared, headers: &HeaderMap, raw: Option<&str>) -> Result<(RunPage, ListQuery), Response> {
    authorize(st, headers, Need::Read).await?;
    let q = list_query(raw)?;
    let q2 = q.clone();
    let page = with_store(st, move |s| s.page(&q2)).await?;
    Ok((page, q))
}

async fn list_runs(State(st): State<Shared>, headers: HeaderMap, RawQuery(raw): RawQuery) -> Response {
    match read_page(&st, &headers, raw.as_deref()).await {
        Ok((page, _)) => Json(json!({
            "runs": page.runs,
            "total": page.total,
            "truncated": page.next.is_some(),
            "next": page.next.map(|c| c.to_string()),
        }))
        .into_response(),
        Err(resp) => resp,
    }
}

#[derive(serde::Deserialize)]
struct KindQuery {
    kind: Option<String>,
}

async fn get_run(
    State(st): State<Shared>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<KindQuery>,
) -> Response {
    if let Err(resp) = authorize(&st, &headers, Need::Read).await {
        return resp;
    }
    if let Err(e) = results_uploader::check_run_id(&id) {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    let kind = match q.kind.as_deref() {
        None => None,
        Some("document") => Some(RunKind::Document),
        Some("envelope") => Some(RunKind::Envelope),
        Some(_) => return error(StatusCode::BAD_REQUEST, "unknown kind (document or envelope)"),
    };
    let id2 = id.clone();
    match with_store(&st, move |s| s.body(&id2, kind)).await {
        Ok(Some((kind, body))) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::HeaderName::from_static("x-bootbench-kind"), kind.name()),
            ],
            body,
        )
            .into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, format!("run '{id}' is not stored here")),
        Err(resp) => resp,
    }
}

async fn page(State(st): State<Shared>, headers: HeaderMap, RawQuery(raw): RawQuery) -> Response {
    match read_page(&st, &headers, raw.as_deref()).await {
        Ok((page, q)) => Html(render_page(&page, &q, &st.links_base)).into_response(),
        Err(resp) => resp,
    }
}

/// 200 `{"ok":true}` when the store answers a trivial query, 503 when it
/// does not (the log has why). No token: a load balancer or monitor asks.
async fn healthz(State(st): State<Shared>) -> Response {
    match with_store(&st, |s| s.ping()).await {
        Ok(()) => Json(json!({ "ok": true, "store": "ok" })).into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "ok": false, "store": "failing" }))).into_response(),
    }
}

/// The query string of the listing `q` starting after `after` (the limit
/// only when not the default), with its leading '?'; empty when there is
/// nothing to say.
fn query_string(q: &ListQuery, after: Option<&Cursor>) -> String {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    if q.limit != DEFAULT_PAGE {
        out.append_pair("limit", &q.limit.to_string());
    }
    for (key, value) in [("kernel", &q.kernel), ("label", &q.label), ("since", &q.since), ("until", &q.until)] {
        if let Some(v) = value {
            out.append_pair(key, v);
        }
    }
    if let Some(c) = after {
        out.append_pair("after", &c.to_string());
    }
    let text = out.finish();
    if text.is_empty() {
        text
    } else {
        format!("?{text}")
    }
}

/// The HTML listing of `page` (asked for with `q`): one row per stored
/// run, newest first, with "showing N of M" and links to the next page and
/// back to the first. Every link starts with `base`: empty, so links are
/// relative to the page (`runs/ID?kind=…`, `?after=…`) and work under
/// whatever path prefix a reverse proxy serves it at, or `serve
/// --base-url`'s URL ending in '/'.
pub fn render_page(page: &RunPage, q: &ListQuery, base: &str) -> String {
    let esc = |s: &str| html_escape::encode_text(s).into_owned();
    let attr = |s: &str| html_escape::encode_double_quoted_attribute(s).into_owned();
    let mut rows = String::new();
    for r in &page.runs {
        let id = esc(&r.run_id);
        let href = attr(&format!("{base}runs/{}?kind={}", r.run_id, r.kind.name()));
        rows.push_str(&format!(
            "<tr><td><a href=\"{href}\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            r.kind.name(),
            esc(&r.received_at),
            esc(&r.status),
            esc(&r.kernel_release),
            esc(&r.arch),
            esc(&r.suite),
            esc(r.label.as_deref().unwrap_or("")),
            r.bytes,
            esc(r.remote.as_deref().unwrap_or("")),
            esc(r.token_name.as_deref().unwrap_or("")),
        ));
    }
    // The page itself: `base`, or "./" for the relative form (an empty
    // href would keep the current query).
    let here = if base.is_empty() { "./" } else { base };
    let mut nav = String::new();
    if let Some(next) = &page.next {
        let href = format!("{base}{}", query_string(q, Some(next)));
        nav.push_str(&format!(" <a rel=\"next\" href=\"{}\">next page</a>", attr(&href)));
    }
    if q.after.is_some() {
        let first = query_string(q, None);
        let href = if first.is_empty() { here.to_string() } else { format!("{base}{first}") };
        nav.push_str(&format!(" <a rel=\"first\" href=\"{}\">first page</a>", attr(&href)));
    }
    let json = attr(&format!("{base}runs{}", query_string(q, q.after.as_ref())));
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>bootbench runs</title>\
<style>body{{font-family:sans-serif}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}}</style>\
</head><body><h1>bootbench runs</h1><p>showing {} of {} run(s), newest first.{nav} JSON: <a href=\"{json}\">runs</a>.</p>\n\
<table><tr><th>run id</th><th>kind</th><th>received</th><th>status</th><th>kernel</th><th>arch</th><th>suite</th><th>label</th><th>bytes</th><th>from</th><th>token</th></tr>\n{rows}</table></body></html>\n",
        page.runs.len(),
        page.total,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{BootRecord, ResultsFile};
    use results_uploader::{upload, RetryPolicy, UploadReport, UploadRequest, UploadSettings, Verdict};
    use std::time::Duration;

    const TOKEN: &str = "t0ken-0123456789abcdef";

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
            tokens: vec![GivenToken { name: "cli".into(), secret: TOKEN.into(), scope: Scope::UPLOAD }],
            public_reads: false,
            base_url: None,
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
        let o = upload(&UploadRequest { base_url: &url, token: TOKEN, run_id: "run-full", body: &body }, &settings);
        assert_eq!(UploadReport::from(&o).history, ["507", "507"], "{o:?}");
        assert_eq!(o.verdict, Verdict::GaveUp, "{o:?}");
        assert!(o.error.as_deref().unwrap_or_default().contains("store is full"), "{o:?}");
        // A small run still fits: the receiver is not broken, only full.
        let small = envelope("run-small", 0);
        let o = upload(&UploadRequest { base_url: &url, token: TOKEN, run_id: "run-small", body: &small }, &settings);
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

    fn summary(id: &str) -> crate::service::store::RunSummary {
        crate::service::store::RunSummary {
            run_id: id.into(),
            kind: RunKind::Document,
            sha256: "x".into(),
            bytes: 1,
            received_at: "2024-05-01T00:00:00Z".into(),
            remote: None,
            status: "complete".into(),
            kernel_release: "6.1".into(),
            arch: "x86_64".into(),
            suite: "quick".into(),
            label: None,
            token_name: Some("lab-1".into()),
        }
    }

    /// The hrefs of `html`, in order.
    fn hrefs(html: &str) -> Vec<String> {
        html.split("href=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .map(|h| html_escape::decode_html_entities(h).into_owned())
            .collect()
    }

    /// Behind a reverse proxy that serves the receiver at
    /// https://lab/bootbench/ (stripping the prefix), every link on the
    /// page still leads to the receiver: relative links resolve under the
    /// prefix, and --base-url's are absolute.
    #[test]
    fn the_pages_links_work_under_a_proxys_path_prefix() {
        let runs = vec![summary("run-b"), summary("run-a")];
        let next = Some(crate::service::store::Cursor::of(&runs[1]));
        let page = RunPage { runs, total: 5, next };
        let q = ListQuery { limit: 2, kernel: Some("6.1 x&y".into()), ..ListQuery::default() };
        let proxied = url::Url::parse("https://lab/bootbench/").unwrap();
        let expect_under = |links: &[String], base: &url::Url| {
            let resolved: Vec<url::Url> = links.iter().map(|h| base.join(h).unwrap()).collect();
            let paths: Vec<&str> = resolved.iter().map(|u| u.path()).collect();
            assert_eq!(
                paths,
                ["/bootbench/", "/bootbench/runs", "/bootbench/runs/run-b", "/bootbench/runs/run-a"],
                "{links:?}"
            );
            assert!(resolved.iter().all(|u| u.host_str() == Some("lab")), "{resolved:?}");
            let next: std::collections::HashMap<_, _> = resolved[0].query_pairs().into_owned().collect();
            assert_eq!(next.get("after").map(String::as_str), Some("2024-05-01T00:00:00Z,run-a,document"));
            assert_eq!(next.get("kernel").map(String::as_str), Some("6.1 x&y"));
            assert_eq!(next.get("limit").map(String::as_str), Some("2"));
            assert_eq!(resolved[2].query(), Some("kind=document"));
        };
        // Relative: the proxy's prefix is kept whatever it is.
        let html = render_page(&page, &q, "");
        assert!(html.contains("showing 2 of 5 run(s)"), "{html}");
        assert!(html.contains("<td>lab-1</td>"), "{html}");
        expect_under(&hrefs(&html), &proxied);
        // Absolute, from --base-url: right wherever the page is read from.
        let html = render_page(&page, &q, "https://lab/bootbench/");
        let links = hrefs(&html);
        assert!(links.iter().all(|h| h.starts_with("https://lab/bootbench/")), "{links:?}");
        expect_under(&links, &url::Url::parse("http://elsewhere/").unwrap());
        // A later page links back to the first, under the prefix too.
        let q = ListQuery { after: page.next.clone(), ..ListQuery { limit: DEFAULT_PAGE, ..ListQuery::default() } };
        let last = RunPage { next: None, ..page };
        let links = hrefs(&render_page(&last, &q, ""));
        assert_eq!(proxied.join(&links[0]).unwrap().as_str(), "https://lab/bootbench/");
    }

    proptest::proptest! {
        /// The invariant the `upload_request` fuzz target asserts: a
        /// token read from any header value reads back the same re-sent as
        /// Bearer and as HTTP Basic, and a value that is neither is refused.
        #[test]
        fn an_authorization_header_gives_back_the_token_it_carries(
            scheme in "(Bearer|bearer|Basic|basic|Token|)",
            sep in "( |  |\t)",
            rest in "[ -~]{0,24}",
        ) {
            let value = format!("{scheme}{sep}{rest}");
            let bearer_sent = scheme.eq_ignore_ascii_case("bearer") && sep.starts_with(' ');
            let Some(given) = parse_authorization(value.as_bytes()) else {
                proptest::prop_assert!(!bearer_sent, "{:?} refused", value);
                return Ok(());
            };
            if !given.basic {
                proptest::prop_assert_eq!(given.token.as_str(), value.split_once(' ').unwrap().1.trim());
            }
            use base64::Engine as _;
            let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("u:{}", given.token)));
            let again = parse_authorization(basic.as_bytes()).unwrap();
            proptest::prop_assert_eq!((again.token, again.basic), (given.token.clone(), true));
            let bearer = format!("Bearer {}", given.token);
            proptest::prop_assert_eq!(parse_authorization(bearer.as_bytes()).unwrap().token, given.token.trim());
        }
    }
}
