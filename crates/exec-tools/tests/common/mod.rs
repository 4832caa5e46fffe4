//! A small harness: a temp root, an environment of tools, calls by JSON.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    dead_code,
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
        let root = tempfile::tempdir().expect("root");
        let output = tempfile::tempdir().expect("output dir");
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

/// True while `pid` is a live process (not gone, not a zombie, not reused).
pub fn alive(pid: u32) -> bool {
    // pid_max may be small (32768 here): a pid can be reused within seconds
    // under a parallel test run, so a process that started after this
    // moment is not the one asked about.
    let now_ticks = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(u64::MAX, |seconds| (seconds * 100.0) as u64 + 1);
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let zombie = fields
            .first()
            .is_some_and(|state| state.starts_with('Z') || state.starts_with('X'));
        let started: u64 = fields
            .get(19)
            .and_then(|ticks| ticks.parse().ok())
            .unwrap_or(0);
        !zombie && started <= now_ticks
    })
}

/// Polls until `pid` is gone (5 s at most).
pub async fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Pids printed by the command, one per line (`echo $!`); numbers inside
/// other lines (`[ended 1 background job(s)...]`) are not pids.
pub fn pids_in(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
}
