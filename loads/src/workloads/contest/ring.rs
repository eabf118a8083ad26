//! process_load's ring, as contest defines it: N processes forked *and
//! exec'd*, joined in a one-way ring of pipes, with M ≪ N chunks of data
//! passed round it. A member holds data only while a chunk passes through
//! it, so at most M of them have work at once and a hop mostly wakes a
//! member asleep in `read`: an IPC and wake-up chain, not N busy tasks.
//!
//! The ring has N + 1 stations: the N exec'd members (the `ring` applet,
//! [`member_main`]) and the load's leader, which stays unexec'd because it
//! holds the shared page: it inserts the chunks, passes each one on like
//! a member, and counts a *lap* every time a chunk comes back to it. The
//! stop flag does not survive exec, so the members never see it: they end
//! on end-of-file or EPIPE once a neighbour has gone, and at the stop the
//! leader kills and reaps them. Owns the ring's shape, its members and its
//! count; must not start or stop the leader (that is `load_process`).

use super::shared_page::SharedPage;
use crate::applet_argv::APPLET_FLAG;
use crate::reap::{self, Exit};
use nix::unistd::Pid;
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The applet a ring member runs: `ring IN_FD OUT_FD`.
pub const APPLET: &str = "ring";

/// Bytes of one chunk: one page, and no more than `PIPE_BUF`, so every
/// write of a chunk is atomic and a reader never sees half of one.
pub const CHUNK: usize = 4096;

/// Members per chunk. contest says only M ≪ N, without a figure: one chunk
/// per eight members keeps M ≪ N at every size while M still grows with
/// the machine (N = 4 × CPUs, so M = CPUs / 2: work for at most half the
/// CPUs at once, the other members asleep in `read`). Fewer than eight
/// members still get one chunk.
pub const MEMBERS_PER_CHUNK: usize = 8;

/// The chunks a ring of `members` exec'd members carries: M = max(1, N / 8)
/// (see [`MEMBERS_PER_CHUNK`]).
pub fn chunks(members: usize) -> usize {
    (members / MEMBERS_PER_CHUNK).max(1)
}

/// Exit codes of a ring member, besides 0 (a neighbour went: end-of-file
/// on its input or EPIPE on its output, how the ring ends).
const EXIT_USAGE: i32 = 2;
const EXIT_READ: i32 = 3;
const EXIT_WRITE: i32 = 4;
const EXIT_CUT: i32 = 5;
/// What the forked child exits with when it cannot exec the applet.
const EXIT_EXEC: i32 = 127;

/// How long the leader waits for the member that broke the ring to be
/// reapable (its pipes close before its exit is reported).
const BROKEN_REAP_WAIT: Duration = Duration::from_millis(200);

/// Errors of the ring.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    /// A system call of the leader failed.
    #[error("{what} failed")]
    Sys {
        /// The call.
        what: &'static str,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The leader's descriptors could not be listed.
    #[error("cannot list /proc/self/fd")]
    ListFds(#[source] std::io::Error),
    /// A path or argument cannot be passed to exec.
    #[error("cannot exec {0:?}: it contains a NUL byte")]
    Nul(PathBuf),
    /// The ring broke before contest stopped the load: members ended.
    #[error("the ring broke before contest stopped the load: {how}")]
    Broke {
        /// Which members ended first and how.
        how: String,
    },
    /// Members ended some other way than the leader's kill at the stop.
    #[error("ring members did not end as stopped: {how}")]
    BadStop {
        /// Which members and how.
        how: String,
    },
}

fn sys(what: &'static str) -> impl FnOnce(nix::Error) -> RingError {
    move |source| RingError::Sys { what, source }
}

fn borrow(fd: RawFd) -> BorrowedFd<'static> {
    // SAFETY: only used on descriptors the caller keeps open for as long
    // as the borrow is used.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

/// Reads one chunk: `Ok(true)` for a whole chunk, `Ok(false)` at
/// end-of-file before any byte of it, `Err(None)` for end-of-file inside
/// it, `Err(Some(errno))` for a failed read.
fn read_chunk(fd: RawFd, buf: &mut [u8]) -> Result<bool, Option<nix::Error>> {
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(borrow(fd), buf.get_mut(got..).unwrap_or_default()) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(None),
            Ok(n) => got += n,
            Err(nix::Error::EINTR) => {}
            Err(e) => return Err(Some(e)),
        }
    }
    Ok(true)
}

