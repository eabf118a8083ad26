//! The pack's read-only ext4 image, made reproducibly from a root tree:
//! the guest's mount points made, files that differ from one install to the
//! next removed, modification times clamped to `SOURCE_DATE_EPOCH` (earlier
//! times are kept, so a file generated from a source is never older than
//! it), the size computed from the tree's contents,
//! and `mke2fs -d` run with a private configuration, a fixed UUID and hash
//! seed and a fake clock. mke2fs copies the host's change and access times
//! of each file, which no one can set, so `debugfs` sets them afterwards
//! and marks the filesystem read-only. It knows nothing of lockfiles.

use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The filesystem's block size.
pub const BLOCK_SIZE: u64 = 4096;
/// The on-disk inode size.
pub const INODE_SIZE: u64 = 256;
/// The volume label.
pub const LABEL: &str = "bootbench-pack";

/// Files an install writes differently each time (logs, caches, backups),
/// relative to the root; a trailing `/*` removes a directory's contents.
pub const VOLATILE: &[&str] = &[
    "var/log/*",
    "var/cache/ldconfig/aux-cache",
    "var/cache/debconf/config.dat-old",
    "var/cache/debconf/templates.dat-old",
    "var/lib/dpkg/status-old",
    "var/lib/dpkg/diversions-old",
    "var/lib/dpkg/statoverride-old",
    "var/lib/dpkg/available-old",
    "var/cache/apt/*",
    "var/lib/apt/lists/*",
    "etc/machine-id",
];

/// The directories the guest mounts on, relative to the root, with the
/// mode each is made with when the install did not make it.
pub const MOUNT_POINTS: &[(&str, u32)] = &[
    ("proc", 0o555),
    ("sys", 0o555),
    ("dev", 0o755),
    ("tmp", 0o1777),
    ("bootbench", 0o755),
    ("bootbench/work", 0o755),
];

/// mke2fs's configuration: only what the image needs, so that the host's
/// `/etc/mke2fs.conf` cannot change the features (or the bytes).
pub const MKE2FS_CONF: &str = "[defaults]\n\
\tbase_features = sparse_super,large_file,filetype,dir_index,ext_attr\n\
\tblocksize = 4096\n\
\tinode_size = 256\n\
[fs_types]\n\
\text4 = {\n\
\t\tfeatures = extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize\n\
\t}\n";

/// The image could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A file of the tree or the image could not be read or changed.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A modification time could not be set.
    #[error("cannot set the times of {path}")]
    SetTimes {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: nix::Error,
    },
    /// An e2fsprogs program could not be started.
    #[error("cannot run {program} (e2fsprogs; scripts/setup installs it)")]
    Spawn {
        /// The program.
        program: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An e2fsprogs program failed.
    #[error("{program} failed ({status}) on {image}: {output}")]
    Failed {
        /// The program.
        program: &'static str,
        /// The image.
        image: PathBuf,
        /// Its exit status.
        status: String,
        /// The end of what it printed.
        output: String,
    },
    /// dumpe2fs's report lacked what the inode list needs.
    #[error("cannot read the used inodes of {image} from dumpe2fs: {why}")]
    Dumpe2fs {
        /// The image.
        image: PathBuf,
        /// What was missing.
        why: String,
    },
}

/// What the tree holds, for sizing the filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TreeSize {
    /// Distinct inodes (hard links counted once), the root included.
    pub inodes: u64,
    /// Data blocks of files, directories and long symlinks.
    pub blocks: u64,
}

impl TreeSize {
    /// The inode count to make: the tree's, a tenth more, and 1024 spare.
    pub fn inode_count(&self) -> u64 {
        self.inodes + self.inodes / 10 + 1024
    }

    /// The filesystem's size in blocks: the data with a tenth to spare for
    /// extents and directory growth, the inode tables, and 32 MiB for the
    /// metadata mke2fs lays out (group descriptors, bitmaps), in whole MiB.
    pub fn fs_blocks(&self) -> u64 {
        let data = self.blocks + self.blocks / 10;
        let inode_tables = (self.inode_count() * INODE_SIZE).div_ceil(BLOCK_SIZE);
        let margin = 32 * 1024 * 1024 / BLOCK_SIZE;
        let per_mib = 1024 * 1024 / BLOCK_SIZE;
        (data + inode_tables + margin).div_ceil(per_mib) * per_mib
    }
}

