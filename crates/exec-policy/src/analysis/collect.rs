//! Walks a parsed command and lists every simple command it would run,
//! wherever it sits, with wrappers (`sudo`, `env`, `xargs`, ...) and nested
//! scripts (`bash -c`, `eval`, `$( )`) unwrapped.

use std::collections::HashMap;

use brush_parser::ParserOptions;
use brush_parser::ast::{
    self, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect, Pipeline, SeparatorOperator,
};

use super::paths::{basename, join_path};
use super::watchdog::{ANALYSIS_BUDGET, Deadline};
use super::words::{Expansion, Word, expand, split_words, substitutions_in};

/// Nested scripts (`bash -c`, `eval`, substitutions) deeper than this are
/// not parsed; the analysis falls back to token checks for them.
const MAX_DEPTH: usize = 8;

/// How a redirection writes its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedirectKind {
    /// `>`, `>>`, `>|`, `<>`, `&>`, `&>>`.
    Write,
    /// `<` and the rest.
    Other,
}

/// A redirection with a file target.
#[derive(Debug, Clone)]
pub(crate) struct Redirect {
    pub(crate) kind: RedirectKind,
    pub(crate) target: Word,
}

/// One simple command as it would run.
#[derive(Debug, Clone)]
pub(crate) struct Cmd {
    /// argv after unwrapping; may be empty (a bare redirection).
    pub(crate) words: Vec<Word>,
    pub(crate) redirects: Vec<Redirect>,
    /// The working directory, when a literal `cd` earlier made it known.
    pub(crate) cwd: Option<String>,
    /// Innermost enclosing function definition.
    pub(crate) function: Option<String>,
    /// Part of a pipeline of two or more commands.
    pub(crate) in_pipeline: bool,
    /// Run with `&`.
    pub(crate) background: bool,
    /// Nesting depth (0: the command as given).
    pub(crate) depth: usize,
    /// Paths a preceding `find` feeds to this command (`find | xargs`, `-exec`).
    pub(crate) fed_paths: Vec<Word>,
    /// Something feeds its standard input: a pipe from an earlier command,
    /// a `<` redirection, a here-document or a here-string, its own or an
    /// enclosing command's (`while read l; do ...; done < file`).
    pub(crate) stdin_fed: bool,
}

impl Cmd {
    /// The program's name (basename of the first word), if known.
    pub(crate) fn program(&self) -> Option<&str> {
        self.words.first().and_then(Word::value).map(basename)
    }

    /// The command as text, from its program word on, redirections last.
    pub(crate) fn text(&self) -> String {
        self.render(ToOwned::to_owned)
    }

    /// The text the regexes see: as [`text`](Self::text), but with the
    /// program's path reduced to its name (`/usr/bin/curl` is `curl`, as
    /// for the built-in rules), and redirection characters inside words
    /// (quoted text, such as `echo '> /dev/sda'`) turned into `_`, so only
    /// real redirections read as redirections (found by fuzzing:
    /// `echo '$(>> /dev/sda)'` was refused).
    pub(crate) fn regex_text(&self) -> String {
        let mut text = self.render(|word| word.replace(['<', '>', '|', '&', ';'], "_"));
        if let Some(program) = self.words.first().and_then(Word::value)
            && let Some(slash) = program.rfind('/')
        {
            // The rendered program word is `program` with some characters
            // replaced one for one, so its path prefix has the same length.
            text.drain(..=slash);
        }
        text
    }

    fn render(&self, word_text: impl Fn(&str) -> String) -> String {
        let mut parts: Vec<String> = self.words.iter().map(|w| word_text(w.display())).collect();
        for redirect in &self.redirects {
            let op = if redirect.kind == RedirectKind::Write {
                ">"
            } else {
                "<"
            };
            parts.push(format!("{op} {}", redirect.target.display()));
        }
        parts.join(" ")
    }
}

/// Everything collected from one command.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub(crate) cmds: Vec<Cmd>,
    /// Parts that could not be parsed and were split into words instead.
    pub(crate) fallback: bool,
    /// Scripts that fell back, kept for the raw-pattern checks.
    pub(crate) fallback_scripts: Vec<String>,
}

/// Walk state that flows from one command to the next.
#[derive(Debug, Clone, Default)]
struct Scope {
    cwd: Option<String>,
    vars: HashMap<String, String>,
    function: Option<String>,
    depth: usize,
    /// Standard input here is fed by a pipe or a redirection (nested
    /// scripts and substitutions inherit it).
    stdin_fed: bool,
}

