//! Walks a parsed command and lists every simple command it would run,
//! wherever it sits, with wrappers (`sudo`, `env`, `xargs`, ...) and nested
//! scripts (`bash -c`, `eval`, `$( )`) unwrapped. What a wrapper runs is
//! decided in `unwrap.rs`, text the parser cannot take is split in
//! `fallback.rs`, and `scope.rs` carries `cd` and variables along.

use brush_parser::ParserOptions;
use brush_parser::ast::{
    self, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect, Pipeline, SeparatorOperator,
};

use super::command::{Cmd, Redirect, RedirectKind};
use super::fallback::{has_deep_nesting, has_runaway_here_doc, simple_commands};
use super::lexical::{code_substitutions, substitutions_in};
use super::paths::basename;
use super::scope::{Scope, ScopeExpansion, track_assignments, track_cd, track_exports};
use super::unwrap::{Step, find_start_paths, unwrap_step};
use super::watchdog::{self, ANALYSIS_BUDGET, Deadline};
use super::words::{Word, expand};

/// Nested scripts (`bash -c`, `eval`, substitutions) deeper than this are
/// not parsed; the analysis falls back to token checks for them.
const MAX_DEPTH: usize = 8;

/// Everything collected from one command.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub(crate) cmds: Vec<Cmd>,
    /// Parts that could not be parsed and were split into words instead.
    pub(crate) fallback: bool,
    /// Scripts that fell back, kept for the raw-pattern checks.
    pub(crate) fallback_scripts: Vec<String>,
}

/// Collects the simple commands of one command line (see [`Collector::collect`]).
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

    /// Collects every simple command of `script`, run from `scope` (the
    /// session's working directory and variables, when known).
    pub(crate) fn collect(mut self, script: &str, mut scope: Scope) -> Collected {
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
        match watchdog::parse(script, &self.options, self.deadline) {
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
        for (words, redirects) in simple_commands(script) {
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
        let mut upstream: Vec<Vec<Word>> = Vec::new();
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
                for cmd in &mut self.out.cmds[start..] {
                    cmd.upstream.extend(upstream.iter().cloned());
                }
            }
            if pipeline.seq.len() > 1 {
                upstream.extend(self.out.cmds[start..].iter().map(|cmd| cmd.words.clone()));
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
        let mut expansion = ScopeExpansion::new(self.home, scope);
        let word = expand(raw, &self.options, self.deadline, &mut expansion);
        for script in expansion.substitutions {
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
                        // The body, so rules can tell what feeds the word
                        // (`bash <(curl URL)`).
                        raw: format!("<({})", subshell.list),
                        glob: false,
                        span: None,
                    });
                }
            }
        }
        if words.is_empty() {
            track_assignments(assignments, scope);
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
        track_cd(&words, scope, self.home);
        track_exports(&words, scope);
        self.push(words, redirects, scope, place, fed);
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
            upstream: Vec::new(),
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

/// Byte offset of each character index, plus one past the end.
fn char_offsets(text: &str) -> Vec<usize> {
    text.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect()
}
