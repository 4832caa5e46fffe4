//! `WriteStdin`: typing into a `tty` shell (docs/interactive.md, How it
//! goes). Lines typed to a shell in front (bash, sh, dash, zsh) are
//! checked like a `Bash` command before they are written; input to any
//! other program is written as is (the sandbox is the boundary there).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use shell_runtime::ShellProcess;
use tool_core::{ExecutionContext, Tool, ToolAnnotations, ToolCategory};

use crate::audit::{AuditEntry, AuditError, with_notes};
use crate::carried_state::CarriedStateSlot;
use crate::environment::ExecEnvironment;
use crate::gate::{self, Reason};
use crate::shell_answer::{ShellAnswer, not_found, read_answer};

/// Arguments of `WriteStdin`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteStdinParams {
    /// The id of a shell started by Bash with `tty: true` (`shell_` and hex digits).
    pub bash_id: String,
    /// Text typed as is, before `keys` ("\n" is Enter).
    #[serde(default)]
    #[schemars(default = "empty")]
    pub input: String,
    /// Named keys typed after `input` (the schema lists them: `keys_description`).
    #[serde(default)]
    #[schemars(description = keys_description())]
    pub keys: Vec<String>,
    /// How long to wait for the program to exit or to wait for input
    /// again, in milliseconds (`wait_description` states the bounds).
    #[schemars(range(min = 0, max = MAX_WAIT_MS), description = wait_description())]
    #[serde(default = "default_wait")]
    #[schemars(default = "default_wait")]
    pub wait_ms: u64,
}

fn empty() -> String {
    String::new()
}

/// `wait_ms` when the call names none.
const DEFAULT_WAIT_MS: u64 = 1000;
/// The longest `wait_ms` a call may give.
const MAX_WAIT_MS: u64 = 600_000;

fn default_wait() -> u64 {
    DEFAULT_WAIT_MS
}

/// `wait_ms`'s description, from the quiet it states.
fn wait_description() -> String {
    format!(
        "Wait up to this many milliseconds for the program to exit or to wait for input again (after at least {} ms of quiet).",
        QUIET_AFTER_INPUT.as_millis()
    )
}

