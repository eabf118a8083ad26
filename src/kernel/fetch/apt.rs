//! The apt and dpkg mechanics of a fetch: apt-get and apt-cache run through
//! the private apt configuration that `scripts/setup` writes, one index
//! directory per architecture, what their answers mean (the metapackage's
//! kernel, a package's candidate version), and `dpkg-deb -x`. It never
//! installs a package, never changes the system's apt or dpkg configuration
//! and never names a mirror. It knows nothing of the kernel cache: it
//! downloads into and unpacks to directories it is given, and names nothing
//! in `fetch` but its error.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use super::error::{log, FetchError};
use crate::kernel::arch::DebianArch;

/// Environment variable that overrides the private apt directory.
pub const APT_DIR_ENV: &str = "BOOTBENCH_APT_DIR";
/// Where `scripts/setup` writes the private apt configuration by default.
pub const DEFAULT_APT_DIR: &str = "/var/cache/bootbench/apt";

/// How many trailing lines of a failed command's output an error keeps.
const TAIL_LINES: usize = 15;

/// The private apt directory: `$BOOTBENCH_APT_DIR` or [`DEFAULT_APT_DIR`].
pub fn apt_dir() -> PathBuf {
    std::env::var_os(APT_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_APT_DIR), PathBuf::from)
}

/// Downloads the candidate of `package` (an `Architecture: all` package such
/// as `linux-source-6.1` is in every arch's index) into `dir` through the
/// private apt configuration, refreshing `arch`'s indexes only when they are
/// missing. Returns the version and the .deb; used by
/// [`source`](crate::kernel::source).
pub(crate) fn download_package(arch: DebianArch, package: &str, dir: &Path) -> Result<(String, PathBuf), FetchError> {
    let apt = Apt::open(arch)?;
    if !apt.has_main_index()? {
        apt.update()?;
    }
    let record = apt.show(package)?;
    let version = field(&record, "Version")
        .ok_or_else(|| FetchError::Resolve {
            arch,
            metapackage: package.to_string(),
            why: "apt-cache show printed no Version".into(),
        })?
        .to_string();
    let spec = format!("{package}={version}");
    let resolved = Resolved {
        arch,
        metapackage: package.to_string(),
        package: package.to_string(),
        version: version.clone(),
        source: package.to_string(),
    };
    let deb = apt.download(&spec, dir, &format!("downloading {spec}"), &resolved)?;
    Ok((version, deb))
}

/// The candidate version of `package` in `arch`'s indexes, without network
/// access (`None` when the indexes are missing or do not list it).
pub(crate) fn candidate_version(arch: DebianArch, package: &str) -> Option<String> {
    let apt = Apt::open(arch).ok()?;
    if !apt.has_main_index().ok()? {
        return None;
    }
    field(&apt.show(package).ok()?, "Version").map(str::to_string)
}

/// A concrete kernel package chosen by apt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Resolved {
    /// The architecture it is for.
    pub(super) arch: DebianArch,
    /// The metapackage it was resolved from.
    pub(super) metapackage: String,
    /// The concrete binary package.
    pub(super) package: String,
    /// Its exact Debian version.
    pub(super) version: String,
    /// Its source package as apt reports it.
    pub(super) source: String,
}

/// Unpacks the .deb `deb` into `tree` with `dpkg-deb -x`.
pub(super) fn unpack_deb(arch: DebianArch, deb: &Path, tree: &Path, doing: &str) -> Result<(), FetchError> {
    run(arch, "dpkg-deb", &[OsString::from("-x"), deb.into(), tree.into()], None, doing, "")?;
    Ok(())
}

/// The one .deb `apt-get download` left in `dir`.
fn single_deb(dir: &Path, resolved: &Resolved) -> Result<PathBuf, FetchError> {
    let debs: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|source| FetchError::Io { action: "list", path: dir.to_path_buf(), source })?
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "deb"))
        .collect();
    match <[PathBuf; 1]>::try_from(debs) {
        Ok([deb]) => Ok(deb),
        Err(debs) => Err(FetchError::Layout {
            package: resolved.package.clone(),
            arch: resolved.arch,
            dir: dir.to_path_buf(),
            why: format!("apt-get download left {} .deb files, expected 1", debs.len()),
        }),
    }
}

