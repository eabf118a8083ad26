//! Kernel source trees to build from: Debian's `linux-source-X.Y` package,
//! downloaded (never installed) through the private apt configuration and
//! its tarball unpacked into the cache, so `bootbench kernel build` has a
//! tree on any machine `scripts/setup` prepared. It builds nothing.
//!
//! Layout, under the kernel cache root:
//! ```text
//! <root>/src/<package>_<version>/<tarball's top directory>/   the tree
//! <root>/src/<package>_<version>/.complete                    names the top directory
//! <root>/src/.lock                                            serialises fetches
//! ```
//! An entry appears by one rename of a complete tree.

use super::arch::DebianArch;
use super::fetch::{self, FetchError};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The source package `bootbench kernel source` fetches by default: the
/// kernel series Debian 12 ships, which the machine notes' ppc64 build used.
pub const DEFAULT_PACKAGE: &str = "linux-source-6.1";
/// The marker file of a complete entry.
const COMPLETE: &str = ".complete";

/// Errors while fetching a source tree.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// apt could not find or download the package.
    #[error("cannot download {package}")]
    Fetch {
        /// The package.
        package: String,
        /// Why (boxed: a fetch error is large and this one is rare).
        #[source]
        source: Box<FetchError>,
    },
    /// This host's arch has no Debian index to download through.
    #[error("cannot download kernel sources on this host")]
    Host(#[source] super::arch::ArchError),
    /// A file system operation failed.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// dpkg-deb or tar failed.
    #[error("`{command}` failed ({status}):\n{stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// The tail of its stderr.
        stderr: String,
    },
    /// The package does not hold one kernel source tarball with one tree.
    #[error("{package} unpacked in {dir} is not a kernel source package: {why}")]
    Layout {
        /// The package.
        package: String,
        /// Where it was unpacked.
        dir: PathBuf,
        /// What was wrong.
        why: String,
    },
}

/// The directory that holds source trees under a cache root.
pub fn sources_dir(cache_root: &Path) -> PathBuf {
    cache_root.join("src")
}

