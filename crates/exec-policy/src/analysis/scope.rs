//! What the walk knows from one command to the next: the working directory
//! a literal `cd` made known, variables assigned literally, and where the
//! command sits (function, nesting depth, whether its stdin is fed).

use std::collections::HashMap;
use std::rc::Rc;

use brush_parser::ast;

use super::paths::{components, join_path, without_magic_links};
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
    /// Symbolic links and bind mounts made earlier in the command: the
    /// absolute name and the absolute path it leads to.
    pub(crate) links: HashMap<String, String>,
    /// Aliases defined so far, by name.
    pub(crate) aliases: HashMap<String, String>,
    /// Functions whose call is being walked (a call to one of them is not
    /// walked again).
    pub(crate) calling: Vec<String>,
    /// The directories `pushd` saved, most recent last (`None`: unknown).
    pub(crate) dirs: Vec<Option<String>>,
    /// A `cd -`, `popd` or `cd "$UNKNOWN"` left the working directory
    /// unknown: relative targets of destructive programs are asked about.
    pub(crate) cwd_lost: bool,
    /// Programs known by another name: `hash -p PATH NAME` and
    /// `BASH_CMDS[NAME]=PATH` (by NAME), copies and links of a program
    /// made earlier (`cp /bin/rm ./x`, `ln -s /bin/rm x`, by path: absolute
    /// when the directory is known, else as written with `./`).
    pub(crate) programs: HashMap<String, String>,
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

    /// `path` (absolute or relative) through the links made earlier in
    /// the command, when it passes through one.
    pub(crate) fn through_links(&self, path: &str) -> Option<String> {
        self.through_links_from(path, true)
    }

    /// [`Scope::through_links`]; with `follow_last` false a link named
    /// last (`rm x`, not `rm x/`) is the link itself.
    pub(crate) fn through_links_from(&self, path: &str, follow_last: bool) -> Option<String> {
        if self.links.is_empty() {
            return None;
        }
        let absolute = self.absolute(path)?;
        let parts = components(&absolute);
        let last = if follow_last || path.ends_with('/') {
            parts.len()
        } else {
            parts.len().saturating_sub(1)
        };
        for end in (1..=last).rev() {
            let prefix = format!("/{}", parts[..end].join("/"));
            if let Some(target) = self.links.get(&prefix) {
                let rest = parts[end..].join("/");
                let mut out = join_path(target, &rest);
                // `x/` through a link to a directory is the directory.
                if path.ends_with('/') && !out.ends_with('/') {
                    out.push('/');
                }
                return Some(out);
            }
        }
        None
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
    if !matches!(program, "cd" | "pushd" | "popd") {
        return;
    }
    let before = scope.cwd.clone();
    let target = words[1..]
        .iter()
        .find(|w| w.value().is_none_or(|v| !v.starts_with('-') || v == "-"));
    if program == "popd" {
        // `popd +N`/`-N` drop another entry: the directory is unknown.
        let plain = words.len() == 1 || words[1..].iter().all(|w| w.value() == Some("-n"));
        let popped = if plain { scope.dirs.pop() } else { None };
        if words[1..].iter().any(|w| w.value() == Some("-n")) {
            return;
        }
        let cwd = popped.flatten();
        scope.cwd_lost |= cwd.is_none();
        scope.cwd = cwd;
        set_oldpwd(scope, before);
        return;
    }
    if program == "pushd" && target.is_none() {
        // `pushd` alone swaps the two top directories.
        let top = scope.dirs.pop().flatten();
        scope.cwd_lost |= top.is_none();
        scope.dirs.push(before.clone());
        scope.cwd = top;
        set_oldpwd(scope, before);
        return;
    }
    if program == "pushd" {
        scope.dirs.push(before.clone());
    }
    // With CDPATH set, a name not starting with `/`, `.` or `..` is looked
    // up there first (`CDPATH=/; cd etc` is /etc).
    let cdpath = scope
        .vars
        .get("CDPATH")
        .and_then(|p| p.split(':').find(|d| !d.is_empty()))
        .map(str::to_owned);
    let cwd = match target {
        None => Some(home.to_owned()),
        Some(word) => match word.value() {
            // `cd -` goes back to `$OLDPWD`.
            Some("-") => scope.vars.get("OLDPWD").cloned(),
            None => None,
            Some(path) if path.starts_with('/') => Some(path.to_owned()),
            Some(path) if !path.starts_with('.') && cdpath.is_some() => {
                cdpath.map(|dir| join_path(&dir, path))
            }
            Some(path) => scope.cwd.as_deref().map(|cwd| join_path(cwd, path)),
        },
    };
    // Unknown because of the command itself (not a relative step from an
    // unknown start): from here the directory is someone else's choice.
    if cwd.is_none() && target.is_some_and(|w| matches!(w.value(), None | Some("-"))) {
        scope.cwd_lost = true;
    }
    scope.cwd = cwd.map(|cwd| {
        let cwd = scope.through_links(&cwd).unwrap_or(cwd);
        without_magic_links(&cwd, scope.cwd.as_deref())
    });
    set_oldpwd(scope, before);
}

