//! contest's tar and list loads as contest ran them: the userland pack's
//! GNU tar and ls on a real source tree. [`RealTree::prepare`] copies a
//! fixed part of the pack's Linux tree (contest's was a 2.4 kernel tree of
//! 150-200 MB and about 12k files; the default [`TREE_DIRS`] of 6.1 are 187
//! MB and 13.8k entries) onto the scratch filesystem with the pack's `cp
//! -a`, and archives it once with the pack's tar when xtar_load runs.
//! Each row drops the caches first, so the loads read it cold:
//! ctar_load `tar -cf` of the tree, xtar_load `tar -xf` of the archive
//! then `rm -rf` of what it made, list_load `ls -lR` of the whole pack
//! (every top directory but the virtual ones; the scratch filesystem,
//! tree included, is under its `/bootbench/work`): a distribution's root
//! of about 93k entries, plus the scratch disk's, as contest's `ls -lRa /`. Owns the tree's
//! layout and the command lines; the loads' loops are `background_loads`'.

use crate::userland_pack::{self, PackCommand, PackError, WORK_MOUNT};
use std::path::{Path, PathBuf};

/// The parts of the pack's Linux tree (under `/usr/src`) the tree holds
/// by default.
pub const TREE_DIRS: [&str; 10] = [
    "linux/arch/x86",
    "linux/block",
    "linux/crypto",
    "linux/fs",
    "linux/include",
    "linux/kernel",
    "linux/lib",
    "linux/mm",
    "linux/net",
    "linux/security",
];

/// The tree's directory in contest's root (it holds `linux/...`).
pub const TREE: &str = "tree";

/// xtar_load's archive of the tree, in contest's root.
pub const ARCHIVE: &str = "tree.tar";

/// Scratch room the tree needs beside the other rows' files: the tree,
/// its archive, and one more copy (ctar_load's archive or xtar_load's
/// extraction), for the default [`TREE_DIRS`] with room to spare.
pub const ROOM_BYTES: u64 = 1 << 30;

/// The pack's programs the loads run.
pub const PACK_NEEDS: [&str; 5] = ["usr/bin/tar", "usr/bin/cp", "usr/bin/rm", "usr/bin/ls", "bin/sh"];

/// Top directories of the pack list_load never lists: the kernel's
/// virtual filesystems and the command's own tmpfs.
const NOT_LISTED: [&str; 5] = ["proc", "sys", "dev", "tmp", "lost+found"];

/// Errors of preparing the tree.
#[derive(Debug, thiserror::Error)]
pub enum RealTreeError {
    /// A command in the pack (the copy, the archive).
    #[error("preparing the tar and list loads' tree")]
    Pack(#[from] PackError),
    /// A directory of the tree or the pack.
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
    /// A part of the tree that is not a plain path under `linux/`.
    #[error("tar_dirs entry '{0}' is not a relative path under linux/ (e.g. linux/fs)")]
    BadDir(String),
}

/// The tree, prepared, and what the loads' commands need.
#[derive(Debug, Clone)]
pub struct RealTree {
    /// The pack's root.
    pub pack: PathBuf,
    /// Contest's root on the scratch filesystem, bound at
    /// [`WORK_MOUNT`] for every command.
    pub work: PathBuf,
    /// What list_load lists, inside the pack.
    pub list_roots: Vec<String>,
    /// Files, directories and links in the tree.
    pub entries: u64,
    /// Bytes of its files.
    pub bytes: u64,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> RealTreeError + 'a {
    move |source| RealTreeError::Io { what, path: path.to_path_buf(), source }
}

/// Checks each of `dirs`: relative, under `linux/`, no `..`.
pub fn check_dirs(dirs: &[String]) -> Result<(), RealTreeError> {
    for d in dirs {
        let p = Path::new(d);
        let plain = p.components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain || !d.starts_with("linux/") || d.len() <= "linux/".len() {
            return Err(RealTreeError::BadDir(d.clone()));
        }
    }
    if dirs.is_empty() {
        return Err(RealTreeError::BadDir(String::new()));
    }
    Ok(())
}

impl RealTree {
    /// Copies `dirs` of the pack's `/usr/src` into `work/tree` with the
    /// pack's `cp -a --parents`, archives the tree as `work/tree.tar` when
    /// `archive` (xtar_load runs), and lists the pack's top directories.
    pub fn prepare(pack: &Path, work: &Path, dirs: &[String], archive: bool) -> Result<RealTree, RealTreeError> {
        check_dirs(dirs)?;
        userland_pack::check(pack, &PACK_NEEDS, "contest's tar and list loads")?;
        let tree = work.join(TREE);
        if tree.exists() {
            std::fs::remove_dir_all(&tree).map_err(io("remove", &tree))?;
        }
        std::fs::create_dir_all(&tree).map_err(io("create", &tree))?;
        let mut t = RealTree {
            pack: pack.to_path_buf(),
            work: work.to_path_buf(),
            list_roots: Vec::new(),
            entries: 0,
            bytes: 0,
        };
        let mut argv = vec!["/usr/bin/cp".to_string(), "-a".into(), "--parents".into()];
        argv.extend(dirs.iter().cloned());
        argv.push(format!("{WORK_MOUNT}/{TREE}"));
        userland_pack::run(&t.command("/usr/src", argv, &work.join("tree-copy.log")))?;
        if archive {
            let argv = [
                "/usr/bin/tar",
                "-cf",
                &format!("{WORK_MOUNT}/{ARCHIVE}"),
                "-C",
                &format!("{WORK_MOUNT}/{TREE}"),
                "linux",
            ];
            userland_pack::run(&t.command("/", argv.map(String::from).to_vec(), &work.join("tree-archive.log")))?;
        }
        for e in walkdir::WalkDir::new(&tree).min_depth(1) {
            let e = e.map_err(|e| io("walk", &tree)(e.into()))?;
            t.entries += 1;
            if e.file_type().is_file() {
                t.bytes += e.metadata().map_err(|e| io("stat", &tree)(e.into()))?.len();
            }
        }
        let mut roots = Vec::new();
        for e in std::fs::read_dir(pack).map_err(io("list", pack))? {
            let e = e.map_err(io("list", pack))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let dir = e.file_type().map_err(io("stat", &e.path()))?.is_dir();
            if dir && !NOT_LISTED.contains(&name.as_str()) {
                roots.push(format!("/{name}"));
            }
        }
        roots.sort();
        t.list_roots = roots;
        Ok(t)
    }

