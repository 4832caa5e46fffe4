//! Redaction of output as it streams: given secret values, and tokens in
//! the well-known formats of the `secret-formats` crate, replaced even when
//! a pipe read cuts one in two.
//!
//! One [`Redactions`] table is built per server and shared (`Arc`) by every
//! stream, so the secret values are held once. A [`StreamReplacer`] keeps
//! only the undecided end of its stream: a tail that may still grow into a
//! secret value or a token. Whether a token starts at a prefix is decided
//! by `secret_formats::Matcher`, the one matcher environment scrubbing uses
//! too; this module adds only what a stream needs (holding a candidate back,
//! redrawn frames).

use std::sync::{Arc, OnceLock};

use secret_formats::{BadFormat, Matcher, TokenFormat};

/// A candidate whose run of token characters is cut off by `\r` (a redraw
/// printing the token in growing frames) is a token once it has this many
/// characters after its prefix: every frame stays in the stream (output
/// files, answers that keep redraws), and most of a token is a secret too.
/// Shorter frames are ordinary words more often than not.
const MIN_REDRAWN: usize = 12;

/// A token format, compiled on first use: most streams never hold most
/// formats' prefixes, and compiling every format takes milliseconds of
/// every server start.
#[derive(Debug, Clone)]
pub struct TokenPattern {
    format: &'static TokenFormat,
    replacement: String,
    compiled: Compiled,
}

/// Where a pattern's compiled matcher lives.
#[derive(Debug, Clone)]
enum Compiled {
    /// `secret_formats::FORMATS[index]`: compiled once per process and
    /// shared with scrubbing by value (and a warm-up thread, if any).
    Shared(usize),
    /// Any other format: compiled in its own cell.
    Own(OnceLock<Option<Matcher>>),
}

impl TokenPattern {
    /// Compiles `format` now, refusing one that does not compile.
    pub fn new(format: &'static TokenFormat) -> Result<Self, BadFormat> {
        let pattern = Self::lazy(format)?;
        if let Compiled::Own(cell) = &pattern.compiled {
            let _ = cell.set(Some(Matcher::new(format)?));
        }
        Ok(pattern)
    }

    /// `format` compiled the first time one of its prefixes is met: for
    /// formats known to compile (constants a test compiles). One that does
    /// not compile then matches nothing, with a warning.
    pub fn lazy(format: &'static TokenFormat) -> Result<Self, BadFormat> {
        if format.prefixes.is_empty() || format.prefixes.iter().any(|prefix| prefix.is_empty()) {
            return Err(BadFormat {
                id: format.id.to_owned(),
                message: "every format needs non-empty prefixes".to_owned(),
            });
        }
        Ok(Self {
            format,
            replacement: format!("[REDACTED:{}]", format.id),
            compiled: Compiled::Own(OnceLock::new()),
        })
    }

    /// `secret_formats::FORMATS[index]`, compiled on first use into the
    /// process-wide matcher `secret_formats::matcher` keeps (see
    /// `secret_formats::compile_all` to compile them ahead); `None` past
    /// the end of the list.
    pub fn well_known(index: usize) -> Option<Self> {
        let format = secret_formats::FORMATS.get(index)?;
        Some(Self {
            format,
            replacement: format!("[REDACTED:{}]", format.id),
            compiled: Compiled::Shared(index),
        })
    }

    fn compiled(&self) -> Option<&Matcher> {
        match &self.compiled {
            Compiled::Shared(index) => secret_formats::matcher(*index),
            Compiled::Own(cell) => cell
                .get_or_init(|| {
                    Matcher::new(self.format)
                        .map_err(|error| {
                            tracing::warn!(%error, "a token format does not compile; it matches nothing");
                        })
                        .ok()
                })
                .as_ref(),
        }
    }

