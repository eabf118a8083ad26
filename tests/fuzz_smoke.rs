//! The fuzz targets of `fuzz/` (cargo-fuzz, libFuzzer), run over corpora
//! seeded with real inputs: a few seconds each in the default tier, minutes
//! each in the long tier. A crash, a hang (`-timeout`), an allocation past
//! the target's bound or past libFuzzer's RSS limit fails the test, naming
//! the input libFuzzer saved (under `fuzz/artifacts/`). Without `cargo
//! fuzz` (scripts/setup installs it) the test says SKIPPED and why, and
//! fails under CI, which must not skip it.
//!
//! The seeds: each target's own under `fuzz/seeds/<target>/` (small ones
//! written by hand, and every crash found, so it is replayed on every
//! run), plus what this test writes from the project's real inputs:
//! the built-in suites' JSON, the built-in loadfile and pieces of
//! Debian's `client.txt`, the recorded consoles of good and failed boots
//! (`qemu/src/fixtures`), a recorded results file and its document, and
//! the recorded LAVA job logs with their job definition.
//!
//! Cost in the default tier: 37 s with the targets built; building them
//! cold (`fuzz/target` empty: every dependency again, instrumented) took
//! 13 min 46 s here (11 min of CPU) on a loaded 2-core machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Every target, as `fuzz/Cargo.toml` names them.
const TARGETS: &[&str] =
    &["cmdline", "suite_json", "loadfile", "console_stream", "upload_request", "results_migration", "lava_import"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fuzz_dir() -> PathBuf {
    root().join("fuzz")
}

/// The directory `cargo fuzz build` puts the targets in.
fn target_dir() -> PathBuf {
    fuzz_dir().join("target")
}

fn binary(target: &str) -> PathBuf {
    target_dir().join("x86_64-unknown-linux-gnu/release").join(target)
}

/// Whether `cargo fuzz` runs here; `Err` says why not.
fn cargo_fuzz() -> Result<(), String> {
    let out = Command::new("cargo").args(["fuzz", "--version"]).output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("`cargo fuzz --version` failed: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("cannot run cargo: {e}")),
    }
}

/// `Some(reason)` when the fuzzer is missing here and the test may skip;
/// panics when it is missing under CI.
fn skip_reason() -> Option<String> {
    let why = cargo_fuzz().err()?;
    let why = format!("cargo-fuzz is not installed ({why}); scripts/setup installs it");
    if std::env::var_os("CI").is_some() {
        panic!("missing prerequisite under CI: {why}");
    }
    Some(why)
}

/// Builds every target once (libFuzzer's instrumentation, no sanitizer:
/// the targets are safe Rust; debug assertions on, so that an arithmetic
/// overflow is a crash). `RUSTC_BOOTSTRAP=1` lets the stable toolchain
/// take the flags cargo-fuzz passes.
fn build() -> Duration {
    let started = Instant::now();
    let status = Command::new("nice")
        .args(["cargo", "fuzz", "build", "--sanitizer", "none", "--debug-assertions", "--fuzz-dir"])
        .arg(fuzz_dir())
        .arg("--target-dir")
        .arg(target_dir())
        .current_dir(root())
        .env("RUSTC_BOOTSTRAP", "1")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("run cargo fuzz build");
    assert!(status.success(), "cargo fuzz build failed: {status}");
    started.elapsed()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap_or_else(|e| panic!("write seed {name} in {}: {e}", dir.display()));
}

fn read(rel: &str) -> Vec<u8> {
    let path = root().join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("read fixture {}: {e}", path.display()))
}

