//! Per-command limits, seen through the runtime: each command's cgroup has
//! its own process cap (not one shared by every command), its own memory
//! cgroup with the limit the spec asks for (a command past it is reported
//! out of memory), its own CPU cgroup, and runs with `oom_score_adj` 1000.
//! Skipped where no cgroup can be made (or, for memory, no v1 memory
//! hierarchy is mounted).
#![cfg(target_os = "linux")]
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use common::spec;
use shell_runtime::{
    CommandLimits, DEFAULT_MAX_PROCESSES, OutOfMemory, ShellProcess, ShellStatus, Stream,
    command_cgroups_dir,
};

/// Says why a test is skipped; `.ci/run`'s sandbox self-test (as root,
/// where the cgroups can be made) may not skip.
#[expect(clippy::print_stderr, reason = "a skipped test says why")]
fn skip(why: &str) {
    assert!(
        std::env::var_os("AGENT_EXEC_SANDBOX_SELF_TEST").is_none(),
        "the sandbox self-test cannot skip this: {why}"
    );
    eprintln!("skipped: {why}");
}

async fn run(
    spec: shell_runtime::SpawnSpec,
) -> (ShellStatus, String, std::sync::Arc<ShellProcess>) {
    let shell = ShellProcess::spawn(spec).await.expect("spawns");
    let status = shell.wait().await;
    let stdout = shell.snapshot(Stream::Stdout).render();
    (status, stdout, shell)
}

/// Forks (each child execs `sleep 30`) until a fork fails, at most
/// `tries`; prints how many started. The children are ended with the
/// command.
fn fork_until_refused(tries: u32) -> String {
    format!(
        "python3 -c '
import os
started = 0
for _ in range({tries}):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.execv(\"/bin/sleep\", [\"sleep\", \"30\"])
    started += 1
print(started)
'"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_command_has_its_own_process_cap_cpu_cgroup_and_oom_score() {
    if command_cgroups_dir().is_none() {
        return skip("no cgroup can be made here");
    }
    // The default cap: past 1024 processes (python and bash among them)
    // forks fail.
    let (status, stdout, _) = run(spec(&fork_until_refused(1100))).await;
    assert_eq!(status, ShellStatus::Completed, "{stdout}");
    let started: u64 = stdout.trim().parse().expect("a count");
    assert!(
        started < DEFAULT_MAX_PROCESSES && started > DEFAULT_MAX_PROCESSES - 10,
        "{started} processes started under the default cap"
    );
    // A cap of the spec's own, for this command only.
    let mut small = spec(&fork_until_refused(100));
    small.cgroup_limits = CommandLimits {
        max_processes: Some(20),
        memory: None,
    };
    let (_, stdout, _) = run(small).await;
    let started: u64 = stdout.trim().parse().expect("a count");
    assert!(started < 20, "{started} processes under a cap of 20");
    // The next command has the default again.
    let (_, stdout, _) = run(spec(&fork_until_refused(50))).await;
    assert_eq!(stdout.trim(), "50");

    let (_, stdout, _) = run(spec("cat /proc/self/oom_score_adj; cat /proc/self/cgroup")).await;
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("1000"), "{stdout}");
    let own = std::fs::read_to_string("/proc/self/oom_score_adj").expect("own score");
    assert_ne!(own.trim(), "1000", "the server's own score is its own");
    let cgroups: Vec<&str> = lines.collect();
    for controller in ["pids", "memory", "cpu"] {
        let mounted = std::path::Path::new("/sys/fs/cgroup")
            .join(controller)
            .is_dir();
        if !mounted {
            continue;
        }
        let line = cgroups
            .iter()
            .find(|line| line.split(':').nth(1) == Some(controller))
            .unwrap_or_else(|| panic!("no {controller} line in {cgroups:?}"));
        assert!(
            line.contains("/agent-exec-") && line.contains("/cmd-"),
            "the command is not in a {controller} cgroup of its own: {line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_past_its_memory_limit_is_reported_out_of_memory() {
    if command_cgroups_dir().is_none() || !std::path::Path::new("/sys/fs/cgroup/memory").is_dir() {
        return skip("no v1 memory cgroup can be made here");
    }
    let limit = 64 << 20;
    // 200 MiB written for real, so the pages count.
    let mut hungry = spec("python3 -c 'b = b\"x\" * (200 << 20)'; exit $?");
    hungry.cgroup_limits.memory = Some(limit);
    let (status, _, shell) = run(hungry).await;
    assert_eq!(status, ShellStatus::Failed);
    assert_eq!(shell.exit().map(|exit| exit.code), Some(137));
    assert_eq!(
        shell.out_of_memory(),
        Some(OutOfMemory { limit: Some(limit) })
    );
    assert_eq!(
        shell.out_of_memory().unwrap().to_string(),
        "killed: out of memory (limit 64 MiB)"
    );
    // The same cgroups serve the next commands: no limit, no OOM reported.
    for _ in 0..8 {
        let (status, stdout, shell) = run(spec(
            "python3 -c 'b = b\"x\" * (100 << 20); print(len(b) >> 20)'",
        ))
        .await;
        assert_eq!(status, ShellStatus::Completed, "{stdout}");
        assert_eq!(stdout, "100\n");
        assert_eq!(shell.out_of_memory(), None);
    }
}
