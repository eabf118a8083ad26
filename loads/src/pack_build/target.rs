//! What a build in the pack compiles and how it is undone: the three
//! targets (a handful of objects, a few directories, vmlinux) as make
//! goals, the files a reset deletes, and the objects a build made. Works
//! on the output tree (`O=`) only; never runs make (the parent module
//! does).

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The objects of the `quick` target: four subsystems (process
/// management, memory, VFS, block), each about 1.8-1.9 s of user time with
/// the pack's gcc 12 on x86_64_defconfig (measured one at a time on the
/// development host, make's own start included), so that `-j2` and `-j4`
/// runs can keep every CPU busy to the end.
pub const QUICK_OBJECTS: [&str; 4] = ["kernel/fork.o", "mm/mmap.o", "fs/exec.o", "block/blk-core.o"];

/// The directories of the `standard` target, as make goals.
pub const STANDARD_DIRS: [&str; 3] = ["kernel/", "mm/", "fs/ext4/"];

/// How much of the kernel one timed build compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// [`QUICK_OBJECTS`], for CI.
    Quick,
    /// [`STANDARD_DIRS`].
    Standard,
    /// `vmlinux`, as kernbench built it.
    Full,
}

/// How a target's build is undone before the next timed one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reset {
    /// Delete these files (absolute paths in the output tree).
    Delete(Vec<PathBuf>),
    /// Run `make clean` in the pack, as kernbench did.
    MakeClean,
}

impl Target {
    /// The parameter's value.
    pub fn name(self) -> &'static str {
        match self {
            Target::Quick => "quick",
            Target::Standard => "standard",
            Target::Full => "full",
        }
    }

    /// The make goals.
    pub fn goals(self) -> Vec<String> {
        let goals: &[&str] = match self {
            Target::Quick => &QUICK_OBJECTS,
            Target::Standard => &STANDARD_DIRS,
            Target::Full => &["vmlinux"],
        };
        goals.iter().map(|g| g.to_string()).collect()
    }

    /// About how many objects one build compiles, for linux-source-6.1's
    /// x86_64_defconfig (the pack's tree): counted from `make -n` output
    /// on the development host (standard: 204 in kernel/, 62 in mm/, 34
    /// in fs/ext4/, plus modpost's 3 the first time; full: 2709).
    pub fn objects(self) -> u64 {
        match self {
            Target::Quick => QUICK_OBJECTS.len() as u64,
            Target::Standard => 303,
            Target::Full => 2709,
        }
    }

    /// MiB the output tree needs: the prepared skeleton (8.3 MiB, 1774
    /// files) plus the objects (about 130 KiB each without debug info)
    /// and their `.cmd` files; for vmlinux also vmlinux.o, the kallsyms
    /// passes and the image.
    pub fn work_tree_mib(self) -> u64 {
        match self {
            Target::Quick => 32,
            Target::Standard => 128,
            Target::Full => 1024,
        }
    }

    /// Where this target's outputs are, relative to the output tree:
    /// the objects, the directories, or the whole tree.
    fn scope(self) -> Vec<String> {
        match self {
            Target::Quick => self.goals(),
            Target::Standard => STANDARD_DIRS.iter().map(|d| d.trim_end_matches('/').to_string()).collect(),
            Target::Full => vec![String::new()],
        }
    }
}

/// The files of the prepared output tree (the pack's `linux-obj`, as
/// copied), relative to its root: what a reset keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skeleton {
    files: BTreeSet<PathBuf>,
}

impl Skeleton {
    /// Lists every non-directory under `obj`.
    pub fn read(obj: &Path) -> Result<Skeleton, walkdir::Error> {
        let mut files = BTreeSet::new();
        for e in walkdir::WalkDir::new(obj).min_depth(1) {
            let e = e?;
            if !e.file_type().is_dir() {
                if let Ok(rel) = e.path().strip_prefix(obj) {
                    files.insert(rel.to_path_buf());
                }
            }
        }
        Ok(Skeleton { files })
    }

    /// Files listed.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    fn has(&self, rel: &Path) -> bool {
        self.files.contains(rel)
    }
}

