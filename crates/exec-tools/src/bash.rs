//! The `Bash` tool: one command, in the foreground or the background.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use exec_policy::{
    CommandFacts, GitCommit, WorkdirError, is_within_roots, nearest_existing_ancestor,
};
use schemars::JsonSchema;
use serde::Deserialize;
use shell_runtime::{
    EndRequest, ExitInfo, ShellProcess, ShellStatus, SpawnSpec, SpillFile, Stream,
    TERMINAL_COLUMNS, TERMINAL_ROWS,
};
use tool_core::{Answer, ExecutionContext, ProgressUpdate, Tool, ToolAnnotations, ToolCategory};

use crate::audit::{AuditEntry, AuditError, AuditLog, with_notes};
use crate::carried_state::{
    CaptureError, CarriedStateSlot, STATE_FD, STATELESS_BUILTINS, StateChannel, Vars,
    may_change_state, wrap_command,
};
use crate::environment::{DEFAULT_TIMEOUT, ExecEnvironment, OUTPUT_FILE_CAP};
use crate::exec_judge::{CallContext, Checks};
use crate::gate::{self, Reason};
use crate::input_wait::input_wait;
use crate::metadata::{BashMetadata, capped_command};
use crate::render::{Rendered, render_streams};

/// A `Bash` answer.
pub(crate) type BashAnswer = Answer<BashMetadata>;

/// Grace between SIGINT (or SIGTERM) and SIGKILL when a call is cancelled.
const INTERRUPT_GRACE: Duration = Duration::from_secs(2);

/// The note for a command that read the empty stdin and then failed or
/// printed nothing.
const EMPTY_STDIN_NOTE: &str = "[stdin is empty: pass input with a here-doc, a file, or tty: true]";

/// Arguments of `Bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashParams {
    /// The command to run with `bash -c`.
    #[schemars(length(min = 1))]
    pub command: String,
    /// What the command does, in 5-10 words (for the person watching; never run).
    pub description: Option<String>,
    /// Run this command in this directory (relative to the session's directory, or absolute; inside the allowed roots). The session's directory stays as it was.
    pub workdir: Option<String>,
    /// Timeout in milliseconds; the schema states its bounds and the
    /// foreground default (`timeout_description`).
    #[schemars(range(min = MIN_TIMEOUT_MS, max = MAX_TIMEOUT_MS), description = timeout_description())]
    pub timeout: Option<u64>,
    /// Start the command in the background and return at once with its id.
    #[serde(default)]
    #[schemars(default = "default_false")]
    pub run_in_background: bool,
    /// Run under a terminal: only for programs that prompt or are
    /// interactive; the schema states the terminal's size (`tty_description`).
    #[serde(default)]
    #[schemars(default = "default_false", description = tty_description())]
    pub tty: bool,
}

fn default_false() -> bool {
    false
}

/// The shortest `timeout` a call may give, in milliseconds.
const MIN_TIMEOUT_MS: u64 = 1000;
/// The longest `timeout` a call may give, in milliseconds.
const MAX_TIMEOUT_MS: u64 = 600_000;

/// `timeout`'s description, from the bounds and the default it states.
fn timeout_description() -> String {
    format!(
        "Timeout in milliseconds ({MIN_TIMEOUT_MS}-{MAX_TIMEOUT_MS}). Foreground default {}; in the background, only when given.",
        DEFAULT_TIMEOUT.as_millis()
    )
}

/// `tty`'s description, from the terminal size it states.
fn tty_description() -> String {
    format!(
        "Run under a terminal ({}): only for programs that prompt or are interactive (REPLs, `read`, ssh/password prompts, pagers, editors). Answers when the program waits for input; talk to it with `WriteStdin`.",
        terminal_size()
    )
}

/// The size of the terminals `tty: true` commands get, as `COLUMNSxROWS`.
fn terminal_size() -> String {
    format!("{TERMINAL_COLUMNS}x{TERMINAL_ROWS}")
}

/// Runs shell commands.
#[derive(Debug, Clone)]
pub struct BashTool {
    exec: Arc<ExecEnvironment>,
}

impl BashTool {
    /// The tool over shared state.
    pub fn new(exec: Arc<ExecEnvironment>) -> Self {
        Self { exec }
    }
}

/// The tool's description, stating the configured foreground default
/// timeout and answer size, the `timeout` bounds and the terminal size.
fn description(default_timeout: Duration, max_output_chars: usize) -> String {
    let default_ms = default_timeout.as_millis();
    let terminal = terminal_size();
    format!(
        "Runs a bash command and returns its output (stdout, then `[stderr]` and stderr).\n\
\n\
- Each call starts a fresh `bash -c`, but the working directory and exported variables a foreground command leaves (`cd`, `export`) carry over to later calls, foreground and background; when the directory changes the answer ends with `[cwd now PATH]`.\n\
- `workdir` runs one command elsewhere without moving the session: prefer it to `cd DIR && ...` when later commands should stay where they are.\n\
- Quote paths that contain spaces or special characters: `cd \"my dir\"`. Chain dependent steps with `&&`, independent ones with `;`.\n\
- Foreground commands time out after {default_ms} ms unless `timeout` says otherwise ({MIN_TIMEOUT_MS}-{MAX_TIMEOUT_MS}); on timeout every process the command started is ended.\n\
- For servers, watchers and anything long, set `run_in_background: true`: the call returns a `bash_id` at once; read new output with BashOutput (to wait for a server to be up, BashOutput `until` its ready line or its port, with a `wait_ms`) and stop it with KillShell. Background jobs (`cmd &`) left by a foreground command are ended when it returns.\n\
- Output over {max_output_chars} characters keeps its head and tail; the full output is saved to a file named in the answer. ANSI colour codes and progress-bar redraws are removed.\n\
- Commands run without a terminal: stdin is empty, editors fail and pagers print. For everything scriptable stay so (use `git --no-pager`, `-y` flags, here-docs and the like).\n\
- `tty: true` is for what cannot be scripted: prompts (`read`, a password or host-key question, `git add -p`), REPLs (python3, node, psql), full-screen programs (less, vim, top). The command runs under a {terminal} terminal (stdout and stderr merged); when it waits for input the call answers with the output so far and `Waiting for input: shell_xxxxxxxx`, and it goes on as a background shell: type into it with WriteStdin, read its screen with BashOutput `screen: true`, end it with KillShell. Its `cd`/`export` do not carry over, and without an explicit `timeout` it runs until it exits or is killed; one that neither exits nor waits for input (a server, a `sleep`) answers after {default_ms} ms at most with the output so far and `[still running after MS ms: continues as background shell shell_xxxxxxxx]`, and goes on in the background.\n\
- Dangerous commands (recursive deletes of system or home directories, disk formatting, fork bombs) are refused.\n\
- Commands whose effect is known only when they run (downloaded or decoded scripts piped into a shell, `rm -rf \"$VAR\"`) and those the policy file names may need the person's approval; the call waits for the answer, and a refusal says why."
    )
}