/// How to call mke2fs for one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mke2fsArgs {
    /// The root tree.
    pub root: PathBuf,
    /// The image file.
    pub image: PathBuf,
    /// Filesystem UUID and directory hash seed.
    pub uuid: uuid::Uuid,
    /// Inodes to make.
    pub inodes: u64,
    /// Size in blocks.
    pub blocks: u64,
}

impl Mke2fsArgs {
    /// mke2fs's arguments: ext4 without a journal or reserved blocks, the
    /// fixed UUID and hash seed, the tree copied in with `-d`.
    pub fn argv(&self) -> Vec<OsString> {
        let uuid = self.uuid.hyphenated().to_string();
        let mut argv: Vec<OsString> = [
            "-t",
            "ext4",
            "-T",
            "default",
            "-q",
            "-F",
            "-b",
            &BLOCK_SIZE.to_string(),
            "-I",
            &INODE_SIZE.to_string(),
            "-N",
            &self.inodes.to_string(),
            "-m",
            "0",
            "-O",
            "^has_journal",
            "-U",
            &uuid,
            "-E",
            &format!("hash_seed={uuid},root_owner=0:0,nodiscard"),
            "-L",
            LABEL,
        ]
        .iter()
        .map(OsString::from)
        .collect();
        argv.push("-d".into());
        argv.push(self.root.clone().into());
        argv.push(self.image.clone().into());
        argv.push(self.blocks.to_string().into());
        argv
    }
}

/// The debugfs script that sets every used inode's change and access time
/// to `epoch` and marks the filesystem read-only.
pub fn debugfs_script(inodes: &[u64], epoch: u64) -> String {
    let mut script = String::new();
    for ino in inodes {
        script.push_str(&format!("sif <{ino}> ctime @{epoch}\nsif <{ino}> atime @{epoch}\n"));
    }
    script.push_str("feature read-only\n");
    script
}

/// The used inodes in dumpe2fs's report: each group's range minus its
/// free inodes, without the reserved inodes below the first one except the
/// root's (2).
pub fn used_inodes(report: &str) -> Result<Vec<u64>, String> {
    let header = |key: &str| {
        report
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("no `{key}` line"))
    };
    let per_group = header("Inodes per group:")?;
    let first = header("First inode:")?;
    let mut used = Vec::new();
    let mut group: u64 = 0;
    let mut seen_groups = 0;
    for line in report.lines() {
        // A group's header is `Group N: (Blocks ...)`; other lines start
        // with `Group` too (`Group descriptor size:`).
        if let Some(n) = line.strip_prefix("Group ").and_then(|rest| rest.split(':').next()?.parse().ok()) {
            group = n;
            continue;
        }
        let Some(free) = line.trim_start().strip_prefix("Free inodes:") else { continue };
        if !line.starts_with(' ') {
            continue;
        }
        seen_groups += 1;
        let start = group * per_group + 1;
        let end = start + per_group;
        let mut free_ranges = Vec::new();
        for range in free.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            let parse = |s: &str| s.trim().parse::<u64>().map_err(|_| format!("bad free range `{range}`"));
            free_ranges.push((parse(a)?, parse(b)?));
        }
        used.extend(
            (start..end)
                .filter(|ino| !free_ranges.iter().any(|(a, b)| (a..=b).contains(&ino)))
                .filter(|&ino| ino == 2 || ino >= first),
        );
    }
    if seen_groups == 0 {
        return Err("no group's `Free inodes:` line".into());
    }
    Ok(used)
}

