//! Booting one kernel in QEMU: spawn it, read its console, enforce the boot,
//! silence and total timeouts, kill and reap it, and classify the boot. This
//! is the only code that owns a QEMU process. It never takes QEMU's exit
//! status as the verdict: only an intact result stream makes a boot `ok`.

use crate::accel::Accel;
use crate::arch::ArchProfile;
use crate::argv::{ArgvError, DiskFormat, QemuCommand};
use crate::cmdline::{CmdlineError, KernelCmdline};
use crate::console_scan::{ConsoleScan, MAX_KERNEL_ERRORS, MAX_LOG_BYTES};
use crate::kernel_image::{check_kernel, KernelImageError};
use crate::outcome::{classify, BootOutcome, HangKind, RunEnd, RunFacts, Timings};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// The name of the virtio-serial port that carries the result stream; the
/// init finds it under /sys/class/virtio-ports/*/name.
pub const RESULTS_PORT_NAME: &str = "org.bootbench.results";

/// The cmdline key that tells the init which virtio port to write results
/// to (parsed by `loads::suite`); [`BootSpec::qemu_command`] adds it when
/// the spec has a results port.
pub const PORT_CMDLINE_KEY: &str = "bootbench.port";

/// QEMU stderr kept in the outcome.
const MAX_STDERR_BYTES: usize = 1 << 20;

/// How often the runner checks whether QEMU exited while its console stays
/// open (only a helper process holding the pipe can cause that).
const EXIT_POLL: Duration = Duration::from_millis(200);

/// How long console output still in flight is awaited after QEMU ended.
const DRAIN: Duration = Duration::from_millis(500);

/// How long QEMU may take to exit after closing its console.
const EXIT_AFTER_EOF: Duration = Duration::from_secs(10);

/// Errors that keep a boot from happening at all. Everything that happens
/// once QEMU runs (panic, hang, QEMU failing) is a [`crate::outcome::Classification`].
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The QEMU binary is not installed.
    #[error("QEMU binary '{}' not found; run scripts/setup to install QEMU", binary.display())]
    QemuNotFound {
        /// The binary looked for.
        binary: PathBuf,
    },
    /// QEMU could not be started for another reason.
    #[error("cannot start QEMU binary '{}'", binary.display())]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// The error from exec.
        #[source]
        source: io::Error,
    },
    /// The QEMU argv is invalid (e.g. a missing initramfs).
    #[error(transparent)]
    Argv(#[from] ArgvError),
    /// The kernel cmdline is invalid.
    #[error(transparent)]
    Cmdline(#[from] CmdlineError),
    /// The kernel image is unreadable or for another arch.
    #[error(transparent)]
    Kernel(#[from] KernelImageError),
    /// The cmdline would send the console somewhere the host does not read.
    #[error("kernel cmdline '{cmdline}' does not set console={console}, so the host would see no console output")]
    NoConsole {
        /// The cmdline.
        cmdline: String,
        /// The console the profile reads.
        console: &'static str,
    },
    /// Waiting for QEMU failed.
    #[error("cannot wait for QEMU (pid {pid})")]
    Wait {
        /// QEMU's pid.
        pid: u32,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// `qemu --version` failed.
    #[error("'{} --version' failed: {detail}", binary.display())]
    Version {
        /// The binary.
        binary: PathBuf,
        /// Its stderr or exit status.
        detail: String,
    },
}

/// The limits of one boot.
///
/// The defaults suit TCG on a slow host: `boot` 60 s (a Debian kernel
/// reaches the init in about 4 s under TCG), `silence` 300 s (so the init
/// must print something, e.g. a progress event, at least every 5 minutes),
/// `total` 30 minutes, `after_panic` 5 s, `after_poweroff` 30 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From spawning QEMU until the init's `hello` event.
    pub boot: Duration,
    /// Without any console byte.
    pub silence: Duration,
    /// The whole boot, from spawning QEMU.
    pub total: Duration,
    /// For QEMU to exit by itself after a kernel panic line (with `panic=-1`
    /// and `-no-reboot` it normally does at once).
    pub after_panic: Duration,
    /// For QEMU to exit after the init's `poweroff` event.
    pub after_poweroff: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            boot: Duration::from_secs(60),
            silence: Duration::from_secs(300),
            total: Duration::from_secs(30 * 60),
            after_panic: Duration::from_secs(5),
            after_poweroff: Duration::from_secs(30),
        }
    }
}

