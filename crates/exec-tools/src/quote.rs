//! Quoting values for splicing into shell text.

/// Quotes `value` so that bash reads it back as exactly one word with
/// exactly this text: paths with spaces, quotes, `$`, newlines, non-ASCII.
/// Words made only of safe characters are returned as they are.
pub fn quote(value: &str) -> String {
    let safe = !value.is_empty()
        && value.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'_' | b'-' | b'.' | b'/' | b',' | b':' | b'@' | b'%' | b'+' | b'='
                )
        });
    if safe {
        return value.to_owned();
    }
    // Single quotes keep everything literal; a single quote itself is
    // closed, escaped, and reopened.
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        if c == '\'' {
            quoted.push_str(r"'\''");
        } else {
            quoted.push(c);
        }
    }
    quoted.push('\'');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_words_stay_bare() {
        assert_eq!(quote("src/main.rs"), "src/main.rs");
        assert_eq!(quote("a=b,c:d@e%f+g"), "a=b,c:d@e%f+g");
    }

    #[test]
    fn everything_else_is_single_quoted() {
        assert_eq!(quote(""), "''");
        assert_eq!(quote("my dir"), "'my dir'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote("a\nb"), "'a\nb'");
        assert_eq!(quote("~"), "'~'");
        assert_eq!(quote("é"), "'é'");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Any string (bar NUL, which argv cannot carry) survives a round
        /// trip through `bash -c 'printf %s QUOTED'`.
        #[test]
        fn quote_round_trips_through_bash(value in "[^\\x00]{0,24}") {
            #[expect(clippy::disallowed_methods, reason = "the test checks quoting against a real bash")]
            let output = std::process::Command::new("bash")
                .arg("-c")
                .arg(format!("printf %s {}", quote(&value)))
                .output()
                .unwrap();
            proptest::prop_assert!(output.status.success());
            proptest::prop_assert_eq!(String::from_utf8(output.stdout).unwrap(), value);
        }
    }
}
