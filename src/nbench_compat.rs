//! Our dbench and tbench against Debian's
//! `dbench`, `tbench` and `tbench_srv` on this host, with the same loadfile,
//! clients, directory and durations, interleaved round by round. Prints each
//! run's throughput and CPU time, and the throughput ratio ours / Debian's
//! with its mean ± stddev over rounds. The goal is a ratio of means within
//! [`GOAL`]: the same work per operation as the original, neither a
//! cheaper harness (ours faster) nor a costlier one (ours slower). Owns running and timing both sides; must not
//! change either workload (ours runs exactly as a suite runs it).

use crate::stats::SampleSummary;
use loads::measure::children_cpu;
use loads::workload::{RunContext, Workload};
use loads::workloads::dbench::Dbench;
use loads::workloads::nbench::builtin_loadfile;
use loads::workloads::nbench::params::NbenchParams;
use loads::workloads::tbench::Tbench;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The band the throughput ratio ours / Debian's must fall in.
pub const GOAL: std::ops::RangeInclusive<f64> = 0.95..=1.05;

/// Where Debian's tbench_srv listens (fixed in dbench 4.0).
const TBENCH_PORT: u16 = 7003;
/// The package that provides `dbench`, `tbench` and `tbench_srv`.
const PACKAGE: &str = "dbench";

/// Options of `bootbench nbench-compat`.
#[derive(Debug, Clone, clap::Args)]
pub struct NbenchCompatOptions {
    /// Client processes, for both.
    #[arg(long, default_value_t = 2)]
    pub clients: u32,
    /// Timed seconds per run (Debian's tools take whole seconds).
    #[arg(long, default_value_t = 10)]
    pub seconds: u32,
    /// Rounds; each runs both implementations, alternating which goes first.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Loadfile for both: a dbench loadfile, or `builtin` (our generated
    /// one, written out for Debian's tools).
    #[arg(long, default_value = "/usr/share/dbench/client.txt")]
    pub loadfile: String,
    /// Directory for dbench's files; should be a tmpfs (a warning says
    /// when it is not).
    #[arg(long, default_value = "/dev/shm")]
    pub dir: PathBuf,
    /// Run only one of the benchmarks.
    #[arg(long, value_enum)]
    pub only: Option<Bench>,
}

/// One of the two benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Bench {
    /// File-system operations replayed on the directory.
    Dbench,
    /// The same operations as messages over loopback TCP.
    Tbench,
}

impl Bench {
    fn name(self) -> &'static str {
        match self {
            Bench::Dbench => "dbench",
            Bench::Tbench => "tbench",
        }
    }
}

/// Errors of `bootbench nbench-compat`.
#[derive(Debug, thiserror::Error)]
pub enum NbenchCompatError {
    /// A Debian program is not on PATH.
    #[error("`{program}` is not installed: it comes with Debian's `{PACKAGE}` package (scripts/setup installs it)")]
    MissingProgram {
        /// The program.
        program: &'static str,
    },
    /// The loadfile does not exist.
    #[error("loadfile {0} does not exist (Debian's `{PACKAGE}` package ships /usr/share/dbench/client.txt)")]
    MissingLoadfile(PathBuf),
    /// An option out of range.
    #[error("--{option} must be at least 1")]
    Zero {
        /// The option.
        option: &'static str,
    },
    /// The work directory cannot be used.
    #[error("cannot use {path} as the work directory")]
    Dir {
        /// The directory or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A Debian program could not be started.
    #[error("cannot start `{command}`")]
    Spawn {
        /// The command line.
        command: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A Debian program exited with an error.
    #[error("`{command}` failed ({status}); its output ends:\n{tail}")]
    Failed {
        /// The command line.
        command: String,
        /// Exit status.
        status: std::process::ExitStatus,
        /// Its last lines of output.
        tail: String,
    },
    /// A Debian program's output has no throughput figure.
    #[error("`{command}` printed no 'Throughput N MB/sec' line; its output ends:\n{tail}")]
    NoThroughput {
        /// The command line.
        command: String,
        /// Its last lines of output.
        tail: String,
    },
    /// A Debian run warmed up for another time than ours.
    #[error(
        "`{command}` announced a warmup of {announced}, but ours used {ours} s (dbench 4.0 warms up a fifth of -t)"
    )]
    Warmup {
        /// The command line.
        command: String,
        /// What it announced.
        announced: String,
        /// Our warmup, s.
        ours: u32,
    },
    /// Something else already listens on tbench_srv's port.
    #[error("127.0.0.1:{TBENCH_PORT} is already in use; tbench_srv needs it")]
    PortInUse,
    /// tbench_srv did not start listening.
    #[error("tbench_srv did not listen on 127.0.0.1:{TBENCH_PORT} within 5 s")]
    ServerNotListening,
    /// Our workload failed.
    #[error("bootbench's {bench} failed")]
    Ours {
        /// dbench or tbench.
        bench: &'static str,
        /// The workload's error.
        #[source]
        source: loads::workload::WorkloadError,
    },
}

