//! A load benchmark of the results receiver (not a test): a receiver on
//! loopback with a temporary store, and concurrent uploaders (threads
//! calling `results_uploader::upload` with the host's settings, so each
//! upload opens its own connection, and its own TLS session over https)
//! each sending distinct quick-suite-sized envelopes, once over http and
//! once over https with a certificate made for the run. Prints uploads/s,
//! latency percentiles and the process's peak RSS.
//!
//! `cargo run --release --example serve_load -- --help`
//!
//! The receiver runs in this process, so the peak RSS (VmHWM, reset
//! between the two passes) is the receiver's plus the uploaders' threads.

#[path = "../tests/support/test_pki.rs"]
mod test_pki;

use bootbench::results::{BootRecord, ResultsFile};
use bootbench::service::listener::{ConnectionLimits, TlsFiles};
use bootbench::service::receiver::{GivenToken, Receiver, ServeConfig, DEFAULT_MAX_BYTES};
use bootbench::service::tokens::Scope;
use clap::Parser;
use loads::schema::{Iteration, Metric, Provenance, RunDocument, Status, WorkloadResult, SCHEMA_VERSION};
use results_uploader::{upload, UploadRequest, UploadSettings};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const TOKEN: &str = "serve-load-token";
/// Stands for the run id in the envelope's text; each upload puts its own.
const ID_MARK: &str = "RUN-ID-MARK";

/// Options of the benchmark.
#[derive(Debug, clap::Parser)]
struct Options {
    /// Uploader threads.
    #[arg(long, default_value_t = 32)]
    uploaders: usize,
    /// Uploads per pass, at most.
    #[arg(long, default_value_t = 2000)]
    uploads: usize,
    /// Seconds per pass, at most.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Bytes of console log in each envelope.
    #[arg(long, default_value_t = 200 << 10)]
    console_bytes: usize,
}

/// A quick suite's result: a few workloads, a few iterations each.
fn document() -> RunDocument {
    let mut p = Provenance::default();
    p.kernel.release = "6.12.0-bench".into();
    p.kernel.cmdline = "console=ttyS0 quiet bootbench.suite=quick".into();
    p.machine.arch = "x86_64".into();
    p.machine.cpus = 2;
    p.machine.mem_bytes = 1 << 30;
    p.suite.name = "quick".into();
    let workload = |name: &str, metric: &str, unit: &str, base: f64| WorkloadResult {
        name: name.into(),
        warmup: 1,
        iterations: (0..5)
            .map(|i| Iteration {
                metrics: [(metric.to_string(), Metric::higher(base + f64::from(i), unit))].into_iter().collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    RunDocument {
        schema_version: SCHEMA_VERSION,
        run_id: ID_MARK.into(),
        status: Status::Complete,
        errors: vec![],
        provenance: p,
        timings: Default::default(),
        workloads: vec![
            workload("fork", "forks_per_s", "forks/s", 9000.0),
            workload("hackbench", "messages_per_s", "messages/s", 150_000.0),
            workload("dbench", "throughput", "MB/s", 310.0),
            workload("sdet", "scripts_per_hour", "scripts/h", 4200.0),
        ],
    }
}

/// The envelope's JSON, with [`ID_MARK`] where the run id goes.
fn envelope_template(console_bytes: usize) -> String {
    let line = "[   12.345678] virtio_blk virtio1: [vda] 2097152 512-byte logical blocks\r\n";
    let mut boot = BootRecord { label: "base".into(), result: Some(document()), ..Default::default() };
    boot.boot.classification = "ok".into();
    boot.console_log = line.repeat(console_bytes / line.len() + 1);
    serde_json::to_string(&ResultsFile { boots: vec![boot], ..ResultsFile::default() }).expect("an envelope")
}

/// What one pass measured.
struct Pass {
    uploads: usize,
    failed: usize,
    wall: Duration,
    latencies: Vec<Duration>,
    peak_rss_kib: u64,
}

/// The process's peak resident set since the last reset, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn run_pass(opts: &Options, scheme: &str, dir: &std::path::Path, template: &str) -> Pass {
    let pki = (scheme == "https").then(|| test_pki::write(dir));
    // Peak RSS of this pass only (Linux: 5 resets VmHWM).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let receiver = Receiver::start(ServeConfig {
        db: dir.join(format!("{scheme}.db")),
        tokens: vec![GivenToken { name: "cli".into(), secret: TOKEN.into(), scope: Scope::UPLOAD }],
        public_reads: false,
        base_url: None,
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        max_bytes: DEFAULT_MAX_BYTES,
        log_prefix: None,
        limits: ConnectionLimits::default(),
        tls: pki.as_ref().map(|p| TlsFiles { cert: p.cert.clone(), key: p.key.clone() }),
        netconsole: None,
    })
    .expect("cannot start the receiver");
    let url = receiver.url();
    let mut settings = UploadSettings::host();
    settings.extra_ca_pem = pki.as_ref().map(|p| std::fs::read(&p.ca).expect("the CA file"));
    let next = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let latencies = Mutex::new(Vec::with_capacity(opts.uploads));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(opts.seconds);
    std::thread::scope(|s| {
        for _ in 0..opts.uploaders {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= opts.uploads || Instant::now() >= deadline {
                    return;
                }
                let id = format!("load-{scheme}-{i:06}");
                let body = template.replace(ID_MARK, &id);
                let t0 = Instant::now();
                let o = upload(
                    &UploadRequest { base_url: &url, token: TOKEN, run_id: &id, body: body.as_bytes() },
                    &settings,
                );
                let took = t0.elapsed();
                if !o.verdict.delivered() || o.attempts.len() > 1 {
                    failed.fetch_add(1, Ordering::Relaxed);
                    eprintln!(
                        "serve_load: {id}: {} after {} attempt(s): {:?}",
                        o.verdict.name(),
                        o.attempts.len(),
                        o.error
                    );
                }
                latencies.lock().unwrap_or_else(|p| p.into_inner()).push(took);
            });
        }
    });
    let wall = started.elapsed();
    let peak_rss_kib = peak_rss_kib();
    receiver.stop().expect("the receiver stopped badly");
    let mut latencies = latencies.into_inner().unwrap_or_else(|p| p.into_inner());
    latencies.sort();
    Pass { uploads: latencies.len(), failed: failed.into_inner(), wall, latencies, peak_rss_kib }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() {
    let opts = Options::parse();
    let template = envelope_template(opts.console_bytes);
    println!(
        "serve_load: {} uploaders, up to {} uploads or {} s per pass, envelopes of {} bytes; receiver and uploaders in one process",
        opts.uploaders,
        opts.uploads,
        opts.seconds,
        template.len()
    );
    for scheme in ["http", "https"] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let pass = run_pass(&opts, scheme, dir.path(), &template);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{scheme:5}: {} uploads in {:.1} s = {:.1} uploads/s; latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; failed or retried {}; peak RSS {:.1} MiB",
            pass.uploads,
            pass.wall.as_secs_f64(),
            pass.uploads as f64 / pass.wall.as_secs_f64(),
            ms(percentile(&pass.latencies, 50.0)),
            ms(percentile(&pass.latencies, 99.0)),
            ms(pass.latencies.last().copied().unwrap_or_default()),
            pass.failed,
            pass.peak_rss_kib as f64 / 1024.0,
        );
    }
}