/// Everything needed to boot a kernel once.
#[derive(Debug, Clone, PartialEq)]
pub struct BootSpec {
    /// The arch profile; its `qemu_binary` may be overridden.
    pub profile: ArchProfile,
    /// The accelerator.
    pub accel: Accel,
    /// vCPUs.
    pub smp: u32,
    /// Guest memory in MiB.
    pub mem_mib: u64,
    /// The CPU model; `None` uses [`Accel::default_cpu`].
    pub cpu: Option<String>,
    /// The kernel image.
    pub kernel: PathBuf,
    /// The initramfs.
    pub initrd: PathBuf,
    /// The kernel command line; it must set `console=` to the profile's
    /// console. With a results port, `bootbench.port=` is added to it.
    pub cmdline: KernelCmdline,
    /// A host file for the virtio results port ([`RESULTS_PORT_NAME`]); it is
    /// removed before the boot and read after it.
    pub results_port: Option<PathBuf>,
    /// virtio-blk disks, in order (the first is /dev/vda).
    pub disks: Vec<(PathBuf, DiskFormat)>,
    /// Whether to give the guest a virtio-net NIC on QEMU's user network.
    pub user_net: bool,
    /// The limits.
    pub timeouts: Timeouts,
    /// Extra QEMU arguments, appended verbatim.
    pub extra_args: Vec<OsString>,
}

impl BootSpec {
    /// A spec with the defaults: TCG, 2 vCPUs, the profile's memory and CPU
    /// model, [`ArchProfile::base_cmdline`], no results port, no disks, no
    /// network, default [`Timeouts`].
    ///
    /// ```
    /// # use qemu::{Arch, BootSpec};
    /// let mut spec = BootSpec::new(Arch::X86_64.profile(), "/boot/vmlinuz", "/tmp/initramfs.cpio.gz").unwrap();
    /// spec.cmdline.extend_raw("quiet").unwrap();
    /// assert_eq!(spec.cmdline.as_str(), "console=ttyS0 panic=-1 quiet");
    /// ```
    pub fn new(
        profile: ArchProfile,
        kernel: impl Into<PathBuf>,
        initrd: impl Into<PathBuf>,
    ) -> Result<BootSpec, CmdlineError> {
        Ok(BootSpec {
            accel: Accel::Tcg,
            smp: 2,
            mem_mib: profile.default_mem_mib,
            cpu: None,
            kernel: kernel.into(),
            initrd: initrd.into(),
            cmdline: profile.base_cmdline()?,
            results_port: None,
            disks: Vec::new(),
            user_net: false,
            timeouts: Timeouts::default(),
            extra_args: Vec::new(),
            profile,
        })
    }

    /// The QEMU command this spec runs, after checking that the kernel
    /// image suits the arch and that the cmdline names the console. With a
    /// results port, the cmdline passed to the kernel also gets
    /// `bootbench.port=org.bootbench.results` (an error if it names another
    /// port).
    pub fn qemu_command(&self) -> Result<QemuCommand, RunnerError> {
        if self.cmdline.value("console") != Some(self.profile.console) {
            return Err(RunnerError::NoConsole { cmdline: self.cmdline.to_string(), console: self.profile.console });
        }
        check_kernel(&self.kernel, self.profile.arch)?;
        let mut cmd = QemuCommand::new(&self.profile);
        cmd.accel(self.accel).smp(self.smp)?.memory_mib(self.mem_mib)?;
        if let Some(cpu) = self.cpu.as_deref().or(self.accel.default_cpu(&self.profile)) {
            cmd.cpu(cpu)?;
        }
        let mut cmdline = self.cmdline.clone();
        if matches!(self.accel, Accel::Icount { .. }) {
            for (key, value) in crate::accel::ICOUNT_DERANDOMISE {
                if cmdline.contains(key) {
                    continue;
                }
                match value {
                    Some(v) => cmdline.push(key, v)?,
                    None => cmdline.push_flag(key)?,
                };
            }
        }
        if let Some(port) = &self.results_port {
            cmd.results_port(RESULTS_PORT_NAME, port)?;
            if cmdline.value(PORT_CMDLINE_KEY) != Some(RESULTS_PORT_NAME) {
                cmdline.push(PORT_CMDLINE_KEY, RESULTS_PORT_NAME)?;
            }
        }
        cmd.kernel(&self.kernel)?.initrd(&self.initrd)?.append(&cmdline)?;
        for (path, format) in &self.disks {
            cmd.drive_virtio_blk(path, *format)?;
        }
        if self.user_net {
            cmd.netdev_user();
        }
        cmd.extra_args(&self.extra_args);
        Ok(cmd)
    }
}

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

