//! Test support: the system calls a closure makes, as the kernel receives
//! them, without strace or tracing privileges. The closure runs on a
//! thread of its own under a seccomp filter that hands each watched call
//! to a supervisor thread (a user notification), which records it and
//! lets it go on unchanged. Needs Linux 5.5 (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`)
//! on x86_64 or aarch64; only the closure's thread is filtered, and the
//! filter ends with it.

use std::fmt;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Watched calls: number, name and which argument is a path.
#[cfg(target_arch = "x86_64")]
const WATCHED: &[(libc::c_long, &str, Option<usize>)] = &[
    (libc::SYS_openat, "openat", Some(1)),
    (libc::SYS_open, "open", Some(0)),
    (libc::SYS_newfstatat, "newfstatat", Some(1)),
    (libc::SYS_fstat, "fstat", None),
    (libc::SYS_stat, "stat", Some(0)),
    (libc::SYS_lstat, "lstat", Some(0)),
    (libc::SYS_statx, "statx", Some(1)),
    (libc::SYS_statfs, "statfs", Some(0)),
    (libc::SYS_fstatfs, "fstatfs", None),
    (libc::SYS_utimensat, "utimensat", Some(1)),
    (libc::SYS_utime, "utime", Some(0)),
    (libc::SYS_utimes, "utimes", Some(0)),
    (libc::SYS_mkdirat, "mkdirat", Some(1)),
    (libc::SYS_mkdir, "mkdir", Some(0)),
    (libc::SYS_unlinkat, "unlinkat", Some(1)),
    (libc::SYS_renameat, "renameat", Some(1)),
    (libc::SYS_renameat2, "renameat2", Some(1)),
    (libc::SYS_getdents64, "getdents64", None),
    (libc::SYS_lseek, "lseek", None),
    (libc::SYS_fcntl, "fcntl", None),
    (libc::SYS_close, "close", None),
    (libc::SYS_pread64, "pread64", None),
    (libc::SYS_pwrite64, "pwrite64", None),
    (libc::SYS_fsync, "fsync", None),
    (libc::SYS_read, "read", None),
    (libc::SYS_kill, "kill", None),
];
#[cfg(target_arch = "aarch64")]
const WATCHED: &[(libc::c_long, &str, Option<usize>)] = &[
    (libc::SYS_openat, "openat", Some(1)),
    (libc::SYS_newfstatat, "newfstatat", Some(1)),
    (libc::SYS_fstat, "fstat", None),
    (libc::SYS_statx, "statx", Some(1)),
    (libc::SYS_statfs, "statfs", Some(0)),
    (libc::SYS_fstatfs, "fstatfs", None),
    (libc::SYS_utimensat, "utimensat", Some(1)),
    (libc::SYS_mkdirat, "mkdirat", Some(1)),
    (libc::SYS_unlinkat, "unlinkat", Some(1)),
    (libc::SYS_renameat, "renameat", Some(1)),
    (libc::SYS_renameat2, "renameat2", Some(1)),
    (libc::SYS_getdents64, "getdents64", None),
    (libc::SYS_lseek, "lseek", None),
    (libc::SYS_fcntl, "fcntl", None),
    (libc::SYS_close, "close", None),
    (libc::SYS_pread64, "pread64", None),
    (libc::SYS_pwrite64, "pwrite64", None),
    (libc::SYS_fsync, "fsync", None),
    (libc::SYS_read, "read", None),
    (libc::SYS_kill, "kill", None),
];

/// One system call, as the kernel received it.
#[derive(Debug, Clone)]
pub struct Call {
    /// What it does, whichever of its variants libc used: `stat` (by
    /// path), `fstat` (by descriptor), `open`, `statfs`, `fstatfs`,
    /// `utime` (by path), `futimens`, `mkdir`, `unlink`, `rmdir`,
    /// `rename`, `getdents`, `lseek`, `fcntl`, `close`, `pread`, `pwrite`,
    /// `fsync`, `read` or `kill`.
    pub kind: &'static str,
    /// The path argument, when it has one.
    pub path: Option<String>,
    /// The raw arguments.
    pub args: [u64; 6],
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path.as_deref() {
            Some(p) if !p.is_empty() => write!(f, "{} {p}", self.kind),
            _ => f.write_str(self.kind),
        }
    }
}

