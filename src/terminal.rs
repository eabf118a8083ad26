//! What the host commands say on stderr: log lines through one facade
//! (the `log` crate, printed by `env_logger` as `COMMAND: message`, with
//! `warning:`/`error:`/`debug:` before the message at those levels) and
//! progress bars (`indicatif`) drawn above them. The level comes from the
//! global `-q`/`-v` flags; progress is drawn only when stderr is a
//! terminal and the level is at least `info`, so logs and pipes get the
//! log lines alone, never a bar's escape sequences.
//!
//! Every module logs with `log::info!` and friends and asks this module
//! for a bar; none prints to stderr itself.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use log::{Level, LevelFilter};
use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

pub mod progress;

/// Errors setting up the terminal output.
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    /// A logger was installed already (a second `init` in one process).
    #[error("the logger is already set up")]
    AlreadySet(#[source] log::SetLoggerError),
    /// SIGPIPE's default action could not be restored.
    #[error("cannot restore SIGPIPE's default action")]
    Sigpipe(#[source] nix::Error),
}

/// Lets a closed stdout end this process as it ends `cat` or `grep`
/// (killed by SIGPIPE, status 141 in a shell): for commands that only read
/// files and print, so that `bootbench report FILE | head` stops quietly
/// instead of panicking in `print!` (the Rust runtime ignores SIGPIPE, so
/// the write fails and `print!` panics). Not for commands that drive
/// children, sockets or files: a peer going away must not kill those before
/// their cleanups and results.
pub fn end_when_stdout_closes() -> Result<(), TerminalError> {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: SIG_DFL installs no handler, so no code of ours runs in a
    // signal context.
    unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) }.map(drop).map_err(TerminalError::Sigpipe)
}

static BARS: OnceLock<MultiProgress> = OnceLock::new();

/// The bars of this process: hidden until [`init`] shows them.
fn bars() -> &'static MultiProgress {
    BARS.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::hidden()))
}

/// What a level puts before the message: nothing for `info`.
fn level_word(level: Level) -> &'static str {
    match level {
        Level::Error => "error: ",
        Level::Warn => "warning: ",
        Level::Info => "",
        Level::Debug => "debug: ",
        Level::Trace => "trace: ",
    }
}

/// One log line as printed: `PREFIX: [level: ]message`.
pub fn format_line(prefix: &str, level: Level, message: &std::fmt::Arguments<'_>) -> String {
    format!("{prefix}: {}{message}", level_word(level))
}

/// Installs the logger for this process with `prefix` (the subcommand,
/// e.g. `run` or `kernel fetch`) before every line and `level` as the
/// most it prints, and shows progress bars when stderr is a terminal and
/// `level` is `info` or more. Call once, before anything logs.
pub fn init(prefix: &str, level: LevelFilter) -> Result<(), TerminalError> {
    let prefix = prefix.to_string();
    let logger = env_logger::Builder::new()
        .filter_level(level)
        .target(env_logger::Target::Stderr)
        .format(move |buf, record| writeln!(buf, "{}", format_line(&prefix, record.level(), record.args())))
        .build();
    if level >= LevelFilter::Info {
        // Hidden by indicatif itself when stderr is not a terminal.
        bars().set_draw_target(ProgressDrawTarget::stderr());
    }
    indicatif_log_bridge::LogWrapper::new(bars().clone(), logger).try_init().map_err(TerminalError::AlreadySet)?;
    log::set_max_level(level);
    Ok(())
}

/// Whether progress is drawn (stderr is a terminal, and not `-q`).
pub fn progress_shown() -> bool {
    !bars().is_hidden()
}

/// A spinner with `message`, ticking by itself until dropped or finished.
pub fn spinner(message: impl Into<String>) -> ProgressBar {
    let bar = bars().add(ProgressBar::new_spinner());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.into());
    bar.enable_steady_tick(Duration::from_millis(120));
    // Drawn at once, not only at the first tick.
    bar.tick();
    bar
}

