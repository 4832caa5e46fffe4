//! The egress proxy: a contained command's only way out under
//! `--network proxy`. It speaks HTTP (`CONNECT` tunnels and plain
//! absolute-form requests) and SOCKS5 on the same listener, resolves names
//! itself (a command has no resolver of its own), and asks a
//! [`Gatekeeper`] about every connection: the host and port before
//! anything is resolved, then each address a name resolved to. A refused
//! connection gets an answer that says what refused it and how to allow it
//! (an HTTP 403 body, or a SOCKS5 "not allowed by ruleset" reply), and every
//! decision is reported to the gatekeeper as a [`ConnectionEvent`] with the
//! bytes that crossed.
//!
//! The crate is mechanism only: the rules live with the caller (exec-tools
//! adapts `exec_policy::NetworkRules`), so it knows nothing of policy
//! files, approvals or the audit log.

mod http;
mod socks;
mod tls;

pub use tls::{Interceptor, TlsError};

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream};

/// How long a connection to an upstream may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Where a command asked to go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// A name in lower case, or an address (IPv6 without brackets).
    pub host: String,
    /// The port.
    pub port: u16,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Why a connection was refused, in words the command's output and the
/// answer can carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What refused it, such as `not in [network] allow`.
    pub reason: String,
    /// How to allow it, such as `add "x" to [network] allow`.
    pub remedy: String,
}

/// A gatekeeper's answer about a host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Go on (each resolved address is still checked).
    Allow,
    /// Refuse.
    Refuse(Refusal),
}

/// Which protocol a connection used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// An HTTP `CONNECT` tunnel.
    Connect,
    /// A plain HTTP request in absolute form.
    Http,
    /// A SOCKS5 `CONNECT`.
    Socks5,
}

impl Protocol {
    /// The name the audit log uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Http => "http",
            Self::Socks5 => "socks5",
        }
    }
}

/// What became of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It was let through and has ended.
    Closed {
        /// Bytes from the command to the upstream.
        sent: u64,
        /// Bytes from the upstream to the command.
        received: u64,
    },
    /// It was refused by the gatekeeper.
    Refused(Refusal),
    /// It was allowed but the upstream could not be reached.
    Failed {
        /// Why, such as `cannot resolve pkg.example`.
        error: String,
    },
}

/// One decision, for the audit log and the command's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionEvent {
    /// The listener's tag: which command's namespace the connection came from.
    pub listener: u64,
    /// The protocol.
    pub protocol: Protocol,
    /// Where it asked to go.
    pub target: Target,
    /// What became of it.
    pub outcome: Outcome,
    /// Whether the proxy attached a credential to it.
    pub credential: bool,
}

impl ConnectionEvent {
    /// An event for a connection through listener `tag` with no credential attached.
    pub(crate) fn new(tag: u64, protocol: Protocol, target: Target, outcome: Outcome) -> Self {
        Self {
            listener: tag,
            protocol,
            target,
            outcome,
            credential: false,
        }
    }
}

/// The rules the proxy applies, supplied by its owner.
#[async_trait::async_trait]
pub trait Gatekeeper: Send + Sync + 'static {
    /// Whether a command may connect to `target`, before anything is
    /// resolved; `listener` is the tag of the listener it came through.
    /// May wait (a person being asked).
    async fn admit(&self, listener: u64, target: &Target) -> Admission;

    /// The address to use for `host` instead of asking DNS (a mirror or a
    /// test name), if any.
    fn resolve_override(&self, host: &str) -> Option<IpAddr>;

    /// Whether `address`, which `target`'s host resolved to (or is), may be
    /// connected to.
    fn check_address(&self, target: &Target, address: IpAddr) -> Result<(), Refusal>;

    /// Takes note of a decision and what crossed.
    fn record(&self, event: ConnectionEvent);

    /// Headers (name, value) to add to HTTPS requests for `target`: when
    /// there are any, and the proxy has an [`Interceptor`], the tunnel is
    /// ended here and re-opened to the verified upstream. None by default.
    fn credentials(&self, _target: &Target) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// A proxy: the gatekeeper, and the interceptor that attaches credentials
/// (without one, every tunnel goes through untouched).
#[derive(Clone)]
pub struct Proxy {
    gate: Arc<dyn Gatekeeper>,
    tls: Option<Arc<Interceptor>>,
}

impl Proxy {
    /// A proxy that asks `gate`.
    pub fn new(gate: Arc<dyn Gatekeeper>) -> Self {
        Self { gate, tls: None }
    }

