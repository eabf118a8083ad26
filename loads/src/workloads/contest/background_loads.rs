//! The nine background loads of contest (reference 001 and 003), each the
//! body one leader process runs until contest raises the stop flag. A body
//! counts its completed work in the shared page, in the unit
//! [`LoadKind::unit`] names, and checks the flag between units so a stop
//! takes effect within one unit. Owns what each load does; must not start,
//! time or reap the leader (that is `load_process`).

use super::real_tree::RealTree;
use super::ring::{self, RingError};
use super::shared_page::SharedPage;
use crate::userland_pack::{self, Ended, PackCommand, PackError};
use crate::workloads::nbench::client_driver::{run_clients, DriverError, Phases, Replayer};
use crate::workloads::nbench::fs_client::FsClient;
use crate::workloads::nbench::loadfile::{Line, Loadfile};
use nix::sys::mman::{mmap_anonymous, MapFlags, ProtFlags};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::num::NonZeroUsize;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One MiB: the I/O unit of io_load and read_load.
pub const MIB: u64 = 1 << 20;

/// Errors of a load's body. Each names the load and what failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadBodyError {
    /// A file operation failed.
    #[error("{load}: cannot {what} {path}")]
    Io {
        /// The load.
        load: &'static str,
        /// The operation.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A system call failed.
    #[error("{load}: {what} failed")]
    Sys {
        /// The load.
        load: &'static str,
        /// The call.
        what: &'static str,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// A process of the load ended although contest had not stopped it.
    #[error("{load}: a load process ended before contest stopped the load ({how})")]
    DiedEarly {
        /// The load.
        load: &'static str,
        /// Its exit status.
        how: String,
    },
    /// mem_load's worker was OOM-killed more often than allowed.
    #[error("mem_load: the OOM killer took the worker {kills} times (limit {limit}); is there swap?")]
    OomLoop {
        /// Kills seen.
        kills: u64,
        /// The limit (`max_oom_kills`).
        limit: u64,
    },
    /// dbench_load's clients failed.
    #[error("dbench_load: the dbench clients failed")]
    Dbench(#[source] DriverError),
    /// dbench_load was started without its loadfile.
    #[error("dbench_load: no loadfile was read for it")]
    NoLoadfile,
    /// process_load's ring failed.
    #[error("process_load")]
    Ring(#[source] RingError),
    /// A command of the pack (tar, rm, ls) failed.
    #[error("{load}: the pack's command failed")]
    Pack {
        /// The load.
        load: &'static str,
        /// Why.
        #[source]
        source: PackError,
    },
}

/// A background load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadKind {
    /// 4 × ncpus exec'd processes in a ring of pipes, passing a few
    /// chunks round it (`ring`).
    Process,
    /// Create a tar of a source tree, repeatedly.
    Ctar,
    /// Extract that tar, repeatedly.
    Xtar,
    /// Write a file the size of RAM, repeatedly.
    Io,
    /// Read a file the size of RAM, repeatedly.
    Read,
    /// Recursive long listing of the whole filesystem, repeatedly.
    List,
    /// Touch 110% of RAM in a cache-missing order, repeatedly.
    Mem,
    /// dbench with 16 × ncpus clients, repeatedly.
    Dbench,
    /// Fork a child that does nothing, wait, repeat.
    Fork,
}

impl LoadKind {
    /// The row name (`io_load`, ...).
    pub fn name(self) -> &'static str {
        match self {
            LoadKind::Process => "process_load",
            LoadKind::Ctar => "ctar_load",
            LoadKind::Xtar => "xtar_load",
            LoadKind::Io => "io_load",
            LoadKind::Read => "read_load",
            LoadKind::List => "list_load",
            LoadKind::Mem => "mem_load",
            LoadKind::Dbench => "dbench_load",
            LoadKind::Fork => "fork_load",
        }
    }

    /// The unit the load's work is counted in (contest's "Loads" column),
    /// with the pack's programs on the real tree (`real_tree`) or not.
    /// process_load's is the lap: one chunk's whole trip round the ring
    /// (N + 1 hops: every member and the leader, which counts it);
    /// list_load's the entry the walk listed, or with the pack's `ls -lR`
    /// the whole listing (contest's own unit).
    pub fn unit(self, real_tree: bool) -> &'static str {
        match self {
            LoadKind::List if real_tree => "listings",
            LoadKind::Process => "laps",
            LoadKind::Ctar => "archives",
            LoadKind::Xtar => "extractions",
            LoadKind::Io => "MiB written",
            LoadKind::Read => "MiB read",
            LoadKind::List => "entries listed",
            LoadKind::Mem => "MiB touched",
            LoadKind::Dbench => "operations",
            LoadKind::Fork => "forks",
        }
    }
}

