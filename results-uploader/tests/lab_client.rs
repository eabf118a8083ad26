//! The lab client against a scripted receiver on 127.0.0.1: the token and
//! JSON it sends, what it makes of the receiver's errors, and the checks
//! on a downloaded job file (size, sha256, a body cut short).

use results_uploader::{ExpectedFile, LabClient, LabError, RetryPolicy, UploadSettings};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// A request as received: its first line, its Authorization and its body.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    auth: Option<String>,
    body: Vec<u8>,
}

fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut r = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let (mut auth, mut len) = (None, 0usize);
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        if k.eq_ignore_ascii_case("authorization") {
            auth = Some(v.trim().to_string());
        }
        if k.eq_ignore_ascii_case("content-length") {
            len = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Seen { line: line.trim_end().to_string(), auth, body })
}

/// One answer: the status line's code, the Content-Length announced (None:
/// none, the body ends at the close) and the bytes sent.
struct Answer {
    status: u16,
    length: Option<usize>,
    body: Vec<u8>,
}

fn answer(status: u16, body: &[u8]) -> Answer {
    Answer { status, length: Some(body.len()), body: body.to_vec() }
}

fn start(script: Vec<Answer>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    thread::spawn(move || {
        for a in script {
            let Ok((mut s, _)) = listener.accept() else { return };
            let Some(req) = read_request(&mut s) else { continue };
            log.lock().unwrap().push(req);
            let length = a.length.map(|l| format!("Content-Length: {l}\r\n")).unwrap_or_default();
            let _ = write!(s, "HTTP/1.1 {} X\r\n{length}Connection: close\r\n\r\n", a.status);
            let _ = s.write_all(&a.body);
        }
    });
    (url, seen)
}

fn settings() -> UploadSettings {
    let mut s = UploadSettings::host();
    s.policy = RetryPolicy {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        ..RetryPolicy::default()
    };
    s
}

