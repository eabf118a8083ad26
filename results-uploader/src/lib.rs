//! Uploading a run's result to a receiver (`bootbench serve` or anything
//! speaking the same small protocol), used by the guest init after the
//! result has gone to the console, and by `bootbench upload` on a host.
//!
//! Protocol: `PUT {base}/runs/{run_id}` with `Authorization: Bearer TOKEN`,
//! the run id repeated in `X-Bootbench-Run-Id`, a JSON body. 201 = stored,
//! 200 with `{"already_stored": true}` = stored before (a retry is
//! harmless); either only when its JSON acknowledges this run and these
//! bytes ([`acknowledgement`]: the run id and the body's sha256 echoed),
//! so that a wrong URL or a proxy's 2xx page is a failure, not a delivery; 408/425/429, 500/502/503/504, 507 (the receiver's store is
//! full) and network errors = retried with exponential backoff and jitter,
//! a bounded number of times; any other status = refused for good.
//!
//! A lab machine's agent talks to the lab receiver through [`LabClient`]
//! (JSON requests and job-file downloads, one attempt each).
//!
//! This crate owns the client side only; it never panics on what the
//! network sends and never returns an error: [`upload`] returns an
//! [`UploadOutcome`] that is the report.

// The guest runs this crate (in a child of PID 1): no panics (see
// ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod lab_client;
mod name_resolution;
mod outcome_event;
mod retry_policy;
mod tls_roots;
mod upload;
mod upload_url;

pub use lab_client::{ExpectedFile, LabClient, LabError, MAX_JSON_BYTES, MIN_DOWNLOAD_RATE};
pub use name_resolution::{resolve, Resolution, ResolveError};
pub use outcome_event::{EventError, UploadReport, EVENT_NETWORK, EVENT_UPLOAD, EVENT_UPLOAD_ATTEMPT};
pub use retry_policy::{RetryPolicy, DEFAULT_TOTAL_BUDGET};
pub use tls_roots::{parse_ca_pem, read_ca_file, CaError, TlsRoots};
pub use upload::{
    acknowledgement, body_sha256, upload, upload_with_progress, Attempt, UploadOutcome, UploadRequest, UploadSettings,
    Verdict, ACK_BODY_SHA256, ACK_RUN_ID,
};
pub use upload_url::{check_run_id, parse_base_url, run_url, UrlError, ATTEMPT_HEADER, MAX_RUN_ID_LEN, RUN_ID_HEADER};
