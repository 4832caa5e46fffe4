//! `agent-exec run`: one Bash call, exit codes as the contract gives them.

use crate::{agent_exec, stderr, stdout};

fn run_in(dir: &std::path::Path, words: &[&str]) -> std::process::Output {
    let mut args = vec!["run", "--cwd", dir.to_str().expect("utf-8 dir"), "--"];
    args.extend_from_slice(words);
    agent_exec(&args)
}

#[test]
fn output_and_exit_code_are_the_commands() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ok = run_in(dir.path(), &["echo", "hello", "&&", "echo", "world"]);
    assert_eq!(stdout(&ok), "hello\nworld\n");
    assert_eq!(ok.status.code(), Some(0));
    let failed = run_in(dir.path(), &["echo out; exit 3"]);
    assert_eq!(failed.status.code(), Some(3));
    assert_eq!(stdout(&failed), "Command failed with exit code 3\nout\n");
}

#[test]
fn a_timeout_exits_124() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_text = dir.path().to_str().expect("utf-8");
    let output = agent_exec(&[
        "run",
        "--cwd",
        dir_text,
        "--timeout",
        "1000",
        "--",
        "sleep",
        "30",
    ]);
    assert_eq!(output.status.code(), Some(124));
    assert!(stdout(&output).starts_with("Command timed out after 1000ms"));
}

#[test]
fn a_blocked_command_is_refused_with_exit_2_on_stderr() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = run_in(dir.path(), &["rm", "-rf", "/"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert!(stderr(&output).contains("blocked") && stderr(&output).contains("dangerous"));
}

#[test]
fn a_dry_run_runs_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let victim = dir.path().join("keep");
    std::fs::create_dir(&victim).expect("mkdir");
    let dir_text = dir.path().to_str().expect("utf-8");
    let output = agent_exec(&[
        "run",
        "--cwd",
        dir_text,
        "--dry-run",
        "--",
        "rm",
        "-r",
        "keep",
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout(&output), "[Dry Run] Would execute: rm -r keep\n");
    assert!(victim.exists());
}

#[test]
fn bad_start_up_values_are_refused_with_exit_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_text = dir.path().to_str().expect("utf-8");
    let missing = agent_exec(&["run", "--cwd", "/nonexistent/dir", "--", "true"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("/nonexistent/dir"),
        "{}",
        stderr(&missing)
    );
    let outside = agent_exec(&["run", "--cwd", dir_text, "--root", "/usr", "--", "true"]);
    assert_eq!(outside.status.code(), Some(2));
    assert!(stderr(&outside).contains("outside"), "{}", stderr(&outside));
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[deny]\nregexes = [\"x\"]\n").expect("write");
    let bad_policy = agent_exec(&[
        "run",
        "--cwd",
        dir_text,
        "--policy",
        policy.to_str().expect("utf-8"),
        "--",
        "true",
    ]);
    assert_eq!(bad_policy.status.code(), Some(2));
    assert!(
        stderr(&bad_policy).contains("policy.toml"),
        "{}",
        stderr(&bad_policy)
    );
}

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "the test sets a secret in the server's environment"
)]
fn the_servers_secrets_are_neither_passed_on_nor_readable_nor_shown() {
    let dir = tempfile::tempdir().expect("temp dir");
    let secret = "tok-0123456789-abcdef";
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["run", "--cwd", dir.path().to_str().expect("utf-8"), "--"])
        .arg(format!(
            "echo \"child:[${{MY_SERVICE_TOKEN-}}]\"; \
             tr '\\0' '\\n' < /proc/$PPID/environ | grep -c MY_SERVICE_TOKEN; \
             printf '%s\\n' {secret}"
        ))
        .env("MY_SERVICE_TOKEN", secret)
        .output()
        .expect("runs");
    let text = stdout(&output);
    assert!(!text.contains(secret), "{text}");
    assert!(text.starts_with("child:[]\n"), "{text}");
    // grep -c prints 0 (and exits 1) when the server's environ has no such name.
    assert!(text.contains("\n0\n"), "{text}");
    assert!(text.contains("[REDACTED:MY_SERVICE_TOKEN]"), "{text}");
}