#[async_trait]
impl Tool for BashTool {
    type Params = BashParams;
    type Metadata = BashMetadata;

    fn name(&self) -> &str {
        "Bash"
    }

    fn description(&self) -> String {
        let config = &self.exec.config;
        let description = description(config.default_timeout, config.max_output_chars);
        match &self.exec.config.description_note {
            Some(note) => format!("{description}\n- {note}"),
            None => description,
        }
    }

    fn category(&self) -> ToolCategory {
        ToolCategory::Execution
    }

    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations {
            title: Some("Run a shell command".to_owned()),
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(false),
            open_world_hint: Some(true),
        }
    }

    async fn execute(&self, context: &ExecutionContext, params: BashParams) -> BashAnswer {
        let id = None::<String>;
        let answer = self.answer(context, params).await;
        // What the audit log could not do since the last answer.
        with_notes(
            self.exec.config.audit.as_deref(),
            id.as_deref(),
            answer,
            |m| m.audit_error = Some(true),
        )
    }
}

impl BashTool {
    async fn answer(&self, context: &ExecutionContext, params: BashParams) -> BashAnswer {
        let exec = &self.exec;
        let carried = context.session().state::<CarriedStateSlot>();
        let state = carried.lock().clone();
        let shown_command = exec.redact(&params.command);
        let meta = |result: BashAnswer| {
            result.meta(|m| {
                m.command = Some(capped_command(&shown_command));
                m.description.clone_from(&params.description);
            })
        };
        let place = match self.place(context, &carried, state.cwd.as_deref(), &params) {
            Ok(place) => place,
            Err(answer) => return meta(*answer),
        };
        // Every answer of this call ends with the moved directory's note.
        let moved_note = place.moved_note.clone();
        let meta = |result: BashAnswer| meta(with_note(result, moved_note.as_deref()));
        let vars = state.environment(exec.base_env());
        let request = gate::Request {
            subject: gate::Subject::Command,
            text: &params.command,
            cwd: &place.cwd,
            vars: vars
                .iter()
                .filter_map(|(name, value)| Some((name.clone(), value.to_str()?.to_owned())))
                .collect(),
        };
        let cleared = match gate::clear(exec, context, request).await {
            gate::Verdict::Run(cleared) => *cleared,
            gate::Verdict::Refused(refusal) => return meta(refused(exec, &refusal)),
        };
        let approved_by = cleared.approved_by;
        let rule = cleared.rule();
        let saved_note = cleared.saved_note.clone();
        let answer = self
            .run(context, &carried, &params, (place, vars), cleared)
            .await;
        let answer = with_note(meta(answer), saved_note.as_deref());
        match approved_by {
            Some(by) => answer.meta(|m| {
                m.decision = Some("ask");
                m.rule = rule;
                m.approved_by = Some(by);
            }),
            None => answer,
        }
    }

    /// Where the call runs: the session's directory (moved up to an
    /// existing ancestor when it was deleted, said in a note), or `workdir`.
    fn place(
        &self,
        context: &ExecutionContext,
        carried: &CarriedStateSlot,
        carried_cwd: Option<&std::path::Path>,
        params: &BashParams,
    ) -> Result<Place, Box<BashAnswer>> {
        let exec = &self.exec;
        // The command runs in the canonical path that was checked, so a
        // symlink on the way that changes after the check cannot move it.
        let session_dir = match gate::working_dir(carried_cwd, context, &exec.config.roots) {
            Ok(found) => found,
            Err(message) => {
                if carried_cwd.is_some() {
                    carried.lock().cwd = None;
                }
                return Err(Box::new(BashAnswer::fail(message)));
            }
        };
        let moved_note = session_dir.moved.map(|(gone, ancestor)| {
            let note = format!(
                "[cwd {} no longer exists: now in {}]",
                exec.redact(&gone.to_string_lossy()),
                exec.redact(&ancestor.to_string_lossy())
            );
            carried.lock().cwd = Some(ancestor);
            note
        });
        let cwd = gate::call_dir(
            &session_dir.canonical,
            params.workdir.as_deref(),
            &exec.config.roots,
        );
        match cwd {
            Ok(cwd) => Ok(Place {
                cwd,
                // With `workdir` the session's directory stays where it is.
                keeps_cwd: params.workdir.is_some(),
                moved_note,
            }),
            Err(message) => Err(Box::new(with_note(
                BashAnswer::fail(message),
                moved_note.as_deref(),
            ))),
        }
    }

    /// Runs a cleared command: the dry run's answer, or the `running` line
    /// and then the command in the background, under a terminal or in the
    /// foreground.
    async fn run(
        &self,
        context: &ExecutionContext,
        carried: &CarriedStateSlot,
        params: &BashParams,
        (place, vars): (Place, Vars),
        cleared: gate::Cleared,
    ) -> BashAnswer {
        let exec = &self.exec;
        let approved_by = cleared.approved_by;
        if context.dry_run() {
            return dry_run(exec, &params.command, cleared.decided, approved_by);
        }
        let command = match &exec.config.coauthor {
            Some(coauthor) => {
                add_coauthor(&params.command, &cleared.analysis.git_commits, coauthor)
            }
            None => params.command.clone(),
        };
        // Every exec of the command is judged again as it runs.
        // A background command's execs are asked about by nobody: its call
        // answers at once.
        let asker = (!params.run_in_background).then_some(context);
        let checks = exec_checks(exec, asker, cleared.decided.call, cleared.effects);
        // Once the call has answered, nobody can be asked about its execs.
        let asking = checks.asking.clone();
        // A background shell's id is taken now, so the decision line names it.
        let reserved = params
            .run_in_background
            .then(|| exec.owners.reserve(&exec.manager, context.principal()));
        let entry = AuditEntry {
            approved_by,
            bash_id: reserved.as_ref().map(|id| id.id().to_owned()),
            ..cleared.decided
        };
        let ended = match log_running(exec, entry) {
            Ok(ended) => ended,
            Err(error) => return audit_refusal(&error),
        };
        let Place {
            cwd,
            keeps_cwd,
            moved_note,
        } = place;
        if params.run_in_background || params.tty {
            let run = Prepared {
                command,
                cwd,
                vars,
                timeout: params.timeout.map(Duration::from_millis),
                checks,
                ended,
            };
            let answer = match reserved {
                Some(reserved) => start_background(exec, reserved, run, params.tty).await,
                None => run_tty(exec, context, run).await,
            };
            asking.close();
            return answer.meta(|m| m.timeout_ms = params.timeout);
        }
        let timeout = params
            .timeout
            .map_or(exec.config.default_timeout, Duration::from_millis);
        // The moved directory's note is said inside the answer's budget.
        let budget = exec.config.max_output_chars.saturating_sub(
            moved_note
                .as_ref()
                .map_or(0, |note| note.chars().count() + 1),
        );
        let foreground = Foreground {
            command,
            cwd,
            keeps_cwd,
            vars,
            timeout,
            facts: cleared.analysis.facts,
            budget,
            checks,
            ended,
        };
        let answer = run_foreground(exec, context, carried, foreground).await;
        asking.close();
        answer.meta(|m| {
            m.timeout_ms = Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        })
    }
}

