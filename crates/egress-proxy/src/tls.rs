//! Attaching credentials to HTTPS requests: for the hosts that have a
//! credential, and only those, the proxy ends the command's TLS with a
//! certificate from a certificate authority made at start-up (its key
//! exists only in this process's memory), opens its own TLS to the
//! upstream, verified against the system's trust store (or
//! `SSL_CERT_FILE`) and any extra roots, and adds the headers to the
//! request. Every other host is tunnelled untouched.
//!
//! One request per connection (the request gets `Connection: close`), so
//! every request on an intercepted connection carries the headers and no
//! request is parsed past its head.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Why the interceptor could not be made or could not serve a host.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Making a key or a certificate failed.
    #[error("cannot make a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused a configuration.
    #[error("cannot configure TLS: {0}")]
    Config(#[from] rustls::Error),
    /// No trusted root could be loaded, so no upstream could be verified.
    #[error("no trusted root certificate found (system store or SSL_CERT_FILE)")]
    NoRoots,
    /// A host name that cannot be a TLS server name.
    #[error("`{0}` is not a TLS server name")]
    ServerName(String),
}

/// The proxy's certificate authority and TLS settings.
pub struct Interceptor {
    ca_der: CertificateDer<'static>,
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
    /// Server settings per host, made on first use.
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
    upstream: TlsConnector,
}

impl std::fmt::Debug for Interceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the issuer: it holds the key.
        f.debug_struct("Interceptor").finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Interceptor {
    /// Makes a new authority, and trusts the system's roots (or
    /// `SSL_CERT_FILE`'s) plus `extra_roots` for upstreams.
    pub fn new(extra_roots: &[CertificateDer<'static>]) -> Result<Self, TlsError> {
        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        roots.add_parsable_certificates(extra_roots.iter().cloned());
        if roots.is_empty() {
            return Err(TlsError::NoRoots);
        }
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(
            DnType::CommonName,
            "agent-exec egress proxy (this server only)",
        );
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate()?;
        let ca = params.self_signed(&key)?;
        let mut upstream = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        upstream.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            ca_der: ca.der().clone(),
            ca_pem: ca.pem(),
            issuer: Issuer::new(params, key),
            leaves: Mutex::new(HashMap::new()),
            upstream: TlsConnector::from(Arc::new(upstream)),
        })
    }

    /// The authority's certificate, PEM: what commands trust (through
    /// `SSL_CERT_FILE`, `NODE_EXTRA_CA_CERTS` and the like).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The authority's certificate, DER.
    pub fn ca_der(&self) -> &CertificateDer<'static> {
        &self.ca_der
    }

    /// The acceptor that ends a command's TLS for `host`.
    pub(crate) fn acceptor(&self, host: &str) -> Result<TlsAcceptor, TlsError> {
        let mut leaves = self
            .leaves
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(config) = leaves.get(host) {
            return Ok(TlsAcceptor::from(Arc::clone(config)));
        }
        let mut params = CertificateParams::new(vec![host.to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate()?;
        let leaf = params.signed_by(&key, &self.issuer)?;
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), self.ca_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )?;
        // Only HTTP/1.1: the headers are added to a request head this
        // proxy reads, which HTTP/2 would frame differently.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        leaves.insert(host.to_owned(), Arc::clone(&config));
        Ok(TlsAcceptor::from(config))
    }

    /// The connector for upstreams, and `host` as its server name.
    pub(crate) fn connector(
        &self,
        host: &str,
    ) -> Result<(TlsConnector, ServerName<'static>), TlsError> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| TlsError::ServerName(host.to_owned()))?;
        Ok((self.upstream.clone(), name))
    }
}

/// `head` with every header named in `credentials` replaced by its value
/// and `Connection: close`.
pub(crate) fn with_credentials(head: &str, credentials: &[(String, String)]) -> String {
    let mut lines = head.lines();
    let mut out = String::with_capacity(head.len() + 128);
    if let Some(request_line) = lines.next() {
        out.push_str(request_line);
        out.push_str("\r\n");
    }
    for line in lines.filter(|line| !line.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        let replaced = credentials
            .iter()
            .any(|(header, _)| header.eq_ignore_ascii_case(name));
        let hop = ["connection", "keep-alive", "proxy-connection"]
            .iter()
            .any(|hop| hop.eq_ignore_ascii_case(name));
        if !replaced && !hop {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    for (header, value) in credentials {
        out.push_str(header);
        out.push_str(": ");
        out.push_str(value);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_replace_what_the_command_sent_and_close_the_connection() {
        let head = "GET /user HTTP/1.1\r\nHost: api.example\r\nauthorization: Bearer forged\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n";
        let out = with_credentials(head, &[("Authorization".into(), "Bearer real".into())]);
        assert_eq!(
            out,
            "GET /user HTTP/1.1\r\nHost: api.example\r\nAccept: */*\r\nAuthorization: Bearer real\r\nConnection: close\r\n\r\n"
        );
    }
}