    /// Attaches credentials through `tls` for the hosts the gatekeeper
    /// names.
    #[must_use]
    pub fn with_interceptor(mut self, tls: Arc<Interceptor>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Serves connections from `listener` until the task is dropped; `tag`
    /// names the listener in every event.
    pub async fn serve(self, listener: TcpListener, tag: u64) {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    // EMFILE and friends pass; a closed listener ends the loop.
                    tracing::warn!(%error, "egress proxy: accept failed");
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::NotConnected
                    ) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let proxy = self.clone();
            tokio::spawn(async move {
                if let Err(error) = proxy.handle(stream, tag).await {
                    tracing::debug!(%error, "egress proxy: connection ended with an error");
                }
            });
        }
    }

    /// One client connection: SOCKS5 when its first byte is 5, HTTP otherwise.
    async fn handle(&self, client: TcpStream, tag: u64) -> std::io::Result<()> {
        let _ = client.set_nodelay(true);
        let mut first = [0u8; 1];
        if client.peek(&mut first).await? == 0 {
            return Ok(());
        }
        if first[0] == socks::VERSION {
            socks::handle(client, tag, self.gate.as_ref()).await
        } else {
            http::handle(client, tag, self.gate.as_ref(), self.tls.as_deref()).await
        }
    }
}

/// Serves connections from `listener` with `gate` and no interceptor.
pub async fn serve(listener: TcpListener, tag: u64, gate: Arc<dyn Gatekeeper>) {
    Proxy::new(gate).serve(listener, tag).await;
}

/// What [`open`] reports when it cannot give a connection.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The gatekeeper said no.
    Refused(Refusal),
    /// The upstream could not be reached.
    Failed(String),
}

/// Admits `target`, resolves it and connects to the first address the
/// gatekeeper accepts.
pub(crate) async fn open(
    gate: &dyn Gatekeeper,
    listener: u64,
    target: &Target,
) -> Result<TcpStream, OpenError> {
    if let Admission::Refuse(refusal) = gate.admit(listener, target).await {
        return Err(OpenError::Refused(refusal));
    }
    let addresses: Vec<SocketAddr> = if let Some(address) = gate.resolve_override(&target.host) {
        vec![SocketAddr::new(address, target.port)]
    } else if let Ok(address) = target.host.parse::<IpAddr>() {
        vec![SocketAddr::new(address, target.port)]
    } else {
        match tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::lookup_host((target.host.as_str(), target.port)),
        )
        .await
        {
            Ok(Ok(found)) => found.collect(),
            Ok(Err(_)) | Err(_) => {
                return Err(OpenError::Failed(format!("cannot resolve {}", target.host)));
            }
        }
    };
    let mut last_refusal = None;
    let mut last_error = format!("no address for {}", target.host);
    for address in addresses {
        if let Err(refusal) = gate.check_address(target, address.ip()) {
            last_refusal = Some(refusal);
            continue;
        }
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(error)) => last_error = format!("cannot connect to {target}: {error}"),
            Err(_) => last_error = format!("cannot connect to {target}: timed out"),
        }
    }
    Err(match last_refusal {
        Some(refusal) => OpenError::Refused(refusal),
        None => OpenError::Failed(last_error),
    })
}

/// Relays both ways until either side ends; returns the bytes each way
/// (client to upstream, upstream to client).
pub(crate) async fn relay<C, U>(client: &mut C, upstream: &mut U) -> (u64, u64)
where
    C: AsyncRead + AsyncWrite + Unpin + ?Sized,
    U: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    copy_bidirectional(client, upstream).await.unwrap_or((0, 0))
}

/// Reads `host[:port]` or `[v6][:port]`, lower-casing names; `default_port`
/// when none is written.
pub(crate) fn parse_authority(authority: &str, default_port: Option<u16>) -> Option<Target> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (host, Some(port)),
            Some(_) => return None,
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => port.parse::<u16>().ok().filter(|&port| port != 0)?,
        None => default_port?,
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let sane = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':'));
    sane.then_some(Target { host, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_read_as_host_and_port() {
        let target = |host: &str, port| Target {
            host: host.into(),
            port,
        };
        assert_eq!(
            parse_authority("Example.COM:443", None),
            Some(target("example.com", 443))
        );
        assert_eq!(
            parse_authority("example.com", Some(80)),
            Some(target("example.com", 80))
        );
        assert_eq!(
            parse_authority("[::1]:8080", None),
            Some(target("::1", 8080))
        );
        assert_eq!(parse_authority("[::1]", Some(80)), Some(target("::1", 80)));
        for bad in [
            "example.com",
            "x:0",
            "x:65536",
            "::1:80",
            "a b:1",
            ":80",
            "[::1",
        ] {
            assert_eq!(parse_authority(bad, None), None, "{bad}");
        }
        assert_eq!(target("::1", 80).to_string(), "[::1]:80");
    }
}
