//! Helpers shared by the shell-runtime test files.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::cast_possible_truncation,
    reason = "test helpers shared by several test crates"
)]

use std::time::{Duration, Instant};

use shell_runtime::SpawnSpec;

/// `bash -c COMMAND` in the temp dir with this process's environment.
pub fn spec(command: &str) -> SpawnSpec {
    SpawnSpec::shell(command, std::env::temp_dir()).with_env(std::env::vars_os())
}

/// True while `pid` is a live process (not gone, not a zombie, not reused).
pub fn alive(pid: u32) -> bool {
    // pid_max may be small (32768 here): a pid can be reused within seconds
    // under a parallel test run, so a process that started after this
    // moment is not the one asked about.
    let now_ticks = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(u64::MAX, |seconds| (seconds * 100.0) as u64 + 1);
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let zombie = fields
            .first()
            .is_some_and(|state| state.starts_with('Z') || state.starts_with('X'));
        let started: u64 = fields
            .get(19)
            .and_then(|ticks| ticks.parse().ok())
            .unwrap_or(0);
        !zombie && started <= now_ticks
    })
}

/// Polls until `pid` is gone, for up to 5 s.
pub async fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// The numbers among the words of `text`.
pub fn pids_in(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect()
}