    /// Whether a token may start after `before` (compiles the pattern).
    fn may_follow(&self, before: Option<u8>) -> bool {
        self.compiled()
            .is_some_and(|matcher| matcher.may_follow(before))
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
        let Some(matcher) = self.compiled() else {
            return Candidate::Nothing;
        };
        if !matcher.may_follow(before) {
            return Candidate::Nothing;
        }
        let bytes = text.as_bytes();
        let body_start = at + prefix_len;
        let run_end = matcher.run_end(bytes, body_start);
        if run_end == bytes.len() && !at_end && run_end - at < self.format.max_len {
            return Candidate::Open;
        }
        if let Some(found) = matcher.match_at(text, at, prefix_len, before) {
            return Candidate::Token {
                start: found.start,
                end: found.end,
                replacement: &self.replacement,
            };
        }
        let redrawn = !matcher.grouped()
            && bytes.get(run_end) == Some(&b'\r')
            && run_end - body_start >= MIN_REDRAWN
            && (!self.format.needs_digit
                || bytes[body_start..run_end].iter().any(u8::is_ascii_digit));
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
    /// `start..end` is replaced (the whole token, or its secret group).
    Token {
        start: usize,
        end: usize,
        replacement: &'a str,
    },
}

/// Bytes from rare to common in program output, roughly: each prefix is
/// looked for by its rarest byte (its anchor), with `memchr`, so text
/// without any anchor byte costs a few vectorised passes and nothing more.
const RARITY: &[u8] =
    b"_:~^`|\\{}[]<>@#$%&*+=!?;\"'-.QJZXKVBPYGFWMUCLDRHSNIOATE0123456789qjzxkvbpygfwmucldrhsnioate/, ";

fn rarity(byte: u8) -> usize {
    RARITY
        .iter()
        .position(|known| *known == byte)
        .unwrap_or(RARITY.len())
}

/// Where secret values and token prefixes (the needles) may start: the
/// anchor byte of each, searched for in groups of up to three bytes (one
/// `memchr` pass per group). Needles are known by their index; the caller
/// holds their text, so a secret value is not copied here.
#[derive(Debug, Default)]
struct Anchors {
    groups: Vec<Vec<u8>>,
    /// For each anchor byte: `(needle, offset of the anchor in it)`.
    by_byte: Vec<Vec<(usize, usize)>>,
    /// The largest anchor offset: a needle starts at most this far before
    /// its anchor.
    farthest: usize,
}

impl Anchors {
    /// Chooses few anchor bytes (fewer `memchr` passes): repeatedly the
    /// byte that covers the most needles not covered yet, among the three
    /// rarest bytes of each, the rarer on a tie.
    fn new(needles: &[&[u8]]) -> Self {
        let choices: Vec<Vec<u8>> = needles
            .iter()
            .map(|needle| {
                let mut bytes = needle.to_vec();
                bytes.sort_by_key(|byte| rarity(*byte));
                bytes.dedup();
                bytes.truncate(3);
                bytes
            })
            .collect();
        let mut anchor_of: Vec<Option<u8>> = vec![None; needles.len()];
        let mut chosen: Vec<u8> = Vec::new();
        let uncovered = |anchor_of: &[Option<u8>], byte: u8| {
            anchor_of
                .iter()
                .zip(&choices)
                .filter(|(anchor, bytes)| anchor.is_none() && bytes.contains(&byte))
                .count()
        };
        while let Some(byte) = (0..=255u8)
            .filter(|byte| uncovered(&anchor_of, *byte) > 0)
            .max_by_key(|byte| {
                (
                    uncovered(&anchor_of, *byte),
                    std::cmp::Reverse(rarity(*byte)),
                )
            })
        {
            chosen.push(byte);
            for (anchor, bytes) in anchor_of.iter_mut().zip(&choices) {
                if anchor.is_none() && bytes.contains(&byte) {
                    *anchor = Some(byte);
                }
            }
        }
        let mut by_byte: Vec<Vec<(usize, usize)>> = vec![Vec::new(); 256];
        let mut farthest = 0;
        for (index, (needle, anchor)) in needles.iter().zip(&anchor_of).enumerate() {
            let Some(anchor) = *anchor else { continue };
            if let Some(offset) = needle.iter().position(|byte| *byte == anchor) {
                by_byte[usize::from(anchor)].push((index, offset));
                farthest = farthest.max(offset);
            }
        }
        Self {
            groups: chosen.chunks(3).map(<[u8]>::to_vec).collect(),
            by_byte,
            farthest,
        }
    }

    /// The first byte of `group` at or after `from`.
    fn find(group: &[u8], bytes: &[u8], from: usize) -> Option<usize> {
        let rest = bytes.get(from..)?;
        let found = match *group {
            [a] => memchr::memchr(a, rest),
            [a, b] => memchr::memchr2(a, b, rest),
            [a, b, c] => memchr::memchr3(a, b, c, rest),
            _ => None,
        };
        found.map(|at| from + at)
    }

