//! A cgroup per command: membership a command cannot edit (it has neither
//! the session nor an environment variable to shed), so ending a command
//! reaches everything it started, `setsid -f`, double forks and `env -i`
//! included.
//!
//! Every cgroup lives under one server-level parent, `agent-exec-<id>`
//! (the server's random id, see [`crate::instance`]; the server holds an
//! `flock` on that directory for its life, which is how another server
//! tells a live one from a dead one), below the pids hierarchy's (v1) or
//! the unified hierarchy's (v2) cgroup of this process: `cmd-<n>` per command (`sandbox/cmd-<n>` for commands
//! under the sandbox's process cap) and `keep` for the processes the
//! `keep_running` names let live. Making a cgroup (`mkdir`) and removing
//! one cost more than the rest of a short command's start, so a
//! background thread keeps a few made ahead (the pool), and used ones go
//! back to it once nothing is left in them; a spawn only pops one and
//! hands the child an open descriptor of its `tasks` (v1) or
//! `cgroup.procs` (v2), which the child writes `0` to before `setsid`.
//!
//! Emptying one (with any cgroup made inside it): v1 sets `pids.max` to 0,
//! so no fork in it succeeds, then sends SIGKILL to every pid in
//! `cgroup.procs` until none is left; v2 writes `cgroup.kill`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, mpsc};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::instance::{INSTANCE_PREFIX, hold_lock, id_in_name, server_id, try_lock};
use crate::sys;

/// Cgroups made ahead of need.
const POOL_SIZE: usize = 4;

/// Name of the cgroup kept processes move to.
const KEEP: &str = "keep";

/// How a hierarchy ends the processes of a cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// cgroup v1 `pids`: `pids.max` = 0, then SIGKILL until empty.
    PidsV1,
    /// cgroup v2: `cgroup.kill`.
    Unified,
}

impl Kind {
    /// The file the child writes `0` to. On v1, `tasks`: it moves only
    /// the writing thread (the child has no other), which the kernel does
    /// without the global threadgroup lock that `cgroup.procs` takes, a
    /// lock whose write side waits on every fork in flight on the machine
    /// (measured: `cgroup.procs` made spawn-and-wait up to 1.9x slower on
    /// a loaded machine). v2 has no `tasks`.
    fn join_file(self) -> &'static str {
        match self {
            Self::PidsV1 => "tasks",
            Self::Unified => "cgroup.procs",
        }
    }
}

/// One command's cgroup, as the shell's tree knows it.
#[derive(Debug)]
pub(crate) struct CommandCgroup {
    dir: PathBuf,
    kind: Kind,
    /// One lock for every read and write of the cgroup through this handle
    /// and for its retirement: once it has gone back to the pool (and
    /// maybe to another command), a late kill round of this command must
    /// neither list nor freeze it.
    state: Mutex<HandleState>,
}

#[derive(Debug)]
struct HandleState {
    /// Its `tasks` (v1) or `cgroup.procs` (v2), open for writing: the
    /// child joins through it, and it goes back to the pool with the
    /// cgroup.
    procs: Option<File>,
    /// Forks in it have been stopped (v1 `pids.max` 0) or it was emptied.
    frozen: bool,
    /// Given back to the pool: no longer this command's.
    retired: bool,
}

impl CommandCgroup {
    fn state(&self) -> std::sync::MutexGuard<'_, HandleState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pids in it now (zombies included); none once retired.
    pub(crate) fn pids(&self) -> Vec<i32> {
        let state = self.state();
        if state.retired {
            return Vec::new();
        }
        read_pids(&self.dir)
    }

    /// Whether a live (not zombie) process is in it or below it.
    pub(crate) fn populated(&self) -> bool {
        if !maybe_populated(&self.dir, self.kind) {
            return false;
        }
        self.pids()
            .into_iter()
            .any(|pid| sys::stat(pid).is_some_and(|stat| !stat.is_zombie()))
    }

