//! `agent-exec serve` and `mcp --attach`, through the binary: a raw
//! HTTP/1.1 client on the Unix socket (and loopback TCP), so what is
//! checked is what goes over the wire.

use std::io::{BufRead as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef00";

/// A temp dir only its user can enter, as `serve` wants around its
/// socket and token file.
fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    dir
}

/// A running `serve`, ended by pid when dropped.
struct Server {
    child: Child,
    socket: PathBuf,
    /// The endpoint line it printed.
    endpoint: String,
}

impl Server {
    /// Starts `serve` with `args` and waits for its endpoint line.
    fn start(dir: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .arg("serve")
            .arg("--cwd")
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    // Keep draining, so the server never blocks on stderr.
                    continue;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        let endpoint = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines
                .recv_timeout(left)
                .unwrap_or_else(|error| panic!("serve prints its endpoint ({error}): {seen:?}"));
            if let Some(endpoint) = line.strip_prefix("agent-exec serve: listening on ") {
                break endpoint.to_owned();
            }
            seen.push(line);
        };
        let socket = endpoint
            .strip_prefix("unix:")
            .and_then(|rest| rest.split(' ').next())
            .map(PathBuf::from)
            .unwrap_or_default();
        Self {
            child,
            socket,
            endpoint,
        }
    }

    /// SIGTERM by pid; the exit code.
    fn stop(mut self) -> Option<i32> {
        signal(self.child.id(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code().or_else(|| {
                    use std::os::unix::process::ExitStatusExt as _;
                    status.signal().map(|signal| 128 + signal)
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("serve did not stop on SIGTERM");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// One HTTP exchange's outcome.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    /// The JSON-RPC messages of the body (JSON or SSE).
    messages: Vec<Value>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The answer to request `id`.
    fn answer(&self, id: u64) -> &Value {
        self.messages
            .iter()
            .find(|message| message["id"] == id)
            .unwrap_or_else(|| panic!("no answer {id} in {self:?}"))
    }
}

/// `chunked` transfer coding, undone.
fn unchunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = body.windows(2).position(|pair| pair == b"\r\n") else {
            return out;
        };
        let size = std::str::from_utf8(&body[..end])
            .ok()
            .and_then(|line| usize::from_str_radix(line.split(';').next()?.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 {
            return out;
        }
        let start = end + 2;
        out.extend_from_slice(&body[start..(start + size).min(body.len())]);
        body = &body[(start + size + 2).min(body.len())..];
    }
}

/// Sends one request on a new connection (closed after it) and reads the
/// whole answer.
fn exchange(
    stream: &mut dyn ReadWrite,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the answer");
    let split = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("an HTTP head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked")
    });
    if chunked {
        body = unchunk(&body);
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let messages = if text.trim_start().starts_with('{') {
        serde_json::from_str(&text).into_iter().collect()
    } else {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    };
    Reply {
        status,
        headers,
        messages,
    }
}

trait ReadWrite: std::io::Read + std::io::Write {}
impl<T: std::io::Read + std::io::Write> ReadWrite for T {}

/// One request to the server on `socket`.
fn post(socket: &Path, headers: &[(&str, &str)], body: &Value) -> Reply {
    request(socket, "POST", headers, &body.to_string())
}

fn request(socket: &Path, method: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut stream = UnixStream::connect(socket).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    exchange(&mut stream, method, headers, body)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn initialize(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "serve-test", "version": "0"}}})
}

/// A client of one protocol session (2025-06-18 or 2025-11-25).
struct Session {
    socket: PathBuf,
    auth: String,
    id: String,
    version: String,
    next: u64,
}

impl Session {
    fn open(socket: &Path, token: &str, version: &str) -> Self {
        let auth = bearer(token);
        let reply = post(socket, &[("Authorization", &auth)], &initialize(version));
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.answer(0)["result"]["protocolVersion"], version);
        let id = reply
            .header("mcp-session-id")
            .expect("a session id")
            .to_owned();
        let session = Self {
            socket: socket.to_path_buf(),
            auth,
            id,
            version: version.to_owned(),
            next: 1,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let reply = post(socket, &session.headers(), &note);
        assert_eq!(reply.status, 202, "{reply:?}");
        session
    }

    fn headers(&self) -> Vec<(&str, &str)> {
        vec![
            ("Authorization", self.auth.as_str()),
            ("Mcp-Session-Id", self.id.as_str()),
            ("MCP-Protocol-Version", self.version.as_str()),
        ]
    }

    fn call(&mut self, name: &str, arguments: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name}});
        message["params"]["arguments"] = arguments;
        let reply = post(&self.socket, &self.headers(), &message);
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.answer(id)["result"].clone()
    }

    /// Ends the session, as a client that goes away does.
    fn close(self) {
        let reply = request(&self.socket, "DELETE", &self.headers(), "");
        assert!(reply.status < 300, "{reply:?}");
    }
}