/// Pieces of Debian's `client.txt` (26 MB: too long for one input), cut
/// at line ends; none when the dbench package is not installed.
fn client_txt_pieces() -> Vec<Vec<u8>> {
    let Ok(text) = std::fs::read(loads::known_loadfiles::CLIENT_TXT) else { return vec![] };
    let mut pieces = Vec::new();
    for start in [0, text.len() / 3, text.len() / 2, text.len().saturating_sub(24 << 10)] {
        // From the line after `start` (the first line for 0) ...
        let from = match start {
            0 => 0,
            _ => text[start..].iter().position(|&b| b == b'\n').map_or(text.len(), |i| start + i + 1),
        };
        // ... to the last line end within 16 KiB.
        let end = (from + (16 << 10)).min(text.len());
        let to = text[..end].iter().rposition(|&b| b == b'\n').map_or(end, |i| i + 1).max(from);
        pieces.push(text[from..to].to_vec());
    }
    pieces
}

/// Writes the real inputs of `target` into `corpus` (beside its committed
/// seeds, copied too).
fn seed(target: &str, corpus: &Path) {
    let committed = fuzz_dir().join("seeds").join(target);
    if let Ok(entries) = std::fs::read_dir(&committed) {
        for e in entries.flatten() {
            std::fs::copy(e.path(), corpus.join(e.file_name())).expect("copy a committed seed");
        }
    }
    let results = read("tests/fixtures/standard_suite_boot.json");
    let results_value: serde_json::Value = serde_json::from_slice(&results).expect("the results fixture is JSON");
    let document = &results_value["boots"][0]["result"];
    match target {
        "cmdline" => {
            let boot = results_value["boots"][0]["cmdline"].as_str().expect("a recorded cmdline");
            write(corpus, "recorded", boot.as_bytes());
        }
        "suite_json" => {
            for name in loads::suite::BUILTIN_SUITES {
                let s = loads::suite::Suite::builtin_for(name, "x86_64").expect("a built-in suite");
                write(corpus, &format!("builtin-{name}"), s.to_json().as_bytes());
                write(corpus, &format!("builtin-{name}-pretty"), &serde_json::to_vec_pretty(&s).expect("JSON"));
            }
        }
        "loadfile" => {
            let builtin = loads::workloads::nbench::builtin_loadfile::builtin_text();
            write(corpus, "builtin", &builtin.as_bytes()[..builtin.len().min(16 << 10)]);
            for (i, piece) in client_txt_pieces().iter().enumerate() {
                write(corpus, &format!("client-txt-{i}"), piece);
            }
        }
        "console_stream" => {
            for f in ["clean", "oops", "panic", "streams"] {
                let mut raw = vec![0u8];
                raw.extend(read(&format!("qemu/src/fixtures/{f}.txt")));
                write(corpus, &format!("recorded-{f}"), &raw);
            }
            let mut framed = vec![1u8];
            framed.extend(serde_json::to_vec(document).expect("JSON"));
            framed.extend(b"\0\x00\x03\x10\x01\x05\x07\x04\x02\x20\0\x07\x40\x01");
            write(corpus, "framed-recorded-document", &framed);
        }
        "upload_request" => {
            let id = document["run_id"].as_str().expect("a recorded run id");
            let mut doc = b"Bearer 0123456789abcdef\0".to_vec();
            doc.extend(id.as_bytes());
            doc.push(0);
            doc.extend(serde_json::to_vec(document).expect("JSON"));
            write(corpus, "recorded-document", &doc);
            let mut envelope = b"Basic dXNlcjp0b2tlbg==\0".to_vec();
            envelope.extend(id.as_bytes());
            envelope.push(0);
            envelope.extend(&results);
            write(corpus, "recorded-envelope", &envelope);
        }
        "results_migration" => {
            write(corpus, "recorded-results", &results);
            write(corpus, "recorded-document", &serde_json::to_vec(document).expect("JSON"));
        }
        "lava_import" => {
            let definition = read("tests/fixtures/lava/monitors-job.yaml");
            for log in ["ok-job", "panic-job", "panic-exit-job", "probe-job", "monitors-job"] {
                let mut input = read(&format!("tests/fixtures/lava/{log}.log"));
                write(corpus, &format!("recorded-{log}"), &input);
                input.push(0);
                input.extend(&definition);
                write(corpus, &format!("recorded-{log}-with-definition"), &input);
            }
        }
        other => panic!("no seeds for target {other}"),
    }
}