/// The named keys, as the description lists them.
fn key_names() -> String {
    KEYS.iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `keys`'s description, listing the keys [`KEYS`] knows.
fn keys_description() -> String {
    format!("Named keys typed after `input`: {}.", key_names())
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
        format!(
            "Types into a shell started by Bash with `tty: true` (a prompt, a REPL, a full-screen program), then answers as BashOutput does: the status line and the output new since the last read.\n\
\n\
- `input` is typed as is (\"\\n\" is Enter); `keys` are named keys typed after it: {}.\n\
- Waits up to `wait_ms` (default {DEFAULT_WAIT_MS}) for the program to exit or to wait for input again; the status line then reads `Status: running (waiting for input)`.\n\
- A line typed to a shell (bash, sh, dash, zsh) is checked like a Bash command when Enter comes (echo on or off), and a refused line is not typed; line-editing and history keys are refused while a shell is in front. Input to other programs is not checked.\n\
- To a program reading lines (not a REPL with line editing), lines go one at a time, each once the previous one was read; lines not read within `wait_ms` are not typed (the answer says how many), and text after the last Enter is held until its Enter.\n\
- Input typed while the terminal hides it (a password prompt) never appears in answers or logs.\n\
- To a shell without a terminal only `keys: [\"Ctrl-C\"]` can be sent (SIGINT to its process group).",
            key_names()
        )
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
        let Some(shell) = env.owners.shell(&env.manager, &id, context.principal()) else {
            return not_found(env, &id, context.principal());
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
            return self.interrupt(&id, &shell, &typed, wait).await;
        };
        let started = Instant::now();
        let call = Call {
            context,
            id: &id,
            shell: &shell,
            terminal: &terminal,
            typed: &typed,
            started,
            wait,
        };
        let not_typed = match self.type_input(&call).await {
            Ok(not_typed) => not_typed,
            Err(answer) => return *answer,
        };
        drop(terminal);
        answer_after_typing(env, &id, &shell, (started, wait), not_typed).await
    }

    /// A shell without a terminal: only Ctrl-C may be sent (SIGINT to its
    /// process group).
    async fn interrupt(
        &self,
        id: &str,
        shell: &ShellProcess,
        typed: &[Typed],
        wait: Duration,
    ) -> ShellAnswer {
        if shell.has_terminal() {
            return ShellAnswer::fail(format!("Shell {id} is not running"));
        }
        if typed != [Typed::Key("Ctrl-C", b"\x03")] {
            return ShellAnswer::fail(format!(
                "Shell {id} has no terminal: only keys [\"Ctrl-C\"] (SIGINT to its process group) can be sent to it; start it with Bash `tty: true` to type into it"
            ));
        }
        shell.send_interrupt();
        let written = self.audit(id, "[Ctrl-C]".to_owned(), None, "written");
        let _ = shell.wait_timeout(wait).await;
        with_audit(read_answer(&self.env, id, shell, None, false), written)
    }

    /// Types the call's input (after a line held from an earlier call):
    /// to a shell in front, checked lines; to another program, as is, one
    /// line at a time when it reads lines. Returns how many lines were not
    /// typed for want of a reader within `wait_ms`.
    async fn type_input(&self, call: &Call<'_>) -> Result<usize, Box<ShellAnswer>> {
        let Call {
            id, shell, typed, ..
        } = *call;
        let mut pending: VecDeque<Typed> = VecDeque::new();
        let held = self.partial_line(id);
        if !held.is_empty() {
            pending.push_back(Typed::Text(held));
        }
        pending.extend(typed.iter().cloned());
        let mut audited = false;
        while !pending.is_empty() {
            // Anything but a signal key waits for a program to read the
            // terminal: typed ahead, it would reach whoever reads next.
            if !only_signals(pending.make_contiguous()) && !call.reader_waits().await {
                if !audited {
                    let answer = ShellAnswer::fail(format!(
                        "Shell {id} is not waiting for input: nothing was typed (the program in front does not read the terminal; keys [\"Ctrl-C\"] interrupts it)"
                    ));
                    return Err(Box::new(answer.meta(|m| {
                        m.bash_id = Some(id.to_owned());
                        m.waiting_for_input = Some(false);
                    })));
                }
                self.hold(id, String::new());
                return Ok(lines_in(pending.make_contiguous()));
            }
            // The program in front is the one reading the terminal (with
            // `bash -c python3`, python, not the bash of the same group).
            let reader = shell.input_reader();
            let in_front = reader
                .or_else(|| call.terminal.foreground_group())
                .map(program_of);
            let shell_in_front = in_front
                .as_ref()
                .and_then(|(exe, _)| exe.as_deref())
                .is_some_and(|exe| SHELLS.contains(&exe));
            if shell_in_front {
                let rest: Vec<Typed> = pending.drain(..).collect();
                let cwd = in_front.and_then(|(_, cwd)| cwd);
                self.type_to_shell(call, &rest, cwd.as_deref(), audited)
                    .await?;
                return Ok(0);
            }
            match self
                .type_to_program(call, &mut pending, reader, &mut audited)
                .await?
            {
                Progress::Held | Progress::AllTyped => return Ok(0),
                Progress::More => {}
                Progress::NotTaken => return Ok(lines_in(pending.make_contiguous())),
            }
        }
        Ok(0)
    }

    /// Types to a shell in front, which reads the rest: every line is
    /// checked, echo or not (`stty -echo; exec sh` must not open a way
    /// round).
    async fn type_to_shell(
        &self,
        call: &Call<'_>,
        rest: &[Typed],
        cwd: Option<&std::path::Path>,
        audited: bool,
    ) -> Result<(), Box<ShellAnswer>> {
        let env = &self.env;
        let Call {
            context,
            id,
            terminal,
            typed,
            ..
        } = *call;
        let hidden = terminal.hides_input();
        // The call's input, or, after lines that went to another program,
        // the part the shell reads (a held line was logged by the call
        // that typed it).
        let logged = if hidden {
            HIDDEN.to_owned()
        } else if audited {
            env.redact(&shown(rest))
        } else {
            env.redact(&shown(typed))
        };
        match self
            .check_lines(context, (id, &logged), rest, cwd, hidden)
            .await
        {
            Ok((bytes, name)) => {
                self.audit_before_typing(id, logged, name)?;
                type_bytes(terminal, id, &bytes).await.map_err(Box::new)
            }
            Err(refused) => {
                let RefusedLine { answer, audited } = *refused;
                let written = audited.unwrap_or_else(|| self.audit(id, logged, None, "blocked"));
                let answer = answer.meta(|m| m.bash_id = Some(id.to_owned()));
                Err(Box::new(with_audit(answer, written)))
            }
        }
    }

    /// Types the next unit to a program that is not a shell: in raw mode
    /// (readline, an editor) all of it at once, as a paste where the
    /// program asked for one; in canonical mode one line, and never as a
    /// paste (a program reading lines that turned bracketed paste on must
    /// not get several at once).
    async fn type_to_program(
        &self,
        call: &Call<'_>,
        pending: &mut VecDeque<Typed>,
        reader: Option<i32>,
        audited: &mut bool,
    ) -> Result<Progress, Box<ShellAnswer>> {
        let Call {
            id,
            shell,
            terminal,
            typed,
            ..
        } = *call;
        let screen = shell.screen();
        let application_cursor = screen.as_ref().is_some_and(|s| s.application_cursor);
        let canonical = terminal.canonical();
        let paste = screen.as_ref().is_some_and(|s| s.bracketed_paste) && !canonical;
        let (unit, complete) = if canonical {
            next_line(pending, &terminal.read_ends())
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
            self.hold(id, String::from_utf8_lossy(&bytes).into_owned());
            return Ok(Progress::Held);
        }
        self.hold(id, String::new());
        if !*audited {
            let logged = if terminal.hides_input() {
                HIDDEN.to_owned()
            } else {
                self.env.redact(&shown(typed))
            };
            self.audit_before_typing(id, logged, None)?;
            *audited = true;
        }
        let before = reader.and_then(|pid| Some((pid, shell_runtime::read_calls(pid)?)));
        type_bytes(terminal, id, &bytes).await.map_err(Box::new)?;
        if pending.is_empty() {
            return Ok(Progress::AllTyped);
        }
        // One line at a time: the next one is decided once this one is
        // taken (the reader reads again, or another program reads).
        Ok(if call.line_taken(before).await {
            Progress::More
        } else {
            Progress::NotTaken
        })
    }
}

