//! A TLS front for a plain-HTTP server (the mock LLM): it listens on 127.0.0.1, terminates TLS
//! with a certificate for `localhost` and `127.0.0.1` issued by a test CA made when it starts
//! (rcgen), and copies the bytes both ways to the server's port. A client trusts it only when
//! given the CA's PEM (e.g. through `SSL_CERT_FILE`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context as _;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, pki_types};

/// A running front; stops when dropped.
#[derive(Debug)]
pub struct TlsFront {
    addr: SocketAddr,
    ca_pem: String,
    handshakes: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TlsFront {
    /// Makes a CA and a server certificate, binds an ephemeral port on 127.0.0.1 and serves on a
    /// thread of its own, forwarding every connection to `backend`.
    pub fn start(backend: SocketAddr) -> anyhow::Result<TlsFront> {
        let ca_key = rcgen::KeyPair::generate()?;
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "acp-usage tests CA");
        ca_params.key_usages =
            vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key)?;

        let server_key = rcgen::KeyPair::generate()?;
        let mut server_params =
            rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        server_params.distinguished_name.push(rcgen::DnType::CommonName, "localhost");
        server_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = server_params.signed_by(&server_key, &ca)?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![server_cert.der().clone(), ca.der().clone()],
                pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
            )
            .context("the front's certificate")?;
        let acceptor = TlsAcceptor::from(Arc::new(config));

        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let handshakes = Arc::new(AtomicUsize::new(0));
        let counter = handshakes.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let thread = std::thread::Builder::new().name("tls-front".into()).spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                let serve = async {
                    while let Ok((stream, _)) = listener.accept().await {
                        let acceptor = acceptor.clone();
                        let counter = counter.clone();
                        tokio::spawn(async move {
                            let Ok(mut tls) = acceptor.accept(stream).await else { return };
                            counter.fetch_add(1, Ordering::SeqCst);
                            let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await
                            else {
                                return;
                            };
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                        });
                    }
                };
                tokio::select! {
                    () = serve => {}
                    _ = stopped => {}
                }
            });
        })?;
        Ok(TlsFront { addr, ca_pem: ca.pem(), handshakes, stop: Some(stop), thread: Some(thread) })
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The test CA's certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// TLS handshakes completed so far.
    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::SeqCst)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
