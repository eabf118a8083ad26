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

pub use crate::service::request_context::{
    parse_authorization, read_token, GivenCredential, GivenToken, ServeConfig, ServeError,
};

use crate::service::listener;
use crate::service::netconsole_sink;
use crate::service::request_context::{authorize, error, with_store, AppState, Need, Shared};
use crate::service::store::{Cursor, ListQuery, RunKind, RunPage, Store};
use axum::extract::{Path as UrlPath, Query, RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
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

/// A receiver running on its own thread until [`Receiver::stop`] (or drop).
#[derive(Debug)]
pub struct Receiver {
    addr: SocketAddr,
    tls: bool,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
    netconsole: Option<netconsole_sink::Sink>,
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
        let netconsole = match cfg.netconsole {
            None => None,
            Some(at) => {
                let sink = netconsole_sink::Sink::start(at, state.clone())
                    .map_err(|source| ServeError::Netconsole { addr: at, source })?;
                let _ = state.netconsole_port.set(sink.addr().port());
                Some(sink)
            }
        };
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
        Ok(Receiver { addr, tls: is_tls, shutdown: Some(tx), thread: Some(thread), netconsole })
    }

    /// Its base URL on the address it listens on: `https://` with TLS.
    pub fn url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The UDP address its netconsole sink listens on, when it has one.
    pub fn netconsole_addr(&self) -> Option<SocketAddr> {
        self.netconsole.as_ref().map(netconsole_sink::Sink::addr)
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
    let r = Router::new()
        .route("/", get(page))
        .route("/healthz", get(healthz))
        .route("/runs", get(list_runs))
        .route("/runs/{id}", get(get_run).put(crate::service::run_intake::put_run));
    crate::service::lab_routes::routes(r).fallback(no_route).with_state(state)
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
    use crate::service::listener::ConnectionLimits;
    use crate::service::request_context::store_error;
    use crate::service::store::StoreError;
    use crate::service::tokens::Scope;
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
            netconsole: None,
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
}