pub(crate) struct Collector<'a> {
    options: ParserOptions,
    /// When parsing slow text stops for this analysis.
    deadline: Deadline,
    home: &'a str,
    out: Collected,
}

/// Where a simple command sits.
#[derive(Debug, Clone, Copy, Default)]
struct Place {
    in_pipeline: bool,
    background: bool,
}

impl<'a> Collector<'a> {
    pub(crate) fn new(home: &'a str) -> Self {
        Self {
            options: ParserOptions::default(),
            deadline: Deadline::after(ANALYSIS_BUDGET),
            home,
            out: Collected::default(),
        }
    }

    /// Collects every simple command of `script`.
    pub(crate) fn collect(mut self, script: &str) -> Collected {
        let mut scope = Scope::default();
        self.script(script, &mut scope, true);
        self.out
    }

    /// Parses and walks `script`; on a parse error or parser panic, splits
    /// it into words instead.
    fn script(&mut self, script: &str, scope: &mut Scope, top_level: bool) {
        if scope.depth > MAX_DEPTH {
            self.fallback(script, scope);
            return;
        }
        if has_runaway_here_doc(script) || has_deep_nesting(script) {
            self.fallback(script, scope);
            return;
        }
        match super::watchdog::parse(script, &self.options, self.deadline) {
            Some(program) => {
                let offsets = top_level.then(|| char_offsets(script));
                for list in &program.complete_commands {
                    self.list(list, scope, Place::default(), offsets.as_deref());
                }
            }
            None => self.fallback(script, scope),
        }
    }

    fn fallback(&mut self, script: &str, scope: &mut Scope) {
        self.out.fallback = true;
        self.out.fallback_scripts.push(script.to_owned());
        for segment in split_segments(script) {
            let words = split_words(&segment);
            let (words, redirects) = split_redirects(words);
            self.simple(words, redirects, scope, Place::default(), Vec::new());
        }
        // The token split keeps double-quoted text whole, but a `$( )` or
        // backtick inside it still runs: `echo "$(rm -rf /)"` followed by a
        // line that sends the text here was allowed (fuzzing found the
        // decision flip). Each body is analysed as a command of its own;
        // bodies are strictly shorter, so this ends, and the depth limit
        // bounds the recursion.
        if scope.depth <= MAX_DEPTH {
            for inner in code_substitutions(script) {
                let mut inner_scope = scope.clone();
                inner_scope.depth += 1;
                self.script(&inner, &mut inner_scope, false);
            }
        }
    }

