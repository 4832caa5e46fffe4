//! One running shell: its tree, its two captured streams, its life.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::Signal;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::buffer::{BufferLimits, OutputBuffer, OutputSlice, StreamPosition};
use crate::decode::Utf8Decoder;
use crate::error::SpawnError;
use crate::redact::StreamReplacer;
use crate::spec::{SpawnSpec, SpillFile, name_matches};
use crate::status::{EndRequest, ExitInfo, ShellStatus};
use crate::sys;
use crate::tree::{self, TreeId};

/// How long the SIGKILL phase may take before a shell is given up on.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// After the tree is gone, how long to wait for the pipes to close.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
const READ_CHUNK: usize = 64 * 1024;

/// Which of the two streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// What the spill file of a stream holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillReport {
    /// The file.
    pub file: SpillFile,
    /// Whether the file exists: it is made only when the stream outgrows
    /// memory, or on [`ShellProcess::spill_to_disk`].
    pub on_disk: bool,
    /// Bytes written to it.
    pub written: u64,
    /// True when the stream was longer than the cap (or a write failed).
    pub incomplete: bool,
}

/// The copy of a stream on disk. It is created only once the stream
/// outgrows what memory keeps (or someone asks for the file): until then
/// memory holds every byte, and most commands never need the file.
struct Spill {
    file: SpillFile,
    opened: bool,
    writer: Option<BufWriter<File>>,
    written: u64,
    incomplete: bool,
}

impl Spill {
    fn new(file: &SpillFile) -> Self {
        Self {
            file: file.clone(),
            opened: false,
            writer: None,
            written: 0,
            incomplete: false,
        }
    }

    /// Creates the file and writes `so_far`, the whole stream until now.
    fn open(&mut self, so_far: &OutputSlice) {
        self.opened = true;
        self.writer = File::create(&self.file.path)
            .ok()
            .map(|f| BufWriter::with_capacity(READ_CHUNK, f));
        self.incomplete = self.writer.is_none();
        self.write(&so_far.before_gap);
        self.write(&so_far.after_gap);
    }

    fn write(&mut self, text: &str) {
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        let room = self.file.cap_bytes.saturating_sub(self.written);
        let mut part = text;
        if part.len() as u64 > room {
            // Cut at a character boundary so the file stays valid UTF-8.
            let mut cut = usize::try_from(room).unwrap_or(usize::MAX).min(part.len());
            while !part.is_char_boundary(cut) {
                cut -= 1;
            }
            part = &part[..cut];
            self.incomplete = true;
        }
        // Spill files live on a local disk or tmpfs: a blocking write of a
        // buffered chunk costs microseconds, less than a blocking-pool hop.
        if writer.write_all(part.as_bytes()).is_err() {
            self.incomplete = true;
            self.writer = None;
            return;
        }
        self.written += part.len() as u64;
        if self.incomplete {
            self.finish();
        }
    }

    /// Flushes what was written so far, keeping the file open for more.
    fn finish_if_done(&mut self) {
        if let Some(writer) = self.writer.as_mut()
            && writer.flush().is_err()
        {
            self.incomplete = true;
        }
    }

    fn finish(&mut self) {
        if let Some(mut writer) = self.writer.take()
            && writer.flush().is_err()
        {
            self.incomplete = true;
        }
    }

    fn report(&self) -> SpillReport {
        SpillReport {
            file: self.file.clone(),
            on_disk: self.opened,
            written: self.written,
            incomplete: self.incomplete,
        }
    }
}

/// One captured stream.
struct Capture {
    buffer: Mutex<OutputBuffer>,
    spill: Mutex<Option<Spill>>,
}

impl Capture {
    fn new(limits: BufferLimits, spill: Option<&SpillFile>) -> Self {
        Self {
            buffer: Mutex::new(OutputBuffer::new(limits)),
            spill: Mutex::new(spill.map(Spill::new)),
        }
    }

    fn buffer(&self) -> MutexGuard<'_, OutputBuffer> {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn spill(&self) -> MutexGuard<'_, Option<Spill>> {
        self.spill.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, text: &str) {
        let mut buffer = self.buffer();
        if let Some(spill) = self.spill().as_mut() {
            if !spill.opened
                && buffer.total_bytes() + text.len() as u64 > buffer.limits().capacity() as u64
            {
                // Nothing was dropped yet, so the buffer holds the whole stream.
                spill.open(&buffer.snapshot());
            }
            if spill.opened {
                spill.write(text);
            }
        }
        buffer.push(text);
    }