    /// The descriptor the child writes `0` to, while the cgroup is new.
    pub(crate) fn procs_fd(&self) -> Option<RawFd> {
        self.state().procs.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Forks in it fail from now on (v1); the cgroup is being ended.
    pub(crate) fn freeze_forks(&self) {
        let mut state = self.state();
        if state.retired {
            return;
        }
        state.frozen = true;
        if self.kind == Kind::PidsV1 {
            let _ = std::fs::write(self.dir.join("pids.max"), "0");
        }
    }

    /// Ends every process in it, round after round, until none is left.
    pub(crate) fn empty(&self) {
        let mut state = self.state();
        if state.retired {
            return;
        }
        state.frozen = true;
        empty_dir(&self.dir, self.kind);
    }

    /// Gives it back to the pool. One that was found empty and never
    /// frozen goes straight back (the common case: nothing to do); any
    /// other goes to the pool's thread, which empties it first.
    pub(crate) fn retire(&self, known_empty: bool) {
        let Some(pool) = pool() else { return };
        let mut state = self.state();
        if state.retired {
            return;
        }
        state.retired = true;
        let procs = state.procs.take();
        if known_empty
            && !state.frozen
            && let Some(procs) = procs
        {
            let mut free = pool.free.lock().unwrap_or_else(PoisonError::into_inner);
            let lane = free.entry(lane_of(&self.dir)).or_default();
            if lane.len() < 2 * POOL_SIZE {
                lane.push(Fresh {
                    dir: self.dir.clone(),
                    procs,
                });
                return;
            }
        }
        let _ = pool.work.send(Work::Retire(self.dir.clone(), self.kind));
    }
}

struct Fresh {
    dir: PathBuf,
    procs: File,
}

enum Work {
    Refill(PathBuf),
    Retire(PathBuf, Kind),
    /// The cgroups of servers that are gone, under this hierarchy dir.
    RemoveStale(PathBuf),
}

/// The parent a command cgroup was made in: its lane of the pool.
fn lane_of(dir: &Path) -> PathBuf {
    dir.parent().map(Path::to_path_buf).unwrap_or_default()
}

struct Pool {
    parent: PathBuf,
    kind: Kind,
    /// Ready cgroups by the parent they are in (the lane): the server's
    /// cgroup, or a sandbox's pids cgroup below it, whose limit then
    /// holds for its commands only.
    free: Mutex<HashMap<PathBuf, Vec<Fresh>>>,
    work: mpsc::Sender<Work>,
    counter: AtomicU64,
}

impl Pool {
    fn make(&self, lane: &Path) -> io::Result<Fresh> {
        let mut attempts = 0;
        let dir = loop {
            let number = self.counter.fetch_add(1, Ordering::Relaxed);
            let dir = lane.join(format!("cmd-{number}"));
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                // Left by an earlier process with our pid: skip the name.
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists && attempts < 100 => {
                    attempts += 1;
                }
                Err(error) => return Err(error),
            }
        };
        let procs = OpenOptions::new()
            .write(true)
            .open(dir.join(self.kind.join_file()))?;
        Ok(Fresh { dir, procs })
    }

    /// An emptied cgroup goes back to the pool (forks allowed again), so
    /// a command costs no `mkdir` and `rmdir` in the steady state; one
    /// that cannot be emptied, or one too many, is removed.
    fn recycle(&self, dir: PathBuf) {
        // Cgroups a command made inside its own go, with anything in them.
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    end_tree(&entry.path());
                }
            }
        }
        let reusable = read_pids(&dir)
            .into_iter()
            .all(|pid| sys::stat(pid).is_none_or(|stat| stat.is_zombie()))
            && (self.kind != Kind::PidsV1 || std::fs::write(dir.join("pids.max"), "max").is_ok());
        if reusable {
            let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
            let lane = free.entry(lane_of(&dir)).or_default();
            if lane.len() < 2 * POOL_SIZE
                && let Ok(procs) = OpenOptions::new()
                    .write(true)
                    .open(dir.join(self.kind.join_file()))
            {
                lane.push(Fresh { dir, procs });
                return;
            }
        }
        remove_when_empty(&dir);
    }

    fn refill(&self, lane: &Path) {
        loop {
            let short = {
                let free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
                free.get(lane).is_none_or(|ready| ready.len() < POOL_SIZE)
            };
            if !short {
                return;
            }
            match self.make(lane) {
                Ok(fresh) => self
                    .free
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(lane.to_path_buf())
                    .or_default()
                    .push(fresh),
                Err(error) => {
                    tracing::warn!(%error, "cannot make a command cgroup");
                    return;
                }
            }
        }
    }
}

