//! Redaction of output as it streams: given secret values, and tokens in
//! well-known formats, replaced even when a pipe read cuts one in two.
//!
//! One [`Redactions`] table is built per server and shared (`Arc`) by every
//! stream, so the secret values are held once. A [`StreamReplacer`] keeps
//! only the undecided end of its stream: a tail that may still grow into a
//! secret value or a token.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};

/// Bytes a token candidate may hold back while its end is still unread;
/// past it, the candidate is decided with what has arrived.
const MAX_HELD: usize = 1024;

/// A candidate whose run of token characters is cut off by `\r` (a redraw
/// printing the token in growing frames) is a token once it has this many
/// characters after its prefix: every frame stays in the stream (output
/// files, answers that keep redraws), and most of a token is a secret too.
/// Shorter frames are ordinary words more often than not.
const MIN_REDRAWN: usize = 12;

/// Why a token format could not be compiled.
#[derive(Debug, Clone, thiserror::Error)]
#[error("token format `{label}`: {message}")]
pub struct BadTokenPattern {
    /// The format's label.
    pub label: String,
    /// What is wrong.
    pub message: String,
}

/// A token format as plain data (the layers above own the list).
#[derive(Debug, Clone, Copy)]
pub struct TokenSpec<'a> {
    /// Replacements read `[REDACTED:<label>]`.
    pub label: &'a str,
    /// Literal starts: every token begins with one of them. They are what
    /// the stream is searched for; the regex runs only where one occurs.
    pub prefixes: &'a [&'a str],
    /// The token, matched from the prefix on. With a capture group, only
    /// the group is replaced (the password of a URL).
    pub regex: &'a str,
    /// A regex class of the characters a token continues with after its
    /// prefix, such as `[A-Za-z0-9_-]`: a candidate whose run of them
    /// reaches the end of what has been read may still grow.
    pub body: &'a str,
    /// The token must not touch a body character on either side
    /// (`task-...` holds no `sk-` key).
    pub standalone: bool,
    /// The part after the prefix must hold an ASCII digit.
    pub needs_digit: bool,
}

/// A compiled token format.
#[derive(Debug, Clone)]
pub struct TokenPattern {
    replacement: String,
    prefixes: Vec<String>,
    /// `\A(?:regex)`: matched at a prefix.
    regex: regex::Regex,
    grouped: bool,
    /// Which bytes continue a token (bytes of non-ASCII characters all
    /// count as the class says of U+FFFD).
    body: Box<[bool; 256]>,
    standalone: bool,
    needs_digit: bool,
}

impl TokenPattern {
    /// Compiles `spec`.
    pub fn new(spec: &TokenSpec<'_>) -> Result<Self, BadTokenPattern> {
        let bad = |message: String| BadTokenPattern {
            label: spec.label.to_owned(),
            message,
        };
        if spec.prefixes.is_empty() || spec.prefixes.iter().any(|prefix| prefix.is_empty()) {
            return Err(bad("every format needs non-empty prefixes".to_owned()));
        }
        let regex = regex::Regex::new(&format!(r"\A(?:{})", spec.regex))
            .map_err(|error| bad(error.to_string()))?;
        let class = regex::Regex::new(&format!(r"\A(?:{})\z", spec.body))
            .map_err(|error| bad(error.to_string()))?;
        let mut body = Box::new([false; 256]);
        let mut buffer = [0u8; 4];
        for (byte, slot) in body.iter_mut().enumerate() {
            let probe = u8::try_from(byte)
                .ok()
                .filter(u8::is_ascii)
                .map_or('\u{fffd}', char::from);
            *slot = class.is_match(probe.encode_utf8(&mut buffer));
        }
        Ok(Self {
            replacement: format!("[REDACTED:{}]", spec.label),
            prefixes: spec
                .prefixes
                .iter()
                .map(|&prefix| prefix.to_owned())
                .collect(),
            grouped: regex.captures_len() > 1,
            regex,
            body,
            standalone: spec.standalone,
            needs_digit: spec.needs_digit,
        })
    }

