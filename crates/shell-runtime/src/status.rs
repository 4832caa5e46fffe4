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

/// The OOM killer ended a process of the command (under the command's
/// memory limit, or when memory ran out elsewhere and it picked the
/// command, as it does: commands run with `oom_score_adj` 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfMemory {
    /// The command's memory limit, in bytes, when it had one.
    pub limit: Option<u64>,
}

impl fmt::Display for OutOfMemory {
    /// `killed: out of memory (limit 4 GiB)`, or without a limit
    /// `killed: out of memory`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("killed: out of memory")?;
        if let Some(limit) = self.limit {
            write!(f, " (limit {})", human_bytes(limit))?;
        }
        Ok(())
    }
}

/// `4 GiB`, `1.5 GiB`, `64 MiB`, `512 KiB`, `100 bytes`: the largest
/// binary unit the size reaches, with at most two decimals, none when
/// whole.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, size) in UNITS {
        if bytes >= size {
            let whole = bytes / size;
            // Hundredths, rounded down so the size never reads larger.
            let hundredths = (bytes % size) * 100 / size;
            return match hundredths {
                0 => format!("{whole} {name}"),
                n if n % 10 == 0 => format!("{whole}.{} {name}", n / 10),
                n => format!("{whole}.{n:02} {name}"),
            };
        }
    }
    format!("{bytes} bytes")
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

    #[test]
    fn out_of_memory_names_the_limit_in_binary_units() {
        let line = |limit| OutOfMemory { limit }.to_string();
        assert_eq!(line(Some(4 << 30)), "killed: out of memory (limit 4 GiB)");
        assert_eq!(line(Some(64 << 20)), "killed: out of memory (limit 64 MiB)");
        assert_eq!(line(Some(3 << 29)), "killed: out of memory (limit 1.5 GiB)");
        assert_eq!(line(None), "killed: out of memory");
        assert_eq!(human_bytes(512 << 10), "512 KiB");
        assert_eq!(human_bytes(100), "100 bytes");
        assert_eq!(human_bytes((1 << 30) + (1 << 30) / 4), "1.25 GiB");
    }
}
