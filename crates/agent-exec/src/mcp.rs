//! `agent-exec mcp`: the bridge served over stdio, through the library's
//! framing ([`Framed`]), until the client leaves or a signal arrives.

use std::time::Duration;

use agent_exec::{Bridge, Framed};
use anyhow::Context as _;
use exec_tools::ExecEnvironment;
use nix::sys::signal::Signal as NixSignal;
use rmcp::ServiceExt as _;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// How long the answers of calls ended at shutdown may take to go out.
const DRAIN: Duration = Duration::from_millis(500);

/// Why the server stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The client closed stdin (or reading it failed).
    ClientLeft,
    /// A signal asked us to stop.
    Signal(NixSignal),
}

impl Stop {
    /// The exit status: 0 when the client left, 128+N after signal N, as a
    /// shell reports a process killed by it.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Self::ClientLeft => 0,
            Self::Signal(signal) => u8::try_from(128 + signal as i32).unwrap_or(u8::MAX),
        }
    }
}

/// SIGTERM, SIGINT and SIGHUP, each of which stops the server the same way.
pub(crate) struct Signals {
    terminate: Signal,
    interrupt: Signal,
    hangup: Signal,
}

impl Signals {
    pub(crate) fn new() -> std::io::Result<Self> {
        Ok(Self {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    pub(crate) async fn recv(&mut self) -> Stop {
        let signal = tokio::select! {
            _ = self.terminate.recv() => NixSignal::SIGTERM,
            _ = self.interrupt.recv() => NixSignal::SIGINT,
            _ = self.hangup.recv() => NixSignal::SIGHUP,
        };
        tracing::info!("{signal}: shutting down");
        Stop::Signal(signal)
    }
}

/// Serves MCP on `input` and `output` (stdin and stdout in the binary)
/// until the client closes its side or SIGTERM, SIGINT or SIGHUP arrives;
/// then every command `env` runs is ended before this returns.
pub(crate) async fn serve<R, W>(
    bridge: Bridge,
    input: R,
    output: W,
    env: &ExecEnvironment,
) -> anyhow::Result<Stop>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // Before the handshake, so a signal during it is ours too.
    let mut signals = Signals::new()?;
    let (transport, input_closed) = Framed::new(input, output);
    // Calls wait for the janitor; the `initialize` answer does not.
    let transport = transport.with_gate(crate::janitor::wait);
    // Cancellation goes through the framing, which keeps an id in flight
    // until its handler has finished.
    let bridge = transport.track(bridge);
    let running = tokio::select! {
        running = bridge.serve(transport) => match running {
            Ok(running) => running,
            // Stdin ended before the handshake (Ctrl+D at a terminal, a
            // client that gave up): nothing was asked, so nothing failed.
            Err(_) if input_closed.is_cancelled() => {
                tracing::info!("stdin ended before the client initialized");
                env.shutdown().await;
                return Ok(Stop::ClientLeft);
            }
            Err(error) => return Err(error).context("MCP initialization failed"),
        },
        stop = signals.recv() => {
            env.shutdown().await;
            return Ok(stop);
        }
    };
    // The `initialize` answer is out: what is left of dead servers goes
    // now, off the path to it.
    crate::setup::remove_stale_in_background();
    let cancel = running.cancellation_token();
    let mut waiting = std::pin::pin!(running.waiting());
    let mut finished = false;
    // Stdin's end (or a broken stdout) is seen here at once, not after
    // rmcp's drain of up to 5 s, which would wait for the very commands
    // still running.
    let stop = tokio::select! {
        ended = &mut waiting => {
            finished = true;
            tracing::info!(reason = ?ended.ok(), "the service ended");
            Stop::ClientLeft
        }
        () = input_closed.cancelled() => {
            tracing::info!("client disconnected");
            Stop::ClientLeft
        }
        stop = signals.recv() => stop,
    };
    // No request is read any more; calls still running see their
    // cancellation, and every shell gets SIGTERM, then SIGKILL after the
    // grace.
    cancel.cancel();
    env.shutdown().await;
    if !finished {
        // The answers of the ended calls go out; a call that started its
        // shell while the first pass ran is ended by the second.
        let _ = tokio::time::timeout(DRAIN, &mut waiting).await;
    }
    env.shutdown().await;
    Ok(stop)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

    use crate::cli::Command;
    use crate::mcp::{Stop, serve};
    use crate::tests::{cli, no_secrets};

    /// The server in-process over an in-memory pipe: a whole session, and
    /// the end of the serve loop when the client closes its side.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_calls_until_the_client_closes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let Command::Mcp(args) =
            cli(&["mcp", "--cwd", dir.path().to_str().expect("utf-8")]).command
        else {
            unreachable!("parsed as mcp");
        };
        let (setup, env, executor) =
            crate::prepare(&args.common, None, None, no_secrets).expect("prepares");
        let bridge = agent_exec::Bridge::new(executor, setup.cwd.clone(), false);
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        let serving = {
            let env = Arc::clone(&env);
            tokio::spawn(async move { serve(bridge, server_read, server_write, &env).await })
        };
        let (read, mut write) = tokio::io::split(client);
        let messages = [
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "Bash", "arguments": {"command": "echo in-process"}}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "KillShell", "arguments": {"shell_id": "shell_00000000"}}}),
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
                "name": "Nope", "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
                "name": "Bash", "_meta": {"progressToken": "p5"},
                "arguments": {"command": "echo early; sleep 2.5; echo late"}}}),
        ];
        for message in messages {
            write
                .write_all(format!("{message}\n").as_bytes())
                .await
                .expect("write");
        }
        let mut lines = BufReader::new(read).lines();
        let mut answers = std::collections::HashMap::new();
        let mut progress = Vec::new();
        while answers.len() < 6 {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("an answer in time")
                .expect("read")
                .expect("a line");
            let message: Value = serde_json::from_str(&line).expect("JSON");
            if let Some(id) = message["id"].as_u64() {
                answers.insert(id, message);
            } else if message["method"] == "notifications/progress" {
                progress.push(message);
            }
        }
        assert_eq!(
            answers[&1]["result"]["tools"].as_array().map(Vec::len),
            Some(5)
        );
        let echoed = answers[&2]["result"]["content"][0]["text"].as_str();
        assert!(
            echoed.is_some_and(|text| text.contains("in-process")),
            "{:?}",
            answers[&2]
        );
        assert_eq!(answers[&3]["result"]["isError"], true);
        assert_eq!(answers[&4]["error"]["code"], -32602);
        // Progress for the long call: its token, and the output so far.
        assert!(!progress.is_empty(), "no progress for a 2.5 s call");
        assert!(
            progress
                .iter()
                .all(|note| note["params"]["progressToken"] == "p5")
        );
        assert!(
            progress.iter().any(|note| note["params"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("early"))),
            "{progress:?}"
        );
        write.shutdown().await.expect("close");
        drop(write);
        let stopped = tokio::time::timeout(Duration::from_secs(30), serving)
            .await
            .expect("the server ends when the client leaves")
            .expect("no panic")
            .expect("served");
        assert_eq!(stopped, Stop::ClientLeft);
        assert_eq!(stopped.exit_code(), 0);
    }

    /// A raw 2025-06-18 client that declares `elicitation: {}` is asked with
    /// `elicitation/create` (form mode, `remember`), and its answer decides.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_raw_2025_06_18_client_is_asked_and_its_answer_decides() {
        let dir = tempfile::tempdir().expect("temp dir");
        let policy = dir.path().join("policy.toml");
        std::fs::write(
            &policy,
            "[[rule]]\nid = \"touch-asks\"\ndecision = \"ask\"\nprogram = \"touch\"\n",
        )
        .expect("policy");
        let Command::Mcp(args) = cli(&[
            "mcp",
            "--cwd",
            dir.path().to_str().expect("utf-8"),
            "--policy",
            policy.to_str().expect("utf-8"),
        ])
        .command
        else {
            unreachable!("parsed as mcp");
        };
        let (setup, env, executor) =
            crate::prepare(&args.common, None, None, no_secrets).expect("prepares");
        let bridge = agent_exec::Bridge::new(executor, setup.cwd.clone(), false);
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        let serving = {
            let env = Arc::clone(&env);
            tokio::spawn(async move { serve(bridge, server_read, server_write, &env).await })
        };
        let (read, mut write) = tokio::io::split(client);
        let mut lines = BufReader::new(read).lines();
        let mut send = async |message: Value| {
            write
                .write_all(format!("{message}\n").as_bytes())
                .await
                .expect("write");
        };
        send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        )
        .await;
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        for (id, answer) in [(1, "accept"), (2, "decline")] {
            send(
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "Bash", "arguments": {"command": format!("touch f{id}")}}}),
            )
            .await;
            let result = loop {
                let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                    .await
                    .expect("a message in time")
                    .expect("read")
                    .expect("a line");
                let message: Value = serde_json::from_str(&line).expect("JSON");
                if message["method"] == "elicitation/create" {
                    let params = &message["params"];
                    assert_eq!(params["mode"], "form", "{message}");
                    assert!(
                        params["message"]
                            .as_str()
                            .is_some_and(|m| m.contains(&format!("touch f{id}"))),
                        "{message}"
                    );
                    assert_eq!(
                        params["requestedSchema"]["properties"]["remember"]["type"],
                        "boolean"
                    );
                    send(json!({"jsonrpc": "2.0", "id": message["id"], "result": {
                        "action": answer, "content": {"remember": false}}}))
                    .await;
                } else if message["id"] == id {
                    break message["result"].clone();
                }
            };
            let ran = dir.path().join(format!("f{id}")).exists();
            assert_eq!(ran, answer == "accept", "{result}");
            assert_eq!(result["isError"], answer != "accept", "{result}");
        }
        write.shutdown().await.expect("close");
        let stopped = tokio::time::timeout(Duration::from_secs(30), serving)
            .await
            .expect("ends")
            .expect("no panic")
            .expect("served");
        assert_eq!(stopped, Stop::ClientLeft);
    }
}
