//! A lab machine's agent (`bootbench.role=agent`, see
//! `loads::lab_protocol`): load the packed modules, bring the network up,
//! say hello to the lab receiver, then ask for jobs; a job's userland pack
//! is put into the machine's pack store when it is not there yet
//! (`pack_store`), its kernel and initramfs are downloaded into the
//! rootfs, checked, announced, and booted with kexec. A job that cannot be booted here is reported `failed` and
//! the agent asks for the next one. A receiver that stays unreachable
//! (bounded retries with backoff) or refuses the machine's token ends in a
//! console line saying why, and a power-off. It never runs the suite, and
//! never prints the token. Never panics.
//!
//! The decisions ([`serve`]) are apart from the receiver and the machine
//! ([`Lab`], [`Machine`]), so that tests drive them with fakes.

use crate::bounded_child;
use crate::hw_watchdog;
use crate::kexec;
use crate::module_loader;
use crate::netconsole::Configured;
use crate::network::{self, NetRequest};
use crate::pack_store;
use crate::power_off;
use crate::result_channels::{console_line, drain_console, say};
use crate::result_upload;
use crate::secrets::Secrets;
use loads::console_protocol::{
    self, EVENT_AGENT_ERROR, EVENT_AGENT_FAILED, EVENT_AGENT_HELLO, EVENT_AGENT_JOB, EVENT_AGENT_KEXEC,
    EVENT_AGENT_PACK, EVENT_AGENT_POWEROFF, EVENT_AGENT_WAIT,
};
use loads::error_chain::error_chain;
use loads::lab_protocol::{
    self, FileKind, Hello, HelloReply, JobEvent, JobFile, JobOffer, JobPack, NextAnswer, MAX_JOB_FILE_BYTES,
    MAX_PACK_BYTES, MAX_POLL_S,
};
use loads::measure::boottime_s;
use loads::suite::CmdlineConfig;
use nix::sys::signalfd::SignalFd;
use results_uploader::{ExpectedFile, LabClient, LabError, RetryPolicy, UploadSettings};
use std::io::{Read, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a job's files are written: the rootfs (the initramfs, in RAM).
pub const JOB_DIR: &str = "/lab-job";
/// Memory left free beyond twice a job's files: `kexec_file_load` copies
/// them into the kernel while the downloaded files still fill the rootfs.
pub const MEMORY_MARGIN: u64 = 64 << 20;
/// The pause after a failed job, so that a receiver offering the same
/// failing job again cannot make the agent spin.
pub const FAILED_PAUSE: Duration = Duration::from_secs(5);
/// Network bring-up attempts before the agent gives up.
pub const NETWORK_ATTEMPTS: u32 = 3;

/// How hard the agent tries to reach the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pacing {
    /// The first pause after a failed request; it doubles after each.
    pub first_delay: Duration,
    /// The longest pause.
    pub max_delay: Duration,
    /// When the pauses since the last answer reach this, the agent gives
    /// up (the requests' own timeouts come on top).
    pub budget: Duration,
}

impl Default for Pacing {
    /// 2, 4, 8, 16, then 30 s pauses, for 150 s in all: a receiver that
    /// restarts is waited for; one that is gone powers the machine off
    /// within about three minutes.
    fn default() -> Self {
        Pacing {
            first_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(30),
            budget: Duration::from_secs(150),
        }
    }
}

/// How the agent's work ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentEnd {
    /// A job's kernel was booted (only a fake [`Machine`] returns this).
    Booted {
        /// The job.
        job: u64,
    },
    /// The machine is to power off.
    PowerOff {
        /// Why, for people.
        reason: String,
    },
}

/// The lab receiver, as the agent uses it (one attempt per call).
pub trait Lab {
    /// `POST hello`.
    fn hello(&mut self, hello: &Hello) -> Result<HelloReply, LabError>;
    /// `GET next`.
    fn next(&mut self) -> Result<NextAnswer, LabError>;
    /// Downloads a job's file to `dest`, checked against `file`.
    fn fetch(&mut self, job: u64, kind: FileKind, file: &JobFile, dest: &Path) -> Result<(), LabError>;
    /// `POST events`.
    fn report(&mut self, job: u64, event: &JobEvent) -> Result<(), LabError>;
}

/// The machine, as the agent uses it.
pub trait Machine {
    /// Waits.
    fn sleep(&mut self, d: Duration);
    /// Bytes of memory available, if known.
    fn available_memory(&mut self) -> Option<u64>;
    /// Boots the kernel; returns only on failure, with the reason (a fake
    /// returns `Ok` for a boot).
    fn boot(&mut self, kernel: &Path, initrd: &Path, cmdline: &str) -> Result<(), String>;
    /// Prints a console event.
    fn event(&mut self, name: &str, text: &str);
    /// Mounts the pack store labelled `label` for writing; returns where.
    fn open_pack_store(&mut self, label: &str) -> Result<PathBuf, String>;
    /// Unmounts the pack store, its writes on the disk.
    fn close_pack_store(&mut self) -> Result<(), String>;
}

