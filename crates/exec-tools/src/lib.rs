//! The execution tools (`Bash`, `BashOutput`, `KillShell`, `WriteStdin`),
//! composed from exec-policy's decisions and shell-runtime's mechanism.
//!
//! Hosts build an [`ExecEnvironment`] from an [`ExecConfig`], add the tools
//! to a [`ToolRegistry`] with [`register_execution_tools`] and serve it
//! however they like (MCP, an agent loop, a CLI).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use exec_tools::{ExecConfig, ExecEnvironment, register_execution_tools};
//! use tool_core::{ExecutionContext, ToolExecutor, ToolRegistry};
//!
//! let project = std::env::current_dir()?;
//! let config = ExecConfig::new(vec![project.clone()], std::env::temp_dir());
//! let env = Arc::new(ExecEnvironment::new(config));
//! let mut registry = ToolRegistry::new();
//! register_execution_tools(&mut registry, &env)?;
//! let executor = ToolExecutor::new(Arc::new(registry));
//! let context = ExecutionContext::new(project);
//! let call = serde_json::json!({ "command": "cd src && export MODE=fast" });
//! executor.execute("Bash", &context, call).await?;
//! let call = serde_json::json!({ "command": "pwd; echo $MODE" });
//! let answer = executor.execute("Bash", &context, call).await?;
//! println!("{}", answer.result.text()); // .../src, then fast
//! env.shutdown().await;
//! # Ok(()) }
//! ```

mod approval;
mod audit;
mod bash;
mod bash_output;
mod binding;
mod carried_state;
mod egress;
mod environment;
mod exec_judge;
mod gate;
mod input_wait;
mod kill_shell;
mod list_shells;
mod metadata;
mod network;
mod question;
mod quote;
mod render;
mod save;
mod shell_answer;
mod shells;
mod text;
mod until;
mod write_stdin;
mod write_walls;

use std::sync::Arc;

use tool_core::{RegistryError, ToolRegistry};

pub use audit::{AuditEntry, AuditError, AuditLog, NetworkAudit};
pub use bash::{BashParams, BashTool};
pub use bash_output::{BashOutputParams, BashOutputTool};
pub use egress::EgressGate;
pub use environment::{
    AskFallback, DEFAULT_ASK_TIMEOUT, DEFAULT_TIMEOUT, ExecConfig, ExecEnvironment,
    MAX_OUTPUT_CHARS, OUTPUT_FILE_CAP, OUTPUT_TOTAL_CAP, WriteWalls, prepare_sandbox,
};
pub use kill_shell::{KillShellParams, KillShellTool};
pub use list_shells::{ListShellsMetadata, ListShellsParams, ListShellsTool, ListedShell};
pub use metadata::{BashMetadata, COMMAND_META_CHARS, KillShellMetadata, ShellMetadata};
pub use until::UntilParams;
pub use write_stdin::{WriteStdinParams, WriteStdinTool};

/// Names bash manages itself, never carried; public only for the
/// carried-state property test.
#[doc(hidden)]
pub use carried_state::is_shell_managed;

/// Quoting for shell text; public only for the fuzz targets.
#[doc(hidden)]
pub use quote::quote;

/// Adds `Bash`, `BashOutput`, `KillShell`, `WriteStdin` and `ListShells`,
/// sharing `env`, to `registry`.
pub fn register_execution_tools(
    registry: &mut ToolRegistry,
    env: &Arc<ExecEnvironment>,
) -> Result<(), RegistryError> {
    registry.register(BashTool::new(Arc::clone(env)))?;
    registry.register(BashOutputTool::new(Arc::clone(env)))?;
    registry.register(KillShellTool::new(Arc::clone(env)))?;
    registry.register(WriteStdinTool::new(Arc::clone(env)))?;
    registry.register(ListShellsTool::new(Arc::clone(env)))?;
    Ok(())
}

/// `error` followed by each of its causes, joined by `: `, for an answer
/// read as one line. Errors keep their cause out of their own message and
/// return it from `source()`, so printing only `{error}` would drop it.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        text.push_str(": ");
        text.push_str(&error.to_string());
        cause = error.source();
    }
    text
}

