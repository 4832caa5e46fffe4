//! The one place a process is started: on Linux with `clone(CLONE_VM |
//! CLONE_VFORK)` (see `vfork.rs`), elsewhere with `std::process::Command`.
//!
//! Every spawn happens on one long-lived thread. The shell asks the kernel
//! for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`), and the kernel
//! means the parent *thread*: forking from a tokio worker or blocking-pool
//! thread would kill the shell when that thread retires. The spawner thread
//! lives as long as the process.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::mpsc;

use tokio::io::AsyncRead;
use tokio::sync::oneshot;

use crate::error::SpawnError;
use crate::orphans::live_shells;
use crate::spec::{SCRIPT_VAR, SpawnSpec};
use crate::status::ExitInfo;
use crate::tree::SHELL_TAG_VAR;

#[cfg(target_os = "linux")]
pub(crate) use ::spawn::{arguments, exec_notify, process, pty, vfork};
#[cfg(unix)]
pub(crate) mod janitor;
pub(crate) mod sandbox;

type Job = Box<dyn FnOnce() + Send>;

/// A pipe the runtime reads a stream from.
pub(crate) type Pipe = Box<dyn AsyncRead + Unpin + Send>;

/// Resolves once the shell process has exited (and is reaped).
pub(crate) type ExitFuture = Pin<Box<dyn Future<Output = io::Result<ExitInfo>> + Send>>;

/// A started shell.
pub(crate) struct Spawned {
    pub(crate) pid: i32,
    pub(crate) stdout: Pipe,
    pub(crate) stderr: Pipe,
    pub(crate) exit: ExitFuture,
    /// The command's own cgroup, where one could be made.
    pub(crate) cgroup: Option<crate::cgroup::CommandCgroup>,
    /// Input to its terminal, when it runs under one (`stdout` then reads
    /// the terminal, and `stderr` is empty).
    #[cfg(target_os = "linux")]
    pub(crate) terminal: Option<pty::TerminalWriter>,
}

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

