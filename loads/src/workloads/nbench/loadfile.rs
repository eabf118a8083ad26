//! NBENCH loadfiles: dbench's text format (one operation per line, SMB-style
//! absolute paths, the expected NT status last) parsed into typed operations
//! with normalised paths. Owns the syntax, path containment and reading the
//! text again pass after pass (`LineReader`, which a client uses); it does
//! no I/O on a work directory and knows nothing about timing.
//!
//! The format is the one dbench 3/4 reads, e.g. Debian's
//! `/usr/share/dbench/client.txt`:
//! ```text
//! NTCreateX "\clients\client1\~dmtmp\WORD\CHAP10.DOC" 0x40 0x2 9938 NT_STATUS_OK
//! ReadX 9938 0 4096 4096 NT_STATUS_OK
//! ```
//! - Operation names compare case-insensitively, as dbench's `strcasecmp`
//!   does; dbench's short display names (`Qpathinfo`, `Find`, ...) are
//!   accepted too.
//! - Numbers are C literals as `strtol(s, NULL, 0)` reads them (`0x40`,
//!   `010` octal, `-1`), but the whole token must be a number.
//! - A line may start with a timestamp (seconds since the loop started); the
//!   replay then paces itself to it, as dbench does.
//! - Blank lines and lines starting with `#` are skipped. Anything else that
//!   does not parse is an error naming the line: dbench skips some such lines
//!   with a warning, but a benchmark that silently skips work measures
//!   something else.
//! - Paths are split on `\` (and `/`), `.` is dropped and `..` climbs one
//!   level. A component equal to `client1` names "this client" and is
//!   replaced per client at replay time (dbench substitutes the same
//!   string). A path that climbs out of the client's directory or names
//!   another client's is refused, and so is a line that would create,
//!   replace or remove anything outside the client's directory: `paths`
//!   has the exact rule.
//!
//! Layout: `paths` (SMB paths and their containment), `operations` (the
//! typed operations and the parsed loadfile), `syntax` (the text format
//! and its errors) and `line_reader` (a client's pass-by-pass reading of
//! the text, as dbench reads it), each using only the ones before it.

mod line_reader;
mod operations;
mod paths;
#[cfg(test)]
mod proptests;
mod syntax;
#[cfg(test)]
mod tests;

pub use line_reader::LineReader;
pub use operations::{
    Handle, Line, Loadfile, NtStatus, Op, OpKind, Origin, FILE_CREATE, FILE_DIRECTORY_FILE, FILE_NON_DIRECTORY_FILE,
    FILE_OPEN, FILE_OPEN_IF, FILE_OVERWRITE, FILE_OVERWRITE_IF, FILE_SUPERSEDE,
};
pub use paths::{PathProblem, SmbPath, CLIENTS_DIR, CLIENT_PLACEHOLDER};
pub use syntax::{c_integer, LoadfileError, MAX_IO_SIZE};
