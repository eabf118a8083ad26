//! The secrets segment: a small cpio archive with the upload token (and a
//! lab's CA), appended to the image a boot uses ([`loads::guest_secrets`]
//! says where the guest finds it). The image `bootbench run` built keeps
//! its hash, and nothing secret goes on the kernel cmdline, where QEMU's
//! argv shows it to every local user and `/proc/cmdline` to every process
//! of the guest. The combined file lives in the run's private scratch
//! directory with mode 0600 and goes away with it.

use image::{Compression, Initramfs};
use loads::guest_secrets::{SECRETS_DIR, UPLOAD_CA_FILE, UPLOAD_TOKEN_FILE};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What the guest is given.
#[derive(Clone, PartialEq, Eq)]
pub struct GuestSecrets {
    /// The upload's bearer token.
    pub upload_token: String,
    /// Extra certificate authorities (PEM) for an https upload.
    pub upload_ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for GuestSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestSecrets")
            .field("upload_token", &loads::suite::REDACTED)
            .field("upload_ca_pem_bytes", &self.upload_ca_pem.as_ref().map(Vec::len))
            .finish()
    }
}

/// Errors making the segment or the combined image.
#[derive(Debug, thiserror::Error)]
pub enum SecretsSegmentError {
    /// The archive cannot be made.
    #[error("cannot make the secrets segment")]
    Archive(#[source] image::ImageError),
    /// The image to append to cannot be read.
    #[error("cannot read the image {path}")]
    ReadImage {
        /// The image.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The combined image cannot be written.
    #[error("cannot write the image with its secrets segment {path}")]
    Write {
        /// The combined image.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Strips the leading `/` of a guest path, as archive paths are written.
fn archive_path(guest: &str) -> &str {
    guest.trim_start_matches('/')
}

/// The segment: an uncompressed newc archive (every kernel unpacks one)
/// with the directory (0700) and its files (0600).
pub fn segment(secrets: &GuestSecrets) -> Result<Vec<u8>, SecretsSegmentError> {
    let mut fs = Initramfs::new();
    fs.add_dir(archive_path(SECRETS_DIR), 0o700).map_err(SecretsSegmentError::Archive)?;
    fs.add_file(archive_path(UPLOAD_TOKEN_FILE), 0o600, format!("{}\n", secrets.upload_token).into_bytes())
        .map_err(SecretsSegmentError::Archive)?;
    if let Some(pem) = &secrets.upload_ca_pem {
        fs.add_file(archive_path(UPLOAD_CA_FILE), 0o600, pem.clone()).map_err(SecretsSegmentError::Archive)?;
    }
    fs.to_bytes(Compression::None).map_err(SecretsSegmentError::Archive)
}

/// Writes `main` followed by `segment` to the new file `out` (mode 0600).
/// The kernel looks for the next archive of an initramfs at a 4-byte
/// boundary of the whole: zero bytes pad `main` to one (a compressed
/// image's length is any number).
pub fn write_with_segment(main: &Path, segment: &[u8], out: &Path) -> Result<(), SecretsSegmentError> {
    let image =
        std::fs::read(main).map_err(|source| SecretsSegmentError::ReadImage { path: main.to_path_buf(), source })?;
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(out)?;
        f.write_all(&image)?;
        f.write_all(&[0u8; 3][..(4 - image.len() % 4) % 4])?;
        f.write_all(segment)?;
        f.sync_all()
    };
    write().map_err(|source| SecretsSegmentError::Write { path: out.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The entries of every newc archive in `data`, one after the other
    /// (zero padding between them skipped, as the kernel does), with their
    /// modes and contents.
    fn entries(mut data: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
        let mut all = Vec::new();
        while !data.is_empty() {
            if data[0] == 0 {
                data = &data[1..];
                continue;
            }
            loop {
                let mut r = cpio::NewcReader::new(data).unwrap();
                let (name, mode) = (r.entry().name().to_string(), r.entry().mode());
                let mut content = Vec::new();
                std::io::Read::read_to_end(&mut r, &mut content).unwrap();
                let rest = r.finish().unwrap();
                data = rest;
                if name == "TRAILER!!!" {
                    break;
                }
                all.push((name, mode & 0o7777, content));
            }
        }
        all
    }

    #[test]
    fn the_segment_follows_the_image_at_a_4_byte_boundary_and_holds_only_the_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let mut main = Initramfs::new();
        main.add_file("init", 0o755, b"#!init".to_vec()).unwrap();
        let main_path = dir.path().join("main.cpio");
        // An odd length, as a compressed image may have.
        let mut bytes = main.to_bytes(Compression::None).unwrap();
        bytes.extend_from_slice(&[0; 3]);
        assert_ne!(bytes.len() % 4, 0);
        std::fs::write(&main_path, &bytes).unwrap();
        let secrets =
            GuestSecrets { upload_token: "tok-0123456789abcdef".into(), upload_ca_pem: Some(b"PEM\n".to_vec()) };
        let seg = segment(&secrets).unwrap();
        let out = dir.path().join("with-secrets.cpio");
        write_with_segment(&main_path, &seg, &out).unwrap();
        let combined = std::fs::read(&out).unwrap();
        assert_eq!(&combined[..bytes.len()], &bytes[..], "the image itself is unchanged");
        let at = combined.len() - seg.len();
        assert_eq!(at % 4, 0, "the segment must start at a 4-byte boundary");
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
        let got = entries(&combined);
        assert_eq!(
            got,
            vec![
                ("init".to_string(), 0o755, b"#!init".to_vec()),
                ("bootbench-secrets".to_string(), 0o700, vec![]),
                ("bootbench-secrets/upload-ca.pem".to_string(), 0o600, b"PEM\n".to_vec()),
                ("bootbench-secrets/upload-token".to_string(), 0o600, b"tok-0123456789abcdef\n".to_vec()),
            ]
        );
        assert!(!format!("{secrets:?}").contains("tok-0123"));
        // Never over an existing file.
        assert!(write_with_segment(&main_path, &seg, &out).is_err());
    }
}
