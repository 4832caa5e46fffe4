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

/// True when this process runs with effective uid 0.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find(|line| line.starts_with("Uid:"))
            .and_then(|line| line.split_whitespace().nth(2))
            == Some("0")
    })
}

/// `found(pid, words)` for every process, where `words` is its argument
/// vector (`/proc/PID/cmdline` split at NUL), keeping the `Some`s;
/// processes that end while the scan runs are skipped.
pub fn scan_processes<T>(found: impl Fn(u32, &[&[u8]]) -> Option<T>) -> Vec<T> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let words: Vec<&[u8]> = cmdline
                .strip_suffix(b"\0")
                .unwrap_or(&cmdline)
                .split(|byte| *byte == 0)
                .collect();
            found(pid, &words)
        })
        .collect()
}

/// The pids of every process whose argument vector satisfies `matches`.
pub fn processes_where(matches: impl Fn(&[&[u8]]) -> bool) -> Vec<u32> {
    scan_processes(|pid, words| matches(words).then_some(pid))
}

/// Live processes whose command line contains `marker` anywhere.
pub fn processes_naming(marker: &str) -> Vec<u32> {
    processes_where(|words| {
        words
            .iter()
            .any(|word| String::from_utf8_lossy(word).contains(marker))
    })
    .into_iter()
    .filter(|pid| alive(*pid))
    .collect()
}

/// The children of every thread of `pid` (`/proc/PID/task/*/children`):
/// a child forked by any of the process's threads.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| numbers_in(&text))
        .collect()
}

/// The first child of `pid` (see [`children_of`]) that `matches`.
pub fn child_where(pid: u32, matches: impl Fn(u32) -> bool) -> Option<u32> {
    children_of(pid).into_iter().find(|child| matches(*child))
}

/// SIGKILL to each pid (by pid, never by name); errors for pids already
/// gone are ignored.
#[expect(clippy::disallowed_methods, reason = "a test fixture runs kill(1)")]
pub fn kill_pids(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = std::process::Command::new("kill")
        .arg("-9")
        .args(pids.iter().map(u32::to_string))
        .stderr(std::process::Stdio::null())
        .status();
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

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "the test starts the sleep it looks for"
    )]
    fn a_marked_child_is_found_by_parent_and_by_marker_and_killed_by_pid() {
        /// Kills and reaps the sleep however the test ends.
        struct Reap(std::process::Child);
        impl Drop for Reap {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let marker = format!("1000.{}7", std::process::id());
        let child = std::process::Command::new("sleep")
            .arg(&marker)
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut child = Reap(child);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            child_where(std::process::id(), |child| child == pid),
            Some(pid)
        );
        assert!(children_of(std::process::id()).contains(&pid));
        assert_eq!(processes_naming(&marker), [pid]);
        assert_eq!(
            processes_where(|words| words.get(1) == Some(&marker.as_bytes())),
            [pid]
        );
        kill_pids(&[pid]);
        child.0.wait().unwrap();
        assert!(processes_naming(&marker).is_empty());
    }
}
