//! Shaping output for a model: head and tail of a long text.

/// How far from a nominal cut a line boundary is looked for: a head or tail
/// ends or starts mid-line only when no line ends this close to the cut.
pub(crate) const LINE_SNAP: usize = 1000;

/// Where a text too long for its budget is cut: `..head_end` and
/// `tail_start..` (byte offsets at character boundaries) are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    /// End of the head.
    pub(crate) head_end: usize,
    /// Start of the tail; never before `head_end`.
    pub(crate) tail_start: usize,
    /// Characters between the two: exactly those not shown.
    pub(crate) omitted: usize,
}

impl Cut {
    /// A cut keeping `..head_end` and `tail_start..` of `text`, with its count.
    pub(crate) fn new(text: &str, head_end: usize, tail_start: usize) -> Self {
        let tail_start = tail_start.max(head_end);
        Self {
            head_end,
            tail_start,
            omitted: text
                .get(head_end..tail_start)
                .map_or(0, |middle| middle.chars().count()),
        }
    }
}

/// Plans keeping the first and last characters of `text` within `budget`
/// characters, or `None` when it fits whole. The head ends after a newline
/// and the tail starts after one when a newline lies within [`LINE_SNAP`]
/// characters of the nominal cut, so no part of a line is shown as if it
/// were the whole line; what the head gives up goes to the tail.
pub(crate) fn plan_cut(text: &str, budget: usize) -> Option<Cut> {
    let total = text.chars().count();
    if total <= budget {
        return None;
    }
    // The head gets 40%: the command's first lines matter, its errors come last.
    let nominal_head = budget * 2 / 5;
    let mut head_end = byte_at(text, 0, nominal_head);
    let mut head_chars = nominal_head;
    if let Some((given_up, (at, _))) = text[..head_end]
        .char_indices()
        .rev()
        .take(LINE_SNAP)
        .enumerate()
        .find(|(_, (_, c))| *c == '\n')
    {
        head_end = at + 1;
        head_chars -= given_up;
    }
    let tail_chars = budget - head_chars;
    // `total > budget`, so the tail starts after the head.
    let nominal_tail = total - tail_chars;
    let mut tail_start = byte_at(text, head_end, nominal_tail - head_chars);
    if !text[..tail_start].ends_with('\n')
        && let Some((at, _)) = text[tail_start..]
            .char_indices()
            .take(LINE_SNAP)
            .find(|(_, c)| *c == '\n')
    {
        tail_start += at + 1;
    }
    Some(Cut {
        head_end,
        tail_start,
        omitted: total - head_chars - text[tail_start..].chars().count(),
    })
}

/// The byte offset `chars` characters after byte offset `from`.
fn byte_at(text: &str, from: usize, chars: usize) -> usize {
    text[from..]
        .char_indices()
        .nth(chars)
        .map_or(text.len(), |(at, _)| from + at)
}

/// Writes `text` cut as `cut` says: the head, one line that `marker` writes,
/// the tail.
pub(crate) fn assemble(text: &str, cut: Cut, marker: &str) -> String {
    let head = &text[..cut.head_end];
    let tail = &text[cut.tail_start..];
    let mut out = String::with_capacity(head.len() + marker.len() + tail.len() + 2);
    out.push_str(head);
    if !head.is_empty() && !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(marker);
    out.push('\n');
    out.push_str(tail);
    out
}