/// One `WriteStdin` call's shell and input.
struct Call<'a> {
    context: &'a ExecutionContext,
    id: &'a str,
    shell: &'a ShellProcess,
    terminal: &'a shell_runtime::TerminalWriter,
    typed: &'a [Typed],
    started: Instant,
    wait: Duration,
}

impl Call<'_> {
    /// Whether a program reads the terminal, waiting for one up to `wait_ms`.
    async fn reader_waits(&self) -> bool {
        let shell = self.shell;
        let mut reading = shell.waits_for_input(Duration::ZERO);
        while !reading && shell.is_running() && self.started.elapsed() < self.wait {
            tokio::time::sleep(POLL).await;
            reading = shell.waits_for_input(Duration::ZERO);
        }
        reading
    }

    /// Whether the line just typed was taken within `wait_ms`: the reader
    /// (`before`: its pid and read count) read again, or another program
    /// reads.
    async fn line_taken(&self, before: Option<(i32, u64)>) -> bool {
        let shell = self.shell;
        let mut pause = Duration::from_millis(1);
        loop {
            if !shell.is_running() {
                return false;
            }
            if shell.waits_for_input(Duration::ZERO) {
                let advanced = match (before, shell.input_reader()) {
                    (Some((pid, calls)), Some(reader)) if pid == reader => {
                        shell_runtime::read_calls(pid).is_some_and(|count| count > calls)
                    }
                    _ => true,
                };
                if advanced {
                    return true;
                }
            }
            if self.started.elapsed() >= self.wait {
                return false;
            }
            // Most readers take a line within a millisecond or two: look
            // again soon, then back off to the usual poll.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(POLL);
        }
    }
}

