//! The audit log (`--audit-log FILE`): one JSON object per line for every
//! tool call that reached a decision, and a second line when a command
//! that ran ends. Every key is on every line (`null` where it does not
//! apply); lines are written and flushed before the answer goes out; the
//! file is appended to and created with mode 0600. Commands are redacted
//! before they get here, so no secret value is written.
//!
//! Each line is one `write` call under a lock (the process's mutex and an
//! `flock`, so servers sharing a log never interleave); a failed or short
//! write is cut back to the length the file had, so no line is ever torn.
//! Before each write and each answer the path is checked against the open
//! file (its device and inode): a log removed or replaced is reopened and
//! the next answer says so. An `ended` line that cannot be written is
//! queued (at most [`PENDING_LIMIT`]), retried before every later write and
//! at every call, and flagged in the shell's next answer.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// How many `ended` lines wait for a retry at most; past that the oldest
/// is dropped and the next answer says how many were lost.
pub(crate) const PENDING_LIMIT: usize = 1024;

/// How many shells' notes are kept at most (one per shell whose `ended`
/// line failed): bounded like the queue, so a shell never read again
/// cannot grow memory.
const NOTE_LIMIT: usize = PENDING_LIMIT;

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
    /// For `event: "network"` lines only: the connection the egress proxy
    /// decided on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkAudit>,
}

/// What a `network` line says of one connection through the egress proxy.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NetworkAudit {
    /// `connect`, `http` or `socks5`.
    pub protocol: &'static str,
    /// The host as the command named it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// Bytes from the command to the host.
    pub sent_bytes: u64,
    /// Bytes from the host to the command.
    pub received_bytes: u64,
    /// Whether a credential was attached.
    pub credential: bool,
}

impl AuditEntry {
    /// The keys every line of the log carries (absent values as `null`),
    /// `time` and `sandbox` added by the log itself: what a reader of the
    /// log can rely on.
    pub const KEYS: &[&str] = &[
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
    ];
}

/// An `ended` line waiting for a retry, as it was first made (its
/// `time` is when the command ended).
#[derive(Debug)]
struct Pending {
    line: Vec<u8>,
    bash_id: Option<String>,
}

/// What a shell's next answer says about its `ended` line.
#[derive(Debug)]
enum Unlogged {
    /// Still queued; why the last try failed.
    Waiting(String),
    /// Written on a retry; why the first try failed.
    Late(String),
    /// Dropped from a full queue; why its last try failed.
    Dropped(String),
}

impl Unlogged {
    fn note(&self) -> String {
        match self {
            Self::Waiting(why) => {
                format!("[audit: the end of this command could not be logged: {why}; will retry]")
            }
            Self::Late(why) => format!(
                "[audit: the end of this command could not be logged at first ({why}); it was logged on a retry]"
            ),
            Self::Dropped(why) => format!(
                "[audit: the end of this command could not be logged: {why}; it was dropped, the retry queue ({PENDING_LIMIT} lines) was full]"
            ),
        }
    }
}

#[derive(Debug)]
struct State {
    file: File,
    pending: VecDeque<Pending>,
    /// `ended` lines dropped from a full queue since an answer last said so.
    lost: u64,
    /// The log was found removed or replaced and reopened since an answer
    /// last said so.
    reopened: bool,
    /// By shell id, for the shell's next answer.
    notes: HashMap<String, Unlogged>,
}

/// An open audit log.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    state: Mutex<State>,
    sandbox: String,
    calls: AtomicU64,
}

/// Opens (or creates, mode 0600) `path` for appending.
fn open_file(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path)
}

