//! The results receiver and `bootbench upload` on this host, without a
//! boot: tokens, malformed and oversized bodies, the same run twice,
//! conflicting content, concurrent uploads, the listing pages, the CLI, a
//! noisy boot's envelope under the default limit, a receiver killed in
//! the middle of a stream of uploads, idle and stalled clients against the
//! connection cap and timeouts, and https with a lab's own CA.

mod support;

use bootbench::results::{BootRecord, ResultsFile};
use bootbench::service::listener::{ConnectionLimits, TlsFiles};
use bootbench::service::receiver::{GivenToken, Receiver, ServeConfig, DEFAULT_MAX_BYTES};
use bootbench::service::store::{self, Store, StoredRun};
use bootbench::service::tokens::{self, Scope};
use loads::schema::{Provenance, RunDocument, Status, SCHEMA_VERSION};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "test-token-0123456789";

fn doc(id: &str) -> RunDocument {
    let mut p = Provenance::default();
    p.kernel.release = "6.1.0-test".into();
    p.machine.arch = "x86_64".into();
    p.suite.name = "quick".into();
    RunDocument {
        schema_version: SCHEMA_VERSION,
        run_id: id.into(),
        status: Status::Complete,
        errors: vec![],
        provenance: p,
        timings: Default::default(),
        workloads: vec![],
    }
}

/// A receiver on `db` whose command-line token is [`TOKEN`] (upload only).
fn config(db: &Path, public_reads: bool) -> ServeConfig {
    ServeConfig {
        db: db.to_path_buf(),
        tokens: vec![GivenToken { name: "cli".into(), secret: TOKEN.into(), scope: Scope::UPLOAD }],
        public_reads,
        base_url: None,
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        max_bytes: 1 << 20,
        log_prefix: None,
        limits: ConnectionLimits::default(),
        tls: None,
        netconsole: None,
    }
}

/// A receiver with public reads (what these tests read is not the point).
fn start(dir: &Path, max_bytes: u64) -> (Receiver, PathBuf) {
    let db = dir.join("runs.db");
    let r = Receiver::start(ServeConfig { max_bytes, ..config(&db, true) }).expect("cannot start the receiver");
    (r, db)
}