/// What the loads work on: prepared once by contest, shared by every row.
#[derive(Debug, Clone)]
pub struct LoadEnv {
    /// A directory of the load's own on the scratch filesystem (emptied by
    /// contest between rows).
    pub dir: PathBuf,
    /// Exec'd members of process_load's ring (N; the leader makes one
    /// more station).
    pub ring_procs: u32,
    /// The executable whose `ring` applet process_load's members run.
    pub applet_exe: PathBuf,
    /// Size of io_load's file (whole MiB).
    pub file_bytes: u64,
    /// The RAM size mem_load touches 110% of.
    pub mem_bytes: u64,
    /// OOM kills of mem_load's worker tolerated before the load fails.
    pub max_oom_kills: u64,
    /// The tree ctar_load archives.
    pub tar_source: PathBuf,
    /// The archive xtar_load extracts.
    pub tar_archive: PathBuf,
    /// read_load's file (prepared, the size of RAM).
    pub read_file: PathBuf,
    /// Where list_load starts (the filesystem root).
    pub list_root: PathBuf,
    /// dbench_load's clients.
    pub dbench_clients: u32,
    /// dbench_load's loadfile (read only when that row runs).
    pub dbench_loadfile: Option<Loadfile>,
    /// The real tree and the pack's tar and ls, for ctar_load, xtar_load
    /// and list_load (contest's `load_tools: pack`); else the synthetic
    /// tree, the `tar` crate and a walk of `list_root`.
    pub real_tree: Option<RealTree>,
}

impl LoadEnv {
    /// A small environment in `dir` for trying loads on the host: 1 MiB
    /// files, trees and files under `dir` (not prepared), one dbench
    /// client and no loadfile.
    pub fn small(dir: &Path, ring_procs: u32, applet_exe: PathBuf) -> LoadEnv {
        LoadEnv {
            dir: dir.to_path_buf(),
            ring_procs,
            applet_exe,
            file_bytes: MIB,
            mem_bytes: MIB,
            max_oom_kills: 0,
            tar_source: dir.join("src"),
            tar_archive: dir.join("a.tar"),
            read_file: dir.join("read"),
            list_root: dir.to_path_buf(),
            dbench_clients: 1,
            dbench_loadfile: None,
            real_tree: None,
        }
    }
}

fn io(load: &'static str, what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> LoadBodyError {
    let path = path.to_path_buf();
    move |source| LoadBodyError::Io { load, what, path, source }
}

fn sys(load: &'static str, what: &'static str) -> impl FnOnce(nix::Error) -> LoadBodyError {
    move |source| LoadBodyError::Sys { load, what, source }
}

/// Runs `kind`'s body until the stop flag is raised.
pub fn run(kind: LoadKind, env: &LoadEnv, page: &SharedPage) -> Result<(), LoadBodyError> {
    match (kind, &env.real_tree) {
        (LoadKind::Ctar, Some(t)) => return pass_of_pack_commands(kind.name(), &[t.ctar(&env.dir)], &[0], page),
        (LoadKind::Xtar, Some(t)) => return pass_of_pack_commands(kind.name(), &t.xtar(&env.dir), &[0], page),
        // ls says 1 when an entry vanished under it (the build's objects,
        // the load files): the listing went on.
        (LoadKind::List, Some(t)) => return pass_of_pack_commands(kind.name(), &[t.list(&env.dir)], &[0, 1], page),
        _ => {}
    }
    match kind {
        LoadKind::Process => process_ring(env, page),
        LoadKind::Ctar => ctar(env, page),
        LoadKind::Xtar => xtar(env, page),
        LoadKind::Io => write_file(env, page),
        LoadKind::Read => read_file(env, page),
        LoadKind::List => list(env, page),
        LoadKind::Mem => mem(env, page),
        LoadKind::Dbench => dbench(env, page),
        LoadKind::Fork => fork_loop(page),
    }
}

