//! End-to-end: the guest uploads its result through QEMU user networking
//! to a receiver on the host's 127.0.0.1. Three boots:
//! 1. through a fault-injecting proxy: a 5xx, a server too slow to answer,
//!    the server gone (connections refused), then a slow but working one:
//!    the guest retries with backoff until the run is stored, once; the
//!    host then uploads its envelope there too. The token is random and
//!    comes from a file: it is in the secrets segment only, never in QEMU's
//!    argv (watched while the boot runs), the results file, the console log
//!    or the store;
//! 2. a wrong token, with the guest's own DHCP client: refused at once,
//!    the reason in the guest's report, nothing stored, `run` exits 3; a
//!    token-like key given through `--append` is warned about and kept out
//!    of the results file;
//! 3. `bootbench run --serve`: the receiver started by the run itself,
//!    and the envelope says the run arrived identical to the console's.
//!
//! In every case the result is complete on the console. Oversized and
//! malformed bodies are covered without a boot in tests/serve.rs.

mod support;

use bootbench::boot::run_upload::UploadRecord;
use bootbench::results::BootRecord;
use bootbench::service::listener::ConnectionLimits;
use bootbench::service::receiver::{GivenToken, Receiver, ServeConfig};
use bootbench::service::store::{self, RunKind, Store, StoredRun};
use bootbench::service::tokens::Scope;
use loads::console_protocol::Decoder;
use results_uploader::{UploadReport, Verdict};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// A fresh random token: a leak of it cannot be a coincidence.
fn random_token() -> String {
    format!("e2e-{}", uuid::Uuid::new_v4().simple())
}

/// `token` in a file only its owner reads.
fn token_file(dir: &Path, token: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("token");
    std::fs::write(&path, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Every QEMU argv seen while a boot runs: `/proc/*/cmdline` read every
/// 50 ms until the returned flag is set.
fn watch_qemu_argv() -> (Arc<std::sync::atomic::AtomicBool>, thread::JoinHandle<Vec<String>>) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    let handle = thread::spawn(move || {
        let mut seen = Vec::new();
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                let Ok(raw) = std::fs::read(e.path().join("cmdline")) else { continue };
                let argv = String::from_utf8_lossy(&raw).replace('\0', " ");
                if argv.contains("qemu-system") && !seen.contains(&argv) {
                    seen.push(argv);
                }
            }
            thread::sleep(Duration::from_millis(50));
        }
        seen
    });
    (stop, handle)
}

/// Every file of the store (the database and its WAL) as text.
fn store_bytes(db: &Path) -> String {
    let mut all = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        all.extend(std::fs::read(std::path::PathBuf::from(p)).unwrap_or_default());
    }
    String::from_utf8_lossy(&all).into_owned()
}

fn receiver(dir: &Path, token: &str) -> (Receiver, std::path::PathBuf) {
    let db = dir.join("received.db");
    let r = Receiver::start(ServeConfig {
        db: db.clone(),
        tokens: vec![GivenToken { name: "cli".into(), secret: token.into(), scope: Scope::UPLOAD }],
        public_reads: false,
        base_url: None,
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        max_bytes: 16 << 20,
        log_prefix: Some("receiver: ".into()),
        limits: ConnectionLimits::default(),
        tls: None,
        netconsole: None,
    })
    .expect("cannot start the receiver");
    (r, db)
}

/// A boot of the quick suite, cut short, with `extra` arguments.
fn boot(out: &Path, extra: &[&str]) -> support::CliRun {
    let _lock = support::boot_lock();
    let mut args = vec!["run", "--iterations", "1", "--warmup", "0", "--timeout-total", "600", "-o"];
    args.push(out.to_str().unwrap());
    args.extend_from_slice(extra);
    support::run_bootbench(args, support::BOOT_DEADLINE)
}

/// The guest's document exactly as the console carried it.
fn console_document(b: &BootRecord) -> String {
    let mut d = Decoder::new();
    d.feed_text(&b.console_log);
    d.last_document().unwrap_or_else(|e| panic!("the console does not hold the complete result: {e}"))
}

