//! `bootbench serve`: the results receiver until it is killed.

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
}

/// Runs `bootbench serve` until it is killed.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let token = read_token(args.token.as_deref(), args.token_file.as_deref())?;
    let receiver = Receiver::start(ServeConfig {
        db: args.db.clone(),
        token,
        listen: args.listen,
        max_bytes: args.max_bytes,
        log_prefix: Some("serve: ".into()),
    })?;
    eprintln!(
        "serve: listening on http://{} (store {}, bodies up to {} bytes); uploads: PUT /runs/{{id}} with 'Authorization: Bearer TOKEN'",
        receiver.addr(),
        args.db.display(),
        args.max_bytes
    );
    receiver.wait().context("the receiver stopped")?;
    Ok(ExitCode::SUCCESS)
}
