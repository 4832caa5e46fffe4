//! `agent-exec mcp --attach`: a stdio client's messages, one line each,
//! posted to a running `serve` (Streamable HTTP), and its answers (JSON or
//! an SSE stream) written back as lines. The shells belong to the server,
//! so they outlive this bridge.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

/// How long answers still streaming may take once stdin has closed.
const LAST_ANSWERS: Duration = Duration::from_secs(10);

/// Where the server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// A Unix socket (the path on it is `/mcp`).
    Unix(PathBuf),
    /// `host:port` and the path.
    Tcp { authority: String, path: String },
}

impl Endpoint {
    /// `unix:PATH` or `http://HOST:PORT[/PATH]` (path default `/mcp`).
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        if let Some(path) = text.strip_prefix("unix:") {
            return Ok(Self::Unix(PathBuf::from(path)));
        }
        if text.starts_with("https://") {
            bail!(
                "--attach {text}: TLS is not built in; attach over a Unix socket, loopback or an SSH tunnel"
            );
        }
        let Some(rest) = text.strip_prefix("http://") else {
            bail!("--attach `{text}`: expected unix:PATH or http://HOST:PORT/mcp");
        };
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, super::MCP_PATH),
        };
        Ok(Self::Tcp {
            authority: authority.to_owned(),
            path: path.to_owned(),
        })
    }

    fn path(&self) -> &str {
        match self {
            Self::Unix(_) => super::MCP_PATH,
            Self::Tcp { path, .. } => path,
        }
    }

    fn host(&self) -> &str {
        match self {
            Self::Unix(_) => "localhost",
            Self::Tcp { authority, .. } => authority,
        }
    }
}

/// What the bridge learns from the server's answers.
#[derive(Default)]
struct State {
    session: Option<String>,
    version: Option<String>,
}

struct Link {
    endpoint: Endpoint,
    token: Option<String>,
    state: Mutex<State>,
    out: mpsc::UnboundedSender<String>,
}

/// Bridges stdin and stdout to `endpoint` until stdin closes; exit code 0.
pub(crate) async fn run(endpoint: Endpoint, token: Option<String>) -> anyhow::Result<u8> {
    let (out, mut lines_out) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines_out.recv().await {
            if stdout
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
                || stdout.flush().await.is_err()
            {
                break;
            }
        }
    });
    let link = Arc::new(Link {
        endpoint,
        token,
        state: Mutex::default(),
        out,
    });
    // Fails early, with a clear line, when nothing listens there.
    link.connect().await?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut posts = tokio::task::JoinSet::new();
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        if line.trim().is_empty() {
            continue;
        }
        let message: Option<Value> = serde_json::from_str(&line).ok();
        // `initialize` first (later messages need the session its answer
        // names), and notifications in order (`initialized` before calls);
        // requests and answers run side by side, as on stdio.
        let in_order = message
            .as_ref()
            .is_none_or(|message| message["method"] == "initialize" || message.get("id").is_none());
        let link = Arc::clone(&link);
        let post = async move { link.post(line, message).await };
        if in_order {
            post.await;
        } else {
            posts.spawn(post);
        }
    }
    let _ = tokio::time::timeout(LAST_ANSWERS, async {
        while posts.join_next().await.is_some() {}
    })
    .await;
    link.close_session().await;
    drop(link);
    let _ = writer.await;
    Ok(0)
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

impl Link {
    async fn connect(&self) -> anyhow::Result<Sender> {
        match &self.endpoint {
            Endpoint::Unix(path) => {
                let stream = tokio::net::UnixStream::connect(path)
                    .await
                    .with_context(|| {
                        format!("cannot reach agent-exec serve at unix:{}", path.display())
                    })?;
                let (sender, connection) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
                tokio::spawn(connection);
                Ok(sender)
            }
            Endpoint::Tcp { authority, .. } => {
                let stream = tokio::net::TcpStream::connect(authority.as_str())
                    .await
                    .with_context(|| format!("cannot reach agent-exec serve at {authority}"))?;
                let (sender, connection) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
                tokio::spawn(connection);
                Ok(sender)
            }
        }
    }