fn pool() -> Option<&'static Pool> {
    static POOL: OnceLock<Option<Pool>> = OnceLock::new();
    POOL.get_or_init(|| match start_pool() {
        Ok(pool) => Some(pool),
        Err(reason) => {
            tracing::info!("no cgroup per command: {reason}");
            None
        }
    })
    .as_ref()
}

fn start_pool() -> Result<Pool, String> {
    let (base, kind) = hierarchy().ok_or("no pids (v1) or unified (v2) cgroup hierarchy")?;
    let parent = claim_parent(&base).map_err(|error| {
        format!(
            "cannot create this server's cgroup in `{}`: {error}",
            base.display()
        )
    })?;
    std::fs::create_dir_all(parent.join(KEEP))
        .map_err(|error| format!("cannot create `{}`: {error}", parent.display()))?;
    let (work, jobs) = mpsc::channel();
    let pool = Pool {
        parent,
        kind,
        free: Mutex::new(HashMap::new()),
        work,
        counter: AtomicU64::new(0),
    };
    // One made now proves the hierarchy takes new cgroups from us.
    let first = pool
        .make(&pool.parent)
        .map_err(|error| format!("cannot create a cgroup: {error}"))?;
    pool.free
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(pool.parent.clone())
        .or_default()
        .push(first);
    std::thread::Builder::new()
        .name("cgroup-pool".into())
        .spawn(move || pool_thread(&jobs))
        .map_err(|error| format!("cannot start the cgroup thread: {error}"))?;
    let _ = pool.work.send(Work::Refill(pool.parent.clone()));
    // Off the start-up path: what dead servers left can wait.
    let _ = pool.work.send(Work::RemoveStale(base));
    Ok(pool)
}

fn pool_thread(jobs: &mpsc::Receiver<Work>) {
    for job in jobs {
        let Some(pool) = pool() else { return };
        match job {
            Work::Refill(lane) => pool.refill(&lane),
            Work::RemoveStale(base) => remove_stale(&base),
            Work::Retire(dir, kind) => {
                if read_pids(&dir)
                    .into_iter()
                    .any(|pid| sys::stat(pid).is_some_and(|stat| !stat.is_zombie()))
                {
                    empty_dir(&dir, kind);
                }
                pool.recycle(dir);
            }
        }
    }
}

/// Takes a cgroup for one command, or `None` where none can be made:
/// below `within` (a sandbox's pids cgroup inside this server's) when
/// given, else below the server's cgroup.
pub(crate) fn take(within: Option<&Path>) -> Option<CommandCgroup> {
    let pool = pool()?;
    let lane = match within {
        Some(dir) if dir.starts_with(&pool.parent) => dir.to_path_buf(),
        // A sandbox cgroup elsewhere: its commands join it as they are.
        Some(_) => return None,
        None => pool.parent.clone(),
    };
    let (popped, low) = {
        let mut free = pool.free.lock().unwrap_or_else(PoisonError::into_inner);
        let ready = free.entry(lane.clone()).or_default();
        let popped = ready.pop();
        (popped, ready.len() < POOL_SIZE / 2)
    };
    // Used cgroups come back as their commands end; make more only when
    // many run at once.
    if low {
        let _ = pool.work.send(Work::Refill(lane.clone()));
    }
    // An empty lane (a burst of spawns) makes one here rather than wait.
    let fresh = match popped {
        Some(fresh) => fresh,
        None => pool.make(&lane).ok()?,
    };
    Some(CommandCgroup {
        dir: fresh.dir,
        kind: pool.kind,
        state: Mutex::new(HandleState {
            procs: Some(fresh.procs),
            frozen: false,
            retired: false,
        }),
    })
}

/// Where this server's cgroups live, once the first is made (or made now);
/// `None` where none can be made.
pub fn command_cgroups_dir() -> Option<PathBuf> {
    pool().map(|pool| pool.parent.clone())
}

/// Moves kept processes to the server-level keep cgroup, out of reach of
/// their command's end. Returns false where there is none.
pub(crate) fn keep(pids: &[i32]) -> bool {
    let Some(pool) = pool() else { return false };
    let procs = pool.parent.join(KEEP).join("cgroup.procs");
    for pid in pids {
        // A pid that is gone by now needs no place.
        let _ = std::fs::write(&procs, pid.to_string());
    }
    true
}

