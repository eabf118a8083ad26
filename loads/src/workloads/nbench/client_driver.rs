//! The multi-process driver shared by dbench and tbench: forks one process
//! per client (as dbench does), lets each set up, releases them together,
//! and has each replay the loadfile in a loop through a warmup and a timed
//! phase. Owns the processes, the phases and the per-operation statistics;
//! what an operation does belongs to the [`Replayer`].
//!
//! Timing is dbench's: the clients share one start time on
//! CLOCK_MONOTONIC; an operation counts in the phase in which it
//! completes; throughput is the bytes of ReadX and WriteX completed in the
//! timed phase over its length; latency is the time from the start of the
//! operation to its end. Clients stop at the end of the timed phase, even
//! in the middle of a pass.
//!
//! Each client does per line what dbench's `child.c` does around the
//! operation: it reads and parses the line from the loadfile's text (read
//! again on every pass, see `LineReader`) and checks that the driver is
//! alive with `kill(parent, 0)`. That work is part of what dbench's
//! throughput measures, so ours measures it too.
//!
//! The parent sleeps in `poll` on the clients' report pipes while they
//! run, reaps every client, and kills all of them when one fails, so a
//! failure never leaves a process behind.

use super::loadfile::{Line, LineReader, Loadfile, Op, OpKind};
use crate::reap::{self, Usage};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::time::{clock_gettime, ClockId};
use nix::unistd::{fork, getpid, pipe2, ForkResult, Pid};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::time::Duration;

/// Extra time past the end of the timed phase before a silent client is
/// declared hung.
const GRACE: Duration = Duration::from_secs(60);
/// Descriptors beyond the clients' pipes: what the process already has
/// open, and what a client opens (its loadfile, directory, files).
const FD_SLACK: u64 = 256;
/// Longest a client may take to set up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);

/// What a client process runs for each line.
pub trait Replayer {
    /// The replayer's error (each names its loadfile line).
    type Error: std::error::Error;
    /// Carries out one line (`Sleep` and timestamps are the driver's).
    fn execute(&mut self, line: &Line) -> Result<(), Self::Error>;
    /// Whether `op` does any work in this replayer. Operations that do none
    /// (tbench sends nothing for Deltree) are skipped: neither timed nor
    /// counted, so they cannot dilute the latency table or the operation
    /// rate.
    fn carries_out(&self, _op: &Op) -> bool {
        true
    }
    /// The bytes `op` adds to throughput once carried out; dbench's count
    /// ([`Op::payload_bytes`]) unless the replayer's benchmark counts
    /// otherwise.
    fn payload_bytes(&self, op: &Op) -> u64 {
        op.payload_bytes()
    }
    /// Called before each pass over the loadfile.
    fn new_pass(&mut self) {}
    /// True when the client should end its replay now, before the end of
    /// the timed phase (a background load being stopped); checked before
    /// each line. The client then reports as at the end of the phase.
    fn stopped(&self) -> bool {
        false
    }
    /// Counters for the iteration's detail.
    fn counters(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }
}

/// Errors of running the clients.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A pipe or fork failed.
    #[error("cannot start client {client}: {what} failed")]
    Spawn {
        /// Client number.
        client: u32,
        /// The call.
        what: &'static str,
        /// The errno.
        #[source]
        source: nix::Error,
    },
    /// A client could not set up (open its directory, connect).
    #[error("client {client} could not start: {message}")]
    Setup {
        /// Client number.
        client: u32,
        /// Its error.
        message: String,
    },
    /// A client failed during the run.
    #[error("loadfile {loadfile}: client {client}: {message}")]
    Client {
        /// Loadfile name.
        loadfile: String,
        /// Client number.
        client: u32,
        /// Its error (names the line).
        message: String,
    },
    /// A client ended without a report.
    #[error("client {client} ended without a report ({how})")]
    Died {
        /// Client number.
        client: u32,
        /// How it ended.
        how: String,
    },
    /// A client's report did not parse.
    #[error("client {client} sent a malformed report")]
    Report {
        /// Client number.
        client: u32,
        /// Parser error.
        #[source]
        source: serde_json::Error,
    },
    /// Clients did not finish in time; all were killed.
    #[error("clients did not {what} within {waited_s:.0} s; all were killed")]
    Timeout {
        /// `start` or `finish`.
        what: &'static str,
        /// Seconds waited.
        waited_s: f64,
    },
    /// Waiting for the clients failed.
    #[error("waiting for the clients failed")]
    Wait(#[source] nix::Error),
    /// This process may not hold the pipes of that many clients.
    #[error("cannot run {clients} clients: each needs two descriptors held here")]
    FdLimit {
        /// Clients asked for.
        clients: u32,
        /// Why the limit could not be raised.
        #[source]
        source: crate::fd_limit::FdLimitError,
    },
}

