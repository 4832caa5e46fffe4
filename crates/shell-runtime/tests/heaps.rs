//! The allocator's heaps stay few however many threads a server has had
//! at once. A binary of its own: the count is per process, and the only
//! threads here are the harness's and this test's.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

use std::sync::{Arc, Barrier};

use shell_runtime::{MAP_AT_BYTES, MAX_HEAPS, heap_count, mapped_blocks, tune_allocator};

/// More threads than glibc's default of eight heaps per core would give
/// heaps on this machine's two cores (and than `MAX_HEAPS`).
const THREADS: usize = 24;

#[test]
fn threads_alive_at_once_share_a_fixed_number_of_heaps() {
    tune_allocator();
    let Some(before) = heap_count() else {
        // Not glibc: nothing to tune or count.
        return;
    };
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|n| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                // A thread's first allocation takes it a heap: a new one
                // while fewer than the limit exist and none is free.
                let held = vec![u8::try_from(n).unwrap(); 4096];
                barrier.wait();
                barrier.wait();
                held.len()
            })
        })
        .collect();
    barrier.wait();
    let during = heap_count().expect("counted before");
    barrier.wait();
    for thread in threads {
        assert_eq!(thread.join().unwrap(), 4096);
    }
    let limit = before.max(usize::try_from(MAX_HEAPS).unwrap());
    assert!(
        during <= limit,
        "{during} heaps with {THREADS} threads alive ({before} before, limit {limit})"
    );
}

/// A buffer over [`MAP_AT_BYTES`] (a command's output read whole, a parsed
/// message) gets a mapping of its own, unmapped when freed: in a heap it
/// would leave a hole that the small allocations around it keep resident.
/// Eight times the threshold (1 MiB, still under glibc's default of 4 MiB
/// at most): one block of exactly the threshold may still come from a
/// heap's free top, which the other test's threads can leave that large.
#[test]
fn a_large_buffer_is_mapped_on_its_own() {
    tune_allocator();
    let Some(before) = mapped_blocks() else {
        return;
    };
    let buffer: Vec<u8> = Vec::with_capacity(8 * MAP_AT_BYTES);
    let during = mapped_blocks().expect("counted before");
    drop(std::hint::black_box(buffer));
    assert!(
        during > before,
        "{} bytes were not mapped on their own",
        8 * MAP_AT_BYTES
    );
}
