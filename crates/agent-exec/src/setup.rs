//! Start-up: flags and policy into an [`ExecConfig`], checked before anything
//! runs, and the server's private temp directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use exec_policy::{
    NetworkAccess, Policy, ResourceLimits, SandboxSpec, canonical_dir, is_within_roots,
};
use exec_tools::{AskFallback, AuditLog, ExecConfig};

use crate::cli::{AskFallbackArg, CommonArgs, NetworkMode, SandboxMode};

mod hard_links;

/// The file in a server's temp directory that it holds an `flock` on for
/// its life: a later server removes the directory only once it can take
/// that lock (the server is gone), whatever PID namespace either runs in.
pub(crate) const LOCK_FILE: &str = "lock";

/// The least `--max-output-chars` accepts.
const MIN_OUTPUT_CHARS: usize = 1000;

/// Everything a front door (`mcp` or `run`) needs.
pub(crate) struct Setup {
    pub(crate) config: ExecConfig,
    pub(crate) cwd: PathBuf,
    pub(crate) dry_run: bool,
    /// Removed when the setup is dropped, after every shell has ended.
    pub(crate) _temp: TempDir,
}

impl Setup {
    /// The configuration for the tools. The copy kept here loses the
    /// scrubbed values, which then live only in the tools' redaction table.
    pub(crate) fn take_config(&mut self) -> ExecConfig {
        let config = self.config.clone();
        for value in self.config.env.removed.values_mut() {
            *value = String::new();
        }
        config
    }
}

/// The server's temp directory, removed when dropped, and the lock on its
/// [`LOCK_FILE`] that tells other servers this one is alive.
pub(crate) struct TempDir {
    path: PathBuf,
    _lock: std::fs::File,
}

impl TempDir {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // The lock goes after the directory: nobody else removes it meanwhile.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The server's environment as text. A variable whose name or value is
/// not UTF-8 cannot be passed on as it is (`std::env::vars` would panic on
/// it): it is left out of the commands' environment, and start-up says so.
fn utf8_env() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().filter_map(|(name, value)| {
        match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => Some((name, value)),
            (name, _) => {
                let name = name.unwrap_or_else(|name| name.to_string_lossy().into_owned());
                tracing::warn!("{name} is not passed to commands: it is not UTF-8");
                None
            }
        }
    })
}

