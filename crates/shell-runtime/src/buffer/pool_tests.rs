//! The memory pool as the capture uses it: buffers drawing their chunks
//! from one pool, shells losing their oldest output when it is spent. Here,
//! beside the buffer, so the pool needs nothing from the buffer.

use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use super::{BufferLimits, OutputBuffer, StreamPosition};
use crate::pool::{Account, Holder, MemoryPool, Tally};

/// A stream as the runtime's capture holds one: a buffer behind a lock,
/// counted in its shell's account.
struct Stream {
    buffer: Mutex<OutputBuffer>,
    tally: Arc<Tally>,
    pool: MemoryPool,
}

impl Holder for Stream {
    fn held_chunks(&self) -> usize {
        self.tally.held()
    }

    fn drop_oldest(&self) -> u64 {
        self.buffer.lock().expect("not poisoned").drop_oldest()
    }
}

impl Stream {
    fn new(account: &Account, limits: BufferLimits) -> Arc<Self> {
        let pool = account.pool();
        let tally = account.tally();
        let stream = Arc::new(Self {
            buffer: Mutex::new(OutputBuffer::in_pool(
                limits,
                pool.clone(),
                Arc::clone(&tally),
            )),
            tally,
            pool,
        });
        let holder: Arc<dyn Holder> = stream.clone();
        account.register(Arc::downgrade(&holder));
        stream
    }

    /// As the capture pushes.
    fn push(&self, text: &str) {
        let (mut buffer, mut reserved) = self
            .pool
            .reserve_locked(&self.buffer, |buffer| buffer.chunks_needed(text));
        buffer.push_reserved(text, &mut reserved);
    }
}

fn limits(head: usize, tail: usize) -> BufferLimits {
    BufferLimits {
        head_bytes: head,
        tail_bytes: tail,
    }
}

#[test]
fn the_shell_holding_the_most_loses_its_oldest_output() {
    let pool = MemoryPool::with_chunk_bytes(64, 8);
    let (small, big) = (pool.account(), pool.account());
    let quiet = Stream::new(&small, limits(0, 1024));
    let loud = Stream::new(&big, limits(0, 1024));
    quiet.push("0123456789abcdef");
    loud.push(&"x".repeat(48));
    assert_eq!(pool.held_bytes(), 64);
    // The pool is spent: the next piece makes room from the loudest.
    quiet.push("ghij");
    assert_eq!(pool.held_bytes(), 64);
    let quiet_buffer = quiet.buffer.lock().expect("not poisoned");
    assert_eq!(quiet_buffer.dropped_bytes(), 0);
    assert_eq!(quiet_buffer.snapshot().render(), "0123456789abcdefghij");
    let loud_buffer = loud.buffer.lock().expect("not poisoned");
    let slice = loud_buffer.snapshot();
    assert_eq!((slice.dropped, slice.after_gap.len()), (8, 40));
    assert_eq!(pool.dropped_bytes(), slice.dropped);
}

#[test]
fn freed_chunks_go_back_to_the_pool() {
    let pool = MemoryPool::with_chunk_bytes(1024, 8);
    let account = pool.account();
    let stream = Stream::new(&account, limits(16, 32));
    stream.push(&"é".repeat(100));
    assert!(pool.held_bytes() > 0);
    let end = {
        let buffer = stream.buffer.lock().expect("not poisoned");
        buffer.end()
    };
    stream
        .buffer
        .lock()
        .expect("not poisoned")
        .release_before(end);
    assert_eq!(pool.held_bytes(), 0);
    drop(stream);
    assert_eq!(pool.held_bytes(), 0);
}

#[test]
fn the_cap_holds_with_writers_on_many_threads() {
    let pool = MemoryPool::with_chunk_bytes(2048, 64);
    let accounts: Vec<Arc<Account>> = (0..6).map(|_| pool.account()).collect();
    std::thread::scope(|scope| {
        for account in &accounts {
            let stream = Stream::new(account, limits(300, 2000));
            scope.spawn(move || {
                let mut cursor = StreamPosition::default();
                for round in 0..400 {
                    stream.push(&format!("{round:05}-{}\n", "ab€".repeat(round % 50)));
                    if round % 50 == 0 {
                        let mut buffer = stream.buffer.lock().expect("not poisoned");
                        let (_, next) = buffer.read_since(cursor);
                        buffer.release_before(next);
                        cursor = next;
                    }
                }
                let buffer = stream.buffer.lock().expect("not poisoned");
                assert_eq!(
                    buffer.head_len() as u64
                        + buffer.dropped_bytes()
                        + buffer.released_bytes()
                        + buffer.tail_len() as u64,
                    buffer.total_bytes()
                );
            });
        }
    });
    assert!(pool.peak_bytes() <= pool.cap_bytes());
    assert!(pool.dropped_bytes() > 0, "the test must reach the cap");
}

