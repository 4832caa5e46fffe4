//! What the spawn code needs of a command's cgroup: the descriptors its
//! first process joins through before it runs anything (shell-runtime
//! makes the cgroups and opens these).

use std::os::fd::RawFd;

/// The most cgroup descriptors a child joins through: v1 `pids`,
/// `memory` and `cpu` (v2 has one for all).
pub const MAX_JOINS: usize = 3;

/// The descriptors a child writes `0` to, -1 for none.
pub type JoinFds = [RawFd; MAX_JOINS];