/// `cd` leaves the directory it left in `$OLDPWD`.
fn set_oldpwd(scope: &mut Scope, before: Option<String>) {
    match before {
        Some(dir) => scope.vars.insert("OLDPWD".to_owned(), dir),
        None => scope.vars.remove("OLDPWD"),
    };
}

/// A bare assignment (`NAME=VALUE` with no command) sets a variable the
/// rest of the script sees; one whose value is not known statically (set
/// at run time, or appended to with `+=`) forgets it.
pub(crate) fn track_assignments(assignments: Vec<(String, Option<String>)>, scope: &mut Scope) {
    for (name, value) in assignments {
        track_hashed_assignment(&name, value.as_deref(), scope);
        match value {
            Some(value) => scope.vars.insert(name, value),
            None => scope.vars.remove(&name),
        };
    }
}

/// `export NAME=VALUE` (and `declare`, `local`, `readonly`, `typeset`)
/// sets a variable the rest of the script sees.
pub(crate) fn track_exports(words: &[Word], scope: &mut Scope, home: &str) {
    let Some("export" | "declare" | "local" | "readonly" | "typeset") =
        words.first().and_then(Word::value)
    else {
        return;
    };
    for word in &words[1..] {
        match word.value().and_then(|v| v.split_once('=')) {
            // `declare -A m=([k]=v ...)`: each keyed member.
            Some((name, value)) if value.starts_with('(') && value.ends_with(')') => {
                for item in split_words(&value[1..value.len() - 1]) {
                    if let Some((key, member)) = item
                        .value()
                        .and_then(|v| v.strip_prefix('['))
                        .and_then(|v| v.split_once("]="))
                    {
                        scope
                            .vars
                            .insert(format!("{name}[{key}]"), member.to_owned());
                    }
                }
            }
            Some((name, value)) if !name.starts_with('-') => {
                // Tilde expands after `=` in these arguments.
                let value = match value.strip_prefix('~') {
                    Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                        format!("{home}{rest}")
                    }
                    _ => value.to_owned(),
                };
                scope.vars.insert(name.to_owned(), value);
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
    /// Variables `${V:=X}` assigned while expanding.
    pub(crate) assignments: Vec<(String, String)>,
    /// What the expansion could not follow (see [`Expansion::unknown`]).
    pub(crate) unknowns: Vec<String>,
}

impl<'a> ScopeExpansion<'a> {
    pub(crate) fn new(home: &'a str, scope: &'a Scope) -> Self {
        Self {
            home,
            scope,
            substitutions: Vec::new(),
            assignments: Vec::new(),
            unknowns: Vec::new(),
        }
    }
}

impl Expansion for ScopeExpansion<'_> {
    fn variable(&self, name: &str) -> Option<String> {
        match self.scope.vars.get(name) {
            Some(value) => Some(value.clone()),
            None if name == "PWD" => self.scope.cwd.clone(),
            // The session's user is the home's owner.
            None if name == "USER" || name == "LOGNAME" => {
                self.home.rsplit('/').next().map(str::to_owned)
            }
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

    fn assign(&mut self, name: &str, value: &str) {
        self.assignments.push((name.to_owned(), value.to_owned()));
    }

    fn unknown(&mut self, what: &str) {
        self.unknowns.push(what.to_owned());
    }

    fn substitution(&mut self, script: &str) -> Option<String> {
        self.substitutions.push(script.to_owned());
        // A lone simple command that prints a literal (`$(echo /etc)`);
        // nothing prints nothing.
        if script.trim().is_empty() {
            return Some(String::new());
        }
        // `cd DIR && CMD`: CMD runs in DIR (`$(cd /etc && pwd)`).
        let mut cwd = self.scope.cwd.clone();
        let mut script = script;
        while let Some((first, rest)) = script.split_once("&&") {
            let words = split_words(first);
            match words.as_slice() {
                [cd, dir] if cd.value() == Some("cd") => {
                    let dir = dir.value()?;
                    let dir = match dir.strip_prefix('~') {
                        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                            format!("{}{rest}", self.home)
                        }
                        _ => dir.to_owned(),
                    };
                    cwd = Some(if dir.starts_with('/') {
                        dir
                    } else {
                        join_path(cwd.as_deref()?, &dir)
                    });
                }
                _ => return None,
            }
            script = rest;
        }
        if script.contains([';', '&', '>', '(', ')', '`', '$', '\n']) {
            return None;
        }
        let cwd = cwd.map(|cwd| format!("/{}", components(&cwd).join("/")));
        // A pipeline of such commands, each fed what the one before
        // prints (`echo X | base64 -d`, `rev <<< X`).
        let mut piped: Option<String> = None;
        for stage in script.split('|') {
            let mut words = split_words(stage);
            if let Some(at) = words.iter().position(|w| w.value() == Some("<<<")) {
                let text = words.get(at + 1)?.value()?.to_owned();
                piped = Some(format!("{text}\n"));
                words.truncate(at);
            } else if stage.contains('<') {
                return None;
            }
            for word in &mut words {
                if let Some(text) = &word.text
                    && (text == "~" || text.starts_with("~/"))
                {
                    word.text = Some(format!("{}{}", self.home, &text[1..]));
                }
            }
            piped = Some(literal_output(&words, piped.as_deref(), cwd.as_deref())?);
        }
        piped
    }
}

/// `ln -s TARGET NAME` (any spelling of `-s`, `-f`, `-n`) and `mount
/// --bind SRC DIR` make NAME lead to TARGET for the rest of the command.
pub(crate) fn track_links(words: &[Word], scope: &mut Scope) {
    let Some(program) = words.first().and_then(Word::value) else {
        return;
    };
    if program != "ln" && program != "mount" {
        return;
    }
    let operands: Vec<&str> = words[1..]
        .iter()
        .filter_map(Word::value)
        .filter(|v| !v.starts_with('-'))
        .collect();
    let bind = program == "mount"
        && words[1..].iter().any(|w| {
            matches!(w.value(), Some("--bind" | "--rbind" | "-B" | "-R"))
                || w.value().is_some_and(|v| v.contains("bind"))
        });
    let link = program == "ln";
    if !(bind || link) {
        return;
    }
    let operands: Vec<&str> = operands
        .into_iter()
        .filter(|v| !v.contains("bind") || !bind)
        .collect();
    if let [target, name] = operands.as_slice() {
        let target = if link && !target.starts_with('/') {
            // A relative link target is relative to the link's directory.
            scope.absolute(name).map(|n| {
                let dir = n
                    .rsplit_once('/')
                    .map_or("/", |(d, _)| if d.is_empty() { "/" } else { d })
                    .to_owned();
                join_path(&dir, target)
            })
        } else {
            scope.absolute(target)
        };
        if let (Some(target), Some(name)) = (target, scope.absolute(name)) {
            let target = scope.through_links(&target).unwrap_or(target);
            scope.links.insert(name, target);
        }
    }
}

/// The key [`Scope::programs`] holds a path under: absolute when the
/// directory is known, else the relative path as `./PATH`.
fn program_key(path: &str, scope: &Scope) -> String {
    scope.absolute(path).unwrap_or_else(|| {
        let relative = path.trim_start_matches("./");
        format!("./{relative}")
    })
}

/// Records the names a program gets: `hash -p PATH NAME`, and copies or
/// links of a program file (`cp`, `install`, `ln`, `cat SRC > DEST`), so a
/// later call by that name is judged as the program it is.
pub(crate) fn track_programs(words: &[Word], written: Option<&str>, scope: &mut Scope) {
    let Some(program) = words.first().and_then(Word::value) else {
        return;
    };
    let operands: Vec<&str> = words[1..]
        .iter()
        .filter_map(Word::value)
        .filter(|v| !v.starts_with('-'))
        .collect();
    let (source, name) = match (program, operands.as_slice(), written) {
        ("hash", [path, name], _)
            if words.iter().any(|w| w.value() == Some("-p")) && !name.contains('/') =>
        {
            scope
                .programs
                .insert((*name).to_owned(), (*path).to_owned());
            return;
        }
        ("cp" | "install" | "ln", [source, dest], _) => (*source, program_key(dest, scope)),
        ("cat", [source], Some(dest)) => (*source, program_key(dest, scope)),
        _ => return,
    };
    // A copy of a copy is the first program.
    let real = scope
        .programs
        .get(&program_key(source, scope))
        .cloned()
        .unwrap_or_else(|| source.to_owned());
    scope.programs.insert(name, real);
}

/// `BASH_CMDS[NAME]=PATH`: bash's hash table, set directly.
pub(crate) fn track_hashed_assignment(name: &str, value: Option<&str>, scope: &mut Scope) {
    if let Some(key) = name
        .strip_prefix("BASH_CMDS[")
        .and_then(|rest| rest.strip_suffix(']'))
    {
        match value {
            Some(path) => scope.programs.insert(key.to_owned(), path.to_owned()),
            None => scope.programs.remove(key),
        };
    }
}

impl Scope {
    /// The program a command word names when an earlier `hash -p`,
    /// `BASH_CMDS` entry, copy or link gave it another name.
    pub(crate) fn program_for(&self, word: &str) -> Option<&String> {
        if word.contains('/') {
            self.programs.get(&program_key(word, self))
        } else {
            self.programs.get(word)
        }
    }
}
