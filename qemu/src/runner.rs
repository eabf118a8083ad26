//! Booting one kernel in QEMU: spawn it, read its console, enforce the boot,
//! silence and total timeouts, kill and reap it, and classify the boot. This
//! is the only code that owns a QEMU process. It never takes QEMU's exit
//! status as the verdict: only an intact result stream makes a boot `ok`.
//!
//! Layout: `boot_spec` (the spec, its limits and the QEMU command) and
//! `qemu_process` (spawned-process plumbing), neither using the other;
//! `machine_query` (what a `-machine` name stands for, asked of QEMU);
//! this module runs the boot: deadlines, console scanning and the verdict.

mod boot_spec;
mod machine_query;
mod qemu_process;
#[cfg(test)]
mod tests;

pub use boot_spec::{BootSpec, RunnerError, Timeouts, PORT_CMDLINE_KEY, RESULTS_PORT_NAME};
pub use machine_query::{machine_facts, MachineFacts, MachineQueryError};

use crate::argv::escape_option_value;
use crate::console_scan::{ConsoleScan, GuestProgress, MAX_KERNEL_ERRORS, MAX_LOG_BYTES};
use crate::disk_io::{direct_io_check, DiskAio, DiskIoProbe};
use crate::outcome::{judge, BootOutcome, HangKind, Judgement, RunEnd, RunFacts, Timings};
use qemu_process::{
    die_with_parent, guestless_qemu, kill_and_reap, spawn_reader, spawn_stderr_reader, wait_bounded, Feed,
};
use std::io::{self, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// How often the runner checks whether QEMU exited while its console stays
/// open (only a helper process holding the pipe can cause that).
const EXIT_POLL: Duration = Duration::from_millis(200);

/// How long console output still in flight is awaited after QEMU ended.
const DRAIN: Duration = Duration::from_millis(500);

/// How long QEMU may take to exit after closing its console.
const EXIT_AFTER_EOF: Duration = Duration::from_secs(10);

/// The first line of `binary --version`, e.g. `QEMU emulator version 10.0.2
/// (Debian 1:10.0.2+ds-1~bpo12+1)`.
pub fn qemu_version(binary: &Path) -> Result<String, RunnerError> {
    let out = std::process::Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| spawn_error(binary, e))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().next().map(str::trim) {
        Some(line) if out.status.success() && !line.is_empty() => Ok(line.to_string()),
        _ => Err(RunnerError::Version {
            binary: binary.to_path_buf(),
            detail: format!("{}; stderr: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        }),
    }
}

/// How long one QEMU of the disk I/O probe may take to open its disk and
/// quit (it takes well under a second).
const DISK_PROBE_LIMIT: Duration = Duration::from_secs(10);

/// Probes how `binary` can do a run's disk I/O with images in `dir`:
/// [`direct_io_check`] of `dir`, then, if that passes, QEMU opening a small
/// sparse image there with `cache=none` and each AIO engine of
/// [`DiskAio::PREFERENCE`] in turn, stopping at the first that works. Each
/// try is a QEMU without a guest (`-machine none`) that opens the disk and
/// quits through its monitor; it boots nothing. `-drive help` would not do:
/// it lists options, not whether this QEMU was built with io_uring or
/// whether this host's kernel lets it set up a ring. The result feeds
/// [`crate::disk_io::decide`].
pub fn probe_disk_io(binary: &Path, dir: &Path) -> DiskIoProbe {
    probe_disk_io_within(binary, dir, DISK_PROBE_LIMIT)
}

fn probe_disk_io_within(binary: &Path, dir: &Path, limit: Duration) -> DiskIoProbe {
    let mut probe = DiskIoProbe { direct_io: direct_io_check(dir), aio: Vec::new() };
    if probe.direct_io.is_err() {
        return probe;
    }
    let image = dir.join(format!(".bootbench-aio-probe-{}.img", std::process::id()));
    match std::fs::File::create(&image).and_then(|f| f.set_len(1 << 20)) {
        Ok(()) => {
            for aio in DiskAio::PREFERENCE {
                let opened = qemu_opens_disk(binary, &image, aio, limit);
                let done = opened.is_ok();
                probe.aio.push((aio, opened));
                if done {
                    break;
                }
            }
        }
        Err(e) => probe.direct_io = Err(format!("cannot make a probe image {}: {e}", image.display())),
    }
    let _ = std::fs::remove_file(&image);
    probe
}

/// Whether `binary` opens `image` with `cache=none,aio=AIO`: `Ok`, or what
/// QEMU said (the first line of its stderr, without the `PROGRAM: -drive
/// VALUE: ` prefix).
fn qemu_opens_disk(binary: &Path, image: &Path, aio: DiskAio, limit: Duration) -> Result<(), String> {
    let drive = format!(
        "file={},format=raw,if=none,id=probe0,cache=none,aio={}",
        escape_option_value(&image.to_string_lossy()),
        aio.name()
    );
    let mut command = guestless_qemu(binary, &["-monitor", "stdio", "-drive", &drive]);
    command.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let stderr = child.stderr.take().map(spawn_stderr_reader);
    if let Some(mut stdin) = child.stdin.take() {
        // A QEMU that failed to open the disk has exited and closed its
        // stdin already; its stderr says why.
        let _ = stdin.write_all(b"quit\n");
    }
    let status = match wait_bounded(&mut child, limit) {
        Ok(Some(st)) => Ok(st),
        Ok(None) => {
            let _ = kill_and_reap(&mut child);
            Err(format!("QEMU did not open the disk and quit within {limit:?}"))
        }
        Err(e) => {
            let _ = kill_and_reap(&mut child);
            Err(format!("cannot wait for QEMU: {e}"))
        }
    };
    let text = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    let status = status?;
    if status.success() {
        return Ok(());
    }
    let prefix = format!("{}: -drive {drive}: ", binary.display());
    let said =
        text.lines().map(str::trim).find(|l| !l.is_empty()).map(|l| l.strip_prefix(prefix.as_str()).unwrap_or(l));
    Err(match said {
        Some(line) => line.to_string(),
        None => format!("QEMU exited with {status} and said nothing"),
    })
}

fn spawn_error(binary: &Path, source: io::Error) -> RunnerError {
    if source.kind() == io::ErrorKind::NotFound {
        RunnerError::QemuNotFound { binary: binary.to_path_buf() }
    } else {
        RunnerError::Spawn { binary: binary.to_path_buf(), source }
    }
}

/// Why the main loop stopped.
enum Stop {
    /// QEMU closed its console (it is exiting).
    Eof,
    /// QEMU exited while something else still held its console open.
    Exited(ExitStatus),
    /// A deadline passed.
    Deadline(Deadline),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deadline {
    AfterPanic,
    AfterPoweroff,
    Boot,
    Silence,
    Total,
}

/// When things happened, relative to the spawn.
struct Clock {
    start: Instant,
    last_byte: Instant,
    hello: Option<Instant>,
    poweroff: Option<Instant>,
    panic: Option<Instant>,
}

impl Clock {
    /// The earliest deadline still pending.
    fn next_deadline(&self, t: &Timeouts) -> (Deadline, Instant) {
        let mut all = vec![(Deadline::Total, self.start + t.total), (Deadline::Silence, self.last_byte + t.silence)];
        if self.hello.is_none() {
            all.push((Deadline::Boot, self.start + t.boot));
        }
        if let Some(p) = self.poweroff {
            all.push((Deadline::AfterPoweroff, p + t.after_poweroff));
        }
        if let Some(p) = self.panic {
            all.push((Deadline::AfterPanic, p + t.after_panic));
        }
        all.into_iter().min_by_key(|&(_, at)| at).unwrap_or((Deadline::Total, self.start + t.total))
    }
}

fn deadline_detail(d: Deadline, t: &Timeouts) -> String {
    match d {
        Deadline::AfterPanic => format!("QEMU did not exit within {:?} of the kernel panic", t.after_panic),
        Deadline::AfterPoweroff => {
            format!("QEMU did not exit within {:?} of the init's poweroff event", t.after_poweroff)
        }
        Deadline::Boot => format!("the init did not say hello within {:?}", t.boot),
        Deadline::Silence => format!("no console output for {:?}", t.silence),
        Deadline::Total => format!("the boot did not finish within {:?}", t.total),
    }
}

/// Feeds a chunk and stamps the events it completed.
fn take_bytes(scan: &mut ConsoleScan, clock: &mut Clock, bytes: &[u8], now: Instant) {
    scan.feed_bytes(bytes);
    clock.last_byte = now;
    if clock.hello.is_none() && scan.hello_seen() {
        clock.hello = Some(now);
    }
    if clock.poweroff.is_none() && scan.poweroff_seen() {
        clock.poweroff = Some(now);
    }
    if clock.panic.is_none() && scan.panic_line().is_some() {
        clock.panic = Some(now);
    }
}

/// Boots `spec` once and classifies the boot.
///
/// QEMU runs in its own process group with stdin on /dev/null; its console
/// (stdout) is read as it arrives and its stderr is kept. The `boot`
/// timeout ends at the init's `hello` event, `silence` restarts on every
/// console byte, `total` is absolute. After a `Kernel panic` line QEMU gets
/// `after_panic` to exit by itself. When a limit passes, QEMU's whole
/// process group is killed with SIGKILL and reaped. After QEMU ends, the
/// results port file (if any) is merged into the console's stream.
///
/// Errors are only for boots that could not start (no QEMU binary, bad
/// spec); everything after the spawn is in the outcome's classification.
pub fn boot(spec: &BootSpec) -> Result<BootOutcome, RunnerError> {
    boot_observed(spec, &mut |_| {})
}

/// [`boot`], calling `observe` with what the guest is doing each time the
/// console shows a change (the init's hello, a workload ending, an
/// `alive` event naming the workload that runs), as it happens: for a
/// progress display.
pub fn boot_observed(spec: &BootSpec, observe: &mut dyn FnMut(&GuestProgress)) -> Result<BootOutcome, RunnerError> {
    let cmd = spec.qemu_command()?;
    let argv: Vec<String> = std::iter::once(cmd.program().as_os_str().to_os_string())
        .chain(cmd.argv())
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut notes = Vec::new();
    if let Some(port) = &spec.results_port {
        // A file left from an earlier boot must not count for this one.
        match std::fs::remove_file(port) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                notes.push(format!("cannot remove old results port file {}: {e}", port.display()))
            }
            _ => {}
        }
    }

    let mut command = cmd.command();
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and only
    // calls prctl(2) and getppid(2), which are async-signal-safe, and
    // allocates nothing.
    unsafe {
        command.pre_exec(move || die_with_parent(parent));
    }
    let start = Instant::now();
    let mut child = command.spawn().map_err(|e| spawn_error(cmd.program(), e))?;
    let pid = child.id();
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let console = spawn_reader(stdout);
    let stderr_thread = spawn_stderr_reader(stderr);

    let mut scan = ConsoleScan::new();
    let mut seen = GuestProgress::default();
    let mut clock = Clock { start, last_byte: start, hello: None, poweroff: None, panic: None };
    let t = &spec.timeouts;
    let wait_err = |source| RunnerError::Wait { pid, source };

    let stop = loop {
        let (which, at) = clock.next_deadline(t);
        let now = Instant::now();
        if now >= at {
            break Stop::Deadline(which);
        }
        match console.recv_timeout((at - now).min(EXIT_POLL)) {
            Ok(Feed::Bytes(b)) => {
                take_bytes(&mut scan, &mut clock, &b, Instant::now());
                if *scan.progress() != seen {
                    seen = scan.progress().clone();
                    observe(&seen);
                }
            }
            Ok(Feed::Eof) | Err(RecvTimeoutError::Disconnected) => break Stop::Eof,
            Err(RecvTimeoutError::Timeout) => {
                if let Some(st) = child.try_wait().map_err(wait_err)? {
                    break Stop::Exited(st);
                }
            }
        }
    };

    let (status, end, hang_detail) = match stop {
        Stop::Eof => match wait_bounded(&mut child, EXIT_AFTER_EOF).map_err(wait_err)? {
            Some(st) => (st, exited(st), String::new()),
            None => {
                let st = kill_and_reap(&mut child).map_err(wait_err)?;
                notes.push(format!("QEMU closed its console but did not exit within {EXIT_AFTER_EOF:?}; killed it"));
                (st, exited(st), String::new())
            }
        },
        Stop::Exited(st) => (st, exited(st), String::new()),
        Stop::Deadline(d) => {
            let st = kill_and_reap(&mut child).map_err(wait_err)?;
            let detail = deadline_detail(d, t);
            notes.push(format!("killed QEMU: {detail}"));
            let end = match d {
                Deadline::AfterPanic => RunEnd::KilledAfterPanic,
                Deadline::AfterPoweroff => RunEnd::TimedOut(HangKind::Poweroff),
                Deadline::Boot => RunEnd::TimedOut(HangKind::Boot),
                Deadline::Silence => RunEnd::TimedOut(HangKind::Silence),
                Deadline::Total => RunEnd::TimedOut(HangKind::Total),
            };
            (st, end, detail)
        }
    };
    let wall = start.elapsed();

    // Output still in the pipe when QEMU ended.
    if !matches!(stop, Stop::Eof) {
        let until = Instant::now() + DRAIN;
        while let Ok(Feed::Bytes(b)) = console.recv_timeout(until.saturating_duration_since(Instant::now())) {
            take_bytes(&mut scan, &mut clock, &b, Instant::now());
        }
    }
    scan.finish();
    let qemu_stderr = stderr_thread.join().unwrap_or_default();

    if let (Some(sig), RunEnd::Exited { .. }) = (status.signal(), end) {
        notes.push(format!("QEMU was killed by signal {sig}, not by bootbench"));
    }
    if let Some(port) = &spec.results_port {
        match std::fs::read(port) {
            Ok(bytes) => scan.feed_port_text(&String::from_utf8_lossy(&bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                notes.push(format!("results port file {} was not created", port.display()))
            }
            Err(e) => notes.push(format!("cannot read results port file {}: {e}", port.display())),
        }
    }
    if scan.log_dropped() > 0 {
        notes.push(format!("console log cut at {MAX_LOG_BYTES} bytes; {} more bytes not kept", scan.log_dropped()));
    }
    if scan.kernel_errors_dropped() > 0 {
        notes.push(format!(
            "{} more kernel error lines after the first {MAX_KERNEL_ERRORS} not kept",
            scan.kernel_errors_dropped()
        ));
    }

    for e in scan.workload_stream_errors() {
        notes.push(format!("a workload's result is not kept: {e}"));
    }
    let damaged_events = scan.decoder().damaged_events();
    if !damaged_events.is_empty() {
        let dropped = scan.decoder().damaged_events_dropped();
        let more = if dropped > 0 { format!(" (and {dropped} more)") } else { String::new() };
        notes.push(format!(
            "ignored {} event lines that fail their checksum or were cut{more}: {damaged_events:?}",
            damaged_events.len()
        ));
    }

    let facts = RunFacts::from_scan(&scan, end, hang_detail, qemu_stderr.clone());
    let Judgement { classification, late_failure } = judge(&facts);
    let (document, stream_error) = match scan.decoder().last_document() {
        Ok(doc) => (Some(doc), None),
        Err(e) => (None, Some(e.to_string())),
    };
    Ok(BootOutcome {
        classification,
        console_log: scan.log_text(),
        document,
        stream_error,
        workload_results: scan.workload_documents(),
        events: scan.events().to_vec(),
        kernel_errors: scan.kernel_errors().to_vec(),
        late_failure,
        timings: Timings {
            wall,
            to_hello: clock.hello.map(|h| h - start),
            to_poweroff: clock.poweroff.map(|p| p - start),
        },
        qemu_status: status.code(),
        argv,
        qemu_stderr,
        notes,
    })
}

fn exited(st: ExitStatus) -> RunEnd {
    RunEnd::Exited { code: st.code(), signal: st.signal() }
}