    fn list(
        &mut self,
        list: &CompoundList,
        scope: &mut Scope,
        place: Place,
        offsets: Option<&[usize]>,
    ) {
        for item in &list.0 {
            let background = place.background || matches!(item.1, SeparatorOperator::Async);
            let item_place = Place {
                background,
                ..place
            };
            self.pipeline(&item.0.first, scope, item_place, offsets);
            for next in &item.0.additional {
                let (ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline)) = next;
                self.pipeline(pipeline, scope, item_place, offsets);
            }
        }
    }

    fn pipeline(
        &mut self,
        pipeline: &Pipeline,
        scope: &mut Scope,
        place: Place,
        offsets: Option<&[usize]>,
    ) {
        let in_pipeline = place.in_pipeline || pipeline.seq.len() > 1;
        let place = Place {
            in_pipeline,
            ..place
        };
        let mut fed: Vec<Word> = Vec::new();
        for (index, command) in pipeline.seq.iter().enumerate() {
            let start = self.out.cmds.len();
            if index == 0 {
                // Left alone, so `exec < file` goes on feeding what follows.
                self.command(command, scope, place, offsets, std::mem::take(&mut fed));
            } else {
                // Reads the pipe from the command before it.
                let stdin_fed = std::mem::replace(&mut scope.stdin_fed, true);
                self.command(command, scope, place, offsets, std::mem::take(&mut fed));
                scope.stdin_fed = stdin_fed;
            }
            // `find PATHS | xargs CMD`: CMD works on what find lists.
            if let Some(cmd) = self.out.cmds.get(start)
                && cmd.program() == Some("find")
            {
                fed = find_start_paths(&cmd.words);
            }
        }
    }

    fn command(
        &mut self,
        command: &Command,
        scope: &mut Scope,
        place: Place,
        offsets: Option<&[usize]>,
        fed: Vec<Word>,
    ) {
        match command {
            Command::Simple(simple) => self.simple_ast(simple, scope, place, offsets, fed),
            Command::Compound(compound, redirects) => {
                let stdin_fed = scope.stdin_fed;
                scope.stdin_fed |= redirects.as_ref().is_some_and(|list| feeds_stdin(&list.0));
                self.compound(compound, scope, place, offsets);
                scope.stdin_fed = stdin_fed;
                if let Some(list) = redirects {
                    let redirects = self.redirects(&list.0, scope);
                    self.push(Vec::new(), redirects, scope, place, Vec::new());
                }
            }
            Command::Function(function) => {
                let mut inner = scope.clone();
                inner.function = Some(function.fname.value.clone());
                self.compound(&function.body.0, &mut inner, Place::default(), offsets);
            }
            Command::ExtendedTest(..) => {}
        }
    }

    fn compound(
        &mut self,
        compound: &CompoundCommand,
        scope: &mut Scope,
        place: Place,
        offsets: Option<&[usize]>,
    ) {
        match compound {
            CompoundCommand::BraceGroup(group) => self.list(&group.list, scope, place, offsets),
            CompoundCommand::Subshell(subshell) => {
                // A subshell's `cd` and variables do not leak out.
                let mut inner = scope.clone();
                self.list(&subshell.list, &mut inner, place, offsets);
            }
            CompoundCommand::ForClause(clause) => {
                if let Some(values) = &clause.values {
                    for value in values {
                        self.expand(&value.value, scope);
                    }
                }
                self.list(&clause.body.list, scope, place, offsets);
            }
            CompoundCommand::ArithmeticForClause(clause) => {
                self.list(&clause.body.list, scope, place, offsets);
            }
            CompoundCommand::CaseClause(clause) => {
                self.expand(&clause.value.value, scope);
                for case in &clause.cases {
                    if let Some(list) = &case.cmd {
                        self.list(list, scope, place, offsets);
                    }
                }
            }
            CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition, scope, place, offsets);
                self.list(&clause.then, scope, place, offsets);
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition, scope, place, offsets);
                    }
                    self.list(&other.body, scope, place, offsets);
                }
            }
            CompoundCommand::WhileClause(clause) | CompoundCommand::UntilClause(clause) => {
                self.list(&clause.0, scope, place, offsets);
                self.list(&clause.1.list, scope, place, offsets);
            }
            CompoundCommand::Coprocess(coprocess) => {
                let place = Place {
                    background: true,
                    ..place
                };
                // A coprocess reads from a pipe the shell holds.
                let stdin_fed = std::mem::replace(&mut scope.stdin_fed, true);
                self.command(&coprocess.body, scope, place, offsets, Vec::new());
                scope.stdin_fed = stdin_fed;
            }
            CompoundCommand::Arithmetic(_) => {}
        }
    }

    fn expand(&mut self, raw: &str, scope: &mut Scope) -> Word {
        let mut env = ScopeExpansion {
            collector: self,
            scope,
            substitutions: Vec::new(),
        };
        let (options, deadline) = (env.collector.options.clone(), env.collector.deadline);
        let word = expand(raw, &options, deadline, &mut env);
        let substitutions = std::mem::take(&mut env.substitutions);
        for script in substitutions {
            let mut inner = scope.clone();
            inner.depth += 1;
            self.script(&script, &mut inner, false);
        }
        word
    }

    fn expand_located(
        &mut self,
        word: &ast::Word,
        scope: &mut Scope,
        offsets: Option<&[usize]>,
    ) -> Word {
        let mut expanded = self.expand(&word.value, scope);
        if let (Some(offsets), Some(loc)) = (offsets, &word.loc) {
            let byte = |index: usize| offsets.get(index).copied();
            if let (Some(start), Some(end)) = (byte(loc.start.index), byte(loc.end.index)) {
                expanded.span = Some((start, end));
            }
        }
        expanded
    }

    fn redirects(&mut self, list: &[IoRedirect], scope: &mut Scope) -> Vec<Redirect> {
        let mut out = Vec::new();
        for redirect in list {
            match redirect {
                IoRedirect::File(_, kind, target) => match target {
                    IoFileRedirectTarget::Filename(word) => {
                        let kind = match kind {
                            IoFileRedirectKind::Write
                            | IoFileRedirectKind::Append
                            | IoFileRedirectKind::Clobber
                            | IoFileRedirectKind::ReadAndWrite => RedirectKind::Write,
                            _ => RedirectKind::Other,
                        };
                        let target = self.expand(&word.value, scope);
                        out.push(Redirect { kind, target });
                    }
                    IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                        let mut inner = scope.clone();
                        self.list(&subshell.list, &mut inner, Place::default(), None);
                    }
                    IoFileRedirectTarget::Duplicate(word) => {
                        self.expand(&word.value, scope);
                    }
                    IoFileRedirectTarget::Fd(_) => {}
                },
                IoRedirect::OutputAndError(word, _) => {
                    let target = self.expand(&word.value, scope);
                    out.push(Redirect {
                        kind: RedirectKind::Write,
                        target,
                    });
                }
                IoRedirect::HereString(_, word) => {
                    self.expand(&word.value, scope);
                }
                IoRedirect::HereDocument(_, doc) => {
                    if doc.requires_expansion {
                        // Substitutions in an unquoted here-document run.
                        for script in substitutions_in(&doc.doc.value) {
                            let mut inner = scope.clone();
                            inner.depth += 1;
                            self.script(&script, &mut inner, false);
                        }
                    }
                }
            }
        }
        out
    }

    fn simple_ast(
        &mut self,
        simple: &ast::SimpleCommand,
        scope: &mut Scope,
        place: Place,
        offsets: Option<&[usize]>,
        fed: Vec<Word>,
    ) {
        let mut words = Vec::new();
        let mut redirects = Vec::new();
        let mut assignments = Vec::new();
        let items = simple
            .prefix
            .iter()
            .flat_map(|p| p.0.iter())
            .map(Some)
            .chain(std::iter::once(None))
            .chain(simple.suffix.iter().flat_map(|s| s.0.iter()).map(Some));
        for item in items {
            match item {
                None => {
                    if let Some(word) = &simple.word_or_name {
                        words.push(self.expand_located(word, scope, offsets));
                    }
                }
                Some(CommandPrefixOrSuffixItem::Word(word)) => {
                    words.push(self.expand_located(word, scope, offsets));
                }
                Some(CommandPrefixOrSuffixItem::IoRedirect(redirect)) => {
                    redirects.extend(self.redirects(std::slice::from_ref(redirect), scope));
                }
                Some(CommandPrefixOrSuffixItem::AssignmentWord(assignment, word)) => {
                    if words.is_empty() {
                        assignments.push(self.assignment(assignment, scope));
                    } else {
                        // `export X=/` and friends: the word is an argument.
                        words.push(self.expand_located(word, scope, offsets));
                    }
                }
                Some(CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell)) => {
                    let mut inner = scope.clone();
                    self.list(&subshell.list, &mut inner, Place::default(), None);
                    words.push(Word {
                        text: None,
                        raw: "<(...)".to_owned(),
                        glob: false,
                        span: None,
                    });
                }
            }
        }
        if words.is_empty() {
            // A bare assignment sets a variable the rest of the script sees.
            for (name, value) in assignments {
                match value {
                    Some(value) => scope.vars.insert(name, value),
                    None => scope.vars.remove(&name),
                };
            }
        }
        // The redirections apply after the words are expanded: substitutions
        // in the words read the outer standard input, the command its own.
        let own_stdin = simple
            .prefix
            .iter()
            .flat_map(|p| p.0.iter())
            .chain(simple.suffix.iter().flat_map(|s| s.0.iter()))
            .any(|item| {
                matches!(item, CommandPrefixOrSuffixItem::IoRedirect(redirect)
                    if feeds_stdin(std::slice::from_ref(redirect)))
            });
        if own_stdin && words.len() == 1 && words[0].value() == Some("exec") {
            // `exec < file` feeds the rest of the script.
            scope.stdin_fed = true;
        }
        let stdin_fed = scope.stdin_fed;
        scope.stdin_fed |= own_stdin;
        self.simple(words, redirects, scope, place, fed);
        scope.stdin_fed = stdin_fed;
    }

    fn assignment(
        &mut self,
        assignment: &ast::Assignment,
        scope: &mut Scope,
    ) -> (String, Option<String>) {
        let name = match &assignment.name {
            ast::AssignmentName::VariableName(name)
            | ast::AssignmentName::ArrayElementName(name, _) => name.clone(),
        };
        let value = match &assignment.value {
            ast::AssignmentValue::Scalar(word) => self.expand(&word.value, scope).text,
            ast::AssignmentValue::Array(items) => {
                for (_, word) in items {
                    self.expand(&word.value, scope);
                }
                None
            }
        };
        (name, value.filter(|_| !assignment.append))
    }

    /// Unwraps wrappers and nested scripts, then records the command.
    fn simple(
        &mut self,
        mut words: Vec<Word>,
        redirects: Vec<Redirect>,
        scope: &mut Scope,
        place: Place,
        mut fed: Vec<Word>,
    ) {
        for _ in 0..32 {
            let Some(program) = words
                .first()
                .and_then(Word::value)
                .map(|p| basename(p).to_owned())
            else {
                break;
            };
            match unwrap_step(&program, &words) {
                Step::Done => break,
                Step::Strip(count) => {
                    words.drain(..count.min(words.len()));
                }
                Step::Script(script) => {
                    let mut inner = scope.clone();
                    inner.depth += 1;
                    self.script(&script, &mut inner, false);
                    break;
                }
                Step::Exec(inner_words) => {
                    // find -exec CMD {} ;  and  xargs CMD: CMD works on find's paths.
                    if program == "find" {
                        fed = find_start_paths(&words);
                        self.push(words.clone(), Vec::new(), scope, place, Vec::new());
                    }
                    words = inner_words;
                }
            }
        }
        self.track_cd(&words, scope);
        track_exports(&words, scope);
        self.push(words, redirects, scope, place, fed);
    }

    fn track_cd(&self, words: &[Word], scope: &mut Scope) {
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
            None => Some(self.home.to_owned()),
            Some(word) => match word.value() {
                Some("-") | None => None,
                Some(path) if path.starts_with('/') => Some(path.to_owned()),
                Some(path) => scope.cwd.as_deref().map(|cwd| join_path(cwd, path)),
            },
        };
    }

    fn push(
        &mut self,
        words: Vec<Word>,
        redirects: Vec<Redirect>,
        scope: &Scope,
        place: Place,
        fed: Vec<Word>,
    ) {
        self.out.cmds.push(Cmd {
            words,
            redirects,
            cwd: scope.cwd.clone(),
            function: scope.function.clone(),
            in_pipeline: place.in_pipeline,
            background: place.background,
            depth: scope.depth,
            fed_paths: fed,
            stdin_fed: scope.stdin_fed,
        });
    }
}