/// One raw HTTP/1.1 exchange (so tests control every header and byte);
/// returns the status and the body.
fn http(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, String) {
    let text = exchange(addr, head, body);
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// One raw HTTP/1.1 exchange: the whole answer, head included.
fn exchange(addr: SocketAddr, head: &str, body: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = head.replace('\n', "\r\n");
    if !req.contains("Connection:") {
        req.push_str("Connection: close\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    // A receiver may answer before the body and close: that is fine.
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn put(addr: SocketAddr, id: &str, auth: Option<&str>, body: &[u8]) -> (u16, String) {
    let auth = auth.map(|a| format!("Authorization: {a}\n")).unwrap_or_default();
    http(
        addr,
        &format!(
            "PUT /runs/{id} HTTP/1.1\nHost: x\n{auth}Content-Type: application/json\nContent-Length: {}\n",
            body.len()
        ),
        body,
    )
}

fn bearer() -> Option<&'static str> {
    Some("Bearer test-token-0123456789")
}

/// Writes `text` to DIR/NAME, readable by its owner only (as token files
/// must be).
fn private_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn rows(db: &Path) -> usize {
    Store::open(db).unwrap().list(1000).unwrap().len()
}

#[test]
fn a_run_is_stored_once_listed_and_read_back() {
    let dir = support::scratch();
    let (r, db) = start(dir.path(), 1 << 20);
    let body = serde_json::to_vec(&doc("run-a")).unwrap();
    let (st, text) = put(r.addr(), "run-a", bearer(), &body);
    assert_eq!(st, 201, "{text}");
    assert!(text.contains("\"stored\":true"), "{text}");
    // The same run again (as a retry would send it): nothing new.
    let (st, text) = put(r.addr(), "run-a", bearer(), &body);
    assert_eq!(st, 200, "{text}");
    assert!(text.contains("\"already_stored\":true"), "{text}");
    // Pretty-printed is the same content.
    let (st, _) = put(r.addr(), "run-a", bearer(), &serde_json::to_vec_pretty(&doc("run-a")).unwrap());
    assert_eq!(st, 200);
    assert_eq!(rows(&db), 1);

    let (st, list) = http(r.addr(), "GET /runs HTTP/1.1\nHost: x\n", b"");
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(v["runs"][0]["run_id"], "run-a");
    assert_eq!(v["runs"][0]["kernel_release"], "6.1.0-test");
    let (st, got) = http(r.addr(), "GET /runs/run-a HTTP/1.1\nHost: x\n", b"");
    assert_eq!(st, 200);
    assert_eq!(got.as_bytes(), &body[..]);
    let (st, page) = http(r.addr(), "GET / HTTP/1.1\nHost: x\n", b"");
    assert_eq!(st, 200);
    assert!(page.contains("<table>") && page.contains("run-a") && page.contains("6.1.0-test"), "{page}");
    let (st, text) = http(r.addr(), "GET /runs/nope HTTP/1.1\nHost: x\n", b"");
    assert_eq!(st, 404, "{text}");
    assert!(text.contains("nope"));
    let (st, text) = http(r.addr(), "DELETE /runs/run-a HTTP/1.1\nHost: x\n", b"");
    assert_eq!(st, 405, "{text}");
    let (st, text) = http(r.addr(), "GET /elsewhere HTTP/1.1\nHost: x\n", b"");
    assert_eq!(st, 404);
    assert!(text.contains("endpoints"), "{text}");
    r.stop().unwrap();

    // What compare reads from the store.
    match store::load_run(&db, "run-a").unwrap() {
        StoredRun::Document(d) => assert_eq!(d.run_id, "run-a"),
        other => panic!("expected the bare document, got {other:?}"),
    }
}

#[test]
fn missing_and_wrong_tokens_are_refused_and_nothing_is_stored() {
    let dir = support::scratch();
    let (r, db) = start(dir.path(), 1 << 20);
    let body = serde_json::to_vec(&doc("run-t")).unwrap();
    let (st, text) = put(r.addr(), "run-t", None, &body);
    assert_eq!(st, 401, "{text}");
    assert!(text.contains("missing token"), "{text}");
    let (st, text) = put(r.addr(), "run-t", Some("Basic dGVzdA=="), &body);
    assert_eq!(st, 401, "{text}");
    assert!(text.contains("Bearer"), "{text}");
    let (st, text) = put(r.addr(), "run-t", Some("Bearer wrong"), &body);
    assert_eq!(st, 403, "{text}");
    assert!(text.contains("wrong token"), "{text}");
    let (st, _) = put(r.addr(), "run-t", Some("Bearer test-token-01234567890"), &body);
    assert_eq!(st, 403, "a longer token with the right prefix is still wrong");
    assert_eq!(rows(&db), 0);
}

#[test]
fn malformed_bodies_get_400_with_the_reason() {
    let dir = support::scratch();
    let (r, db) = start(dir.path(), 1 << 20);
    let good = serde_json::to_vec(&doc("run-m")).unwrap();
    let mut newer = doc("run-m");
    newer.schema_version = SCHEMA_VERSION + 1;
    let two = ResultsFile {
        boots: vec![BootRecord { result: Some(doc("run-m")), ..Default::default() }; 2],
        ..Default::default()
    };
    for (id, body, word) in [
        ("run-m", b"{not json".to_vec(), "not JSON"),
        ("run-m", br#"{"hello":"world"}"#.to_vec(), "not a bootbench result"),
        ("other", good.clone(), "names run 'other'"),
        ("-bad", good.clone(), "run id"),
        ("run-m", serde_json::to_vec(&newer).unwrap(), "schema_version"),
        ("run-m", serde_json::to_vec(&two).unwrap(), "exactly one boot"),
    ] {
        let (st, text) = put(r.addr(), id, bearer(), &body);
        assert_eq!(st, 400, "{word}: {text}");
        assert!(text.contains(word), "{word}: {text}");
    }
    // The run id header must agree with the URL.
    let (st, text) = http(
        r.addr(),
        &format!(
            "PUT /runs/run-m HTTP/1.1\nHost: x\nAuthorization: Bearer {TOKEN}\nX-Bootbench-Run-Id: run-n\nContent-Length: {}\n",
            good.len()
        ),
        &good,
    );
    assert_eq!(st, 400, "{text}");
    assert!(text.contains("run-n"), "{text}");
    assert_eq!(rows(&db), 0);
}

#[test]
fn oversized_bodies_get_413_and_the_receiver_keeps_serving() {
    let dir = support::scratch();
    let (r, db) = start(dir.path(), 2000);
    let mut big = doc("run-big");
    big.errors.push(loads::schema::RunError { location: "x".into(), message: "y".repeat(5000) });
    let body = serde_json::to_vec(&big).unwrap();
    let (st, text) = put(r.addr(), "run-big", bearer(), &body);
    assert_eq!(st, 413, "{text}");
    assert!(text.contains("2000") && text.contains("--max-bytes"), "{text}");
    // Chunked, no Content-Length: refused while reading.
    let mut chunked = Vec::new();
    for c in body.chunks(700) {
        chunked.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        chunked.extend_from_slice(c);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let (st, text) = http(
        r.addr(),
        &format!("PUT /runs/run-big HTTP/1.1\nHost: x\nAuthorization: Bearer {TOKEN}\nTransfer-Encoding: chunked\n"),
        &chunked,
    );
    assert_eq!(st, 413, "{text}");
    // A huge declared length is refused at once, without waiting for it.
    let t0 = std::time::Instant::now();
    let (st, _) = http(
        r.addr(),
        &format!("PUT /runs/run-big HTTP/1.1\nHost: x\nAuthorization: Bearer {TOKEN}\nContent-Length: 1000000000000\n"),
        b"{}",
    );
    assert_eq!(st, 413);
    assert!(t0.elapsed() < Duration::from_secs(10));
    // Still alive, and a small run still goes in.
    let small = serde_json::to_vec(&doc("run-small")).unwrap();
    assert_eq!(put(r.addr(), "run-small", bearer(), &small).0, 201);
    assert_eq!(rows(&db), 1);
}

#[test]
fn other_content_under_a_stored_run_id_is_a_conflict() {
    let dir = support::scratch();
    let (r, db) = start(dir.path(), 1 << 20);
    assert_eq!(put(r.addr(), "run-c", bearer(), &serde_json::to_vec(&doc("run-c")).unwrap()).0, 201);
    let mut other = doc("run-c");
    other.status = Status::Partial;
    let (st, text) = put(r.addr(), "run-c", bearer(), &serde_json::to_vec(&other).unwrap());
    assert_eq!(st, 409, "{text}");
    assert!(text.contains("different content"), "{text}");
    r.stop().unwrap();
    match store::load_run(&db, "run-c").unwrap() {
        StoredRun::Document(d) => assert_eq!(d.status, Status::Complete, "the first upload stays"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn concurrent_uploads_of_one_run_store_it_once() {
    let dir = support::scratch();
    let (r, db) = start(dir.path(), 1 << 20);
    let addr = r.addr();
    let body = serde_json::to_vec(&doc("run-x")).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let body = body.clone();
            std::thread::spawn(move || put(addr, "run-x", bearer(), &body).0)
        })
        .collect();
    let mut codes: Vec<u16> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    codes.sort();
    assert_eq!(codes, [200, 200, 200, 200, 200, 200, 200, 201]);
    assert_eq!(rows(&db), 1);
}

/// A results file with two boots: one with a document, one that hung.
fn results_file(path: &Path) {
    let mut f = ResultsFile::default();
    f.boots.push(BootRecord { label: "base".into(), result: Some(doc("run-f")), ..Default::default() });
    let mut hung = BootRecord { label: "base".into(), ..Default::default() };
    hung.boot.classification = "hang".into();
    f.boots.push(hung);
    f.write(path).unwrap();
}

#[test]
fn upload_cli_sends_each_boot_once_and_reports_refusals() {
    let dir = support::scratch();
    let (r, db) = start(dir.path(), 1 << 20);
    let file = dir.path().join("r.json");
    results_file(&file);
    let url = format!("http://{}", r.addr());
    let deadline = Duration::from_secs(120);
    let run = support::run_bootbench(["upload", file.to_str().unwrap(), "--url", &url, "--token", TOKEN], deadline);
    run.assert_success();
    assert!(run.stdout.contains("run run-f: stored (HTTP 201)"), "{}", run.transcript());
    assert!(run.stderr.contains("boot 2 (base): no guest document (hang"), "{}", run.transcript());
    let again = support::run_bootbench(["upload", file.to_str().unwrap(), "--url", &url, "--token", TOKEN], deadline);
    again.assert_success();
    assert!(again.stdout.contains("already-stored (HTTP 200)"), "{}", again.transcript());
    let wrong = support::run_bootbench(
        ["upload", file.to_str().unwrap(), "--url", &url, "--token", "wrong-token-0123456789"],
        deadline,
    );
    assert_eq!(wrong.code(), Some(1), "{}", wrong.transcript());
    assert!(wrong.stdout.contains("refused") && wrong.stdout.contains("wrong token"), "{}", wrong.transcript());
    // The bare document from the file can go too, as its own kind.
    let docfile = dir.path().join("doc.json");
    std::fs::write(&docfile, serde_json::to_vec(&doc("run-f")).unwrap()).unwrap();
    support::run_bootbench(["upload", docfile.to_str().unwrap(), "--url", &url, "--token", TOKEN], deadline)
        .assert_success();
    r.stop().unwrap();
    let kinds: Vec<String> =
        Store::open(&db).unwrap().summaries("run-f").unwrap().iter().map(|s| format!("{:?}", s.kind)).collect();
    assert_eq!(kinds, ["Envelope", "Document"]);
    match store::load_run(&db, "run-f").unwrap() {
        StoredRun::Envelope(f) => assert_eq!(f.boots[0].label, "base"),
        other => panic!("the envelope is preferred, got {other:?}"),
    }
    let e = support::run_bootbench(["upload", "/nonexistent.json", "--url", &url, "--token", TOKEN], deadline);
    assert_eq!(e.code(), Some(1));
    assert!(e.stderr.contains("/nonexistent.json"), "{}", e.transcript());
}

/// Kills `bootbench serve` (SIGKILL) even when an assertion fails first.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `bootbench serve --db DB ARGS... --listen 127.0.0.1:0` and waits
/// for the address it prints.
fn spawn_serve(db: &Path, args: &[&str]) -> (KillOnDrop, SocketAddr) {
    let (child, url) = spawn_serve_url(db, args);
    let addr = url.split_once("://").and_then(|(_, a)| a.parse().ok());
    (child, addr.unwrap_or_else(|| panic!("bad URL '{url}'")))
}

/// [`spawn_serve`], returning the base URL it prints (`http://` or
/// `https://`). Its stderr (a line per upload) is drained on a thread, so
/// a long stream of uploads never blocks on a full pipe.
fn spawn_serve_url(db: &Path, args: &[&str]) -> (KillOnDrop, String) {
    let mut child = support::bootbench(["serve", "--db", db.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let child = KillOnDrop(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let mut sent = false;
        loop {
            let n = stderr.read(&mut buf).unwrap_or(0);
            if n == 0 && !sent {
                let _ = tx.send(Err(String::from_utf8_lossy(&seen).into_owned()));
            }
            if n == 0 {
                return;
            }
            if sent {
                continue;
            }
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).into_owned();
            // The URL is complete once the text after it has arrived.
            if let Some((url, _)) = text.split("listening on ").nth(1).and_then(|r| r.split_once(' ')) {
                let _ = tx.send(Ok(url.to_string()));
                sent = true;
            }
        }
    });
    let url = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(url)) => url,
        Ok(Err(e)) => panic!("serve did not start: {e}"),
        Err(e) => panic!("serve printed no address: {e}"),
    };
    (child, url)
}

#[test]
fn serve_cli_listens_and_refuses_bad_setups() {
    let dir = support::scratch();
    let token_file = private_file(dir.path(), "token", &format!("{TOKEN}\n"));
    let db = dir.path().join("cli.db");
    let (child, addr) = spawn_serve(&db, &["--token-file", token_file.to_str().unwrap()]);
    let (st, _) = put(addr, "run-s", bearer(), &serde_json::to_vec(&doc("run-s")).unwrap());
    drop(child);
    assert_eq!(st, 201);
    assert!(store::load_run(&db, "run-s").is_ok());

    let d = Duration::from_secs(60);
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().to_string();
    let busy = support::run_bootbench(["serve", "--db", db.to_str().unwrap(), "--token", TOKEN, "--listen", &taken], d);
    assert_eq!(busy.code(), Some(1), "{}", busy.transcript());
    assert!(busy.stderr.contains(&format!("cannot listen on {taken}")), "{}", busy.transcript());
    let empty =
        support::run_bootbench(["serve", "--db", db.to_str().unwrap(), "--listen", "127.0.0.1:0", "--token", ""], d);
    assert_eq!(empty.code(), Some(1));
    assert!(empty.stderr.contains("token"), "{}", empty.transcript());
}

/// A results file holding one boot of run `id`, its console log `console`.
fn one_boot_envelope(id: &str, console: String) -> Vec<u8> {
    let mut boot = BootRecord { label: "base".into(), result: Some(doc(id)), ..Default::default() };
    boot.boot.classification = "ok".into();
    boot.console_log = console;
    serde_json::to_vec(&ResultsFile { boots: vec![boot], ..ResultsFile::default() }).unwrap()
}

#[test]
fn a_noisy_boots_envelope_is_accepted_with_the_default_limit() {
    let dir = support::scratch();
    let (r, db) = start(dir.path(), DEFAULT_MAX_BYTES);
    let line = "[   12.345678] noisy driver: something happened again\r\n";
    let body = one_boot_envelope("run-noisy", line.repeat((20 << 20) / line.len()));
    assert!(body.len() > 20 << 20, "{}", body.len());
    let (st, text) = put(r.addr(), "run-noisy", bearer(), &body);
    assert_eq!(st, 201, "{text}");
    r.stop().unwrap();
    match store::load_run(&db, "run-noisy").unwrap() {
        StoredRun::Envelope(f) => assert_eq!(f.boots[0].console_log.len(), (20 << 20) / line.len() * line.len()),
        other => panic!("expected the envelope, got {other:?}"),
    }
}

/// One upload that may fail at the socket (the receiver was killed):
/// the status, or `None` when no answer came.
fn try_put(addr: SocketAddr, id: &str, body: &[u8]) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(10))).ok()?;
    let head = format!(
        "PUT /runs/{id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    String::from_utf8_lossy(&out).split_whitespace().nth(1)?.parse().ok()
}

/// A run id and the body sent for it.
type SentRun = (String, Vec<u8>);

/// `serve` killed with SIGKILL while uploads stream in: every run it
/// acknowledged (201) is in the store byte for byte, and nothing else is
/// there but runs that were in flight, each whole.
#[test]
fn a_receiver_killed_mid_stream_keeps_every_acknowledged_run_and_nothing_partial() {
    const UPLOADERS: usize = 3;
    const ACKS_BEFORE_KILL: usize = 12;
    let dir = support::scratch();
    let db = dir.path().join("killed.db");
    let (mut child, addr) = spawn_serve(&db, &["--token", TOKEN]);
    // (run id, body) of every upload started.
    let sent: Arc<Mutex<Vec<SentRun>>> = Arc::default();
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let uploaders: Vec<_> = (0..UPLOADERS)
        .map(|t| {
            let (sent, acked, stop) = (sent.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                for i in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let id = format!("run-k{t}-{i}");
                    // Large enough that the kill can land inside a write.
                    let line = format!("[{i:6}.000000] uploader {t} console line\r\n");
                    let body = one_boot_envelope(&id, line.repeat((256 << 10) / line.len()));
                    sent.lock().unwrap().push((id.clone(), body.clone()));
                    match try_put(addr, &id, &body) {
                        Some(201) => acked.lock().unwrap().push(id),
                        Some(other) => panic!("run {id}: HTTP {other}"),
                        None => return,
                    }
                }
            })
        })
        .collect();
    let enough = support::wait_until(Duration::from_secs(20), || acked.lock().unwrap().len() >= ACKS_BEFORE_KILL);
    let killed_at = Instant::now();
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    stop.store(true, Ordering::SeqCst);
    for u in uploaders {
        u.join().unwrap();
    }
    assert!(enough, "only {} runs acknowledged in 20 s", acked.lock().unwrap().len());
    assert!(killed_at.elapsed() < Duration::from_secs(15), "the uploaders took long to notice the kill");

    let sent = sent.lock().unwrap();
    let acked = acked.lock().unwrap();
    let conn = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    drop(conn);
    let store = Store::open_read_only(&db).unwrap();
    let stored = store.list(100_000).unwrap();
    let stored_ids: Vec<&str> = stored.iter().map(|s| s.run_id.as_str()).collect();
    for id in acked.iter() {
        assert!(stored_ids.contains(&id.as_str()), "acknowledged run {id} is not in the store");
    }
    for row in &stored {
        let (_, body) = sent
            .iter()
            .find(|(id, _)| *id == row.run_id)
            .unwrap_or_else(|| panic!("run {} is stored but was never sent", row.run_id));
        assert_eq!(row.kind, store::RunKind::Envelope);
        assert_eq!(row.bytes, body.len() as u64, "run {}", row.run_id);
        assert_eq!(Some(row.sha256.clone()), store::canonical_sha256(body), "run {}", row.run_id);
        let (_, got) = store.body(&row.run_id, None).unwrap().unwrap();
        assert!(got == *body, "run {}: the stored body differs from the one sent", row.run_id);
        assert!(matches!(store.load(&row.run_id).unwrap(), StoredRun::Envelope(_)));
    }
    // Runs stored but not acknowledged: only those in flight at the kill.
    let unacked = stored.len() - acked.len();
    eprintln!("killed after {} acknowledged of {} sent; {} stored", acked.len(), sent.len(), stored.len());
    assert!(unacked <= UPLOADERS, "{unacked} runs stored without an answer");
}