/// A dry run's answer, once its line (`dry_run`) is written.
fn dry_run(
    exec: &ExecEnvironment,
    command: &str,
    decided: AuditEntry,
    approved_by: Option<&'static str>,
) -> BashAnswer {
    let written = exec.config.audit.as_deref().map_or(Ok(()), |log| {
        log.write(&AuditEntry {
            status: Some("dry_run".to_owned()),
            approved_by,
            ..decided
        })
    });
    match written {
        Ok(()) => BashAnswer::ok(format!("[Dry Run] Would execute: {}", exec.redact(command)))
            .meta(|m| m.dry_run = Some(true)),
        Err(error) => audit_refusal(&error),
    }
}

/// Writes the `running` line from `entry` (the decision line with who
/// approved and the reserved id) before anything runs; the log and the
/// line its end is written from. Without a log line, nothing runs.
fn log_running(
    exec: &ExecEnvironment,
    entry: AuditEntry,
) -> Result<Option<(Arc<AuditLog>, AuditEntry)>, AuditError> {
    let Some(log) = exec.config.audit.clone() else {
        return Ok(None);
    };
    log.write(&AuditEntry {
        status: Some("running".to_owned()),
        ..entry.clone()
    })?;
    // Also the end line of a shell that could not start names its id.
    Ok(Some((
        log,
        AuditEntry {
            event: "ended",
            ..entry
        },
    )))
}

/// Where a call runs, as [`BashTool::place`] found it.
struct Place {
    /// Canonical, checked.
    cwd: PathBuf,
    /// Whether the session's directory stays as it was (`workdir` given).
    keeps_cwd: bool,
    /// The session's directory was deleted and moved up: the answer's last line.
    moved_note: Option<String>,
}

/// A refused command's answer: the reason, and the metadata every refusal
/// carries (`status`, `decision`, `rule`), with a note when its audit line
/// could not be written.
fn refused(exec: &ExecEnvironment, refusal: &gate::Refusal) -> BashAnswer {
    let denial = &refusal.denial;
    let message = match refusal.reason {
        Reason::Denied | Reason::Hidden => denial.message(),
        Reason::CannotAsk => format!("{}. {HOW_TO_ALLOW}", denial.ask_message()),
        Reason::Declined => format!(
            "Command blocked: approval declined (rule `{}`: {}) in `{}`",
            denial.rule_id, denial.reason, denial.command
        ),
        // Worded apart from a refusal by the person, who may never have seen it.
        Reason::TimedOut => format!(
            "Command blocked: the approval question timed out unanswered after {} ms \
             (`--ask-timeout`; rule `{}`: {}) in `{}`; nothing ran",
            exec.config.ask_timeout.as_millis(),
            denial.rule_id,
            denial.reason,
            denial.command
        ),
        // The person approved what they were shown, which is no longer
        // what would run.
        Reason::Changed => format!(
            "Command blocked: what `{}` runs changed while the question was open \
             (a script's content, a link, the program `PATH` finds, or the environment; \
             rule `{}`); nothing ran. Run it again to be asked about what it runs now",
            denial.command, denial.rule_id
        ),
        Reason::Cancelled => {
            let answer = BashAnswer::fail(
                "Command not run: the call was cancelled while waiting for approval",
            )
            .meta(|m| {
                m.status = Some("cancelled");
                m.decision = Some("ask");
            });
            return with_audit_failure(answer, refusal.audited.as_ref());
        }
    };
    let answer = BashAnswer::fail(exec.redact(&message)).meta(|m| {
        m.status = Some("blocked");
        m.decision = Some(refusal.decision);
        m.rule = Some(denial.rule_id.clone());
    });
    with_audit_failure(answer, refusal.audited.as_ref())
}

/// How an `ask` command refused for want of someone to ask can be allowed.
const HOW_TO_ALLOW: &str = "The person cannot be asked here (the MCP client declared no elicitation or refused the question, \
or this is `agent-exec run`). \
To allow it: use an MCP client that can ask its user (elicitation, or input-required on protocol 2026-07-28), \
start agent-exec with `--ask-fallback allow`, or exempt it with an `allow` rule in the policy file \
(`agent-exec policy check -- COMMAND` shows the rule)";

/// The line for the end of a command, from its shell.
fn ended_entry(entry: &AuditEntry, shell: &ShellProcess, bash_id: Option<&str>) -> AuditEntry {
    let bytes = |stream| shell.totals(stream).0;
    AuditEntry {
        status: Some(shell.status().as_str().to_owned()),
        exit_code: shell
            .exit()
            .filter(|_| shell.end_request() != Some(EndRequest::Timeout))
            .map(|exit| exit.code),
        duration_ms: Some(u64::try_from(shell.duration().as_millis()).unwrap_or(u64::MAX)),
        output_bytes: Some(bytes(Stream::Stdout).saturating_add(bytes(Stream::Stderr))),
        bash_id: bash_id.map(str::to_owned),
        ..entry.clone()
    }
}

/// Writes the end line when the background shell `shell` ends.
fn audit_when_ended(
    ended: Option<(Arc<AuditLog>, AuditEntry)>,
    shell: Arc<ShellProcess>,
    id: String,
) {
    if let Some((log, entry)) = ended {
        tokio::spawn(async move {
            shell.wait().await;
            // Nobody is waiting for an answer: a line that cannot be written
            // is queued and flagged in the shell's next answer.
            let _ = log.write_ended(&ended_entry(&entry, &shell, Some(&id)));
        });
    }
}

/// The end line of a command that could not start.
fn audit_not_started(ended: Option<(Arc<AuditLog>, AuditEntry)>) {
    if let Some((log, entry)) = ended {
        // The answer already says the command did not start; a line that
        // cannot be written is queued for a retry.
        let _ = log.write_ended(&AuditEntry {
            status: Some("error".to_owned()),
            ..entry
        });
    }
}

