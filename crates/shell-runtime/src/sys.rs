//! The few facts about processes the runtime reads from the kernel, and the
//! signals it sends. Linux reads `/proc`; elsewhere only process groups are
//! known, so escaped processes cannot be found (the crate still builds).

use nix::errno::Errno;
use nix::sys::signal::{self, Signal};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// What `/proc/PID/stat` says about a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    pub(crate) pgid: i32,
    pub(crate) sid: i32,
    pub(crate) state: char,
    pub(crate) comm: String,
}

impl ProcStat {
    pub(crate) fn is_zombie(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Parses `pid (comm) S ppid pgrp sid ...`; `comm` may hold spaces and parentheses.
pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let comm = text.get(open + 1..close)?.to_owned();
    let mut fields = text.get(close + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    let sid = fields.next()?.parse().ok()?;
    Some(ProcStat {
        pid,
        ppid,
        pgid,
        sid,
        state,
        comm,
    })
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{ProcStat, parse_stat};
    use std::fs;

    /// Makes this process the reaper of orphans from the trees it starts, so
    /// a double-forked `setsid` child stays within reach.
    pub(crate) fn become_subreaper() -> std::io::Result<()> {
        nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)
    }

    pub(crate) fn stat(pid: i32) -> Option<ProcStat> {
        let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse_stat(&text)
    }

    /// Direct children of `pid`, across all its threads.
    pub(crate) fn children(pid: i32) -> Vec<i32> {
        let mut found = Vec::new();
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            return found;
        };
        for task in tasks.flatten() {
            let mut path = task.path();
            path.push("children");
            if let Ok(text) = fs::read_to_string(&path) {
                found.extend(
                    text.split_whitespace()
                        .filter_map(|pid| pid.parse::<i32>().ok()),
                );
            }
        }
        found
    }

    /// Children of the adopting process's main thread: where the kernel
    /// puts the orphans a subreaper adopts (it picks the first live
    /// thread, and the main thread lives as long as the process). The
    /// adopting process is the spawner process where one runs (its one
    /// thread is also the shells' parent, so they are listed too);
    /// otherwise this one, whose shells are children of the spawner thread
    /// and not listed here.
    pub(crate) fn main_thread_children() -> Vec<i32> {
        let pid = super::adopter();
        fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .map(|text| {
                text.split_whitespace()
                    .filter_map(|pid| pid.parse::<i32>().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether the environment `pid` was started with holds `entry` (`NAME=value`).
    pub(crate) fn environ_contains(pid: i32, entry: &[u8]) -> bool {
        fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|environ| environ.split(|byte| *byte == 0).any(|item| item == entry))
    }

    /// The file name of the executable the process runs (`/proc/PID/exe`),
    /// which, unlike `comm` or `argv[0]`, the process cannot choose
    /// (`exec -a NAME` sets both of those).
    pub(crate) fn executable_name(pid: i32) -> Option<String> {
        let target = fs::read_link(format!("/proc/{pid}/exe")).ok()?;
        let name = target.file_name()?.to_string_lossy().into_owned();
        // A binary replaced or removed since it started reads `NAME (deleted)`.
        Some(
            name.strip_suffix(" (deleted)")
                .map_or(name.clone(), str::to_owned),
        )
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::ProcStat;

    pub(crate) fn become_subreaper() -> std::io::Result<()> {
        Ok(())
    }
    pub(crate) fn stat(_pid: i32) -> Option<ProcStat> {
        None
    }
    pub(crate) fn children(_pid: i32) -> Vec<i32> {
        Vec::new()
    }
    pub(crate) fn main_thread_children() -> Vec<i32> {
        Vec::new()
    }
    pub(crate) fn environ_contains(_pid: i32, _entry: &[u8]) -> bool {
        false
    }
    pub(crate) fn executable_name(_pid: i32) -> Option<String> {
        None
    }
}

pub(crate) use imp::{
    become_subreaper, children, environ_contains, executable_name, main_thread_children, stat,
};

/// Sends `signal` to one process; a process already gone is not an error.
pub(crate) fn send(pid: i32, signal: Signal) {
    let _ = signal::kill(Pid::from_raw(pid), signal);
}

/// The process the commands' orphans are re-parented to: the spawner
/// process where one runs (docs/decisions/0016), otherwise this one.
pub(crate) fn adopter() -> i32 {
    #[cfg(target_os = "linux")]
    if let Some(pid) = ::spawn::process::spawner_pid() {
        return pid;
    }
    i32::try_from(std::process::id()).unwrap_or_default()
}

/// Sends `signal` to a process group; returns false when the group is empty.
pub(crate) fn send_group(pgid: i32, signal: Signal) -> bool {
    signal::killpg(Pid::from_raw(pgid), signal) != Err(Errno::ESRCH)
}

/// Whether any process is left in group `pgid`.
pub(crate) fn group_alive(pgid: i32) -> bool {
    signal::killpg(Pid::from_raw(pgid), None) != Err(Errno::ESRCH)
}

/// Collects the exit status of one adopted child by pid, if it has ended.
/// Never `waitpid(-1)`: that would steal statuses tokio waits for.
pub(crate) fn reap(pid: i32) {
    let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
}

/// Waits for one child of ours to end and collects its status.
pub(crate) fn wait_blocking(pid: i32) {
    let _ = waitpid(Pid::from_raw(pid), None);
}

/// This process's process session id (`getsid`).
pub(crate) fn own_sid() -> i32 {
    nix::unistd::getsid(None).map_or(0, Pid::as_raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_odd_names() {
        let stat = parse_stat("42 (a (b) c) S 1 42 40 0 -1").expect("parses");
        assert_eq!(stat.pid, 42);
        assert_eq!(stat.comm, "a (b) c");
        assert_eq!(stat.state, 'S');
        assert_eq!((stat.ppid, stat.pgid, stat.sid), (1, 42, 40));
        assert!(parse_stat("garbage").is_none());
        assert!(parse_stat("1 (x) Z 1 1 1").expect("parses").is_zombie());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_can_be_read() {
        let pid = i32::try_from(std::process::id()).expect("pid fits");
        let me = stat(pid).expect("own stat");
        assert_eq!(me.pid, pid);
        assert_eq!(me.sid, own_sid());
        let exe = std::env::current_exe().expect("own executable");
        assert_eq!(
            executable_name(pid).as_deref(),
            exe.file_name().and_then(|name| name.to_str())
        );
    }
}
