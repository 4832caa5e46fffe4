//! Secrets recognised by their value: tokens in well-known formats and URLs
//! with a password, kept as data with an example of each and look-alikes
//! that must not match (checked by the tests below).
//!
//! A format is found where one of its literal prefixes occurs: the regex
//! runs there only, so scanning text costs one search for the prefixes.
//! shell-runtime applies the same data to output streams (exec-tools
//! compiles it for it); [`find_token`] applies it to one value.

use std::sync::OnceLock;

use regex::Regex;

/// A well-known secret format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenFormat {
    /// Names the format in redactions: `[REDACTED:<id>]`.
    pub id: &'static str,
    /// Literal starts: every token of the format begins with one of them.
    pub prefixes: &'static [&'static str],
    /// The token from its prefix on (Rust `regex` syntax). With a capture
    /// group, only the group is secret (a URL's password).
    pub regex: &'static str,
    /// A regex class of the characters the token continues with after its
    /// prefix: where a run of them ends, the candidate ends.
    pub body: &'static str,
    /// The token must not touch a body character on either side: `task-...`
    /// holds no `sk-` key, a longer run is not a fixed-length key.
    pub standalone: bool,
    /// The part after the prefix must hold a digit (real keys do; words and
    /// hyphenated names after a short prefix do not).
    pub needs_digit: bool,
    /// A token of this format (made up), for tests and documentation.
    pub example: &'static str,
    /// Look-alikes that must not match.
    pub not_examples: &'static [&'static str],
}

/// The formats, most specific first: where two match at one place, the
/// first wins (`sk-ant-` before `sk-`).
pub const TOKEN_FORMATS: &[TokenFormat] = &[
    TokenFormat {
        id: "anthropic-key",
        prefixes: &["sk-ant-"],
        regex: r"sk-ant-[A-Za-z0-9_-]{20,}",
        body: r"[A-Za-z0-9_-]",
        standalone: true,
        needs_digit: true,
        example: "sk-ant-api03-Xq3vB8nR2kL5mT9wE1yU6iO4pA7sD0fG-hJ2kL5zX8cV1bN4mQ7wE0rT3yU6iAA",
        not_examples: &["sk-ant-short1", "sk-ant-without-any-digits-at-all-here"],
    },
    TokenFormat {
        id: "openai-key",
        prefixes: &["sk-"],
        regex: r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        body: r"[A-Za-z0-9_-]",
        standalone: true,
        needs_digit: true,
        example: "sk-proj-4f9aB7cD2eF0gH1iJ3kL5mN7oP9qR1sT3uV5wX7yZ9",
        not_examples: &[
            "pip install sk-learn==0.24.2",
            "task-0123456789abcdefghijklmn",
            "sk-this-is-a-long-hyphenated-css-class-name",
            "disk-1234567890abcdefghijklmnop",
        ],
    },
    TokenFormat {
        id: "github-token",
        prefixes: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        regex: r"gh[pousr]_[A-Za-z0-9]{36,251}",
        body: r"[A-Za-z0-9]",
        standalone: true,
        needs_digit: false,
        example: "ghp_R4nd0mL00k1ngT0k3nW1thTh1rtySixChr5x",
        not_examples: &["ghp_short0123", "the ghp_ prefix alone"],
    },
    TokenFormat {
        id: "github-pat",
        prefixes: &["github_pat_"],
        regex: r"github_pat_[A-Za-z0-9_]{22,255}",
        body: r"[A-Za-z0-9_]",
        standalone: true,
        needs_digit: false,
        example: "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab",
        not_examples: &["github_pat_short"],
    },
    TokenFormat {
        id: "gitlab-token",
        prefixes: &["glpat-"],
        regex: r"glpat-[A-Za-z0-9_-]{20,}",
        body: r"[A-Za-z0-9_-]",
        standalone: true,
        needs_digit: false,
        example: "glpat-xR7kP2mN9qL4vB8tY3wZ",
        not_examples: &["glpat-short"],
    },
    TokenFormat {
        id: "slack-token",
        prefixes: &["xoxa-", "xoxb-", "xoxo-", "xoxp-", "xoxr-", "xoxs-"],
        regex: r"xox[aboprs]-[A-Za-z0-9-]{10,}",
        body: r"[A-Za-z0-9-]",
        standalone: true,
        needs_digit: true,
        example: "xoxb-2741859306-5823019467-kQ8vR3nT6wY9zB2mL5pX7cD1",
        not_examples: &["xoxb-", "xoxb-not-a-token-just-words"],
    },
    TokenFormat {
        id: "stripe-key",
        prefixes: &["sk_live_", "rk_live_", "sk_test_", "rk_test_"],
        regex: r"[sr]k_(?:live|test)_[A-Za-z0-9]{20,}",
        body: r"[A-Za-z0-9]",
        standalone: true,
        needs_digit: false,
        example: "sk_live_51HbQ7xKz9vR3nT6wY9zB2mL5pX",
        not_examples: &["sk_live_short", "risk_live_51HbQ7xKz9vR3nT6wY9zB2mL5pX"],
    },
    TokenFormat {
        id: "aws-access-key-id",
        prefixes: &["AKIA", "ASIA"],
        regex: r"A[KS]IA[A-Z0-9]{16}",
        body: r"[A-Z0-9]",
        standalone: true,
        needs_digit: false,
        example: "AKIAIOSFODNN7EXAMPLE",
        not_examples: &["AKIAFOO", "XAKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE0"],
    },
    TokenFormat {
        id: "google-api-key",
        prefixes: &["AIza"],
        regex: r"AIza[A-Za-z0-9_-]{35}",
        body: r"[A-Za-z0-9_-]",
        standalone: true,
        needs_digit: false,
        example: "AIzaSyA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tUvW",
        not_examples: &["AIzaShort"],
    },
    TokenFormat {
        id: "huggingface-token",
        prefixes: &["hf_"],
        regex: r"hf_[A-Za-z0-9]{30,}",
        body: r"[A-Za-z0-9]",
        standalone: true,
        needs_digit: false,
        example: "hf_kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0sAqW",
        not_examples: &[
            "hf_transfer",
            "self.hf_config_dictionary_for_the_model_loader",
        ],
    },
    TokenFormat {
        id: "npm-token",
        prefixes: &["npm_"],
        regex: r"npm_[A-Za-z0-9]{36}",
        body: r"[A-Za-z0-9]",
        standalone: true,
        needs_digit: false,
        example: "npm_kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0sAqWer",
        not_examples: &["npm_config_cache=/root/.npm", "npm_package_name"],
    },
    TokenFormat {
        id: "pypi-token",
        prefixes: &["pypi-AgEIcHlwaS5vcmc"],
        regex: r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        body: r"[A-Za-z0-9_-]",
        standalone: true,
        needs_digit: false,
        example: "pypi-AgEIcHlwaS5vcmcCJDk0NTZmNzA4LTk2YjAtNDY5NS1iMjMwLWUxZTZlNzYyZjY1ZAACKlsz",
        not_examples: &["pypi-AgEIcHlwaS5vcmc"],
    },
    TokenFormat {
        id: "sendgrid-key",
        prefixes: &["SG."],
        regex: r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        body: r"[A-Za-z0-9_.-]",
        standalone: true,
        needs_digit: false,
        example: "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",
        not_examples: &[
            "SG.short",
            "MSG.kQ8vR3nT6wY9zB2mL5pX7c.D1fG4hJ0sAqWeRtYuIoPaSdFgHjKlZxCvBnMqWeRtYu",
        ],
    },
    TokenFormat {
        id: "url-password",
        prefixes: &["://"],
        regex: r"://[^\s/?#@:]*:([^\s/?#@]+)@",
        body: r"[^\s/?#@]",
        standalone: false,
        needs_digit: false,
        example: "postgres://app:s3cr3t-Passw0rd@db.internal:5432/app",
        not_examples: &[
            "https://example.com:8080/path",
            "ssh://git@github.com/owner/repo.git",
            "http://[::1]:8080/",
        ],
    },
];

