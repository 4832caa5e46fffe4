//! The audit log's integrity through `agent-exec mcp`: on a full disk no
//! line is torn and a background shell's `ended` line is kept, retried and
//! flagged until space returns; a log removed or replaced mid-session is
//! said so in the next answer, and later lines land in the new file.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::rmcp_support::{call, mcp_command, serve, text};

/// Every line of the log, each of which must be a whole JSON object.
fn whole_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("the audit log exists");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "the log ends in a torn line: {text:?}"
    );
    text.lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|error| panic!("torn line {line:?}: {error}"))
        })
        .collect()
}

fn bash_id(answer: &CallToolResult) -> Value {
    answer.structured_content.as_ref().expect("metadata")["bash_id"].clone()
}

/// Fills every free page of the disk `dir` is on; the filler's path.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write as _;
    let filler = dir.join("filler");
    let mut file = std::fs::File::create(&filler).expect("filler");
    while file.write_all(&[b'x'; 4096]).is_ok() {}
    filler
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_full_disk_no_line_is_torn_and_an_ended_line_waits_for_space() {
    // Skipped (saying so) where a tmpfs cannot be mounted (not root).
    let Some(disk) = test_support::SmallDisk::mount(64) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let log = disk.path().join("audit.jsonl");
    let go = dir.path().join("go");
    let mut command = mcp_command(dir.path());
    command.arg("--audit-log").arg(&log);
    let client = serve((), command).await.0;

    // A background shell that ends when the test says so (30 s at most).
    let started = call(
        &client,
        "Bash",
        json!({
            "command": format!(
                "for i in $(seq 600); do [ -e {} ] && break; sleep 0.05; done; echo ended",
                go.display()
            ),
            "run_in_background": true,
        }),
    )
    .await;
    let id = bash_id(&started);
    assert!(id.is_string(), "{started:?}");

    let filler = fill(disk.path());
    // The log's last block still has room for a few lines; calls go on
    // until one cannot be logged (a short write, then none at all).
    let mut refused = None;
    for _ in 0..40 {
        let answer = call(&client, "Bash", json!({ "command": "echo x" })).await;
        if text(&answer).contains("audit") {
            refused = Some(text(&answer));
            break;
        }
    }
    let refused = refused.expect("a call on a full disk says the log cannot be written");
    assert!(
        refused.contains("[audit: the end of this command could not be logged: ")
            || refused.contains("the audit log cannot be written"),
        "{refused}"
    );
    whole_lines(&log);
    // Now nothing fits: a command does not run without its line.
    let marker = dir.path().join("ran");
    let answer = call(
        &client,
        "Bash",
        json!({ "command": format!("touch {}", marker.display()) }),
    )
    .await;
    let said = text(&answer);
    assert!(
        said.starts_with("Command blocked: nothing ran because the audit log cannot be written"),
        "{said}"
    );
    assert!(!marker.exists(), "{said}");
    whole_lines(&log);

    // The shell ends while the disk is full: its end line is kept and its
    // next answer says so.
    std::fs::write(&go, "").expect("go");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = call(
            &client,
            "BashOutput",
            json!({ "bash_id": id, "wait_ms": 2000 }),
        )
        .await;
        let said = text(&answer);
        if said.contains("[audit: the end of this command could not be logged") {
            assert!(said.contains("will retry]"), "{said}");
            assert_eq!(
                answer.structured_content.as_ref().expect("metadata")["audit_error"],
                true
            );
            break;
        }
        assert!(Instant::now() < deadline, "never flagged: {said}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let before = whole_lines(&log);
    assert!(
        !before
            .iter()
            .any(|line| line["event"] == "ended" && line["bash_id"] == id),
        "{before:?}"
    );

    // Space returns: the next call writes the kept line first.
    std::fs::remove_file(&filler).expect("free space");
    let answer = call(&client, "Bash", json!({ "command": "echo back" })).await;
    assert_eq!(answer.is_error, Some(false), "{answer:?}");
    let lines = whole_lines(&log);
    let ended = lines
        .iter()
        .position(|line| line["event"] == "ended" && line["bash_id"] == id)
        .unwrap_or_else(|| panic!("the shell's end line is missing: {lines:?}"));
    let back = lines
        .iter()
        .position(|line| line["command"] == "echo back")
        .expect("the new call's line");
    assert!(ended < back, "the kept line is written first: {lines:?}");
    assert_eq!(lines[ended]["status"], "completed");
    client.cancel().await.expect("closes");
    drop(disk);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_removed_or_replaced_mid_session_is_said_and_followed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("audit.jsonl");
    let mut command = mcp_command(dir.path());
    command.arg("--audit-log").arg(&log);
    let client = serve((), command).await.0;
    let started = call(
        &client,
        "Bash",
        json!({ "command": "echo bg", "run_in_background": true }),
    )
    .await;
    let id = bash_id(&started);
    call(
        &client,
        "BashOutput",
        json!({ "bash_id": id, "wait_ms": 10000 }),
    )
    .await;
    let note = format!(
        "[audit: the log file {} was removed or replaced; logging to a new file]",
        log.display()
    );

    // Removed: even a call that writes no line of its own says so.
    let deadline = Instant::now() + Duration::from_secs(10);
    while whole_lines(&log).len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::fs::remove_file(&log).expect("rm the log");
    let answer = call(&client, "BashOutput", json!({ "bash_id": id })).await;
    assert!(text(&answer).ends_with(&note), "{}", text(&answer));
    let answer = call(&client, "Bash", json!({ "command": "echo two" })).await;
    assert!(!text(&answer).contains("[audit"), "said once: {answer:?}");
    let lines = whole_lines(&log);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines.iter().all(|line| line["command"] == "echo two"));

    // Replaced by another file (`mv` over it).
    let other = dir.path().join("other.jsonl");
    std::fs::write(&other, "").expect("other file");
    std::fs::rename(&other, &log).expect("mv over the log");
    let answer = call(&client, "Bash", json!({ "command": "echo three" })).await;
    assert!(text(&answer).ends_with(&note), "{}", text(&answer));
    let lines = whole_lines(&log);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines.iter().all(|line| line["command"] == "echo three"));
    client.cancel().await.expect("closes");
}
