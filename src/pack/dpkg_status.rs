//! The installed packages of a built root, read from its
//! `var/lib/dpkg/status`: what the lockfile records and what a pinned build
//! is checked against. It only reads the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where dpkg keeps its database, relative to a root.
pub const STATUS_PATH: &str = "var/lib/dpkg/status";

/// A status file that cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum DpkgStatusError {
    /// The file could not be read.
    #[error("cannot read dpkg's status file {path}")]
    Read {
        /// The status file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A record without a field every installed package has.
    #[error("{path}: the record of package {package} has no {field} field")]
    MissingField {
        /// The status file.
        path: PathBuf,
        /// The package (`?` when the Package field itself is missing).
        package: String,
        /// The field.
        field: &'static str,
    },
    /// The same package installed twice (a second architecture).
    #[error("{path}: package {package} is installed twice ({first} and {second}); a pack has one architecture")]
    Duplicate {
        /// The status file.
        path: PathBuf,
        /// The package.
        package: String,
        /// One version.
        first: String,
        /// The other.
        second: String,
    },
}

/// The installed packages (name to version) of the root at `root`.
pub fn installed_packages(root: &Path) -> Result<BTreeMap<String, String>, DpkgStatusError> {
    let path = root.join(STATUS_PATH);
    let text = std::fs::read_to_string(&path).map_err(|source| DpkgStatusError::Read { path: path.clone(), source })?;
    parse_installed(&text, &path)
}

/// The packages whose Status is `install ok installed` in status text;
/// `path` names it in errors.
pub fn parse_installed(text: &str, path: &Path) -> Result<BTreeMap<String, String>, DpkgStatusError> {
    let mut packages = BTreeMap::new();
    for stanza in text.split("\n\n").filter(|s| !s.trim().is_empty()) {
        let field = |name: &str| {
            stanza.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (!line.starts_with([' ', '\t']) && key.eq_ignore_ascii_case(name)).then(|| value.trim().to_string())
            })
        };
        let missing = |package: &str, field| DpkgStatusError::MissingField {
            path: path.to_path_buf(),
            package: package.to_string(),
            field,
        };
        let package = field("Package").ok_or_else(|| missing("?", "Package"))?;
        let status = field("Status").ok_or_else(|| missing(&package, "Status"))?;
        if status != "install ok installed" {
            continue;
        }
        let version = field("Version").ok_or_else(|| missing(&package, "Version"))?;
        if let Some(first) = packages.insert(package.clone(), version.clone()) {
            return Err(DpkgStatusError::Duplicate { path: path.to_path_buf(), package, first, second: version });
        }
    }
    Ok(packages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_installed_packages_only() {
        let text = "Package: make\nStatus: install ok installed\nPriority: optional\nVersion: 4.3-4.1\n\
                    Description: a\n long: text\n\n\
                    Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n\n\
                    Package: gcc-12\nStatus: install ok installed\nVersion: 12.2.0-14\n";
        let got = parse_installed(text, Path::new("s")).unwrap();
        let want: BTreeMap<String, String> =
            [("gcc-12", "12.2.0-14"), ("make", "4.3-4.1")].map(|(a, b)| (a.to_string(), b.to_string())).into();
        assert_eq!(got, want);
    }

    #[test]
    fn a_record_without_version_is_named() {
        let text = "Package: make\nStatus: install ok installed\n";
        let err = parse_installed(text, Path::new("root/status")).unwrap_err().to_string();
        assert_eq!(err, "root/status: the record of package make has no Version field");
    }
}
