//! `agent-exec serve`: one long-lived server that owns its shells, speaking
//! MCP over Streamable HTTP (rmcp's server transport, served by hyper; see
//! docs/decisions/0028-serve-transport.md) on a Unix socket or TCP. In
//! front of rmcp sits a gate: the path, the `Origin`, the bearer token (the
//! principal every call is made as) and the binding of sessions to it.

pub(crate) mod attach;
pub(crate) mod auth;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use agent_exec::Bridge;
use anyhow::{Context as _, bail};
use bytes::Bytes;
use exec_tools::ExecEnvironment;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tool_core::Principal;

use crate::cli::ServeArgs;
use crate::mcp::{Signals, Stop};
use auth::Tokens;

/// The MCP endpoint's path.
pub(crate) const MCP_PATH: &str = "/mcp";

/// A readiness path that needs no token and says nothing but `ok`.
const HEALTH_PATH: &str = "/health";

/// The session header of protocol revisions before 2026-07-28.
const SESSION_HEADER: &str = "mcp-session-id";

/// Where a server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Listen {
    /// A Unix socket at this path.
    Unix(PathBuf),
    /// A TCP address.
    Tcp(SocketAddr),
}

impl Listen {
    /// `unix:PATH` or `HOST:PORT` (`localhost` is 127.0.0.1).
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                bail!("--listen unix: needs a path");
            }
            return Ok(Self::Unix(PathBuf::from(path)));
        }
        let text_for_ip = text.replace("localhost:", "127.0.0.1:");
        text_for_ip.parse().map(Self::Tcp).map_err(|_| {
            anyhow::anyhow!("--listen `{text}`: expected unix:PATH or HOST:PORT (an IP address)")
        })
    }

    fn is_loopback(&self) -> bool {
        match self {
            Self::Unix(_) => true,
            Self::Tcp(address) => address.ip().is_loopback(),
        }
    }
}

/// The directory of the default socket and token file: the user's runtime
/// directory, else one under /tmp named by the user id.
fn default_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("agent-exec"),
        None => PathBuf::from(format!("/tmp/agent-exec-{}", nix::unistd::getuid())),
    }
}

/// Makes `dir` (0700) or checks that the one there is a directory of ours
/// that nobody else can enter: a socket or token in another user's
/// directory could be swapped under us.
fn private_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => {
            return Err(error).with_context(|| format!("cannot create `{}`", dir.display()));
        }
    }
    let meta = std::fs::symlink_metadata(dir).with_context(|| format!("`{}`", dir.display()))?;
    if !meta.is_dir() || meta.uid() != nix::unistd::getuid().as_raw() || meta.mode() & 0o077 != 0 {
        bail!(
            "`{}` must be a directory of this user that only it can enter (mode 0700)",
            dir.display()
        );
    }
    Ok(())
}

/// What start-up settled, before any tool exists: the listener is bound
/// (so a second server is refused before it prepares anything), the
/// tokens are read.
pub(crate) struct Prepared {
    listener: Listener,
    /// `None` under `--no-auth`.
    tokens: Option<Tokens>,
    /// The browser origins that are this server's own.
    own_origins: Vec<String>,
    /// Held for the server's life: a second server on the same socket
    /// finds it taken.
    _lock: Option<std::fs::File>,
    /// Removed at the end (a socket left behind would be reused anyway).
    socket: Option<PathBuf>,
    listen: Listen,
}

enum Listener {
    Unix(std::os::unix::net::UnixListener),
    Tcp(std::net::TcpListener),
}

