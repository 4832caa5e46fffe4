//! What to start: the plain struct shell-runtime takes from the layers above.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::buffer::BufferLimits;

pub use ::spawn::spec::{ConfinementSpec, ExecJudge, ExecRequest, ExecVerdict, FileIdentity};

/// The full output of one stream copied to a file, up to a size cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillFile {
    /// Created (truncated) when the process starts.
    pub path: PathBuf,
    /// Bytes written at most; the rest of the stream is only counted.
    pub cap_bytes: u64,
    /// Bytes all files sharing this budget may hold together; writing stops
    /// when it is spent (the caller gives bytes back as it removes files).
    pub budget: Option<SpillBudget>,
}

/// Disk bytes shared by many spill files (one server's output files): a
/// write takes its bytes first, and stops where none are left.
#[derive(Debug, Clone)]
pub struct SpillBudget(std::sync::Arc<BudgetState>);

#[derive(Debug)]
struct BudgetState {
    limit: u64,
    used: std::sync::atomic::AtomicU64,
}

impl SpillBudget {
    /// A budget of `limit` bytes, none used.
    pub fn new(limit: u64) -> Self {
        Self(std::sync::Arc::new(BudgetState {
            limit,
            used: std::sync::atomic::AtomicU64::new(0),
        }))
    }

    /// Takes up to `wanted` bytes; returns how many were granted.
    pub fn take(&self, wanted: u64) -> u64 {
        use std::sync::atomic::Ordering;
        let mut granted = 0;
        let _ = self
            .0
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                granted = wanted.min(self.0.limit.saturating_sub(used));
                Some(used + granted)
            });
        granted
    }

    /// Gives back `bytes` (a file removed, or bytes taken but not written).
    pub fn give_back(&self, bytes: u64) {
        use std::sync::atomic::Ordering;
        let _ = self
            .0
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    /// Bytes in use.
    pub fn used(&self) -> u64 {
        self.0.used.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.0.limit
    }
}

/// Two handles are equal when they share one budget.
impl PartialEq for SpillBudget {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SpillBudget {}

/// The variable that hands a shell its script (see [`SpawnSpec::script`]).
pub const SCRIPT_VAR: &str = "AGENT_EXEC_SCRIPT";

/// The arguments of [`SpawnSpec::shell`]'s `bash -c`: the script is copied
/// out of [`SCRIPT_VAR`], which is unset so no process the script starts
/// inherits it, and run by `eval` (which unsets the copy first: the script
/// sees neither). Line numbers in its errors start at 1 as with `-c`.
const LAUNCHER: &str = "__agent_exec_script=$AGENT_EXEC_SCRIPT; unset AGENT_EXEC_SCRIPT; \
                        eval \"unset __agent_exec_script; $__agent_exec_script\"";

/// Everything needed to start one shell.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The program, `bash` unless told otherwise; looked up in the `PATH` of
    /// `env` unless it is a path. Its file name is `argv[0]`.
    pub program: PathBuf,
    /// Its arguments; [`SpawnSpec::shell`] makes them `-c` and a launcher
    /// that runs [`SpawnSpec::script`].
    pub args: Vec<OsString>,
    /// Text the program gets in the variable [`SCRIPT_VAR`] (replacing one
    /// of that name in `env`) rather than in its command line, so that no
    /// process's command line shows it: `pgrep -f` and `pkill -f` see only
    /// what the script runs, never the shell running it.
    pub script: Option<String>,
    /// The command text, kept for listings; never run by itself.
    pub command: String,
    /// Working directory; must exist.
    pub cwd: PathBuf,
    /// The complete environment: the process gets these variables and no
    /// others, plus `AGENT_EXEC_SHELL` (see [`SHELL_TAG_VAR`](crate::SHELL_TAG_VAR)).
    pub env: Vec<(OsString, OsString)>,
    /// Memory kept per stream.
    pub limits: BufferLimits,
    /// Optional full copy of stdout.
    pub stdout_spill: Option<SpillFile>,
    /// Optional full copy of stderr.
    pub stderr_spill: Option<SpillFile>,
    /// The whole tree is ended when the shell runs longer than this.
    pub timeout: Option<Duration>,
    /// How long to keep reading after the shell exits, for output still in
    /// flight from processes it started.
    pub drain: Duration,
    /// Grace between SIGTERM and SIGKILL for processes the shell left behind.
    pub leftover_grace: Duration,
    /// Executable file names (`*` matches any run of characters) left
    /// running when the shell exits, such as build daemons (matched on
    /// `/proc/PID/exe`, never on a name the process sets); they are ended by
    /// [`ShellManager::shutdown`](crate::ShellManager::shutdown). No effect
    /// under a confinement with [`ConfinementSpec::isolate_processes`]: everything in a
    /// command's PID namespace ends with its shell.
    pub keep_running: Vec<String>,
    /// What is redacted from the output before it is kept or spilled
    /// (secret values and token formats the caller must never see), even
    /// when a read cuts one in two. One table, shared by every command.
    pub replacements: Option<std::sync::Arc<crate::Redactions>>,
    /// Confinement applied in the child before exec (the sandbox), shared
    /// by every command of a server.
    pub confinement: Option<std::sync::Arc<crate::Confinement>>,
    /// Run under a new pseudo-terminal (120x40, `TERM=xterm-256color`) as
    /// the controlling terminal of the shell's session: stdin, stdout and
    /// stderr are its slave, the output is one stream (read as stdout), and
    /// [`ShellProcess::terminal`](crate::ShellProcess::terminal) writes
    /// input. Linux only.
    pub tty: bool,
    /// The memory budget the output shares with other shells (a
    /// [`ShellManager`](crate::ShellManager) fills in its own); without
    /// one, the shell's output has a pool of its own, bounded only by
    /// `limits`.
    pub memory: Option<crate::MemoryPool>,
    /// Descriptors the program inherits, each at the given number (3 and
    /// up; made with `O_CLOEXEC` here, the child's copy without it), such
    /// as a channel a shell's script writes to that no path names. No other
    /// descriptor above 2 reaches the program, not even one this process
    /// inherited without close-on-exec (Linux 5.11 and later). Linux only:
    /// elsewhere the program gets none of them.
    pub inherit: Vec<(std::sync::Arc<std::os::fd::OwnedFd>, std::os::fd::RawFd)>,
    /// The limits of the command's own cgroup, where one can be made
    /// (processes: 1024 by default; memory: none by default).
    pub cgroup_limits: crate::CommandLimits,
    /// Judges every exec of the command's tree but the shell's own
    /// (`execve`/`execveat` stopped by a seccomp user notification; Linux
    /// only): policy at run time. Mechanism only: the caller brings the
    /// rules. `None`: no filter.
    pub exec_judge: Option<ExecJudge>,
    /// Stops `timeout`'s clock while held (a question asked at an exec):
    /// the time held counts toward no limit.
    pub timeout_hold: Option<std::sync::Arc<crate::TimeoutHold>>,
}