/// One run's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunFigures {
    /// Throughput, MB/s (10^6 bytes, as both report it).
    pub mb_per_s: f64,
    /// User + system CPU seconds of every process the run started,
    /// warmup included; `None` when they cannot all be counted (Debian's
    /// tbench_srv serves each connection in a process it does not wait
    /// for, so that time never reaches our rusage).
    pub cpu_s: Option<f64>,
    /// Loadfile operations completed per second of the timed phase: a
    /// check that equal MB/s mean equal work.
    pub ops_per_s: Option<f64>,
}

/// The first Debian program `benches` need that is not on `path` (a PATH
/// value).
fn first_missing(benches: &[Bench], path: Option<&std::ffi::OsStr>) -> Option<&'static str> {
    let on_path = |program: &str| path.is_some_and(|p| std::env::split_paths(p).any(|d| d.join(program).is_file()));
    benches
        .iter()
        .flat_map(|b| match b {
            Bench::Dbench => &["dbench"][..],
            Bench::Tbench => &["tbench", "tbench_srv"][..],
        })
        .copied()
        .find(|program| !on_path(program))
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The figure dbench and tbench print last:
/// `Throughput 660.686 MB/sec  2 clients  2 procs  max_latency=31.970 ms`.
pub fn parse_throughput(output: &str) -> Option<f64> {
    let line = output.lines().rev().find(|l| l.trim_start().starts_with("Throughput "))?;
    let mut words = line.split_whitespace().skip(1);
    let value: f64 = words.next()?.parse().ok()?;
    (words.next() == Some("MB/sec") && value.is_finite()).then_some(value)
}

/// Operations the timed phase completed: the sum of the `Count` column of
/// the table dbench and tbench print before the throughput.
pub fn parse_operation_count(output: &str) -> Option<u64> {
    let mut lines = output.lines().skip_while(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.first() != Some(&"Operation") || w.get(1) != Some(&"Count")
    });
    lines.next()?;
    let rows = lines.skip_while(|l| l.trim_start().starts_with('-')).take_while(|l| !l.trim().is_empty());
    let mut total = 0u64;
    let mut any = false;
    for row in rows {
        total += row.split_whitespace().nth(1)?.parse::<u64>().ok()?;
        any = true;
    }
    any.then_some(total)
}

/// The warmup dbench 4.0 chose, from `... and minimum warmup N secs`, so
/// that ours warms up exactly as long.
pub fn parse_warmup(output: &str) -> Option<u32> {
    let rest = output.split("minimum warmup ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

fn describe(cmd: &Command) -> String {
    let line = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    match cmd.get_current_dir() {
        Some(dir) => format!("{line} (in {})", dir.display()),
        None => line,
    }
}

/// Runs a Debian program to its end, returning its output and the CPU
/// time it used.
fn run_debian(cmd: &mut Command) -> Result<(String, f64), NbenchCompatError> {
    let command = describe(cmd);
    let cpu0 = children_cpu();
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| NbenchCompatError::Spawn { command: command.clone(), source })?;
    let cpu = children_cpu().since(&cpu0);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(NbenchCompatError::Failed { command, status: out.status, tail: tail(&text, 15) });
    }
    Ok((text, cpu.user_s + cpu.sys_s))
}

fn throughput_of(cmd: &Command, text: &str) -> Result<f64, NbenchCompatError> {
    parse_throughput(text)
        .ok_or_else(|| NbenchCompatError::NoThroughput { command: describe(cmd), tail: tail(text, 15) })
}

