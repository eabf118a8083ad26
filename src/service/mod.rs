//! The results service: the SQLite store of uploaded runs and the HTTP
//! receiver in front of it. The top of its own corner: it depends on the
//! results model; nothing below it (results, booting, statistics) depends on
//! it.

pub mod receiver;
pub mod store;