/// A byte counter of `total` bytes (unknown: a spinner with the count).
pub fn bytes(total: Option<u64>, message: impl Into<String>) -> ProgressBar {
    let bar = match total {
        Some(n) => bars().add(ProgressBar::new(n)).with_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        ),
        None => bars().add(ProgressBar::new_spinner()).with_style(
            ProgressStyle::with_template("{spinner} {msg} {bytes} {bytes_per_sec}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    bar.set_message(message.into());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A counter of `len` steps (boots, bisection steps), with the time left
/// from the steps done so far ([`time_left`]), redrawn every second so
/// that the elapsed time and the time left move while a step runs.
pub fn steps(len: u64, message: impl Into<String>) -> ProgressBar {
    let bar = bars().add(ProgressBar::new(len)).with_style(
        ProgressStyle::with_template("{msg} [{bar:20}] {pos}/{len} {elapsed} (left {left})")
            .map(|s| s.with_key("left", StepsLeft::default()))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(message.into());
    bar.enable_steady_tick(Duration::from_secs(1));
    bar
}

/// The time left of `len` steps when `done` are done, the last of them
/// `at_done` into the work, and `elapsed` have passed: the mean time of a
/// done step times the steps left, less what the current step has run
/// already (never below zero). `None` before the first step is done.
///
/// indicatif's own `{eta}` takes a stall for a slowing rate, so its
/// figure grows while one long step (a boot) runs and stays put between
/// redraws; this one counts down.
pub fn time_left(done: u64, len: u64, at_done: Duration, elapsed: Duration) -> Option<Duration> {
    if done == 0 {
        return None;
    }
    let per_step = at_done.as_secs_f64() / done as f64;
    let running = elapsed.saturating_sub(at_done).as_secs_f64();
    let left = per_step * len.saturating_sub(done) as f64 - running;
    Some(Duration::from_secs_f64(left.max(0.0)))
}

/// The `{left}` key of [`steps`]: remembers when the last step was done.
#[derive(Clone, Default)]
struct StepsLeft {
    done: u64,
    at_done: Duration,
}

impl indicatif::style::ProgressTracker for StepsLeft {
    fn clone_box(&self) -> Box<dyn indicatif::style::ProgressTracker> {
        Box::new(self.clone())
    }

    fn tick(&mut self, state: &indicatif::ProgressState, _: std::time::Instant) {
        if state.pos() != self.done {
            self.done = state.pos();
            self.at_done = state.elapsed();
        }
    }

    fn reset(&mut self, _: &indicatif::ProgressState, _: std::time::Instant) {
        *self = StepsLeft::default();
    }

    fn write(&self, state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write) {
        let len = state.len().unwrap_or(self.done);
        let _ = match time_left(self.done, len, self.at_done, state.elapsed()) {
            Some(left) => write!(w, "{:#}", indicatif::HumanDuration(left)),
            None => write!(w, "?"),
        };
    }
}

/// A byte bar that follows what lands in a directory (a download by a
/// program that draws no progress of its own, e.g. `apt-get download`):
/// the sizes of its files, summed every 250 ms, until dropped.
pub struct DirectoryBytes {
    _polling: Polling,
}

impl DirectoryBytes {
    /// Starts following `dir`, expecting `total` bytes when known.
    pub fn follow(dir: &std::path::Path, total: Option<u64>, message: impl Into<String>) -> DirectoryBytes {
        let (bar, dir) = (bytes(total, message), dir.to_path_buf());
        if bar.is_hidden() {
            return DirectoryBytes { _polling: Polling::idle(bar) };
        }
        DirectoryBytes { _polling: Polling::start(bar, move |bar| bar.set_position(directory_bytes(&dir))) }
    }
}

/// A bar updated every 250 ms by `poll` on a thread of its own; dropped:
/// the thread stopped and joined, the bar cleared.
struct Polling {
    bar: ProgressBar,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    watcher: Option<std::thread::JoinHandle<()>>,
}

impl Polling {
    fn start(bar: ProgressBar, mut poll: impl FnMut(&ProgressBar) + Send + 'static) -> Polling {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (shown, halt) = (bar.clone(), stop.clone());
        let watcher = std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                poll(&shown);
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        Polling { bar, stop, watcher: Some(watcher) }
    }

    /// A bar nobody updates (progress not shown): no thread.
    fn idle(bar: ProgressBar) -> Polling {
        Polling { bar, stop: Default::default(), watcher: None }
    }
}

impl Drop for Polling {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
        self.bar.finish_and_clear();
    }
}

/// The bytes of the files in `dir` and below (what could be read).
pub fn directory_bytes(dir: &std::path::Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// What a long command printed, for progress: a make line that names
/// what it builds (`  CC      kernel/fork.o`) and whether it made an
/// object.
pub fn build_step(line: &str) -> Option<(&str, bool)> {
    let trimmed = line.trim();
    let (verb, what) = trimmed.split_once(char::is_whitespace)?;
    let is_step = !verb.is_empty()
        && verb.len() <= 12
        && verb.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '-');
    is_step.then(|| (trimmed, what.trim_end().ends_with(".o")))
}

/// Runs `cmd` with a spinner that shows its latest build step and the
/// objects made so far, when progress is shown; its output (stdout and
/// stderr, merged in arrival order per stream) is kept, its last `keep`
/// lines returned for an error message. Without progress the output
/// streams to stderr as it comes, as before. `what` names the command.
pub fn run_with_steps(
    cmd: &mut std::process::Command,
    what: &str,
    keep: usize,
) -> std::io::Result<(std::process::ExitStatus, Vec<String>)> {
    use std::io::BufRead;
    use std::process::Stdio;
    if !progress_shown() {
        let status = cmd.stdout(std::io::stderr()).stderr(Stdio::inherit()).status()?;
        return Ok((status, Vec::new()));
    }
    let bar = spinner(what.to_string());
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let tail = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
    let push = move |tail: &std::sync::Mutex<std::collections::VecDeque<String>>, line: String| {
        let mut t = tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if t.len() == keep {
            t.pop_front();
        }
        t.push_back(line);
    };
    let stderr = child.stderr.take().map(|e| {
        let tail = tail.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(e).lines().map_while(Result::ok) {
                push(&tail, line);
            }
        })
    });
    let mut steps = BuildSteps::default();
    if let Some(out) = child.stdout.take() {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(message) = steps.read(&line, what) {
                bar.set_message(message);
            }
            push(&tail, line);
        }
    }
    let status = child.wait()?;
    if let Some(t) = stderr {
        let _ = t.join();
    }
    bar.finish_and_clear();
    let tail = tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect();
    Ok((status, tail))
}

