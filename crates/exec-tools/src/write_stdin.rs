//! `WriteStdin`: typing into a `tty` shell (CONTRACT.md, Interactive
//! sessions). Lines typed to a shell in front (bash, sh, dash, zsh) are
//! checked like a `Bash` command before they are written; input to any
//! other program is written as is (the sandbox is the boundary there).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use exec_policy::{AnalysisContext, Decision};
use schemars::JsonSchema;
use serde::Deserialize;
use tool_core::{Approval, ExecutionContext, Tool, ToolAnnotations, ToolCategory};

use crate::approval::{Waiting, approval_key, approval_message, wait_for_approval};
use crate::audit::{AuditEntry, with_notes};
use crate::bash_output::{ShellAnswer, not_found, read_answer};
use crate::carried_state::CarriedStateSlot;
use crate::environment::{AskFallback, ExecEnvironment};

/// Arguments of `WriteStdin`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteStdinParams {
    /// The id of a shell started by Bash with `tty: true` (`shell_` + 8 hex digits).
    pub bash_id: String,
    /// Text typed as is, before `keys` ("\n" is Enter).
    #[serde(default)]
    #[schemars(default = "empty")]
    pub input: String,
    /// Named keys typed after `input`: Enter, Tab, Escape, Backspace, Up, Down, Left, Right, Ctrl-C, Ctrl-D, Ctrl-Z, Ctrl-L.
    #[serde(default)]
    pub keys: Vec<String>,
    /// Wait up to this many milliseconds for the program to exit or to wait for input again (after at least 200 ms of quiet).
    #[schemars(range(min = 0, max = 600_000))]
    #[serde(default = "default_wait")]
    #[schemars(default = "default_wait")]
    pub wait_ms: u64,
}

fn empty() -> String {
    String::new()
}

fn default_wait() -> u64 {
    1000
}

/// The keys `keys` may name, with the bytes a terminal sends for each
/// (arrows in normal cursor mode).
const KEYS: &[(&str, &[u8])] = &[
    ("Enter", b"\r"),
    ("Tab", b"\t"),
    ("Escape", b"\x1b"),
    ("Backspace", b"\x7f"),
    ("Up", b"\x1b[A"),
    ("Down", b"\x1b[B"),
    ("Left", b"\x1b[D"),
    ("Right", b"\x1b[C"),
    ("Ctrl-C", b"\x03"),
    ("Ctrl-D", b"\x04"),
    ("Ctrl-Z", b"\x1a"),
    ("Ctrl-L", b"\x0c"),
];

/// Keys that edit a line or recall history: refused while a shell is in
/// front, where the server keeps the line and checks it whole.
const EDITING_KEYS: &[&str] = &["Tab", "Backspace", "Up", "Down", "Left", "Right", "Escape"];

/// Programs whose typed lines are commands.
const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "rbash"];

/// After writing, the program must be quiet this long before a wait for
/// input counts as the next one.
const QUIET_AFTER_INPUT: Duration = Duration::from_millis(200);

/// How often the terminal is checked while waiting.
const POLL: Duration = Duration::from_millis(20);

/// Text as typed: several lines to a program that enabled bracketed
/// paste go as one paste (a final newline stays Enter, after it).
fn type_text(bytes: &mut Vec<u8>, text: &str, paste: bool) {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if paste && body.contains('\n') {
        bytes.extend_from_slice(b"\x1b[200~");
        bytes.extend_from_slice(body.as_bytes());
        bytes.extend_from_slice(b"\x1b[201~");
        if body.len() < text.len() {
            bytes.push(b'\r');
        }
    } else {
        bytes.extend_from_slice(text.as_bytes());
    }
}

/// A key's bytes: arrows as `ESC O x` once the program asked for
/// application cursor keys (vim, less do), else `ESC [ x`.
fn key_bytes(name: &str, key: &[u8], application_cursor: bool) -> Vec<u8> {
    match (application_cursor, key) {
        (true, [0x1b, b'[', arrow]) if matches!(name, "Up" | "Down" | "Left" | "Right") => {
            vec![0x1b, b'O', *arrow]
        }
        _ => key.to_vec(),
    }
}