/// What undoes `target`'s build in the output tree `obj`. Objects: each
/// object with its `.NAME.o.cmd` and a leftover `.NAME.o.d`. Directories:
/// every file under them that the skeleton does not have (objects,
/// archives, `.cmd` files, `modules.order`, ...), so prepared files such
/// as `kernel/bounds.s` stay. vmlinux: `make clean`.
pub fn reset_plan(target: Target, obj: &Path, skeleton: &Skeleton) -> Result<Reset, walkdir::Error> {
    let mut delete = Vec::new();
    match target {
        Target::Full => return Ok(Reset::MakeClean),
        Target::Quick => {
            for goal in target.goals() {
                let rel = Path::new(&goal);
                let (Some(dir), Some(name)) = (rel.parent(), rel.file_name()) else { continue };
                let name = name.to_string_lossy();
                for f in [name.to_string(), format!(".{name}.cmd"), format!(".{name}.d")] {
                    let rel = dir.join(f);
                    if !skeleton.has(&rel) && std::fs::symlink_metadata(obj.join(&rel)).is_ok() {
                        delete.push(obj.join(rel));
                    }
                }
            }
        }
        Target::Standard => {
            for dir in target.scope() {
                let root = obj.join(&dir);
                if !root.exists() {
                    continue;
                }
                for e in walkdir::WalkDir::new(&root) {
                    let e = e?;
                    if e.file_type().is_dir() {
                        continue;
                    }
                    match e.path().strip_prefix(obj) {
                        Ok(rel) if !skeleton.has(rel) => delete.push(e.path().to_path_buf()),
                        _ => {}
                    }
                }
            }
        }
    }
    delete.sort();
    Ok(Reset::Delete(delete))
}

