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
/// The label of the lab machine's scratch partition.
const LAB_SCRATCH: &str = "bb-lab";
/// The volume label of the lab machine's pack store.
const LAB_PACKS: &str = "bb-packs";

fn spec() -> MachineSpec {
    MachineSpec {
        arch: "x86_64".into(),
        console: "ttyS0".into(),
        accel: "tcg".into(),
        poll_s: 3,
        scratch_label: None,
        pack_label: None,
    }
}

fn receiver(db: &Path) -> Receiver {
    receiver_at(db, SocketAddr::from(([127, 0, 0, 1], 0)), Some(SocketAddr::from(([127, 0, 0, 1], 0))))
}

/// A receiver of store `db` listening on `listen`, with a netconsole sink
/// on `netconsole`.
fn receiver_at(db: &Path, listen: SocketAddr, netconsole: Option<SocketAddr>) -> Receiver {
    Receiver::start(ServeConfig {
        db: db.to_path_buf(),
        tokens: vec![],
        public_reads: false,
        base_url: None,
        listen,
        max_bytes: 16 << 20,
        log_prefix: None,
        limits: ConnectionLimits::default(),
        tls: None,
        netconsole,
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
    let hello = Hello {
        agent_kernel: "6.1.0-test #1".into(),
        capabilities: vec![loads::lab_protocol::CAPABILITY_PACK_STORE.into()],
        ..Hello::default()
    };
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
    // A pack over several of the receiver's 256 KiB reads.
    let pack: Vec<u8> = (0..1_500_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let pack_file = stash(&store, &pack);
    let job = NewJob {
        machine: "box1".into(),
        kernel: stash(&store, &kernel),
        initrd: stash(&store, &initrd),
        pack: Some(loads::lab_protocol::JobPack { file: pack_file.clone(), label: "bb-packs".into() }),
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
    assert_eq!(offer.pack.as_ref().map(|p| (&p.file, p.label.as_str())), Some((&pack_file, "bb-packs")));
    for (file, want) in [("kernel", &kernel), ("initrd", &initrd), ("pack", &pack)] {
        let got = client().get(format!("{url}/lab/jobs/{id}/{file}")).bearer_auth(BOX1).send().unwrap();
        assert_eq!(got.status().as_u16(), 200, "{file}");
        assert_eq!(got.content_length(), Some(want.len() as u64), "{file}");
        assert_eq!(&got.bytes().unwrap().to_vec(), want, "{file}");
    }
    // The agent's own client streams it to a file, checking its sha256.
    let mut agent = results_uploader::LabClient::new(&url, BOX1, results_uploader::UploadSettings::host()).unwrap();
    let dest = dir.path().join("fetched-pack");
    let path = loads::lab_protocol::file_path(id, loads::lab_protocol::FileKind::Pack);
    let expect = results_uploader::ExpectedFile { bytes: pack_file.bytes, sha256: &pack_file.sha256 };
    agent.download(&path, &dest, expect, loads::lab_protocol::MAX_PACK_BYTES).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), pack);
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
    let job = NewJob { machine: "box1".into(), kernel: f.clone(), initrd: f, pack: None, token: tokens::digest(JOB) };
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
    // A job without a pack has no pack to fetch.
    assert_eq!(hello_from(&url, "box1", BOX1).status().as_u16(), 200);
    let next = client().get(format!("{url}/lab/machines/box1/next")).bearer_auth(BOX1).send().unwrap();
    assert_eq!(next.status().as_u16(), 200);
    let (s, e) = error_of(client().get(format!("{url}/lab/jobs/{id}/pack")).bearer_auth(BOX1).send().unwrap());
    assert_eq!((s, e.as_str()), (404, format!("job {id} has no userland pack").as_str()));
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

/// `lab submit` queues each boot as a job for the machine's agent and
/// prints the jobs' ids, without waiting: the kernel and a per-job
/// initramfs stashed under their sha256, the candidate's cmdline naming
/// its job. A wrong machine or a contradicting --target is refused. (No
/// boot: the machine's hello comes over HTTP.)
#[test]
fn lab_submit_queues_each_boot_as_a_job_and_prints_its_id() {
    let k = support::require_x86_64_boot();
    let dir = support::scratch();
    let db = dir.path().join("lab.db");
    let store = {
        let mut s = Store::open(&db).unwrap();
        s.add_machine("box1", &tokens::digest(BOX1), &spec()).unwrap();
        s
    };
    let r = receiver(&db);
    assert_eq!(hello_from(&r.url(), "box1", BOX1).status().as_u16(), 200);
    let submit = |extra: &[&str]| {
        let mut args = vec!["lab", "submit", "--lab-db", db.to_str().unwrap(), "--workloads", "fork"];
        args.extend_from_slice(extra);
        support::run_bootbench(args, Duration::from_secs(300))
    };
    let run = submit(&["--machine", "box1", "--boots", "2", "--label", "base"]);
    run.assert_success();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.transcript());
    let jobs = store.lab_jobs(Some("box1"), 10).unwrap();
    assert_eq!(jobs.len(), 2);
    let kernel_sha = hex::encode(Sha256::digest(std::fs::read(k.image()).unwrap()));
    for (line, job) in lines.iter().zip(jobs.iter().rev()) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f[0], job.id.to_string(), "{line}");
        assert_eq!(f[1], "base", "{line}");
        assert_eq!(job.state, "queued");
        assert_eq!(job.kernel.sha256, kernel_sha);
        assert!(store.lab_file(&job.initrd.sha256).is_file(), "the job's initramfs is stashed");
        assert!(job.cmdline.contains(&format!("bootbench.lab_job={}", job.id)), "{}", job.cmdline);
        assert!(job.cmdline.contains("bootbench.after=reboot"), "{}", job.cmdline);
    }
    assert_ne!(jobs[0].initrd.sha256, jobs[1].initrd.sha256, "each job's initramfs holds its own upload token");

    let r2 = submit(&["--machine", "ghost"]);
    assert!(!r2.status.success() && r2.stderr.contains("no lab machine named 'ghost'"), "{}", r2.transcript());
    let r3 = submit(&["--machine", "box1", "--target", "lab:box2"]);
    assert!(!r3.status.success() && r3.stderr.contains("--target lab:box2"), "{}", r3.transcript());
    // QEMU's disks, a scheduler without a scratch partition, and the
    // flags of a run that waits: each refused, naming the flag.
    for (extra, says) in [
        (&["--swap", "512M"][..], "--swap 512M: QEMU's disks do not exist on lab machine 'box1'"),
        (&["--scratch-disk", "4G"][..], "--scratch-disk 4G: QEMU's disks"),
        (&["--zram", "auto"][..], "--zram auto: QEMU's disks"),
        (&["--scratch-disk", "4X"][..], "--scratch-disk"),
        (&["--iosched", "bfq"][..], "--iosched: lab machine 'box1' has no scratch partition"),
        (&["--power-cycle", "true"][..], "lab submit only queues"),
    ] {
        let mut args = vec!["--machine", "box1"];
        args.extend_from_slice(extra);
        let r = submit(&args);
        assert!(!r.status.success() && r.stderr.contains(says), "{extra:?}: {}", r.transcript());
    }
    // The userland pack needs the machine's pack store.
    let db_arg = db.to_str().unwrap();
    for (extra, says) in [
        (
            &["--workloads", "sdet"][..],
            "workload sdet runs the userland pack's programs, and lab machine 'box1' has no pack store",
        ),
        (
            &["--workloads", "fork", "--pack", "/srv/pack.ext4"][..],
            "--pack /srv/pack.ext4: lab machine 'box1' has no pack store",
        ),
    ] {
        let mut args = vec!["lab", "submit", "--lab-db", db_arg, "--machine", "box1"];
        args.extend_from_slice(extra);
        let r = support::run_bootbench(args, Duration::from_secs(300));
        assert!(!r.status.success() && r.stderr.contains(says), "{extra:?}: {}", r.transcript());
    }
    assert_eq!(store.lab_jobs(None, 10).unwrap().len(), 2, "nothing more was queued");
}

