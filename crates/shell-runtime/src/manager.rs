//! Tracks shells by id, bounds how many are kept, ends them all on shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::error::ManagerError;
use crate::fds::{Descriptors, FOREGROUND_RESERVE};
use crate::pool::{DEFAULT_MEMORY_BUDGET, MemoryPool};
use crate::process::ShellProcess;
use crate::spec::SpawnSpec;
use crate::status::ShellStatus;

/// Shells tracked at most (the contract's 256).
pub const MAX_TRACKED_SHELLS: usize = 256;

/// Grace between SIGTERM and SIGKILL for [`ShellManager::kill`].
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// A tracked shell's id: `shell_` and lowercase hex digits
/// ([`SHORT_ID_DIGITS`] unless [`ShellManager::with_id_digits`] says more).
pub type ShellId = String;

/// Hex digits of an id by default: short enough to read and type, enough
/// for one client's 256 shells.
pub const SHORT_ID_DIGITS: usize = 8;

/// Hex digits of an id that is a handle others must not guess (a server
/// many clients reach): 128 random bits.
pub const LONG_ID_DIGITS: usize = 32;

/// What [`ShellManager::kill`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// The tree was running and has been ended.
    Terminated,
    /// It had already stopped, with this status.
    AlreadyStopped(ShellStatus),
}

#[derive(Default)]
struct Tracked {
    /// In creation order, oldest first.
    shells: Vec<(ShellId, Arc<ShellProcess>)>,
    /// Foreground shells, held weakly: their caller owns them, shutdown ends them.
    foreground: HashMap<u64, Weak<ShellProcess>>,
    /// Background shells being started: their places are taken already, so
    /// concurrent starts cannot overshoot the limit.
    starting: usize,
    /// Ids handed out by [`ShellManager::reserve_id`] and not yet used or
    /// given back: no other shell may take them meanwhile.
    reserved: Vec<ShellId>,
    next_foreground: u64,
}

/// Shells by id; make one per server or test. Every tree it started is ended on
/// [`shutdown`](Self::shutdown) and, without grace, on drop.
pub struct ShellManager {
    tracked: Mutex<Tracked>,
    limit: usize,
    /// The one budget for the unread output of every shell it starts,
    /// foreground ones included.
    memory: MemoryPool,
    /// Random hex digits after `shell_` in each id.
    id_digits: usize,
}

impl std::fmt::Debug for ShellManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShellManager")
            .field("shells", &self.lock().shells.len())
            .field("limit", &self.limit)
            .field("memory", &self.memory)
            .finish()
    }
}

impl Default for ShellManager {
    fn default() -> Self {
        Self::new()
    }
}

impl ShellManager {
    /// A manager that tracks up to [`MAX_TRACKED_SHELLS`].
    pub fn new() -> Self {
        Self::with_limit(MAX_TRACKED_SHELLS)
    }

    /// A manager that tracks up to `limit` shells (at least one).
    pub fn with_limit(limit: usize) -> Self {
        Self {
            tracked: Mutex::new(Tracked::default()),
            limit: limit.max(1),
            memory: MemoryPool::new(DEFAULT_MEMORY_BUDGET),
            id_digits: SHORT_ID_DIGITS,
        }
    }

    /// The same manager, its ids made of `digits` random hex digits (at
    /// least [`SHORT_ID_DIGITS`], at most 64); [`LONG_ID_DIGITS`] makes
    /// them handles nobody can guess.
    #[must_use]
    pub fn with_id_digits(mut self, digits: usize) -> Self {
        self.id_digits = digits.clamp(SHORT_ID_DIGITS, 64);
        self
    }

    /// The same manager with `memory` as the budget for all unread output
    /// of its shells (256 MiB unless told otherwise).
    #[must_use]
    pub fn with_memory(mut self, memory: MemoryPool) -> Self {
        self.memory = memory;
        self
    }

    /// The budget all unread output of its shells shares.
    pub fn memory(&self) -> &MemoryPool {
        &self.memory
    }

    fn in_budget(&self, mut spec: SpawnSpec) -> SpawnSpec {
        spec.memory.get_or_insert_with(|| self.memory.clone());
        spec
    }

    fn lock(&self) -> MutexGuard<'_, Tracked> {
        self.tracked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a background shell and tracks it under a new id. Past the
    /// limit, the oldest finished shells are forgotten; when every tracked
    /// shell is running the new one is refused, as it is when it would
    /// leave fewer than [`FOREGROUND_RESERVE`] descriptors free.
    pub async fn spawn(
        &self,
        spec: SpawnSpec,
    ) -> Result<(ShellId, Arc<ShellProcess>), ManagerError> {
        self.spawn_as(self.reserve_id(), spec).await
    }

