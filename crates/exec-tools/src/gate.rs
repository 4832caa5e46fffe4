//! The policy gate: the one sequence that clears a `Bash` command, or a
//! line `WriteStdin` types to a shell, before it runs. In order: the
//! session's working directory (`Bash`), the analysis in the session's
//! context (its directory and exported variables), the policy decision, a
//! remembered approval (keyed by [`approval_key`]), asking the person in
//! the session's turn under `--ask-timeout`, the ask fallback, saving an
//! approval, and the audit line of a refusal. The tools only render the
//! [`Verdict`] into their answers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use exec_policy::{
    Analysis, AnalysisContext, Decision, Denial, WorkdirError, nearest_existing_ancestor,
};
use tool_core::{Approval, ExecutionContext};

use crate::approval::{
    Effects, Waiting, approval_key, approval_message, binding, done_deciding, wait_for_approval,
};
use crate::audit::{AuditEntry, AuditError, AuditLog};
use crate::environment::{AskFallback, ExecEnvironment};

/// What the gate clears: the kinds differ only in how they are logged and
/// in what an approval may become.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Subject<'a> {
    /// A `Bash` command. Its decision line (`event: "decision"`) is
    /// numbered before anything is asked and names the directory and the
    /// rule; a refusal's status says why (`blocked`, `declined`,
    /// `timed_out`, `cancelled`); a `save` answer becomes a policy rule.
    Command,
    /// A line typed to a shell in front of `bash_id`'s terminal. A refusal
    /// is the call's line (`event: "call"`, the call's input as `logged`,
    /// status `blocked`); typed while the terminal hides input (`hidden`),
    /// a line that would be asked about is refused unless remembered, for
    /// no approver may see it; `save` only remembers, since a rule would
    /// also allow the line as a `Bash` command.
    Line {
        /// The shell typed into.
        bash_id: &'a str,
        /// The call's input as the audit log shows it.
        logged: &'a str,
        /// Whether the terminal hid the input.
        hidden: bool,
    },
}

/// One thing to clear.
pub(crate) struct Request<'a> {
    /// What it is.
    pub(crate) subject: Subject<'a>,
    /// The command or line, as it would run (not redacted).
    pub(crate) text: &'a str,
    /// Where it runs.
    pub(crate) cwd: &'a Path,
    /// The session's variables it starts with (values that are UTF-8).
    pub(crate) vars: HashMap<String, String>,
}

/// The gate's answer.
pub(crate) enum Verdict {
    /// It may run.
    Run(Box<Cleared>),
    /// It may not; nothing ran.
    Refused(Box<Refusal>),
}

/// A command or line that may run.
pub(crate) struct Cleared {
    /// The analysis it was cleared by (facts, `git commit` positions).
    pub(crate) analysis: Analysis,
    /// Who approved an `ask` decision (`user`, `remembered`, `fallback`).
    pub(crate) approved_by: Option<&'static str>,
    /// What became of a `save` answer, for the end of the answer.
    pub(crate) saved_note: Option<String>,
    /// The decision line a `Bash` command's later lines (`dry_run`,
    /// `running`, `ended`) are made from, numbered.
    pub(crate) decided: AuditEntry,
    /// What the person approved (now or before), when they did: the
    /// effects the judge of its execs holds each exec to.
    pub(crate) effects: Option<Effects>,
}

impl Cleared {
    /// The rule that asked, when someone approved.
    pub(crate) fn rule(&self) -> Option<String> {
        self.analysis.decision.denial().map(|d| d.rule_id.clone())
    }
}

/// A command or line that may not run, and why.
pub(crate) struct Refusal {
    /// Why.
    pub(crate) reason: Reason,
    /// The decision's name (`ask` or `deny`).
    pub(crate) decision: &'static str,
    /// The rule that refused or asked.
    pub(crate) denial: Denial,
    /// Whether the refusal's audit line was written (`Ok` without a log).
    pub(crate) audited: Result<(), AuditError>,
}

