//! The audit log through the tools: background shells get their `ended`
//! line when they end, `KillShell` gets a line with the shell's command and
//! its status after the call.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{World, meta_str};
use exec_tools::AuditLog;
use serde_json::{Value, json};

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect()
}

/// Waits (generously) until the log has `count` lines.
async fn wait_for_lines(path: &Path, count: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let lines = lines(path);
        if lines.len() >= count || started.elapsed() > Duration::from_secs(20) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn world_with_log() -> (World, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("log dir");
    let path = dir.path().join("audit.jsonl");
    let log = Arc::new(AuditLog::open(&path, "off").expect("opens"));
    let world = World::with(|mut config| {
        config.audit = Some(log);
        config
    });
    (world, dir, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_shell_gets_an_ended_line_when_it_ends() {
    let (world, _dir, path) = world_with_log();
    let id = world.background("printf abc").await;
    let lines = wait_for_lines(&path, 2).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["event"], "decision");
    assert_eq!(lines[0]["status"], "running");
    assert_eq!(lines[1]["event"], "ended");
    assert_eq!(lines[1]["bash_id"], id.as_str());
    assert_eq!(lines[1]["call"], lines[0]["call"]);
    assert_eq!(lines[1]["exit_code"], 0);
    assert_eq!(lines[1]["output_bytes"], 3);
    assert_eq!(lines[1]["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_shell_writes_the_command_and_its_status_after_the_call() {
    let (world, _dir, path) = world_with_log();
    let id = world.background("sleep 30").await;
    let killed = world.call("KillShell", json!({ "shell_id": id })).await;
    assert!(killed.success, "{}", killed.text());
    let lines = wait_for_lines(&path, 3).await;
    let kill = lines
        .iter()
        .find(|line| line["tool"] == "KillShell")
        .expect("a KillShell line");
    assert_eq!(kill["command"], "sleep 30");
    assert_eq!(kill["bash_id"], id.as_str());
    assert_eq!(kill["status"], meta_str(&killed, "status").as_str());
    assert_eq!(kill["status"], "killed");
    // The shell's own end line follows.
    let ended = lines
        .iter()
        .find(|line| line["event"] == "ended")
        .expect("an ended line");
    assert_eq!(ended["status"], "killed");
}