/// The objects (`*.o`) a build of `target` made: those in the target's
/// part of `obj` that the skeleton does not have and that were written at
/// or after `since` (a file time taken just before the build).
pub fn count_built(target: Target, obj: &Path, skeleton: &Skeleton, since: SystemTime) -> Result<u64, walkdir::Error> {
    let mut n = 0u64;
    for part in target.scope() {
        for e in walkdir::WalkDir::new(obj.join(&part)) {
            let e = match e {
                Ok(e) => e,
                // An object of the quick target that was not built.
                Err(err) if err.io_error().map(|io| io.kind()) == Some(std::io::ErrorKind::NotFound) => continue,
                Err(err) => return Err(err),
            };
            if !e.file_type().is_file() || e.path().extension().is_none_or(|x| x != "o") {
                continue;
            }
            let Ok(rel) = e.path().strip_prefix(obj) else { continue };
            let fresh = e.metadata().ok().and_then(|m| m.modified().ok()).is_some_and(|t| t >= since);
            if fresh && !skeleton.has(rel) {
                n += 1;
            }
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, rel).unwrap();
    }

    /// An output tree as prepare leaves it, then as a build of every
    /// target leaves it.
    fn built_tree() -> (tempfile::TempDir, Skeleton) {
        let tmp = tempfile::tempdir().unwrap();
        let obj = tmp.path();
        for f in [".config", "Makefile", "include/generated/autoconf.h", "kernel/bounds.s", "kernel/.bounds.s.cmd"] {
            touch(obj, f);
        }
        touch(obj, "scripts/kconfig/conf.o");
        let skeleton = Skeleton::read(obj).unwrap();
        for f in [
            "kernel/fork.o",
            "kernel/.fork.o.cmd",
            "kernel/.fork.o.d",
            "kernel/sched/core.o",
            "kernel/sched/.core.o.cmd",
            "kernel/built-in.a",
            "kernel/.built-in.a.cmd",
            "kernel/modules.order",
            "mm/mmap.o",
            "mm/.mmap.o.cmd",
            "fs/exec.o",
            "fs/.exec.o.cmd",
            "fs/ext4/inode.o",
            "fs/ext4/.inode.o.cmd",
            "block/blk-core.o",
            "block/.blk-core.o.cmd",
            "drivers/base/core.o",
        ] {
            touch(obj, f);
        }
        (tmp, skeleton)
    }

    fn rel(obj: &Path, r: Reset) -> Vec<String> {
        match r {
            Reset::Delete(v) => v.iter().map(|p| p.strip_prefix(obj).unwrap().display().to_string()).collect(),
            Reset::MakeClean => vec!["make clean".into()],
        }
    }

    #[test]
    fn targets_are_make_goals() {
        assert_eq!(Target::Quick.goals(), ["kernel/fork.o", "mm/mmap.o", "fs/exec.o", "block/blk-core.o"]);
        assert_eq!(Target::Standard.goals(), ["kernel/", "mm/", "fs/ext4/"]);
        assert_eq!(Target::Full.goals(), ["vmlinux"]);
        let t: Target = serde_json::from_value(serde_json::json!("standard")).unwrap();
        assert_eq!((t, t.name()), (Target::Standard, "standard"));
        assert!(serde_json::from_value::<Target>(serde_json::json!("vmlinux")).is_err());
    }

    #[test]
    fn a_reset_deletes_what_the_target_built_and_keeps_the_skeleton() {
        let (tmp, skeleton) = built_tree();
        let obj = tmp.path();
        assert_eq!(skeleton.len(), 6);
        let quick = rel(obj, reset_plan(Target::Quick, obj, &skeleton).unwrap());
        assert_eq!(
            quick,
            [
                "block/.blk-core.o.cmd",
                "block/blk-core.o",
                "fs/.exec.o.cmd",
                "fs/exec.o",
                "kernel/.fork.o.cmd",
                "kernel/.fork.o.d",
                "kernel/fork.o",
                "mm/.mmap.o.cmd",
                "mm/mmap.o"
            ]
        );
        let standard = rel(obj, reset_plan(Target::Standard, obj, &skeleton).unwrap());
        assert_eq!(
            standard,
            [
                "fs/ext4/.inode.o.cmd",
                "fs/ext4/inode.o",
                "kernel/.built-in.a.cmd",
                "kernel/.fork.o.cmd",
                "kernel/.fork.o.d",
                "kernel/built-in.a",
                "kernel/fork.o",
                "kernel/modules.order",
                "kernel/sched/.core.o.cmd",
                "kernel/sched/core.o",
                "mm/.mmap.o.cmd",
                "mm/mmap.o"
            ],
            "kernel/bounds.s and its .cmd are prepare's, fs/exec.o is not under fs/ext4/"
        );
        assert_eq!(reset_plan(Target::Full, obj, &skeleton).unwrap(), Reset::MakeClean);
        // After the quick reset nothing of it is left to delete.
        let Reset::Delete(files) = reset_plan(Target::Quick, obj, &skeleton).unwrap() else { unreachable!() };
        files.iter().for_each(|f| std::fs::remove_file(f).unwrap());
        assert_eq!(reset_plan(Target::Quick, obj, &skeleton).unwrap(), Reset::Delete(vec![]));
    }

    #[test]
    fn only_fresh_objects_of_the_target_outside_the_skeleton_count() {
        let (tmp, skeleton) = built_tree();
        let obj = tmp.path();
        let before = SystemTime::now() - Duration::from_secs(60);
        assert_eq!(count_built(Target::Quick, obj, &skeleton, before).unwrap(), 4);
        assert_eq!(count_built(Target::Standard, obj, &skeleton, before).unwrap(), 4, "fork, core, mmap, inode");
        assert_eq!(count_built(Target::Full, obj, &skeleton, before).unwrap(), 7, "every .o but conf.o");
        // An object older than the build was not made by it.
        let old = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().write(true).open(obj.join("mm/mmap.o")).unwrap().set_modified(old).unwrap();
        assert_eq!(count_built(Target::Quick, obj, &skeleton, before).unwrap(), 3);
        std::fs::remove_file(obj.join("fs/exec.o")).unwrap();
        assert_eq!(count_built(Target::Quick, obj, &skeleton, before).unwrap(), 2, "a missing object is not counted");
        let later = SystemTime::now() + Duration::from_secs(60);
        assert_eq!(count_built(Target::Full, obj, &skeleton, later).unwrap(), 0);
    }
}