    /// The earliest needle occurring at or after `from`, as `(start,
    /// index)`; of several starting there, the lowest index. `needle`
    /// gives a needle's bytes; `hits` caches each group's next anchor
    /// across calls on one text.
    fn next<'a>(
        &self,
        bytes: &[u8],
        from: usize,
        hits: &mut [Option<usize>],
        needle: impl Fn(usize) -> &'a [u8],
    ) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for (group, hit) in self.groups.iter().zip(hits.iter_mut()) {
            let mut anchor = match *hit {
                Some(at) if at >= from => Some(at),
                Some(_) | None => Self::find(group, bytes, from),
            };
            *hit = anchor.or(Some(usize::MAX));
            while let Some(at) = anchor.filter(|at| *at != usize::MAX) {
                // A later anchor can only give an earlier start this close.
                if best.is_some_and(|(best, _)| at > best + self.farthest) {
                    break;
                }
                for &(index, offset) in &self.by_byte[usize::from(bytes[at])] {
                    let Some(start) = at.checked_sub(offset).filter(|start| *start >= from) else {
                        continue;
                    };
                    if best.is_none_or(|best| (start, index) < best)
                        && bytes[start..].starts_with(needle(index))
                    {
                        best = Some((start, index));
                    }
                }
                anchor = Self::find(group, bytes, at + 1);
            }
        }
        best
    }
}

/// Everything output redaction replaces: secret values (each with its
/// replacement) and token formats. Built once, shared by every stream.
#[derive(Debug, Default)]
pub struct Redactions {
    /// `(value, replacement)`, longest value first, so a value containing
    /// another is replaced whole.
    literals: Vec<(String, String)>,
    patterns: Vec<TokenPattern>,
    /// Every prefix of every pattern, as `(pattern, prefix)`.
    prefixes: Vec<(usize, usize)>,
    /// Where the needles may start: the values (indices `0..literals.len()`),
    /// then the prefixes.
    anchors: Anchors,
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
        let prefixes: Vec<(usize, usize)> = patterns
            .iter()
            .enumerate()
            .flat_map(|(pattern, spec)| {
                (0..spec.format.prefixes.len()).map(move |prefix| (pattern, prefix))
            })
            .collect();
        let needles: Vec<&[u8]> = literals
            .iter()
            .map(|(value, _)| value.as_bytes())
            .chain(
                prefixes
                    .iter()
                    .map(|&(pattern, prefix)| patterns[pattern].format.prefixes[prefix].as_bytes()),
            )
            .collect();
        let anchors = Anchors::new(&needles);
        let longest = needles.iter().map(|needle| needle.len()).max().unwrap_or(0);
        Self {
            literals,
            patterns,
            prefixes,
            anchors,
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
        self.redact(text, None, true, &mut |piece| out.push_str(piece));
        out
    }