/// One stateless call (protocol 2026-07-28: no session; version and
/// capabilities in each request).
fn stateless_call(socket: &Path, token: &str, id: u64, name: &str, arguments: Value) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
    "name": name,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "stateless", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }}});
    message["params"]["arguments"] = arguments;
    let auth = bearer(token);
    let reply = post(
        socket,
        &[
            ("Authorization", &auth),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ],
        &message,
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(reply.header("mcp-session-id").is_none(), "{reply:?}");
    reply.answer(id)["result"].clone()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The first `shell_...` id in `text`.
fn shell_id(text: &str) -> String {
    let start = text.find("shell_").expect("a shell id");
    text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

fn token_file(dir: &Path) -> PathBuf {
    let path = dir.join("tokens");
    std::fs::write(&path, format!("alice:{ALICE}\nbob:{BOB}\n")).expect("tokens");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}

#[test]
fn serve_answers_only_with_a_token_and_only_its_own_origin() {
    let dir = private_dir();
    let socket = dir.path().join("s.sock");
    let listen = format!("unix:{}", socket.display());
    let server = Server::start(dir.path(), &["--listen", &listen]);
    assert_eq!(server.socket, socket);
    // Made at first start: one generated token, readable by its owner only.
    let tokens = dir.path().join("token");
    let mode = std::fs::metadata(&tokens)
        .expect("token file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let token = std::fs::read_to_string(&tokens).expect("token");
    let token = token.trim();
    assert!(token.len() >= 32, "{token}");
    let mode = std::fs::metadata(&socket)
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the socket is its user's only");

    let body = initialize("2025-06-18");
    let none = post(&socket, &[], &body);
    assert_eq!(none.status, 401, "{none:?}");
    assert!(
        none.header("www-authenticate")
            .is_some_and(|h| h.starts_with("Bearer")),
        "{none:?}"
    );
    let wrong = post(
        &socket,
        &[("Authorization", "Bearer not-the-token-at-all")],
        &body,
    );
    assert_eq!(wrong.status, 401, "{wrong:?}");
    assert!(
        wrong
            .header("www-authenticate")
            .is_some_and(|h| h.contains("invalid_token")),
        "{wrong:?}"
    );
    let auth = bearer(token);
    let foreign = post(
        &socket,
        &[("Authorization", &auth), ("Origin", "http://evil.example")],
        &body,
    );
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let good = post(&socket, &[("Authorization", &auth)], &body);
    assert_eq!(good.status, 200, "{good:?}");
    assert_eq!(good.answer(0)["result"]["serverInfo"]["name"], "agent-exec");

    // A second server on a live socket refuses.
    let second = crate::agent_exec(&["serve", "--listen", &listen]);
    assert_eq!(second.status.code(), Some(2), "{second:?}");
    assert!(
        crate::stderr(&second).contains("already running"),
        "{second:?}"
    );

    // SIGTERM ends it (128+15) and its socket goes.
    assert_eq!(server.stop(), Some(143));
    assert!(!socket.exists());

    // A socket left by a server killed outright is reused.
    let killed = Server::start(dir.path(), &["--listen", &listen]);
    signal(killed.child.id(), "KILL");
    drop(killed);
    assert!(socket.exists(), "SIGKILL leaves the socket behind");
    let again = Server::start(dir.path(), &["--listen", &listen]);
    let good = post(&socket, &[("Authorization", &auth)], &body);
    assert_eq!(good.status, 200, "{good:?}");
    assert_eq!(again.stop(), Some(143));
}

#[test]
fn serve_refuses_unsafe_listening_at_start_up() {
    for (args, expected) in [
        (vec!["serve", "--listen", "0.0.0.0:0"], "TLS"),
        (
            vec![
                "serve",
                "--listen",
                "0.0.0.0:0",
                "--no-auth",
                "--insecure-behind-proxy",
            ],
            "--no-auth",
        ),
    ] {
        let output = crate::agent_exec(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let stderr = crate::stderr(&output);
        assert!(stderr.starts_with("agent-exec: error:"), "{stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn serve_on_loopback_tcp_checks_the_origin_and_the_token() {
    let dir = private_dir();
    let tokens = token_file(dir.path());
    let server = Server::start(
        dir.path(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            tokens.to_str().expect("utf-8"),
        ],
    );
    let address = server
        .endpoint
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .expect("an http endpoint")
        .to_owned();
    let body = initialize("2025-11-25").to_string();
    let send = |headers: &[(&str, &str)]| {
        let mut stream = std::net::TcpStream::connect(&address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        exchange(&mut stream, "POST", headers, &body)
    };
    let auth = bearer(BOB);
    let own = format!("http://{address}");
    assert_eq!(send(&[("Authorization", &auth)]).status, 200);
    assert_eq!(
        send(&[("Authorization", &auth), ("Origin", &own)]).status,
        200
    );
    let rebound = send(&[
        ("Authorization", &auth),
        ("Origin", "http://attacker.example:80"),
    ]);
    assert_eq!(rebound.status, 403, "{rebound:?}");
    assert_eq!(send(&[]).status, 401);
    assert_eq!(server.stop(), Some(143));
}

/// A shell outlives the client that started it: a client that comes back
/// (statelessly under 2026-07-28, or in a new session) reads it, types
/// into it and kills it.
#[test]
fn shells_belong_to_the_server_not_the_connection() {
    let dir = private_dir();
    let tokens = token_file(dir.path());
    let socket = dir.path().join("s.sock");
    let listen = format!("unix:{}", socket.display());
    let server = Server::start(
        dir.path(),
        &[
            "--listen",
            &listen,
            "--token-file",
            tokens.to_str().expect("utf-8"),
        ],
    );
    let mut first = Session::open(&socket, ALICE, "2025-11-25");
    let started = first.call(
        "Bash",
        json!({"command": "echo ready; read line; echo \"got:$line\"; sleep 300", "tty": true}),
    );
    assert!(text(&started).contains("ready"), "{started}");
    let id = shell_id(&text(&started));
    first.close();

    // Back without a session (2026-07-28): the shell is there, waiting.
    let read = stateless_call(&socket, ALICE, 1, "BashOutput", json!({"bash_id": id}));
    assert_eq!(
        read["structuredContent"]["waiting_for_input"], true,
        "{read}"
    );

    // Back in a new session: types into it, reads the answer, kills it.
    let mut again = Session::open(&socket, ALICE, "2025-06-18");
    let typed = again.call(
        "WriteStdin",
        json!({"bash_id": id, "input": "hello\n", "wait_ms": 2000}),
    );
    assert!(!typed["isError"].as_bool().unwrap_or(true), "{typed}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = String::new();
    while !seen.contains("got:hello") && Instant::now() < deadline {
        let read = again.call("BashOutput", json!({"bash_id": id, "wait_ms": 1000}));
        seen.push_str(&text(&read));
    }
    assert!(
        seen.contains("got:hello") || text(&typed).contains("got:hello"),
        "{seen} {typed}"
    );
    let killed = again.call("KillShell", json!({"shell_id": id}));
    assert!(text(&killed).contains("terminated"), "{killed}");
    again.close();
    assert_eq!(server.stop(), Some(143));
}

/// Another token's calls do not see a principal's shells.
#[test]
fn another_principal_gets_not_found() {
    let dir = private_dir();
    let tokens = token_file(dir.path());
    let socket = dir.path().join("s.sock");
    let listen = format!("unix:{}", socket.display());
    let server = Server::start(
        dir.path(),
        &[
            "--listen",
            &listen,
            "--token-file",
            tokens.to_str().expect("utf-8"),
        ],
    );
    let started = stateless_call(
        &socket,
        ALICE,
        1,
        "Bash",
        json!({"command": "sleep 300", "run_in_background": true}),
    );
    let id = shell_id(&text(&started));
    // Handles are unguessable under serve: 128 random bits.
    assert!(id.len() >= "shell_".len() + 32, "{id}");
    for (tool, key) in [("BashOutput", "bash_id"), ("KillShell", "shell_id")] {
        let other = stateless_call(&socket, BOB, 2, tool, json!({ key: id }));
        assert_eq!(other["isError"], true, "{other}");
        assert!(text(&other).contains("not found"), "{other}");
    }
    let own = stateless_call(&socket, ALICE, 3, "KillShell", json!({"shell_id": id}));
    assert!(text(&own).contains("terminated"), "{own}");
    assert_eq!(server.stop(), Some(143));
}

/// A stdio client through `mcp --attach`: a shell started through one
/// bridge is read through the next, after the first has ended.
#[test]
fn attach_bridges_stdio_and_the_shells_outlive_the_bridge() {
    let dir = private_dir();
    let socket = dir.path().join("s.sock");
    let listen = format!("unix:{}", socket.display());
    let server = Server::start(dir.path(), &["--listen", &listen]);
    let tokens = dir.path().join("token");
    let bridge = |messages: &[Value]| -> Vec<Value> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .args(["mcp", "--attach", &listen, "--token-file"])
            .arg(&tokens)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the bridge starts");
        let mut stdin = child.stdin.take().expect("stdin");
        for message in messages {
            writeln!(stdin, "{message}").expect("write");
        }
        drop(stdin);
        let output = child.wait_with_output().expect("the bridge ends");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    };
    let hello = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let answers = bridge(&[
        initialize("2025-06-18"),
        hello.clone(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "Bash",
            "arguments": {"command": "echo from-the-first-bridge; sleep 300", "run_in_background": true}}}),
    ]);
    let started = answers.iter().find(|a| a["id"] == 1).expect("an answer");
    let id = shell_id(&text(&started["result"]));
    let answers = bridge(&[
        initialize("2025-06-18"),
        hello,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "BashOutput",
            "arguments": {"bash_id": id, "wait_ms": 500}}}),
    ]);
    let read = answers.iter().find(|a| a["id"] == 1).expect("an answer");
    assert!(
        text(&read["result"]).contains("from-the-first-bridge"),
        "{read}"
    );
    assert_eq!(server.stop(), Some(143));
}