/// Server exit: ends every process in every cgroup of this server (the
/// kept ones too), and removes them all. Also ends the processes this
/// subreaper adopted that are not its own, for where no cgroup exists.
pub fn end_all_contained() {
    if let Some(pool) = pool() {
        pool.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        end_tree(&pool.parent);
    }
    crate::tree::end_adopted();
}

/// Empties and removes every cgroup below `parent`, then `parent`: what
/// the janitor does for a server that died, and a server does at its exit.
pub(crate) fn end_tree(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let children: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .map(|entry| entry.path())
        .collect();
    for child in &children {
        end_tree(child);
    }
    let kind = if parent.join("cgroup.kill").exists() {
        Kind::Unified
    } else {
        Kind::PidsV1
    };
    empty_dir(parent, kind);
    remove_when_empty(parent);
}

fn empty_dir(dir: &Path, kind: Kind) -> bool {
    match kind {
        Kind::PidsV1 => {
            let _ = std::fs::write(dir.join("pids.max"), "0");
        }
        Kind::Unified => {
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        }
    }
    for _ in 0..400 {
        let live: Vec<i32> = read_pids(dir)
            .into_iter()
            .filter(|pid| sys::stat(*pid).is_some_and(|stat| !stat.is_zombie()))
            .collect();
        if live.is_empty() {
            return true;
        }
        for pid in live {
            sys::send(pid, Signal::SIGKILL);
        }
        crate::tree::reap_orphans();
        std::thread::sleep(Duration::from_millis(2));
    }
    tracing::warn!(cgroup = %dir.display(), "processes still appear after 400 rounds of SIGKILL");
    false
}

fn remove_when_empty(dir: &Path) {
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => {
                // Busy while the last killed ones finish exiting.
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => return,
        }
    }
}

/// The pids in `dir` and in every cgroup below it: a command that can
/// write to the cgroup tree (root, unsandboxed) may make cgroups inside its
/// own, and a nested agent-exec does.
fn read_pids(dir: &Path) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|text| {
            text.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pids.extend(read_pids(&entry.path()));
            }
        }
    }
    pids
}

/// False when the kernel's own count says nothing is in the cgroup or
/// below it (the common case at a command's end, one read).
fn maybe_populated(dir: &Path, kind: Kind) -> bool {
    match kind {
        Kind::PidsV1 => std::fs::read_to_string(dir.join("pids.current"))
            .map_or(true, |text| text.trim() != "0"),
        Kind::Unified => std::fs::read_to_string(dir.join("cgroup.events"))
            .map_or(true, |text| !text.lines().any(|line| line == "populated 0")),
    }
}

/// Removes the cgroups of servers that are gone (killed before their
/// janitor could run, or without one): those named by an id of ours whose
/// lock nobody holds. A cgroup whose lock is held is a live server's (in
/// whatever PID namespace); one named otherwise (a pid, as older versions
/// named theirs) is not provably a dead server's, and stays.
pub(crate) fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // A staging name (see `claim_parent`) left by a server that died
        // between making and naming its cgroup.
        let Some(id) = id_in_name(name.strip_prefix('.').unwrap_or(name)) else {
            continue;
        };
        if id == server_id() {
            continue;
        }
        // Held while the tree goes: a dead server's cgroup is ended once.
        if let Ok(Some(_lock)) = try_lock(&entry.path()) {
            tracing::info!(cgroup = %entry.path().display(), "removing the cgroups of a server that died");
            end_tree(&entry.path());
        }
    }
}

/// This server's parent cgroup under `base`, `agent-exec-<id>`, made and
/// locked once per hierarchy. It is made under a staging name (`.` first,
/// which no other server takes for a server's cgroup before it can lock
/// it), locked, then renamed: another server never sees it unlocked.
pub(crate) fn claim_parent(base: &Path) -> io::Result<PathBuf> {
    static CLAIMED: Mutex<Vec<(PathBuf, PathBuf, File)>> = Mutex::new(Vec::new());
    let mut claimed = CLAIMED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, dir, _)) = claimed.iter().find(|(known, _, _)| known == base) {
        return Ok(dir.clone());
    }
    let name = format!("{INSTANCE_PREFIX}{}", server_id());
    let staging = base.join(format!(".{name}"));
    let dir = base.join(&name);
    std::fs::create_dir(&staging)?;
    let lock = match hold_lock(&staging) {
        Ok(lock) => lock,
        Err(error) => {
            let _ = std::fs::remove_dir(&staging);
            return Err(error);
        }
    };
    // The cgroup file systems refuse a rename onto an existing name.
    if let Err(error) = std::fs::rename(&staging, &dir) {
        let _ = std::fs::remove_dir(&staging);
        return Err(error);
    }
    claimed.push((base.to_path_buf(), dir.clone(), lock));
    Ok(dir)
}

