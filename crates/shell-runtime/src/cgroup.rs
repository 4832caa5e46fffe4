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
//!
//! Each command's cgroup also carries its limits ([`CommandLimits`]):
//! `pids.max` (1024 by default, per command, so one command cannot take
//! the processes another needs), a memory limit when one is asked for,
//! and the default CPU weight of a cgroup of its own (the scheduler shares
//! the CPU between commands, not between their threads). On v1 the
//! `memory` and `cpu` controllers are hierarchies of their own: a command
//! has a `cmd-<n>` of the same name in each that is mounted, under an
//! `agent-exec-<id>` there too, and the child joins them all (one
//! descriptor each). A command killed by the OOM killer is told from the
//! memory cgroup's `oom_kill` count (v1 `memory.oom_control`, v2
//! `memory.events`), read when it ends.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
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

pub(crate) use ::spawn::cgroup::{JoinFds, MAX_JOINS};

/// The per-command process cap when none is asked for.
pub const DEFAULT_MAX_PROCESSES: u64 = 1024;

/// What a command's own cgroup limits (where one can be made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandLimits {
    /// `pids.max` of the command's cgroup: processes (threads, on v1) the
    /// command may have at once; `None` for no cap.
    pub max_processes: Option<u64>,
    /// Memory the command may use, in bytes (v1 `memory.limit_in_bytes`
    /// and `memory.memsw.limit_in_bytes`, v2 `memory.max` and
    /// `memory.swap.max` 0); `None` for no limit.
    pub memory: Option<u64>,
}

impl Default for CommandLimits {
    fn default() -> Self {
        Self {
            max_processes: Some(DEFAULT_MAX_PROCESSES),
            memory: None,
        }
    }
}

/// A v1 controller mounted as a hierarchy of its own, besides `pids`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Memory,
    Cpu,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Cpu => "cpu",
        }
    }
}

/// The server's parent cgroup in another v1 hierarchy.
#[derive(Debug, Clone)]
struct Extra {
    controller: Controller,
    parent: PathBuf,
}

