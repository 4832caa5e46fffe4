//! `agent-exec run -- COMMAND...`: one Bash call through the full pipeline.

use std::io::Write;
use std::process::ExitCode;

use serde_json::{Value, json};
use tool_core::{CancellationToken, ExecutionContext, ToolExecutor};

/// Exit code for a command that timed out, as `timeout(1)` uses.
const EXIT_TIMEOUT: u8 = 124;
/// Exit code after Ctrl+C, as a shell reports SIGINT.
const EXIT_INTERRUPTED: u8 = 130;

/// Runs `words` (joined with spaces, as ssh does) and returns the exit code
/// the contract gives: the command's own, 124 on timeout, 2 when refused.
/// The result goes to `out` (stdout); a refusal to stderr.
pub(crate) async fn run(
    executor: &ToolExecutor,
    context: ExecutionContext,
    words: &[String],
    timeout: Option<u64>,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let token = CancellationToken::new();
    let context = context.with_cancellation(token.clone());
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            token.cancel();
        }
    });
    let mut arguments = json!({ "command": words.join(" ") });
    if let Some(timeout) = timeout {
        arguments["timeout"] = json!(timeout);
    }
    let executed = executor.execute("Bash", &context, arguments).await?;
    interrupt.abort();
    let result = executed.result;
    let metadata = result.metadata_value();
    let status = metadata.get("status").and_then(Value::as_str);
    let exit_code = metadata.get("exit_code").and_then(Value::as_i64);
    let ran =
        status != Some("blocked") && (exit_code.is_some() || status.is_some() || result.success);
    let code = match (status, exit_code) {
        (Some("timeout"), _) => EXIT_TIMEOUT,
        (Some("killed"), _) => EXIT_INTERRUPTED,
        (_, Some(code)) => u8::try_from(code).unwrap_or(1),
        _ if result.success => 0,
        _ => crate::EXIT_REFUSED,
    };
    if ran {
        out.write_all(result.text().as_bytes())?;
        if !result.text().ends_with('\n') && !result.text().is_empty() {
            out.write_all(b"\n")?;
        }
    } else {
        crate::report(result.text());
    }
    Ok(ExitCode::from(code))
}