/// `answer`, noting that its audit line could not be written.
fn with_audit_failure(answer: BashAnswer, written: Result<&(), &AuditError>) -> BashAnswer {
    match written {
        Ok(()) => answer,
        Err(error) => {
            let text = format!("{}\n[{}]", answer.text(), audit_message(error));
            BashAnswer::fail(text).meta(|m| m.audit_error = Some(true))
        }
    }
}

/// `answer`, noting that the end line of its command could not be written
/// yet: it is queued and retried, the answer is otherwise as it was.
fn with_unlogged_end(answer: BashAnswer, error: &AuditError) -> BashAnswer {
    let mut answer = answer.meta(|m| m.audit_error = Some(true));
    let note = format!(
        "[audit: the end of this command could not be logged: {}; will retry]",
        crate::error_chain(&error.source)
    );
    let text = if answer.success {
        &mut answer.output
    } else {
        answer.error.get_or_insert_with(String::new)
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&note);
    answer
}

fn audit_message(error: &AuditError) -> String {
    format!(
        "the audit log cannot be written: {}",
        crate::error_chain(error)
    )
}

/// The answer when the decision line could not be written: nothing ran
/// (status `blocked`, as for any command refused before it starts).
fn audit_refusal(error: &AuditError) -> BashAnswer {
    BashAnswer::fail(format!(
        "Command blocked: nothing ran because {}",
        audit_message(error)
    ))
    .meta(|m| {
        m.status = Some("blocked");
        m.audit_error = Some(true);
    })
}

/// The empty-stdin note, when the command read the stdin it was given
/// (empty without a terminal) and then failed or printed nothing.
fn empty_stdin_note(
    facts: CommandFacts,
    shell: &ShellProcess,
    exit_code: Option<i32>,
) -> Option<String> {
    if !facts.reads_inherited_stdin {
        return None;
    }
    let silent = [Stream::Stdout, Stream::Stderr]
        .into_iter()
        .all(|stream| shell.totals(stream).0 == 0);
    exit_code
        .is_some_and(|code| code != 0 || silent)
        .then(|| EMPTY_STDIN_NOTE.to_owned())
}

/// `result` with `note` as its last line.
fn with_note(mut result: BashAnswer, note: Option<&str>) -> BashAnswer {
    let Some(note) = note else { return result };
    let text = match result.error.as_mut() {
        Some(error) if !result.success => error,
        _ => &mut result.output,
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(note);
    result
}

/// The network note of a foreground command, from all it printed.
fn network_note(exec: &ExecEnvironment, command: &str, shell: &ShellProcess) -> Option<String> {
    crate::network::network_note(exec, command, shell, || printed(shell))
}

/// All a foreground command printed, stdout then stderr.
fn printed(shell: &ShellProcess) -> String {
    let mut output = shell.snapshot(Stream::Stdout).render();
    output.push_str(&shell.snapshot(Stream::Stderr).render());
    output
}

/// Adds `--trailer "Co-authored-by: ..."` after each of `commits`, the
/// top-level `git commit`s the analysis of `command` found.
fn add_coauthor(command: &str, commits: &[GitCommit], coauthor: &str) -> String {
    let mut commits = commits.to_vec();
    commits.sort_by_key(|commit| std::cmp::Reverse(commit.insert_at));
    let trailer = format!(
        " --trailer {}",
        crate::quote::quote(&format!("Co-authored-by: {coauthor}"))
    );
    let mut out = command.to_owned();
    for commit in commits {
        if out.is_char_boundary(commit.insert_at) {
            out.insert_str(commit.insert_at, &trailer);
        }
    }
    out
}

/// The text bash runs for `command`: `exec COMMAND` when it is one
/// external program of plain words found where bash would find it, so that
/// bash replaces itself with the program as `bash -c COMMAND` does (the
/// launcher's `eval` would fork and wait instead), else `command` itself.
fn script_for(command: &str, cwd: &std::path::Path, vars: &Vars) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    if may_change_state(command, vars) {
        return None;
    }
    let program = command.split(' ').find(|word| !word.is_empty())?;
    if STATELESS_BUILTINS.contains(&program) {
        return None;
    }
    let executable = |path: &std::path::Path| {
        std::fs::metadata(path)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    };
    // Not found, bash's own message ("command not found") is kept.
    let found = if program.contains('/') {
        executable(&cwd.join(program))
    } else {
        vars.get("PATH").is_some_and(|path| {
            std::env::split_paths(path)
                .filter(|dir| dir.is_absolute())
                .any(|dir| executable(&dir.join(program)))
        })
    };
    found.then(|| format!("exec {command}"))
}

/// The judge of every exec of one Bash call's command, and where its
/// refusals go (`exec_judge.rs`); `approved`: what the person approved of
/// the command before it ran.
fn exec_checks(
    exec: &ExecEnvironment,
    asker: Option<&ExecutionContext>,
    call: u64,
    approved: Option<crate::approval::Effects>,
) -> Checks {
    let refusals = Arc::new(crate::exec_judge::Refusals::default());
    let approved = crate::exec_judge::Approved::new(approved);
    let hold = shell_runtime::TimeoutHold::new();
    let asking = crate::exec_judge::AskSlot::new(asker.and_then(|context| {
        Some(crate::exec_judge::Asking {
            approver: Arc::clone(context.approver()?),
            context: context.clone(),
            ask_timeout: exec.config.ask_timeout,
            runtime: tokio::runtime::Handle::try_current().ok()?,
        })
    }));
    let judge = exec.exec_checks.as_ref().map(|checks| {
        checks.judge(CallContext {
            refusals: Arc::clone(&refusals),
            audit: exec.config.audit.clone().map(|log| (log, call)),
            tool: "Bash",
            approved: Arc::clone(&approved),
            remembered: exec.remembered(),
            asking: asking.clone(),
            fallback_allows: exec.config.ask_fallback == crate::environment::AskFallback::Allow,
            hold: Arc::clone(&hold),
            redactions: Arc::clone(&exec.redactions),
        })
    });
    Checks {
        judge,
        refusals,
        hold: Some(hold),
        asking,
        approved,
    }
}

fn base_spec(
    exec: &ExecEnvironment,
    command: String,
    cwd: PathBuf,
    vars: &Vars,
    checks: &Checks,
) -> SpawnSpec {
    let mut vars = vars.clone();
    if let Some(tmpdir) = &exec.config.tmpdir {
        vars.insert("TMPDIR".to_owned(), tmpdir.clone().into_os_string());
    }
    let script = script_for(&command, &cwd, &vars);
    let mut spec = SpawnSpec::shell(command, cwd).with_env(vars);
    if script.is_some() {
        spec.script = script;
    }
    // bash is found with the server's PATH, so no value a command exports
    // (PATH included) can stop later calls from starting.
    spec.program.clone_from(&exec.shell_program);
    spec.replacements = Some(Arc::clone(&exec.redactions));
    spec.confinement.clone_from(&exec.config.confinement);
    spec.cgroup_limits = exec.config.command_limits;
    spec.exec_judge.clone_from(&checks.judge);
    spec.timeout_hold.clone_from(&checks.hold);
    spec
}