/// Ordinary text no format may match: prose, hashes, identifiers, encodings.
pub const NOT_SECRETS: &[&str] = &[
    "Use sk-learn (scikit-learn) for the model; see the task-1234 notes.",
    "3f786850e387550fdab836ed7e6dc881de23001b",
    "123e4567-e89b-12d3-a456-426614174000",
    "VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==",
    "SGVsbG8sIHRoaXMgaXMgYW4gb3JkaW5hcnkgc2VudGVuY2UgaW4gYmFzZTY0Lg==",
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "https://docs.rs/regex/latest/regex/ and git@github.com:owner/repo.git",
    "LS_COLORS=rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35",
];

/// A token found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenMatch {
    /// Its format.
    pub format: &'static TokenFormat,
    /// Byte offset of the secret part (the whole token, or a URL's password).
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
}

struct Compiled {
    format: &'static TokenFormat,
    regex: Regex,
    body: Regex,
}

/// One slot per format, compiled the first time one of its prefixes is
/// found: start-up scans every environment value for tokens, and most
/// values hold no prefix at all, so most formats are never compiled there
/// (compiling them all took about 2 ms of every start).
fn slots() -> &'static [OnceLock<Option<Compiled>>] {
    static SLOTS: OnceLock<Vec<OnceLock<Option<Compiled>>>> = OnceLock::new();
    SLOTS.get_or_init(|| TOKEN_FORMATS.iter().map(|_| OnceLock::new()).collect())
}

/// The format at `index` compiled; `None` for one that does not compile
/// (left out; the tests compile each).
fn compiled_at(index: usize) -> Option<&'static Compiled> {
    let format = TOKEN_FORMATS.get(index)?;
    slots()
        .get(index)?
        .get_or_init(|| {
            Some(Compiled {
                format,
                regex: Regex::new(&format!(r"\A(?:{})", format.regex)).ok()?,
                body: Regex::new(&format!(r"\A(?:{})\z", format.body)).ok()?,
            })
        })
        .as_ref()
}