/// What both sides share.
struct Setup {
    clients: u32,
    seconds: u32,
    loadfile: PathBuf,
    dir: PathBuf,
    /// Warmup seconds Debian's dbench announced (ours copies it).
    warmup_s: u32,
}

impl Setup {
    fn params(&self) -> NbenchParams {
        NbenchParams {
            clients: self.clients,
            duration_s: f64::from(self.seconds),
            warmup_s: f64::from(self.warmup_s),
            loadfile: self.loadfile.display().to_string(),
            loadfile_sha256: None,
        }
    }

    fn scratch(&self, name: &str) -> Result<PathBuf, NbenchCompatError> {
        let dir = self.dir.join(format!("bootbench-nbench-compat-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|source| NbenchCompatError::Dir { path: dir.clone(), source })?;
        Ok(dir)
    }

    fn ops_per_s(&self, text: &str) -> Option<f64> {
        parse_operation_count(text).map(|n| n as f64 / f64::from(self.seconds))
    }

    /// Refuses a Debian run that warmed up other than ours did (another
    /// dbench version with another rule would make the figures unlike).
    fn check_warmup(&self, cmd: &Command, text: &str) -> Result<(), NbenchCompatError> {
        match parse_warmup(text) {
            Some(w) if w == self.warmup_s => Ok(()),
            announced => Err(NbenchCompatError::Warmup {
                command: describe(cmd),
                announced: announced.map_or("nothing".into(), |w| format!("{w} s")),
                ours: self.warmup_s,
            }),
        }
    }

    fn ours(&self, bench: Bench) -> Result<RunFigures, NbenchCompatError> {
        let ours = |source| NbenchCompatError::Ours { bench: bench.name(), source };
        let dir = self.scratch("ours")?;
        let ctx = RunContext::new(0, dir.clone());
        let cpu0 = children_cpu();
        let outcome = match bench {
            Bench::Dbench => Dbench::new(self.params(), &ctx).and_then(|mut w| w.run_iteration()),
            Bench::Tbench => Tbench::new(self.params(), &ctx).and_then(|mut w| w.run_iteration()),
        };
        let cpu = children_cpu().since(&cpu0);
        let _ = std::fs::remove_dir_all(&dir);
        let it = outcome.map_err(ours)?;
        let mb_per_s = it.metrics.get("throughput").map(|m| m.value).unwrap_or(f64::NAN);
        let ops_per_s = it.metrics.get("operation_rate").map(|m| m.value);
        Ok(RunFigures { mb_per_s, cpu_s: Some(cpu.user_s + cpu.sys_s), ops_per_s })
    }

    /// Debian's dbench, run in `dir` with its default `-D .`: its paths are
    /// then `./clients/clientN/...`, walked from the directory as ours are
    /// (from a descriptor of it), not from `/` (an absolute `-D` adds a
    /// lookup of each of its components to every call, measured 2-5% of
    /// Debian's throughput for `/dev/shm/DIR`).
    fn debian_dbench(&self, dir: &Path) -> Command {
        let mut cmd = Command::new("dbench");
        cmd.current_dir(dir).arg("-c").arg(&self.loadfile);
        cmd.arg("-t").arg(self.seconds.to_string()).arg(self.clients.to_string());
        cmd
    }

    fn debian(&self, bench: Bench) -> Result<RunFigures, NbenchCompatError> {
        match bench {
            Bench::Dbench => {
                let dir = self.scratch("debian")?;
                let mut cmd = self.debian_dbench(&dir);
                let r = run_debian(&mut cmd);
                let _ = std::fs::remove_dir_all(&dir);
                let (text, cpu_s) = r?;
                self.check_warmup(&cmd, &text)?;
                Ok(RunFigures {
                    mb_per_s: throughput_of(&cmd, &text)?,
                    cpu_s: Some(cpu_s),
                    ops_per_s: self.ops_per_s(&text),
                })
            }
            Bench::Tbench => {
                let server = Server::start()?;
                let mut cmd = Command::new("tbench");
                cmd.arg("-c").arg(&self.loadfile).arg("-t").arg(self.seconds.to_string());
                cmd.arg(self.clients.to_string()).arg("127.0.0.1");
                let r = run_debian(&mut cmd);
                drop(server);
                let (text, _) = r?;
                self.check_warmup(&cmd, &text)?;
                Ok(RunFigures { mb_per_s: throughput_of(&cmd, &text)?, cpu_s: None, ops_per_s: self.ops_per_s(&text) })
            }
        }
    }
}

/// Debian's tbench_srv, started per run and killed by pid when dropped.
struct Server(Child);

impl Server {
    fn start() -> Result<Server, NbenchCompatError> {
        let up = || std::net::TcpStream::connect(("127.0.0.1", TBENCH_PORT)).is_ok();
        if up() {
            return Err(NbenchCompatError::PortInUse);
        }
        let child = Command::new("tbench_srv")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| NbenchCompatError::Spawn { command: "tbench_srv".into(), source })?;
        let server = Server(child);
        let t0 = Instant::now();
        while !up() {
            if t0.elapsed() > Duration::from_secs(5) {
                return Err(NbenchCompatError::ServerNotListening);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // tbench_srv forks a handler per connection, and each holds the
        // listening socket: kill its whole process group, then wait until
        // nothing answers on the port, or the next round finds it taken.
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", TBENCH_PORT)).is_ok() && t0.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn is_tmpfs(dir: &Path) -> bool {
    nix::sys::statfs::statfs(dir).is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
}

fn cpu_text(cpu_s: Option<f64>) -> String {
    cpu_s.map_or("  n/a".into(), |c| format!("{c:5.2}"))
}

/// Mean ± stddev of `values`, formatted.
fn mean_sd(values: &[f64], digits: usize) -> String {
    match SampleSummary::of(values) {
        Some(s) => format!("{:.digits$} ± {:.digits$}", s.mean, s.std_dev()),
        None => "n/a".into(),
    }
}

/// Ratios ours / Debian's per round, and of the means.
pub fn ratios(ours: &[RunFigures], debian: &[RunFigures]) -> (Vec<f64>, f64) {
    let per_round = ours.iter().zip(debian).map(|(o, d)| o.mb_per_s / d.mb_per_s).collect();
    let mean = |v: &[RunFigures]| v.iter().map(|f| f.mb_per_s).sum::<f64>() / v.len().max(1) as f64;
    (per_round, mean(ours) / mean(debian))
}

fn compare(setup: &Setup, bench: Bench, rounds: u32) -> Result<f64, NbenchCompatError> {
    let (mut ours, mut debian) = (Vec::new(), Vec::new());
    let name = bench.name();
    for round in 1..=rounds {
        // Alternate which goes first, so drift on a shared machine hits both.
        let (o, d) = if round % 2 == 1 {
            let o = setup.ours(bench)?;
            (o, setup.debian(bench)?)
        } else {
            let d = setup.debian(bench)?;
            (setup.ours(bench)?, d)
        };
        println!(
            "{name} round {round}: bootbench {:8.2} MB/s ({} CPU s)   Debian {:8.2} MB/s ({} CPU s)   ratio {:.3}",
            o.mb_per_s,
            cpu_text(o.cpu_s),
            d.mb_per_s,
            cpu_text(d.cpu_s),
            o.mb_per_s / d.mb_per_s
        );
        ours.push(o);
        debian.push(d);
    }
    let (per_round, of_means) = ratios(&ours, &debian);
    let mb = |v: &[RunFigures]| v.iter().map(|f| f.mb_per_s).collect::<Vec<_>>();
    // Both sides' CPU time covers warmup and timed phase alike.
    let run_s = f64::from(setup.seconds + setup.warmup_s);
    let per_cpu = |v: &[RunFigures]| v.iter().filter_map(|f| Some(f.mb_per_s * run_s / f.cpu_s?)).collect::<Vec<_>>();
    println!("{name}: bootbench {} MB/s, Debian {} MB/s", mean_sd(&mb(&ours), 2), mean_sd(&mb(&debian), 2));
    let ops = |v: &[RunFigures]| v.iter().filter_map(|f| f.ops_per_s).collect::<Vec<_>>();
    println!("{name}: operations/s: bootbench {}, Debian {}", mean_sd(&ops(&ours), 0), mean_sd(&ops(&debian), 0));
    println!(
        "{name}: MB moved per CPU second (warmup included): bootbench {}, Debian {}",
        mean_sd(&per_cpu(&ours), 1),
        mean_sd(&per_cpu(&debian), 1)
    );
    println!(
        "{name}: throughput ratio bootbench/Debian {} over {rounds} rounds (ratio of means {of_means:.3}; goal {:.2}-{:.2}: {})",
        mean_sd(&per_round, 3),
        GOAL.start(),
        GOAL.end(),
        if GOAL.contains(&of_means) { "met" } else { "NOT met" }
    );
    Ok(of_means)
}

/// Runs both sides as `args` asks, printing each run: whether every ratio
/// met the goal ([`GOAL`]).
pub fn measure(args: &NbenchCompatOptions) -> anyhow::Result<bool> {
    for (option, v) in [("clients", args.clients), ("seconds", args.seconds), ("rounds", args.rounds)] {
        if v == 0 {
            return Err(NbenchCompatError::Zero { option }.into());
        }
    }
    let benches: Vec<Bench> = match args.only {
        Some(b) => vec![b],
        None => vec![Bench::Dbench, Bench::Tbench],
    };
    if let Some(program) = first_missing(&benches, std::env::var_os("PATH").as_deref()) {
        return Err(NbenchCompatError::MissingProgram { program }.into());
    }
    std::fs::create_dir_all(&args.dir).map_err(|source| NbenchCompatError::Dir { path: args.dir.clone(), source })?;
    if !is_tmpfs(&args.dir) {
        log::warn!("{} is not a tmpfs; disk speed will weigh on both", args.dir.display());
    }
    let written = args.dir.join(format!("bootbench-nbench-compat-{}-builtin.txt", std::process::id()));
    let loadfile = if args.loadfile == builtin_loadfile::BUILTIN_NAME {
        std::fs::write(&written, builtin_loadfile::builtin_text())
            .map_err(|source| NbenchCompatError::Dir { path: written.clone(), source })?;
        written.clone()
    } else {
        PathBuf::from(&args.loadfile)
    };
    if !loadfile.is_file() {
        return Err(NbenchCompatError::MissingLoadfile(loadfile).into());
    }
    // Debian's dbench runs in its scratch directory: a relative path would
    // name another file there.
    let loadfile =
        std::path::absolute(&loadfile).map_err(|source| NbenchCompatError::Dir { path: loadfile, source })?;
    let setup = Setup {
        clients: args.clients,
        seconds: args.seconds,
        loadfile,
        dir: args.dir.clone(),
        warmup_s: debian_warmup_s(args.seconds),
    };
    println!(
        "nbench-compat: {} clients, {} s timed (+{} s warmup) per run, {} rounds, loadfile {}, dir {}{}",
        setup.clients,
        setup.seconds,
        setup.warmup_s,
        args.rounds,
        setup.loadfile.display(),
        setup.dir.display(),
        if is_tmpfs(&setup.dir) { " (tmpfs)" } else { "" }
    );
    let outcome: Result<bool, NbenchCompatError> =
        benches.into_iter().try_fold(true, |met, b| Ok(GOAL.contains(&compare(&setup, b, args.rounds)?) && met));
    let _ = std::fs::remove_file(&written);
    Ok(outcome?)
}

/// The warmup dbench 4.0 runs before its timed phase: a fifth of the time
/// limit, in whole seconds (`-t 10` warms up 2 s, then times 10 s). Ours
/// gets the same, and every Debian run's announcement is checked against it.
pub fn debian_warmup_s(seconds: u32) -> u32 {
    seconds / 5
}

#[cfg(test)]
mod tests {
    use super::*;
    use loads::workloads::nbench::loadfile::Loadfile;
    use loads::workloads::nbench::tcp_wire::{WireClient, MEASURED_TBENCH_4_0, SETUP_EXCHANGE};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    const DBENCH_OUT: &str = "dbench version 4.00 - Copyright Andrew Tridgell 1999-2004

Running for 3 seconds with load '/usr/share/dbench/client.txt' and minimum warmup 0 secs
2 of 2 processes prepared for launch   0 sec
releasing clients
   2     56647   639.96 MB/sec  execute   1 sec  latency 28.164 ms
   2  cleanup   3 sec

 Operation      Count    AvgLat    MaxLat
 ----------------------------------------
 NTCreateX      59611     0.023    20.076
 ReadX          93088     0.006     8.206

Throughput 660.686 MB/sec  2 clients  2 procs  max_latency=31.970 ms
";

    #[test]
    fn debian_output_gives_throughput_and_warmup() {
        assert_eq!(parse_throughput(DBENCH_OUT), Some(660.686));
        assert_eq!(parse_warmup(DBENCH_OUT), Some(0));
        assert_eq!(parse_operation_count(DBENCH_OUT), Some(59611 + 93088));
        assert_eq!(parse_warmup("Running for 600 seconds with load 'x' and minimum warmup 120 secs\n"), Some(120));
    }

    #[test]
    fn warmup_follows_dbench_4() {
        // Seen from Debian's dbench 4.0: -t 3 -> 0, 5 -> 1, 10 -> 2, 12 -> 2.
        let got: Vec<u32> = [3, 5, 10, 12].into_iter().map(debian_warmup_s).collect();
        assert_eq!(got, [0, 1, 2, 2]);
    }

    #[test]
    fn output_without_a_figure_gives_none() {
        assert_eq!(parse_throughput("   2     56647   639.96 MB/sec  execute   1 sec\n"), None);
        assert_eq!(parse_throughput("Throughput lots MB/sec\n"), None);
        assert_eq!(parse_throughput("Throughput 12.5 KB/sec\n"), None);
        assert_eq!(parse_warmup("dbench version 4.00\n"), None);
        assert_eq!(parse_operation_count("Throughput 1 MB/sec\n"), None);
        assert_eq!(parse_operation_count(" Operation Count AvgLat\n ---\n ReadX many 1.0\n"), None);
    }

    #[test]
    fn ratios_per_round_and_of_means() {
        let f = |mb_per_s| RunFigures { mb_per_s, cpu_s: Some(1.0), ops_per_s: None };
        let (per_round, of_means) = ratios(&[f(90.0), f(110.0)], &[f(100.0), f(100.0)]);
        assert_eq!(per_round, [0.9, 1.1]);
        assert!((of_means - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_missing_program_is_found_and_names_the_package() {
        let dir = tempfile::tempdir().unwrap();
        let path = std::env::join_paths([dir.path()]).unwrap();
        assert_eq!(first_missing(&[Bench::Tbench], Some(&path)), Some("tbench"));
        std::fs::write(dir.path().join("tbench"), "").unwrap();
        assert_eq!(first_missing(&[Bench::Tbench], Some(&path)), Some("tbench_srv"));
        std::fs::write(dir.path().join("tbench_srv"), "").unwrap();
        assert_eq!(first_missing(&[Bench::Tbench], Some(&path)), None);
        assert_eq!(first_missing(&[Bench::Dbench, Bench::Tbench], Some(&path)), Some("dbench"));
        assert_eq!(first_missing(&[Bench::Dbench], None), Some("dbench"));
        let e = NbenchCompatError::MissingProgram { program: "tbench_srv" }.to_string();
        assert!(e.contains("tbench_srv") && e.contains("`dbench` package"), "{e}");
    }

    /// One (request, reply) exchange's bytes.
    type Exchange = (u32, u32);

    /// One tbench message whole: a 4-byte big-endian length, then that
    /// many bytes. `None` at the end of the stream.
    fn read_message(from: &mut TcpStream) -> Option<Vec<u8>> {
        let mut msg = vec![0u8; 4];
        from.read_exact(&mut msg).ok()?;
        let n = u32::from_be_bytes([msg[0], msg[1], msg[2], msg[3]]) as usize;
        msg.resize(4 + n, 0);
        from.read_exact(&mut msg[4..]).ok()?;
        Some(msg)
    }

    /// Carries one connection's exchanges to its end and returns their
    /// bytes (the first 10,000): relayed to `upstream`, or answered here as
    /// `tbench_srv` answers (with the length the request's second word
    /// asks for). Counts whole messages, however the sockets split them.
    fn record(mut conn: TcpStream, mut upstream: Option<TcpStream>) -> Vec<Exchange> {
        conn.set_nodelay(true).unwrap();
        let mut seen = Vec::new();
        while let Some(request) = read_message(&mut conn) {
            let reply = match upstream.as_mut() {
                Some(up) => {
                    up.write_all(&request).unwrap();
                    read_message(up).expect("tbench_srv closed the connection mid-exchange")
                }
                None => {
                    let n = request.get(4..8).map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
                    let mut reply = vec![0u8; 4 + n as usize];
                    reply[..4].copy_from_slice(&n.to_be_bytes());
                    reply
                }
            };
            if conn.write_all(&reply).is_err() {
                break;
            }
            if seen.len() < 10_000 {
                seen.push((request.len() as u32, reply.len() as u32));
            }
        }
        seen
    }

    /// Splits a client's exchanges into what each of `ops` operation lines
    /// sent, for a loadfile that puts a Flush before each: the setup
    /// exchange comes first, then the Flush's exchange marks where each
    /// line's (none or some) begin. `None` when fewer than a pass and a
    /// marker were seen.
    fn per_operation(seen: &[Exchange], ops: usize) -> Option<(Exchange, Vec<Vec<Exchange>>)> {
        let marker = *seen.get(1)?;
        let mut groups: Vec<Vec<Exchange>> = Vec::new();
        for &x in &seen[1..] {
            if x == marker {
                groups.push(Vec::new());
            } else {
                groups.last_mut()?.push(x);
            }
        }
        // The last line's group ends at the next pass's first marker.
        (groups.len() > ops).then(|| (marker, groups.into_iter().take(ops).collect()))
    }

    /// Runs `cmd` to its end within `limit`, killing it past that.
    fn run_bounded(cmd: &mut Command, limit: Duration) -> String {
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            text
        });
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if t0.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("`{}` ran over {limit:?}", describe(cmd));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let text = reader.join().unwrap();
        assert!(status.success(), "`{}` failed ({status}):\n{}", describe(cmd), tail(&text, 15));
        text
    }

    /// tbench's wire, measured per operation on this machine: Debian's
    /// `tbench` (against a recorder in `tbench_srv`'s place, on its fixed
    /// port) and ours (through a recording relay to Debian's `tbench_srv`)
    /// replay the lines of `MEASURED_TBENCH_4_0`, each after a Flush as a
    /// marker. Both must send what the table says. Prints the table
    /// (`--nocapture`). Run with `cargo test --release -p bootbench --lib
    /// tbench_wire -- --ignored --nocapture`.
    #[test]
    #[ignore = "runs Debian's tbench and tbench_srv (package dbench) on 127.0.0.1:7003"]
    fn tbench_wire_matches_debians_per_operation() {
        if let Some(program) = first_missing(&[Bench::Tbench], std::env::var_os("PATH").as_deref()) {
            panic!("{}", NbenchCompatError::MissingProgram { program });
        }
        const FLUSH: &str = "Flush 1 NT_STATUS_OK";
        let ops: Vec<(&str, Option<Exchange>)> =
            MEASURED_TBENCH_4_0.iter().copied().filter(|(line, _)| *line != FLUSH).collect();
        let flush = MEASURED_TBENCH_4_0.iter().find(|(line, _)| *line == FLUSH).and_then(|(_, m)| *m);
        let text: String = ops.iter().flat_map(|(line, _)| [FLUSH, "\n", line, "\n"]).collect();
        let tmp = tempfile::tempdir().unwrap();
        let loadfile = tmp.path().join("one-of-each.txt");
        std::fs::write(&loadfile, &text).unwrap();

        // Debian's client, against a recorder on tbench_srv's port.
        let listener = TcpListener::bind(("127.0.0.1", TBENCH_PORT))
            .unwrap_or_else(|e| panic!("127.0.0.1:{TBENCH_PORT} (tbench's fixed port) is not free: {e}"));
        let recorder = std::thread::spawn(move || record(listener.accept().unwrap().0, None));
        let mut cmd = Command::new("tbench");
        cmd.current_dir(tmp.path()).arg("-c").arg(&loadfile).args(["-t", "1", "1", "127.0.0.1"]);
        run_bounded(&mut cmd, Duration::from_secs(60));
        let debian = recorder.join().unwrap();

        // Ours, through a relay to Debian's tbench_srv.
        let ours = {
            let _server = Server::start().unwrap();
            let relay = TcpListener::bind(("127.0.0.1", 0)).unwrap();
            let addr = relay.local_addr().unwrap();
            let relayed = std::thread::spawn(move || {
                let conn = relay.accept().unwrap().0;
                let up = TcpStream::connect(("127.0.0.1", TBENCH_PORT)).unwrap();
                up.set_nodelay(true).unwrap();
                record(conn, Some(up))
            });
            let lf = Loadfile::parse("one-of-each", text.as_bytes()).unwrap();
            let mut client = WireClient::connect(addr, 0, lf.max_io_size()).unwrap();
            for _pass in 0..2 {
                for line in &lf.lines {
                    client.execute(line).unwrap();
                }
            }
            client.close();
            relayed.join().unwrap()
        };

        let (d_flush, d_ops) = per_operation(&debian, ops.len()).unwrap_or_else(|| panic!("Debian's: {debian:?}"));
        let (o_flush, o_ops) = per_operation(&ours, ops.len()).unwrap_or_else(|| panic!("ours: {ours:?}"));
        let shown = |g: &[Exchange]| match g {
            [] => "nothing".to_string(),
            _ => g.iter().map(|(s, r)| format!("({s}, {r})")).collect::<Vec<_>>().join(" "),
        };
        println!("{:<88} {:>12} {:>12}", "operation (client 0)", "Debian's", "ours");
        println!("{:<88} {:>12} {:>12}", "setup", shown(&debian[..1]), shown(&ours[..1]));
        println!("{:<88} {:>12} {:>12}", FLUSH, shown(&[d_flush]), shown(&[o_flush]));
        for (((line, _), d), o) in ops.iter().zip(&d_ops).zip(&o_ops) {
            println!("{line:<88} {:>12} {:>12}", shown(d), shown(o));
        }
        let table = |setup: Exchange, flush: Exchange, groups: &[Vec<Exchange>]| {
            let mut rows = vec![("setup", vec![setup]), (FLUSH, vec![flush])];
            rows.extend(ops.iter().map(|(line, _)| *line).zip(groups.iter().cloned()));
            rows
        };
        let measured: Vec<Vec<Exchange>> = ops.iter().map(|(_, m)| m.iter().copied().collect()).collect();
        let want = table(SETUP_EXCHANGE, flush.expect("Flush sends something"), &measured);
        let differences = |got: Vec<(&str, Vec<Exchange>)>| -> String {
            got.iter()
                .zip(&want)
                .filter(|(g, w)| g != w)
                .map(|((line, g), (_, w))| format!("{line}: {}, measured {}", shown(g), shown(w)))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let debian_differs = differences(table(debian[0], d_flush, &d_ops));
        assert!(debian_differs.is_empty(), "Debian's tbench no longer sends what was measured:\n{debian_differs}");
        let ours_differs = differences(table(ours[0], o_flush, &o_ops));
        assert!(ours_differs.is_empty(), "ours does not send what Debian's tbench sends:\n{ours_differs}");
    }

    #[test]
    fn debians_dbench_walks_its_paths_from_the_directory_as_ours_does() {
        let setup = Setup {
            clients: 3,
            seconds: 7,
            loadfile: PathBuf::from("/usr/share/dbench/client.txt"),
            dir: PathBuf::from("/dev/shm"),
            warmup_s: 1,
        };
        let dir = Path::new("/dev/shm/bootbench-nbench-compat-1-debian");
        let cmd = setup.debian_dbench(dir);
        assert_eq!(cmd.get_current_dir(), Some(dir), "{}", describe(&cmd));
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args, ["-c", "/usr/share/dbench/client.txt", "-t", "7", "3"], "no -D: dbench's default `.`");
        assert!(describe(&cmd).ends_with("(in /dev/shm/bootbench-nbench-compat-1-debian)"), "{}", describe(&cmd));
    }

    #[test]
    fn zero_rounds_is_refused_before_anything_runs() {
        let args = NbenchCompatOptions {
            clients: 2,
            seconds: 1,
            rounds: 0,
            loadfile: "/nonexistent".into(),
            dir: PathBuf::from("/nonexistent"),
            only: None,
        };
        let e = measure(&args).unwrap_err().to_string();
        assert_eq!(e, "--rounds must be at least 1");
    }
}
