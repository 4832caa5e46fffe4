//! The janitor: a small process, started from the server's own binary at
//! start-up, that ends and removes the server's cgroups and temp directory
//! once the server is gone, even when it was killed with SIGKILL.
//!
//! It holds the read end of a pipe whose only write end is the server's
//! (close-on-exec, so no command holds it): end of file on it means the
//! server has exited, however it did. It runs in a session of its own
//! (no terminal signal reaches it with the server's group) and outside
//! every command's cgroup (it starts before any command).

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};

/// A running janitor. Keep it for the life of the server: dropping it
/// closes the pipe, and the janitor then cleans up at once.
#[derive(Debug)]
pub struct Janitor {
    _pipe: OwnedFd,
    child: Child,
}

impl Janitor {
    /// The janitor's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Blocks until the janitor has exited (something killed it: it never
    /// exits while the server lives), and reaps it, so that the server can
    /// start another.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait();
        if let Ok(pid) = i32::try_from(self.child.id()) {
            crate::orphans::forget_shell(pid);
        }
        status
    }
}

/// Starts `program args...` as this server's janitor, its stdin the read
/// end of the server's pipe, stdout and stderr on /dev/null, an empty
/// environment. `program` is meant to call [`run_janitor`] at once.
pub fn start_janitor(program: &Path, args: &[OsString]) -> io::Result<Janitor> {
    // Both ends close-on-exec: no command ever holds the write end.
    let (read, write) = io::pipe()?;
    let mut command = ::spawn::command::in_new_session(program);
    command
        .args(args)
        .env_clear()
        .stdin(Stdio::from(read))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = command.spawn()?;
    // Never a shell's orphan: the reaper and the tree walks pass it by.
    if let Ok(pid) = i32::try_from(child.id()) {
        crate::orphans::live_shells().push(pid);
    }
    Ok(Janitor {
        _pipe: write.into(),
        child,
    })
}

/// The janitor's whole life: waits for end of file on stdin (the server is
/// gone), then empties and removes `cgroups` (the server's parent cgroup,
/// see [`command_cgroups_dir`](crate::command_cgroups_dir)) with every
/// process in it. The caller then removes what else the server left.
pub fn run_janitor(cgroups: Option<&Path>) {
    let mut stdin = io::stdin().lock();
    let mut buffer = [0u8; 64];
    loop {
        match stdin.read(&mut buffer) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if let Some(cgroups) = cgroups {
        crate::cgroup::end_server_tree(cgroups);
    }
}
