//! Replacement of given strings in a stream, even when one is cut across reads.

/// Replaces each `needle` with its replacement as text streams through. The
/// end of each chunk that could still begin a needle is held back until the
/// next chunk (or the end) decides it, so a secret split by a pipe read is
/// still caught.
#[derive(Debug, Clone, Default)]
pub struct StreamReplacer {
    /// `(needle, replacement)`, longest needle first so a needle containing
    /// another is replaced whole.
    pairs: Vec<(String, String)>,
    longest: usize,
    pending: String,
}

impl StreamReplacer {
    /// A replacer for `pairs` (`(needle, replacement)`); empty needles are ignored.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut pairs: Vec<(String, String)> = pairs
            .into_iter()
            .filter(|(needle, _)| !needle.is_empty())
            .collect();
        pairs.sort_by_key(|(needle, _)| std::cmp::Reverse(needle.len()));
        let longest = pairs.first().map_or(0, |(needle, _)| needle.len());
        Self {
            pairs,
            longest,
            pending: String::new(),
        }
    }

    /// True when there is nothing to replace (text passes through untouched).
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Feeds `chunk`; appends to `out` the text that is decided.
    pub fn push(&mut self, chunk: &str, out: &mut String) {
        if self.pairs.is_empty() {
            out.push_str(chunk);
            return;
        }
        self.pending.push_str(chunk);
        // A needle starting at or after `safe` might still be incomplete.
        let mut safe = self.pending.len().saturating_sub(self.longest - 1);
        while !self.pending.is_char_boundary(safe) {
            safe -= 1;
        }
        let emitted = self.replace_until(safe, out);
        self.pending.drain(..emitted);
    }

    /// Ends the stream: the held-back text is decided and appended.
    pub fn finish(&mut self, out: &mut String) {
        let end = self.pending.len();
        let emitted = self.replace_until(end, out);
        self.pending.drain(..emitted);
        out.push_str(&self.pending);
        self.pending.clear();
    }

    /// Emits `pending` up to `limit`, replacing every needle that starts
    /// before it; returns how far it got (past `limit` when a needle straddles it).
    fn replace_until(&self, limit: usize, out: &mut String) -> usize {
        let text = self.pending.as_str();
        let mut at = 0;
        while at < limit {
            let found = self
                .pairs
                .iter()
                .filter_map(|(needle, replacement)| {
                    text[at..]
                        .find(needle.as_str())
                        .map(|offset| (at + offset, needle.len(), replacement))
                })
                .min_by_key(|(start, len, _)| (*start, std::cmp::Reverse(*len)));
            match found {
                Some((start, len, replacement)) if start < limit => {
                    out.push_str(&text[at..start]);
                    out.push_str(replacement);
                    at = start + len;
                }
                _ => {
                    out.push_str(&text[at..limit]);
                    at = limit;
                }
            }
        }
        at
    }
}

/// Replaces every needle in a whole text at once.
pub fn replace_all(text: &str, replacer: &StreamReplacer) -> String {
    let mut replacer = StreamReplacer::new(replacer.pairs.iter().cloned());
    let mut out = String::with_capacity(text.len());
    replacer.push(text, &mut out);
    replacer.finish(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn secrets() -> StreamReplacer {
        StreamReplacer::new([
            ("sk-abcdefgh".to_owned(), "[REDACTED:KEY]".to_owned()),
            (
                "hunter2hunter2".to_owned(),
                "[REDACTED:PASSWORD]".to_owned(),
            ),
        ])
    }

    #[test]
    fn needles_are_replaced_whole() {
        let text = "key=sk-abcdefgh pass=hunter2hunter2 end";
        assert_eq!(
            replace_all(text, &secrets()),
            "key=[REDACTED:KEY] pass=[REDACTED:PASSWORD] end"
        );
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
            let whole: String = parts.concat();
            let expected = replace_all(&whole, &secrets());
            prop_assert!(!expected.contains("sk-abcdefgh") && !expected.contains("hunter2hunter2"));
            let mut boundaries: Vec<usize> = cuts.into_iter().map(|cut| cut.min(whole.len())).filter(|cut| whole.is_char_boundary(*cut)).collect();
            boundaries.push(whole.len());
            boundaries.sort_unstable();
            let mut replacer = secrets();
            let mut out = String::new();
            let mut last = 0;
            for cut in boundaries {
                replacer.push(&whole[last..cut], &mut out);
                last = cut;
            }
            replacer.finish(&mut out);
            prop_assert_eq!(out, expected);
        }
    }
}