/// Validates the flags and builds the configuration. `secrets` are the
/// scrubbed variables handed over by the re-exec (see `reexec.rs`).
pub(crate) fn setup(
    args: &CommonArgs,
    policy: &Policy,
    coauthor: Option<&str>,
    secrets: Vec<(String, String)>,
) -> anyhow::Result<Setup> {
    let (cwd, roots) = working_dir_and_roots(args.cwd.as_deref(), &args.roots)?;
    if args.max_output_chars < MIN_OUTPUT_CHARS {
        bail!(
            "--max-output-chars {} is too small: at least {MIN_OUTPUT_CHARS}, so an answer has room for its head, its tail and the truncation line",
            args.max_output_chars
        );
    }
    if let Some(coauthor) = coauthor {
        check_coauthor(coauthor)?;
    }
    let temp = make_temp_dir()?;
    let parent_env = utf8_env()
        .filter(|(name, _)| name != crate::reexec::SECRETS_FD_VAR)
        .chain(secrets);
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from);
    let mut sandbox = sandbox_spec(args, policy, &roots, temp.path(), home.as_deref())?;
    let mut config = ExecConfig::from_policy(policy, roots, temp.path().to_path_buf(), parent_env);
    // The analysis protects the home and expands `~` with it; left unset it
    // would guard `/root` whatever the user's home is.
    config.analyzer.home = home.map(|home| home.to_string_lossy().into_owned());
    config.coauthor = coauthor.map(str::to_owned);
    config.output_budget = output_budget(args.output_budget, temp.path());
    config.ask_fallback = match args.ask_fallback {
        AskFallbackArg::Deny => AskFallback::Deny,
        AskFallbackArg::Allow => AskFallback::Allow,
    };
    config.ask_timeout = std::time::Duration::from_millis(args.ask_timeout);
    config.max_output_chars = args.max_output_chars;
    let mut not_contained = None;
    if let Some(memory) = args.memory_limit {
        config.command_limits.memory = Some(memory);
    }
    if !sandbox.is_off() {
        let prepared = if sandbox.mode.contains() && fake_no_namespaces() {
            Err(shell_runtime::ConfineError::NoNamespace {
                reason: "namespaces refused (AGENT_EXEC_TEST_NO_NAMESPACES, a test switch)"
                    .to_owned(),
                source: None,
            })
        } else {
            exec_tools::prepare_sandbox(&sandbox)
        };
        let prepared = match prepared {
            // The default mode never refuses to start: it says, once, what
            // is not contained and why, and so does tools/list.
            Err(shell_runtime::ConfineError::NoNamespace { reason, source })
                if sandbox.mode == exec_policy::SandboxMode::Contain =>
            {
                let reason = match source {
                    Some(source) => format!("{reason}: {source}"),
                    None => reason,
                };
                crate::report(&format!(
                    "agent-exec: warning: commands are not contained (no PID, mount or IPC namespace of their own; the client, the server and the user's processes stay visible to them): {reason}"
                ));
                sandbox.mode = exec_policy::SandboxMode::Off;
                not_contained = Some(reason);
                exec_tools::prepare_sandbox(&sandbox)
            }
            other => other,
        };
        let confinement = prepared.with_context(|| {
            format!(
                "--sandbox {} --network {}",
                sandbox.mode,
                network_name(sandbox.network)
            )
        })?;
        // Under `contain` a kept process outlives its command (the
        // namespace's init lingers for it); the write walls end every one.
        if confinement.as_ref().is_some_and(|c| c.isolates_processes())
            && sandbox.mode != exec_policy::SandboxMode::Contain
            && !config.keep_processes.is_empty()
        {
            crate::report(&format!(
                "agent-exec: warning: [processes] keep has no effect under --sandbox {}: every process ends with its command",
                sandbox.mode
            ));
            config.keep_processes.clear();
        }
        config.confinement = confinement;
        config.write_walls = sandbox.mode.has_walls().then(|| exec_tools::WriteWalls {
            writable: sandbox.writable.clone(),
            read_only: sandbox.mode == exec_policy::SandboxMode::ReadOnly,
        });
    }
    config.description_note = sandbox.describe().map(|note| match &not_contained {
        Some(reason) => format!("{}: {reason}.", note.trim_end_matches('.')),
        None => note,
    });
    if let Some(path) = &args.audit_log {
        let label = if sandbox.is_off() {
            "off".to_owned()
        } else {
            format!(
                "{} (network {})",
                sandbox.mode,
                network_name(sandbox.network)
            )
        };
        // Fail closed: a log that cannot be opened stops the server before
        // anything runs.
        let log = AuditLog::open(path, &label).context("--audit-log")?;
        config.audit = Some(Arc::new(log));
    }
    if sandbox.mode == exec_policy::SandboxMode::WorkspaceWrite {
        config.tmpdir = Some(temp.path().join("tmp"));
        // Our own temp dir is new and holds no links.
        let ours = vec![temp.path().to_path_buf()];
        let roots = sandbox
            .writable
            .iter()
            .filter(|root| !hard_links::within(root, &ours))
            .cloned()
            .collect();
        hard_links::warn_in_background(roots, ours);
    }
    if (!sandbox.is_off() || config.command_limits.memory.is_some())
        && shell_runtime::command_cgroups_dir().is_none()
    {
        // The contract: say so, and go on (root ignores RLIMIT_NPROC).
        crate::report(
            "agent-exec: warning: no cgroup can be made for each command here: the per-command process cap and memory limit do not apply, and a fork storm is not contained",
        );
    }
    if args.dry_run {
        let note = "This server is a dry run: commands are checked and echoed (`[Dry Run] Would execute: ...`), never run.";
        config.description_note = Some(match config.description_note.take() {
            Some(sandbox) => format!("{sandbox}\n- {note}"),
            None => note.to_owned(),
        });
    }
    Ok(Setup {
        config,
        cwd,
        dry_run: args.dry_run,
        _temp: temp,
    })
}