/// Runs `pass` (commands of the pack, one after another) again and again,
/// one unit of work per whole pass, until the stop: the command running
/// then is killed at once. A command ending with a status outside `ok`
/// fails the load.
fn pass_of_pack_commands(
    load: &'static str,
    pass: &[PackCommand],
    ok: &[i32],
    page: &SharedPage,
) -> Result<(), LoadBodyError> {
    let stop = || page.stop_requested();
    while !page.stop_requested() {
        for cmd in pass {
            match userland_pack::run_until(cmd, Some(&stop)) {
                Ok(Ended::Ran(_)) => {}
                Ok(Ended::Stopped) => return Ok(()),
                Err(PackError::Failed { exit: crate::reap::Exit::Code(c), .. }) if ok.contains(&c) => {}
                Err(source) => return Err(LoadBodyError::Pack { load, source }),
            }
        }
        page.add_work(1);
    }
    Ok(())
}

fn write_file(env: &LoadEnv, page: &SharedPage) -> Result<(), LoadBodyError> {
    const L: &str = "io_load";
    let path = env.dir.join("io_load.dat");
    let chunk = vec![0x5a_u8; MIB as usize];
    let mibs = (env.file_bytes / MIB).max(1);
    loop {
        let mut f = File::create(&path).map_err(io(L, "create", &path))?;
        for _ in 0..mibs {
            if page.stop_requested() {
                return Ok(());
            }
            f.write_all(&chunk).map_err(io(L, "write", &path))?;
            page.add_work(1);
        }
    }
}

fn read_file(env: &LoadEnv, page: &SharedPage) -> Result<(), LoadBodyError> {
    const L: &str = "read_load";
    let path = &env.read_file;
    let mut f = File::open(path).map_err(io(L, "open", path))?;
    let mut buf = vec![0u8; MIB as usize];
    loop {
        if page.stop_requested() {
            return Ok(());
        }
        let mut got = 0usize;
        while got < buf.len() {
            match f.read(buf.get_mut(got..).unwrap_or_default()) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io(L, "read", path)(e)),
            }
        }
        if got == 0 {
            f.seek(SeekFrom::Start(0)).map_err(io(L, "rewind", path))?;
        } else {
            page.add_work(1);
        }
    }
}

fn ctar(env: &LoadEnv, page: &SharedPage) -> Result<(), LoadBodyError> {
    const L: &str = "ctar_load";
    let out = env.dir.join("ctar_load.tar");
    while !page.stop_requested() {
        let f = File::create(&out).map_err(io(L, "create", &out))?;
        let mut b = tar::Builder::new(std::io::BufWriter::new(f));
        b.follow_symlinks(false);
        b.append_dir_all("tree", &env.tar_source).map_err(io(L, "archive", &env.tar_source))?;
        let w = b.into_inner().map_err(io(L, "finish", &out))?;
        w.into_inner().map_err(|e| io(L, "write", &out)(e.into_error()))?;
        page.add_work(1);
    }
    Ok(())
}

fn xtar(env: &LoadEnv, page: &SharedPage) -> Result<(), LoadBodyError> {
    const L: &str = "xtar_load";
    let dest = env.dir.join("xtar_load");
    while !page.stop_requested() {
        let f = File::open(&env.tar_archive).map_err(io(L, "open", &env.tar_archive))?;
        tar::Archive::new(std::io::BufReader::new(f)).unpack(&dest).map_err(io(L, "extract into", &dest))?;
        std::fs::remove_dir_all(&dest).map_err(io(L, "remove", &dest))?;
        page.add_work(1);
    }
    Ok(())
}

/// The virtual filesystems a listing skips: their entries are not files,
/// and /proc changes under the walk.
const NOT_LISTED: &[&str] = &["/proc", "/sys", "/dev"];

