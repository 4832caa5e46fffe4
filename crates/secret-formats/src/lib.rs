//! Secrets recognised by their form: tokens in well-known formats, private
//! keys, webhook URLs, `Bearer` values, connection-string keys and URLs with
//! a password. The formats are data ([`FORMATS`], in `formats.rs`), each with
//! an example and look-alikes that must not match, checked by one table
//! test; [`Matcher`] is the one place that decides whether a format matches
//! at a position.
//!
//! Two users, one list: exec-policy scrubs a variable whose value holds a
//! token ([`find_token`]), and shell-runtime redacts tokens from output
//! streams, a prefix at a time (it drives [`Matcher`] itself so it can hold
//! back a token cut by a pipe read). This crate depends on nothing of ours.

mod formats;
mod matcher;

pub use formats::{FORMATS, NOT_SECRETS};
pub use matcher::{
    BadFormat, Matcher, TokenMatch, compile_all, find_token, is_secret_value, matcher,
};

/// A well-known secret format, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenFormat {
    /// Names the format in redactions: `[REDACTED:<id>]`.
    pub id: &'static str,
    /// Literal starts: every token of the format begins with one of them.
    /// Text is searched for these; the regex runs only where one occurs.
    pub prefixes: &'static [&'static str],
    /// The token from its prefix on (Rust `regex` syntax, matched anchored
    /// at the prefix). With a capture group, only the group is secret (the
    /// password of a URL, the value after `AccountKey=`).
    pub regex: &'static str,
    /// A regex class of the characters a token continues with after its
    /// prefix: a stream whose run of them reaches the end of what has been
    /// read may still hold more of the token, so it waits.
    pub body: &'static str,
    /// A regex class the token must not touch on either side (`task-...`
    /// holds no `sk-` key; a longer run is no fixed-length key); empty for
    /// none.
    pub edge: &'static str,
    /// A regex class the character just before the prefix must be in
    /// (it replaces `edge` on that side); empty for any.
    pub preceded_by: &'static str,
    /// The part after the prefix must hold an ASCII digit (real keys do;
    /// words and hyphenated names after a short prefix do not).
    pub needs_digit: bool,
    /// The most bytes a token of this format spans: a stream holds a
    /// candidate back at most this long before deciding it.
    pub max_len: usize,
    /// A token of this format (made up), for tests and documentation.
    pub example: &'static str,
    /// Look-alikes that must not match.
    pub not_examples: &'static [&'static str],
}

impl TokenFormat {
    /// The usual settings, for `..TokenFormat::BASE` in a format's literal:
    /// a token of letters, digits, `_` and `-` that stands alone, at most
    /// 1 KiB long.
    pub const BASE: Self = Self {
        id: "",
        prefixes: &[],
        regex: "",
        body: "[A-Za-z0-9_-]",
        edge: "[A-Za-z0-9_-]",
        preceded_by: "",
        needs_digit: false,
        max_len: 1024,
        example: "",
        not_examples: &[],
    };
}

#[cfg(test)]
mod tests;
