//! Whether the tap's HTTPS client will have roots it can trust, told before the agent is pointed
//! at the tap.
//!
//! The client itself (`http::Upstream`) is made when the first request comes: reading the
//! system's root certificates takes 5 ms, which would otherwise be on every tapped agent's
//! start. But a
//! client that cannot be made must leave the agent untapped, as if acp-usage were not there,
//! and that is known only once the certificates are read. The one way the client fails to be
//! made is a store with certificates and not one valid among them (reqwest's rule for
//! `tls_built_in_native_certs`), which only a user's own `SSL_CERT_FILE` or `SSL_CERT_DIR` makes
//! likely: this reads those lazily and stops at the first certificate that parses, so a usable
//! store costs the read of its first certificate. The system's own store is taken as usable.

use std::path::{Path, PathBuf};

use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;

/// `Err` (why) when the HTTPS client would have no roots: the certificates `SSL_CERT_FILE` and
/// `SSL_CERT_DIR` name, when either is set, hold some and not one valid.
pub fn check() -> Result<(), String> {
    let file = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    let dirs: Vec<PathBuf> = std::env::var_os("SSL_CERT_DIR")
        .map(|d| std::env::split_paths(&d).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default();
    check_paths(file.as_deref(), &dirs)
}

/// [`check`] on these paths; no path at all is the system's store, taken as usable.
fn check_paths(file: Option<&Path>, dirs: &[PathBuf]) -> Result<(), String> {
    if file.is_none() && dirs.is_empty() {
        return Ok(());
    }
    let dir_files = dirs.iter().flat_map(|dir| {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        files
    });
    let mut invalid = 0usize;
    for path in file.map(Path::to_path_buf).into_iter().chain(dir_files) {
        // Read as it is parsed: the first certificate of a system bundle (220 KB here) is in
        // its first few kilobytes, and reading all of it took 0.2 ms of each tapped start.
        let Ok(file) = std::fs::File::open(&path) else { continue };
        for cert in CertificateDer::pem_reader_iter(file).flatten() {
            if RootCertStore::empty().add(cert).is_ok() {
                return Ok(());
            }
            invalid += 1;
        }
    }
    if invalid == 0 {
        // No certificate at all: the client is made (and HTTPS upstreams fail), as without
        // acp-usage's check.
        return Ok(());
    }
    Err(format!(
        "not one of the {invalid} root certificates SSL_CERT_FILE/SSL_CERT_DIR name is valid"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOGUS: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("acp-usage-roots-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A valid root, when the machine has a store to take one from.
    fn a_valid_root() -> Option<String> {
        let certs = rustls_native_certs::load_native_certs().certs;
        let cert = certs.into_iter().find(|c| RootCertStore::empty().add(c.clone()).is_ok())?;
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
        Some(format!("-----BEGIN CERTIFICATE-----\n{b64}\n-----END CERTIFICATE-----\n"))
    }

    #[test]
    fn a_store_of_invalid_certificates_only_is_refused() {
        let dir = scratch("bogus");
        let file = dir.join("bogus.pem");
        std::fs::write(&file, BOGUS.repeat(2)).unwrap();
        let err = check_paths(Some(&file), &[]).expect_err("nothing valid");
        assert!(err.contains("2 root certificates"), "{err}");
        // A directory of the same.
        assert!(check_paths(None, std::slice::from_ref(&dir)).is_err());
    }

    #[test]
    fn no_store_named_or_nothing_in_it_is_let_through() {
        assert_eq!(check_paths(None, &[]), Ok(()));
        let dir = scratch("empty");
        let file = dir.join("empty.pem");
        std::fs::write(&file, "no certificates here\n").unwrap();
        assert_eq!(check_paths(Some(&file), &[dir]), Ok(()));
    }

    #[test]
    fn one_valid_certificate_among_invalid_ones_is_enough() {
        let Some(valid) = a_valid_root() else {
            // No system store to take a real root from: nothing to build the case with.
            return;
        };
        let dir = scratch("mixed");
        let file = dir.join("mixed.pem");
        std::fs::write(&file, format!("{BOGUS}{valid}")).unwrap();
        assert_eq!(check_paths(Some(&file), &[]), Ok(()));
        // The valid one in the directory, the file all bogus.
        let bogus = dir.join("bogus.pem");
        std::fs::write(&bogus, BOGUS).unwrap();
        let certs = scratch("mixed-dir");
        std::fs::write(certs.join("valid.pem"), valid).unwrap();
        assert_eq!(check_paths(Some(&bogus), &[certs]), Ok(()));
    }
}