/// Removes [`VOLATILE`] files from `root`.
pub fn remove_volatile(root: &Path) -> Result<(), ImageError> {
    for entry in VOLATILE {
        let (path, contents) = match entry.strip_suffix("/*") {
            Some(dir) => (root.join(dir), true),
            None => (root.join(entry), false),
        };
        let targets: Vec<PathBuf> = if contents {
            match fs::read_dir(&path) {
                Ok(entries) => entries.filter_map(|e| Some(e.ok()?.path())).collect(),
                Err(_) => Vec::new(),
            }
        } else {
            vec![path]
        };
        for target in targets {
            let result = match fs::symlink_metadata(&target) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&target),
                Ok(_) => fs::remove_file(&target),
                Err(_) => Ok(()),
            };
            result.map_err(|source| ImageError::Io { action: "remove", path: target.clone(), source })?;
        }
    }
    Ok(())
}

/// Makes the [`MOUNT_POINTS`] that `root` lacks; an existing one must be a
/// directory (not a symlink out of the pack).
pub fn make_mount_points(root: &Path) -> Result<(), ImageError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    for (dir, mode) in MOUNT_POINTS {
        let path = root.join(dir);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => continue,
            Ok(_) => {
                let source = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "not a directory");
                return Err(ImageError::Io { action: "use as a mount point", path, source });
            }
            Err(_) => {}
        }
        let err = |action| {
            let path = path.clone();
            move |source| ImageError::Io { action, path, source }
        };
        fs::DirBuilder::new().mode(*mode).create(&path).map_err(err("create directory"))?;
        // The mode without the caller's umask.
        fs::set_permissions(&path, fs::Permissions::from_mode(*mode)).map_err(err("set the mode of"))?;
    }
    Ok(())
}

/// The blocks mke2fs gives a directory whose entries have names of these
/// lengths: each entry takes 8 bytes and its name padded to 4, `.` and
/// `..` 12 each, and a block holds 4096 bytes less its 12-byte checksum
/// tail and (at worst) the room an entry did not fit in. The host's own
/// size of a directory depends on its filesystem and history (entries made
/// and removed during an install or a parallel make), which the image's
/// size must not.
pub fn dir_blocks(name_lengths: impl IntoIterator<Item = usize>) -> u64 {
    let bytes: u64 = 24 + name_lengths.into_iter().map(|len| 8 + (len as u64).div_ceil(4) * 4).sum::<u64>();
    let usable = BLOCK_SIZE - 12 - (8 + 256);
    bytes.div_ceil(usable).max(1)
}

/// Walks `root`: sets every modification time later than `epoch` to
/// `epoch` (the access time with it), symlinks included, keeping earlier
/// ones, and counts inodes and blocks.
pub fn clamp_and_measure(root: &Path, epoch: u64) -> Result<TreeSize, ImageError> {
    let mut size = TreeSize::default();
    let mut seen = std::collections::HashSet::new();
    clamp_walk(root, epoch, &mut size, &mut seen)?;
    Ok(size)
}

fn clamp_walk(
    path: &Path,
    epoch: u64,
    size: &mut TreeSize,
    seen: &mut std::collections::HashSet<(u64, u64)>,
) -> Result<(), ImageError> {
    let meta =
        fs::symlink_metadata(path).map_err(|source| ImageError::Io { action: "stat", path: path.into(), source })?;
    let mut dir_size = 0;
    if meta.is_dir() {
        let mut children: Vec<PathBuf> = fs::read_dir(path)
            .map_err(|source| ImageError::Io { action: "list", path: path.into(), source })?
            .filter_map(|e| Some(e.ok()?.path()))
            .collect();
        children.sort();
        dir_size = dir_blocks(children.iter().map(|c| c.file_name().map_or(0, |n| n.len())));
        for child in children {
            clamp_walk(&child, epoch, size, seen)?;
        }
    }
    if seen.insert((meta.dev(), meta.ino())) {
        size.inodes += 1;
        let long_symlink = meta.file_type().is_symlink() && meta.len() >= 60;
        if meta.is_dir() {
            size.blocks += dir_size;
        } else if meta.is_file() || long_symlink {
            size.blocks += meta.len().div_ceil(BLOCK_SIZE);
        }
    }
    let epoch_i64 = i64::try_from(epoch).unwrap_or(i64::MAX);
    // Only the modification time decides: an earlier one is kept even when
    // the file was read since (its access time is the image's anyway).
    if (meta.mtime(), meta.mtime_nsec()) > (epoch_i64, 0) {
        let time = nix::sys::time::TimeSpec::new(epoch_i64, 0);
        nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            path,
            &time,
            &time,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .map_err(|source| ImageError::SetTimes { path: path.into(), source })?;
    }
    Ok(())
}