/// A test switch: start-up behaves as where namespaces cannot be made
/// (unprivileged user namespaces disabled), so the fallback is testable on
/// a machine that has them.
fn fake_no_namespaces() -> bool {
    std::env::var_os("AGENT_EXEC_TEST_NO_NAMESPACES").is_some_and(|value| value == "1")
}

/// The bytes all output files may hold together: `asked`, else 1 GiB or a
/// quarter of the free space in `dir` (where they go) if that is less, so
/// that output files alone never fill the disk. Said in one log line (a
/// warning when the disk made it smaller).
fn output_budget(asked: Option<u64>, dir: &Path) -> u64 {
    const FREE_SHARE: u64 = 4;
    let cap = exec_tools::OUTPUT_TOTAL_CAP;
    if let Some(asked) = asked {
        tracing::info!(budget = asked, "output files: the budget was given");
        return asked;
    }
    let free = nix::sys::statvfs::statvfs(dir).ok().map(|stats| {
        stats
            .blocks_available()
            .saturating_mul(stats.fragment_size())
    });
    let Some(free) = free else {
        tracing::info!(
            budget = cap,
            "output files: free space unknown, budget 1 GiB"
        );
        return cap;
    };
    let budget = cap.min(free / FREE_SHARE);
    if budget < cap {
        tracing::warn!(
            "output files: budget {} MiB, a quarter of the {} MiB free in {}",
            budget >> 20,
            free >> 20,
            dir.display()
        );
    } else {
        tracing::info!(
            "output files: budget {} MiB ({} MiB free in {})",
            budget >> 20,
            free >> 20,
            dir.display()
        );
    }
    budget.max(1)
}

/// The sandbox request: `--sandbox` and `--network`, with the roots, the
/// private TMPDIR and the policy's `[sandbox] writable` directories
/// writable in `workspace-write`. A policy entry that
/// names no existing directory is skipped with a warning on stderr.
fn sandbox_spec(
    args: &CommonArgs,
    policy: &Policy,
    roots: &[PathBuf],
    temp: &Path,
    home: Option<&Path>,
) -> anyhow::Result<SandboxSpec> {
    let mode = match args.sandbox {
        SandboxMode::Off => exec_policy::SandboxMode::Off,
        SandboxMode::Contain => exec_policy::SandboxMode::Contain,
        SandboxMode::ReadOnly => exec_policy::SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite => exec_policy::SandboxMode::WorkspaceWrite,
    };
    let network = match args.network {
        NetworkMode::Allow => NetworkAccess::Allow,
        NetworkMode::Deny => NetworkAccess::Deny,
    };
    let limits = ResourceLimits::default();
    let tmp = temp.join("tmp");
    std::fs::create_dir_all(&tmp).with_context(|| format!("cannot create `{}`", tmp.display()))?;
    let mut spec = SandboxSpec::new(mode, network, roots, tmp, limits);
    for skipped in spec.add_writable(&policy.sandbox_writable, home) {
        crate::report(&format!(
            "agent-exec: warning: [sandbox] writable {skipped}"
        ));
    }
    Ok(spec)
}

fn network_name(network: NetworkAccess) -> &'static str {
    match network {
        NetworkAccess::Allow => "allow",
        NetworkAccess::Deny => "deny",
    }
}

/// `NAME <EMAIL>`, as git expects in a trailer.
fn check_coauthor(coauthor: &str) -> anyhow::Result<()> {
    let valid = coauthor
        .strip_suffix('>')
        .and_then(|rest| rest.split_once(" <"))
        .is_some_and(|(name, email)| {
            !name.trim().is_empty() && email.contains('@') && !email.contains(['<', '>', '\n'])
        })
        && !coauthor.contains('\n');
    if valid {
        Ok(())
    } else {
        bail!("--coauthor must look like `NAME <EMAIL>`, got `{coauthor}`")
    }
}

/// Removes the temp directories left by servers that are no longer
/// running, on a thread of its own: `mcp` calls it once the `initialize`
/// answer is out, `run` as it starts, so neither waits for a crowded temp
/// dir. Only directories of dead servers are removed, never this one's,
/// so the clean-up may run alongside everything else.
pub(crate) fn remove_stale_in_background() {
    let base = std::env::temp_dir();
    let _ = std::thread::Builder::new()
        .name("remove-stale".to_owned())
        .spawn(move || remove_stale(&base));
}

