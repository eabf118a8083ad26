//! A finished job on a LAVA server, fetched through its REST API (v0.2):
//! `api/v0.2/jobs/ID/` for the definition and the device, and
//! `api/v0.2/jobs/ID/logs/` for the log. The job is named by its page's
//! URL (`…/scheduler/job/ID`) or its API URL (`…/api/v0.2/jobs/ID/`); a
//! server under a path prefix keeps it. A private job needs a token, sent
//! as LAVA's `Authorization: Token …`, read from a file.

use super::import::JobSource;
use super::LavaError;
use serde::Deserialize;
use std::time::Duration;

/// The server's base URL (with its path prefix) and the job id of a job's
/// page or API URL.
pub fn parse_job_url(url: &str) -> Result<(String, String), LavaError> {
    let bad = |problem: &str| LavaError::Fetch { url: url.to_string(), problem: problem.to_string() };
    let parsed = url::Url::parse(url).map_err(|e| bad(&format!("not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("only http and https LAVA servers are read"));
    }
    let path = parsed.path().trim_end_matches('/');
    for marker in ["/scheduler/job/", "/api/v0.2/jobs/"] {
        if let Some(at) = path.find(marker) {
            let id = &path[at + marker.len()..];
            // A multinode job's parts are `ID.N`.
            let number = |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
            let ok = match id.split_once('.') {
                Some((a, b)) => number(a) && number(b),
                None => number(id),
            };
            if !ok {
                return Err(bad("the job id after the path must be a number (ID, or ID.N for a multinode job's part)"));
            }
            let mut base = parsed.clone();
            base.set_path(&path[..at]);
            base.set_query(None);
            base.set_fragment(None);
            return Ok((base.as_str().trim_end_matches('/').to_string(), id.to_string()));
        }
    }
    Err(bad("expected a job's page (…/scheduler/job/ID) or its API URL (…/api/v0.2/jobs/ID/)"))
}

#[derive(Deserialize)]
struct ApiJob {
    #[serde(default)]
    definition: Option<String>,
    #[serde(default)]
    actual_device: Option<String>,
    #[serde(default)]
    state: Option<String>,
}

/// Fetches a job's log, definition and device.
pub fn fetch(url: &str, token: Option<&str>, timeout: Duration) -> Result<JobSource, LavaError> {
    let (base, id) = parse_job_url(url)?;
    // reqwest is built without a crypto provider; it takes the process
    // default. Err means one is installed already: fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::blocking::Client::builder()
        .timeout(timeout)
        .user_agent(concat!("bootbench/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| LavaError::Fetch { url: url.to_string(), problem: e.to_string() })?;
    let get = |u: String| -> Result<String, LavaError> {
        let mut req = client.get(&u);
        if let Some(t) = token {
            req = req.header("Authorization", format!("Token {t}"));
        }
        let fail = |problem: String| LavaError::Fetch { url: u.clone(), problem };
        let resp = req.send().map_err(|e| fail(loads::error_chain::error_chain(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            let hint = match status.as_u16() {
                401 | 403 => " (a private job needs --token-file)",
                404 => " (no such job, or its log is gone)",
                _ => "",
            };
            return Err(fail(format!("the server answered {status}{hint}")));
        }
        resp.text().map_err(|e| fail(loads::error_chain::error_chain(&e)))
    };
    let api = format!("{base}/api/v0.2/jobs/{id}/");
    let job_text = get(api.clone())?;
    let job: ApiJob = serde_json::from_str(&job_text)
        .map_err(|e| LavaError::Fetch { url: api.clone(), problem: format!("not a LAVA job: {e}") })?;
    if let Some(state) = job.state.as_deref().filter(|s| *s != "Finished") {
        return Err(LavaError::Fetch { url: api, problem: format!("the job is not finished (state {state})") });
    }
    let log = get(format!("{base}/api/v0.2/jobs/{id}/logs/"))?;
    Ok(JobSource {
        name: url.to_string(),
        log,
        definition: job.definition,
        definition_name: api,
        job_id: Some(id.clone()),
        url: Some(format!("{base}/scheduler/job/{id}")),
        device: job.actual_device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_urls_give_the_server_and_the_id() {
        assert_eq!(
            parse_job_url("https://lava.example/scheduler/job/1234").unwrap(),
            ("https://lava.example".into(), "1234".into())
        );
        assert_eq!(
            parse_job_url("https://lab.example/lava/api/v0.2/jobs/77/?x=1").unwrap(),
            ("https://lab.example/lava".into(), "77".into())
        );
        assert_eq!(parse_job_url("https://lava/scheduler/job/12.1").unwrap().1, "12.1");
        for bad in [
            "ftp://lava/scheduler/job/1",
            "https://lava/scheduler/job/abc",
            "https://lava/scheduler/job/1.",
            "https://lava/jobs/1",
            "nope",
        ] {
            assert!(parse_job_url(bad).is_err(), "{bad}");
        }
    }
}
