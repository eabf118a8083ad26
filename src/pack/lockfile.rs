//! The pack's lockfile: the Debian suite and architecture, the
//! `SOURCE_DATE_EPOCH` the pack is built with, and every installed package
//! with its exact version. It parses, formats and compares; it never runs a
//! build.
//!
//! The text format, one `key value...` record a line, `#` comments:
//! ```text
//! suite bookworm
//! arch amd64
//! source-date-epoch 1764633600
//! package base-files 12.4+deb12u12
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A lockfile that cannot be read or parsed, or a built root that differs
/// from it.
#[derive(Debug, thiserror::Error)]
pub enum LockfileError {
    /// The file could not be read.
    #[error("cannot read the lockfile {path}")]
    Read {
        /// The lockfile.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file could not be written.
    #[error("cannot write the lockfile {path}")]
    Write {
        /// The lockfile.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line that is not a known record with the right number of fields.
    #[error("{origin}:{line}: {why}: `{text}`")]
    Malformed {
        /// The lockfile (or `<text>`).
        origin: String,
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// A package listed twice.
    #[error("{origin}:{line}: package {package} is listed twice (first at line {first})")]
    DuplicatePackage {
        /// The lockfile (or `<text>`).
        origin: String,
        /// The line of the second entry.
        line: usize,
        /// The line of the first entry.
        first: usize,
        /// The package.
        package: String,
    },
    /// A required record is absent.
    #[error("{origin}: no `{key}` line")]
    Missing {
        /// The lockfile (or `<text>`).
        origin: String,
        /// The record's key.
        key: &'static str,
    },
    /// The built root's packages differ from the lockfile's.
    #[error("the built root does not match the lockfile: {}", differences_text(.0))]
    Mismatch(Vec<Difference>),
}

/// One way a built root differs from the lockfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// Installed at another version than the lockfile pins.
    Version {
        /// The package.
        package: String,
        /// The lockfile's version.
        locked: String,
        /// The installed version.
        installed: String,
    },
    /// Pinned by the lockfile, not installed.
    NotInstalled {
        /// The package.
        package: String,
        /// The lockfile's version.
        locked: String,
    },
    /// Installed, not in the lockfile.
    NotLocked {
        /// The package.
        package: String,
        /// The installed version.
        installed: String,
    },
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::Version { package, locked, installed } => {
                write!(f, "{package}: the lockfile pins {locked}, the build installed {installed}")
            }
            Difference::NotInstalled { package, locked } => {
                write!(f, "{package}: the lockfile pins {locked}, the build did not install it")
            }
            Difference::NotLocked { package, installed } => {
                write!(f, "{package}: the build installed {installed}, the lockfile does not list it")
            }
        }
    }
}

fn differences_text(differences: &[Difference]) -> String {
    differences.iter().map(Difference::to_string).collect::<Vec<_>>().join("; ")
}

/// A parsed lockfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lockfile {
    /// The Debian suite, e.g. `bookworm`.
    pub suite: String,
    /// The Debian architecture, e.g. `amd64`.
    pub arch: String,
    /// The `SOURCE_DATE_EPOCH` of every build from this lockfile (seconds).
    pub source_date_epoch: u64,
    /// Every installed package and its exact version, by name.
    pub packages: BTreeMap<String, String>,
}

impl Lockfile {
    /// Reads and parses the lockfile at `path`.
    pub fn read(path: &Path) -> Result<Lockfile, LockfileError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| LockfileError::Read { path: path.to_path_buf(), source })?;
        Lockfile::parse(&text, &path.display().to_string())
    }

    /// Writes the lockfile to `path` (replacing it in one rename).
    pub fn write(&self, path: &Path) -> Result<(), LockfileError> {
        let err = |source| LockfileError::Write { path: path.to_path_buf(), source };
        let tmp = path.with_extension("lock.new");
        std::fs::write(&tmp, self.format()).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }

    /// Parses lockfile text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Lockfile, LockfileError> {
        let mut suite = None;
        let mut arch = None;
        let mut epoch = None;
        let mut packages = BTreeMap::new();
        let mut first_line: BTreeMap<String, usize> = BTreeMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let malformed = |why: &str| LockfileError::Malformed {
                origin: origin.to_string(),
                line,
                text: raw.to_string(),
                why: why.to_string(),
            };
            let fields: Vec<&str> = content.split_whitespace().collect();
            match fields.as_slice() {
                ["suite", value] => suite = Some(value.to_string()),
                ["arch", value] => arch = Some(value.to_string()),
                ["source-date-epoch", value] => {
                    epoch = Some(value.parse::<u64>().map_err(|_| malformed("the epoch is not a number of seconds"))?)
                }
                ["package", name, version] => {
                    if !is_package_name(name) {
                        return Err(malformed("not a Debian package name"));
                    }
                    if let Some(first) = first_line.get(*name) {
                        return Err(LockfileError::DuplicatePackage {
                            origin: origin.to_string(),
                            line,
                            first: *first,
                            package: name.to_string(),
                        });
                    }
                    first_line.insert(name.to_string(), line);
                    packages.insert(name.to_string(), version.to_string());
                }
                ["suite" | "arch" | "source-date-epoch", ..] => return Err(malformed("expected one value")),
                ["package", ..] => return Err(malformed("expected `package NAME VERSION`")),
                _ => return Err(malformed("unknown record (expected suite, arch, source-date-epoch or package)")),
            }
        }
        let missing = |key| LockfileError::Missing { origin: origin.to_string(), key };
        Ok(Lockfile {
            suite: suite.ok_or_else(|| missing("suite"))?,
            arch: arch.ok_or_else(|| missing("arch"))?,
            source_date_epoch: epoch.ok_or_else(|| missing("source-date-epoch"))?,
            packages,
        })
    }

    /// The lockfile's text, packages sorted by name.
    pub fn format(&self) -> String {
        let mut out = String::from(
            "# The userland pack's lockfile, written by `bootbench pack lock`; \
             `bootbench pack build` installs exactly these versions.\n",
        );
        let _ = writeln!(out, "suite {}", self.suite);
        let _ = writeln!(out, "arch {}", self.arch);
        let _ = writeln!(out, "source-date-epoch {}", self.source_date_epoch);
        for (name, version) in &self.packages {
            let _ = writeln!(out, "package {name} {version}");
        }
        out
    }

    /// The apt pins of every package: `name=version`.
    pub fn pins(&self) -> Vec<String> {
        self.packages.iter().map(|(name, version)| format!("{name}={version}")).collect()
    }

    /// Checks that `installed` (name to version) is exactly the locked set;
    /// every difference otherwise.
    pub fn check_installed(&self, installed: &BTreeMap<String, String>) -> Result<(), LockfileError> {
        let mut differences = Vec::new();
        for (package, locked) in &self.packages {
            match installed.get(package) {
                Some(version) if version == locked => {}
                Some(version) => differences.push(Difference::Version {
                    package: package.clone(),
                    locked: locked.clone(),
                    installed: version.clone(),
                }),
                None => differences.push(Difference::NotInstalled { package: package.clone(), locked: locked.clone() }),
            }
        }
        for (package, version) in installed {
            if !self.packages.contains_key(package) {
                differences.push(Difference::NotLocked { package: package.clone(), installed: version.clone() });
            }
        }
        if differences.is_empty() {
            Ok(())
        } else {
            Err(LockfileError::Mismatch(differences))
        }
    }
}

