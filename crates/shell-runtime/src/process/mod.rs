//! One running shell: the handle ([`ShellProcess`]) through which its
//! status is read, its output read and its tree ended. The work behind it
//! runs in tasks of its own: `capture` reads the two streams, `supervise`
//! waits for the shell and finishes it.

mod capture;
mod supervise;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::Signal;
use tokio::sync::watch;

use crate::buffer::{OutputSlice, StreamPosition};
use crate::error::SpawnError;
use crate::redact::StreamReplacer;
use crate::spec::SpawnSpec;
use crate::status::{EndRequest, ExitInfo, ShellStatus};
use crate::sys;
use crate::tree::TreeId;

use capture::{Capture, Spill, read_stream};
pub use capture::{SpillReport, SpillShortfall};
use supervise::{AbandonGuard, supervise};

/// How long the SIGKILL phase may take before a shell is given up on.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How long a tty shell has to end on SIGTERM before it also gets SIGHUP.
const HANGUP_AFTER: Duration = Duration::from_millis(100);

/// Which of the two streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
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

/// Where the shell stands and, once it has ended, how and what was swept
/// after it. One lock, so that a check-and-change (`request_end`, a status
/// move) sees status, request and exit at the same instant.
struct RunState {
    status: ShellStatus,
    request: Option<EndRequest>,
    exit: Option<ExitInfo>,
    ended_at: Option<Instant>,
    ended_jobs: usize,
    kept: Vec<i32>,
    out_of_memory: Option<crate::status::OutOfMemory>,
}