/// `GET PATH` with `Authorization: Bearer TOKEN` when `token` is given.
fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let auth = token.map(|t| format!("Authorization: Bearer {t}\n")).unwrap_or_default();
    http(addr, &format!("GET {path} HTTP/1.1\nHost: x\n{auth}"), b"")
}

/// `PUT /runs/ID` of `doc(ID)` with token `token`.
fn put_doc(addr: SocketAddr, id: &str, token: &str) -> (u16, String) {
    put(addr, id, Some(&format!("Bearer {token}")), &serde_json::to_vec(&doc(id)).unwrap())
}

const LAB_A: &str = "lab-a-secret-0123456789";
const LAB_B: &str = "lab-b-secret-0123456789";
const READER: &str = "reader-secret-0123456789";

/// A store at `db` with tokens lab-a and lab-b (upload) and reader (read).
fn store_with_tokens(db: &Path) {
    let store = Store::open(db).unwrap();
    store.add_token("lab-a", &tokens::digest(LAB_A), Scope::UPLOAD).unwrap();
    store.add_token("lab-b", &tokens::digest(LAB_B), Scope::UPLOAD).unwrap();
    store.add_token("reader", &tokens::digest(READER), Scope { upload: false, read: true }).unwrap();
}

/// A receiver without public reads on a store with [`store_with_tokens`]'s
/// tokens, holding run-1 from lab-a.
fn lab_receiver() -> (tempfile::TempDir, PathBuf, Receiver) {
    let dir = support::scratch();
    let db = dir.path().join("runs.db");
    store_with_tokens(&db);
    let r = Receiver::start(config(&db, false)).unwrap();
    assert_eq!(put_doc(r.addr(), "run-1", LAB_A).0, 201);
    (dir, db, r)
}

