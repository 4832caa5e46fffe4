//! What a tool call runs within: working directory, dry-run flag,
//! cancellation, progress reporting and state shared across calls.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

/// One progress report from a running tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    /// A value that increases with every report of one call.
    pub progress: f64,
    /// The total, when the tool knows it.
    pub total: Option<f64>,
    /// A human-readable message, such as the most recent output.
    pub message: Option<String>,
}

type ProgressFn = dyn Fn(ProgressUpdate) + Send + Sync;

/// Where a tool sends progress reports. The default sink drops them, so
/// tools can always report without asking whether anyone listens.
#[derive(Clone, Default)]
pub struct ProgressSink(Option<Arc<ProgressFn>>);

impl ProgressSink {
    /// A sink that calls `report` for every update.
    pub fn new(report: impl Fn(ProgressUpdate) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(report)))
    }

    /// A sink that drops every update.
    pub fn none() -> Self {
        Self(None)
    }

    /// Whether anyone listens; tools may skip building messages when not.
    pub fn is_active(&self) -> bool {
        self.0.is_some()
    }

    /// Sends one update (a no-op for the default sink).
    pub fn report(&self, update: ProgressUpdate) {
        if let Some(report) = &self.0 {
            report(update);
        }
    }
}

impl fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ProgressSink")
            .field(&if self.is_active() { "active" } else { "none" })
            .finish()
    }
}

/// What the person answered when asked to approve something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Go ahead; `remember` asks that the same thing not be asked again.
    Accept {
        /// Whether to remember the approval.
        remember: bool,
    },
    /// The person said no.
    Decline,
    /// The person dismissed the question (or it timed out).
    Cancel,
    /// Nobody could be asked after all (the client refused the request).
    Unavailable,
}

/// Someone who can be asked to approve an action: the person behind the
/// client (MCP elicitation). A future that is dropped before it completes
/// withdraws its question.
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    /// Puts `message` to the person and waits for the answer.
    async fn ask(&self, message: String) -> Approval;
}

/// State shared by every call made in one session: the calls of one client
/// (one MCP connection, one agent conversation). Each layer keeps its own
/// typed slot, so tool-core does not need to know what the tools above it
/// remember; exec-tools keeps there the `cd` and `export` state it carries
/// from one `Bash` call to the next.
///
/// This is what "session" means in the tool crates and agent-exec.
/// shell-runtime keeps the kernel's meaning (the process session `setsid`
/// starts) and says "process session" for it.
#[derive(Default)]
pub struct Session {
    slots: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Session {
    /// A new, empty session.
    pub fn new() -> Self {
        Self::default()
    }

    /// The session's value of type `T`, created with `T::default()` on first use.
    pub fn state<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        self.state_or_insert_with(T::default)
    }

    /// The session's value of type `T`, created with `init` on first use.
    pub fn state_or_insert_with<T: Send + Sync + 'static>(
        &self,
        init: impl FnOnce() -> T,
    ) -> Arc<T> {
        // A panic while holding this lock cannot leave the map half-written
        // (insert is atomic from our point of view), so poisoning is ignored.
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = slots
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(init()) as Arc<dyn Any + Send + Sync>)
            .clone();
        drop(slots);
        // The slot is keyed by `TypeId::of::<T>()`, so it always holds a `T`.
        slot.downcast::<T>()
            .unwrap_or_else(|_| unreachable!("a session slot keyed by TypeId holds another type"))
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.slots.lock().map_or(0, |slots| slots.len());
        f.debug_struct("Session").field("slots", &count).finish()
    }
}

/// Everything a tool call may use besides its own arguments.
#[derive(Debug, Clone)]
pub struct ExecutionContext {
    working_dir: PathBuf,
    dry_run: bool,
    cancellation: CancellationToken,
    progress: ProgressSink,
    session: Arc<Session>,
    approver: Option<Arc<dyn Approver>>,
}