/// Whether one of `redirects` gives file descriptor 0 a new source (`<`,
/// `<>`, `<&`, a here-document or here-string, or any redirection of fd 0).
fn feeds_stdin(redirects: &[IoRedirect]) -> bool {
    redirects.iter().any(|redirect| match redirect {
        IoRedirect::File(fd, kind, _) => {
            *fd == Some(0)
                || (fd.is_none()
                    && matches!(
                        kind,
                        IoFileRedirectKind::Read
                            | IoFileRedirectKind::ReadAndWrite
                            | IoFileRedirectKind::DuplicateInput
                    ))
        }
        IoRedirect::HereDocument(fd, _) | IoRedirect::HereString(fd, _) => {
            fd.is_none_or(|fd| fd == 0)
        }
        IoRedirect::OutputAndError(..) => false,
    })
}

/// `export NAME=VALUE` (and `declare`, `local`, `readonly`, `typeset`)
/// sets a variable the rest of the script sees.
fn track_exports(words: &[Word], scope: &mut Scope) {
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

struct ScopeExpansion<'c, 'a, 's> {
    collector: &'c mut Collector<'a>,
    scope: &'s Scope,
    substitutions: Vec<String>,
}

impl Expansion for ScopeExpansion<'_, '_, '_> {
    fn variable(&self, name: &str) -> Option<String> {
        self.scope.vars.get(name).cloned()
    }

    fn home(&self) -> String {
        self.collector.home.to_owned()
    }

    fn substitution(&mut self, script: &str) {
        self.substitutions.push(script.to_owned());
    }
}

