//! The persistent session: `cd` and `export` carry over from one foreground
//! call to the next without a long-lived shell. Each command runs in a fresh
//! `bash -c` whose EXIT trap writes `$PWD` and `export -p` to a state file;
//! the next call starts from there. A command that hangs or is killed
//! leaves the session as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use shell_runtime::quote;

/// Variables bash manages itself, or that we set per command: never carried.
const NOT_CARRIED: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_", shell_runtime::SHELL_TAG_VAR];

/// What the session remembers between calls.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct SessionState {
    /// The working directory left by the last foreground call.
    pub(crate) cwd: Option<PathBuf>,
    /// Variables set (`Some`) or unset (`None`) relative to the base environment.
    pub(crate) env: BTreeMap<String, Option<String>>,
}

/// The session slot kept in the execution context.
#[derive(Debug, Default)]
pub(crate) struct ShellSession(Mutex<SessionState>);

impl ShellSession {
    pub(crate) fn lock(&self) -> MutexGuard<'_, SessionState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SessionState {
    /// The environment of the next command: `base` with the session's changes.
    pub(crate) fn environment(&self, base: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut env = base.clone();
        for (name, value) in &self.env {
            match value {
                Some(value) => env.insert(name.clone(), value.clone()),
                None => env.remove(name),
            };
        }
        env
    }

    /// Folds the exported variables a command ended with into the session.
    pub(crate) fn absorb_exports(
        &mut self,
        given: &BTreeMap<String, String>,
        ended: &BTreeMap<String, String>,
    ) {
        for (name, value) in ended {
            if NOT_CARRIED.contains(&name.as_str()) {
                continue;
            }
            if given.get(name) != Some(value) {
                self.env.insert(name.clone(), Some(value.clone()));
            }
        }
        for name in given.keys() {
            if !ended.contains_key(name) && !NOT_CARRIED.contains(&name.as_str()) {
                self.env.insert(name.clone(), None);
            }
        }
    }
}

/// One call's state file: `$PWD`, a NUL, then `export -p`.
#[derive(Debug, Clone)]
pub(crate) struct StateFiles {
    pub(crate) path: PathBuf,
}

impl StateFiles {
    pub(crate) fn new(stem: &Path) -> Self {
        Self {
            path: stem.with_extension("state"),
        }
    }

    /// The working directory and the `export -p` text, if the trap ran.
    pub(crate) fn read(&self) -> Option<(String, String)> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        let (cwd, exports) = text.split_once('\0')?;
        Some((cwd.to_owned(), exports.to_owned()))
    }

    pub(crate) fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The script that runs `command` and saves the shell's state when it exits,
/// however it exits (`exit N`, `set -e`, the end of the script). The command
/// goes through `eval` as one quoted word, so its syntax errors cannot touch
/// the trap and its line numbers start at 1.
pub(crate) fn wrap_command(command: &str, files: &StateFiles) -> String {
    format!(
        "__agent_exec_save() {{ {{ {{ builtin printf '%s\\0' \"$PWD\"; builtin export -p; }} > {state}; }} 2>/dev/null; }}\n\
         trap __agent_exec_save EXIT\n\
         eval {command}",
        state = quote(&files.path.to_string_lossy()),
        command = quote(command),
    )
}

/// Parses the output of bash's `export -p`: `declare -x NAME="VALUE"` lines,
/// values with `\"`, `\\`, `\$` and `` \` `` escaped and newlines literal.
/// Variables exported without a value are left out.
pub(crate) fn parse_export_p(text: &str) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    let mut rest = text;
    while let Some(after) = rest.strip_prefix("declare -") {
        // Flags such as `x` or `rx`, then a space.
        let Some(space) = after.find(' ') else { break };
        let line = &after[space + 1..];
        let name_end = line.find(['=', '\n']).unwrap_or(line.len());
        let name = &line[..name_end];
        if line[name_end..].starts_with("=\"") {
            let mut value = String::new();
            let mut chars = line[name_end + 2..].char_indices();
            let mut end = None;
            while let Some((at, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, next)) = chars.next() {
                            if !matches!(next, '"' | '\\' | '$' | '`') {
                                value.push('\\');
                            }
                            value.push(next);
                        }
                    }
                    '"' => {
                        end = Some(name_end + 2 + at + 1);
                        break;
                    }
                    other => value.push(other),
                }
            }
            let Some(end) = end else { break };
            vars.insert(name.to_owned(), value);
            rest = line[end..].strip_prefix('\n').unwrap_or(&line[end..]);
        } else {
            rest = line[name_end..].strip_prefix('\n').unwrap_or("");
        }
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_p_round_trips_odd_values() {
        let text = "declare -x A=\"1\"\ndeclare -x B=\"two words\"\ndeclare -x C\ndeclare -rx D=\"q\\\"uote \\$x \\\\ \\` é\nnext\"\ndeclare -x E=\"\"\n";
        let vars = parse_export_p(text);
        assert_eq!(vars.get("A").map(String::as_str), Some("1"));
        assert_eq!(vars.get("B").map(String::as_str), Some("two words"));
        assert!(!vars.contains_key("C"));
        assert_eq!(
            vars.get("D").map(String::as_str),
            Some("q\"uote $x \\ ` é\nnext")
        );
        assert_eq!(vars.get("E").map(String::as_str), Some(""));
    }

    #[test]
    fn exports_and_unsets_are_carried_but_bash_own_are_not() {
        let given = BTreeMap::from([
            ("KEEP".to_owned(), "1".to_owned()),
            ("GONE".to_owned(), "x".to_owned()),
        ]);
        let ended = BTreeMap::from([
            ("KEEP".to_owned(), "1".to_owned()),
            ("NEW".to_owned(), "v".to_owned()),
            ("PWD".to_owned(), "/x".to_owned()),
        ]);
        let mut state = SessionState::default();
        state.absorb_exports(&given, &ended);
        assert_eq!(state.env.get("NEW"), Some(&Some("v".to_owned())));
        assert_eq!(state.env.get("GONE"), Some(&None));
        assert!(!state.env.contains_key("KEEP") && !state.env.contains_key("PWD"));
        let next = state.environment(&given);
        assert_eq!(next.get("NEW").map(String::as_str), Some("v"));
        assert!(!next.contains_key("GONE"));
    }
}