/// Returns the unpacked tree of `package`'s current candidate, downloading
/// and unpacking it only when it is not in the cache yet. Progress goes to stderr.
pub fn source_tree(package: &str, cache_root: &Path) -> Result<PathBuf, SourceError> {
    let host = qemu::Arch::host().map_err(|e| SourceError::Host(e.into()))?;
    let arch = DebianArch::for_target(host).map_err(SourceError::Host)?;
    let dir = sources_dir(cache_root);
    fs::create_dir_all(&dir).map_err(|source| io("create directory", &dir, source))?;
    let lock_path = dir.join(".lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| io("open the lock file", &lock_path, source))?;
    lock.lock().map_err(|source| io("lock", &lock_path, source))?;

    if let Some(version) = fetch::candidate_version(arch, package) {
        if let Some(tree) = complete_tree(&dir.join(entry_name(package, &version))) {
            log::info!("{package} {version} is already in {}", tree.display());
            return Ok(tree);
        }
    }
    let temp = dir.join(format!(".fetch-{}", uuid::Uuid::new_v4()));
    let result = download_and_unpack(arch, package, &dir, &temp);
    let _ = fs::remove_dir_all(&temp);
    result
}

fn download_and_unpack(arch: DebianArch, package: &str, dir: &Path, temp: &Path) -> Result<PathBuf, SourceError> {
    let deb_dir = temp.join("deb");
    fs::create_dir_all(&deb_dir).map_err(|source| io("create directory", &deb_dir, source))?;
    let started = std::time::Instant::now();
    let (version, deb) = fetch::download_package(arch, package, &deb_dir)
        .map_err(|source| SourceError::Fetch { package: package.to_string(), source: Box::new(source) })?;
    let entry = dir.join(entry_name(package, &version));
    if let Some(tree) = complete_tree(&entry) {
        return Ok(tree);
    }
    log::info!("downloaded {package} {version} in {:.1} s", started.elapsed().as_secs_f64());

    let unpacked = temp.join("deb-contents");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))?;
    let layout = |why: String| SourceError::Layout { package: package.to_string(), dir: unpacked.clone(), why };
    let usr_src = unpacked.join("usr/src");
    let tarballs: Vec<PathBuf> = fs::read_dir(&usr_src)
        .map_err(|e| layout(format!("cannot list usr/src: {e}")))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.contains(".tar")))
        .collect();
    let tarball = match <[PathBuf; 1]>::try_from(tarballs) {
        Ok([one]) => one,
        Err(all) => return Err(layout(format!("{} tarballs in usr/src, expected 1", all.len()))),
    };
    let started = std::time::Instant::now();
    let tree_parent = temp.join("tree");
    fs::create_dir_all(&tree_parent).map_err(|source| io("create directory", &tree_parent, source))?;
    run(Command::new("tar").arg("-xf").arg(&tarball).arg("-C").arg(&tree_parent))?;
    let tops: Vec<PathBuf> = fs::read_dir(&tree_parent)
        .map_err(|source| io("list", &tree_parent, source))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    let top = match <[PathBuf; 1]>::try_from(tops) {
        Ok([one]) if one.join("Makefile").is_file() && one.join("scripts/kconfig").is_dir() => one,
        Ok([one]) => return Err(layout(format!("{} is not a kernel tree", one.display()))),
        Err(all) => return Err(layout(format!("the tarball holds {} directories, expected 1", all.len()))),
    };
    let top_name = top.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let marker = tree_parent.join(COMPLETE);
    fs::write(&marker, format!("{top_name}\n")).map_err(|source| io("write", &marker, source))?;
    if entry.exists() {
        fs::remove_dir_all(&entry).map_err(|source| io("remove the incomplete entry", &entry, source))?;
    }
    fs::rename(&tree_parent, &entry).map_err(|source| io("move into place", &entry, source))?;
    let tree = entry.join(top_name);
    log::info!("unpacked in {:.1} s: {}", started.elapsed().as_secs_f64(), tree.display());
    Ok(tree)
}

fn entry_name(package: &str, version: &str) -> String {
    format!("{package}_{}", version.replace(':', "%3a"))
}

/// The tree of a complete entry.
fn complete_tree(entry: &Path) -> Option<PathBuf> {
    let top = fs::read_to_string(entry.join(COMPLETE)).ok()?;
    let tree = entry.join(top.trim());
    (!top.trim().is_empty() && tree.join("Makefile").is_file()).then_some(tree)
}

fn run(cmd: &mut Command) -> Result<(), SourceError> {
    let shown = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = cmd.output().map_err(|source| io("run", Path::new(&shown), source))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    Err(SourceError::Command {
        command: shown,
        status: out.status.to_string(),
        stderr: lines.get(lines.len().saturating_sub(15)..).unwrap_or_default().join("\n"),
    })
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> SourceError {
    SourceError::Io { action, path: path.to_path_buf(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_complete_entries_count() {
        let dir = tempfile::tempdir().unwrap();
        let entry = dir.path().join(entry_name("linux-source-6.1", "6.1.192-3"));
        assert!(entry.ends_with("linux-source-6.1_6.1.192-3"));
        let tree = entry.join("linux-source-6.1");
        fs::create_dir_all(&tree).unwrap();
        fs::write(tree.join("Makefile"), "").unwrap();
        assert_eq!(complete_tree(&entry), None, "no marker yet");
        fs::write(entry.join(COMPLETE), "linux-source-6.1\n").unwrap();
        assert_eq!(complete_tree(&entry), Some(tree));
        fs::write(entry.join(COMPLETE), "\n").unwrap();
        assert_eq!(complete_tree(&entry), None);
        assert_eq!(entry_name("p", "1:2.0"), "p_1%3a2.0");
    }
}