/// What [`WriteStdinTool::type_to_program`] did.
enum Progress {
    /// A partial line was held for its Enter.
    Held,
    /// Everything was typed.
    AllTyped,
    /// A line was typed and taken; more is pending.
    More,
    /// A line was typed but not taken within `wait_ms`.
    NotTaken,
}

/// The answer once the input is typed: when the program exits, or once it
/// waits for input again after the input was read and it has been quiet
/// for a while, or at `wait_ms`; with how many lines were not typed.
async fn answer_after_typing(
    env: &ExecEnvironment,
    id: &str,
    shell: &ShellProcess,
    (started, wait): (Instant, Duration),
    not_typed: usize,
) -> ShellAnswer {
    let typed_at = Instant::now();
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
    let mut answer = read_answer(env, id, shell, None, waiting);
    if not_typed > 0 {
        answer.output.push_str(&format!(
            "\n[{not_typed} line(s) not typed: the program did not read the terminal again within wait_ms; type them again once it waits for input]"
        ));
        answer = answer.meta(|m| m.lines_not_typed = Some(not_typed));
    }
    answer
}

impl WriteStdinTool {
    /// The bytes to type to a shell in front: complete lines, each checked
    /// at its Enter; what follows the last Enter is kept for the next call.
    /// Fails (with the check's decision name) on an editing key or a
    /// refused line; the refused line and what follows are dropped.
    async fn check_lines(
        &self,
        context: &ExecutionContext,
        (id, logged): (&str, &str),
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
                    return Err(unchecked(ShellAnswer::fail(format!(
                        "Key {name} refused: a shell is in front, and line editing and history are refused there; type the whole line as `input` (nothing was typed)"
                    ))));
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
                    let name = self
                        .check_line(context, (id, logged), &line, cwd, hidden)
                        .await?;
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
                        return Err(unchecked(ShellAnswer::fail(
                            "Key Ctrl-D refused: a shell is in front with a partial line (nothing was typed)",
                        )));
                    }
                    let mut buffer = [0u8; 4];
                    bytes.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
                }
                c if c.is_control() => {
                    let what = key.map_or_else(|| format!("{c:?}"), str::to_owned);
                    return Err(unchecked(ShellAnswer::fail(format!(
                        "Control character {what} refused: a shell is in front, and line editing and history are refused there (nothing was typed)"
                    ))));
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

    /// Checks one whole line as `Bash` checks a command, through the
    /// policy gate (which logs a refusal as this call's line, `logged`);
    /// an `ask` line waits for approval as a command would.
    async fn check_line(
        &self,
        context: &ExecutionContext,
        (id, logged): (&str, &str),
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
        let request = gate::Request {
            subject: gate::Subject::Line {
                bash_id: id,
                logged,
                hidden,
            },
            text: line,
            cwd: &cwd,
            vars,
        };
        match gate::clear(env, context, request).await {
            gate::Verdict::Run(cleared) => {
                // The execs the approved line leads to are held to it.
                if let (Some(effects), Some(shell)) = (cleared.effects.clone(), env.manager.get(id))
                {
                    env.approve_for_shell(shell.pid(), effects);
                }
                Ok(Some(cleared.analysis.decision.name()))
            }
            gate::Verdict::Refused(refusal) => {
                let answer = line_refused(env, &refusal);
                Err(Box::new(RefusedLine {
                    answer,
                    audited: Some(refusal.audited),
                }))
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
    ) -> Result<(), AuditError> {
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

/// A refusal made before any line was checked: the call logs it.
fn unchecked(answer: ShellAnswer) -> Refused {
    Box::new(RefusedLine {
        answer,
        audited: None,
    })
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

/// A refused line's answer, boxed: the answer is large and this is the
/// rare path.
type Refused = Box<RefusedLine>;

/// A line not typed.
struct RefusedLine {
    answer: ShellAnswer,
    /// Whether the gate wrote the refusal's audit line; `None` for a
    /// refusal before any check (an editing key), which the call logs.
    audited: Option<Result<(), AuditError>>,
}

/// A refused line's answer (`Line not typed: ...`), from the gate's verdict.
fn line_refused(env: &ExecEnvironment, refusal: &gate::Refusal) -> ShellAnswer {
    let denial = &refusal.denial;
    let rule = &denial.rule_id;
    let message = match refusal.reason {
        Reason::Denied => env.redact(&denial.message()),
        Reason::CannotAsk => env.redact(&format!("{} (nobody to ask)", denial.ask_message())),
        Reason::Declined => env.redact(&format!("approval declined ({rule})")),
        Reason::Changed => env.redact(&format!(
            "what the line runs changed while the question was open ({rule}); nothing was typed"
        )),
        Reason::TimedOut => env.redact(&format!(
            "the approval question timed out unanswered after {} ms ({rule})",
            env.config.ask_timeout.as_millis()
        )),
        Reason::Cancelled => "the call was cancelled while waiting for approval".to_owned(),
        // Neither the answer nor an approver may see a hidden line: only
        // the rule is named.
        Reason::Hidden => format!(
            "a line typed while the terminal hides input (not shown) was refused by rule {rule} ({}); hidden input is never shown to an approver",
            refusal.decision
        ),
    };
    ShellAnswer::fail(format!("Line not typed: {message}")).meta(|m| {
        m.status = Some("blocked");
        m.decision = Some(refusal.decision);
        m.rule = Some(rule.clone());
    })
}

fn with_audit(answer: ShellAnswer, written: Result<(), AuditError>) -> ShellAnswer {
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

    use super::{
        DEFAULT_WAIT_MS, KEYS, MAX_WAIT_MS, QUIET_AFTER_INPUT, Typed, WriteStdinParams,
        WriteStdinTool, lines_in, merge, next_line, parse_keys, shown,
    };
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

    /// The description and the schema name every key `KEYS` knows and
    /// the waits the code uses.
    #[test]
    fn the_descriptions_state_the_keys_and_waits_in_use() {
        let schema = tool_core::InputSchema::for_type::<WriteStdinParams>().expect("schema");
        let properties = &schema.json()["properties"];
        let keys = properties["keys"]["description"].as_str().expect("text");
        let wait = properties["wait_ms"]["description"].as_str().expect("text");
        let config = crate::ExecConfig::new(vec![std::env::temp_dir()], std::env::temp_dir());
        let tool = WriteStdinTool::new(std::sync::Arc::new(crate::ExecEnvironment::new(config)));
        let text = tool_core::Tool::description(&tool);
        for (name, _) in KEYS {
            assert!(keys.contains(name), "{keys}");
            assert!(
                text.contains(&format!("{name},")) || text.contains(&format!("{name}.")),
                "{name}"
            );
        }
        assert!(
            text.contains(&format!("(default {DEFAULT_WAIT_MS})")),
            "{text}"
        );
        assert_eq!(properties["wait_ms"]["default"], DEFAULT_WAIT_MS);
        assert_eq!(properties["wait_ms"]["maximum"], MAX_WAIT_MS);
        let quiet = format!("at least {} ms of quiet", QUIET_AFTER_INPUT.as_millis());
        assert!(wait.contains(&quiet), "{wait}");
    }

    #[test]
    fn keys_are_shown_by_name() {
        let mut typed = vec![Typed::Text("ls".into())];
        typed.extend(parse_keys(&["Enter".into(), "Ctrl-D".into()]).expect("known"));
        assert_eq!(shown(&typed), "ls[Enter][Ctrl-D]");
    }
}