/// One thing typed: text or a named key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Typed {
    Text(String),
    Key(&'static str, &'static [u8]),
}

/// Types into a tty shell.
#[derive(Debug)]
pub struct WriteStdinTool {
    env: Arc<ExecEnvironment>,
    /// The line typed so far to a shell in front, per shell id: written to
    /// the terminal only once Enter comes and it is checked whole.
    partial: Mutex<HashMap<String, String>>,
}

impl WriteStdinTool {
    /// The tool over shared state.
    pub fn new(env: Arc<ExecEnvironment>) -> Self {
        Self {
            env,
            partial: Mutex::new(HashMap::new()),
        }
    }
}

fn parse_keys(keys: &[String]) -> Result<Vec<Typed>, String> {
    keys.iter()
        .map(|name| {
            KEYS.iter()
                .find(|(known, _)| known == name)
                .map(|(known, bytes)| Typed::Key(known, bytes))
                .ok_or_else(|| {
                    let known: Vec<&str> = KEYS.iter().map(|(known, _)| *known).collect();
                    format!(
                        "Unknown key `{name}`; the known keys are: {}",
                        known.join(", ")
                    )
                })
        })
        .collect()
}

/// The input as the audit log shows it: text, and `[Key]` for each key.
fn shown(typed: &[Typed]) -> String {
    typed
        .iter()
        .map(|item| match item {
            Typed::Text(text) => text.clone(),
            Typed::Key(name, _) => format!("[{name}]"),
        })
        .collect()
}

/// The executable file name of `pid` (`/proc/PID/exe`, which the process
/// cannot set), and its working directory.
fn program_of(pid: i32) -> (Option<String>, Option<std::path::PathBuf>) {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|path| {
            path.file_name()
                .map(|name| name.to_string_lossy().into_owned())
        });
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
    (exe, cwd)
}

/// Only bytes that make the terminal send a signal (Ctrl-C, Ctrl-Z):
/// those act at once, whatever the program in front is doing.
fn only_signals(typed: &[Typed]) -> bool {
    !typed.is_empty()
        && typed
            .iter()
            .all(|item| matches!(item, Typed::Key("Ctrl-C" | "Ctrl-Z", _)))
}

#[async_trait]
impl Tool for WriteStdinTool {
    type Params = WriteStdinParams;
    type Metadata = crate::metadata::ShellMetadata;

    fn name(&self) -> &str {
        "WriteStdin"
    }

    fn description(&self) -> String {
        "Types into a shell started by Bash with `tty: true` (a prompt, a REPL, a full-screen program), then answers as BashOutput does: the status line and the output new since the last read.\n\
\n\
- `input` is typed as is (\"\\n\" is Enter); `keys` are named keys typed after it: Enter, Tab, Escape, Backspace, Up, Down, Left, Right, Ctrl-C, Ctrl-D, Ctrl-Z, Ctrl-L.\n\
- Waits up to `wait_ms` (default 1000) for the program to exit or to wait for input again; the status line then reads `Status: running (waiting for input)`.\n\
- A line typed to a shell (bash, sh, dash, zsh) is checked like a Bash command when Enter comes (echo on or off), and a refused line is not typed; line-editing and history keys are refused while a shell is in front. Input to other programs is not checked.\n\
- To a program reading lines (not a REPL with line editing), lines go one at a time, each once the previous one was read; lines not read within `wait_ms` are not typed (the answer says how many), and text after the last Enter is held until its Enter.\n\
- Input typed while the terminal hides it (a password prompt) never appears in answers or logs.\n\
- To a shell without a terminal only `keys: [\"Ctrl-C\"]` can be sent (SIGINT to its process group)."
            .to_owned()
    }