/// What to do with a command whose program is `program`.
enum Step {
    /// Not a wrapper: analyse as is.
    Done,
    /// Drop this many leading words (wrapper and its options).
    Strip(usize),
    /// Analyse this script instead (`bash -c`, `eval`).
    Script(String),
    /// Analyse this inner command (find -exec, xargs); the outer stays too.
    Exec(Vec<Word>),
}

/// Options of wrappers that take a separate value.
fn option_takes_value(program: &str, option: &str) -> bool {
    let list: &[&str] = match program {
        "sudo" => &[
            "-u",
            "-g",
            "-h",
            "-p",
            "-C",
            "-D",
            "-r",
            "-t",
            "-U",
            "-T",
            "--user",
            "--group",
            "--host",
            "--prompt",
            "--chdir",
            "--role",
            "--type",
            "--other-user",
            "--command-timeout",
            "--close-from",
        ],
        "doas" => &["-u", "-C"],
        "env" => &["-u", "-C", "--unset", "--chdir", "-S", "--split-string"],
        "nice" => &["-n", "--adjustment"],
        "ionice" => &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
        "timeout" => &["-s", "-k", "--signal", "--kill-after"],
        "stdbuf" => &["-i", "-o", "-e", "--input", "--output", "--error"],
        "time" => &["-f", "-o", "--format", "--output"],
        "exec" => &["-a"],
        "xargs" => &[
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "-d",
            "-E",
            "-a",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--delimiter",
            "--arg-file",
            "--replace",
        ],
        "chroot" => &["--userspec", "--groups"],
        "flock" => &["-w", "-E", "--timeout", "--conflict-exit-code"],
        "watch" => &["-n", "-d", "--interval"],
        // Everything else (nohup, command, setsid, ...) takes no option values.
        _ => &[],
    };
    list.contains(&option)
}

