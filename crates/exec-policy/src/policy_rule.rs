//! A policy file's `[[rule]]` as the analysis applies it: what it decides
//! and how it recognises a simple command. Below both the analysis and the
//! policy file, so neither needs the other to know what a rule is.

use regex::Regex;
use serde::Deserialize;

/// What a `[[rule]]` decides for the commands it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleDecision {
    /// An exemption: the simple command skips the built-in patterns and the
    /// built-in ask rules (never a built-in deny rule or a user deny or
    /// ask rule).
    Allow,
    /// A person must approve the command.
    Ask,
    /// The command is refused.
    Deny,
}

impl RuleDecision {
    /// The decision's name as the policy file spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// How a `[[rule]]` recognises a simple command.
#[derive(Debug, Clone)]
pub enum RuleMatcher {
    /// By program (after unwrapping and path reduction) and arguments
    /// (normalised: `--opt=value` split, combined short options split,
    /// long options abbreviated uniquely expanded, the program's global
    /// options before a subcommand skipped).
    Program {
        /// The program's name (a path is reduced to its last component).
        program: String,
        /// The first arguments, in order.
        args_prefix: Vec<String>,
        /// At least one of these anywhere among the arguments (when not empty).
        args_any: Vec<String>,
    },
    /// A regex matched against the simple command from its program word on.
    Regex(Regex),
}

/// One `[[rule]]` of the policy file.
#[derive(Debug, Clone)]
pub struct PolicyRule {
    /// Its id (`policy.rule[N]` when the file gives none).
    pub id: String,
    /// What it decides.
    pub decision: RuleDecision,
    /// What it matches.
    pub matcher: RuleMatcher,
    /// Why, in one line.
    pub reason: String,
}

/// Options that take a separate value and come before a subcommand, per
/// program: skipped (with their value) before `args_prefix` is matched.
fn global_valued_options(program: &str) -> &'static [&'static str] {
    match program {
        "git" => &[
            "-C",
            "-c",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--config-env",
        ],
        "docker" | "podman" => &[
            "-H",
            "--host",
            "--context",
            "-c",
            "--config",
            "-l",
            "--log-level",
        ],
        "kubectl" | "oc" => &[
            "-n",
            "--namespace",
            "--context",
            "--kubeconfig",
            "-s",
            "--server",
            "--cluster",
            "--user",
        ],
        "helm" => &["-n", "--namespace", "--kube-context", "--kubeconfig"],
        "cargo" => &["-C", "--config", "-Z", "--color"],
        "npm" | "pnpm" | "yarn" => &["--prefix", "-w", "--workspace", "-C", "--dir", "--cwd"],
        "gh" => &["-R", "--repo"],
        _ => &[],
    }
}

/// One argument as rules match it: its normalised value (`None` when
/// known only at run time) and the index of the argument it came from.
type Normalised = (Option<String>, usize);

/// The arguments of a simple command as rules match them: `None` for a
/// word whose value is known only at run time.
fn normalise(program: &str, args: &[Option<&str>], skip_globals: bool) -> Vec<Normalised> {
    let mut first = 0;
    if skip_globals {
        let valued = global_valued_options(program);
        loop {
            match args.get(first) {
                Some(Some("--")) => {
                    first += 1;
                    break;
                }
                Some(Some(word)) if word.starts_with('-') && word.len() > 1 => {
                    first += if valued.contains(word) { 2 } else { 1 };
                }
                _ => break,
            }
        }
    }
    let mut out = Vec::with_capacity(args.len().saturating_sub(first));
    let mut options = true;
    for (at, word) in args.iter().enumerate().skip(first) {
        let Some(word) = word else {
            out.push((None, at));
            continue;
        };
        if !options {
            out.push((Some((*word).to_owned()), at));
        } else if *word == "--" {
            options = false;
            out.push((Some("--".to_owned()), at));
        } else if let Some(long) = word.strip_prefix("--") {
            match long.split_once('=') {
                Some((name, value)) => {
                    out.push((Some(format!("--{name}")), at));
                    out.push((Some(value.to_owned()), at));
                }
                None => out.push((Some((*word).to_owned()), at)),
            }
        } else if let Some(cluster) = word.strip_prefix('-')
            && cluster.len() > 1
            && cluster.chars().all(|c| c.is_ascii_alphabetic())
        {
            out.extend(cluster.chars().map(|c| (Some(format!("-{c}")), at)));
        } else {
            out.push((Some((*word).to_owned()), at));
        }
    }
    out
}

