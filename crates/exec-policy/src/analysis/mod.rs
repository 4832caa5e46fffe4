//! Dangerous-command analysis: parse the command, list every simple command
//! it would run (through wrappers, `bash -c`, `eval`, substitutions, function
//! bodies...), and check each against the built-in rules and the regex layer.
//!
//! The modules form a line; each imports only modules before it:
//! `lexical` (scanners over raw text) < `paths` < `watchdog` (the parser
//! under a time budget) < `words` < `command` (the simple command the rules
//! see) < `unwrap` (wrappers) < `fallback` (token-level splitting and the
//! guards that send text to it) < `scope` (`cd` and variables) < `collect`
//! (the AST walk) < `stdin` < `rules`. A test in `tests.rs` keeps it so.

mod collect;
mod command;
mod fallback;
mod lexical;
mod paths;
mod rules;
mod scope;
mod stdin;
mod unwrap;
mod watchdog;
mod words;

use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

pub use rules::{ASK_RULES, FORK_BOMB, LITERAL_ASK_RULES, RULES, Rule};
pub use watchdog::scale_parse_budgets;

use crate::policy_rule::{PolicyRule, RuleDecision};
use collect::{Collected, Collector};
use command::Cmd;
use paths::Protected;
use scope::Scope;

/// The built-in patterns, each applied to every unwrapped simple command
/// from its program word on (never to the raw text), anchored so relative
/// and `/tmp` paths do not match. Each id says what it catches.
const BUILT_IN_PATTERNS: &[(&str, &str)] = &[
    ("rm-rf-root", r"^rm\s+-rf\s+/\*?(\s|$)"),
    // On a device: `mkfs.ext4 disk.img` makes an image, and is allowed.
    ("mkfs-on-device", r"^mkfs\.\S*\s(.*\s)?/dev/"),
    (
        "dd-to-disk",
        r"^dd\s+if=.+of=/dev/(sd|nvme|vd|xvd|hd|mmcblk|disk)",
    ),
    ("redirect-to-disk", r">\s*/dev/sd"),
    ("chmod-777-root", r"^chmod\s+-R\s+777\s+/(\s|$)"),
];

/// [`BUILT_IN_PATTERNS`] compiled, each with its id. They are constants,
/// so one that does not compile is a bug in this crate: it panics on the
/// first analysis instead of dropping a rule unseen, and the unit test
/// `every_built_in_pattern_compiles` catches it before any release.
static BUILT_IN: LazyLock<Vec<(&str, Regex)>> = LazyLock::new(|| {
    BUILT_IN_PATTERNS
        .iter()
        .map(|&(id, pattern)| {
            #[expect(
                clippy::expect_used,
                reason = "the built-in patterns are constants; a unit test compiles every one"
            )]
            let re = Regex::new(pattern).expect("a built-in pattern compiles");
            (id, re)
        })
        .collect()
});

/// The id prefix of the policy file's rules (`policy.deny[0]`).
const POLICY_PREFIX: &str = "policy.";

/// What the analysis needs to know besides the command.
#[derive(Debug, Clone, Default)]
pub struct AnalyzerConfig {
    /// The home directory `~` and `$HOME` stand for (default `/root`).
    pub home: Option<String>,
    /// More protected paths (`~` allowed), from the policy file.
    pub protected_paths: Vec<String>,
    /// Extra deny patterns, from the policy file.
    pub deny_regex: Vec<Regex>,
    /// Patterns exempting a simple command from the regex layer (never from built-in rules).
    pub allow_regex: Vec<Regex>,
    /// The policy file's `[[rule]]` entries, in file order.
    pub rules: Vec<PolicyRule>,
}

/// Where the rule that refused a command comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSource {
    /// A built-in rule or pattern: the command is dangerous.
    BuiltIn,
    /// The policy file (`[deny] regex`, a `[[rule]]`): the command is
    /// refused or asked about by choice, not necessarily dangerous.
    PolicyFile,
}