/// A shell and the tree it started. Shared (`Arc`) between the task that
/// supervises it and whoever reads or ends it; no lock is held across I/O.
pub struct ShellProcess {
    pid: i32,
    has_terminal: bool,
    tree: TreeId,
    command: String,
    started_at: Instant,
    started_wall: SystemTime,
    stdout: Arc<Capture>,
    stderr: Arc<Capture>,
    /// The shell's place in the memory pool, which finds its streams here.
    memory: Arc<crate::pool::Account>,
    unseen: Mutex<ReadCursor>,
    run_state: Mutex<RunState>,
    /// Flips to true when the shell process itself has exited.
    exited: watch::Sender<bool>,
    /// Flips to true when the shell is finished: exited, drained, swept.
    finished: watch::Sender<bool>,
    /// Counts pushes of output, for consumers that want to know when to look.
    output_events: watch::Sender<u64>,
    sequence: AtomicU64,
    /// The terminal's screen as a terminal emulator draws it (tty shells).
    screen: Option<Mutex<vt100::Parser>>,
    /// Milliseconds from start to the last output pushed.
    last_output_ms: AtomicU64,
    /// Input to its terminal while it runs, if it has one; dropped when it
    /// finishes, so a finished shell holds no descriptor of it.
    #[cfg(target_os = "linux")]
    terminal: Mutex<Option<crate::TerminalWriter>>,
    /// The executables' names left running ([`SpawnSpec::keep_running`]):
    /// spared by the signals that end the tree, too.
    keep_running: Vec<String>,
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
    pub async fn spawn(mut spec: SpawnSpec) -> Result<Arc<Self>, SpawnError> {
        ensure_subreaper();
        crate::orphans::ensure_reaper();
        let tag = next_tag();
        // Before the fork: the command's own run time is never under-reported.
        let started_at = Instant::now();
        let started_wall = SystemTime::now();
        let spawned = crate::spawn::spawn(&spec, &tag).await?;
        // The child has its copies: ours would be held as long as the shell is.
        spec.inherit.clear();
        let pid = spawned.pid;
        let memory = spec
            .memory
            .clone()
            .unwrap_or_else(crate::MemoryPool::unbounded)
            .account();
        let shell = Arc::new(Self {
            pid,
            has_terminal: spec.tty,
            tree: TreeId::new(pid, &tag, spawned.cgroup),
            command: spec.command.clone(),
            started_at,
            started_wall,
            stdout: Capture::new(
                spec.limits,
                spec.stdout_spill.as_ref(),
                spec.tty
                    .then(|| StreamReplacer::new(spec.replacements.clone())),
                &memory,
            ),
            stderr: Capture::new(spec.limits, spec.stderr_spill.as_ref(), None, &memory),
            memory,
            unseen: Mutex::new(ReadCursor::default()),
            run_state: Mutex::new(RunState {
                status: ShellStatus::Pending,
                request: None,
                exit: None,
                ended_at: None,
                ended_jobs: 0,
                kept: Vec::new(),
                out_of_memory: None,
            }),
            exited: watch::Sender::new(false),
            finished: watch::Sender::new(false),
            output_events: watch::Sender::new(0),
            sequence: AtomicU64::new(0),
            last_output_ms: AtomicU64::new(0),
            screen: spec.tty.then(|| Mutex::new(new_screen())),
            #[cfg(target_os = "linux")]
            terminal: Mutex::new(spawned.terminal),
            keep_running: spec.keep_running.clone(),
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

    /// The shell's pid (also its process group id and process session id).
    pub fn pid(&self) -> u32 {
        self.pid.cast_unsigned()
    }

    /// Input to its terminal: `None` for a shell started without
    /// [`SpawnSpec::tty`], and once it has finished.
    #[cfg(target_os = "linux")]
    pub fn terminal(&self) -> Option<crate::TerminalWriter> {
        self.terminal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What a person would see on its terminal now (`None` without one):
    /// the rows with trailing spaces trimmed and trailing empty rows
    /// dropped, and where the cursor is. Not redacted: callers redact.
    pub fn screen(&self) -> Option<Screen> {
        let parser = self
            .screen
            .as_ref()?
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let screen = parser.screen();
        let mut rows: Vec<String> = screen
            .rows(0, SCREEN_COLUMNS)
            .map(|row| row.trim_end().to_owned())
            .collect();
        while rows.last().is_some_and(String::is_empty) {
            rows.pop();
        }
        let (cursor_row, cursor_col) = screen.cursor_position();
        Some(Screen {
            rows,
            cursor_row,
            cursor_col,
            application_cursor: screen.application_cursor(),
            bracketed_paste: screen.bracketed_paste(),
        })
    }

    fn feed_screen(&self, bytes: &[u8]) {
        if let Some(screen) = &self.screen {
            screen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .process(bytes);
        }
    }

    /// How long no output has arrived (since the start, before any).
    pub fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_output_ms.load(Ordering::Relaxed));
        self.started_at.elapsed().saturating_sub(last)
    }

    /// Whether it waits for terminal input (CONTRACT.md, Interactive
    /// sessions): it runs under a terminal whose foreground process group is
    /// blocked reading it, and no output arrived for `quiet`. Reads `/proc`
    /// only once the quiet has lasted, so it costs nothing while output flows.
    #[cfg(target_os = "linux")]
    pub fn waits_for_input(&self, quiet: Duration) -> bool {
        if self.quiet_for() < quiet {
            return false;
        }
        let Some(terminal) = self.terminal() else {
            return false;
        };
        terminal
            .foreground_group()
            .is_some_and(|group| crate::group_waits_for_input(group, terminal.device()))
    }

    /// The process blocked reading its terminal now, if any (its pid as
    /// this process sees it).
    #[cfg(target_os = "linux")]
    pub fn input_reader(&self) -> Option<i32> {
        let terminal = self.terminal()?;
        crate::group_reader(terminal.foreground_group()?, terminal.device())
    }

    /// Never: terminals are Linux only.
    #[cfg(not(target_os = "linux"))]
    pub fn waits_for_input(&self, _quiet: Duration) -> bool {
        false
    }

    /// Whether it was started under a terminal (also once it has finished).
    pub fn has_terminal(&self) -> bool {
        self.has_terminal
    }

    /// The memory budget its output counts against.
    pub(crate) fn memory_pool(&self) -> crate::MemoryPool {
        self.memory.pool()
    }

    /// The command text it was started with.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// When it was started.
    pub fn started_at(&self) -> SystemTime {
        self.started_wall
    }

    fn run_state(&self) -> MutexGuard<'_, RunState> {
        self.run_state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn move_to(&self, next: ShellStatus) {
        let mut state = self.run_state();
        if state.status.can_move_to(next) {
            state.status = next;
        }
    }

    /// The current status.
    pub fn status(&self) -> ShellStatus {
        self.run_state().status
    }

    /// True until the shell is finished (exited, drained and swept).
    pub fn is_running(&self) -> bool {
        !self.status().is_finished()
    }

    /// How the shell process ended, once it has.
    pub fn exit(&self) -> Option<ExitInfo> {
        self.run_state().exit
    }

    /// Set once the shell is finished when the OOM killer ended a process
    /// of its cgroup (the status is then `failed`, unless something was
    /// asked of the tree first).
    pub fn out_of_memory(&self) -> Option<crate::status::OutOfMemory> {
        self.run_state().out_of_memory
    }

    /// What ended the tree from here, if anything did.
    pub fn end_request(&self) -> Option<EndRequest> {
        self.run_state().request
    }

    /// Time from start to finish, or to now while it runs.
    pub fn duration(&self) -> Duration {
        let ended = self.run_state().ended_at;
        ended
            .unwrap_or_else(Instant::now)
            .duration_since(self.started_at)
    }

    /// When the shell finished, if it has.
    pub fn finished_at(&self) -> Option<Instant> {
        self.run_state().ended_at
    }

    /// How many background jobs the shell left behind that were ended after
    /// it exited.
    pub fn ended_jobs(&self) -> usize {
        self.run_state().ended_jobs
    }

    /// Pids left running on purpose (`keep_running`).
    pub fn kept_processes(&self) -> Vec<u32> {
        self.run_state()
            .kept
            .iter()
            .map(|pid| pid.cast_unsigned())
            .collect()
    }

    fn capture(&self, stream: Stream) -> &Arc<Capture> {
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

    /// Makes sure a stream's spill file exists (if the spec asked for one):
    /// writes it now, even though the stream still fits in memory, so that
    /// it can be named. Then reports it, as [`spill_report`](Self::spill_report).
    pub fn ensure_spill_file(&self, stream: Stream) -> Option<SpillReport> {
        self.capture(stream).ensure_spill_file()
    }

    /// What the spill file of a stream holds, if the spec asked for one.
    /// Touches no file: `on_disk` is false while the stream fits in memory.
    pub fn spill_report(&self, stream: Stream) -> Option<SpillReport> {
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

    /// Where [`read_unseen`](Self::read_unseen) will go on from: a copy,
    /// for a reader that looks at the unread output (with
    /// [`read_since`](Self::read_since)) without consuming it.
    pub fn unseen_cursor(&self) -> ReadCursor {
        *self.unseen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// New output since the last call of this method (the shell's own
    /// cursor). What it returns is then freed (once the stream's spill
    /// file, if it has one, exists), so a read shell holds no memory for
    /// it; another reader behind this one finds that part in its gap.
    pub fn read_unseen(&self) -> NewOutput {
        let mut cursor = self.unseen.lock().unwrap_or_else(PoisonError::into_inner);
        let new = self.read_since(&mut cursor);
        self.stdout.release_before(cursor.stdout);
        self.stderr.release_before(cursor.stderr);
        self.memory.pool().give_back_freed();
        new
    }

    /// Whether the shell has finished and [`read_unseen`](Self::read_unseen)
    /// has returned all it printed: nobody is owed any of its output
    /// (its output files may then be reclaimed for newer ones).
    pub fn is_read_to_end(&self) -> bool {
        if !self.status().is_finished() {
            return false;
        }
        let cursor = self.unseen.lock().unwrap_or_else(PoisonError::into_inner);
        cursor.stdout == self.stdout.buffer().end() && cursor.stderr == self.stderr.buffer().end()
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
        let mut state = self.run_state();
        if state.exit.is_some() || state.status.is_finished() {
            return false;
        }
        state.request.get_or_insert(request);
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

    /// Sends `signal` to the shell's group and every process of its tree
    /// but those `keep_running` names and their descendants: a kept
    /// daemon outlives `KillShell`, a timeout or a cancellation of the shell
    /// that started it (not SIGKILL rounds, when the shell ignores these).
    fn signal_tree(&self, signal: Signal) {
        if self.keep_running.is_empty() {
            self.tree.signal_all(signal);
            return;
        }
        sys::send_group(self.tree.shell_pid, signal);
        let found = self.tree.collect();
        let kept = supervise::kept_pids(&found, &self.keep_running);
        for member in found
            .members
            .iter()
            .filter(|member| !kept.contains(&member.pid))
        {
            sys::send(member.pid, signal);
        }
    }

    async fn escalate(&self, first: Signal, grace: Duration) {
        self.signal_tree(first);
        // A stopped process acts on SIGTERM only once continued.
        if first == Signal::SIGTERM {
            self.signal_tree(Signal::SIGCONT);
            // An interactive shell (`bash -i`, `zsh`) ignores SIGTERM but
            // ends on SIGHUP, as when its terminal closes. Sent only after a
            // moment, so a command that ends on SIGTERM still reads as
            // killed by it (exit 143).
            if self.has_terminal && !self.wait_exited(grace.min(HANGUP_AFTER)).await {
                self.signal_tree(Signal::SIGHUP);
                self.signal_tree(Signal::SIGCONT);
            }
        }
        if first == Signal::SIGINT && !self.wait_exited(grace).await {
            self.signal_tree(Signal::SIGTERM);
            self.signal_tree(Signal::SIGCONT);
        }
        if !self.wait_exited(grace).await {
            self.tree.kill_all().await;
        }
        if !self.wait_exited(KILL_WAIT).await {
            tracing::warn!(pid = self.pid, "shell survived SIGKILL for {KILL_WAIT:?}");
        }
    }

    /// SIGINT to the shell's process group only (Ctrl-C typed at a terminal
    /// it does not have), nothing more: it may go on. False if it has ended.
    pub fn send_interrupt(&self) -> bool {
        if !self.is_running() || self.exit().is_some() {
            return false;
        }
        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.pid), Signal::SIGINT).is_ok()
    }

    /// Ends the tree at once with SIGKILL, without waiting: for `Drop`.
    pub(crate) fn kill_now(&self) {
        if self.request_end(EndRequest::Kill) {
            self.tree.kill_all_now();
        }
    }

    #[cfg(target_os = "linux")]
    fn drop_terminal(&self) {
        self.terminal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    fn notify_output(&self) {
        let since_start = u64::try_from(self.started_at.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_output_ms.store(since_start, Ordering::Relaxed);
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed) + 1;
        self.output_events.send_replace(sequence);
    }
}

/// A terminal's screen at one moment (see [`ShellProcess::screen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    /// The rows shown, trailing spaces trimmed, trailing empty rows dropped.
    pub rows: Vec<String>,
    /// The cursor's row, from 0.
    pub cursor_row: u16,
    /// The cursor's column, from 0.
    pub cursor_col: u16,
    /// The program asked for application cursor keys (`ESC O A` for Up).
    pub application_cursor: bool,
    /// The program enabled bracketed paste.
    pub bracketed_paste: bool,
}

/// The size of every terminal the runtime makes (`TERMINAL_ROWS` by
/// `TERMINAL_COLUMNS`).
const SCREEN_ROWS: u16 = 40;
const SCREEN_COLUMNS: u16 = 120;

/// A screen the size of every terminal the runtime makes, without scrollback.
fn new_screen() -> vt100::Parser {
    let rows = std::num::NonZeroU16::new(SCREEN_ROWS).unwrap_or(std::num::NonZeroU16::MIN);
    let columns = std::num::NonZeroU16::new(SCREEN_COLUMNS).unwrap_or(std::num::NonZeroU16::MIN);
    vt100::Parser::new(rows, columns, 0)
}

static SUBREAPER: std::sync::Once = std::sync::Once::new();

fn ensure_subreaper() {
    SUBREAPER.call_once(|| {
        if let Err(error) = sys::become_subreaper() {
            tracing::warn!(%error, "cannot become a child subreaper: escaped processes may outlive their shell");
        }
    });
}