#[derive(Debug, Clone)]
enum Step {
    Write(usize, String),
    Read(usize),
    Drop(usize),
}

fn steps(streams: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        4 => (0..streams, "(?s).{0,60}").prop_map(|(at, text)| Step::Write(at, text)),
        1 => (0..streams).prop_map(Step::Read),
        1 => (0..streams).prop_map(Step::Drop),
    ];
    proptest::collection::vec(step, 0..80)
}

proptest! {
    /// Whatever the interleaving of writes, reads (which free what
    /// they read) and drops over several shells, the pool never holds
    /// more than its cap, each stream's counts add up, and a reader
    /// sees every byte once, as text or in a counted gap.
    #[test]
    fn total_held_never_exceeds_the_cap(
        steps in steps(5),
        chunk in 4usize..16,
        cap_chunks in 8usize..24,
        head in 0usize..40,
        tail in 0usize..80,
    ) {
        let pool = MemoryPool::with_chunk_bytes((cap_chunks * chunk) as u64, chunk);
        // Five streams over three shells.
        let accounts: Vec<Arc<Account>> = (0..3).map(|_| pool.account()).collect();
        let streams: Vec<Arc<Stream>> = (0..5)
            .map(|at| Stream::new(&accounts[at % 3], limits(head, tail)))
            .collect();
        let mut cursors = [StreamPosition::default(); 5];
        let mut seen = [0u64; 5];
        let mut chars_seen = [0u64; 5];
        let mut written = vec![String::new(); 5];
        for step in &steps {
            match step {
                Step::Write(at, text) => {
                    streams[*at].push(text);
                    written[*at].push_str(text);
                }
                Step::Read(at) => {
                    let mut buffer = streams[*at].buffer.lock().expect("not poisoned");
                    let (slice, next) = buffer.read_since(cursors[*at]);
                    seen[*at] += (slice.before_gap.len() + slice.after_gap.len()) as u64 + slice.dropped;
                    chars_seen[*at] += (slice.before_gap.chars().count() + slice.after_gap.chars().count()) as u64 + slice.dropped_chars;
                    let unread = &written[*at][usize::try_from(cursors[*at].bytes).expect("fits")..];
                    prop_assert!(unread.starts_with(&slice.before_gap));
                    prop_assert!(unread.ends_with(&slice.after_gap));
                    buffer.release_before(next);
                    cursors[*at] = next;
                }
                Step::Drop(at) => {
                    streams[*at].drop_oldest();
                }
            }
            prop_assert!(pool.held_bytes() <= pool.cap_bytes());
            for stream in &streams {
                let buffer = stream.buffer.lock().expect("not poisoned");
                prop_assert_eq!(
                    buffer.head_len() as u64 + buffer.dropped_bytes() + buffer.released_bytes() + buffer.tail_len() as u64,
                    buffer.total_bytes()
                );
                prop_assert!(buffer.head_len() <= head && buffer.tail_len() <= tail);
                prop_assert_eq!(buffer.held_chunks(), stream.tally.held());
            }
        }
        prop_assert!(pool.peak_bytes() <= pool.cap_bytes());
        for at in 0..5 {
            let buffer = streams[at].buffer.lock().expect("not poisoned");
            let (slice, _) = buffer.read_since(cursors[at]);
            seen[at] += (slice.before_gap.len() + slice.after_gap.len()) as u64 + slice.dropped;
            chars_seen[at] += (slice.before_gap.chars().count() + slice.after_gap.chars().count()) as u64 + slice.dropped_chars;
            prop_assert_eq!(seen[at], written[at].len() as u64);
            prop_assert_eq!(chars_seen[at], written[at].chars().count() as u64);
        }
        drop(streams);
        prop_assert_eq!(pool.held_bytes(), 0);
    }
}
