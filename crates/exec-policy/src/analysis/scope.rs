//! What the walk knows from one command to the next: the working directory
//! a literal `cd` made known, variables assigned literally, and where the
//! command sits (function, nesting depth, whether its stdin is fed).

use std::collections::HashMap;

use super::paths::join_path;
use super::words::{Expansion, Word};

/// Walk state that flows from one command to the next.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    pub(crate) cwd: Option<String>,
    pub(crate) vars: HashMap<String, String>,
    pub(crate) function: Option<String>,
    pub(crate) depth: usize,
    /// Standard input here is fed by a pipe or a redirection (nested
    /// scripts and substitutions inherit it).
    pub(crate) stdin_fed: bool,
}

/// A literal `cd DIR` or `pushd DIR` makes the working directory known
/// (bare `cd` is `home`); `cd -` or a run-time target makes it unknown.
pub(crate) fn track_cd(words: &[Word], scope: &mut Scope, home: &str) {
    let Some(program) = words.first().and_then(Word::value) else {
        return;
    };
    if program != "cd" && program != "pushd" {
        return;
    }
    let target = words[1..]
        .iter()
        .find(|w| w.value().is_none_or(|v| !v.starts_with('-') || v == "-"));
    scope.cwd = match target {
        None => Some(home.to_owned()),
        Some(word) => match word.value() {
            Some("-") | None => None,
            Some(path) if path.starts_with('/') => Some(path.to_owned()),
            Some(path) => scope.cwd.as_deref().map(|cwd| join_path(cwd, path)),
        },
    };
}

/// A bare assignment (`NAME=VALUE` with no command) sets a variable the
/// rest of the script sees; one whose value is not known statically (set
/// at run time, or appended to with `+=`) forgets it.
pub(crate) fn track_assignments(assignments: Vec<(String, Option<String>)>, scope: &mut Scope) {
    for (name, value) in assignments {
        match value {
            Some(value) => scope.vars.insert(name, value),
            None => scope.vars.remove(&name),
        };
    }
}

/// `export NAME=VALUE` (and `declare`, `local`, `readonly`, `typeset`)
/// sets a variable the rest of the script sees.
pub(crate) fn track_exports(words: &[Word], scope: &mut Scope) {
    let Some("export" | "declare" | "local" | "readonly" | "typeset") =
        words.first().and_then(Word::value)
    else {
        return;
    };
    for word in &words[1..] {
        match word.value().and_then(|v| v.split_once('=')) {
            Some((name, value)) if !name.starts_with('-') => {
                scope.vars.insert(name.to_owned(), value.to_owned());
            }
            _ => {}
        }
    }
}

/// Expands words with what `scope` knows, and keeps the substitutions it
/// meets for the walk to analyse.
pub(crate) struct ScopeExpansion<'a> {
    home: &'a str,
    scope: &'a Scope,
    pub(crate) substitutions: Vec<String>,
}

impl<'a> ScopeExpansion<'a> {
    pub(crate) fn new(home: &'a str, scope: &'a Scope) -> Self {
        Self {
            home,
            scope,
            substitutions: Vec::new(),
        }
    }
}

impl Expansion for ScopeExpansion<'_> {
    fn variable(&self, name: &str) -> Option<String> {
        self.scope.vars.get(name).cloned()
    }

    fn home(&self) -> String {
        self.home.to_owned()
    }

    fn substitution(&mut self, script: &str) {
        self.substitutions.push(script.to_owned());
    }
}