/// The token name the JSON listing shows for each run id.
fn token_names(list: &str) -> Vec<(String, Option<String>)> {
    let v: serde_json::Value = serde_json::from_str(list).unwrap_or_else(|e| panic!("{e}: {list}"));
    let mut out: Vec<_> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["run_id"].as_str().unwrap().to_string(), r["token_name"].as_str().map(str::to_string)))
        .collect();
    out.sort();
    out
}

#[test]
fn named_tokens_store_runs_under_their_names_and_revoking_one_stops_only_it() {
    let (_dir, db, r) = lab_receiver();
    assert_eq!(put_doc(r.addr(), "run-2", LAB_B).0, 201);
    assert_eq!(put_doc(r.addr(), "run-3", TOKEN).0, 201);
    let (st, list) = get(r.addr(), "/runs", Some(READER));
    assert_eq!(st, 200, "{list}");
    let named = |a: &str, b: &str| (a.to_string(), Some(b.to_string()));
    assert_eq!(token_names(&list), [named("run-1", "lab-a"), named("run-2", "lab-b"), named("run-3", "cli")]);
    let (_, page) = get(r.addr(), "/", Some(READER));
    assert!(page.contains("<th>token</th>") && page.contains("<td>lab-a</td>"), "{page}");

    // Revoked while the receiver runs: refused at once, the others not.
    Store::open(&db).unwrap().revoke_token("lab-a").unwrap();
    let (st, text) = put_doc(r.addr(), "run-4", LAB_A);
    assert_eq!(st, 403, "{text}");
    assert!(text.contains("revoked"), "{text}");
    assert_eq!(put_doc(r.addr(), "run-5", LAB_B).0, 201);
    assert_eq!(put_doc(r.addr(), "run-6", TOKEN).0, 201);
    // Added while it runs: taken at once.
    let lab_c = "lab-c-secret-0123456789";
    Store::open(&db).unwrap().add_token("lab-c", &tokens::digest(lab_c), Scope::UPLOAD).unwrap();
    assert_eq!(put_doc(r.addr(), "run-7", lab_c).0, 201);
    r.stop().unwrap();
    let stored: Vec<_> = Store::open(&db).unwrap().list(100).unwrap().into_iter().map(|s| s.run_id).collect();
    assert!(!stored.contains(&"run-4".to_string()), "{stored:?}");
    assert_eq!(stored.len(), 6, "{stored:?}");
}

