//! Finding every process a shell started, including those that left its
//! process group (`setsid`, double fork), and ending them.
//!
//! After `setsid` a process is out of reach of a group signal. Two facts
//! keep it in reach: this process is a child subreaper, so an orphan from a
//! tree we started is re-parented to us rather than to init; and every
//! shell's environment carries `AGENT_EXEC_SHELL=<tag>`, which its
//! descendants inherit, so an adopted orphan can be traced to its shell.
//! Both can be shed (`env -u`, `env -i`); where a cgroup could be made for
//! the command (`cgroup.rs`), every process in it is a member too, and
//! that membership a command cannot shed.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use nix::sys::signal::Signal;

use crate::cgroup::CommandCgroup;
use crate::orphans::{live_shells, reap_orphans};
use crate::sys::{self, ProcStat};

/// The environment variable that marks every process of one shell's tree.
pub const SHELL_TAG_VAR: &str = "AGENT_EXEC_SHELL";

/// The processes of one shell's tree, found by walking `/proc`.
#[derive(Debug, Default)]
pub(crate) struct TreeMembers {
    /// Every live process below the shell (the shell itself excluded).
    pub(crate) members: Vec<ProcStat>,
    /// The members we adopted after their parent died: the jobs a finished
    /// shell left behind.
    pub(crate) adopted: Vec<i32>,
}

/// Identifies one shell's tree.
#[derive(Debug, Clone)]
pub(crate) struct TreeId {
    pub(crate) shell_pid: i32,
    /// `AGENT_EXEC_SHELL=<tag>` as bytes.
    pub(crate) tag_entry: Vec<u8>,
    /// The command's own cgroup, where one could be made: every process
    /// the command started is in it, whatever it did to its session or
    /// environment.
    pub(crate) cgroup: Option<Arc<CommandCgroup>>,
}

impl TreeId {
    pub(crate) fn new(shell_pid: i32, tag: &str, cgroup: Option<CommandCgroup>) -> Self {
        Self {
            shell_pid,
            tag_entry: format!("{SHELL_TAG_VAR}={tag}").into_bytes(),
            cgroup: cgroup.map(Arc::new),
        }
    }

    /// Whether the OOM killer ended a process of its cgroup, and the
    /// memory limit the cgroup had.
    pub(crate) fn out_of_memory(&self) -> Option<crate::status::OutOfMemory> {
        let cgroup = self.cgroup.as_ref()?;
        (cgroup.oom_kills() > 0).then(|| crate::status::OutOfMemory {
            limit: cgroup.memory_limit(),
        })
    }

    /// Whether its cgroup still holds a live process.
    pub(crate) fn cgroup_populated(&self) -> bool {
        self.cgroup
            .as_ref()
            .is_some_and(|cgroup| cgroup.populated())
    }

