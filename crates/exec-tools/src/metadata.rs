//! The metadata each tool answers (MCP `structuredContent`, where the
//! answer's text is added as `output`, last). One type per tool; its schema
//! is the tool's `outputSchema`. Fields are declared in the order they are
//! serialised: what a client needs most first (`status`, `exit_code`,
//! `truncated`, `output_file`, `omitted_chars`, the shell id), so a client
//! that keeps only the head of a long answer still sees them. Absent facts
//! stay absent.

use schemars::JsonSchema;
use serde::Serialize;

/// The most of a command the metadata carries, in characters (Unicode
/// scalar values). Every answer echoes its command, and a command can be
/// megabytes long (a here-doc writing a file): holding and sending it whole
/// in each answer costs memory and the client's context for nothing the
/// text does not already say (issue 29, item 6).
pub const COMMAND_META_CHARS: usize = 1000;

/// `command`, cut to its first [`COMMAND_META_CHARS`] characters.
pub(crate) fn capped_command(command: &str) -> String {
    match command.char_indices().nth(COMMAND_META_CHARS) {
        Some((end, _)) => command[..end].to_owned(),
        None => command.to_owned(),
    }
}

/// What a `Bash` answer carries besides its text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct BashMetadata {
    /// `completed`, `failed`, `timeout`, `killed`, `running` (a background
    /// or waiting shell), `blocked` (refused, nothing ran) or `cancelled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    /// The command's exit code, once it exited by itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Whether the middle of the output was cut from the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// The file that holds the whole output, when the text was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
    /// How many characters of output the text leaves out, when cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_chars: Option<u64>,
    /// The background shell's id (for `BashOutput`, `WriteStdin`, `KillShell`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bash_id: Option<String>,
    /// Whether a tty command waits for input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for_input: Option<bool>,
    /// The command as run (secrets redacted), at most its first 1000 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The call's `description`, echoed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The timeout that applied, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// How long the command ran, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Set on a dry run: nothing ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// The policy's decision when it was not a plain allow: `deny` or `ask`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'static str>,
    /// The rule behind the decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Who approved an `ask` command: `user`, `remembered` or `fallback`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<&'static str>,
    /// How many execs the policy refused while the command ran (policy at
    /// run time), each named in a `[refused at run time: ...]` line; absent
    /// when none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_refusals: Option<u64>,
    /// Set when the audit log could not be written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_error: Option<bool>,
}

/// What a `BashOutput` or `WriteStdin` answer carries besides its text:
/// the shell's state after the read (`WriteStdin` answers as `BashOutput`
/// does, so both tools share the type).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ShellMetadata {
    /// `pending`, `running`, `completed`, `failed`, `killed`, `timeout`, or
    /// `blocked` (a line refused: nothing was typed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    /// The shell's exit code, once it exited by itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Whether the middle of the new output was cut from the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// The files that hold the whole output, when the text was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
    /// How many characters of output the text leaves out, when cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_chars: Option<u64>,
    /// Bytes of output dropped from memory before this read could show
    /// them (each gap is one `[... N bytes dropped ...]` line; the output
    /// file keeps them); absent when none were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_bytes: Option<u64>,
    /// The shell's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bash_id: Option<String>,
    /// Whether the shell still runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_running: Option<bool>,
    /// Whether a tty shell waits for input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for_input: Option<bool>,
    /// `BashOutput` with `until`: what ended the wait: `regex`, `port`,
    /// `idle_ms`, `exit` (the shell ended) or `wait_ran_out`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<&'static str>,
    /// How long the shell has run (or ran), in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// How many execs the policy refused at run time since the last
    /// answer for this shell, each named in a `[refused at run time: ...]`
    /// line; absent when none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_refusals: Option<u64>,
    /// The shell's command (secrets redacted), at most its first 1000 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The cursor's row on the screen (`screen: true`), from 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor_row: Option<u16>,
    /// The cursor's column on the screen (`screen: true`), from 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor_col: Option<u16>,
    /// `WriteStdin`: lines not typed because the program stopped reading.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines_not_typed: Option<usize>,
    /// `WriteStdin`: the policy's decision on a refused line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'static str>,
    /// `WriteStdin`: the rule behind that decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Set when the audit log could not be written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_error: Option<bool>,
}

/// What a `KillShell` answer carries besides its text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct KillShellMetadata {
    /// The shell's status after the call (`killed` when this call ended it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    /// The shell's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell_id: Option<String>,
    /// Set when the shell had already ended before the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub already_stopped: Option<bool>,
    /// How long the shell ran, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The shell's command (secrets redacted), at most its first 1000 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Set when the audit log could not be written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_error: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_capped_at_1000_characters_not_bytes() {
        let short = "é".repeat(999);
        assert_eq!(capped_command(&short), short);
        let long = "é".repeat(1500);
        let capped = capped_command(&long);
        assert_eq!(capped.chars().count(), COMMAND_META_CHARS);
        assert!(capped.chars().all(|c| c == 'é'));
    }
}
