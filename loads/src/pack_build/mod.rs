//! Linux built in the userland pack, as kernbench and contest's
//! foreground time it: the pack's linux-source-6.1 (x86_64_defconfig,
//! prepared) compiled by Debian's gcc and make, chrooted
//! (`userland_pack`), with the output tree (`O=`) in the workload's
//! directory. [`PackBuild::prepare`] copies the pack's prepared output
//! tree (`cp -a` of the pack's own coreutils); [`PackBuild::reset`] undoes
//! the target's build (untimed; `make clean` for vmlinux, as kernbench
//! did) and syncs; [`PackBuild::timed_build`] times one `make -jN GOALS`
//! from fork to reap, its rusage from `wait4` (make and every compiler it
//! reaped), and counts the objects it made. Owns the pack's tree layout,
//! the targets (`target`), what the pack must hold and the memory one
//! build needs; must not name any workload (each decides when to build
//! and what to record).

pub mod target;

use crate::kernel_build::make::JobLimit;
use crate::userland_pack::{self, PackCommand, PackError, Ran};
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use target::{Reset, Skeleton, Target};

/// The pack's pristine source tree.
pub const SOURCE: &str = "/usr/src/linux";

/// The pack's prepared output tree (`make O=... x86_64_defconfig prepare`).
pub const PREPARED: &str = "/usr/src/linux-obj";

/// The parameter of a result that names the pack's identity.
pub const PACK_ID_PARAM: &str = "pack_id";

/// The pack's make.
pub const MAKE: &str = "/usr/bin/make";

/// The pack's cp (coreutils; /bin is /usr/bin in a merged-/usr pack).
pub const CP: &str = "/bin/cp";

/// What the pack must hold, relative to its root.
pub const PACK_NEEDS: [&str; 4] = ["usr/bin/make", "bin/cp", "usr/src/linux/Makefile", "usr/src/linux-obj/.config"];

/// Where the output tree is inside the pack: under
/// [`userland_pack::WORK_MOUNT`], and exactly where the pack's recipe
/// prepared it (objtool records that path; elsewhere it would be rebuilt
/// in every timed build).
pub const OBJ_IN_PACK: &str = "/bootbench/work/obj";

/// Memory one concurrent compile job takes, MiB. Measured on the
/// development host (Debian 12, gcc 12.2, the pack's compiler) with
/// `/usr/bin/time -v` around kbuild's own command for
/// kernel/sched/core.o of linux-source-6.1 (x86_64_defconfig): cc1's
/// maximum RSS was 168,272 KiB (164 MiB), the largest of the objects
/// tried (kernel/fork.o 124 MiB, fs/ext4/inode.o 148 MiB, fs/dcache.o
/// 85 MiB). Each job also has gcc's driver, `as`, a shell and fixdep
/// beside or after cc1, and make runs one sub-make per directory: 12 MiB
/// more.
pub const JOB_MIB: u64 = 176;

/// Memory besides the jobs, MiB: the kernel and the init, the top-level
/// make (57 MiB RSS measured for a build of one object; it reads every
/// `.cmd` file of the tree), and the page cache of the source tree's
/// headers that every compile reads.
pub const BASE_MIB: u64 = 256;

/// Compile jobs that run at once when `target` is built with `limit`: the
/// limit, but never more than the target has objects (with no limit make
/// starts every object of a directory at once, and kbuild descends into
/// every directory at once).
pub fn concurrent_compilers(limit: JobLimit, target: Target) -> u64 {
    match limit {
        JobLimit::Jobs(n) => (n as u64).min(target.objects()),
        JobLimit::Unbounded => target.objects(),
    }
}

/// MiB of memory a build with `compilers` compile jobs at once needs:
/// [`BASE_MIB`] plus [`JOB_MIB`] for each. The output tree is not
/// included: on the scratch disk it takes none; on a tmpfs add
/// [`Target::work_tree_mib`].
pub fn memory_needed_mib(compilers: u64) -> u64 {
    BASE_MIB.saturating_add(JOB_MIB.saturating_mul(compilers))
}

/// Fails unless `pack` holds what a build needs; `who` (the workload) is
/// named in the error.
pub fn check_pack(pack: &Path, who: &'static str) -> Result<(), PackError> {
    userland_pack::check(pack, &PACK_NEEDS, who)
}

