//! Collapsing of progress lines that redraw themselves with `\r`.

/// Keeps, of each line, only what follows its last carriage return, the
/// part a terminal would show once a progress bar has finished redrawing.
/// `\r\n` line endings become `\n`; a line that ends in `\r` with no newline
/// yet keeps its last drawing.
pub(crate) fn collapse_carriage_returns(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let line = line.trim_end_matches('\r');
        let shown = line.rsplit('\r').next().unwrap_or(line);
        out.push_str(shown);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::collapse_carriage_returns;
    use proptest::prelude::*;

    #[test]
    fn progress_bars_collapse_to_their_last_state() {
        let text = "start\n 10%\r 50%\r100%\ndone\n";
        assert_eq!(collapse_carriage_returns(text), "start\n100%\ndone\n");
    }

    #[test]
    fn crlf_is_a_plain_newline() {
        assert_eq!(collapse_carriage_returns("a\r\nb\r\n"), "a\nb\n");
    }

    #[test]
    fn an_unfinished_redraw_keeps_its_last_frame() {
        assert_eq!(collapse_carriage_returns("x\r 1/3\r 2/3"), " 2/3");
        assert_eq!(collapse_carriage_returns("x\r 1/3\r"), " 1/3");
    }

    proptest! {
        #[test]
        fn text_without_carriage_returns_is_untouched(text in "[^\r]*") {
            prop_assert_eq!(collapse_carriage_returns(&text), text);
        }

        #[test]
        fn the_result_never_holds_a_carriage_return_or_loses_a_line(text in "(?s).*") {
            let collapsed = collapse_carriage_returns(&text);
            prop_assert!(!collapsed.contains('\r'));
            prop_assert_eq!(collapsed.matches('\n').count(), text.matches('\n').count());
        }
    }
}