    fn category(&self) -> ToolCategory {
        ToolCategory::Execution
    }

    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations {
            title: Some("Type into a terminal shell".to_owned()),
            read_only_hint: Some(false),
            destructive_hint: Some(true),
            idempotent_hint: Some(false),
            open_world_hint: Some(true),
        }
    }

    async fn execute(&self, context: &ExecutionContext, params: WriteStdinParams) -> ShellAnswer {
        let id = Some(params.bash_id.clone());
        let answer = self.answer(context, params).await;
        // What the audit log could not do since the last answer.
        with_notes(
            self.env.config.audit.as_deref(),
            id.as_deref(),
            answer,
            |m| m.audit_error = Some(true),
        )
    }
}

impl WriteStdinTool {
    async fn answer(&self, context: &ExecutionContext, params: WriteStdinParams) -> ShellAnswer {
        let env = &self.env;
        let id = params.bash_id.clone();
        let keys = match parse_keys(&params.keys) {
            Ok(keys) => keys,
            Err(message) => return ShellAnswer::fail(message),
        };
        let mut typed = Vec::new();
        if !params.input.is_empty() {
            typed.push(Typed::Text(params.input.clone()));
        }
        typed.extend(keys);
        let Some(shell) = env.manager.get(&id) else {
            return not_found(env, &id);
        };
        if !shell.is_running() {
            return ShellAnswer::fail(format!(
                "Shell {id} is not running (status: {})",
                shell.status()
            ))
            .meta(|m| {
                m.status = Some(shell.status().as_str());
                m.bash_id = Some(id);
            });
        }
        let wait = Duration::from_millis(params.wait_ms);
        let Some(terminal) = shell.terminal() else {
            if shell.has_terminal() {
                return ShellAnswer::fail(format!("Shell {id} is not running"));
            }
            if typed != [Typed::Key("Ctrl-C", b"\x03")] {
                return ShellAnswer::fail(format!(
                    "Shell {id} has no terminal: only keys [\"Ctrl-C\"] (SIGINT to its process group) can be sent to it; start it with Bash `tty: true` to type into it"
                ));
            }
            shell.send_interrupt();
            let written = self.audit(&id, "[Ctrl-C]".to_owned(), None, "written");
            let _ = shell.wait_timeout(wait).await;
            return with_audit(read_answer(env, &id, &shell, None, false), written);
        };

        let started = Instant::now();
        // What is still to type: a line held from an earlier call (kept
        // until its Enter), then this call's input.
        let mut pending: VecDeque<Typed> = VecDeque::new();
        let held = self.partial_line(&id);
        if !held.is_empty() {
            pending.push_back(Typed::Text(held));
        }
        pending.extend(typed.iter().cloned());
        let mut audited = false;
        let mut not_typed = 0;
        while !pending.is_empty() {
            // Anything but a signal key waits for a program to read the
            // terminal: typed ahead, it would reach whoever reads next.
            if !only_signals(pending.make_contiguous()) {
                let mut reading = shell.waits_for_input(Duration::ZERO);
                while !reading && shell.is_running() && started.elapsed() < wait {
                    tokio::time::sleep(POLL).await;
                    reading = shell.waits_for_input(Duration::ZERO);
                }
                if !reading {
                    if !audited {
                        let answer = ShellAnswer::fail(format!(
                            "Shell {id} is not waiting for input: nothing was typed (the program in front does not read the terminal; keys [\"Ctrl-C\"] interrupts it)"
                        ));
                        return answer.meta(|m| {
                            m.bash_id = Some(id);
                            m.waiting_for_input = Some(false);
                        });
                    }
                    not_typed = lines_in(pending.make_contiguous());
                    self.hold(&id, String::new());
                    break;
                }
            }
            let hidden = terminal.hides_input();
            // The program in front is the one reading the terminal (with
            // `bash -c python3`, python, not the bash of the same group).
            let reader = shell.input_reader();
            let in_front = reader
                .or_else(|| terminal.foreground_group())
                .map(program_of);
            let shell_in_front = in_front
                .as_ref()
                .and_then(|(exe, _)| exe.as_deref())
                .is_some_and(|exe| SHELLS.contains(&exe));
            if shell_in_front {
                // A shell reads the rest: every line is checked, echo or
                // not (`stty -echo; exec sh` must not open a way round).
                let rest: Vec<Typed> = pending.drain(..).collect();
                let cwd = in_front.and_then(|(_, cwd)| cwd);
                // The call's input, or, after lines that went to another
                // program, the part the shell reads (a held line was logged
                // by the call that typed it).
                let logged = if hidden {
                    HIDDEN.to_owned()
                } else if audited {
                    env.redact(&shown(&rest))
                } else {
                    env.redact(&shown(&typed))
                };
                match self
                    .check_lines(context, &id, &rest, cwd.as_deref(), hidden)
                    .await
                {
                    Ok((bytes, name)) => {
                        if let Err(answer) = self.audit_before_typing(&id, logged, name) {
                            return *answer;
                        }
                        if let Err(answer) = type_bytes(&terminal, &id, &bytes).await {
                            return answer;
                        }
                    }
                    Err(refused) => {
                        let (answer, name) = *refused;
                        let written = self.audit(&id, logged, name, "blocked");
                        return with_audit(answer.meta(|m| m.bash_id = Some(id)), written);
                    }
                }
                break;
            }
            let screen = shell.screen();
            let application_cursor = screen.as_ref().is_some_and(|s| s.application_cursor);
            let paste = screen.as_ref().is_some_and(|s| s.bracketed_paste);
            // In raw mode (readline, an editor) input goes at once, as a
            // paste where the program asked for one; in canonical mode one
            // line at a time, and never as a paste (a program reading lines
            // that turned bracketed paste on must not get several at once).
            let canonical = terminal.canonical();
            let paste = paste && !canonical;
            let (unit, complete) = if canonical {
                next_line(&mut pending, &terminal.read_ends())
            } else {
                (pending.drain(..).collect(), true)
            };
            let mut bytes = Vec::new();
            for item in &unit {
                match item {
                    Typed::Text(text) => type_text(&mut bytes, text, paste),
                    Typed::Key(name, key) => {
                        bytes.extend_from_slice(&key_bytes(name, key, application_cursor));
                    }
                }
            }
            if !complete {
                // A partial line to a program reading lines: held until its
                // Enter, for if that program ends first the next reader (a
                // shell) would take it as the start of its own line.
                self.hold(&id, String::from_utf8_lossy(&bytes).into_owned());
                break;
            }
            self.hold(&id, String::new());
            if !audited {
                let logged = if hidden {
                    HIDDEN.to_owned()
                } else {
                    env.redact(&shown(&typed))
                };
                if let Err(answer) = self.audit_before_typing(&id, logged, None) {
                    return *answer;
                }
                audited = true;
            }
            let before = reader.and_then(|pid| Some((pid, shell_runtime::read_calls(pid)?)));
            if let Err(answer) = type_bytes(&terminal, &id, &bytes).await {
                return answer;
            }
            if pending.is_empty() {
                break;
            }
            // One line at a time: the next one is decided once this one is
            // taken (the reader reads again, or another program reads).
            let mut pause = Duration::from_millis(1);
            let taken = loop {
                if !shell.is_running() {
                    break false;
                }
                if shell.waits_for_input(Duration::ZERO) {
                    let now = shell.input_reader();
                    let advanced = match (before, now) {
                        (Some((pid, calls)), Some(reader)) if pid == reader => {
                            shell_runtime::read_calls(pid).is_some_and(|count| count > calls)
                        }
                        _ => true,
                    };
                    if advanced {
                        break true;
                    }
                }
                if started.elapsed() >= wait {
                    break false;
                }
                // Most readers take a line within a millisecond or two:
                // look again soon, then back off to the usual poll.
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(POLL);
            };
            if !taken {
                not_typed = lines_in(pending.make_contiguous());
                break;
            }
        }
        drop(terminal);
        let typed_at = Instant::now();
        // The answer: once it exits, or once it waits for input again after
        // the input was read and it has been quiet for a while.
        let mut waiting = false;
        loop {
            if !shell.is_running() {
                break;
            }
            if typed_at.elapsed() >= QUIET_AFTER_INPUT && shell.waits_for_input(QUIET_AFTER_INPUT) {
                waiting = true;
                break;
            }
            let left = wait.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            let _ = shell.wait_timeout(left.min(POLL)).await;
        }
        let mut answer = read_answer(env, &id, &shell, None, waiting);
        if not_typed > 0 {
            answer.output.push_str(&format!(
                "\n[{not_typed} line(s) not typed: the program did not read the terminal again within wait_ms; type them again once it waits for input]"
            ));
            answer = answer.meta(|m| m.lines_not_typed = Some(not_typed));
        }
        answer
    }
}

