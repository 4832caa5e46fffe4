//! A small harness: a temp root, an environment of tools, calls by JSON.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    dead_code,
    unused_imports,
    unreachable_pub,
    reason = "test helpers shared by several test crates"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use exec_policy::EnvRules;
use exec_tools::{ExecConfig, ExecEnvironment, register_execution_tools};
use serde_json::{Value, json};
use tool_core::{ExecutionContext, ToolRegistry, ToolResult};

/// One test's world: a root directory, an output directory, the tools.
pub struct World {
    pub root: tempfile::TempDir,
    pub output: tempfile::TempDir,
    pub env: Arc<ExecEnvironment>,
    pub registry: ToolRegistry,
    pub context: ExecutionContext,
}

impl World {
    pub fn new() -> Self {
        Self::with(|config| config)
    }

    /// A world whose configuration `adjust` may change.
    pub fn with(adjust: impl FnOnce(ExecConfig) -> ExecConfig) -> Self {
        Self::with_env(std::env::vars().collect(), adjust)
    }

    pub fn with_env(
        vars: Vec<(String, String)>,
        adjust: impl FnOnce(ExecConfig) -> ExecConfig,
    ) -> Self {
        Self::build(vars, tempfile::tempdir().expect("output dir"), adjust)
    }

    /// A world whose output files and state live under `dir` (a small
    /// disk, say).
    pub fn with_output_dir(dir: &Path) -> Self {
        let output = tempfile::tempdir_in(dir).expect("output dir");
        Self::build(std::env::vars().collect(), output, |config| config)
    }

    fn build(
        vars: Vec<(String, String)>,
        output: tempfile::TempDir,
        adjust: impl FnOnce(ExecConfig) -> ExecConfig,
    ) -> Self {
        let root = tempfile::tempdir().expect("root");
        let root_path = std::fs::canonicalize(root.path()).expect("canonical root");
        let config = ExecConfig::new(vec![root_path.clone()], output.path().to_path_buf())
            .with_env(vars, &EnvRules::default());
        let env = Arc::new(ExecEnvironment::new(adjust(config)));
        let mut registry = ToolRegistry::new();
        register_execution_tools(&mut registry, &env).expect("registers");
        Self {
            root,
            output,
            env,
            registry,
            context: ExecutionContext::new(root_path),
        }
    }

    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path()).expect("canonical root")
    }

    pub async fn call(&self, tool: &str, args: Value) -> ToolResult {
        self.call_in(&self.context, tool, args).await
    }

    pub async fn call_in(&self, context: &ExecutionContext, tool: &str, args: Value) -> ToolResult {
        self.registry
            .get(tool)
            .expect("tool exists")
            .call(context, args)
            .await
    }

    pub async fn bash(&self, command: &str) -> ToolResult {
        self.call("Bash", json!({ "command": command })).await
    }

    /// Starts a background shell and returns its id.
    pub async fn background(&self, command: &str) -> String {
        let result = self
            .call(
                "Bash",
                json!({ "command": command, "run_in_background": true }),
            )
            .await;
        assert!(result.success, "{}", result.text());
        meta_str(&result, "bash_id")
    }

    /// Reads a background shell until `needle` shows up (10 s at most);
    /// returns everything read.
    pub async fn read_until(&self, id: &str, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = String::new();
        loop {
            let result = self.call("BashOutput", json!({ "bash_id": id })).await;
            seen.push_str(result.text());
            if seen.contains(needle) {
                return seen;
            }
            assert!(Instant::now() < deadline, "no {needle:?} in {seen:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn output_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.output.path())
            .expect("output dir")
            .flatten()
            .map(|entry| entry.path())
            .collect()
    }
}

pub fn meta(result: &ToolResult, key: &str) -> Value {
    result
        .metadata_value()
        .get(key)
        .cloned()
        .unwrap_or(Value::Null)
}

pub fn meta_str(result: &ToolResult, key: &str) -> String {
    meta(result, key).as_str().unwrap_or_default().to_owned()
}

pub use test_support::{alive, gone, pids_in};

pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
}
