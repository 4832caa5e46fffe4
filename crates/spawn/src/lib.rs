//! The unsafe half of starting a command, and the only crate of the
//! workspace that allows `unsafe` (each module that needs it says why in
//! its own `allow`). shell-runtime keeps the safe orchestration (what to
//! start, the cgroups, the exit futures) and forbids `unsafe`; this crate
//! knows nothing of shells or tools and depends on no other member.
//!
//! On Linux: `clone(CLONE_VM | CLONE_VFORK)` instead of `fork`
//! ([`vfork`], docs/decisions/0003), the spawner process that starts every
//! command ([`process`], 0016), the PID namespace's init in the server's
//! memory (0013), the confinement applied in the child ([`confine`]:
//! Landlock, seccomp, capabilities, limits), exec notification
//! ([`exec_notify`], 0018) and pseudo-terminals ([`pty`]). Everywhere: a
//! `Command` in a session of its own ([`command`]) and the allocator's
//! tuning ([`trim`]).

#[cfg(target_os = "linux")]
pub mod arguments;
#[cfg(target_os = "linux")]
pub mod cgroup;
#[cfg(unix)]
pub mod command;
#[cfg(target_os = "linux")]
pub mod confine;
#[cfg(target_os = "linux")]
pub mod exec_notify;
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod filter;
#[cfg(all(
    target_os = "linux",
    not(any(target_arch = "x86_64", target_arch = "aarch64"))
))]
mod filter {
    //! The seccomp rules name syscalls by libc's numbers for `x86_64` and
    //! `aarch64`, the architectures they are checked on.

    pub(crate) const MAX_PROGRAMS: usize = 3;

    pub(crate) fn programs(_deny_network: bool) -> Result<Vec<Vec<libc::sock_filter>>, String> {
        Err(format!(
            "the filter is built for x86_64 and aarch64, not {}",
            std::env::consts::ARCH
        ))
    }
}
#[cfg(target_os = "linux")]
mod init;
pub mod proc_view;
#[cfg(target_os = "linux")]
pub mod process;
#[cfg(target_os = "linux")]
pub mod pty;
#[cfg(target_os = "linux")]
mod raw;
pub mod spec;
pub mod trim;
#[cfg(target_os = "linux")]
pub mod vfork;

#[cfg(not(target_os = "linux"))]
pub mod confine {
    //! Elsewhere nothing can be confined: preparing always fails.

    /// Why a confinement cannot be enforced.
    #[derive(Debug, thiserror::Error)]
    #[error("the sandbox needs Linux (Landlock, seccomp)")]
    pub struct ConfineError;

    /// Never made outside Linux.
    #[derive(Debug)]
    pub struct Confinement {
        /// Set when a process cap was asked for but no cgroup could be made.
        pub missing_process_cap: Option<String>,
    }

    impl Confinement {
        /// Always fails outside Linux.
        pub fn prepare(
            _spec: &crate::spec::ConfinementSpec,
            _cgroup_parent: crate::spec::CgroupParent,
        ) -> Result<Self, ConfineError> {
            Err(ConfineError)
        }

        /// Never made, so never denies anything.
        pub fn denies_network(&self) -> bool {
            false
        }
    }
}

pub use confine::{ConfineError, Confinement};
#[cfg(target_os = "linux")]
pub use pty::TerminalDevice;