/// Debian policy 5.6.1: lowercase letters, digits, `+`, `-` and `.`, at
/// least two characters, starting with a letter or digit.
fn is_package_name(name: &str) -> bool {
    name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# comment\nsuite bookworm\narch amd64\nsource-date-epoch 1764633600\n\
                        package make 4.3-4.1\npackage gcc-12 12.2.0-14  # trailing comment\n";

    fn sample() -> Lockfile {
        Lockfile::parse(TEXT, "test.lock").unwrap()
    }

    #[test]
    fn parses_and_formats_round_trip() {
        let lock = sample();
        assert_eq!(lock.suite, "bookworm");
        assert_eq!(lock.arch, "amd64");
        assert_eq!(lock.source_date_epoch, 1_764_633_600);
        assert_eq!(lock.packages.get("gcc-12").map(String::as_str), Some("12.2.0-14"));
        assert_eq!(lock.pins(), ["gcc-12=12.2.0-14", "make=4.3-4.1"]);
        let text = lock.format();
        assert!(text.contains("package gcc-12 12.2.0-14\npackage make 4.3-4.1\n"), "{text}");
        assert_eq!(Lockfile::parse(&text, "again").unwrap(), lock);
    }

    #[test]
    fn a_malformed_line_names_the_file_line_and_problem() {
        let text = "suite bookworm\narch amd64\nsource-date-epoch 1\npackage make\n";
        let err = Lockfile::parse(text, "x86_64.lock").unwrap_err().to_string();
        assert_eq!(err, "x86_64.lock:4: expected `package NAME VERSION`: `package make`");
        let err = Lockfile::parse("suite bookworm\nflavour x\n", "f").unwrap_err().to_string();
        assert!(err.starts_with("f:2: unknown record"), "{err}");
        let err = Lockfile::parse("source-date-epoch soon\n", "f").unwrap_err().to_string();
        assert!(err.starts_with("f:1: the epoch is not a number"), "{err}");
        let err = Lockfile::parse("package Make 1\n", "f").unwrap_err().to_string();
        assert!(err.starts_with("f:1: not a Debian package name"), "{err}");
    }

    #[test]
    fn a_duplicate_package_is_refused_with_both_lines() {
        let text = format!("{TEXT}package make 4.3-4.2\n");
        let err = Lockfile::parse(&text, "x.lock").unwrap_err().to_string();
        assert_eq!(err, "x.lock:7: package make is listed twice (first at line 5)");
    }

    #[test]
    fn a_missing_header_is_named() {
        let err = Lockfile::parse("suite bookworm\nsource-date-epoch 1\n", "x.lock").unwrap_err().to_string();
        assert_eq!(err, "x.lock: no `arch` line");
    }

    #[test]
    fn a_mismatch_names_each_package_and_both_versions() {
        let lock = sample();
        let same: BTreeMap<String, String> = lock.packages.clone();
        lock.check_installed(&same).unwrap();
        let mut moved = same.clone();
        moved.insert("make".into(), "4.3-4.2".into());
        moved.remove("gcc-12");
        moved.insert("perl-base".into(), "5.36.0-7".into());
        let err = lock.check_installed(&moved).unwrap_err().to_string();
        assert_eq!(
            err,
            "the built root does not match the lockfile: \
             gcc-12: the lockfile pins 12.2.0-14, the build did not install it; \
             make: the lockfile pins 4.3-4.1, the build installed 4.3-4.2; \
             perl-base: the build installed 5.36.0-7, the lockfile does not list it"
        );
    }
}
