//! The audit log (`--audit-log FILE`): one JSON object per line for every
//! tool call that reached a decision, and a second line when a command
//! that ran ends. Every key is on every line (`null` where it does not
//! apply); lines are written and flushed before the answer goes out; the
//! file is appended to and created with mode 0600. Commands are redacted
//! before they get here, so no secret value is written.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Why the audit log could not be opened or written.
#[derive(Debug, thiserror::Error)]
#[error("audit log `{}`: {source}", path.display())]
pub struct AuditError {
    /// The file.
    pub path: PathBuf,
    /// What the system said.
    #[source]
    pub source: std::io::Error,
}

/// One line of the audit log.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AuditEntry {
    /// `decision` for the line written before a command runs (or is
    /// refused, or dry-run), `ended` when it ends, `call` for other tools.
    pub event: &'static str,
    /// The call this line belongs to (a number unique for the server's
    /// life), so a foreground command's two lines can be paired.
    pub call: u64,
    /// The tool's name.
    pub tool: &'static str,
    /// The command, redacted.
    pub command: Option<String>,
    /// The working directory.
    pub cwd: Option<String>,
    /// `allow`, `ask` or `deny`.
    pub decision: Option<&'static str>,
    /// The rule that asked or refused.
    pub rule: Option<String>,
    /// Who approved an `ask` command (`user`, `remembered`, `fallback`).
    pub approved_by: Option<&'static str>,
    /// `running`, `blocked`, `declined`, `dry_run`, `error`, or the shell's
    /// status once it ended.
    pub status: Option<String>,
    /// The command's exit code, when it exited by itself.
    pub exit_code: Option<i32>,
    /// How long the command ran.
    pub duration_ms: Option<u64>,
    /// Bytes the command wrote to stdout and stderr.
    pub output_bytes: Option<u64>,
    /// The background shell's id.
    pub bash_id: Option<String>,
}

/// An open audit log.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<File>,
    sandbox: String,
    calls: AtomicU64,
}

impl AuditLog {
    /// Opens (or creates, mode 0600) `path` for appending; `sandbox`
    /// describes the sandbox every line names (`off`, `workspace-write`...).
    pub fn open(path: &Path, sandbox: &str) -> Result<Self, AuditError> {
        let mut options = std::fs::OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let file = options.open(path).map_err(|source| AuditError {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
            sandbox: sandbox.to_owned(),
            calls: AtomicU64::new(0),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A fresh call number.
    pub fn next_call(&self) -> u64 {
        self.calls.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Appends one line and flushes it.
    pub fn write(&self, entry: &AuditEntry) -> Result<(), AuditError> {
        let mut value = serde_json::to_value(entry).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.insert("time".to_owned(), rfc3339(SystemTime::now()).into());
            object.insert("sandbox".to_owned(), self.sandbox.clone().into());
        }
        let mut line = value.to_string();
        line.push('\n');
        let fail = |source| AuditError {
            path: self.path.clone(),
            source,
        };
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        file.write_all(line.as_bytes()).map_err(fail)?;
        file.flush().map_err(fail)
    }
}

/// `time` as RFC 3339 in UTC with milliseconds.
fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let time = UNIX_EPOCH + std::time::Duration::from_millis(1_709_210_096_789);
        assert_eq!(rfc3339(time), "2024-02-29T12:34:56.789Z");
    }

    #[test]
    fn every_key_is_on_every_line_and_the_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path, "off").unwrap();
        log.write(&AuditEntry {
            event: "call",
            tool: "KillShell",
            ..AuditEntry::default()
        })
        .unwrap();
        drop(log);
        AuditLog::open(&path, "read-only")
            .unwrap()
            .write(&AuditEntry::default())
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "appended");
        for line in &lines {
            for key in [
                "time",
                "tool",
                "command",
                "cwd",
                "decision",
                "rule",
                "approved_by",
                "status",
                "exit_code",
                "duration_ms",
                "output_bytes",
                "sandbox",
                "bash_id",
                "event",
            ] {
                assert!(line.get(key).is_some(), "{key} missing from {line}");
            }
        }
        assert_eq!(lines[1]["sandbox"], "read-only");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
