//! Process mechanism for agent shells: spawning in a process session and
//! process group of its own, ending whole trees (escaped ones included),
//! bounded UTF-8 output capture and a shell manager. Knows nothing of tools
//! or policy: it takes a plain [`SpawnSpec`] and gives back handles.
//!
//! ```no_run
//! # async fn demo() -> Result<(), shell_runtime::SpawnError> {
//! use shell_runtime::{ShellProcess, SpawnSpec, Stream};
//! let spec = SpawnSpec::shell("echo hi; sleep 1000 & echo done", "/tmp")
//!     .with_env(std::env::vars_os());
//! let shell = ShellProcess::spawn(spec).await?;
//! shell.wait().await; // returns when bash exits; the sleep is ended
//! assert_eq!(shell.snapshot(Stream::Stdout).render(), "hi\ndone\n");
//! assert_eq!(shell.ended_jobs(), 1);
//! # Ok(()) }
//! ```
//!
//! Linux is where trees are tracked in full (`/proc`, a child subreaper);
//! elsewhere only the process group is reached.

#![forbid(unsafe_code)]

mod buffer;
mod cgroup;
mod decode;
mod error;
mod fds;
mod instance;
mod manager;
mod memfd;
mod orphans;
mod pool;
mod process;
mod redact;
mod spawn;
mod spec;
mod status;
mod sys;
mod terminal_text;
mod timeout_hold;
mod tree;
#[cfg(target_os = "linux")]
mod tty_wait;

pub use ::spawn::proc_view::ProcessView;
pub use ::spawn::trim::{
    MAP_AT_BYTES, MAX_HEAPS, heap_count, mapped_blocks, release_free_memory, tune_allocator,
};
pub use buffer::{BufferLimits, OutputSlice, StreamPosition};
pub use cgroup::{CommandLimits, DEFAULT_MAX_PROCESSES, command_cgroups_dir, end_all_contained};
pub use error::{ManagerError, SpawnError};
pub use fds::{
    Descriptors, FDS_PER_SHELL, FOREGROUND_RESERVE, OpenFileLimit, raise_open_file_limit,
};
pub use instance::{INSTANCE_PREFIX, hold_lock, id_in_name, server_id, try_lock};
pub use manager::{
    KILL_GRACE, KillOutcome, LONG_ID_DIGITS, MAX_TRACKED_SHELLS, ReservedId, SHORT_ID_DIGITS,
    ShellId, ShellManager,
};
pub use memfd::anonymous_file;
pub use pool::{CHUNK_BYTES, DEFAULT_MEMORY_BUDGET, MemoryPool};
pub use process::{
    NewOutput, ReadCursor, Screen, ShellProcess, SpillReport, SpillShortfall, Stream,
};
pub use redact::{Redactions, StreamReplacer, TokenPattern, replace_in_pieces};
#[cfg(target_os = "linux")]
pub use spawn::arguments::hide_arguments;
#[cfg(unix)]
pub use spawn::janitor::{Janitor, run_janitor, start_janitor};
#[cfg(target_os = "linux")]
pub use spawn::process::{bypass_spawner_process, start_spawner_process};
#[cfg(target_os = "linux")]
pub use spawn::pty::{TERMINAL_COLUMNS, TERMINAL_ROWS, TERMINAL_TYPE, TerminalWriter};
pub use spawn::sandbox::{ConfineError, Confinement};
pub use spec::{
    ConfinementSpec, ExecJudge, ExecRequest, ExecVerdict, FileIdentity, SCRIPT_VAR, SpawnSpec,
    SpillBudget, SpillFile,
};
pub use status::{EndRequest, ExitInfo, OutOfMemory, ShellStatus, human_bytes, signal_name};
pub use terminal_text::{CleanOptions, clean_text};
pub use timeout_hold::{Held, TimeoutHold};
pub use tree::SHELL_TAG_VAR;
#[cfg(target_os = "linux")]
pub use tty_wait::{
    TerminalDevice, group_reader, group_waits_for_input, read_calls, waits_for_input,
};
/// The capture's building blocks, public for the fuzz targets and the
/// tests of other crates only.
#[doc(hidden)]
pub use {buffer::OutputBuffer, decode::Utf8Decoder, terminal_text::TerminalText};