    fn continues(&self, byte: Option<u8>) -> bool {
        byte.is_some_and(|byte| self.body[usize::from(byte)])
    }

    /// What the candidate at `at` (where `prefix_len` bytes of a prefix
    /// matched) is, given the byte before it.
    fn decide(
        &self,
        text: &str,
        at: usize,
        prefix_len: usize,
        before: Option<u8>,
        at_end: bool,
    ) -> Candidate<'_> {
        if self.standalone && self.continues(before) {
            return Candidate::Nothing;
        }
        let bytes = text.as_bytes();
        let body_start = at + prefix_len;
        let run_end = body_start
            + bytes[body_start..]
                .iter()
                .take_while(|byte| self.body[usize::from(**byte)])
                .count();
        if run_end == bytes.len() && !at_end && run_end - at < MAX_HELD {
            return Candidate::Open;
        }
        let has_digit = |end: usize| {
            bytes[body_start..end.max(body_start)]
                .iter()
                .any(u8::is_ascii_digit)
        };
        let haystack = &text[at..];
        let found = if self.grouped {
            self.regex.captures(haystack).and_then(|captures| {
                let whole = captures.get(0)?;
                let secret = captures.get(1).unwrap_or(whole);
                Some((whole.end(), secret.start(), secret.end()))
            })
        } else {
            self.regex
                .find(haystack)
                .map(|whole| (whole.end(), whole.start(), whole.end()))
        };
        if let Some((whole_end, start, end)) = found {
            let whole_end = at + whole_end;
            let alone = !self.standalone || !self.continues(bytes.get(whole_end).copied());
            if alone && (!self.needs_digit || has_digit(whole_end)) && end > start {
                return Candidate::Token {
                    start: at + start,
                    end: at + end,
                    replacement: &self.replacement,
                };
            }
        }
        let redrawn = !self.grouped
            && bytes.get(run_end) == Some(&b'\r')
            && run_end - body_start >= MIN_REDRAWN
            && (!self.needs_digit || has_digit(run_end));
        if redrawn {
            return Candidate::Token {
                start: at,
                end: run_end,
                replacement: &self.replacement,
            };
        }
        Candidate::Nothing
    }
}

/// What a position holding a token prefix turned out to be.
enum Candidate<'a> {
    /// No token starts here.
    Nothing,
    /// It may still become one: hold the text back from here.
    Open,
    /// `start..end` is replaced (the whole token, or a URL's password).
    Token {
        start: usize,
        end: usize,
        replacement: &'a str,
    },
}

/// Everything output redaction replaces: secret values (each with its
/// replacement) and token formats. Built once, shared by every stream.
#[derive(Debug, Default)]
pub struct Redactions {
    /// `(value, replacement)`, longest value first, so a value containing
    /// another is replaced whole.
    literals: Vec<(String, String)>,
    patterns: Vec<TokenPattern>,
    /// Every prefix of every pattern, found in one pass.
    starts: Option<AhoCorasick>,
    /// Bytes of the longest value or prefix: a tail shorter than it may
    /// still be the beginning of one.
    longest: usize,
}