/// What one run of a target did.
struct Run {
    target: &'static str,
    execs: u64,
    corpus: usize,
    coverage: String,
    seconds: f64,
}

/// Runs `target` over `corpus` (seeded first) for `seconds`, with a fixed
/// seed so that a run repeats; panics on a crash, naming the input.
fn run(target: &'static str, corpus: &Path, artifacts: &Path, seconds: u32) -> Run {
    for dir in [corpus, artifacts] {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    }
    seed(target, corpus);
    let started = Instant::now();
    let out = Command::new("nice")
        .arg(binary(target))
        .arg(corpus)
        .args([
            format!("-max_total_time={seconds}"),
            "-seed=1".into(),
            // A hang: an input that takes this long.
            "-timeout=10".into(),
            "-rss_limit_mb=2048".into(),
            "-max_len=65536".into(),
            "-print_final_stats=1".into(),
            format!("-artifact_prefix={}/", artifacts.display()),
        ])
        .output()
        .expect("run a fuzz target");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "fuzz target {target} failed ({}); the input is saved under {} (replay it: {} FILE):\n{}",
        out.status,
        artifacts.display(),
        binary(target).display(),
        log.lines().rev().take(60).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    let stat =
        |name: &str| log.lines().find_map(|l| l.strip_prefix(&format!("stat::{name}:")).map(|v| v.trim().to_string()));
    // libFuzzer's last status line: `#N DONE cov: C ft: F corp: K/SIZE ...`.
    let done = log.lines().rev().find(|l| l.contains(" DONE ") || l.contains("cov:")).unwrap_or_default();
    let execs = stat("number_of_executed_runs")
        .or_else(|| done.split_whitespace().next().map(|n| n.trim_start_matches('#').to_string()))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let field = |key: &str| done.split_whitespace().skip_while(|w| *w != key).nth(1).unwrap_or("?").to_string();
    let coverage = format!("cov {} ft {}", field("cov:"), field("ft:"));
    let corpus_len = std::fs::read_dir(corpus).map(|d| d.count()).unwrap_or(0);
    Run { target, execs, corpus: corpus_len, coverage, seconds: started.elapsed().as_secs_f64() }
}

fn report(runs: &[Run], build: Duration) {
    eprintln!("fuzz: build {:.1} s", build.as_secs_f64());
    eprintln!("  {:<18} {:>10} {:>8} {:>18} {:>8}", "target", "execs", "corpus", "coverage", "time");
    for r in runs {
        eprintln!("  {:<18} {:>10} {:>8} {:>18} {:>6.1} s", r.target, r.execs, r.corpus, r.coverage, r.seconds);
    }
}

/// Every target a few seconds over its seeds: what the default tier runs.
#[test]
fn every_fuzz_target_runs_its_seeds_without_a_crash() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let build = build();
    let tmp = tempfile::tempdir().expect("temp dir");
    // Not in the temp dir: a crash's input must outlive the failed test.
    let artifacts = fuzz_dir().join("artifacts");
    let runs: Vec<Run> = TARGETS.iter().map(|t| run(t, &tmp.path().join("corpus").join(t), &artifacts, 4)).collect();
    report(&runs, build);
    for r in &runs {
        assert!(r.execs > 100, "fuzz target {} ran only {} inputs: it is not fuzzing", r.target, r.execs);
    }
}

/// Every target for minutes, its corpus kept under `fuzz/corpus/` (ignored
/// by git) so that each long run starts where the last one stopped.
#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_every_fuzz_target_for_minutes() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let build = build();
    let artifacts = fuzz_dir().join("artifacts");
    let runs: Vec<Run> = TARGETS.iter().map(|t| run(t, &fuzz_dir().join("corpus").join(t), &artifacts, 120)).collect();
    report(&runs, build);
}
