//! `KillShell`: ending a background shell and everything it started.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use shell_runtime::{KILL_GRACE, KillOutcome};
use tool_core::{ExecutionContext, Tool, ToolCategory, ToolResult};

use crate::audit::AuditEntry;
use crate::bash_output::not_found;
use crate::environment::ExecEnvironment;

/// Arguments of `KillShell`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillShellParams {
    /// The id of the background shell to end.
    pub shell_id: String,
}

/// Ends a background shell and everything it started.
#[derive(Debug, Clone)]
pub struct KillShellTool {
    env: Arc<ExecEnvironment>,
}

impl KillShellTool {
    /// The tool over shared state.
    pub fn new(env: Arc<ExecEnvironment>) -> Self {
        Self { env }
    }
}

#[async_trait]
impl Tool for KillShellTool {
    type Params = KillShellParams;

    fn name(&self) -> &str {
        "KillShell"
    }

    fn description(&self) -> String {
        "Stops a background shell started by Bash, with every process it started (SIGTERM, then SIGKILL after 2 s). \
Stopping a shell that already ended is not an error; the answer says how it ended."
            .to_owned()
    }

    fn category(&self) -> ToolCategory {
        ToolCategory::Execution
    }

    async fn execute(&self, _context: &ExecutionContext, params: KillShellParams) -> ToolResult {
        let env = &self.env;
        let id = params.shell_id;
        let Some(shell) = env.manager.get(&id) else {
            return not_found(env, &id);
        };
        let outcome = env.manager.kill(&id, KILL_GRACE).await;
        let base = |result: ToolResult| {
            result
                .with_meta("shell_id", id.clone())
                .with_meta("command", env.redact(shell.command()))
                .with_meta(
                    "duration_ms",
                    u64::try_from(shell.duration().as_millis()).unwrap_or(u64::MAX),
                )
                .with_meta("status", shell.status().as_str())
        };
        let answer = match outcome {
            Ok(KillOutcome::Terminated) => base(ToolResult::ok(format!("Shell {id} terminated"))),
            Ok(KillOutcome::AlreadyStopped(status)) => base(
                ToolResult::ok(format!("Shell {id} already stopped (status: {status})"))
                    .with_meta("already_stopped", true),
            ),
            Err(_) => return not_found(env, &id),
        };
        // The line holds the shell's command and its status after the call.
        if let Some(log) = &env.config.audit {
            let written = log.write(&AuditEntry {
                event: "call",
                call: log.next_call(),
                tool: "KillShell",
                command: Some(env.redact(shell.command())),
                status: Some(shell.status().as_str().to_owned()),
                duration_ms: Some(u64::try_from(shell.duration().as_millis()).unwrap_or(u64::MAX)),
                bash_id: Some(id.clone()),
                ..AuditEntry::default()
            });
            if let Err(error) = written {
                return ToolResult::fail(format!(
                    "{}\n[the audit log cannot be written: {}]",
                    answer.text(),
                    crate::error_chain(&error)
                ))
                .with_meta("audit_error", true);
            }
        }
        answer
    }
}