/// Why a command or line was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// A `deny` rule matched.
    Denied,
    /// It needs approval and nobody can be asked (no approver, a dry run,
    /// the client refused the question), and the fallback is `deny`.
    CannotAsk,
    /// The person declined or dismissed the question.
    Declined,
    /// Approved, but what it runs changed while the question was open.
    Changed,
    /// Nobody answered within `--ask-timeout`.
    TimedOut,
    /// The call was cancelled while waiting for the answer.
    Cancelled,
    /// Typed while the terminal hides input, it would have had to be
    /// shown to someone.
    Hidden,
}

impl Reason {
    /// The status a `Bash` command's refusal line carries.
    fn command_status(self) -> &'static str {
        match self {
            Self::Declined => "declined",
            Self::TimedOut => "timed_out",
            Self::Cancelled => "cancelled",
            Self::Denied | Self::CannotAsk | Self::Changed | Self::Hidden => "blocked",
        }
    }
}

/// Runs the gate's sequence for `request`.
pub(crate) async fn clear(
    exec: &ExecEnvironment,
    context: &ExecutionContext,
    request: Request<'_>,
) -> Verdict {
    let session = AnalysisContext {
        cwd: request.cwd.to_str().map(str::to_owned),
        vars: request.vars,
    };
    let analysis = exec.analyzer.analyze_in(request.text, &session);
    let decided = decision_line(exec, &request.subject, request.text, request.cwd, &analysis);
    let settled = settle(
        exec,
        context,
        &request.subject,
        request.text,
        request.cwd,
        &session.vars,
        &analysis.decision,
    )
    .await;
    if matches!(request.subject, Subject::Command) {
        // Asked or not, this call is done deciding: later calls'
        // questions need not wait for it.
        done_deciding(context);
    }
    match settled {
        Ok(Settled {
            approved_by,
            saved_note,
            effects,
        }) => Verdict::Run(Box::new(Cleared {
            analysis,
            approved_by,
            saved_note,
            decided,
            effects,
        })),
        Err((reason, denial)) => {
            let audited = audit_refusal(exec, &request.subject, &decided, reason);
            Verdict::Refused(Box::new(Refusal {
                reason,
                decision: analysis.decision.name(),
                denial: denial.clone(),
                audited,
            }))
        }
    }
}

/// What clearing found for a command that may run.
#[derive(Default)]
struct Settled {
    approved_by: Option<&'static str>,
    saved_note: Option<String>,
    effects: Option<Effects>,
}

/// The decision, then a remembered approval, the person, the fallback.
async fn settle<'d>(
    exec: &ExecEnvironment,
    context: &ExecutionContext,
    subject: &Subject<'_>,
    text: &str,
    cwd: &Path,
    vars: &HashMap<String, String>,
    decision: &'d Decision,
) -> Result<Settled, (Reason, &'d Denial)> {
    let hidden = matches!(subject, Subject::Line { hidden: true, .. });
    let denial = match decision {
        Decision::Allow { .. } => return Ok(Settled::default()),
        Decision::Deny(denial) if hidden => return Err((Reason::Hidden, denial)),
        Decision::Deny(denial) => return Err((Reason::Denied, denial)),
        Decision::Ask(denial) => denial,
    };
    let bound = binding(&exec.analyzer, text, cwd, vars);
    let key = bound.key;
    let effects = Effects {
        keys: bound.effects,
        assigned: bound.assigned,
    };
    if exec.is_remembered(&key) {
        return Ok(approved("remembered", effects));
    }
    if hidden {
        return Err((Reason::Hidden, denial));
    }
    let waited = match context.approver() {
        // A dry run never asks: it answers as the fallback would.
        Some(approver) if !context.dry_run() => {
            let shown = exec.redact(text);
            let message = exec.redact(&approval_message(&shown, cwd, denial, vars));
            wait_for_approval(exec.config.ask_timeout, context, approver.as_ref(), message).await
        }
        _ => Waiting::Answer(Approval::Unavailable),
    };
    let refused = |reason| Err((reason, denial));
    match waited {
        // The binding is taken again once the person answers: an approval
        // holds only for what was there when it was given.
        Waiting::Answer(Approval::Accept { .. } | Approval::Save)
            if approval_key(&exec.analyzer, text, cwd, vars) != key =>
        {
            refused(Reason::Changed)
        }
        Waiting::Answer(Approval::Accept { remember }) => {
            if remember {
                exec.remember(key);
            }
            Ok(approved("user", effects))
        }
        Waiting::Answer(Approval::Save) => {
            exec.remember(key);
            let saved_note = match subject {
                Subject::Command => Some(crate::save::save_note(exec, text)),
                Subject::Line { .. } => None,
            };
            Ok(Settled {
                saved_note,
                ..approved("user", effects)
            })
        }
        Waiting::Answer(Approval::Unavailable)
            if exec.config.ask_fallback == AskFallback::Allow =>
        {
            Ok(Settled {
                approved_by: Some("fallback"),
                ..Settled::default()
            })
        }
        Waiting::Answer(Approval::Unavailable) => refused(Reason::CannotAsk),
        Waiting::Answer(Approval::Decline | Approval::Cancel) => refused(Reason::Declined),
        Waiting::TimedOut => refused(Reason::TimedOut),
        Waiting::CallCancelled => refused(Reason::Cancelled),
    }
}

