//! One memory budget for the unread output of every shell of a server.
//!
//! Output is kept in fixed-size chunks ([`CHUNK_BYTES`]) that each count
//! against one [`MemoryPool`] with a hard cap. A writer reserves the
//! chunks a piece of text may need before it takes its stream's lock; when
//! the pool is spent it first makes room by dropping the oldest output of
//! the shell holding the most (one chunk at a time), holding no other lock
//! meanwhile, so two writers never wait on each other's streams. A chunk is
//! a plain `Vec<u8>` allocated at its full size once and freed (given back
//! to the allocator, not kept on a free list) when its bytes are read or
//! dropped, so what the pool counts is what the process holds.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

/// The size of one chunk of output: large enough that a busy stream takes
/// few, small enough that an idle shell with a few lines holds little.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// The default budget for all unread output of a server (the contract's
/// 256 MiB).
pub const DEFAULT_MEMORY_BUDGET: u64 = 256 * 1024 * 1024;

/// Memory the pool must have given back since its highest point before
/// the allocator is asked to return free pages to the system.
const TRIM_AFTER_BYTES: usize = 8 * 1024 * 1024;

/// The smallest allocation a chunk starts with.
const MIN_ALLOCATION: usize = 1024;

/// The fewest chunks a pool has, so that one writer can always make
/// progress: a piece of text needs at most `len / CHUNK_BYTES + 2`.
const MIN_CHUNKS: usize = 8;

/// Bytes of unread output all shells sharing it may hold together, counted
/// in whole chunks. Cheap to clone: clones share one budget.
#[derive(Clone)]
pub struct MemoryPool(Arc<PoolState>);

impl std::fmt::Debug for MemoryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryPool")
            .field("cap_bytes", &self.cap_bytes())
            .field("held_bytes", &self.held_bytes())
            .finish()
    }
}

/// Two handles are equal when they share one budget.
impl PartialEq for MemoryPool {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for MemoryPool {}

pub(crate) struct PoolState {
    /// Bytes in a chunk: [`CHUNK_BYTES`], smaller in tests.
    chunk_bytes: usize,
    cap: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
    /// The most chunks held since the allocator last gave memory back.
    high_water: AtomicUsize,
    trimming: std::sync::atomic::AtomicBool,
    dropped: AtomicU64,
    accounts: Mutex<Vec<Weak<Account>>>,
}

impl MemoryPool {
    /// A pool of `budget_bytes`, rounded down to whole chunks (at least a
    /// few chunks, so that a writer can always go on).
    pub fn new(budget_bytes: u64) -> Self {
        Self::with_chunk_bytes(budget_bytes, CHUNK_BYTES)
    }

    /// A pool of chunks of `chunk_bytes` (at least 4): small chunks let
    /// tests reach every case with little text.
    #[doc(hidden)]
    pub fn with_chunk_bytes(budget_bytes: u64, chunk_bytes: usize) -> Self {
        let chunk_bytes = chunk_bytes.max(4);
        let chunks = usize::try_from(budget_bytes / chunk_bytes as u64).unwrap_or(usize::MAX);
        Self(Arc::new(PoolState {
            chunk_bytes,
            cap: chunks.max(MIN_CHUNKS),
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            high_water: AtomicUsize::new(0),
            trimming: std::sync::atomic::AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            accounts: Mutex::new(Vec::new()),
        }))
    }

    /// A pool without a limit, for a buffer or shell used on its own.
    pub fn unbounded() -> Self {
        Self::new(u64::MAX)
    }

    /// The budget, in bytes.
    pub fn cap_bytes(&self) -> u64 {
        (self.0.cap as u64).saturating_mul(self.0.chunk_bytes as u64)
    }

    /// Bytes held now (whole chunks, reserved ones included).
    pub fn held_bytes(&self) -> u64 {
        (self.0.used.load(Ordering::Acquire) * self.0.chunk_bytes) as u64
    }

    /// The most bytes held at once since the pool was made.
    pub fn peak_bytes(&self) -> u64 {
        (self.0.peak.load(Ordering::Acquire) * self.0.chunk_bytes) as u64
    }

    /// Bytes of output dropped to keep within the budget so far.
    pub fn dropped_bytes(&self) -> u64 {
        self.0.dropped.load(Ordering::Acquire)
    }

