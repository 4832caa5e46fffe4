//! The carried state: `cd` and `export` carry over from one foreground call
//! to the next of the same session (tool-core's `Session`: one client's
//! calls) without a long-lived shell. Each command runs in a fresh
//! `bash -c` that writes `$PWD` and every exported variable, when it ends,
//! to a memfd it inherits as descriptor [`STATE_FD`]: no path names it, so
//! no command can replace it or point it elsewhere (docs/decisions/0017).
//! The next call starts from there. A command that hangs or is killed
//! leaves the carried state as it was, and so does a state that did not
//! come out whole or is over [`MAX_STATE_BYTES`].
//!
//! The state is `$PWD` and bash's own `declare -px`, separated by
//! NULs and ended by a mark, written by builtins only (no process is
//! started). `declare -px` writes one line per variable in a form bash
//! reads back (`"..."`, or `$'...'` with octal escapes for anything
//! unprintable, whatever the locale), so a real parser of those two
//! quotings reads any value (newlines, quotes, invalid UTF-8) exactly.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use exec_policy::export_carries;

use crate::quote::quote;

/// Variables bash manages itself, or that we set per command: never carried.
const NOT_CARRIED: &[&str] = &[
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "UID",
    "EUID",
    "PPID",
    "TMPDIR",
    shell_runtime::SHELL_TAG_VAR,
];

/// The descriptor a wrapped command's shell writes its state to. The
/// command itself runs with it closed (bash keeps a close-on-exec copy at
/// [`SAVED_STATE_FD`] meanwhile), so no program it starts inherits it.
pub(crate) const STATE_FD: RawFd = 3;

/// Where bash keeps its copy of [`STATE_FD`] while the command runs: the
/// first number bash saves a descriptor at (its `SHELL_FD_BASE`), free
/// because the shell starts with 0, 1, 2 and [`STATE_FD`] only.
const SAVED_STATE_FD: RawFd = 10;

/// The most a state may take. A larger one is not read: the carried state
/// stays as it was and the answer says so. `declare -px` of an environment
/// at the kernel's own limit for a command (`ARG_MAX`, 2 MiB with the
/// arguments) hardly gets there.
pub(crate) const MAX_STATE_BYTES: u64 = 1 << 20;

/// The last entry of a state that came out whole. It has no `=`, so
/// no variable entry can be mistaken for it.
const END_MARK: &[u8] = b"agent-exec-state-end";

/// Whether `name` is one the shell manages itself (never carried, never
/// reported). Public (hidden) so the carried-state property test draws its
/// names from this one list instead of a copy.
pub fn is_shell_managed(name: &str) -> bool {
    NOT_CARRIED.contains(&name) || (name.starts_with("BASH") && name != "BASH_ENV")
}

/// What is carried from one call to the next.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct CarriedState {
    /// The working directory left by the last foreground call.
    pub(crate) cwd: Option<PathBuf>,
    /// Variables set (`Some`) or unset (`None`) relative to the base environment.
    pub(crate) env: BTreeMap<String, Option<OsString>>,
}

/// The carried state's slot in the context's `Session`, shared by the
/// session's calls.
#[derive(Debug, Default)]
pub(crate) struct CarriedStateSlot(Mutex<CarriedState>);