fn sha256(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

#[test]
fn json_requests_carry_the_token_and_the_body_and_parse_the_answer() {
    let (url, seen) =
        start(vec![answer(200, br#"{"closed_job":7}"#), answer(200, br#"{"action":"wait","seconds":5}"#)]);
    let mut c = LabClient::new(&format!("{url}/bb"), "machine-token", settings()).unwrap();
    let reply: serde_json::Value =
        c.post_json("lab/machines/box1/hello", &serde_json::json!({"boot_id": "b"})).unwrap();
    assert_eq!(reply["closed_job"], 7);
    let next: serde_json::Value = c.get_json("lab/machines/box1/next").unwrap();
    assert_eq!(next["seconds"], 5);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].line, "POST /bb/lab/machines/box1/hello HTTP/1.1");
    assert_eq!(seen[0].auth.as_deref(), Some("Bearer machine-token"));
    assert_eq!(seen[0].body, br#"{"boot_id":"b"}"#);
    assert_eq!(seen[1].line, "GET /bb/lab/machines/box1/next HTTP/1.1");
    assert_eq!(seen[1].auth.as_deref(), Some("Bearer machine-token"));
}

#[test]
fn a_wrong_token_is_a_refusal_naming_the_url_and_the_receivers_reason() {
    let (url, _) = start(vec![answer(403, br#"{"error":"token revoked for machine box1"}"#)]);
    let mut c = LabClient::new(&url, "old-token", settings()).unwrap();
    let e = c.get_json::<serde_json::Value>("lab/machines/box1/next").unwrap_err();
    assert!(e.is_auth_refusal() && !e.is_transient(), "{e:?}");
    let text = e.to_string();
    assert!(text.contains(&format!("GET {url}/lab/machines/box1/next")), "{text}");
    assert!(text.contains("HTTP 403") && text.contains("token revoked for machine box1"), "{text}");
    assert!(!text.contains("old-token"), "{text}");
}

#[test]
fn a_receiver_that_is_down_is_transient_and_a_bad_answer_is_not() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut c = LabClient::new(&format!("http://127.0.0.1:{port}"), "t", settings()).unwrap();
    let e = c.get_json::<serde_json::Value>("lab/machines/m/next").unwrap_err();
    assert!(e.is_transient() && !e.is_auth_refusal(), "{e:?}");
    assert!(e.to_string().contains("refused"), "{e}");
    let (url, _) = start(vec![answer(503, b"busy"), answer(200, b"<html>proxy</html>")]);
    let mut c = LabClient::new(&url, "t", settings()).unwrap();
    assert!(c.get_json::<serde_json::Value>("x").unwrap_err().is_transient());
    let e = c.get_json::<serde_json::Value>("x").unwrap_err();
    assert!(matches!(e, LabError::Json { .. }) && !e.is_transient(), "{e:?}");
    assert!(e.to_string().contains("<html>proxy</html>"), "{e}");
}

#[test]
fn a_job_file_is_streamed_to_disk_and_checked() {
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let (url, seen) = start(vec![answer(200, &data)]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("kernel");
    let mut c = LabClient::new(&url, "t", settings()).unwrap();
    let sum = sha256(&data).to_uppercase();
    c.download("lab/jobs/3/kernel", &dest, ExpectedFile { bytes: data.len() as u64, sha256: &sum }, 1 << 30).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), data);
    assert_eq!(seen.lock().unwrap()[0].auth.as_deref(), Some("Bearer t"));
}

#[test]
fn a_file_whose_sha256_differs_is_refused_and_removed() {
    let data = b"not the kernel the job named".to_vec();
    let (url, _) = start(vec![answer(200, &data)]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("kernel");
    let mut c = LabClient::new(&url, "t", settings()).unwrap();
    let other = sha256(b"the real kernel");
    let e = c.download("lab/jobs/3/kernel", &dest, ExpectedFile { bytes: data.len() as u64, sha256: &other }, 1 << 30);
    let text = e.unwrap_err().to_string();
    assert!(text.contains(&sha256(&data)) && text.contains(&other) && text.contains("/lab/jobs/3/kernel"), "{text}");
    assert!(!dest.exists(), "a file that failed its check must not stay");
}

#[test]
fn a_file_over_its_announced_size_or_the_limit_is_refused() {
    let data = vec![7u8; 5000];
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("initrd");
    // Announced by Content-Length: refused before reading the body.
    let (url, _) = start(vec![Answer { status: 200, length: Some(1_000_000), body: data.clone() }]);
    let mut c = LabClient::new(&url, "t", settings()).unwrap();
    let e = c.download("f", &dest, ExpectedFile { bytes: 4000, sha256: &sha256(&data) }, 1 << 30).unwrap_err();
    assert!(matches!(e, LabError::TooLarge { got: 1_000_000, limit: 4000, .. }), "{e:?}");
    assert!(!dest.exists());
    // Without a length: caught while streaming.
    let (url, _) = start(vec![Answer { status: 200, length: None, body: data.clone() }]);
    let mut c = LabClient::new(&url, "t", settings()).unwrap();
    let e = c.download("f", &dest, ExpectedFile { bytes: 4000, sha256: &sha256(&data) }, 1 << 30).unwrap_err();
    assert!(matches!(e, LabError::TooLarge { limit: 4000, .. }), "{e:?}");
    assert!(!dest.exists());
    // A job announcing more than an agent downloads is refused unasked.
    let (url, seen) = start(vec![answer(200, &data)]);
    let mut c = LabClient::new(&url, "t", settings()).unwrap();
    let e = c.download("f", &dest, ExpectedFile { bytes: 5000, sha256: &sha256(&data) }, 4096).unwrap_err();
    assert!(matches!(e, LabError::TooLarge { got: 5000, limit: 4096, .. }), "{e:?}");
    assert!(e.to_string().contains("over the limit of 4096"), "{e}");
    assert!(seen.lock().unwrap().is_empty(), "nothing should have been asked for");
}

#[test]
fn a_file_cut_short_is_refused_with_what_arrived() {
    let data = vec![1u8; 3000];
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("initrd");
    // Content-Length says 3000, the connection closes after 1000.
    let (url, _) = start(vec![Answer { status: 200, length: Some(3000), body: data[..1000].to_vec() }]);
    let mut c = LabClient::new(&url, "t", settings()).unwrap();
    let e = c.download("f", &dest, ExpectedFile { bytes: 3000, sha256: &sha256(&data) }, 1 << 30).unwrap_err();
    assert!(matches!(e, LabError::Truncated { expected: 3000, .. }), "{e:?}");
    assert!(!dest.exists());
    // No length: the body ends cleanly, short of the job's size.
    let (url, _) = start(vec![Answer { status: 200, length: None, body: data[..1000].to_vec() }]);
    let mut c = LabClient::new(&url, "t", settings()).unwrap();
    let e = c.download("f", &dest, ExpectedFile { bytes: 3000, sha256: &sha256(&data) }, 1 << 30).unwrap_err();
    assert!(matches!(e, LabError::Truncated { got: 1000, expected: 3000, .. }), "{e:?}");
    assert!(e.to_string().contains("ended after 1000 of its 3000 bytes"), "{e}");
}

#[test]
fn a_missing_job_file_is_the_receivers_404_message() {
    let (url, _) = start(vec![answer(404, br#"{"error":"no job 9 for machine box1"}"#)]);
    let dir = tempfile::tempdir().unwrap();
    let mut c = LabClient::new(&url, "t", settings()).unwrap();
    let e = c
        .download("lab/jobs/9/kernel", &dir.path().join("k"), ExpectedFile { bytes: 1, sha256: "00" }, 10)
        .unwrap_err();
    assert_eq!(e.status(), Some(404));
    assert!(e.to_string().contains("no job 9 for machine box1"), "{e}");
}