/// Starts `spec` with `tag` in its environment, stdout and stderr piped.
/// Must be called inside a tokio runtime.
pub(crate) async fn spawn(spec: &SpawnSpec, tag: &str) -> Result<Spawned, SpawnError> {
    check_cwd(spec)?;
    let prepared = prepare(spec, tag)?;
    let handle = tokio::runtime::Handle::current();
    let (reply, answer) = oneshot::channel();
    let job: Job = Box::new(move || {
        let _runtime = handle.enter();
        // The lock spans fork to record, so the reaper cannot take a shell
        // that exits at once for an orphan.
        let mut shells = live_shells();
        let result = start(prepared);
        if let Ok(spawned) = &result {
            shells.push(spawned.pid);
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

#[cfg(target_os = "linux")]
struct Prepared {
    program: std::ffi::CString,
    argv: Vec<std::ffi::CString>,
    envp: Vec<std::ffi::CString>,
    cwd: std::ffi::CString,
    tty: bool,
    confinement: Option<std::sync::Arc<sandbox::Confinement>>,
    cgroup: Option<crate::cgroup::CommandCgroup>,
    /// Held until the child has exec'd with its copies.
    inherit: Vec<(std::sync::Arc<std::os::fd::OwnedFd>, std::os::fd::RawFd)>,
    exec_judge: Option<crate::spec::ExecJudge>,
}

#[cfg(target_os = "linux")]
fn prepare(spec: &SpawnSpec, tag: &str) -> Result<Prepared, SpawnError> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let nul = |what: &str| {
        SpawnError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        ))
    };
    let c_string = |bytes: &[u8], what: &str| CString::new(bytes).map_err(|_| nul(what));
    let program = c_string(
        resolve_program(spec).as_os_str().as_bytes(),
        "the program path",
    )?;
    // `$0` stays the name the spec gave (`bash`), not the resolved path.
    let mut argv = vec![c_string(program_name(spec).as_bytes(), "the program name")?];
    for arg in &spec.args {
        argv.push(c_string(arg.as_bytes(), "an argument")?);
    }
    let mut envp = Vec::with_capacity(spec.env.len() + 1);
    for (key, value) in &spec.env {
        if key.as_bytes() == SHELL_TAG_VAR.as_bytes()
            || (spec.tty && key.as_bytes() == b"TERM")
            || (spec.script.is_some() && key.as_bytes() == SCRIPT_VAR.as_bytes())
        {
            continue;
        }
        let mut entry = key.as_bytes().to_vec();
        entry.push(b'=');
        entry.extend_from_slice(value.as_bytes());
        envp.push(c_string(&entry, "an environment variable")?);
    }
    envp.push(c_string(
        format!("{SHELL_TAG_VAR}={tag}").as_bytes(),
        "the shell tag",
    )?);
    if let Some(script) = &spec.script {
        envp.push(c_string(
            format!("{SCRIPT_VAR}={script}").as_bytes(),
            "the command",
        )?);
    }
    if spec.tty {
        envp.push(c_string(
            format!("TERM={}", pty::TERMINAL_TYPE).as_bytes(),
            "the terminal type",
        )?);
    }
    let cwd = c_string(spec.cwd.as_os_str().as_bytes(), "the working directory")?;
    Ok(Prepared {
        program,
        argv,
        envp,
        cwd,
        tty: spec.tty,
        confinement: spec.confinement.clone(),
        inherit: spec.inherit.clone(),
        exec_judge: spec.exec_judge.clone(),
        cgroup: crate::cgroup::take(
            spec.confinement
                .as_ref()
                .and_then(|confinement| confinement.cgroup_dir()),
            &spec.cgroup_limits,
        ),
    })
}

#[cfg(target_os = "linux")]
fn start(prepared: Prepared) -> io::Result<Spawned> {
    // In namespaces with a devpts of their own, the init opens the
    // terminal there (`vfork.rs`) and sends it back.
    let own_terminal = prepared.tty
        && prepared
            .confinement
            .as_ref()
            .is_some_and(|confinement| confinement.plan().has_own_terminals());
    let terminal = match (prepared.tty && !own_terminal)
        .then(pty::open_pair)
        .transpose()
    {
        Ok(terminal) => terminal,
        Err(error) => {
            if let Some(cgroup) = &prepared.cgroup {
                cgroup.retire(false);
            }
            return Err(error);
        }
    };
    let slave = terminal
        .as_ref()
        .map(|(_, slave)| std::os::fd::AsRawFd::as_raw_fd(slave));
    // The supervisor waits on its end before the spawn: the child's exec
    // is itself notified, and whoever started it waits for that exec.
    let channel = match prepared
        .exec_judge
        .clone()
        .map(exec_notify::start)
        .transpose()
    {
        Ok(channel) => channel,
        Err(error) => {
            if let Some(cgroup) = &prepared.cgroup {
                cgroup.retire(false);
            }
            return Err(error);
        }
    };
    let notify = channel
        .as_ref()
        .map(|channel| std::os::fd::AsRawFd::as_raw_fd(&channel.child_end));
    let launched = match process::client() {
        Some(client) => match launch_in_spawner(client, &prepared, slave, own_terminal, notify) {
            // Killed from outside: the spawner thread takes over.
            Err(error)
                if error.kind() == io::ErrorKind::BrokenPipe
                    && !client.alive()
                    && !isolates(&prepared) =>
            {
                launch_here(&prepared, slave, own_terminal, notify)
            }
            launched => launched,
        },
        // A namespace's init would run in this process's memory: only
        // where the spawner process never ran (in-process embedders).
        None if process::died() && isolates(&prepared) => Err(io::Error::other(
            "the spawner process has died, and a command with a PID namespace of its own is not started from the server",
        )),
        None => launch_here(&prepared, slave, own_terminal, notify),
    };
    // The child has its copy (or failed): the supervisor sees end of file
    // when no listener came.
    drop(channel);
    let launched = match launched {
        Ok(launched) => launched,
        Err(error) => {
            if let Some(cgroup) = &prepared.cgroup {
                cgroup.retire(false);
            }
            return Err(error);
        }
    };
    let cgroup = prepared.cgroup;
    let terminal = match terminal {
        Some(pair) => Some(pair),
        None => launched.terminal.map(pty::adopt).transpose()?,
    };
    let (stdout, stderr, terminal): (Pipe, Pipe, _) = match (launched.output, terminal) {
        (Some((stdout, stderr)), _) => (
            Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(stdout)?),
            Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(stderr)?),
            None,
        ),
        (None, Some((master, slave))) => {
            let device = pty::device_of(&slave)?;
            // The child has its copies; ours would keep the master from
            // ever reading end of stream.
            drop(slave);
            let master = pty::register(master)?;
            (
                Box::new(pty::MasterReader(std::sync::Arc::clone(&master))),
                Box::new(tokio::io::empty()),
                Some(pty::TerminalWriter::new(master, device)),
            )
        }
        (None, None) => return Err(io::Error::other("a child without output")),
    };
    Ok(Spawned {
        pid: launched.pid,
        stdout,
        stderr,
        exit: launched.exit,
        cgroup,
        terminal,
    })
}

