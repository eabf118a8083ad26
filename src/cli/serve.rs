//! `bootbench serve`: the results receiver until it is killed; and
//! `bootbench serve token add|list|revoke`: the store's named tokens.
//!
//! `token` is a subcommand of `serve` that takes no server flag (clap's
//! `args_conflicts_with_subcommands`), so `serve --db X ...` keeps
//! meaning "run the receiver" and a server flag given to a token command
//! is an error, never silently ignored.

use crate::service::listener::{ConnectionLimits, TlsFiles};
use crate::service::receiver::{read_token, GivenToken, Receiver, ServeConfig, DEFAULT_LISTEN, DEFAULT_MAX_BYTES};
use crate::service::store::{Revocation, Store, StoreError};
use crate::service::tokens::{self, Scope};
use anyhow::Context;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `bootbench serve`.
#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ServeArgs {
    /// Manage the store's tokens instead of serving.
    #[command(subcommand)]
    pub command: Option<ServeCommand>,
    /// The SQLite store (created if missing).
    #[arg(long, required = true)]
    pub db: Option<PathBuf>,
    /// A token that may upload, besides the store's named ones (`serve
    /// token add`); the runs it stores show the name `cli`.
    #[arg(long, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read that token from this file (its first line; the file must be
    /// private to you: `chmod 600`), so it is not on the command line for
    /// `ps` to show.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Serve GET /, /runs and /runs/ID without a token. Otherwise they
    /// need a token added with `serve token add NAME --read`.
    #[arg(long)]
    pub public_reads: bool,
    /// The URL the receiver is reached at through a reverse proxy (e.g.
    /// https://lab/bootbench/), for absolute links on its page. By default
    /// the links are relative, which works behind a proxy too.
    #[arg(long)]
    pub base_url: Option<String>,
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
    /// Receive lab machines' netconsole (the kernel messages of the
    /// candidates they boot) on this UDP address, e.g. 0.0.0.0:6666: each
    /// datagram is kept with the job running on the machine it came from.
    #[arg(long, value_name = "ADDR")]
    pub netconsole: Option<SocketAddr>,
    /// Connection cap and timeouts.
    #[command(flatten)]
    pub limits: ConnectionLimits,
}

/// The subcommands of `bootbench serve`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ServeCommand {
    /// The store's named tokens. Only a digest of each is stored, and a
    /// running receiver reads them on every request.
    #[command(subcommand)]
    Token(TokenCommand),
}

/// `bootbench serve token ...`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum TokenCommand {
    /// Add a named token: from a file, or a fresh random one printed once
    /// on stdout.
    Add(TokenAddArgs),
    /// List the tokens: name, what each may do, when it was added and
    /// revoked (never the secrets).
    List(StoreArg),
    /// Revoke a token: a running receiver refuses it from its next request
    /// on. The runs it stored keep its name.
    Revoke(TokenRevokeArgs),
}

/// The store a token command works on.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArg {
    /// The SQLite store (`add` creates it if missing).
    #[arg(long)]
    pub db: PathBuf,
}

/// Options of `bootbench serve token add`.
#[derive(Debug, Clone, clap::Args)]
pub struct TokenAddArgs {
    /// Its name (ASCII letters, digits, '.', '_', '-'), shown with the
    /// runs it stores.
    pub name: String,
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
    /// Take the secret from this file (its first line; the file must be
    /// private to you) instead of making a random one.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// It may upload runs (the default when neither --upload nor --read
    /// is given).
    #[arg(long)]
    pub upload: bool,
    /// It may read the listing and the runs.
    #[arg(long)]
    pub read: bool,
}

/// Options of `bootbench serve token revoke`.
#[derive(Debug, Clone, clap::Args)]
pub struct TokenRevokeArgs {
    /// The token's name.
    pub name: String,
    /// The store.
    #[command(flatten)]
    pub store: StoreArg,
}

