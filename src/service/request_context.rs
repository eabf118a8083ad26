//! What every request to the receiver shares: its configuration and
//! state, the answers for errors, and authentication (bearer tokens,
//! found by digest in constant time, the store's table read on every
//! request so a revocation holds at once). The routes are the receiver's
//! (`receiver`), the uploads' (`run_intake`) and the lab's (`lab_routes`).

use crate::service::lab_queue::LabQueueError;
use crate::service::listener::{ConnectionLimits, ListenerError, TlsFiles};
use crate::service::store::{Store, StoreError};
use crate::service::tokens::{self, Scope, TokenDigest, TokenError};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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
    /// The netconsole sink's UDP address cannot be bound.
    #[error("cannot receive netconsole datagrams on UDP {addr}")]
    Netconsole {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
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
    /// Receive lab machines' netconsole datagrams on this UDP address
    /// (port 0: any free port); `None`: no netconsole sink.
    pub netconsole: Option<SocketAddr>,
}

pub(in crate::service) struct AppState {
    pub(in crate::service) store: Mutex<Store>,
    /// The [`ServeConfig::tokens`], by digest.
    pub(in crate::service) given: Vec<Known>,
    pub(in crate::service) public_reads: bool,
    /// What the page's links start with: empty (relative) or the base URL
    /// ending in '/'.
    pub(in crate::service) links_base: String,
    pub(in crate::service) max_bytes: u64,
    pub(in crate::service) log_prefix: Option<String>,
    /// Whether it speaks https (the base URL a lab agent is told).
    pub(in crate::service) tls: bool,
    /// The netconsole sink's UDP port, once it is bound.
    pub(in crate::service) netconsole_port: std::sync::OnceLock<u16>,
}

/// A token the receiver knows, as a request is checked against it.
pub(in crate::service) struct Known {
    pub(in crate::service) name: String,
    pub(in crate::service) digest: TokenDigest,
    pub(in crate::service) scope: Scope,
    pub(in crate::service) revoked: bool,
}

impl AppState {
    /// The state of a receiver of `cfg` on `store`; checks the given
    /// tokens and the base URL.
    pub(in crate::service) fn new(store: Store, cfg: &ServeConfig) -> Result<AppState, ServeError> {
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
            tls: cfg.tls.is_some(),
            netconsole_port: std::sync::OnceLock::new(),
        })
    }
}

pub(in crate::service) type Shared = Arc<AppState>;

pub(in crate::service) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

pub(in crate::service) fn chain(e: &dyn std::error::Error) -> String {
    loads::error_chain::error_chain(e)
}

/// What a request's token must allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::service) enum Need {
    Upload,
    Read,
}

impl Need {
    pub(in crate::service) fn allowed(self, scope: Scope) -> bool {
        match self {
            Need::Upload => scope.upload,
            Need::Read => scope.read,
        }
    }

    pub(in crate::service) fn verb(self) -> &'static str {
        match self {
            Need::Upload => "upload",
            Need::Read => "read",
        }
    }
}

/// A 401 for `need` with `message`, asking for a Bearer token and, for
/// reads, for HTTP Basic too, so that a browser prompts for the token.
pub(in crate::service) fn unauthorized(need: Need, message: impl Into<String>) -> Response {
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
pub(in crate::service) fn given_token(headers: &HeaderMap, need: Need) -> Result<GivenCredential, Response> {
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
pub(in crate::service) async fn authorize(
    st: &Shared,
    headers: &HeaderMap,
    need: Need,
) -> Result<Option<String>, Response> {
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
pub(in crate::service) async fn with_store<T: Send + 'static>(
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

/// The answer to a store that failed: 507 when it is full (the upload may
/// work later: the client retries it), 500 otherwise. The reply names
/// neither the database's path nor SQLite's text (a client has no use for
/// them, and the path tells it where the host keeps its files); the
/// receiver's log gets the whole error.
pub(in crate::service) fn store_error(e: &StoreError) -> Response {
    log::error!("results store error: {}", chain(e));
    if e.is_full() {
        error(StatusCode::INSUFFICIENT_STORAGE, "the results store is full; retry later")
    } else {
        error(StatusCode::INTERNAL_SERVER_ERROR, "the results store failed; the receiver's log has the error")
    }
}

/// The answer to a queue error: 404 unknown, 403 another machine's job,
/// 409 a job in the wrong state, else the store's.
pub(in crate::service) fn queue_error(e: LabQueueError) -> Response {
    match e {
        LabQueueError::Store(s) => store_error(&s),
        e @ (LabQueueError::NoSuchMachine(_) | LabQueueError::NoSuchJob(_)) => {
            error(StatusCode::NOT_FOUND, e.to_string())
        }
        e @ LabQueueError::NotYours { .. } => error(StatusCode::FORBIDDEN, e.to_string()),
        e => error(StatusCode::CONFLICT, e.to_string()),
    }
}

/// Runs a queue operation on the store's thread (as `with_store`).
pub(in crate::service) async fn queue<T: Send + 'static>(
    st: &Shared,
    f: impl FnOnce(&mut crate::service::store::Store) -> Result<T, LabQueueError> + Send + 'static,
) -> Result<T, Response> {
    let st = st.clone();
    let done = tokio::task::spawn_blocking(move || {
        let mut store = st.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut store)
    })
    .await;
    match done {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(queue_error(e)),
        Err(e) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, format!("store task failed: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
