//! One raw MCP client over stdio, for tests that need the bytes of the
//! protocol (key order, ids, notifications, timing of each line) rather
//! than an SDK's view of it.
//!
//! The binary comes from the caller: `CARGO_BIN_EXE_agent-exec` exists only
//! while an integration test of the `agent-exec` package compiles, so
//! [`agent_exec_binary!`](crate::agent_exec_binary) expands it at the call
//! site (uv's `test_context!` does the same with its binaries).

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The protocol revision the raw clients and benchmarks speak.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// How long a request waits for its response: generous, for a loaded CI
/// machine; a response ends the wait at once.
const RESPONSE_WAIT: Duration = Duration::from_secs(60);

/// The path of the `agent-exec` binary built for this test target.
#[macro_export]
macro_rules! agent_exec_binary {
    () => {
        env!("CARGO_BIN_EXE_agent-exec")
    };
}

/// Derefs a test's own `struct Wrapper(RawClient)` to the client, so the
/// wrapper adds only what its test file needs.
#[macro_export]
macro_rules! deref_to_raw_client {
    ($wrapper:ty) => {
        impl ::std::ops::Deref for $wrapper {
            type Target = $crate::mcp::RawClient;
            fn deref(&self) -> &$crate::mcp::RawClient {
                &self.0
            }
        }
        impl ::std::ops::DerefMut for $wrapper {
            fn deref_mut(&mut self) -> &mut $crate::mcp::RawClient {
                &mut self.0
            }
        }
    };
}

/// The `initialize` parameters of a client named `name` with
/// `capabilities`.
#[must_use]
pub fn initialize_params(name: &str, capabilities: &Value) -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": capabilities,
        "clientInfo": { "name": name, "version": "0" }
    })
}

/// A line the server wrote on stdout: when it was read, its raw text and
/// its parsed value (keys in the order they were written).
#[derive(Debug, Clone)]
pub struct Line {
    /// When the reader thread read it.
    pub at: Instant,
    /// The line as written, without its newline.
    pub raw: String,
    /// The line parsed as JSON.
    pub value: Value,
}

/// A response and the notifications (and requests) the server wrote
/// before it.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The response to the request.
    pub response: Line,
    /// What came before it, in order.
    pub before: Vec<Line>,
}

/// How to start a server: `agent-exec mcp ARGS` (or behind a wrapper),
/// then the handshake.
#[derive(Debug, Clone)]
pub struct Launch {
    binary: String,
    wrapper: Vec<String>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    collect_stderr: bool,
    client_name: String,
    capabilities: Value,
}

impl Launch {
    /// `binary mcp`, with no flags; stderr is inherited, the client
    /// declares no capabilities.
    #[must_use]
    pub fn new(binary: &str) -> Self {
        Self {
            binary: binary.to_owned(),
            wrapper: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            collect_stderr: false,
            client_name: "blackbox".to_owned(),
            capabilities: json!({}),
        }
    }