/// Makes an ext4 filesystem image at `image` of `size` with `extra`
/// options (mke2fs of e2fsprogs, which scripts/setup installs).
fn mke2fs(extra: &[&str], image: &Path, size: &str) {
    let out = std::process::Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4"])
        .args(extra)
        .arg(image)
        .arg(size)
        .output()
        .expect("mke2fs (e2fsprogs, scripts/setup)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// What `debugfs -R CMD` prints of the filesystem in `image`.
fn debugfs(image: &Path, cmd: &str) -> String {
    let out = std::process::Command::new("debugfs").args(["-R", cmd]).arg(image).output().expect("debugfs (e2fsprogs)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A QEMU VM playing a lab machine: its default boot (QEMU's
/// `-kernel`/`-initrd`, loaded again at every reset, since there is no
/// `-no-reboot`) is the agent of `lab bundle`; a receiver on this host
/// (reached from the guest as 10.0.2.2) holds its queue and its netconsole
/// sink; QEMU's monitor socket is the lab's power command.
struct LabMachine {
    dir: tempfile::TempDir,
    db: std::path::PathBuf,
    receiver: Option<Receiver>,
    qemu: Option<std::process::Child>,
    serial: std::path::PathBuf,
    monitor: std::path::PathBuf,
}

impl LabMachine {
    /// A receiver and a machine `box1` (token [`BOX1`]) with its bundle,
    /// not yet powered on.
    fn new() -> LabMachine {
        support::require_x86_64_boot();
        let dir = support::scratch();
        let db = dir.path().join("lab.db");
        let mut store = Store::open(&db).unwrap();
        let spec =
            MachineSpec { scratch_label: Some(LAB_SCRATCH.into()), pack_label: Some(LAB_PACKS.into()), ..spec() };
        store.add_machine("box1", &tokens::digest(BOX1), &spec).unwrap();
        // The lab's scratch partition: ext4 labelled for bootbench, with
        // a file a job before left behind.
        let before = dir.path().join("left-by-a-job-before");
        std::fs::create_dir_all(before.join("contest")).unwrap();
        std::fs::write(before.join("contest/old-load-file"), b"x").unwrap();
        std::fs::write(before.join(".bootbench-scratch"), b"claimed by a run before\n").unwrap();
        mke2fs(&["-L", LAB_SCRATCH, "-d", before.to_str().unwrap()], &dir.path().join("scratch.img"), "64M");
        // The lab's pack store: a new ext4 filesystem labelled for it.
        // Sparse: room for the x86_64 pack (2 GiB) in the long tier.
        mke2fs(&["-L", LAB_PACKS], &dir.path().join("packs.img"), "3G");
        let r = receiver(&db);
        let token_file = dir.path().join("box1.token");
        std::fs::write(&token_file, format!("{BOX1}\n")).unwrap();
        std::os::unix::fs::PermissionsExt::set_mode(&mut std::fs::metadata(&token_file).unwrap().permissions(), 0o600);
        std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let bundle = dir.path().join("bundle");
        let url = format!("http://10.0.2.2:{}", r.addr().port());
        support::run_bootbench(
            [
                "lab",
                "bundle",
                "--machine",
                "box1",
                "--lab",
                &url,
                "--token-file",
                token_file.to_str().unwrap(),
                "--console",
                "ttyS0",
                // QEMU user networking's addresses, as a lab with static
                // addresses gives them.
                "--append",
                "bootbench.ip=10.0.2.15/24 bootbench.gw=10.0.2.2 bootbench.dns=10.0.2.3",
                "-o",
                bundle.to_str().unwrap(),
            ],
            Duration::from_secs(600),
        )
        .assert_success();
        let serial = dir.path().join("serial.log");
        let monitor = dir.path().join("monitor.sock");
        LabMachine { db, receiver: Some(r), qemu: None, serial, monitor, dir }
    }

    fn bundle(&self, file: &str) -> std::path::PathBuf {
        self.dir.path().join("bundle").join(file)
    }

    /// Powers the machine on: QEMU without -no-reboot, a virtio NIC on
    /// user networking, an i6300esb watchdog, the scratch partition as a
    /// virtio disk, the serial console in a file.
    fn power_on(&mut self) {
        let cmdline = std::fs::read_to_string(self.bundle("cmdline")).unwrap();
        let child = std::process::Command::new("qemu-system-x86_64")
            .args(["-accel", "tcg", "-m", "1024", "-smp", "1", "-display", "none", "-nodefaults"])
            .arg("-kernel")
            .arg(self.bundle("vmlinuz"))
            .arg("-initrd")
            .arg(self.bundle("initramfs.cpio"))
            .args(["-append", cmdline.trim()])
            .args(["-nic", "user,model=virtio-net-pci", "-device", "i6300esb", "-action", "watchdog=reset"])
            .arg("-drive")
            .arg(format!("file={},format=raw,if=virtio", self.dir.path().join("scratch.img").display()))
            .arg("-drive")
            .arg(format!("file={},format=raw,if=virtio", self.dir.path().join("packs.img").display()))
            .arg("-serial")
            .arg(format!("file:{}", self.serial.display()))
            .arg("-monitor")
            .arg(format!("unix:{},server,nowait", self.monitor.display()))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join("qemu.stderr")).unwrap())
            .spawn()
            .expect("cannot start QEMU");
        self.qemu = Some(child);
    }

    /// The lab's power command: a reset through QEMU's monitor.
    fn power_cycle_cmd(&self) -> String {
        format!(
            "python3 -c \"import socket,time; s=socket.socket(socket.AF_UNIX); s.connect('{}'); time.sleep(0.5); s.sendall(b'system_reset\\n'); time.sleep(0.5)\"",
            self.monitor.display()
        )
    }

    /// The serial console, as a lab's console command reads it.
    fn console_cmd(&self) -> String {
        format!("tail -c 0 -F {}", self.serial.display())
    }

    fn serial_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.serial).unwrap_or_default()).into_owned()
    }

    /// The serial console and QEMU's stderr, for failure messages.
    fn transcript(&self) -> String {
        let stderr = std::fs::read_to_string(self.dir.path().join("qemu.stderr")).unwrap_or_default();
        format!("--- serial ---\n{}\n--- QEMU stderr ---\n{stderr}", self.serial_text())
    }

    fn store(&self) -> Store {
        Store::open(&self.db).unwrap()
    }

    /// Waits until the agent has said hello `n` times in all (on the serial
    /// console), within `limit`.
    fn wait_for_hellos(&self, n: usize, limit: Duration) -> bool {
        let marker =
            format!("{} EVENT {}", loads::console_protocol::MARKER, loads::console_protocol::EVENT_AGENT_HELLO);
        support::wait_until(limit, || self.serial_text().matches(&marker).count() >= n)
    }

    /// `bootbench run --target lab:box1` with `extra` arguments.
    fn run(&self, out: &Path, extra: &[&str]) -> support::CliRun {
        let mut args: Vec<String> = ["run", "--target", "lab:box1", "--lab-db", self.db.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(["--power-cycle".into(), self.power_cycle_cmd(), "--console-cmd".into(), self.console_cmd()]);
        args.extend(["-o".into(), out.display().to_string()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        support::run_bootbench(args, support::BOOT_DEADLINE)
    }
}

impl Drop for LabMachine {
    fn drop(&mut self) {
        if let Some(mut q) = self.qemu.take() {
            let _ = q.kill();
            let _ = q.wait();
        }
        if let Some(r) = self.receiver.take() {
            let _ = r.stop();
        }
    }
}

/// Case 1: a good candidate is kexec'd by the agent, runs the suite,
/// uploads a complete result and reboots; the machine comes back to its
/// agent, the queue is empty, and the record is a QEMU boot's envelope
/// with the lab job (kexec, the agent's kernel) in place of QEMU's argv.
#[test]
fn a_lab_machine_boots_a_good_candidate_by_kexec_and_comes_back_to_its_agent() {
    let _lock = support::boot_lock();
    let mut m = LabMachine::new();
    // A small userland pack, which the agent fetches into the machine's
    // pack store and the candidate mounts from it.
    let pack_src = m.dir.path().join("pack-src");
    std::fs::create_dir_all(pack_src.join("etc")).unwrap();
    std::fs::write(pack_src.join("etc/bootbench-test-pack"), b"a test pack\n").unwrap();
    let pack = m.dir.path().join("pack.ext4");
    mke2fs(&["-d", pack_src.to_str().unwrap()], &pack, "4M");
    let pack_sha = hex::encode(Sha256::digest(std::fs::read(&pack).unwrap()));
    let t0 = Instant::now();
    m.power_on();
    assert!(m.wait_for_hellos(1, Duration::from_secs(240)), "the agent never said hello:\n{}", m.transcript());
    let to_hello = t0.elapsed();
    let out = m.dir.path().join("lab.json");
    let t1 = Instant::now();
    let run = m.run(
        &out,
        &[
            "--workloads",
            "fork",
            "--iterations",
            "1",
            "--warmup",
            "0",
            "--timeout-boot",
            "240",
            "--timeout-total",
            "600",
            "--pack",
            pack.to_str().unwrap(),
        ],
    );
    let wall = t1.elapsed();
    run.assert_success();
    let boot = support::only_boot(&out, &run);
    eprintln!(
        "lab machine: power-on to the agent's hello {:.1} s; job wall {:.1} s (kexec to the machine back: {:.1} s)",
        to_hello.as_secs_f64(),
        wall.as_secs_f64(),
        boot.boot.wall_s
    );
    assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, m.transcript());
    assert_eq!(boot.boot.late_failure, None);
    let lab = boot.lab.as_ref().expect("the lab job is recorded");
    assert_eq!((lab.system.as_str(), lab.boot_method.as_deref()), ("bootbench-lab", Some("kexec")));
    assert_eq!(lab.device.as_deref(), Some("box1"));
    assert!(lab.agent_kernel.as_deref().is_some_and(|k| k.starts_with("6.1")), "{lab:?}");
    let doc = boot.result.as_ref().expect("the uploaded document");
    assert_eq!(doc.status, loads::schema::Status::Complete, "{:?}", doc.errors);
    assert!(doc.workloads.iter().any(|w| w.name == "fork" && w.error.is_none() && !w.iterations.is_empty()));
    assert!(doc.provenance.kernel.cmdline.contains("bootbench.lab_job="), "{}", doc.provenance.kernel.cmdline);
    assert!(!doc.provenance.kernel.cmdline.contains(JOB), "the job's token never travels on the cmdline");
    assert_eq!(boot.qemu.argv, Vec::<String>::new(), "no QEMU argv for a lab boot");
    // The machine is back at its agent: a second hello after the job.
    let store = m.store();
    let job = store.lab_jobs(Some("box1"), 10).unwrap();
    assert_eq!(job.len(), 1);
    assert_eq!(job[0].state, "done");
    assert!(job[0].returned_at.is_some(), "the agent said hello again after the job");
    assert!(m.wait_for_hellos(2, Duration::from_secs(5)));
    assert!(store.lab_jobs(Some("box1"), 10).unwrap().iter().all(|j| j.state != "queued"), "the queue is empty");
    // The scratch partition was found by its label, mounted and emptied.
    let storage = doc.provenance.storage.as_ref().expect("the candidate's storage");
    assert_eq!(storage.scratch_label.as_deref(), Some(LAB_SCRATCH), "{storage:?}");
    assert_eq!(storage.scratch_device.as_deref(), Some("/dev/vda"), "{storage:?}");
    assert!(storage.scratch_mount.is_some() && storage.scratch_bytes == Some(64 << 20), "{storage:?}");
    let listing = debugfs(&m.dir.path().join("scratch.img"), "ls -l /");
    assert!(
        listing.contains("lost+found") && listing.contains(".bootbench-scratch") && !listing.contains("contest"),
        "emptied but lost+found and the marker:\n{listing}"
    );
    // The pack reached the store once, whole, and the candidate mounted
    // it from there through a read-only loop device.
    let store_info = storage.pack_store.as_ref().expect("the pack store the candidate used");
    let file = format!("packs/{pack_sha}.ext4");
    assert_eq!((store_info.label.as_str(), store_info.device.as_str()), (LAB_PACKS, "/dev/vdb"), "{storage:?}");
    assert_eq!(store_info.file, file);
    assert!(storage.pack_device.as_deref().is_some_and(|d| d.starts_with("/dev/loop")), "{storage:?}");
    assert_eq!(storage.pack_mount.as_deref(), Some("/pack"), "{storage:?}");
    assert_eq!(boot.pack.as_ref().map(|p| p.image_sha256.as_str()), Some(pack_sha.as_str()));
    let packs_img = m.dir.path().join("packs.img");
    let root = debugfs(&packs_img, "ls /");
    assert!(root.contains(".bootbench-packs") && root.contains("packs"), "the store was claimed:\n{root}");
    let fetched = m.dir.path().join("fetched.ext4");
    debugfs(&packs_img, &format!("dump /{file} {}", fetched.display()));
    assert_eq!(std::fs::read(&fetched).unwrap(), std::fs::read(&pack).unwrap(), "the store holds the pack, whole");
    let serial = m.serial_text();
    assert!(serial.contains("EVENT agent-pack") && serial.contains(" cached=0 "), "{}", m.transcript());
    // The job's console: the serial console the lab command read, with the
    // candidate's own protocol lines, and what netconsole carried.
    assert!(boot.console_log.contains("EVENT hello"), "{}", boot.console_log);
}

/// Bad input on the host side, before anything is queued: an unknown
/// machine, no store, a machine that never said hello, another arch.
#[test]
fn a_run_for_an_unknown_silent_or_mismatched_machine_is_refused_naming_it() {
    let dir = support::scratch();
    let db = dir.path().join("lab.db");
    let mut store = Store::open(&db).unwrap();
    store.add_machine("box1", &tokens::digest(BOX1), &spec()).unwrap();
    let run = |args: &[&str]| support::run_bootbench(args.iter().copied(), Duration::from_secs(120));
    let r = run(&["run", "--target", "lab:box1"]);
    assert!(!r.status.success() && r.stderr.contains("--lab-db"), "{}", r.transcript());
    let r = run(&["run", "--target", "lab:ghost", "--lab-db", db.to_str().unwrap()]);
    assert!(!r.status.success() && r.stderr.contains("no lab machine named 'ghost'"), "{}", r.transcript());
    let r = run(&["run", "--target", "lab:box1", "--lab-db", db.to_str().unwrap()]);
    assert!(!r.status.success() && r.stderr.contains("never said hello"), "{}", r.transcript());
    let r = run(&["run", "--target", "lab:box1", "--lab-db", db.to_str().unwrap(), "--arch", "i386"]);
    assert!(!r.status.success() && r.stderr.contains("is x86_64, but this run boots i386"), "{}", r.transcript());
    let r = run(&["run", "--target", "box1"]);
    assert!(!r.status.success() && r.stderr.contains("'qemu' or 'lab:NAME'"), "{}", r.transcript());
    assert!(store.lab_jobs(None, 10).unwrap().is_empty(), "nothing was queued");
}

/// Cases 2, 4, 3 and a bad job, on one machine that comes back to its agent
/// after each: a candidate that panics (the panic from netconsole), one
/// whose workload hangs under the hardware watchdog it armed (the
/// watchdog's reset, reported by the agent), one that hangs before its init with `panic=0` (the job's timeout, the power
/// command through QEMU's monitor), and a job whose kernel fails its
/// sha256 (the agent refuses it and goes on).
#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_a_lab_machine_survives_panics_hangs_and_bad_jobs() {
    let _lock = support::boot_lock();
    let mut m = LabMachine::new();
    m.power_on();
    assert!(m.wait_for_hellos(1, Duration::from_secs(240)), "the agent never said hello:\n{}", m.transcript());
    let hellos = |m: &LabMachine| {
        let marker =
            format!("{} EVENT {}", loads::console_protocol::MARKER, loads::console_protocol::EVENT_AGENT_HELLO);
        m.serial_text().matches(&marker).count()
    };
    let base = ["--workloads", "fork", "--iterations", "1", "--warmup", "0", "--timeout-boot", "240"];
    let one = |m: &LabMachine, name: &str, extra: &[&str]| {
        let out = m.dir.path().join(format!("{name}.json"));
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        let t0 = Instant::now();
        let run = m.run(&out, &args);
        eprintln!("lab machine, {name}: {:.1} s, exit {:?}", t0.elapsed().as_secs_f64(), run.code());
        (support::only_boot(&out, &run), run)
    };

    // Case 2: a panic, seen through netconsole.
    let before = hellos(&m);
    let (boot, run) = one(&m, "panic", &["--timeout-total", "600", "--append", "bootbench.test_fault=kernel-panic"]);
    assert_eq!(boot.boot.classification, "panic", "{:?}\n{}\n{}", boot.boot.detail, run.transcript(), m.transcript());
    let netconsole = String::from_utf8_lossy(&m.store().lab_jobs(Some("box1"), 1).unwrap()[0].console).into_owned();
    assert!(netconsole.contains("Kernel panic - not syncing"), "netconsole has the panic line:\n{netconsole}");
    eprintln!(
        "netconsole on a panic ({} bytes), from the panic line:\n{}",
        netconsole.len(),
        &netconsole[netconsole.find("Kernel panic").unwrap()..]
    );
    assert!(support::wait_until(Duration::from_secs(120), || hellos(&m) > before), "back at the agent");

    // Case 4: the workload hangs after the candidate armed the i6300esb
    // watchdog: the watchdog resets the machine, the agent comes back and
    // says so, and the job is a hang (watchdog), long before its timeout.
    let before = hellos(&m);
    let t0 = Instant::now();
    let (boot, run) = one(
        &m,
        "watchdog",
        &[
            "--timeout-total",
            "600",
            "--append",
            "bootbench.alive=10 bootbench.hw_watchdog=30 bootbench.test_fault=silence",
        ],
    );
    let took = t0.elapsed();
    assert_eq!(boot.boot.classification, "hang", "{:?}\n{}\n{}", boot.boot.detail, run.transcript(), m.transcript());
    let detail = boot.boot.detail.clone().unwrap_or_default();
    assert!(detail.contains("watchdog"), "{detail}");
    assert!(took < Duration::from_secs(400), "the watchdog, not the job's timeout, ended it: {took:?}");
    assert!(m.serial_text().contains("EVENT hw-watchdog armed device="), "{}", m.transcript());
    let lab = boot.lab.as_ref().unwrap();
    assert_eq!(lab.result.as_deref(), Some("returned"), "{lab:?}");
    assert!(!lab.error.as_deref().unwrap_or_default().contains("power-cycled"), "no power command needed: {lab:?}");
    assert!(support::wait_until(Duration::from_secs(120), || hellos(&m) > before), "back at the agent");

    // Case 3: a hang before the init (panic=0): the timeout, the power command.
    let before = hellos(&m);
    let (boot, run) = one(&m, "hang", &["--timeout-total", "60", "--append", "rdinit=/nonexistent panic=0"]);
    assert!(
        ["hang", "boot_failure"].contains(&boot.boot.classification.as_str()),
        "{:?}\n{}",
        boot.boot.detail,
        run.transcript()
    );
    let lab = boot.lab.as_ref().unwrap();
    assert!(lab.error.as_deref().unwrap_or_default().contains("power-cycled"), "{lab:?}");
    assert!(support::wait_until(Duration::from_secs(120), || hellos(&m) > before), "back at the agent after the reset");

    // A job whose kernel does not match its sha256: refused, and the agent goes on.
    let waits = |m: &LabMachine| {
        let marker = format!("{} EVENT {}", loads::console_protocol::MARKER, loads::console_protocol::EVENT_AGENT_WAIT);
        m.serial_text().matches(&marker).count()
    };
    let waited = waits(&m);
    let mut store = m.store();
    let k = support::require_x86_64_boot();
    let data = std::fs::read(k.image()).unwrap();
    let mut bad = data.clone();
    bad[1000] ^= 0xff;
    let good = stash(&store, &data);
    std::fs::write(store.lab_file(&good.sha256), &bad).unwrap();
    let init = stash(&store, b"not used");
    let job = NewJob { machine: "box1".into(), kernel: good, initrd: init, pack: None, token: tokens::digest(JOB) };
    let id = store.lab_submit(&job, |_| Ok("console=ttyS0".into())).unwrap();
    assert!(support::wait_until(Duration::from_secs(120), || store.lab_job(id).unwrap().ended()));
    let j = store.lab_job(id).unwrap();
    assert_eq!(j.state, "failed");
    assert!(j.failure.as_deref().unwrap_or_default().contains("sha256"), "{:?}", j.failure);
    assert!(support::wait_until(Duration::from_secs(60), || waits(&m) > waited), "the agent asks again and waits");
}

