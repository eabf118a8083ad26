//! The root tree of a pack, installed by `mmdebstrap` through its own
//! private apt configuration (never the host's dpkg): the argv, the run,
//! and what its failure text says about packages the archive does not
//! have. It knows nothing of lockfiles or images.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The program that installs the root.
pub const MMDEBSTRAP: &str = "mmdebstrap";

/// How many trailing lines of mmdebstrap's output an error keeps.
const TAIL_LINES: usize = 20;

/// What dpkg leaves out of the root: documentation, manuals and
/// translations, which no build reads (the copyright files stay).
pub const PATH_EXCLUDES: &[&str] = &[
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
];

/// The program mmdebstrap asks whether this host runs a foreign
/// architecture's programs (natively, or under qemu-user through binfmt_misc).
pub const ARCH_TEST: &str = "arch-test";

/// Debian's name for the architecture this program was built for.
pub fn native_debian_arch() -> Option<&'static str> {
    if cfg!(target_arch = "x86_64") {
        Some("amd64")
    } else if cfg!(target_arch = "x86") {
        Some("i386")
    } else if cfg!(all(target_arch = "powerpc64", target_endian = "little")) {
        Some("ppc64el")
    } else if cfg!(target_arch = "aarch64") {
        Some("arm64")
    } else {
        None
    }
}

/// The root could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// This host cannot run the architecture's programs, which the install
    /// (maintainer scripts) and the tree's preparation (its gcc) need.
    #[error("this host cannot run {arch} programs ({ARCH_TEST} {arch}: {said}): the pack's install and its Linux tree's preparation run them; scripts/setup installs qemu-user-static and registers it with binfmt_misc")]
    CannotRun {
        /// The Debian architecture.
        arch: String,
        /// What arch-test said, or why it could not run.
        said: String,
    },
    /// mmdebstrap could not be started.
    #[error("cannot run {MMDEBSTRAP} (install it: scripts/setup)")]
    Spawn(#[source] std::io::Error),
    /// Pinned versions the archive no longer has.
    #[error("the archive {mirror} has no {} (a lockfile pin the archive dropped: run `bootbench pack lock` to move the pack on)", versions_text(.missing))]
    VersionsGone {
        /// The mirror.
        mirror: String,
        /// Package and version pairs apt could not find.
        missing: Vec<(String, String)>,
    },
    /// Packages the archive does not have at all.
    #[error("the archive {mirror} has no package {}", .packages.join(", "))]
    PackagesGone {
        /// The mirror.
        mirror: String,
        /// The packages.
        packages: Vec<String>,
    },
    /// Any other failure.
    #[error("{MMDEBSTRAP} failed ({status}) installing {root} from {mirror}{pins_note}; its output ends:\n{tail}")]
    Failed {
        /// Its exit status.
        status: String,
        /// The root directory.
        root: PathBuf,
        /// The mirror.
        mirror: String,
        /// When packages were pinned: which pins could be gone.
        pins_note: String,
        /// The end of its output.
        tail: String,
    },
}

fn versions_text(missing: &[(String, String)]) -> String {
    missing.iter().map(|(p, v)| format!("{p} version {v}")).collect::<Vec<_>>().join(", ")
}

/// What to install and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapSpec {
    /// The Debian suite.
    pub suite: String,
    /// The Debian architecture.
    pub arch: String,
    /// The mirror URI.
    pub mirror: String,
    /// Packages to install besides the essential set: names, or
    /// `name=version` pins.
    pub include: Vec<String>,
    /// The root directory (must not exist yet).
    pub root: PathBuf,
    /// `SOURCE_DATE_EPOCH` for the install.
    pub source_date_epoch: u64,
}

impl BootstrapSpec {
    /// mmdebstrap's arguments (after the program name).
    pub fn argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec![
            "--mode=root".into(),
            "--variant=essential".into(),
            format!("--architectures={}", self.arch).into(),
            format!("--include={}", self.include.join(",")).into(),
        ];
        argv.extend(PATH_EXCLUDES.iter().map(|opt| OsString::from(format!("--dpkgopt={opt}"))));
        argv.push("--aptopt=Acquire::Languages \"none\"".into());
        argv.push(self.suite.clone().into());
        argv.push(self.root.clone().into());
        argv.push(format!("deb {} {} main", self.mirror, self.suite).into());
        argv
    }

    /// Checks that this host runs the architecture's programs (arch-test),
    /// before anything is downloaded; this host's own architecture needs
    /// no check.
    pub fn check_runs_programs(&self) -> Result<(), BootstrapError> {
        if Some(self.arch.as_str()) == native_debian_arch() {
            return Ok(());
        }
        let cannot = |said: String| BootstrapError::CannotRun { arch: self.arch.clone(), said };
        let out = Command::new(ARCH_TEST)
            .arg(&self.arch)
            .env("LC_ALL", "C")
            .output()
            .map_err(|e| cannot(format!("cannot run it: {e}")))?;
        if out.status.success() {
            return Ok(());
        }
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        Err(cannot(text.trim().lines().last().unwrap_or("no output").to_string()))
    }

    /// Runs mmdebstrap (after [`Self::check_runs_programs`]); on failure, the packages or pinned versions its
    /// output says are missing, else the tail of its output.
    pub fn run(&self) -> Result<(), BootstrapError> {
        self.check_runs_programs()?;
        let mut mmdebstrap = Command::new(MMDEBSTRAP);
        mmdebstrap.args(self.argv()).env("SOURCE_DATE_EPOCH", self.source_date_epoch.to_string()).env("LC_ALL", "C");
        // mmdebstrap's `I: ...` lines name its stages (downloading,
        // extracting, installing): the spinner shows the latest.
        let output = crate::terminal::output_with_spinner(&mut mmdebstrap, "mmdebstrap", |l| l.starts_with("I: "))
            .map_err(BootstrapError::Spawn)?;
        if output.status.success() {
            return Ok(());
        }
        let text = format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        Err(self.failure(&output.status.to_string(), &text))
    }

    /// The error for a failed run with exit `status` and output `text`.
    pub fn failure(&self, status: &str, text: &str) -> BootstrapError {
        let missing = missing_versions(text);
        if !missing.is_empty() {
            return BootstrapError::VersionsGone { mirror: self.mirror.clone(), missing };
        }
        let packages = missing_packages(text);
        if !packages.is_empty() {
            return BootstrapError::PackagesGone { mirror: self.mirror.clone(), packages };
        }
        let pinned = self.include.iter().filter(|p| p.contains('=')).count();
        let pins_note = if pinned == 0 {
            String::new()
        } else {
            format!(" with {pinned} pinned versions (any of them may be gone from the archive)")
        };
        let lines: Vec<&str> = text.trim_end().lines().collect();
        BootstrapError::Failed {
            status: status.to_string(),
            root: self.root.clone(),
            mirror: self.mirror.clone(),
            pins_note,
            tail: lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n"),
        }
    }
}

