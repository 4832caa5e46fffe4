//! `KillShell`: ending a background shell and everything it started.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use shell_runtime::{KILL_GRACE, KillOutcome};
use tool_core::{Answer, ExecutionContext, Tool, ToolAnnotations, ToolCategory};

use crate::audit::{AuditEntry, with_notes};
use crate::environment::ExecEnvironment;
use crate::metadata::{KillShellMetadata, capped_command};
use crate::shell_answer::not_found;

/// A `KillShell` answer.
type KillAnswer = Answer<KillShellMetadata>;

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
    type Metadata = KillShellMetadata;

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

    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations {
            title: Some("Stop a background shell".to_owned()),
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
        }
    }

    async fn execute(&self, context: &ExecutionContext, params: KillShellParams) -> KillAnswer {
        let id = Some(params.shell_id.clone());
        let answer = self.answer(context, params).await;
        // What the audit log could not do since the last answer.
        with_notes(
            self.env.config.audit.as_deref(),
            id.as_deref(),
            answer,
            |m| m.audit_error = Some(true),
        )
    }
}

impl KillShellTool {
    async fn answer(&self, context: &ExecutionContext, params: KillShellParams) -> KillAnswer {
        let env = &self.env;
        let id = params.shell_id;
        let Some(shell) = env.owners.shell(&env.manager, &id, context.principal()) else {
            return not_found(env, &id, context.principal());
        };
        let outcome = env.manager.kill(&id, KILL_GRACE).await;
        let base = |result: KillAnswer| {
            result.meta(|m| {
                m.status = Some(shell.status().as_str());
                m.shell_id = Some(id.clone());
                m.duration_ms =
                    Some(u64::try_from(shell.duration().as_millis()).unwrap_or(u64::MAX));
                m.command = Some(capped_command(&env.redact(shell.command())));
            })
        };
        let answer = match outcome {
            Ok(KillOutcome::Terminated) => base(KillAnswer::ok(format!("Shell {id} terminated"))),
            Ok(KillOutcome::AlreadyStopped(status)) => base(
                KillAnswer::ok(format!("Shell {id} already stopped (status: {status})"))
                    .meta(|m| m.already_stopped = Some(true)),
            ),
            Err(_) => return not_found(env, &id, context.principal()),
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
                return KillAnswer::fail(format!(
                    "{}\n[the audit log cannot be written: {}]",
                    answer.text(),
                    crate::error_chain(&error)
                ))
                .meta(|m| m.audit_error = Some(true));
            }
        }
        answer
    }
}
