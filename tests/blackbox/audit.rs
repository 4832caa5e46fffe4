//! `--audit-log FILE`: a decision line before a command runs, an `ended`
//! line after, every key on every line, mode 0600, appended, fail closed,
//! no secret value.

use std::path::Path;

use crate::{agent_exec, stderr, stdout};

fn lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("the audit log exists");
    text.lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            for key in exec_tools::AuditEntry::KEYS {
                assert!(value.get(key).is_some(), "`{key}` missing from {line}");
            }
            value
        })
        .collect()
}

fn run(dir: &Path, log: &Path, extra: &[&str], command: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        "--cwd",
        dir.to_str().expect("utf-8"),
        "--audit-log",
        log.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    agent_exec(&args)
}

#[test]
fn a_run_writes_a_decision_line_then_an_ended_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("audit.jsonl");
    let output = run(dir.path(), &log, &[], &["printf", "hello; exit 3"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let lines = lines(&log);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let (decided, ended) = (&lines[0], &lines[1]);
    assert_eq!(decided["event"], "decision");
    assert_eq!(decided["tool"], "Bash");
    assert_eq!(decided["command"], "printf hello; exit 3");
    assert_eq!(decided["decision"], "allow");
    assert_eq!(decided["status"], "running");
    assert_eq!(decided["exit_code"], serde_json::Value::Null);
    assert_eq!(decided["sandbox"], "contain (network allow)");
    let cwd = std::fs::canonicalize(dir.path()).expect("canonical");
    assert_eq!(decided["cwd"], cwd.to_str().expect("utf-8"));
    assert_eq!(ended["event"], "ended");
    assert_eq!(ended["call"], decided["call"]);
    assert_eq!(ended["exit_code"], 3);
    assert_eq!(ended["status"], "failed");
    assert_eq!(ended["output_bytes"], 5);
    assert!(ended["duration_ms"].is_u64());
    assert!(
        decided["time"]
            .as_str()
            .is_some_and(|t| t.len() == 24 && t.ends_with('Z') && &t[10..11] == "T"),
        "{}",
        decided["time"]
    );
    // Appended, never truncated; private.
    run(dir.path(), &log, &[], &["true"]);
    assert_eq!(super::audit::lines(&log).len(), 4);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&log)
        .expect("metadata")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn refusals_and_dry_runs_write_one_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("audit.jsonl");
    let refused = run(dir.path(), &log, &[], &["rm", "-rf", "/"]);
    assert_eq!(refused.status.code(), Some(2));
    let dry = run(dir.path(), &log, &["--dry-run"], &["echo", "hi"]);
    assert_eq!(dry.status.code(), Some(0));
    let lines = lines(&log);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["decision"], "deny");
    assert_eq!(lines[0]["rule"], "recursive-delete-protected");
    assert_eq!(lines[0]["status"], "blocked");
    assert_eq!(lines[1]["decision"], "allow");
    assert_eq!(lines[1]["status"], "dry_run");
}

#[test]
fn ask_falls_back_to_deny_saying_how_to_allow_or_runs_with_allow() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("audit.jsonl");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[rule]]\nid = \"ask-echo\"\ndecision = \"ask\"\nprogram = \"echo\"\nreason = \"echo needs a nod\"\n",
    )
    .expect("write policy");
    let policy = policy.to_str().expect("utf-8");
    let refused = run(dir.path(), &log, &["--policy", policy], &["echo", "hi"]);
    assert_eq!(refused.status.code(), Some(2));
    let message = stderr(&refused);
    for needle in ["blocked", "approval", "ask-echo", "--ask-fallback allow"] {
        assert!(message.contains(needle), "{needle}: {message}");
    }
    assert!(!message.contains("dangerous"), "{message}");
    let allowed = run(
        dir.path(),
        &log,
        &["--policy", policy, "--ask-fallback", "allow"],
        &["echo", "hi"],
    );
    assert_eq!(stdout(&allowed), "hi\n", "{}", stderr(&allowed));
    // A dry run never asks: it answers as the fallback would.
    let dry = run(
        dir.path(),
        &log,
        &["--policy", policy, "--ask-fallback", "allow", "--dry-run"],
        &["echo", "hi"],
    );
    assert_eq!(stdout(&dry), "[Dry Run] Would execute: echo hi\n");
    let lines = lines(&log);
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["decision"], "ask");
    assert_eq!(lines[0]["rule"], "ask-echo");
    assert_eq!(lines[0]["status"], "blocked");
    assert_eq!(lines[0]["approved_by"], serde_json::Value::Null);
    for line in &lines[1..] {
        assert_eq!(line["decision"], "ask");
        assert_eq!(line["approved_by"], "fallback");
    }
    assert_eq!(lines[2]["event"], "ended");
    assert_eq!(lines[3]["status"], "dry_run");
}

#[test]
fn no_secret_value_reaches_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("audit.jsonl");
    let secret = "s3cr3t-value-of-a-secret-named-variable";
    let token = "ghp_R4nd0mL00k1ngT0k3nW1thTh1rtySixChr5x";
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args([
            "run",
            "--cwd",
            dir.path().to_str().expect("utf-8"),
            "--audit-log",
            log.to_str().expect("utf-8"),
            "--",
            &format!("echo {secret} {token}"),
        ])
        .env("MY_SERVICE_API_TOKEN", secret)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = std::fs::read_to_string(&log).expect("log");
    assert_eq!(lines(&log).len(), 2);
    assert!(!text.contains(secret), "{text}");
    assert!(!text.contains(token), "{text}");
    assert!(text.contains("REDACTED"), "{text}");
}

#[test]
fn a_log_that_cannot_be_written_stops_the_command() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = dir.path().join("ran");
    // Opens, but every write fails (ENOSPC).
    let full = Path::new("/dev/full");
    if full.exists() {
        let output = run(dir.path(), full, &[], &["touch", "ran"]);
        assert_eq!(output.status.code(), Some(2));
        assert!(!marker.exists(), "the command ran without its audit line");
        let message = stderr(&output);
        assert!(message.contains("audit log"), "{message}");
    }
    // One that cannot be opened stops the server before anything runs.
    let output = run(
        dir.path(),
        &dir.path().join("missing/dir/audit.jsonl"),
        &[],
        &["touch", "ran"],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--audit-log"),
        "{}",
        stderr(&output)
    );
    assert!(!marker.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_starts_decision_line_names_the_shell_it_starts() {
    use crate::rmcp_support::{call, mcp_command, serve};
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("audit.jsonl");
    let mut command = mcp_command(dir.path());
    command.arg("--audit-log").arg(&log);
    let client = serve((), command).await.0;
    let started = call(
        &client,
        "Bash",
        serde_json::json!({ "command": "echo hi", "run_in_background": true }),
    )
    .await;
    let id = started.structured_content.as_ref().expect("metadata")["bash_id"].clone();
    assert!(id.is_string(), "{started:?}");
    call(
        &client,
        "BashOutput",
        serde_json::json!({ "bash_id": id, "wait_ms": 10000 }),
    )
    .await;
    // The end line is written by a task of its own once the shell ended.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while lines(&log).len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let lines = lines(&log);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["event"], "decision");
    assert_eq!(lines[0]["status"], "running");
    assert_eq!(lines[0]["bash_id"], id, "{lines:?}");
    assert_eq!(lines[1]["event"], "ended");
    assert_eq!(lines[1]["bash_id"], id, "{lines:?}");
    client.cancel().await.expect("closes");
}