impl SpawnSpec {
    /// bash running `command` in `cwd` with an empty environment, as
    /// `bash -c COMMAND` would, except that the command text is handed over
    /// in [`SCRIPT_VAR`], not in the command line (see [`SpawnSpec::script`]).
    pub fn shell(command: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        let command = command.into();
        Self {
            program: PathBuf::from("bash"),
            args: vec![OsString::from("-c"), OsString::from(LAUNCHER)],
            script: Some(command.clone()),
            command,
            cwd: cwd.into(),
            env: Vec::new(),
            limits: BufferLimits::DEFAULT,
            stdout_spill: None,
            stderr_spill: None,
            timeout: None,
            drain: Duration::from_millis(100),
            leftover_grace: Duration::from_millis(500),
            keep_running: Vec::new(),
            replacements: None,
            confinement: None,
            tty: false,
            memory: None,
            inherit: Vec::new(),
            cgroup_limits: crate::CommandLimits::default(),
            exec_judge: None,
            timeout_hold: None,
        }
    }

    /// Replaces the environment.
    #[must_use]
    pub fn with_env<K, V>(mut self, env: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        self.env = env.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        self
    }

    /// Sets a timeout for the whole tree.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the memory kept per stream.
    #[must_use]
    pub fn with_limits(mut self, limits: BufferLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Runs under a pseudo-terminal (see [`SpawnSpec::tty`]).
    #[must_use]
    pub fn with_tty(mut self) -> Self {
        self.tty = true;
        self
    }

    /// Hands `fd` to the program as descriptor `child_fd` (see
    /// [`SpawnSpec::inherit`]).
    #[must_use]
    pub fn with_inherited(
        mut self,
        fd: std::sync::Arc<std::os::fd::OwnedFd>,
        child_fd: std::os::fd::RawFd,
    ) -> Self {
        self.inherit.push((fd, child_fd));
        self
    }

    /// Uses another shell program (it is still given `-c` and the
    /// launcher, which any POSIX shell runs).
    #[must_use]
    pub fn with_program(mut self, program: impl Into<PathBuf>) -> Self {
        self.program = program.into();
        self
    }
}

/// True when `name` matches `pattern`, where `*` stands for any run of characters.
pub(crate) fn name_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::name_matches;

    #[test]
    fn globs_match_process_names() {
        assert!(name_matches("gradle*", "gradle-daemon"));
        assert!(name_matches("sccache", "sccache"));
        assert!(!name_matches("sccache", "sccache2"));
        assert!(name_matches("*cache", "sccache"));
        assert!(name_matches("a*b*c", "aXbYc"));
        assert!(!name_matches("a*b*c", "aXcYb"));
        assert!(name_matches("*", ""));
        assert!(!name_matches("ab*ba", "aba"));
    }
}