/// Every format compiled (the tests).
#[cfg(test)]
fn compiled() -> Vec<&'static Compiled> {
    (0..TOKEN_FORMATS.len()).filter_map(compiled_at).collect()
}

impl Compiled {
    fn continues(&self, text: &str, byte_at: usize, forwards: bool) -> bool {
        let next = if forwards {
            text.get(byte_at..).and_then(|rest| rest.chars().next())
        } else {
            text.get(..byte_at)
                .and_then(|head| head.chars().next_back())
        };
        let mut buffer = [0u8; 4];
        next.is_some_and(|c| self.body.is_match(c.encode_utf8(&mut buffer)))
    }

    /// The token of this format whose prefix `prefix` starts at `at`, if any.
    fn match_at(&self, text: &str, at: usize, prefix: &str) -> Option<TokenMatch> {
        if self.format.standalone && self.continues(text, at, false) {
            return None;
        }
        let captures = self.regex.captures(&text[at..])?;
        let whole = captures.get(0)?;
        let whole_end = at + whole.end();
        if self.format.standalone && self.continues(text, whole_end, true) {
            return None;
        }
        let after_prefix = (at + prefix.len()).min(whole_end);
        if self.format.needs_digit
            && !text[after_prefix..whole_end]
                .bytes()
                .any(|b| b.is_ascii_digit())
        {
            return None;
        }
        let secret = captures.get(1).unwrap_or(whole);
        Some(TokenMatch {
            format: self.format,
            start: at + secret.start(),
            end: at + secret.end(),
        })
    }
}

/// The first token in `text` in any of [`TOKEN_FORMATS`], if there is one.
pub fn find_token(text: &str) -> Option<TokenMatch> {
    let mut best: Option<TokenMatch> = None;
    for (index, format) in TOKEN_FORMATS.iter().enumerate() {
        for prefix in format.prefixes {
            for (at, _) in text.match_indices(prefix) {
                if best.is_some_and(|best| best.start <= at) {
                    break;
                }
                let Some(compiled) = compiled_at(index) else {
                    break;
                };
                if let Some(found) = compiled.match_at(text, at, prefix) {
                    best = Some(found);
                    break;
                }
            }
        }
    }
    best
}

/// Whether `value` (a variable's) holds a secret by its form: a token in
/// a well-known format, or a URL with a password.
pub fn is_secret_value(value: &str) -> bool {
    find_token(value).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_compiles_and_finds_its_example_whole() {
        assert_eq!(compiled().len(), TOKEN_FORMATS.len());
        for format in TOKEN_FORMATS {
            assert!(
                format
                    .prefixes
                    .iter()
                    .any(|prefix| format.example.contains(prefix)),
                "{}: the example holds a prefix",
                format.id
            );
            let text = format!("value: {} end", format.example);
            let found =
                find_token(&text).unwrap_or_else(|| panic!("{}: example not found", format.id));
            assert_eq!(found.format.id, format.id, "{}", format.id);
            if Regex::new(format.regex).is_ok_and(|regex| regex.captures_len() > 1) {
                // Only the group is secret: the password of a URL.
                assert!(
                    found.end - found.start < format.example.len(),
                    "{}",
                    format.id
                );
            } else {
                assert_eq!(
                    &text[found.start..found.end],
                    format.example,
                    "{}",
                    format.id
                );
            }
        }
    }

    #[test]
    fn look_alikes_are_no_tokens() {
        for format in TOKEN_FORMATS {
            for text in format.not_examples {
                assert_eq!(find_token(text), None, "{}: {text}", format.id);
            }
        }
        for text in NOT_SECRETS {
            assert_eq!(find_token(text), None, "{text}");
        }
    }

    #[test]
    fn a_url_password_is_the_secret_part() {
        let text = "DATABASE=postgres://app:s3cr3t@db:5432/app";
        let found = find_token(text).expect("found");
        assert_eq!(found.format.id, "url-password");
        assert_eq!(&text[found.start..found.end], "s3cr3t");
        assert!(is_secret_value("https://user:hunter2@example.com/"));
        assert!(!is_secret_value("https://user@example.com/"));
    }

    #[test]
    fn the_most_specific_format_wins_and_the_first_token_is_found() {
        let anthropic = TOKEN_FORMATS[0].example;
        assert_eq!(
            find_token(anthropic).map(|m| m.format.id),
            Some("anthropic-key")
        );
        let text = format!(
            "a {} b {}",
            TOKEN_FORMATS[2].example, TOKEN_FORMATS[1].example
        );
        assert_eq!(find_token(&text).map(|m| m.format.id), Some("github-token"));
    }

    #[test]
    fn standalone_tokens_do_not_touch_other_token_characters() {
        let github = TOKEN_FORMATS[2].example;
        assert!(find_token(&format!("x{github}")).is_none());
        let aws = TOKEN_FORMATS[7].example;
        assert!(
            find_token(&format!("{aws}0")).is_none(),
            "the key is 20 characters, no more"
        );
        assert!(find_token(&format!("({github})")).is_some());
    }
}
