//! The guest's secrets ([`loads::guest_secrets`]): the upload token and an
//! extra CA, from the segment the host appends to the initramfs. Read once
//! at start-up, before any workload (workloads run as root: file modes
//! would not keep them out), then the files and their directory are
//! removed, so only PID 1's memory holds them.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// What the segment held.
#[derive(Default, Clone, PartialEq)]
pub struct Secrets {
    /// The upload's bearer token (the file's first line, trimmed).
    pub upload_token: Option<String>,
    /// Extra certificate authorities for an https upload (PEM).
    pub upload_ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("upload_token", &self.upload_token.as_ref().map(|_| loads::suite::REDACTED))
            .field("upload_ca_pem_bytes", &self.upload_ca_pem.as_ref().map(Vec::len))
            .finish()
    }
}

/// Problems with the segment. None stops the run: the upload that needs
/// the secret reports what is missing.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// A file is there but cannot be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The token file's first line is empty or not printable ASCII.
    #[error("{path} holds no usable token (one line of printable ASCII without spaces)")]
    BadToken {
        /// The file.
        path: PathBuf,
    },
    /// A file or the directory cannot be removed after reading.
    #[error("cannot remove {path}: the secret stays readable by the workloads")]
    Remove {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Reads and removes the segment's files under `/`.
pub fn take() -> (Secrets, Vec<SecretsError>) {
    take_under(Path::new("/"))
}

/// [`take`] with the guest's paths taken under `root`.
fn take_under(root: &Path) -> (Secrets, Vec<SecretsError>) {
    let at = |p: &str| root.join(p.trim_start_matches('/'));
    let mut errors = Vec::new();
    let mut read = |path: PathBuf| -> Option<Vec<u8>> {
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == ErrorKind::NotFound => return None,
            Err(source) => {
                errors.push(SecretsError::Read { path, source });
                return None;
            }
        };
        if let Err(source) = std::fs::remove_file(&path) {
            errors.push(SecretsError::Remove { path, source });
        }
        Some(data)
    };
    let token_path = at(loads::guest_secrets::UPLOAD_TOKEN_FILE);
    let token = read(token_path.clone());
    let upload_ca_pem = read(at(loads::guest_secrets::UPLOAD_CA_FILE));
    let upload_token = token.and_then(|t| {
        let text = String::from_utf8_lossy(&t);
        let line = text.lines().next().unwrap_or_default().trim().to_string();
        if line.is_empty() || !line.bytes().all(|b| b.is_ascii_graphic()) {
            errors.push(SecretsError::BadToken { path: token_path });
            return None;
        }
        Some(line)
    });
    let dir = at(loads::guest_secrets::SECRETS_DIR);
    match std::fs::remove_dir(&dir) {
        Err(e) if e.kind() != ErrorKind::NotFound => errors.push(SecretsError::Remove { path: dir, source: e }),
        _ => {}
    }
    (Secrets { upload_token, upload_ca_pem }, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_segment_is_read_once_and_removed() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("bootbench-secrets");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("upload-token"), "abcdefghijklmnopq\n").unwrap();
        std::fs::write(dir.join("upload-ca.pem"), "-----BEGIN CERTIFICATE-----\n").unwrap();
        let (s, errors) = take_under(root.path());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.upload_token.as_deref(), Some("abcdefghijklmnopq"));
        assert_eq!(s.upload_ca_pem.as_deref(), Some(&b"-----BEGIN CERTIFICATE-----\n"[..]));
        assert!(!dir.exists(), "the secrets must not stay for the workloads");
        assert!(!format!("{s:?}").contains("abcdefghijklmnopq"));
        // A second read finds nothing: the files are gone.
        let (again, errors) = take_under(root.path());
        assert_eq!(again, Secrets::default());
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn a_bad_token_file_is_an_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("bootbench-secrets");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("upload-token"), "two words\n").unwrap();
        let (s, errors) = take_under(root.path());
        assert_eq!(s.upload_token, None);
        let text = errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ");
        assert!(text.contains("upload-token") && text.contains("no usable token"), "{text}");
        assert!(!dir.join("upload-token").exists());
    }
}
