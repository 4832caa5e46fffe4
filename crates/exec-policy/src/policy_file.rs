//! The policy file (`--policy FILE`, TOML): `[[rule]]` entries with three
//! decisions (allow, ask, deny) and the examples they are checked against,
//! extra deny patterns and protected paths, allow patterns, environment
//! keep/drop lists, process names left running, paths that stay writable
//! under the sandbox, and whether output redaction covers token formats.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use crate::analysis::{Analyzer, AnalyzerConfig};
use crate::env::EnvRules;
use crate::network_rules::{Credential, HostRule, NetworkRules};
use crate::policy_rule::{PolicyRule, RuleDecision, RuleMatcher};

/// Why a policy file was refused. Every message names the file, and the
/// line and key where there is one.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// There is no file at the path given (a client's configuration often
    /// names one that was never created: say so plainly).
    #[error("policy file `{}` does not exist", path.display())]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// The file could not be read.
    #[error("cannot read policy file `{}`", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Bad TOML, an unknown key, or a value of the wrong type.
    #[error("{}:{line}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line (0 when unknown).
        line: usize,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A pattern that is not a valid regex.
    #[error("{}:{line}: `{key}` is not a valid regex: {message}", path.display())]
    BadRegex {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The key, such as `deny.regex[0]`.
        key: String,
        /// The regex engine's complaint.
        message: String,
    },
    /// A `[[rule]]`'s `match` or `not_match` example does not get the
    /// decision it says.
    #[error("{}:{line}: rule `{rule}`: example `{example}` {message}", path.display())]
    Example {
        /// The file.
        path: PathBuf,
        /// 1-based line of the rule.
        line: usize,
        /// The rule's id.
        rule: String,
        /// The example.
        example: String,
        /// What went wrong.
        message: String,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
    #[serde(default)]
    deny: RawDeny,
    #[serde(default)]
    allow: RawAllow,
    #[serde(default)]
    env: RawEnv,
    #[serde(default)]
    processes: RawProcesses,
    #[serde(default)]
    sandbox: RawSandbox,
    #[serde(default)]
    redact: RawRedact,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    network: RawNetwork,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    resolve: Option<Spanned<BTreeMap<String, String>>>,
    #[serde(default)]
    credential: Vec<Spanned<RawCredential>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCredential {
    host: String,
    header: String,
    value: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    memory: Option<Spanned<RawSize>>,
}

/// A size as the policy file writes it: `"4G"`, or a number of bytes.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawSize {
    Bytes(u64),
    Text(String),
}

/// The smallest memory limit taken: below it not even a shell starts.
pub const MIN_MEMORY_LIMIT: u64 = 1 << 20;

/// Reads a size such as `512M`, `4G`, `1.5G`, `4GiB`, `64MB` or `1048576`:
/// a number (decimals allowed) and an optional unit `K`, `M`, `G` or `T`
/// (binary multiples, with or without `i` and `B`, any case); a bare
/// number is bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = unit.trim();
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KI" | "KIB" => 10,
        "M" | "MB" | "MI" | "MIB" => 20,
        "G" | "GB" | "GI" | "GIB" => 30,
        "T" | "TB" | "TI" | "TIB" => 40,
        _ => {
            return Err(format!(
                "`{text}` is not a size: the unit `{unit}` is none of K, M, G, T"
            ));
        }
    };
    let bad = || format!("`{text}` is not a size (such as 512M, 4G or 1.5G)");
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(bad());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let unit_bytes = 1u64 << shift;
    let mut bytes = whole.checked_mul(unit_bytes).ok_or_else(bad)?;
    if !fraction.is_empty() {
        // Exact for a fraction of up to 9 digits, rounded down.
        let digits = fraction.get(..fraction.len().min(9)).unwrap_or_default();
        let scale = 10u64.pow(u32::try_from(digits.len()).unwrap_or(9));
        let part: u64 = digits.parse().map_err(|_| bad())?;
        let extra = u128::from(part) * u128::from(unit_bytes) / u128::from(scale);
        bytes = bytes
            .checked_add(u64::try_from(extra).map_err(|_| bad())?)
            .ok_or_else(bad)?;
    }
    Ok(bytes)
}

