//! What the tests driving the server with rmcp's own client share: the
//! server started as `agent-exec mcp --cwd DIR` under rmcp's child-process
//! transport, a tool call, an answer's text.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::Value;

/// `agent-exec mcp --cwd DIR`, for the caller to add arguments and
/// variables to before [`serve`].
pub(crate) fn mcp_command(dir: &std::path::Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-exec"));
    command.arg("mcp").arg("--cwd").arg(dir);
    command
}

/// Starts `command` and initializes a session with `handler` as the
/// client; the session and the server's pid.
pub(crate) async fn serve<H: ClientHandler>(
    handler: H,
    command: tokio::process::Command,
) -> (RunningService<RoleClient, H>, u32) {
    let transport = TokioChildProcess::new(command).expect("the server starts");
    let pid = transport.id().expect("a pid");
    let service = handler.serve(transport).await.expect("initializes");
    (service, pid)
}

/// A JSON object as a call's arguments.
pub(crate) fn arguments(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("arguments are an object"),
    }
}

/// `tools/call` of `tool` with `args` (an object), answered.
pub(crate) async fn call<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &'static str,
    args: Value,
) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments(args)))
        .await
        .expect("the call is answered")
}

/// The answer's text (its first content block).
pub(crate) fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|block| block.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}