    /// Takes an id for a background shell about to start, so that it can
    /// be named (in an audit line written before the start, say) before
    /// the shell exists. Start it with [`spawn_as`](Self::spawn_as); an id
    /// dropped unused is given back.
    pub fn reserve_id(&self) -> ReservedId<'_> {
        let mut tracked = self.lock();
        let id = self.fresh_id(&tracked);
        tracked.reserved.push(id.clone());
        ReservedId { manager: self, id }
    }

    /// [`spawn`](Self::spawn), tracking the shell under the id `reserved`.
    pub async fn spawn_as(
        &self,
        reserved: ReservedId<'_>,
        spec: SpawnSpec,
    ) -> Result<(ShellId, Arc<ShellProcess>), ManagerError> {
        let place = self.reserve()?;
        let shell = ShellProcess::spawn(self.in_budget(spec)).await?;
        let mut tracked = self.lock();
        let id = reserved.id.clone();
        tracked.reserved.retain(|known| *known != id);
        tracked.shells.push((id.clone(), Arc::clone(&shell)));
        place.fill(&mut tracked);
        Ok((id, shell))
    }

    /// Takes a place for a shell about to start, making room first; the
    /// place is given back if the start fails or is abandoned.
    fn reserve(&self) -> Result<Reservation<'_>, ManagerError> {
        let mut tracked = self.lock();
        Self::make_room_in(&mut tracked, self.limit)?;
        let starting = u64::try_from(tracked.starting).unwrap_or(u64::MAX);
        if let Some(usage) = Descriptors::now()
            && !usage.room_for(starting + 1)
        {
            return Err(ManagerError::OutOfDescriptors {
                open: usage.open,
                limit: usage.limit,
                reserve: FOREGROUND_RESERVE,
            });
        }
        tracked.starting += 1;
        Ok(Reservation {
            manager: self,
            filled: false,
        })
    }

    fn make_room_in(tracked: &mut Tracked, limit: usize) -> Result<(), ManagerError> {
        while tracked.shells.len() + tracked.starting >= limit {
            let oldest_finished = tracked
                .shells
                .iter()
                .position(|(_, shell)| !shell.is_running());
            match oldest_finished {
                Some(index) => {
                    let (_, forgotten) = tracked.shells.remove(index);
                    let memory = forgotten.memory_pool();
                    drop(forgotten);
                    memory.give_back_freed();
                }
                None => {
                    return Err(ManagerError::TooManyShells(
                        tracked.shells.len() + tracked.starting,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Starts a foreground shell: not listed, but ended by shutdown.
    pub async fn spawn_foreground(
        &self,
        spec: SpawnSpec,
    ) -> Result<Arc<ShellProcess>, ManagerError> {
        let shell = ShellProcess::spawn(self.in_budget(spec)).await?;
        let mut tracked = self.lock();
        tracked.foreground.retain(|_, weak| weak.strong_count() > 0);
        let key = tracked.next_foreground;
        tracked.next_foreground += 1;
        tracked.foreground.insert(key, Arc::downgrade(&shell));
        Ok(shell)
    }

    /// Tracks a running foreground shell under a new id, so it goes on as
    /// a background shell (its caller stops waiting for it). Refused, and
    /// the shell left as it was, when every tracked shell is running.
    pub fn adopt(&self, shell: &Arc<ShellProcess>) -> Result<ShellId, ManagerError> {
        let mut tracked = self.lock();
        Self::make_room_in(&mut tracked, self.limit)?;
        let id = self.fresh_id(&tracked);
        tracked.shells.push((id.clone(), Arc::clone(shell)));
        Ok(id)
    }

    fn fresh_id(&self, tracked: &Tracked) -> ShellId {
        loop {
            let id = new_id(self.id_digits);
            if !tracked.shells.iter().any(|(known, _)| *known == id)
                && !tracked.reserved.contains(&id)
            {
                return id;
            }
        }
    }

    /// The shell with this id.
    pub fn get(&self, id: &str) -> Option<Arc<ShellProcess>> {
        self.lock()
            .shells
            .iter()
            .find(|(known, _)| known == id)
            .map(|(_, shell)| Arc::clone(shell))
    }

    /// Whether `id` is tracked or reserved for a shell about to start.
    pub fn is_known(&self, id: &str) -> bool {
        let tracked = self.lock();
        tracked.shells.iter().any(|(known, _)| known == id)
            || tracked.reserved.iter().any(|known| known == id)
    }

    /// Every tracked shell, oldest first.
    pub fn list(&self) -> Vec<(ShellId, Arc<ShellProcess>)> {
        self.lock().shells.clone()
    }

    /// The tracked shells still running.
    pub fn list_running(&self) -> Vec<(ShellId, Arc<ShellProcess>)> {
        self.list()
            .into_iter()
            .filter(|(_, shell)| shell.is_running())
            .collect()
    }

    /// Waits up to `limit` for a shell to finish; returns its status then
    /// (still `running` if it did not finish). Never changes the status.
    pub async fn wait(&self, id: &str, limit: Duration) -> Result<ShellStatus, ManagerError> {
        let shell = self
            .get(id)
            .ok_or_else(|| ManagerError::NotFound(id.to_owned()))?;
        Ok(shell
            .wait_timeout(limit)
            .await
            .unwrap_or_else(|| shell.status()))
    }

    /// Ends a shell's whole tree: SIGTERM, then SIGKILL after `grace`.
    pub async fn kill(&self, id: &str, grace: Duration) -> Result<KillOutcome, ManagerError> {
        let shell = self
            .get(id)
            .ok_or_else(|| ManagerError::NotFound(id.to_owned()))?;
        if !shell.is_running() {
            return Ok(KillOutcome::AlreadyStopped(shell.status()));
        }
        if shell.terminate(grace).await {
            Ok(KillOutcome::Terminated)
        } else {
            Ok(KillOutcome::AlreadyStopped(shell.status()))
        }
    }

    /// Ends every running tracked shell, all at once; returns how many.
    pub async fn kill_all(&self, grace: Duration) -> usize {
        let running: Vec<Arc<ShellProcess>> = self
            .list_running()
            .into_iter()
            .map(|(_, shell)| shell)
            .collect();
        end_all(&running, grace).await
    }

    /// Forgets finished shells that ended more than `max_age` ago; returns how many.
    pub fn cleanup_completed(&self, max_age: Duration) -> usize {
        let now = Instant::now();
        let mut tracked = self.lock();
        let before = tracked.shells.len();
        tracked.shells.retain(|(_, shell)| {
            shell
                .finished_at()
                .is_none_or(|ended| now.duration_since(ended) < max_age)
        });
        self.memory.give_back_freed();
        before - tracked.shells.len()
    }

    /// Ends everything this manager started, background and foreground, and
    /// the processes kept running on purpose (process-wide: those of every
    /// manager).
    pub async fn shutdown(&self, grace: Duration) {
        end_all(&self.everything(), grace).await;
        crate::tree::end_kept().await;
    }

    fn everything(&self) -> Vec<Arc<ShellProcess>> {
        let tracked = self.lock();
        let mut all: Vec<Arc<ShellProcess>> = tracked
            .shells
            .iter()
            .map(|(_, shell)| Arc::clone(shell))
            .collect();
        all.extend(tracked.foreground.values().filter_map(Weak::upgrade));
        all
    }
}

/// An id taken for a background shell before it starts
/// ([`ShellManager::reserve_id`]); given back when dropped unused.
#[derive(Debug)]
pub struct ReservedId<'a> {
    manager: &'a ShellManager,
    id: ShellId,
}

impl ReservedId<'_> {
    /// The id the shell will have.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for ReservedId<'_> {
    fn drop(&mut self) {
        // Used ids left the list when their shell was tracked; this gives
        // back only what was never used.
        self.manager
            .lock()
            .reserved
            .retain(|known| *known != self.id);
    }
}

/// A place taken among the tracked shells for one that is starting.
struct Reservation<'a> {
    manager: &'a ShellManager,
    filled: bool,
}

impl Reservation<'_> {
    /// The shell started and is tracked: the place becomes its entry.
    fn fill(mut self, tracked: &mut Tracked) {
        tracked.starting -= 1;
        self.filled = true;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.filled {
            self.manager.lock().starting -= 1;
        }
    }
}

async fn end_all(shells: &[Arc<ShellProcess>], grace: Duration) -> usize {
    let running: Vec<&Arc<ShellProcess>> =
        shells.iter().filter(|shell| shell.is_running()).collect();
    let count = running.len();
    let mut tasks = tokio::task::JoinSet::new();
    for shell in running {
        let shell = Arc::clone(shell);
        tasks.spawn(async move { shell.terminate(grace).await });
    }
    while tasks.join_next().await.is_some() {}
    count
}

impl Drop for ShellManager {
    fn drop(&mut self) {
        for shell in &self.everything() {
            shell.kill_now();
        }
        crate::tree::end_kept_now();
    }
}

/// `shell_` and `digits` hex digits from the OS's random source (a v4
/// UUID's random bytes: all but the two that carry its version and variant).
fn new_id(digits: usize) -> ShellId {
    let mut id = String::from("shell_");
    while id.len() < "shell_".len() + digits {
        let bytes = uuid::Uuid::new_v4().into_bytes();
        for (index, byte) in bytes.iter().enumerate() {
            if index != 6 && index != 8 {
                id.push_str(&format!("{byte:02x}"));
            }
        }
    }
    id.truncate("shell_".len() + digits);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_as_many_random_hex_digits_as_asked() {
        for digits in [SHORT_ID_DIGITS, LONG_ID_DIGITS, 40] {
            let ids: Vec<ShellId> = (0..64).map(|_| new_id(digits)).collect();
            for id in &ids {
                let hex = id.strip_prefix("shell_").expect("the prefix");
                assert_eq!(hex.len(), digits, "{id}");
                assert!(
                    hex.bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                    "{id}"
                );
            }
            let distinct: std::collections::HashSet<&ShellId> = ids.iter().collect();
            assert_eq!(distinct.len(), ids.len());
        }
    }

    /// Concurrent starts take their places before they spawn, so no more
    /// than the limit are accepted however they interleave.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_limit_holds_under_concurrent_starts() {
        let dir = std::env::temp_dir();
        let manager = Arc::new(ShellManager::with_limit(8));
        let mut starts = tokio::task::JoinSet::new();
        for _ in 0..40 {
            let manager = Arc::clone(&manager);
            let spec = SpawnSpec::shell("sleep 30", &dir)
                .with_env(std::env::vars_os().filter(|(name, _)| name == "PATH"));
            starts.spawn(async move { manager.spawn(spec).await.is_ok() });
        }
        let mut accepted = 0;
        while let Some(started) = starts.join_next().await {
            accepted += usize::from(started.expect("joins"));
        }
        assert_eq!(accepted, 8);
        assert_eq!(manager.list().len(), 8);
        assert_eq!(manager.lock().starting, 0);
        manager.shutdown(Duration::ZERO).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reserved_id_is_the_shells_and_is_given_back_unused() {
        let dir = std::env::temp_dir();
        let manager = ShellManager::new();
        let unused = manager.reserve_id();
        let reserved = manager.reserve_id();
        let expected = reserved.id().to_owned();
        assert_ne!(unused.id(), expected);
        let spec = SpawnSpec::shell("true", &dir)
            .with_env(std::env::vars_os().filter(|(name, _)| name == "PATH"));
        let (id, _shell) = manager.spawn_as(reserved, spec).await.expect("spawns");
        assert_eq!(id, expected);
        assert!(manager.get(&expected).is_some());
        assert_eq!(manager.lock().reserved, [unused.id().to_owned()]);
        drop(unused);
        assert!(manager.lock().reserved.is_empty());
        manager.shutdown(Duration::ZERO).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn adopting_a_foreground_shell_respects_the_limit() {
        let dir = std::env::temp_dir();
        let spec = || {
            SpawnSpec::shell("sleep 30", &dir)
                .with_env(std::env::vars_os().filter(|(name, _)| name == "PATH"))
        };
        let manager = ShellManager::with_limit(1);
        let first = manager.spawn_foreground(spec()).await.expect("spawns");
        let id = manager.adopt(&first).expect("room for one");
        assert!(manager.get(&id).is_some());
        let second = manager.spawn_foreground(spec()).await.expect("spawns");
        assert!(matches!(
            manager.adopt(&second),
            Err(ManagerError::TooManyShells(1))
        ));
        manager.shutdown(Duration::ZERO).await;
        assert!(!first.is_running() && !second.is_running());
    }

    #[test]
    fn ids_are_shell_and_eight_hex_digits() {
        let id = new_id(SHORT_ID_DIGITS);
        assert_eq!(id.len(), 14);
        assert!(id.starts_with("shell_"));
        assert!(id[6..].chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
        assert_ne!(new_id(SHORT_ID_DIGITS), new_id(SHORT_ID_DIGITS));
    }
}
