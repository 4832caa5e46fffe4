//! The plain data the spawn code takes: what a sandbox confines and how
//! each exec of a command's tree is judged (shell-runtime re-exports them).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// Makes (once) and returns this server's own parent cgroup below the
/// directory it is given, after removing those of servers that are gone:
/// shell-runtime's part of preparing a sandbox's pids cgroup.
pub type CgroupParent = fn(&Path) -> io::Result<PathBuf>;

/// What a sandbox confines, as plain data (exec-tools builds it from the
/// policy's sandbox request).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfinementSpec {
    /// Restrict writes to `writable` (and `/dev/null`-like devices).
    pub restrict_writes: bool,
    /// Where writes stay allowed when `restrict_writes` is set.
    pub writable: Vec<PathBuf>,
    /// Refuse non-Unix sockets and `io_uring`.
    pub deny_network: bool,
    /// `RLIMIT_FSIZE`.
    pub max_file_size: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub max_open_files: Option<u64>,
    /// `RLIMIT_CORE` 0.
    pub no_core_dumps: bool,
    /// A pids cgroup for all commands together.
    pub max_processes: Option<u64>,
    /// Run each command in a PID and mount namespace of its own (with a
    /// fresh `/proc`) and a capability set cut to what ordinary commands
    /// need, under a small init of ours as the namespace's PID 1 (it runs
    /// in this process's memory, and makes this process undumpable).
    /// Linux on `x86_64` and `aarch64`. `false`: commands share the host's
    /// processes.
    pub isolate_processes: bool,
}

/// The file an exec would run, as this process sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Modification time, seconds.
    pub mtime: i64,
    /// Size in bytes.
    pub size: u64,
}

/// One exec a command's process is about to make.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// The process (in this process's PID namespace).
    pub pid: i32,
    /// The path the process named, as it gave it.
    pub path: OsString,
    /// The file it names with every symlink resolved (`None`: it could not
    /// be opened; the exec will then fail by itself, or the file changed).
    pub real_path: Option<PathBuf>,
    /// The file's identity, to tell hard links and copies apart.
    pub file: Option<FileIdentity>,
    /// The argument vector, `argv[0]` as given.
    pub argv: Vec<OsString>,
    /// The process's working directory.
    pub cwd: PathBuf,
    /// `HOME` in the environment the program will see.
    pub home: Option<OsString>,
    /// The environment the program will see (`NAME=value` entries of the
    /// exec's own vector).
    pub env: Vec<OsString>,
}

/// What a judge answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecVerdict {
    /// The exec goes on.
    Allow,
    /// The exec fails with `EPERM`.
    Deny,
}

/// The caller's judge of every exec of a command's tree but the first.
/// It runs on the command's supervisor thread and may block (a question).
#[derive(Clone)]
pub struct ExecJudge(pub std::sync::Arc<dyn Fn(&ExecRequest) -> ExecVerdict + Send + Sync>);

impl std::fmt::Debug for ExecJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExecJudge")
    }
}