/// Makes the image `args.image` from `args.root` (see the module doc):
/// mke2fs with `conf` as its configuration, then debugfs's fix-up.
pub fn make_image(args: &Mke2fsArgs, conf: &Path, epoch: u64) -> Result<(), ImageError> {
    fs::write(conf, MKE2FS_CONF).map_err(|source| ImageError::Io { action: "write", path: conf.into(), source })?;
    let _ = fs::remove_file(&args.image);
    let mut mke2fs = Command::new("mke2fs");
    mke2fs.args(args.argv()).env("MKE2FS_CONFIG", conf);
    run_e2fs("mke2fs", mke2fs, &args.image, epoch)?;

    let mut dumpe2fs = Command::new("dumpe2fs");
    dumpe2fs.arg(&args.image);
    let report = run_e2fs("dumpe2fs", dumpe2fs, &args.image, epoch)?;
    let inodes = used_inodes(&report).map_err(|why| ImageError::Dumpe2fs { image: args.image.clone(), why })?;
    let script_path = conf.with_file_name("debugfs.cmds");
    fs::write(&script_path, debugfs_script(&inodes, epoch)).map_err(|source| ImageError::Io {
        action: "write",
        path: script_path.clone(),
        source,
    })?;
    let mut debugfs = Command::new("debugfs");
    debugfs.arg("-w").arg("-f").arg(&script_path).arg(&args.image);
    let out = run_e2fs("debugfs", debugfs, &args.image, epoch)?;
    // debugfs exits 0 even when a command fails; its complaints say so.
    if let Some(line) = out.lines().find(|l| !l.starts_with("debugfs") && !l.trim().is_empty()) {
        return Err(ImageError::Failed {
            program: "debugfs",
            image: args.image.clone(),
            status: "exit status: 0".into(),
            output: line.to_string(),
        });
    }
    Ok(())
}