/// Case 5: `bootbench bisect --target lab:box1` over three candidate
/// kernels (c1 good, c3 bad: from c3 on the kernel finds no init and
/// panics), each booted by the lab machine's agent; it names c3, and the
/// machine is back at its agent at the end.
#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_a_bisection_on_a_lab_machine_names_the_commit_that_panics() {
    let kernel = support::require_x86_64_boot();
    let _lock = support::boot_lock();
    support::require_program("git");
    let mut m = LabMachine::new();
    m.power_on();
    assert!(m.wait_for_hellos(1, Duration::from_secs(240)), "the agent never said hello:\n{}", m.transcript());
    let tree = m.dir.path().join("tree");
    let shas = support::no_init_history(&tree);
    let state = m.dir.path().join("bisect/state.json");
    let report = m.dir.path().join("report");
    let modules = kernel.modules_dir();
    let (power, console) = (m.power_cycle_cmd(), m.console_cmd());
    let t0 = Instant::now();
    let run = support::run_bootbench(
        [
            "bisect",
            "--tree",
            tree.to_str().unwrap(),
            "--good",
            &shas[1],
            "--bad",
            &shas[3],
            "--mode",
            "boot",
            "--boot-tries",
            "1",
            "--workloads",
            "fork",
            "--iterations",
            "1",
            "--warmup",
            "0",
            "--append",
            "bootbench.fork.count=10",
            "--timeout-boot",
            "240",
            "--timeout-total",
            "600",
            "--target",
            "lab:box1",
            "--lab-db",
            m.db.to_str().unwrap(),
            "--power-cycle",
            &power,
            "--console-cmd",
            &console,
            "--modules-dir",
            modules.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            "-o",
            report.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(support::copy_kernel_build_flags(&kernel)),
        Duration::from_secs(3000),
    );
    eprintln!("lab bisection: {:.1} s", t0.elapsed().as_secs_f64());
    assert_eq!(run.code(), Some(0), "{}\n{}", run.transcript(), m.transcript());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.with_extension("json")).unwrap()).unwrap();
    assert_eq!(json["outcome"]["culprit"], shas[3].as_str(), "{}", run.stdout);
    assert_eq!(json["outcome"]["parent"], shas[2].as_str(), "{}", run.stdout);
    // Every boot was a lab job, booted by kexec.
    let jobs = m.store().lab_jobs(Some("box1"), 100).unwrap();
    assert!(jobs.len() >= 3, "{jobs:?}");
    let results = m.dir.path().join("bisect/results");
    for sha in [&shas[2], &shas[3]] {
        let f = bootbench::results::ResultsFile::read(&results.join(format!("{}.json", &sha[..12]))).unwrap();
        for b in &f.boots {
            let lab = b.lab.as_ref().expect("a lab boot");
            assert_eq!(lab.boot_method.as_deref(), Some("kexec"), "{lab:?}");
        }
    }
    assert!(jobs.iter().all(|j| j.state != "queued"), "the queue is empty");
}