impl AuditLog {
    /// Opens (or creates, mode 0600) `path` for appending; `sandbox`
    /// describes the sandbox every line names (`off`, `workspace-write`...).
    pub fn open(path: &Path, sandbox: &str) -> Result<Self, AuditError> {
        let file = open_file(path).map_err(|source| AuditError {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self {
            path: path.to_owned(),
            state: Mutex::new(State {
                file,
                pending: VecDeque::new(),
                lost: 0,
                reopened: false,
                notes: HashMap::new(),
            }),
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

    /// Appends one line whole, after any `ended` lines waiting for a retry.
    pub fn write(&self, entry: &AuditEntry) -> Result<(), AuditError> {
        let line = self.line(entry);
        let mut state = self.lock();
        self.retry(&mut state);
        self.append(&mut state, &line)
            .map_err(|source| self.fail(source))
    }

    /// Appends the `ended` line `entry`. One that cannot be written is not
    /// dropped: it is queued and retried before every later write and at
    /// every call, and the shell named by its `bash_id` has its next answer
    /// flagged ([`AuditLog::notes`]). The error says why the first try
    /// failed, for an answer that goes out now.
    pub fn write_ended(&self, entry: &AuditEntry) -> Result<(), AuditError> {
        let line = self.line(entry);
        let mut state = self.lock();
        self.retry(&mut state);
        let Err(source) = self.append(&mut state, &line) else {
            return Ok(());
        };
        let why = source.to_string();
        if state.pending.len() >= PENDING_LIMIT
            && let Some(dropped) = state.pending.pop_front()
        {
            state.lost += 1;
            if let Some(id) = dropped.bash_id
                && let Some(note) = state.notes.get_mut(&id)
            {
                *note = Unlogged::Dropped(why.clone());
            }
        }
        if let Some(id) = &entry.bash_id
            && state.notes.len() < NOTE_LIMIT
        {
            state.notes.insert(id.clone(), Unlogged::Waiting(why));
        }
        state.pending.push_back(Pending {
            line,
            bash_id: entry.bash_id.clone(),
        });
        Err(self.fail(source))
    }

    /// The lines the next answer carries, after retrying the queue: that
    /// the log was removed or replaced and reopened, that `ended` lines
    /// were dropped from a full queue, and, for the shell `bash_id`, what
    /// became of its `ended` line if it could not be written. Each is said
    /// once.
    pub fn notes(&self, bash_id: Option<&str>) -> Vec<String> {
        let mut state = self.lock();
        self.retry(&mut state);
        // A call that writes no line of its own (BashOutput) still notices
        // a log removed since the last line. A log that cannot be reopened
        // is said by the next call that has a line to write.
        let _ = self.follow_path(&mut state);
        let mut notes = Vec::new();
        if std::mem::take(&mut state.reopened) {
            notes.push(format!(
                "[audit: the log file {} was removed or replaced; logging to a new file]",
                self.path.display()
            ));
        }
        let lost = std::mem::take(&mut state.lost);
        if lost > 0 {
            notes.push(format!(
                "[audit: {lost} end line(s) could not be logged and were dropped: the retry queue ({PENDING_LIMIT} lines) was full]"
            ));
        }
        if let Some(unlogged) = bash_id.and_then(|id| state.notes.remove(id)) {
            notes.push(unlogged.note());
        }
        notes
    }

    /// `ended` lines waiting for a retry.
    pub fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn fail(&self, source: io::Error) -> AuditError {
        AuditError {
            path: self.path.clone(),
            source,
        }
    }

    /// `entry` as one line: JSON with `time` and `sandbox`, ending in '\n'.
    fn line(&self, entry: &AuditEntry) -> Vec<u8> {
        let mut value = serde_json::to_value(entry).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.insert("time".to_owned(), rfc3339(SystemTime::now()).into());
            object.insert("sandbox".to_owned(), self.sandbox.clone().into());
        }
        let mut line = value.to_string().into_bytes();
        line.push(b'\n');
        line
    }

    /// Writes the queued `ended` lines in order, up to the first that fails.
    fn retry(&self, state: &mut State) {
        while let Some(next) = state.pending.pop_front() {
            let written = self.append(state, &next.line);
            let note = next.bash_id.as_ref().and_then(|id| state.notes.get_mut(id));
            match (written, note) {
                (Ok(()), Some(note)) => {
                    if let Unlogged::Waiting(why) = note {
                        *note = Unlogged::Late(std::mem::take(why));
                    }
                }
                (Ok(()), None) => {}
                (Err(error), note) => {
                    if let Some(note) = note {
                        *note = Unlogged::Waiting(error.to_string());
                    }
                    state.pending.push_front(next);
                    return;
                }
            }
        }
    }

    /// Appends `line` whole to the file the path names now.
    fn append(&self, state: &mut State, line: &[u8]) -> io::Result<()> {
        self.follow_path(state)?;
        let file = &mut state.file;
        // Other servers appending to the same log wait too, so a cut-back
        // never removes their line.
        let locked = file.lock().is_ok();
        let written = append_whole(file, line);
        if locked {
            let _ = file.unlock();
        }
        written
    }

    /// Reopens the path when the open file is no longer the one it names
    /// (removed, or replaced by another file): lines written to an
    /// unlinked file would reach nobody.
    fn follow_path(&self, state: &mut State) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt as _;
        let open = state.file.metadata()?;
        let same = match std::fs::metadata(&self.path) {
            // No `st_nlink == 0` test is needed: while the file is open its
            // inode number cannot be reused, so a removed file never
            // matches what the path names.
            Ok(named) => named.dev() == open.dev() && named.ino() == open.ino(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => false,
            Err(error) => return Err(error),
        };
        if same {
            return Ok(());
        }
        state.file = open_file(&self.path).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("it was removed or replaced and cannot be reopened: {error}"),
            )
        })?;
        state.reopened = true;
        Ok(())
    }
}