/// Why a command may not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The rule's id (`recursive-delete-protected`, `mkfs-on-device`, `policy.deny[0]`...).
    pub rule_id: String,
    /// Where the rule comes from (it decides the wording of the message).
    pub source: RuleSource,
    /// The rule's one-line reason.
    pub reason: String,
    /// The offending simple command, as analysed (after unwrapping).
    pub command: String,
    /// Whether part of the command could not be parsed and was checked token by token.
    pub fallback: bool,
    /// What of the command the rule matched, as written, when a policy-file
    /// rule or a regex decided: the argument (`--net host`), the regex's
    /// text (`curl`); `None` for the built-in rules.
    pub matched: Option<String>,
}

impl Denial {
    /// The message a tool answers: contains `blocked`, the rule id, its
    /// reason and the sub-command; `dangerous` for a built-in rule, the
    /// policy file for one of its rules (which need not be about danger).
    pub fn message(&self) -> String {
        let mut message = match self.source {
            RuleSource::BuiltIn => format!(
                "Command blocked: dangerous command detected (rule `{}`: {}) in `{}`",
                self.rule_id, self.reason, self.command
            ),
            RuleSource::PolicyFile => format!(
                "Command blocked by the policy file (rule `{}`: {}) in `{}`",
                self.rule_id, self.reason, self.command
            ),
        };
        self.push_fallback_note(&mut message);
        message
    }

    /// The message for an ask rule's finding when nobody can be asked:
    /// contains `blocked`, `approval`, the rule id, its reason and the
    /// sub-command.
    pub fn ask_message(&self) -> String {
        let mut message = format!(
            "Command blocked: it needs approval and none can be given here (rule `{}`: {}) in `{}`",
            self.rule_id, self.reason, self.command
        );
        self.push_fallback_note(&mut message);
        message
    }

    fn push_fallback_note(&self, message: &mut String) {
        if self.fallback {
            message.push_str(
                " (the command could not be fully parsed; it was checked token by token)",
            );
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

/// The outcome of checking a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing dangerous was found.
    Allow {
        /// Whether part of the command could not be parsed and was checked token by token.
        fallback: bool,
    },
    /// The command may be dangerous in a way that cannot be settled before
    /// it runs (a target known only at run time, text fed to a shell): a
    /// person must approve it. The rule is an ask rule (see [`ASK_RULES`]).
    Ask(Denial),
    /// A rule matched; nothing may run.
    Deny(Denial),
}

impl Decision {
    /// Whether the command may run without asking anyone.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Self::Allow { .. })
    }

    /// The rule that asks or refuses, if any.
    pub fn denial(&self) -> Option<&Denial> {
        match self {
            Self::Allow { .. } => None,
            Self::Ask(denial) | Self::Deny(denial) => Some(denial),
        }
    }

    /// The decision's name as the contract spells it: `allow`, `ask` or `deny`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Allow { .. } => "allow",
            Self::Ask(_) => "ask",
            Self::Deny(_) => "deny",
        }
    }

    /// Whether part of the command could not be parsed (syntax error,
    /// parser panic or time budget spent) and was checked token by token.
    pub fn used_fallback(&self) -> bool {
        match self {
            Self::Allow { fallback } => *fallback,
            Self::Ask(denial) | Self::Deny(denial) => denial.fallback,
        }
    }
}

/// What the analysis learnt about a command besides the decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommandFacts {
    /// Some simple command reads the standard input the command is given,
    /// with nothing (pipe, here-document, here-string, `<`) feeding it:
    /// `read x`, `python3` with no script, `cat` alone, `cat -`. Without a
    /// terminal that input is empty. Never set for text that took the
    /// token-level fallback, nor for commands in function bodies.
    pub reads_inherited_stdin: bool,
}

/// Where a command runs, as far as the analysis is concerned: what the
/// session it belongs to already knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnalysisContext {
    /// The absolute working directory the command starts in.
    pub cwd: Option<String>,
    /// The variables the command starts with (the session's exported
    /// variables; values that are not UTF-8 are left out).
    pub vars: HashMap<String, String>,
}

