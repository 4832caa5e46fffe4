//! `BashOutput`: reading what a background shell printed since the last read.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use regex::Regex;
use schemars::JsonSchema;
use serde::Deserialize;
use shell_runtime::{ShellProcess, TERMINAL_COLUMNS, TERMINAL_ROWS};
use tool_core::{ExecutionContext, Tool, ToolAnnotations, ToolCategory};

use crate::audit::with_notes;
use crate::environment::ExecEnvironment;
use crate::metadata::{ShellMetadata, capped_command};
use crate::shell_answer::{
    ShellAnswer, not_found, read_answer, read_answer_with, status_line, waiting_for_input,
};
use crate::until::{Fired, Until, UntilParams, wait_until};

/// The longest `wait_ms` (ten minutes, as a foreground call's longest timeout).
const MAX_WAIT_MS: u64 = 600_000;

/// Arguments of `BashOutput`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashOutputParams {
    /// The id `Bash` returned for a background shell (`shell_` and hex digits).
    pub bash_id: String,
    /// Keep only lines matching this regular expression (Rust `regex` syntax, matched anywhere in the line); the other lines are still consumed.
    pub filter: Option<String>,
    /// Wait up to this many milliseconds for the shell to finish (or, for a `tty` shell, to wait for input), or for `until`, before answering; returns early when it does. 0 answers at once.
    #[schemars(range(min = 0, max = MAX_WAIT_MS))]
    #[serde(default)]
    #[schemars(default = "zero")]
    pub wait_ms: u64,
    /// For a `tty` shell: answer the terminal's current screen (what a person would see, e.g. in vim, less, top) instead of the new output, which stays unread.
    #[serde(default)]
    #[schemars(default = "no")]
    pub screen: bool,
    /// Wait (up to `wait_ms`) for exactly one of: `regex` (a new line matches), `port` (a loopback TCP port accepts), `idle_ms` (no output for that long), `exit` (the shell ends). The shell ending ends any wait; one line after the output says what happened.
    pub until: Option<UntilParams>,
}

fn no() -> bool {
    false
}

fn zero() -> u64 {
    0
}

/// Reads new output of a background shell.
#[derive(Debug, Clone)]
pub struct BashOutputTool {
    env: Arc<ExecEnvironment>,
}

impl BashOutputTool {
    /// The tool over shared state.
    pub fn new(env: Arc<ExecEnvironment>) -> Self {
        Self { env }
    }
}

/// The terminal's screen, redacted, under the status line; the new output
/// stays unread.
fn screen_answer(env: &ExecEnvironment, id: &str, shell: &ShellProcess) -> ShellAnswer {
    let Some(screen) = shell.screen() else {
        return ShellAnswer::fail(format!("Shell {id} has no terminal"));
    };
    let waiting = waiting_for_input(shell);
    let status = shell.status();
    let text = format!(
        "{}\n\n{}",
        status_line(shell, waiting),
        env.redact(&screen.rows.join("\n"))
    );
    ShellAnswer::ok(text).meta(|m| {
        m.status = Some(status.as_str());
        m.bash_id = Some(id.to_owned());
        m.is_running = Some(!status.is_finished());
        m.waiting_for_input = Some(waiting);
        m.command = Some(capped_command(&env.redact(shell.command())));
        m.cursor_row = Some(screen.cursor_row);
        m.cursor_col = Some(screen.cursor_col);
    })
}

#[async_trait]
impl Tool for BashOutputTool {
    type Params = BashOutputParams;
    type Metadata = ShellMetadata;

    fn name(&self) -> &str {
        "BashOutput"
    }