/// A command's two spill files, taking their bytes from the server's budget.
fn spill_pair(exec: &ExecEnvironment, stem: &std::path::Path) -> (SpillFile, SpillFile) {
    // Room for this command's files, before it writes any: old files that
    // may go (see `keep_files`) go now when the budget is nearly spent.
    exec.keep_files(None, &[]);
    let spill = |extension: &str| SpillFile {
        path: stem.with_extension(extension),
        cap_bytes: OUTPUT_FILE_CAP,
        budget: Some(exec.budget().clone()),
    };
    (spill("stdout"), spill("stderr"))
}

/// A background or tty command, prepared: everything its run needs
/// besides the server and the call.
struct Prepared {
    /// What bash runs (with the co-author trailer).
    command: String,
    /// Where (canonical, checked).
    cwd: PathBuf,
    vars: Vars,
    /// The timeout the call gave, if any.
    timeout: Option<Duration>,
    checks: Checks,
    /// The log and the line its end is written from.
    ended: Option<(Arc<AuditLog>, AuditEntry)>,
}

async fn start_background(
    exec: &ExecEnvironment,
    id: shell_runtime::ReservedId<'_>,
    run: Prepared,
    tty: bool,
) -> BashAnswer {
    let Prepared {
        command,
        cwd,
        vars,
        timeout,
        checks,
        ended,
    } = run;
    let command = command.as_str();
    let vars = &vars;
    let stem = exec.next_path("background");
    let mut spec = base_spec(exec, command.to_owned(), cwd, vars, &checks);
    spec.tty = tty;
    let (stdout, stderr) = spill_pair(exec, &stem);
    spec.stdout_spill = Some(stdout);
    spec.stderr_spill = Some(stderr);
    spec.timeout = timeout;
    spec.keep_running.clone_from(&exec.config.keep_processes);
    let spills = [stem.with_extension("stdout"), stem.with_extension("stderr")];
    match exec.manager.spawn_as(id, spec).await {
        Ok((id, shell)) => {
            exec.keep_refusals(&shell, &checks);
            exec.keep_files(Some(&id), &[&spills[0], &spills[1]]);
            audit_when_ended(ended, shell, id.clone());
            BashAnswer::ok(format!(
            "Started background shell: {id}\nCommand: {}\nRead its output with BashOutput (bash_id: \"{id}\"); stop it with KillShell (shell_id: \"{id}\").",
            exec.redact(command)
        ))
        .meta(|m| {
            m.bash_id = Some(id);
            m.status = Some(ShellStatus::Running.as_str());
        })
        }
        Err(error) => {
            audit_not_started(ended);
            BashAnswer::fail(format!(
                "Cannot start the background shell: {}",
                crate::error_chain(&error)
            ))
        }
    }
}

/// A foreground command, prepared: everything its run needs besides the
/// server and the call.
struct Foreground {
    /// What bash runs (with the co-author trailer).
    command: String,
    /// Where (canonical, checked).
    cwd: PathBuf,
    /// Whether the session's directory stays as it was (`workdir` given):
    /// the command's `cd` is not carried, its `export` is.
    keeps_cwd: bool,
    vars: Vars,
    timeout: Duration,
    facts: CommandFacts,
    /// Characters the answer may take.
    budget: usize,
    checks: Checks,
    /// The log and the line its end is written from.
    ended: Option<(Arc<AuditLog>, AuditEntry)>,
}

async fn run_foreground(
    exec: &ExecEnvironment,
    context: &ExecutionContext,
    carried: &CarriedStateSlot,
    run: Foreground,
) -> BashAnswer {
    let Foreground {
        command,
        cwd,
        keeps_cwd,
        vars,
        timeout,
        facts,
        budget,
        checks,
        ended,
    } = run;
    let command = command.as_str();
    let stem = exec.next_path("bash");
    // A command that cannot change the state runs as it is.
    let stateful = may_change_state(command, &vars);
    let mut spec = base_spec(exec, command.to_owned(), cwd.clone(), &vars, &checks);
    // Without a channel the command still runs; its answer says the state stayed.
    let channel = stateful.then(|| carry_state(&mut spec)).flatten();
    let (stdout_spill, stderr_spill) = spill_pair(exec, &stem);
    spec.stdout_spill = Some(stdout_spill);
    spec.stderr_spill = Some(stderr_spill);
    spec.timeout = Some(timeout);
    spec.keep_running.clone_from(&exec.config.keep_processes);

    let shell = match exec.manager.spawn_foreground(spec).await {
        Ok(shell) => shell,
        Err(error) => {
            audit_not_started(ended);
            return BashAnswer::fail(format!(
                "Cannot start the command: {}",
                crate::error_chain(&error)
            ));
        }
    };
    if let Waited::Backgrounded(id) =
        wait_reporting(exec, &shell, context, checks.hold.as_deref()).await
    {
        exec.keep_refusals(&shell, &checks);
        audit_when_ended(ended, Arc::clone(&shell), id.clone());
        let after = exec.config.background_after.unwrap_or_default();
        return backgrounded_answer(exec, &shell, &id, &stem, after);
    }
    // The end line goes out before the answer.
    let audit_failed =
        ended.and_then(|(log, entry)| log.write_ended(&ended_entry(&entry, &shell, None)).err());
    let request = shell.end_request();
    let (mut notes, refused) = checks.new_lines();
    if shell.ended_jobs() > 0 {
        notes.push(format!(
            "[ended {} background job(s) left by the command]",
            shell.ended_jobs()
        ));
    }
    if request.is_none() && stateful {
        notes.extend(absorb_state(
            exec,
            carried,
            channel.as_ref(),
            &vars,
            &cwd,
            keeps_cwd,
        ));
    }
    drop(channel);
    // Not after a timeout or an interruption: those did not end by themselves.
    let exit_code = shell
        .exit()
        .filter(|_| request.is_none())
        .map(|exit| exit.code);
    notes.extend(empty_stdin_note(facts, &shell, exit_code));
    notes.extend(network_note(exec, command, &shell));
    notes.extend(crate::write_walls::write_wall_notes(
        exec,
        Some(&cwd),
        || printed(&shell),
    ));
    let end = End {
        request,
        timeout: Some(timeout),
        notes,
        refused,
        budget,
        audit_failed,
    };
    ended_answer(exec, &shell, &stem, end).meta(|m| m.status = Some(shell.status().as_str()))
}

