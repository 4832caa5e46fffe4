//! Shaping output for a model: ANSI codes, progress redraws, head and tail.

/// Removes ANSI escape sequences (CSI such as colours and cursor moves, OSC
/// such as titles and links, and two-byte escapes).
pub fn strip_ansi(text: &str) -> String {
    if !text.contains('\u{1b}') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('[') => {
                chars.next();
                // Parameters and intermediates, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                chars.next();
                // Ends at BEL or ST (ESC \).
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            Some(_) => {
                chars.next();
            }
            None => {}
        }
    }
    out
}

/// Keeps the first and last characters of `text` so that it fits in
/// `budget` characters, with one line between them that `marker` writes
/// from the number of characters left out. Returns the text and whether it
/// was cut.
pub fn head_and_tail(
    text: &str,
    budget: usize,
    marker: impl Fn(usize) -> String,
) -> (String, bool) {
    let total = text.chars().count();
    if total <= budget {
        return (text.to_owned(), false);
    }
    // The head gets 40%: the command's first lines matter, its errors come last.
    let head_chars = budget * 2 / 5;
    let tail_chars = budget - head_chars;
    let head_end = text
        .char_indices()
        .nth(head_chars)
        .map_or(text.len(), |(at, _)| at);
    let tail_start = text
        .char_indices()
        .nth(total - tail_chars)
        .map_or(text.len(), |(at, _)| at);
    let omitted = total - head_chars - tail_chars;
    let mut out = String::with_capacity(head_end + (text.len() - tail_start) + 100);
    out.push_str(&text[..head_end]);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&marker(omitted));
    out.push('\n');
    out.push_str(&text[tail_start..]);
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn colours_and_titles_are_removed() {
        assert_eq!(strip_ansi("\u{1b}[1;31merror\u{1b}[0m: x"), "error: x");
        assert_eq!(strip_ansi("\u{1b}]0;title\u{7}ok"), "ok");
        assert_eq!(
            strip_ansi("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\"),
            "link"
        );
        assert_eq!(strip_ansi("plain"), "plain");
    }

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

    proptest! {
        #[test]
        fn truncation_respects_the_budget(text in "(?s).{0,400}", budget in 10usize..300) {
            let (cut, truncated) = head_and_tail(&text, budget, |_| "[Output truncated]".to_owned());
            let marker_line = "[Output truncated]\n".chars().count() + 1;
            prop_assert!(cut.chars().count() <= budget + marker_line);
            prop_assert_eq!(truncated, text.chars().count() > budget);
            if !truncated {
                prop_assert_eq!(cut, text);
            }
        }

        #[test]
        fn stripping_never_grows_text_and_keeps_plain_text(text in "[^\u{1b}]*") {
            prop_assert_eq!(strip_ansi(&text), text);
        }
    }
}
