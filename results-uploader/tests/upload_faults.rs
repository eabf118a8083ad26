//! The uploader against a scripted receiver on 127.0.0.1: success, 5xx,
//! refusals, a receiver that is not up yet, a slow one, one that hangs up,
//! and what the outcome says in each case.

use results_uploader::{upload, RetryPolicy, UploadReport, UploadRequest, UploadSettings, Verdict};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What the scripted receiver does with one request.
#[derive(Clone)]
enum Act {
    /// Answer with this status and body.
    Reply(u16, &'static str),
    /// Answer with this status and a receiver's acknowledgement of the
    /// request (the run id from its path, the sha256 of its body), with
    /// `already_stored` as given.
    Ack(u16, bool),
    /// Wait, then acknowledge (as [`Act::Ack`]).
    Slow(Duration, u16, bool),
    /// Read the request, then close without answering.
    HangUp,
}

/// A request as received.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut r = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Seen { line: line.trim_end().to_string(), headers, body })
}

fn reply(stream: &mut TcpStream, status: u16, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A receiver's acknowledgement of the last request in `seen`, written
/// here from the protocol (not with the crate's own helper): the run id
/// from the path and the sha256 of the body as received.
fn ack(seen: &[Seen], already: bool) -> String {
    use sha2::Digest;
    let Some(req) = seen.last() else { return "{}".into() };
    let id = req.line.split(' ').nth(1).and_then(|p| p.rsplit('/').next()).unwrap_or_default();
    let sha = hex::encode(sha2::Sha256::digest(&req.body));
    format!(r#"{{"run_id":"{id}","body_sha256":"{sha}","already_stored":{already}}}"#)
}

/// Serves `script` on `listener`, one act per request, and records them.
fn serve(listener: TcpListener, script: Vec<Act>) -> Arc<Mutex<Vec<Seen>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    thread::spawn(move || {
        for act in script {
            let Ok((mut s, _)) = listener.accept() else { return };
            let Some(req) = read_request(&mut s) else { continue };
            log.lock().unwrap().push(req);
            match act {
                Act::Reply(st, b) => reply(&mut s, st, b),
                Act::Ack(st, already) => reply(&mut s, st, &ack(&log.lock().unwrap()[..], already)),
                Act::Slow(d, st, already) => {
                    thread::sleep(d);
                    reply(&mut s, st, &ack(&log.lock().unwrap()[..], already));
                }
                Act::HangUp => drop(s),
            }
        }
    });
    seen
}

fn start(script: Vec<Act>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    (url, serve(l, script))
}

fn fast() -> UploadSettings {
    let mut s = UploadSettings::host();
    s.policy = RetryPolicy {
        max_attempts: 5,
        initial_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(400),
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(2),
        jitter_seed: Some(1),
        total_budget: Duration::from_secs(60),
    };
    s
}

const BODY: &[u8] = br#"{"schema_version":1,"run_id":"run-1"}"#;

fn req(url: &str) -> UploadRequest<'_> {
    UploadRequest { base_url: url, token: "s3cret", run_id: "run-1", body: BODY }
}

