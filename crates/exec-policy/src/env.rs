//! The environment a command runs with: secrets removed, nothing that waits
//! for a person.

use std::collections::BTreeMap;

use crate::glob::glob_match_ignore_case;
use secret_formats::{find_token, is_secret_value};

/// Names that look like secrets (case-insensitive globs): the contract's
/// list, widened to what reached commands unscrubbed (`MYSQL_PWD`,
/// `*_KEY`, cookies, webhooks, `*_AUTH`, connection strings).
const SECRET_PATTERNS: &[&str] = &[
    "*_API_KEY",
    "*_APIKEY",
    "API_KEY",
    "*_KEY",
    "*_TOKEN",
    "*_TOKEN_*",
    "TOKEN",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_PASS",
    "*_PWD",
    "*PASSPHRASE*",
    "*PRIVATE_KEY*",
    "*CREDENTIAL*",
    "*_PAT",
    "*_DSN",
    "*_JWT",
    "*COOKIE*",
    "*WEBHOOK*",
    "*_AUTH",
    "*_AUTH_*",
    "*AUTHORIZATION*",
    "*_CONN*STRING*",
    "*CONNECTION_STRING*",
    "DATABASE_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "NPM_TOKEN",
];

/// Names a pattern above catches that hold no secret and that programs
/// need: a public key, and the ssh agent's socket path (git over ssh uses
/// it; the path is no credential, and hiding it protects nothing a command
/// could not find in `/tmp`). Their values are still checked by form.
const NOT_SECRET_NAMES: &[&str] = &["*_PUBLIC_KEY", "SSH_AUTH_SOCK"];

/// Vendor prefixes whose every variable is scrubbed, except `*_BASE_URL`.
const VENDOR_PREFIXES: &[&str] = &["ANTHROPIC_", "OPENAI_", "GEMINI_"];

/// Variables set for every command so nothing waits for a person.
pub const NON_INTERACTIVE: &[(&str, &str)] = &[
    ("EDITOR", "/bin/false"),
    ("VISUAL", "/bin/false"),
    ("GIT_EDITOR", "/bin/false"),
    ("GIT_SEQUENCE_EDITOR", "/bin/false"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// Values shorter than this are never redacted: too likely to appear by chance.
pub const MIN_REDACTED_LEN: usize = 8;

/// Whether `name` looks like it holds a secret (before any policy-file lists).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if VENDOR_PREFIXES
        .iter()
        .any(|prefix| upper.starts_with(prefix))
        && !upper.ends_with("_BASE_URL")
    {
        return true;
    }
    let matches = |patterns: &[&str]| {
        patterns
            .iter()
            .any(|pattern| glob_match_ignore_case(pattern, &upper))
    };
    matches(SECRET_PATTERNS) && !matches(NOT_SECRET_NAMES)
}

/// Extra keep and drop lists (case-insensitive globs), from the policy file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvRules {
    /// Names passed through despite looking like secrets.
    pub keep: Vec<String>,
    /// More names to scrub; they win over `keep`.
    pub drop: Vec<String>,
}

impl EnvRules {
    /// Whether `name` is scrubbed under these rules, by its name alone.
    pub fn is_scrubbed(&self, name: &str) -> bool {
        self.decide(name, || false)
    }

    /// Whether the variable `name=value` is scrubbed: by its name, or by a
    /// value that is a secret by its form (a token in a well-known format,
    /// a URL with a password; see [`is_secret_value`]). `drop` scrubs and
    /// `keep` passes through either way.
    pub fn is_scrubbed_var(&self, name: &str, value: &str) -> bool {
        self.decide(name, || is_secret_value(value))
    }

    fn decide(&self, name: &str, secret_value: impl FnOnce() -> bool) -> bool {
        let listed = |patterns: &[String]| patterns.iter().any(|p| glob_match_ignore_case(p, name));
        if listed(&self.drop) {
            return true;
        }
        (is_secret_name(name) || secret_value()) && !listed(&self.keep)
    }
}

/// The environment a command gets, and what was taken out of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScrubbedEnv {
    /// What the child process gets (sorted by name).
    pub vars: BTreeMap<String, String>,
    /// The scrubbed variables with their values, for redaction.
    pub removed: BTreeMap<String, String>,
}