fn approved(by: &'static str, effects: Effects) -> Settled {
    Settled {
        approved_by: Some(by),
        saved_note: None,
        effects: Some(effects),
    }
}

/// The decision line of `subject`: for a command, numbered now, so the
/// lines of its run and the judge of its execs share the number.
fn decision_line(
    exec: &ExecEnvironment,
    subject: &Subject<'_>,
    text: &str,
    cwd: &Path,
    analysis: &Analysis,
) -> AuditEntry {
    let audit = exec.config.audit.as_deref();
    match subject {
        Subject::Command => AuditEntry {
            event: "decision",
            call: audit.map_or(0, AuditLog::next_call),
            tool: "Bash",
            command: Some(exec.redact(text)),
            cwd: Some(cwd.to_string_lossy().into_owned()),
            decision: Some(analysis.decision.name()),
            rule: analysis.decision.denial().map(|d| d.rule_id.clone()),
            ..AuditEntry::default()
        },
        Subject::Line {
            bash_id, logged, ..
        } => AuditEntry {
            event: "call",
            tool: "WriteStdin",
            command: Some((*logged).to_owned()),
            decision: Some(analysis.decision.name()),
            bash_id: Some((*bash_id).to_owned()),
            ..AuditEntry::default()
        },
    }
}

/// Writes the refusal's line before the answer goes out.
fn audit_refusal(
    exec: &ExecEnvironment,
    subject: &Subject<'_>,
    decided: &AuditEntry,
    reason: Reason,
) -> Result<(), AuditError> {
    let Some(log) = exec.config.audit.as_deref() else {
        return Ok(());
    };
    let (call, status) = match subject {
        Subject::Command => (decided.call, reason.command_status()),
        // A line's call is numbered when its one line is written.
        Subject::Line { .. } => (log.next_call(), "blocked"),
    };
    log.write(&AuditEntry {
        call,
        status: Some(status.to_owned()),
        ..decided.clone()
    })
}

/// The session's directory as a `Bash` call finds it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SessionDir {
    /// Where commands run (canonical, checked).
    pub(crate) canonical: PathBuf,
    /// The directory that no longer exists and the ancestor taken instead.
    pub(crate) moved: Option<(PathBuf, PathBuf)>,
}

