//! Helpers shared by the shell-runtime test files.
#![allow(
    dead_code,
    unused_imports,
    unreachable_pub,
    reason = "test helpers shared by several test crates"
)]

use std::time::{Duration, Instant};

use shell_runtime::{ShellProcess, Stream};

pub use test_support::{alive, gone, numbers_in, pids_in, read_pid, spec};

/// What the shell wrote so far: stdout, then stderr.
pub fn text(shell: &ShellProcess) -> String {
    let out = shell.snapshot(Stream::Stdout).render();
    let err = shell.snapshot(Stream::Stderr).render();
    format!("{out}{err}")
}

/// Waits (10 s at most) until the shell's output holds `needle`.
pub async fn wait_for_output(shell: &ShellProcess, needle: &str) {
    let mut events = shell.subscribe_output();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !text(shell).contains(needle) {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in {:?}",
            text(shell)
        );
        let _ = tokio::time::timeout(Duration::from_millis(100), events.changed()).await;
    }
}