/// The limits last written to a cgroup; `None` where not known.
#[derive(Debug, Clone, Copy, Default)]
struct Applied {
    max_processes: Option<Option<u64>>,
    memory: Option<Option<u64>>,
}

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
    /// Its memory cgroup (v1: in the memory hierarchy; v2: `dir` itself,
    /// when the controller is enabled), where OOM kills are counted.
    memory_dir: Option<PathBuf>,
    /// The memory limit it was taken with.
    memory_limit: Option<u64>,
    /// The OOM kills counted in it before this command.
    oom_base: u64,
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
    /// The same for the other v1 hierarchies (memory, cpu).
    extras: Vec<(PathBuf, File)>,
    applied: Applied,
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

    /// The descriptors the child writes `0` to (the pids or unified
    /// cgroup first), while the cgroup is new; -1 pads the rest.
    pub(crate) fn join_fds(&self) -> JoinFds {
        let state = self.state();
        let mut fds = [-1; MAX_JOINS];
        let all = state
            .procs
            .iter()
            .chain(state.extras.iter().map(|(_, file)| file));
        for (slot, file) in fds.iter_mut().zip(all) {
            *slot = file.as_raw_fd();
        }
        fds
    }

    /// How many of its processes the OOM killer ended since it was taken
    /// (under its own memory limit, or when the machine or a parent
    /// cgroup ran out); 0 without a memory cgroup.
    pub(crate) fn oom_kills(&self) -> u64 {
        if self.state().retired {
            return 0;
        }
        self.memory_dir
            .as_deref()
            .map_or(0, |dir| oom_kill_count(dir).saturating_sub(self.oom_base))
    }

    /// The memory limit it runs under, if any.
    pub(crate) fn memory_limit(&self) -> Option<u64> {
        self.memory_limit
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
        let extras = std::mem::take(&mut state.extras);
        if known_empty
            && !state.frozen
            && let Some(procs) = procs
        {
            let oom_base = self.memory_dir.as_deref().map_or(0, oom_kill_count);
            let mut free = pool.free.lock().unwrap_or_else(PoisonError::into_inner);
            let lane = free.entry(lane_of(&self.dir)).or_default();
            if lane.len() < 2 * POOL_SIZE {
                lane.push(Fresh {
                    dir: self.dir.clone(),
                    procs,
                    extras,
                    applied: state.applied,
                    oom_base,
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
    /// Its namesakes in the other v1 hierarchies, with their `tasks`.
    extras: Vec<(PathBuf, File)>,
    applied: Applied,
    oom_base: u64,
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
    /// The server's cgroups in the v1 memory and cpu hierarchies.
    extras: Vec<Extra>,
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
        let mut applied = Applied::default();
        if write_max_processes(&dir, Some(DEFAULT_MAX_PROCESSES)) {
            applied.max_processes = Some(Some(DEFAULT_MAX_PROCESSES));
        }
        let mut extras = Vec::new();
        if let Some(name) = dir.file_name() {
            for extra in &self.extras {
                let namesake = extra.parent.join(name);
                // A hierarchy that refuses one more cgroup only leaves the
                // command without that controller's limit.
                if std::fs::create_dir(&namesake).is_err() {
                    continue;
                }
                if extra.controller == Controller::Memory {
                    // No swapping around the limit.
                    let _ = std::fs::write(namesake.join("memory.swappiness"), "0");
                }
                match OpenOptions::new().write(true).open(namesake.join("tasks")) {
                    Ok(file) => extras.push((namesake, file)),
                    Err(_) => {
                        let _ = std::fs::remove_dir(&namesake);
                    }
                }
            }
        }
        applied.memory = Some(None);
        Ok(Fresh {
            dir,
            procs,
            extras,
            applied,
            oom_base: 0,
        })
    }

    /// The command's memory cgroup: its namesake in the v1 memory
    /// hierarchy, or its own v2 cgroup when that has the controller.
    fn memory_dir(&self, fresh: &Fresh) -> Option<PathBuf> {
        match self.kind {
            Kind::PidsV1 => {
                let memory = self
                    .extras
                    .iter()
                    .find(|extra| extra.controller == Controller::Memory)?;
                fresh
                    .extras
                    .iter()
                    .find(|(dir, _)| dir.starts_with(&memory.parent))
                    .map(|(dir, _)| dir.clone())
            }
            Kind::Unified => fresh
                .dir
                .join("memory.max")
                .exists()
                .then(|| fresh.dir.clone()),
        }
    }

    /// An emptied cgroup goes back to the pool (forks allowed again, up
    /// to the default cap), so a command costs no `mkdir` and `rmdir` in
    /// the steady state; one that cannot be emptied, or one too many, is
    /// removed.
    fn recycle(&self, dir: PathBuf) {
        let namesakes: Vec<PathBuf> = dir.file_name().map_or_else(Vec::new, |name| {
            self.extras
                .iter()
                .map(|extra| extra.parent.join(name))
                .filter(|namesake| namesake.is_dir())
                .collect()
        });
        // Cgroups a command made inside its own go, with anything in them.
        for own in std::iter::once(&dir).chain(&namesakes) {
            if let Ok(entries) = std::fs::read_dir(own) {
                for entry in entries.flatten() {
                    if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                        end_tree(&entry.path());
                    }
                }
            }
        }
        let reusable = read_pids(&dir)
            .into_iter()
            .all(|pid| sys::stat(pid).is_none_or(|stat| stat.is_zombie()))
            && (self.kind != Kind::PidsV1
                || write_max_processes(&dir, Some(DEFAULT_MAX_PROCESSES)));
        if reusable {
            let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
            let lane = free.entry(lane_of(&dir)).or_default();
            if lane.len() < 2 * POOL_SIZE
                && let Ok(procs) = OpenOptions::new()
                    .write(true)
                    .open(dir.join(self.kind.join_file()))
            {
                let extras = namesakes
                    .iter()
                    .filter_map(|namesake| {
                        let file = OpenOptions::new()
                            .write(true)
                            .open(namesake.join("tasks"))
                            .ok()?;
                        Some((namesake.clone(), file))
                    })
                    .collect();
                let mut fresh = Fresh {
                    dir,
                    procs,
                    extras,
                    applied: Applied {
                        max_processes: Some(Some(DEFAULT_MAX_PROCESSES)),
                        memory: None,
                    },
                    oom_base: 0,
                };
                fresh.oom_base = self.memory_dir(&fresh).as_deref().map_or(0, oom_kill_count);
                lane.push(fresh);
                return;
            }
        }
        remove_when_empty(&dir);
        for namesake in &namesakes {
            remove_when_empty(namesake);
        }
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
    let mut extras = Vec::new();
    let mut extra_bases = Vec::new();
    if kind == Kind::PidsV1 {
        for (controller, base) in v1_extra_hierarchies() {
            match claim_parent(&base) {
                Ok(parent) => {
                    let _ = std::fs::create_dir_all(parent.join(KEEP));
                    extras.push(Extra { controller, parent });
                    extra_bases.push(base);
                }
                Err(error) => tracing::info!(
                    "no {} cgroup per command: cannot create this server's cgroup in `{}`: {error}",
                    controller.name(),
                    base.display()
                ),
            }
        }
    } else {
        enable_controllers(&parent);
    }
    let (work, jobs) = mpsc::channel();
    let pool = Pool {
        parent,
        kind,
        extras,
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
    for base in extra_bases {
        let _ = pool.work.send(Work::RemoveStale(base));
    }
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

/// Takes a cgroup for one command, set to `limits`, or `None` where none
/// can be made: below `within` (a sandbox's pids cgroup inside this
/// server's, whose cap all its commands share) when given, else below the
/// server's cgroup. Its own `pids.max` caps the command alone.
pub(crate) fn take(within: Option<&Path>, limits: &CommandLimits) -> Option<CommandCgroup> {
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
    let mut fresh = match popped {
        Some(fresh) => fresh,
        None => pool.make(&lane).ok()?,
    };
    let memory_dir = pool.memory_dir(&fresh);
    // Written only when they differ from what the cgroup has: the common
    // case (the defaults, or the server's one setting) writes nothing.
    if fresh.applied.max_processes != Some(limits.max_processes) {
        fresh.applied.max_processes =
            write_max_processes(&fresh.dir, limits.max_processes).then_some(limits.max_processes);
    }
    if fresh.applied.memory != Some(limits.memory) {
        let written = match &memory_dir {
            Some(dir) => write_memory_limit(dir, pool.kind, limits.memory),
            None => limits.memory.is_none(),
        };
        fresh.applied.memory = written.then_some(limits.memory);
        if !written {
            tracing::warn!(limit = ?limits.memory, "cannot set the memory limit of a command cgroup");
        }
    }
    Some(CommandCgroup {
        dir: fresh.dir,
        kind: pool.kind,
        memory_limit: limits.memory.filter(|_| fresh.applied.memory.is_some()),
        memory_dir,
        oom_base: fresh.oom_base,
        state: Mutex::new(HandleState {
            procs: Some(fresh.procs),
            extras: fresh.extras,
            applied: fresh.applied,
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
    let places: Vec<PathBuf> = std::iter::once(&pool.parent)
        .chain(pool.extras.iter().map(|extra| &extra.parent))
        .map(|parent| parent.join(KEEP).join("cgroup.procs"))
        .collect();
    for pid in pids {
        for procs in &places {
            // A pid that is gone by now needs no place.
            let _ = std::fs::write(procs, pid.to_string());
        }
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
        for extra in &pool.extras {
            end_tree(&extra.parent);
        }
    }
    crate::orphans::end_adopted();
}

/// What the janitor does for a server that is gone: [`end_tree`] of its
/// parent cgroup `parent` (see [`command_cgroups_dir`]), then of its
/// namesakes in the v1 memory and cpu hierarchies (the janitor runs in
/// the cgroups the server started in).
pub(crate) fn end_server_tree(parent: &Path) {
    end_tree(parent);
    if let Some(name) = parent.file_name() {
        for (_, base) in v1_extra_hierarchies() {
            let namesake = base.join(name);
            if namesake.is_dir() {
                end_tree(&namesake);
            }
        }
    }
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
        crate::orphans::reap_orphans();
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
    if let Some(dir) = v1_hierarchy_in(cgroups, mountinfo, "pids") {
        return Some((dir, Kind::PidsV1));
    }
    let own = cgroups
        .lines()
        .find_map(|entry| entry.strip_prefix("0::"))?;
    mountinfo
        .lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            (after.split_whitespace().next()? == "cgroup2")
                .then(|| before.split_whitespace().nth(4).map(PathBuf::from))
                .flatten()
        })
        .map(|mount| mount.join(own.trim_start_matches('/')))
        .find(|dir| can_kill(dir))
        .map(|dir| (dir, Kind::Unified))
}

/// Writes `pids.max` (`max` for no cap); false where it cannot (no pids
/// controller in a v2 cgroup).
fn write_max_processes(dir: &Path, max: Option<u64>) -> bool {
    let value = max.map_or_else(|| "max".to_owned(), |max| max.to_string());
    std::fs::write(dir.join("pids.max"), value).is_ok()
}

/// Sets the memory limit of memory cgroup `dir` (`None`: none), swap
/// included so the limit holds where there is swap.
fn write_memory_limit(dir: &Path, kind: Kind, limit: Option<u64>) -> bool {
    let write = |file: &str, value: &str| std::fs::write(dir.join(file), value).is_ok();
    match (kind, limit) {
        (Kind::PidsV1, None) => {
            // memsw first: it may never be below the memory limit.
            let _ = write("memory.memsw.limit_in_bytes", "-1");
            write("memory.limit_in_bytes", "-1")
        }
        (Kind::PidsV1, Some(bytes)) => {
            let bytes = bytes.to_string();
            let _ = write("memory.memsw.limit_in_bytes", "-1");
            // A used cgroup may still be charged for an earlier command's
            // page cache, above the new limit: the kernel refuses (EBUSY)
            // what it cannot reclaim at once. The pool's cgroups hold no
            // process, so all of it can go.
            let set = write("memory.limit_in_bytes", &bytes)
                || (write("memory.force_empty", "0") && write("memory.limit_in_bytes", &bytes));
            // Absent without swap accounting: the limit holds alone then.
            let _ = write("memory.memsw.limit_in_bytes", &bytes);
            set
        }
        (Kind::Unified, None) => {
            let _ = write("memory.swap.max", "max");
            write("memory.max", "max")
        }
        (Kind::Unified, Some(bytes)) => {
            let _ = write("memory.swap.max", "0");
            write("memory.max", &bytes.to_string())
        }
    }
}

/// The `oom_kill` count of memory cgroup `dir`: v1 `memory.oom_control`,
/// v2 `memory.events`; 0 where neither can be read.
fn oom_kill_count(dir: &Path) -> u64 {
    ["memory.oom_control", "memory.events"]
        .iter()
        .find_map(|file| std::fs::read_to_string(dir.join(file)).ok())
        .map_or(0, |text| oom_kills_in(&text))
}

/// The `oom_kill N` line of a memory controller's counters.
fn oom_kills_in(text: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix("oom_kill "))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or(0)
}

/// Lets a delegated v2 cgroup's children have their own `pids.max`,
/// `memory.max` and `cpu.weight`, as far as the parent allows: each
/// controller the kernel refuses is only a limit less.
fn enable_controllers(parent: &Path) {
    for controller in ["+pids", "+memory", "+cpu"] {
        let _ = std::fs::write(parent.join("cgroup.subtree_control"), controller);
    }
}

/// This process's cgroups in the v1 `memory` and `cpu` hierarchies that
/// are mounted (each a hierarchy of its own, or `cpu` mounted with
/// `cpuacct`).
fn v1_extra_hierarchies() -> Vec<(Controller, PathBuf)> {
    let (Ok(cgroups), Ok(mountinfo)) = (
        std::fs::read_to_string("/proc/self/cgroup"),
        std::fs::read_to_string("/proc/self/mountinfo"),
    ) else {
        return Vec::new();
    };
    [Controller::Memory, Controller::Cpu]
        .into_iter()
        .filter_map(|controller| {
            v1_hierarchy_in(&cgroups, &mountinfo, controller.name()).map(|dir| (controller, dir))
        })
        .collect()
}

/// This process's cgroup directory in the v1 hierarchy that has
/// `controller`, from the texts of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`.
fn v1_hierarchy_in(cgroups: &str, mountinfo: &str, controller: &str) -> Option<PathBuf> {
    let mount = mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mut after = after.split_whitespace();
        let fstype = after.next()?;
        let options = after.nth(1)?;
        (fstype == "cgroup" && options.split(',').any(|option| option == controller))
            .then(|| before.split_whitespace().nth(4).map(PathBuf::from))
            .flatten()
    })?;
    let own = cgroups.lines().find_map(|entry| {
        let mut fields = entry.splitn(3, ':');
        let _ = fields.next();
        let controllers = fields.next()?;
        let path = fields.next()?;
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| path.to_owned())
    })?;
    Some(mount.join(own.trim_start_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A late kill round of a finished command (it raced the command's
    /// end) must not stop forks in a cgroup that may serve another one.
    #[test]
    fn a_retired_cgroup_is_neither_listed_nor_frozen_by_its_old_command() {
        let Some(cgroup) = take(None, &CommandLimits::default()) else {
            eprintln!("skipped: no cgroup can be made here");
            return;
        };
        cgroup.retire(true);
        cgroup.freeze_forks();
        cgroup.empty();
        assert!(cgroup.pids().is_empty());
        if cgroup.kind == Kind::PidsV1 {
            let max = std::fs::read_to_string(cgroup.dir.join("pids.max")).expect("pids.max");
            assert_eq!(max.trim(), DEFAULT_MAX_PROCESSES.to_string());
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