    /// Flags after `mcp`.
    #[must_use]
    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args
            .extend(args.into_iter().map(|arg| arg.as_ref().to_owned()));
        self
    }

    /// Variables added to the server's environment.
    #[must_use]
    pub fn envs<'a>(mut self, env: impl IntoIterator<Item = &'a (&'a str, &'a str)>) -> Self {
        self.env.extend(
            env.into_iter()
                .map(|(name, value)| (OsString::from(name), OsString::from(value))),
        );
        self
    }

    /// One variable added to the server's environment (any bytes).
    #[must_use]
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// A program and its first arguments that start the binary (given the
    /// binary and its arguments after them), such as a shell that moves
    /// itself into a cgroup and then execs.
    #[must_use]
    pub fn wrapper(mut self, wrapper: &[&str]) -> Self {
        self.wrapper = wrapper.iter().map(|word| (*word).to_owned()).collect();
        self
    }

    /// Collects stderr's lines (see [`RawClient::stderr_lines`]) instead
    /// of passing them through.
    #[must_use]
    pub fn collect_stderr(mut self) -> Self {
        self.collect_stderr = true;
        self
    }

    /// The client's name and declared capabilities in `initialize`.
    #[must_use]
    pub fn client(mut self, name: &str, capabilities: Value) -> Self {
        self.client_name = name.to_owned();
        self.capabilities = capabilities;
        self
    }

    /// Starts the server and completes the handshake.
    ///
    /// # Panics
    /// When the server cannot start or does not answer `initialize` as
    /// agent-exec.
    #[must_use]
    pub fn start(self) -> RawClient {
        let mut client = self.start_without_handshake();
        let params = initialize_params(&client.name, &client.capabilities);
        let init = client.request("initialize", &params);
        assert_eq!(
            init.response.value["result"]["serverInfo"]["name"], "agent-exec",
            "{}",
            init.response.raw
        );
        client.notify("notifications/initialized");
        client
    }

    /// The command that starts the server, for a test that drives the
    /// process itself (stdio is left as `Command` sets it).
    #[must_use]
    #[expect(clippy::disallowed_methods, reason = "tests start the built server")]
    pub fn command(&self) -> Command {
        let mut command = match self.wrapper.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(&self.binary);
                command
            }
            None => Command::new(&self.binary),
        };
        command
            .arg("mcp")
            .args(&self.args)
            .envs(self.env.iter().map(|(name, value)| (name, value)));
        command
    }

    /// Starts the server; nothing is sent.
    ///
    /// # Panics
    /// When the server cannot start.
    #[must_use]
    pub fn start_without_handshake(self) -> RawClient {
        let mut command = self.command();
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if self.collect_stderr {
                Stdio::piped()
            } else {
                Stdio::inherit()
            });
        let mut child = command.spawn().expect("the server starts");
        let (line_sender, lines) = channel();
        let stdout = child.stdout.take().expect("stdout is piped");
        let drop_stdout = Arc::new(AtomicBool::new(false));
        let dropping = Arc::clone(&drop_stdout);
        std::thread::spawn(move || {
            for raw in BufReader::new(stdout).lines().map_while(Result::ok) {
                let at = Instant::now();
                let value = serde_json::from_str(&raw)
                    .unwrap_or_else(|error| panic!("non-JSON line on stdout {raw:?}: {error}"));
                if line_sender.send(Line { at, raw, value }).is_err()
                    || dropping.load(Ordering::SeqCst)
                {
                    break;
                }
            }
        });
        let (error_sender, errors) = channel();
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if error_sender.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        RawClient {
            stdin: child.stdin.take(),
            child,
            lines,
            drop_stdout,
            errors,
            next_id: 1,
            name: self.client_name,
            capabilities: self.capabilities,
        }
    }
}

/// A server on stdio and the lines it writes.
#[derive(Debug)]
pub struct RawClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    /// Set to make the reader close the server's stdout after the next line.
    drop_stdout: Arc<AtomicBool>,
    errors: Receiver<String>,
    next_id: u64,
    name: String,
    capabilities: Value,
}

