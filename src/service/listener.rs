//! The receiver's accept loop: the transport under the receiver's router.
//! Owns connections, not requests: how many are served at once, how long a
//! client may take over its TLS handshake, a request's head and the whole
//! request, how long an idle kept-alive connection stays open, TLS itself
//! (rustls with ring, from PEM files), and the graceful end (no new
//! connections; those in flight finish). What a request means is
//! `receiver`'s; this module names no endpoint.
//!
//! A client that connects and sends nothing, or sends half a head, is
//! closed after the header timeout; one whose body stalls gets 408 after
//! the request timeout; one that stops reading its answer is closed after
//! the send timeout. Beyond the connection cap, new connections wait in
//! the kernel's listen backlog (accepted in order as slots free) rather
//! than being turned away with 503: an uploader that waits is served as
//! soon as a slot is free, whereas one turned away would back off and
//! retry, and could lose every retry to a client that keeps the slots
//! full.

use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use axum::{Json, Router};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// Default connection cap: far more than a lab's boots upload at once.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 64;
/// Default seconds for a TLS handshake, and for a request's head.
pub const DEFAULT_HEADER_TIMEOUT_S: u64 = 10;
/// Default seconds for a whole request once its head is in: the largest
/// body the receiver takes by default (144 MiB) at 4 Mbit/s, or a usual
/// envelope over a very poor link.
pub const DEFAULT_BODY_TIMEOUT_S: u64 = 300;
/// Default seconds a response may wait on a client that takes none of it.
pub const DEFAULT_SEND_TIMEOUT_S: u64 = 30;

/// How long connections may take and how many are served at once.
/// `Default` gives the defaults `bootbench serve` has.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ConnectionLimits {
    /// Connections served at once. More wait in the listen backlog until
    /// one ends (a silent or stalled client's ends by the timeouts below).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Seconds a client has for the TLS handshake and then for each
    /// request's head; also how long an idle kept-alive connection stays
    /// open.
    #[arg(long = "header-timeout", value_name = "SECS", default_value = "10", value_parser = seconds)]
    pub header_timeout: Duration,
    /// Seconds a request has once its head is in: reading the whole body
    /// and storing it (408 when it runs out).
    #[arg(long = "body-timeout", value_name = "SECS", default_value = "300", value_parser = seconds)]
    pub body_timeout: Duration,
    /// Seconds an answer may wait on a client that takes none of it (a
    /// reader that stopped reading a large run): then the connection is
    /// closed. A slow reader that keeps taking bytes is not cut off.
    #[arg(long = "send-timeout", value_name = "SECS", default_value = "30", value_parser = seconds)]
    pub send_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: Duration::from_secs(DEFAULT_HEADER_TIMEOUT_S),
            body_timeout: Duration::from_secs(DEFAULT_BODY_TIMEOUT_S),
            send_timeout: Duration::from_secs(DEFAULT_SEND_TIMEOUT_S),
        }
    }
}

/// A whole number of seconds, at least 1.
fn seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(s) => Ok(Duration::from_secs(s)),
        Err(e) => Err(format!("not a whole number of seconds: {e}")),
    }
}