impl CarriedStateSlot {
    pub(crate) fn lock(&self) -> MutexGuard<'_, CarriedState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A command's environment: variable names (always valid shell names or
/// names from the server's own environment) to raw values.
pub(crate) type Vars = BTreeMap<String, OsString>;

impl CarriedState {
    /// The environment of the next command: `base` with the carried changes.
    pub(crate) fn environment(&self, base: &BTreeMap<String, String>) -> Vars {
        let mut env: Vars = base
            .iter()
            .map(|(name, value)| (name.clone(), OsString::from(value)))
            .collect();
        for (name, value) in &self.env {
            match value {
                Some(value) => env.insert(name.clone(), value.clone()),
                None => env.remove(name),
            };
        }
        env
    }

    /// Folds the exported variables a command ended with into the carried state.
    /// Returns the variables the command set or unset that do not carry
    /// over (exec-policy's [`export_carries`]: values that turn into code
    /// or change which program runs).
    pub(crate) fn absorb_exports(&mut self, given: &Vars, ended: &Vars) -> Vec<String> {
        let mut refused = Vec::new();
        let changes = ended
            .iter()
            .filter(|(name, value)| given.get(*name) != Some(value))
            .map(|(name, value)| (name, Some(value.as_os_str())))
            .chain(
                given
                    .keys()
                    .filter(|name| !ended.contains_key(*name))
                    .map(|name| (name, None)),
            );
        for (name, value) in changes {
            if is_shell_managed(name) {
                continue;
            }
            let before = given.get(name).map(OsString::as_os_str);
            match export_carries(name, before, value) {
                Ok(()) => {
                    self.env
                        .insert(name.clone(), value.map(OsStr::to_os_string));
                }
                Err(_) => refused.push(name.clone()),
            }
        }
        refused
    }
}

/// The state a command ended with, read back from its channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EndState {
    /// `$PWD` when the shell ended.
    pub(crate) cwd: PathBuf,
    /// Every exported variable that had a value.
    pub(crate) exports: Vars,
}

/// Why the state of a call could not be read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CaptureError {
    /// Nothing written: the shell ended without saving (`exec`, a signal,
    /// its own `EXIT` trap replaced ours and then `exit` ran).
    Missing,
    /// Cut short or malformed (memory ran out as it was written, say).
    Incomplete,
    /// Over [`MAX_STATE_BYTES`]: not read at all.
    TooLarge,
    /// No channel could be made for the call (out of descriptors, say).
    NoChannel,
}

impl CaptureError {
    /// The one line an answer carries.
    pub(crate) fn note(self) -> &'static str {
        match self {
            Self::Missing => {
                "[cd/export not kept: the shell ended before saving its state (exec, a signal, or an EXIT trap of its own); later calls keep the previous state]"
            }
            Self::Incomplete => {
                "[cd/export not kept: the state the shell wrote was cut short or malformed; later calls keep the previous state]"
            }
            Self::TooLarge => {
                "[cd/export not kept: the state the shell wrote is over 1 MiB; later calls keep the previous state]"
            }
            Self::NoChannel => {
                "[cd/export not kept: no channel for the state could be made; later calls keep the previous state]"
            }
        }
    }
}

/// One call's state channel: a memfd the shell gets as [`STATE_FD`].
/// Read with `pread` after the shell has exited, so a process the command
/// left holding it can make nothing wait, and never past
/// [`MAX_STATE_BYTES`].
#[derive(Debug)]
pub(crate) struct StateChannel {
    file: std::fs::File,
}

impl StateChannel {
    pub(crate) fn new() -> std::io::Result<Self> {
        shell_runtime::anonymous_file("agent-exec-state").map(|file| Self { file })
    }

    /// The descriptor to hand the shell (see `SpawnSpec::inherit`).
    pub(crate) fn child_end(&self) -> std::io::Result<Arc<OwnedFd>> {
        self.file
            .try_clone()
            .map(|file| Arc::new(OwnedFd::from(file)))
    }

    /// The state the shell saved when it ended.
    pub(crate) fn read(&self) -> Result<EndState, CaptureError> {
        let bytes = read_capped(&self.file, MAX_STATE_BYTES)?;
        parse_state(&bytes).ok_or(CaptureError::Incomplete)
    }
}

