//! Uploads of runs: `PUT /runs/{id}` with an upload token, and a lab
//! job's candidate's `PUT /lab/jobs/{job}/runs/{id}` with the job's own
//! token. The body is checked (`store::validate`), stored once, and
//! acknowledged with the run id and the body's sha256, which the
//! uploader requires before it counts a delivery.

use crate::service::request_context::{authorize, chain, error, given_token, queue, with_store, Need, Shared};
use crate::service::store::PutOutcome;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path as UrlPath, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::net::SocketAddr;

pub(in crate::service) async fn put_run(
    State(st): State<Shared>,
    UrlPath(id): UrlPath<String>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (resp, note) = match store_upload(&st, &id, peer, &headers, body, UploadAuth::Store).await {
        Ok((status, body, note)) => ((status, Json(body)).into_response(), note),
        Err(resp) => {
            let note = format!("refused ({})", resp.status().as_u16());
            (resp, note)
        }
    };
    if let Some(prefix) = &st.log_prefix {
        let attempt = headers
            .get(results_uploader::ATTEMPT_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|a| format!(", attempt {a}"))
            .unwrap_or_default();
        // The id is the client's, refused ones included: escaped, so that
        // it cannot forge or break log lines.
        log::info!("{prefix}PUT /runs/{} from {peer}{attempt}: {} {note}", id.escape_debug(), resp.status().as_u16());
    }
    resp
}

/// Whose token an upload needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::service) enum UploadAuth {
    /// A stored or given upload token (`PUT /runs/{id}`).
    Store,
    /// Lab job `0`'s own token (`PUT /lab/jobs/{job}/runs/{id}`); the job
    /// is done once the run is stored.
    LabJob(u64),
}

pub(in crate::service) async fn store_upload(
    st: &Shared,
    id: &str,
    peer: SocketAddr,
    headers: &HeaderMap,
    body: Body,
    auth: UploadAuth,
) -> Result<(StatusCode, serde_json::Value, String), Response> {
    let token_name = match auth {
        UploadAuth::Store => authorize(st, headers, Need::Upload).await?,
        UploadAuth::LabJob(job) => Some(job_token(st, headers, job).await?),
    };
    if let Err(e) = results_uploader::check_run_id(id) {
        return Err(error(StatusCode::BAD_REQUEST, e.to_string()));
    }
    if let Some(h) = headers.get(results_uploader::RUN_ID_HEADER) {
        let h = h.to_str().unwrap_or_default();
        if h != id {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("the URL names run '{id}' but {} says '{h}'", results_uploader::RUN_ID_HEADER),
            ));
        }
    }
    let too_big = |what: String| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{what} exceeds this receiver's limit of {} bytes (bootbench serve --max-bytes)", st.max_bytes),
        )
    };
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| *n > st.max_bytes) {
        return Err(too_big(format!("a body of {n} bytes")));
    }
    let limit = usize::try_from(st.max_bytes).unwrap_or(usize::MAX);
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(e) => {
            let inner = e.into_inner();
            if inner.is::<http_body_util::LengthLimitError>() {
                return Err(too_big("the body".into()));
            }
            return Err(error(StatusCode::BAD_REQUEST, format!("cannot read the body: {}", chain(&*inner))));
        }
    };
    let n = bytes.len();
    let run = crate::service::store::validate(bytes.to_vec(), id)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("run '{id}' refused: {}", chain(&e))))?;
    let remote = peer.ip().to_string();
    let (run2, name2) = (run.clone(), token_name.clone());
    let outcome = with_store(st, move |s| s.put(&run2, Some(&remote), name2.as_deref())).await?;
    // The uploader takes a 2xx as delivered only with this acknowledgement:
    // the run id and the sha256 of the bytes received.
    let mut base = results_uploader::acknowledgement(&run.run_id, &run.body);
    base.extend([
        ("kind".to_string(), json!(run.kind.name())),
        ("sha256".to_string(), json!(run.sha256)),
        ("bytes".to_string(), json!(n)),
    ]);
    let base = serde_json::Value::Object(base);
    let with = |key: &str| {
        let mut v = base.clone();
        if let Some(m) = v.as_object_mut() {
            m.insert(key.to_string(), json!(true));
        }
        v
    };
    if let (UploadAuth::LabJob(job), PutOutcome::Stored | PutOutcome::AlreadyStored) = (auth, &outcome) {
        job_done(st, job, run.run_id.clone(), run.sha256.clone()).await?;
    }
    let by = token_name.map(|n| format!(" with token {n}")).unwrap_or_default();
    match outcome {
        PutOutcome::Stored => {
            Ok((StatusCode::CREATED, with("stored"), format!("stored {} ({n} bytes){by}", run.kind.name())))
        }
        PutOutcome::AlreadyStored => {
            Ok((StatusCode::OK, with("already_stored"), format!("already stored {}{by}", run.kind.name())))
        }
        PutOutcome::Conflict { existing_sha256 } => Err(error(
            StatusCode::CONFLICT,
            format!(
                "run '{id}' ({}) is already stored with different content (stored sha256 {existing_sha256}, this upload {}); a run id names one result and is never overwritten",
                run.kind.name(),
                run.sha256
            ),
        )),
    }
}

/// Checks a lab job's upload token; the name the run is stored under.
async fn job_token(st: &Shared, headers: &HeaderMap, id: u64) -> Result<String, Response> {
    let given = given_token(headers, Need::Upload)?;
    let (_, digest) = queue(st, move |s| s.lab_upload_token(id)).await?;
    if crate::service::tokens::find(&given.token, &[digest]).is_none() {
        return Err(error(StatusCode::FORBIDDEN, format!("wrong token for lab job {id}")));
    }
    Ok(format!("lab-job-{id}"))
}

/// After a lab job's run is stored: the job is done.
async fn job_done(st: &Shared, id: u64, run_id: String, sha256: String) -> Result<(), Response> {
    queue(st, move |s| s.lab_done(id, &run_id, &sha256)).await
}
