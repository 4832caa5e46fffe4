//! The orphans this process adopts as a child subreaper: which children
//! are shells tokio waits for (never reaped here), reaping the others once
//! they end, and ending them all at server exit. Below both the cgroups
//! and the shell trees, which reap while they kill.

use std::sync::{Mutex, MutexGuard, PoisonError};

use nix::sys::signal::Signal;

use crate::sys;

/// Pids of shells tokio is waiting for. The reaper never touches these; the
/// spawner holds the lock from fork until the pid is recorded, so a shell
/// that exits at once cannot be mistaken for an orphan.
static LIVE_SHELLS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

pub(crate) fn live_shells() -> MutexGuard<'static, Vec<i32>> {
    LIVE_SHELLS.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn forget_shell(pid: i32) {
    live_shells().retain(|known| *known != pid);
}

/// Server exit: ends every process this subreaper adopted that was not
/// started by this process's own code (not in its session), with their
/// descendants, kept ones included; for where no cgroup holds them.
pub(crate) fn end_adopted() {
    let own_sid = sys::own_sid();
    for _ in 0..50 {
        let shells = live_shells().clone();
        let mut targets: Vec<i32> = sys::main_thread_children()
            .into_iter()
            .filter(|pid| !shells.contains(pid))
            .filter(|pid| {
                sys::stat(*pid).is_some_and(|stat| stat.sid != own_sid && !stat.is_zombie())
            })
            .collect();
        if targets.is_empty() {
            break;
        }
        let mut index = 0;
        while index < targets.len() {
            targets.extend(sys::children(targets[index]));
            index += 1;
        }
        for pid in &targets {
            sys::send(*pid, Signal::SIGKILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        reap_orphans();
    }
    reap_orphans();
}

static REAPER: Mutex<Option<tokio::task::JoinHandle<()>>> = Mutex::new(None);

/// Starts, on the current runtime, a task that reaps adopted orphans on
/// every SIGCHLD (unless one is running): an orphan that exits on its own,
/// long after its shell, must not stay a zombie.
pub(crate) fn ensure_reaper() {
    let mut reaper = REAPER.lock().unwrap_or_else(PoisonError::into_inner);
    if reaper.as_ref().is_some_and(|task| !task.is_finished()) {
        return;
    }
    let Ok(mut signals) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
    else {
        return;
    };
    *reaper = Some(tokio::spawn(async move {
        while signals.recv().await.is_some() {
            reap_orphans();
        }
    }));
}

/// Collects the exit status of every adopted orphan that has ended, by pid.
/// A child in our own process session was started by other code in this
/// process and is left to whoever started it; a shell tokio waits for is
/// never touched.
pub(crate) fn reap_orphans() {
    let shells = live_shells();
    let own_sid = sys::own_sid();
    for pid in sys::main_thread_children() {
        if shells.contains(&pid) {
            continue;
        }
        if let Some(stat) = sys::stat(pid)
            && stat.is_zombie()
            && stat.sid != own_sid
        {
            sys::reap(pid);
        }
    }
}
