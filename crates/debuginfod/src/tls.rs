//! The certificate authorities HTTPS servers are checked against: the host's, as libcurl
//! (elfutils' client) uses them, so a company CA installed on the host works.

use std::fs;
use std::path::PathBuf;

use ureq::tls::{parse_pem, Certificate, PemItem, RootCerts};

/// The system CA bundles of the distributions (Debian/Ubuntu, Fedora/RHEL, openSUSE,
/// Alpine/Arch), in the order libcurl's and openssl-probe's lists try them.
const BUNDLES: [&str; 5] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// `$SSL_CERT_FILE`, else the first system bundle with certificates in it, else Mozilla's
/// roots built into the binary (a host without a CA bundle).
pub(crate) fn root_certs() -> RootCerts {
    let explicit = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    let candidates = explicit
        .into_iter()
        .chain(BUNDLES.iter().map(PathBuf::from));
    for path in candidates {
        let Ok(pem) = fs::read(&path) else { continue };
        let certs: Vec<Certificate<'static>> = parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(cert)) => Some(cert),
                _ => None,
            })
            .collect();
        if !certs.is_empty() {
            return RootCerts::new_with_certs(&certs);
        }
    }
    RootCerts::WebPki
}