/// Where a command runs: the carried directory, else the context's,
/// canonical and checked against `roots`. The carried state goes on storing
/// `$PWD` as bash reports it; what `pwd` prints does not change, since
/// bash derives it from the directory reached, not the path used.
///
/// A directory that no longer exists (deleted by an earlier command, or
/// from outside) gives way to its nearest existing ancestor inside the
/// roots: `moved` holds the directory gone and that ancestor, which becomes
/// the session's directory.
pub(crate) fn working_dir(
    carried_cwd: Option<&Path>,
    context: &ExecutionContext,
    roots: &[PathBuf],
) -> Result<SessionDir, String> {
    let cwd = carried_cwd.unwrap_or_else(|| context.working_dir());
    let refused =
        |error: &WorkdirError| format!("Cannot run the command: {}", crate::error_chain(error));
    match exec_policy::resolve_working_dir(cwd, roots) {
        Ok(canonical) => Ok(SessionDir {
            canonical,
            moved: None,
        }),
        Err(error @ (WorkdirError::NotFound { .. } | WorkdirError::NotADirectory { .. })) => {
            match nearest_existing_ancestor(cwd, roots) {
                Some((ancestor, canonical)) => Ok(SessionDir {
                    canonical,
                    moved: Some((cwd.to_owned(), ancestor)),
                }),
                None => Err(refused(&error)),
            }
        }
        Err(error) => Err(refused(&error)),
    }
}