/// A decision and the facts found while making it, from one parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// Whether the command may run.
    pub decision: Decision,
    /// What else the analysis saw.
    pub facts: CommandFacts,
    /// Where the command runs `git commit` (top level only, not inside
    /// nested strings), so a trailer can be inserted after each `commit`
    /// word; in the order they appear.
    pub git_commits: Vec<GitCommit>,
}

/// Where a `git commit` sits in the command as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GitCommit {
    /// Byte offset just after the `commit` word: insert extra options here.
    pub insert_at: usize,
}

/// Checks commands against the built-in rules and the regex layer.
#[derive(Debug, Clone)]
pub struct Analyzer {
    home: String,
    protected: Protected,
    deny: Vec<(String, Regex)>,
    allow: Vec<Regex>,
    rules: Vec<PolicyRule>,
}

impl Default for Analyzer {
    fn default() -> Self {
        Self::new(AnalyzerConfig::default())
    }
}

impl Analyzer {
    /// An analyzer with the built-in rules plus `config`.
    pub fn new(config: AnalyzerConfig) -> Self {
        let home = config.home.unwrap_or_else(|| "/root".to_owned());
        let extra: Vec<String> = config
            .protected_paths
            .iter()
            .map(|p| match p.strip_prefix('~') {
                Some(rest) => format!("{home}{rest}"),
                None => p.clone(),
            })
            .collect();
        let deny = config
            .deny_regex
            .into_iter()
            .enumerate()
            .map(|(i, re)| (format!("{POLICY_PREFIX}deny[{i}]"), re))
            .collect();
        Self {
            protected: Protected::new(&home, &extra),
            home,
            deny,
            allow: config.allow_regex,
            rules: config.rules,
        }
    }

    /// The simple commands the analysis sees in `command` run from
    /// `context`, after unwrapping, one string each (as rules see them).
    pub fn simple_commands(&self, command: &str, context: &AnalysisContext) -> Vec<String> {
        self.collect(command, context)
            .cmds
            .iter()
            .filter(|cmd| !cmd.words.is_empty())
            .map(Cmd::text)
            .collect()
    }

    /// The simple commands the analysis sees in `command` run from
    /// `context`, after unwrapping, as argument vectors with the directory
    /// each runs in when known: what an approval binds to
    /// ([`crate::ApprovalKey`]). A word known only at run time is kept as
    /// written.
    pub fn planned_commands(
        &self,
        command: &str,
        context: &AnalysisContext,
    ) -> Vec<crate::PlannedCommand> {
        self.collect(command, context)
            .cmds
            .iter()
            .filter(|cmd| !cmd.words.is_empty())
            .map(|cmd| crate::PlannedCommand {
                argv: cmd
                    .words
                    .iter()
                    .map(|word| word.display().to_owned())
                    .collect(),
                cwd: cmd.cwd.clone(),
            })
            .collect()
    }

    /// The simple commands of `command` as a `regex` rule sees them (read
    /// without a session, as the policy file's examples are checked), or
    /// `None` when one of them takes its input from another command (a
    /// pipeline, a redirection, a here-document): a rule matching it alone
    /// would allow it whatever feeds it (`curl URL | sh`).
    pub fn rule_texts(&self, command: &str) -> Option<Vec<String>> {
        let collected = self.collect(command, &AnalysisContext::default());
        let cmds: Vec<&Cmd> = collected
            .cmds
            .iter()
            .filter(|cmd| !cmd.words.is_empty())
            .collect();
        if cmds
            .iter()
            .any(|cmd| cmd.in_pipeline || cmd.stdin_fed || !cmd.upstream.is_empty() || cmd.fallback)
        {
            return None;
        }
        Some(cmds.iter().map(|cmd| cmd.regex_text()).collect())
    }