impl RawClient {
    /// The server's pid.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one message as a line.
    ///
    /// # Panics
    /// When stdin was closed or the write fails.
    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write to the server");
        stdin.flush().expect("flush to the server");
    }

    /// Writes `bytes` as they are: no newline added, no JSON checked.
    ///
    /// # Panics
    /// When stdin was closed or the write fails.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to the server");
        stdin.flush().expect("flush to the server");
    }

    /// Sends the notification `method` without parameters.
    pub fn notify(&mut self, method: &str) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method }));
    }

    /// Sends the notification `method` with `params`.
    pub fn notify_with(&mut self, method: &str, params: &Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Waits for the next message that `wanted` accepts, dropping others.
    ///
    /// # Panics
    /// When none comes within a minute (the panic names `what`).
    pub fn next_where(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + RESPONSE_WAIT;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) if wanted(&line.value) => return line.value,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!("no {what}"),
                Err(RecvTimeoutError::Disconnected) => panic!("the server closed stdout"),
            }
        }
    }

    /// Makes the reader close the server's stdout once it has read one
    /// more line, so the server's next write meets a broken pipe.
    pub fn drop_stdout_after_next_line(&self) {
        self.drop_stdout.store(true, Ordering::SeqCst);
    }

    /// The exit status, or `None` if the server still runs after `limit`.
    ///
    /// # Panics
    /// When the status cannot be read.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends a request with the next id, without waiting; the id.
    pub fn send_request(&mut self, method: &str, params: &Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        id
    }

    /// Sends a request and waits for its response.
    ///
    /// # Panics
    /// When no response comes within a minute or stdout closes.
    pub fn request(&mut self, method: &str, params: &Value) -> Reply {
        let id = self.send_request(method, params);
        self.response_to(id)
    }

    /// Waits for the response to `id`, keeping what comes before it.
    ///
    /// # Panics
    /// When no response comes within a minute or stdout closes.
    pub fn response_to(&mut self, id: u64) -> Reply {
        let deadline = Instant::now() + RESPONSE_WAIT;
        let mut before = Vec::new();
        loop {
            let line = self.next_line_within(deadline.saturating_duration_since(Instant::now()));
            if line.value.get("id") == Some(&json!(id)) && line.value.get("method").is_none() {
                return Reply {
                    response: line,
                    before,
                };
            }
            before.push(line);
        }
    }

    /// Calls `tool` with `arguments`; the JSON-RPC result.
    pub fn call(&mut self, tool: &str, arguments: &Value) -> Value {
        self.call_reply(tool, arguments).response.value["result"].clone()
    }

    /// Calls `tool` with `arguments`; the whole reply.
    pub fn call_reply(&mut self, tool: &str, arguments: &Value) -> Reply {
        self.request(
            "tools/call",
            &json!({ "name": tool, "arguments": arguments }),
        )
    }

    /// Runs `command` through `Bash`; the answer's text.
    pub fn bash(&mut self, command: &str) -> String {
        text_of(&self.call("Bash", &json!({ "command": command }))).to_owned()
    }

    /// The next line the server writes.
    ///
    /// # Panics
    /// When nothing comes within a minute or stdout closes.
    pub fn next_line(&mut self) -> Line {
        self.next_line_within(RESPONSE_WAIT)
    }

    fn next_line_within(&mut self, wait: Duration) -> Line {
        match self.lines.recv_timeout(wait) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("the server wrote nothing in {wait:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed stdout"),
        }
    }

    /// The next line if one comes within `wait`.
    pub fn try_next_line(&mut self, wait: Duration) -> Option<Line> {
        self.lines.recv_timeout(wait).ok()
    }

    /// Stderr lines (collected with [`Launch::collect_stderr`]) until one
    /// contains `needle`, that one included; every line seen in `wait`
    /// when none does.
    pub fn stderr_until(&mut self, needle: &str, wait: Duration) -> Vec<String> {
        let deadline = Instant::now() + wait;
        let mut lines = Vec::new();
        while let Ok(line) = self
            .errors
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            let done = line.contains(needle);
            lines.push(line);
            if done {
                break;
            }
        }
        lines
    }

    /// The stderr lines collected so far.
    pub fn stderr_lines(&mut self) -> Vec<String> {
        self.errors.try_iter().collect()
    }

    /// Closes stdin and waits (20 s at most) for the server to exit.
    ///
    /// # Panics
    /// When it does not exit in time.
    pub fn close(mut self) -> ExitStatus {
        drop(self.stdin.take());
        self.wait_exit(Duration::from_secs(20))
            .expect("the server exits within 20 s of stdin closing")
    }

    /// Kills the server with SIGKILL and collects it.
    pub fn kill_hard(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of a tool result's first content item ("" when absent).
#[must_use]
pub fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}
