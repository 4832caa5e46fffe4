//! Giving the allocator's free memory back to the system. It lives here
//! because it is a C call, and `unsafe` lives only in this module.
//!
//! Output chunks are freed in bulk (a shell read or forgotten), but glibc
//! returns only the free memory at the top of each heap: small allocations
//! that outlive the chunks around them (a tracked shell's own state) keep
//! the rest resident. `malloc_trim` gives back every free page.

#![allow(
    unsafe_code,
    reason = "malloc_trim is a C function; called off the hot path, after a large release"
)]

/// Returns the free pages of every heap to the system (glibc's
/// `malloc_trim`); elsewhere does nothing.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer and walks only glibc's own
    // arenas, each under its lock; any thread may call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