    /// Whether the policy file's rule number `index` matches any simple
    /// command of `command` (for checking the rule's examples).
    pub(crate) fn policy_rule_matches(&self, index: usize, command: &str) -> bool {
        let Some(rule) = self.rules.get(index) else {
            return false;
        };
        let collected = self.collect(command, &AnalysisContext::default());
        collected.cmds.iter().any(|cmd| rule_matches(rule, cmd))
    }

    /// The first policy-file rule of each decision that matches `cmd`,
    /// from one pass over the rules (the words and the text are built once).
    fn policy_rules(&self, cmd: &Cmd) -> PolicyMatches<'_> {
        let mut found = PolicyMatches::default();
        if self.rules.is_empty() {
            return found;
        }
        let args: Vec<Option<&str>> = cmd.words.iter().skip(1).map(words::Word::value).collect();
        let text = cmd.regex_text();
        let program = cmd.program();
        for rule in &self.rules {
            let slot = match rule.decision {
                RuleDecision::Deny => &mut found.deny,
                RuleDecision::Ask => &mut found.ask,
                RuleDecision::Allow => &mut found.allow,
            };
            if slot.is_none()
                && let Some(matched) = rule.find(program, &args, &text)
            {
                *slot = Some((rule, matched));
            }
        }
        found
    }

    fn collect(&self, command: &str, context: &AnalysisContext) -> Collected {
        let scope = Scope {
            cwd: context.cwd.clone(),
            vars: context.vars.clone(),
            ..Scope::default()
        };
        Collector::new(&self.home).collect(command, scope)
    }

    /// Decides whether `command` may run.
    pub fn check(&self, command: &str) -> Decision {
        self.analyze(command).decision
    }

    /// Decides whether `command` may run, and says what else it saw: one
    /// parse for the decision, the facts and the `git commit`s.
    pub fn analyze(&self, command: &str) -> Analysis {
        self.analyze_in(command, &AnalysisContext::default())
    }

    /// [`Analyzer::analyze`] for a command run from `context`: relative
    /// paths resolve against its working directory and `$NAME` expands to
    /// its variables, so `export D=/etc` in one call and `rm -rf $D` in
    /// the next is seen for what it is.
    pub fn analyze_in(&self, command: &str, context: &AnalysisContext) -> Analysis {
        let collected = self.collect(command, context);
        let facts = CommandFacts {
            reads_inherited_stdin: !collected.fallback
                && collected.cmds.iter().any(stdin::reads_inherited_stdin),
        };
        Analysis {
            decision: self.decide(&collected, command),
            facts,
            git_commits: git_commits(&collected.cmds),
        }
    }

    fn decide(&self, collected: &Collected, script: &str) -> Decision {
        let fallback = collected.fallback;
        let denial = |rule_id: &str, reason: &str, command: String| {
            let source = if rule_id.starts_with(POLICY_PREFIX) {
                RuleSource::PolicyFile
            } else {
                RuleSource::BuiltIn
            };
            Denial {
                rule_id: rule_id.to_owned(),
                source,
                reason: reason.to_owned(),
                command,
                fallback,
                matched: None,
            }
        };
        let deny = |rule_id: &str, reason: &str, command: String| {
            Decision::Deny(denial(rule_id, reason, command))
        };
        let by_policy = |(rule, matched): &(&PolicyRule, String), cmd: &Cmd| Denial {
            rule_id: rule.id.clone(),
            source: RuleSource::PolicyFile,
            reason: rule.reason.clone(),
            command: cmd.text(),
            fallback,
            matched: Some(matched.clone()),
        };
        for cmd in &collected.cmds {
            if let Some(rule) = RULES.iter().find(|rule| (rule.check)(cmd, &self.protected)) {
                return deny(rule.id, rule.reason, cmd.text());
            }
        }
        let policy: Vec<PolicyMatches<'_>> = collected
            .cmds
            .iter()
            .map(|cmd| self.policy_rules(cmd))
            .collect();
        for (cmd, found) in collected.cmds.iter().zip(&policy) {
            if let Some(rule) = &found.deny {
                return Decision::Deny(by_policy(rule, cmd));
            }
        }
        if let Some(cmd) = rules::fork_bombs(&collected.cmds) {
            let name = cmd.function.clone().unwrap_or_default();
            return deny(
                FORK_BOMB.id,
                FORK_BOMB.reason,
                format!("{name}() {{ ... }}"),
            );
        }
        if let Some(text) = &collected.spawner {
            return deny(FORK_BOMB.id, FORK_BOMB.reason, text.clone());
        }
        if let Some(cmd) = collected
            .cmds
            .iter()
            .find(|cmd| rules::interpreter_fork_loop(cmd))
        {
            return deny(FORK_BOMB.id, FORK_BOMB.reason, cmd.text());
        }
        if collected
            .fallback_scripts
            .iter()
            .any(|s| raw_endless_spawn(s))
        {
            return deny(
                FORK_BOMB.id,
                FORK_BOMB.reason,
                "for ((;;)); do ... & done".to_owned(),
            );
        }
        if let Some(name) = collected
            .fallback_scripts
            .iter()
            .find_map(|s| raw_fork_bomb(s))
        {
            return deny(
                FORK_BOMB.id,
                FORK_BOMB.reason,
                format!("{name}() {{ ... }}"),
            );
        }
        for (cmd, found) in collected.cmds.iter().zip(&policy) {
            let matched = cmd.regex_text();
            if self.allow.iter().any(|re| matches_from_start(re, &matched)) {
                continue;
            }
            // A `[[rule]]` allow exempts from the built-in patterns only,
            // and so do `--help` and `--version`, which only print
            // (`mkfs.ext4 --help`); the user's own `[deny]` regexes still
            // refuse them.
            let exempt = found.allow.is_some() || rules::asks_help(cmd);
            let built_in = BUILT_IN
                .iter()
                .filter(|(_, re)| !exempt && re.is_match(&matched));
            let policy = self
                .deny
                .iter()
                .filter(|(_, re)| matches_from_start(re, &matched))
                .map(|(id, re)| (id.as_str(), re));
            if let Some((id, re)) = built_in.map(|(id, re)| (*id, re)).chain(policy).next() {
                let reason = if id.starts_with(POLICY_PREFIX) {
                    format!("matches `{}`", re.as_str())
                } else {
                    format!("matches the built-in pattern `{}`", re.as_str())
                };
                let mut refusal = denial(id, &reason, cmd.text());
                refusal.matched = re.find(&matched).map(|m| m.as_str().to_owned());
                return Decision::Deny(refusal);
            }
        }
        // Asking is weaker than refusing: only when no deny rule applies
        // anywhere in the command does an ask rule decide.
        for (cmd, found) in collected.cmds.iter().zip(&policy) {
            if let Some(rule) = &found.ask {
                return Decision::Ask(by_policy(rule, cmd));
            }
        }
        for (cmd, found) in collected.cmds.iter().zip(&policy) {
            if found.allow.is_some() {
                continue;
            }
            if let Some(rule) = ASK_RULES.iter().find(|rule| {
                (rule.check)(cmd, &self.protected)
                    && !bounded_by_script(rule, cmd, script, &collected.unbounded)
            }) {
                return Decision::Ask(denial(rule.id, rule.reason, cmd.text()));
            }
        }
        if let Some(what) = collected.limits.first() {
            let limit = ASK_RULES
                .iter()
                .find(|rule| rule.id == rules::ANALYSIS_LIMIT_ID);
            if let Some(rule) = limit {
                return Decision::Ask(denial(rule.id, rule.reason, what.clone()));
            }
        }
        Decision::Allow { fallback }
    }
}

