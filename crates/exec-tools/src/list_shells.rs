//! `ListShells`: the caller's background shells, for an agent that lost
//! their ids (a restarted client, a compacted conversation).

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tool_core::{Answer, ExecutionContext, Tool, ToolAnnotations, ToolCategory};

use crate::audit::rfc3339;
use crate::environment::ExecEnvironment;
use crate::metadata::capped_command;

/// Arguments of `ListShells`: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListShellsParams {}

/// One shell as `ListShells` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ListedShell {
    /// The shell's id, for `BashOutput`, `WriteStdin` and `KillShell`.
    pub id: String,
    /// `pending`, `running`, `completed`, `failed`, `killed` or `timeout`.
    pub status: &'static str,
    /// The command (secrets redacted), at most its first 1000 characters.
    pub command: String,
    /// When it started, RFC 3339 in UTC.
    pub started_at: String,
    /// How long it has run (or ran), in milliseconds.
    pub duration_ms: u64,
    /// Its exit code, once it exited by itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// What a `ListShells` answer carries besides its text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ListShellsMetadata {
    /// The caller's shells, oldest first.
    pub shells: Vec<ListedShell>,
}

/// Lists the caller's background shells.
#[derive(Debug, Clone)]
pub struct ListShellsTool {
    env: Arc<ExecEnvironment>,
}

impl ListShellsTool {
    /// The tool over shared state.
    pub fn new(env: Arc<ExecEnvironment>) -> Self {
        Self { env }
    }
}

#[async_trait]
impl Tool for ListShellsTool {
    type Params = ListShellsParams;
    type Metadata = ListShellsMetadata;

    fn name(&self) -> &str {
        "ListShells"
    }

    fn description(&self) -> String {
        "Lists your background shells (started by Bash with `run_in_background: true`, or a `tty` command left waiting for input): id, status, start time and command, oldest first. \
Use it when you lost a shell's id; read one with BashOutput, stop it with KillShell."
            .to_owned()
    }

    fn category(&self) -> ToolCategory {
        ToolCategory::Execution
    }

    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations {
            title: Some("List background shells".to_owned()),
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
        }
    }

    async fn execute(
        &self,
        context: &ExecutionContext,
        _params: ListShellsParams,
    ) -> Answer<ListShellsMetadata> {
        let env = &self.env;
        let shells: Vec<ListedShell> = env
            .owners
            .shells_of(&env.manager, context.principal())
            .into_iter()
            .map(|(id, shell)| {
                let status = shell.status();
                ListedShell {
                    id,
                    status: status.as_str(),
                    command: capped_command(&env.redact(shell.command())),
                    started_at: rfc3339(shell.started_at()),
                    duration_ms: u64::try_from(shell.duration().as_millis()).unwrap_or(u64::MAX),
                    exit_code: shell
                        .exit()
                        .filter(|_| {
                            status.is_finished() && status != shell_runtime::ShellStatus::Timeout
                        })
                        .map(|exit| exit.code),
                }
            })
            .collect();
        let text = if shells.is_empty() {
            "No background shells.".to_owned()
        } else {
            let mut text = format!("{} background shell(s):", shells.len());
            for shell in &shells {
                text.push_str(&format!(
                    "\n{} ({}, started {}): {}",
                    shell.id, shell.status, shell.started_at, shell.command
                ));
            }
            text
        };
        Answer::ok(text).meta(|m: &mut ListShellsMetadata| m.shells = shells)
    }
}
