//! The receiver's side of the lab protocol ([`loads::lab_protocol`]): a
//! machine's agent says hello, takes its next job, fetches the job's files
//! and reports on it, each request with the machine's own token (a stored
//! upload token named as the machine); a job's candidate uploads its
//! document with the job's own token. The queue itself is the store's
//! (`store::lab_queue`).

use crate::service::lab_queue::LabQueueError;
use crate::service::request_context::{authorize, error, queue, Need, Shared};
use crate::service::run_intake::{store_upload, UploadAuth};
use axum::body::Body;
use axum::extract::{ConnectInfo, Path as UrlPath, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use loads::lab_protocol::{self, FileKind, Hello, JobEvent, NextAnswer};
use serde_json::json;
use std::net::SocketAddr;

/// The lab's routes.
pub(in crate::service) fn routes(r: axum::Router<Shared>) -> axum::Router<Shared> {
    use axum::routing::{get, post, put};
    r.route("/lab/machines/{machine}/hello", post(hello))
        .route("/lab/machines/{machine}/next", get(next))
        .route("/lab/jobs/{id}/events", post(event))
        .route("/lab/jobs/{id}/{file}", get(file))
        .route("/lab/jobs/{id}/runs/{run_id}", put(upload))
}

/// Checks that the request carries `machine`'s own token.
async fn as_machine(st: &Shared, headers: &HeaderMap, machine: &str) -> Result<(), Response> {
    if !lab_protocol::valid_machine_name(machine) {
        return Err(error(StatusCode::BAD_REQUEST, format!("'{}' is not a machine name", machine.escape_debug())));
    }
    match authorize(st, headers, Need::Upload).await? {
        Some(name) if name == machine => Ok(()),
        Some(name) => Err(error(
            StatusCode::FORBIDDEN,
            format!("this is the token of '{name}', not of machine '{machine}': each machine has its own"),
        )),
        None => Err(error(StatusCode::FORBIDDEN, "a machine must send its own token")),
    }
}

/// The receiver's base URL as the agent reached it: how the candidate
/// finds it again.
fn base_url(headers: &HeaderMap, tls: bool) -> Option<String> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let ok = !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
    ok.then(|| format!("{}://{host}", if tls { "https" } else { "http" }))
}

fn log(st: &Shared, what: String) {
    if let Some(prefix) = &st.log_prefix {
        log::info!("{prefix}{what}");
    }
}

async fn hello(
    State(st): State<Shared>,
    UrlPath(machine): UrlPath<String>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Json(hello): Json<Hello>,
) -> Response {
    if let Err(r) = as_machine(&st, &headers, &machine).await {
        return r;
    }
    let Some(base) = base_url(&headers, st.tls) else {
        return error(StatusCode::BAD_REQUEST, "the request has no usable Host header");
    };
    let (m, addr, port) = (machine.clone(), peer.to_string(), st.netconsole_port.get().copied());
    match queue(&st, move |s| s.lab_hello(&m, &hello, &addr, &base, port)).await {
        Ok(reply) => {
            log(
                &st,
                format!(
                    "lab: machine {machine} said hello from {peer}{}",
                    reply.closed_job.map(|j| format!(", back from job {j}")).unwrap_or_default()
                ),
            );
            Json(reply).into_response()
        }
        Err(r) => r,
    }
}

async fn next(
    State(st): State<Shared>,
    UrlPath(machine): UrlPath<String>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = as_machine(&st, &headers, &machine).await {
        return r;
    }
    let (m, addr) = (machine.clone(), peer.to_string());
    let offer = queue(&st, move |s| {
        let poll = s.machine(&m)?.spec.poll_s;
        Ok((s.lab_next(&m, &addr)?, poll))
    })
    .await;
    match offer {
        Ok((Some(job), _)) => {
            log(&st, format!("lab: machine {machine} takes job {}", job.id));
            Json(NextAnswer::Run { job }).into_response()
        }
        Ok((None, poll)) => Json(NextAnswer::Wait { seconds: poll.min(lab_protocol::MAX_POLL_S) }).into_response(),
        Err(r) => r,
    }
}