fn spawn_error(binary: &Path, source: io::Error) -> RunnerError {
    if source.kind() == io::ErrorKind::NotFound {
        RunnerError::QemuNotFound { binary: binary.to_path_buf() }
    } else {
        RunnerError::Spawn { binary: binary.to_path_buf(), source }
    }
}

/// What the console reader thread sends.
enum Feed {
    Bytes(Vec<u8>),
    Eof,
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

/// Makes the child die with us (so an interrupted `bootbench` leaves no QEMU
/// behind, even though QEMU has its own process group). Runs between fork
/// and exec, so it only makes async-signal-safe calls.
fn die_with_parent(parent: Pid) -> io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
    if nix::unistd::getppid() != parent {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// Kills QEMU and everything in its process group, then reaps QEMU. Only
/// called while QEMU is not yet reaped, so its pid (the group id) cannot
/// have been reused.
fn kill_and_reap(child: &mut Child) -> io::Result<ExitStatus> {
    match i32::try_from(child.id()) {
        Ok(pid) if killpg(Pid::from_raw(pid), Signal::SIGKILL).is_ok() => {}
        _ => child.kill()?,
    }
    child.wait()
}

/// Waits up to `limit` for QEMU to exit by itself.
fn wait_bounded(child: &mut Child, limit: Duration) -> io::Result<Option<ExitStatus>> {
    let until = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(Some(st));
        }
        if Instant::now() >= until {
            return Ok(None);
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn spawn_reader<R: Read + Send + 'static>(mut src: R) -> Receiver<Feed> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send(Feed::Bytes(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(Feed::Eof);
    });
    rx
}

