//! Credentials attached outside the command: an HTTPS upstream on loopback
//! with a certificate from a test authority checks the header; the command
//! trusts only the proxy's authority and never holds the value.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use egress_proxy::{Admission, ConnectionEvent, Gatekeeper, Interceptor, Proxy, Refusal, Target};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

const WITH_CREDENTIAL: &str = "api.test";
const WITHOUT: &str = "plain.test";
const SECRET: &str = "Bearer real-token-7f3a";

struct Gate;

#[async_trait::async_trait]
impl Gatekeeper for Gate {
    async fn admit(&self, _listener: u64, _target: &Target) -> Admission {
        Admission::Allow
    }
    fn resolve_override(&self, _host: &str) -> Option<IpAddr> {
        Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }
    fn check_address(&self, _target: &Target, _address: IpAddr) -> Result<(), Refusal> {
        Ok(())
    }
    fn record(&self, _event: ConnectionEvent) {}
    fn credentials(&self, target: &Target) -> Vec<(String, String)> {
        if target.host == WITH_CREDENTIAL {
            vec![("Authorization".into(), SECRET.into())]
        } else {
            Vec::new()
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A test authority and an HTTPS upstream whose certificate it signed for
/// both test names. The upstream answers `authorized` when the header is
/// the secret, `unauthorized` otherwise, and counts requests.
async fn upstream() -> (u16, CertificateDer<'static>, Arc<AtomicUsize>) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec![WITH_CREDENTIAL.into(), WITHOUT.into()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&requests);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                let Ok(mut stream) = acceptor.accept(stream).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let head = String::from_utf8_lossy(&head).to_string();
                let authorized = head
                    .lines()
                    .filter(|line| line.to_ascii_lowercase().starts_with("authorization:"))
                    .map(|line| line.split_once(':').unwrap().1.trim().to_owned())
                    .collect::<Vec<_>>()
                    == [SECRET];
                let body = if authorized {
                    "authorized"
                } else {
                    "unauthorized"
                };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (port, ca.der().clone(), requests)
}

async fn proxy(tls: Arc<Interceptor>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(
        Proxy::new(Arc::new(Gate))
            .with_interceptor(tls)
            .serve(listener, 1),
    );
    address
}

/// Opens a CONNECT tunnel; returns the stream and the proxy's answer head.
async fn tunnel(proxy: std::net::SocketAddr, host: &str, port: u16) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream
        .write_all(
            format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    (stream, String::from_utf8(head).unwrap())
}

/// A request over TLS trusting only `root`; the whole answer.
async fn request(
    stream: TcpStream,
    host: &str,
    root: &CertificateDer<'static>,
) -> std::io::Result<String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = TlsConnector::from(Arc::new(config));
    let mut tls = connector
        .connect(ServerName::try_from(host.to_owned()).unwrap(), stream)
        .await?;
    tls.write_all(
        format!("GET /user HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer forged\r\n\r\n")
            .as_bytes(),
    )
    .await?;
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(10), tls.read_to_string(&mut answer))
        .await
        .expect("answer in time")?;
    Ok(answer)
}

#[tokio::test]
async fn the_proxy_attaches_the_credential_the_command_never_holds() {
    let (port, upstream_root, requests) = upstream().await;
    let tls = Arc::new(Interceptor::new(&[upstream_root]).unwrap());
    let proxy = proxy(Arc::clone(&tls)).await;
    let (stream, head) = tunnel(proxy, WITH_CREDENTIAL, port).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The command trusts the proxy's authority, as SSL_CERT_FILE makes it.
    let answer = request(stream, WITH_CREDENTIAL, tls.ca_der())
        .await
        .unwrap();
    assert!(answer.ends_with("\r\n\r\nauthorized"), "{answer}");
    assert!(!answer.contains(SECRET));
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    assert!(tls.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
}

#[tokio::test]
async fn hosts_without_a_credential_are_tunnelled_untouched() {
    let (port, upstream_root, _) = upstream().await;
    let tls = Arc::new(Interceptor::new(std::slice::from_ref(&upstream_root)).unwrap());
    let proxy = proxy(Arc::clone(&tls)).await;
    // The upstream's own certificate reaches the command: trusting only the
    // proxy's authority fails, trusting the upstream's works, and nothing
    // was added to the request.
    let (stream, _) = tunnel(proxy, WITHOUT, port).await;
    assert!(request(stream, WITHOUT, tls.ca_der()).await.is_err());
    let (stream, _) = tunnel(proxy, WITHOUT, port).await;
    let answer = request(stream, WITHOUT, &upstream_root).await.unwrap();
    assert!(answer.ends_with("unauthorized"), "{answer}");
}

#[tokio::test]
async fn no_credential_goes_to_an_upstream_that_cannot_be_verified() {
    let (port, _, requests) = upstream().await;
    // The proxy does not trust the test authority: the upstream is unverified.
    let tls = Arc::new(Interceptor::new(&[]).unwrap());
    let proxy = proxy(tls).await;
    let (mut stream, head) = tunnel(proxy, WITH_CREDENTIAL, port).await;
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    let mut body = String::new();
    stream.read_to_string(&mut body).await.unwrap();
    assert!(body.contains("cannot verify the TLS certificate"), "{body}");
    assert!(body.contains("the credential was not sent"), "{body}");
    assert!(!body.contains(SECRET));
    assert_eq!(requests.load(Ordering::SeqCst), 0);
}