/// The two phases of an iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phases {
    /// Untimed warmup.
    pub warmup: Duration,
    /// Timed phase.
    pub measure: Duration,
}

/// Latency statistics of one operation kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct OpStat {
    /// Operations completed.
    pub count: u64,
    /// Sum of their latencies, ns.
    pub total_ns: u64,
    /// Largest latency, ns.
    pub max_ns: u64,
}

impl OpStat {
    fn add(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Merges another client's statistics.
    pub fn merge(&mut self, o: &OpStat) {
        self.count += o.count;
        self.total_ns = self.total_ns.saturating_add(o.total_ns);
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    /// Mean latency in milliseconds (0 without operations).
    pub fn avg_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.count as f64 / 1e6
        }
    }
}

/// One client's timed-phase results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientReport {
    /// Client number.
    pub id: u32,
    /// ReadX and WriteX bytes completed in the timed phase.
    pub bytes: u64,
    /// Lines completed in the timed phase.
    pub lines: u64,
    /// Passes over the loadfile started, warmup included.
    pub passes: u64,
    /// Per-operation statistics, indexed by [`OpKind::index`].
    pub ops: Vec<OpStat>,
    /// The replayer's counters.
    pub counters: BTreeMap<String, u64>,
    /// Why the client stopped early.
    pub error: Option<String>,
}

/// All clients' results.
#[derive(Debug, Clone)]
pub struct DriverOutcome {
    /// Per client, in client order.
    pub clients: Vec<ClientReport>,
    /// Length of the timed phase, s.
    pub measured_s: f64,
    /// Resource usage of the client processes (whole run, warmup included).
    pub usage: Usage,
}

impl DriverOutcome {
    /// Statistics summed over clients, indexed by [`OpKind::index`].
    pub fn ops(&self) -> Vec<OpStat> {
        let mut all = vec![OpStat::default(); OpKind::COUNT];
        for c in &self.clients {
            for (a, o) in all.iter_mut().zip(&c.ops) {
                a.merge(o);
            }
        }
        all
    }

    /// Bytes moved in the timed phase by all clients.
    pub fn bytes(&self) -> u64 {
        self.clients.iter().map(|c| c.bytes).sum()
    }
}