/// The machine a job is for, from the store.
async fn job_machine(st: &Shared, id: u64) -> Result<String, Response> {
    queue(st, move |s| Ok(s.lab_job(id)?.machine)).await
}

async fn event(
    State(st): State<Shared>,
    UrlPath(id): UrlPath<u64>,
    headers: HeaderMap,
    Json(event): Json<JobEvent>,
) -> Response {
    let machine = match job_machine(&st, id).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    if let Err(r) = as_machine(&st, &headers, &machine).await {
        return r;
    }
    let what = match &event {
        JobEvent::Kexec => "boots it by kexec".to_string(),
        JobEvent::Failed { reason } => format!("could not boot it: {}", reason.escape_debug()),
    };
    let m = machine.clone();
    match queue(&st, move |s| s.lab_event(&m, id, &event)).await {
        Ok(()) => {
            log(&st, format!("lab: machine {machine}, job {id}: {what}"));
            Json(json!({})).into_response()
        }
        Err(r) => r,
    }
}

async fn file(State(st): State<Shared>, UrlPath((id, file)): UrlPath<(u64, String)>, headers: HeaderMap) -> Response {
    let kind = match file.as_str() {
        "kernel" => FileKind::Kernel,
        "initrd" => FileKind::Initrd,
        "pack" => FileKind::Pack,
        _ => return error(StatusCode::NOT_FOUND, "a job's files are 'kernel', 'initrd' and 'pack'"),
    };
    let machine = match job_machine(&st, id).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    if let Err(r) = as_machine(&st, &headers, &machine).await {
        return r;
    }
    let found = queue(&st, move |s| {
        let job = s.machines_job(&machine, id)?;
        if job.state != "sent" {
            return Err(LabQueueError::WrongState { job: id, state: job.state, what: "a file", needs: "sent" });
        }
        let f = match kind {
            FileKind::Kernel => Some(job.kernel),
            FileKind::Initrd => Some(job.initrd),
            FileKind::Pack => job.pack.map(|p| p.file),
        };
        Ok(f.map(|f| (s.lab_file(&f.sha256), f.bytes)))
    })
    .await;
    let (path, bytes) = match found {
        Ok(Some(p)) => p,
        Ok(None) => return error(StatusCode::NOT_FOUND, format!("job {id} has no userland pack")),
        Err(r) => return r,
    };
    // Streamed from the file: a pack is gigabytes.
    let opened = match tokio::fs::File::open(&path).await {
        Ok(f) => f.metadata().await.map(|m| (f, m.len())),
        Err(e) => Err(e),
    };
    match opened {
        Ok((f, len)) if len == bytes => {
            let body = Body::from_stream(tokio_util::io::ReaderStream::with_capacity(f, 256 * 1024));
            let mut r = body.into_response();
            r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/octet-stream"));
            r.headers_mut().insert(header::CONTENT_LENGTH, header::HeaderValue::from(len));
            r
        }
        Ok((_, len)) => {
            log::error!(
                "lab job {id}: its {} file {} has {len} bytes, the job says {bytes}",
                kind.name(),
                path.display()
            );
            error(StatusCode::INTERNAL_SERVER_ERROR, format!("job {id}'s {} on the receiver is damaged", kind.name()))
        }
        Err(e) => {
            log::error!("lab job {id}: its {} file {} cannot be read: {e}", kind.name(), path.display());
            error(StatusCode::INTERNAL_SERVER_ERROR, format!("job {id}'s {} is missing on the receiver", kind.name()))
        }
    }
}

async fn upload(
    State(st): State<Shared>,
    UrlPath((id, run_id)): UrlPath<(u64, String)>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (resp, note) = match store_upload(&st, &run_id, peer, &headers, body, UploadAuth::LabJob(id)).await {
        Ok((status, body, note)) => ((status, Json(body)).into_response(), note),
        Err(resp) => {
            let note = format!("refused ({})", resp.status().as_u16());
            (resp, note)
        }
    };
    log(
        &st,
        format!("lab: job {id}: PUT run {} from {peer}: {} {note}", run_id.escape_debug(), resp.status().as_u16()),
    );
    resp
}
