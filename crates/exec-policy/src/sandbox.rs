//! The sandbox, as data: whether commands are contained (namespaces of
//! their own), what they may write, whether they may open network sockets,
//! and the resource limits they run under. exec-tools turns this into the
//! plain struct shell-runtime applies in the child.

use std::fmt;
use std::path::{Path, PathBuf};

/// How a command is contained, and how much of the filesystem it may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// No containment: commands see and can signal the user's processes.
    Off,
    /// The default: PID, mount and IPC namespaces of its own, a fresh
    /// `/proc`, `/sys/fs/cgroup` read-only, a cut capability set; writes
    /// and network stay the user's.
    #[default]
    Contain,
    /// `Contain`, and no writes anywhere but `/dev/null`-like devices.
    ReadOnly,
    /// `Contain`, and writes only inside the roots and the server's
    /// private temp dir.
    WorkspaceWrite,
}

impl SandboxMode {
    /// Whether the mode adds write walls (Landlock) to the containment.
    pub fn has_walls(self) -> bool {
        matches!(self, Self::ReadOnly | Self::WorkspaceWrite)
    }

    /// Whether commands get namespaces of their own.
    pub fn contains(self) -> bool {
        self != Self::Off
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Off => "off",
            Self::Contain => "contain",
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
    /// No core dumps (`RLIMIT_CORE` 0).
    pub no_core_dumps: bool,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self {
            max_file_size: 16 * 1024 * 1024 * 1024,
            max_open_files: 4096,
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
    /// Where writes are allowed in `workspace-write`, all of it (what the
    /// kernel is told): the roots, the private temp dir, paths the policy
    /// file adds, and the server's own (empty in the other modes).
    pub writable: Vec<PathBuf>,
    /// The private temp dir `TMPDIR` points to, in `workspace-write`.
    pub temp_dir: Option<PathBuf>,
    /// Writable paths the server keeps for itself (session state): writable,
    /// but not offered to the model in [`SandboxSpec::describe`].
    pub internal: Vec<PathBuf>,
    /// Resource limits.
    pub limits: ResourceLimits,
}

/// A `[sandbox] writable` entry left out, and why (the server says so at
/// start-up and goes on: a missing path confines more, never less).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedWritable {
    /// The entry as the policy file wrote it.
    pub entry: String,
    /// The path it names, `~` expanded, when it could be expanded.
    pub path: Option<PathBuf>,
    /// Why it was left out, such as `does not exist`.
    pub reason: String,
}

impl fmt::Display for SkippedWritable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) if path.as_os_str() != self.entry.as_str() => write!(
                f,
                "`{}` (`{}`) {}; skipped",
                self.entry,
                path.display(),
                self.reason
            ),
            _ => write!(f, "`{}` {}; skipped", self.entry, self.reason),
        }
    }
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
        let (writable, temp_dir) = match mode {
            SandboxMode::WorkspaceWrite => (
                roots.iter().cloned().chain([temp_dir.clone()]).collect(),
                Some(temp_dir),
            ),
            SandboxMode::Off | SandboxMode::Contain | SandboxMode::ReadOnly => (Vec::new(), None),
        };
        Self {
            mode,
            network,
            writable,
            temp_dir,
            internal: Vec::new(),
            limits,
        }
    }

    /// Makes `path`, one of the server's own directories, writable in
    /// `workspace-write` without naming it to the model.
    pub fn add_internal(&mut self, path: PathBuf) {
        if self.mode == SandboxMode::WorkspaceWrite {
            self.writable.push(path.clone());
            self.internal.push(path);
        }
    }

    /// Adds the policy file's `[sandbox] writable` entries in
    /// `workspace-write` (nothing in the other modes): `~` is `home`, and
    /// symlinks are resolved. An entry that does not name an existing
    /// directory is left out and returned: Landlock can only grant rights
    /// beneath a directory that exists when the sandbox is prepared.
    pub fn add_writable(
        &mut self,
        entries: &[String],
        home: Option<&Path>,
    ) -> Vec<SkippedWritable> {
        if self.mode != SandboxMode::WorkspaceWrite {
            return Vec::new();
        }
        let mut skipped = Vec::new();
        for entry in entries {
            let skip = |path: Option<PathBuf>, reason: String| SkippedWritable {
                entry: entry.clone(),
                path,
                reason,
            };
            let Some(path) = expand_home(entry, home) else {
                skipped.push(skip(
                    None,
                    "needs the home directory, and HOME is not set".into(),
                ));
                continue;
            };
            match path.canonicalize() {
                Ok(canonical) if canonical.is_dir() => {
                    if !self.writable.contains(&canonical) {
                        self.writable.push(canonical);
                    }
                }
                Ok(_) => skipped.push(skip(Some(path), "is not a directory".into())),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    skipped.push(skip(
                        Some(path),
                        "does not exist (create it, then start the server again)".into(),
                    ));
                }
                Err(error) => skipped.push(skip(Some(path), format!("cannot be read: {error}"))),
            }
        }
        skipped
    }

    /// True when nothing is confined.
    pub fn is_off(&self) -> bool {
        self.mode == SandboxMode::Off && self.network == NetworkAccess::Allow
    }

    /// One sentence for the Bash tool's description: what the sandbox
    /// restricts, or that commands are not contained. `None` under plain
    /// `contain`, which changes nothing a command is meant to do.
    pub fn describe(&self) -> Option<String> {
        if self.mode == SandboxMode::Contain && self.network == NetworkAccess::Allow {
            return None;
        }
        let files = match self.mode {
            SandboxMode::Off => NOT_CONTAINED.to_owned(),
            SandboxMode::Contain => "Files: no restriction".to_owned(),
            SandboxMode::ReadOnly => {
                "Sandbox: commands may read files but write none (only /dev/null and the like)"
                    .to_owned()
            }
            SandboxMode::WorkspaceWrite => {
                let mut places: Vec<String> = self
                    .writable
                    .iter()
                    .filter(|path| {
                        Some(*path) != self.temp_dir.as_ref() && !self.internal.contains(path)
                    })
                    .map(|path| path.display().to_string())
                    .collect();
                if let Some(temp) = &self.temp_dir {
                    places.push(format!("TMPDIR ({})", temp.display()));
                }
                format!(
                    "Sandbox: commands may write only under {}; writes elsewhere fail with a permission error",
                    places.join(", ")
                )
            }
        };
        let network = match self.network {
            NetworkAccess::Allow => "",
            NetworkAccess::Deny => "; network sockets are refused (Unix sockets work)",
        };
        Some(format!("{files}{network}."))
    }
}

