//! Processes by pid, as tests see them from outside.

use std::path::Path;
use std::time::{Duration, Instant};

/// How long the waits below wait at most: generous, since a loaded CI
/// machine can be slow, and a wait returns as soon as its event happens.
const WAIT_LIMIT: Duration = Duration::from_secs(10);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(10);

/// True while `pid` is a live process: not gone, not a zombie, and not a
/// newer process that reused the pid.
///
/// `pid_max` may be small (32768): under a parallel test run a pid can be
/// reused within seconds, so a process that started after this call is not
/// the one asked about.
pub fn alive(pid: u32) -> bool {
    let now_ticks = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(u64::MAX, |seconds| {
            // Clock ticks (USER_HZ is 100 on Linux); whole ticks suffice.
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "uptime in ticks is small and positive"
            )]
            let ticks = (seconds * 100.0) as u64;
            ticks + 1
        });
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

/// Waits (async) until `pid` is gone; false if it is still alive after
/// the wait limit.
pub async fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + WAIT_LIMIT;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
    !alive(pid)
}

/// Waits (blocking the thread) until `pid` is gone; false if it is still
/// alive after the wait limit.
pub fn wait_gone(pid: u32) -> bool {
    let deadline = Instant::now() + WAIT_LIMIT;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(POLL);
    }
    !alive(pid)
}

/// Pids a command printed one per line (`echo $!`): only whole lines that
/// are a number count, so the `1` of `[ended 1 background job(s)]` is not
/// taken for pid 1.
pub fn pids_in(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// Every whitespace-separated word of `text` that is a number (for output
/// made of numbers only, such as `pgrep` or `ps -o pid=`).
pub fn numbers_in(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect()
}

/// A `kB` field of `/proc/PROCESS/status` (`VmRSS`, `VmHWM`...), where
/// PROCESS is a pid or `self`; 0 when it cannot be read.
pub fn status_kib(process: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{process}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| {
                    line.strip_prefix(field)
                        .is_some_and(|rest| rest.starts_with(':'))
                })
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

fn pid_in_file(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.trim().parse().ok())
}

/// Waits (async) for a command to write a pid to `path`, and returns it.
///
/// # Panics
/// When no pid arrives within the wait limit.
pub async fn read_pid(path: &Path) -> u32 {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        if let Some(pid) = pid_in_file(path) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", path.display());
        tokio::time::sleep(POLL).await;
    }
}

/// Waits (blocking the thread) for a pid in `path`, and returns it.
///
/// # Panics
/// When no pid arrives within the wait limit.
pub fn read_pid_blocking(path: &Path) -> u32 {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        if let Some(pid) = pid_in_file(path) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", path.display());
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_pid_past_the_maximum_is_not() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX - 1));
    }

    #[test]
    fn pids_are_whole_lines_and_numbers_are_words() {
        let text = "123\n[ended 1 background job(s) left by the command]\n 456 \n";
        assert_eq!(pids_in(text), [123, 456]);
        assert_eq!(numbers_in("1 2\n3 x"), [1, 2, 3]);
    }

    #[test]
    fn a_pid_file_is_read_once_written() {
        let dir = std::env::temp_dir().join(format!("test-support-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pid");
        std::fs::write(&path, "4242\n").unwrap();
        assert_eq!(read_pid_blocking(&path), 4242);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
