//! Open file descriptors against the open-file limit. A background shell
//! holds a few descriptors in the server for as long as it is tracked;
//! were they allowed to use the last ones, every call would then fail with
//! EMFILE, foreground calls included. So a background shell is refused
//! while foreground calls still have room.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Descriptors counted for the background shell about to start: its
/// output pipes or terminal, its output file, its process handle (4
/// measured once it runs, 2 to 3 with a terminal; 8 covers what its start
/// opens for a moment).
pub const FDS_PER_SHELL: u64 = 8;

/// Descriptors kept free for foreground calls (a few each) and the
/// server's own needs whatever the background shells take.
pub const FOREGROUND_RESERVE: u64 = 32;

/// The open-file limit after [`raise_open_file_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileLimit {
    /// The soft limit before.
    pub was: u64,
    /// The soft limit now (the hard limit when raising worked).
    pub now: u64,
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit, which
/// processes may always do. Children inherit the raised limit unless their
/// confinement sets one of its own.
///
/// # Errors
/// When the limit cannot be read or set.
pub fn raise_open_file_limit() -> Result<OpenFileLimit, nix::Error> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(OpenFileLimit {
        was: soft,
        now: soft.max(hard),
    })
}

/// This process's descriptors in use and its soft open-file limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptors {
    /// Descriptors open.
    pub open: u64,
    /// The soft `RLIMIT_NOFILE`.
    pub limit: u64,
}

impl Descriptors {
    /// Now, from `/proc/self/fd` and `getrlimit`; `None` where either is
    /// unavailable (then nothing is refused on this account).
    pub fn now() -> Option<Self> {
        let (limit, _) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
        let entries = std::fs::read_dir("/proc/self/fd").ok()?;
        // The listing's own descriptor is among the entries.
        let open = u64::try_from(entries.count()).ok()?.saturating_sub(1);
        Some(Self { open, limit })
    }

    /// Descriptors that can still be opened.
    pub fn free(self) -> u64 {
        self.limit.saturating_sub(self.open)
    }

    /// Whether `starting` more background shells (this one included) fit
    /// with the foreground reserve still free.
    pub(crate) fn room_for(self, starting: u64) -> bool {
        self.open
            .saturating_add(starting.saturating_mul(FDS_PER_SHELL))
            .saturating_add(FOREGROUND_RESERVE)
            <= self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_fits_only_with_the_reserve_left_free() {
        let limit = 100;
        let fits = |open, starting| Descriptors { open, limit }.room_for(starting);
        assert!(fits(limit - FOREGROUND_RESERVE - FDS_PER_SHELL, 1));
        assert!(!fits(limit - FOREGROUND_RESERVE - FDS_PER_SHELL + 1, 1));
        // Shells being started count before their descriptors are open.
        assert!(!fits(limit - FOREGROUND_RESERVE - FDS_PER_SHELL, 2));
        assert!(!fits(u64::MAX, 1));
    }

    #[test]
    fn the_usage_of_this_process_reads() {
        let usage = Descriptors::now().expect("readable on Linux");
        assert!(usage.open >= 3, "{usage:?}");
        assert!(usage.limit >= usage.open, "{usage:?}");
    }
}
