//! `agent-exec mcp`: the bridge served over stdio until the client leaves
//! or a signal arrives.

use agent_exec::Bridge;
use anyhow::Context as _;
use rmcp::RoleServer;
use rmcp::ServiceExt as _;
use rmcp::transport::IntoTransport;

/// Serves MCP on `transport` (stdin/stdout in the binary) until the client
/// closes it or SIGTERM/SIGINT arrives.
pub(crate) async fn serve<T, E, A>(bridge: Bridge, transport: T) -> anyhow::Result<()>
where
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = bridge
        .serve(transport)
        .await
        .context("MCP initialization failed")?;
    let cancel = running.cancellation_token();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        ended = running.waiting() => {
            tracing::info!(reason = ?ended.ok(), "client disconnected");
        }
        _ = terminate.recv() => {
            tracing::info!("SIGTERM: shutting down");
            cancel.cancel();
        }
        _ = tokio::signal::ctrl_c() => {
            tracing::info!("SIGINT: shutting down");
            cancel.cancel();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

    use super::serve;
    use crate::cli::Command;
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
        let serving = tokio::spawn(serve(bridge, server));
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
            Some(3)
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
        tokio::time::timeout(Duration::from_secs(30), serving)
            .await
            .expect("the server ends when the client leaves")
            .expect("no panic")
            .expect("served");
        env.shutdown().await;
    }
}