    /// After output was freed in bulk (read, or its shell forgotten): once
    /// the pool holds [`TRIM_AFTER_BYTES`] less than at its highest since
    /// the last time, or nothing at all after holding something, the
    /// allocator returns its free pages to the system,
    /// on a thread of its own. A pool at its cap, where freed chunks are
    /// taken again at once, never asks.
    pub(crate) fn give_back_freed(&self) {
        let state = &self.0;
        let used = state.used.load(Ordering::Acquire);
        let high = state.high_water.load(Ordering::Acquire);
        let freed = high.saturating_sub(used).saturating_mul(state.chunk_bytes);
        // Also when the last unread output was read: what is left over is
        // not worth holding until the next bulk release.
        let drained = used == 0 && freed > 0;
        if (freed < TRIM_AFTER_BYTES && !drained) || state.trimming.swap(true, Ordering::AcqRel) {
            return;
        }
        // What is freed from here on counts towards the next time.
        state.high_water.store(used, Ordering::Release);
        let pool = Arc::clone(state);
        let spawned = std::thread::Builder::new()
            .name("release-memory".to_owned())
            .spawn(move || {
                ::spawn::trim::release_free_memory();
                pool.trimming.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            state.trimming.store(false, Ordering::Release);
        }
    }

    /// A new account: the streams of one shell, which count together when
    /// the pool looks for the biggest holder.
    pub(crate) fn account(&self) -> Arc<Account> {
        let account = Arc::new(Account {
            pool: Arc::clone(&self.0),
            holders: Mutex::new(Vec::new()),
        });
        let mut accounts = self.0.accounts();
        accounts.retain(|known| known.strong_count() > 0);
        accounts.push(Arc::downgrade(&account));
        account
    }

    /// Reserves `chunks` if the pool has them now.
    pub(crate) fn try_reserve(&self, chunks: usize) -> Option<Reserved> {
        self.0.try_reserve(chunks)
    }

    /// Reserves as many of `chunks` as the pool has now (maybe none).
    pub(crate) fn reserve_up_to(&self, chunks: usize) -> Reserved {
        self.0.reserve_up_to(chunks)
    }

    /// Bytes in one chunk of this pool.
    pub(crate) fn chunk_bytes(&self) -> usize {
        self.0.chunk_bytes
    }

    /// Reserves `chunks` for a stream's next piece (what
    /// [`OutputBuffer::chunks_needed`](crate::buffer::OutputBuffer::chunks_needed)
    /// says it takes, computed under `lock`), making room first when the
    /// pool is spent: the oldest output of the account holding the most
    /// is dropped, one chunk at a time. `lock` is released while room is
    /// made (that takes the biggest holder's lock, maybe this one), and the
    /// guard returned with the reservation is taken again. When nothing is
    /// left to drop (the rest is reserved by writers that have not pushed
    /// yet) it takes what there is: a piece that does not fit is dropped
    /// and counted, never held.
    pub(crate) fn reserve_locked<'a, T>(
        &self,
        lock: &'a Mutex<T>,
        chunks_needed: impl Fn(&T) -> usize,
    ) -> (MutexGuard<'a, T>, Reserved) {
        loop {
            let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
            let wanted = chunks_needed(&guard).min(self.0.cap);
            if let Some(reserved) = self.0.try_reserve(wanted) {
                return (guard, reserved);
            }
            drop(guard);
            if !self.make_room() {
                let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
                let wanted = chunks_needed(&guard).min(self.0.cap);
                let reserved = self.0.reserve_up_to(wanted);
                return (guard, reserved);
            }
        }
    }

    /// Drops one chunk's worth of the oldest output of the account holding
    /// the most. False when nobody holds anything that can be dropped.
    pub(crate) fn make_room(&self) -> bool {
        let accounts: Vec<Arc<Account>> = {
            let mut accounts = self.0.accounts();
            accounts.retain(|known| known.strong_count() > 0);
            accounts.iter().filter_map(Weak::upgrade).collect()
        };
        let mut best: Option<(usize, Arc<dyn Holder>)> = None;
        for account in &accounts {
            let holders = account.live_holders();
            let total: usize = holders.iter().map(|holder| holder.held_chunks()).sum();
            let biggest = holders
                .into_iter()
                .max_by_key(|holder| holder.held_chunks());
            if let Some(holder) = biggest
                && total > 0
                && best.as_ref().is_none_or(|(most, _)| total > *most)
            {
                best = Some((total, holder));
            }
        }
        match best {
            Some((_, holder)) => {
                let dropped = holder.drop_oldest();
                self.0.dropped.fetch_add(dropped, Ordering::AcqRel);
                dropped > 0
            }
            None => false,
        }
    }
}

impl PoolState {
    fn accounts(&self) -> MutexGuard<'_, Vec<Weak<Account>>> {
        self.accounts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn reserve_up_to(self: &Arc<Self>, chunks: usize) -> Reserved {
        let mut granted = 0;
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                granted = chunks.min(self.cap.saturating_sub(used));
                Some(used + granted)
            });
        Reserved {
            pool: Arc::clone(self),
            left: granted,
        }
    }

    fn try_reserve(self: &Arc<Self>, chunks: usize) -> Option<Reserved> {
        let mut now = 0;
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                now = used.checked_add(chunks)?;
                (now <= self.cap).then_some(now)
            })
            .ok()?;
        self.peak.fetch_max(now, Ordering::AcqRel);
        self.high_water.fetch_max(now, Ordering::AcqRel);
        Some(Reserved {
            pool: Arc::clone(self),
            left: chunks,
        })
    }
}