    fn request(&self, method: http::Method, body: String) -> anyhow::Result<Request<Full<Bytes>>> {
        let mut builder = Request::builder()
            .method(method)
            .uri(self.endpoint.path())
            .header(header::HOST, self.endpoint.host())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream");
        if let Some(token) = &self.token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(session) = &state.session {
            builder = builder.header(super::SESSION_HEADER, session);
        }
        if let Some(version) = &state.version {
            builder = builder.header("mcp-protocol-version", version);
        }
        Ok(builder.body(Full::new(Bytes::from(body)))?)
    }

    /// Posts one message and forwards what comes back; a failure is
    /// answered to the client as a JSON-RPC error of its request.
    async fn post(&self, line: String, message: Option<Value>) {
        if let Err(error) = self.try_post(line, message.as_ref()).await {
            crate::report(&format!("agent-exec: attach: {error:#}"));
            if let Some(id) = message.as_ref().and_then(|message| message.get("id"))
                && message
                    .as_ref()
                    .is_some_and(|message| message.get("method").is_some())
            {
                let answer = json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32603, "message": format!("agent-exec serve: {error:#}")}});
                let _ = self.out.send(answer.to_string());
            }
        }
    }

    async fn try_post(&self, line: String, message: Option<&Value>) -> anyhow::Result<()> {
        let mut sender = self.connect().await?;
        let request = self.request(http::Method::POST, line)?;
        let response = sender.send_request(request).await?;
        let status = response.status();
        if let Some(session) = response
            .headers()
            .get(super::SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
        {
            self.state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .session = Some(session.to_owned());
        }
        let is_stream = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|kind| kind.starts_with("text/event-stream"));
        let mut body = response.into_body();
        if !status.is_success() {
            let text = body
                .collect()
                .await
                .map(http_body_util::Collected::to_bytes)
                .unwrap_or_default();
            bail!("{status}: {}", String::from_utf8_lossy(&text).trim());
        }
        if status == StatusCode::ACCEPTED {
            return Ok(());
        }
        let is_initialize = message.is_some_and(|message| message["method"] == "initialize");
        if !is_stream {
            let bytes = body.collect().await?.to_bytes();
            let text = String::from_utf8_lossy(&bytes);
            if !text.trim().is_empty() {
                self.forward(text.trim(), is_initialize);
            }
            return Ok(());
        }
        let mut pending = String::new();
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else {
                continue;
            };
            pending.push_str(&String::from_utf8_lossy(&data).replace("\r\n", "\n"));
            while let Some(end) = pending.find("\n\n") {
                let event: String = pending.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(|data| data.strip_prefix(' ').unwrap_or(data))
                    .collect();
                let data = data.join("\n");
                if !data.trim().is_empty() {
                    self.forward(data.trim(), is_initialize);
                }
            }
        }
        Ok(())
    }

    /// Writes one message to stdout; an `initialize` answer's protocol
    /// version goes on every later request.
    fn forward(&self, text: &str, is_initialize: bool) {
        if is_initialize
            && let Ok(answer) = serde_json::from_str::<Value>(text)
            && let Some(version) = answer["result"]["protocolVersion"].as_str()
        {
            self.state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .version = Some(version.to_owned());
        }
        // One line each: a message is compact JSON already.
        let _ = self.out.send(text.replace('\n', " "));
    }

    /// Ends the protocol session (the shells stay: they are the server's).
    async fn close_session(&self) {
        if self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .session
            .is_none()
        {
            return;
        }
        let Ok(mut sender) = self.connect().await else {
            return;
        };
        let Ok(request) = self.request(http::Method::DELETE, String::new()) else {
            return;
        };
        let _ = sender.send_request(request).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        assert_eq!(
            Endpoint::parse("unix:/run/a.sock").expect("unix"),
            Endpoint::Unix(PathBuf::from("/run/a.sock"))
        );
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:7/mcp").expect("tcp"),
            Endpoint::Tcp {
                authority: "127.0.0.1:7".to_owned(),
                path: "/mcp".to_owned()
            }
        );
        assert_eq!(Endpoint::parse("http://h:1").expect("tcp").path(), "/mcp");
        assert!(Endpoint::parse("https://h:1/mcp").is_err());
        assert!(Endpoint::parse("h:1").is_err());
    }
}