/// Runs `cmd` to the end and returns its whole output, as
/// [`std::process::Command::output`] does; when progress is shown, a
/// spinner named `what` shows meanwhile the latest line of either stream
/// that `shows` picks (e.g. mmdebstrap's `I: …` stage lines).
pub fn output_with_spinner(
    cmd: &mut std::process::Command,
    what: &str,
    shows: fn(&str) -> bool,
) -> std::io::Result<std::process::Output> {
    if !progress_shown() {
        return cmd.output();
    }
    let bar = spinner(what.to_string());
    let out = output_showing(cmd, &bar, what, shows);
    bar.finish_and_clear();
    out
}

/// [`output_with_spinner`]'s work, with the bar given: both streams read
/// whole, each line `shows` picks set as `bar`'s message.
fn output_showing(
    cmd: &mut std::process::Command,
    bar: &ProgressBar,
    what: &str,
    shows: fn(&str) -> bool,
) -> std::io::Result<std::process::Output> {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let read = |stream: Option<Box<dyn std::io::Read + Send>>| {
        let (bar, what) = (bar.clone(), what.to_string());
        std::thread::spawn(move || {
            let mut all = Vec::new();
            if let Some(stream) = stream {
                let mut lines = std::io::BufReader::new(stream);
                let mut line = Vec::new();
                while lines.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                    let text = String::from_utf8_lossy(&line);
                    if shows(text.trim_end()) {
                        bar.set_message(format!("{what}: {}", text.trim()));
                    }
                    all.append(&mut line);
                }
            }
            all
        })
    };
    let out = read(child.stdout.take().map(|o| Box::new(o) as Box<dyn std::io::Read + Send>));
    let err = read(child.stderr.take().map(|e| Box::new(e) as Box<dyn std::io::Read + Send>));
    let status = child.wait()?;
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok(std::process::Output { status, stdout, stderr })
}