/// CLOCK_MONOTONIC in nanoseconds (one clock for every process).
fn now_ns() -> u64 {
    match clock_gettime(ClockId::CLOCK_MONOTONIC) {
        Ok(t) => (t.tv_sec() as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec() as u64),
        Err(_) => 0,
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    crate::error_chain::error_chain(e)
}

/// The client loop: passes over the loadfile until the end of the timed
/// phase. Each line costs what it costs in dbench's client: the line is
/// read and parsed from the text, the driver is checked for with
/// `kill(parent, 0)`, then the operation runs, timed from its start.
fn replay<R: Replayer>(
    r: &mut R,
    id: u32,
    text: &mut LineReader,
    driver: Pid,
    start: u64,
    phases: Phases,
) -> ClientReport {
    let warm_end = start.saturating_add(phases.warmup.as_nanos() as u64);
    let end = warm_end.saturating_add(phases.measure.as_nanos() as u64);
    let mut rep = ClientReport { id, ops: vec![OpStat::default(); OpKind::COUNT], ..Default::default() };
    let mut now = now_ns();
    'passes: while now < end {
        rep.passes += 1;
        r.new_pass();
        if let Err(e) = text.rewind() {
            rep.error = Some(error_chain(&e));
            break;
        }
        let pass_start = now;
        let mut worked = false;
        loop {
            if r.stopped() {
                break 'passes;
            }
            let line = match text.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => {
                    if !worked {
                        // Nothing to time or sleep: another pass would
                        // spin until the driver's grace runs out.
                        rep.error = Some(format!("loadfile {}: a pass carried out no operation", text.name()));
                        break 'passes;
                    }
                    now = now_ns();
                    break;
                }
                Err(e) => {
                    rep.error = Some(error_chain(&e));
                    break 'passes;
                }
            };
            if let Err(e) = kill(driver, None) {
                rep.error = Some(format!("the driver (pid {driver}) is gone: kill(pid, 0) failed with {}", e.desc()));
                break 'passes;
            }
            if let Some(at) = line.at_s {
                // Paced loadfile: wait for the recorded time, as dbench does.
                let target = pass_start.saturating_add((at * 1e9) as u64).min(end);
                if now < target {
                    now = wait_until(r, target);
                }
            }
            if let Op::Sleep { micros } = line.op {
                worked = true;
                let until = now.saturating_add(micros.saturating_mul(1000)).min(end);
                now = wait_until(r, until);
            } else if r.carries_out(&line.op) {
                worked = true;
                let t0 = now_ns();
                if let Err(e) = r.execute(&line) {
                    rep.error = Some(error_chain(&e));
                    break 'passes;
                }
                now = now_ns();
                if now >= warm_end && now < end {
                    if let Some(s) = rep.ops.get_mut(line.op.kind().index()) {
                        s.add(now.saturating_sub(t0));
                    }
                    rep.bytes += r.payload_bytes(&line.op);
                    rep.lines += 1;
                }
            }
            if now >= end {
                break 'passes;
            }
        }
    }
    rep.counters = r.counters();
    rep
}

/// The longest a client sleeps without looking whether it was stopped.
const STOP_CHECK_NS: u64 = 10_000_000;

/// Sleeps until `target` (CLOCK_MONOTONIC ns) in slices of at most
/// [`STOP_CHECK_NS`], returning early once `r` is stopped, so a stopped
/// background load does not go on sleeping through a paced wait or a
/// long `Sleep` line. Returns the time it woke.
fn wait_until<R: Replayer>(r: &R, target: u64) -> u64 {
    let mut now = now_ns();
    while now < target && !r.stopped() {
        std::thread::sleep(Duration::from_nanos((target - now).min(STOP_CHECK_NS)));
        now = now_ns();
    }
    now
}

/// A client process's side. Never returns.
fn client_main<R, E, F>(
    id: u32,
    driver: Pid,
    lf: &Loadfile,
    phases: Phases,
    setup: &F,
    mut report: File,
    mut ctl: File,
) -> !
where
    R: Replayer,
    E: std::error::Error,
    F: Fn(u32) -> Result<R, E>,
{
    // A client must not outlive the driver.
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    // Set up as dbench does before its loop: the replayer, then the
    // loadfile opened for reading pass after pass.
    let ready = setup(id)
        .map_err(|e| error_chain(&e))
        .and_then(|r| LineReader::open(lf).map(|text| (r, text)).map_err(|e| error_chain(&e)));
    let code = match ready {
        Err(message) => {
            let _ = report.write_all(format!("E{message}").as_bytes());
            2
        }
        Ok((mut r, mut text)) => {
            let mut start = [0u8; 8];
            if report.write_all(b"R").is_err() || ctl.read_exact(&mut start).is_err() {
                3
            } else {
                let rep = replay(&mut r, id, &mut text, driver, u64::from_be_bytes(start), phases);
                let failed = rep.error.is_some();
                drop(r);
                match serde_json::to_vec(&rep) {
                    Ok(json) if report.write_all(&json).is_ok() => i32::from(failed),
                    _ => 4,
                }
            }
        }
    };
    drop(report);
    // SAFETY: _exit skips the parent's atexit handlers and buffered output,
    // which belong to the process this one was forked from.
    unsafe { libc::_exit(code) }
}