impl fmt::Debug for dyn Approver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Approver")
    }
}

impl ExecutionContext {
    /// A context for `working_dir` with a fresh session, no dry run, a token
    /// that is never cancelled, and no progress listener.
    pub fn new(working_dir: impl Into<PathBuf>) -> Self {
        Self {
            working_dir: working_dir.into(),
            dry_run: false,
            cancellation: CancellationToken::new(),
            progress: ProgressSink::none(),
            session: Arc::new(Session::new()),
            approver: None,
        }
    }

    /// Lets tools ask the person through `approver`.
    #[must_use]
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Who can be asked to approve an action, if anyone.
    pub fn approver(&self) -> Option<&Arc<dyn Approver>> {
        self.approver.as_ref()
    }

    /// Sets whether tools only say what they would do.
    #[must_use]
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Uses `token` to cancel this call.
    #[must_use]
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }

    /// Sends progress reports to `sink`.
    #[must_use]
    pub fn with_progress(mut self, sink: ProgressSink) -> Self {
        self.progress = sink;
        self
    }

    /// Shares `session` with other contexts (one per call, same session).
    #[must_use]
    pub fn with_session(mut self, session: Arc<Session>) -> Self {
        self.session = session;
        self
    }

    /// The directory calls start in unless the session moved elsewhere.
    pub fn working_dir(&self) -> &Path {
        &self.working_dir
    }

    /// Whether tools must only say what they would do.
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// Fires when the caller gives up on this call.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// Where progress reports go.
    pub fn progress(&self) -> &ProgressSink {
        &self.progress
    }

    /// State shared with every other call of the same session.
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counter(AtomicUsize);

    #[test]
    fn session_state_is_shared_between_contexts() {
        let session = Arc::new(Session::new());
        let first = ExecutionContext::new("/").with_session(session.clone());
        let second = ExecutionContext::new("/tmp").with_session(session);
        first
            .session()
            .state::<Counter>()
            .0
            .fetch_add(1, Ordering::SeqCst);
        assert_eq!(
            second.session().state::<Counter>().0.load(Ordering::SeqCst),
            1
        );
    }

    #[test]
    fn fresh_contexts_do_not_share_sessions() {
        let first = ExecutionContext::new("/");
        let second = ExecutionContext::new("/");
        first
            .session()
            .state::<Counter>()
            .0
            .fetch_add(1, Ordering::SeqCst);
        assert_eq!(
            second.session().state::<Counter>().0.load(Ordering::SeqCst),
            0
        );
    }

    #[test]
    fn init_runs_once_per_type() {
        let session = Session::new();
        let calls = AtomicUsize::new(0);
        for _ in 0..3 {
            let value = session.state_or_insert_with(|| {
                calls.fetch_add(1, Ordering::SeqCst);
                String::from("x")
            });
            assert_eq!(value.as_str(), "x");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn progress_sink_forwards_updates() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = {
            let seen = seen.clone();
            ProgressSink::new(move |update| seen.lock().unwrap().push(update))
        };
        let context = ExecutionContext::new("/").with_progress(sink);
        assert!(context.progress().is_active());
        context.progress().report(ProgressUpdate {
            progress: 1.0,
            total: None,
            message: Some("hi".into()),
        });
        assert_eq!(seen.lock().unwrap().len(), 1);
        assert!(!ProgressSink::none().is_active());
        ProgressSink::default().report(ProgressUpdate {
            progress: 1.0,
            total: None,
            message: None,
        });
    }

    #[test]
    fn builder_sets_every_field() {
        let token = CancellationToken::new();
        let context = ExecutionContext::new("/work")
            .with_dry_run(true)
            .with_cancellation(token.clone());
        token.cancel();
        assert!(context.dry_run());
        assert!(context.cancellation().is_cancelled());
        assert_eq!(context.working_dir(), Path::new("/work"));
        assert!(format!("{context:?}").contains("ProgressSink"));
    }
}