/// apt-get and apt-cache bound to the private configuration, for one architecture.
pub(super) struct Apt {
    dir: PathBuf,
    arch: DebianArch,
    /// The first suite of the private sources.list (`bookworm`): its main
    /// index must be present; the others may fail to update.
    base_suite: String,
}

impl Apt {
    /// The private configuration for `arch`; an error when `scripts/setup`
    /// has not written it.
    pub(super) fn open(arch: DebianArch) -> Result<Apt, FetchError> {
        let dir = apt_dir();
        let sources = dir.join("sources.list");
        if !sources.is_file() {
            return Err(FetchError::NoAptConfig { dir });
        }
        let text = fs::read_to_string(&sources).map_err(|source| FetchError::Io {
            action: "read",
            path: sources.clone(),
            source,
        })?;
        let base_suite = base_suite(&text).ok_or(FetchError::BadSources { path: sources })?;
        Ok(Apt { dir, arch, base_suite })
    }

    /// Index directory of this architecture, kept apart from the others so
    /// that no dpkg foreign-architecture setting is needed.
    fn lists(&self) -> PathBuf {
        self.dir.join(format!("lists-{}", self.arch))
    }

    fn options(&self) -> Vec<OsString> {
        let dir = self.dir.display();
        let arch = self.arch;
        let mut settings = vec![
            format!("Dir::Etc::sourcelist={dir}/sources.list"),
            format!("Dir::Etc::sourceparts={dir}/parts"),
            format!("Dir::State::lists={}", self.lists().display()),
            format!("Dir::Cache::archives={dir}/archives"),
            // Build apt's package cache in memory: a file would be rebuilt over the
            // system's, and three of them on disk (about 75 MB per arch) save
            // only half a second per lookup.
            "Dir::Cache::pkgcache=".to_string(),
            "Dir::Cache::srcpkgcache=".to_string(),
            format!("APT::Architecture={arch}"),
            format!("APT::Architectures::={arch}"),
            "Acquire::Languages=none".to_string(),
            "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false".to_string(),
        ];
        if running_as_root() {
            // Root downloads into a directory the _apt user cannot enter; say so
            // up front instead of letting apt warn about it.
            settings.push("APT::Sandbox::User=root".to_string());
        }
        settings.into_iter().flat_map(|s| [OsString::from("-o"), OsString::from(s)]).collect()
    }

    /// The full argv for `args`: the private options, `-q`, then `args`.
    fn argv(&self, args: &[&str]) -> Vec<OsString> {
        let mut argv = self.options();
        argv.push("-q".into());
        argv.extend(args.iter().map(OsString::from));
        argv
    }

    /// What errors add to a command line they show without its options.
    fn note(&self) -> String {
        format!(" (private apt configuration {}, indexes {})", self.dir.display(), self.lists().display())
    }

    /// Runs `program` (apt-get or apt-cache) with the private options.
    fn run(&self, program: &str, args: &[&str], cwd: Option<&Path>, doing: &str) -> Result<Output, FetchError> {
        run(self.arch, program, &self.argv(args), cwd, doing, &self.note())
    }

    /// `apt-get download SPEC` into `dir`: the one .deb it left there.
    pub(super) fn download(
        &self,
        spec: &str,
        dir: &Path,
        doing: &str,
        resolved: &Resolved,
    ) -> Result<PathBuf, FetchError> {
        // apt-get draws no progress when its output is captured: a bar
        // follows the bytes landing in `dir`, of the size the index gives.
        let size = self.show(spec).ok().and_then(|record| field(&record, "Size").and_then(|s| s.parse().ok()));
        let _bar = crate::terminal::DirectoryBytes::follow(dir, size, doing.to_string());
        self.run("apt-get", &["download", spec], Some(dir), doing)?;
        single_deb(dir, resolved)
    }