struct ClientProc {
    id: u32,
    pid: Pid,
    ctl: Option<File>,
    report: Option<File>,
    received: Vec<u8>,
}

fn kill_all(procs: &[ClientProc]) {
    let pids: Vec<Pid> = procs.iter().map(|p| p.pid).collect();
    reap::kill_and_reap(&pids);
}

/// True when a finished client's output is not a clean report (it failed,
/// or died without one): the others need not run on.
fn finished_badly(received: &[u8]) -> bool {
    match received.split_first() {
        Some((b'R', json)) => serde_json::from_slice::<ClientReport>(json).map(|r| r.error.is_some()).unwrap_or(true),
        _ => true,
    }
}

/// Reads what is available from every open report pipe until each reaches
/// end of file (or one ends badly), or `until_ready` and each has sent its
/// first byte, or the deadline passes (`Ok(false)`).
fn pump(procs: &mut [ClientProc], deadline: u64, until_ready: bool) -> Result<bool, DriverError> {
    loop {
        let pending: Vec<usize> = procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.report.is_some() && (!until_ready || p.received.is_empty()))
            .map(|(i, _)| i)
            .collect();
        if pending.is_empty() {
            return Ok(true);
        }
        let now = now_ns();
        if now >= deadline {
            return Ok(false);
        }
        let timeout = PollTimeout::try_from((deadline - now) / 1_000_000 + 1).unwrap_or(PollTimeout::MAX);
        let mut ready = Vec::new();
        {
            let mut fds: Vec<PollFd<'_>> = pending
                .iter()
                .filter_map(|&i| procs.get(i).and_then(|p| p.report.as_ref()))
                .map(|f| PollFd::new(f.as_fd(), PollFlags::POLLIN))
                .collect();
            match poll(&mut fds, timeout) {
                Ok(_) | Err(nix::Error::EINTR) => {}
                Err(e) => return Err(DriverError::Wait(e)),
            }
            for (k, fd) in fds.iter().enumerate() {
                if fd.revents().is_some_and(|r| !r.is_empty()) {
                    if let Some(&i) = pending.get(k) {
                        ready.push(i);
                    }
                }
            }
        }
        for i in ready {
            let Some(p) = procs.get_mut(i) else { continue };
            let mut chunk = [0u8; 65536];
            let n = match p.report.as_mut().map(|f| f.read(&mut chunk)) {
                Some(Ok(n)) => n,
                Some(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                _ => 0,
            };
            if n == 0 {
                p.report = None;
                if !until_ready && finished_badly(&p.received) {
                    return Ok(true);
                }
            } else {
                p.received.extend_from_slice(chunk.get(..n).unwrap_or_default());
            }
        }
    }
}