    fn spill_to_disk(&self) -> Option<SpillReport> {
        let buffer = self.buffer();
        let mut spill = self.spill();
        let spill = spill.as_mut()?;
        if !spill.opened {
            spill.open(&buffer.snapshot());
            spill.finish_if_done();
        }
        Some(spill.report())
    }
}

/// Where each consumer is in the two streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCursor {
    stdout: StreamPosition,
    stderr: StreamPosition,
}

/// New text of both streams since a cursor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewOutput {
    /// New standard output (with any gap).
    pub stdout: OutputSlice,
    /// New standard error (with any gap).
    pub stderr: OutputSlice,
}

struct Life {
    status: ShellStatus,
    request: Option<EndRequest>,
    exit: Option<ExitInfo>,
    ended_at: Option<Instant>,
    ended_jobs: usize,
    kept: Vec<i32>,
}

/// A shell and the tree it started. Shared (`Arc`) between the task that
/// supervises it and whoever reads or ends it; no lock is held across I/O.
pub struct ShellProcess {
    pid: i32,
    tree: TreeId,
    command: String,
    started_at: Instant,
    started_wall: SystemTime,
    stdout: Capture,
    stderr: Capture,
    unseen: Mutex<ReadCursor>,
    life: Mutex<Life>,
    /// Flips to true when the shell process itself has exited.
    exited: watch::Sender<bool>,
    /// Flips to true when the shell is finished: exited, drained, swept.
    finished: watch::Sender<bool>,
    /// Counts pushes of output, for consumers that want to know when to look.
    output_events: watch::Sender<u64>,
    sequence: AtomicU64,
}

impl std::fmt::Debug for ShellProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShellProcess")
            .field("pid", &self.pid)
            .field("command", &self.command)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

