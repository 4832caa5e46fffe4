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
use super::fallback::{has_deep_nesting, has_runaway_here_doc, simple_commands, top_level_lines};
use std::rc::Rc;

use super::lexical::{brace_expand_within, code_substitutions, substitutions_in};
use super::paths::basename;
use super::scope::{
    Scope, ScopeExpansion, track_assignments, track_cd, track_exports, track_links, track_programs,
};
use super::unwrap::{
    ShellInput, Step, embedded_commands, find_filters, find_named_paths, find_start_paths,
    literal_output, parallel_feed, shell_input, unwrap_step, xargs_arg_file, xargs_feed,
};
use super::watchdog::{self, Deadline};
use super::words::{ARRAY_SEP, Word, expand, expand_fields};

/// Most values of a `for` loop walked one by one; longer lists are walked
/// once with the variable unknown.
const MAX_LOOP_VALUES: usize = 16;

/// Most extra walks of loop bodies and function bodies (per value, per
/// call) in one analysis: nested loops and calls multiply, and hostile
/// text must not make the analysis exponential. Past it, a loop is
/// walked once with its variable unknown and a call is not walked again
/// (its definition was).
const MAX_EXTRA_WALKS: usize = 128;

/// Shells whose stdin or script file is analysed as a script.
const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "tcsh", "csh", "rbash", "yash", "posh",
];

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
    /// A process multiplier that is no function: a loop with no bound
    /// starting a background job each time round, or `xargs -P0` fed by
    /// a producer that never ends; as text for the denial.
    pub(crate) spawner: Option<String>,
    /// What the analysis could not follow (a limit reached, a value or a
    /// directory known only at run time where it decides what runs): each
    /// makes the command an `ask`, never an allow.
    pub(crate) limits: Vec<String>,
    /// Loop variables whose values were not walked one by one: a value
    /// list the script spells out does not bound them.
    pub(crate) unbounded: Vec<String>,
}