    /// The token (or the reason to wait) at `at`, where some prefix occurs.
    fn candidate(&self, text: &str, at: usize, before: Option<u8>, at_end: bool) -> Candidate<'_> {
        for pattern in &self.patterns {
            for prefix in pattern.format.prefixes {
                if !text[at..].starts_with(prefix) {
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
                // The prefix first: `may_follow` compiles the pattern.
                pattern.format.prefixes.iter().any(|prefix| begins(prefix))
                    && pattern.may_follow(previous)
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
    fn redact(
        &self,
        text: &str,
        before: Option<u8>,
        at_end: bool,
        emit: &mut impl FnMut(&str),
    ) -> usize {
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
        // Each anchor group's next hit, found lazily.
        let mut hits: Vec<Option<usize>> = vec![None; self.anchors.groups.len()];
        while let Some((start, index)) =
            self.anchors
                .next(text.as_bytes(), search.max(at), &mut hits, |index| {
                    self.needle(index)
                })
        {
            if start >= tail {
                break;
            }
            let (from, to, replacement) =
                if let Some((value, replacement)) = self.literals.get(index) {
                    (start, start + value.len(), replacement.as_str())
                } else {
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
                };
            if from > at {
                emit(&text[at..from]);
            }
            emit(replacement);
            at = to;
            search = to;
            if at > tail {
                tail = tail_from(at);
            }
        }
        let tail = tail.max(at);
        if tail > at {
            emit(&text[at..tail]);
        }
        tail
    }

    /// Needle `index`: a value, then the prefixes in order.
    fn needle(&self, index: usize) -> &[u8] {
        match self.literals.get(index) {
            Some((value, _)) => value.as_bytes(),
            None => self
                .prefixes
                .get(index - self.literals.len())
                .map_or(&[], |&(pattern, prefix)| {
                    self.patterns[pattern].format.prefixes[prefix].as_bytes()
                }),
        }
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
        self.feed(chunk, false, &mut |piece| out.push_str(piece));
    }

    /// Ends the stream: the held-back text is decided and appended.
    pub fn finish(&mut self, out: &mut String) {
        self.feed("", true, &mut |piece| out.push_str(piece));
    }

    /// Feeds `chunk` and hands the decided text to `emit`, in pieces (parts
    /// of `chunk` and replacements), without copying it first.
    pub fn push_to(&mut self, chunk: &str, mut emit: impl FnMut(&str)) {
        self.feed(chunk, false, &mut emit);
    }

    /// Ends the stream, handing the held-back text to `emit`.
    pub fn finish_to(&mut self, mut emit: impl FnMut(&str)) {
        self.feed("", true, &mut emit);
    }

    fn feed(&mut self, chunk: &str, at_end: bool, emit: &mut impl FnMut(&str)) {
        let Some(table) = &self.table else {
            if !chunk.is_empty() {
                emit(chunk);
            }
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
        let decided = table.redact(text, self.before, at_end, emit);
        if decided > 0 {
            self.before = text.as_bytes().get(decided - 1).copied();
        }
        self.pending.clear();
        self.pending.push_str(&text[decided..]);
    }
}

/// `text` fed to a fresh [`StreamReplacer`] in pieces cut at `cuts` (byte
/// offsets, clamped; those inside a character are skipped): what a reader
/// that got the text in those reads keeps. For the property tests of this
/// crate and of those that build its tables.
#[doc(hidden)]
pub fn replace_in_pieces(table: &Arc<Redactions>, text: &str, cuts: &[usize]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    static GITHUB_FORMAT: TokenFormat = TokenFormat {
        id: "github-token",
        prefixes: &["ghp_", "gho_"],
        regex: "gh[po]_[A-Za-z0-9]{36,251}",
        body: "[A-Za-z0-9]",
        edge: "[A-Za-z0-9]",
        ..TokenFormat::BASE
    };

    static OPENAI_FORMAT: TokenFormat = TokenFormat {
        id: "openai-key",
        prefixes: &["sk-"],
        regex: "sk-[A-Za-z0-9_-]{20,}",
        needs_digit: true,
        ..TokenFormat::BASE
    };

    static URL_PASSWORD_FORMAT: TokenFormat = TokenFormat {
        id: "url-password",
        prefixes: &["://"],
        regex: "://[^\\s/?#@:]*:([^\\s/?#@]+)@",
        body: "[^\\s/?#@]",
        edge: "",
        ..TokenFormat::BASE
    };

    fn github() -> TokenPattern {
        TokenPattern::new(&GITHUB_FORMAT).expect("compiles")
    }

    fn openai() -> TokenPattern {
        TokenPattern::new(&OPENAI_FORMAT).expect("compiles")
    }

    fn url_password() -> TokenPattern {
        TokenPattern::new(&URL_PASSWORD_FORMAT).expect("compiles")
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

    fn streamed(table: &Arc<Redactions>, text: &str, cuts: &[usize]) -> String {
        replace_in_pieces(table, text, cuts)
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
        assert!(replacer.pending.len() < GITHUB_FORMAT.max_len + 64);
    }

    #[test]
    fn few_anchor_bytes_cover_many_prefixes() {
        let prefixes = [
            "sk-ant-",
            "sk-",
            "ghp_",
            "gho_",
            "github_pat_",
            "glpat-",
            "xoxb-",
            "sk_live_",
            "AKIA",
            "ASIA",
            "AIza",
            "hf_",
            "npm_",
            "pypi-AgEIcHlwaS5vcmc",
            "SG.",
            "://",
        ];
        let needles: Vec<&[u8]> = prefixes.iter().map(|prefix| prefix.as_bytes()).collect();
        let anchors = Anchors::new(&needles);
        assert_eq!(anchors.groups.concat(), b"_-I:.", "{anchors:?}");
        let text = b"x AIzaQ SG.y ://z";
        let mut hits = vec![None; anchors.groups.len()];
        let needle = |index: usize| needles[index];
        assert_eq!(anchors.next(text, 0, &mut hits, needle), Some((2, 10)));
        assert_eq!(anchors.next(text, 3, &mut hits, needle), Some((8, 14)));
        assert_eq!(anchors.next(text, 9, &mut hits, needle), Some((13, 15)));
        assert_eq!(anchors.next(text, 14, &mut hits, needle), None);
    }

    #[test]
    fn bad_formats_are_refused_naming_the_label() {
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
        let error = TokenPattern::new(&BROKEN).expect_err("refused");
        assert!(
            error.to_string().starts_with("token format `broken`"),
            "{error}"
        );
        let error = TokenPattern::lazy(&EMPTY).expect_err("refused");
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
