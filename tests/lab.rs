//! bootbench's own lab: the receiver's side of the lab protocol over HTTP
//! and UDP (no boot), and lab machines played by QEMU VMs whose default
//! boot is the agent (boots: one case in the default tier, the rest in the
//! long tier).

mod support;

use bootbench::service::lab_queue::{MachineSpec, NewJob};
use bootbench::service::listener::ConnectionLimits;
use bootbench::service::receiver::{Receiver, ServeConfig};
use bootbench::service::store::Store;
use bootbench::service::tokens;
use loads::lab_protocol::{Hello, HelloReply, JobEvent, JobFile, NextAnswer};
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

const BOX1: &str = "machine-token-box1-0123456789";
const BOX2: &str = "machine-token-box2-0123456789";
const JOB: &str = "job-token-0123456789abcdef";

fn spec() -> MachineSpec {
    MachineSpec { arch: "x86_64".into(), console: "ttyS0".into(), accel: "tcg".into(), poll_s: 3 }
}

fn receiver(db: &Path) -> Receiver {
    Receiver::start(ServeConfig {
        db: db.to_path_buf(),
        tokens: vec![],
        public_reads: false,
        base_url: None,
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        max_bytes: 16 << 20,
        log_prefix: None,
        limits: ConnectionLimits::default(),
        tls: None,
        netconsole: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
    })
    .expect("cannot start the receiver")
}

fn stash(store: &Store, data: &[u8]) -> JobFile {
    let sha256 = hex::encode(Sha256::digest(data));
    std::fs::create_dir_all(store.lab_files_dir()).unwrap();
    std::fs::write(store.lab_file(&sha256), data).unwrap();
    JobFile { sha256, bytes: data.len() as u64 }
}

fn client() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder().timeout(Duration::from_secs(20)).build().unwrap()
}

/// A POST of `body` as JSON.
fn post_json(url: String, token: Option<&str>, body: &impl serde::Serialize) -> reqwest::blocking::Response {
    let mut req = client().post(url).header("content-type", "application/json").body(serde_json::to_vec(body).unwrap());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().unwrap()
}

fn json<T: serde::de::DeserializeOwned>(r: reqwest::blocking::Response) -> T {
    let status = r.status();
    let body = r.bytes().unwrap();
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{status}: {e}: {}", String::from_utf8_lossy(&body)))
}

fn hello_from(url: &str, machine: &str, token: &str) -> reqwest::blocking::Response {
    let hello = Hello { agent_kernel: "6.1.0-test #1".into(), ..Hello::default() };
    post_json(format!("{url}/lab/machines/{machine}/hello"), Some(token), &hello)
}

fn error_of(r: reqwest::blocking::Response) -> (u16, String) {
    let status = r.status().as_u16();
    let v: serde_json::Value = serde_json::from_slice(&r.bytes().unwrap()).unwrap_or_default();
    (status, v["error"].as_str().unwrap_or_default().to_string())
}

fn doc(id: &str) -> loads::schema::RunDocument {
    let mut p = loads::schema::Provenance::default();
    p.kernel.release = "6.1.0-test".into();
    p.machine.arch = "x86_64".into();
    p.suite.name = "quick".into();
    loads::schema::RunDocument {
        schema_version: loads::schema::SCHEMA_VERSION,
        run_id: id.into(),
        status: loads::schema::Status::Complete,
        errors: vec![],
        provenance: p,
        timings: Default::default(),
        workloads: vec![],
    }
}