/// Writes one chunk whole.
fn write_chunk(fd: RawFd, buf: &[u8]) -> Result<(), nix::Error> {
    let mut done = 0;
    while done < buf.len() {
        match nix::unistd::write(borrow(fd), buf.get(done..).unwrap_or_default()) {
            Ok(n) => done += n,
            Err(nix::Error::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Ignores SIGPIPE, so a write to a ring whose reader has gone is EPIPE,
/// not death.
fn ignore_sigpipe() {
    // SAFETY: setting a disposition to ignore installs no handler code.
    let _ =
        unsafe { nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigIgn) };
}

/// The `ring` applet: `ring IN_FD OUT_FD`. Passes every chunk that arrives
/// on IN_FD to OUT_FD until a neighbour goes (end-of-file or EPIPE: exit
/// 0); 2 on a usage error, 3 when a read fails, 4 when a write fails, 5
/// when a chunk arrives cut short.
pub fn member_main(args: &[OsString]) -> i32 {
    let fd = |i: usize| args.get(i).and_then(|a| a.to_str()).and_then(|a| a.parse::<RawFd>().ok()).filter(|f| *f >= 0);
    let (Some(input), Some(output), 2) = (fd(0), fd(1), args.len()) else {
        eprintln!("ring: usage: ring IN_FD OUT_FD");
        return EXIT_USAGE;
    };
    ignore_sigpipe();
    let mut buf = [0u8; CHUNK];
    loop {
        match read_chunk(input, &mut buf) {
            Ok(true) => {}
            Ok(false) => return 0,
            Err(None) => return EXIT_CUT,
            Err(Some(_)) => return EXIT_READ,
        }
        match write_chunk(output, &buf) {
            Ok(()) => {}
            Err(nix::Error::EPIPE) => return 0,
            Err(_) => return EXIT_WRITE,
        }
    }
}

/// What a member's exit says, for errors.
fn describe(exit: Exit) -> String {
    let why = match exit {
        Exit::Code(0) => "a neighbour had gone (end-of-file or EPIPE)",
        Exit::Code(EXIT_USAGE) => "the applet refused its arguments",
        Exit::Code(EXIT_READ) => "a read failed",
        Exit::Code(EXIT_WRITE) => "a write failed",
        Exit::Code(EXIT_CUT) => "a chunk arrived cut short",
        Exit::Code(EXIT_EXEC) => "the ring applet could not be exec'd",
        _ => "",
    };
    if why.is_empty() {
        exit.to_string()
    } else {
        format!("{exit}: {why}")
    }
}

/// Marks every descriptor above stderr close-on-exec, so members inherit
/// only their two ring ends (and stdio). The leader never execs itself.
fn cloexec_all() -> Result<(), RingError> {
    let dir = std::fs::read_dir("/proc/self/fd").map_err(RingError::ListFds)?;
    let fds: Vec<RawFd> =
        dir.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).filter(|&fd| fd > 2).collect();
    for fd in fds {
        // The directory's own descriptor is among them and gone now: EBADF.
        let _ = nix::fcntl::fcntl(borrow(fd), nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC));
    }
    Ok(())
}

fn cstring(s: &OsStr) -> Result<CString, RingError> {
    CString::new(s.as_bytes()).map_err(|_| RingError::Nul(PathBuf::from(s)))
}

/// One running member: its pid and its place in the ring (1..=N; the
/// leader is station 0).
struct Member {
    pid: Pid,
    station: usize,
}

/// Forks and execs one member reading `input` and writing `output`.
fn start_member(argv: &[CString], input: RawFd, output: RawFd) -> Result<Pid, RingError> {
    let ptrs: Vec<*const libc::c_char> =
        argv.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
    // SAFETY: the child makes only system calls on data prepared before
    // the fork (the leader is single-threaded) and execs or `_exit`s.
    match unsafe { nix::unistd::fork() }.map_err(sys("fork"))? {
        nix::unistd::ForkResult::Child => unsafe {
            // Its two ends survive the exec; every other descriptor is
            // close-on-exec.
            libc::fcntl(input, libc::F_SETFD, 0);
            libc::fcntl(output, libc::F_SETFD, 0);
            if let Some(&exe) = ptrs.first() {
                libc::execv(exe, ptrs.as_ptr());
            }
            libc::_exit(EXIT_EXEC)
        },
        nix::unistd::ForkResult::Parent { child } => Ok(child),
    }
}

/// The members that have ended by now, each with how, reaped.
fn reap_ended(members: &mut Vec<Member>, ended: &mut Vec<(usize, Pid, Exit)>) {
    members.retain(|m| match reap::try_wait_pid(m.pid) {
        Ok(Some(r)) => {
            ended.push((m.station, m.pid, r.exit));
            false
        }
        Ok(None) => true,
        Err(_) => {
            ended.push((m.station, m.pid, Exit::Code(-1)));
            false
        }
    });
}

fn list(ended: &[(usize, Pid, Exit)], n: usize) -> String {
    ended
        .iter()
        .map(|(s, pid, exit)| format!("member {s} of {n} (pid {pid}): {}", describe(*exit)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The ring broke: says which members ended on their own, the ones that
/// did not end for a neighbour first, then kills and reaps the rest.
fn broken(mut members: Vec<Member>, n: usize) -> RingError {
    let mut ended = Vec::new();
    let until = Instant::now() + BROKEN_REAP_WAIT;
    loop {
        reap_ended(&mut members, &mut ended);
        if members.is_empty() || (ended.iter().any(|e| e.2 != Exit::Code(0)) || Instant::now() >= until) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    kill_all(&members);
    // Who broke the ring first: a member that failed or was killed, not
    // one that ended because its neighbour had gone.
    ended.sort_by_key(|e| (e.2 == Exit::Code(0), e.0));
    let how = if ended.is_empty() { "no member had ended yet".to_string() } else { list(&ended, n) };
    RingError::Broke { how }
}

fn kill_all(members: &[Member]) {
    let pids: Vec<Pid> = members.iter().map(|m| m.pid).collect();
    reap::kill_and_reap(&pids);
}

/// The leader's side of process_load: starts `members` exec'd members of
/// `exe`'s `ring` applet, inserts [`chunks`]`(members)` chunks, passes
/// every chunk that comes back on and counts it as one lap in `page`,
/// until the stop flag is raised; then kills and reaps the members. A
/// member that ends before the stop breaks the ring, and the error says
/// which and how.
pub fn run_leader(exe: &Path, members: usize, page: &SharedPage) -> Result<(), RingError> {
    let n = members.max(1);
    ignore_sigpipe();
    cloexec_all()?;
    let flag = cstring(OsStr::new(APPLET_FLAG))?;
    let (exe_c, applet) = (cstring(exe.as_os_str())?, cstring(OsStr::new(APPLET))?);
    // pipes[k] carries chunks from station k to station k + 1 (mod N + 1).
    let mut pipes: Vec<(OwnedFd, OwnedFd)> = Vec::with_capacity(n + 1);
    for _ in 0..=n {
        pipes.push(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys("pipe"))?);
    }
    let mut running: Vec<Member> = Vec::with_capacity(n);
    for station in 1..=n {
        let ends =
            pipes.get(station - 1).map(|p| p.0.as_raw_fd()).zip(pipes.get(station % (n + 1)).map(|p| p.1.as_raw_fd()));
        let Some((input, output)) = ends else { break };
        let argv = [
            exe_c.clone(),
            flag.clone(),
            applet.clone(),
            cstring(OsStr::new(&input.to_string()))?,
            cstring(OsStr::new(&output.to_string()))?,
        ];
        match start_member(&argv, input, output) {
            Ok(pid) => running.push(Member { pid, station }),
            Err(e) => {
                kill_all(&running);
                return Err(e);
            }
        }
    }
    // The leader keeps the read end of the last pipe and the write end of
    // the first; the members hold the rest.
    let last = pipes.pop();
    let mut pipes = pipes.into_iter();
    let first = pipes.next();
    drop(pipes);
    let (Some((input_end, last_w)), Some((first_r, output_end))) = (last, first) else {
        kill_all(&running);
        return Err(RingError::Broke { how: "the ring has no pipes".into() });
    };
    drop((last_w, first_r));
    let (input, output) = (input_end.as_raw_fd(), output_end.as_raw_fd());
    let mut buf = [0x5a_u8; CHUNK];
    for _ in 0..chunks(n) {
        if write_chunk(output, &buf).is_err() {
            return Err(broken(running, n));
        }
    }
    while !page.stop_requested() {
        match read_chunk(input, &mut buf) {
            Ok(true) => {}
            Ok(false) | Err(None) => return Err(broken(running, n)),
            Err(Some(e)) => {
                kill_all(&running);
                return Err(sys("read")(e));
            }
        }
        match write_chunk(output, &buf) {
            Ok(()) => page.add_work(1),
            Err(nix::Error::EPIPE) => return Err(broken(running, n)),
            Err(e) => {
                kill_all(&running);
                return Err(sys("write")(e));
            }
        }
    }
    // The stop: whatever ended on its own before the kill is an error.
    let mut ended = Vec::new();
    reap_ended(&mut running, &mut ended);
    kill_all(&running);
    if ended.is_empty() {
        Ok(())
    } else {
        Err(RingError::BadStop { how: list(&ended, n) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_chunk_per_eight_members_and_never_none() {
        let m: Vec<usize> = [1, 2, 4, 7, 8, 15, 16, 64, 256].into_iter().map(chunks).collect();
        assert_eq!(m, [1, 1, 1, 1, 1, 1, 2, 8, 32]);
    }

    #[test]
    fn a_member_passes_chunks_on_and_ends_when_its_neighbour_goes() {
        let os = |v: &[String]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(member_main(&os(&["3".into()])), EXIT_USAGE);
        assert_eq!(member_main(&os(&["x".into(), "4".into()])), EXIT_USAGE);
        let (in_r, in_w) = nix::unistd::pipe().unwrap();
        let (out_r, out_w) = nix::unistd::pipe().unwrap();
        let args = os(&[in_r.as_raw_fd().to_string(), out_w.as_raw_fd().to_string()]);
        // Two chunks, then end-of-file: both passed on, exit 0.
        write_chunk(in_w.as_raw_fd(), &[1u8; CHUNK]).unwrap();
        write_chunk(in_w.as_raw_fd(), &[2u8; CHUNK]).unwrap();
        drop(in_w);
        assert_eq!(member_main(&args), 0);
        let mut buf = [0u8; CHUNK];
        assert_eq!(read_chunk(out_r.as_raw_fd(), &mut buf).map_err(|_| ()), Ok(true));
        assert_eq!(buf[0], 1);
        assert_eq!(read_chunk(out_r.as_raw_fd(), &mut buf).map_err(|_| ()), Ok(true));
        assert_eq!(buf[0], 2);
        // Half a chunk, then end-of-file: cut short.
        let (in_r, in_w) = nix::unistd::pipe().unwrap();
        nix::unistd::write(&in_w, &[3u8; CHUNK / 2]).unwrap();
        drop(in_w);
        let args = os(&[in_r.as_raw_fd().to_string(), out_w.as_raw_fd().to_string()]);
        assert_eq!(member_main(&args), EXIT_CUT);
        // The reader downstream has gone: EPIPE ends it cleanly.
        let (in_r, in_w) = nix::unistd::pipe().unwrap();
        write_chunk(in_w.as_raw_fd(), &[4u8; CHUNK]).unwrap();
        drop(out_r);
        let args = os(&[in_r.as_raw_fd().to_string(), out_w.as_raw_fd().to_string()]);
        assert_eq!(member_main(&args), 0);
        drop(in_w);
    }

    #[test]
    fn member_exits_read_as_what_happened() {
        assert!(describe(Exit::Code(EXIT_EXEC)).contains("could not be exec'd"));
        assert!(describe(Exit::Code(0)).contains("neighbour had gone"));
        assert_eq!(describe(Exit::Signal(libc::SIGSEGV)), "killed by SIGSEGV");
    }
}
