//! The policy file (`--policy FILE`, TOML): extra deny patterns and
//! protected paths, allow patterns, environment keep/drop lists, process
//! names left running, paths that stay writable under the sandbox, and
//! whether output redaction covers token formats.

use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use crate::analysis::AnalyzerConfig;
use crate::env::EnvRules;

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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeny {
    #[serde(default)]
    regex: Vec<Spanned<String>>,
    #[serde(default)]
    protected_paths: Vec<String>,
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
    /// Redact tokens in the well-known formats ([`crate::TOKEN_FORMATS`])
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
    /// Cap on the processes of all commands together under the sandbox
    /// (`[processes] max`); the sandbox's default when absent.
    pub max_processes: Option<u64>,
    /// `[sandbox] writable`: paths that stay writable under
    /// `--sandbox workspace-write`, as written (absolute, or `~` for the
    /// home); [`crate::SandboxSpec::add_writable`] expands and checks them.
    pub sandbox_writable: Vec<String>,
    /// `[redact]`.
    pub redact: RedactRules,
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
        Ok(Self {
            analyzer: AnalyzerConfig {
                home: None,
                protected_paths: raw.deny.protected_paths,
                deny_regex: compile(&raw.deny.regex, "deny.regex")?,
                allow_regex: compile(&raw.allow.regex, "allow.regex")?,
            },
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
        })
    }
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
        // Each table `RawPolicy` knows is in the sample (keep this list in
        // step with it; a table the loader does not know is refused above).
        let text = std::fs::read_to_string(&sample).unwrap();
        for table in [
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