/// The directory of this process's cgroup in the hierarchy commands get a
/// cgroup in: the v1 `pids` controller where it is mounted (`pids.max`
/// stops forks while a cgroup is emptied), else the unified hierarchy when
/// it has `cgroup.kill`.
fn hierarchy() -> Option<(PathBuf, Kind)> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    hierarchy_in(&cgroups, &mountinfo, |dir| dir.join("cgroup.kill").exists())
}

/// [`hierarchy`] from the texts of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`; `can_kill` says whether a v2 cgroup directory
/// has `cgroup.kill`.
fn hierarchy_in(
    cgroups: &str,
    mountinfo: &str,
    can_kill: impl Fn(&Path) -> bool,
) -> Option<(PathBuf, Kind)> {
    let mut unified = None;
    for line in mountinfo.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let mut after = after.split_whitespace();
        let fstype = after.next().unwrap_or_default();
        let options = after.nth(1).unwrap_or_default();
        let Some(mount) = before.split_whitespace().nth(4).map(PathBuf::from) else {
            continue;
        };
        if fstype == "cgroup" && options.split(',').any(|option| option == "pids") {
            let own = cgroups.lines().find_map(|entry| {
                let mut fields = entry.splitn(3, ':');
                let _ = fields.next();
                let controllers = fields.next()?;
                let path = fields.next()?;
                controllers
                    .split(',')
                    .any(|c| c == "pids")
                    .then(|| path.to_owned())
            })?;
            return Some((mount.join(own.trim_start_matches('/')), Kind::PidsV1));
        }
        if fstype == "cgroup2"
            && unified.is_none()
            && let Some(own) = cgroups.lines().find_map(|entry| entry.strip_prefix("0::"))
        {
            let dir = mount.join(own.trim_start_matches('/'));
            if can_kill(&dir) {
                unified = Some((dir, Kind::Unified));
            }
        }
    }
    unified
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A late kill round of a finished command (it raced the command's
    /// end) must not stop forks in a cgroup that may serve another one.
    #[test]
    fn a_retired_cgroup_is_neither_listed_nor_frozen_by_its_old_command() {
        let Some(cgroup) = take(None) else {
            eprintln!("skipped: no cgroup can be made here");
            return;
        };
        cgroup.retire(true);
        cgroup.freeze_forks();
        cgroup.empty();
        assert!(cgroup.pids().is_empty());
        if cgroup.kind == Kind::PidsV1 {
            let max = std::fs::read_to_string(cgroup.dir.join("pids.max")).expect("pids.max");
            assert_eq!(max.trim(), "max");
        }
    }

    #[test]
    fn the_v1_pids_controller_is_preferred_and_v2_needs_cgroup_kill() {
        let hybrid = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        let cgroups = "8:pids:/user.slice\n4:memory:/x\n0::/user.slice/session-1.scope\n";
        assert_eq!(
            hierarchy_in(cgroups, hybrid, |_| true),
            Some((
                PathBuf::from("/sys/fs/cgroup/pids/user.slice"),
                Kind::PidsV1
            ))
        );
        let unified = "30 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let cgroups = "0::/user.slice/app.scope\n";
        assert_eq!(
            hierarchy_in(cgroups, unified, |_| true),
            Some((
                PathBuf::from("/sys/fs/cgroup/user.slice/app.scope"),
                Kind::Unified
            ))
        );
        // A kernel before 5.14 has no cgroup.kill: no cgroups then.
        assert_eq!(hierarchy_in(cgroups, unified, |_| false), None);
        assert_eq!(hierarchy_in("", "garbage\n", |_| true), None);
    }

    #[test]
    fn pids_are_read_as_numbers_and_a_missing_cgroup_has_none() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("cgroup.procs"), "12\n34\n").expect("write");
        assert_eq!(read_pids(dir.path()), vec![12, 34]);
        assert!(read_pids(&dir.path().join("missing")).is_empty());
    }
}