fn next_tag() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl ShellProcess {
    /// Starts `spec` and returns at once; a supervising task reads its output,
    /// enforces its timeout and sweeps what it leaves behind. Must be called
    /// inside a tokio runtime with I/O and time enabled.
    pub async fn spawn(spec: SpawnSpec) -> Result<Arc<Self>, SpawnError> {
        ensure_subreaper();
        tree::ensure_reaper();
        let tag = next_tag();
        // Before the fork: the command's own run time is never under-reported.
        let started_at = Instant::now();
        let started_wall = SystemTime::now();
        let spawned = crate::spawn::spawn(&spec, &tag).await?;
        let pid = spawned.pid;
        let shell = Arc::new(Self {
            pid,
            tree: TreeId::new(pid, &tag),
            command: spec.command.clone(),
            started_at,
            started_wall,
            stdout: Capture::new(spec.limits, spec.stdout_spill.as_ref()),
            stderr: Capture::new(spec.limits, spec.stderr_spill.as_ref()),
            unseen: Mutex::new(ReadCursor::default()),
            life: Mutex::new(Life {
                status: ShellStatus::Pending,
                request: None,
                exit: None,
                ended_at: None,
                ended_jobs: 0,
                kept: Vec::new(),
            }),
            exited: watch::Sender::new(false),
            finished: watch::Sender::new(false),
            output_events: watch::Sender::new(0),
            sequence: AtomicU64::new(0),
        });
        shell.move_to(ShellStatus::Running);
        let readers = [
            Some(tokio::spawn(read_stream(
                Arc::clone(&shell),
                Stream::Stdout,
                spawned.stdout,
                StreamReplacer::new(spec.replacements.clone()),
            ))),
            Some(tokio::spawn(read_stream(
                Arc::clone(&shell),
                Stream::Stderr,
                spawned.stderr,
                StreamReplacer::new(spec.replacements.clone()),
            ))),
        ];
        tokio::spawn(supervise(
            Arc::clone(&shell),
            spawned.exit,
            readers,
            spec,
            AbandonGuard(Some(Arc::clone(&shell))),
        ));
        Ok(shell)
    }

    /// The shell's pid (also its process group and session id).
    pub fn pid(&self) -> u32 {
        self.pid.cast_unsigned()
    }

    /// The command text it was started with.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// When it was started.
    pub fn started_at(&self) -> SystemTime {
        self.started_wall
    }

    fn life(&self) -> MutexGuard<'_, Life> {
        self.life.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn move_to(&self, next: ShellStatus) {
        let mut life = self.life();
        if life.status.can_move_to(next) {
            life.status = next;
        }
    }

    /// The current status.
    pub fn status(&self) -> ShellStatus {
        self.life().status
    }

    /// True until the shell is finished (exited, drained and swept).
    pub fn is_running(&self) -> bool {
        !self.status().is_finished()
    }

    /// How the shell process ended, once it has.
    pub fn exit(&self) -> Option<ExitInfo> {
        self.life().exit
    }

    /// What ended the tree from here, if anything did.
    pub fn end_request(&self) -> Option<EndRequest> {
        self.life().request
    }

    /// Time from start to finish, or to now while it runs.
    pub fn duration(&self) -> Duration {
        let ended = self.life().ended_at;
        ended
            .unwrap_or_else(Instant::now)
            .duration_since(self.started_at)
    }

    /// When the shell finished, if it has.
    pub fn finished_at(&self) -> Option<Instant> {
        self.life().ended_at
    }

    /// How many background jobs the shell left behind that were ended after
    /// it exited.
    pub fn ended_jobs(&self) -> usize {
        self.life().ended_jobs
    }

    /// Pids left running on purpose (`keep_running`).
    pub fn kept_processes(&self) -> Vec<u32> {
        self.life()
            .kept
            .iter()
            .map(|pid| pid.cast_unsigned())
            .collect()
    }

    fn capture(&self, stream: Stream) -> &Capture {
        match stream {
            Stream::Stdout => &self.stdout,
            Stream::Stderr => &self.stderr,
        }
    }

    /// Everything kept of a stream.
    pub fn snapshot(&self, stream: Stream) -> OutputSlice {
        self.capture(stream).buffer().snapshot()
    }

    /// Bytes and characters a stream has produced so far.
    pub fn totals(&self, stream: Stream) -> (u64, u64) {
        let buffer = self.capture(stream).buffer();
        (buffer.total_bytes(), buffer.total_chars())
    }

    /// Writes a stream's spill file now (if the spec asked for one) even
    /// though the stream still fits in memory, so that it can be named.
    pub fn spill_to_disk(&self, stream: Stream) -> Option<SpillReport> {
        self.capture(stream).spill_to_disk()
    }

    /// What the spill file of a stream holds, if there is one.
    pub fn spill(&self, stream: Stream) -> Option<SpillReport> {
        self.capture(stream).spill().as_ref().map(Spill::report)
    }

    /// New output since `cursor`, which moves to the end.
    pub fn read_since(&self, cursor: &mut ReadCursor) -> NewOutput {
        let (stdout, out_next) = self.stdout.buffer().read_since(cursor.stdout);
        let (stderr, err_next) = self.stderr.buffer().read_since(cursor.stderr);
        cursor.stdout = out_next;
        cursor.stderr = err_next;
        NewOutput { stdout, stderr }
    }

    /// New output since the last call of this method (the shell's own cursor).
    pub fn read_unseen(&self) -> NewOutput {
        let mut cursor = self.unseen.lock().unwrap_or_else(PoisonError::into_inner);
        self.read_since(&mut cursor)
    }

    /// A receiver that changes whenever output arrives.
    pub fn subscribe_output(&self) -> watch::Receiver<u64> {
        self.output_events.subscribe()
    }

    /// Waits until the shell is finished and returns its status.
    pub async fn wait(&self) -> ShellStatus {
        let mut finished = self.finished.subscribe();
        // `wait_for` errs only when the sender is gone, and `self` owns it.
        let _ = finished.wait_for(|done| *done).await;
        self.status()
    }

    /// Waits up to `limit`; `None` if the shell is still running then. A wait
    /// that runs out changes nothing.
    pub async fn wait_timeout(&self, limit: Duration) -> Option<ShellStatus> {
        tokio::time::timeout(limit, self.wait()).await.ok()
    }

    async fn wait_exited(&self, limit: Duration) -> bool {
        let mut exited = self.exited.subscribe();
        tokio::time::timeout(limit, exited.wait_for(|done| *done))
            .await
            .is_ok()
    }

    /// Records `request` unless the shell has already exited; false if it had.
    fn request_end(&self, request: EndRequest) -> bool {
        let mut life = self.life();
        if life.exit.is_some() || life.status.is_finished() {
            return false;
        }
        life.request.get_or_insert(request);
        true
    }

    /// Ends the whole tree: SIGTERM, then SIGKILL after `grace`. Returns
    /// false when the shell had already exited (its leftovers are swept by
    /// the supervisor either way). Returns once the shell is finished.
    pub async fn terminate(&self, grace: Duration) -> bool {
        self.end(EndRequest::Kill, Signal::SIGTERM, grace).await
    }

    /// Ctrl+C: SIGINT to the tree, then SIGTERM and SIGKILL as in
    /// [`terminate`](Self::terminate) if it is still running after `grace`.
    pub async fn interrupt(&self, grace: Duration) -> bool {
        self.end(EndRequest::Interrupt, Signal::SIGINT, grace).await
    }

    async fn end(&self, request: EndRequest, first: Signal, grace: Duration) -> bool {
        if !self.request_end(request) {
            self.wait().await;
            return false;
        }
        self.escalate(first, grace).await;
        self.wait().await;
        true
    }

    async fn escalate(&self, first: Signal, grace: Duration) {
        self.tree.signal_all(first);
        if first == Signal::SIGINT && !self.wait_exited(grace).await {
            self.tree.signal_all(Signal::SIGTERM);
        }
        if !self.wait_exited(grace).await {
            self.tree.kill_all().await;
        }
        if !self.wait_exited(KILL_WAIT).await {
            tracing::warn!(pid = self.pid, "shell survived SIGKILL for {KILL_WAIT:?}");
        }
    }

    /// Ends the tree at once with SIGKILL, without waiting: for `Drop`.
    pub(crate) fn kill_now(&self) {
        if self.request_end(EndRequest::Kill) {
            self.tree.kill_all_now();
        }
    }

    fn notify_output(&self) {
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed) + 1;
        self.output_events.send_replace(sequence);
    }
}

