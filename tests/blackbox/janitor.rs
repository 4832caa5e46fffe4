//! The janitor (the process that ends a command's processes and cgroups
//! once the server is gone, even killed with SIGKILL) is started again
//! when it dies, whoever killed it: the test from outside, or a command
//! (without the sandbox a command runs as the same user, and sees the
//! janitor, a child of the server as the command's spawner process is).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use test_support::read_pid_blocking as read_pid;

use crate::alive;
use crate::stale::Peer;

/// The server's janitor: its child whose command line names the janitor.
pub(crate) fn janitor_of(server: u32) -> Option<u32> {
    test_support::child_where(server, |pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
            cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == b"__agent-exec-janitor")
        })
    })
}

/// Waits (10 s at most) for a live janitor other than `old`.
fn new_janitor(server: u32, old: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = janitor_of(server).filter(|pid| *pid != old && alive(*pid)) {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "no janitor was started again after {old} died"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a background command that leaves a process behind (a shell's
/// own death signal would not reach it), SIGKILLs the server and checks
/// that the janitor ended that process within 2 s.
fn kill_the_server_and_check_its_commands_end(mut server: Peer, dir: &Path) {
    let pid_file = dir.join("sleeper.pid");
    let answer = server.request(
        "tools/call",
        &json!({"name": "Bash", "arguments": {
            "command": format!("sleep 1000 & echo $! > {}; wait", pid_file.display()),
            "run_in_background": true,
        }}),
    );
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let sleeper = read_pid(&pid_file);
    assert!(alive(sleeper));
    server.kill_hard();
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(sleeper) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survived = alive(sleeper);
    if survived {
        // Never leave it behind, whatever the test found.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(sleeper).expect("pid")),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        !survived,
        "the command's process outlived the server by 2 s"
    );
}

/// Ending what a command left needs its cgroup: root here.
#[expect(clippy::print_stderr, reason = "a skipped test says why")]
fn needs_root() -> bool {
    if test_support::is_root() {
        return true;
    }
    assert!(
        std::env::var_os("AGENT_EXEC_SANDBOX_SELF_TEST").is_none()
            && std::env::var("CI").as_deref() != Ok("true"),
        "CI cannot skip this: it needs root for a cgroup per command"
    );
    eprintln!("skipped: needs root for a cgroup per command");
    false
}

#[test]
fn a_janitor_killed_from_outside_is_started_again() {
    if !needs_root() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let mut server = Peer::start(
        &[],
        &["--cwd", cwd, "--sandbox", "off"],
        &std::env::temp_dir(),
    );
    // Calls wait for the janitor: it runs once a call has been answered.
    let (text, failed) = server.bash("echo ready");
    assert!(!failed, "{text}");
    let server_pid = server.pid();
    let first = janitor_of(server_pid).expect("the server has a janitor");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(first).expect("pid")),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the janitor");
    new_janitor(server_pid, first);
    kill_the_server_and_check_its_commands_end(server, dir.path());
}

#[test]
fn a_command_that_kills_the_janitor_does_not_leave_the_server_without_one() {
    if !needs_root() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    // Without the sandbox a command sees the server's other children.
    let mut server = Peer::start(
        &[],
        &["--cwd", cwd, "--sandbox", "off"],
        &std::env::temp_dir(),
    );
    let (text, failed) = server.bash("echo ready");
    assert!(!failed, "{text}");
    let server_pid = server.pid();
    let first = janitor_of(server_pid).expect("the server has a janitor");
    // `[r]`: the pattern does not match the command's own shell. The
    // server is the parent of the shell's parent (the spawner process).
    let (text, _) = server.bash(&format!(
        "kill -9 $(pgrep -P {server_pid} -f '__agent-exec-janito[r]') && echo killed"
    ));
    assert!(text.contains("killed"), "{text}");
    // SIGKILL is delivered after kill(2) returns: give the death a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(first) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(first), "the command could not kill the janitor");
    new_janitor(server_pid, first);
    kill_the_server_and_check_its_commands_end(server, dir.path());
}