/// Where one command runs with `workdir` (relative to the session's
/// directory, or absolute), canonical and inside `roots`.
pub(crate) fn call_dir(
    session_dir: &Path,
    workdir: Option<&str>,
    roots: &[PathBuf],
) -> Result<PathBuf, String> {
    let Some(workdir) = workdir else {
        return Ok(session_dir.to_owned());
    };
    exec_policy::resolve_working_dir(&session_dir.join(workdir), roots).map_err(|error| {
        format!(
            "Command not run: `workdir` refused: {}",
            crate::error_chain(&error)
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use async_trait::async_trait;
    use serde_json::Value;
    use tool_core::Approver;

    use super::*;
    use crate::ExecConfig;
    use crate::audit::AuditLog;

    /// Policy rules: `rm` is refused, `touch` and `sh` are asked about.
    const RULES: &str = "\
[[rule]]\nid = \"rm-denied\"\ndecision = \"deny\"\nprogram = \"rm\"\nreason = \"never\"\n\
[[rule]]\nid = \"touch-asks\"\ndecision = \"ask\"\nprogram = \"touch\"\nreason = \"a nod first\"\n\
[[rule]]\nid = \"sh-asks\"\ndecision = \"ask\"\nprogram = \"sh\"\nreason = \"a script\"\n";

    /// Answers with `answer` (never, when `None`), after `meanwhile`.
    struct Person {
        answer: Option<Approval>,
        asked: Mutex<Vec<String>>,
        meanwhile: Box<dyn Fn() + Send + Sync>,
    }

    #[async_trait]
    impl Approver for Person {
        async fn ask(&self, message: String) -> Approval {
            self.asked.lock().unwrap().push(message);
            (self.meanwhile)();
            match self.answer {
                Some(answer) => answer,
                None => std::future::pending().await,
            }
        }
    }

    fn person(answer: Option<Approval>) -> Arc<Person> {
        Arc::new(Person {
            answer,
            asked: Mutex::new(Vec::new()),
            meanwhile: Box::new(|| {}),
        })
    }

    /// A server over a temp dir with [`RULES`], an audit log and a policy file.
    struct Fixture {
        dir: tempfile::TempDir,
        exec: ExecEnvironment,
    }

    impl Fixture {
        fn new(configure: impl FnOnce(&mut ExecConfig)) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            let policy_file = root.join("policy.toml");
            std::fs::write(&policy_file, RULES).unwrap();
            let policy = exec_policy::Policy::parse(RULES, &policy_file).unwrap();
            let mut config = ExecConfig::new(vec![root.clone()], root.clone());
            config.analyzer.rules = policy.analyzer.rules;
            config.policy_file = Some(policy_file);
            config.audit = Some(Arc::new(
                AuditLog::open(&root.join("audit.jsonl"), "off").unwrap(),
            ));
            configure(&mut config);
            Self {
                dir,
                exec: ExecEnvironment::new(config),
            }
        }

        fn root(&self) -> PathBuf {
            self.dir.path().canonicalize().unwrap()
        }

        fn context(&self, approver: Option<Arc<Person>>) -> ExecutionContext {
            let context = ExecutionContext::new(self.root());
            match approver {
                Some(approver) => context.with_approver(approver),
                None => context,
            }
        }

        async fn clear(
            &self,
            context: &ExecutionContext,
            subject: Subject<'_>,
            text: &str,
        ) -> Verdict {
            let cwd = self.root();
            let request = Request {
                subject,
                text,
                cwd: &cwd,
                vars: HashMap::new(),
            };
            clear(&self.exec, context, request).await
        }

        /// The audit log's lines.
        fn lines(&self) -> Vec<Value> {
            let path = self.exec.config.audit.as_ref().unwrap().path().to_owned();
            std::fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect()
        }
    }

    const LINE: Subject<'static> = Subject::Line {
        bash_id: "shell_0000abcd",
        logged: "typed[Enter]",
        hidden: false,
    };
    const HIDDEN_LINE: Subject<'static> = Subject::Line {
        bash_id: "shell_0000abcd",
        logged: "[hidden input]",
        hidden: true,
    };

    fn refused(verdict: Verdict) -> Refusal {
        match verdict {
            Verdict::Refused(refusal) => *refusal,
            Verdict::Run(cleared) => panic!("ran: {:?}", cleared.approved_by),
        }
    }

    fn ran(verdict: Verdict) -> Cleared {
        match verdict {
            Verdict::Run(cleared) => *cleared,
            Verdict::Refused(refusal) => panic!("refused: {:?}", refusal.reason),
        }
    }

    #[tokio::test]
    async fn an_allowed_command_runs_and_the_gate_writes_no_line() {
        let fixture = Fixture::new(|_| {});
        let cleared = ran(fixture
            .clear(&fixture.context(None), Subject::Command, "echo hi")
            .await);
        assert_eq!(cleared.approved_by, None);
        assert_eq!(cleared.decided.event, "decision");
        assert_eq!(cleared.decided.decision, Some("allow"));
        assert_eq!(cleared.decided.call, 1, "numbered before the run");
        assert!(fixture.lines().is_empty());
        ran(fixture.clear(&fixture.context(None), LINE, "echo hi").await);
        assert!(fixture.lines().is_empty());
    }

    #[tokio::test]
    async fn a_denied_command_is_refused_and_logged_for_both_tools() {
        let fixture = Fixture::new(|_| {});
        let person = person(Some(Approval::Accept { remember: false }));
        let context = fixture.context(Some(person.clone()));
        let refusal = refused(fixture.clear(&context, Subject::Command, "rm -f x").await);
        assert_eq!(refusal.reason, Reason::Denied);
        assert_eq!(refusal.decision, "deny");
        assert_eq!(refusal.denial.rule_id, "rm-denied");
        assert!(refusal.audited.is_ok());
        let refusal = refused(fixture.clear(&context, LINE, "rm -f x").await);
        assert_eq!(refusal.reason, Reason::Denied);
        assert!(
            person.asked.lock().unwrap().is_empty(),
            "a deny asks nobody"
        );

        let lines = fixture.lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0]["event"], "decision");
        assert_eq!(lines[0]["tool"], "Bash");
        assert_eq!(lines[0]["status"], "blocked");
        assert_eq!(lines[0]["decision"], "deny");
        assert_eq!(lines[0]["rule"], "rm-denied");
        assert_eq!(lines[0]["command"], "rm -f x");
        assert_eq!(lines[1]["event"], "call");
        assert_eq!(lines[1]["tool"], "WriteStdin");
        assert_eq!(lines[1]["status"], "blocked");
        assert_eq!(lines[1]["decision"], "deny");
        assert_eq!(lines[1]["command"], "typed[Enter]");
        assert_eq!(lines[1]["bash_id"], "shell_0000abcd");
        assert_eq!(lines[1]["rule"], Value::Null);
    }

    #[tokio::test]
    async fn nobody_to_ask_is_refused_unless_the_fallback_allows() {
        let fixture = Fixture::new(|_| {});
        let refusal = refused(
            fixture
                .clear(&fixture.context(None), Subject::Command, "touch a")
                .await,
        );
        assert_eq!(refusal.reason, Reason::CannotAsk);
        assert_eq!(refusal.decision, "ask");
        // A dry run never asks, even with someone to ask.
        let asker = person(Some(Approval::Accept { remember: false }));
        let dry = fixture.context(Some(asker.clone())).with_dry_run(true);
        let refusal = refused(fixture.clear(&dry, LINE, "touch a").await);
        assert_eq!(refusal.reason, Reason::CannotAsk);
        assert!(asker.asked.lock().unwrap().is_empty());
        let statuses: Vec<Value> = fixture
            .lines()
            .iter()
            .map(|l| l["status"].clone())
            .collect();
        assert_eq!(statuses, ["blocked", "blocked"]);

        let fixture = Fixture::new(|config| config.ask_fallback = AskFallback::Allow);
        let cleared = ran(fixture
            .clear(&fixture.context(None), Subject::Command, "touch a")
            .await);
        assert_eq!(cleared.approved_by, Some("fallback"));
        assert_eq!(cleared.rule().as_deref(), Some("touch-asks"));
        assert!(fixture.lines().is_empty());
    }

    #[tokio::test]
    async fn an_approval_runs_and_a_remembered_one_asks_no_more() {
        let fixture = Fixture::new(|_| {});
        let asker = person(Some(Approval::Accept { remember: true }));
        let context = fixture.context(Some(asker.clone()));
        let cleared = ran(fixture.clear(&context, Subject::Command, "touch a").await);
        assert_eq!(cleared.approved_by, Some("user"));
        let cleared = ran(fixture.clear(&context, Subject::Command, "touch a").await);
        assert_eq!(cleared.approved_by, Some("remembered"));
        // The same line typed to a shell is the same approval.
        let cleared = ran(fixture.clear(&context, LINE, "touch a").await);
        assert_eq!(cleared.approved_by, Some("remembered"));
        let asked = asker.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(asked[0].contains("Command: touch a"), "{}", asked[0]);
    }

    #[tokio::test]
    async fn a_declined_question_is_refused_with_its_own_status() {
        let fixture = Fixture::new(|_| {});
        let context = fixture.context(Some(person(Some(Approval::Decline))));
        let refusal = refused(fixture.clear(&context, Subject::Command, "touch a").await);
        assert_eq!(refusal.reason, Reason::Declined);
        let refusal = refused(fixture.clear(&context, LINE, "touch a").await);
        assert_eq!(refusal.reason, Reason::Declined);
        let statuses: Vec<Value> = fixture
            .lines()
            .iter()
            .map(|l| l["status"].clone())
            .collect();
        assert_eq!(statuses, ["declined", "blocked"]);
    }

    #[tokio::test]
    async fn an_unanswered_question_times_out() {
        let fixture = Fixture::new(|config| config.ask_timeout = Duration::from_millis(50));
        let context = fixture.context(Some(person(None)));
        let refusal = refused(fixture.clear(&context, Subject::Command, "touch a").await);
        assert_eq!(refusal.reason, Reason::TimedOut);
        let refusal = refused(fixture.clear(&context, LINE, "touch a").await);
        assert_eq!(refusal.reason, Reason::TimedOut);
        let statuses: Vec<Value> = fixture
            .lines()
            .iter()
            .map(|l| l["status"].clone())
            .collect();
        assert_eq!(statuses, ["timed_out", "blocked"]);
    }

    #[tokio::test]
    async fn a_cancelled_call_is_refused_while_waiting() {
        let fixture = Fixture::new(|_| {});
        let context = fixture.context(Some(person(None)));
        context.cancellation().cancel();
        let refusal = refused(fixture.clear(&context, Subject::Command, "touch a").await);
        assert_eq!(refusal.reason, Reason::Cancelled);
        let refusal = refused(fixture.clear(&context, LINE, "touch a").await);
        assert_eq!(refusal.reason, Reason::Cancelled);
        let statuses: Vec<Value> = fixture
            .lines()
            .iter()
            .map(|l| l["status"].clone())
            .collect();
        assert_eq!(statuses, ["cancelled", "blocked"]);
    }

    #[tokio::test]
    async fn an_approval_of_what_changed_meanwhile_is_refused() {
        let fixture = Fixture::new(|_| {});
        let script = fixture.root().join("s.sh");
        std::fs::write(&script, "echo one\n").unwrap();
        let edited = script.clone();
        let asker = Arc::new(Person {
            answer: Some(Approval::Accept { remember: true }),
            asked: Mutex::new(Vec::new()),
            meanwhile: Box::new(move || std::fs::write(&edited, "echo two\n").unwrap()),
        });
        let context = fixture.context(Some(asker));
        let refusal = refused(fixture.clear(&context, Subject::Command, "sh s.sh").await);
        assert_eq!(refusal.reason, Reason::Changed);
        assert_eq!(fixture.lines()[0]["status"], "blocked");
    }

    #[tokio::test]
    async fn a_hidden_line_is_never_shown_to_an_approver() {
        let fixture = Fixture::new(|config| config.ask_fallback = AskFallback::Allow);
        let asker = person(Some(Approval::Accept { remember: false }));
        let context = fixture.context(Some(asker.clone()));
        let refusal = refused(fixture.clear(&context, HIDDEN_LINE, "touch a").await);
        assert_eq!(refusal.reason, Reason::Hidden);
        let refusal = refused(fixture.clear(&context, HIDDEN_LINE, "rm -f a").await);
        assert_eq!(refusal.reason, Reason::Hidden);
        assert_eq!(refusal.decision, "deny");
        assert!(asker.asked.lock().unwrap().is_empty());
        let lines = fixture.lines();
        assert_eq!(lines.len(), 2);
        assert!(lines.iter().all(|line| line["command"] == "[hidden input]"));
        ran(fixture.clear(&context, HIDDEN_LINE, "echo hi").await);
    }

    #[tokio::test]
    async fn a_saved_command_is_saved_and_a_saved_line_is_only_remembered() {
        let fixture = Fixture::new(|_| {});
        let context = fixture.context(Some(person(Some(Approval::Save))));
        let cleared = ran(fixture.clear(&context, LINE, "touch b").await);
        let policy = fixture.root().join("policy.toml");
        assert_eq!(cleared.saved_note, None);
        assert_eq!(std::fs::read_to_string(&policy).unwrap(), RULES);
        // A command's save is tried (here the file's own ask rule for
        // `touch` keeps the saved rule from loading, which the note says).
        let cleared = ran(fixture.clear(&context, Subject::Command, "touch a").await);
        let note = cleared.saved_note.unwrap();
        assert!(
            note.starts_with("[approval not saved as a rule: "),
            "{note}"
        );
        assert_eq!(std::fs::read_to_string(&policy).unwrap(), RULES);
    }

    #[tokio::test]
    async fn a_refusal_whose_line_cannot_be_written_says_so() {
        let fixture = Fixture::new(|config| {
            config.audit = Some(Arc::new(
                AuditLog::open(Path::new("/dev/full"), "off").unwrap(),
            ));
        });
        let refusal = refused(
            fixture
                .clear(&fixture.context(None), Subject::Command, "rm -f x")
                .await,
        );
        assert!(refusal.audited.is_err());
        let refusal = refused(fixture.clear(&fixture.context(None), LINE, "rm -f x").await);
        assert!(refusal.audited.is_err());
    }

    /// The spawn gets the path that was checked, not one that a symlink
    /// could redirect after the check.
    #[test]
    fn a_command_runs_in_the_canonical_directory_that_was_checked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let real = root.join("real");
        std::fs::create_dir(&real).unwrap();
        let link = root.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let roots = [root.clone()];
        let context = ExecutionContext::new(&link);
        let found = |dir: Result<SessionDir, String>| dir.map(|dir| dir.canonical);
        assert_eq!(found(working_dir(None, &context, &roots)), Ok(real.clone()));
        let elsewhere = ExecutionContext::new(&root);
        assert_eq!(
            found(working_dir(Some(&link), &elsewhere, &roots)),
            Ok(real)
        );
        let outside = tempfile::tempdir().unwrap();
        let message = working_dir(Some(outside.path()), &context, &roots).unwrap_err();
        assert!(message.contains("outside the allowed roots"), "{message}");
    }
}
