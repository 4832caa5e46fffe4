//! Where a shell is in its life, and how it ended.

use std::fmt;

/// A shell's status; it moves only along pending → running → one of the
/// four ends (the seed's state diagram), and never leaves an end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShellStatus {
    /// Created, not started yet.
    Pending,
    /// The shell process is alive.
    Running,
    /// Exited with code 0.
    Completed,
    /// Exited with another code, or died of a signal nobody here sent.
    Failed,
    /// Ended on request (kill, cancellation, shutdown).
    Killed,
    /// Ended because it outlived its timeout.
    Timeout,
}

impl ShellStatus {
    /// The lowercase name used in messages and metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Killed => "killed",
            Self::Timeout => "timeout",
        }
    }

    /// True for the four end states.
    pub fn is_finished(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }

    /// Whether the state diagram has an arrow from `self` to `next`.
    pub fn can_move_to(self, next: Self) -> bool {
        match self {
            Self::Pending => next == Self::Running,
            Self::Running => next.is_finished(),
            _ => false,
        }
    }
}

impl fmt::Display for ShellStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the tree was ended from here, if it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndRequest {
    /// [`ShellProcess::terminate`](crate::ShellProcess::terminate) or shutdown.
    Kill,
    /// [`ShellProcess::interrupt`](crate::ShellProcess::interrupt) (Ctrl+C).
    Interrupt,
    /// The spec's timeout ran out.
    Timeout,
}

/// How the shell process itself ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    /// The exit code, or 128 + N when signal N ended it (as bash reports it).
    pub code: i32,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
}

impl ExitInfo {
    /// The status this exit gives, given what was asked of the tree.
    pub fn status(self, request: Option<EndRequest>) -> ShellStatus {
        match request {
            Some(EndRequest::Timeout) => ShellStatus::Timeout,
            Some(EndRequest::Kill | EndRequest::Interrupt) => ShellStatus::Killed,
            None if self.code == 0 && self.signal.is_none() => ShellStatus::Completed,
            None => ShellStatus::Failed,
        }
    }

    /// The signal's name (`SIGKILL`), if a signal ended the shell.
    pub fn signal_name(self) -> Option<String> {
        self.signal.map(signal_name)
    }
}

/// `SIGKILL` for 9, `SIG42` for a number without a name.
pub fn signal_name(signal: i32) -> String {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(signal)
        .ok()
        .and_then(|index| NAMES.get(index))
        .filter(|name| !name.is_empty())
        .map_or_else(|| format!("SIG{signal}"), |name| (*name).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ShellStatus; 6] = [
        ShellStatus::Pending,
        ShellStatus::Running,
        ShellStatus::Completed,
        ShellStatus::Failed,
        ShellStatus::Killed,
        ShellStatus::Timeout,
    ];

    #[test]
    fn only_the_seed_diagram_arrows_exist() {
        let arrows: Vec<(ShellStatus, ShellStatus)> = ALL
            .iter()
            .flat_map(|from| ALL.iter().map(move |to| (*from, *to)))
            .filter(|(from, to)| from.can_move_to(*to))
            .collect();
        assert_eq!(
            arrows,
            vec![
                (ShellStatus::Pending, ShellStatus::Running),
                (ShellStatus::Running, ShellStatus::Completed),
                (ShellStatus::Running, ShellStatus::Failed),
                (ShellStatus::Running, ShellStatus::Killed),
                (ShellStatus::Running, ShellStatus::Timeout),
            ]
        );
    }

    #[test]
    fn exits_map_to_statuses() {
        let ok = ExitInfo {
            code: 0,
            signal: None,
        };
        let bad = ExitInfo {
            code: 2,
            signal: None,
        };
        let killed = ExitInfo {
            code: 137,
            signal: Some(9),
        };
        assert_eq!(ok.status(None), ShellStatus::Completed);
        assert_eq!(bad.status(None), ShellStatus::Failed);
        assert_eq!(killed.status(None), ShellStatus::Failed);
        assert_eq!(killed.status(Some(EndRequest::Kill)), ShellStatus::Killed);
        assert_eq!(ok.status(Some(EndRequest::Timeout)), ShellStatus::Timeout);
        assert_eq!(killed.signal_name().as_deref(), Some("SIGKILL"));
        assert_eq!(signal_name(64), "SIG64");
    }
}