impl ScrubbedEnv {
    /// `(name, value)` pairs whose values must never appear in tool output:
    /// the scrubbed values at least [`MIN_REDACTED_LEN`] characters long,
    /// longest first so a value containing another is replaced whole.
    /// A value that holds a token (`Bearer <token>`, a URL with a password)
    /// also gives the token alone, so it is redacted wherever it appears.
    pub fn redactions(&self) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = self
            .removed
            .iter()
            .flat_map(|(name, value)| {
                let token = find_token(value)
                    .map(|found| &value[found.start..found.end])
                    .filter(|token| token.len() < value.len());
                std::iter::once(value.as_str())
                    .chain(token)
                    .map(move |secret| (name.clone(), secret.to_owned()))
            })
            .filter(|(_, value)| value.chars().count() >= MIN_REDACTED_LEN)
            .collect();
        pairs.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
        pairs
    }
}

/// Builds a child environment from `parent`: secret-looking and dropped
/// names, and secret-looking values, removed; ordinary ones kept; and
/// [`NON_INTERACTIVE`] set.
pub fn scrub_environment<I, K, V>(parent: I, rules: &EnvRules) -> ScrubbedEnv
where
    I: IntoIterator<Item = (K, V)>,
    K: Into<String>,
    V: Into<String>,
{
    let mut scrubbed = ScrubbedEnv::default();
    for (name, value) in parent {
        let (name, value) = (name.into(), value.into());
        if rules.is_scrubbed_var(&name, &value) {
            scrubbed.removed.insert(name, value);
        } else {
            scrubbed.vars.insert(name, value);
        }
    }
    for (name, value) in NON_INTERACTIVE {
        scrubbed
            .vars
            .insert((*name).to_owned(), (*value).to_owned());
    }
    scrubbed
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn contract_names_are_secret() {
        for name in [
            "OPENAI_API_KEY",
            "my_apikey",
            "API_KEY",
            "GH_TOKEN",
            "A_TOKEN_B",
            "token",
            "client_secret",
            "DB_PASSWORD",
            "MYSQL_PASSWD",
            "SMTP_PASS",
            "SSH_PRIVATE_KEY_FILE",
            "AZURE_CREDENTIALS",
            "GITLAB_PAT",
            "SENTRY_DSN",
            "DATABASE_URL",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GITHUB_TOKEN",
            "NPM_TOKEN",
            "ANTHROPIC_MODEL",
            "OPENAI_ORG",
            "GEMINI_PROJECT",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn ordinary_names_stay() {
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "TOKENIZERS_PARALLELISM",
            "OPENAI_BASE_URL",
            "ANTHROPIC_BASE_URL",
            "AWS_REGION",
            "AWS_PROFILE",
            "TERM",
            "USER",
            "PASSAGE",
            "COMPASS",
            "RUST_LOG",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    /// The names the red team found unscrubbed, and look-alikes that stay.
    #[test]
    fn widened_names_are_secret_and_their_look_alikes_stay() {
        for name in [
            "MYSQL_PWD",
            "STRIPE_SIGNING_KEY",
            "ENCRYPTION_KEY",
            "SESSION_COOKIE",
            "cookie_jar",
            "SLACK_WEBHOOK_URL",
            "DISCORD_WEBHOOK",
            "ID_JWT",
            "AZURE_STORAGE_CONNECTION_STRING",
            "SQL_CONNSTRING",
            "GPG_PASSPHRASE",
            "BASIC_AUTH",
            "PROXY_AUTH_HEADER",
            "HTTP_AUTHORIZATION",
            "DOCKER_CREDENTIALS_JSON",
            "SIGNING_SECRET_V2",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "KEYBOARD",
            "PRIMARY_KEY_COLUMN",
            "SSH_AUTH_SOCK",
            "SSH_PUBLIC_KEY",
            "XAUTHORITY",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "TOKENIZERS_PARALLELISM",
            "GPG_TTY",
            "PWD",
            "OLDPWD",
            "HISTCONTROL",
            "AWS_KEY_ID",
            "SSH_KEY_PATH",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    /// Values in the red team's formats go whatever the variable's name.
    #[test]
    fn values_in_a_secret_format_are_scrubbed_under_any_name() {
        let format = |id: &str| {
            secret_formats::FORMATS
                .iter()
                .find(|format| format.id == id)
                .map_or_else(|| panic!("{id}"), |format| format.example)
        };
        let values = [
            ("ONE", format("jwt")),
            ("TWO", format("private-key")),
            ("THREE", format("slack-webhook")),
            ("FOUR", format("azure-storage-key")),
            ("FIVE", format("bearer-token")),
            ("SIX", "postgres://app:s3cr3t-Passw0rd@db.internal:5432/app"),
            (
                "SEVEN",
                "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlMTIz",
            ),
        ];
        let env = scrub_environment(
            values.iter().copied().chain([
                ("EIGHT", "https://example.com/docs"),
                ("NINE", "Bearer of news"),
            ]),
            &EnvRules::default(),
        );
        for (name, _) in values {
            assert!(env.removed.contains_key(name), "{name}");
        }
        assert!(env.vars.contains_key("EIGHT") && env.vars.contains_key("NINE"));
    }

    #[test]
    fn scrubbing_sets_non_interactive_variables() {
        let env = scrub_environment(
            [
                ("PATH", "/bin"),
                ("GITHUB_TOKEN", "ghp_0123456789"),
                ("EDITOR", "vim"),
            ],
            &EnvRules::default(),
        );
        assert_eq!(env.vars["PATH"], "/bin");
        assert_eq!(env.vars["EDITOR"], "/bin/false");
        assert_eq!(env.vars["GIT_PAGER"], "cat");
        assert_eq!(env.vars["GIT_TERMINAL_PROMPT"], "0");
        assert!(!env.vars.contains_key("GITHUB_TOKEN"));
        assert_eq!(env.removed["GITHUB_TOKEN"], "ghp_0123456789");
    }

    #[test]
    fn keep_and_drop_lists_apply_and_drop_wins() {
        let rules = EnvRules {
            keep: vec!["MY_PUBLIC_TOKEN_NAME".into(), "BOTH_TOKEN".into()],
            drop: vec!["corp_*".into(), "BOTH_*".into()],
        };
        let env = scrub_environment(
            [
                ("MY_PUBLIC_TOKEN_NAME", "x"),
                ("CORP_URL", "y"),
                ("BOTH_TOKEN", "z"),
                ("HOME", "/root"),
            ],
            &rules,
        );
        assert_eq!(
            env.vars.get("MY_PUBLIC_TOKEN_NAME").map(String::as_str),
            Some("x")
        );
        assert!(env.removed.contains_key("CORP_URL"));
        assert!(env.removed.contains_key("BOTH_TOKEN"));
        assert!(env.vars.contains_key("HOME"));
    }

    #[test]
    fn short_values_are_not_redacted_and_long_ones_come_first() {
        let env = scrub_environment(
            [
                ("A_TOKEN", "short"),
                ("B_TOKEN", "0123456789"),
                ("C_TOKEN", "0123456789abcdef"),
            ],
            &EnvRules::default(),
        );
        let names: Vec<String> = env.redactions().into_iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["C_TOKEN", "B_TOKEN"]);
    }

    #[test]
    fn secret_values_are_scrubbed_whatever_their_name() {
        let github = secret_formats::FORMATS
            .iter()
            .find(|format| format.id == "github-token")
            .map(|format| format.example)
            .expect("a GitHub format");
        let env = scrub_environment(
            [
                (
                    "DEPLOY_URL",
                    "https://deploy:pa55word-x@ci.example.com/hook",
                ),
                ("GITHUB_HEADER", &*format!("Authorization: token {github}")),
                ("KEPT_URL", "https://user:kept-value@example.com/"),
                ("HOME_PAGE", "https://example.com:8080/"),
                ("TOKENIZERS_PARALLELISM", "false"),
            ],
            &EnvRules {
                keep: vec!["KEPT_*".into()],
                drop: Vec::new(),
            },
        );
        assert!(env.removed.contains_key("DEPLOY_URL"));
        assert!(env.removed.contains_key("GITHUB_HEADER"));
        assert!(
            env.vars.contains_key("KEPT_URL"),
            "keep passes a value through"
        );
        assert!(env.vars.contains_key("HOME_PAGE"));
        assert!(env.vars.contains_key("TOKENIZERS_PARALLELISM"));
        let redactions = env.redactions();
        let names: Vec<&str> = redactions.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            ["GITHUB_HEADER", "DEPLOY_URL", "GITHUB_HEADER", "DEPLOY_URL"],
            "redacted like secret names, the token inside too"
        );
        assert_eq!(redactions[2].1, github);
        assert_eq!(redactions[3].1, "pa55word-x");
    }

    proptest! {
        /// Whatever the parent holds, no secret-pattern name reaches the child.
        #[test]
        fn scrubbed_environment_never_holds_a_secret_name(
            vars in prop::collection::btree_map("[A-Za-z_]{1,20}", "[ -~]{0,20}", 0..30)
        ) {
            let env = scrub_environment(vars.clone(), &EnvRules::default());
            for name in env.vars.keys() {
                prop_assert!(!is_secret_name(name), "{name} leaked");
            }
            for (name, value) in &vars {
                let forced = NON_INTERACTIVE.iter().any(|(n, _)| n == name);
                if !forced {
                    prop_assert!(env.vars.get(name) == Some(value) || env.removed.get(name) == Some(value));
                }
            }
        }
    }
}