/// A rule's argument as the words it must match: `--opt=value` is the
/// option followed by its value (so it matches `--opt=value` and
/// `--opt value`, never `--opt=other`); anything else is one word.
fn wanted_words(wanted: &str) -> Vec<&str> {
    match wanted
        .strip_prefix("--")
        .and_then(|long| long.split_once('='))
    {
        Some((name, value)) => vec![&wanted[..name.len() + 2], value],
        None => vec![wanted],
    }
}

/// Whether `word` stands for `wanted`: the same, or a long option
/// abbreviated so that `wanted` is the only one of `known` it can mean.
fn same_argument(word: &str, wanted: &str, known: &[&str]) -> bool {
    if word == wanted {
        return true;
    }
    word.len() > 3
        && word.starts_with("--")
        && wanted.starts_with(word)
        && !known.contains(&word)
        && known
            .iter()
            .filter(|option| option.starts_with(word))
            .count()
            == 1
}

impl PolicyRule {
    /// Whether the rule matches one simple command: its program word
    /// (`None` when not a literal), its arguments (`None` where not a
    /// literal), and its text as the regexes see it.
    pub(crate) fn matches(&self, program: Option<&str>, args: &[Option<&str>], text: &str) -> bool {
        self.find(program, args, text).is_some()
    }

    /// What of one simple command the rule matches, when it does: the
    /// argument `args_any` found (as written, `--net host` for two
    /// words), else the `args_prefix` arguments, else the program; for a
    /// regex, the text it matched.
    pub(crate) fn find(
        &self,
        program: Option<&str>,
        args: &[Option<&str>],
        text: &str,
    ) -> Option<String> {
        match &self.matcher {
            RuleMatcher::Regex(re) => re
                .find(text)
                .filter(|m| m.start() == 0)
                .map(|m| m.as_str().to_owned()),
            RuleMatcher::Program {
                program: wanted,
                args_prefix,
                args_any,
            } => {
                let program = program?;
                if program != wanted {
                    return None;
                }
                let skip_globals = args_prefix.first().is_some_and(|a| !a.starts_with('-'));
                let words = normalise(program, args, skip_globals);
                let prefix: Vec<&str> = args_prefix.iter().flat_map(|a| wanted_words(a)).collect();
                let any: Vec<Vec<&str>> = args_any.iter().map(|a| wanted_words(a)).collect();
                let known: Vec<&str> = prefix
                    .iter()
                    .chain(any.iter().flatten())
                    .copied()
                    .filter(|a| a.starts_with("--"))
                    .collect();
                // The words from `at` on begin with `wanted`, in order.
                let run_at = |at: usize, wanted: &[&str]| {
                    wanted.len() <= words.len().saturating_sub(at)
                        && wanted.iter().zip(&words[at..]).all(|(wanted, (word, _))| {
                            word.as_deref()
                                .is_some_and(|word| same_argument(word, wanted, &known))
                        })
                };
                // The arguments as written that words `from..to` came from.
                let shown = |from: usize, to: usize| {
                    let (first, last) = (words[from].1, words[to - 1].1);
                    args[first..=last]
                        .iter()
                        .map(|arg| arg.unwrap_or("?"))
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                if !run_at(0, &prefix) {
                    return None;
                }
                if any.is_empty() {
                    return Some(if prefix.is_empty() {
                        program.to_owned()
                    } else {
                        shown(0, prefix.len())
                    });
                }
                (0..words.len()).find_map(|at| {
                    any.iter()
                        .find(|wanted| run_at(at, wanted))
                        .map(|wanted| shown(at, at + wanted.len()))
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_normalised_before_matching() {
        let args = |words: &[&str]| -> Vec<Option<String>> {
            let words: Vec<Option<&str>> = words.iter().map(|w| Some(*w)).collect();
            normalise("git", &words, true)
                .into_iter()
                .map(|(word, _)| word)
                .collect()
        };
        let some = |words: &[&str]| -> Vec<Option<String>> {
            words.iter().map(|w| Some((*w).to_owned())).collect()
        };
        assert_eq!(
            args(&["-C", "d", "--bare", "push", "-fu", "--repo=x"]),
            some(&["push", "-f", "-u", "--repo", "x"])
        );
        assert_eq!(args(&["push", "--", "-fu"]), some(&["push", "--", "-fu"]));
        assert!(same_argument(
            "--force-w",
            "--force-with-lease",
            &["--force", "--force-with-lease"]
        ));
        assert!(!same_argument(
            "--forc",
            "--force",
            &["--force", "--force-with-lease"]
        ));
        assert!(!same_argument("--f", "--force", &["--force"]));
        assert!(!same_argument(
            "--force-",
            "--force",
            &["--force", "--force-with-lease"]
        ));
    }
}