#[test]
fn first_try_stores_and_sends_token_id_and_body() {
    let (url, seen) = start(vec![Act::Ack(201, false)]);
    let o = upload(&req(&url), &fast());
    assert_eq!(o.verdict, Verdict::Stored, "{o:?}");
    assert_eq!(o.status, Some(201));
    assert_eq!(o.attempts.len(), 1);
    assert_eq!(o.url, format!("{url}/runs/run-1"));
    let seen = seen.lock().unwrap();
    let r = &seen[0];
    assert_eq!(r.line, "PUT /runs/run-1 HTTP/1.1");
    assert_eq!(r.header("authorization"), Some("Bearer s3cret"));
    assert_eq!(r.header("x-bootbench-run-id"), Some("run-1"));
    assert_eq!(r.header("x-bootbench-attempt"), Some("1"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body, BODY);
}

#[test]
fn server_errors_are_retried_with_growing_delays_until_stored() {
    let (url, seen) =
        start(vec![Act::Reply(503, r#"{"error":"busy"}"#), Act::Reply(500, "oops"), Act::HangUp, Act::Ack(201, false)]);
    let o = upload(&req(&url), &fast());
    assert_eq!(o.verdict, Verdict::Stored, "{o:?}");
    let report = UploadReport::from(&o);
    assert_eq!(report.history, ["503", "500", "io", "201"], "{o:?}");
    assert_eq!(report.delays_ms[0], 0);
    // Exponential from 50 ms, factor 2, jitter up to +100%.
    for (i, d) in report.delays_ms.iter().enumerate().skip(1) {
        let base = 50u64 << (i - 1);
        assert!(*d + 1 >= base && *d <= 2 * base + 1, "delay {i} = {d} ms, base {base}");
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    assert!(seen.iter().all(|r| r.body == BODY), "every retry sends the same body");
    assert_eq!(seen[3].header("x-bootbench-attempt"), Some("4"));
}

#[test]
fn wrong_token_is_refused_at_once_with_the_servers_reason() {
    let (url, seen) = start(vec![Act::Reply(403, r#"{"error":"wrong token for this receiver"}"#)]);
    let o = upload(&req(&url), &fast());
    assert_eq!(o.verdict, Verdict::Refused);
    assert_eq!(o.status, Some(403));
    assert_eq!(o.attempts.len(), 1, "a refused token must not be retried");
    let e = o.error.unwrap();
    assert!(e.contains("refused the token") && e.contains("wrong token for this receiver"), "{e}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn other_refusals_and_redirects_are_final() {
    for (status, word) in
        [(400, "HTTP 400"), (401, "wants a token"), (409, "HTTP 409"), (413, "HTTP 413"), (307, "redirects")]
    {
        let (url, _) = start(vec![Act::Reply(status, r#"{"error":"no"}"#)]);
        let o = upload(&req(&url), &fast());
        assert_eq!(o.verdict, Verdict::Refused, "{status}");
        assert_eq!(o.attempts.len(), 1, "{status}");
        assert!(o.error.as_deref().unwrap_or("").contains(word), "{status}: {:?}", o.error);
    }
}

#[test]
fn a_full_store_is_retried_later_and_the_run_stored_once_there_is_room() {
    let (url, seen) = start(vec![
        Act::Reply(507, r#"{"error":"the results store is full; retry later"}"#),
        Act::Reply(507, r#"{"error":"the results store is full; retry later"}"#),
        Act::Ack(201, false),
    ]);
    let o = upload(&req(&url), &fast());
    assert_eq!(o.verdict, Verdict::Stored, "{o:?}");
    assert_eq!(UploadReport::from(&o).history, ["507", "507", "201"], "{o:?}");
    assert_eq!(seen.lock().unwrap().len(), 3);
    // A store that stays full: the upload gives up (retryable), not refused.
    let (url, _) = start(vec![Act::Reply(507, r#"{"error":"full"}"#); 3]);
    let mut s = fast();
    s.policy.max_attempts = 2;
    let o = upload(&req(&url), &s);
    assert_eq!(o.verdict, Verdict::GaveUp, "{o:?}");
    assert_eq!(o.status, Some(507));
    assert!(o.error.as_deref().unwrap_or("").contains("full"), "{o:?}");
}

#[test]
fn already_stored_is_success() {
    let (url, _) = start(vec![Act::Ack(200, true)]);
    let o = upload(&req(&url), &fast());
    assert_eq!(o.verdict, Verdict::AlreadyStored);
    assert!(o.verdict.delivered());
}

#[test]
fn a_receiver_that_comes_up_late_is_reached() {
    // Reserve a port, free it: connections are refused until it is bound again.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let late = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        serve(l, vec![Act::Ack(201, false)])
    });
    let o = upload(&req(&url), &fast());
    late.join().unwrap();
    assert_eq!(o.verdict, Verdict::Stored, "{o:?}");
    let r = UploadReport::from(&o);
    assert!(r.history.len() >= 2, "{r:?}");
    assert!(r.history[..r.history.len() - 1].iter().all(|h| h == "refused"), "{r:?}");
}

#[test]
fn a_slow_receiver_times_out_and_is_retried() {
    let (url, _) = start(vec![
        Act::Slow(Duration::from_millis(2500), 201, false),
        Act::Slow(Duration::from_millis(200), 201, false),
    ]);
    let o = upload(&req(&url), &fast());
    assert_eq!(o.verdict, Verdict::Stored, "{o:?}");
    assert_eq!(UploadReport::from(&o).history, ["timeout", "201"]);
    assert!(o.attempts[1].took_ms >= 200, "the slow answer was waited for");
}

#[test]
fn retries_are_bounded() {
    let (url, seen) = start(vec![Act::Reply(503, "{}"); 10]);
    let mut s = fast();
    s.policy.max_attempts = 3;
    let o = upload(&req(&url), &s);
    assert_eq!(o.verdict, Verdict::GaveUp);
    assert_eq!(o.attempts.len(), 3);
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert!(o.error.unwrap().contains("gave up after 3 attempts"));
}

#[test]
fn bad_input_fails_before_sending() {
    let s = fast();
    for (base, token, id, word) in [
        ("10.0.2.2:80", "t", "r", "does not parse"),
        ("http://127.0.0.1:9", "", "r", "token is empty"),
        ("http://127.0.0.1:9", "a b", "r", "printable"),
        ("http://127.0.0.1:9", "t", "../x", "run id"),
    ] {
        let o = upload(&UploadRequest { base_url: base, token, run_id: id, body: BODY }, &s);
        assert_eq!(o.verdict, Verdict::Failed, "{base} {token} {id}");
        assert!(o.attempts.is_empty());
        assert!(o.error.as_deref().unwrap_or("").contains(word), "{:?}", o.error);
    }
}

#[test]
fn a_host_name_without_dns_servers_is_refused_clearly() {
    let mut s = fast();
    s.resolution = results_uploader::Resolution::Servers(Vec::new());
    let o = upload(&UploadRequest { base_url: "http://results.example:8080", token: "t", run_id: "r", body: BODY }, &s);
    assert_eq!(o.verdict, Verdict::Failed, "{o:?}");
    assert_eq!(o.attempts.len(), 1, "{o:?}");
    let e = o.error.unwrap();
    assert!(e.contains("results.example") && e.contains("bootbench.dns"), "{e}");
}

#[test]
fn a_2xx_that_does_not_acknowledge_the_run_and_its_bytes_is_no_delivery() {
    // A wrong URL (a web server's page), an empty 2xx, another run's
    // acknowledgement, and these bytes' hash under another run id: each
    // fails at once, naming what was missing.
    let other = format!(r#"{{"run_id":"run-2","body_sha256":"{}"}}"#, results_uploader::body_sha256(BODY));
    let wrong_hash = r#"{"run_id":"run-1","body_sha256":"00"}"#.to_string();
    for answer in ["<html>it works</html>".to_string(), "{}".to_string(), other, wrong_hash] {
        let body: &'static str = Box::leak(answer.into_boxed_str());
        let (url, seen) = start(vec![Act::Reply(200, body), Act::Ack(201, false)]);
        let o = upload(&req(&url), &fast());
        assert_eq!(o.verdict, Verdict::Refused, "{body}: {o:?}");
        assert!(!o.verdict.delivered());
        assert_eq!(seen.lock().unwrap().len(), 1, "{body}: not sent again");
        let e = o.error.unwrap_or_default();
        assert!(e.contains("does not acknowledge run 'run-1' and its 37 bytes"), "{e}");
    }
}
