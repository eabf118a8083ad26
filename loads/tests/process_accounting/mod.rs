//! The processes a piece of workload code makes, by the kernel's count
//! rather than the workload's: the code runs as the first process (pid 1)
//! of a new PID namespace, with BSD process accounting switched on for
//! that namespace alone. Pids in a fresh namespace are 1, 2, 3, ..., so
//! `/proc/sys/kernel/ns_last_pid` read from inside is the number of
//! processes made there; and the kernel writes one accounting record per
//! process that ends, with its pid, its parent, its command name and
//! whether it ever exec'd (no `AFORK` flag). Nothing else on the machine
//! shares the namespace, so the counts hold while other tests run.
//!
//! Needs root (`unshare(CLONE_NEWPID)` needs CAP_SYS_ADMIN, `acct(2)`
//! CAP_SYS_PACCT) and a kernel with CONFIG_BSD_PROCESS_ACCT_V3, as the
//! test machines have. Without them the test fails saying what is
//! missing; it never passes without counting.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// One process that ended inside the namespace, as the kernel accounted it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ended {
    /// Its pid in the namespace.
    pub pid: u32,
    /// Its parent's pid in the namespace.
    pub ppid: u32,
    /// Its command name (the exec'd file's name, at most 15 bytes).
    pub comm: String,
    /// Whether it exec'd a program (the kernel's `AFORK` flag is clear).
    pub execd: bool,
}

/// What the code returned, and what the kernel counted while it ran.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Accounted {
    /// The code's result.
    pub value: serde_json::Value,
    /// Processes made in the namespace, the code's own (pid 1) included.
    pub processes: u32,
    /// Every process but pid 1 that ended, in the order they ended.
    pub ended: Vec<Ended>,
}

impl Accounted {
    /// The processes whose parent was `ppid`, by pid.
    pub fn children_of(&self, ppid: u32) -> Vec<&Ended> {
        let mut v: Vec<&Ended> = self.ended.iter().filter(|e| e.ppid == ppid).collect();
        v.sort_by_key(|e| e.pid);
        v
    }
}

/// `struct acct_v3` (linux/acct.h): 64 bytes, the flag at 0, the version
/// at 1, pid and ppid at 16 and 20, the command name at 48.
const RECORD: usize = 64;
const AFORK: u8 = 0x01;

fn u32_at(r: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(r[at..at + 4].try_into().unwrap())
}