static SUBREAPER: std::sync::Once = std::sync::Once::new();

fn ensure_subreaper() {
    SUBREAPER.call_once(|| {
        if let Err(error) = sys::become_subreaper() {
            tracing::warn!(%error, "cannot become a child subreaper: escaped processes may outlive their shell");
        }
    });
}

async fn read_stream(
    shell: Arc<ShellProcess>,
    stream: Stream,
    mut pipe: crate::spawn::Pipe,
    mut replacer: StreamReplacer,
) {
    let capture = shell.capture(stream);
    let mut decoder = Utf8Decoder::new();
    let mut bytes = vec![0u8; READ_CHUNK];
    let mut text = String::with_capacity(READ_CHUNK + 4);
    loop {
        match pipe.read(&mut bytes).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                text.clear();
                decoder.decode(&bytes[..read], &mut text);
                replacer.push_to(&text, |piece| capture.push(piece));
                shell.notify_output();
            }
        }
    }
    text.clear();
    decoder.finish(&mut text);
    replacer.push_to(&text, |piece| capture.push(piece));
    replacer.finish_to(|piece| capture.push(piece));
    if let Some(spill) = capture.spill().as_mut() {
        spill.finish();
    }
    shell.notify_output();
}

async fn supervise(
    shell: Arc<ShellProcess>,
    mut exit: crate::spawn::ExitFuture,
    readers: [Option<JoinHandle<()>>; 2],
    spec: SpawnSpec,
    // Taken as an argument so it is dropped even if the task never ran.
    mut guard: AbandonGuard,
) {
    let waited = match spec.timeout {
        None => (&mut exit).await,
        Some(limit) => {
            if let Ok(result) = tokio::time::timeout(limit, &mut exit).await {
                result
            } else {
                if shell.request_end(EndRequest::Timeout) {
                    let ender = Arc::clone(&shell);
                    tokio::spawn(async move {
                        ender.escalate(Signal::SIGTERM, spec.leftover_grace).await;
                    });
                }
                (&mut exit).await
            }
        }
    };
    tree::forget_shell(shell.pid);
    let exit = waited.unwrap_or(ExitInfo {
        code: -1,
        signal: None,
    });
    shell.life().exit = Some(exit);
    shell.exited.send_replace(true);

    let mut readers = readers;
    let drained = wait_readers(&mut readers, spec.drain).await;
    let ended_jobs = if drained && !left_anything(&shell.tree) {
        0
    } else {
        sweep_leftovers(&shell, &spec).await
    };
    wait_readers(&mut readers, CLOSE_WAIT).await;
    for reader in readers.iter().flatten() {
        // A kept process still holds the pipe: stop reading it.
        reader.abort();
    }
    tree::reap_orphans();
    {
        let mut life = shell.life();
        life.ended_jobs = ended_jobs;
        life.ended_at = Some(Instant::now());
        let status = exit.status(life.request);
        if life.status.can_move_to(status) {
            life.status = status;
        }
    }
    shell.finished.send_replace(true);
    shell.notify_output();
    guard.0 = None;
}

