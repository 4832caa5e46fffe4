//! Asking, for the policy gate (`gate.rs`): the context's `Approver` one
//! question at a time per session while reporting progress, withdrawing
//! the question on cancellation or `--ask-timeout`, the question's text,
//! and what a remembered approval is keyed by.

use std::time::{Duration, Instant};

use exec_policy::Denial;
use tool_core::{Approval, Approver, ExecutionContext, ProgressUpdate};

use crate::question;

/// How a wait for the person ended.
pub(crate) enum Waiting {
    /// The person answered (or the client said nobody can be asked).
    Answer(Approval),
    /// `--ask-timeout` passed unanswered; the question was withdrawn.
    TimedOut,
    /// The call was cancelled first; the question was withdrawn.
    CallCancelled,
}

/// The session's turn to ask: one question is open at a time, the others
/// wait for it before theirs is put.
#[derive(Default)]
struct AskTurn(tokio::sync::Mutex<()>);

/// Says the call has decided, and asks nothing (more): calls that came
/// after it need not wait for it to put their questions.
pub(crate) fn done_deciding(context: &ExecutionContext) {
    if let Some(arrival) = context.arrival() {
        arrival.pass();
    }
}

/// Asks `approver`, reporting `waiting for approval` at least once a second
/// meanwhile (while waiting for the turn, too); `--ask-timeout` counts from
/// when the question is put, and it and the call's cancellation withdraw
/// the question (the ask future is dropped).
///
/// The turn goes in the order the calls came when the transport keeps one
/// ([`ExecutionContext::arrival`]): a question waits until every earlier
/// call has asked or decided not to, so questions are never put in the
/// order the calls' tasks happen to reach them.
pub(crate) async fn wait_for_approval(
    ask_timeout: Duration,
    context: &ExecutionContext,
    approver: &dyn Approver,
    message: String,
) -> Waiting {
    let waited = ask_in_turn(ask_timeout, context, approver, message).await;
    done_deciding(context);
    waited
}

async fn ask_in_turn(
    ask_timeout: Duration,
    context: &ExecutionContext,
    approver: &dyn Approver,
    message: String,
) -> Waiting {
    let started = Instant::now();
    let report = || {
        context.progress().report(ProgressUpdate {
            progress: started.elapsed().as_secs_f64(),
            total: None,
            message: Some("waiting for approval".to_owned()),
        });
    };
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    if let Some(arrival) = context.arrival() {
        let earlier_done = arrival.first();
        tokio::pin!(earlier_done);
        loop {
            tokio::select! {
                () = &mut earlier_done => break,
                () = context.cancellation().cancelled() => return Waiting::CallCancelled,
                _ = ticker.tick() => report(),
            }
        }
    }
    let turn = context.session().state::<AskTurn>();
    let take_turn = turn.0.lock();
    tokio::pin!(take_turn);
    let _turn = loop {
        tokio::select! {
            turn = &mut take_turn => break turn,
            () = context.cancellation().cancelled() => return Waiting::CallCancelled,
            _ = ticker.tick() => report(),
        }
    };
    let ask = approver.ask(message);
    tokio::pin!(ask);
    let deadline = tokio::time::sleep(ask_timeout);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            answer = &mut ask => return Waiting::Answer(answer),
            () = context.cancellation().cancelled() => return Waiting::CallCancelled,
            () = &mut deadline => return Waiting::TimedOut,
            _ = ticker.tick() => report(),
        }
    }
}

/// The names of the variables `command` uses (`$NAME`, `${NAME...}`).
fn used_variables(command: &str) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    let bytes = command.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' {
            let start = i + 1 + usize::from(bytes.get(i + 1) == Some(&b'{'));
            let end = bytes[start.min(bytes.len())..]
                .iter()
                .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
                .map_or(bytes.len(), |n| start + n);
            if end > start
                && let Some(name) = command.get(start..end)
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && !names.contains(&name)
            {
                names.push(name);
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    names
}