/// Collects the simple commands of one command line (see [`Collector::collect`]).
pub(crate) struct Collector<'a> {
    options: ParserOptions,
    /// When parsing slow text stops for this analysis.
    deadline: Deadline,
    home: &'a str,
    out: Collected,
    /// The text the redirections of the simple command being read feed
    /// its standard input, when known.
    fed_text: Option<String>,
    /// Process substitutions numbered so far (`/dev/fd/63`, ...).
    process_substitutions: usize,
    /// The pipeline stage being walked reads a producer that never ends
    /// (`yes |`, `seq inf |`, `while :; do echo; done |`).
    endless_input: bool,
    /// Extra walks left (see [`MAX_EXTRA_WALKS`]).
    extra_walks: usize,
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
            deadline: Deadline::for_analysis(),
            home,
            out: Collected::default(),
            fed_text: None,
            process_substitutions: 0,
            endless_input: false,
            extra_walks: MAX_EXTRA_WALKS,
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
        if has_runaway_here_doc(script) {
            self.fallback(script, scope);
            return;
        }
        if !has_deep_nesting(script)
            && let Some(program) = watchdog::parse(script, &self.options, self.deadline)
        {
            let offsets = top_level.then(|| char_offsets(script));
            for list in &program.complete_commands {
                self.list(list, scope, Place::default(), offsets.as_deref());
            }
            return;
        }
        self.line_by_line(script, scope);
    }

    /// Text that does not parse as a whole: each run of top-level lines
    /// that parses on its own is walked as the parser sees it, and only
    /// what never parses takes the token fallback. One bad line (`echo
    /// "(((("`) thus no longer sends the commands around it to the
    /// weaker check. A run grows by at most [`MAX_LINE_RUN`] lines, so
    /// the parses stay linear in the text.
    fn line_by_line(&mut self, script: &str, scope: &mut Scope) {
        let lines = top_level_lines(script);
        if lines.len() < 2 {
            self.fallback(script, scope);
            return;
        }
        let mut start = 0;
        while start < lines.len() {
            let mut parsed: Option<usize> = None;
            for end in start..lines.len().min(start + MAX_LINE_RUN) {
                let chunk = &script[lines[start].0..lines[end].1];
                if chunk.trim().is_empty() {
                    parsed = Some(end);
                    break;
                }
                if has_deep_nesting(chunk) {
                    break;
                }
                if let Some(program) = watchdog::parse(chunk, &self.options, self.deadline) {
                    for list in &program.complete_commands {
                        self.list(list, scope, Place::default(), None);
                    }
                    parsed = Some(end);
                    break;
                }
            }
            match parsed {
                Some(end) => start = end + 1,
                None => {
                    self.fallback(&script[lines[start].0..lines[start].1], scope);
                    start += 1;
                }
            }
        }
    }

    fn fallback(&mut self, script: &str, scope: &mut Scope) {
        self.out.fallback = true;
        self.out.fallback_scripts.push(script.to_owned());
        for (words, redirects) in simple_commands(script) {
            // Normalised as the parser path would: `~`, `$HOME`, known
            // variables and `$'...'` (the split keeps their raw text).
            let words = words
                .into_iter()
                .map(|word| self.normalise(word, scope))
                .collect();
            let redirects = redirects
                .into_iter()
                .map(|redirect| Redirect {
                    target: self.normalise(redirect.target, scope),
                    ..redirect
                })
                .collect();
            let start = self.out.cmds.len();
            self.simple(words, redirects, scope, Place::default(), Vec::new());
            for cmd in &mut self.out.cmds[start..] {
                cmd.fallback = true;
            }
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

    /// Whether the loop body pushed since `start` starts a background job
    /// each time round with nothing to end the loop: a process multiplier.
    fn check_spawning_loop(&mut self, start: usize, place: Place, text: &str) {
        let body = &self.out.cmds[start..];
        let spawns = body.iter().any(|cmd| cmd.background && !place.background);
        let ends = body
            .iter()
            .any(|cmd| matches!(cmd.program(), Some("break" | "exit" | "return" | "wait")));
        if spawns && !ends && self.out.spawner.is_none() {
            self.out.spawner = Some(text.to_owned());
        }
    }

    /// A word the token split left raw, expanded where that is static.
    fn normalise(&mut self, word: Word, scope: &mut Scope) -> Word {
        match &word.text {
            Some(text) if text == "~" || text.starts_with("~/") => Word {
                text: Some(format!("{}{}", self.home, &text[1..])),
                ..word
            },
            Some(_) => word,
            None => {
                let expanded = self.expand(&word.raw, scope);
                if expanded.text.is_some() {
                    expanded
                } else {
                    word
                }
            }
        }
    }

    /// What the one command pushed since `start` prints, when known.
    fn output_since(&self, start: usize) -> Option<String> {
        match self.out.cmds.get(start..) {
            Some([cmd]) => {
                literal_output(&cmd.words, cmd.stdin_text.as_deref(), cmd.cwd.as_deref())
            }
            _ => None,
        }
    }

    /// Walks a process substitution's list; what it prints, when known.
    fn process_substitution(&mut self, list: &CompoundList, scope: &Scope) -> Option<String> {
        let mut inner = scope.clone();
        let start = self.out.cmds.len();
        self.list(list, &mut inner, Place::default(), None);
        self.output_since(start)
    }

    /// A `/dev/fd/N` word for a process substitution, its output recorded.
    fn process_substitution_word(&mut self, output: Option<String>, scope: &mut Scope) -> Word {
        self.process_substitutions += 1;
        let path = format!("/dev/fd/{}", 62 + self.process_substitutions);
        // Known output: a file the analysis can read back; unknown: a
        // run-time value, as for any substitution.
        let known = output.is_some();
        match output {
            Some(text) => {
                scope.files.insert(path.clone(), text);
            }
            None => {
                scope.files.remove(&path);
            }
        }
        Word {
            text: known.then_some(path),
            raw: "<(...)".to_owned(),
            glob: false,
            span: None,
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
        let mut piped: Option<String> = None;
        let mut endless_before = false;
        let mut upstream: Vec<Vec<Word>> = Vec::new();
        for (index, command) in pipeline.seq.iter().enumerate() {
            let start = self.out.cmds.len();
            if index == 0 {
                // Left alone, so `exec < file` goes on feeding what follows.
                self.command(command, scope, place, offsets, std::mem::take(&mut fed));
            } else {
                // Reads the pipe from the command before it.
                let stdin_fed = std::mem::replace(&mut scope.stdin_fed, true);
                let stdin_text = std::mem::replace(&mut scope.stdin_text, piped.take());
                self.endless_input = endless_before;
                self.command(command, scope, place, offsets, std::mem::take(&mut fed));
                self.endless_input = false;
                scope.stdin_fed = stdin_fed;
                scope.stdin_text = stdin_text;
                for cmd in &mut self.out.cmds[start..] {
                    cmd.upstream.extend(upstream.iter().cloned());
                }
            }
            if pipeline.seq.len() > 1 {
                upstream.extend(self.out.cmds[start..].iter().map(|cmd| cmd.words.clone()));
            }
            // What it prints, when known, is what the next one reads.
            if index + 1 < pipeline.seq.len() {
                piped = self.output_since(start);
            }
            let endless = self.out.cmds.get(start..).is_some_and(|cmds| {
                cmds.iter().any(|cmd| {
                    let args: Vec<&str> = cmd.words.iter().skip(1).filter_map(Word::value).collect();
                    match cmd.program() {
                        Some("yes") => true,
                        Some("seq") => args.iter().any(|a| a.starts_with("inf")),
                        _ => false,
                    }
                }) || matches!(command, Command::Compound(CompoundCommand::WhileClause(clause), _)
                    if clause.0.0.len() == 1 && cmds.first().is_some_and(|c| matches!(c.program(), Some(":" | "true"))))
            });
            endless_before = endless;
            // `find PATHS | xargs CMD`: CMD works on what find lists.
            if let Some(cmd) = self.out.cmds.get(start)
                && cmd.program() == Some("find")
            {
                fed = if find_filters(&cmd.words, cmd.cwd.as_deref(), self.home) {
                    find_named_paths(&cmd.words)
                } else {
                    find_start_paths(&cmd.words)
                };
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
                // `$FUNCNAME` in the body is the function's name.
                inner
                    .vars
                    .insert("FUNCNAME".to_owned(), function.fname.value.clone());
                self.compound(&function.body.0, &mut inner, Place::default(), offsets);
                // Expanded at each call; analysed once here.
                if let Some(list) = &function.body.1 {
                    let redirects = self.redirects(&list.0, &mut inner);
                    self.push(Vec::new(), redirects, &inner, Place::default(), Vec::new());
                }
                scope
                    .functions
                    .insert(function.fname.value.clone(), Rc::new(function.body.clone()));
            }
            Command::ExtendedTest(test, redirects) => {
                self.extended_test(&test.expr, scope);
                if let Some(list) = redirects {
                    let redirects = self.redirects(&list.0, scope);
                    self.push(Vec::new(), redirects, scope, place, Vec::new());
                }
            }
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
                let mut known: Option<Vec<String>> = Some(Vec::new());
                match &clause.values {
                    Some(values) => {
                        for value in values {
                            let Some(alternatives) = brace_expand_within(&value.value) else {
                                known = None;
                                continue;
                            };
                            for raw in alternatives {
                                for word in self.expand_all(&raw, scope) {
                                    match (&mut known, word.text) {
                                        (Some(list), Some(text)) if !word.glob => list.push(text),
                                        _ => known = None,
                                    }
                                }
                            }
                        }
                    }
                    // `for d; do`: the positional parameters.
                    None => known.clone_from(&scope.positional),
                }
                let name = clause.variable_name.clone();
                match known {
                    Some(values)
                        if !values.is_empty()
                            && values.len() <= MAX_LOOP_VALUES
                            && values.len() <= self.extra_walks =>
                    {
                        self.extra_walks -= values.len() - 1;
                        // Each value in turn: where the values are a finite
                        // set of literals, every member is checked.
                        for value in values {
                            scope.vars.insert(name.clone(), value);
                            self.list(&clause.body.list, scope, place, offsets);
                        }
                    }
                    _ => {
                        // Not every value is checked: the loop variable
                        // bounds nothing (`for d in <17 words>; do rm -rf
                        // "$d"` is asked about, not taken as literal).
                        self.out.unbounded.push(name.clone());
                        scope.vars.remove(&name);
                        self.list(&clause.body.list, scope, place, offsets);
                    }
                }
            }
            CompoundCommand::ArithmeticForClause(clause) => {
                for expr in [&clause.initializer, &clause.condition, &clause.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&expr.value, scope);
                }
                let start = self.out.cmds.len();
                self.list(&clause.body.list, scope, place, offsets);
                let endless = clause
                    .condition
                    .as_ref()
                    .is_none_or(|c| c.value.trim().is_empty() || c.value.trim() == "1");
                if endless {
                    self.check_spawning_loop(start, place, "for ((;;)) ... & done");
                }
            }
            CompoundCommand::CaseClause(clause) => {
                self.expand(&clause.value.value, scope);
                for case in &clause.cases {
                    // A pattern is expanded when the branches before it
                    // do not match: its substitutions may run.
                    for pattern in &case.patterns {
                        self.expand(&pattern.value, scope);
                    }
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
                let until = matches!(compound, CompoundCommand::UntilClause(_));
                let start = self.out.cmds.len();
                self.list(&clause.0, scope, place, offsets);
                // A condition that always holds: `:`, `true`, `sleep N`
                // (`false` for until).
                let endless = self.out.cmds[start..].iter().all(|cmd| {
                    let program = cmd.program();
                    if until {
                        program == Some("false")
                    } else {
                        matches!(program, Some(":" | "true" | "sleep"))
                    }
                }) && self.out.cmds.len() > start;
                let body = self.out.cmds.len();
                self.list(&clause.1.list, scope, place, offsets);
                if endless {
                    self.check_spawning_loop(body, place, "while :; do ... & done");
                }
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
            CompoundCommand::Arithmetic(arithmetic) => {
                // `( (cmd))` can read as `((...))`: what would run if it is
                // commands is analysed too (an expression's words are inert).
                self.arithmetic(&arithmetic.expr.value, scope);
                let text = arithmetic.expr.value.trim();
                let text = text
                    .strip_prefix('(')
                    .and_then(|t| t.strip_suffix(')'))
                    .unwrap_or(text);
                if text.contains(|c: char| c.is_ascii_alphabetic()) {
                    let mut inner = scope.clone();
                    inner.depth += 1;
                    self.script(text, &mut inner, false);
                }
            }
        }
    }

    /// A variable some program turns into code (`GIT_SSH_COMMAND`,
    /// `LESSOPEN`, `GIT_CONFIG_PARAMETERS`, `PROMPT_COMMAND`, `PS4`...: the
    /// names whose export does not carry, `crate::export_carries`) set to
    /// `value`: the code in it is analysed as a script, whichever program
    /// later runs it.
    fn code_in_variable(&mut self, name: &str, value: &str, scope: &Scope) {
        if crate::export_carries(name, None, Some(std::ffi::OsStr::new(value))).is_ok()
            || name == "PATH"
            || scope.depth >= MAX_DEPTH
        {
            return;
        }
        let mut texts: Vec<String> = Vec::new();
        if name == "GIT_CONFIG_PARAMETERS" {
            // `'key=value' 'key'='value'`: each value.
            for pair in value.split('\'').filter(|p| !p.trim().is_empty()) {
                let text = pair.split_once('=').map_or(pair, |(_, v)| v);
                texts.push(text.to_owned());
            }
        } else {
            texts.push(value.to_owned());
        }
        for text in texts {
            // A git alias or config value runs after `!`; LESSOPEN after `|`.
            let text = text.trim_start_matches(['!', '|']).replace("%s", "x");
            let mut inner = scope.clone();
            inner.depth += 1;
            self.script(&text, &mut inner, false);
        }
    }

    /// A value bash may read as a variable name with a subscript
    /// (`unset 'a[$(cmd)]'`, `test -v`, `printf -v`, `read`, `declare -i`,
    /// `[[ x -eq 'a[$(cmd)]' ]]`): the subscript is arithmetic, and its
    /// substitutions run even though the text quoted them.
    fn subscript_code(&mut self, word: &Word, scope: &Scope) {
        let Some(value) = word.value() else { return };
        if !value.contains('[') || !value.contains(['$', '`']) {
            return;
        }
        self.arithmetic(value, scope);
    }

    /// Every word of a `[[ ]]` test: both sides of a binary test (`==`,
    /// `=~`...) are expanded, so their substitutions run.
    fn extended_test(&mut self, expr: &ast::ExtendedTestExpr, scope: &mut Scope) {
        match expr {
            ast::ExtendedTestExpr::And(left, right) | ast::ExtendedTestExpr::Or(left, right) => {
                self.extended_test(left, scope);
                self.extended_test(right, scope);
            }
            ast::ExtendedTestExpr::Not(inner) | ast::ExtendedTestExpr::Parenthesized(inner) => {
                self.extended_test(inner, scope);
            }
            ast::ExtendedTestExpr::UnaryTest(_, word) => {
                let value = self.expand(&word.value, scope);
                self.subscript_code(&value, scope);
            }
            ast::ExtendedTestExpr::BinaryTest(_, left, right) => {
                let left = self.expand(&left.value, scope);
                let right = self.expand(&right.value, scope);
                self.subscript_code(&left, scope);
                self.subscript_code(&right, scope);
            }
        }
    }

    /// The command substitutions of an arithmetic expression (`(( ))`, a
    /// `for ((...))` header, a subscript), each analysed as a script.
    fn arithmetic(&mut self, text: &str, scope: &Scope) {
        for script in code_substitutions(text) {
            let mut inner = scope.clone();
            inner.depth += 1;
            self.script(&script, &mut inner, false);
        }
    }

    fn expand(&mut self, raw: &str, scope: &mut Scope) -> Word {
        let mut expansion = ScopeExpansion::new(self.home, scope);
        let word = expand(raw, &self.options, self.deadline, &mut expansion);
        let assignments = std::mem::take(&mut expansion.assignments);
        let unknowns = std::mem::take(&mut expansion.unknowns);
        let substitutions = expansion.substitutions;
        self.out.limits.extend(unknowns);
        scope.vars.extend(assignments);
        for script in substitutions {
            let mut inner = scope.clone();
            inner.depth += 1;
            self.script(&script, &mut inner, false);
        }
        word
    }

    /// [`Collector::expand`] into the fields bash makes of the word.
    fn expand_all(&mut self, raw: &str, scope: &mut Scope) -> Vec<Word> {
        let mut expansion = ScopeExpansion::new(self.home, scope);
        let words = expand_fields(raw, &self.options, self.deadline, &mut expansion);
        let assignments = std::mem::take(&mut expansion.assignments);
        let unknowns = std::mem::take(&mut expansion.unknowns);
        let substitutions = expansion.substitutions;
        self.out.limits.extend(unknowns);
        scope.vars.extend(assignments);
        for script in substitutions {
            let mut inner = scope.clone();
            inner.depth += 1;
            self.script(&script, &mut inner, false);
        }
        words
    }

    /// A command word: brace-expanded, expanded and split into fields;
    /// located in the top-level text when it stays one word.
    fn command_words(
        &mut self,
        word: &ast::Word,
        scope: &mut Scope,
        offsets: Option<&[usize]>,
    ) -> Vec<Word> {
        if !word.value.contains(['{', '$', '`']) {
            return vec![self.expand_located(word, scope, offsets)];
        }
        let alternatives = brace_expand_within(&word.value).unwrap_or_else(|| {
            self.out.limits.push(format!(
                "a brace expansion too large to list: {}",
                word.value
            ));
            vec![word.value.clone()]
        });
        let mut out = Vec::new();
        for raw in alternatives {
            out.extend(self.expand_all(&raw, scope));
        }
        if out.len() == 1
            && let (Some(offsets), Some(loc)) = (offsets, &word.loc)
        {
            let byte = |index: usize| offsets.get(index).copied();
            if let (Some(start), Some(end)) = (byte(loc.start.index), byte(loc.end.index)) {
                out[0].span = Some((start, end));
            }
        }
        out
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
                IoRedirect::File(fd, kind, target) => match target {
                    IoFileRedirectTarget::Filename(word) => {
                        let reads =
                            matches!(kind, IoFileRedirectKind::Read) && fd.is_none_or(|fd| fd == 0);
                        let kind = match kind {
                            IoFileRedirectKind::Write
                            | IoFileRedirectKind::Append
                            | IoFileRedirectKind::Clobber
                            | IoFileRedirectKind::ReadAndWrite => RedirectKind::Write,
                            _ => RedirectKind::Other,
                        };
                        let target = self.expand(&word.value, scope);
                        if reads {
                            self.fed_text = match target.value() {
                                Some("/dev/null") => Some(String::new()),
                                Some(path) => scope.file(path).cloned(),
                                None => None,
                            };
                        }
                        out.push(Redirect { kind, target });
                    }
                    IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                        let output = self.process_substitution(&subshell.list, scope);
                        if matches!(kind, IoFileRedirectKind::Read) {
                            self.fed_text = output;
                        }
                    }
                    IoFileRedirectTarget::Duplicate(word) => {
                        let target = self.expand(&word.value, scope);
                        // `>& FILE` (not a descriptor number or `-`) writes
                        // both streams to FILE, like `&>`.
                        let names_file = target
                            .value()
                            .is_some_and(|v| v != "-" && !v.chars().all(|c| c.is_ascii_digit()));
                        if matches!(kind, IoFileRedirectKind::DuplicateOutput) && names_file {
                            out.push(Redirect {
                                kind: RedirectKind::Write,
                                target,
                            });
                        }
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
                    let text = self.expand(&word.value, scope).text;
                    self.fed_text = text.map(|text| format!("{text}\n"));
                }
                IoRedirect::HereDocument(_, doc) => {
                    let body = &doc.doc.value;
                    let literal = !doc.requires_expansion || !body.contains(['$', '`', '\\']);
                    self.fed_text = literal.then(|| body.clone());
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
        self.fed_text = None;
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
                        words.extend(self.command_words(word, scope, offsets));
                    }
                }
                Some(CommandPrefixOrSuffixItem::Word(word)) => {
                    words.extend(self.command_words(word, scope, offsets));
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
                    let output = self.process_substitution(&subshell.list, scope);
                    let mut word = self.process_substitution_word(output, scope);
                    // The body, so rules can tell what feeds the word
                    // (`bash <(curl URL)`).
                    word.raw = format!("<({})", subshell.list);
                    words.push(word);
                }
            }
        }
        let fed_text = self.fed_text.take();
        let prefixed = !words.is_empty() && !assignments.is_empty();
        for (name, value) in &assignments {
            if let Some(value) = value {
                self.code_in_variable(name, value, scope);
            }
        }
        if words.is_empty() {
            track_assignments(std::mem::take(&mut assignments), scope);
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
        let stdin_text = if own_stdin {
            std::mem::replace(&mut scope.stdin_text, fed_text)
        } else {
            scope.stdin_text.clone()
        };
        // `NAME=VALUE cmd`: the command and what it starts see NAME.
        let vars = prefixed.then(|| scope.vars.clone());
        if vars.is_some() {
            track_assignments(assignments, scope);
        }
        self.simple_with(words, redirects, scope, place, fed, vars);
        scope.stdin_fed = stdin_fed;
        scope.stdin_text = stdin_text;
    }

    fn assignment(
        &mut self,
        assignment: &ast::Assignment,
        scope: &mut Scope,
    ) -> (String, Option<String>) {
        let name = match &assignment.name {
            ast::AssignmentName::VariableName(name) => name.clone(),
            // `a[3]=x`: the element, by its index.
            ast::AssignmentName::ArrayElementName(name, index) => {
                // The subscript is arithmetic: its substitutions run.
                self.arithmetic(index, scope);
                format!("{name}[{index}]")
            }
        };
        let value = match &assignment.value {
            ast::AssignmentValue::Scalar(word) => {
                let value = self.expand(&word.value, scope).text;
                if assignment.append {
                    // `D+=x` appends to a known value.
                    return (
                        name.clone(),
                        value.and_then(|v| scope.vars.get(&name).map(|old| format!("{old}{v}"))),
                    );
                }
                value
            }
            ast::AssignmentValue::Array(items) => {
                let mut members = Some(Vec::new());
                for (key, word) in items {
                    let values = self.expand_all(&word.value, scope);
                    match key {
                        Some(key) => {
                            let value = values.first().and_then(|w| w.text.clone());
                            match value {
                                Some(value) => {
                                    scope.vars.insert(format!("{name}[{}]", key.value), value)
                                }
                                None => scope.vars.remove(&format!("{name}[{}]", key.value)),
                            };
                            members = None;
                        }
                        None => {
                            for value in values {
                                match (&mut members, value.text) {
                                    (Some(list), Some(text)) => list.push(text),
                                    _ => members = None,
                                }
                            }
                        }
                    }
                }
                members.map(|members| members.join(&ARRAY_SEP.to_string()))
            }
        };
        (name, value.filter(|_| !assignment.append))
    }

    /// Unwraps wrappers and nested scripts, then records the command.
    fn simple(
        &mut self,
        words: Vec<Word>,
        redirects: Vec<Redirect>,
        scope: &mut Scope,
        place: Place,
        fed: Vec<Word>,
    ) {
        self.simple_with(words, redirects, scope, place, fed, None);
    }

    /// Analyses `script` as run by this shell (`eval`, `source`): what it
    /// sets stays set.
    fn same_shell(&mut self, script: &str, scope: &mut Scope) {
        scope.depth += 1;
        self.script(script, scope, false);
        scope.depth -= 1;
    }

    /// The script a shell, `source`, `at` or a written file runs, when
    /// its text is known: from standard input or a file written earlier.
    fn fed_script(&self, program: &str, words: &[Word], scope: &Scope) -> Option<String> {
        // Past the depth bound the text is not followed: the token fallback
        // that takes over would meet the same feed again, forever
        // (`source /dev/stdin <<< 'source /dev/stdin'`).
        if scope.depth >= MAX_DEPTH {
            return None;
        }
        let stdin_path =
            |path: &str| matches!(path, "/dev/stdin" | "/proc/self/fd/0" | "/dev/fd/0" | "-");
        let file = |word: &Word| -> Option<String> {
            let path = word.value()?;
            if stdin_path(path) {
                scope.stdin_text.clone()
            } else {
                scope.file(path).cloned()
            }
        };
        if SHELLS.contains(&program) {
            return match shell_input(words)? {
                ShellInput::Stdin => scope.stdin_text.clone(),
                ShellInput::File(path) => file(&path),
                ShellInput::Command(..) => None,
            };
        }
        match program {
            "source" | "." => file(words.get(1)?),
            "at" | "batch" => match words.iter().position(|w| w.value() == Some("-f")) {
                Some(at) => file(words.get(at + 1)?),
                None => scope.stdin_text.clone(),
            },
            _ if words.first()?.value()?.contains('/') => file(&words[0]),
            _ => None,
        }
    }

    /// [`Collector::simple`], restoring `vars` (the variables before a
    /// `NAME=VALUE` prefix) before the command's own effects are tracked.
    fn simple_with(
        &mut self,
        mut words: Vec<Word>,
        mut redirects: Vec<Redirect>,
        scope: &mut Scope,
        place: Place,
        mut fed: Vec<Word>,
        vars: Option<std::collections::HashMap<String, String>>,
    ) {
        let mut restore = vars;
        let mut restore_cwd: Option<Option<String>> = None;
        // A name an earlier `hash -p`, `BASH_CMDS`, copy or link gave a
        // program is that program (`cp /bin/rm x; ./x -rf /`).
        if let Some(real) = words
            .first()
            .and_then(Word::value)
            .and_then(|word| scope.program_for(word))
        {
            words[0] = Word::literal(real);
        }
        for _ in 0..32 {
            let Some(program) = words
                .first()
                .and_then(Word::value)
                .map(|p| basename(p).to_owned())
            else {
                break;
            };
            if let Some(body) = scope.aliases.get(&program).cloned()
                && words.first().and_then(Word::value) == Some(program.as_str())
            {
                // An alias: its text replaces the name (once: `alias ls='ls -F'`).
                scope.aliases.remove(&program);
                let mut expanded = super::words::split_words(&body);
                expanded.extend(words.drain(1..));
                words = expanded;
                continue;
            }
            // `BASH_ENV=FILE bash ...`: a non-interactive bash sources FILE
            // first (`BASH_ENV=/dev/stdin bash -c true <<< '...'`).
            if program == "bash"
                && scope.depth < MAX_DEPTH
                && let Some(path) = scope.vars.get("BASH_ENV").cloned()
                && let Some(text) = if matches!(path.as_str(), "/dev/stdin" | "/proc/self/fd/0") {
                    scope.stdin_text.clone()
                } else {
                    scope.file(&path).cloned()
                }
            {
                let mut inner = scope.clone();
                inner.depth += 1;
                inner.vars.remove("BASH_ENV");
                self.script(&text, &mut inner, false);
            }
            // `TAR_OPTIONS=--remove-files tar ...` (`ZIPOPT` for zip): the
            // options come first, as if written there.
            let options = match program.as_str() {
                "tar" => scope.vars.get("TAR_OPTIONS"),
                "zip" => scope.vars.get("ZIPOPT"),
                _ => None,
            };
            if let Some(options) = options
                && words.len() > 1
                && !words.iter().any(|w| w.raw == "<TAR_OPTIONS>")
            {
                let mut added = super::words::split_words(options);
                for word in &mut added {
                    "<TAR_OPTIONS>".clone_into(&mut word.raw);
                }
                words.splice(1..1, added);
            }
            // `GIT_WORK_TREE=DIR git ...` is `git --work-tree=DIR ...`.
            if program == "git"
                && let Some(tree) = scope.vars.get("GIT_WORK_TREE")
                && !words
                    .iter()
                    .any(|w| w.value().is_some_and(|v| v.starts_with("--work-tree")))
            {
                words.insert(1, Word::literal(&format!("--work-tree={tree}")));
            }
            if let Some(script) = self.fed_script(&program, &words, scope) {
                if matches!(program.as_str(), "source" | ".") {
                    self.same_shell(&script, scope);
                    break;
                }
                let file = script_file(&program, &words, scope);
                if let Some(path) = &file
                    && scope.calling.contains(path)
                {
                    // The script runs itself: counted like a function
                    // calling itself (two at once is a fork bomb).
                    self.push(
                        vec![Word::literal(path)],
                        Vec::new(),
                        scope,
                        place,
                        Vec::new(),
                    );
                    return;
                }
                let mut inner = scope.clone();
                inner.depth += 1;
                inner.stdin_text = None;
                if let Some(path) = file {
                    inner.vars.insert("0".to_owned(), path.clone());
                    inner.function = Some(path.clone());
                    inner.calling.push(path);
                }
                self.script(&script, &mut inner, false);
                break;
            }
            if program == "env" {
                // `env -C DIR cmd`: the command runs in DIR.
                let dir = words.iter().enumerate().skip(1).find_map(|(i, w)| {
                    let v = w.value()?;
                    match v {
                        "-C" | "--chdir" => words.get(i + 1)?.value().map(str::to_owned),
                        _ => v
                            .strip_prefix("--chdir=")
                            .or_else(|| v.strip_prefix("-C").filter(|d| !d.is_empty()))
                            .map(str::to_owned),
                    }
                });
                if let Some(dir) = dir {
                    let cwd = scope.absolute(&dir);
                    restore_cwd.get_or_insert_with(|| scope.cwd.clone());
                    scope.cwd = cwd;
                }
                // `env NAME=VALUE cmd`: the command sees NAME.
                if restore.is_none() {
                    restore = Some(scope.vars.clone());
                }
                for word in words.iter().skip(1) {
                    match word.value().and_then(|v| v.split_once('=')) {
                        Some((name, value)) if !name.starts_with('-') => {
                            self.code_in_variable(name, value, scope);
                            scope.vars.insert(name.to_owned(), value.to_owned());
                        }
                        _ => {}
                    }
                }
            }
            if program == "xargs" {
                if std::mem::take(&mut self.endless_input)
                    && unlimited_parallelism(&words)
                    && self.out.spawner.is_none()
                {
                    self.out.spawner = Some("an endless producer | xargs -P0".to_owned());
                }
                let input = match xargs_arg_file(&words) {
                    Some(path) => scope.file(&path).cloned(),
                    None => scope.stdin_text.clone(),
                };
                // A feed may name the feeder again (`xargs <<< xargs`): each
                // expansion spends one of the bounded extra walks.
                if self.extra_walks > 0
                    && let Some(mut commands) = input.and_then(|text| xargs_feed(&words, &text))
                    && let Some(last) = commands.pop()
                {
                    self.extra_walks -= 1;
                    for command in commands {
                        self.simple(command, Vec::new(), scope, place, Vec::new());
                    }
                    self.push(words.clone(), Vec::new(), scope, place, Vec::new());
                    words = last;
                    continue;
                }
            }
            // `parallel` fed its own name on stdin runs `parallel` again:
            // bounded by depth and by the extra walks, like a call.
            if program == "parallel"
                && self.extra_walks > 0
                && scope.depth < MAX_DEPTH
                && let Some(commands) = parallel_feed(&words, scope.stdin_text.as_deref())
            {
                self.extra_walks -= 1;
                for command in commands {
                    let mut inner = scope.clone();
                    inner.depth += 1;
                    self.script(&command, &mut inner, false);
                }
                break;
            }
            // A call: the body runs with these arguments. With an argument
            // unknown the definition's walk (parameters unknown) said it all.
            let positional = words[1..]
                .iter()
                .map(|w| w.text.clone())
                .collect::<Option<Vec<_>>>();
            if positional.is_some()
                && self.extra_walks > 0
                && scope.depth < MAX_DEPTH
                && !scope.calling.contains(&program)
                && let Some(body) = scope.functions.get(&program).cloned()
            {
                self.extra_walks -= 1;
                let mut inner = scope.clone();
                inner.depth += 1;
                inner.function = None;
                inner.calling.push(program.clone());
                inner.positional = positional;
                self.compound(&body.0, &mut inner, place, None);
            }
            match unwrap_step(&program, &words) {
                Step::Done => break,
                Step::ShellScript(script, args) => {
                    let mut inner = scope.clone();
                    inner.depth += 1;
                    inner.stdin_text = None;
                    let mut args = args.into_iter();
                    match args.next().and_then(|w| w.text) {
                        Some(zero) => inner.vars.insert("0".to_owned(), zero),
                        None => inner.vars.remove("0"),
                    };
                    inner.positional =
                        Some(args.map(|w| w.text).collect::<Option<Vec<_>>>()).flatten();
                    self.script(&script, &mut inner, false);
                    break;
                }
                Step::Strip(count) => {
                    words.drain(..count.min(words.len()));
                }
                Step::Script(script) => {
                    if program == "eval" {
                        self.same_shell(&script, scope);
                    } else {
                        let mut inner = scope.clone();
                        inner.depth += 1;
                        self.script(&script, &mut inner, false);
                    }
                    break;
                }
                Step::Exec(inner_words) => {
                    // find -exec CMD {} ;  and  xargs CMD: CMD works on find's paths.
                    if program == "find" {
                        fed = if find_filters(&words, scope.cwd.as_deref(), self.home) {
                            find_named_paths(&words)
                        } else {
                            find_start_paths(&words)
                        };
                        self.push(words.clone(), Vec::new(), scope, place, Vec::new());
                    }
                    words = inner_words;
                    // `{}` stands for the one path a whole-tree find starts at
                    // (`find /etc -maxdepth 0 -exec sh -c '...$1' _ {} \;`).
                    if let [path] = fed.as_slice()
                        && let Some(path) = path.value().map(str::to_owned)
                    {
                        for word in &mut words {
                            if word.value() == Some("{}") {
                                *word = Word::literal(&path);
                            }
                        }
                    }
                }
            }
        }
        // Shell text inside another language's code, and what an
        // interpreter's one-liner deletes (`os.system("...")`,
        // `shutil.rmtree("/etc")`, `git -c alias.x='!...'`).
        for embedded in embedded_commands(&words, scope.stdin_text.as_deref()) {
            let mut inner = scope.clone();
            inner.depth += 1;
            inner.stdin_text = None;
            self.script(&embedded, &mut inner, false);
        }
        if let Some(vars) = restore {
            scope.vars = vars;
        }
        let pushed_cwd = restore_cwd.is_some().then(|| scope.cwd.clone());
        // Paths through links made earlier lead where the links lead.
        if !scope.links.is_empty() {
            // Deleting or moving a link named last acts on the link.
            let follow_last = !matches!(
                words.first().and_then(Word::value).map(basename),
                Some("rm" | "unlink" | "mv" | "rmdir")
            );
            for word in &mut words {
                follow_links(word, scope, follow_last);
            }
            for redirect in &mut redirects {
                follow_links(&mut redirect.target, scope, true);
            }
        }
        self.track_outputs(&words, &redirects, scope);
        track_links(&words, scope);
        let written = redirects
            .iter()
            .find(|r| r.kind == RedirectKind::Write)
            .and_then(|r| r.target.value());
        track_programs(&words, written, scope);
        track_cd(&words, scope, self.home);
        if let Some(
            "unset" | "read" | "printf" | "declare" | "typeset" | "local" | "export" | "readonly"
            | "test" | "[" | "let" | "mapfile" | "readarray",
        ) = words.first().and_then(Word::value)
        {
            for word in &words[1..] {
                self.subscript_code(word, scope);
            }
        }
        if let Some("export" | "declare" | "local" | "readonly" | "typeset") =
            words.first().and_then(Word::value)
        {
            for word in &words[1..] {
                if let Some((name, value)) = word.value().and_then(|v| v.split_once('=')) {
                    self.code_in_variable(name, value, scope);
                }
            }
        }
        track_exports(&words, scope, self.home);
        track_builtins(&words, scope);
        match (restore_cwd, pushed_cwd) {
            (Some(before), Some(inside)) => {
                // Recorded where it runs; the rest of the script stays put.
                scope.cwd = inside;
                self.push(words, redirects, scope, place, fed);
                scope.cwd = before;
            }
            _ => self.push(words, redirects, scope, place, fed),
        }
    }

    /// Files the command writes with known contents (`echo X > f`, `tee f`).
    fn track_outputs(&self, words: &[Word], redirects: &[Redirect], scope: &mut Scope) {
        let tee = words.first().and_then(Word::value).map(basename) == Some("tee");
        if !tee && !redirects.iter().any(|r| r.kind == RedirectKind::Write) {
            return;
        }
        let output = literal_output(words, scope.stdin_text.as_deref(), scope.cwd.as_deref());
        let mut written: Vec<(String, Option<String>)> = Vec::new();
        for redirect in redirects {
            if redirect.kind == RedirectKind::Write
                && let Some(path) = redirect.target.value().and_then(|p| scope.absolute(p))
            {
                written.push((path, output.clone()));
            }
        }
        if words.first().and_then(Word::value).map(basename) == Some("tee") {
            for word in words.iter().skip(1) {
                if let Some(path) = word
                    .value()
                    .filter(|v| !v.starts_with('-'))
                    .and_then(|p| scope.absolute(p))
                {
                    written.push((path, scope.stdin_text.clone()));
                }
            }
        }
        for (path, text) in written {
            match text {
                Some(text) => scope.files.insert(path, text),
                None => scope.files.remove(&path),
            };
        }
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
            stdin_text: scope.stdin_text.clone(),
            fallback: false,
            upstream: Vec::new(),
            cwd_lost: scope.cwd_lost && scope.cwd.is_none(),
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

/// Most top-level lines joined while looking for a run that parses (a
/// compound command spread over lines: `if ...; then`, body, `fi`).
const MAX_LINE_RUN: usize = 16;

/// Byte offset of each character index, plus one past the end.
fn char_offsets(text: &str) -> Vec<usize> {
    text.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect()
}

/// Builtins that set variables from known text: `read`, `mapfile`,
/// `printf -v`, `set --`, `shift`, `declare -n`.
fn track_builtins(words: &[Word], scope: &mut Scope) {
    let Some(program) = words.first().and_then(Word::value) else {
        return;
    };
    if !matches!(
        program,
        "read"
            | "mapfile"
            | "readarray"
            | "printf"
            | "set"
            | "shift"
            | "declare"
            | "typeset"
            | "local"
            | "let"
            | "alias"
            | "unset"
    ) {
        return;
    }
    let args: Vec<Option<&str>> = words[1..].iter().map(Word::value).collect();
    match program {
        "read" => {
            let mut names = Vec::new();
            let mut array = None;
            let mut i = 0;
            while i < args.len() {
                match args[i] {
                    Some("-a") => {
                        array = args.get(i + 1).copied().flatten();
                        i += 1;
                    }
                    Some("-d" | "-n" | "-N" | "-p" | "-t" | "-u" | "-i") => i += 1,
                    Some(flag) if flag.starts_with('-') => {}
                    Some(name) => names.push(name.to_owned()),
                    None => return,
                }
                i += 1;
            }
            let line = scope
                .stdin_text
                .as_deref()
                .map(|text| text.lines().next().unwrap_or("").to_owned());
            if let Some(array) = array {
                match &line {
                    Some(line) => scope.vars.insert(
                        array.to_owned(),
                        line.split_whitespace()
                            .collect::<Vec<_>>()
                            .join(&ARRAY_SEP.to_string()),
                    ),
                    None => scope.vars.remove(array),
                };
            }
            if names.is_empty() {
                names.push("REPLY".to_owned());
            }
            let mut fields: Vec<&str> = Vec::new();
            if let Some(line) = &line {
                let mut rest = line.trim();
                for index in 0..names.len() {
                    if index + 1 == names.len() {
                        fields.push(rest);
                    } else {
                        let (field, tail) =
                            rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                        fields.push(field);
                        rest = tail.trim_start();
                    }
                }
            }
            for (index, name) in names.iter().enumerate() {
                match fields.get(index) {
                    Some(value) => scope.vars.insert(name.clone(), (*value).to_owned()),
                    None => scope.vars.remove(name),
                };
            }
        }
        "mapfile" | "readarray" => {
            let name = args
                .iter()
                .rev()
                .find_map(|a| a.filter(|a| !a.starts_with('-')))
                .unwrap_or("MAPFILE");
            match &scope.stdin_text {
                Some(text) => {
                    let value = text
                        .lines()
                        .collect::<Vec<_>>()
                        .join(&ARRAY_SEP.to_string());
                    scope.vars.insert(name.to_owned(), value);
                }
                None => {
                    scope.vars.remove(name);
                }
            }
        }
        "printf" if args.first() == Some(&Some("-v")) => {
            let Some(Some(name)) = args.get(1) else {
                return;
            };
            let mut rest = vec![Word::literal("printf")];
            rest.extend(words[3..].iter().cloned());
            match literal_output(&rest, None, None) {
                Some(value) => scope.vars.insert((*name).to_owned(), value),
                None => scope.vars.remove(*name),
            };
        }
        "set" => {
            let rest = match args.first() {
                Some(Some("--")) => &args[1..],
                Some(Some(first)) if !first.starts_with(['-', '+']) => &args[..],
                _ => return,
            };
            scope.positional = rest
                .iter()
                .map(|a| a.map(str::to_owned))
                .collect::<Option<Vec<_>>>();
        }
        "shift" => {
            let count = args
                .first()
                .copied()
                .flatten()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(1);
            if let Some(positional) = &mut scope.positional {
                positional.drain(..count.min(positional.len()));
            }
        }
        "declare" | "typeset" | "local" if args.contains(&Some("-n")) => {
            for arg in args.iter().flatten() {
                if let Some((name, target)) = arg.split_once('=') {
                    match scope.vars.get(target).cloned() {
                        Some(value) => scope.vars.insert(name.to_owned(), value),
                        None => scope.vars.remove(name),
                    };
                }
            }
        }
        "let" => {
            for arg in args.iter().flatten() {
                if let Some((name, value)) = arg.split_once('=')
                    && value.chars().all(|c| c.is_ascii_digit())
                {
                    scope.vars.insert(name.to_owned(), value.to_owned());
                }
            }
        }
        "alias" => {
            for arg in args.iter().flatten() {
                if let Some((name, body)) = arg.split_once('=') {
                    scope.aliases.insert(name.to_owned(), body.to_owned());
                }
            }
        }
        "unset" => {
            for arg in args.iter().flatten() {
                scope.vars.remove(*arg);
            }
        }
        _ => {}
    }
}

/// `word` (a path, or `KEY=PATH` as in `dd of=PATH`) through the links
/// in `scope`. The program word stays.
fn follow_links(word: &mut Word, scope: &Scope, follow_last: bool) {
    let Some(value) = word.value() else { return };
    let (key, path) = match value.split_once('=') {
        Some((key, path)) if key.chars().all(|c| c.is_ascii_alphanumeric()) => {
            (Some(key.to_owned()), path.to_owned())
        }
        _ => (None, value.to_owned()),
    };
    if let Some(followed) = scope.through_links_from(&path, follow_last) {
        word.text = Some(match key {
            Some(key) => format!("{key}={followed}"),
            None => followed,
        });
    }
}

/// The script file a shell or a direct execution runs, as an absolute path.
fn script_file(program: &str, words: &[Word], scope: &Scope) -> Option<String> {
    let path = if SHELLS.contains(&program) {
        match shell_input(words)? {
            ShellInput::File(word) => word.value()?.to_owned(),
            _ => return None,
        }
    } else {
        words.first()?.value()?.to_owned()
    };
    path.contains('/')
        .then_some(())
        .or_else(|| SHELLS.contains(&program).then_some(()))?;
    scope.absolute(&path)
}

/// `xargs -P 0` (or `-P0`, `--max-procs=0`): as many processes at once
/// as there are items.
fn unlimited_parallelism(words: &[Word]) -> bool {
    words.windows(2).any(|pair| {
        matches!(pair[0].value(), Some("-P" | "--max-procs")) && pair[1].value() == Some("0")
    }) || words
        .iter()
        .any(|w| matches!(w.value(), Some("-P0" | "--max-procs=0")))
}