/// Makes `agent-exec-<id>-<n>` under the system temp dir (mode 0700), `<id>`
/// the server's random id (see [`shell_runtime::server_id`]), with its
/// [`LOCK_FILE`] locked.
fn make_temp_dir() -> anyhow::Result<TempDir> {
    let base = std::env::temp_dir();
    let id = shell_runtime::server_id();
    for attempt in 0..100u32 {
        let path = base.join(format!("{}{id}-{attempt}", shell_runtime::INSTANCE_PREFIX));
        match std::fs::create_dir(&path) {
            Ok(()) => {
                restrict(&path);
                let lock = lock_temp_dir(&path)
                    .with_context(|| format!("cannot lock `{}`", path.display()));
                return match lock {
                    Ok(lock) => Ok(TempDir { path, _lock: lock }),
                    Err(error) => {
                        let _ = std::fs::remove_dir_all(&path);
                        Err(error)
                    }
                };
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => {
                return Err(error).with_context(|| format!("cannot create `{}`", path.display()));
            }
        }
    }
    bail!("cannot create a temp directory under `{}`", base.display())
}

/// Locks the new temp dir's [`LOCK_FILE`]. It is made and locked under
/// another name, then renamed: another server never finds it unlocked
/// (which would read as a dead server's directory).
fn lock_temp_dir(dir: &Path) -> std::io::Result<std::fs::File> {
    let staging = dir.join(format!(".{LOCK_FILE}"));
    std::fs::File::create_new(&staging)?;
    let lock = shell_runtime::hold_lock(&staging)?;
    std::fs::rename(&staging, dir.join(LOCK_FILE))?;
    Ok(lock)
}

#[cfg(unix)]
fn restrict(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
}

#[cfg(not(unix))]
fn restrict(_path: &Path) {}

/// Removes the `agent-exec-<id>-<n>` directories of servers that are gone:
/// those whose [`LOCK_FILE`] nobody holds. A directory with no lock file,
/// or named otherwise (by a pid, as older versions named theirs), is not
/// provably a dead server's, and stays.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(shell_runtime::id_in_name) else {
            continue;
        };
        if id == shell_runtime::server_id() {
            continue;
        }
        // Held while the directory goes; `try_lock` follows no link out.
        let lock = entry.path().join(LOCK_FILE);
        let is_file = std::fs::symlink_metadata(&lock).is_ok_and(|meta| meta.is_file());
        if is_file && let Ok(Some(_held)) = shell_runtime::try_lock(&lock) {
            tracing::info!(dir = %entry.path().display(), "removing the temp dir of a server that died");
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The canonical working directory (`--cwd`, else the current one) and
/// roots (`--root`, else the working directory), the first inside one of
/// the others.
pub(crate) fn working_dir_and_roots(
    cwd: Option<&std::path::Path>,
    roots: &[std::path::PathBuf],
) -> anyhow::Result<(std::path::PathBuf, Vec<std::path::PathBuf>)> {
    let cwd = match cwd {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let cwd = canonical_dir(&cwd).context("--cwd")?;
    let roots = if roots.is_empty() {
        vec![cwd.clone()]
    } else {
        roots
            .iter()
            .map(|root| canonical_dir(root).context("--root"))
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    if !is_within_roots(&cwd, &roots) {
        bail!(
            "--cwd `{}` is outside every --root ({})",
            cwd.display(),
            roots
                .iter()
                .map(|root| root.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok((cwd, roots))
}

#[cfg(test)]
mod tests {
    use super::check_coauthor;

    #[test]
    fn coauthors_must_name_a_person_and_an_address() {
        assert!(check_coauthor("Ada Lovelace <ada@example.com>").is_ok());
        assert!(check_coauthor("ada@example.com").is_err());
        assert!(check_coauthor("<ada@example.com>").is_err());
        assert!(check_coauthor("Ada <nope>").is_err());
        assert!(check_coauthor("Ada <a@b>\nX").is_err());
    }
}
