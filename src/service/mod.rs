//! The results service: the SQLite store of uploaded runs, the bearer
//! tokens that may upload or read, and the HTTP receiver in front of them.
//! Its own corner: it depends on the results model only; `tokens` is at
//! the bottom, the store above it, the receiver on top of the store and of
//! its own accept loop (`listener`: the connection cap, timeouts and TLS).
//! The receiver also holds bootbench's own lab: the machines' job queues
//! (`lab_queue`), the agents' routes (`lab_routes`) and the netconsole
//! sink. Outside `cli`, `crate::boot::run_upload` starts a receiver for
//! `run --serve` (a flag every command that boots shares),
//! `crate::boot::lab_target` queues and reads lab jobs, and `crate::lab`
//! adds machines and reads the queue.

pub mod lab_queue;
pub mod lab_routes;
pub mod listener;
pub mod netconsole_sink;
pub mod receiver;
pub mod request_context;
pub mod run_intake;
pub mod store;
pub mod tokens;