fn unwrap_step(program: &str, words: &[Word]) -> Step {
    match program {
        "sudo" | "doas" | "env" | "nice" | "ionice" | "nohup" | "stdbuf" | "time" | "command"
        | "builtin" | "exec" | "timeout" | "setsid" | "chroot" | "flock" | "taskset"
        | "unbuffer" | "watch" => wrapper_step(program, words),
        "busybox" | "toybox" => Step::Strip(1),
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "ash" | "mksh" | "fish" => shell_step(words),
        "su" => flag_value(words, &["-c", "--command"]).map_or(Step::Done, Step::Script),
        "eval" => Step::Script(
            words[1..]
                .iter()
                .map(Word::display)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "alias" => {
            let bodies: Vec<String> = words[1..]
                .iter()
                .filter_map(|w| {
                    w.value()
                        .and_then(|v| v.split_once('='))
                        .map(|(_, body)| body.to_owned())
                })
                .collect();
            if bodies.is_empty() {
                Step::Done
            } else {
                Step::Script(bodies.join("\n"))
            }
        }
        "xargs" => {
            let rest = skip_options(program, &words[1..]);
            let inner = words[1 + rest..].to_vec();
            if inner.is_empty() {
                Step::Done
            } else {
                Step::Exec(inner)
            }
        }
        "find" => find_exec(words).map_or(Step::Done, Step::Exec),
        _ => Step::Done,
    }
}

/// Counts the option words after a wrapper's name (and its fixed operands),
/// at most `rest.len()`.
fn skip_options(program: &str, rest: &[Word]) -> usize {
    let mut i = 0;
    while i < rest.len() {
        let Some(word) = rest[i].value() else { break };
        if word == "--" {
            i += 1;
            break;
        }
        if program == "env" && word.contains('=') && !word.starts_with('-') {
            i += 1;
            continue;
        }
        if !word.starts_with('-') || word == "-" {
            break;
        }
        if program == "command" && (word == "-v" || word == "-V") {
            // `command -v rm` only looks the name up.
            return rest.len();
        }
        let (name, inline_value) = match word.split_once('=') {
            Some((name, _)) => (name, true),
            None => (word, false),
        };
        i += 1;
        if !inline_value && option_takes_value(program, name) {
            i += 1;
        }
    }
    // Fixed operands before the wrapped command. Never past the end: an
    // option missing its value (`xargs -I`) must not make callers slice out
    // of range (fuzzing: `analyzer_grammar` panicked on it).
    let skipped = match program {
        "timeout" | "chroot" | "flock" | "taskset" => i + 1,
        _ => i,
    };
    skipped.min(rest.len())
}

fn wrapper_step(program: &str, words: &[Word]) -> Step {
    if program == "env"
        && let Some(script) = flag_value(words, &["-S", "--split-string"])
    {
        return Step::Script(script);
    }
    if program == "watch" {
        let rest = skip_options(program, &words[1..]);
        let script = words[1 + rest..]
            .iter()
            .map(Word::display)
            .collect::<Vec<_>>()
            .join(" ");
        return Step::Script(script);
    }
    Step::Strip(1 + skip_options(program, &words[1..]))
}

/// `bash [-opts] -c SCRIPT`, `bash -lc SCRIPT`, `bash script.sh` (left alone).
fn shell_step(words: &[Word]) -> Step {
    let mut has_c = false;
    for (i, word) in words.iter().enumerate().skip(1) {
        let Some(value) = word.value() else { break };
        if value.starts_with('-') && !value.starts_with("--") && value.len() > 1 {
            if value[1..].contains('c') {
                has_c = true;
            }
            continue;
        }
        if value.starts_with("--") {
            continue;
        }
        if has_c {
            return Step::Script(words[i].display().to_owned());
        }
        break;
    }
    Step::Done
}

/// The value after the first of `flags` (separate or `--flag=value`).
fn flag_value(words: &[Word], flags: &[&str]) -> Option<String> {
    for (i, word) in words.iter().enumerate() {
        let value = word.value()?;
        for flag in flags {
            if value == *flag {
                return words.get(i + 1).map(|w| w.display().to_owned());
            }
            if let Some(inline) = value
                .strip_prefix(flag)
                .and_then(|rest| rest.strip_prefix('='))
            {
                return Some(inline.to_owned());
            }
        }
    }
    None
}

/// The first `-exec`/`-execdir`/`-ok` command of a `find`, `{}` included.
fn find_exec(words: &[Word]) -> Option<Vec<Word>> {
    let start = words
        .iter()
        .position(|w| matches!(w.value(), Some("-exec" | "-execdir" | "-ok" | "-okdir")))?;
    let inner: Vec<Word> = words[start + 1..]
        .iter()
        .take_while(|w| !matches!(w.value(), Some(";" | "+")))
        .cloned()
        .collect();
    (!inner.is_empty()).then_some(inner)
}

/// The start paths of a `find` (words before the first expression), `.` if none.
pub(crate) fn find_start_paths(words: &[Word]) -> Vec<Word> {
    let paths: Vec<Word> = words
        .iter()
        .skip(1)
        .skip_while(|w| matches!(w.value(), Some("-H" | "-L" | "-P")))
        .take_while(|w| {
            w.value()
                .is_none_or(|v| !v.starts_with('-') && v != "(" && v != "!")
        })
        .cloned()
        .collect();
    if paths.is_empty() {
        vec![Word::literal(".")]
    } else {
        paths
    }
}

/// Byte offset of each character index, plus one past the end.
fn char_offsets(text: &str) -> Vec<usize> {
    text.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect()
}

/// Splits unparseable text into command segments at shell operators and
/// grouping characters, outside quotes.
pub(crate) fn split_segments(text: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                current.push(c);
            }
            // A backslash escapes the next character, except inside single quotes.
            (Some('"') | None, '\\') => {
                current.push(c);
                current.extend(chars.next());
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                current.push(c);
            }
            (None, ';' | '&' | '|' | '\n' | '(' | ')' | '{' | '}' | '`') => {
                // `>&2` and `&>` are redirections, not separators.
                if c == '&' && (current.ends_with('>') || chars.peek() == Some(&'>')) {
                    current.push(c);
                    continue;
                }
                segments.push(std::mem::take(&mut current));
            }
            (None, '$') if chars.peek() == Some(&'(') => {
                chars.next();
                segments.push(std::mem::take(&mut current));
            }
            (_, c) => current.push(c),
        }
    }
    segments.push(current);
    segments
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .collect()
}

