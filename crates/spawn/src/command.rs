//! A `std::process::Command` whose child starts a session of its own:
//! the janitor's way (on every Unix), and every command's outside Linux.

#![allow(
    unsafe_code,
    reason = "the session is made between fork and exec, in pre_exec"
)]

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;

/// `program` as a `Command` whose child calls `setsid` before exec: its
/// own session and process group, and no controlling terminal to prompt
/// on or to take a terminal's signals from.
#[expect(
    clippy::disallowed_methods,
    reason = "this is the spawn helper: the one place allowed to build a Command"
)]
pub fn in_new_session(program: impl AsRef<OsStr>) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    // SAFETY: the closure runs between fork and exec and calls only setsid,
    // which is async-signal-safe and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    command
}