/// Checks the flags (refusing what is unsafe), binds the listener and
/// reads or makes the token file; says where on stderr.
pub(crate) fn prepare(args: &ServeArgs) -> anyhow::Result<Prepared> {
    let listen = match &args.listen {
        Some(text) => Listen::parse(text)?,
        None => {
            let dir = default_dir();
            private_dir(&dir)?;
            Listen::Unix(dir.join("serve.sock"))
        }
    };
    if args.no_auth && !listen.is_loopback() {
        bail!("--no-auth is accepted only on a Unix socket or a loopback address");
    }
    if !listen.is_loopback() && !args.insecure_behind_proxy {
        bail!(
            "listening beyond loopback needs TLS, which is not built in: put a TLS proxy in front and pass --insecure-behind-proxy"
        );
    }
    let token_file = match (&args.token_file, args.no_auth) {
        (_, true) => None,
        (Some(path), false) => Some(path.clone()),
        (None, false) => {
            let dir = match &listen {
                Listen::Unix(path) => path.parent().map_or_else(default_dir, Path::to_path_buf),
                Listen::Tcp(_) => default_dir(),
            };
            if args.listen.is_some() {
                // The explicit socket's own directory, or the default one.
                private_dir(&dir)?;
            }
            Some(dir.join("token"))
        }
    };
    let tokens = match &token_file {
        Some(path) => {
            let (tokens, _created) = Tokens::load_or_create(path)?;
            Some(tokens)
        }
        None => None,
    };
    let (listener, lock, socket, listen) = bind(listen)?;
    let own_origins = match &listen {
        Listen::Unix(_) => Vec::new(),
        Listen::Tcp(address) => {
            let mut own = vec![format!("http://{address}")];
            if address.ip().is_loopback() {
                own.push(format!("http://localhost:{}", address.port()));
            }
            own
        }
    };
    let endpoint = match &listen {
        Listen::Unix(path) => format!("unix:{} (path {MCP_PATH})", path.display()),
        Listen::Tcp(address) => format!("http://{address}{MCP_PATH}"),
    };
    crate::report(&format!("agent-exec serve: listening on {endpoint}"));
    match &token_file {
        Some(path) => crate::report(&format!("agent-exec serve: token file {}", path.display())),
        None => crate::report("agent-exec serve: no authentication (--no-auth)"),
    }
    Ok(Prepared {
        listener,
        tokens,
        own_origins,
        _lock: lock,
        socket,
        listen,
    })
}