/// Parses an accounting file of version 3 records.
fn parse_records(bytes: &[u8]) -> Result<Vec<Ended>, String> {
    if !bytes.len().is_multiple_of(RECORD) {
        return Err(format!("{} bytes of accounting records: not whole 64-byte acct_v3 records", bytes.len()));
    }
    let mut out = Vec::new();
    for r in bytes.chunks(RECORD) {
        if r[1] & 0x7f != 3 {
            return Err(format!("accounting record of version {} (want 3: CONFIG_BSD_PROCESS_ACCT_V3)", r[1] & 0x7f));
        }
        let comm = &r[48..64];
        let comm = &comm[..comm.iter().position(|&b| b == 0).unwrap_or(comm.len())];
        out.push(Ended {
            pid: u32_at(r, 16),
            ppid: u32_at(r, 20),
            comm: String::from_utf8_lossy(comm).into_owned(),
            execd: r[0] & AFORK == 0,
        });
    }
    Ok(out)
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// The namespace's pid 1: accounting on, `f`, the last pid, accounting
/// off, the records. Errors are texts for the test's failure.
fn namespace_init(acct_file: &Path, f: impl FnOnce() -> serde_json::Value) -> Result<Accounted, String> {
    let path = CString::new(acct_file.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::acct(path.as_ptr()) } != 0 {
        return Err(format!(
            "missing prerequisite: acct({}) failed ({}): process accounting needs root and CONFIG_BSD_PROCESS_ACCT",
            acct_file.display(),
            errno()
        ));
    }
    let value = f();
    let last = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid").map_err(|e| format!("ns_last_pid: {e}"))?;
    // SAFETY: a null path switches accounting off (and closes the file).
    if unsafe { libc::acct(std::ptr::null()) } != 0 {
        return Err(format!("acct(NULL) failed: {}", errno()));
    }
    let records = std::fs::read(acct_file).map_err(|e| format!("{}: {e}", acct_file.display()))?;
    let mut ended = parse_records(&records)?;
    // Switching accounting off writes a record for the process that does
    // it, which has not ended.
    ended.retain(|e| e.pid != 1);
    if ended.is_empty() {
        return Err(format!(
            "no accounting records in {}: the kernel suspends accounting below 2% free space on its filesystem",
            acct_file.display()
        ));
    }
    Ok(Accounted { value, processes: last.trim().parse().map_err(|e| format!("ns_last_pid {last:?}: {e}"))?, ended })
}

fn write_all(fd: &OwnedFd, bytes: &[u8]) {
    let mut f = std::fs::File::from(fd.try_clone().unwrap());
    let _ = f.write_all(bytes);
}

/// Runs `f` as pid 1 of a new PID namespace with process accounting on
/// and returns its result with the kernel's counts (see the module doc).
/// Panics, saying why, when the namespace or the accounting cannot be
/// had or `f` panics.
pub fn in_pid_namespace(f: impl FnOnce() -> serde_json::Value) -> Accounted {
    let dir = tempfile::tempdir().unwrap();
    let acct_file = dir.path().join("pacct");
    std::fs::write(&acct_file, b"").unwrap();
    let (rx, tx) = nix::unistd::pipe().unwrap();
    // SAFETY: the child only unshares, forks, runs `f` in the grandchild
    // (workload code that forks the test process the same way) and
    // `_exit`s; glibc's allocator is fork-safe.
    let child = match unsafe { nix::unistd::fork() }.unwrap() {
        nix::unistd::ForkResult::Child => {
            drop(rx);
            // SAFETY: unshare takes flags only.
            if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
                let e = errno();
                write_all(
                    &tx,
                    format!("missing prerequisite: unshare(CLONE_NEWPID) failed ({e}): run as root").as_bytes(),
                );
                unsafe { libc::_exit(3) }
            }
            // The next child is pid 1 of the new namespace.
            match unsafe { nix::unistd::fork() } {
                Ok(nix::unistd::ForkResult::Child) => {
                    let out = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        namespace_init(&acct_file, f)
                    })) {
                        Ok(Ok(a)) => serde_json::to_string(&a).unwrap(),
                        Ok(Err(e)) => e,
                        Err(p) => format!(
                            "the code in the namespace panicked: {}",
                            p.downcast_ref::<String>()
                                .cloned()
                                .or(p.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default()
                        ),
                    };
                    write_all(&tx, out.as_bytes());
                    unsafe { libc::_exit(0) }
                }
                Ok(nix::unistd::ForkResult::Parent { child }) => {
                    let _ = nix::sys::wait::waitpid(child, None);
                    unsafe { libc::_exit(0) }
                }
                Err(e) => {
                    write_all(&tx, format!("fork into the namespace failed: {e}").as_bytes());
                    unsafe { libc::_exit(4) }
                }
            }
        }
        nix::unistd::ForkResult::Parent { child } => child,
    };
    drop(tx);
    let mut text = String::new();
    std::fs::File::from(rx).read_to_string(&mut text).unwrap();
    nix::sys::wait::waitpid(child, None).unwrap();
    match serde_json::from_str::<Accounted>(&text) {
        Ok(a) => a,
        Err(_) => panic!("{}", if text.is_empty() { "the namespace's pid 1 died without a word" } else { &text }),
    }
}

/// The command name the kernel gives a process that exec'd `exe`: its
/// file name, cut to 15 bytes.
pub fn comm_of(exe: &Path) -> String {
    let name = exe.file_name().unwrap().as_bytes();
    String::from_utf8_lossy(&name[..name.len().min(15)]).into_owned()
}

#[test]
fn records_parse_as_the_kernel_writes_them() {
    let mut r = [0u8; RECORD];
    r[1] = 3;
    r[16..20].copy_from_slice(&7u32.to_ne_bytes());
    r[20..24].copy_from_slice(&1u32.to_ne_bytes());
    r[48..52].copy_from_slice(b"make");
    let mut forked = r;
    forked[0] = AFORK;
    let both = [r, forked].concat();
    let e = parse_records(&both).unwrap();
    assert_eq!(e[0], Ended { pid: 7, ppid: 1, comm: "make".into(), execd: true });
    assert!(!e[1].execd);
    assert!(parse_records(&both[..70]).is_err());
    r[1] = 2;
    assert!(parse_records(&r).unwrap_err().contains("version 2"));
}