/// A spinner that follows a build's log file while the build writes it
/// (a make run inside a chroot whose output goes to a file): the latest
/// make step and the objects made so far, read every 250 ms, until
/// dropped. Nothing runs when progress is not shown.
pub struct FollowBuildLog {
    _polling: Polling,
}

impl FollowBuildLog {
    /// Starts following `log`, the spinner named `what`.
    pub fn start(log: &std::path::Path, what: &str) -> FollowBuildLog {
        if !progress_shown() {
            return FollowBuildLog { _polling: Polling::idle(ProgressBar::hidden()) };
        }
        FollowBuildLog::with_bar(log, what, spinner(what.to_string()))
    }

    /// [`FollowBuildLog::start`] with the bar given, drawn or not. Only
    /// what the file gained since the last look is read.
    fn with_bar(log: &std::path::Path, what: &str, bar: ProgressBar) -> FollowBuildLog {
        use std::io::{Read, Seek, SeekFrom};
        let (path, what) = (log.to_path_buf(), what.to_string());
        let (mut steps, mut read, mut pending) = (BuildSteps::default(), 0u64, Vec::new());
        FollowBuildLog {
            _polling: Polling::start(bar, move |shown| {
                let Ok(mut file) = std::fs::File::open(&path) else { return };
                if file.seek(SeekFrom::Start(read)).is_err() {
                    return;
                }
                let Ok(n) = file.read_to_end(&mut pending) else { return };
                read += n as u64;
                // Whole lines only: a partial last line waits for its end.
                if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
                    let lines: Vec<u8> = pending.drain(..=end).collect();
                    if let Some(text) = steps.read(&String::from_utf8_lossy(&lines), &what) {
                        shown.set_message(text);
                    }
                }
            }),
        }
    }
}

/// The make steps seen so far in a build's output, for a spinner.
#[derive(Debug, Default)]
pub struct BuildSteps {
    objects: u64,
}