/// The PEM files `serve` speaks TLS with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's own certificate first.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Errors setting up the listener's TLS.
#[derive(Debug, thiserror::Error)]
pub enum ListenerError {
    /// The certificate file cannot be read or is not PEM.
    #[error("cannot read the TLS certificate chain {path}: {detail}")]
    Cert {
        /// The file.
        path: PathBuf,
        /// What went wrong (the PEM reader's errors carry no source).
        detail: String,
    },
    /// The certificate file holds no certificate.
    #[error("the TLS certificate file {path} holds no certificate (expected PEM 'BEGIN CERTIFICATE' blocks)")]
    NoCert {
        /// The file.
        path: PathBuf,
    },
    /// The key file cannot be read, is not PEM, or holds no private key.
    #[error("cannot read a PEM private key from {path}: {detail}")]
    Key {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// rustls refused the pair.
    #[error("the TLS certificate {cert} and key {key} cannot be used")]
    Config {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
}

/// A TLS acceptor from `files`, each file named in its error.
pub fn tls_acceptor(files: &TlsFiles) -> Result<TlsAcceptor, ListenerError> {
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| ListenerError::Cert { path: files.cert.clone(), detail: e.to_string() })?;
    if certs.is_empty() {
        return Err(ListenerError::NoCert { path: files.cert.clone() });
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| ListenerError::Key { path: files.key.clone(), detail: e.to_string() })?;
    let config_error = |source| ListenerError::Config { cert: files.cert.clone(), key: files.key.clone(), source };
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(config_error)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(config_error)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves `app` on `listener` within `limits` (over TLS with `tls`) until
/// `shutdown` completes; then accepts no more and returns once the
/// connections in flight have ended.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: &ConnectionLimits,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let app = app
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.body_timeout));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        // A free slot before a connection: beyond the cap, clients wait in
        // the backlog.
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait for
                    // connections to end rather than spin.
                    if !matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset
                    ) {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    continue;
                }
            },
        };
        let conn = Connection {
            app: app.clone(),
            http: http.clone(),
            peer,
            header_timeout: limits.header_timeout,
            send_timeout: limits.send_timeout,
            watcher: graceful.watcher(),
        };
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => {
                    let stream = conn.send_bounded(stream);
                    conn.serve(stream).await
                }
                Some(acceptor) => conn.serve_tls(stream, acceptor).await,
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// One accepted connection, and what serving it takes.
struct Connection {
    app: Router,
    http: hyper::server::conn::http1::Builder,
    peer: SocketAddr,
    header_timeout: Duration,
    send_timeout: Duration,
    watcher: Watcher,
}

impl Connection {
    /// Serves HTTP over `io` until the client or a timeout ends it, or the
    /// graceful end does.
    async fn serve<I: AsyncRead + AsyncWrite + Unpin + Send + 'static>(self, io: I) {
        let peer = self.peer;
        let app = self.app.map_request(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            req
        });
        let conn = self.http.serve_connection(TokioIo::new(io), TowerToHyperService::new(app));
        // A client that goes away mid-request is not the receiver's error.
        let _ = self.watcher.watch(conn).await;
    }

    /// `stream` with writes bounded by the send timeout: a write that the
    /// client leaves pending that long fails, which ends the connection
    /// and frees its slot.
    fn send_bounded(&self, stream: TcpStream) -> Pin<Box<TimeoutStream<TcpStream>>> {
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(self.send_timeout));
        Box::pin(stream)
    }

    /// The TLS handshake within the header timeout, then HTTP over it. A
    /// client speaking plain HTTP gets a 400 that says so.
    async fn serve_tls(self, stream: TcpStream, acceptor: TlsAcceptor) {
        let mut first = [0u8; 1];
        let started = tokio::time::Instant::now();
        match tokio::time::timeout(self.header_timeout, stream.peek(&mut first)).await {
            Ok(Ok(1..)) => {}
            _ => return,
        }
        // Every TLS connection opens with a handshake record (type 22).
        if first[0] != 0x16 {
            return self.refuse_plain_http(stream).await;
        }
        let left = self.header_timeout.saturating_sub(started.elapsed());
        let stream = self.send_bounded(stream);
        if let Ok(Ok(tls)) = tokio::time::timeout(left, acceptor.accept(stream)).await {
            self.serve(tls).await;
        }
    }

    /// Answers each request on a plain-HTTP connection to the TLS port
    /// with 400 and closes it.
    async fn refuse_plain_http(mut self, stream: TcpStream) {
        self.http.keep_alive(false);
        let service = hyper::service::service_fn(|_req: Request<Incoming>| async {
            let reply = (
                StatusCode::BAD_REQUEST,
                Json(serde_json::json!({
                    "error": "this receiver speaks https: use an https:// URL for it"
                })),
            );
            Ok::<_, std::convert::Infallible>(reply.into_response())
        });
        let _ = self.watcher.watch(self.http.serve_connection(TokioIo::new(stream), service)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_whole_seconds_from_one() {
        assert_eq!(seconds("10"), Ok(Duration::from_secs(10)));
        assert!(seconds("0").is_err());
        assert!(seconds("1.5").is_err());
    }

    #[test]
    fn tls_files_that_cannot_work_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = TlsFiles { cert: dir.path().join("none.pem"), key: dir.path().join("none.key") };
        let error = |files: &TlsFiles| tls_acceptor(files).err().map(|e| e.to_string()).unwrap_or_default();
        let e = error(&missing);
        assert!(e.contains("none.pem"), "{e}");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let e = error(&TlsFiles { cert: junk.clone(), key: junk.clone() });
        assert!(e.contains("junk.pem") && e.contains("holds no certificate"), "{e}");
    }
}
