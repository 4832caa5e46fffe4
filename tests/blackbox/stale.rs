//! Clean-up of what dead servers left: their temp dirs (`agent-exec-<pid>-<n>`
//! under the temp dir) go once the `initialize` answer is out; a live
//! server's stay.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::alive;

/// A pid no process has: a child that ran and was reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("true starts");
    let pid = child.id();
    child.wait().expect("true ends");
    pid
}

#[test]
fn a_dead_servers_temp_dir_is_removed_after_start_up_and_a_live_ones_kept() {
    let base = tempfile::tempdir().expect("temp base");
    let cwd = tempfile::tempdir().expect("cwd");
    let dead = dead_pid();
    assert!(!alive(dead));
    let stale = base.path().join(format!("agent-exec-{dead}-0"));
    std::fs::create_dir_all(stale.join("state")).expect("plant the stale dir");
    std::fs::write(stale.join("bash-0.txt"), "old output").expect("plant a file");
    // This test process is alive: a dir named for it is a live server's.
    let live = base
        .path()
        .join(format!("agent-exec-{}-7", std::process::id()));
    std::fs::create_dir(&live).expect("plant the live dir");
    let unrelated = base.path().join("agent-exec-notapid-0");
    std::fs::create_dir(&unrelated).expect("plant an unrelated dir");

    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["mcp", "--cwd", cwd.path().to_str().expect("utf-8")])
        .env("TMPDIR", base.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "blackbox", "version": "0"}}});
    writeln!(stdin, "{initialize}").expect("write");
    stdin.flush().expect("flush");
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read");
    let answer: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(answer["id"], 1, "{line}");

    let deadline = Instant::now() + Duration::from_secs(10);
    while stale.exists() {
        assert!(
            Instant::now() < deadline,
            "the dead server's temp dir is still there"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(live.is_dir(), "a live server's temp dir was removed");
    assert!(unrelated.is_dir(), "a dir without a pid was removed");
    let own = format!("agent-exec-{}-", child.id());
    let own_dirs = std::fs::read_dir(base.path())
        .expect("read the base")
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&own))
        .count();
    assert_eq!(own_dirs, 1, "the server's own temp dir is under TMPDIR");

    drop(stdin);
    assert!(child.wait().expect("the server exits").success());
}
