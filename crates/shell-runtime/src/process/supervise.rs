//! Supervision: the task that waits for the shell (under its timeout),
//! drains the pipes briefly, ends what the shell left behind, and sets the
//! final status; and the guard that finishes the shell if that task is
//! dropped first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::task::JoinHandle;

use super::{KILL_WAIT, ShellProcess};
use crate::orphans;
use crate::spec::{SpawnSpec, name_matches};
use crate::status::{EndRequest, ExitInfo, ShellStatus};
use crate::sys;
use crate::tree::{self, TreeId};

/// After the tree is gone, how long to wait for the pipes to close.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// How long readers that still produce output are waited for, at most.
const PROGRESS_WAIT: Duration = Duration::from_secs(30);

pub(super) async fn supervise(
    shell: Arc<ShellProcess>,
    mut exit: crate::spawn::ExitFuture,
    readers: [Option<JoinHandle<()>>; 2],
    spec: SpawnSpec,
    // Taken as an argument so it is dropped even if the task never ran.
    mut guard: AbandonGuard,
) {
    let waited = match spec.timeout {
        None => (&mut exit).await,
        Some(limit) => {
            let started = Instant::now();
            let run_down =
                crate::timeout_hold::run_down(started, limit, spec.timeout_hold.as_deref());
            let ended = tokio::select! {
                result = &mut exit => Some(result),
                () = run_down => None,
            };
            if let Some(result) = ended {
                result
            } else {
                if shell.request_end(EndRequest::Timeout) {
                    let ender = Arc::clone(&shell);
                    tokio::spawn(async move {
                        ender.escalate(Signal::SIGTERM, spec.leftover_grace).await;
                    });
                }
                (&mut exit).await
            }
        }
    };
    orphans::forget_shell(shell.pid);
    let exit = waited.unwrap_or(ExitInfo {
        code: -1,
        signal: None,
    });
    shell.run_state().exit = Some(exit);
    shell.exited.send_replace(true);

    let mut readers = readers;
    let drained = wait_readers(&mut readers, spec.drain).await;
    let (ended_jobs, swept) = if drained && !left_anything(&shell.tree) {
        (0, false)
    } else {
        (sweep_leftovers(&shell, &spec).await, true)
    };
    // Whatever the session and the tag missed is still in the cgroup.
    if swept && shell.tree.cgroup_populated() {
        let tree = shell.tree.clone();
        let _ = tokio::task::spawn_blocking(move || tree.empty_cgroup()).await;
    }
    // Counted before the cgroup can serve another command.
    let out_of_memory = shell.tree.out_of_memory();
    // With a cgroup left empty and nothing kept, no process can still
    // hold the pipes: the readers only have output left to turn into text
    // (a large output's redaction on a loaded machine, a first use of the
    // token formats), so they are waited for, not cut off.
    let holders_gone = shell.tree.cgroup.is_some()
        && !shell.tree.cgroup_populated()
        && shell.run_state().kept.is_empty();
    shell.tree.retire_cgroup(!swept);
    // Otherwise a reader is waited for while it makes progress; one that
    // stays silent for a whole wait is blocked on a pipe a kept or escaped
    // process holds. Bounded: one that keeps writing cannot hold the shell
    // unfinished.
    let progress_deadline = Instant::now() + PROGRESS_WAIT;
    if holders_gone {
        wait_readers(&mut readers, PROGRESS_WAIT).await;
    }
    loop {
        let before = shell.sequence.load(std::sync::atomic::Ordering::Relaxed);
        if wait_readers(&mut readers, CLOSE_WAIT).await
            || shell.sequence.load(std::sync::atomic::Ordering::Relaxed) == before
            || Instant::now() >= progress_deadline
        {
            break;
        }
    }
    for reader in readers.iter().flatten() {
        // A kept process still holds the pipe: stop reading it.
        reader.abort();
    }
    orphans::reap_orphans();
    {
        let mut state = shell.run_state();
        state.ended_jobs = ended_jobs;
        state.ended_at = Some(Instant::now());
        state.out_of_memory = out_of_memory;
        let status = match (out_of_memory, state.request) {
            (Some(_), None) => ShellStatus::Failed,
            _ => exit.status(state.request),
        };
        if state.status.can_move_to(status) {
            state.status = status;
        }
    }
    #[cfg(target_os = "linux")]
    shell.drop_terminal();
    shell.finished.send_replace(true);
    shell.notify_output();
    guard.0 = None;
}

/// Ends the tree and finishes the shell if its supervising task is dropped
/// before it is done (its runtime shut down): nobody could wait for it or
/// read it any more, and a caller waiting for it must not hang.
pub(super) struct AbandonGuard(pub(super) Option<Arc<ShellProcess>>);

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        let Some(shell) = self.0.take() else { return };
        shell.tree.kill_all_now();
        shell.tree.empty_cgroup();
        shell.tree.retire_cgroup(false);
        // Nobody waits on its pidfd any more: collect its status on a
        // thread of its own (it has been sent SIGKILL, so the wait is short).
        let pid = shell.pid;
        let _ = std::thread::Builder::new()
            .name("shell-reaper".into())
            .spawn(move || {
                sys::wait_blocking(pid);
                orphans::forget_shell(pid);
            });
        orphans::reap_orphans();
        {
            let mut state = shell.run_state();
            state.request.get_or_insert(EndRequest::Kill);
            state.ended_at.get_or_insert_with(Instant::now);
            if state.status.can_move_to(ShellStatus::Killed) {
                state.status = ShellStatus::Killed;
            }
        }
        #[cfg(target_os = "linux")]
        shell.drop_terminal();
        shell.exited.send_replace(true);
        shell.finished.send_replace(true);
    }
}

