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

/// The text between `full output in ` and the closing `]` of the
/// truncation line, if the answer names a file.
fn named_output_file(text: &str) -> Option<std::path::PathBuf> {
    let line = text
        .lines()
        .find(|line| line.starts_with("[Output truncated"))?;
    let (_, rest) = line.split_once("full output in ")?;
    Some(std::path::PathBuf::from(rest.strip_suffix(']')?))
}

#[test]
fn a_truncated_answer_names_a_file_that_outlives_the_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = run_in(dir.path(), &["seq", "1", "20000"]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    let file = named_output_file(&text).unwrap_or_else(|| panic!("no file named in {text:.200}"));
    let kept = std::fs::read_to_string(&file);
    // Remove it before asserting, so a failure leaves nothing behind.
    let _ = std::fs::remove_file(&file);
    let kept = kept.unwrap_or_else(|error| panic!("`{}` is gone: {error}", file.display()));
    assert_eq!(kept.lines().count(), 20000);
    assert!(kept.ends_with("19999\n20000\n"));
    let errors = stderr(&output);
    assert!(errors.contains(&file.display().to_string()), "{errors}");
    assert!(!errors.contains("refused"), "{errors}");
}

#[test]
#[cfg(target_os = "linux")]
fn a_kept_output_file_is_readable_only_by_its_owner() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("temp dir");
    let output = run_in(dir.path(), &["seq", "1", "20000"]);
    let file = named_output_file(&stdout(&output)).expect("a file is named");
    let mode = std::fs::metadata(&file).map(|meta| meta.permissions().mode() & 0o777);
    let _ = std::fs::remove_file(&file);
    assert_eq!(mode.expect("the file exists"), 0o600);
}

#[test]
fn a_refusal_and_a_commands_own_exit_2_are_told_apart_by_stderr() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Only analysed: a refused command never runs.
    let refused = run_in(dir.path(), &["rm", "-rf", "/"]);
    let own = run_in(dir.path(), &["bash", "-c", "'echo oops >&2; exit 2'"]);
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(own.status.code(), Some(2));
    let refusal = stderr(&refused);
    assert!(refusal.starts_with("agent-exec: refused: "), "{refusal}");
    assert!(refusal.contains("blocked"), "{refusal}");
    assert_eq!(stdout(&refused), "");
    assert_eq!(
        stderr(&own),
        "",
        "the command's stderr is part of its result"
    );
    assert_eq!(
        stdout(&own),
        "Command failed with exit code 2\n\n[stderr]\noops\n"
    );
    // Invalid arguments are refusals too.
    let invalid = run_in(dir.path(), &[""]);
    assert_eq!(invalid.status.code(), Some(2));
    assert!(
        stderr(&invalid).starts_with("agent-exec: refused: "),
        "{}",
        stderr(&invalid)
    );
}

#[test]
fn a_missing_policy_file_is_refused_at_start_up_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_text = dir.path().to_str().expect("utf-8");
    let missing = dir.path().join("nowhere").join("policy.toml");
    let missing = missing.to_str().expect("utf-8");
    for args in [
        vec!["run", "--cwd", dir_text, "--policy", missing, "--", "true"],
        // The server stops before it reads a single message.
        vec!["mcp", "--cwd", dir_text, "--policy", missing],
    ] {
        let output = agent_exec(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let errors = stderr(&output);
        assert!(
            errors.starts_with("agent-exec: error: ")
                && errors.contains(&format!("`{missing}` does not exist")),
            "{args:?}: {errors}"
        );
        assert_eq!(stdout(&output), "");
    }
}

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "the test gives the binary a home of its own"
)]
fn the_users_home_is_protected_whatever_it_is() {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    // A dry run: the check comes first, and nothing would run either way.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args([
            "run",
            "--dry-run",
            "--cwd",
            dir.path().to_str().expect("utf-8"),
            "--",
        ])
        .arg(format!("rm -rf {}", home.display()))
        .env("HOME", &home)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(stderr(&output).contains("dangerous"), "{}", stderr(&output));
}

#[test]
fn escape_sequences_of_every_family_leave_no_stray_character() {
    let dir = tempfile::tempdir().expect("temp dir");
    // `tput sgr0` writes `ESC ( B`; kitty graphics are an APC string; C1
    // CSI is its two-byte UTF-8 form; BEL and SO/SI are stray controls.
    let output = run_in(
        dir.path(),
        &["printf 'a\\033(Bb\\n'; \
           printf 'k\\033_Gf=100;AAAA\\033\\\\l\\n'; \
           printf '\\302\\23331mred\\302\\2330m \\033)0\\016x\\017\\007\\033=\\033>y\\n'"],
    );
    assert_eq!(stdout(&output), "ab\nkl\nred xy\n");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn one_program_replaces_its_shell_and_a_missing_one_is_named_by_bash() {
    let dir = tempfile::tempdir().expect("temp dir");
    // As `bash -c cat` would, bash execs the program: no fork, so `cat`
    // leads the session the shell was started in.
    let output = run_in(dir.path(), &["cat", "/proc/self/stat"]);
    let stat = stdout(&output);
    let fields: Vec<&str> = stat.split(' ').collect();
    assert_eq!(fields.get(1), Some(&"(cat)"), "{stat}");
    assert_eq!(fields.first(), fields.get(5), "pid and session: {stat}");
    let missing = run_in(dir.path(), &["agent-exec-no-such-program"]);
    assert_eq!(missing.status.code(), Some(127));
    assert!(
        stdout(&missing).contains("bash: line 1: agent-exec-no-such-program: command not found"),
        "{}",
        stdout(&missing)
    );
}
