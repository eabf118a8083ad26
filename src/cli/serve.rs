//! `bootbench serve`: the results receiver until it is killed.

use crate::service::listener::{ConnectionLimits, TlsFiles};
use crate::service::receiver::{read_token, Receiver, ServeConfig, DEFAULT_LISTEN, DEFAULT_MAX_BYTES};
use anyhow::Context;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `bootbench serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The SQLite store (created if missing).
    #[arg(long)]
    pub db: PathBuf,
    /// The bearer token uploads must carry.
    #[arg(long, required_unless_present = "token_file", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the token from this file (its first line), so it is not on the
    /// command line for `ps` to show.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Address and port to listen on.
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Largest body accepted, in bytes. The default takes the envelope of a
    /// boot whose console log reached its 64 MiB cap.
    #[arg(long, default_value_t = DEFAULT_MAX_BYTES)]
    pub max_bytes: u64,
    /// Speak https with this certificate chain (PEM, the server's
    /// certificate first); needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Connection cap and timeouts.
    #[command(flatten)]
    pub limits: ConnectionLimits,
}

/// Runs `bootbench serve` until it is killed.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let token = read_token(args.token.as_deref(), args.token_file.as_deref())?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert: cert.clone(), key: key.clone() }),
        _ => None,
    };
    let receiver = Receiver::start(ServeConfig {
        db: args.db.clone(),
        token,
        listen: args.listen,
        max_bytes: args.max_bytes,
        log_prefix: Some("serve: ".into()),
        limits: args.limits.clone(),
        tls,
    })?;
    eprintln!(
        "serve: listening on {} (store {}, bodies up to {} bytes, {} connections at once); uploads: PUT /runs/{{id}} with 'Authorization: Bearer TOKEN'",
        receiver.url(),
        args.db.display(),
        args.max_bytes,
        args.limits.max_connections,
    );
    receiver.wait().context("the receiver stopped")?;
    Ok(ExitCode::SUCCESS)
}