/// What an approval binds to: the key a remembered approval is kept by,
/// and the effects it was given for.
pub(crate) struct Binding {
    /// The command text, the working directory, the values of the session
    /// variables the command uses, and the effect of every program it
    /// runs ([`crate::binding::command_keys`]: resolved executable, argv,
    /// directory, the environment that matters, content digests of the
    /// executable and its script).
    pub(crate) key: String,
    /// The effect of each program it runs, as found before it runs: what
    /// the judge of its execs holds each exec to.
    pub(crate) effects: Vec<exec_policy::ApprovalKey>,
    /// The names the command assigns (their values reach its programs).
    pub(crate) assigned: Vec<String>,
}

/// The binding of `command` run from `cwd` with `vars`.
pub(crate) fn binding(
    analyzer: &exec_policy::Analyzer,
    command: &str,
    cwd: &std::path::Path,
    vars: &std::collections::HashMap<String, String>,
) -> Binding {
    let effects = crate::binding::command_keys(analyzer, command, cwd, vars);
    Binding {
        key: text_key(command, cwd, vars, &effects),
        effects,
        assigned: crate::binding::assigned_names(command),
    }
}

/// What a remembered approval is keyed by ([`Binding::key`]).
pub(crate) fn approval_key(
    analyzer: &exec_policy::Analyzer,
    command: &str,
    cwd: &std::path::Path,
    vars: &std::collections::HashMap<String, String>,
) -> String {
    binding(analyzer, command, cwd, vars).key
}

/// The effects an approval was given for, as the judge of execs needs
/// them (docs/policy.md, "Approvals at run time").
#[derive(Debug, Clone, Default)]
pub(crate) struct Effects {
    /// One key per program the command runs, as found before it ran.
    pub(crate) keys: Vec<exec_policy::ApprovalKey>,
    /// The names the command assigns.
    pub(crate) assigned: Vec<String>,
}

/// Approvals given with `remember: true`, for the server's life, by key
/// ([`Binding::key`]): shared by the gate and the judges of execs.
#[derive(Debug, Default)]
pub(crate) struct Remembered(std::sync::Mutex<std::collections::HashSet<String>>);

impl Remembered {
    /// Whether an approval for `key` is remembered.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(key)
    }

    /// Remembers an approval for `key`.
    pub(crate) fn insert(&self, key: String) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key);
    }
}

/// [`approval_key`] from the effects already found.
pub(crate) fn text_key(
    command: &str,
    cwd: &std::path::Path,
    vars: &std::collections::HashMap<String, String>,
    effects: &[exec_policy::ApprovalKey],
) -> String {
    let used: Vec<(&str, Option<&String>)> = used_variables(command)
        .into_iter()
        .map(|name| (name, vars.get(name)))
        .collect();
    serde_json::json!([command, cwd.to_string_lossy(), used, format!("{effects:?}")]).to_string()
}