/// `answer` with the lines the audit log has for it ([`AuditLog::notes`])
/// appended to its text; `flag` marks them in the metadata.
pub(crate) fn with_notes<M>(
    log: Option<&AuditLog>,
    bash_id: Option<&str>,
    mut answer: tool_core::Answer<M>,
    flag: impl FnOnce(&mut M),
) -> tool_core::Answer<M> {
    let Some(log) = log else {
        return answer;
    };
    let notes = log.notes(bash_id);
    if notes.is_empty() {
        return answer;
    }
    let text = if answer.success {
        &mut answer.output
    } else {
        answer.error.get_or_insert_with(String::new)
    };
    for note in notes {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&note);
    }
    flag(&mut answer.metadata);
    answer
}

/// Where a line is appended: the log's file, or a writer that fails on
/// purpose in tests.
trait Sink {
    /// The current length.
    fn size(&self) -> io::Result<u64>;
    /// One `write` call.
    fn write_once(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Truncates back to `len`.
    fn cut(&mut self, len: u64) -> io::Result<()>;
}

impl Sink for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn write_once(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write(buf)
    }

    fn cut(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }
}

/// Appends `line` with one write; a failed or short write is cut back to
/// the length before it, so no torn line stays for the next to be glued to.
fn append_whole(sink: &mut impl Sink, line: &[u8]) -> io::Result<()> {
    let before = sink.size()?;
    let outcome = loop {
        match sink.write_once(line) {
            // Nothing was written: the same single write is tried again.
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            other => break other,
        }
    };
    let error = match outcome {
        Ok(written) if written == line.len() => return Ok(()),
        Ok(written) => io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "only {written} of {} bytes could be written (the disk is probably full)",
                line.len()
            ),
        ),
        Err(error) => error,
    };
    match sink.cut(before) {
        Ok(()) => Err(error),
        Err(cut) => Err(io::Error::new(
            error.kind(),
            format!("{error}; the partial line could not be cut back: {cut}"),
        )),
    }
}

