//! A test lab's certificates, made at run time: a CA and a server
//! certificate it signed for 127.0.0.1 and localhost (rcgen with ring).
//! Shared by the receiver's tests and the `serve_load` example.

use std::path::{Path, PathBuf};

/// The PEM files [`write`] makes.
pub struct TestPki {
    /// The CA's certificate (what `upload --ca-file` takes).
    pub ca: PathBuf,
    /// The server's certificate (`serve --tls-cert`).
    pub cert: PathBuf,
    /// The server's key (`serve --tls-key`).
    pub key: PathBuf,
}

/// Makes a CA and a server certificate and writes them as PEM in `dir`.
pub fn write(dir: &Path) -> TestPki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name.push(rcgen::DnType::CommonName, "bootbench test lab CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("CA key")).expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let mut server =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).expect("server parameters");
    server.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = server.signed_by(&key, &ca).expect("server certificate");
    let pki = TestPki { ca: dir.join("ca.pem"), cert: dir.join("server.pem"), key: dir.join("server.key") };
    std::fs::write(&pki.ca, ca.pem()).expect("write the CA");
    std::fs::write(&pki.cert, cert.pem()).expect("write the certificate");
    std::fs::write(&pki.key, key.serialize_pem()).expect("write the key");
    pki
}