fn kind(name: &str, args: &[u64; 6], path: Option<&str>) -> &'static str {
    let empty_path = |flags: u64| path.is_none_or(str::is_empty) && flags & libc::AT_EMPTY_PATH as u64 != 0;
    match name {
        "newfstatat" if empty_path(args[3]) => "fstat",
        "statx" if empty_path(args[2]) => "fstat",
        "newfstatat" | "statx" | "stat" | "lstat" => "stat",
        "fstat" => "fstat",
        "openat" | "open" => "open",
        "statfs" => "statfs",
        "fstatfs" => "fstatfs",
        "utimensat" if args[1] == 0 => "futimens",
        "utimensat" | "utime" | "utimes" => "utime",
        "mkdirat" | "mkdir" => "mkdir",
        "unlinkat" if args[2] & libc::AT_REMOVEDIR as u64 != 0 => "rmdir",
        "unlinkat" => "unlink",
        "renameat" | "renameat2" => "rename",
        "getdents64" => "getdents",
        "lseek" => "lseek",
        "fcntl" => "fcntl",
        "close" => "close",
        "pread64" => "pread",
        "pwrite64" => "pwrite",
        "read" => "read",
        "kill" => "kill",
        _ => "fsync",
    }
}

/// Reads the NUL-terminated string at `addr` in this process.
fn c_string(mem: &File, addr: u64) -> Option<String> {
    if addr == 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while out.len() < 4096 && mem.read_at(&mut byte, addr + out.len() as u64).ok()? == 1 && byte[0] != 0 {
        out.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

fn filter() -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    let stmt = |code, k| libc::sock_filter { code, jt: 0, jf: 0, k };
    let jeq = |k, jt, jf| libc::sock_filter { code: JEQ_K, jt, jf, k };
    // seccomp_data: nr at 0, arch at 4.
    let mut prog =
        vec![stmt(LD_W_ABS, 4), jeq(AUDIT_ARCH, 1, 0), stmt(RET_K, libc::SECCOMP_RET_ALLOW), stmt(LD_W_ABS, 0)];
    for &(nr, _, _) in WATCHED {
        prog.push(jeq(nr as u32, 0, 1));
        prog.push(stmt(RET_K, libc::SECCOMP_RET_USER_NOTIF));
    }
    prog.push(stmt(RET_K, libc::SECCOMP_RET_ALLOW));
    prog
}

/// Puts the calling thread under the filter; returns the listener.
fn install() -> std::io::Result<OwnedFd> {
    let mut prog = filter();
    let fprog = libc::sock_fprog { len: prog.len() as libc::c_ushort, filter: prog.as_mut_ptr() };
    // SAFETY: prctl with integer arguments; it changes only this thread.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fprog` points at `prog`, alive for the call; the kernel
    // copies the program.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new descriptor to us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Answers notifications until `done` and nothing is pending.
fn supervise(listener: &OwnedFd, done: &AtomicBool) -> Vec<Call> {
    let mem = File::open("/proc/self/mem").expect("open /proc/self/mem");
    let mut calls = Vec::new();
    loop {
        let mut pfd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 20) };
        if n <= 0 || pfd.revents & libc::POLLIN == 0 {
            if done.load(Ordering::SeqCst) {
                return calls;
            }
            continue;
        }
        // SAFETY: all-zero is a valid seccomp_notif, and RECV wants it
        // zeroed.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: RECV fills `req`, which outlives the call.
        if unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) } != 0 {
            continue;
        }
        let nr = libc::c_long::from(req.data.nr);
        if let Some(&(_, name, path_arg)) = WATCHED.iter().find(|w| w.0 == nr) {
            let args = req.data.args;
            // The caller is stopped in the call, so its argument memory
            // holds still while it is read.
            let path = path_arg.and_then(|i| c_string(&mem, args[i]));
            calls.push(Call { kind: kind(name, &args, path.as_deref()), path, args });
        }
        let resp = libc::seccomp_notif_resp {
            id: req.id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        };
        // SAFETY: SEND reads `resp`, which outlives the call.
        unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) };
    }
}

/// Runs `f` on a thread of its own and returns what it returned with the
/// watched system calls it made, in order. Panics when the kernel does
/// not offer seccomp user notifications.
pub fn seen_syscalls<R: Send>(f: impl FnOnce() -> R + Send) -> (R, Vec<Call>) {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<OwnedFd>();
        let done = &done;
        let supervisor = s.spawn(move || {
            let listener = rx.recv().expect("the filtered thread sends its listener");
            supervise(&listener, done)
        });
        let worker = s.spawn(move || {
            let listener = install().expect("seccomp user notification (Linux 5.5+) is needed to count calls");
            tx.send(listener).expect("the supervisor waits for the listener");
            f()
        });
        // The supervisor stops once told, even when the counted code
        // panicked (or could not install the filter), so a failing test
        // fails with its own message instead of hanging.
        let out = worker.join();
        done.store(true, Ordering::SeqCst);
        match out {
            Ok(out) => (out, supervisor.join().expect("the supervisor panicked")),
            Err(panic) => {
                let _ = supervisor.join();
                std::panic::resume_unwind(panic)
            }
        }
    })
}