/// Separates `>`-style redirection tokens from argument words.
fn split_redirects(words: Vec<Word>) -> (Vec<Word>, Vec<Redirect>) {
    let mut args = Vec::new();
    let mut redirects = Vec::new();
    let mut iter = words.into_iter();
    while let Some(word) = iter.next() {
        let raw = word
            .raw
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
        let is_write = raw.starts_with('>');
        let is_read = raw.starts_with('<');
        if !is_write && !is_read {
            args.push(word);
            continue;
        }
        let target_text = raw.trim_start_matches(['>', '<', '|', '&']);
        let target = if target_text.is_empty() {
            match iter.next() {
                Some(next) => next,
                None => break,
            }
        } else {
            Word {
                text: word.text.as_ref().map(|_| target_text.to_owned()),
                raw: target_text.to_owned(),
                glob: word.glob,
                span: None,
            }
        };
        let kind = if is_write {
            RedirectKind::Write
        } else {
            RedirectKind::Other
        };
        redirects.push(Redirect { kind, target });
    }
    (args, redirects)
}

/// The `$( )` and backtick bodies of `text` outside surely single-quoted
/// text (which holds no code): for text the parser did not read.
pub(crate) fn code_substitutions(text: &str) -> Vec<String> {
    // Only ASCII bytes are blanked, so the text stays UTF-8.
    let bytes: Vec<u8> = text
        .bytes()
        .zip(quoted_bytes(text))
        .map(|(byte, quoted)| {
            if quoted && byte.is_ascii() {
                b' '
            } else {
                byte
            }
        })
        .collect();
    substitutions_in(&String::from_utf8_lossy(&bytes))
}

