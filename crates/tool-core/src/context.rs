//! What a tool call runs within: working directory, dry-run flag,
//! cancellation, progress reporting and state shared across calls.

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};
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
    /// Go ahead, remember it, and save it as an `allow` rule in the
    /// policy file so it holds across restarts.
    Save,
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

/// The order calls came to the server in, and which of them may still ask
/// the person a question: a question waits until every call that came
/// before it and still holds its place has asked or passed (see
/// [`Arrival`]). The transport takes the places, in the order it reads the
/// calls: the tasks that run them may reach their question in any order.
#[derive(Debug, Default)]
pub struct ArrivalLine {
    state: Mutex<LineState>,
    /// Woken whenever a place is given up.
    passed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct LineState {
    /// The number the next call gets.
    next: u64,
    /// The numbers of the calls still holding their place.
    holding: BTreeSet<u64>,
}

impl ArrivalLine {
    /// A new line: nobody in it.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// The place of the call that came now. One that `holds` keeps later
    /// calls' questions waiting until it has asked or passed (a call of a
    /// tool that never asks holds nothing); it is given up at the latest
    /// when the last clone of the [`Arrival`] is dropped.
    pub fn arrive(self: &Arc<Self>, holds: bool) -> Arrival {
        let mut state = self.lock();
        state.next += 1;
        let number = state.next;
        if holds {
            state.holding.insert(number);
        }
        drop(state);
        Arrival(Arc::new(Place {
            number,
            line: Arc::clone(self),
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LineState> {
        // Each use is one insert, remove or look: nothing half-done to see
        // after a panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pass(&self, number: u64) {
        if self.lock().holding.remove(&number) {
            self.passed.notify_waiters();
        }
    }

    fn is_first(&self, number: u64) -> bool {
        self.lock()
            .holding
            .first()
            .is_none_or(|&first| first >= number)
    }
}

/// A call's place in its [`ArrivalLine`]; clones share it.
#[derive(Debug, Clone)]
pub struct Arrival(Arc<Place>);

#[derive(Debug)]
struct Place {
    number: u64,
    line: Arc<ArrivalLine>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.line.pass(self.number);
    }
}

impl Arrival {
    /// The call's number: 1 for the first call the line saw.
    pub fn number(&self) -> u64 {
        self.0.number
    }

    /// Waits until no call that came before this one still holds its
    /// place. Cancellation safe.
    pub async fn first(&self) {
        let line = &self.0.line;
        loop {
            let passed = line.passed.notified();
            tokio::pin!(passed);
            // Registered before the look, so a pass in between still wakes.
            passed.as_mut().enable();
            if line.is_first(self.0.number) {
                return;
            }
            passed.await;
        }
    }

    /// Gives up the place: this call asks nothing more, so later calls'
    /// questions need not wait for it. Idempotent.
    pub fn pass(&self) {
        self.0.line.pass(self.0.number);
    }
}

/// Who makes a call: shells a principal starts are its own, and another
/// principal's calls do not see them. A stdio server has one principal,
/// [`Principal::local`]; `serve` names one per token or JWT subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal(Arc<str>);

impl Principal {
    /// The one principal of a server that speaks to a single client.
    pub fn local() -> Self {
        Self(Arc::from("local"))
    }

    /// A principal by name (a token line's name, or a JWT's `issuer sub`).
    pub fn named(name: &str) -> Self {
        Self(Arc::from(name))
    }

    /// The name, as the audit log records it.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl Default for Principal {
    fn default() -> Self {
        Self::local()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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
    arrival: Option<Arrival>,
    principal: Principal,
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
            arrival: None,
            principal: Principal::local(),
        }
    }

    /// Sets who makes the call (default [`Principal::local`]).
    #[must_use]
    pub fn with_principal(mut self, principal: Principal) -> Self {
        self.principal = principal;
        self
    }

    /// Who makes the call.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Lets tools ask the person through `approver`.
    #[must_use]
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Gives the call its place in the order calls came: its questions
    /// wait for earlier calls' (see [`ArrivalLine`]).
    #[must_use]
    pub fn with_arrival(mut self, arrival: Arrival) -> Self {
        self.arrival = Some(arrival);
        self
    }

    /// The call's place in the order calls came, when the transport keeps
    /// one.
    pub fn arrival(&self) -> Option<&Arrival> {
        self.arrival.as_ref()
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_question_waits_for_every_earlier_call_holding_its_place() {
        use std::time::Duration;
        let line = ArrivalLine::new();
        let first = line.arrive(true);
        let quiet = line.arrive(false);
        let second = line.arrive(true);
        let third = line.arrive(true);
        assert_eq!(
            [
                first.number(),
                quiet.number(),
                second.number(),
                third.number()
            ],
            [1, 2, 3, 4]
        );
        first.first().await;
        let waits = |arrival: &Arrival| {
            let arrival = arrival.clone();
            tokio::spawn(async move { arrival.first().await })
        };
        let (waiting_second, waiting_third) = (waits(&second), waits(&third));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting_second.is_finished() && !waiting_third.is_finished());
        first.pass();
        tokio::time::timeout(Duration::from_secs(10), waiting_second)
            .await
            .expect("the second goes once the first passed")
            .unwrap();
        assert!(
            !waiting_third.is_finished(),
            "the second still holds its place"
        );
        // Dropped without passing (a call that ended): given up all the same.
        drop(second);
        tokio::time::timeout(Duration::from_secs(10), waiting_third)
            .await
            .expect("the third goes once the second is gone")
            .unwrap();
    }
}