/// Ends the tree and finishes the shell if its supervising task is dropped
/// before it is done (its runtime shut down): nobody could wait for it or
/// read it any more, and a caller waiting for it must not hang.
struct AbandonGuard(Option<Arc<ShellProcess>>);

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        let Some(shell) = self.0.take() else { return };
        shell.tree.kill_all_now();
        // Nobody waits on its pidfd any more: collect its status on a
        // thread of its own (it has been sent SIGKILL, so the wait is short).
        let pid = shell.pid;
        let _ = std::thread::Builder::new()
            .name("shell-reaper".into())
            .spawn(move || {
                sys::wait_blocking(pid);
                tree::forget_shell(pid);
            });
        tree::reap_orphans();
        {
            let mut life = shell.life();
            life.request.get_or_insert(EndRequest::Kill);
            life.ended_at.get_or_insert_with(Instant::now);
            if life.status.can_move_to(ShellStatus::Killed) {
                life.status = ShellStatus::Killed;
            }
        }
        shell.exited.send_replace(true);
        shell.finished.send_replace(true);
    }
}

/// True if anything of the tree may still be alive after the shell exited.
/// Cheap: one group probe and one read of our main thread's children.
fn left_anything(tree: &TreeId) -> bool {
    if sys::group_alive(tree.shell_pid) {
        return true;
    }
    let shells = tree::live_shells().clone();
    sys::main_thread_children()
        .into_iter()
        .any(|pid| pid != tree.shell_pid && !shells.contains(&pid))
}

/// Ends what the shell left behind (except `keep_running` names) and
/// returns how many jobs that was. After a kill request everything goes at
/// once; after a normal exit, SIGTERM first and SIGKILL after the grace.
async fn sweep_leftovers(shell: &ShellProcess, spec: &SpawnSpec) -> usize {
    let found = shell.tree.collect();
    if found.members.is_empty() {
        return 0;
    }
    let kept = kept_pids(&found, &spec.keep_running);
    let targets: Vec<i32> = found
        .members
        .iter()
        .map(|member| member.pid)
        .filter(|pid| !kept.contains(pid))
        .collect();
    let jobs = found
        .adopted
        .iter()
        .filter(|pid| !kept.contains(pid))
        .count();
    shell.life().kept.clone_from(&kept);
    tree::remember_kept(&kept, &shell.tree);
    if targets.is_empty() {
        return 0;
    }
    let forced = shell.end_request().is_some();
    let first = if forced {
        Signal::SIGKILL
    } else {
        Signal::SIGTERM
    };
    for pid in &targets {
        sys::send(*pid, first);
    }
    let deadline = Instant::now() + spec.leftover_grace;
    loop {
        tree::reap_orphans();
        let still: Vec<i32> = targets
            .iter()
            .copied()
            .filter(|pid| sys::stat(*pid).is_some_and(|stat| !stat.is_zombie()))
            .collect();
        if still.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            for pid in &still {
                sys::send(*pid, Signal::SIGKILL);
            }
        }
        if Instant::now() >= deadline + KILL_WAIT {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Anything forked while we were at it.
    let late = shell.tree.collect();
    for member in late
        .members
        .iter()
        .filter(|member| !kept.contains(&member.pid))
    {
        sys::send(member.pid, Signal::SIGKILL);
    }
    tree::reap_orphans();
    jobs
}

/// Members whose program name matches a `keep_running` pattern, with their descendants.
fn kept_pids(found: &tree::TreeMembers, patterns: &[String]) -> Vec<i32> {
    if patterns.is_empty() {
        return Vec::new();
    }
    let mut kept: Vec<i32> = found
        .members
        .iter()
        .filter(|member| {
            sys::program_names(member.pid, &member.comm)
                .iter()
                .any(|name| patterns.iter().any(|pattern| name_matches(pattern, name)))
        })
        .map(|member| member.pid)
        .collect();
    // Members are listed parents first, so one pass takes in descendants.
    for member in &found.members {
        if kept.contains(&member.ppid) && !kept.contains(&member.pid) {
            kept.push(member.pid);
        }
    }
    kept
}

async fn wait_readers(readers: &mut [Option<JoinHandle<()>>; 2], limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    for slot in readers.iter_mut() {
        if let Some(reader) = slot {
            if reader.is_finished() {
                *slot = None;
                continue;
            }
            if tokio::time::timeout_at(deadline, reader).await.is_ok() {
                *slot = None;
            } else {
                return false;
            }
        }
    }
    true
}