/// Up to `cap` bytes of `file` from its start: its size is looked at first
/// and nothing is read past it (a file growing meanwhile adds nothing).
fn read_capped(file: &std::fs::File, cap: u64) -> Result<Vec<u8>, CaptureError> {
    let size = file.metadata().map_err(|_| CaptureError::Missing)?.len();
    if size == 0 {
        return Err(CaptureError::Missing);
    }
    if size > cap {
        return Err(CaptureError::TooLarge);
    }
    let size = usize::try_from(size).map_err(|_| CaptureError::TooLarge)?;
    let mut bytes = vec![0; size];
    let mut filled = 0;
    while filled < size {
        let offset = u64::try_from(filled).unwrap_or(u64::MAX);
        match file.read_at(&mut bytes[filled..], offset) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Err(CaptureError::Incomplete),
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

/// Parses a state: `$PWD` (an absolute path, as bash keeps it), a NUL,
/// the text of bash's `declare -px`, a NUL, then [`END_MARK`] and a NUL.
/// Anything else is `None`.
pub(crate) fn parse_state(bytes: &[u8]) -> Option<EndState> {
    let body = bytes.strip_suffix(b"\0")?;
    let mut parts = body.splitn(3, |&byte| byte == 0);
    let (cwd, declarations, end) = (parts.next()?, parts.next()?, parts.next()?);
    if end != END_MARK || !cwd.starts_with(b"/") {
        return None;
    }
    let mut exports = Vars::new();
    for line in declarations.split(|&byte| byte == b'\n') {
        if line.is_empty() {
            continue;
        }
        if let Some((name, value)) = parse_declaration(line)? {
            exports.insert(name, OsString::from_vec(value));
        }
    }
    Some(EndState {
        cwd: PathBuf::from(OsStr::from_bytes(cwd)),
        exports,
    })
}

/// One line of `declare -px`: `declare -FLAGS NAME="VALUE"`,
/// `declare -FLAGS NAME=$'VALUE'` (bash's choice when the value holds
/// anything unprintable: newlines, control bytes, invalid or, without a
/// UTF-8 locale, non-ASCII bytes), or `declare -FLAGS NAME` (exported
/// without a value). `Some(None)` for what is not carried (no value, an
/// array); `None` when the line is not what bash writes.
fn parse_declaration(line: &[u8]) -> Option<Option<(String, Vec<u8>)>> {
    let rest = line.strip_prefix(b"declare -")?;
    let space = rest.iter().position(|&byte| byte == b' ')?;
    let (flags, rest) = (&rest[..space], &rest[space + 1..]);
    let name_end = rest
        .iter()
        .position(|&byte| byte == b'=')
        .unwrap_or(rest.len());
    let name = std::str::from_utf8(&rest[..name_end]).ok()?;
    if !is_shell_name(name) {
        return None;
    }
    let Some(quoted) = rest.get(name_end + 1..) else {
        return Some(None);
    };
    if flags.contains(&b'a') || flags.contains(&b'A') {
        return Some(None);
    }
    let value = if let Some(inner) = quoted.strip_prefix(b"$'") {
        ansi_c_value(inner.strip_suffix(b"'")?)?
    } else {
        double_quoted_value(quoted.strip_prefix(b"\"")?.strip_suffix(b"\"")?)?
    };
    Some(Some((name.to_owned(), value)))
}

/// The inside of `"..."` as bash's `declare -p` writes it: `\"`, `\\`, `\$`
/// and `` \` `` stand for the character; everything else is itself.
fn double_quoted_value(inner: &[u8]) -> Option<Vec<u8>> {
    let mut value = Vec::with_capacity(inner.len());
    let mut bytes = inner.iter().copied();
    while let Some(byte) = bytes.next() {
        match byte {
            b'\\' => match bytes.next()? {
                next @ (b'"' | b'\\' | b'$' | b'`') => value.push(next),
                next => value.extend([b'\\', next]),
            },
            // An unescaped quote would have ended the value.
            b'"' => return None,
            other => value.push(other),
        }
    }
    Some(value)
}

/// The inside of `$'...'`: bash's ANSI-C escapes (`\n`, `\E`, `\NNN`
/// octal, `\xHH`, ...); other bytes are themselves.
fn ansi_c_value(inner: &[u8]) -> Option<Vec<u8>> {
    let mut value = Vec::with_capacity(inner.len());
    let mut at = 0;
    while at < inner.len() {
        let byte = inner[at];
        at += 1;
        if byte == b'\'' {
            return None;
        }
        if byte != b'\\' {
            value.push(byte);
            continue;
        }
        let escape = *inner.get(at)?;
        at += 1;
        match escape {
            b'a' => value.push(0x07),
            b'b' => value.push(0x08),
            b'e' | b'E' => value.push(0x1b),
            b'f' => value.push(0x0c),
            b'n' => value.push(b'\n'),
            b'r' => value.push(b'\r'),
            b't' => value.push(b'\t'),
            b'v' => value.push(0x0b),
            b'\\' | b'\'' | b'"' | b'?' => value.push(escape),
            b'0'..=b'7' => {
                let mut code = u32::from(escape - b'0');
                for _ in 0..2 {
                    match inner.get(at) {
                        Some(digit @ b'0'..=b'7') => {
                            code = code * 8 + u32::from(digit - b'0');
                            at += 1;
                        }
                        _ => break,
                    }
                }
                value.push(u8::try_from(code & 0xff).ok()?);
            }
            b'x' => {
                let mut code = 0u32;
                let mut digits = 0;
                while digits < 2 {
                    match inner
                        .get(at)
                        .and_then(|digit| char::from(*digit).to_digit(16))
                    {
                        Some(digit) => {
                            code = code * 16 + digit;
                            at += 1;
                            digits += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 {
                    return None;
                }
                value.push(u8::try_from(code).ok()?);
            }
            _ => return None,
        }
    }
    Some(value)
}

/// A name bash accepts for a variable.
pub(crate) fn is_shell_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first == '_' || first.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Bash builtins and keywords a one-word program may be and still leave
/// the shell's state as it was (the directory, every variable).
pub(crate) const STATELESS_BUILTINS: &[&str] = &["true", "false", "echo", "pwd", "test"];

/// Whether `command`, run with the environment `env`, may change what is
/// carried to later calls. False only for one simple command of plain
/// words (letters, digits, ` _./,:@%+-`: no assignment, expansion,
/// quoting, redirection, list, pipe or glob) whose program is no builtin
/// or keyword but [`STATELESS_BUILTINS`], with no function in the
/// environment (`BASH_FUNC_*`, or a `BASH_ENV` start-up file) it could name. Such a command cannot touch
/// the shell's directory or variables, so it runs without the wrapper and
/// its state channel: the state it ends with is the one it started with
/// (the wrapper costs about 0.2 ms of a `true` round trip).
pub(crate) fn may_change_state(command: &str, env: &Vars) -> bool {
    let plain = |c: char| c.is_ascii_alphanumeric() || " _./,:@%+-".contains(c);
    if !command.chars().all(plain) {
        return true;
    }
    let Some(program) = command.split(' ').find(|word| !word.is_empty()) else {
        return true;
    };
    // A builtin or reserved word but the stateless ones may change the state
    // (`cd`, `export`, `read`, `printf -v`, `source`, `eval`, `exec`,
    // `set -a`...), or is left to the wrapper anyway.
    if (exec_policy::is_builtin(program) || exec_policy::is_keyword(program))
        && !STATELESS_BUILTINS.contains(&program)
    {
        return true;
    }
    // Functions exported to it, or defined by a start-up file it reads.
    env.keys()
        .any(|name| name.starts_with("BASH_FUNC_") || name == "BASH_ENV")
}

/// The script that runs `command` and saves the shell's state when it
/// ends, however it ends (`exit N`, `set -e`, the end of the script). The
/// command goes through `eval` as one quoted word, so its syntax errors
/// cannot touch the wrapper and its line numbers start at 1. The state is
/// saved after `eval` returns as well as from the `EXIT` trap, so a command
/// that installs an `EXIT` trap of its own keeps its state when it ends
/// normally.
///
/// The command runs with [`STATE_FD`] closed (`3>&-` on the `eval`): bash
/// keeps its copy at [`SAVED_STATE_FD`], close-on-exec, and puts it back
/// when `eval` returns, or when `exit` leaves it. An `exit` in a function
/// runs the trap before that (`FUNCNAME` then has more than our function):
/// the trap writes to bash's copy, after checking in
/// `/proc/self/fdinfo` that it is close-on-exec (so one the command opened
/// there itself is left alone).
pub(crate) fn wrap_command(command: &str) -> String {
    format!(
        "__agent_exec_save() {{ \
            [[ -n ${{__agent_exec_saved-}} ]] && return; __agent_exec_saved=1; builtin set +eu; \
            __agent_exec_fd={fd}; \
            if (( ${{#FUNCNAME[@]}} > 1 )); then __agent_exec_fd=; \
              {{ while builtin read -r __agent_exec_k __agent_exec_v; do \
                   [[ $__agent_exec_k == flags: ]] && (( 8#$__agent_exec_v & 8#2000000 )) && __agent_exec_fd={saved}; \
                 done < /proc/self/fdinfo/{saved}; }} 2>/dev/null; \
              [[ -n $__agent_exec_fd ]] || return; \
            fi; \
            {{ {{ builtin printf '%s\\0' \"$PWD\"; builtin declare -px; \
               builtin printf '\\0{end}\\0'; \
            }} >&$__agent_exec_fd; }} 2>/dev/null; }}\n\
         trap __agent_exec_save EXIT\n\
         eval {command} {fd}>&-\n\
         {{ __agent_exec_status=$?; __agent_exec_save; builtin exit $__agent_exec_status; }} 2>/dev/null",
        end = String::from_utf8_lossy(END_MARK),
        fd = STATE_FD,
        saved = SAVED_STATE_FD,
        command = quote(command),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn only_plain_programs_run_without_the_wrapper() {
        let env = Vars::new();
        for stateless in [
            "true",
            "ls -la",
            "git status",
            "cargo test -p exec-tools",
            "echo hi",
            "  pwd  ",
            "/usr/bin/env",
        ] {
            assert!(!may_change_state(stateless, &env), "{stateless}");
        }
        for stateful in [
            "cd /tmp",
            "export X",
            "X=1",
            "ls --color=auto",
            "source env.sh",
            ". env.sh",
            "read X",
            "printf -v X hi",
            "eval ls",
            "exec true",
            "set -a",
            "unset X",
            "declare -x X",
            "pushd /tmp",
            "true; cd /",
            "true && cd /",
            "ls | cd",
            "echo $X",
            "echo `cd /`",
            "echo 'a'",
            "ls > f",
            "for X in a",
            "(cd /)",
            "{ cd /; }",
            "ls\ncd /",
            "getopts a X",
            "mapfile X",
            "let X",
            "local X",
            "typeset X",
            "readonly X",
            "shopt -s x",
            "trap x EXIT",
            "builtin cd /",
            "command cd /",
            "",
            "   ",
            "ls *",
            "ls ~",
        ] {
            assert!(may_change_state(stateful, &env), "{stateful}");
        }
        let with_function: Vars = [("BASH_FUNC_ls%%".to_owned(), OsString::from("() { cd /; }"))]
            .into_iter()
            .collect();
        assert!(may_change_state("ls", &with_function));
        let with_start_up: Vars = [("BASH_ENV".to_owned(), OsString::from("/x/functions.sh"))]
            .into_iter()
            .collect();
        assert!(may_change_state("ls", &with_start_up));
    }

    fn os(value: &str) -> OsString {
        OsString::from(value)
    }

    /// A state file as the wrapper writes it.
    fn state(cwd: &[u8], declarations: &[u8]) -> Vec<u8> {
        let mut bytes = cwd.to_vec();
        bytes.push(0);
        bytes.extend_from_slice(declarations);
        bytes.push(0);
        bytes.extend_from_slice(END_MARK);
        bytes.push(0);
        bytes
    }

    #[test]
    fn declarations_are_read_in_both_quotings() {
        let bytes = state(
            b"/w/d\xffir",
            b"declare -x A=\"1\"\n\
              declare -x B=$'two\\nlines\\001\\177\\377\\303\\251 \"q\" \\\\ \\' $x `y`\\E\\a\\x41'\n\
              declare -x C=\"\"\n\
              declare -rx D=\"q\\\"uote \\$x \\\\ \\` \xc3\xa9 a=b\"\n\
              declare -x NOVALUE\n\
              declare -ax ARR=([0]=\"1\")\n",
        );
        let state = parse_state(&bytes).expect("whole");
        assert_eq!(state.cwd, PathBuf::from(OsStr::from_bytes(b"/w/d\xffir")));
        assert_eq!(state.exports.get("A"), Some(&os("1")));
        assert_eq!(
            state.exports.get("B"),
            Some(&OsString::from_vec(
                b"two\nlines\x01\x7f\xff\xc3\xa9 \"q\" \\ ' $x `y`\x1b\x07A".to_vec()
            ))
        );
        assert_eq!(state.exports.get("C"), Some(&os("")));
        assert_eq!(state.exports.get("D"), Some(&os("q\"uote $x \\ ` é a=b")));
        assert!(!state.exports.contains_key("NOVALUE") && !state.exports.contains_key("ARR"));
    }

    #[test]
    fn a_state_file_cut_short_or_malformed_is_refused() {
        let whole = state(b"/w", b"declare -x A=\"1\"\n");
        assert!(parse_state(&whole).is_some());
        for cut in 0..whole.len() {
            assert_eq!(parse_state(&whole[..cut]), None, "cut at {cut}");
        }
        for bad in [
            state(b"/w", b"declare -x not-a-name=\"1\"\n"),
            state(b"/w", b"declare -x A=\"unterminated\n"),
            state(b"/w", b"declare -x A=$'bad \\q escape'\n"),
            state(b"/w", b"export A=1\n"),
            // Written before the shell's own record: `$PWD` is never relative.
            state(b"junk/w", b"declare -x A=\"1\"\n"),
            state(b"", b"declare -x A=\"1\"\n"),
        ] {
            assert_eq!(parse_state(&bad), None);
        }
    }

    #[test]
    fn exports_and_unsets_are_carried_but_bash_own_are_not() {
        let given = Vars::from([("KEEP".to_owned(), os("1")), ("GONE".to_owned(), os("x"))]);
        let ended = Vars::from([
            ("KEEP".to_owned(), os("1")),
            ("NEW".to_owned(), os("v")),
            ("PWD".to_owned(), os("/x")),
            ("BASH_XTRACEFD".to_owned(), os("3")),
        ]);
        let mut state = CarriedState::default();
        assert!(state.absorb_exports(&given, &ended).is_empty());
        assert_eq!(state.env.get("NEW"), Some(&Some(os("v"))));
        assert_eq!(state.env.get("GONE"), Some(&None));
        assert!(!state.env.contains_key("KEEP") && !state.env.contains_key("PWD"));
        assert!(!state.env.contains_key("BASH_XTRACEFD"));
        let base = BTreeMap::from([
            ("KEEP".to_owned(), "1".to_owned()),
            ("GONE".to_owned(), "x".to_owned()),
        ]);
        let next = state.environment(&base);
        assert_eq!(next.get("NEW"), Some(&os("v")));
        assert!(!next.contains_key("GONE"));
    }

    #[test]
    fn startup_variables_are_named_and_not_carried() {
        let given = Vars::from([("LD_PRELOAD".to_owned(), os("/lib/x.so"))]);
        let ended = Vars::from([
            ("BASH_ENV".to_owned(), os("./x.sh")),
            ("PROMPT_COMMAND".to_owned(), os("echo hi")),
            ("GIT_CONFIG_PARAMETERS".to_owned(), os("'core.pager'='sh'")),
            ("OK".to_owned(), os("1")),
        ]);
        let mut state = CarriedState::default();
        let refused = state.absorb_exports(&given, &ended);
        assert_eq!(
            refused,
            [
                "BASH_ENV",
                "GIT_CONFIG_PARAMETERS",
                "PROMPT_COMMAND",
                "LD_PRELOAD"
            ]
        );
        assert_eq!(state.env.len(), 1);
        assert_eq!(state.env.get("OK"), Some(&Some(os("1"))));
    }

    fn channel_with(bytes: &[u8]) -> StateChannel {
        let channel = StateChannel::new().expect("memfd");
        channel.file.write_all_at(bytes, 0).expect("write");
        channel
    }

    #[test]
    fn a_state_over_the_cap_or_empty_is_not_read() {
        let whole = state(b"/w", b"declare -x A=\"1\"\n");
        assert_eq!(
            channel_with(&whole).read().expect("whole").exports.get("A"),
            Some(&os("1"))
        );
        assert_eq!(
            StateChannel::new().expect("memfd").read(),
            Err(CaptureError::Missing)
        );
        let mut padded = state(b"/w", b"declare -x A=\"1\"\n");
        padded.resize(usize::try_from(MAX_STATE_BYTES).expect("fits") + 1, b'x');
        assert_eq!(channel_with(&padded).read(), Err(CaptureError::TooLarge));
        // Only the size is looked at: a sparse 64 GiB file is refused at once.
        let sparse = StateChannel::new().expect("memfd");
        sparse.file.set_len(64 << 30).expect("set_len");
        assert_eq!(sparse.read(), Err(CaptureError::TooLarge));
        assert_eq!(
            read_capped(&channel_with(b"abcdef").file, 6).expect("at the cap"),
            b"abcdef"
        );
        assert_eq!(
            read_capped(&channel_with(b"abcdefg").file, 6),
            Err(CaptureError::TooLarge)
        );
    }

    proptest::proptest! {
        /// Whatever a command writes into the channel: no panic, and never
        /// more out than went in.
        #[test]
        fn garbage_never_panics_and_stays_bounded(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
        ) {
            if let Some(parsed) = parse_state(&bytes) {
                let out: usize = parsed.cwd.as_os_str().len()
                    + parsed.exports.iter().map(|(name, value)| name.len() + value.len()).sum::<usize>();
                proptest::prop_assert!(out <= bytes.len());
            }
        }

        /// Garbage shaped like a state (declarations with any bytes in
        /// their values) is read or refused, never a panic.
        #[test]
        fn state_shaped_garbage_never_panics(
            name in "[A-Za-z_][A-Za-z0-9_]{0,8}",
            value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            ansi in proptest::prelude::any::<bool>(),
        ) {
            let mut line = format!("declare -x {name}=").into_bytes();
            line.extend_from_slice(if ansi { b"$'" } else { b"\"" });
            line.extend(value.iter().copied().filter(|&byte| byte != 0 && byte != b'\n'));
            line.extend_from_slice(if ansi { b"'" } else { b"\"" });
            line.push(b'\n');
            let bytes = state(b"/w", &line);
            if let Some(parsed) = parse_state(&bytes) {
                proptest::prop_assert!(parsed.exports.len() <= 1);
                proptest::prop_assert!(
                    parsed.exports.values().all(|value| value.len() <= line.len())
                );
            }
        }
    }

    /// Runs `command` wrapped, in `dir`, and reads back what it left.
    async fn wrapped(
        command: &str,
        dir: &std::path::Path,
    ) -> (Result<EndState, CaptureError>, String) {
        let channel = StateChannel::new().expect("memfd");
        let spec = shell_runtime::SpawnSpec::shell(wrap_command(command), dir)
            .with_env(std::env::vars_os())
            .with_inherited(channel.child_end().expect("dup"), STATE_FD);
        let shell = shell_runtime::ShellProcess::spawn(spec)
            .await
            .expect("spawns");
        shell.wait().await;
        let output = shell.snapshot(shell_runtime::Stream::Stdout).render()
            + &shell.snapshot(shell_runtime::Stream::Stderr).render();
        (channel.read(), output)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wrapper_saves_the_state_however_the_command_ends() {
        let dir = tempfile::tempdir().expect("dir");
        let sub = dir.path().canonicalize().expect("canonical").join("sub");
        std::fs::create_dir(&sub).expect("mkdir");
        let user_file = dir.path().join("mine.txt");
        for command in [
            "cd sub; export A=1",
            "cd sub; export A=1; exit 4",
            "cd sub; export A=1; set -e; false",
            // `exit` in a function runs the trap before bash puts fd 3 back.
            "f() { cd sub; export A=1; exit 2; }; f",
            "g() { cd sub; export A=1; exit 5; }; f() { g 2>/dev/null; }; f",
            // The command's own descriptors 3 and 10 are left alone.
            "exec 3>mine.txt; echo mine >&3; cd sub; export A=1",
            "f() { exec 3>mine.txt 10>>mine.txt; cd sub; export A=1; exit 1; }; f",
        ] {
            let (ended, output) = wrapped(command, dir.path()).await;
            let ended = ended.unwrap_or_else(|error| panic!("{command}: {error:?} {output}"));
            assert_eq!(ended.cwd, sub, "{command}: {output}");
            assert_eq!(ended.exports.get("A"), Some(&os("1")), "{command}");
            let mine = std::fs::read_to_string(&user_file).unwrap_or_default();
            assert!(!mine.contains("declare"), "{command}: {mine:?}");
            let _ = std::fs::remove_file(&user_file);
        }
    }

    /// Programs the command starts never get the channel: not at 3, nor
    /// bash's copy.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn programs_the_command_starts_do_not_inherit_the_channel() {
        let dir = tempfile::tempdir().expect("dir");
        let (ended, output) = wrapped(
            "ls -l /proc/self/fd/ | grep -c memfd; f() { ls -l /proc/self/fd/ | grep -c memfd; }; f",
            dir.path(),
        )
        .await;
        assert_eq!(output, "0\n0\n");
        assert!(ended.is_ok(), "{ended:?}");
    }

    #[test]
    fn shell_names() {
        for good in ["A", "_", "_x1", "abc_DEF9"] {
            assert!(is_shell_name(good), "{good}");
        }
        for bad in ["", "1A", "A-B", "A.B", "é"] {
            assert!(!is_shell_name(bad), "{bad}");
        }
    }
}
