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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_log_is_recreated_and_the_next_answer_says_so() {
    let (world, _dir, path) = world_with_log();
    assert_eq!(world.bash("echo one").await.text(), "one\n");
    assert_eq!(lines(&path).len(), 2);
    std::fs::remove_file(&path).expect("removes the log");
    let next = world.bash("echo two").await;
    assert!(next.success, "{}", next.text());
    assert_eq!(
        next.text(),
        format!(
            "two\n[audit: the log file {} was removed or replaced; logging to a new file]",
            path.display()
        )
    );
    let again = lines(&path);
    assert_eq!(
        again.len(),
        2,
        "the new call's lines, in a new file: {again:?}"
    );
    assert_eq!(again[0]["command"], "echo two");
    assert_eq!(again[1]["event"], "ended");
    assert_eq!(
        world.bash("echo three").await.text(),
        "three\n",
        "said once"
    );
}

/// Fills the disk `dir` is on: whole pages, so the log's last page keeps
/// what room it has and the next lines end up cut short by the disk.
fn fill(dir: &Path) -> std::path::PathBuf {
    use std::io::Write as _;
    let filler = dir.join("filler");
    let mut file = std::fs::File::create(&filler).expect("filler");
    while file.write_all(&[b'x'; 4096]).is_ok() {}
    filler
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_tears_no_line_and_drops_no_ended_line() {
    let Some(disk) = test_support::SmallDisk::mount(256) else {
        return;
    };
    let path = disk.path().join("audit.jsonl");
    let log = Arc::new(AuditLog::open(&path, "off").expect("opens"));
    let world = World::with(|mut config| {
        config.audit = Some(Arc::clone(&log));
        config
    });
    let marker = world.root().join("go");
    let id = world
        .background(&format!(
            "while [ ! -e {} ]; do sleep 0.05; done; echo done",
            marker.display()
        ))
        .await;
    let filler = fill(disk.path());
    // Calls until the log's last page is used up: one line is cut short
    // by the disk, the next has no room at all.
    let mut blocked = 0;
    for _ in 0..200 {
        let answer = world.bash("true").await;
        if !answer.success {
            assert!(
                answer.text().starts_with(
                    "Command blocked: nothing ran because the audit log cannot be written"
                ),
                "{}",
                answer.text()
            );
            blocked += 1;
            if blocked == 2 {
                break;
            }
        }
    }
    assert_eq!(blocked, 2, "the disk filled up");
    // The shell ends while nothing can be written.
    std::fs::write(&marker, "").expect("marker");
    // Its next answer says its end line waits for a retry (read again
    // while the line is still being tried once the shell has ended).
    let started = Instant::now();
    let read = loop {
        let read = world
            .call("BashOutput", json!({ "bash_id": id, "wait_ms": 20000 }))
            .await;
        if read.text().contains("[audit: ") || started.elapsed() > Duration::from_secs(20) {
            break read;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        read.text().starts_with("Status: completed"),
        "{}",
        read.text()
    );
    assert!(
        read.text()
            .contains("\n[audit: the end of this command could not be logged: ")
            && read.text().ends_with("; will retry]"),
        "{}",
        read.text()
    );
    assert_eq!(common::meta(&read, "audit_error"), true);

    std::fs::remove_file(&filler).expect("frees the disk");
    assert_eq!(world.bash("echo back").await.text(), "back\n");
    assert_eq!(log.pending(), 0);
    let text = std::fs::read_to_string(&path).expect("the log");
    let all: Vec<Value> = text
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("a torn line: {e}: {line}"))
        })
        .collect();
    let ended = all
        .iter()
        .position(|line| line["event"] == "ended" && line["bash_id"] == id.as_str())
        .expect("the background shell's ended line");
    assert_eq!(all[ended]["status"], "completed");
    let back = all
        .iter()
        .position(|line| line["command"] == "echo back")
        .expect("the later call's line");
    assert!(ended < back, "the retried line goes first");
}
