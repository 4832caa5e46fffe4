//! The table test: every format compiles, finds its example and none of
//! its look-alikes, and no format matches ordinary text.

use crate::{FORMATS, Matcher, NOT_SECRETS, TokenFormat, find_token, matcher};

fn format(id: &str) -> &'static TokenFormat {
    FORMATS
        .iter()
        .find(|format| format.id == id)
        .unwrap_or_else(|| panic!("no format {id}"))
}

#[test]
fn the_table_is_wide_and_its_ids_are_unique_labels() {
    assert!(FORMATS.len() >= 44, "{} formats", FORMATS.len());
    let mut ids: Vec<&str> = FORMATS.iter().map(|format| format.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), FORMATS.len(), "ids are unique");
    for id in ids {
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{id}"
        );
    }
}

#[test]
fn every_format_compiles_and_finds_its_example() {
    for (index, format) in FORMATS.iter().enumerate() {
        assert!(matcher(index).is_some(), "{}: compiles", format.id);
        assert!(
            format
                .prefixes
                .iter()
                .any(|prefix| format.example.contains(prefix)),
            "{}: the example holds a prefix",
            format.id
        );
        for (head, tail) in [("value: ", " end"), ("", ""), ("KEY=", "\n"), ("\"", "\",")] {
            let text = format!("{head}{}{tail}", format.example);
            let found = find_token(&text)
                .unwrap_or_else(|| panic!("{}: example not found in {text:?}", format.id));
            assert_eq!(found.format.id, format.id, "{text:?}");
            assert!(
                found.start >= head.len() && found.end <= head.len() + format.example.len(),
                "{}: the match lies in the example",
                format.id
            );
            assert!(
                found.end - found.start >= 8,
                "{}: a secret, not a scrap",
                format.id
            );
        }
    }
}

#[test]
fn look_alikes_and_ordinary_text_match_nothing() {
    for format in FORMATS {
        for text in format.not_examples {
            assert_eq!(find_token(text), None, "{}: {text}", format.id);
        }
    }
    for text in NOT_SECRETS {
        assert_eq!(find_token(text), None, "{text}");
    }
}

#[test]
fn a_grouped_format_keeps_its_context_and_redacts_the_secret() {
    let text = "DATABASE=postgres://app:s3cr3t@db:5432/app";
    let found = find_token(text).expect("found");
    assert_eq!(found.format.id, "url-password");
    assert_eq!(&text[found.start..found.end], "s3cr3t");
    let bearer = format("bearer-token").example;
    let found = find_token(bearer).expect("found");
    assert_eq!(
        &bearer[found.start..found.end],
        "CsMj0kYPiKFofGHMS88KZ09xCV8Z6lrlqGApoQhA"
    );
    let telegram = format("telegram-bot-token").example;
    let found = find_token(telegram).expect("found");
    assert!(
        telegram[..found.start].ends_with("9041307993:"),
        "the bot id stays"
    );
}

#[test]
fn the_most_specific_format_wins_and_the_first_token_is_found() {
    let anthropic = format("anthropic-key").example;
    assert_eq!(
        find_token(anthropic).map(|m| m.format.id),
        Some("anthropic-key")
    );
    let text = format!(
        "a {} b {}",
        format("github-token").example,
        format("openai-key").example
    );
    assert_eq!(find_token(&text).map(|m| m.format.id), Some("github-token"));
    let bearer_jwt = format!("Authorization: Bearer {}", format("jwt").example);
    assert_eq!(
        find_token(&bearer_jwt).map(|m| m.format.id),
        Some("bearer-token")
    );
}

#[test]
fn standalone_tokens_do_not_touch_other_token_characters() {
    let github = format("github-token").example;
    assert!(find_token(&format!("x{github}")).is_none());
    let aws = format("aws-access-key-id").example;
    assert!(
        find_token(&format!("{aws}0")).is_none(),
        "the key is 20 characters, no more"
    );
    assert!(find_token(&format!("({github})")).is_some());
    let jwt = format("jwt").example;
    assert!(
        find_token(&format!("token {jwt}.")).is_some(),
        "a full stop ends it"
    );
}

#[test]
fn a_private_key_is_redacted_whole_or_to_the_end_of_its_body() {
    let pem = format("private-key").example;
    let text = format!("key:\n{pem}\ndone.\n");
    let found = find_token(&text).expect("found");
    assert_eq!(&text[found.start..found.end], pem);
    let cut = &pem[..80];
    let text = format!("{cut}\n");
    let found = find_token(&text).expect("a key without its end is still a key");
    assert_eq!(&text[found.start..found.end], format!("{cut}\n"));
}

#[test]
fn bad_formats_are_refused_naming_the_format() {
    static BROKEN: TokenFormat = TokenFormat {
        id: "broken",
        prefixes: &["x"],
        regex: "(unclosed",
        ..TokenFormat::BASE
    };
    static EMPTY: TokenFormat = TokenFormat {
        id: "empty",
        regex: "x",
        ..TokenFormat::BASE
    };
    let error = Matcher::new(&BROKEN).expect_err("refused");
    assert!(
        error.to_string().starts_with("token format `broken`"),
        "{error}"
    );
    let error = Matcher::new(&EMPTY).expect_err("refused");
    assert!(error.to_string().contains("prefixes"), "{error}");
}

/// Streams are searched for each prefix's rarest byte: a prefix of only
/// lower-case letters, digits and spaces would be looked for at common
/// bytes (`dapi` made plain text about three times slower to redact).
#[test]
fn every_prefix_holds_a_byte_rare_in_ordinary_output() {
    for format in FORMATS {
        for prefix in format.prefixes {
            assert!(
                prefix
                    .bytes()
                    .any(|b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b' ')),
                "{}: {prefix}",
                format.id
            );
        }
    }
}