    fn description(&self) -> String {
        format!(
            "Reads what a background shell (started by Bash with `run_in_background: true`) printed since the last read.\n\
\n\
- Answers `Status: running|completed|failed|killed|timeout` (with the exit code and duration once it ended), a blank line, then only the new output: stdout, then `[stderr]` and new stderr.\n\
- `filter` keeps only lines matching a regular expression; lines it drops are consumed all the same.\n\
- `wait_ms` waits up to that long for the shell to finish (it returns early when it does): use it instead of polling in a loop.\n\
- `until` waits, up to `wait_ms`, for one thing instead: `{{\"regex\": \"ready|listening\"}}` a new line matching (lines printed but not yet read count), `{{\"port\": 5173}}` a TCP port on localhost accepting connections, `{{\"idle_ms\": 2000}}` no output for that long, or `{{\"exit\": true}}` the shell ending. The shell ending ends any wait. One line after the output says what happened: `[until: regex matched]`, `[until: port N open]`, `[until: idle N ms]`, `[until: exited]` or `[until: wait ran out after N ms]`.\n\
- Dev servers, watchers and anything else that keeps running: start it with Bash `run_in_background: true`, then call BashOutput with `until` its ready line or its port and a `wait_ms` such as 60000, instead of `sleep` or repeated reads.\n\
- For a shell started with `tty: true`, `screen: true` answers the terminal's current screen ({TERMINAL_ROWS} rows of {TERMINAL_COLUMNS} columns, as a person would see it in vim, less or top) instead of the new output; the status line reads `Status: running (waiting for input)` while it waits for input.\n\
- If output arrived faster than it was read, the oldest unread part is dropped and one line says how many bytes (`missed_bytes` in the metadata); the output file keeps it, up to its cap."
        )
    }

    fn category(&self) -> ToolCategory {
        ToolCategory::Execution
    }

    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations {
            title: Some("Read a background shell's output".to_owned()),
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(false),
            open_world_hint: Some(false),
        }
    }

    async fn execute(&self, context: &ExecutionContext, params: BashOutputParams) -> ShellAnswer {
        let id = Some(params.bash_id.clone());
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

impl BashOutputTool {
    async fn answer(&self, context: &ExecutionContext, params: BashOutputParams) -> ShellAnswer {
        let env = &self.env;
        let filter = match params.filter.as_deref().map(Regex::new).transpose() {
            Ok(filter) => filter,
            Err(error) => return ShellAnswer::fail(format!("Invalid filter regex: {error}")),
        };
        if params.screen && filter.is_some() {
            return ShellAnswer::fail(
                "`filter` cannot be used with `screen`: the screen is answered whole",
            );
        }
        let until = match params.until.as_ref().map(Until::parse).transpose() {
            Ok(until) => until,
            Err(message) => return ShellAnswer::fail(message),
        };
        let Some(shell) = env
            .owners
            .shell(&env.manager, &params.bash_id, context.principal())
        else {
            return not_found(env, &params.bash_id, context.principal());
        };
        if params.screen && !shell.has_terminal() {
            return ShellAnswer::fail(format!(
                "Shell {} has no terminal: `screen` needs a shell started with Bash `tty: true`",
                params.bash_id
            ));
        }
        let wait = Duration::from_millis(params.wait_ms);
        let mut fired = None;
        if let Some(until) = &until {
            let started = tokio::time::Instant::now();
            fired = Some(tokio::select! {
                fired = wait_until(&shell, until, wait) => fired,
                // The client gave up: answered (by the library; MCP sends
                // nothing) as a wait that ran out then.
                () = context.cancellation().cancelled() => Fired::RanOut(
                    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                ),
            });
        } else if params.wait_ms > 0 {
            let _ = tokio::time::timeout(wait, async {
                tokio::select! {
                    _ = shell.wait() => {}
                    () = crate::input_wait::input_wait(&shell) => {}
                }
            })
            .await;
        }
        let answer = if params.screen {
            screen_answer(env, &params.bash_id, &shell)
        } else if let Some(fired) = fired {
            read_answer_with(
                env,
                &params.bash_id,
                &shell,
                filter.as_ref(),
                false,
                Some(fired.line()),
            )
        } else {
            read_answer(env, &params.bash_id, &shell, filter.as_ref(), false)
        };
        let Some(fired) = fired else {
            return answer;
        };
        let mut answer = answer.meta(|m| m.until = Some(fired.name()));
        if params.screen && answer.success {
            answer.output.push('\n');
            answer.output.push_str(&fired.line());
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tool_core::Tool;

    use super::BashOutputTool;
    use crate::environment::{ExecConfig, ExecEnvironment};

    #[test]
    fn the_description_states_the_terminal_in_use() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let config = ExecConfig::new(vec![dir.path().to_path_buf()], dir.path().to_path_buf());
        let tool = BashOutputTool::new(Arc::new(ExecEnvironment::new(config)));
        let text = tool.description();
        let screen = format!(
            "{} rows of {} columns",
            shell_runtime::TERMINAL_ROWS,
            shell_runtime::TERMINAL_COLUMNS
        );
        assert!(text.contains(&screen), "{text}");
    }
}