fn spawn_stderr_reader<R: Read + Send + 'static>(mut src: R) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = MAX_STDERR_BYTES.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
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
            Ok(Feed::Bytes(b)) => take_bytes(&mut scan, &mut clock, &b, Instant::now()),
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

    let facts = RunFacts::from_scan(&scan, end, hang_detail, qemu_stderr.clone());
    let classification = classify(&facts);
    let (document, stream_error) = match scan.decoder().last_document() {
        Ok(doc) => (Some(doc), None),
        Err(e) => (None, Some(e.to_string())),
    };
    Ok(BootOutcome {
        classification,
        console_log: scan.log_text(),
        document,
        stream_error,
        events: scan.events().to_vec(),
        kernel_errors: scan.kernel_errors().to_vec(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;
    use crate::outcome::Classification;
    use loads::console_protocol::{encode, event, EVENT_HELLO, EVENT_POWEROFF};
    use std::os::unix::fs::PermissionsExt;

    /// A directory with a fake x86_64 kernel, an initramfs, and a fake
    /// "QEMU" shell script.
    struct Fake {
        dir: tempfile::TempDir,
    }

    impl Fake {
        fn new(script_body: &str) -> Fake {
            let dir = tempfile::tempdir().unwrap();
            let mut bz = vec![0u8; 0x240];
            bz[0x202..0x206].copy_from_slice(b"HdrS");
            bz[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
            bz[0x236] = 1;
            std::fs::write(dir.path().join("vmlinuz"), bz).unwrap();
            std::fs::write(dir.path().join("initrd"), b"").unwrap();
            let qemu = dir.path().join("fake-qemu");
            std::fs::write(&qemu, format!("#!/bin/sh\n{script_body}\n")).unwrap();
            std::fs::set_permissions(&qemu, std::fs::Permissions::from_mode(0o755)).unwrap();
            Fake { dir }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        fn spec(&self) -> BootSpec {
            let mut profile = Arch::X86_64.profile();
            profile.qemu_binary = self.path("fake-qemu");
            let mut spec = BootSpec::new(profile, self.path("vmlinuz"), self.path("initrd")).unwrap();
            spec.timeouts = Timeouts {
                boot: Duration::from_secs(20),
                silence: Duration::from_secs(20),
                total: Duration::from_secs(40),
                after_panic: Duration::from_secs(1),
                after_poweroff: Duration::from_secs(1),
            };
            spec
        }

        /// Replaces the fake QEMU's script body.
        fn set_script(&self, body: &str) {
            std::fs::write(self.path("fake-qemu"), format!("#!/bin/sh\n{body}\n")).unwrap();
        }

        /// Writes `text` to a file the script can `cat`.
        fn text_file(&self, name: &str, text: &str) -> PathBuf {
            let p = self.path(name);
            std::fs::write(&p, text).unwrap();
            p
        }
    }

    /// Boots, retrying while the just-written script is busy (ETXTBSY: a
    /// test thread forked while another held the script open for writing).
    fn boot_retrying(spec: &BootSpec) -> Result<BootOutcome, RunnerError> {
        for _ in 0..50 {
            match boot(spec) {
                Err(RunnerError::Spawn { source, .. }) if source.raw_os_error() == Some(libc::ETXTBSY) => {
                    thread::sleep(Duration::from_millis(20))
                }
                other => return other,
            }
        }
        boot(spec)
    }

    fn stream(doc: &str) -> String {
        encode("t", doc).into_iter().map(|l| l + "\n").collect()
    }

    #[test]
    fn full_stream_then_exit_is_ok_and_argv_arrives_intact() {
        let doc = r#"{"schema_version":1,"status":"complete"}"#;
        let fake = Fake::new("");
        let console = fake.text_file(
            "console.txt",
            &format!(
                "Linux version 6.1\r\n{}\r\n{}{}\n",
                event(EVENT_HELLO, "v1"),
                stream(doc),
                event(EVENT_POWEROFF, "")
            ),
        );
        let args = fake.path("args.txt");
        fake.set_script(&format!(
            "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{}'\ncat '{}'\nexit 0",
            args.display(),
            console.display()
        ));
        let mut spec = fake.spec();
        spec.cmdline.extend_raw("quiet bootbench.label=\"a b\"").unwrap();
        let out = boot_retrying(&spec).unwrap();
        assert_eq!(out.classification, Classification::Ok, "{out:#?}");
        assert_eq!(out.document.as_deref(), Some(doc));
        assert_eq!(out.qemu_status, Some(0));
        assert!(out.timings.to_hello.is_some() && out.timings.to_poweroff.is_some());
        assert_eq!(out.events[0], ("hello".to_string(), "v1".to_string()));
        let got: Vec<String> = std::fs::read_to_string(&args).unwrap().lines().map(str::to_string).collect();
        let i = got.iter().position(|a| a == "-append").unwrap();
        assert_eq!(got[i + 1], r#"console=ttyS0 panic=-1 quiet bootbench.label="a b""#);
        assert_eq!(got, out.argv[1..]);
    }

    #[test]
    fn panic_is_classified_without_waiting_for_the_total_timeout() {
        // `sleep` is a child of the script and holds the console open: the
        // whole process group must be killed.
        let fake = Fake::new(
            "echo '[    0.5] Linux version'\necho '[    1.2] Kernel panic - not syncing: VFS: Unable to mount root fs'\nsleep 60\n",
        );
        let t0 = Instant::now();
        let out = boot_retrying(&fake.spec()).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
        assert_eq!(
            out.classification,
            Classification::Panic {
                line: "[    1.2] Kernel panic - not syncing: VFS: Unable to mount root fs".to_string()
            }
        );
        assert_eq!(out.qemu_status, None);
        assert!(out.notes.iter().any(|n| n.contains("of the kernel panic")), "{:?}", out.notes);
    }

    #[test]
    fn silent_guest_is_a_boot_hang() {
        let fake = Fake::new("exec sleep 60");
        let mut spec = fake.spec();
        spec.timeouts.boot = Duration::from_millis(700);
        let t0 = Instant::now();
        let out = boot_retrying(&spec).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(10));
        match out.classification {
            Classification::Hang { which: HangKind::Boot, detail } => assert!(detail.contains("hello"), "{detail}"),
            other => panic!("expected boot hang, got {other:?}"),
        }
    }

    #[test]
    fn silence_after_hello_is_a_silence_hang() {
        let fake = Fake::new(&format!("echo '{}'\nexec sleep 60", event(EVENT_HELLO, "x")));
        let mut spec = fake.spec();
        spec.timeouts.boot = Duration::from_millis(300);
        spec.timeouts.silence = Duration::from_millis(800);
        let out = boot_retrying(&spec).unwrap();
        assert!(matches!(out.classification, Classification::Hang { which: HangKind::Silence, .. }), "{out:#?}");
        assert!(out.timings.to_hello.is_some());
    }

    #[test]
    fn stuck_power_off_with_complete_stream_is_ok() {
        let fake = Fake::new("");
        let console = fake.text_file(
            "c.txt",
            &format!("{}\n{}{}\n", event(EVENT_HELLO, "x"), stream("{}"), event(EVENT_POWEROFF, "")),
        );
        fake.set_script(&format!("cat '{}'\nexec sleep 60", console.display()));
        let out = boot_retrying(&fake.spec()).unwrap();
        assert_eq!(out.classification, Classification::Ok);
        assert!(out.notes.iter().any(|n| n.contains("poweroff event")), "{:?}", out.notes);
    }

    #[test]
    fn results_port_repairs_a_damaged_console_stream() {
        let doc = "p".repeat(900);
        let lines = encode("t", &doc);
        let fake = Fake::new("");
        let mut partial = format!("{}\n", event(EVENT_HELLO, "x"));
        for (i, l) in lines.iter().enumerate() {
            if i != 2 {
                partial.push_str(l);
                partial.push('\n');
            }
        }
        let console = fake.text_file("c.txt", &partial);
        let full = fake.text_file("full.txt", &stream(&doc));
        // Like QEMU, the script creates the file named in the -chardev option.
        fake.set_script(&format!(
            "for a in \"$@\"; do case \"$a\" in file,id=port0,path=*) port=\"${{a#file,id=port0,path=}}\";; esac; done\ncat '{}' > \"$port\"\ncat '{}'",
            full.display(),
            console.display()
        ));
        let mut spec = fake.spec();
        let port = fake.path("results.port");
        std::fs::write(&port, "stale").unwrap();
        spec.results_port = Some(port.clone());
        let out = boot_retrying(&spec).unwrap();
        assert_eq!(out.classification, Classification::Ok, "{out:#?}");
        assert_eq!(out.document.as_deref(), Some(doc.as_str()));
        assert!(out.argv.iter().any(|a| a.ends_with(&format!("name={RESULTS_PORT_NAME}"))));
        assert!(out.argv.contains(&"console=ttyS0 panic=-1 bootbench.port=org.bootbench.results".to_string()));
        // A cmdline naming another port contradicts the spec.
        let mut other = spec.clone();
        other.cmdline.push(PORT_CMDLINE_KEY, "elsewhere").unwrap();
        assert!(matches!(other.qemu_command(), Err(RunnerError::Cmdline(CmdlineError::DuplicateKey { .. }))));

        // Without the port the same console is incomplete, naming chunk 2.
        fake.set_script(&format!("cat '{}'", console.display()));
        spec.results_port = None;
        match boot_retrying(&spec).unwrap().classification {
            Classification::Incomplete { detail } => assert!(detail.contains("missing [2]"), "{detail}"),
            other => panic!("expected incomplete, got {other:?}"),
        }
    }

    #[test]
    fn qemu_failing_before_hello_keeps_its_stderr() {
        let fake = Fake::new("echo 'qemu-system-x86_64: could not load kernel' >&2\nexit 1");
        let out = boot_retrying(&fake.spec()).unwrap();
        match &out.classification {
            Classification::QemuFailure { status: Some(1), detail } => {
                assert!(detail.contains("could not load kernel"), "{detail}")
            }
            other => panic!("expected qemu failure, got {other:?}"),
        }
        assert!(out.qemu_stderr.contains("could not load kernel"));
    }

    #[test]
    fn missing_binary_is_a_clear_error() {
        let fake = Fake::new("");
        let mut spec = fake.spec();
        spec.profile.qemu_binary = PathBuf::from("qemu-system-does-not-exist");
        let err = boot(&spec).unwrap_err();
        assert_eq!(
            err.to_string(),
            "QEMU binary 'qemu-system-does-not-exist' not found; run scripts/setup to install QEMU"
        );
        assert!(matches!(qemu_version(Path::new("qemu-system-does-not-exist")), Err(RunnerError::QemuNotFound { .. })));
    }

    #[test]
    fn icount_boots_are_derandomised_unless_the_cmdline_says_otherwise() {
        let fake = Fake::new("");
        let mut spec = fake.spec();
        let appended = |spec: &BootSpec| {
            let argv = spec.qemu_command().unwrap().argv();
            let i = argv.iter().position(|a| a == "-append").unwrap();
            argv[i + 1].to_string_lossy().into_owned()
        };
        spec.accel = Accel::Tcg;
        assert_eq!(appended(&spec), "console=ttyS0 panic=-1", "real-clock boots keep their randomisation");
        spec.accel = Accel::Icount { shift: 0 };
        assert_eq!(appended(&spec), "console=ttyS0 panic=-1 nokaslr norandmaps randomize_kstack_offset=off");
        // The user's own choice of a key stands, and is not duplicated.
        spec.cmdline.push("randomize_kstack_offset", "on").unwrap();
        assert_eq!(appended(&spec), "console=ttyS0 panic=-1 randomize_kstack_offset=on nokaslr norandmaps");
        // No room left for the words: a clear error naming the word, no boot.
        spec.cmdline = KernelCmdline::new("console=ttyS0 panic=-1".len() + 1).unwrap();
        spec.cmdline.extend_raw("console=ttyS0 panic=-1").unwrap();
        match spec.qemu_command() {
            Err(RunnerError::Cmdline(CmdlineError::TooLong { word, .. })) => assert_eq!(word, "nokaslr"),
            other => panic!("expected a too-long cmdline, got {other:?}"),
        }
    }

    #[test]
    fn spec_checks_console_and_kernel_arch() {
        let fake = Fake::new("");
        let mut spec = fake.spec();
        spec.profile = Arch::Ppc64le.profile();
        spec.cmdline = spec.profile.base_cmdline().unwrap();
        assert!(matches!(spec.qemu_command(), Err(RunnerError::Kernel(_))));
        let mut spec = fake.spec();
        spec.cmdline = KernelCmdline::new(2048).unwrap();
        spec.cmdline.push("console", "tty0").unwrap();
        assert!(matches!(spec.qemu_command(), Err(RunnerError::NoConsole { .. })));
    }

    #[test]
    fn version_of_a_fake_binary() {
        let fake = Fake::new("echo 'QEMU emulator version 10.0.2'\necho 'Copyright'");
        let bin = fake.path("fake-qemu");
        let mut v = qemu_version(&bin);
        for _ in 0..50 {
            match &v {
                Err(RunnerError::Spawn { source, .. }) if source.raw_os_error() == Some(libc::ETXTBSY) => {
                    thread::sleep(Duration::from_millis(20));
                    v = qemu_version(&bin);
                }
                _ => break,
            }
        }
        assert_eq!(v.unwrap(), "QEMU emulator version 10.0.2");
    }
}