/// Whether the command gets a PID namespace, with an init of its own.
#[cfg(target_os = "linux")]
fn isolates(prepared: &Prepared) -> bool {
    prepared
        .confinement
        .as_ref()
        .is_some_and(|confinement| confinement.isolates_processes())
}

/// A started process.
#[cfg(target_os = "linux")]
struct Launched {
    pid: i32,
    /// Stdout and stderr, or `None` under a terminal.
    output: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>,
    /// The terminal (master, slave) a namespace's init opened in its own
    /// devpts, when one was asked for.
    terminal: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>,
    /// Resolves once it has ended.
    exit: ExitFuture,
}

/// The `(descriptor, number in the program)` pairs the program inherits.
#[cfg(target_os = "linux")]
fn inherited(prepared: &Prepared) -> Vec<(std::os::fd::RawFd, std::os::fd::RawFd)> {
    prepared
        .inherit
        .iter()
        .map(|(fd, child_fd)| (std::os::fd::AsRawFd::as_raw_fd(&**fd), *child_fd))
        .collect()
}

/// Started by the spawner process, which reaps it and writes its wait
/// status on the exit pipe.
#[cfg(target_os = "linux")]
fn launch_in_spawner(
    client: &process::Client,
    prepared: &Prepared,
    terminal: Option<std::os::fd::RawFd>,
    own_terminal: bool,
    exec_notify: Option<std::os::fd::RawFd>,
) -> io::Result<Launched> {
    let inherit = inherited(prepared);
    let launched = client.launch(&process::Request {
        program: &prepared.program,
        argv: &prepared.argv,
        envp: &prepared.envp,
        cwd: &prepared.cwd,
        cgroups: prepared
            .cgroup
            .as_ref()
            .map(crate::cgroup::CommandCgroup::join_fds),
        terminal,
        own_terminal,
        confinement: prepared
            .confinement
            .as_deref()
            .map(sandbox::Confinement::shared),
        inherit: &inherit,
        exec_notify,
    })?;
    let mut exit = tokio::net::unix::pipe::Receiver::from_owned_fd(launched.exit)?;
    Ok(Launched {
        pid: launched.pid,
        output: launched.output,
        terminal: launched.terminal,
        exit: Box::pin(async move {
            use tokio::io::AsyncReadExt;
            let mut status = [0u8; 4];
            match exit.read_exact(&mut status).await {
                Ok(_) => Ok(exit_info_from_status(i32::from_ne_bytes(status))),
                Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => Err(
                    io::Error::other("the spawner process ended before the command"),
                ),
                Err(error) => Err(error),
            }
        }),
    })
}

/// Started from this process (no spawner process): the calling thread is
/// the parent, and the exit future reaps the child.
#[cfg(target_os = "linux")]
fn launch_here(
    prepared: &Prepared,
    terminal: Option<std::os::fd::RawFd>,
    own_terminal: bool,
    exec_notify: Option<std::os::fd::RawFd>,
) -> io::Result<Launched> {
    let own_cgroup = prepared.cgroup.is_some();
    let confinement = prepared.confinement.as_ref().map(|confinement| {
        let plan = confinement.plan();
        if own_cgroup {
            plan.without_cgroup()
        } else {
            plan
        }
    });
    let child = vfork::spawn(
        &prepared.program,
        &prepared.argv,
        &prepared.envp,
        &prepared.cwd,
        prepared
            .cgroup
            .as_ref()
            .map(crate::cgroup::CommandCgroup::join_fds),
        confinement.as_ref(),
        terminal,
        own_terminal,
        &inherited(prepared),
        exec_notify,
    )?;
    let pidfd = vfork::watch_pidfd(child.pidfd)?;
    let status = child.status;
    // Unmapped once the exit below has reaped the init (or, dropped
    // earlier, after ending it).
    let stack = child.stack;
    Ok(Launched {
        pid: child.pid,
        output: child.output,
        terminal: child.terminal,
        exit: Box::pin(async move {
            let exit = wait_pidfd(pidfd).await?;
            drop(stack);
            // The namespace's init reports how the shell ended: the init
            // itself cannot die of the shell's signal.
            Ok(status
                .as_ref()
                .and_then(vfork::reported_status)
                .map_or(exit, exit_info_from_status))
        }),
    })
}