/// The question put to the person: the command, the working directory and
/// the rule first, each rendered safe to show ([`crate::question`]), then
/// warnings about what the command holds that the eye could miss, then why
/// the command is uncertain. `command` is already redacted, so the cap
/// never cuts a secret in two.
pub(crate) fn approval_message(
    command: &str,
    cwd: &std::path::Path,
    denial: &Denial,
    vars: &std::collections::HashMap<String, String>,
) -> String {
    let unknown: Vec<String> = used_variables(command)
        .into_iter()
        .filter(|name| !vars.contains_key(*name) && *name != "HOME")
        .map(|name| format!("${name}"))
        .collect();
    let mut why = Vec::new();
    if denial.source == exec_policy::RuleSource::PolicyFile {
        why.push("the policy file asks for approval of this command".to_owned());
    }
    if !unknown.is_empty() {
        let verb = if unknown.len() == 1 { "is" } else { "are" };
        let more = if unknown.len() > 8 { ", …" } else { "" };
        why.push(format!(
            "{}{more} {verb} not known here, so what it touches is known only when it runs",
            unknown[..unknown.len().min(8)].join(", ")
        ));
    }
    if why.is_empty() {
        why.push("what it runs or touches is known only when it runs".to_owned());
    }
    let why = why.join("; ");
    let shown_command = question::show(command, question::COMMAND_CAP);
    let shown_cwd = question::show(&cwd.to_string_lossy(), question::FIELD_CAP);
    let rule = question::show(&denial.rule_id, question::FIELD_CAP);
    let reason = question::show(&denial.reason, question::FIELD_CAP);
    let mut warnings = question::warnings("command", &shown_command);
    warnings.extend(question::warnings("working directory", &shown_cwd));
    let warnings: String = warnings.iter().map(|line| format!("{line}\n")).collect();
    format!(
        "Run this command?\n\nCommand: {}\nWorking directory: {}\nRule: {} ({})\n{warnings}Why: {why}\n\nAccept runs it once; with \"remember\" the same command runs unasked here for the rest of the session, as long as what it runs is unchanged (the program, its arguments, the directory, the environment it sees and the scripts it runs); with \"save\" it is also written to the policy file as an allow rule, so it runs unasked after restarts too.",
        shown_command.text, shown_cwd.text, rule.text, reason.text,
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn denial(rule: &str, reason: &str) -> Denial {
        Denial {
            rule_id: rule.to_owned(),
            source: exec_policy::RuleSource::PolicyFile,
            reason: reason.to_owned(),
            command: String::new(),
            fallback: false,
            matched: None,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the command, directory, rule and reason hold, the
        /// question's lines hold nothing that hides or moves text, the
        /// command is one line, and the whole is bounded.
        #[test]
        fn any_question_is_safe_to_show(
            command in crate::question::tests::any_text(),
            cwd in crate::question::tests::any_text(),
            rule in crate::question::tests::any_text(),
            reason in crate::question::tests::any_text(),
            repeat in 1..40usize,
        ) {
            let command = command.repeat(repeat);
            let message = approval_message(
                &command,
                std::path::Path::new(&cwd),
                &denial(&rule, &reason),
                &std::collections::HashMap::new(),
            );
            prop_assert!(
                !message.chars().any(|c| c != '\n' && crate::question::tests::forbidden(c)),
                "{message:?}"
            );
            let lines: Vec<&str> = message.lines().collect();
            prop_assert_eq!(lines[0], "Run this command?");
            prop_assert!(lines[2].starts_with("Command: "));
            prop_assert!(lines[3].starts_with("Working directory: "));
            prop_assert!(lines[4].starts_with("Rule: "));
            prop_assert!(message.chars().count() < 5_000, "{}", message.chars().count());
        }
    }

    #[test]
    fn the_decisive_fields_come_first_and_warnings_follow() {
        let message = approval_message(
            "echo hi\nrm -rf /h\u{43e}me",
            std::path::Path::new("/w"),
            &denial("r", "because"),
            &std::collections::HashMap::new(),
        );
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines[2], "Command: echo hi⏎rm -rf /h\u{43e}me");
        assert_eq!(lines[3], "Working directory: /w");
        assert_eq!(lines[4], "Rule: r (because)");
        assert!(lines[5].contains("2 lines"), "{message}");
        assert!(lines[6].contains("non-ASCII"), "{message}");
    }

    #[test]
    fn used_variables_are_named_once_in_order() {
        assert_eq!(
            used_variables(r#"rm -rf "$X"/* ${Y:-a} $X $1 $$ ${Z}x"#),
            ["X", "Y", "Z"]
        );
        assert!(used_variables("echo plain").is_empty());
    }

    #[test]
    fn an_approval_key_holds_the_values_of_the_variables_used() {
        let cwd = std::path::Path::new("/p");
        let vars = |value: &str| {
            std::collections::HashMap::from([
                ("X".to_owned(), value.to_owned()),
                ("UNUSED".to_owned(), value.to_owned()),
            ])
        };
        let approval_key =
            |command: &str, cwd: &std::path::Path, vars: &_| text_key(command, cwd, vars, &[]);
        let key = approval_key("rm -rf \"$X\"", cwd, &vars("a"));
        assert_eq!(key, approval_key("rm -rf \"$X\"", cwd, &vars("a")));
        assert_ne!(key, approval_key("rm -rf \"$X\"", cwd, &vars("b")));
        assert_ne!(
            key,
            approval_key("rm -rf \"$X\"", std::path::Path::new("/q"), &vars("a"))
        );
        assert_ne!(key, approval_key("rm -rf  \"$X\"", cwd, &vars("a")));
        // A variable the command does not use changes nothing.
        let mut other = vars("a");
        other.insert("UNUSED".to_owned(), "z".to_owned());
        assert_eq!(key, approval_key("rm -rf \"$X\"", cwd, &other));
    }
}
