//! Which server owns a temp dir or a cgroup, and whether it is still alive.
//!
//! Names carry a random id, never the pid: pids repeat across PID
//! namespaces, so a server in one namespace took the files of a live server
//! in another for those of a dead one and removed them. Whether the owner
//! is alive is decided by a lock it holds for its whole life (an `flock` on
//! its temp dir's `lock` file, and on its parent cgroup's directory): the
//! kernel releases it when the process dies, however it dies, and a lock
//! that can be taken is a dead owner's. A name without that lock (or in a
//! form we do not make) is never removed: nothing proves whose it is.

use std::fs::{File, TryLockError};
use std::io;
use std::path::Path;
use std::sync::OnceLock;

/// Prefix of every server's temp dir and parent cgroup; the id follows.
pub const INSTANCE_PREFIX: &str = "agent-exec-";

/// The random id of this server process: 16 lowercase hex digits, the
/// first a letter (so no name of ours reads as a pid to older versions,
/// which judged `agent-exec-<digits>` by `/proc/<digits>`).
pub fn server_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let (random, _) = uuid::Uuid::new_v4().as_u64_pair();
        // The top nibble becomes 0xa..=0xf minus 0xc and 0xd: a letter.
        format!("{:016x}", random | (0xa << 60))
    })
}

/// The id in `name` (`agent-exec-<id>` or `agent-exec-<id>-<n>`) when it
/// has the form [`server_id`] makes; `None` for every other name (pid-named
/// ones of older versions, `agent-exec-0`, names of other programs).
pub fn id_in_name(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(INSTANCE_PREFIX)?;
    let id = rest.get(..16)?;
    let suffix = &rest[16..];
    let well_formed = id
        .bytes()
        .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
        && id.as_bytes()[0].is_ascii_alphabetic()
        && (suffix.is_empty()
            || suffix
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())));
    well_formed.then_some(id)
}

/// Takes the exclusive lock on `path` (a file or a directory) without
/// waiting: `Ok(Some(file))`, holding it, when nobody else holds it (its
/// owner is gone), `Ok(None)` when a live process holds it.
pub fn try_lock(path: &Path) -> io::Result<Option<File>> {
    let file = File::open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(error)) => Err(error),
    }
}

/// Locks `path` (a file or directory that nobody else may hold yet) for as
/// long as the returned file is open.
pub fn hold_lock(path: &Path) -> io::Result<File> {
    try_lock(path)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::WouldBlock,
            format!("`{}` is locked by another process", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_our_form_carry_an_id() {
        let id = server_id();
        assert_eq!(id.len(), 16);
        assert_eq!(id_in_name(&format!("agent-exec-{id}")), Some(id));
        assert_eq!(id_in_name(&format!("agent-exec-{id}-3")), Some(id));
        for name in [
            "agent-exec-0",
            "agent-exec-12345",
            "agent-exec-12345-0",
            "agent-exec-1234567890123456",
            "agent-exec-notapid-0",
            &format!("agent-exec-{id}-"),
            &format!("agent-exec-{id}x"),
            &format!("agent-exec-{}", id.to_uppercase()),
            "agent-exec-run-1-0.txt",
        ] {
            assert_eq!(id_in_name(name), None, "{name}");
        }
    }

    #[test]
    fn a_held_lock_says_alive_and_a_released_one_dead() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("lock");
        std::fs::write(&path, "").expect("write");
        let held = hold_lock(&path).expect("lock");
        assert!(try_lock(&path).expect("try").is_none(), "held: alive");
        assert!(hold_lock(&path).is_err());
        drop(held);
        assert!(try_lock(&path).expect("try").is_some(), "released: dead");
        // A directory takes the lock too (the cgroups' case).
        let _dir_lock = hold_lock(dir.path()).expect("lock the dir");
        assert!(try_lock(dir.path()).expect("try").is_none());
    }
}
