//! The receiver's URL and the run id: which base URLs are acceptable, what a
//! run id may contain, and where one run is uploaded (`PUT
//! {base}/runs/{run_id}`). Pure string work: no I/O here.

use reqwest::Url;

/// Longest run id accepted (a boot id is 36 characters).
pub const MAX_RUN_ID_LEN: usize = 128;

/// The header that repeats the run id, so a proxy that rewrites paths
/// cannot make a receiver store a run under another id.
pub const RUN_ID_HEADER: &str = "X-Bootbench-Run-Id";

/// The header that numbers attempts (1-based), for the receiver's log.
pub const ATTEMPT_HEADER: &str = "X-Bootbench-Attempt";

/// Errors in an upload URL or a run id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Not a URL at all.
    #[error("upload URL '{url}' does not parse: {why}")]
    Parse {
        /// The URL as given.
        url: String,
        /// The parser's complaint.
        why: String,
    },
    /// A URL the uploader will not use.
    #[error("upload URL '{url}' is not usable: {why}")]
    Unusable {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A run id that cannot be a path segment or a header value.
    #[error("run id '{id}' is not valid: {why}")]
    BadRunId {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// Checks a run id: 1 to [`MAX_RUN_ID_LEN`] characters, ASCII letters,
/// digits, `.`, `_` and `-`, starting with a letter or digit. The receiver
/// applies the same rule, so an id that passes here is never refused for
/// its spelling.
///
/// ```
/// results_uploader::check_run_id("4c4f5e2a-0d1b-4a8e-9a57-2f4d2d3c1b00").unwrap();
/// assert!(results_uploader::check_run_id("../etc").is_err());
/// ```
pub fn check_run_id(id: &str) -> Result<(), UrlError> {
    let bad = |why| Err(UrlError::BadRunId { id: id.to_string(), why });
    if id.is_empty() {
        return bad("it is empty");
    }
    if id.len() > MAX_RUN_ID_LEN {
        return bad("it is longer than 128 characters");
    }
    if !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return bad("it must start with a letter or digit");
    }
    if !id.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// Parses the receiver's base URL (what `bootbench serve` listens on, e.g.
/// `http://10.0.2.2:8080` or `https://lab.example/bootbench`). http and
/// https only; no credentials (they would end up in logs; the token goes in
/// a header), no query, no fragment.
///
/// ```
/// let base = results_uploader::parse_base_url("http://10.0.2.2:8080").unwrap();
/// assert_eq!(base.port(), Some(8080));
/// assert!(results_uploader::parse_base_url("ftp://host/").is_err());
/// ```
pub fn parse_base_url(url: &str) -> Result<Url, UrlError> {
    let parsed = Url::parse(url).map_err(|e| UrlError::Parse { url: url.to_string(), why: e.to_string() })?;
    let unusable = |why| Err(UrlError::Unusable { url: url.to_string(), why });
    if !matches!(parsed.scheme(), "http" | "https") {
        return unusable("only http:// and https:// are supported");
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return unusable("it has no host");
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return unusable("credentials in the URL are not allowed; the token is sent as a bearer header");
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return unusable("a query or fragment is not allowed; give the receiver's base URL");
    }
    Ok(parsed)
}

/// The URL one run is uploaded to: `{base}/runs/{run_id}`, keeping any path
/// prefix of `base` (a receiver behind a reverse proxy).
///
/// ```
/// let base = results_uploader::parse_base_url("https://lab.example/bootbench/").unwrap();
/// let url = results_uploader::run_url(&base, "abc-1").unwrap();
/// assert_eq!(url.as_str(), "https://lab.example/bootbench/runs/abc-1");
/// ```
pub fn run_url(base: &Url, run_id: &str) -> Result<Url, UrlError> {
    check_run_id(run_id)?;
    let mut url = base.clone();
    let path = format!("{}/runs/{run_id}", base.path().trim_end_matches('/'));
    url.set_path(&path);
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids() {
        for ok in ["a", "4c4f5e2a-0d1b-4a8e-9a57-2f4d2d3c1b00", "boot-12", "x.y_z"] {
            check_run_id(ok).unwrap();
        }
        for bad in ["", "-a", ".hidden", "a/b", "a b", "a%2f", "ü", &"a".repeat(129)] {
            let e = check_run_id(bad).unwrap_err();
            assert!(matches!(e, UrlError::BadRunId { .. }), "{bad}");
        }
    }

    #[test]
    fn base_urls() {
        for ok in ["http://10.0.2.2:8080", "https://lab.example/x/", "http://[fd00::1]:80/"] {
            parse_base_url(ok).unwrap();
        }
        for (bad, word) in [
            ("10.0.2.2:8080", "does not parse"),
            ("ftp://host/", "http"),
            ("http://u:p@host/", "credentials"),
            ("http://host/?a=1", "query"),
            ("http://host/#f", "fragment"),
            ("not a url", "does not parse"),
        ] {
            let e = parse_base_url(bad).unwrap_err().to_string();
            assert!(e.contains(word) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn run_urls_keep_the_prefix() {
        let base = parse_base_url("http://10.0.2.2:8080").unwrap();
        assert_eq!(run_url(&base, "r1").unwrap().as_str(), "http://10.0.2.2:8080/runs/r1");
        let base = parse_base_url("http://h/p/q").unwrap();
        assert_eq!(run_url(&base, "r1").unwrap().as_str(), "http://h/p/q/runs/r1");
        assert!(run_url(&base, "../x").is_err());
    }
}