fn list(env: &LoadEnv, page: &SharedPage) -> Result<(), LoadBodyError> {
    const L: &str = "list_load";
    let mut sink = File::options().write(true).open("/dev/null").map_err(io(L, "open", Path::new("/dev/null")))?;
    let mut line = Vec::with_capacity(256);
    let skip: Vec<PathBuf> = NOT_LISTED.iter().map(|p| env.list_root.join(p.trim_start_matches('/'))).collect();
    loop {
        let walk = walkdir::WalkDir::new(&env.list_root).follow_links(false).into_iter();
        for entry in walk.filter_entry(|e| !skip.iter().any(|s| e.path() == s)) {
            if page.stop_requested() {
                return Ok(());
            }
            // Entries that vanish under the walk (the build's objects, the
            // other loads' files) are skipped, as `ls -lR` would.
            let Ok(entry) = entry else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            line.clear();
            // `ls -l`'s fields: mode, links, owner, group, size, time, name.
            let _ = writeln!(
                line,
                "{:o} {} {} {} {} {} {}",
                meta.mode(),
                meta.nlink(),
                meta.uid(),
                meta.gid(),
                meta.size(),
                meta.mtime(),
                entry.path().display()
            );
            sink.write_all(&line).map_err(io(L, "write", Path::new("/dev/null")))?;
            page.add_work(1);
        }
    }
}

fn fork_loop(page: &SharedPage) -> Result<(), LoadBodyError> {
    const L: &str = "fork_load";
    while !page.stop_requested() {
        // SAFETY: the child only calls _exit.
        match unsafe { fork() }.map_err(sys(L, "fork"))? {
            ForkResult::Child => unsafe { libc::_exit(0) },
            ForkResult::Parent { child } => match waitpid(child, None).map_err(sys(L, "waitpid"))? {
                WaitStatus::Exited(_, 0) => page.add_work(1),
                other => return Err(LoadBodyError::DiedEarly { load: L, how: format!("{other:?}") }),
            },
        }
    }
    Ok(())
}

fn process_ring(env: &LoadEnv, page: &SharedPage) -> Result<(), LoadBodyError> {
    ring::run_leader(&env.applet_exe, env.ring_procs as usize, page).map_err(LoadBodyError::Ring)
}

/// A stride through the pages that is coprime with their count, so the
/// walk visits every page once per pass, each far from the last: no
/// locality for caches, TLB or readahead of swapped pages.
fn page_stride(pages: usize) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    [1021usize, 1031, 1033, 1039, 1049].into_iter().find(|&s| pages > s && gcd(s, pages) == 1).unwrap_or(1)
}

/// mem_load's worker: maps `bytes` and touches its pages in stride order
/// until stopped. Runs in its own process with the highest OOM score, so
/// the OOM killer takes it before the build.
fn mem_worker(bytes: usize, page_size: usize, page: &SharedPage) -> ! {
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    let Some(len) = NonZeroUsize::new(bytes) else { unsafe { libc::_exit(2) } };
    // SAFETY: a fresh private anonymous mapping aliases nothing.
    // MAP_NORESERVE: touching is what decides, not the overcommit guess.
    let map = match unsafe {
        mmap_anonymous(
            None,
            len,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
        )
    } {
        Ok(p) => p.cast::<u8>(),
        Err(_) => unsafe { libc::_exit(3) },
    };
    let pages = bytes / page_size;
    let stride = page_stride(pages);
    let pages_per_mib = (MIB as usize / page_size).max(1);
    let mut pass: u8 = 0;
    loop {
        pass = pass.wrapping_add(1);
        let mut idx = 0usize;
        for k in 0..pages {
            // SAFETY: idx < pages, so the byte lies inside the mapping.
            unsafe { map.as_ptr().add(idx * page_size).write_volatile(pass) };
            idx = (idx + stride) % pages;
            if (k + 1) % pages_per_mib == 0 {
                page.add_work((page_size * pages_per_mib) as u64 / MIB);
                if page.stop_requested() {
                    unsafe { libc::_exit(0) }
                }
            }
        }
    }
}

/// mem_load's mapping: 110% of RAM, capped at what a 32-bit address space
/// can map.
pub fn mem_load_bytes(mem_bytes: u64, page_size: u64) -> u64 {
    let want = mem_bytes.saturating_add(mem_bytes / 10);
    let cap = if usize::BITS < 64 { 2 << 30 } else { u64::MAX };
    let b = want.min(cap);
    b - b % page_size.max(1)
}