impl BuildSteps {
    /// Reads `lines` (whole lines of output); the spinner's new message
    /// (`what: N objects; STEP`) when they held a make step.
    pub fn read(&mut self, lines: &str, what: &str) -> Option<String> {
        let mut last = None;
        for line in lines.lines() {
            if let Some((step, object)) = build_step(line) {
                self.objects += u64::from(object);
                last = Some(step.to_string());
            }
        }
        last.map(|step| format!("{what}: {} objects; {step}", self.objects))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_the_command_and_say_their_level_except_info() {
        assert_eq!(format_line("run", Level::Info, &format_args!("wrote {}", "r.json")), "run: wrote r.json");
        assert_eq!(format_line("kernel fetch", Level::Warn, &format_args!("slow")), "kernel fetch: warning: slow");
        assert_eq!(format_line("bisect", Level::Error, &format_args!("x")), "bisect: error: x");
        assert_eq!(format_line("run", Level::Debug, &format_args!("argv")), "run: debug: argv");
    }

    #[test]
    fn the_time_left_counts_down_while_a_step_runs_and_is_unknown_before_the_first() {
        let s = Duration::from_secs;
        assert_eq!(time_left(0, 2, s(0), s(40)), None, "no step done: nothing to go on");
        // One 53 s boot of two done, 20 s into the second: 33 s left.
        assert_eq!(time_left(1, 2, s(53), s(73)), Some(s(33)));
        assert_eq!(time_left(1, 2, s(53), s(83)), Some(s(23)), "and it keeps counting down");
        assert_eq!(time_left(1, 3, s(50), s(50)), Some(s(100)));
        assert_eq!(time_left(1, 2, s(53), s(200)), Some(s(0)), "an overdue step is not a negative time");
        assert_eq!(time_left(4, 4, s(80), s(81)), Some(s(0)));
    }

    #[test]
    fn a_build_log_read_in_pieces_counts_every_object_and_shows_the_last_step() {
        let mut steps = BuildSteps::default();
        let first = "  SYNC    include/config/auto.conf\n  HOSTCC  scripts/basic/fixdep\n";
        assert_eq!(
            steps.read(first, "make prepare").as_deref(),
            Some("make prepare: 0 objects; HOSTCC  scripts/basic/fixdep")
        );
        let second = "fixdep.c: note\n  CC      scripts/mod/empty.o\n  CC      kernel/bounds.s\n  CC      scripts/mod/devicetable-offsets.o\n";
        assert_eq!(
            steps.read(second, "make prepare").as_deref(),
            Some("make prepare: 2 objects; CC      scripts/mod/devicetable-offsets.o")
        );
        assert_eq!(steps.read("make[1]: Leaving directory '/x'\n", "make prepare"), None, "no step: the message stays");
        assert_eq!(
            steps.read("  LD      vmlinux.o\n", "make").as_deref(),
            Some("make: 3 objects; LD      vmlinux.o"),
            "counted across reads"
        );
    }

    #[test]
    fn a_build_log_is_followed_while_it_grows_whole_lines_only() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("linux-prepare.log");
        let mut file = std::fs::File::create(&log).unwrap();
        let bar = ProgressBar::hidden();
        let follow = FollowBuildLog::with_bar(&log, "make prepare", bar.clone());
        let until = |want: &str| {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while bar.message() != want && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            bar.message()
        };
        file.write_all(b"  CC      scripts/mod/empty.o\n  CC      scripts/mod/devicet").unwrap();
        assert_eq!(
            until("make prepare: 1 objects; CC      scripts/mod/empty.o"),
            "make prepare: 1 objects; CC      scripts/mod/empty.o"
        );
        file.write_all(b"able-offsets.o\n").unwrap();
        let whole = "make prepare: 2 objects; CC      scripts/mod/devicetable-offsets.o";
        assert_eq!(until(whole), whole, "the partial line was read once it ended");
        drop(follow);
    }

    #[test]
    fn a_commands_stage_lines_are_shown_and_both_streams_kept_whole() {
        let mut c = std::process::Command::new("sh");
        c.args(["-c", "echo 'I: one'; echo 'E: two' >&2; sleep 0.2; echo 'I: three'; echo 'P: 4'; exit 3"]);
        let bar = ProgressBar::hidden();
        let out = output_showing(&mut c, &bar, "mmdebstrap", |l| l.starts_with("I: ")).unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"I: one\nI: three\nP: 4\n");
        assert_eq!(out.stderr, b"E: two\n");
        assert_eq!(bar.message(), "mmdebstrap: I: three", "the latest stage line, not the last line");
    }

    #[test]
    fn bars_stay_hidden_until_a_terminal_shows_them() {
        // No `init` in unit tests: a bar made then draws nothing.
        let bar = spinner("x");
        assert!(bar.is_hidden());
        assert!(!progress_shown());
    }

    #[test]
    fn make_lines_are_steps_and_objects_are_counted() {
        assert_eq!(build_step("  CC      kernel/fork.o"), Some(("CC      kernel/fork.o", true)));
        assert_eq!(build_step("  LD [M]  fs/ext4/ext4.ko"), Some(("LD [M]  fs/ext4/ext4.ko", false)));
        assert_eq!(build_step("  GEN     Makefile"), Some(("GEN     Makefile", false)));
        assert_eq!(build_step("make[1]: Entering directory '/src'"), None);
        assert_eq!(build_step("kernel/fork.c:12: warning: unused"), None);
        assert_eq!(build_step(""), None);
    }

    #[test]
    fn a_directory_counts_every_file_below_it() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.deb"), [0u8; 1000]).unwrap();
        std::fs::create_dir(d.path().join("partial")).unwrap();
        std::fs::write(d.path().join("partial/b"), [0u8; 24]).unwrap();
        assert_eq!(directory_bytes(d.path()), 1024);
        assert_eq!(directory_bytes(&d.path().join("missing")), 0);
    }
}