/// A registry holding exactly the execution tools with default settings
/// (the current directory as the only root, the system temp dir for
/// output): what `agent-exec schema` and `cargo xtask codegen` describe.
pub fn execution_registry() -> Result<ToolRegistry, RegistryError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::env::temp_dir());
    let config = ExecConfig::new(vec![cwd], std::env::temp_dir());
    let env = Arc::new(ExecEnvironment::new(config));
    let mut registry = ToolRegistry::new();
    register_execution_tools(&mut registry, &env)?;
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;
    use shell_runtime::{ManagerError, SpawnError};
    use tool_core::{ExecutionContext, Principal, ToolExecutor};

    use super::*;

    /// Each tool's module uses the shared modules (the gate, the shell
    /// answer, the input wait), never another tool's.
    #[test]
    fn no_tool_imports_another_tools_module() {
        let tools = [
            ("bash", include_str!("bash.rs")),
            ("bash_output", include_str!("bash_output.rs")),
            ("kill_shell", include_str!("kill_shell.rs")),
            ("list_shells", include_str!("list_shells.rs")),
            ("write_stdin", include_str!("write_stdin.rs")),
        ];
        for (name, source) in tools {
            for (other, _) in tools.iter().filter(|(other, _)| *other != name) {
                let path = format!("crate::{other}::");
                let import = format!("use crate::{other}");
                assert!(
                    !source.contains(&path) && !source.contains(&import),
                    "{name}.rs uses {other}.rs: move what both need to a shared module"
                );
            }
        }
    }

    /// One server, two principals: each sees, reads, types into and kills
    /// only its own shells; the other's answer exactly as an unknown id.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn another_principals_shell_answers_as_an_unknown_id() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut config = ExecConfig::new(vec![dir.path().to_path_buf()], dir.path().to_path_buf());
        config
            .env
            .vars
            .insert("PATH".to_owned(), std::env::var("PATH").unwrap_or_default());
        let env = Arc::new(ExecEnvironment::new(config));
        let mut registry = ToolRegistry::new();
        register_execution_tools(&mut registry, &env).expect("the tools register");
        let executor = ToolExecutor::new(Arc::new(registry));
        let alice = ExecutionContext::new(dir.path()).with_principal(Principal::named("alice"));
        let bob = ExecutionContext::new(dir.path()).with_principal(Principal::named("bob"));
        let started = executor
            .execute(
                "Bash",
                &alice,
                json!({ "command": "echo secret-work; sleep 60", "run_in_background": true }),
            )
            .await
            .expect("Bash answers");
        let id = started.result.metadata["bash_id"]
            .as_str()
            .expect("a background shell")
            .to_owned();
        let unknown = executor
            .execute("BashOutput", &bob, json!({ "bash_id": "shell_00000000" }))
            .await
            .expect("BashOutput answers");
        let expected = unknown.result.text().replace("shell_00000000", &id);
        assert_eq!(
            expected,
            format!("Shell {id} not found. No background shells are known.")
        );
        for (tool, arguments) in [
            ("BashOutput", json!({ "bash_id": id })),
            (
                "WriteStdin",
                json!({ "bash_id": id, "input": "x\n", "wait_ms": 0 }),
            ),
            ("KillShell", json!({ "shell_id": id })),
        ] {
            let answer = executor
                .execute(tool, &bob, arguments)
                .await
                .expect("the tool answers");
            assert!(!answer.result.success, "{tool}: {answer:?}");
            assert_eq!(answer.result.text(), expected, "{tool}");
        }
        // Alice's shell still runs, and she reads it.
        let read = executor
            .execute(
                "BashOutput",
                &alice,
                json!({ "bash_id": id, "until": { "regex": "secret-work" }, "wait_ms": 20000 }),
            )
            .await
            .expect("BashOutput answers");
        assert!(read.result.success, "{read:?}");
        assert!(read.result.text().contains("secret-work"), "{read:?}");
        assert_eq!(read.result.metadata["status"], "running");
        // ListShells shows each principal only its own.
        for (context, expected) in [(&alice, json!([id])), (&bob, json!([]))] {
            let listed = executor
                .execute("ListShells", context, json!({}))
                .await
                .expect("ListShells answers");
            let ids: Vec<_> = listed.result.metadata["shells"]
                .as_array()
                .expect("shells")
                .iter()
                .map(|shell| shell["id"].clone())
                .collect();
            assert_eq!(json!(ids), expected, "{listed:?}");
        }
        // Her unknown-id listing names it; Bob's stays empty.
        let listing = executor
            .execute("BashOutput", &alice, json!({ "bash_id": "shell_00000000" }))
            .await
            .expect("BashOutput answers");
        assert!(listing.result.text().contains(&id), "{listing:?}");
        let killed = executor
            .execute("KillShell", &alice, json!({ "shell_id": id }))
            .await
            .expect("KillShell answers");
        assert!(killed.result.success, "{killed:?}");
        env.shutdown().await;
    }

    /// Ids are 8 hex digits by default and 32 (128 random bits) when the
    /// server asks for long handles.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn long_handles_make_ids_of_32_hex_digits() {
        for (long_handles, digits) in [(false, 8), (true, 32)] {
            let dir = tempfile::tempdir().expect("a temp dir");
            let mut config =
                ExecConfig::new(vec![dir.path().to_path_buf()], dir.path().to_path_buf());
            config.long_handles = long_handles;
            let env = Arc::new(ExecEnvironment::new(config));
            let mut registry = ToolRegistry::new();
            register_execution_tools(&mut registry, &env).expect("the tools register");
            let executor = ToolExecutor::new(Arc::new(registry));
            let context = ExecutionContext::new(dir.path());
            let started = executor
                .execute(
                    "Bash",
                    &context,
                    json!({ "command": "sleep 30", "run_in_background": true }),
                )
                .await
                .expect("Bash answers");
            let id = started.result.metadata["bash_id"]
                .as_str()
                .expect("a background shell")
                .to_owned();
            let hex = id.strip_prefix("shell_").expect("the prefix");
            assert_eq!(hex.len(), digits, "{id}");
            assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
            let read = executor
                .execute("BashOutput", &context, json!({ "bash_id": id }))
                .await
                .expect("BashOutput answers");
            assert!(read.result.success, "{read:?}");
            env.shutdown().await;
        }
    }

    #[test]
    fn an_error_chain_names_every_cause_once() {
        let error = ManagerError::Spawn(SpawnError::ProgramNotFound {
            program: PathBuf::from("bash"),
            source: std::io::Error::from_raw_os_error(2),
        });
        assert_eq!(
            error_chain(&error),
            "cannot start `bash`: No such file or directory (os error 2)"
        );
    }
}