/// Binds `listen`. A Unix socket goes with a lock file beside it: a live
/// server holds it (a second one exits `already running`); a socket whose
/// lock nobody holds is a dead server's and is replaced.
fn bind(
    listen: Listen,
) -> anyhow::Result<(Listener, Option<std::fs::File>, Option<PathBuf>, Listen)> {
    match listen {
        Listen::Unix(path) => {
            let mut lock_path = path.clone().into_os_string();
            lock_path.push(".lock");
            let lock_path = PathBuf::from(lock_path);
            let lock = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&lock_path)
                .with_context(|| format!("cannot open `{}`", lock_path.display()))?;
            match lock.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    bail!(
                        "already running: another agent-exec serve listens on `{}`",
                        path.display()
                    )
                }
                Err(std::fs::TryLockError::Error(error)) => {
                    return Err(error)
                        .with_context(|| format!("cannot lock `{}`", lock_path.display()));
                }
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    tracing::info!(socket = %path.display(), "replacing a dead server's socket");
                }
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("cannot replace `{}`", path.display()));
                }
            }
            let listener = std::os::unix::net::UnixListener::bind(&path)
                .with_context(|| format!("cannot listen on `{}`", path.display()))?;
            // Only this user may connect, whatever directory it is in.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("cannot restrict `{}`", path.display()))?;
            listener.set_nonblocking(true)?;
            Ok((
                Listener::Unix(listener),
                Some(lock),
                Some(path.clone()),
                Listen::Unix(path),
            ))
        }
        Listen::Tcp(address) => {
            let listener = std::net::TcpListener::bind(address).map_err(|error| {
                if error.kind() == std::io::ErrorKind::AddrInUse {
                    anyhow::anyhow!(
                        "already running: `{address}` is in use (another agent-exec serve?)"
                    )
                } else {
                    anyhow::Error::new(error).context(format!("cannot listen on `{address}`"))
                }
            })?;
            listener.set_nonblocking(true)?;
            let bound = listener.local_addr()?;
            Ok((Listener::Tcp(listener), None, None, Listen::Tcp(bound)))
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// What stands before rmcp: the checks every request passes first.
struct Gate {
    tokens: Option<Tokens>,
    own_origins: Vec<String>,
    service: StreamableHttpService<Bridge, LocalSessionManager>,
    /// Each protocol session's principal: another token cannot use it.
    sessions: Mutex<HashMap<String, Principal>>,
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    response
}

impl Gate {
    async fn handle(&self, mut request: Request<Incoming>) -> Response<Body> {
        let path = request.uri().path();
        if path == HEALTH_PATH {
            return plain(StatusCode::OK, "ok");
        }
        if path != MCP_PATH {
            return plain(StatusCode::NOT_FOUND, "not found: the MCP endpoint is /mcp");
        }
        // DNS rebinding: a page in a browser may reach a local port, but
        // its `Origin` is not ours.
        if let Some(origin) = request.headers().get(header::ORIGIN) {
            let own = origin
                .to_str()
                .is_ok_and(|origin| self.own_origins.iter().any(|own| own == origin));
            if !own {
                return plain(
                    StatusCode::FORBIDDEN,
                    "forbidden: this Origin is not the server's own",
                );
            }
        }
        let principal = match &self.tokens {
            None => Principal::local(),
            Some(tokens) => {
                let presented = request
                    .headers()
                    .get(header::AUTHORIZATION)
                    .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "));
                match presented.and_then(|token| tokens.principal(token)) {
                    Some(principal) => principal,
                    None => return unauthorized(presented.is_some()),
                }
            }
        };
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        if let Some(id) = &session {
            let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            if sessions.get(id).is_some_and(|owner| *owner != principal) {
                return plain(StatusCode::NOT_FOUND, "session not found");
            }
        }
        let deleting = request.method() == http::Method::DELETE;
        request.extensions_mut().insert(principal.clone());
        let response = self.service.handle(request).await;
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(id) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
        {
            sessions.entry(id.to_owned()).or_insert(principal);
        }
        if deleting && let Some(id) = session {
            sessions.remove(&id);
        }
        response
    }
}

/// 401 with the challenge RFC 6750 describes.
fn unauthorized(presented: bool) -> Response<Body> {
    let challenge = if presented {
        r#"Bearer realm="agent-exec", error="invalid_token""#
    } else {
        r#"Bearer realm="agent-exec""#
    };
    let mut response = plain(
        StatusCode::UNAUTHORIZED,
        "unauthorized: send `Authorization: Bearer TOKEN` with a token from the server's token file",
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static(challenge),
    );
    response
}

/// Serves until SIGTERM, SIGINT or SIGHUP; then every shell ends.
pub(crate) async fn serve(
    prepared: Prepared,
    bridge: Bridge,
    env: &ExecEnvironment,
) -> anyhow::Result<Stop> {
    let mut signals = Signals::new()?;
    // Commands run only with the janitor watching.
    tokio::task::spawn_blocking(crate::janitor::wait).await?;
    crate::setup::remove_stale_in_background();
    let stopping = CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stopping.child_token())
        .with_legacy_session_mode(true);
    // rmcp's `Host` check (DNS rebinding) suits loopback TCP only: a Unix
    // socket's `Host` is arbitrary, and behind a proxy it is the public
    // name (the `Origin` check and the token guard those).
    let tcp_loopback =
        matches!(&prepared.listen, Listen::Tcp(address) if address.ip().is_loopback());
    if !tcp_loopback {
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || Ok(bridge.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let gate = Arc::new(Gate {
        tokens: prepared.tokens,
        own_origins: prepared.own_origins,
        service,
        sessions: Mutex::default(),
    });
    let stop = match prepared.listener {
        Listener::Unix(listener) => {
            let listener = tokio::net::UnixListener::from_std(listener)?;
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => connection(stream, &gate, &stopping),
                        Err(error) => tracing::warn!(%error, "accept failed"),
                    },
                    stop = signals.recv() => break stop,
                }
            }
        }
        Listener::Tcp(listener) => {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => {
                            // An answer goes out as head and chunks: with
                            // Nagle's algorithm and delayed ACKs each round
                            // trip waited 40 ms (measured).
                            let _ = stream.set_nodelay(true);
                            connection(stream, &gate, &stopping);
                        }
                        Err(error) => tracing::warn!(%error, "accept failed"),
                    },
                    stop = signals.recv() => break stop,
                }
            }
        }
    };
    stopping.cancel();
    env.shutdown().await;
    if let Some(socket) = &prepared.socket {
        let _ = std::fs::remove_file(socket);
    }
    Ok(stop)
}

/// Serves one connection (HTTP/1.1) on a task of its own.
fn connection<S>(stream: S, gate: &Arc<Gate>, stopping: &CancellationToken)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let gate = Arc::clone(gate);
    let stopping = stopping.clone();
    tokio::spawn(async move {
        let service = hyper::service::service_fn(move |request| {
            let gate = Arc::clone(&gate);
            async move { Ok::<_, Infallible>(gate.handle(request).await) }
        });
        let serving = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service);
        tokio::select! {
            served = serving => if let Err(error) = served {
                tracing::debug!(%error, "connection ended");
            },
            () = stopping.cancelled() => {}
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_parse() {
        assert_eq!(
            Listen::parse("unix:/run/x.sock").expect("unix"),
            Listen::Unix(PathBuf::from("/run/x.sock"))
        );
        assert!(Listen::parse("127.0.0.1:0").expect("tcp").is_loopback());
        assert!(Listen::parse("localhost:8080").expect("tcp").is_loopback());
        assert!(!Listen::parse("0.0.0.0:8080").expect("tcp").is_loopback());
        assert!(Listen::parse("unix:").is_err());
        assert!(Listen::parse("example.com:80").is_err());
        assert!(Listen::parse("[::1]:9").expect("tcp").is_loopback());
    }
}
