//! Shells started from the main thread (`block_on` in `main`, as the
//! benchmarks, the examples and `agent-exec run` do) start inline rather
//! than on the spawner thread. This file has no test harness so that its
//! body runs on the main thread itself.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a test that reports on stdout like the harness would"
)]

use std::time::Duration;

mod common;

use common::{gone, spec};
use shell_runtime::{EndRequest, ShellProcess, ShellStatus, Stream};

/// The children of the main thread, from `/proc` (a shell is listed under
/// the thread that forked it).
fn main_thread_children() -> Vec<u32> {
    let pid = std::process::id();
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        // Output, exit code, and the parent is this very thread.
        let shell = ShellProcess::spawn(spec("echo out; echo err >&2; sleep 0.2; exit 3"))
            .await
            .expect("spawns");
        if cfg!(target_os = "linux") {
            assert!(
                main_thread_children().contains(&shell.pid()),
                "started inline on the main thread"
            );
        }
        shell.wait().await;
        assert_eq!(shell.snapshot(Stream::Stdout).render(), "out\n");
        assert_eq!(shell.snapshot(Stream::Stderr).render(), "err\n");
        assert_eq!(shell.exit().expect("exited").code, 3);
        assert_eq!(shell.status(), ShellStatus::Failed);

        // A timeout still ends the whole tree, escaped members included.
        let shell = ShellProcess::spawn(
            spec("sleep 1000 & echo $!; setsid sleep 1000 & echo $!; wait")
                .with_timeout(Duration::from_millis(500)),
        )
        .await
        .expect("spawns");
        shell.wait().await;
        assert_eq!(shell.end_request(), Some(EndRequest::Timeout));
        assert_eq!(shell.status(), ShellStatus::Timeout);
        let pids: Vec<u32> = shell
            .snapshot(Stream::Stdout)
            .render()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect();
        assert_eq!(pids.len(), 2, "both jobs reported their pid");
        for pid in pids {
            assert!(gone(pid).await, "{pid} outlived the timeout");
        }

        // A missing working directory is still a typed error, not a panic.
        let missing = ShellProcess::spawn(shell_runtime::SpawnSpec::shell(
            "true",
            "/nonexistent/agent-exec-test",
        ))
        .await;
        assert!(missing.is_err());
    });
    println!("main_thread: 3 checks passed");
}