/// Case 6 on a machine: an agent whose receiver is down retries for its
/// bounded time, then says why on its console and powers the machine off;
/// an agent whose token was revoked powers off at once, quoting the
/// receiver's refusal (and never the token).
#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_an_agent_without_a_receiver_or_with_a_revoked_token_powers_off_saying_why() {
    let _lock = support::boot_lock();
    let mut m = LabMachine::new();
    let addr = m.receiver.as_ref().unwrap().addr();
    m.receiver.take().unwrap().stop().unwrap();
    let wait_off = |m: &mut LabMachine, limit: Duration| {
        let q = m.qemu.as_mut().unwrap();
        support::wait_until(limit, || q.try_wait().unwrap().is_some())
    };
    let poweroff =
        format!("{} EVENT {}", loads::console_protocol::MARKER, loads::console_protocol::EVENT_AGENT_POWEROFF);
    let t0 = Instant::now();
    m.power_on();
    assert!(wait_off(&mut m, Duration::from_secs(600)), "the agent never powered off:\n{}", m.transcript());
    let took = t0.elapsed();
    let serial = m.serial_text();
    eprintln!("receiver down: powered off after {:.1} s", took.as_secs_f64());
    assert!(took > Duration::from_secs(150), "it retried for its budget first: {took:?}");
    assert!(serial.contains(&poweroff) && serial.contains("10.0.2.2"), "{serial}");
    assert!(serial.matches("EVENT agent-error retry_in_s=").count() >= 3, "{serial}");
    assert!(!serial.contains(BOX1), "the token never reaches the console");

    // The token revoked, the receiver back on the same port.
    m.store().revoke_token("box1").unwrap();
    m.receiver = Some(receiver_at(&m.db, addr, None));
    std::fs::write(&m.serial, b"").unwrap();
    let t0 = Instant::now();
    m.power_on();
    assert!(wait_off(&mut m, Duration::from_secs(300)), "the agent never powered off:\n{}", m.transcript());
    let serial = m.serial_text();
    eprintln!("revoked token: powered off after {:.1} s", t0.elapsed().as_secs_f64());
    assert!(serial.contains(&poweroff) && serial.contains("this token was revoked"), "{serial}");
    assert!(!serial.contains("retry_in_s=2 "), "a refusal is not retried: {serial}");
    assert!(!serial.contains(BOX1), "the token never reaches the console");
}

