//! Arbitrary JSON-RPC lines into the MCP server loop, after a valid
//! handshake, in dry-run mode (no process is spawned), through the
//! binary's own transport (`agent_exec::Framed`: line reader, size cap, id
//! window, ids in flight, error lines), with a small line cap so short
//! input reaches the over-long-line path. The server must answer only with
//! JSON-RPC 2.0 objects, never panic, and end cleanly at EOF.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agent_exec::{Bridge, Framed};
use exec_tools::{ExecConfig, ExecEnvironment, register_execution_tools};
use libfuzzer_sys::fuzz_target;
use rmcp::ServiceExt as _;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tool_core::{ToolExecutor, ToolRegistry};

struct World {
    runtime: tokio::runtime::Runtime,
    env: Arc<ExecEnvironment>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let dir = std::env::temp_dir();
        World {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
            env: Arc::new(ExecEnvironment::new(ExecConfig::new(
                vec![dir.clone()],
                dir,
            ))),
        }
    })
}

const HANDSHAKE: &str = concat!(
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#,
    "\n",
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    "\n"
);

/// The line cap the fuzzed transport runs with (the binary's is 16 MiB):
/// longer input lines take the over-long path.
const MAX_LINE: usize = 1024;

/// How much of an over-long line is searched for its id.
const ID_WINDOW: usize = 96;

fuzz_target!(
    init: { std::panic::set_hook(Box::new(|info| eprintln!("panic: {info}"))); },
    |data: &[u8]| {
        let world = world();
        let mut registry = ToolRegistry::new();
        register_execution_tools(&mut registry, &world.env).expect("registers");
        let bridge = Bridge::new(ToolExecutor::new(Arc::new(registry)), std::env::temp_dir(), true);
        world.runtime.block_on(async {
            let (client, server) = tokio::io::duplex(1 << 20);
            let (server_read, server_write) = tokio::io::split(server);
            let (transport, _closed) =
                Framed::with_limits(server_read, server_write, MAX_LINE, ID_WINDOW);
            let service = transport.track(bridge);
            let serving = tokio::spawn(async move {
                if let Ok(running) = service.serve(transport).await {
                    let _ = running.waiting().await;
                }
            });
            let (read, mut write) = tokio::io::split(client);
            let mut input = HANDSHAKE.as_bytes().to_vec();
            input.extend_from_slice(data);
            input.push(b'\n');
            let _ = write.write_all(&input).await;
            let _ = write.shutdown().await;
            drop(write);
            let mut lines = BufReader::new(read).lines();
            loop {
                match tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await {
                    Ok(Ok(Some(line))) => {
                        let message: serde_json::Value =
                            serde_json::from_str(&line).expect("the server writes JSON only");
                        assert_eq!(message["jsonrpc"], "2.0", "{line}");
                        // An answer carries its id (`null` when none was
                        // read), and an error its code and message.
                        if message.get("method").is_none() {
                            let id = message.get("id").expect("an answer has an id");
                            assert!(id.is_null() || id.is_number() || id.is_string(), "{line}");
                        }
                        if let Some(error) = message.get("error") {
                            assert!(error["code"].is_i64(), "{line}");
                            assert!(error["message"].is_string(), "{line}");
                        }
                    }
                    Ok(Ok(None) | Err(_)) => break,
                    Err(_) => panic!("the server went silent without closing"),
                }
            }
            tokio::time::timeout(Duration::from_secs(5), serving)
                .await
                .expect("the server ends at EOF")
                .expect("the server task does not panic");
        });
    }
);