/// `time` as RFC 3339 in UTC with milliseconds.
pub(crate) fn rfc3339(time: SystemTime) -> String {
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
            for key in AuditEntry::KEYS {
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
    /// A file in memory whose writes fail or stop short on purpose.
    struct Faulty {
        data: Vec<u8>,
        /// Bytes one write takes at most; `None` fails the write.
        take: Option<usize>,
        interrupts: usize,
    }

    impl Sink for Faulty {
        fn size(&self) -> io::Result<u64> {
            Ok(self.data.len() as u64)
        }

        fn write_once(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.interrupts > 0 {
                self.interrupts -= 1;
                return Err(io::ErrorKind::Interrupted.into());
            }
            let Some(take) = self.take else {
                return Err(io::Error::other("no space left"));
            };
            let n = take.min(buf.len());
            self.data.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn cut(&mut self, len: u64) -> io::Result<()> {
            self.data.truncate(usize::try_from(len).unwrap());
            Ok(())
        }
    }

    #[test]
    fn a_short_write_is_cut_back_so_no_line_is_torn() {
        let mut sink = Faulty {
            data: b"{\"a\":1}\n".to_vec(),
            take: Some(5),
            interrupts: 0,
        };
        let error = append_whole(&mut sink, b"{\"b\":2}\n").unwrap_err();
        assert!(error.to_string().contains("only 5 of 8 bytes"), "{error}");
        assert_eq!(sink.data, b"{\"a\":1}\n");
        sink.take = Some(1000);
        append_whole(&mut sink, b"{\"c\":3}\n").unwrap();
        assert_eq!(sink.data, b"{\"a\":1}\n{\"c\":3}\n");
    }

    #[test]
    fn a_failed_write_leaves_the_file_as_it_was_and_an_interrupted_one_is_retried() {
        let mut sink = Faulty {
            data: b"x\n".to_vec(),
            take: None,
            interrupts: 0,
        };
        assert!(append_whole(&mut sink, b"y\n").is_err());
        assert_eq!(sink.data, b"x\n");
        sink.take = Some(100);
        sink.interrupts = 2;
        append_whole(&mut sink, b"y\n").unwrap();
        assert_eq!(sink.data, b"x\ny\n");
    }

    fn ended(id: &str) -> AuditEntry {
        AuditEntry {
            event: "ended",
            tool: "Bash",
            bash_id: Some(id.to_owned()),
            ..AuditEntry::default()
        }
    }

    fn events(path: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn a_removed_log_is_reopened_and_the_next_answer_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path, "off").unwrap();
        log.write(&AuditEntry::default()).unwrap();
        assert!(log.notes(None).is_empty());
        std::fs::remove_file(&path).unwrap();
        // An answer with no line of its own notices it too.
        assert_eq!(log.notes(None).len(), 1);
        assert!(path.exists(), "a new file");
        std::fs::remove_file(&path).unwrap();
        log.write(&AuditEntry {
            event: "call",
            ..AuditEntry::default()
        })
        .unwrap();
        assert_eq!(events(&path).len(), 1, "the new line is in the new file");
        let notes = log.notes(None);
        assert_eq!(
            notes,
            [format!(
                "[audit: the log file {} was removed or replaced; logging to a new file]",
                path.display()
            )]
        );
        assert!(log.notes(None).is_empty(), "said once");
        // Replaced by another file: followed too.
        let other = dir.path().join("other");
        std::fs::write(&other, "").unwrap();
        std::fs::rename(&other, &path).unwrap();
        log.write(&AuditEntry::default()).unwrap();
        assert_eq!(events(&path).len(), 1);
        assert_eq!(log.notes(None).len(), 1);
    }

    #[test]
    fn an_ended_line_that_cannot_be_written_is_retried_and_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path, "off").unwrap();
        // A directory in the log's place: nothing can be written there.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(log.write_ended(&ended("shell_a")).is_err());
        assert!(log.write(&AuditEntry::default()).is_err());
        assert_eq!(log.pending(), 1);
        let notes = log.notes(Some("shell_a"));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("[audit: the end of this command could not be logged: ")
                && notes[0].ends_with("; will retry]"),
            "{notes:?}"
        );
        std::fs::remove_dir(&path).unwrap();
        log.write_ended(&ended("shell_b")).unwrap();
        let lines = events(&path);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0]["bash_id"], "shell_a", "the retried line first");
        assert_eq!(lines[1]["bash_id"], "shell_b");
        assert_eq!(log.pending(), 0);
    }

    #[test]
    fn a_line_written_late_is_said_so_and_the_queue_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path, "off").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        for i in 0..=PENDING_LIMIT {
            assert!(log.write_ended(&ended(&format!("shell_{i}"))).is_err());
        }
        assert_eq!(log.pending(), PENDING_LIMIT);
        std::fs::remove_dir(&path).unwrap();
        let notes = log.notes(Some("shell_1"));
        assert_eq!(events(&path).len(), PENDING_LIMIT, "written on the retry");
        assert!(
            notes.iter().any(|n| n.contains("was removed or replaced")),
            "{notes:?}"
        );
        assert!(
            notes.iter().any(
                |n| n.starts_with("[audit: 1 end line(s) could not be logged and were dropped")
            ),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n.contains("it was logged on a retry]")),
            "{notes:?}"
        );
        assert!(
            log.notes(Some("shell_0"))[0].contains("it was dropped"),
            "the oldest was dropped"
        );
    }
}
