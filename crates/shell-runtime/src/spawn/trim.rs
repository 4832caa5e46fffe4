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

/// Allocations of this size or more get a mapping of their own.
const MAP_AT_BYTES: i32 = 4 << 20;

/// Makes glibc give each allocation of 4 MiB or more (a large message, its
/// parsed copies) a mapping of its own, returned to the system when freed.
/// By default glibc raises that threshold to the size of each large block
/// freed, up to 32 MiB, after which such blocks come from a heap and, in a
/// thread's heap, stay resident once freed (`malloc_trim` does not shrink
/// those). Call once at start-up; elsewhere does nothing.
pub fn map_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and sets glibc's own tunables
    // under its lock; any thread may call it at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MAP_AT_BYTES);
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
