//! The opt-in sandbox, as data: what a command may write, whether it may
//! open network sockets, and the resource limits it runs under. exec-tools
//! turns this into the plain struct shell-runtime applies in the child.

use std::fmt;
use std::path::PathBuf;

/// How much of the filesystem a command may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// No sandbox.
    #[default]
    Off,
    /// No writes anywhere but `/dev/null`-like devices.
    ReadOnly,
    /// Writes only inside the roots and the server's private temp dir.
    WorkspaceWrite,
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Off => "off",
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
        })
    }
}

/// Whether a command may open network sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetworkAccess {
    /// Any socket.
    #[default]
    Allow,
    /// Unix sockets only; `io_uring` refused too.
    Deny,
}

/// Limits every sandboxed command runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Largest file a command may write, in bytes (`RLIMIT_FSIZE`).
    pub max_file_size: u64,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub max_open_files: u64,
    /// Processes of all commands together (a pids cgroup).
    pub max_processes: u64,
    /// No core dumps (`RLIMIT_CORE` 0).
    pub no_core_dumps: bool,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self {
            max_file_size: 16 * 1024 * 1024 * 1024,
            max_open_files: 4096,
            max_processes: 1024,
            no_core_dumps: true,
        }
    }
}

/// The whole sandbox request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxSpec {
    /// Filesystem mode.
    pub mode: SandboxMode,
    /// Network access.
    pub network: NetworkAccess,
    /// Where writes are allowed in `workspace-write`: the roots and the
    /// private temp dir (empty in the other modes).
    pub writable: Vec<PathBuf>,
    /// Resource limits.
    pub limits: ResourceLimits,
}

impl SandboxSpec {
    /// A request for `mode` and `network`; `roots` and `temp_dir` become
    /// the writable paths in `workspace-write`.
    pub fn new(
        mode: SandboxMode,
        network: NetworkAccess,
        roots: &[PathBuf],
        temp_dir: PathBuf,
        limits: ResourceLimits,
    ) -> Self {
        let writable = match mode {
            SandboxMode::WorkspaceWrite => roots.iter().cloned().chain([temp_dir]).collect(),
            SandboxMode::Off | SandboxMode::ReadOnly => Vec::new(),
        };
        Self {
            mode,
            network,
            writable,
            limits,
        }
    }

    /// True when nothing is confined.
    pub fn is_off(&self) -> bool {
        self.mode == SandboxMode::Off && self.network == NetworkAccess::Allow
    }

    /// One sentence for the Bash tool's description, when a sandbox is on.
    pub fn describe(&self) -> Option<String> {
        if self.is_off() {
            return None;
        }
        let files = match self.mode {
            SandboxMode::Off => "Files: no restriction".to_owned(),
            SandboxMode::ReadOnly => {
                "Sandbox: commands may read files but write none (only /dev/null and the like)"
                    .to_owned()
            }
            SandboxMode::WorkspaceWrite => format!(
                "Sandbox: commands may write only under {} (TMPDIR points to the last); writes elsewhere fail with a permission error",
                self.writable
                    .iter()
                    .map(|path| path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let network = match self.network {
            NetworkAccess::Allow => "",
            NetworkAccess::Deny => "; network sockets are refused (Unix sockets work)",
        };
        Some(format!("{files}{network}."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_write_makes_roots_and_temp_writable() {
        let spec = SandboxSpec::new(
            SandboxMode::WorkspaceWrite,
            NetworkAccess::Deny,
            &[PathBuf::from("/work")],
            PathBuf::from("/tmp/agent-exec-1-0/tmp"),
            ResourceLimits::default(),
        );
        assert_eq!(
            spec.writable,
            [
                PathBuf::from("/work"),
                PathBuf::from("/tmp/agent-exec-1-0/tmp")
            ]
        );
        let sentence = spec.describe().expect("a sentence");
        assert!(
            sentence.contains("/work, /tmp/agent-exec-1-0/tmp"),
            "{sentence}"
        );
        assert!(sentence.contains("network sockets are refused"));
    }

    #[test]
    fn off_says_nothing_and_read_only_writes_nowhere() {
        let off = SandboxSpec::default();
        assert!(off.is_off() && off.describe().is_none());
        let read_only = SandboxSpec::new(
            SandboxMode::ReadOnly,
            NetworkAccess::Allow,
            &[PathBuf::from("/work")],
            PathBuf::from("/tmp/x"),
            ResourceLimits::default(),
        );
        assert!(read_only.writable.is_empty());
        assert!(
            read_only
                .describe()
                .expect("a sentence")
                .contains("write none")
        );
    }
}