/// The streams of one shell, as the pool sees them.
pub(crate) struct Account {
    pool: Arc<PoolState>,
    holders: Mutex<Vec<Weak<dyn Holder>>>,
}

impl Account {
    /// Counts `holder` (a stream) in this account, for as long as it lives.
    pub(crate) fn register(&self, holder: Weak<dyn Holder>) {
        self.holders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(holder);
    }

    fn live_holders(&self) -> Vec<Arc<dyn Holder>> {
        self.holders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The pool this account draws from.
    pub(crate) fn pool(&self) -> MemoryPool {
        MemoryPool(Arc::clone(&self.pool))
    }

    /// A tally for one stream of this account.
    pub(crate) fn tally(&self) -> Arc<Tally> {
        Tally::new(&self.pool())
    }
}

/// A stream whose oldest output the pool may drop.
pub(crate) trait Holder: Send + Sync {
    /// Chunks it holds now.
    fn held_chunks(&self) -> usize;
    /// Drops its oldest output, at least a chunk's worth when it holds one;
    /// returns the bytes dropped (0 when it held nothing).
    fn drop_oldest(&self) -> u64;
}

/// The chunks one stream holds, readable without its lock.
pub(crate) struct Tally {
    pool: Arc<PoolState>,
    held: AtomicUsize,
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tally")
            .field("held", &self.held())
            .finish_non_exhaustive()
    }
}

impl Tally {
    /// A tally of no chunk in `pool`.
    pub(crate) fn new(pool: &MemoryPool) -> Arc<Self> {
        Arc::new(Self {
            pool: Arc::clone(&pool.0),
            held: AtomicUsize::new(0),
        })
    }

    /// Chunks held now.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }
}

/// Chunks taken from the pool and not used yet; given back when dropped.
pub(crate) struct Reserved {
    pool: Arc<PoolState>,
    left: usize,
}

impl Reserved {
    /// A new empty chunk counted against `tally`, from this reservation or,
    /// when it is used up, from the pool if it has room. It allocates room
    /// for `first` bytes (at least 1 KiB) and grows, up to its size, only
    /// as text comes: a command that prints a line costs a line's worth,
    /// while the pool counts the whole chunk.
    pub(crate) fn chunk(&mut self, tally: &Arc<Tally>, first: usize) -> Option<Chunk> {
        debug_assert!(Arc::ptr_eq(&self.pool, &tally.pool));
        if self.left == 0 {
            let mut more = self.pool.try_reserve(1)?;
            more.left = 0;
        } else {
            self.left -= 1;
        }
        tally.held.fetch_add(1, Ordering::AcqRel);
        Some(Chunk {
            bytes: Vec::with_capacity(
                first
                    .max(MIN_ALLOCATION)
                    .next_power_of_two()
                    .min(self.pool.chunk_bytes),
            ),
            size: self.pool.chunk_bytes,
            tally: Arc::clone(tally),
        })
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if self.left > 0 {
            self.pool.used.fetch_sub(self.left, Ordering::AcqRel);
        }
    }
}

/// A chunk's worth of memory counted against a pool while it lives.
pub(crate) struct Chunk {
    pub(crate) bytes: Vec<u8>,
    size: usize,
    tally: Arc<Tally>,
}

impl Chunk {
    /// Room left in it.
    pub(crate) fn room(&self) -> usize {
        self.size - self.bytes.len()
    }

    /// Appends `bytes` (at most [`Chunk::room`]), growing the allocation
    /// by doubling but never past the chunk's size.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        let needed = self.bytes.len() + bytes.len();
        if needed > self.bytes.capacity() {
            let grown = (self.bytes.capacity() * 2).max(needed).min(self.size);
            self.bytes.reserve_exact(grown - self.bytes.len());
        }
        self.bytes.extend_from_slice(bytes);
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        self.tally.held.fetch_sub(1, Ordering::AcqRel);
        self.tally.pool.used.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk")
            .field("len", &self.bytes.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_grows_as_text_comes_and_never_past_its_size() {
        let pool = MemoryPool::new(1 << 20);
        let tally = Tally::new(&pool);
        let mut reserved = pool.try_reserve(1).expect("room");
        let mut chunk = reserved.chunk(&tally, 10).expect("a chunk");
        assert_eq!(chunk.bytes.capacity(), MIN_ALLOCATION);
        chunk.extend(&[b'a'; 3000]);
        assert!((3000..=CHUNK_BYTES).contains(&chunk.bytes.capacity()));
        chunk.extend(&vec![b'b'; CHUNK_BYTES - 3000]);
        assert_eq!(chunk.bytes.capacity(), CHUNK_BYTES);
        assert_eq!(chunk.room(), 0);
        assert_eq!(pool.held_bytes(), CHUNK_BYTES as u64);
        drop(chunk);
        assert_eq!(pool.held_bytes(), 0);
    }
}