/// Runs an e2fsprogs program with the fake clock and the C locale (mke2fs
/// sorts each directory with the locale's collation); its stdout, or for
/// debugfs its stderr (where it reports a failed command).
fn run_e2fs(program: &'static str, mut command: Command, image: &Path, epoch: u64) -> Result<String, ImageError> {
    let output = command
        .env("E2FSPROGS_FAKE_TIME", epoch.to_string())
        .env("LC_ALL", "C")
        .output()
        .map_err(|source| ImageError::Spawn { program, source })?;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        let tail: Vec<&str> = stderr.trim_end().lines().rev().take(10).collect();
        return Err(ImageError::Failed {
            program,
            image: image.into(),
            status: output.status.to_string(),
            output: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        });
    }
    if program == "debugfs" {
        Ok(stderr)
    } else {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// The sha256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, ImageError> {
    let err = |source| ImageError::Io { action: "read", path: path.into(), source };
    let mut file = fs::File::open(path).map_err(err)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(err)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mke2fs_argv_fixes_uuid_seed_and_size() {
        let args = Mke2fsArgs {
            root: "/r".into(),
            image: "/i/pack.ext4".into(),
            uuid: uuid::Uuid::from_bytes([0x11; 16]),
            inodes: 5000,
            blocks: 25600,
        };
        let argv: Vec<String> = args.argv().iter().map(|a| a.to_string_lossy().into_owned()).collect();
        let joined = argv.join(" ");
        assert!(joined.contains("-t ext4 -T default"), "{joined}");
        assert!(joined.contains("-N 5000 -m 0 -O ^has_journal"), "{joined}");
        assert!(joined.contains("-U 11111111-1111-1111-1111-111111111111"), "{joined}");
        assert!(joined.contains("-E hash_seed=11111111-1111-1111-1111-111111111111,root_owner=0:0,nodiscard"));
        assert!(joined.ends_with("-d /r /i/pack.ext4 25600"), "{joined}");
    }

    #[test]
    fn size_covers_data_inodes_and_margin_in_whole_mib() {
        let size = TreeSize { inodes: 10_000, blocks: 90_000 };
        assert_eq!(size.inode_count(), 12_024);
        // 99_000 data + 752 inode-table + 8192 margin = 107_944 blocks -> 422 MiB.
        assert_eq!(size.fs_blocks(), 422 * 256);
        assert_eq!(size.fs_blocks() % 256, 0);
    }

    #[test]
    fn only_modification_times_after_the_epoch_are_clamped() {
        use nix::sys::time::TimeSpec;
        let root = tempfile::tempdir().unwrap();
        let set = |name: &str, atime: i64, mtime: (i64, i64)| {
            let path = root.path().join(name);
            fs::write(&path, b"x").unwrap();
            let (a, m) = (TimeSpec::new(atime, 0), TimeSpec::new(mtime.0, mtime.1));
            nix::sys::stat::utimensat(
                nix::fcntl::AT_FDCWD,
                &path,
                &a,
                &m,
                nix::sys::stat::UtimensatFlags::NoFollowSymlink,
            )
            .unwrap();
        };
        // A source read after the epoch, a file generated after it, one a
        // fraction of a second after it.
        set("source.c", 2_000, (500, 0));
        set("generated.o", 2_000, (1_500, 7));
        set("late.o", 900, (1_000, 1));
        clamp_and_measure(root.path(), 1_000).unwrap();
        let mtime = |name: &str| {
            let m = fs::metadata(root.path().join(name)).unwrap();
            (m.mtime(), m.mtime_nsec())
        };
        assert_eq!(mtime("source.c"), (500, 0));
        assert_eq!(mtime("generated.o"), (1_000, 0));
        assert_eq!(mtime("late.o"), (1_000, 0));
    }

    #[test]
    fn a_directory_is_sized_from_its_entries() {
        assert_eq!(dir_blocks([]), 1);
        // 24 + 300 * (8 + 12) = 6024 bytes over 3820 a block.
        assert_eq!(dir_blocks(std::iter::repeat_n(10, 300)), 2);
        assert_eq!(dir_blocks(std::iter::repeat_n(255, 14)), 1);
        assert_eq!(dir_blocks(std::iter::repeat_n(255, 15)), 2);
    }

    #[test]
    fn missing_mount_points_are_made_with_their_modes() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("proc")).unwrap();
        fs::set_permissions(root.path().join("proc"), fs::Permissions::from_mode(0o700)).unwrap();
        make_mount_points(root.path()).unwrap();
        let mode = |d: &str| fs::metadata(root.path().join(d)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("proc"), 0o700, "an existing mount point is left as it is");
        assert_eq!(mode("tmp"), 0o1777);
        assert_eq!(mode("bootbench/work"), 0o755);
        assert_eq!(fs::read_dir(root.path().join("bootbench/work")).unwrap().count(), 0);
        fs::remove_dir(root.path().join("sys")).unwrap();
        std::os::unix::fs::symlink("/sys", root.path().join("sys")).unwrap();
        let err = make_mount_points(root.path()).unwrap_err().to_string();
        assert!(err.starts_with("cannot use as a mount point"), "{err}");
    }

    #[test]
    fn used_inodes_are_the_complement_of_free_ones() {
        let report = "Inodes per group:         16\nFirst inode:              11\nGroup descriptor size:    64\n\
                      Group 0: (Blocks 0-32767) csum 0x1 [ITABLE_ZEROED]\n  Free inodes: 14-16\n\
                      Group 1: (Blocks 32768-65535)\n  Free inodes: 17, 19-32\n\
                      Group 2: (Blocks 65536-98303)\n  Free inodes: \n";
        let used = used_inodes(report).unwrap();
        let mut want = vec![2, 11, 12, 13, 18];
        want.extend(33..=48);
        assert_eq!(used, want);
        assert!(used_inodes("First inode: 11\n").unwrap_err().contains("Inodes per group"));
    }

    #[test]
    fn debugfs_script_sets_both_times_and_read_only() {
        assert_eq!(
            debugfs_script(&[2, 11], 7),
            "sif <2> ctime @7\nsif <2> atime @7\nsif <11> ctime @7\nsif <11> atime @7\nfeature read-only\n"
        );
    }
}