fn mem(env: &LoadEnv, page: &SharedPage) -> Result<(), LoadBodyError> {
    const L: &str = "mem_load";
    let page_size = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096) as u64;
    let bytes = usize::try_from(mem_load_bytes(env.mem_bytes, page_size)).unwrap_or(usize::MAX);
    loop {
        if page.stop_requested() {
            return Ok(());
        }
        // SAFETY: the child runs `mem_worker`, which touches memory and exits.
        let worker = match unsafe { fork() }.map_err(sys(L, "fork"))? {
            ForkResult::Child => mem_worker(bytes, page_size as usize, page),
            ForkResult::Parent { child } => child,
        };
        let r = crate::reap::wait_pid(worker).map_err(|e| LoadBodyError::DiedEarly { load: L, how: e.to_string() })?;
        match r.exit {
            crate::reap::Exit::Code(0) => return Ok(()),
            crate::reap::Exit::Signal(libc::SIGKILL) if !page.stop_requested() => {
                // Only the OOM killer SIGKILLs the worker while the load
                // runs (contest's own kill comes after the stop flag).
                page.add_oom_kill();
                if page.oom_kills() > env.max_oom_kills {
                    return Err(LoadBodyError::OomLoop { kills: page.oom_kills(), limit: env.max_oom_kills });
                }
            }
            crate::reap::Exit::Code(3) => {
                return Err(LoadBodyError::DiedEarly {
                    load: L,
                    how: format!("the worker could not map {bytes} bytes"),
                })
            }
            other => return Err(LoadBodyError::DiedEarly { load: L, how: other.to_string() }),
        }
    }
}

/// dbench_load's client: dbench's file client, each completed operation
/// counted in the shared page as it completes (so the build's window
/// reads the work done inside it), stopping at the stop flag.
struct CountedClient<'a> {
    client: FsClient,
    page: &'a SharedPage,
}

impl Replayer for CountedClient<'_> {
    type Error = <FsClient as Replayer>::Error;

    fn execute(&mut self, line: &Line) -> Result<(), Self::Error> {
        self.client.execute(line)?;
        self.page.add_work(1);
        Ok(())
    }

    fn stopped(&self) -> bool {
        self.page.stop_requested()
    }

    fn new_pass(&mut self) {
        self.client.new_pass();
    }
}

/// How long dbench_load's clients may run: longer than any contest row
/// (the stop flag ends them).
const DBENCH_LOAD_BOUND: Duration = Duration::from_secs(7 * 24 * 3600);

/// dbench as contest ran it: `dbench_clients` clients replaying the
/// loadfile pass after pass, each in its own directory, until contest
/// stops the load. Work is operations completed.
fn dbench(env: &LoadEnv, page: &SharedPage) -> Result<(), LoadBodyError> {
    const L: &str = "dbench_load";
    let lf = env.dbench_loadfile.as_ref().ok_or(LoadBodyError::NoLoadfile)?;
    let dir = env.dir.join("dbench_load");
    std::fs::create_dir_all(&dir).map_err(io(L, "create", &dir))?;
    let phases = Phases { warmup: Duration::ZERO, measure: DBENCH_LOAD_BOUND };
    run_clients(env.dbench_clients, phases, lf, |id| {
        FsClient::open(&dir, id).map(|client| CountedClient { client, page })
    })
    .map_err(LoadBodyError::Dbench)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stride_visits_every_page_once() {
        for pages in [1usize, 2, 1021, 4096, 262_144, 1021 * 1031] {
            let s = page_stride(pages);
            let mut seen = vec![false; pages];
            let mut idx = 0;
            for _ in 0..pages {
                assert!(!seen[idx], "{pages} pages, stride {s}: page {idx} twice");
                seen[idx] = true;
                idx = (idx + s) % pages;
            }
        }
    }

    #[test]
    fn mem_load_is_110_percent_page_aligned() {
        assert_eq!(mem_load_bytes(1000 * 4096, 4096), 1100 * 4096);
        assert_eq!(mem_load_bytes(1 << 30, 65536) % 65536, 0);
    }
}
