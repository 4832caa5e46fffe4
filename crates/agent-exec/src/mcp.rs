//! `agent-exec mcp`: the bridge served over stdio until the client leaves
//! or a signal arrives.

use agent_exec::Bridge;
use rmcp::ServiceExt as _;

/// Serves MCP on stdin/stdout until stdin closes or SIGTERM/SIGINT arrives.
pub(crate) async fn serve(bridge: Bridge) -> anyhow::Result<()> {
    let running = bridge
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| anyhow::anyhow!("MCP initialization failed: {error}"))?;
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