/// Whether the command as a whole bounds what an ask rule found uncertain
/// in one of its simple commands (`D=$(mktemp -d) ... rm -rf "$D"`).
/// Loop variables in `unbounded` (their values were not all walked) are
/// bounded by nothing.
fn bounded_by_script(rule: &Rule, cmd: &Cmd, script: &str, unbounded: &[String]) -> bool {
    rule.id == rules::UNBOUNDED_DELETE_ID
        && rules::unbounded_delete_variables(cmd).is_some_and(|names| {
            !names.iter().any(|name| unbounded.contains(name)) && rules::bounded_in(script, &names)
        })
}

/// The policy-file rules that match one simple command, one per decision.
#[derive(Default)]
struct PolicyMatches<'a> {
    deny: Option<(&'a PolicyRule, String)>,
    ask: Option<(&'a PolicyRule, String)>,
    allow: Option<(&'a PolicyRule, String)>,
}

/// Whether a policy-file rule matches one simple command.
fn rule_matches(rule: &PolicyRule, cmd: &Cmd) -> bool {
    let args: Vec<Option<&str>> = cmd.words.iter().skip(1).map(words::Word::value).collect();
    rule.matches(cmd.program(), &args, &cmd.regex_text())
}

/// The top-level `git commit`s among `cmds`.
fn git_commits(cmds: &[Cmd]) -> Vec<GitCommit> {
    cmds.iter()
        .filter(|cmd| cmd.depth == 0 && cmd.program() == Some("git"))
        .filter_map(git_subcommand)
        .collect()
}

/// Whether `re` matches `text` starting at its first character (the
/// program word): policy patterns are matched "from the program word on".
fn matches_from_start(re: &Regex, text: &str) -> bool {
    re.find(text).is_some_and(|m| m.start() == 0)
}

/// The `commit` word of a `git [global options] commit ...` command.
fn git_subcommand(cmd: &Cmd) -> Option<GitCommit> {
    let mut words = cmd.words.iter().skip(1);
    while let Some(word) = words.next() {
        let value = word.value()?;
        match value {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path" => {
                words.next();
            }
            v if v.starts_with('-') => {}
            "commit" => return word.span.map(|(_, end)| GitCommit { insert_at: end }),
            _ => return None,
        }
    }
    None
}

/// `for ((...;;...)); do ... & done` in text that did not parse (the
/// parser does not take an empty arithmetic condition): a loop with no
/// bound starting a background job each time round.
fn raw_endless_spawn(script: &str) -> bool {
    let compact: String = script.chars().filter(|c| !c.is_whitespace()).collect();
    compact.find("for((").is_some_and(|at| {
        let header = &compact[at + 5..];
        let header = header.split("))").next().unwrap_or("");
        let parts: Vec<&str> = header.split(';').collect();
        let endless = parts.len() == 3 && parts[1].is_empty();
        let body = compact[at..].split_once("do").map_or("", |(_, body)| body);
        endless
            && (body.contains("&done") || body.contains("&)"))
            && !["break", "exit", "return", "wait"]
                .iter()
                .any(|end| body.contains(end))
    })
}

/// A fork bomb in text that did not parse: `NAME(){ ... NAME ... NAME ... }`
/// with a pipe or `&` in the body.
fn raw_fork_bomb(script: &str) -> Option<String> {
    let mut rest = script;
    while let Some(open) = rest.find("()") {
        let name = rest[..open]
            .trim_end()
            .rsplit(|c: char| c.is_whitespace() || c == ';')
            .next()
            .unwrap_or("");
        let after = &rest[open + 2..];
        let body_start = after.trim_start();
        if !name.is_empty()
            && let Some(body) = body_start.strip_prefix('{')
        {
            let body = body.split('}').next().unwrap_or(body);
            let calls = body
                .split(|c: char| c.is_whitespace() || matches!(c, '|' | '&' | ';'))
                .filter(|token| *token == name)
                .count();
            if calls >= 2 && body.contains(['|', '&']) {
                return Some(name.to_owned());
            }
        }
        rest = after;
    }
    None
}

#[cfg(test)]
mod tests;