/// How a foreground command (with or without a terminal) ended, for its answer.
struct End {
    /// The end the server asked for (timeout, interrupt), if any.
    request: Option<EndRequest>,
    /// The timeout the answer names when it ended the command.
    timeout: Option<Duration>,
    /// The lines after the output.
    notes: Vec<String>,
    /// Execs refused at run time.
    refused: u64,
    /// Characters the answer may take.
    budget: usize,
    /// Why the end line could not be written (it is queued for a retry).
    audit_failed: Option<AuditError>,
}

/// The answer of an ended foreground command: the end line (when it did
/// not end well by itself), its output and notes, in `end.budget`
/// characters, with the full output in a file when cut.
fn ended_answer(
    exec: &ExecEnvironment,
    shell: &ShellProcess,
    stem: &std::path::Path,
    end: End,
) -> BashAnswer {
    let exit = shell.exit();
    let duration_ms = u64::try_from(shell.duration().as_millis()).unwrap_or(u64::MAX);
    let prefix = end_line(
        end.request,
        exit,
        shell.out_of_memory(),
        end.timeout,
        duration_ms,
    );
    let Rendered {
        text,
        truncated,
        output_file,
        omitted_chars,
    } = render_streams(
        exec,
        &shell.snapshot(Stream::Stdout),
        &shell.snapshot(Stream::Stderr),
        prefix.as_deref(),
        &end.notes,
        end.budget,
        Some((shell, stem)),
    );
    let result = if prefix.is_none() {
        BashAnswer::ok(text)
    } else {
        BashAnswer::fail(text)
    };
    let result = match end.audit_failed {
        Some(error) => with_unlogged_end(result, &error),
        None => result,
    };
    result.meta(|m| {
        m.exit_code = exit
            .filter(|_| end.request != Some(EndRequest::Timeout))
            .map(|exit| exit.code);
        m.truncated = Some(truncated);
        m.output_file = output_file.map(|path| path.to_string_lossy().into_owned());
        m.omitted_chars = omitted_chars;
        m.duration_ms = Some(duration_ms);
        m.runtime_refusals = (end.refused > 0).then_some(end.refused);
    })
}

/// A foreground command under a terminal: answers when it exits, or once it
/// waits for input, as a background shell (`Waiting for input: ID`), or,
/// still running after `--background-after` (without one and without an
/// explicit timeout, after the foreground default), as a background shell
/// too. No timeout unless one is given; its `cd`/`export` are not carried.
async fn run_tty(exec: &ExecEnvironment, context: &ExecutionContext, run: Prepared) -> BashAnswer {
    let Prepared {
        command,
        cwd,
        vars,
        timeout,
        checks,
        ended,
    } = run;
    let (command, vars) = (command.as_str(), &vars);
    let stem = exec.next_path("tty");
    let tty_cwd = cwd.clone();
    let mut spec = base_spec(exec, command.to_owned(), cwd, vars, &checks);
    let (stdout_spill, stderr_spill) = spill_pair(exec, &stem);
    spec.stdout_spill = Some(stdout_spill);
    spec.stderr_spill = Some(stderr_spill);
    spec.timeout = timeout;
    spec.tty = true;
    spec.keep_running.clone_from(&exec.config.keep_processes);
    let shell = match exec.manager.spawn_foreground(spec).await {
        Ok(shell) => shell,
        Err(error) => {
            audit_not_started(ended);
            return BashAnswer::fail(format!(
                "Cannot start the command: {}",
                crate::error_chain(&error)
            ));
        }
    };
    let timed_out = match tty_wait(exec, context, &shell, timeout, checks.hold.as_deref()).await {
        TtyWait::Ended { timed_out } => timed_out,
        TtyWait::HandedOver { id, after } => {
            exec.keep_refusals(&shell, &checks);
            audit_when_ended(ended, Arc::clone(&shell), id.clone());
            return backgrounded_answer(exec, &shell, &id, &stem, after)
                .meta(|m| m.waiting_for_input = Some(false));
        }
        TtyWait::Waiting { id } => {
            exec.keep_refusals(&shell, &checks);
            audit_when_ended(ended, Arc::clone(&shell), id.clone());
            return waiting_answer(exec, &shell, &id, &stem);
        }
    };
    let default_timeout = exec.config.default_timeout;
    let audit_failed =
        ended.and_then(|(log, entry)| log.write_ended(&ended_entry(&entry, &shell, None)).err());
    let (request, timeout) = if timed_out {
        (Some(EndRequest::Timeout), Some(default_timeout))
    } else {
        (shell.end_request(), timeout)
    };
    let (mut notes, refused) = checks.new_lines();
    notes.extend(network_note(exec, command, &shell));
    notes.extend(crate::write_walls::write_wall_notes(
        exec,
        Some(&tty_cwd),
        || printed(&shell),
    ));
    let end = End {
        request,
        timeout,
        notes,
        refused,
        budget: exec.config.max_output_chars,
        audit_failed,
    };
    ended_answer(exec, &shell, &stem, end).meta(|m| {
        m.status = Some(if timed_out {
            ShellStatus::Timeout.as_str()
        } else {
            shell.status().as_str()
        });
        m.waiting_for_input = Some(false);
    })
}

/// How a tty command's foreground wait ended.
enum TtyWait {
    /// It ended: by itself, interrupted, or (`timed_out`) by the
    /// foreground default when it could not go to the background.
    Ended { timed_out: bool },
    /// Still running after `after`, it is now tracked under `id`.
    HandedOver { id: String, after: Duration },
    /// It waits for input, tracked under `id`.
    Waiting { id: String },
}

/// When a hand-over due `after` from `started` falls, counting no time a
/// question at an exec held the command (it counts toward no limit);
/// `None` when it is due now.
fn hand_over_later(
    started: tokio::time::Instant,
    after: Duration,
    hold: Option<&shell_runtime::TimeoutHold>,
) -> Option<tokio::time::Instant> {
    let hold = hold?;
    let now = tokio::time::Instant::now();
    if hold.is_held() {
        return Some(now + Duration::from_millis(100));
    }
    let due = started + after + hold.held();
    (due > now).then_some(due)
}