/// The whole protocol over the wire, with the real uploader for the
/// candidate: hello, next, the files, the kexec report, netconsole
/// datagrams kept with the job, the candidate's upload with the job's own
/// token, and the job done with the result's place on its console.
#[test]
fn a_job_goes_from_the_queue_to_done_over_http_and_keeps_its_netconsole_lines() {
    let dir = support::scratch();
    let db = dir.path().join("lab.db");
    let mut store = Store::open(&db).unwrap();
    store.add_machine("box1", &tokens::digest(BOX1), &spec()).unwrap();
    let kernel = b"a kernel image".repeat(1000);
    let initrd = b"an initramfs".repeat(500);
    let job = NewJob {
        machine: "box1".into(),
        kernel: stash(&store, &kernel),
        initrd: stash(&store, &initrd),
        token: tokens::digest(JOB),
    };
    let id = store.lab_submit(&job, |id| Ok(format!("console=ttyS0 bootbench.lab_job={id}"))).unwrap();
    let r = receiver(&db);
    let url = r.url();
    let hello = hello_from(&url, "box1", BOX1);
    assert_eq!(hello.status().as_u16(), 200);
    assert_eq!(json::<HelloReply>(hello), HelloReply { closed_job: None });
    let m = store.machine("box1").unwrap();
    assert_eq!(m.base_url.as_deref(), Some(url.as_str()), "the base URL as the agent reached the receiver");
    assert_eq!(m.netconsole_port, r.netconsole_addr().map(|a| a.port()));

    let next: NextAnswer =
        json(client().get(format!("{url}/lab/machines/box1/next")).bearer_auth(BOX1).send().unwrap());
    let NextAnswer::Run { job: offer } = next else { panic!("no job offered: {next:?}") };
    assert_eq!((offer.id, &offer.kernel, &offer.initrd), (id, &job.kernel, &job.initrd));
    assert_eq!(offer.cmdline, format!("console=ttyS0 bootbench.lab_job={id}"));
    for (file, want) in [("kernel", &kernel), ("initrd", &initrd)] {
        let got = client().get(format!("{url}/lab/jobs/{id}/{file}")).bearer_auth(BOX1).send().unwrap();
        assert_eq!(got.status().as_u16(), 200, "{file}");
        assert_eq!(&got.bytes().unwrap().to_vec(), want, "{file}");
    }
    let ev = post_json(format!("{url}/lab/jobs/{id}/events"), Some(BOX1), &JobEvent::Kexec);
    assert_eq!(ev.status().as_u16(), 200);
    assert_eq!(store.lab_job(id).unwrap().state, "kexec");

    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.send_to(b"[    1.0] Linux version 6.1.0\n", r.netconsole_addr().unwrap()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.lab_job(id).unwrap().console.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(store.lab_job(id).unwrap().console, b"[    1.0] Linux version 6.1.0\n");

    let doc = serde_json::to_vec(&doc("lab-run-1")).unwrap();
    let base = loads::lab_protocol::job_upload_base(&url, id);
    let upload = |token: &str| {
        let req = results_uploader::UploadRequest { base_url: &base, token, run_id: "lab-run-1", body: &doc };
        results_uploader::upload(&req, &results_uploader::UploadSettings::host())
    };
    let refused = upload(BOX1);
    assert_eq!(refused.verdict, results_uploader::Verdict::Refused, "a machine's token cannot upload a job's run");
    assert_eq!(store.lab_job(id).unwrap().state, "kexec");
    let o = upload(JOB);
    assert_eq!(o.verdict, results_uploader::Verdict::Stored, "{o:?}");
    let j = store.lab_job(id).unwrap();
    assert_eq!((j.state.as_str(), j.run_id.as_deref()), ("done", Some("lab-run-1")));
    let console = String::from_utf8(j.console).unwrap();
    let marker = format!("{} run=lab-run-1 sha256=", bootbench::service::lab_queue::RESULT_UPLOADED_LINE);
    assert!(console.starts_with("[    1.0] Linux version 6.1.0\n") && console.contains(&marker), "{console}");
    assert!(store.load("lab-run-1").is_ok(), "the run is in the store like any upload");
    let again = upload(JOB);
    assert_eq!(again.verdict, results_uploader::Verdict::AlreadyStored, "a retried upload of the same run is harmless");
}

/// Each request of an agent needs its own machine's token: none, a wrong
/// one, another machine's or a revoked one is refused with a message that
/// says which; a job's files go only to its machine.
#[test]
fn agent_requests_need_their_own_machines_valid_token() {
    let dir = support::scratch();
    let db = dir.path().join("lab.db");
    let mut store = Store::open(&db).unwrap();
    store.add_machine("box1", &tokens::digest(BOX1), &spec()).unwrap();
    store.add_machine("box2", &tokens::digest(BOX2), &spec()).unwrap();
    let f = stash(&store, b"k");
    let job = NewJob { machine: "box1".into(), kernel: f.clone(), initrd: f, token: tokens::digest(JOB) };
    let id = store.lab_submit(&job, |_| Ok("console=ttyS0".into())).unwrap();
    let r = receiver(&db);
    let url = r.url();
    let (s, e) = error_of(post_json(format!("{url}/lab/machines/box1/hello"), None, &Hello::default()));
    assert_eq!(s, 401, "{e}");
    let (s, e) = error_of(hello_from(&url, "box1", "not-a-known-token-0123456"));
    assert_eq!((s, e.as_str()), (403, "wrong token for this receiver"));
    let (s, e) = error_of(hello_from(&url, "box1", BOX2));
    assert_eq!(s, 403);
    assert!(e.contains("token of 'box2'") && e.contains("'box1'"), "{e}");
    let (s, e) = error_of(hello_from(&url, "ghost", BOX1));
    assert_eq!(s, 403, "{e}");
    // box2 may not fetch box1's job, even once it is sent.
    client().get(format!("{url}/lab/machines/box1/next")).bearer_auth(BOX1).send().unwrap();
    let (s, e) = error_of(client().get(format!("{url}/lab/jobs/{id}/kernel")).bearer_auth(BOX2).send().unwrap());
    assert_eq!(s, 403, "{e}");
    let (s, _) = error_of(client().get(format!("{url}/lab/jobs/{id}/vmlinux")).bearer_auth(BOX1).send().unwrap());
    assert_eq!(s, 404);
    let (s, e) = error_of(client().get(format!("{url}/lab/jobs/999/kernel")).bearer_auth(BOX1).send().unwrap());
    assert_eq!(s, 404, "{e}");
    store.revoke_token("box1").unwrap();
    let (s, e) = error_of(hello_from(&url, "box1", BOX1));
    assert_eq!((s, e.as_str()), (403, "this token was revoked"), "a revocation holds at once");
}