/// Runs `clients` client processes over `lf`. `setup(id)` runs in each
/// client's process before the start and builds its replayer (opens a
/// directory, connects to a server).
pub fn run_clients<R, E, F>(clients: u32, phases: Phases, lf: &Loadfile, setup: F) -> Result<DriverOutcome, DriverError>
where
    R: Replayer,
    E: std::error::Error,
    F: Fn(u32) -> Result<R, E>,
{
    // The driver holds two pipe ends per client (and each client, while
    // it is forked, those of the clients before it).
    let need = u64::from(clients).saturating_mul(2).saturating_add(FD_SLACK);
    crate::fd_limit::ensure(need).map_err(|source| DriverError::FdLimit { clients, source })?;
    let usage0 = reap::children();
    // Each client checks for this process before each line, as dbench's
    // children check for their parent.
    let driver = getpid();
    let mut procs: Vec<ClientProc> = Vec::new();
    for id in 0..clients {
        let spawn = |what, source| DriverError::Spawn { client: id, what, source };
        let pipes = pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .and_then(|(r1, w1)| pipe2(nix::fcntl::OFlag::O_CLOEXEC).map(|(r2, w2)| (r1, w1, r2, w2)));
        let (ctl_r, ctl_w, rep_r, rep_w) = match pipes {
            Ok(p) => p,
            Err(e) => {
                kill_all(&procs);
                return Err(spawn("pipe", e));
            }
        };
        // SAFETY: the child only runs this crate's code and leaves with
        // _exit; the workload process is single-threaded (and where it is
        // not, as in tests, glibc's fork handlers keep malloc usable).
        match unsafe { fork() } {
            Err(e) => {
                kill_all(&procs);
                return Err(spawn("fork", e));
            }
            Ok(ForkResult::Child) => {
                // Other clients' pipe ends are not this client's business.
                procs.clear();
                drop(ctl_w);
                drop(rep_r);
                client_main(id, driver, lf, phases, &setup, File::from(rep_w), File::from(ctl_r))
            }
            Ok(ForkResult::Parent { child }) => {
                drop(ctl_r);
                drop(rep_w);
                procs.push(ClientProc {
                    id,
                    pid: child,
                    ctl: Some(File::from(ctl_w)),
                    report: Some(File::from(rep_r)),
                    received: Vec::new(),
                });
            }
        }
    }
    let outcome = drive(&mut procs, phases, lf);
    if outcome.is_err() {
        kill_all(&procs);
    }
    let mut reports = outcome?;
    // Reap in order; every client has closed its pipe, so this is quick.
    let mut failure = None;
    for p in &procs {
        match reap::wait_pid(p.pid) {
            Ok(r) if r.exit.success() => {}
            Ok(r) => {
                if failure.is_none() {
                    failure = Some(DriverError::Died { client: p.id, how: r.exit.to_string() });
                }
            }
            Err(reap::ReapError::Wait { source, .. }) => failure = failure.or(Some(DriverError::Wait(source))),
        }
    }
    if let Some(f) = failure {
        return Err(f);
    }
    reports.sort_by_key(|r| r.id);
    Ok(DriverOutcome {
        clients: reports,
        measured_s: phases.measure.as_secs_f64(),
        usage: reap::children().since(&usage0),
    })
}