    /// Whether this arch's main index of the base suite has been downloaded.
    pub(super) fn has_main_index(&self) -> Result<bool, FetchError> {
        let lists = self.lists();
        let entries = match fs::read_dir(&lists) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(source) => return Err(FetchError::Io { action: "list", path: lists, source }),
        };
        let marker = format!("_dists_{}_main_binary-{}_Packages", self.base_suite, self.arch);
        Ok(entries.flatten().any(|entry| entry.file_name().to_string_lossy().contains(&marker)))
    }

    /// `apt-get update` into this arch's index directory. A failure is
    /// tolerated when only indexes other than the base suite's failed (the
    /// security index of foreign architectures is often broken) and the base
    /// suite's main index is present.
    pub(super) fn update(&self) -> Result<(), FetchError> {
        let lists = self.lists();
        let partial = lists.join("partial");
        fs::create_dir_all(&partial).map_err(|source| FetchError::Io {
            action: "create directory",
            path: partial.clone(),
            source,
        })?;
        let started = Instant::now();
        log(format_args!("updating the {} package indexes in {}", self.arch, lists.display()));
        let doing = format!("updating the {} package indexes", self.arch);
        let argv = self.argv(&["update"]);
        let output = spawn(self.arch, "apt-get", &argv, None, &doing)?;
        if output.status.success() {
            log(format_args!("updated in {:.1} s", started.elapsed().as_secs_f64()));
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let failed: Vec<&str> = stderr.lines().filter(|line| line.contains("Failed to fetch")).collect();
        let base = format!("/dists/{}/", self.base_suite);
        if failed.is_empty() || failed.iter().any(|line| line.contains(&base)) || !self.has_main_index()? {
            return Err(command_failed(self.arch, "apt-get", &argv, &output, &doing, &self.note()));
        }
        for line in failed {
            log(format_args!("ignoring a broken index: {}", line.trim_start_matches("E: ").trim()));
        }
        log(format_args!(
            "apt-get update exited with an error, but the main {} index for {} was fetched; continuing ({:.1} s)",
            self.base_suite,
            self.arch,
            started.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    /// The candidate record of `spec` (`name` or `name=version`).
    fn show(&self, spec: &str) -> Result<Vec<(String, String)>, FetchError> {
        let doing = format!("looking up {spec}");
        let output = self.run("apt-cache", &["show", "--no-all-versions", spec], None, &doing)?;
        Ok(first_stanza(&String::from_utf8_lossy(&output.stdout)))
    }

    /// The concrete kernel package the metapackage's candidate depends on.
    pub(super) fn resolve(&self) -> Result<Resolved, FetchError> {
        let metapackage = self.arch.metapackage();
        let resolve_err = |why: String| FetchError::Resolve { arch: self.arch, metapackage: metapackage.into(), why };
        let meta = self.show(metapackage)?;
        let depends = field(&meta, "Depends").ok_or_else(|| resolve_err("its record has no Depends".into()))?;
        let (package, pinned) = kernel_dependency(depends, metapackage)
            .ok_or_else(|| resolve_err(format!("no linux-image-* package in Depends: {depends}")))?;
        let spec = match &pinned {
            Some(version) => format!("{package}={version}"),
            None => package.clone(),
        };
        let record = self.show(&spec)?;
        let version = field(&record, "Version").ok_or_else(|| resolve_err(format!("{spec} has no Version")))?;
        let source = field(&record, "Source").unwrap_or(&package).to_string();
        let meta_version = field(&meta, "Version").unwrap_or("?");
        log(format_args!("{metapackage} {meta_version} ({}) depends on {package} {version}", self.arch));
        Ok(Resolved {
            arch: self.arch,
            metapackage: metapackage.to_string(),
            package,
            version: version.to_string(),
            source,
        })
    }
}

/// Runs a program and turns a failure into [`FetchError::Command`]. `note` is
/// appended to the command shown in errors (the apt options are left out of it).
fn run(
    arch: DebianArch,
    program: &str,
    argv: &[OsString],
    cwd: Option<&Path>,
    doing: &str,
    note: &str,
) -> Result<Output, FetchError> {
    let output = spawn(arch, program, argv, cwd, doing)?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(command_failed(arch, program, argv, &output, doing, note))
    }
}

/// Runs a program in the C locale (its messages are parsed) and collects its
/// output, whatever its exit status.
fn spawn(
    arch: DebianArch,
    program: &str,
    argv: &[OsString],
    cwd: Option<&Path>,
    doing: &str,
) -> Result<Output, FetchError> {
    let mut command = Command::new(program);
    command.args(argv).env("LC_ALL", "C");
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    command.output().map_err(|source| FetchError::Spawn {
        program: program.to_string(),
        doing: doing.to_string(),
        arch,
        source,
    })
}

/// The error for a command that exited unsuccessfully: its argv without `-o`
/// options, status, and the tail of stderr (or of stdout when stderr is empty).
fn command_failed(
    arch: DebianArch,
    program: &str,
    argv: &[OsString],
    output: &Output,
    doing: &str,
    note: &str,
) -> FetchError {
    let mut shown = vec![program.to_string()];
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if arg == "-o" {
            args.next();
        } else {
            shown.push(arg.to_string_lossy().into_owned());
        }
    }
    let stream = if output.stderr.iter().all(u8::is_ascii_whitespace) { &output.stdout } else { &output.stderr };
    FetchError::Command {
        command: format!("{}{note}", shown.join(" ")),
        status: output.status.to_string(),
        doing: doing.to_string(),
        arch,
        output_tail: tail(&String::from_utf8_lossy(stream), TAIL_LINES),
    }
}

/// The suite of the first `deb` line of a sources.list.
fn base_suite(sources: &str) -> Option<String> {
    crate::apt_sources::parse_one_line(sources).into_iter().next().map(|s| s.suite)
}

fn first_stanza(text: &str) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if fields.is_empty() {
                continue;
            }
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = fields.last_mut() {
                value.push('\n');
                value.push_str(line.trim());
            }
        } else if let Some((name, value)) = line.split_once(':') {
            fields.push((name.to_string(), value.trim().to_string()));
        }
    }
    fields
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// The first `linux-image-*` package in a Depends field, with the version it
/// is pinned to by `(= VERSION)`, if any.
fn kernel_dependency(depends: &str, metapackage: &str) -> Option<(String, Option<String>)> {
    depends.split(',').find_map(|clause| {
        let first = clause.split('|').next()?.trim();
        let (name, rest) = first.split_once(|c: char| c.is_whitespace() || c == '(').unwrap_or((first, ""));
        let name = name.split(':').next()?.trim();
        if !name.starts_with("linux-image-") || name == metapackage {
            return None;
        }
        let pinned = rest
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .trim()
            .strip_prefix('=')
            .map(|version| version.trim().to_string())
            .filter(|version| !version.is_empty());
        Some((name.to_string(), pinned))
    })
}