#[test]
fn reads_need_a_token_that_may_read_unless_they_are_public() {
    let (_dir, db, r) = lab_receiver();
    for path in ["/", "/runs", "/runs/run-1", "/runs/run-1?kind=document", "/runs?limit=1"] {
        let (st, text) = get(r.addr(), path, None);
        assert_eq!(st, 401, "{path}: {text}");
        assert!(text.contains("may read"), "{path}: {text}");
        let (st, text) = get(r.addr(), path, Some("not-a-token-0123456789"));
        assert_eq!(st, 403, "{path}: {text}");
        assert!(text.contains("wrong token"), "{path}: {text}");
        for upload_only in [LAB_A, TOKEN] {
            let (st, text) = get(r.addr(), path, Some(upload_only));
            assert_eq!(st, 403, "{path}: {text}");
            assert!(text.contains("may not read"), "{path}: {text}");
        }
        let (st, text) = get(r.addr(), path, Some(READER));
        assert_eq!(st, 200, "{path}: {text}");
        assert!(text.contains("run-1"), "{path}: {text}");
    }
    // A browser: the page asks for Basic credentials, and the read token
    // as the password (any user name) opens it.
    let asked = exchange(r.addr(), "GET / HTTP/1.1\nHost: x\n", b"");
    let head = asked.split_once("\r\n\r\n").map(|(h, _)| h.to_ascii_lowercase()).unwrap_or_default();
    assert!(head.contains("www-authenticate: basic realm=\"bootbench\""), "{head}");
    let basic = |user_token: &str| {
        use base64::Engine as _;
        format!("Authorization: Basic {}\n", base64::engine::general_purpose::STANDARD.encode(user_token))
    };
    let (st, text) = http(r.addr(), &format!("GET / HTTP/1.1\nHost: x\n{}", basic(&format!("me:{READER}"))), b"");
    assert_eq!(st, 200, "{text}");
    assert!(text.contains("run-1"), "{text}");
    // A wrong or upload-only token typed into the browser's prompt: asked
    // again (401 with the challenge), not left on a 403 the browser would
    // keep getting with what it cached.
    for wrong in [format!("me:{LAB_A}"), "me:not-a-token-0123456789".into(), format!("{READER}:")] {
        let again = exchange(r.addr(), &format!("GET /runs HTTP/1.1\nHost: x\n{}", basic(&wrong)), b"");
        let head = again.split_once("\r\n\r\n").map(|(h, _)| h.to_ascii_lowercase()).unwrap_or_default();
        assert!(head.starts_with("http/1.1 401"), "{wrong}: {again}");
        assert!(head.contains("www-authenticate: basic realm"), "{wrong}: {head}");
    }
    let (st, text) = http(r.addr(), "GET /runs HTTP/1.1\nHost: x\nAuthorization: Basic !!!\n", b"");
    assert_eq!(st, 401, "{text}");
    assert!(text.contains("HTTP Basic"), "{text}");
    // Uploads are not challenged for Basic (no browser uploads).
    let refused = exchange(r.addr(), "PUT /runs/run-2 HTTP/1.1\nHost: x\nContent-Length: 0\n", b"");
    assert!(!refused.to_ascii_lowercase().contains("basic realm"), "{refused}");
    // A read token cannot upload.
    let (st, text) = put_doc(r.addr(), "run-2", READER);
    assert_eq!(st, 403, "{text}");
    assert!(text.contains("may not upload"), "{text}");
    // The health check needs no token.
    assert_eq!(get(r.addr(), "/healthz", None).0, 200);
    r.stop().unwrap();

    let r = Receiver::start(config(&db, true)).unwrap();
    for path in ["/", "/runs", "/runs/run-1"] {
        let (st, text) = get(r.addr(), path, None);
        assert_eq!(st, 200, "{path}: {text}");
        assert!(text.contains("run-1"), "{path}: {text}");
    }
    // Uploads still need theirs.
    assert_eq!(put(r.addr(), "run-2", None, &serde_json::to_vec(&doc("run-2")).unwrap()).0, 401);
}

#[test]
fn error_bodies_never_repeat_the_token_or_name_the_database() {
    let dir = support::scratch();
    let private = dir.path().join("private-lab-dir");
    std::fs::create_dir(&private).unwrap();
    let db = private.join("runs.db");
    store_with_tokens(&db);
    Store::open(&db).unwrap().revoke_token("lab-b").unwrap();
    let r = Receiver::start(config(&db, false)).unwrap();
    let guess = "guessed-secret-0123456789";
    let body = serde_json::to_vec(&doc("run-1")).unwrap();
    let mut answers = vec![
        put(r.addr(), "run-1", Some(&format!("Bearer {guess}")), &body),
        put(r.addr(), "run-1", Some(&format!("Bearer {LAB_B}")), &body),
        put(r.addr(), "run-1", Some(&format!("Bearer {READER}")), &body),
        put(r.addr(), "run-1", Some(&format!("Basic {guess}")), &body),
        put(r.addr(), "-bad", Some(&format!("Bearer {LAB_A}")), &body),
        put(r.addr(), "run-2", Some(&format!("Bearer {LAB_A}")), &body),
        get(r.addr(), "/runs", Some(guess)),
        get(r.addr(), "/runs", Some(LAB_A)),
        get(r.addr(), "/runs/run-1", Some(LAB_B)),
        get(r.addr(), &format!("/nowhere?token={guess}"), Some(guess)),
        get(r.addr(), &format!("/runs?limit={guess}"), Some(READER)),
        get(r.addr(), &format!("/runs?after={guess}"), Some(READER)),
        get(r.addr(), &format!("/runs?{guess}=1"), Some(READER)),
        get(r.addr(), &format!("/runs/run-1?kind={guess}"), Some(READER)),
    ];
    // A failing store: 500 and 503, still without its path.
    rusqlite::Connection::open(&db).unwrap().execute_batch("ALTER TABLE runs RENAME TO gone").unwrap();
    answers.push(get(r.addr(), "/runs", Some(READER)));
    answers.push(get(r.addr(), "/healthz", None));
    answers.push(put(r.addr(), "run-3", Some(&format!("Bearer {LAB_A}")), &serde_json::to_vec(&doc("run-3")).unwrap()));
    let statuses: Vec<u16> = answers.iter().map(|(st, _)| *st).collect();
    assert_eq!(statuses, [403, 403, 403, 401, 400, 400, 403, 403, 403, 404, 400, 400, 400, 400, 500, 503, 500]);
    for (st, text) in &answers {
        for secret in [guess, LAB_A, LAB_B, READER, TOKEN, "private-lab-dir", "runs.db"] {
            assert!(!text.contains(secret), "HTTP {st} repeats '{secret}': {text}");
        }
    }
}