/// The Bash description's sentence when commands are not contained.
pub const NOT_CONTAINED: &str = "Commands are not contained: they run as the user, beside (and able to see and signal) the server, the client and the user's other processes";

/// `~` and `~/...` with `home`; other paths as they are. `None` when the
/// entry needs a home and there is none.
fn expand_home(entry: &str, home: Option<&Path>) -> Option<PathBuf> {
    match entry.strip_prefix('~') {
        Some("") => home.map(Path::to_path_buf),
        Some(rest) if rest.starts_with('/') => {
            home.map(|home| home.join(rest.trim_start_matches('/')))
        }
        _ => Some(PathBuf::from(entry)),
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
            sentence.contains("under /work, TMPDIR (/tmp/agent-exec-1-0/tmp);"),
            "{sentence}"
        );
        assert!(sentence.contains("network sockets are refused"));
    }

    fn workspace_write() -> SandboxSpec {
        SandboxSpec::new(
            SandboxMode::WorkspaceWrite,
            NetworkAccess::Allow,
            &[PathBuf::from("/work")],
            PathBuf::from("/tmp/agent-exec-1-0/tmp"),
            ResourceLimits::default(),
        )
    }

    #[test]
    fn internal_paths_are_writable_but_not_described() {
        let mut spec = workspace_write();
        spec.add_internal(PathBuf::from("/tmp/agent-exec-1-0/state"));
        assert!(
            spec.writable
                .contains(&PathBuf::from("/tmp/agent-exec-1-0/state"))
        );
        let sentence = spec.describe().expect("a sentence");
        assert!(!sentence.contains("state"), "{sentence}");
        assert!(
            sentence.contains("TMPDIR (/tmp/agent-exec-1-0/tmp)"),
            "{sentence}"
        );
    }

    #[test]
    fn policy_writable_paths_expand_the_home_and_skip_what_is_not_a_directory() {
        // The crate's own directory stands in for a home: it has `src`
        // (a directory) and `Cargo.toml` (a file).
        let home = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut spec = workspace_write();
        let entries = [
            "~/src".to_owned(),
            "~/Cargo.toml".to_owned(),
            "~/no-such-dir".to_owned(),
            "/no/such/dir".to_owned(),
            "~".to_owned(),
        ];
        let skipped = spec.add_writable(&entries, Some(home));
        let home = home.canonicalize().expect("the crate dir exists");
        assert!(spec.writable.contains(&home.join("src")));
        assert!(spec.writable.contains(&home));
        let reasons: Vec<String> = skipped.iter().map(ToString::to_string).collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(reasons[0].starts_with("`~/Cargo.toml` (`"), "{reasons:?}");
        assert!(reasons[0].ends_with("Cargo.toml`) is not a directory; skipped"));
        assert!(reasons[1].contains("no-such-dir`) does not exist (create it"));
        assert!(reasons[1].ends_with("); skipped"));
        assert!(reasons[2].starts_with("`/no/such/dir` does not exist"));
        let sentence = spec.describe().expect("a sentence");
        assert!(
            sentence.contains(&format!("{}, ", home.join("src").display())),
            "{sentence}"
        );
    }

    #[test]
    fn policy_writable_paths_need_a_home_and_workspace_write() {
        let mut spec = workspace_write();
        let skipped = spec.add_writable(&["~/x".to_owned()], None);
        assert!(skipped[0].to_string().contains("HOME is not set"));
        let mut read_only = SandboxSpec::new(
            SandboxMode::ReadOnly,
            NetworkAccess::Allow,
            &[PathBuf::from("/work")],
            PathBuf::from("/tmp/x"),
            ResourceLimits::default(),
        );
        assert!(read_only.add_writable(&["/".to_owned()], None).is_empty());
        assert!(read_only.writable.is_empty());
    }

    #[test]
    fn contain_is_the_default_and_says_nothing_off_says_not_contained() {
        let contain = SandboxSpec::default();
        assert_eq!(contain.mode, SandboxMode::Contain);
        assert!(!contain.is_off() && contain.describe().is_none());
        assert!(contain.mode.contains() && !contain.mode.has_walls());
        let off = SandboxSpec {
            mode: SandboxMode::Off,
            ..SandboxSpec::default()
        };
        assert!(off.is_off() && !off.mode.contains());
        assert_eq!(
            off.describe().expect("a sentence"),
            format!("{NOT_CONTAINED}.")
        );
        let contain_deny = SandboxSpec {
            network: NetworkAccess::Deny,
            ..SandboxSpec::default()
        };
        assert!(
            contain_deny
                .describe()
                .expect("a sentence")
                .contains("network sockets are refused")
        );
    }

    #[test]
    fn read_only_writes_nowhere() {
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