/// Keeps the first and last characters of `text` so that it fits in
/// `budget` characters (see [`plan_cut`]), with one line between them that
/// `marker` writes from the number of characters left out. Returns the text
/// and whether it was cut. Answers use [`plan_cut`] directly (their marker
/// also counts what buffers dropped); this is its plain form, kept for the
/// truncation properties the tests check.
#[cfg(test)]
pub(crate) fn head_and_tail(
    text: &str,
    budget: usize,
    marker: impl Fn(usize) -> String,
) -> (String, bool) {
    match plan_cut(text, budget) {
        None => (text.to_owned(), false),
        Some(cut) => (assemble(text, cut, &marker(cut.omitted)), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_last_line_survives_truncation() {
        let text: String = (0..10_000).map(|n| format!("line {n}\n")).collect();
        let (cut, truncated) = head_and_tail(&text, 1000, |n| {
            format!("[Output truncated: {n} characters omitted]")
        });
        assert!(truncated);
        assert!(cut.starts_with("line 0\n"));
        assert!(cut.ends_with("line 9999\n"));
        assert!(cut.contains("[Output truncated: "));
    }

    /// The last `n` characters of `text`.
    fn last_chars(text: &str, n: usize) -> &str {
        let count = text.chars().count();
        let start = text
            .char_indices()
            .nth(count.saturating_sub(n))
            .map_or(text.len(), |(at, _)| at);
        &text[start..]
    }

    /// Text of lines of any length (up to 1500 characters, so some lines
    /// end farther than `LINE_SNAP` from a cut), of any characters but `<`,
    /// which the test's marker uses.
    fn lines_strategy() -> impl Strategy<Value = String> {
        proptest::collection::vec(("(?s)[^<\n]{0,1500}", any::<bool>()), 0..8).prop_map(|lines| {
            lines
                .into_iter()
                .map(|(line, newline)| if newline { line + "\n" } else { line })
                .collect()
        })
    }

    #[test]
    fn a_line_ending_just_past_the_cut_is_not_shown_in_part() {
        let text: String = (1..=10_000).map(|n| format!("{n}\n")).collect();
        let (cut, _) = head_and_tail(&text, 29_999, |n| format!("<<{n}>>"));
        let (head, rest) = cut.split_once("<<").expect("marker");
        let tail = rest.split_once(">>\n").expect("marker end").1;
        assert!(head.ends_with("\n2621\n"), "{}", last_chars(head, 20));
        assert!(text.contains(&format!("\n{tail}")));
    }

    proptest! {
        #[test]
        fn truncation_is_exact_and_keeps_whole_lines(
            text in lines_strategy(),
            budget in 0usize..4000,
        ) {
            let total = text.chars().count();
            let (cut, truncated) = head_and_tail(&text, budget, |n| format!("<<{n}>>"));
            prop_assert_eq!(truncated, total > budget);
            if !truncated {
                prop_assert_eq!(cut, text);
                return Ok(());
            }
            let (before, rest) = cut.split_once("<<").expect("one marker");
            let (count, tail) = rest.split_once(">>\n").expect("the marker's own line");
            let omitted: usize = count.parse().expect("a count");
            prop_assert!(text.ends_with(tail), "the tail is the end of the text");
            let tail_chars = tail.chars().count();
            // The head is `before`, or `before` less the newline added to
            // put the marker on a line of its own: the count tells which.
            let head = if before.chars().count() + tail_chars + omitted == total {
                before
            } else {
                before.strip_suffix('\n').expect("an added newline")
            };
            prop_assert!(text.starts_with(head), "the head is the start of the text");
            let head_chars = head.chars().count();
            prop_assert_eq!(head_chars + omitted + tail_chars, total, "exact count");
            prop_assert!(head_chars + tail_chars <= budget, "within the budget");
            prop_assert!(head_chars + tail_chars + LINE_SNAP >= budget, "the budget is used");
            prop_assert!(
                head.is_empty() || head.ends_with('\n') || !last_chars(head, LINE_SNAP).contains('\n'),
                "the head ends a line when one ends near the cut: {:?}",
                last_chars(head, 20)
            );
            let tail_start = text.len() - tail.len();
            let after_break = text[..tail_start].ends_with('\n');
            let line_nearby = tail.chars().take(LINE_SNAP).any(|c| c == '\n');
            prop_assert!(
                tail.is_empty() || after_break || !line_nearby,
                "the tail starts a line when one starts near the cut"
            );
        }

    }
}