#[test]
fn runs_are_listed_in_pages_with_filters() {
    let dir = support::scratch();
    let db = dir.path().join("runs.db");
    let r = Receiver::start(config(&db, true)).unwrap();
    for (i, (kernel, label)) in
        [("6.1", "base"), ("6.2", "base"), ("6.1", "new"), ("6.2", "new"), ("6.1", "base")].iter().enumerate()
    {
        let id = format!("run-{i}");
        let mut d = doc(&id);
        d.provenance.kernel.release = kernel.to_string();
        let boot = BootRecord { label: label.to_string(), result: Some(d), ..Default::default() };
        let body = serde_json::to_vec(&ResultsFile { boots: vec![boot], ..ResultsFile::default() }).unwrap();
        assert_eq!(put(r.addr(), &id, bearer(), &body).0, 201);
    }
    let json = |path: &str| {
        let (st, text) = get(r.addr(), path, None);
        assert_eq!(st, 200, "{path}: {text}");
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let ids = |v: &serde_json::Value| -> Vec<String> {
        v["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap().to_string()).collect()
    };
    // Page by page with the cursor: every run once, newest first.
    let all = ids(&json("/runs"));
    assert_eq!(all.len(), 5);
    let mut seen = Vec::new();
    let mut path = "/runs?limit=2".to_string();
    loop {
        let v = json(&path);
        assert_eq!(v["total"], 5, "{v}");
        seen.extend(ids(&v));
        match v["next"].as_str() {
            Some(next) => {
                assert_eq!(v["truncated"], true);
                let q = url::form_urlencoded::Serializer::new(String::new()).append_pair("after", next).finish();
                path = format!("/runs?limit=2&{q}");
            }
            None => {
                assert_eq!(v["truncated"], false);
                break;
            }
        }
    }
    assert_eq!(seen, all);
    // Filters, and the count of what matches.
    let v = json("/runs?kernel=6.1");
    assert_eq!((ids(&v).len(), v["total"].as_u64(), v["truncated"].as_bool()), (3, Some(3), Some(false)));
    let v = json("/runs?kernel=6.2&label=new");
    assert_eq!(ids(&v), ["run-3"]);
    assert_eq!(json("/runs?since=2999-01-01T00:00:00Z")["total"], 0);
    assert_eq!(json("/runs?until=2999-01-01T00:00:00Z")["total"], 5);
    assert_eq!(json("/runs?since=2000-01-01T00:00:00Z&until=2000-01-02T00:00:00Z")["total"], 0);
    // The page says how much it shows and links on.
    let (_, html) = get(r.addr(), "/?limit=2&kernel=6.1", None);
    assert!(html.contains("showing 2 of 3 run(s)"), "{html}");
    assert!(html.contains("href=\"?limit=2&amp;kernel=6.1&amp;after="), "{html}");
    // Bad values: 400 naming the parameter.
    for (query, name) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("after=yesterday", "after"),
        ("since=yesterday", "since"),
        ("until=2024-13-01T00:00:00Z", "until"),
        ("kernel=", "kernel"),
        ("kernel=6.1&kernel=6.2", "kernel"),
        ("sort=asc", "sort"),
    ] {
        for endpoint in ["/runs", "/"] {
            let (st, text) = get(r.addr(), &format!("{endpoint}?{query}"), None);
            assert_eq!(st, 400, "{query}: {text}");
            assert!(text.contains(&format!("query parameter '{name}'")), "{query}: {text}");
        }
    }
}

#[test]
fn healthz_checks_the_store_and_needs_no_token() {
    let dir = support::scratch();
    let db = dir.path().join("health.db");
    let r = Receiver::start(config(&db, false)).unwrap();
    let (st, text) = get(r.addr(), "/healthz", None);
    assert_eq!(st, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["ok"], true);
    // The store stops answering (its table gone): 503, still no path.
    rusqlite::Connection::open(&db).unwrap().execute_batch("DROP TABLE runs").unwrap();
    let (st, text) = get(r.addr(), "/healthz", None);
    assert_eq!(st, 503, "{text}");
    assert!(text.contains("\"ok\":false") && !text.contains("health.db"), "{text}");
}

#[test]
fn token_commands_add_list_and_revoke_and_token_files_must_be_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = support::scratch();
    let db = dir.path().join("lab.db");
    let dbs = db.to_str().unwrap();
    let d = Duration::from_secs(60);
    let add = support::run_bootbench(["serve", "token", "add", "lab-1", "--db", dbs], d);
    add.assert_success();
    let secret = add.stdout.trim().to_string();
    assert_eq!(secret.len(), 32, "{}", add.transcript());
    assert!(add.stderr.contains("once"), "{}", add.transcript());

    // A token file others can read is refused, naming it and the fix.
    let open = dir.path().join("reader.token");
    std::fs::write(&open, format!("{READER}\n")).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let opens = open.to_str().unwrap();
    let fix = format!("chmod 600 {opens}");
    let url = "http://127.0.0.1:9";
    for args in [
        vec!["serve", "token", "add", "reader", "--read", "--db", dbs, "--token-file", opens],
        vec!["serve", "--db", dbs, "--listen", "127.0.0.1:0", "--token-file", opens],
        vec!["upload", "/nonexistent.json", "--url", url, "--token-file", opens],
    ] {
        let run = support::run_bootbench(&args, d);
        assert_eq!(run.code(), Some(1), "{args:?}: {}", run.transcript());
        assert!(run.stderr.contains(&fix), "{args:?}: {}", run.transcript());
        assert!(!run.stderr.contains(READER), "{args:?}: {}", run.transcript());
    }
    let short = private_file(dir.path(), "short.token", "short\n");
    let run = support::run_bootbench(
        ["serve", "--db", dbs, "--listen", "127.0.0.1:0", "--token-file", short.to_str().unwrap()],
        d,
    );
    assert_eq!(run.code(), Some(1), "{}", run.transcript());
    assert!(run.stderr.contains("short.token") && run.stderr.contains("at least 16"), "{}", run.transcript());
    let run = support::run_bootbench(["serve", "--db", dbs, "--listen", "127.0.0.1:0", "--token", "short"], d);
    assert!(
        run.stderr.contains("given on the command line") && run.stderr.contains("at least 16"),
        "{}",
        run.transcript()
    );

    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o600)).unwrap();
    support::run_bootbench(["serve", "token", "add", "reader", "--read", "--db", dbs, "--token-file", opens], d)
        .assert_success();
    let list = support::run_bootbench(["serve", "token", "list", "--db", dbs], d);
    list.assert_success();
    let lines: Vec<Vec<&str>> = list.stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines.len(), 3, "{}", list.transcript());
    assert_eq!((lines[1][0], lines[1][1], lines[1][3]), ("lab-1", "upload", "-"), "{}", list.transcript());
    assert_eq!((lines[2][0], lines[2][1]), ("reader", "read"), "{}", list.transcript());
    assert!(!list.stdout.contains(&secret) && !list.stdout.contains(READER), "{}", list.transcript());

    // The server takes the store's tokens, without one of its own.
    let (child, addr) = spawn_serve(&db, &[]);
    assert_eq!(put_doc(addr, "run-1", &secret).0, 201);
    let (st, text) = get(addr, "/runs", Some(READER));
    assert_eq!(st, 200, "{text}");
    assert_eq!(token_names(&text), [("run-1".to_string(), Some("lab-1".to_string()))]);
    support::run_bootbench(["serve", "token", "revoke", "lab-1", "--db", dbs], d).assert_success();
    assert_eq!(put_doc(addr, "run-2", &secret).0, 403);
    drop(child);
    let list = support::run_bootbench(["serve", "token", "list", "--db", dbs], d);
    assert!(!list.stdout.lines().nth(1).unwrap_or_default().ends_with(" -"), "{}", list.transcript());

    // Token commands take no server flags, and know their tokens.
    let mixed = support::run_bootbench(["serve", "--db", dbs, "token", "list"], d);
    assert_ne!(mixed.code(), Some(0), "{}", mixed.transcript());
    let nope = support::run_bootbench(["serve", "token", "revoke", "nope", "--db", dbs], d);
    assert_eq!(nope.code(), Some(1), "{}", nope.transcript());
    assert!(nope.stderr.contains("'nope'"), "{}", nope.transcript());
    let missing = support::run_bootbench(["serve", "token", "list", "--db", "/nonexistent/x.db"], d);
    assert_eq!(missing.code(), Some(1), "{}", missing.transcript());
    assert!(!Path::new("/nonexistent/x.db").exists());
}