/// Runs `bootbench serve` until it is killed, or one token command.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(ServeCommand::Token(t)) = &args.command {
        token(t)?;
        return Ok(ExitCode::SUCCESS);
    }
    let db = args.db.as_deref().context("give --db")?;
    let mut given = Vec::new();
    if args.token.is_some() || args.token_file.is_some() {
        let secret = read_token(args.token.as_deref(), args.token_file.as_deref())?;
        given.push(GivenToken { name: "cli".into(), secret, scope: Scope::UPLOAD });
    }
    let stored = Store::open(db)?.tokens()?;
    let active: Vec<_> = stored.iter().filter(|t| t.revoked_at.is_none()).collect();
    let uploaders = given.len() + active.iter().filter(|t| t.scope.upload).count();
    let readers = active.iter().filter(|t| t.scope.read).count();
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert: cert.clone(), key: key.clone() }),
        _ => None,
    };
    let receiver = Receiver::start(ServeConfig {
        db: db.to_path_buf(),
        tokens: given,
        public_reads: args.public_reads,
        base_url: args.base_url.clone(),
        listen: args.listen,
        max_bytes: args.max_bytes,
        log_prefix: Some("serve: ".into()),
        limits: args.limits.clone(),
        tls,
        netconsole: args.netconsole,
    })?;
    if let Some(n) = receiver.netconsole_addr() {
        log::info!("netconsole: receiving lab machines' kernel messages on UDP {n}");
    }
    let reads = if args.public_reads {
        "reads are public".to_string()
    } else {
        format!("reads need a token that may read ({readers} now)")
    };
    log::info!(
        "listening on {} (store {}, bodies up to {} bytes, {} connections at once); uploads: PUT /runs/{{id}} with 'Authorization: Bearer TOKEN' ({uploaders} token(s) may upload now); {reads}",
        receiver.url(),
        db.display(),
        args.max_bytes,
        args.limits.max_connections,
    );
    if uploaders == 0 {
        log::info!("no token may upload yet: add one with `bootbench serve token add NAME --db {}`", db.display());
    }
    receiver.wait().context("the receiver stopped")?;
    Ok(ExitCode::SUCCESS)
}

/// The store of a token command that reads or changes existing tokens: it
/// must exist (a typo in --db must not make an empty store).
fn existing_store(db: &Path) -> Result<Store, StoreError> {
    if !db.exists() {
        return Err(StoreError::Missing { path: db.to_path_buf() });
    }
    Store::open(db)
}

/// Runs one `bootbench serve token` command.
fn token(cmd: &TokenCommand) -> anyhow::Result<()> {
    match cmd {
        TokenCommand::Add(a) => {
            tokens::check_name(&a.name)?;
            let scope = Scope { upload: a.upload || !a.read, read: a.read };
            let secret = match &a.token_file {
                Some(f) => read_token(None, Some(f))?,
                None => tokens::generate(),
            };
            Store::open(&a.store.db)?.add_token(&a.name, &tokens::digest(&secret), scope)?;
            if a.token_file.is_some() {
                log::info!("token '{}' added (may {})", a.name, scope.name());
            } else {
                log::info!(
                    "token '{}' added (may {}); it is printed below once and stored only as a digest: keep it in a file only you can read (chmod 600)",
                    a.name,
                    scope.name()
                );
                println!("{secret}");
            }
        }
        TokenCommand::List(s) => {
            let all = existing_store(&s.db)?.tokens()?;
            let rows: Vec<[&str; 4]> = all
                .iter()
                .map(|t| {
                    [t.name.as_str(), t.scope.name(), t.created_at.as_str(), t.revoked_at.as_deref().unwrap_or("-")]
                })
                .collect();
            let head = ["NAME", "MAY", "CREATED", "REVOKED"];
            let width = |i: usize| rows.iter().map(|r| r[i].len()).chain([head[i].len()]).max().unwrap_or(0);
            let (w0, w1, w2) = (width(0), width(1), width(2));
            for r in std::iter::once(head).chain(rows) {
                println!("{:w0$}  {:w1$}  {:w2$}  {}", r[0], r[1], r[2], r[3]);
            }
        }
        TokenCommand::Revoke(a) => match existing_store(&a.store.db)?.revoke_token(&a.name)? {
            Revocation::Revoked => {
                log::info!("token '{}' revoked; a running receiver refuses it from its next request", a.name)
            }
            Revocation::Already(at) => log::info!("token '{}' was revoked already, at {at}", a.name),
        },
    }
    Ok(())
}