impl Redactions {
    /// A table for `literals` (`(value, replacement)`; empty values are
    /// ignored) and token `patterns`.
    pub fn new(
        literals: impl IntoIterator<Item = (String, String)>,
        patterns: Vec<TokenPattern>,
    ) -> Self {
        let mut literals: Vec<(String, String)> = literals
            .into_iter()
            .filter(|(value, _)| !value.is_empty())
            .collect();
        literals.sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
        let prefixes: Vec<&str> = patterns
            .iter()
            .flat_map(|pattern| pattern.prefixes.iter().map(String::as_str))
            .collect();
        // Without the automaton (it cannot fail for a few short prefixes,
        // but if it did) each prefix is searched on its own: slower, same result.
        let starts = (!prefixes.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostFirst)
                    .build(&prefixes)
                    .ok()
            })
            .flatten();
        let longest = literals
            .iter()
            .map(|(value, _)| value.len())
            .chain(prefixes.iter().map(|prefix| prefix.len()))
            .max()
            .unwrap_or(0);
        Self {
            literals,
            patterns,
            starts,
            longest,
        }
    }

    /// True when nothing is replaced (text passes through untouched).
    pub fn is_empty(&self) -> bool {
        self.literals.is_empty() && self.patterns.is_empty()
    }

    /// Replaces every secret value and token in a whole text.
    pub fn replace_all(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        self.redact(text, None, true, &mut out);
        out
    }

    /// The earliest occurrence of a prefix at or after `from`.
    fn next_start(&self, text: &str, from: usize) -> Option<usize> {
        if self.patterns.is_empty() || from >= text.len() {
            return None;
        }
        if let Some(starts) = &self.starts {
            return starts
                .find(aho_corasick::Input::new(text).span(from..text.len()))
                .map(|found| found.start());
        }
        self.patterns
            .iter()
            .flat_map(|pattern| &pattern.prefixes)
            .filter_map(|prefix| text[from..].find(prefix.as_str()).map(|at| from + at))
            .min()
    }

    /// The token (or the reason to wait) at `at`, where some prefix occurs.
    fn candidate(&self, text: &str, at: usize, before: Option<u8>, at_end: bool) -> Candidate<'_> {
        for pattern in &self.patterns {
            for prefix in &pattern.prefixes {
                if !text[at..].starts_with(prefix.as_str()) {
                    continue;
                }
                match pattern.decide(text, at, prefix.len(), before, at_end) {
                    Candidate::Nothing => {}
                    decided => return decided,
                }
            }
        }
        Candidate::Nothing
    }

    /// The earliest position at or after `from`, among the last bytes of
    /// `text`, where the rest of `text` is the unfinished beginning of a
    /// value or of a prefix; `text.len()` when there is none.
    fn unfinished_tail(&self, text: &str, from: usize, before: Option<u8>) -> usize {
        let len = text.len();
        let lowest = len.saturating_sub(self.longest.saturating_sub(1)).max(from);
        for at in lowest..len {
            if !text.is_char_boundary(at) {
                continue;
            }
            let rest = &text[at..];
            let begins = |whole: &str| whole.len() > rest.len() && whole.starts_with(rest);
            if self.literals.iter().any(|(value, _)| begins(value)) {
                return at;
            }
            let previous = if at == 0 {
                before
            } else {
                Some(text.as_bytes()[at - 1])
            };
            let token = self.patterns.iter().any(|pattern| {
                (!pattern.standalone || !pattern.continues(previous))
                    && pattern.prefixes.iter().any(|prefix| begins(prefix))
            });
            if token {
                return at;
            }
        }
        len
    }

    /// Appends to `out` the decided part of `text` with its secrets
    /// replaced, and returns how far that is: all of it when `at_end`,
    /// else up to what may still be the start of a secret. `before` is the
    /// byte that preceded `text` in the stream.
    fn redact(&self, text: &str, before: Option<u8>, at_end: bool, out: &mut String) -> usize {
        let len = text.len();
        let tail_from = |from: usize| {
            if at_end {
                len
            } else {
                self.unfinished_tail(text, from, before)
            }
        };
        let mut tail = tail_from(0);
        let mut at = 0;
        let mut search = 0;
        // The next occurrence of each value at or after `at`, found lazily.
        let mut next_literal: Vec<Option<usize>> = vec![None; self.literals.len()];
        loop {
            let literal = self.next_literal(text, at, &mut next_literal);
            let start = self.next_start(text, search.max(at));
            let (from, to, replacement) = match (literal, start) {
                (Some((value_at, index)), start)
                    if value_at < tail && start.is_none_or(|start| value_at <= start) =>
                {
                    let (value, replacement) = &self.literals[index];
                    (value_at, value_at + value.len(), replacement.as_str())
                }
                (_, Some(start)) if start < tail => {
                    let previous = if start == 0 {
                        before
                    } else {
                        Some(text.as_bytes()[start - 1])
                    };
                    match self.candidate(text, start, previous, at_end) {
                        Candidate::Nothing => {
                            search = start + 1;
                            continue;
                        }
                        Candidate::Open => {
                            tail = start;
                            break;
                        }
                        Candidate::Token {
                            start,
                            end,
                            replacement,
                        } => (start, end, replacement),
                    }
                }
                _ => break,
            };
            out.push_str(&text[at..from]);
            out.push_str(replacement);
            at = to;
            search = to;
            if at > tail {
                tail = tail_from(at);
            }
        }
        let tail = tail.max(at);
        out.push_str(&text[at..tail]);
        tail
    }

    /// The earliest value occurring at or after `at` (the longest of those
    /// starting there), as `(position, index)`.
    fn next_literal(
        &self,
        text: &str,
        at: usize,
        next: &mut [Option<usize>],
    ) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for (index, (value, _)) in self.literals.iter().enumerate() {
            let position = match next[index] {
                Some(position) if position >= at => position,
                _ => {
                    let found = text[at..]
                        .find(value.as_str())
                        .map_or(usize::MAX, |offset| at + offset);
                    next[index] = Some(found);
                    found
                }
            };
            if position != usize::MAX && best.is_none_or(|(best_at, _)| position < best_at) {
                best = Some((position, index));
            }
        }
        best
    }
}