/// Reads what the receiver sends on `s` until it closes the connection:
/// the bytes and when it closed, or `None` when it is still open after
/// `bound`.
fn closed_within(mut s: TcpStream, bound: Duration) -> Option<(Vec<u8>, Instant)> {
    s.set_read_timeout(Some(bound)).unwrap();
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => Some((out, Instant::now())),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Some((out, Instant::now())),
        Err(_) => None,
    }
}

/// Clients that connect and send nothing, send half a head, stall in their
/// body, or keep an answered connection idle are closed by the timeouts;
/// beyond the cap a new connection waits for a slot, and an upload gets
/// through within a bound; stopping does not wait on idle clients.
#[test]
fn idle_and_stalled_clients_are_closed_and_uploads_still_get_through() {
    let dir = support::scratch();
    let header = Duration::from_secs(1);
    let limits = ConnectionLimits {
        max_connections: 2,
        header_timeout: header,
        body_timeout: Duration::from_secs(2),
        ..ConnectionLimits::default()
    };
    let r = Receiver::start(ServeConfig { limits, max_bytes: 1 << 20, ..config(&dir.path().join("runs.db"), true) })
        .unwrap();
    let addr = r.addr();
    let connect = |bytes: &str| {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(bytes.as_bytes()).unwrap();
        s
    };
    let started = Instant::now();
    // Cap + 2 silent clients, then half a head, then a body that stalls:
    // each waits in the backlog for a slot, then holds it until a timeout.
    let mut idle: Vec<TcpStream> = (0..4).map(|_| connect("")).collect();
    idle.push(connect("PUT /runs/run-half HTTP/1.1\r\nHost: x\r\nContent-Len"));
    let stalled = connect(&format!(
        "PUT /runs/run-stall HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 1000\r\n\r\n{{\"sche"
    ));

    let body = serde_json::to_vec(&doc("run-ok")).unwrap();
    let url = format!("http://{addr}");
    let req = results_uploader::UploadRequest { base_url: &url, token: TOKEN, run_id: "run-ok", body: &body };
    let o = results_uploader::upload(&req, &results_uploader::UploadSettings::host());
    let took = started.elapsed();
    assert_eq!(o.verdict, results_uploader::Verdict::Stored, "{o:?}");
    assert_eq!(o.attempts.len(), 1, "{o:?}");
    // It waited for a slot (the cap holds), but not for long.
    assert!(took >= header - Duration::from_millis(200), "served at once: the cap did not hold ({took:?})");
    assert!(took < Duration::from_secs(15), "the upload took {took:?}");

    for (i, s) in idle.into_iter().enumerate() {
        let closed = closed_within(s, Duration::from_secs(15));
        assert!(closed.is_some(), "idle client {i} still open after {:?}", started.elapsed());
    }
    let (answer, _) = closed_within(stalled, Duration::from_secs(15)).expect("the stalled body's connection is open");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");

    // An answered keep-alive connection left idle is closed too.
    let kept = connect("GET /runs HTTP/1.1\r\nHost: x\r\n\r\n");
    let asked = Instant::now();
    let (answer, at) = closed_within(kept, Duration::from_secs(15)).expect("the idle kept-alive connection is open");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    assert!(at - asked >= header - Duration::from_millis(200), "closed before it was idle: {:?}", at - asked);

    // Clients that send nothing, or half a head, do not hold up a stop.
    let _silent = connect("");
    let _half = connect("GET /ru");
    std::thread::sleep(Duration::from_millis(100));
    let stopping = Instant::now();
    r.stop().unwrap();
    assert!(stopping.elapsed() < Duration::from_secs(5), "stop took {:?}", stopping.elapsed());
    assert_eq!(rows(&dir.path().join("runs.db")), 1);
}