/// A memory limit: a size of at least [`MIN_MEMORY_LIMIT`].
pub fn parse_memory_limit(text: &str) -> Result<u64, String> {
    let bytes = parse_size(text)?;
    if bytes < MIN_MEMORY_LIMIT {
        return Err(format!(
            "a memory limit of `{}` is too small: at least 1M",
            text.trim()
        ));
    }
    Ok(bytes)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeny {
    #[serde(default)]
    regex: Vec<Spanned<String>>,
    #[serde(default)]
    protected_paths: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: Option<String>,
    decision: RuleDecision,
    program: Option<String>,
    #[serde(default)]
    args_prefix: Vec<String>,
    #[serde(default)]
    args_any: Vec<String>,
    regex: Option<String>,
    reason: Option<String>,
    #[serde(default, rename = "match")]
    examples_match: Vec<String>,
    #[serde(default)]
    not_match: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAllow {
    #[serde(default)]
    regex: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnv {
    #[serde(default)]
    keep: Vec<String>,
    #[serde(default)]
    drop: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProcesses {
    #[serde(default)]
    keep: Vec<String>,
    max: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    #[serde(default)]
    writable: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRedact {
    formats: Option<bool>,
}

/// `[redact]`: what output redaction covers besides the scrubbed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedactRules {
    /// Redact tokens in the well-known formats (`secret_formats::FORMATS`)
    /// from all output, wherever they come from (default true).
    pub formats: bool,
}

impl Default for RedactRules {
    fn default() -> Self {
        Self { formats: true }
    }
}

/// A loaded policy file.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Deny and allow patterns and protected paths for the analyzer (its `home` is left unset).
    pub analyzer: AnalyzerConfig,
    /// Environment keep and drop lists.
    pub env: EnvRules,
    /// Process name globs left running when a foreground command ends.
    pub keep_processes: Vec<String>,
    /// Cap on the processes of each command (`[processes] max`, its own
    /// cgroup's `pids.max`); 1024 when absent.
    pub max_processes: Option<u64>,
    /// `[sandbox] writable`: paths that stay writable under
    /// `--sandbox workspace-write`, as written (absolute, or `~` for the
    /// home); [`crate::SandboxSpec::add_writable`] expands and checks them.
    pub sandbox_writable: Vec<String>,
    /// `[redact]`.
    pub redact: RedactRules,
    /// `[limits] memory`: the memory each command may use, in bytes
    /// (its own cgroup's limit); none when absent.
    pub memory_limit: Option<u64>,
    /// `[network]`: the egress proxy's host rules, test resolver and
    /// credentials (used under `--network proxy`).
    pub network: NetworkRules,
}

/// The last path component of a program name.
fn program_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

impl Policy {
    /// Reads and checks the policy file at `path`.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                PolicyError::NotFound {
                    path: path.to_owned(),
                }
            } else {
                PolicyError::Read {
                    path: path.to_owned(),
                    source,
                }
            }
        })?;
        Self::parse(&text, path)
    }

    /// Checks policy `text`; `path` names it in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, PolicyError> {
        let raw: RawPolicy = toml::from_str(text).map_err(|error| PolicyError::Invalid {
            path: path.to_owned(),
            line: error.span().map_or(0, |span| line_of(text, span.start)),
            message: error.message().trim().to_owned(),
        })?;
        let compile = |list: &[Spanned<String>], key: &str| {
            list.iter()
                .enumerate()
                .map(|(i, pattern)| {
                    Regex::new(pattern.get_ref()).map_err(|error| PolicyError::BadRegex {
                        path: path.to_owned(),
                        line: line_of(text, pattern.span().start),
                        key: format!("{key}[{i}]"),
                        message: error
                            .to_string()
                            .lines()
                            .last()
                            .unwrap_or_default()
                            .trim()
                            .to_owned(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let sandbox_writable = raw
            .sandbox
            .writable
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                let value = entry.get_ref();
                if value.starts_with('/') || value == "~" || value.starts_with("~/") {
                    Ok(value.clone())
                } else {
                    Err(PolicyError::Invalid {
                        path: path.to_owned(),
                        line: line_of(text, entry.span().start),
                        message: format!(
                            "`sandbox.writable[{i}]` must be an absolute path or start with `~/`, got `{value}`"
                        ),
                    })
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut rules = Vec::with_capacity(raw.rule.len());
        let mut examples = Vec::new();
        for (i, entry) in raw.rule.iter().enumerate() {
            let line = line_of(text, entry.span().start);
            let rule = entry.get_ref();
            let id = rule
                .id
                .clone()
                .unwrap_or_else(|| format!("policy.rule[{i}]"));
            let invalid = |message: String| PolicyError::Invalid {
                path: path.to_owned(),
                line,
                message: format!("rule `{id}`: {message}"),
            };
            let matcher = match (&rule.program, &rule.regex) {
                (Some(program), None) => {
                    let program = program_name(program);
                    if program.is_empty() {
                        return Err(invalid("`program` is empty".to_owned()));
                    }
                    RuleMatcher::Program {
                        program: program.to_owned(),
                        args_prefix: rule.args_prefix.clone(),
                        args_any: rule.args_any.clone(),
                    }
                }
                (None, Some(pattern)) => {
                    if !rule.args_prefix.is_empty() || !rule.args_any.is_empty() {
                        return Err(invalid(
                            "`args_prefix` and `args_any` go with `program`, not `regex`"
                                .to_owned(),
                        ));
                    }
                    RuleMatcher::Regex(Regex::new(pattern).map_err(|error| {
                        PolicyError::BadRegex {
                            path: path.to_owned(),
                            line,
                            key: format!("rule[{i}].regex"),
                            message: error
                                .to_string()
                                .lines()
                                .last()
                                .unwrap_or_default()
                                .trim()
                                .to_owned(),
                        }
                    })?)
                }
                _ => {
                    return Err(invalid(
                        "needs exactly one of `program` and `regex`".to_owned(),
                    ));
                }
            };
            let reason = rule.reason.clone().unwrap_or_else(|| match &matcher {
                RuleMatcher::Program { program, .. } => format!("a policy rule for `{program}`"),
                RuleMatcher::Regex(re) => format!("matches `{}`", re.as_str()),
            });
            examples.push((line, &rule.examples_match, &rule.not_match));
            rules.push(PolicyRule {
                id,
                decision: rule.decision,
                matcher,
                reason,
            });
        }
        let analyzer = AnalyzerConfig {
            home: None,
            protected_paths: raw.deny.protected_paths,
            deny_regex: compile(&raw.deny.regex, "deny.regex")?,
            allow_regex: compile(&raw.allow.regex, "allow.regex")?,
            rules,
        };
        check_examples(&analyzer, &examples, path)?;
        let memory_limit = raw
            .limits
            .memory
            .as_ref()
            .map(|entry| {
                let checked = match entry.get_ref() {
                    RawSize::Bytes(bytes) => {
                        if *bytes < MIN_MEMORY_LIMIT {
                            Err(format!(
                                "a memory limit of `{bytes}` bytes is too small: at least 1M"
                            ))
                        } else {
                            Ok(*bytes)
                        }
                    }
                    RawSize::Text(text) => parse_memory_limit(text),
                };
                checked.map_err(|message| PolicyError::Invalid {
                    path: path.to_owned(),
                    line: line_of(text, entry.span().start),
                    message: format!("`limits.memory`: {message}"),
                })
            })
            .transpose()?;
        Ok(Self {
            analyzer,
            env: EnvRules {
                keep: raw.env.keep,
                drop: raw.env.drop,
            },
            keep_processes: raw.processes.keep,
            max_processes: raw.processes.max,
            sandbox_writable,
            redact: RedactRules {
                formats: raw.redact.formats.unwrap_or(true),
            },
            memory_limit,
            network: network_rules(&raw.network, text, path)?,
        })
    }
}

/// Checks `[network]`: every host entry parses, `resolve` names loopback
/// addresses only, and each credential names one host, a plain header and
/// a value that takes a variable of the server's environment.
fn network_rules(raw: &RawNetwork, text: &str, path: &Path) -> Result<NetworkRules, PolicyError> {
    let invalid = |offset: usize, message: String| PolicyError::Invalid {
        path: path.to_owned(),
        line: line_of(text, offset),
        message,
    };
    let entries = |list: &[Spanned<String>], key: &str| {
        list.iter()
            .enumerate()
            .map(|(i, entry)| {
                HostRule::parse(entry.get_ref()).map_err(|error| {
                    invalid(entry.span().start, format!("`network.{key}[{i}]`: {error}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let mut rules = match &raw.resolve {
        None => NetworkRules::default(),
        Some(resolve) => NetworkRules::new(&[], &[], &[], resolve.get_ref()).map_err(|error| {
            invalid(resolve.span().start, format!("`network.resolve`: {error}"))
        })?,
    };
    rules.allow = entries(&raw.allow, "allow")?;
    rules.deny = entries(&raw.deny, "deny")?;
    rules.ask = entries(&raw.ask, "ask")?;
    for (i, entry) in raw.credential.iter().enumerate() {
        let credential = entry.get_ref();
        let fail = |message: &str| {
            invalid(
                entry.span().start,
                format!("`network.credential[{i}]`: {message}"),
            )
        };
        let host = credential
            .host
            .trim()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let plain_host = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if !plain_host {
            return Err(fail(
                "`host` must be one host name (no glob, port or address)",
            ));
        }
        let header = credential.header.trim();
        if header.is_empty()
            || !header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(fail(
                "`header` must be a header name such as `Authorization`",
            ));
        }
        if credential.value.contains(['\r', '\n']) || !credential.value.contains("${") {
            return Err(fail(
                "`value` must take a variable of the server's environment, as in `Bearer ${GITHUB_TOKEN}`, on one line",
            ));
        }
        rules.credentials.push(Credential {
            host,
            header: header.to_owned(),
            value: credential.value.clone(),
        });
    }
    Ok(rules)
}

/// Each rule's line, `match` and `not_match` examples, in rule order.
type Examples<'a> = [(usize, &'a Vec<String>, &'a Vec<String>)];

/// Checks every rule's examples against the whole policy: a `match`
/// example is matched by the rule and gets its decision; a `not_match`
/// example is not matched by it.
fn check_examples(
    config: &AnalyzerConfig,
    examples: &Examples<'_>,
    path: &Path,
) -> Result<(), PolicyError> {
    if examples
        .iter()
        .all(|(_, yes, no)| yes.is_empty() && no.is_empty())
    {
        return Ok(());
    }
    let analyzer = Analyzer::new(config.clone());
    for (index, (rule, (line, yes, no))) in config.rules.iter().zip(examples).enumerate() {
        let fail = |example: &str, message: String| PolicyError::Example {
            path: path.to_owned(),
            line: *line,
            rule: rule.id.clone(),
            example: example.to_owned(),
            message,
        };
        for example in *yes {
            if !analyzer.policy_rule_matches(index, example) {
                return Err(fail(
                    example,
                    "is in `match` but the rule does not match it".to_owned(),
                ));
            }
            let decision = analyzer.check(example);
            if decision.name() != rule.decision.name() {
                return Err(fail(
                    example,
                    format!(
                        "is in `match` and must get `{}`, but gets `{}`{}",
                        rule.decision.name(),
                        decision.name(),
                        decision
                            .denial()
                            .map(|d| format!(" (rule `{}`)", d.rule_id))
                            .unwrap_or_default()
                    ),
                ));
            }
        }
        for example in *no {
            if analyzer.policy_rule_matches(index, example) {
                return Err(fail(
                    example,
                    "is in `not_match` but the rule matches it".to_owned(),
                ));
            }
        }
    }
    Ok(())
}

/// 1-based line number of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |head| head.matches('\n').count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Policy, PolicyError> {
        Policy::parse(text, Path::new("policy.toml"))
    }

    #[test]
    fn contract_example_loads() {
        let policy = parse(
            r#"
[deny]
regex = ["git\\s+push\\s+--force"]
protected_paths = ["/data", "~/photos"]

[allow]
regex = ["^make clean$"]

[env]
keep = ["MY_PUBLIC_TOKEN_NAME"]
drop = ["CORP_*"]

[processes]
keep = ["gradle*", "sccache", "ssh"]

[sandbox]
writable = ["~/.npm", "~/.cache/pip"]

[redact]
formats = true   # redact well-known token formats from all output (default true)
"#,
        )
        .unwrap();
        assert_eq!(policy.analyzer.deny_regex.len(), 1);
        assert_eq!(policy.analyzer.protected_paths, ["/data", "~/photos"]);
        assert_eq!(policy.env.drop, ["CORP_*"]);
        assert_eq!(policy.keep_processes, ["gradle*", "sccache", "ssh"]);
        assert_eq!(policy.sandbox_writable, ["~/.npm", "~/.cache/pip"]);
        assert!(policy.redact.formats);
    }

    #[test]
    fn network_rules_load_and_bad_ones_are_named_with_their_line() {
        let policy = parse(
            r#"
[network]
allow = ["registry.npmjs.org", "*.pypi.org", "github.com:443"]
deny = ["evil.example"]
ask = ["*.corp.example"]
resolve = { "pkg.test" = "127.0.0.1" }

[[network.credential]]
host = "api.github.com"
header = "Authorization"
value = "Bearer ${GITHUB_TOKEN}"
"#,
        )
        .unwrap();
        assert_eq!(policy.network.allow.len(), 3);
        assert_eq!(policy.network.deny[0].text(), "evil.example");
        assert_eq!(policy.network.credentials_for("API.github.com").count(), 1);
        assert!(policy.network.resolved("pkg.test").is_some());
        assert_eq!(parse("").unwrap().network, NetworkRules::default());
        for (bad, line, needle) in [
            (
                "[network]\nallow = [\"ok.example\",\n \"bad host\"]\n",
                3,
                "network.allow[1]",
            ),
            ("[network]\ndeny = [\"x:0\"]\n", 2, "network.deny[0]"),
            (
                "[network]\nresolve = { \"a.test\" = \"10.0.0.1\" }\n",
                2,
                "only loopback",
            ),
            (
                "[[network.credential]]\nhost = \"*.github.com\"\nheader = \"A\"\nvalue = \"${T}\"\n",
                1,
                "one host name",
            ),
            (
                "[[network.credential]]\nhost = \"x.example\"\nheader = \"A: b\"\nvalue = \"${T}\"\n",
                1,
                "header name",
            ),
            (
                "[[network.credential]]\nhost = \"x.example\"\nheader = \"A\"\nvalue = \"literal\"\n",
                1,
                "variable",
            ),
            ("[network]\nallowed = []\n", 2, "allowed"),
        ] {
            let error = parse(bad).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!("policy.toml:{line}: ")),
                "{bad}: {error}"
            );
            assert!(error.contains(needle), "{bad}: {error}");
        }
    }

    #[test]
    fn sizes_read_as_binary_multiples() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("64mb"), Ok(64 << 20));
        assert_eq!(parse_size("2 T"), Ok(2 << 40));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size(".5K"), Ok(512));
        for bad in [
            "",
            "G",
            "4X",
            "1.2.3G",
            "-1G",
            "4 gigabytes",
            "99999999999T",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} was taken");
        }
        assert!(parse_memory_limit("512K").is_err());
        assert_eq!(parse_memory_limit("1M"), Ok(1 << 20));
    }

    #[test]
    fn a_memory_limit_is_read_and_a_bad_one_is_named_with_its_line() {
        let policy = parse("[limits]\nmemory = \"4G\"\n").unwrap();
        assert_eq!(policy.memory_limit, Some(4 << 30));
        let policy = parse("[limits]\nmemory = 67108864\n").unwrap();
        assert_eq!(policy.memory_limit, Some(64 << 20));
        assert_eq!(parse("").unwrap().memory_limit, None);
        let error = parse("[env]\nkeep = []\n\n[limits]\nmemory = \"4 gigs\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("policy.toml:5: "), "{error}");
        assert!(
            error.contains("limits.memory") && error.contains("4 gigs"),
            "{error}"
        );
        let error = parse("[limits]\nmemory = 100\n").unwrap_err().to_string();
        assert!(error.contains("too small"), "{error}");
        let error = parse("[limits]\ncpu = 2\n").unwrap_err().to_string();
        assert!(error.contains("cpu"), "{error}");
    }

    use crate::{Analyzer, Decision, RuleSource};

    fn analyzer(text: &str) -> Analyzer {
        Analyzer::new(parse(text).unwrap().analyzer)
    }

    const FORCE_PUSH: &str = r#"
[[rule]]
id = "no-force-push"
decision = "ask"
program = "git"
args_prefix = ["push"]
args_any = ["--force", "-f", "--force-with-lease"]
reason = "force-pushing rewrites shared history"
match = ["git push --force origin main", "sudo git push -f"]
not_match = ["git push origin main", "git status"]
"#;

    #[test]
    fn the_contract_rule_loads_and_asks() {
        let analyzer = analyzer(FORCE_PUSH);
        for command in [
            "git push --force origin main",
            "git -C d push -f",
            "git -c user.name=x push origin +main --force-w",
            "/usr/bin/git push --force-with-lease=main",
            "cd repo && env GIT_DIR=x git push -fq",
            "bash -c 'git push --force'",
        ] {
            let Decision::Ask(denial) = analyzer.check(command) else {
                panic!("{command}: {:?}", analyzer.check(command));
            };
            assert_eq!(denial.rule_id, "no-force-push", "{command}");
            assert_eq!(denial.source, RuleSource::PolicyFile);
            assert_eq!(denial.reason, "force-pushing rewrites shared history");
        }
        for command in [
            "git push origin main",
            "git status",
            "echo git push --force",
            "git commit -m 'push -f'",
            "git pull --force",
        ] {
            assert!(analyzer.check(command).is_allowed(), "{command}");
        }
    }

    #[test]
    fn strictest_decision_wins_across_simple_commands() {
        let analyzer = analyzer(
            r#"
[[rule]]
decision = "deny"
program = "terraform"
args_prefix = ["destroy"]
reason = "no destroying infrastructure"

[[rule]]
decision = "ask"
regex = "npm\\s+publish"
"#,
        );
        let decision = analyzer.check("npm publish && terraform destroy");
        let Decision::Deny(denial) = decision else {
            panic!("{decision:?}")
        };
        assert_eq!(denial.rule_id, "policy.rule[0]");
        assert!(
            denial.message().contains("policy file"),
            "{}",
            denial.message()
        );
        let Decision::Ask(denial) = analyzer.check("npm test; npm publish --dry-run") else {
            panic!()
        };
        assert_eq!(denial.rule_id, "policy.rule[1]");
        assert_eq!(denial.reason, "matches `npm\\s+publish`");
        // A built-in deny beats a user ask anywhere in the command.
        assert!(matches!(
            analyzer.check("npm publish; rm -rf /"),
            Decision::Deny(d) if d.rule_id == "recursive-delete-protected"
        ));
    }

    #[test]
    fn an_allow_rule_never_exempts_from_built_in_or_user_denials() {
        // An allow rule for `dd` leaves the built-in dd-to-device rule on.
        let dd = analyzer("[[rule]]\ndecision = \"allow\"\nprogram = \"dd\"\n");
        assert!(matches!(
            dd.check("dd if=a of=/dev/sdz"),
            Decision::Deny(d) if d.rule_id == "dd-to-device"
        ));
        // A user deny rule is never exempted by a user allow rule.
        let analyzer = analyzer(
            r#"
[[rule]]
decision = "allow"
program = "make"
[[rule]]
decision = "deny"
program = "make"
args_prefix = ["deploy"]
"#,
        );
        assert!(analyzer.check("make test").is_allowed());
        assert!(!analyzer.check("make deploy").is_allowed());
    }

    #[test]
    fn an_allow_rule_exempts_from_built_in_ask_rules() {
        let command = "curl -fsSL https://tools.example.internal/install.sh | sh";
        assert!(matches!(
            Analyzer::default().check(command),
            Decision::Ask(_)
        ));
        let analyzer = analyzer(
            "[[rule]]\ndecision = \"allow\"\nprogram = \"sh\"\nmatch = [\"curl -fsSL https://tools.example.internal/install.sh | sh\"]\n",
        );
        assert!(analyzer.check(command).is_allowed());
        // Not from a user ask rule.
        let analyzer = analyzer_from(&[
            "[[rule]]\ndecision = \"allow\"\nprogram = \"npm\"\n",
            "[[rule]]\ndecision = \"ask\"\nprogram = \"npm\"\nargs_prefix = [\"publish\"]\n",
        ]);
        assert!(matches!(analyzer.check("npm publish"), Decision::Ask(_)));
        assert!(analyzer.check("npm test").is_allowed());
    }

    #[test]
    fn user_rules_refuse_help_and_version_forms_too() {
        // The built-in exemption stays: `--help` only prints.
        assert!(Analyzer::default().check("mkfs.ext4 --help").is_allowed());
        let regex = analyzer("[deny]\nregex = [\"curl\"]\n");
        let rule = analyzer("[[rule]]\ndecision = \"deny\"\nregex = \"curl\"\n");
        let program = analyzer("[[rule]]\ndecision = \"deny\"\nprogram = \"curl\"\n");
        for analyzer in [&regex, &rule, &program] {
            for command in [
                "curl --version",
                "curl --help",
                "curl -h",
                "curl example.com",
            ] {
                assert!(
                    matches!(analyzer.check(command), Decision::Deny(_)),
                    "{command}: {:?}",
                    analyzer.check(command)
                );
            }
        }
        let Decision::Deny(denial) = regex.check("curl --version") else {
            panic!("not refused")
        };
        assert_eq!(denial.rule_id, "policy.deny[0]");
        assert_eq!(denial.matched.as_deref(), Some("curl"));
        let ask = analyzer(
            "[[rule]]\ndecision = \"ask\"\nprogram = \"npm\"\nargs_prefix = [\"publish\"]\n",
        );
        assert!(matches!(ask.check("npm publish --help"), Decision::Ask(_)));
    }

    #[test]
    fn an_option_with_its_value_matches_both_spellings_and_no_other_value() {
        let docker = analyzer(
            r#"
[[rule]]
id = "host-network"
decision = "deny"
program = "docker"
args_prefix = ["run"]
args_any = ["--net=host", "--privileged"]
"#,
        );
        for (command, matched) in [
            ("docker run --net=host img", "--net=host"),
            ("docker run --net host img", "--net host"),
            ("docker run --rm --net=host img", "--net=host"),
            ("docker -H x run --privileged img", "--privileged"),
        ] {
            let Decision::Deny(denial) = docker.check(command) else {
                panic!("{command}: {:?}", docker.check(command))
            };
            assert_eq!(denial.rule_id, "host-network", "{command}");
            assert_eq!(denial.matched.as_deref(), Some(matched), "{command}");
        }
        for command in [
            "docker run --net=bridge img",
            "docker run --net bridge img",
            "docker run --net=hostile img",
            "docker run img --net",
            "docker ps --net=host",
        ] {
            assert!(docker.check(command).is_allowed(), "{command}");
        }
        // In `args_prefix` too.
        let prefix = analyzer(
            "[[rule]]\ndecision = \"ask\"\nprogram = \"kubectl\"\nargs_prefix = [\"delete\", \"--all=true\"]\n",
        );
        assert!(matches!(
            prefix.check("kubectl delete --all true"),
            Decision::Ask(_)
        ));
        assert!(matches!(
            prefix.check("kubectl delete --all=true"),
            Decision::Ask(_)
        ));
        assert!(prefix.check("kubectl delete --all=false").is_allowed());
        // What matched, for the forms without `args_any`.
        let Decision::Ask(denial) = prefix.check("kubectl delete --all=true pods") else {
            panic!("not asked")
        };
        assert_eq!(denial.matched.as_deref(), Some("delete --all=true"));
    }

    fn analyzer_from(parts: &[&str]) -> Analyzer {
        analyzer(&parts.concat())
    }

    #[test]
    fn failing_examples_refuse_the_file_naming_rule_and_example() {
        let error = parse(&FORCE_PUSH.replace("\"git status\"", "\"git push -f x\""))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(
                "policy.toml:2: rule `no-force-push`: example `git push -f x` is in `not_match`"
            ),
            "{error}"
        );
        let error = parse(&FORCE_PUSH.replace("\"sudo git push -f\"", "\"git push\""))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("rule `no-force-push`: example `git push` is in `match` but the rule does not match it"),
            "{error}"
        );
        // Matched, but a stricter rule decides: the example is wrong too.
        let error = parse(&format!(
            "{FORCE_PUSH}\n[[rule]]\nid = \"d\"\ndecision = \"deny\"\nprogram = \"sudo\"\n"
        ));
        assert!(
            error.is_ok(),
            "sudo is unwrapped, never a program: {error:?}"
        );
        let error = parse(&format!(
            "{FORCE_PUSH}\n[[rule]]\nid = \"d\"\ndecision = \"deny\"\nregex = \"git push\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("example `git push --force origin main` is in `match` and must get `ask`, but gets `deny` (rule `d`)"),
            "{error}"
        );
    }

    #[test]
    fn malformed_rules_are_refused() {
        for (text, expected) in [
            (
                "[[rule]]\ndecision = \"maybe\"\nprogram = \"x\"\n",
                "unknown variant `maybe`",
            ),
            (
                "[[rule]]\ndecision = \"ask\"\n",
                "needs exactly one of `program` and `regex`",
            ),
            (
                "[[rule]]\ndecision = \"ask\"\nprogram = \"x\"\nregex = \"x\"\n",
                "needs exactly one of",
            ),
            (
                "[[rule]]\ndecision = \"ask\"\nregex = \"x\"\nargs_any = [\"-f\"]\n",
                "go with `program`",
            ),
            (
                "[[rule]]\ndecision = \"ask\"\nregex = \"(\"\n",
                "`rule[0].regex` is not a valid regex",
            ),
            (
                "[[rule]]\ndecision = \"ask\"\nprogram = \"x\"\nargs = []\n",
                "unknown field `args`",
            ),
        ] {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(error.starts_with("policy.toml:"), "{error}");
        }
    }

    #[test]
    fn token_format_redaction_is_on_unless_turned_off() {
        assert!(parse("").unwrap().redact.formats);
        assert!(Policy::default().redact.formats);
        assert!(parse("[redact]\n").unwrap().redact.formats);
        assert!(!parse("[redact]\nformats = false\n").unwrap().redact.formats);
        let error = parse("[redact]\nformat = false\n").unwrap_err().to_string();
        assert!(
            error.starts_with("policy.toml:2: unknown field `format`"),
            "{error}"
        );
        let error = parse("[redact]\nformats = \"no\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("policy.toml:2:"), "{error}");
    }

    /// The sample the README points to loads, and uses every section the
    /// policy file knows, so it cannot fall behind the code unnoticed.
    #[test]
    fn the_sample_policy_file_loads_and_uses_every_section() {
        let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policy.toml");
        let policy = Policy::load(&sample).unwrap();
        assert!(!policy.analyzer.deny_regex.is_empty());
        assert!(!policy.analyzer.protected_paths.is_empty());
        assert!(!policy.analyzer.allow_regex.is_empty());
        assert!(!policy.env.keep.is_empty() && !policy.env.drop.is_empty());
        assert!(!policy.keep_processes.is_empty() && policy.max_processes.is_some());
        assert!(!policy.sandbox_writable.is_empty());
        // Its rules loaded, so their examples held (a failing one refuses
        // the file); each decision is shown.
        for decision in [RuleDecision::Ask, RuleDecision::Deny] {
            assert!(
                policy.analyzer.rules.iter().any(|r| r.decision == decision),
                "{decision:?}"
            );
        }
        // Each table `RawPolicy` knows is in the sample (keep this list in
        // step with it; a table the loader does not know is refused above).
        let text = std::fs::read_to_string(&sample).unwrap();
        assert_eq!(
            text.matches("\n[[rule]]\n").count(),
            text.matches("\nmatch = [").count(),
            "every rule in the sample has examples"
        );
        for table in [
            "[[rule]]",
            "[deny]",
            "[allow]",
            "[env]",
            "[processes]",
            "[sandbox]",
            "[redact]",
        ] {
            assert!(text.contains(&format!("\n{table}\n")), "{table} is missing");
        }
    }

    #[test]
    fn sandbox_writable_paths_must_be_absolute_or_under_the_home() {
        let error = parse("[sandbox]\nwritable = [\"/ok\", \"~/ok\",\n \".npm\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("policy.toml:3: `sandbox.writable[2]` must be an absolute path"),
            "{error}"
        );
        let error = parse("[sandbox]\nwritable = [\"~alice/x\"]\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("`sandbox.writable[0]`"), "{error}");
        assert_eq!(
            parse("[sandbox]\nwritable = [\"~\", \"/a\"]\n")
                .unwrap()
                .sandbox_writable,
            ["~", "/a"]
        );
    }

    #[test]
    fn empty_file_is_an_empty_policy() {
        let policy = parse("").unwrap();
        assert!(policy.analyzer.deny_regex.is_empty() && policy.env.keep.is_empty());
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let error = parse("[deny]\nregex = []\nprotect = [\"/x\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("policy.toml:3: unknown field `protect`"),
            "{error}"
        );
        let error = parse("[denied]\n").unwrap_err().to_string();
        assert!(
            error.starts_with("policy.toml:1: unknown field `denied`"),
            "{error}"
        );
    }

    #[test]
    fn bad_toml_names_the_line() {
        let error = parse("[deny]\nregex = [\n").unwrap_err().to_string();
        assert!(error.starts_with("policy.toml:"), "{error}");
        let error = parse("[env]\nkeep = \"X\"\n").unwrap_err().to_string();
        assert!(error.starts_with("policy.toml:2:"), "{error}");
    }

    #[test]
    fn bad_regex_names_the_key_and_line() {
        let error = parse("[allow]\nregex = [\"ok\",\n  \"(unclosed\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("policy.toml:3: `allow.regex[1]` is not a valid regex"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_file_is_named_as_missing() {
        let error = Policy::load(Path::new("/nonexistent/policy.toml")).unwrap_err();
        assert!(matches!(error, PolicyError::NotFound { .. }));
        assert_eq!(
            error.to_string(),
            "policy file `/nonexistent/policy.toml` does not exist"
        );
    }

    #[test]
    fn an_unreadable_file_is_a_read_error() {
        // A directory exists but cannot be read as text.
        let error = Policy::load(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_err();
        assert!(matches!(error, PolicyError::Read { .. }), "{error:?}");
        assert!(error.to_string().starts_with("cannot read policy file `"));
    }
}