/// Waits for a tty command to end, to wait for input, or to outlive
/// `--background-after` (without one and without a `timeout`, the
/// foreground default); interrupts it when the call is cancelled.
async fn tty_wait(
    exec: &ExecEnvironment,
    context: &ExecutionContext,
    shell: &Arc<ShellProcess>,
    timeout: Option<Duration>,
    hold: Option<&shell_runtime::TimeoutHold>,
) -> TtyWait {
    let mut may_background = true;
    // A command that neither exits nor waits for input (a server, a
    // `sleep`) answers at the latest after `--background-after` or, with no
    // timeout to end it, the foreground default, and goes on in the
    // background: the call never hangs on it.
    // With 256 shells already tracked it cannot go on in the background:
    // it stays in the foreground until its timeout, the default one when
    // none was given, as a foreground command does.
    let default_timeout = exec.config.default_timeout;
    let mut hand_over_after = exec
        .config
        .background_after
        .or(timeout.is_none().then_some(default_timeout));
    let started = tokio::time::Instant::now();
    let hand_over = tokio::time::sleep(hand_over_after.unwrap_or(Duration::MAX / 4));
    tokio::pin!(hand_over);
    let mut may_hand_over = hand_over_after.is_some();
    let mut timed_out = false;
    loop {
        tokio::select! {
            _ = shell.wait() => break,
            () = context.cancellation().cancelled() => {
                shell.interrupt(INTERRUPT_GRACE).await;
                break;
            }
            () = &mut hand_over, if may_hand_over => {
                // A question open at an exec counts toward no limit.
                if let Some(after) = hand_over_after
                    && let Some(next) = hand_over_later(started, after, hold)
                {
                    hand_over.as_mut().reset(next);
                    continue;
                }
                may_hand_over = false;
                // An ended shell is answered as usual (`wait` fires next);
                // with 256 shells already tracked it stays in the foreground.
                if !shell.is_running() {
                    continue;
                }
                if let Ok(id) = exec.owners.adopt(&exec.manager, shell, context.principal()) {
                    let after = hand_over_after.unwrap_or_default();
                    return TtyWait::HandedOver { id, after };
                }
                if timeout.is_none() {
                    if started.elapsed() >= default_timeout {
                        // No room in the background and no timeout given:
                        // the foreground default ends it.
                        timed_out = true;
                        shell.terminate(shell_runtime::KILL_GRACE).await;
                        break;
                    }
                    hand_over_after = Some(default_timeout);
                    hand_over.as_mut().reset(started + default_timeout);
                    may_hand_over = true;
                }
            }
            () = input_wait(shell), if may_background => {
                // With 256 shells already tracked it stays in the
                // foreground, until it exits or its timeout.
                match exec.owners.adopt(&exec.manager, shell, context.principal()) {
                    Ok(id) => return TtyWait::Waiting { id },
                    Err(_) => may_background = false,
                }
            }
        }
    }
    TtyWait::Ended { timed_out }
}

/// The answer of a tty command that waits for input: the output so far
/// (read, so `BashOutput` and `WriteStdin` go on from there), a blank line,
/// `Waiting for input: ID`.
fn waiting_answer(
    exec: &ExecEnvironment,
    shell: &ShellProcess,
    id: &str,
    stem: &std::path::Path,
) -> BashAnswer {
    exec.keep_files(
        Some(id),
        &[
            &stem.with_extension("stdout"),
            &stem.with_extension("stderr"),
        ],
    );
    let so_far = shell.read_unseen();
    let body = crate::render::Body::from_streams(&so_far.stdout, &so_far.stderr, |text| {
        crate::render::clean(exec, text)
    });
    let Rendered {
        text,
        truncated,
        omitted_chars,
        ..
    } = crate::render::layout(None, &body, &[], exec.config.max_output_chars, || None);
    let mut text = text.trim_end_matches('\n').to_owned();
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&format!("Waiting for input: {id}"));
    BashAnswer::ok(text).meta(|m| {
        m.status = Some(ShellStatus::Running.as_str());
        m.truncated = Some(truncated);
        m.omitted_chars = omitted_chars;
        m.bash_id = Some(id.to_owned());
        m.waiting_for_input = Some(true);
    })
}

/// Runs `spec`'s command wrapped so that it writes the state it ends with
/// to descriptor 3, and gives it the channel that descriptor is; `None`
/// when no channel could be made (the wrapped command runs all the same).
fn carry_state(spec: &mut SpawnSpec) -> Option<StateChannel> {
    spec.script = Some(wrap_command(&spec.command));
    let channel = StateChannel::new().ok()?;
    spec.inherit.push((channel.child_end().ok()?, STATE_FD));
    Some(channel)
}

/// How a foreground wait ended.
enum Waited {
    /// The shell ended (by itself, by its timeout, or interrupted).
    Ended,
    /// It outlived `--background-after` and is now tracked under this id.
    Backgrounded(String),
}

/// Waits for the shell, reporting recent output to the progress sink at
/// least once a second, interrupting it when the call is cancelled, and
/// handing it to the background after `background_after` when there is
/// room among the tracked shells.
async fn wait_reporting(
    exec: &ExecEnvironment,
    shell: &Arc<ShellProcess>,
    context: &ExecutionContext,
    hold: Option<&shell_runtime::TimeoutHold>,
) -> Waited {
    let started = tokio::time::Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    let mut cursor = shell_runtime::ReadCursor::default();
    let reporting = context.progress().is_active();
    let background_after = exec.config.background_after;
    let hand_over = tokio::time::sleep(background_after.unwrap_or(Duration::MAX / 4));
    tokio::pin!(hand_over);
    let mut may_hand_over = background_after.is_some();
    loop {
        tokio::select! {
            _ = shell.wait() => return Waited::Ended,
            () = context.cancellation().cancelled() => {
                shell.interrupt(INTERRUPT_GRACE).await;
                return Waited::Ended;
            }
            () = &mut hand_over, if may_hand_over => {
                // A question open at an exec counts toward no limit.
                if let Some(after) = background_after
                    && let Some(next) = hand_over_later(started, after, hold)
                {
                    hand_over.as_mut().reset(next);
                    continue;
                }
                may_hand_over = false;
                // An ended shell is answered as usual (`wait` fires next);
                // with 256 shells already running it stays in the foreground.
                if shell.is_running()
                    && let Ok(id) = exec.owners.adopt(&exec.manager, shell, context.principal())
                {
                    return Waited::Backgrounded(id);
                }
            }
            _ = ticker.tick(), if reporting => {
                let recent = shell.read_since(&mut cursor);
                let mut message = recent.stdout.render();
                message.push_str(&recent.stderr.render());
                let message = last_lines(&crate::render::clean(exec, &message), 400);
                context.progress().report(ProgressUpdate {
                    progress: started.elapsed().as_secs_f64(),
                    // No total: clients show a total as a percentage, and a
                    // command's run is no fraction of its timeout.
                    total: None,
                    message: Some(if message.is_empty() {
                        format!("running for {}s", started.elapsed().as_secs())
                    } else {
                        message
                    }),
                });
            }
        }
    }
}

