//! The upload's outcome as one console event line, and back. The guest
//! prints `@@BOOTBENCH EVENT upload <text>` after the result stream (the
//! document cannot hold it: it was sent before the upload); the host parses
//! the text into an [`UploadReport`] for its envelope.
//!
//! Text: space-separated `key=value` pairs, `error=` last because it runs
//! to the end of the line:
//! ```text
//! verdict=stored http=201 attempts=3 ms=2113 history=503,refused,201 delays_ms=0,540,1210 url=http://10.0.2.2:41234/runs/ID
//! verdict=refused http=403 attempts=1 ms=9 history=403 delays_ms=0 url=... error=HTTP 403: the receiver refused the token: ...
//! ```

use crate::upload::{UploadOutcome, Verdict};
use serde::{Deserialize, Serialize};

/// Event name of the upload outcome.
pub const EVENT_UPLOAD: &str = "upload";
/// Event name of the guest's network bring-up (its text is free-form
/// `key=value` pairs written by the init).
pub const EVENT_NETWORK: &str = "network";
/// Event name the guest prints before each upload attempt (`attempt=N`),
/// so the host sees progress while a slow receiver keeps it waiting.
pub const EVENT_UPLOAD_ATTEMPT: &str = "upload-attempt";

/// Errors parsing an upload event's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// A required key is missing.
    #[error("upload event '{text}' lacks '{key}='")]
    Missing {
        /// The event text.
        text: String,
        /// The key.
        key: &'static str,
    },
    /// A value does not parse.
    #[error("upload event '{text}': bad value '{value}' for '{key}'")]
    BadValue {
        /// The event text.
        text: String,
        /// The key.
        key: &'static str,
        /// The value.
        value: String,
    },
}

/// What the guest reported about its upload (the event's content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadReport {
    /// How it ended.
    pub verdict: Verdict,
    /// The last HTTP status.
    #[serde(default)]
    pub http_status: Option<u16>,
    /// Attempts made.
    pub attempts: u32,
    /// Wall time of the whole upload.
    pub elapsed_ms: u64,
    /// Per attempt: the HTTP status or the error class.
    #[serde(default)]
    pub history: Vec<String>,
    /// Per attempt: the backoff slept before it.
    #[serde(default)]
    pub delays_ms: Vec<u64>,
    /// Where it went.
    pub url: String,
    /// Why it failed, if it did.
    #[serde(default)]
    pub error: Option<String>,
}

impl From<&UploadOutcome> for UploadReport {
    fn from(o: &UploadOutcome) -> Self {
        UploadReport {
            verdict: o.verdict,
            http_status: o.status,
            attempts: o.attempts.len() as u32,
            elapsed_ms: o.elapsed_ms,
            history: o.attempts.iter().map(|a| a.code()).collect(),
            delays_ms: o.attempts.iter().map(|a| a.delay_before_ms).collect(),
            url: o.url.clone(),
            error: o.error.clone(),
        }
    }
}

fn list<T: ToString>(items: &[T]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.iter().map(T::to_string).collect::<Vec<_>>().join(",")
    }
}

impl UploadReport {
    /// The event text (one line; no newlines even if the error had some).
    pub fn to_event_text(&self) -> String {
        let mut s = format!(
            "verdict={} http={} attempts={} ms={} history={} delays_ms={} url={}",
            self.verdict.name(),
            self.http_status.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
            self.attempts,
            self.elapsed_ms,
            list(&self.history),
            list(&self.delays_ms),
            self.url.split_whitespace().collect::<Vec<_>>().join("%20"),
        );
        if let Some(e) = &self.error {
            s.push_str(" error=");
            s.push_str(&e.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        s
    }

    /// Parses [`UploadReport::to_event_text`].
    pub fn parse_event_text(text: &str) -> Result<UploadReport, EventError> {
        let (pairs, error) = match text.split_once(" error=") {
            Some((p, e)) => (p, Some(e.trim().to_string())),
            None => (text, None),
        };
        let get = |key: &'static str| -> Result<&str, EventError> {
            pairs
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
                .ok_or(EventError::Missing { text: text.to_string(), key })
        };
        let bad = |key: &'static str, value: &str| EventError::BadValue {
            text: text.to_string(),
            key,
            value: value.to_string(),
        };
        let num = |key: &'static str| -> Result<u64, EventError> {
            let v = get(key)?;
            v.parse().map_err(|_| bad(key, v))
        };
        let verdict_text = get("verdict")?;
        let verdict = Verdict::from_name(verdict_text).ok_or_else(|| bad("verdict", verdict_text))?;
        let http = get("http")?;
        let http_status = match http {
            "-" => None,
            v => Some(v.parse().map_err(|_| bad("http", v))?),
        };
        let split = |v: &str| -> Vec<String> {
            if v == "-" {
                Vec::new()
            } else {
                v.split(',').map(str::to_string).collect()
            }
        };
        let history = split(get("history")?);
        let delays_text = get("delays_ms")?;
        let delays_ms = split(delays_text)
            .iter()
            .map(|d| d.parse().map_err(|_| bad("delays_ms", delays_text)))
            .collect::<Result<Vec<u64>, _>>()?;
        Ok(UploadReport {
            verdict,
            http_status,
            attempts: u32::try_from(num("attempts")?).map_err(|_| bad("attempts", text))?,
            elapsed_ms: num("ms")?,
            history,
            delays_ms,
            url: get("url")?.to_string(),
            error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_and_without_error() {
        let r = UploadReport {
            verdict: Verdict::Stored,
            http_status: Some(201),
            attempts: 3,
            elapsed_ms: 2113,
            history: vec!["503".into(), "refused".into(), "201".into()],
            delays_ms: vec![0, 540, 1210],
            url: "http://10.0.2.2:4/runs/x".into(),
            error: None,
        };
        assert_eq!(UploadReport::parse_event_text(&r.to_event_text()).unwrap(), r);
        let r = UploadReport {
            verdict: Verdict::Refused,
            http_status: Some(403),
            attempts: 1,
            history: vec!["403".into()],
            delays_ms: vec![0],
            error: Some("HTTP 403: the receiver refused\nthe token: x=y".into()),
            ..r
        };
        let text = r.to_event_text();
        assert!(!text.contains('\n'));
        let back = UploadReport::parse_event_text(&text).unwrap();
        assert_eq!(back.error.as_deref(), Some("HTTP 403: the receiver refused the token: x=y"));
        let r = UploadReport {
            verdict: Verdict::Failed,
            http_status: None,
            attempts: 0,
            history: vec![],
            delays_ms: vec![],
            ..r
        };
        assert_eq!(UploadReport::parse_event_text(&r.to_event_text()).unwrap().attempts, 0);
    }

    #[test]
    fn bad_text_names_the_key() {
        let e = UploadReport::parse_event_text("verdict=stored http=201").unwrap_err();
        assert!(matches!(e, EventError::Missing { .. }) && e.to_string().contains("lacks"), "{e}");
        let e =
            UploadReport::parse_event_text("verdict=won http=201 attempts=1 ms=1 history=201 delays_ms=0 url=http://x")
                .unwrap_err();
        assert!(e.to_string().contains("won"), "{e}");
    }
}