    /// Ends whatever is left in its cgroup (kept processes have moved out).
    pub(crate) fn empty_cgroup(&self) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.empty();
        }
    }

    /// Gives its cgroup back to the pool; `known_empty` when nothing was
    /// left in it a moment ago.
    pub(crate) fn retire_cgroup(&self, known_empty: bool) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.retire(known_empty);
        }
    }

    /// Whether an adopted child of ours came from this shell: it is still in
    /// the shell's process session (its sid is the shell's pid), or carries
    /// its tag.
    fn owns_orphan(&self, orphan: &ProcStat) -> bool {
        orphan.sid == self.shell_pid || sys::environ_contains(orphan.pid, &self.tag_entry)
    }

    /// Every live process of the tree: the shell's descendants, and the
    /// orphans adopted from it (found among our main thread's children).
    pub(crate) fn collect(&self) -> TreeMembers {
        let own_sid = sys::own_sid();
        let ours = sys::main_thread_children();
        let shells: HashSet<i32> = live_shells().iter().copied().collect();
        let mut found = TreeMembers::default();
        let mut queue: VecDeque<i32> = sys::children(self.shell_pid).into();
        for pid in ours {
            if pid == self.shell_pid || shells.contains(&pid) {
                continue;
            }
            let Some(stat) = sys::stat(pid) else { continue };
            if stat.sid == own_sid {
                continue; // Started by someone else in this process, not by a shell.
            }
            if self.owns_orphan(&stat) {
                found.adopted.push(pid);
                queue.push_back(pid);
            }
        }
        // The cgroup holds those the session and the tag miss.
        if let Some(cgroup) = &self.cgroup {
            let own_pid = sys::adopter();
            for pid in cgroup.pids() {
                if pid == self.shell_pid || shells.contains(&pid) {
                    continue;
                }
                if !found.adopted.contains(&pid)
                    && sys::stat(pid).is_some_and(|stat| stat.ppid == own_pid)
                {
                    found.adopted.push(pid);
                }
                queue.push_back(pid);
            }
        }
        let mut seen = HashSet::new();
        while let Some(pid) = queue.pop_front() {
            if !seen.insert(pid) {
                continue;
            }
            let Some(stat) = sys::stat(pid) else { continue };
            queue.extend(sys::children(pid));
            if !stat.is_zombie() {
                found.members.push(stat);
            }
        }
        found
            .adopted
            .retain(|pid| found.members.iter().any(|member| member.pid == *pid));
        found
    }

    /// Sends `signal` to the shell's group and to every member found.
    pub(crate) fn signal_all(&self, signal: Signal) -> usize {
        sys::send_group(self.shell_pid, signal);
        let found = self.collect();
        for member in &found.members {
            sys::send(member.pid, signal);
        }
        found.members.len()
    }

    /// One round of SIGKILL to the group and every member found; true when
    /// nothing of the tree was left to signal.
    fn kill_round(&self) -> bool {
        if let Some(cgroup) = &self.cgroup {
            cgroup.freeze_forks();
        }
        let alive_group = sys::send_group(self.shell_pid, Signal::SIGKILL);
        let found = self.collect();
        for member in &found.members {
            sys::send(member.pid, Signal::SIGKILL);
        }
        reap_orphans();
        !alive_group && found.members.is_empty()
    }

    /// SIGKILL, round after round, until nothing of the tree is left (or a
    /// bounded number of rounds for a tree that forks faster than we kill).
    pub(crate) async fn kill_all(&self) {
        for _ in 0..100 {
            if self.kill_round() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        tracing::warn!(
            shell_pid = self.shell_pid,
            "processes still appear after 100 rounds of SIGKILL (a fork storm?)"
        );
    }

    /// The same, without waiting: for `Drop`, where nothing can be awaited.
    pub(crate) fn kill_all_now(&self) {
        for _ in 0..20 {
            if self.kill_round() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Processes left running on purpose (`keep_running`), to end at shutdown.
static KEPT: Mutex<Vec<(i32, TreeId)>> = Mutex::new(Vec::new());

pub(crate) fn remember_kept(pids: &[i32], tree: &TreeId) {
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    kept.extend(pids.iter().map(|pid| (*pid, tree.clone())));
}

/// Ends every process kept running on purpose, with its descendants, and
/// reaps them.
pub(crate) async fn end_kept() {
    let kept = std::mem::take(&mut *KEPT.lock().unwrap_or_else(PoisonError::into_inner));
    let mut targets = Vec::new();
    for (pid, tree) in &kept {
        // Only if it still carries the tag: the pid may have been reused.
        if sys::environ_contains(*pid, &tree.tag_entry) {
            targets.push(*pid);
            let mut index = targets.len() - 1;
            while index < targets.len() {
                targets.extend(sys::children(targets[index]));
                index += 1;
            }
        }
    }
    for pid in &targets {
        sys::send(*pid, Signal::SIGKILL);
    }
    for _ in 0..200 {
        reap_orphans();
        if !targets
            .iter()
            .any(|pid| sys::stat(*pid).is_some_and(|stat| !stat.is_zombie()))
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    reap_orphans();
}

/// The same without waiting, for `Drop`; whatever dies later is reaped by
/// the SIGCHLD reaper.
pub(crate) fn end_kept_now() {
    let kept = std::mem::take(&mut *KEPT.lock().unwrap_or_else(PoisonError::into_inner));
    for (pid, tree) in &kept {
        if sys::environ_contains(*pid, &tree.tag_entry) {
            for child in sys::children(*pid) {
                sys::send(child, Signal::SIGKILL);
            }
            sys::send(*pid, Signal::SIGKILL);
        }
    }
}