/// The answer of a foreground command handed to the background after
/// `after`: the output so far (read, so `BashOutput` goes on from there),
/// then where it went.
/// Its spill files stay for `BashOutput`, and its `cd`/`export` do not carry
/// over.
fn backgrounded_answer(
    exec: &ExecEnvironment,
    shell: &ShellProcess,
    id: &str,
    stem: &std::path::Path,
    after: Duration,
) -> BashAnswer {
    exec.keep_files(
        Some(id),
        &[
            &stem.with_extension("stdout"),
            &stem.with_extension("stderr"),
        ],
    );
    let after = after.as_millis();
    let so_far = shell.read_unseen();
    let body = crate::render::Body::from_streams(&so_far.stdout, &so_far.stderr, |text| {
        crate::render::clean(exec, text)
    });
    let note = format!("[still running after {after} ms: continues as background shell {id}]");
    let Rendered {
        text,
        truncated,
        omitted_chars,
        ..
    } = crate::render::layout(None, &body, &[note], exec.config.max_output_chars, || None);
    BashAnswer::ok(text).meta(|m| {
        m.status = Some(ShellStatus::Running.as_str());
        m.truncated = Some(truncated);
        m.omitted_chars = omitted_chars;
        m.bash_id = Some(id.to_owned());
    })
}

/// The end of `text`, at most `max` characters, starting at a line if it can.
fn last_lines(text: &str, max: usize) -> String {
    let text = text.trim_end();
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let start = text.char_indices().nth(count - max).map_or(0, |(at, _)| at);
    let tail = &text[start..];
    tail.find('\n')
        .map_or(tail, |newline| &tail[newline + 1..])
        .to_owned()
}

/// Reads the state channel and updates the carried state; returns the lines the
/// answer carries: where the next call starts when that changed from
/// `started_in` (or, for a directory the command deleted, its nearest
/// existing ancestor), a working directory not kept, start-up variables not
/// carried, or a state that could not be read (the carried state keeps the last
/// good state then). With `keeps_cwd` (`workdir`) only the variables carry.
fn absorb_state(
    exec: &ExecEnvironment,
    carried: &CarriedStateSlot,
    channel: Option<&StateChannel>,
    vars: &Vars,
    started_in: &std::path::Path,
    keeps_cwd: bool,
) -> Vec<String> {
    let ended = match channel.map_or(Err(CaptureError::NoChannel), StateChannel::read) {
        Ok(ended) => ended,
        Err(error) => return vec![error.note().to_owned()],
    };
    let mut notes = Vec::new();
    let mut state = carried.lock();
    let refused = state.absorb_exports(vars, &ended.exports);
    if !refused.is_empty() {
        notes.push(format!(
            "[not carried over to later calls: {} (each would change what later commands run, unseen by the checks: see docs/policy.md)]",
            refused.join(", ")
        ));
    }
    if keeps_cwd {
        return notes;
    }
    let shown = |path: &std::path::Path| exec.redact(&path.to_string_lossy());
    let roots = &exec.config.roots;
    match exec_policy::canonical_dir(&ended.cwd) {
        Ok(canonical) if is_within_roots(&canonical, roots) => {
            if canonical != started_in {
                notes.push(format!("[cwd now {}]", shown(&ended.cwd)));
            }
            state.cwd = Some(ended.cwd);
        }
        // The command deleted the directory it ended in.
        Err(WorkdirError::NotFound { .. } | WorkdirError::NotADirectory { .. }) => {
            match nearest_existing_ancestor(&ended.cwd, roots) {
                Some((ancestor, _)) => {
                    notes.push(format!(
                        "[cwd {} no longer exists: now in {}]",
                        shown(&ended.cwd),
                        shown(&ancestor)
                    ));
                    state.cwd = Some(ancestor);
                }
                None => notes.push(format!(
                    "[cwd not kept: {} no longer exists]",
                    shown(&ended.cwd)
                )),
            }
        }
        Ok(_) | Err(_) => notes.push(format!(
            "[cwd not kept: {} is outside the allowed roots]",
            shown(&ended.cwd)
        )),
    }
    notes
}

/// The line that opens a foreground answer when the command did not end
/// well by itself: timed out (after `timeout`, when one was set),
/// interrupted or killed, killed by the OOM killer (its memory limit
/// named), or failed with an exit code.
fn end_line(
    request: Option<EndRequest>,
    exit: Option<ExitInfo>,
    out_of_memory: Option<shell_runtime::OutOfMemory>,
    timeout: Option<Duration>,
    duration_ms: u64,
) -> Option<String> {
    match (request, exit) {
        (None, Some(exit)) if let Some(oom) = out_of_memory => {
            Some(format!("Command {oom}, exit code {}", exit.code))
        }
        (Some(EndRequest::Timeout), _) => {
            timeout.map(|limit| format!("Command timed out after {}ms", limit.as_millis()))
        }
        (Some(EndRequest::Interrupt | EndRequest::Kill), _) => {
            Some(format!("Command interrupted after {duration_ms}ms"))
        }
        (None, Some(exit)) if exit.code != 0 => {
            Some(format!("Command failed with exit code {}", exit.code))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

    use super::*;

    /// The description and the schema state the configured default
    /// timeout, the answer size, the `timeout` bounds and the terminal size
    /// from the values the code uses, never from copies.
    #[test]
    fn the_descriptions_state_the_configured_numbers() {
        let mut config = crate::ExecConfig::new(vec![std::env::temp_dir()], std::env::temp_dir());
        config.default_timeout = Duration::from_millis(4321);
        config.max_output_chars = 1234;
        let tool = BashTool::new(Arc::new(ExecEnvironment::new(config)));
        let text = Tool::description(&tool);
        assert!(text.contains("time out after 4321 ms unless"), "{text}");
        assert!(text.contains("answers after 4321 ms at most"), "{text}");
        assert!(text.contains("Output over 1234 characters"), "{text}");
        assert!(!text.contains("120000"), "{text}");
        let terminal = format!("{TERMINAL_COLUMNS}x{TERMINAL_ROWS} terminal");
        assert!(text.contains(&terminal), "{text}");
        assert!(
            description(DEFAULT_TIMEOUT, crate::MAX_OUTPUT_CHARS)
                .contains(&format!("after {} ms unless", DEFAULT_TIMEOUT.as_millis())),
        );

        let schema = tool_core::InputSchema::for_type::<BashParams>().unwrap();
        let timeout = &schema.json()["properties"]["timeout"];
        let stated = timeout["description"].as_str().unwrap();
        assert!(
            stated.contains(&format!("default {};", DEFAULT_TIMEOUT.as_millis())),
            "{stated}"
        );
        assert!(
            stated.contains(&format!("({}-{})", timeout["minimum"], timeout["maximum"])),
            "{stated}"
        );
        let tty = schema.json()["properties"]["tty"]["description"]
            .as_str()
            .unwrap();
        assert!(
            tty.contains(&format!("({TERMINAL_COLUMNS}x{TERMINAL_ROWS})")),
            "{tty}"
        );
    }
}
