//! Black-box tests of the `agent-exec` binary: only its command line,
//! stdout, stderr and exit code are used.

#![cfg(unix)]
#![allow(
    clippy::disallowed_methods,
    reason = "black-box tests start the binary under test directly"
)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test helper that cannot go on should fail the test loudly"
)]

mod answer_shape;
mod approval_binding;
mod approvals;
mod ask_queue;
mod audit;
mod audit_integrity;
mod carried_exports;
mod carried_state;
mod contain;
mod containment;
mod escapes;
mod exec_asks;
mod exec_time;
mod interactive_bypasses;
mod janitor;
mod keep;
mod limits;
mod list_shells;
mod log;
mod mcp;
mod output_files;
mod policy_check;
mod question_display;
mod reliability;
mod rmcp_client;
mod rmcp_support;
mod run;
mod sandbox;
mod schema;
mod secrets;
mod serve;
mod session;
mod spawner;
mod stale;
mod tty;
mod until;

use std::process::{Command, Output};

pub(crate) use test_support::alive;

/// Runs the binary with `args` and waits for it.
pub(crate) fn agent_exec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(args)
        .output()
        .expect("the agent-exec binary starts")
}

/// Stdout as text.
pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

/// Stderr as text.
pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}

/// A world-writable temp dir holding a copy of the binary that a server
/// started as nobody (`setpriv --reuid=65534`) can run; `None` (after
/// saying so) where that needs root or setpriv and this run lacks them,
/// which the sandbox self-test does not accept.
#[expect(clippy::print_stderr, reason = "a skipped test says why")]
pub(crate) fn unprivileged_server_dir() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    if !test_support::is_root() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        assert!(
            std::env::var_os("AGENT_EXEC_SANDBOX_SELF_TEST").is_none(),
            "the sandbox self-test cannot skip this: needs root and setpriv"
        );
        eprintln!("skipped: needs root and setpriv to start the server as another user");
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod");
    let binary = dir.path().join("agent-exec");
    std::fs::copy(env!("CARGO_BIN_EXE_agent-exec"), &binary).expect("copy the binary");
    Some((dir, binary))
}

/// A live server's temp dirs: those whose `lock` file it holds open (their
/// names carry a random id, not its pid).
pub(crate) fn server_temp_dirs(pid: u32) -> Vec<std::path::PathBuf> {
    held_paths(pid)
        .into_iter()
        .filter(|path| path.file_name().is_some_and(|name| name == "lock"))
        .filter_map(|path| path.parent().map(std::path::Path::to_path_buf))
        .filter(|dir| {
            dir.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("agent-exec-"))
        })
        .collect()
}

/// The paths of the files a live process holds open.
pub(crate) fn held_paths(pid: u32) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| std::fs::read_link(entry.path()).ok())
                .collect()
        })
        .unwrap_or_default()
}