/// Errors of a build in the pack.
#[derive(Debug, thiserror::Error)]
pub enum PackBuildError {
    /// Running in the pack (the pack missing, a set-up step, make failing).
    #[error(transparent)]
    Pack(#[from] PackError),
    /// A file of the output tree.
    #[error("cannot {what} {path}")]
    Io {
        /// The operation.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Walking the output tree.
    #[error("cannot walk the output tree {path}")]
    Walk {
        /// The tree.
        path: PathBuf,
        /// The walk's error.
        #[source]
        source: walkdir::Error,
    },
    /// make succeeded but compiled no object of the target.
    #[error("make {jobs} {goals} succeeded but built no object: the reset left the target built, or the tree is not the pack's")]
    NothingBuilt {
        /// make's job flag.
        jobs: String,
        /// The goals.
        goals: String,
    },
}

/// One timed build: its cost and what it made.
#[derive(Debug, Clone, PartialEq)]
pub struct Built {
    /// make's job flag (`-j8`, `-j`).
    pub jobs: String,
    /// Wall time from fork to reap and `wait4`'s rusage.
    pub ran: Ran,
    /// Objects of the target the build wrote.
    pub objects: u64,
}

impl Built {
    /// (user + system) / elapsed, in percent; 0 for no elapsed time.
    pub fn cpu_percent(&self) -> f64 {
        self.ran.cpu_percent()
    }
}

/// A prepared output tree: a copy of the pack's, ready for timed builds
/// of one target.
pub struct PackBuild {
    pack: PathBuf,
    target: Target,
    work: PathBuf,
    obj: PathBuf,
    skeleton: Skeleton,
    /// The pack's make environment, added to every make's.
    make_env: Vec<String>,
    /// The pack's identity ([`userland_pack::pack_identity`]).
    pack_id: String,
}

impl PackBuild {
    /// Makes `work` afresh (removing what it held) and copies the pack's
    /// prepared output tree to `work/obj` in the pack. `work` is what the
    /// pack's commands find at [`userland_pack::WORK_MOUNT`]; their logs
    /// go there too.
    pub fn prepare(pack: &Path, target: Target, work: &Path) -> Result<PackBuild, PackBuildError> {
        let pack_id = userland_pack::pack_identity(pack)?;
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| PackBuildError::Io { what, path, source }
        };
        if work.exists() {
            std::fs::remove_dir_all(work).map_err(io("remove", work))?;
        }
        std::fs::create_dir_all(work).map_err(io("create", work))?;
        let obj = work.join("obj");
        let copy = PackCommand {
            pack: pack.to_path_buf(),
            work: work.to_path_buf(),
            cwd: "/".into(),
            argv: vec![CP.into(), "-a".into(), PREPARED.into(), OBJ_IN_PACK.into()],
            log: work.join("copy.log"),
            extra_env: Vec::new(),
            own_group: true,
        };
        userland_pack::run(&copy)?;
        let skeleton = Skeleton::read(&obj).map_err(|source| PackBuildError::Walk { path: obj.clone(), source })?;
        let make_env = userland_pack::pack_make_env(pack)?;
        Ok(PackBuild { pack: pack.to_path_buf(), target, work: work.to_path_buf(), obj, skeleton, make_env, pack_id })
    }

    /// The pack's identity, which a workload puts in its parameters as
    /// [`PACK_ID_PARAM`]: builds by another compiler or of another tree
    /// are never compared.
    pub fn pack_id(&self) -> &str {
        &self.pack_id
    }

    /// The target every build makes.
    pub fn target(&self) -> Target {
        self.target
    }

    /// Files of the prepared tree (what a reset keeps).
    pub fn skeleton_files(&self) -> usize {
        self.skeleton.len()
    }

    fn make(&self, args: &[String], log: &str) -> PackCommand {
        let mut argv = vec![MAKE.to_string(), "-C".into(), SOURCE.into(), format!("O={OBJ_IN_PACK}")];
        argv.extend(args.iter().cloned());
        PackCommand {
            pack: self.pack.clone(),
            work: self.work.clone(),
            cwd: OBJ_IN_PACK.into(),
            argv,
            log: self.work.join(log),
            extra_env: self.make_env.clone(),
            own_group: true,
        }
    }

    /// Writes a new marker file beside the output tree and returns its
    /// time: objects written from now on are the next build's. The time
    /// is the filesystem's (a coarse clock, up to a tick behind the
    /// system's), as the objects' will be.
    fn start_marker(&self) -> Result<SystemTime, PackBuildError> {
        let path = self.work.join("build.start");
        let io = |what| {
            let path = path.clone();
            move |source| PackBuildError::Io { what, path, source }
        };
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io("remove")(e)),
            _ => {}
        }
        std::fs::File::create(&path).and_then(|f| f.metadata()?.modified()).map_err(io("create"))
    }

    /// Undoes the target's build (untimed) and syncs, as kernbench's
    /// `make clean; sync`.
    pub fn reset(&self) -> Result<(), PackBuildError> {
        let walk = |source| PackBuildError::Walk { path: self.obj.clone(), source };
        match target::reset_plan(self.target, &self.obj, &self.skeleton).map_err(walk)? {
            Reset::MakeClean => {
                userland_pack::run(&self.make(&["clean".into()], "clean.log"))?;
            }
            Reset::Delete(files) => {
                for f in files {
                    std::fs::remove_file(&f).map_err(|source| PackBuildError::Io {
                        what: "remove",
                        path: f,
                        source,
                    })?;
                }
            }
        }
        nix::unistd::sync();
        Ok(())
    }

    /// Times one `make` of the target with `limit` jobs, from fork to
    /// reap, on a tree [`PackBuild::reset`] left; fails when it built no
    /// object.
    pub fn timed_build(&self, limit: JobLimit) -> Result<Built, PackBuildError> {
        let goals = self.target.goals();
        let jobs = limit.flag();
        let mut args = vec![jobs.clone()];
        args.extend(goals.iter().cloned());
        let since = self.start_marker()?;
        let ran = userland_pack::run(&self.make(&args, "build.log"))?;
        let objects = target::count_built(self.target, &self.obj, &self.skeleton, since)
            .map_err(|source| PackBuildError::Walk { path: self.obj.clone(), source })?;
        if objects == 0 {
            return Err(PackBuildError::NothingBuilt { jobs, goals: goals.join(" ") });
        }
        Ok(Built { jobs, ran, objects })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reap::Usage;

    #[test]
    fn the_output_tree_is_inside_the_work_mount() {
        assert!(OBJ_IN_PACK.starts_with(&format!("{}/", userland_pack::WORK_MOUNT)));
    }

    #[test]
    fn memory_counts_the_compilers_that_run_at_once() {
        assert_eq!(concurrent_compilers(JobLimit::Jobs(8), Target::Quick), 4, "four objects");
        assert_eq!(concurrent_compilers(JobLimit::Jobs(2), Target::Quick), 2);
        assert_eq!(concurrent_compilers(JobLimit::Unbounded, Target::Standard), 303);
        assert_eq!(concurrent_compilers(JobLimit::Jobs(8), Target::Full), 8);
        assert_eq!(memory_needed_mib(0), BASE_MIB);
        assert_eq!(memory_needed_mib(4), BASE_MIB + 4 * JOB_MIB);
        assert_eq!(memory_needed_mib(u64::MAX), u64::MAX, "saturates");
    }

    #[test]
    fn cpu_percent_is_the_rusage_over_the_wall_time() {
        let usage = Usage { user_s: 3.5, sys_s: 0.5, ..Default::default() };
        let built =
            |elapsed_s| Built { jobs: "-j8".into(), ran: Ran { elapsed_s, from_exec_s: elapsed_s, usage }, objects: 4 };
        assert_eq!(built(2.0).cpu_percent(), 200.0);
        assert_eq!(built(0.0).cpu_percent(), 0.0, "no division by a zero elapsed time");
    }

    #[test]
    fn a_pack_without_the_prepared_tree_is_refused_naming_the_workload() {
        let tmp = tempfile::tempdir().unwrap();
        let e = check_pack(tmp.path(), "contest").unwrap_err().to_string();
        assert!(e.contains("usr/bin/make is missing") && e.contains("contest"), "{e}");
    }
}
