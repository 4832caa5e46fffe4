//! A cgroup per command, seen through the runtime: a process that left the
//! shell's session and tag still ends with its command (on a timeout too),
//! a kept one survives it, and `end_all_contained` ends the rest and
//! removes the server's cgroups. Skipped where no cgroup can be made.
//!
//! One test: `end_all_contained` is process-wide.
#![cfg(target_os = "linux")]
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{alive, gone, read_pid, spec};
use shell_runtime::{ShellProcess, ShellStatus, command_cgroups_dir, end_all_contained};

fn escape(pid_file: &Path, program: &str) -> String {
    format!(
        "setsid -f env -u AGENT_EXEC_SHELL sh -c 'echo $$ > {}; exec {program} 300'",
        pid_file.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapes_end_with_their_command_and_the_rest_at_the_end() {
    let Some(parent) = command_cgroups_dir() else {
        eprintln!("skipped: no cgroup can be made here");
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");

    // The end of the command.
    let file = dir.path().join("ended.pid");
    let shell = ShellProcess::spawn(spec(&escape(&file, "sleep")))
        .await
        .expect("spawns");
    let pid = read_pid(&file).await;
    shell.wait().await;
    assert!(gone(pid).await, "the escape outlived its command");

    // A timeout.
    let file = dir.path().join("timeout.pid");
    let shell = ShellProcess::spawn(
        spec(&format!("{}; sleep 300", escape(&file, "sleep")))
            .with_timeout(Duration::from_millis(500)),
    )
    .await
    .expect("spawns");
    let pid = read_pid(&file).await;
    assert_eq!(shell.wait().await, ShellStatus::Timeout);
    assert!(gone(pid).await, "the escape outlived the timeout");

    // One that moved to a cgroup it made inside its own (as root can).
    if Path::new("/sys/fs/cgroup/pids").is_dir() {
        let file = dir.path().join("nested.pid");
        let shell = ShellProcess::spawn(spec(&format!(
            "d=/sys/fs/cgroup/pids$(grep :pids: /proc/self/cgroup | cut -d: -f3)/inner; mkdir $d && \
             setsid -f env -u AGENT_EXEC_SHELL sh -c \"echo \\$\\$ > $d/cgroup.procs; echo \\$\\$ > {}; exec sleep 300\"",
            file.display()
        )))
        .await
        .expect("spawns");
        let pid = read_pid(&file).await;
        shell.wait().await;
        assert!(
            gone(pid).await,
            "the escape in a nested cgroup outlived its command"
        );
    }

    // A kept one lives on, in the keep cgroup, until the end.
    let keeper = dir.path().join("keeper-sleep");
    std::fs::copy("/bin/sleep", &keeper).expect("copy sleep");
    let file = dir.path().join("kept.pid");
    let mut kept_spec = spec(&escape(&file, &keeper.display().to_string()));
    kept_spec.keep_running = vec!["keeper-sleep".into()];
    let shell = ShellProcess::spawn(kept_spec).await.expect("spawns");
    let kept = read_pid(&file).await;
    shell.wait().await;
    assert!(alive(kept), "the kept process was ended with its command");
    let cgroup = std::fs::read_to_string(format!("/proc/{kept}/cgroup")).expect("cgroup");
    assert!(cgroup.contains("/keep\n"), "{cgroup}");

    end_all_contained();
    assert!(gone(kept).await, "the kept process outlived the end");
    assert!(!parent.exists(), "{} is still there", parent.display());
}
