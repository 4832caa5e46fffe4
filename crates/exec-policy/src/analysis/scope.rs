//! What the walk knows from one command to the next: the working directory
//! a literal `cd` made known, variables assigned literally, and where the
//! command sits (function, nesting depth, whether its stdin is fed).

use std::collections::HashMap;
use std::rc::Rc;

use brush_parser::ast;

use super::paths::{components, join_path};
use super::unwrap::literal_output;
use super::words::{Expansion, Word, split_words};

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
    /// The text on standard input, when it is known (`echo X |`, `<<<`,
    /// a here-document, a file written earlier in the command).
    pub(crate) stdin_text: Option<String>,
    /// The positional parameters (`$1`...), when known (`bash -c S _ A`,
    /// `set --`, a function's arguments).
    pub(crate) positional: Option<Vec<String>>,
    /// Files the command wrote with known contents, by absolute path
    /// (`echo 'rm -rf /' > x.sh`), and process substitutions' outputs.
    pub(crate) files: HashMap<String, String>,
    /// Functions defined so far, by name.
    pub(crate) functions: HashMap<String, Rc<ast::FunctionBody>>,
    /// Functions whose call is being walked (a call to one of them is not
    /// walked again).
    pub(crate) calling: Vec<String>,
}

impl Scope {
    /// The absolute path `path` names from here, when known.
    pub(crate) fn absolute(&self, path: &str) -> Option<String> {
        let absolute = if path.starts_with('/') {
            path.to_owned()
        } else {
            join_path(self.cwd.as_deref()?, path)
        };
        Some(format!("/{}", components(&absolute).join("/")))
    }

    /// The known contents of the file `path` names.
    pub(crate) fn file(&self, path: &str) -> Option<&String> {
        self.files.get(&self.absolute(path)?)
    }
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
        match self.scope.vars.get(name) {
            Some(value) => Some(value.clone()),
            None if name == "PWD" => self.scope.cwd.clone(),
            // Unset, IFS splits at blanks (`rm${IFS}-rf${IFS}/`).
            None if name == "IFS" => Some(" \t\n".to_owned()),
            None => None,
        }
    }

    fn home(&self) -> String {
        self.home.to_owned()
    }

    fn positional(&self) -> Option<Vec<String>> {
        self.scope.positional.clone()
    }

    fn substitution(&mut self, script: &str) -> Option<String> {
        self.substitutions.push(script.to_owned());
        // A lone simple command that prints a literal (`$(echo /etc)`).
        if script.contains([';', '|', '&', '<', '>', '(', ')', '`', '$', '\n']) {
            return None;
        }
        literal_output(&split_words(script), None, self.scope.cwd.as_deref())
    }
}
