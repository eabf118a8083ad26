//! Which certificate authorities an https upload trusts: Mozilla's roots
//! compiled in (the guest, which has no store) or the system's store (a
//! host), and on top of either a lab's own CA given as PEM. Parsing and
//! checking that PEM, and the rustls configuration for the bundled roots,
//! are here; the system store is reqwest's platform verifier, which takes
//! the extra roots itself. No I/O: the PEM comes as bytes.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
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
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CaError {
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