/// Why a request did not get its answer after the retries.
enum Trouble {
    /// The receiver stayed unreachable, or refused the token: power off.
    Stop(AgentEnd),
    /// The receiver answered no (an error status other than 401/403 and
    /// overload, or a bad answer).
    Refused(LabError),
}

/// Runs `op` until it answers, pausing as `pacing` says after each
/// transient failure, and printing each failure.
fn retrying<T>(
    m: &mut impl Machine,
    pacing: &Pacing,
    what: &str,
    mut op: impl FnMut() -> Result<T, LabError>,
) -> Result<T, Trouble> {
    let mut slept = Duration::ZERO;
    let mut delay = pacing.first_delay;
    loop {
        let e = match op() {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let msg = error_chain(&e);
        if e.is_auth_refusal() {
            m.event(EVENT_AGENT_ERROR, &format!("retry_in_s=- error={msg}"));
            return Err(Trouble::Stop(AgentEnd::PowerOff {
                reason: format!("the lab receiver refused this machine's token ({what}): {msg}"),
            }));
        }
        if !e.is_transient() {
            m.event(EVENT_AGENT_ERROR, &format!("retry_in_s=- error={msg}"));
            return Err(Trouble::Refused(e));
        }
        if slept >= pacing.budget {
            m.event(EVENT_AGENT_ERROR, &format!("retry_in_s=- error={msg}"));
            return Err(Trouble::Stop(AgentEnd::PowerOff {
                reason: format!("the lab receiver stayed unreachable for {} s ({what}): {msg}", slept.as_secs()),
            }));
        }
        m.event(EVENT_AGENT_ERROR, &format!("retry_in_s={} error={msg}", delay.as_secs()));
        m.sleep(delay);
        slept += delay;
        delay = delay.saturating_mul(2).min(pacing.max_delay);
    }
}

/// A request that must succeed for the agent to go on: any trouble ends it.
fn required<T>(
    m: &mut impl Machine,
    pacing: &Pacing,
    what: &str,
    op: impl FnMut() -> Result<T, LabError>,
) -> Result<T, AgentEnd> {
    retrying(m, pacing, what, op).map_err(|t| match t {
        Trouble::Stop(end) => end,
        Trouble::Refused(e) => AgentEnd::PowerOff { reason: format!("{what}: {}", error_chain(&e)) },
    })
}

/// How one job ended, when it did not boot.
enum JobEnd {
    Booted,
    Failed(String),
    Stop(AgentEnd),
}

/// Says hello, then serves jobs until one boots or the machine is to
/// power off. Job files go to `dir`.
pub fn serve(lab: &mut impl Lab, m: &mut impl Machine, hello: &Hello, pacing: &Pacing, dir: &Path) -> AgentEnd {
    let reply = match required(m, pacing, "hello", || lab.hello(hello)) {
        Ok(r) => r,
        Err(end) => return end,
    };
    let closed = reply.closed_job.map(|j| j.to_string()).unwrap_or_else(|| "-".into());
    m.event(EVENT_AGENT_HELLO, &format!("closed_job={closed} boottime={:.3}", boottime_s()));
    loop {
        let answer = match required(m, pacing, "next", || lab.next()) {
            Ok(a) => a,
            Err(end) => return end,
        };
        let job = match answer {
            NextAnswer::PowerOff => {
                return AgentEnd::PowerOff { reason: "the lab receiver asked for a power-off".into() }
            }
            NextAnswer::Wait { seconds } => {
                let s = seconds.clamp(1, MAX_POLL_S);
                m.event(EVENT_AGENT_WAIT, &format!("s={s}"));
                m.sleep(Duration::from_secs(s));
                continue;
            }
            NextAnswer::Run { job } => job,
        };
        m.event(
            EVENT_AGENT_JOB,
            &format!("id={} kernel_bytes={} initrd_bytes={}", job.id, job.kernel.bytes, job.initrd.bytes),
        );
        let reason = match run_job(lab, m, pacing, &job, dir) {
            JobEnd::Booted => return AgentEnd::Booted { job: job.id },
            JobEnd::Stop(end) => return end,
            JobEnd::Failed(reason) => reason,
        };
        let _ = std::fs::remove_dir_all(dir);
        m.event(EVENT_AGENT_FAILED, &format!("id={} reason={reason}", job.id));
        let failed = JobEvent::Failed { reason };
        match retrying(m, pacing, "report a failed job", || lab.report(job.id, &failed)) {
            Ok(()) | Err(Trouble::Refused(_)) => {}
            Err(Trouble::Stop(end)) => return end,
        }
        m.sleep(FAILED_PAUSE);
    }
}

/// The memory a job needs: its files twice (the rootfs and the kernel's
/// copy) and a margin.
pub fn memory_needed(job: &JobOffer) -> u64 {
    job.kernel.bytes.saturating_add(job.initrd.bytes).saturating_mul(2).saturating_add(MEMORY_MARGIN)
}

/// Puts the job's pack into the machine's pack store (fetched only when it
/// is not there), and unmounts the store.
fn stage_pack(lab: &mut impl Lab, m: &mut impl Machine, id: u64, pack: &JobPack) -> Result<(), JobEnd> {
    if pack.file.bytes > MAX_PACK_BYTES {
        return Err(JobEnd::Failed(format!(
            "the pack is {} bytes, over the {MAX_PACK_BYTES} an agent fetches",
            pack.file.bytes
        )));
    }
    let root = m.open_pack_store(&pack.label).map_err(|e| JobEnd::Failed(format!("the pack store: {e}")))?;
    let t0 = Instant::now();
    let mut refused = false;
    let staged = pack_store::stage(&root, &pack.label, &pack.file, pack_store::free_bytes, |dest| {
        lab.fetch(id, FileKind::Pack, &pack.file, dest).map_err(|e| {
            refused = e.is_auth_refusal();
            error_chain(&e)
        })
    });
    let closed = m.close_pack_store();
    let staged = match staged {
        Ok(s) => s,
        Err(e) if refused => {
            return Err(JobEnd::Stop(AgentEnd::PowerOff {
                reason: format!(
                    "the lab receiver refused this machine's token (fetching the pack): {}",
                    error_chain(&e)
                ),
            }))
        }
        Err(e) => return Err(JobEnd::Failed(format!("the pack store: {}", error_chain(&e)))),
    };
    closed.map_err(|e| JobEnd::Failed(format!("the pack store: {e}")))?;
    m.event(
        EVENT_AGENT_PACK,
        &format!(
            "id={id} cached={} bytes={} s={:.1} removed={}",
            u8::from(staged.cached),
            pack.file.bytes,
            t0.elapsed().as_secs_f64(),
            staged.removed.len()
        ),
    );
    Ok(())
}

fn run_job(lab: &mut impl Lab, m: &mut impl Machine, pacing: &Pacing, job: &JobOffer, dir: &Path) -> JobEnd {
    let files = [(FileKind::Kernel, &job.kernel), (FileKind::Initrd, &job.initrd)];
    for (kind, file) in files {
        if file.bytes > MAX_JOB_FILE_BYTES {
            return JobEnd::Failed(format!(
                "the {} is {} bytes, over the {MAX_JOB_FILE_BYTES} an agent downloads",
                kind.name(),
                file.bytes
            ));
        }
    }
    let need = memory_needed(job);
    if let Some(available) = m.available_memory().filter(|a| *a < need) {
        return JobEnd::Failed(format!(
            "not enough memory: the job's files need about {need} bytes (twice their size and {MEMORY_MARGIN}), {available} are available"
        ));
    }
    // The pack first: the long fetch, with no job file yet in memory.
    if let Some(pack) = &job.pack {
        if let Err(end) = stage_pack(lab, m, job.id, pack) {
            return end;
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    if let Err(e) = std::fs::create_dir_all(dir) {
        return JobEnd::Failed(format!("cannot create {}: {e}", dir.display()));
    }
    for (kind, file) in files {
        if let Err(e) = lab.fetch(job.id, kind, file, &dir.join(kind.name())) {
            let msg = error_chain(&e);
            if e.is_auth_refusal() {
                return JobEnd::Stop(AgentEnd::PowerOff {
                    reason: format!("the lab receiver refused this machine's token (fetching a job file): {msg}"),
                });
            }
            return JobEnd::Failed(format!("fetching the {}: {msg}", kind.name()));
        }
    }
    match retrying(m, pacing, "report the kexec", || lab.report(job.id, &JobEvent::Kexec)) {
        Ok(()) => {}
        Err(Trouble::Stop(end)) => return JobEnd::Stop(end),
        Err(Trouble::Refused(e)) => {
            return JobEnd::Failed(format!("the receiver refused the kexec report: {}", error_chain(&e)))
        }
    }
    m.event(EVENT_AGENT_KEXEC, &format!("id={} boottime={:.3}", job.id, boottime_s()));
    match m.boot(&dir.join(FileKind::Kernel.name()), &dir.join(FileKind::Initrd.name()), &job.cmdline) {
        Ok(()) => JobEnd::Booted,
        Err(reason) => JobEnd::Failed(reason),
    }
}

/// The receiver over HTTP.
struct HttpLab {
    client: LabClient,
    machine: String,
}

impl Lab for HttpLab {
    fn hello(&mut self, hello: &Hello) -> Result<HelloReply, LabError> {
        self.client.post_json(&lab_protocol::hello_path(&self.machine), hello)
    }

    fn next(&mut self) -> Result<NextAnswer, LabError> {
        self.client.get_json(&lab_protocol::next_path(&self.machine))
    }

    fn fetch(&mut self, job: u64, kind: FileKind, file: &JobFile, dest: &Path) -> Result<(), LabError> {
        let expect = ExpectedFile { bytes: file.bytes, sha256: &file.sha256 };
        let path = lab_protocol::file_path(job, kind);
        match kind {
            FileKind::Pack => self.client.download_at(&path, dest, expect, MAX_PACK_BYTES, lab_protocol::PACK_MIN_RATE),
            FileKind::Kernel | FileKind::Initrd => self.client.download(&path, dest, expect, MAX_JOB_FILE_BYTES),
        }
    }

    fn report(&mut self, job: u64, event: &JobEvent) -> Result<(), LabError> {
        self.client.post_json::<_, serde_json::Value>(&lab_protocol::events_path(job), event).map(|_| ())
    }
}

/// This machine.
struct ThisMachine;

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

impl Machine for ThisMachine {
    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }

    fn available_memory(&mut self) -> Option<u64> {
        mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }

    fn boot(&mut self, kernel: &Path, initrd: &Path, cmdline: &str) -> Result<(), String> {
        // A store left mounted writable by a failed unmount is unmounted
        // now, or no kernel boots over it.
        if pack_store::agent_mount_left() && pack_store::close_for_agent().is_err() {
            return Err(error_chain(&pack_store::PackStoreError::StillMounted));
        }
        kexec::load(kernel, initrd, cmdline).map_err(|e| error_chain(&e))?;
        drain_console();
        Err(error_chain(&kexec::reboot_into_loaded()))
    }

    fn event(&mut self, name: &str, text: &str) {
        console_line(&console_protocol::event(name, text));
    }

    fn open_pack_store(&mut self, label: &str) -> Result<PathBuf, String> {
        pack_store::open_for_agent(label).map_err(|e| error_chain(&e))
    }

    fn close_pack_store(&mut self) -> Result<(), String> {
        pack_store::close_for_agent().map_err(|e| error_chain(&e))
    }
}

/// What this agent says in its hello.
fn hello_now() -> Hello {
    let (release, version) = match nix::sys::utsname::uname() {
        Ok(u) => (u.release().to_string_lossy().into_owned(), u.version().to_string_lossy().into_owned()),
        Err(_) => (String::new(), String::new()),
    };
    let boot_id =
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default();
    let (watchdog_reset, watchdog) = match hw_watchdog::boot_status() {
        Ok(Some(s)) => (Some(s.reset), Some(s.identity)),
        Ok(None) => (None, None),
        Err(e) => {
            say(&format!("agent: the watchdog's boot status: {}", error_chain(&e)));
            (None, None)
        }
    };
    Hello {
        agent_kernel: format!("{release} {version}"),
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
        boot_id,
        watchdog_reset,
        watchdog,
        capabilities: vec![lab_protocol::CAPABILITY_PACK_STORE.to_string()],
    }
}

/// The bound on one network bring-up attempt (interface, carrier, DHCP):
/// past it the attempt's child is killed and the attempt counts as failed.
pub const NETWORK_LIMIT: Duration = result_upload::NETWORK_LIMIT;

/// Brings the network up in a child bounded by `limit`, so that a step
/// that never returns (a blocking call nobody expected) costs one failed
/// attempt instead of the agent. The addresses and routes the child set
/// are the kernel's and stay; the child prints the `network` event and
/// tells PID 1 what it configured through a pipe.
fn bring_up_bounded(sfd: Option<&SignalFd>, net: &NetRequest, limit: Duration) -> Result<Configured, String> {
    let (rx, tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
        .map_err(|e| format!("network: cannot make a pipe: {e}"))?;
    let end = bounded_child::run(sfd, "network", limit, move || {
        let message = match network::bring_up(net) {
            Ok(c) => {
                console_line(&console_protocol::event(results_uploader::EVENT_NETWORK, &c.event_text()));
                Configured::from_net(&c).to_message()
            }
            Err((step, e)) => format!("error network: {step}: {}", error_chain(&e)),
        };
        let _ = std::fs::File::from(tx).write_all(message.as_bytes());
        0
    });
    let mut text = String::new();
    let _ = std::fs::File::from(rx).take(64 * 1024).read_to_string(&mut text);
    if !end.succeeded() {
        return Err(format!("network: the bring-up did not end: {end}"));
    }
    Configured::from_message(&text).ok_or_else(|| text.strip_prefix("error ").unwrap_or(&text).to_string())
}

/// Brings the network up (a few attempts) and makes the receiver's client.
fn connect(cmdline: &CmdlineConfig, secrets: Secrets, sfd: Option<&SignalFd>) -> Result<HttpLab, String> {
    let (Some(url), Some(machine)) = (cmdline.lab.clone(), cmdline.machine.clone()) else {
        return Err("bootbench.role=agent without bootbench.lab and bootbench.machine".into());
    };
    let Some(token) = secrets.upload_token.or_else(|| cmdline.token.clone()) else {
        return Err(format!(
            "no machine token: the initramfs has no {} (the host's secrets segment) and the cmdline no bootbench.token",
            loads::guest_secrets::UPLOAD_TOKEN_FILE
        ));
    };
    let net = result_upload::net_request(cmdline);
    let mut attempt = 0;
    let configured = loop {
        attempt += 1;
        match bring_up_bounded(sfd, &net, NETWORK_LIMIT) {
            Ok(c) => break c,
            Err(msg) => {
                console_line(&console_protocol::event(
                    results_uploader::EVENT_NETWORK,
                    &format!("failed attempt={attempt} error={msg}"),
                ));
                if attempt >= NETWORK_ATTEMPTS {
                    return Err(format!("{msg} (after {attempt} attempts)"));
                }
                std::thread::sleep(Pacing::default().max_delay / 3);
            }
        }
    };
    let settings = UploadSettings {
        policy: RetryPolicy::default(),
        resolution: results_uploader::Resolution::Servers(configured.dns.iter().map(|a| IpAddr::V4(*a)).collect()),
        roots: results_uploader::TlsRoots::Bundled,
        extra_ca_pem: secrets.upload_ca_pem,
    };
    let client =
        LabClient::new(&url, &token, settings).map_err(|e| format!("lab receiver {url}: {}", error_chain(&e)))?;
    Ok(HttpLab { client, machine })
}

/// The agent's whole life: never returns. Ends in a kexec into a job's
/// kernel, or in a power-off that says why.
pub fn run(cmdline: &CmdlineConfig, secrets: Secrets, load_modules: bool, sfd: Option<&SignalFd>) -> ! {
    if load_modules {
        // The NIC's driver is in the late list, the watchdogs' in the lab one.
        for list in [module_loader::EARLY_MODULES_LIST, module_loader::MODULES_LIST, module_loader::LAB_MODULES_LIST] {
            // netconsole only ever loads with a candidate's target.
            let (_, errors) = module_loader::load_listed_except(list, &["netconsole"]);
            for e in errors {
                say(&format!("agent: module load: {}", error_chain(&e)));
            }
        }
    }
    let hello = hello_now();
    let end = match connect(cmdline, secrets, sfd) {
        Ok(mut lab) => serve(&mut lab, &mut ThisMachine, &hello, &Pacing::default(), Path::new(JOB_DIR)),
        Err(reason) => AgentEnd::PowerOff { reason },
    };
    let reason = match end {
        AgentEnd::PowerOff { reason } => reason,
        AgentEnd::Booted { job } => format!("job {job} booted, yet the agent went on"),
    };
    console_line(&console_protocol::event(EVENT_AGENT_POWEROFF, &format!("reason={reason}")));
    say(&format!("lab agent: {reason}; powering off"));
    power_off::power_off(sfd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[derive(Default)]
    struct FakeLab {
        hellos: VecDeque<Result<HelloReply, LabError>>,
        nexts: VecDeque<Result<NextAnswer, LabError>>,
        /// Per fetch, in order; an empty queue writes the file.
        fetches: VecDeque<Result<(), LabError>>,
        fetched: Vec<(u64, &'static str)>,
        reports: Vec<(u64, JobEvent)>,
        calls: usize,
    }

    fn transient(url: &str) -> LabError {
        LabError::Transport {
            method: "GET",
            url: url.into(),
            class: "refused",
            message: "connection refused".into(),
            transient: true,
        }
    }

    fn status(status: u16, message: &str) -> LabError {
        LabError::Status { method: "POST", url: "http://lab/x".into(), status, message: message.into() }
    }

    impl Lab for FakeLab {
        fn hello(&mut self, _: &Hello) -> Result<HelloReply, LabError> {
            self.calls += 1;
            self.hellos.pop_front().unwrap_or(Ok(HelloReply::default()))
        }
        fn next(&mut self) -> Result<NextAnswer, LabError> {
            self.calls += 1;
            self.nexts.pop_front().unwrap_or(Ok(NextAnswer::PowerOff))
        }
        fn fetch(&mut self, job: u64, kind: FileKind, _: &JobFile, dest: &Path) -> Result<(), LabError> {
            self.fetched.push((job, kind.name()));
            match self.fetches.pop_front() {
                Some(Err(e)) => {
                    // What a download that failed midway leaves.
                    std::fs::write(dest, b"par").unwrap();
                    Err(e)
                }
                Some(r) => r,
                None => {
                    std::fs::write(dest, kind.name()).unwrap();
                    Ok(())
                }
            }
        }
        fn report(&mut self, job: u64, event: &JobEvent) -> Result<(), LabError> {
            self.reports.push((job, event.clone()));
            Ok(())
        }
    }

    #[derive(Default)]
    struct FakeMachine {
        sleeps: Vec<Duration>,
        memory: Option<u64>,
        boots: VecDeque<Result<(), String>>,
        booted: Vec<(String, String)>,
        events: Vec<(String, String)>,
        /// The pack store's root (none: no store with the label).
        pack_store: Option<PathBuf>,
        store_opens: usize,
        store_closes: usize,
    }

    impl Machine for FakeMachine {
        fn sleep(&mut self, d: Duration) {
            self.sleeps.push(d);
        }
        fn available_memory(&mut self) -> Option<u64> {
            self.memory
        }
        fn boot(&mut self, kernel: &Path, _: &Path, cmdline: &str) -> Result<(), String> {
            self.booted.push((std::fs::read_to_string(kernel).unwrap(), cmdline.to_string()));
            self.boots.pop_front().unwrap_or(Ok(()))
        }
        fn event(&mut self, name: &str, text: &str) {
            self.events.push((name.to_string(), text.to_string()));
        }
        fn open_pack_store(&mut self, label: &str) -> Result<PathBuf, String> {
            self.store_opens += 1;
            self.pack_store.clone().ok_or_else(|| format!("no filesystem labelled '{label}'"))
        }
        fn close_pack_store(&mut self) -> Result<(), String> {
            self.store_closes += 1;
            Ok(())
        }
    }

    fn job(id: u64) -> JobOffer {
        JobOffer {
            id,
            kernel: JobFile { sha256: "aa".into(), bytes: 10 },
            initrd: JobFile { sha256: "bb".into(), bytes: 20 },
            cmdline: format!("console=ttyS0 bootbench.lab_job={id}"),
            pack: None,
        }
    }

    fn job_with_pack(id: u64) -> JobOffer {
        // The fake lab writes "pack": 4 bytes.
        let file = JobFile { sha256: "5a".repeat(32), bytes: 4 };
        JobOffer { pack: Some(JobPack { file, label: "bb-packs".into() }), ..job(id) }
    }

    #[test]
    fn a_jobs_pack_is_fetched_into_the_store_once_and_found_there_by_the_next_job() {
        let store = tempfile::tempdir().unwrap();
        let mut lab = FakeLab::default();
        lab.nexts.push_back(Ok(NextAnswer::Run { job: job_with_pack(1) }));
        let mut m = FakeMachine { pack_store: Some(store.path().to_path_buf()), ..Default::default() };
        assert_eq!(run_fake(&mut lab, &mut m), AgentEnd::Booted { job: 1 });
        assert_eq!(lab.fetched, [(1, "pack"), (1, "kernel"), (1, "initrd")]);
        assert_eq!((m.store_opens, m.store_closes), (1, 1), "the store is unmounted before the kexec");
        let pack_file = store.path().join(lab_protocol::pack_store_file(&"5a".repeat(32)));
        assert_eq!(std::fs::read(&pack_file).unwrap(), b"pack");
        let packs: Vec<_> = m.events.iter().filter(|(n, _)| n == EVENT_AGENT_PACK).map(|(_, t)| t.clone()).collect();
        assert!(packs.len() == 1 && packs[0].starts_with("id=1 cached=0 bytes=4 s="), "{packs:?}");
        // The next job with the same pack boots without fetching it.
        let mut lab = FakeLab::default();
        lab.nexts.push_back(Ok(NextAnswer::Run { job: job_with_pack(2) }));
        m.events.clear();
        assert_eq!(run_fake(&mut lab, &mut m), AgentEnd::Booted { job: 2 });
        assert_eq!(lab.fetched, [(2, "kernel"), (2, "initrd")]);
        assert!(
            m.events.iter().any(|(n, t)| n == EVENT_AGENT_PACK && t.starts_with("id=2 cached=1 ")),
            "{:?}",
            m.events
        );
    }

    #[test]
    fn a_job_whose_pack_cannot_be_stored_fails_saying_why_and_the_next_job_boots() {
        // No filesystem with the label, then one with somebody's files.
        let foreign = tempfile::tempdir().unwrap();
        std::fs::write(foreign.path().join("data.db"), b"x").unwrap();
        for store in [None, Some(foreign.path().to_path_buf())] {
            let mut lab = FakeLab::default();
            lab.nexts.extend([Ok(NextAnswer::Run { job: job_with_pack(3) }), Ok(NextAnswer::Run { job: job(4) })]);
            let mut m = FakeMachine { pack_store: store.clone(), ..Default::default() };
            assert_eq!(run_fake(&mut lab, &mut m), AgentEnd::Booted { job: 4 });
            let [(3, JobEvent::Failed { reason }), (4, JobEvent::Kexec)] = &lab.reports[..] else {
                panic!("{:?}", lab.reports)
            };
            let why = if store.is_none() { "no filesystem labelled 'bb-packs'" } else { "data.db" };
            assert!(reason.starts_with("the pack store: ") && reason.contains(why), "{reason}");
            assert_eq!(lab.fetched, [(4, "kernel"), (4, "initrd")], "nothing of job 3 was fetched");
        }
        assert_eq!(std::fs::read_dir(foreign.path()).unwrap().count(), 1, "the foreign filesystem is untouched");
        // A pack too big for an agent is refused before the store is opened.
        let mut lab = FakeLab::default();
        let mut big = job_with_pack(5);
        if let Some(p) = big.pack.as_mut() {
            p.file.bytes = MAX_PACK_BYTES + 1;
        }
        lab.nexts.push_back(Ok(NextAnswer::Run { job: big }));
        let mut m = FakeMachine::default();
        run_fake(&mut lab, &mut m);
        assert_eq!(m.store_opens, 0);
        assert!(matches!(&lab.reports[..], [(5, JobEvent::Failed { reason })] if reason.contains("over the")));
    }

    #[test]
    fn a_pack_that_fails_its_check_is_not_kept_and_a_refused_token_powers_off() {
        let store = tempfile::tempdir().unwrap();
        let mut lab = FakeLab::default();
        lab.nexts.push_back(Ok(NextAnswer::Run { job: job_with_pack(6) }));
        lab.fetches.push_back(Err(LabError::Sha256 {
            url: "http://lab/lab/jobs/6/pack".into(),
            expected: "5a".into(),
            got: "00".into(),
        }));
        let mut m = FakeMachine { pack_store: Some(store.path().to_path_buf()), ..Default::default() };
        run_fake(&mut lab, &mut m);
        assert!(
            matches!(&lab.reports[..], [(6, JobEvent::Failed { reason })] if reason.contains("sha256 is 00")),
            "{:?}",
            lab.reports
        );
        assert_eq!(std::fs::read_dir(store.path().join("packs")).unwrap().count(), 0);
        assert_eq!(m.store_closes, 1);
        let mut lab = FakeLab::default();
        lab.nexts.push_back(Ok(NextAnswer::Run { job: job_with_pack(7) }));
        lab.fetches.push_back(Err(status(403, "revoked")));
        let AgentEnd::PowerOff { reason } = run_fake(&mut lab, &mut m) else { panic!() };
        assert!(reason.contains("token") && reason.contains("fetching the pack"), "{reason}");
    }

    fn run_fake(lab: &mut FakeLab, m: &mut FakeMachine) -> AgentEnd {
        let dir = tempfile::tempdir().unwrap();
        serve(lab, m, &Hello::default(), &Pacing::default(), &dir.path().join("job"))
    }

    #[test]
    fn an_unreachable_receiver_is_retried_with_growing_pauses_for_the_budget_then_the_machine_powers_off() {
        let mut lab = FakeLab::default();
        for _ in 0..100 {
            lab.hellos.push_back(Err(transient("http://10.0.2.2:9/lab/machines/box1/hello")));
        }
        let mut m = FakeMachine::default();
        let end = run_fake(&mut lab, &mut m);
        let AgentEnd::PowerOff { reason } = end else { panic!("{end:?}") };
        assert!(
            reason.contains("unreachable") && reason.contains("http://10.0.2.2:9/lab/machines/box1/hello"),
            "{reason}"
        );
        let total: Duration = m.sleeps.iter().sum();
        assert!(total >= Duration::from_secs(120) && total <= Duration::from_secs(180), "{total:?}");
        assert!(m.sleeps.windows(2).all(|w| w[0] <= w[1]), "{:?}", m.sleeps);
        assert_eq!(m.sleeps.first(), Some(&Duration::from_secs(2)));
        assert!(m.sleeps.iter().all(|d| *d <= Duration::from_secs(30)), "{:?}", m.sleeps);
        assert_eq!(lab.calls, m.sleeps.len() + 1, "one attempt before each pause and one after the last");
        // Every failure was on the console, the last saying it gives up.
        assert_eq!(m.events.iter().filter(|(n, _)| n == EVENT_AGENT_ERROR).count(), lab.calls);
        assert!(m.events.last().is_some_and(|(_, t)| t.starts_with("retry_in_s=-")), "{:?}", m.events.last());
    }

    #[test]
    fn a_receiver_back_within_the_budget_is_served() {
        let mut lab = FakeLab::default();
        lab.hellos.extend([Err(transient("u")), Err(transient("u")), Ok(HelloReply { closed_job: Some(4) })]);
        let mut m = FakeMachine::default();
        let end = run_fake(&mut lab, &mut m);
        assert_eq!(end, AgentEnd::PowerOff { reason: "the lab receiver asked for a power-off".into() });
        assert_eq!(m.sleeps, [Duration::from_secs(2), Duration::from_secs(4)]);
        assert!(
            m.events.iter().any(|(n, t)| n == EVENT_AGENT_HELLO && t.starts_with("closed_job=4 ")),
            "{:?}",
            m.events
        );
    }

    #[test]
    fn a_refused_token_powers_off_at_once_saying_so() {
        for code in [401, 403] {
            let mut lab = FakeLab::default();
            lab.hellos.push_back(Err(status(code, "token revoked")));
            let mut m = FakeMachine::default();
            let AgentEnd::PowerOff { reason } = run_fake(&mut lab, &mut m) else { panic!() };
            assert!(reason.contains("refused this machine's token") && reason.contains("token revoked"), "{reason}");
            assert!(m.sleeps.is_empty(), "{code}: retrying a refused token is pointless");
            assert_eq!(lab.calls, 1);
        }
        // Also when it is a job file that is refused.
        let mut lab = FakeLab::default();
        lab.nexts.push_back(Ok(NextAnswer::Run { job: job(3) }));
        lab.fetches.push_back(Err(status(403, "not your job")));
        let mut m = FakeMachine::default();
        let AgentEnd::PowerOff { reason } = run_fake(&mut lab, &mut m) else { panic!() };
        assert!(reason.contains("token") && reason.contains("not your job"), "{reason}");
        assert!(lab.reports.is_empty());
    }

    #[test]
    fn waits_are_bounded_and_a_zero_wait_does_not_spin() {
        let mut lab = FakeLab::default();
        lab.nexts.extend([Ok(NextAnswer::Wait { seconds: u64::MAX }), Ok(NextAnswer::Wait { seconds: 0 })]);
        let mut m = FakeMachine::default();
        run_fake(&mut lab, &mut m);
        assert_eq!(m.sleeps, [Duration::from_secs(MAX_POLL_S), Duration::from_secs(1)]);
        let waits: Vec<_> = m.events.iter().filter(|(n, _)| n == EVENT_AGENT_WAIT).map(|(_, t)| t.as_str()).collect();
        assert_eq!(waits, ["s=3600", "s=1"]);
    }

    #[test]
    fn a_bad_file_is_reported_failed_and_the_next_job_boots() {
        let mut lab = FakeLab::default();
        lab.nexts.extend([Ok(NextAnswer::Run { job: job(1) }), Ok(NextAnswer::Run { job: job(2) })]);
        lab.fetches.push_back(Err(LabError::Sha256 {
            url: "http://lab/lab/jobs/1/kernel".into(),
            expected: "aa".into(),
            got: "cc".into(),
        }));
        let mut m = FakeMachine::default();
        let end = run_fake(&mut lab, &mut m);
        assert_eq!(end, AgentEnd::Booted { job: 2 });
        assert_eq!(lab.fetched, [(1, "kernel"), (2, "kernel"), (2, "initrd")]);
        let [(1, JobEvent::Failed { reason }), (2, JobEvent::Kexec)] = &lab.reports[..] else {
            panic!("{:?}", lab.reports)
        };
        assert!(reason.contains("fetching the kernel") && reason.contains("sha256 is cc"), "{reason}");
        assert_eq!(m.booted, [("kernel".to_string(), "console=ttyS0 bootbench.lab_job=2".to_string())]);
        assert!(m.events.iter().any(|(n, t)| n == EVENT_AGENT_FAILED && t.starts_with("id=1 reason=")));
        assert!(m.events.iter().any(|(n, t)| n == EVENT_AGENT_KEXEC && t.starts_with("id=2 ")));
        assert_eq!(m.sleeps, [FAILED_PAUSE]);
    }

    #[test]
    fn a_refused_kexec_is_reported_with_its_cause_and_the_agent_goes_on() {
        let mut lab = FakeLab::default();
        lab.nexts.push_back(Ok(NextAnswer::Run { job: job(5) }));
        let mut m = FakeMachine::default();
        let refusal =
            kexec::KexecError::Load { hint: kexec::load_errno_hint(nix::Error::ENOSYS), source: nix::Error::ENOSYS };
        m.boots.push_back(Err(error_chain(&refusal)));
        let end = run_fake(&mut lab, &mut m);
        assert!(matches!(end, AgentEnd::PowerOff { .. }), "the next answer (power off) was asked for: {end:?}");
        let [(5, JobEvent::Kexec), (5, JobEvent::Failed { reason })] = &lab.reports[..] else {
            panic!("{:?}", lab.reports)
        };
        assert!(reason.contains("ENOSYS") && reason.contains("kexec_file_load"), "{reason}");
    }

    #[test]
    fn jobs_too_big_for_the_memory_or_the_limit_fail_before_any_download() {
        let mut lab = FakeLab::default();
        let mut big = job(7);
        big.initrd.bytes = MAX_JOB_FILE_BYTES + 1;
        lab.nexts.extend([Ok(NextAnswer::Run { job: big }), Ok(NextAnswer::Run { job: job(8) })]);
        let mut m = FakeMachine { memory: Some(memory_needed(&job(8)) - 1), ..Default::default() };
        run_fake(&mut lab, &mut m);
        assert!(lab.fetched.is_empty(), "{:?}", lab.fetched);
        let reasons: Vec<_> = lab
            .reports
            .iter()
            .map(|(id, e)| match e {
                JobEvent::Failed { reason } => format!("{id}: {reason}"),
                JobEvent::Kexec => format!("{id}: kexec"),
            })
            .collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons[0].starts_with("7: the initrd is") && reasons[0].contains("over the"), "{reasons:?}");
        assert!(reasons[1].starts_with("8: not enough memory"), "{reasons:?}");
    }

    #[test]
    fn a_network_bring_up_that_does_not_end_is_cut_at_its_bound() {
        // A named, missing interface is waited for (network::IFACE_WAIT,
        // 5 s): longer than this bound, so the child is killed at 1 s
        // and the attempt fails saying so instead of waiting on.
        let net = NetRequest { iface: Some("bb-none0".into()), ..Default::default() };
        let t0 = std::time::Instant::now();
        let e = bring_up_bounded(None, &net, Duration::from_secs(1)).unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(4), "took {:?}", t0.elapsed());
        assert!(e.contains("did not end"), "{e}");
    }

    #[test]
    fn a_failed_network_bring_up_in_the_child_says_which_step() {
        let net = NetRequest { iface: Some("bb-none0".into()), ..Default::default() };
        let e = bring_up_bounded(None, &net, Duration::from_secs(20)).unwrap_err();
        assert!(e.starts_with("network: find the interface: "), "{e}");
    }

    #[test]
    fn meminfo_gives_the_available_bytes() {
        let text = "MemTotal:        1000 kB\nMemFree:          500 kB\nMemAvailable:     800 kB\n";
        assert_eq!(mem_available(text), Some(800 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
    }
}