    /// A command of the loads: in the caller's process group (its CPU time
    /// is the load's), output to `log`.
    fn command(&self, cwd: &str, argv: Vec<String>, log: &Path) -> PackCommand {
        PackCommand {
            pack: self.pack.clone(),
            work: self.work.clone(),
            cwd: cwd.into(),
            argv,
            log: log.to_path_buf(),
            extra_env: Vec::new(),
            own_group: false,
        }
    }

    /// `load_dir` inside the pack (it must be under contest's root).
    fn inside(&self, load_dir: &Path) -> String {
        match load_dir.strip_prefix(&self.work) {
            Ok(rel) if rel.as_os_str().is_empty() => WORK_MOUNT.to_string(),
            Ok(rel) => format!("{WORK_MOUNT}/{}", rel.display()),
            Err(_) => load_dir.display().to_string(),
        }
    }

    /// One pass of ctar_load: the tree archived into `load_dir`.
    pub fn ctar(&self, load_dir: &Path) -> PackCommand {
        let out = format!("{}/ctar_load.tar", self.inside(load_dir));
        let argv = ["/usr/bin/tar", "-cf", &out, "-C", &format!("{WORK_MOUNT}/{TREE}"), "linux"];
        self.command("/", argv.map(String::from).to_vec(), &load_dir.join("ctar_load.log"))
    }

    /// One pass of xtar_load, two commands: the archive extracted into
    /// `load_dir`, then what it made removed.
    pub fn xtar(&self, load_dir: &Path) -> [PackCommand; 2] {
        let dir = self.inside(load_dir);
        let extract = ["/usr/bin/tar", "-xf", &format!("{WORK_MOUNT}/{ARCHIVE}"), "-C", &dir];
        let remove = ["/usr/bin/rm", "-rf", &format!("{dir}/linux")];
        let log = load_dir.join("xtar_load.log");
        [
            self.command("/", extract.map(String::from).to_vec(), &log),
            self.command("/", remove.map(String::from).to_vec(), &log),
        ]
    }

    /// One pass of list_load: `ls -lR` of [`RealTree::list_roots`], its
    /// listing to /dev/null (dash execs ls: one process), errors to a log.
    pub fn list(&self, load_dir: &Path) -> PackCommand {
        let script = format!("exec /usr/bin/ls -lR {} > /dev/null", self.list_roots.join(" "));
        self.command("/", vec!["/bin/sh".into(), "-c".into(), script], &load_dir.join("list_load.log"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_under_linux_are_tree_parts() {
        let s = |v: &[&str]| v.iter().map(|d| d.to_string()).collect::<Vec<_>>();
        check_dirs(&s(&TREE_DIRS)).unwrap();
        for bad in ["fs", "/usr/src/linux/fs", "linux/../etc", "linux/", "linux", "./linux/fs"] {
            let e = check_dirs(&s(&[bad])).unwrap_err().to_string();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
        assert!(check_dirs(&[]).is_err());
    }

    #[test]
    fn the_commands_work_inside_contest_s_root_as_the_pack_sees_it() {
        let t = RealTree {
            pack: "/pack".into(),
            work: "/scratch/contest".into(),
            list_roots: vec!["/bootbench".into(), "/usr".into()],
            entries: 0,
            bytes: 0,
        };
        let load = Path::new("/scratch/contest/load");
        let c = t.ctar(load);
        assert_eq!(
            c.command_line(),
            "/usr/bin/tar -cf /bootbench/work/load/ctar_load.tar -C /bootbench/work/tree linux"
        );
        assert!(!c.own_group, "the load's CPU counts in its group");
        let [x, r] = t.xtar(load);
        assert_eq!(x.command_line(), "/usr/bin/tar -xf /bootbench/work/tree.tar -C /bootbench/work/load");
        assert_eq!(r.command_line(), "/usr/bin/rm -rf /bootbench/work/load/linux");
        assert_eq!(t.list(load).argv[2], "exec /usr/bin/ls -lR /bootbench /usr > /dev/null");
        assert_eq!(t.list(load).log, load.join("list_load.log"));
    }
}