impl WriteStdinTool {
    /// The bytes to type to a shell in front: complete lines, each checked
    /// at its Enter; what follows the last Enter is kept for the next call.
    /// Fails (with the check's decision name) on an editing key or a
    /// refused line; the refused line and what follows are dropped.
    async fn check_lines(
        &self,
        context: &ExecutionContext,
        id: &str,
        typed: &[Typed],
        cwd: Option<&std::path::Path>,
        hidden: bool,
    ) -> Result<(Vec<u8>, Option<&'static str>), Refused> {
        // The held line, if any, is the start of `typed`.
        let mut line = String::new();
        let mut bytes = Vec::new();
        let mut decision = None;
        let mut items: Vec<(char, Option<&'static str>)> = Vec::new();
        for item in typed {
            match item {
                Typed::Text(text) => items.extend(text.chars().map(|c| (c, None))),
                Typed::Key(name, _) if EDITING_KEYS.contains(name) => {
                    return Err(Box::new((
                        ShellAnswer::fail(format!(
                            "Key {name} refused: a shell is in front, and line editing and history are refused there; type the whole line as `input` (nothing was typed)"
                        )),
                        None,
                    )));
                }
                Typed::Key("Enter", _) => items.push(('\r', None)),
                Typed::Key(name, key) => {
                    items.push((char::from(key.first().copied().unwrap_or(0)), Some(name)));
                }
            }
        }
        for (c, key) in items {
            match c {
                '\r' | '\n' => {
                    let name = self.check_line(context, &line, cwd, hidden).await?;
                    decision = merge(decision, name);
                    bytes.extend_from_slice(line.as_bytes());
                    bytes.push(b'\r');
                    line.clear();
                }
                // Ctrl-C drops the line; Ctrl-D, Ctrl-Z, Ctrl-L go through.
                '\x03' => {
                    line.clear();
                    bytes.push(0x03);
                }
                '\x04' | '\x1a' | '\x0c' => {
                    if !line.is_empty() && c == '\x04' {
                        return Err(Box::new((
                            ShellAnswer::fail(
                                "Key Ctrl-D refused: a shell is in front with a partial line (nothing was typed)",
                            ),
                            None,
                        )));
                    }
                    let mut buffer = [0u8; 4];
                    bytes.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
                }
                c if c.is_control() => {
                    let what = key.map_or_else(|| format!("{c:?}"), str::to_owned);
                    return Err(Box::new((
                        ShellAnswer::fail(format!(
                            "Control character {what} refused: a shell is in front, and line editing and history are refused there (nothing was typed)"
                        )),
                        None,
                    )));
                }
                c => line.push(c),
            }
        }
        self.hold(id, line);
        Ok((bytes, decision))
    }

    /// Keeps `line` (typed, not yet written) for the shell's next call.
    /// Nothing held is no entry, and entries of shells no longer tracked
    /// go: the map lives as long as the server, and every tty session
    /// would otherwise leave its id in it.
    fn hold(&self, id: &str, line: String) {
        let mut partial = self.partial.lock().unwrap_or_else(PoisonError::into_inner);
        if line.is_empty() {
            partial.remove(id);
            return;
        }
        partial.retain(|held, _| self.env.manager.get(held).is_some());
        partial.insert(id.to_owned(), line);
    }

    /// Writes the call's audit line before anything is typed: without a
    /// log line, nothing is typed.
    fn audit_before_typing(
        &self,
        id: &str,
        logged: String,
        decision: Option<&'static str>,
    ) -> Result<(), Box<ShellAnswer>> {
        self.audit(id, logged, decision, "written")
            .map_err(|error| {
                Box::new(
                    ShellAnswer::fail(format!(
                        "Nothing was typed: the audit log cannot be written: {}",
                        crate::error_chain(&error)
                    ))
                    .meta(|m| m.audit_error = Some(true)),
                )
            })
    }

    fn partial_line(&self, id: &str) -> String {
        self.partial
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
            .unwrap_or_default()
    }

    /// Checks one whole line as `Bash` checks a command; an `ask` line
    /// waits for approval as a command would.
    async fn check_line(
        &self,
        context: &ExecutionContext,
        line: &str,
        cwd: Option<&std::path::Path>,
        hidden: bool,
    ) -> Result<Option<&'static str>, Refused> {
        let env = &self.env;
        if line.trim().is_empty() {
            return Ok(None);
        }
        let carried = context.session().state::<CarriedStateSlot>();
        let state = carried.lock().clone();
        let vars: HashMap<String, String> = state
            .environment(env.base_env())
            .iter()
            .filter_map(|(name, value)| Some((name.clone(), value.to_str()?.to_owned())))
            .collect();
        let cwd = cwd.map_or_else(
            || context.working_dir().to_path_buf(),
            std::path::Path::to_path_buf,
        );
        let session = AnalysisContext {
            cwd: cwd.to_str().map(str::to_owned),
            vars: vars.clone(),
        };
        let analysis = env.analyzer.analyze_in(line, &session);
        let name = Some(analysis.decision.name());
        let refused = |message: String| {
            Err(Box::new((
                ShellAnswer::fail(format!("Line not typed: {message}")).meta(|m| {
                    m.status = Some("blocked");
                    m.decision = Some(analysis.decision.name());
                    m.rule = analysis.decision.denial().map(|d| d.rule_id.clone());
                }),
                name,
            )))
        };
        if hidden {
            // The line was typed while the terminal hides input: neither
            // the answer nor an approver may see it, so an `ask` line is
            // refused as a `deny` one is, naming only the rule.
            return match analysis.decision.denial() {
                None => Ok(name),
                Some(_)
                    if matches!(analysis.decision, Decision::Ask(_))
                        && env.is_remembered(&approval_key(env, line, &cwd, &vars)) =>
                {
                    Ok(name)
                }
                Some(denial) => refused(format!(
                    "a line typed while the terminal hides input (not shown) was refused by rule {} ({}); hidden input is never shown to an approver",
                    denial.rule_id,
                    analysis.decision.name()
                )),
            };
        }
        match &analysis.decision {
            Decision::Allow { .. } => Ok(name),
            Decision::Deny(denial) => refused(env.redact(&denial.message())),
            Decision::Ask(denial) => {
                let key = approval_key(env, line, &cwd, &vars);
                if env.is_remembered(&key) {
                    return Ok(name);
                }
                let answer = match context.approver() {
                    Some(approver) if !context.dry_run() => {
                        let message =
                            env.redact(&approval_message(&env.redact(line), &cwd, denial, &vars));
                        wait_for_approval(env, context, approver.as_ref(), message).await
                    }
                    _ => Waiting::Answer(Approval::Unavailable),
                };
                match answer {
                    Waiting::Answer(Approval::Accept { .. } | Approval::Save)
                        if approval_key(env, line, &cwd, &vars) != key =>
                    {
                        refused(env.redact(&format!(
                            "what the line runs changed while the question was open ({}); nothing was typed",
                            denial.rule_id
                        )))
                    }
                    Waiting::Answer(Approval::Accept { remember }) => {
                        if remember {
                            env.remember(key);
                        }
                        Ok(name)
                    }
                    // A typed line is remembered, not saved: a rule would
                    // also allow it as a `Bash` command.
                    Waiting::Answer(Approval::Save) => {
                        env.remember(key);
                        Ok(name)
                    }
                    Waiting::Answer(Approval::Unavailable)
                        if env.config.ask_fallback == AskFallback::Allow =>
                    {
                        Ok(name)
                    }
                    Waiting::Answer(Approval::Unavailable) => {
                        refused(env.redact(&format!("{} (nobody to ask)", denial.ask_message())))
                    }
                    Waiting::Answer(Approval::Decline | Approval::Cancel) => {
                        refused(env.redact(&format!("approval declined ({})", denial.rule_id)))
                    }
                    Waiting::TimedOut => refused(env.redact(&format!(
                        "the approval question timed out unanswered after {} ms ({})",
                        env.config.ask_timeout.as_millis(),
                        denial.rule_id
                    ))),
                    Waiting::CallCancelled => {
                        refused("the call was cancelled while waiting for approval".to_owned())
                    }
                }
            }
        }
    }