/// The userland pack on a lab machine: SDET's real scripts run from bootbench's
/// x86_64 pack, which the agent fetches into the machine's pack store for the
/// first job and finds there for the second.
#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_a_lab_machine_runs_sdet_from_its_pack_store_fetching_the_pack_once() {
    support::require_local_pack();
    let _lock = support::boot_lock();
    let mut m = LabMachine::new();
    m.power_on();
    assert!(m.wait_for_hellos(1, Duration::from_secs(240)), "the agent never said hello:\n{}", m.transcript());
    let pack_events = |m: &LabMachine| -> Vec<String> {
        m.serial_text().lines().filter(|l| l.contains("EVENT agent-pack ")).map(|l| l.to_string()).collect()
    };
    let mut walls = Vec::new();
    for round in 0..2 {
        let out = m.dir.path().join(format!("sdet-{round}.json"));
        let t = Instant::now();
        let run = m.run(
            &out,
            &[
                "--workloads",
                "sdet",
                "--iterations",
                "1",
                "--warmup",
                "0",
                "--append",
                "bootbench.sdet.levels=[1] bootbench.sdet.units=14",
                "--timeout-boot",
                "300",
                "--timeout-total",
                "900",
            ],
        );
        walls.push(t.elapsed());
        run.assert_success();
        let boot = support::only_boot(&out, &run);
        assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, m.transcript());
        let doc = boot.result.as_ref().expect("the uploaded document");
        assert_eq!(doc.status, loads::schema::Status::Complete, "{:?}", doc.errors);
        let sdet = doc.workloads.iter().find(|w| w.name == "sdet").expect("an sdet result");
        assert!(sdet.error.is_none() && !sdet.iterations.is_empty(), "{sdet:?}");
        let storage = doc.provenance.storage.as_ref().expect("the candidate's storage");
        let pack = boot.pack.as_ref().expect("the record names the pack");
        let store = storage.pack_store.as_ref().expect("the pack came from the store");
        assert_eq!(store.file, format!("packs/{}.ext4", pack.image_sha256));
        assert!(!pack.packages.is_empty(), "bootbench's pack, with its manifest");
        let events = pack_events(&m);
        assert_eq!(events.len(), round + 1, "{events:?}");
        let want = if round == 0 { " cached=0 " } else { " cached=1 " };
        assert!(events[round].contains(want), "{events:?}");
        eprintln!("lab machine, job {round}: wall {:.1} s; {}", walls[round].as_secs_f64(), events[round]);
    }
}