/// Redacts one stream as it arrives. The end of each chunk that could
/// still begin a secret value or a token is held back until the next chunk
/// (or the end) decides it, so a secret split by a pipe read is still caught.
#[derive(Debug, Clone, Default)]
pub struct StreamReplacer {
    table: Option<Arc<Redactions>>,
    pending: String,
    /// The last byte passed on, for tokens that must stand alone.
    before: Option<u8>,
}

impl StreamReplacer {
    /// A replacer applying `table`; `None` passes text through untouched.
    pub fn new(table: Option<Arc<Redactions>>) -> Self {
        Self {
            table: table.filter(|table| !table.is_empty()),
            pending: String::new(),
            before: None,
        }
    }

    /// True when there is nothing to replace (text passes through untouched).
    pub fn is_empty(&self) -> bool {
        self.table.is_none()
    }

    /// Feeds `chunk`; appends to `out` the text that is decided.
    pub fn push(&mut self, chunk: &str, out: &mut String) {
        self.feed(chunk, false, out);
    }

    /// Ends the stream: the held-back text is decided and appended.
    pub fn finish(&mut self, out: &mut String) {
        self.feed("", true, out);
    }

    fn feed(&mut self, chunk: &str, at_end: bool, out: &mut String) {
        let Some(table) = &self.table else {
            out.push_str(chunk);
            return;
        };
        // Only the held-back tail is copied; a chunk after an empty tail is
        // read where it lies.
        let joined;
        let text = if self.pending.is_empty() {
            chunk
        } else {
            self.pending.push_str(chunk);
            joined = std::mem::take(&mut self.pending);
            joined.as_str()
        };
        let decided = table.redact(text, self.before, at_end, out);
        if decided > 0 {
            self.before = text.as_bytes().get(decided - 1).copied();
        }
        self.pending.clear();
        self.pending.push_str(&text[decided..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn github() -> TokenPattern {
        TokenPattern::new(&TokenSpec {
            label: "github-token",
            prefixes: &["ghp_", "gho_"],
            regex: "gh[po]_[A-Za-z0-9]{36,251}",
            body: "[A-Za-z0-9]",
            standalone: true,
            needs_digit: false,
        })
        .expect("compiles")
    }

    fn openai() -> TokenPattern {
        TokenPattern::new(&TokenSpec {
            label: "openai-key",
            prefixes: &["sk-"],
            regex: "sk-[A-Za-z0-9_-]{20,}",
            body: "[A-Za-z0-9_-]",
            standalone: true,
            needs_digit: true,
        })
        .expect("compiles")
    }

    fn url_password() -> TokenPattern {
        TokenPattern::new(&TokenSpec {
            label: "url-password",
            prefixes: &["://"],
            regex: "://[^\\s/?#@:]*:([^\\s/?#@]+)@",
            body: "[^\\s/?#@]",
            standalone: false,
            needs_digit: false,
        })
        .expect("compiles")
    }

    fn secrets() -> Redactions {
        Redactions::new(
            [
                ("sk-abcdefgh".to_owned(), "[REDACTED:KEY]".to_owned()),
                (
                    "hunter2hunter2".to_owned(),
                    "[REDACTED:PASSWORD]".to_owned(),
                ),
            ],
            Vec::new(),
        )
    }

    fn formats() -> Redactions {
        Redactions::new(
            [(
                "hunter2hunter2".to_owned(),
                "[REDACTED:PASSWORD]".to_owned(),
            )],
            vec![github(), openai(), url_password()],
        )
    }

    const GITHUB: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    const OPENAI: &str = "sk-proj-4f9aB7cD2eF0gH1iJ3kL5mN7";

    /// `text` fed in pieces cut at `cuts` (byte offsets, clamped).
    fn streamed(table: &Arc<Redactions>, text: &str, cuts: &[usize]) -> String {
        let mut boundaries: Vec<usize> = cuts
            .iter()
            .map(|cut| (*cut).min(text.len()))
            .filter(|cut| text.is_char_boundary(*cut))
            .collect();
        boundaries.push(text.len());
        boundaries.sort_unstable();
        let mut replacer = StreamReplacer::new(Some(Arc::clone(table)));
        let mut out = String::new();
        let mut last = 0;
        for cut in boundaries {
            replacer.push(&text[last..cut], &mut out);
            last = cut;
        }
        replacer.finish(&mut out);
        out
    }

    #[test]
    fn needles_are_replaced_whole() {
        let text = "key=sk-abcdefgh pass=hunter2hunter2 end";
        assert_eq!(
            secrets().replace_all(text),
            "key=[REDACTED:KEY] pass=[REDACTED:PASSWORD] end"
        );
    }

    #[test]
    fn tokens_are_replaced_by_their_format() {
        let table = formats();
        assert_eq!(
            table.replace_all(&format!("GH={GITHUB}\nkey: {OPENAI}.\n")),
            "GH=[REDACTED:github-token]\nkey: [REDACTED:openai-key].\n"
        );
        assert_eq!(
            table.replace_all("postgres://app:s3cr3t-pw@db:5432/x https://example.com:8080/a"),
            "postgres://app:[REDACTED:url-password]@db:5432/x https://example.com:8080/a"
        );
    }

    #[test]
    fn look_alikes_stay() {
        let table = formats();
        for text in [
            "pip install sk-learn-0.24.2 and scikit-learn",
            "task-0123456789abcdefghijklmnop is a branch, not a key",
            "sk-abcdefghijklmnopqrstuvwxyz has no digit",
            "xghp_0123456789abcdefghijABCDEFGHIJ012345 is inside a word",
            "ghp_0123456789abcdefghij is too short",
            "ssh://git@example.com/repo https://example.com:8080/path",
        ] {
            assert_eq!(table.replace_all(text), text);
        }
    }

    #[test]
    fn a_token_cut_by_a_redraw_is_replaced_in_every_frame() {
        // A line that prints the token in growing frames: every frame stays
        // in the stream, so a frame holding most of the token is redacted too.
        let text = format!("{}\r{GITHUB}\n", &GITHUB[..24]);
        assert_eq!(
            formats().replace_all(&text),
            "[REDACTED:github-token]\r[REDACTED:github-token]\n"
        );
        // A short frame is too likely an ordinary word.
        assert_eq!(
            formats().replace_all("ghp_0123\rdone\n"),
            "ghp_0123\rdone\n"
        );
    }

    #[test]
    fn a_stream_holds_back_only_what_may_still_be_a_secret() {
        let table = Arc::new(formats());
        let mut replacer = StreamReplacer::new(Some(Arc::clone(&table)));
        let mut out = String::new();
        replacer.push("done. Processing items\n", &mut out);
        assert_eq!(out, "done. Processing items\n", "nothing could continue");
        out.clear();
        replacer.push("token ghp_0123456789", &mut out);
        assert_eq!(out, "token ", "the candidate waits");
        replacer.push("abcdefghijABCDEFGHIJ012345 ok", &mut out);
        assert_eq!(out, "token [REDACTED:github-token] ok");
        out.clear();
        replacer.push("x hunter2", &mut out);
        assert_eq!(out, "x ");
        replacer.push("hunter2 y", &mut out);
        replacer.finish(&mut out);
        assert_eq!(out, "x [REDACTED:PASSWORD] y");
    }

    #[test]
    fn a_standalone_token_after_a_cut_sees_the_byte_before_it() {
        let table = Arc::new(formats());
        let text = format!("x{GITHUB} {GITHUB}");
        for cut in 0..=text.len() {
            assert_eq!(
                streamed(&table, &text, &[cut]),
                format!("x{GITHUB} [REDACTED:github-token]"),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn an_endless_candidate_is_decided_after_a_bounded_hold() {
        let table = Arc::new(formats());
        let mut replacer = StreamReplacer::new(Some(table));
        let mut out = String::new();
        replacer.push("ghp_", &mut out);
        for _ in 0..100 {
            replacer.push("abcdefghij0123456789", &mut out);
        }
        assert!(!out.is_empty(), "the hold is bounded");
        assert!(replacer.pending.len() < MAX_HELD + 64);
    }

    #[test]
    fn bad_formats_are_refused_naming_the_label() {
        let error = TokenPattern::new(&TokenSpec {
            label: "broken",
            prefixes: &["x"],
            regex: "(unclosed",
            body: "[a-z]",
            standalone: true,
            needs_digit: false,
        })
        .expect_err("refused");
        assert!(
            error.to_string().starts_with("token format `broken`"),
            "{error}"
        );
        let error = TokenPattern::new(&TokenSpec {
            label: "empty",
            prefixes: &[],
            regex: "x",
            body: "[a-z]",
            standalone: true,
            needs_digit: false,
        })
        .expect_err("refused");
        assert!(error.to_string().contains("prefixes"), "{error}");
    }

    proptest! {
        #[test]
        fn any_chunking_gives_the_same_text(
            parts in proptest::collection::vec(
                prop_oneof!["[a-z -]{0,12}", Just("sk-abcdefgh".to_owned()), Just("hunter2hunter2".to_owned()), Just("é€".to_owned())],
                0..12,
            ),
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let table = Arc::new(secrets());
            let whole: String = parts.concat();
            let expected = table.replace_all(&whole);
            prop_assert!(!expected.contains("sk-abcdefgh") && !expected.contains("hunter2hunter2"));
            prop_assert_eq!(streamed(&table, &whole, &cuts), expected);
        }

        /// Any text with an embedded token, split anywhere into chunks,
        /// comes out with the token redacted and everything else unchanged.
        #[test]
        fn an_embedded_token_is_redacted_however_the_text_is_cut(
            head in "[a-z .,:\n\r]{0,40}",
            tail in "[a-z .,:\n\r]{0,40}",
            which in 0usize..3,
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let table = Arc::new(formats());
            let (token, redacted) = [
                (GITHUB.to_owned(), "[REDACTED:github-token]".to_owned()),
                (OPENAI.to_owned(), "[REDACTED:openai-key]".to_owned()),
                ("mysql://root:pa55w0rd@db".to_owned(), "mysql://root:[REDACTED:url-password]@db".to_owned()),
            ][which].clone();
            let text = format!("{head} {token} {tail}");
            prop_assert_eq!(streamed(&table, &text, &cuts), format!("{head} {redacted} {tail}"));
        }
    }
}
