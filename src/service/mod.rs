//! The results service: the SQLite store of uploaded runs, the bearer
//! tokens that may upload or read, and the HTTP receiver in front of them.
//! Its own corner: it depends on the results model only; `tokens` is at
//! the bottom, the store above it, the receiver on top of the store and of
//! its own accept loop (`listener`: the connection cap, timeouts and TLS).
//! Outside `cli`, one
//! module uses it: `crate::boot::run_upload`, which starts a receiver for
//! `run --serve` (a flag every command that boots shares).

pub mod lab_queue;
pub mod lab_routes;
pub mod listener;
pub mod netconsole_sink;
pub mod receiver;
pub mod request_context;
pub mod run_intake;
pub mod store;
pub mod tokens;