    /// Writes the call's audit line (when there is a log).
    fn audit(
        &self,
        id: &str,
        input: String,
        decision: Option<&'static str>,
        status: &str,
    ) -> Result<(), crate::audit::AuditError> {
        let Some(log) = &self.env.config.audit else {
            return Ok(());
        };
        log.write(&AuditEntry {
            event: "call",
            call: log.next_call(),
            tool: "WriteStdin",
            command: Some(input),
            decision,
            status: Some(status.to_owned()),
            bash_id: Some(id.to_owned()),
            ..AuditEntry::default()
        })
    }
}

/// Input typed while the terminal hides it, as answers and logs show it.
const HIDDEN: &str = "[hidden input]";

/// The decision a call reports over its lines: `ask` once one asked, else
/// the first one's.
fn merge(seen: Option<&'static str>, name: Option<&'static str>) -> Option<&'static str> {
    seen.or(name)
        .map(|seen| if name == Some("ask") { "ask" } else { seen })
}

/// Writes `bytes` to the terminal.
async fn type_bytes(
    terminal: &shell_runtime::TerminalWriter,
    id: &str,
    bytes: &[u8],
) -> Result<(), ShellAnswer> {
    if bytes.is_empty() {
        return Ok(());
    }
    terminal
        .write_all(bytes)
        .await
        .map_err(|error| ShellAnswer::fail(format!("Cannot type into shell {id}: {error}")))
}