/// The parent's side once every client is forked.
fn drive(procs: &mut [ClientProc], phases: Phases, lf: &Loadfile) -> Result<Vec<ClientReport>, DriverError> {
    let setup_deadline = now_ns().saturating_add(SETUP_TIMEOUT.as_nanos() as u64);
    if !pump(procs, setup_deadline, true)? {
        return Err(DriverError::Timeout { what: "start", waited_s: SETUP_TIMEOUT.as_secs_f64() });
    }
    for p in procs.iter() {
        match p.received.first() {
            Some(b'R') => {}
            Some(_) => {
                return Err(DriverError::Setup {
                    client: p.id,
                    message: String::from_utf8_lossy(p.received.get(1..).unwrap_or_default()).into_owned(),
                })
            }
            None => return Err(DriverError::Died { client: p.id, how: "before it was ready".into() }),
        }
    }
    let start = now_ns();
    for p in procs.iter_mut() {
        if let Some(mut ctl) = p.ctl.take() {
            if ctl.write_all(&start.to_be_bytes()).is_err() {
                return Err(DriverError::Died { client: p.id, how: "before the start".into() });
            }
        }
    }
    let total = phases.warmup + phases.measure + GRACE;
    if !pump(procs, start.saturating_add(total.as_nanos() as u64), false)? {
        return Err(DriverError::Timeout { what: "finish", waited_s: total.as_secs_f64() });
    }
    // A client that failed explains the run; look at finished ones first.
    let (done, running): (Vec<&ClientProc>, Vec<&ClientProc>) = procs.iter().partition(|p| p.report.is_none());
    let mut reports = Vec::new();
    for p in done.into_iter().chain(running) {
        let json = p.received.get(1..).unwrap_or_default();
        if json.is_empty() {
            return Err(DriverError::Died { client: p.id, how: "during the run".into() });
        }
        let rep: ClientReport =
            serde_json::from_slice(json).map_err(|source| DriverError::Report { client: p.id, source })?;
        if let Some(message) = &rep.error {
            return Err(DriverError::Client { loadfile: lf.name.clone(), client: p.id, message: message.clone() });
        }
        reports.push(rep);
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::unistd::getppid;

    /// A replayer that only sleeps a little per line, or fails at a line.
    struct Fake {
        fail_at: Option<u32>,
    }

    /// Carries out every line but Close, as tbench carries out no Deltree.
    struct NoClose;

    impl Replayer for NoClose {
        type Error = FakeError;
        fn execute(&mut self, line: &Line) -> Result<(), FakeError> {
            match line.op.kind() {
                OpKind::Close => Err(FakeError(line.number)),
                _ => Ok(()),
            }
        }
        fn carries_out(&self, op: &Op) -> bool {
            op.kind() != OpKind::Close
        }
    }

    /// Carries out every line and counts 7 bytes for each, as tbench
    /// counts other bytes than dbench.
    struct SevenBytes;

    impl Replayer for SevenBytes {
        type Error = FakeError;
        fn execute(&mut self, _line: &Line) -> Result<(), FakeError> {
            Ok(())
        }
        fn payload_bytes(&self, _op: &Op) -> u64 {
            7
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("line {0}: fake failure")]
    struct FakeError(u32);

    impl Replayer for Fake {
        type Error = FakeError;
        fn execute(&mut self, line: &Line) -> Result<(), FakeError> {
            if Some(line.number) == self.fail_at {
                return Err(FakeError(line.number));
            }
            std::thread::sleep(Duration::from_micros(200));
            Ok(())
        }
    }

    fn lf() -> Loadfile {
        Loadfile::parse(
            "fake",
            b"ReadX 1 0 1000 1000 NT_STATUS_OK\nWriteX 1 0 500 500 NT_STATUS_OK\nClose 1 NT_STATUS_OK\n",
        )
        .unwrap()
    }

    #[test]
    fn clients_run_through_both_phases() {
        let phases = Phases { warmup: Duration::from_millis(100), measure: Duration::from_millis(300) };
        let out = run_clients(3, phases, &lf(), |_| Ok::<_, FakeError>(Fake { fail_at: None })).unwrap();
        assert_eq!(out.clients.len(), 3);
        for c in &out.clients {
            assert!(c.lines > 100, "{c:?}");
            assert!(c.passes > 30, "{c:?}");
            assert_eq!(c.error, None);
        }
        let ops = out.ops();
        assert!(ops[OpKind::ReadX.index()].count > 0);
        assert!(ops[OpKind::ReadX.index()].avg_ms() >= 0.2, "{:?}", ops[OpKind::ReadX.index()]);
        assert_eq!(out.bytes() % 500, 0);
        assert!(out.bytes() > 0);
    }

    #[test]
    fn operations_a_replayer_does_not_carry_out_are_neither_run_nor_counted() {
        let phases = Phases { warmup: Duration::ZERO, measure: Duration::from_millis(100) };
        let out = run_clients(1, phases, &lf(), |_| Ok::<_, FakeError>(NoClose)).unwrap();
        let ops = out.ops();
        assert!(ops[OpKind::ReadX.index()].count > 0);
        assert_eq!(ops[OpKind::Close.index()].count, 0);
        let c = &out.clients[0];
        assert_eq!(c.error, None);
        assert_eq!(c.lines, ops[OpKind::ReadX.index()].count + ops[OpKind::WriteX.index()].count);
        assert_eq!(c.bytes, ops[OpKind::ReadX.index()].count * 1000 + ops[OpKind::WriteX.index()].count * 500);
    }

    #[test]
    fn the_replayer_says_which_bytes_count() {
        let phases = Phases { warmup: Duration::ZERO, measure: Duration::from_millis(100) };
        let out = run_clients(1, phases, &lf(), |_| Ok::<_, FakeError>(SevenBytes)).unwrap();
        let c = &out.clients[0];
        assert!(c.lines > 0, "{c:?}");
        assert_eq!(c.bytes, 7 * c.lines);
    }

    #[test]
    fn a_failing_client_fails_the_run_naming_the_line() {
        let phases = Phases { warmup: Duration::ZERO, measure: Duration::from_secs(30) };
        let t = std::time::Instant::now();
        let e = run_clients(2, phases, &lf(), |id| Ok::<_, FakeError>(Fake { fail_at: (id == 1).then_some(2) }))
            .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("client 1") && msg.contains("line 2") && msg.contains("fake"), "{msg}");
        assert!(t.elapsed() < Duration::from_secs(10), "the other client was stopped at once");
    }

    #[test]
    fn a_client_that_cannot_set_up_fails_the_run() {
        let phases = Phases { warmup: Duration::ZERO, measure: Duration::from_millis(100) };
        let e =
            run_clients(2, phases, &lf(), |id| if id == 1 { Err(FakeError(0)) } else { Ok(Fake { fail_at: None }) })
                .unwrap_err();
        assert!(matches!(&e, DriverError::Setup { client: 1, .. }), "{e}");
    }

    /// Does nothing per line; slow to decide whether it carries a line out.
    struct SlowToDecide;

    impl Replayer for SlowToDecide {
        type Error = FakeError;
        fn execute(&mut self, _line: &Line) -> Result<(), FakeError> {
            Ok(())
        }
        fn carries_out(&self, _op: &Op) -> bool {
            std::thread::sleep(Duration::from_millis(2));
            true
        }
    }

    #[test]
    fn latency_is_timed_from_the_start_of_the_operation() {
        let phases = Phases { warmup: Duration::ZERO, measure: Duration::from_millis(200) };
        let out = run_clients(1, phases, &lf(), |_| Ok::<_, FakeError>(SlowToDecide)).unwrap();
        let read = out.ops()[OpKind::ReadX.index()];
        assert!(read.count > 10, "{read:?}");
        assert!(read.avg_ms() < 1.0, "the 2 ms before each operation is not its latency: {read:?}");
    }

    /// Stops before its third pass.
    struct TwoPasses(u32);

    impl Replayer for TwoPasses {
        type Error = FakeError;
        fn execute(&mut self, _line: &Line) -> Result<(), FakeError> {
            Ok(())
        }
        fn new_pass(&mut self) {
            self.0 += 1;
        }
        fn stopped(&self) -> bool {
            self.0 > 2
        }
    }

    /// Stops 100 ms after it is made.
    struct StopsSoon(std::time::Instant);

    impl Replayer for StopsSoon {
        type Error = FakeError;
        fn execute(&mut self, _line: &Line) -> Result<(), FakeError> {
            Ok(())
        }
        fn stopped(&self) -> bool {
            self.0.elapsed() > Duration::from_millis(100)
        }
    }

    #[test]
    fn a_stopped_client_does_not_sleep_through_a_long_sleep_or_paced_wait() {
        let phases = Phases { warmup: Duration::ZERO, measure: Duration::from_secs(60) };
        for (what, text) in [
            ("a Sleep line", &b"Close 1 NT_STATUS_OK\nSleep 30000000 NT_STATUS_OK\n"[..]),
            ("a paced wait", &b"0.000 Close 1 NT_STATUS_OK\n30.000 Close 1 NT_STATUS_OK\n"[..]),
        ] {
            let lf = Loadfile::parse("long-wait", text).unwrap();
            let t = std::time::Instant::now();
            let out =
                run_clients(1, phases, &lf, |_| Ok::<_, FakeError>(StopsSoon(std::time::Instant::now()))).unwrap();
            assert_eq!(out.clients[0].error, None, "{what}");
            assert!(t.elapsed() < Duration::from_secs(5), "{what}: stopped after {:?}", t.elapsed());
        }
    }

    #[test]
    fn many_clients_get_the_descriptors_they_need() {
        // In a child of its own, so the lowered limit touches no other test.
        let (r, w) = nix::unistd::pipe().unwrap();
        // SAFETY: the child runs this test's code and leaves with _exit.
        match unsafe { fork() }.unwrap() {
            ForkResult::Child => {
                drop(r);
                let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap().1;
                nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, 64, hard).unwrap();
                let phases = Phases { warmup: Duration::ZERO, measure: Duration::from_millis(50) };
                let out = run_clients(200, phases, &lf(), |_| Ok::<_, FakeError>(SevenBytes));
                let text = match out {
                    Ok(o) => format!("ok {}", o.clients.len()),
                    Err(e) => format!("error {}", crate::error_chain::error_chain(&e)),
                };
                let _ = File::from(w).write_all(text.as_bytes());
                // SAFETY: leaves without the harness's exit work.
                unsafe { libc::_exit(0) }
            }
            ForkResult::Parent { child } => {
                drop(w);
                let mut text = String::new();
                File::from(r).read_to_string(&mut text).unwrap();
                nix::sys::wait::waitpid(child, None).unwrap();
                assert_eq!(text, "ok 200", "200 clients under a soft limit of 64 descriptors");
            }
        }
    }

    #[test]
    fn a_pass_that_carries_out_nothing_fails_instead_of_spinning() {
        let phases = Phases { warmup: Duration::ZERO, measure: Duration::from_secs(30) };
        let only_close = Loadfile::parse("only-close", b"Close 1 NT_STATUS_OK\n").unwrap();
        let t = std::time::Instant::now();
        let e = run_clients(1, phases, &only_close, |_| Ok::<_, FakeError>(NoClose)).unwrap_err().to_string();
        assert!(e.contains("only-close") && e.contains("carried out no operation"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(10), "it failed at once");
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn every_pass_reads_the_loadfile_again_and_every_line_checks_for_the_driver() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("client.txt");
        std::fs::write(
            &path,
            b"ReadX 1 0 1000 1000 NT_STATUS_OK\nWriteX 1 0 500 500 NT_STATUS_OK\nClose 1 NT_STATUS_OK\n",
        )
        .unwrap();
        let lf = Loadfile::read(&path).unwrap();
        let mut text = LineReader::open(&lf).unwrap();
        let phases = Phases { warmup: Duration::ZERO, measure: Duration::from_secs(60) };
        let (rep, calls) = crate::workloads::nbench::seen_syscalls::seen_syscalls(|| {
            replay(&mut TwoPasses(0), 0, &mut text, getppid(), now_ns(), phases)
        });
        assert_eq!((rep.passes, rep.lines, rep.error.as_deref()), (3, 6, None), "{rep:?}");
        let parent = getppid().as_raw() as u64;
        let kills: Vec<_> = calls.iter().filter(|c| c.kind == "kill").collect();
        assert_eq!(kills.len(), 6, "kill(parent, 0) before each line of two passes: {kills:?}");
        assert!(kills.iter().all(|k| k.args[0] == parent && k.args[1] == 0), "{kills:?}");
        let reads: Vec<_> = calls.iter().filter(|c| c.kind == "read").collect();
        assert!(reads.len() >= 4, "each pass reads the text and then its end: {reads:?}");
        assert!(reads.iter().all(|r| r.args[2] == 4096), "through a 4 KiB buffer, as stdio reads: {reads:?}");
        assert_eq!(calls.iter().filter(|c| c.kind == "lseek").count(), 3, "a rewind before each pass");
    }
}