/// A client that asks for a large run and then reads none of it is closed
/// after the send timeout, so it does not hold its slot: with one slot, a
/// second client is served soon after, and the first gets less than the
/// whole answer.
#[test]
fn a_client_that_stops_reading_its_answer_is_closed_and_frees_its_slot() {
    let dir = support::scratch();
    let db = dir.path().join("runs.db");
    let limits = ConnectionLimits {
        max_connections: 1,
        header_timeout: Duration::from_secs(5),
        send_timeout: Duration::from_secs(1),
        ..ConnectionLimits::default()
    };
    let r = Receiver::start(ServeConfig { limits, max_bytes: 64 << 20, ..config(&db, true) }).unwrap();
    let line = "[   12.345678] a large console log that no socket buffer holds whole\r\n";
    // Far more than the loopback socket buffers of both ends hold.
    let body = one_boot_envelope("run-big", line.repeat((40 << 20) / line.len()));
    let (st, text) = put(r.addr(), "run-big", bearer(), &body);
    assert_eq!(st, 201, "{text}");

    let mut stalled = TcpStream::connect(r.addr()).unwrap();
    stalled.write_all(b"GET /runs/run-big HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let mut next = TcpStream::connect(r.addr()).unwrap();
    next.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let (answer, at) = closed_within(next, Duration::from_secs(20)).expect("the second client was never served");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
    assert!(at - asked < Duration::from_secs(10), "served only after {:?}", at - asked);
    let (got, _) = closed_within(stalled, Duration::from_secs(20)).expect("the stalled reader is still open");
    assert!(got.len() < body.len(), "the stalled reader got the whole answer ({} bytes)", got.len());
    r.stop().unwrap();
}

/// `serve --tls-cert/--tls-key` speaks https: `upload --ca-file` with the
/// lab's CA stores the run; without it the upload fails on the
/// certificate and stores nothing; plain http to the https port is told
/// so; a missing key file is named.
#[test]
fn serve_over_https_takes_uploads_that_trust_the_labs_ca() {
    let dir = support::scratch();
    let support::test_pki::TestPki { ca, cert, key } = support::test_pki::write(dir.path());
    let db = dir.path().join("tls.db");
    let (cert_s, key_s, ca_s) = (cert.to_str().unwrap(), key.to_str().unwrap(), ca.to_str().unwrap());
    let (child, url) = spawn_serve_url(&db, &["--token", TOKEN, "--tls-cert", cert_s, "--tls-key", key_s]);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let file = dir.path().join("r.json");
    results_file(&file);
    let file = file.to_str().unwrap();
    let d = Duration::from_secs(120);

    let untrusted = support::run_bootbench(["upload", file, "--url", &url, "--token", TOKEN], d);
    assert_eq!(untrusted.code(), Some(1), "{}", untrusted.transcript());
    assert!(
        untrusted.stdout.contains("run run-f: failed (no response) after 1 attempt(s)"),
        "{}",
        untrusted.transcript()
    );
    assert!(untrusted.stdout.contains("certificate"), "{}", untrusted.transcript());
    assert_eq!(rows(&db), 0);

    let plain = url.replace("https://", "http://");
    let wrong_scheme = support::run_bootbench(["upload", file, "--url", &plain, "--token", TOKEN], d);
    assert_eq!(wrong_scheme.code(), Some(1), "{}", wrong_scheme.transcript());
    assert!(wrong_scheme.stdout.contains("refused (HTTP 400)"), "{}", wrong_scheme.transcript());
    assert!(wrong_scheme.stdout.contains("this receiver speaks https"), "{}", wrong_scheme.transcript());

    let trusted = support::run_bootbench(["upload", file, "--url", &url, "--token", TOKEN, "--ca-file", ca_s], d);
    trusted.assert_success();
    assert!(trusted.stdout.contains("run run-f: stored (HTTP 201)"), "{}", trusted.transcript());
    drop(child);
    assert_eq!(rows(&db), 1);

    let no_key = dir.path().join("none.key");
    let e = support::run_bootbench(
        [
            "serve",
            "--db",
            db.to_str().unwrap(),
            "--token",
            TOKEN,
            "--tls-cert",
            cert_s,
            "--tls-key",
            no_key.to_str().unwrap(),
        ],
        d,
    );
    assert_eq!(e.code(), Some(1), "{}", e.transcript());
    assert!(e.stderr.contains("none.key"), "{}", e.transcript());
}

/// The guest's roots (bundled) and a host's (the system's) both take the
/// extra CA, and neither trusts the lab's certificate without it.
#[test]
fn the_extra_ca_works_with_bundled_and_system_roots() {
    use results_uploader::{upload, TlsRoots, UploadRequest, UploadSettings, Verdict};
    let dir = support::scratch();
    let support::test_pki::TestPki { ca, cert, key } = support::test_pki::write(dir.path());
    let r = Receiver::start(ServeConfig {
        tls: Some(TlsFiles { cert, key }),
        max_bytes: 1 << 20,
        ..config(&dir.path().join("runs.db"), true)
    })
    .unwrap();
    let url = r.url();
    assert!(url.starts_with("https://"), "{url}");
    let ca_pem = std::fs::read(&ca).unwrap();
    for (i, roots) in [TlsRoots::Bundled, TlsRoots::System].into_iter().enumerate() {
        let id = format!("run-roots-{i}");
        let body = serde_json::to_vec(&doc(&id)).unwrap();
        let req = UploadRequest { base_url: &url, token: TOKEN, run_id: &id, body: &body };
        let mut settings = UploadSettings { roots, ..UploadSettings::host() };
        let o = upload(&req, &settings);
        assert_eq!(o.verdict, Verdict::Failed, "{roots:?}: {o:?}");
        assert_eq!(o.attempts[0].error_class.as_deref(), Some("tls"), "{roots:?}: {o:?}");
        settings.extra_ca_pem = Some(ca_pem.clone());
        let o = upload(&req, &settings);
        assert_eq!(o.verdict, Verdict::Stored, "{roots:?}: {o:?}");
    }
    r.stop().unwrap();
}
