//! The one place a process is started.
//!
//! Every fork happens on one long-lived thread. The shell asks the kernel
//! for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`), and the kernel
//! means the parent *thread*: forking from a tokio worker or blocking-pool
//! thread would kill the shell when that thread retires. The spawner thread
//! lives as long as the process.

use std::io;
use std::process::Stdio;
use std::sync::OnceLock;
use std::sync::mpsc;

use tokio::process::Child;
use tokio::sync::oneshot;

use crate::error::SpawnError;
use crate::spec::SpawnSpec;
use crate::tree::{SHELL_TAG_VAR, live_shells};

type Job = Box<dyn FnOnce() + Send>;

fn spawner() -> Result<&'static mpsc::Sender<Job>, SpawnError> {
    static SPAWNER: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (sender, receiver) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("shell-spawner".into())
                .spawn(move || {
                    for job in receiver {
                        job();
                    }
                })
                .map(|_| sender)
                .map_err(|error| error.to_string())
        })
        .as_ref()
        .map_err(|message| SpawnError::Io(io::Error::other(message.clone())))
}

/// Starts `spec` with `tag` in its environment; returns the child with
/// stdout and stderr piped. Must be called inside a tokio runtime.
pub(crate) async fn spawn(spec: &SpawnSpec, tag: &str) -> Result<Child, SpawnError> {
    check_cwd(spec)?;
    let command = build_command(spec, tag);
    let handle = tokio::runtime::Handle::current();
    let (reply, answer) = oneshot::channel();
    let job: Job = Box::new(move || {
        let _runtime = handle.enter();
        let mut command = tokio::process::Command::from(command);
        // The lock spans fork to record, so the reaper cannot take a shell
        // that exits at once for an orphan.
        let mut shells = live_shells();
        let result = command.spawn();
        if let Ok(child) = &result
            && let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok())
        {
            shells.push(pid);
        }
        drop(shells);
        let _ = reply.send(result);
    });
    spawner()?
        .send(job)
        .map_err(|_| SpawnError::Io(io::Error::other("the spawner thread has stopped")))?;
    let result = answer
        .await
        .map_err(|_| SpawnError::Io(io::Error::other("the spawner thread dropped a request")))?;
    result.map_err(|error| SpawnError::from_io(error, &spec.program))
}

fn check_cwd(spec: &SpawnSpec) -> Result<(), SpawnError> {
    match std::fs::metadata(&spec.cwd) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(SpawnError::BadWorkingDir {
            path: spec.cwd.clone(),
            reason: "not a directory".into(),
        }),
        Err(error) => Err(SpawnError::BadWorkingDir {
            path: spec.cwd.clone(),
            reason: error.to_string(),
        }),
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "this is the spawn helper: the one place allowed to build a Command"
)]
fn build_command(spec: &SpawnSpec, tag: &str) -> std::process::Command {
    let mut command = std::process::Command::new(resolve_program(spec));
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(key, value)| (key, value)))
        .env(SHELL_TAG_VAR, tag)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    pre_exec::install(&mut command);
    set_arg0(&mut command, spec);
    command
}

/// `$0` stays the name the spec gave (`bash`), not the resolved path.
#[cfg(unix)]
fn set_arg0(command: &mut std::process::Command, spec: &SpawnSpec) {
    use std::os::unix::process::CommandExt;
    command.arg0(&spec.program);
}

#[cfg(not(unix))]
fn set_arg0(_command: &mut std::process::Command, _spec: &SpawnSpec) {}

/// The program's absolute path, looked up once in the `PATH` of the spec's
/// environment. Left to the child, the lookup is an `execve` per `PATH`
/// entry after the fork, a measurable share of a short command's cost.
fn resolve_program(spec: &SpawnSpec) -> std::path::PathBuf {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::Mutex;

    static RESOLVED: Mutex<Option<HashMap<(PathBuf, std::ffi::OsString), PathBuf>>> =
        Mutex::new(None);
    if spec.program.components().count() != 1 {
        return spec.program.clone();
    }
    let path_var = spec
        .env
        .iter()
        .find(|(key, _)| key == "PATH")
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    let key = (spec.program.clone(), path_var);
    let mut cache = RESOLVED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(found) = cache.get(&key) {
        // A cached path can go stale (a tool reinstalled); check it still exists.
        if found.is_file() {
            return found.clone();
        }
    }
    let found = std::env::split_paths(&key.1)
        .map(|dir| dir.join(&spec.program))
        .find(|candidate| is_executable(candidate));
    match found {
        Some(found) => {
            cache.insert(key, found.clone());
            found
        }
        // Let exec report the error (or use its default search).
        None => spec.program.clone(),
    }
}

#[cfg(unix)]
fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &std::path::Path) -> bool {
    path.is_file()
}

#[cfg(unix)]
#[allow(unsafe_code, reason = "pre_exec runs syscalls in the forked child")]
mod pre_exec {
    use std::os::unix::process::CommandExt;

    /// A new session (so the tree has its own process group and no
    /// controlling terminal to prompt on) and, on Linux, SIGKILL when the
    /// spawner thread's process dies.
    pub(super) fn install(command: &mut std::process::Command) {
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and calls only
        // async-signal-safe syscalls (setsid, prctl, getppid); it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                #[cfg(target_os = "linux")]
                {
                    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                        .map_err(std::io::Error::from)?;
                    // The parent may have died before the request was made.
                    if nix::unistd::getppid().as_raw() != parent.cast_signed() {
                        return Err(std::io::Error::other("parent exited during spawn"));
                    }
                }
                Ok(())
            });
        }
    }
}
