//! The janitor (see shell-runtime's `start_janitor`): the same binary,
//! started with a hidden first argument, that outlives the server and, once
//! the server is gone (even killed with SIGKILL), ends every process left in
//! its cgroups, removes them, and removes its temp directories.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// The hidden first argument that makes the binary a janitor.
const JANITOR_ARG: &str = "__agent-exec-janitor";

/// Runs the janitor when the arguments ask for it: `JANITOR_ARG ID
/// CGROUPS TEMP_BASE` (the server's random id; an empty CGROUPS when there
/// are none). Returns false, having done nothing, otherwise.
pub(crate) fn run_if_asked() -> bool {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let [first, id, cgroups, temp_base] = args.as_slice() else {
        return false;
    };
    if first != JANITOR_ARG {
        return false;
    }
    let cgroups = (!cgroups.is_empty()).then(|| PathBuf::from(cgroups));
    shell_runtime::run_janitor(cgroups.as_deref());
    if let Some(id) = id.to_str() {
        remove_temp_dirs(Path::new(temp_base), id);
    }
    true
}

/// `agent-exec-<id>-*` under `base`: the server's temp directories.
fn remove_temp_dirs(base: &Path, id: &str) {
    let prefix = format!("{}{id}-", shell_runtime::INSTANCE_PREFIX);
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(&prefix))
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// This server's janitor while one runs. Never dropped while the server
/// lives: that would close its pipe, and it would clean up at once.
static JANITOR: Mutex<Option<shell_runtime::Janitor>> = Mutex::new(None);

/// Set once the first start has been tried: [`wait`] returns then.
static STARTED: OnceLock<()> = OnceLock::new();

/// Whether [`start`] was called: [`wait`] waits only then.
static ASKED: AtomicBool = AtomicBool::new(false);

/// Starts this server's janitor, once, on a thread of its own, after the
/// server has re-executed itself (an `execve` closes the pipe, which the
/// janitor would take for the server's end). Starting it (the server's
/// cgroup, a fork and an exec) took a few milliseconds of the path to the
/// `initialize` answer; nothing runs before [`wait`] returns. A janitor
/// that dies (a command without the sandbox can signal it: same user, and
/// it is a child of the server, as the command's shell is) is started
/// again at once by a thread that waits for it.
pub(crate) fn start() {
    ASKED.store(true, Ordering::SeqCst);
    let started = std::thread::Builder::new()
        .name("janitor-start".to_owned())
        .spawn(|| {
            STARTED.get_or_init(start_now);
        });
    if started.is_err() {
        STARTED.get_or_init(start_now);
    }
}

/// Returns once the janitor [`start`] began is running (or failed to
/// start, which was logged): before the first command. Does nothing when
/// none was asked for (the in-process tests).
pub(crate) fn wait() {
    if ASKED.load(Ordering::SeqCst) {
        // Blocks while the starting thread initialises it, or starts it
        // here if that thread has not begun.
        STARTED.get_or_init(start_now);
    }
}

fn start_now() {
    let Some(janitor) = launch() else { return };
    tracing::debug!(pid = janitor.pid(), "janitor started");
    *JANITOR.lock().unwrap_or_else(PoisonError::into_inner) = Some(janitor);
    let watching = std::thread::Builder::new()
        .name("janitor-watch".to_owned())
        .spawn(watch);
    if let Err(error) = watching {
        tracing::warn!(%error, "the janitor will not be restarted if it dies");
    }
}

/// Waits for the janitor to die and starts another, for the server's life.
fn watch() {
    /// A janitor killed as soon as it starts is restarted no faster.
    const PAUSE: Duration = Duration::from_millis(50);
    loop {
        let began = Instant::now();
        {
            let mut slot = JANITOR.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(janitor) = slot.as_mut() else { return };
            // Nothing else takes the lock: `wait` may block here for good.
            if let Err(error) = janitor.wait() {
                tracing::warn!(%error, "cannot wait for the janitor; it will not be restarted");
                return;
            }
        }
        tracing::warn!("the janitor died; starting another");
        if began.elapsed() < PAUSE {
            std::thread::sleep(PAUSE);
        }
        let Some(janitor) = launch() else { return };
        // The dead one's pipe closes here; nothing reads it any more.
        *JANITOR.lock().unwrap_or_else(PoisonError::into_inner) = Some(janitor);
    }
}

/// Starts one janitor process.
fn launch() -> Option<shell_runtime::Janitor> {
    // The running image, even if its file was replaced or removed since.
    let own_image = Path::new("/proc/self/exe");
    let program = if own_image.exists() {
        own_image.to_path_buf()
    } else {
        match std::env::current_exe() {
            Ok(program) => program,
            Err(error) => {
                tracing::warn!(%error, "no janitor: cannot find the server's own binary");
                return None;
            }
        }
    };
    let cgroups = shell_runtime::command_cgroups_dir().unwrap_or_default();
    let args = [
        OsString::from(JANITOR_ARG),
        OsString::from(shell_runtime::server_id()),
        cgroups.into_os_string(),
        std::env::temp_dir().into_os_string(),
    ];
    match shell_runtime::start_janitor(&program, &args) {
        Ok(janitor) => Some(janitor),
        Err(error) => {
            tracing::warn!(%error, "no janitor: a server killed with SIGKILL leaves its cgroups behind");
            None
        }
    }
}
