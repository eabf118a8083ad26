//! Which certificate authorities an https upload trusts: Mozilla's roots
//! compiled in (the guest, which has no store) or the system's store (a
//! host), and on top of either a lab's own CA given as PEM. Parsing and
//! checking that PEM (from bytes, or from a CA file a host names), and the
//! rustls configuration for the bundled roots, are here; the system store
//! is reqwest's platform verifier, which takes the extra roots itself.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which certificate authorities https uploads trust (besides
/// [`crate::UploadSettings::extra_ca_pem`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsRoots {
    /// Mozilla's roots compiled in (webpki-roots): the guest has no
    /// certificate store.
    Bundled,
    /// The operating system's store (a host).
    System,
}

/// Errors in extra CA certificates.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The CA file cannot be read.
    #[error("cannot read the CA file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The CA file's PEM cannot be used.
    #[error("the CA file {} cannot be used", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with its PEM.
        #[source]
        source: Box<CaError>,
    },
    /// A PEM block is malformed.
    #[error("the extra CA certificates are not valid PEM: {detail}")]
    Pem {
        /// The PEM reader's complaint.
        detail: String,
    },
    /// No `CERTIFICATE` block at all.
    #[error("the extra CA PEM holds no certificate (expected '-----BEGIN CERTIFICATE-----' blocks)")]
    NoCertificate,
    /// A certificate that cannot be a trust anchor (not X.509 DER).
    #[error("extra CA certificate number {number} cannot be a trust anchor")]
    Anchor {
        /// 1-based, in the PEM's order.
        number: usize,
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
}

/// The certificates in `pem` (other blocks, such as keys, are skipped),
/// each checked to be usable as a trust anchor.
///
/// ```
/// let e = results_uploader::parse_ca_pem(b"not PEM").unwrap_err();
/// assert!(e.to_string().contains("holds no certificate"));
/// ```
pub fn parse_ca_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, CaError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CaError::Pem { detail: e.to_string() })?;
    if certs.is_empty() {
        return Err(CaError::NoCertificate);
    }
    for (i, cert) in certs.iter().enumerate() {
        rustls::RootCertStore::empty().add(cert.clone()).map_err(|source| CaError::Anchor { number: i + 1, source })?;
    }
    Ok(certs)
}

/// The bytes of the CA file at `path`, checked with [`parse_ca_pem`]: what
/// [`crate::UploadSettings::extra_ca_pem`] takes.
pub fn read_ca_file(path: &Path) -> Result<Vec<u8>, CaError> {
    let pem = std::fs::read(path).map_err(|source| CaError::Read { path: path.to_path_buf(), source })?;
    parse_ca_pem(&pem).map_err(|e| CaError::File { path: path.to_path_buf(), source: Box::new(e) })?;
    Ok(pem)
}

/// rustls's client configuration for the bundled roots plus `extra`.
pub(crate) fn bundled_config(extra: &[CertificateDer<'static>]) -> Result<rustls::ClientConfig, rustls::Error> {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    for cert in extra {
        roots.add(cert.clone())?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_that_is_missing_or_holds_no_certificate_is_named_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("tls-roots-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let e = read_ca_file(&missing).unwrap_err();
        assert!(matches!(e, CaError::Read { .. }), "{e:?}");
        assert!(e.to_string().contains(&missing.display().to_string()), "{e}");

        let key_only = dir.join("key.pem");
        std::fs::write(&key_only, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").unwrap();
        let e = read_ca_file(&key_only).unwrap_err();
        assert!(e.to_string().contains(&key_only.display().to_string()), "{e}");
        let reason = std::error::Error::source(&e).map(ToString::to_string).unwrap_or_default();
        assert!(reason.contains("holds no certificate"), "{reason}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