/// True if anything of the tree may still be alive after the shell exited.
/// Cheap: one group probe, one read of the cgroup's process count and one
/// read of our main thread's children.
fn left_anything(tree: &TreeId) -> bool {
    if sys::group_alive(tree.shell_pid) || tree.cgroup_populated() {
        return true;
    }
    let shells = orphans::live_shells().clone();
    sys::main_thread_children()
        .into_iter()
        .any(|pid| pid != tree.shell_pid && !shells.contains(&pid))
}

/// Ends what the shell left behind (except `keep_running` names) and
/// returns how many jobs that was. After a kill request everything goes at
/// once; after a normal exit, SIGTERM first and SIGKILL after the grace.
async fn sweep_leftovers(shell: &ShellProcess, spec: &SpawnSpec) -> usize {
    let found = shell.tree.collect();
    if found.members.is_empty() {
        return 0;
    }
    let kept = kept_pids(&found, &spec.keep_running);
    let targets: Vec<i32> = found
        .members
        .iter()
        .map(|member| member.pid)
        .filter(|pid| !kept.contains(pid))
        .collect();
    // The jobs the shell left: orphans we adopted, or, in a PID namespace
    // of the command's own, those its lingering init adopted.
    let jobs = found
        .members
        .iter()
        .filter(|member| {
            (member.ppid == shell.pid || found.adopted.contains(&member.pid))
                && !kept.contains(&member.pid)
        })
        .count();
    shell.run_state().kept.clone_from(&kept);
    // Out of the command's cgroup before it is emptied; a namespace's
    // init goes with them, as the namespace ends with it.
    let mut moved = kept.clone();
    if !kept.is_empty() && is_lingering_init(shell.pid) {
        moved.push(shell.pid);
    }
    crate::cgroup::keep(&moved);
    tree::remember_kept(&kept, &shell.tree);
    if targets.is_empty() {
        return 0;
    }
    let forced = shell.end_request().is_some();
    let first = if forced {
        Signal::SIGKILL
    } else {
        Signal::SIGTERM
    };
    for pid in &targets {
        sys::send(*pid, first);
    }
    let deadline = Instant::now() + spec.leftover_grace;
    loop {
        orphans::reap_orphans();
        let still: Vec<i32> = targets
            .iter()
            .copied()
            .filter(|pid| sys::stat(*pid).is_some_and(|stat| !stat.is_zombie()))
            .collect();
        if still.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            for pid in &still {
                sys::send(*pid, Signal::SIGKILL);
            }
        }
        if Instant::now() >= deadline + KILL_WAIT {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Anything forked while we were at it.
    let late = shell.tree.collect();
    for member in late
        .members
        .iter()
        .filter(|member| !kept.contains(&member.pid))
    {
        sys::send(member.pid, Signal::SIGKILL);
    }
    orphans::reap_orphans();
    jobs
}

/// Members whose executable's file name matches a `keep_running` pattern,
/// with their descendants. Never the name a process gives itself: a
/// command could call anything `sccache` to outlive its call.
pub(super) fn kept_pids(found: &tree::TreeMembers, patterns: &[String]) -> Vec<i32> {
    if patterns.is_empty() {
        return Vec::new();
    }
    let mut kept: Vec<i32> = found
        .members
        .iter()
        .filter(|member| {
            sys::executable_name(member.pid)
                .is_some_and(|name| patterns.iter().any(|pattern| name_matches(pattern, &name)))
        })
        .map(|member| member.pid)
        .collect();
    // Members are listed parents first, so one pass takes in descendants.
    for member in &found.members {
        if kept.contains(&member.ppid) && !kept.contains(&member.pid) {
            kept.push(member.pid);
        }
    }
    kept
}

/// Whether `pid` is PID 1 of a PID namespace of its own (its `NSpid`
/// ends in 1) and a child of the process that adopts our orphans (the
/// spawner): a command's init that stays after its shell for the kept
/// processes (`spawn/init.rs`), never a process that took a gone shell's pid.
fn is_lingering_init(pid: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::split_whitespace)
    };
    let nested_init = field("NSpid:").is_some_and(|ids| {
        let ids: Vec<&str> = ids.collect();
        ids.len() > 1 && ids.last() == Some(&"1")
    });
    let parent = field("PPid:")
        .and_then(|mut ids| ids.next())
        .and_then(|id| id.parse::<i32>().ok());
    nested_init && parent == Some(sys::adopter())
}

async fn wait_readers(readers: &mut [Option<JoinHandle<()>>; 2], limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    for slot in readers.iter_mut() {
        if let Some(reader) = slot {
            if reader.is_finished() {
                *slot = None;
                continue;
            }
            if tokio::time::timeout_at(deadline, reader).await.is_ok() {
                *slot = None;
            } else {
                return false;
            }
        }
    }
    true
}