/// apt's `Version 'V' for 'P' was not found` lines: (P, V), in order, once each.
pub fn missing_versions(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.split("Version '").nth(1) else { continue };
        let Some((version, rest)) = rest.split_once("' for '") else { continue };
        let Some((package, _)) = rest.split_once("' was not found") else { continue };
        let pair = (package.to_string(), version.to_string());
        if !out.contains(&pair) {
            out.push(pair);
        }
    }
    out
}

/// apt's `Unable to locate package P` lines: each P, once.
pub fn missing_packages(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.split("Unable to locate package ").nth(1) else { continue };
        let package = rest.trim().to_string();
        if !package.is_empty() && !out.contains(&package) {
            out.push(package);
        }
    }
    out
}

/// Whether `root` is free for a new install (absent, or an empty directory).
pub fn root_is_free(root: &Path) -> bool {
    std::fs::read_dir(root).map_or(true, |mut entries| entries.next().is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(include: &[&str]) -> BootstrapSpec {
        BootstrapSpec {
            suite: "bookworm".into(),
            arch: "amd64".into(),
            mirror: "http://m.invalid/debian".into(),
            include: include.iter().map(|s| s.to_string()).collect(),
            root: PathBuf::from("/tmp/root"),
            source_date_epoch: 1,
        }
    }

    #[test]
    fn argv_names_suite_root_and_mirror_last() {
        let argv: Vec<String> =
            spec(&["make=4.3-4.1", "gcc"]).argv().iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            argv[..4],
            ["--mode=root", "--variant=essential", "--architectures=amd64", "--include=make=4.3-4.1,gcc"]
        );
        assert!(argv.contains(&"--dpkgopt=path-exclude=/usr/share/doc/*".to_string()));
        assert_eq!(argv[argv.len() - 3..], ["bookworm", "/tmp/root", "deb http://m.invalid/debian bookworm main"]);
    }

    #[test]
    fn a_gone_version_is_named_from_apts_text() {
        let text = "I: running apt-get update...\nE: Version '12.2.0-13' for 'gcc-12' was not found\n\
                    E: Version '4.3-4.0' for 'make' was not found\nE: apt-get install failed\n";
        let err = spec(&["gcc-12=12.2.0-13", "make=4.3-4.0"]).failure("exit status: 1", text).to_string();
        assert_eq!(
            err,
            "the archive http://m.invalid/debian has no gcc-12 version 12.2.0-13, make version 4.3-4.0 \
             (a lockfile pin the archive dropped: run `bootbench pack lock` to move the pack on)"
        );
    }

    #[test]
    fn a_missing_package_and_an_unknown_failure_are_told_apart() {
        let err = spec(&["gcc-99"]).failure("exit status: 1", "E: Unable to locate package gcc-99\n").to_string();
        assert_eq!(err, "the archive http://m.invalid/debian has no package gcc-99");
        let err = spec(&["make=1", "gcc"]).failure("exit status: 1", "a\nb\nE: network down\n").to_string();
        assert!(err.contains("with 1 pinned versions (any of them may be gone"), "{err}");
        assert!(err.ends_with("its output ends:\na\nb\nE: network down"), "{err}");
    }

    #[test]
    fn an_architecture_this_host_cannot_run_is_refused_before_the_install_naming_the_fix() {
        let with_arch = |arch: &str| BootstrapSpec { arch: arch.into(), ..spec(&[]) };
        // This host's own architecture needs no arch-test.
        with_arch(native_debian_arch().unwrap()).check_runs_programs().unwrap();
        let installed = Command::new(ARCH_TEST).arg("--help").output().is_ok();
        if !installed {
            // Without arch-test the check itself says so.
            let e = with_arch("s390x").check_runs_programs().unwrap_err().to_string();
            assert!(e.contains("arch-test s390x: cannot run it"), "{e}");
            return;
        }
        if std::path::Path::new("/proc/sys/fs/binfmt_misc/qemu-s390x").exists() {
            eprintln!("skipping the refusal half: this host runs s390x programs under qemu-user");
            return;
        }
        // mmdebstrap would fail halfway.
        let e = with_arch("s390x").check_runs_programs().unwrap_err().to_string();
        assert!(e.starts_with("this host cannot run s390x programs (arch-test s390x: "), "{e}");
        assert!(e.contains("not supported") && e.contains("binfmt_misc"), "{e}");
    }
}