/// Checks what every upload boot must show: a good boot, a complete
/// result on the console, an upload record with the guest's report.
#[track_caller]
fn complete_with_report(b: &BootRecord, run: &support::CliRun) -> (UploadRecord, UploadReport) {
    assert_eq!(b.boot.classification, "ok", "{:?}\n{}", b.boot.detail, run.transcript());
    let doc = b.result.as_ref().unwrap_or_else(|| panic!("no guest document:\n{}", run.transcript()));
    assert_eq!(doc.status, loads::schema::Status::Complete, "{:?}", doc.errors);
    console_document(b);
    assert!(b.console_log.contains("@@BOOTBENCH EVENT upload "), "no upload event on the console");
    assert!(!doc.provenance.kernel.cmdline.contains("bootbench.token"), "a token key reached the guest's cmdline");
    let rec = b.upload.clone().unwrap_or_else(|| panic!("no upload record:\n{}", run.transcript()));
    let report = rec.guest.clone().unwrap_or_else(|| panic!("no guest report: {rec:?}\n{}", b.console_log));
    (rec, report)
}

fn document_rows(db: &Path, run_id: &str) -> usize {
    Store::open(db).unwrap().summaries(run_id).unwrap().iter().filter(|s| s.kind == RunKind::Document).count()
}

// ---- the fault-injecting proxy ----

