//! Giving the allocator's free memory back to the system. It lives here
//! because it is a C call, and `unsafe` lives only in this module.
//!
//! Output chunks are freed in bulk (a shell read or forgotten), but glibc
//! returns only the free memory at the top of each heap: small allocations
//! that outlive the chunks around them (a tracked shell's own state) keep
//! the rest resident. `malloc_trim` gives back every free page.

#![allow(
    unsafe_code,
    reason = "malloc_trim and mallopt are C functions; called off the hot path"
)]

/// Allocations of this size or more get a mapping of their own (glibc's
/// initial threshold, kept fixed).
pub const MAP_AT_BYTES: usize = 128 << 10;

/// The most heaps ("arenas") glibc keeps. Its default is eight per core,
/// each made when a new thread first allocates while none is free: the
/// server's threads come and go (tokio's blocking pool, a supervisor per
/// command, the spawner's), so over a long session the count climbs to
/// that ceiling and each heap keeps its own free and fragmented pages
/// resident. The server's threads mostly wait on processes and pipes, so
/// two heaps are enough to keep them from queueing on one lock.
pub const MAX_HEAPS: i32 = 2;

/// Sets glibc's allocator up for a long-lived server; call once at
/// start-up, before threads are made (elsewhere it does nothing):
///
/// - each allocation of [`MAP_AT_BYTES`] or more (a large message, its
///   parsed copies, a buffer read whole) gets a mapping of its own,
///   returned to the system when freed. By default glibc raises that
///   threshold to the size of each large block freed, up to 32 MiB, after
///   which such blocks come from a heap: once freed, a thread's heap keeps
///   them resident (`malloc_trim` does not shrink those), and a block
///   that finds no hole big enough among the small allocations that
///   outlive it extends the heap, so a long session's heaps crept up by
///   a few hundred KiB at a time while what they held stayed the same;
/// - at most [`MAX_HEAPS`] heaps, so that the memory a long session keeps
///   resident stops growing with the number of threads it has had.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and sets glibc's own tunables
    // under its lock; any thread may call it at any time.
    unsafe {
        libc::mallopt(
            libc::M_MMAP_THRESHOLD,
            i32::try_from(MAP_AT_BYTES).unwrap_or(i32::MAX),
        );
        libc::mallopt(libc::M_ARENA_MAX, MAX_HEAPS);
    }
}

/// Returns the free pages of every heap to the system (glibc's
/// `malloc_trim`); elsewhere does nothing. It walks every heap: call it
/// after a large release, off the hot path (on a blocking thread).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer and walks only glibc's own
    // arenas, each under its lock; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How many heaps glibc's allocator has made in this process (from
/// `malloc_info`), or `None` where that cannot be told: for tests of
/// [`tune_allocator`].
#[doc(hidden)]
pub fn heap_count() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let mut buffer: *mut libc::c_char = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        // SAFETY: open_memstream writes the buffer's address and size to
        // the two locals, which outlive the stream; malloc_info writes to
        // the stream, which is closed (flushing the buffer) before the
        // buffer is read, and the buffer is freed once, after the copy.
        let report = unsafe {
            let stream = libc::open_memstream(&raw mut buffer, &raw mut size);
            if stream.is_null() {
                return None;
            }
            let written = libc::malloc_info(0, stream);
            libc::fclose(stream);
            if buffer.is_null() {
                return None;
            }
            let report = (written == 0).then(|| {
                String::from_utf8_lossy(std::slice::from_raw_parts(buffer.cast::<u8>(), size))
                    .into_owned()
            });
            libc::free(buffer.cast());
            report
        }?;
        Some(report.matches("<heap nr=").count())
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// How many allocations glibc's allocator holds in mappings of their own
/// (`mallinfo2().hblks`), or `None` where that cannot be told: for tests
/// of [`tune_allocator`].
#[doc(hidden)]
pub fn mapped_blocks() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallinfo2 takes no argument and returns a plain struct.
    return Some(unsafe { libc::mallinfo2() }.hblks);
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}