/// Takes the first line of `pending`: through the first byte that ends a
/// read (`ends`: newline, end of file, a signal key...); `false` when the
/// input ran out first (a partial line).
fn next_line(pending: &mut VecDeque<Typed>, ends: &[u8]) -> (Vec<Typed>, bool) {
    let mut unit = Vec::new();
    while let Some(item) = pending.pop_front() {
        match item {
            Typed::Text(text) => {
                if let Some(end) = text.bytes().position(|byte| ends.contains(&byte)) {
                    // `ends` are ASCII, so `end + 1` is a character boundary.
                    let (line, rest) = text.split_at(end + 1);
                    unit.push(Typed::Text(line.to_owned()));
                    if !rest.is_empty() {
                        pending.push_front(Typed::Text(rest.to_owned()));
                    }
                    return (unit, true);
                }
                unit.push(Typed::Text(text));
            }
            Typed::Key(name, key) => {
                unit.push(Typed::Key(name, key));
                if key.iter().any(|byte| ends.contains(byte)) {
                    return (unit, true);
                }
            }
        }
    }
    (unit, false)
}

/// How many lines (and a partial one) `pending` holds, as the answer counts
/// what was not typed.
fn lines_in(pending: &[Typed]) -> usize {
    let mut pending: VecDeque<Typed> = pending.iter().cloned().collect();
    let mut count = 0;
    while !pending.is_empty() {
        let _ = next_line(&mut pending, b"\n\r");
        count += 1;
    }
    count
}