/// A raw wait status as an `ExitInfo`.
#[cfg(target_os = "linux")]
fn exit_info_from_status(status: i32) -> ExitInfo {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        ExitInfo {
            code: 128 + signal,
            signal: Some(signal),
        }
    } else {
        ExitInfo {
            code: libc::WEXITSTATUS(status),
            signal: None,
        }
    }
}

/// Waits until the pidfd turns readable (the process exited), then reaps it.
#[cfg(target_os = "linux")]
async fn wait_pidfd(pidfd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>) -> io::Result<ExitInfo> {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    use std::os::fd::AsFd;
    loop {
        let mut guard = pidfd.readable().await?;
        match waitid(
            Id::PIDFd(pidfd.get_ref().as_fd()),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG,
        ) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(ExitInfo { code, signal: None }),
            Ok(WaitStatus::Signaled(_, signal, _)) => {
                let signal = signal as i32;
                return Ok(ExitInfo {
                    code: 128 + signal,
                    signal: Some(signal),
                });
            }
            Ok(_) => guard.clear_ready(),
            Err(nix::errno::Errno::EINTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
}

#[cfg(not(target_os = "linux"))]
type Prepared = std::process::Command;

#[cfg(not(target_os = "linux"))]
fn prepare(spec: &SpawnSpec, tag: &str) -> Result<Prepared, SpawnError> {
    if spec.confinement.is_some() {
        return Err(SpawnError::Io(io::Error::other("the sandbox needs Linux")));
    }
    if spec.tty {
        return Err(SpawnError::Io(io::Error::other("a terminal needs Linux")));
    }
    Ok(build_command(spec, tag))
}

#[cfg(not(target_os = "linux"))]
fn start(command: Prepared) -> io::Result<Spawned> {
    let mut child = tokio::process::Command::from(command).spawn()?;
    let pid = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .unwrap_or(-1);
    let stdout: Pipe = match child.stdout.take() {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::empty()),
    };
    let stderr: Pipe = match child.stderr.take() {
        Some(pipe) => Box::new(pipe),
        None => Box::new(tokio::io::empty()),
    };
    Ok(Spawned {
        pid,
        stdout,
        stderr,
        exit: Box::pin(async move { child.wait().await.map(exit_info) }),
        cgroup: None,
    })
}

#[cfg(not(target_os = "linux"))]
fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return ExitInfo {
                code: 128 + signal,
                signal: Some(signal),
            };
        }
    }
    ExitInfo {
        code: status.code().unwrap_or(-1),
        signal: None,
    }
}

fn check_cwd(spec: &SpawnSpec) -> Result<(), SpawnError> {
    match std::fs::metadata(&spec.cwd) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(SpawnError::BadWorkingDir {
            path: spec.cwd.clone(),
            source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        }),
        Err(source) => Err(SpawnError::BadWorkingDir {
            path: spec.cwd.clone(),
            source,
        }),
    }
}

#[cfg(all(unix, not(target_os = "linux")))]
fn build_command(spec: &SpawnSpec, tag: &str) -> std::process::Command {
    let mut command = ::spawn::command::in_new_session(resolve_program(spec));
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(key, value)| (key, value)))
        .env(SHELL_TAG_VAR, tag)
        .envs(spec.script.iter().map(|script| (SCRIPT_VAR, script)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    set_arg0(&mut command, spec);
    command
}

/// `$0` stays the name the spec gave (`bash`), not the resolved path.
#[cfg(all(unix, not(target_os = "linux")))]
fn set_arg0(command: &mut std::process::Command, spec: &SpawnSpec) {
    use std::os::unix::process::CommandExt;
    command.arg0(program_name(spec));
}

#[cfg(not(unix))]
fn set_arg0(_command: &mut std::process::Command, _spec: &SpawnSpec) {}

/// `argv[0]`: the program's file name, so `$0` and bash's messages read
/// `bash` whether the spec names `bash` or `/usr/bin/bash`.
fn program_name(spec: &SpawnSpec) -> &std::ffi::OsStr {
    spec.program.file_name().unwrap_or(spec.program.as_os_str())
}

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