/// True when a here-document's delimiter word is missing or starts like a
/// substitution or an operator (`<< $(`, ``<< ` ``, `<<` at the end).
/// brush-parser 0.4.0 can loop forever, allocating without bound, on such
/// text (found by a property test: `<< $( << $(` grew to 24 GB), so it is
/// never handed to the parser; the token-level fallback checks it instead.
/// Bash itself treats these as syntax errors or literal oddities, so no
/// real command loses precision.
pub(crate) fn has_runaway_here_doc(script: &str) -> bool {
    let bytes = script.as_bytes();
    let quoted = quoted_bytes(script);
    let mut index = 0;
    while let Some(offset) = script[index..].find("<<") {
        let at = index + offset;
        index = at + 2;
        if quoted.get(at).copied().unwrap_or(false) {
            continue; // Text inside quotes, not an operator.
        }
        if bytes.get(index) == Some(&b'<') {
            // `<<<`, a here-string: skip all three.
            index += 1;
            continue;
        }
        let mut next = index;
        if bytes.get(next) == Some(&b'-') {
            next += 1;
        }
        while matches!(bytes.get(next), Some(b' ' | b'\t')) {
            next += 1;
        }
        match bytes.get(next) {
            None | Some(b'\n' | b'`' | b'(' | b')' | b'<' | b'>' | b'|' | b'&' | b';') => {
                return true;
            }
            Some(b'$') if bytes.get(next + 1) == Some(&b'(') => return true,
            Some(_) => {}
        }
        // The delimiter word as written, then as the end line must spell it.
        let raw: String = script[next..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '&' | '|' | '<' | '>'))
            .collect();
        // A substitution or group in the delimiter, or one that unquotes to
        // nothing (`""`, `''`, a lone `\`), makes the end-of-body match loop.
        if raw.contains("$(") || raw.contains(['`', '(', ')']) {
            return true;
        }
        let word: String = raw
            .chars()
            .filter(|c| !matches!(c, '\'' | '"' | '\\'))
            .collect();
        if word.is_empty() {
            return true;
        }
        // A body that runs to the end of the text (no line reads as the
        // delimiter) is where the parser loops: fuzzing found
        // `<<z$( <<----- $(` allocating without bound.
        let rest = &script[next + raw.len()..];
        if !rest
            .lines()
            .skip(1)
            .any(|line| line.trim_start_matches('\t') == word)
        {
            return true;
        }
    }
    false
}

/// Parentheses nested deeper than this (outside quotes) go to the fallback.
const MAX_PAREN_DEPTH: usize = 12;

/// True when `(` nests deeper than [`MAX_PAREN_DEPTH`] outside quotes.
/// brush-parser's PEG grammar backtracks exponentially on such text (found
/// by fuzzing: 30 unclosed `(` took seconds; each one more, about 1.8x), and
/// no real command nests subshells a dozen deep.
pub(crate) fn has_deep_nesting(script: &str) -> bool {
    let mut depth = 0usize;
    let mut chars = script.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => {
                chars.next();
            }
            (None, '\'' | '"') => quote = Some(c),
            (_, '(') => {
                depth += 1;
                if depth > MAX_PAREN_DEPTH {
                    return true;
                }
            }
            (_, ')') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// For each byte of `script`, whether it surely lies inside single quotes
/// (or is escaped by a backslash) as bash would lex it.
///
/// Only the text before the first construct that changes what a `'` means
/// is classified: a double quote (a `'` inside is literal, and `"$( ... )"`
/// reopens a context where `<<` is an operator), a here-document (its body
/// is literal text), a comment, `$'...'`, a backtick or a `$( )`. From there
/// on every byte counts as unquoted, because a wrong "quoted" would hand a
/// runaway here-document to the parser (fuzzing found `"['... << $(` grow
/// without bound), while a wrong "unquoted" only costs the fallback.
pub(crate) fn quoted_bytes(script: &str) -> Vec<bool> {
    let bytes = script.as_bytes();
    let mut quoted = vec![false; bytes.len()];
    let mut in_single = false;
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if in_single {
            if byte == b'\'' {
                in_single = false;
            } else {
                quoted[index] = true;
            }
            index += 1;
            continue;
        }
        let next = bytes.get(index + 1).copied();
        match byte {
            b'\\' => {
                if let Some(slot) = quoted.get_mut(index + 1) {
                    *slot = true;
                }
                index += 2;
            }
            b'\'' => {
                in_single = true;
                index += 1;
            }
            b'"' | b'`' | b'#' => break,
            b'$' if matches!(next, Some(b'\'' | b'(' | b'{')) => break,
            b'<' if next == Some(b'<') => {
                if bytes.get(index + 2) != Some(&b'<') {
                    break; // A here-document: its body is literal.
                }
                index += 3;
            }
            _ => index += 1,
        }
    }
    quoted
}