/// A refused line's answer and the check's decision name, boxed: the
/// answer is large and this is the rare path.
type Refused = Box<(ShellAnswer, Option<&'static str>)>;

fn with_audit(answer: ShellAnswer, written: Result<(), crate::audit::AuditError>) -> ShellAnswer {
    match written {
        Ok(()) => answer,
        Err(error) => ShellAnswer::fail(format!(
            "{}\n[the audit log cannot be written: {}]",
            answer.text(),
            crate::error_chain(&error)
        ))
        .meta(|m| m.audit_error = Some(true)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use std::sync::Arc;

    use super::{Typed, WriteStdinTool, lines_in, merge, next_line, parse_keys, shown};
    use crate::environment::{ExecConfig, ExecEnvironment};

    fn pending(items: &[Typed]) -> VecDeque<Typed> {
        items.iter().cloned().collect()
    }

    /// Every tty session passes through `hold`: a session's whole line
    /// leaves no entry, and a partial line held for a shell no longer
    /// tracked goes when another is held, so the map stays bounded by the
    /// shells tracked, not by the sessions a server ever had.
    #[test]
    fn held_lines_are_kept_only_while_needed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = ExecConfig::new(vec![dir.path().to_path_buf()], dir.path().to_path_buf());
        let tool = WriteStdinTool::new(Arc::new(ExecEnvironment::new(config)));
        let held = |tool: &WriteStdinTool| tool.partial.lock().expect("not poisoned").len();
        for n in 0..1_000 {
            tool.hold(&format!("shell_{n}"), String::new());
        }
        assert_eq!(held(&tool), 0);
        tool.hold("shell_1", "half a li".to_owned());
        assert_eq!(tool.partial_line("shell_1"), "half a li");
        tool.hold("shell_2", "another".to_owned());
        assert_eq!(held(&tool), 1, "shell_1 is not tracked: its line goes");
        tool.hold("shell_2", String::new());
        assert_eq!(held(&tool), 0);
    }

    #[test]
    fn a_line_ends_at_the_first_byte_that_ends_a_read() {
        let ends = b"\n\r\x04\x03";
        let mut rest = pending(&[Typed::Text("x\rtouch marker\n".into())]);
        assert_eq!(
            next_line(&mut rest, ends),
            (vec![Typed::Text("x\r".into())], true)
        );
        assert_eq!(
            next_line(&mut rest, ends),
            (vec![Typed::Text("touch marker\n".into())], true)
        );
        assert!(rest.is_empty());
        let mut rest = pending(&[Typed::Text("a\x03b".into())]);
        assert_eq!(
            next_line(&mut rest, ends),
            (vec![Typed::Text("a\x03".into())], true)
        );
        assert_eq!(
            next_line(&mut rest, ends),
            (vec![Typed::Text("b".into())], false)
        );
    }

    #[test]
    fn keys_that_end_a_read_end_the_line_and_others_do_not() {
        let ends = b"\n\r\x04";
        let mut typed = vec![Typed::Text("pass".into())];
        typed.extend(parse_keys(&["Tab".into(), "Enter".into(), "Ctrl-D".into()]).expect("known"));
        let mut rest = pending(&typed);
        let (line, complete) = next_line(&mut rest, ends);
        assert!(complete);
        assert_eq!(shown(&line), "pass[Tab][Enter]");
        assert_eq!(shown(&next_line(&mut rest, ends).0), "[Ctrl-D]");
        assert!(rest.is_empty());
    }

    #[test]
    fn what_is_left_is_counted_in_lines() {
        assert_eq!(lines_in(&[Typed::Text("a\nb\nc".into())]), 3);
        assert_eq!(lines_in(&[Typed::Text("a\r\n".into())]), 2);
        assert_eq!(lines_in(&[]), 0);
    }

    #[test]
    fn a_call_reports_ask_once_a_line_asked() {
        assert_eq!(merge(None, Some("allow")), Some("allow"));
        assert_eq!(merge(Some("allow"), Some("ask")), Some("ask"));
        assert_eq!(merge(Some("ask"), Some("allow")), Some("ask"));
        assert_eq!(merge(None, None), None);
    }

    #[test]
    fn unknown_keys_fail_naming_the_known_ones() {
        let error = parse_keys(&["Enter".into(), "F13".into()]).expect_err("unknown");
        assert!(error.contains("`F13`"), "{error}");
        assert!(error.contains("Enter, Tab, Escape"), "{error}");
        assert!(error.contains("Ctrl-L"), "{error}");
    }

    #[test]
    fn keys_are_shown_by_name() {
        let mut typed = vec![Typed::Text("ls".into())];
        typed.extend(parse_keys(&["Enter".into(), "Ctrl-D".into()]).expect("known"));
        assert_eq!(shown(&typed), "ls[Enter][Ctrl-D]");
    }
}