/// The last `lines` lines of `text`, trimmed.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn running_as_root() -> bool {
    fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_suite_is_the_first_deb_line() {
        let sources = "# comment\ndeb-src http://m/debian x main\n\
                       deb [arch=amd64 signed-by=/k.gpg] http://m/debian bookworm main\n\
                       deb http://m/debian bookworm-updates main\n";
        assert_eq!(base_suite(sources).as_deref(), Some("bookworm"));
        assert_eq!(base_suite("deb http://m/debian trixie main").as_deref(), Some("trixie"));
        assert_eq!(base_suite("# nothing\n"), None);
    }

    #[test]
    fn parses_the_candidate_record() {
        let text = "Package: linux-image-amd64\nSource: linux-signed-amd64 (6.1.192+3)\nVersion: 6.1.192-3\n\
                    Depends: linux-image-6.1.0-57-amd64 (= 6.1.192-3)\nDescription: Linux for\n 64-bit PCs\n\n\
                    Package: linux-image-amd64\nVersion: 6.1.176-1\n";
        let fields = first_stanza(text);
        assert_eq!(field(&fields, "version"), Some("6.1.192-3"));
        assert_eq!(field(&fields, "Description"), Some("Linux for\n64-bit PCs"));
        let depends = field(&fields, "Depends").unwrap();
        assert_eq!(
            kernel_dependency(depends, "linux-image-amd64"),
            Some(("linux-image-6.1.0-57-amd64".to_string(), Some("6.1.192-3".to_string())))
        );
    }

    #[test]
    fn kernel_dependency_skips_other_packages() {
        assert_eq!(
            kernel_dependency("kmod, linux-base (>= 4.3~), linux-image-6.1.0-50-686:i386", "linux-image-686"),
            Some(("linux-image-6.1.0-50-686".to_string(), None))
        );
        assert_eq!(
            kernel_dependency("linux-image-6.1.0-50-686-unsigned (=6.1.176-1) | linux-image-6.1.0-50-686", "x"),
            Some(("linux-image-6.1.0-50-686-unsigned".to_string(), Some("6.1.176-1".to_string())))
        );
        assert_eq!(kernel_dependency("kmod, initramfs-tools", "linux-image-686"), None);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