/// Reads one HTTP request; returns its head lines and body.
fn read_request(s: &TcpStream) -> Option<(Vec<String>, Vec<u8>)> {
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end().to_string();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    let len: usize = head
        .iter()
        .find_map(|h| h.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some((head, body))
}

fn reply(mut s: &TcpStream, status: u16, body: &str) {
    let _ = write!(
        s,
        "HTTP/1.1 {status} Injected\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Sends the request to `upstream` (one request per connection) and
/// relays the answer; returns its status.
fn forward(client: &TcpStream, upstream: SocketAddr, head: &[String], body: &[u8]) -> u16 {
    let mut up = TcpStream::connect(upstream).expect("the receiver is gone");
    let mut req = String::new();
    for h in head.iter().filter(|h| !h.to_ascii_lowercase().starts_with("connection:")) {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("Connection: close\r\n\r\n");
    up.write_all(req.as_bytes()).unwrap();
    up.write_all(body).unwrap();
    let mut answer = Vec::new();
    up.read_to_end(&mut answer).unwrap();
    let mut c = client;
    let _ = c.write_all(&answer);
    String::from_utf8_lossy(&answer).split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// Plays, in order: a 503; a request left unanswered for `hang`; the port
/// closed for `down` (connections refused); then every request delayed by
/// `slow` and forwarded to `upstream`. Logs what it did.
fn fault_proxy(upstream: SocketAddr, hang: Duration, down: Duration, slow: Duration) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    thread::spawn(move || {
        let note = |s: String| l.lock().unwrap().push(s);
        let (c, _) = listener.accept().unwrap();
        read_request(&c).expect("no first request");
        reply(&c, 503, r#"{"error":"injected: overloaded"}"#);
        note("503".into());
        drop(c);
        let (c, _) = listener.accept().unwrap();
        read_request(&c).expect("no second request");
        note("hang".into());
        thread::spawn(move || {
            thread::sleep(hang);
            drop(c);
        });
        drop(listener);
        note("down".into());
        thread::sleep(down);
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("cannot bind the proxy port again");
        note("up".into());
        for c in listener.incoming() {
            let Ok(c) = c else { continue };
            let Some((head, body)) = read_request(&c) else { continue };
            thread::sleep(slow);
            let status = forward(&c, upstream, &head, &body);
            note(format!("forwarded {status}"));
        }
    });
    (port, log)
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn guest_retries_through_5xx_a_hung_server_and_refused_connections_until_stored_once() {
    support::require_x86_64_boot();
    let dir = support::scratch();
    let token = random_token();
    let (recv, db) = receiver(dir.path(), &token);
    let token_path = token_file(dir.path(), &token);
    // The guest gives up on a request after 3 s: the hung one takes 8.
    let (port, log) =
        fault_proxy(recv.addr(), Duration::from_secs(8), Duration::from_secs(6), Duration::from_millis(1500));
    let out = dir.path().join("r.json");
    let url = format!("http://10.0.2.2:{port}");
    let (stop, watcher) = watch_qemu_argv();
    let run = boot(
        &out,
        &[
            "--upload-url",
            &url,
            "--upload-token-file",
            token_path.to_str().unwrap(),
            "--append",
            "bootbench.upload_attempts=10 bootbench.upload_timeout=3",
        ],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let argvs = watcher.join().unwrap();
    run.assert_success();
    let b = support::only_boot(&out, &run);
    let (rec, g) = complete_with_report(&b, &run);
    let proxy = log.lock().unwrap().clone();
    eprintln!("proxy: {proxy:?}\nguest: {g:?}\nnetwork: {:?}", rec.network);
    assert_eq!(g.verdict, Verdict::Stored, "{g:?}");
    assert_eq!(g.http_status, Some(201));
    assert_eq!(g.history.first().map(String::as_str), Some("503"), "{g:?}");
    assert_eq!(g.history.get(1).map(String::as_str), Some("timeout"), "{g:?}");
    assert!(g.history.iter().any(|h| h == "refused"), "no attempt met the closed port: {g:?}");
    assert_eq!(g.history.last().map(String::as_str), Some("201"), "{g:?}");
    assert_eq!(proxy.first().map(String::as_str), Some("503"));
    // The guest's document, then the host's envelope.
    let forwarded: Vec<&String> = proxy.iter().filter(|p| p.starts_with("forwarded")).collect();
    assert_eq!(forwarded, ["forwarded 201", "forwarded 201"], "{proxy:?}");
    let envelope = rec.envelope.clone().unwrap_or_else(|| panic!("no envelope report: {rec:?}"));
    assert_eq!(envelope.verdict, Verdict::Stored, "{envelope:?}");
    // Exponential backoff from 0.5 s, doubling, up to +100% jitter.
    for (i, d) in g.delays_ms.iter().enumerate().skip(1) {
        let base = (500u64 << (i - 1)).min(8000);
        assert!(*d + 1 >= base && *d <= 2 * base + 1, "delay {i} = {d} ms (base {base} ms): {g:?}");
    }
    assert!(rec.network.as_deref().unwrap_or("").contains("addr=10.0.2.15/24"), "{:?}", rec.network);
    // Stored exactly once, and exactly what the console carried.
    let id = b.result.as_ref().unwrap().run_id.clone();
    assert_eq!(document_rows(&db, &id), 1);
    let stored = Store::open(&db).unwrap().summaries(&id).unwrap();
    let document = stored.iter().find(|s| s.kind == RunKind::Document).unwrap();
    assert_eq!(Some(document.sha256.clone()), store::canonical_sha256(console_document(&b).as_bytes()));
    // A late duplicate (a retry whose answer was lost) changes nothing.
    let again = results_uploader::upload(
        &results_uploader::UploadRequest {
            base_url: &format!("http://{}", recv.addr()),
            token: &token,
            run_id: &id,
            body: console_document(&b).as_bytes(),
        },
        &results_uploader::UploadSettings::host(),
    );
    assert_eq!(again.verdict, Verdict::AlreadyStored, "{again:?}");
    assert_eq!(document_rows(&db, &id), 1);
    match store::load_run(&db, &id).unwrap() {
        StoredRun::Envelope(f) => assert_eq!(f.boots[0].boot.classification, "ok"),
        other => panic!("expected the host envelope in the store, got {other:?}"),
    }
    // The token is nowhere but in the secrets segment.
    assert!(argvs.iter().any(|a| a.contains("-initrd")), "QEMU was never seen running: {argvs:?}");
    for a in &argvs {
        assert!(!a.contains(&token), "the token is in QEMU's argv: {a}");
    }
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains(&token), "the token is in the results file");
    // (`quiet` keeps the kernel from echoing its cmdline: the console log
    // holds the guest's own lines and its framed document.)
    assert!(b.console_log.contains("@@BOOTBENCH"), "no console log recorded");
    assert!(!b.console_log.contains(&token), "the token is in the console log");
    assert!(!run.transcript().contains(&token), "the token is in run's output");
    recv.stop().unwrap();
    let stored = store_bytes(&db);
    assert!(stored.len() > 4096, "the store is empty");
    assert!(!stored.contains(&token), "the token is in the store");
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn a_wrong_token_is_refused_at_once_and_reported_by_the_guest_which_used_dhcp() {
    support::require_x86_64_boot();
    let dir = support::scratch();
    let (recv, db) = receiver(dir.path(), &random_token());
    let out = dir.path().join("r.json");
    let url = format!("http://10.0.2.2:{}", recv.addr().port());
    // A user's own secret on the cmdline: warned about, kept out of records.
    let lab_secret = random_token();
    let append = format!("bootbench.ip=dhcp lab.api_token={lab_secret}");
    let run = boot(&out, &["--upload-url", &url, "--upload-token", &random_token(), "--append", &append]);
    // A failed upload loses nothing, and has an exit status of its own.
    assert_eq!(run.code(), Some(3), "{}", run.transcript());
    assert!(run.stderr.contains("run: warning: boot 1: upload FAILED"), "{}", run.transcript());
    assert!(run.stderr.contains("visible in QEMU's argv"), "{}", run.transcript());
    assert!(!std::fs::read_to_string(&out).unwrap().contains(&lab_secret), "--append's secret is in the results file");
    let b = support::only_boot(&out, &run);
    let (rec, g) = complete_with_report(&b, &run);
    eprintln!("guest: {g:?}\nnetwork: {:?}", rec.network);
    assert_eq!(g.verdict, Verdict::Refused, "{g:?}");
    assert_eq!(g.http_status, Some(403));
    assert_eq!(g.attempts, 1, "a refused token must not be retried: {g:?}");
    let e = g.error.clone().unwrap_or_default();
    assert!(e.contains("refused the token") && e.contains("wrong token for this receiver"), "{e}");
    let net = rec.network.clone().unwrap_or_default();
    for want in ["via=dhcp", "addr=10.0.2.15/24", "gw=10.0.2.2", "dns=10.0.2.3"] {
        assert!(net.contains(want), "network event lacks {want}: {net}");
    }
    assert!(b.console_log.contains("the result above on the console is complete"), "no readable failure line");
    recv.stop().unwrap();
    assert!(Store::open(&db).unwrap().list(10).unwrap().is_empty(), "a refused upload was stored");
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn run_serve_receives_the_guests_upload_and_keeps_the_envelope() {
    support::require_x86_64_boot();
    let dir = support::scratch();
    let out = dir.path().join("r.json");
    let db = dir.path().join("kept.db");
    let run = boot(&out, &["--serve", "--serve-db", db.to_str().unwrap()]);
    run.assert_success();
    assert!(run.stderr.contains("run: receiver on http://127.0.0.1:"), "{}", run.transcript());
    let b = support::only_boot(&out, &run);
    let (rec, g) = complete_with_report(&b, &run);
    eprintln!("guest: {g:?}\nnetwork: {:?}", rec.network);
    assert_eq!(g.verdict, Verdict::Stored, "{g:?}");
    assert_eq!(g.attempts, 1, "{g:?}");
    assert_eq!(rec.received, Some(true), "{rec:?}");
    assert_eq!(rec.matches_console, Some(true), "{rec:?}");
    let id = b.result.as_ref().unwrap().run_id.clone();
    match store::load_run(&db, &id).unwrap() {
        StoredRun::Envelope(f) => {
            assert_eq!(f.boots.len(), 1);
            assert_eq!(f.boots[0].upload.as_ref().and_then(|u| u.received), Some(true));
        }
        other => panic!("expected the host envelope in the store, got {other:?}"),
    }
    assert_eq!(document_rows(&db, &id), 1);
}
