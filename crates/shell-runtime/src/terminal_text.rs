//! Turning a terminal's output stream into plain text as it arrives, for
//! the output file of a tty shell: escape sequences removed, `\r\n` made
//! `\n`, a line redrawn with `\r` kept at its last drawing, backspaces
//! applied. Everything that matters across reads (a sequence cut in two,
//! the line being drawn) is state, so the text comes out the same however
//! the stream was cut. Characters are never cut: the input is already
//! decoded text.

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';
const BACKSPACE: char = '\u{8}';

/// The longest line held back while it may still be redrawn, in bytes:
/// a longer one is written as it stands, so a stream that never ends its
/// line holds bounded memory.
pub(crate) const HELD_LINE_BYTES: usize = 64 * 1024;

/// Where the cleaner is in the escape-sequence grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// Plain text.
    #[default]
    Ground,
    /// After ESC.
    Escape,
    /// After ESC and intermediates (`ESC ( B`): up to the final byte.
    EscapeIntermediate,
    /// In a control sequence (`ESC [`): up to the final byte in `@..~`.
    Csi,
    /// In a string (OSC ends at BEL or ST; DCS, SOS, PM and APC at ST).
    String {
        /// BEL ends it too (OSC).
        bel_ends: bool,
    },
    /// ESC inside a string: `\` ends it, anything else starts a new escape.
    StringEscape,
}

/// Cleans one terminal stream; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct TerminalText {
    state: State,
    /// The line being drawn, held until its end decides what it shows.
    line: String,
    /// A `\r` came last in the line: the next character starts it over,
    /// unless it is `\n` (or another `\r`).
    carriage_return: bool,
}

impl TerminalText {
    /// A cleaner at the start of a stream.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Feeds `chunk`; appends to `out` the lines it finished (and a line
    /// held past [`HELD_LINE_BYTES`]).
    pub(crate) fn push(&mut self, chunk: &str, out: &mut String) {
        for c in chunk.chars() {
            self.step(c, out);
        }
    }

    /// Ends the stream: the line being drawn is appended as it stands (an
    /// unfinished escape sequence is dropped).
    pub(crate) fn finish(&mut self, out: &mut String) {
        out.push_str(&self.line);
        self.line.clear();
        self.line.shrink_to_fit();
        self.carriage_return = false;
        self.state = State::Ground;
    }

    fn step(&mut self, c: char, out: &mut String) {
        match self.state {
            State::Ground => self.text(c, out),
            State::Escape => {
                self.state = match c {
                    '[' => State::Csi,
                    ']' => State::String { bel_ends: true },
                    'P' | 'X' | '^' | '_' => State::String { bel_ends: false },
                    ESC => State::Escape,
                    ' '..='/' => State::EscapeIntermediate,
                    // A two-byte escape (`ESC 7`, `ESC =`, `ESC M`, ...).
                    '0'..='~' => State::Ground,
                    // Not an escape after all: the character stands.
                    _ => {
                        self.state = State::Ground;
                        self.text(c, out);
                        return;
                    }
                };
            }
            State::EscapeIntermediate => match c {
                ' '..='/' => {}
                '0'..='~' => self.state = State::Ground,
                ESC => self.state = State::Escape,
                _ => {
                    self.state = State::Ground;
                    self.text(c, out);
                }
            },
            State::Csi => match c {
                // Parameters and intermediates.
                ' '..='?' => {}
                '@'..='~' => self.state = State::Ground,
                ESC => self.state = State::Escape,
                // A broken sequence: it ends, the character stands.
                _ => {
                    self.state = State::Ground;
                    self.text(c, out);
                }
            },
            State::String { bel_ends } => match c {
                BEL if bel_ends => self.state = State::Ground,
                ESC => self.state = State::StringEscape,
                _ => {}
            },
            State::StringEscape => {
                if c == '\\' {
                    self.state = State::Ground;
                } else {
                    // ST never came: the string ends, and this ESC starts
                    // another sequence.
                    self.state = State::Escape;
                    self.step(c, out);
                }
            }
        }
    }

    fn text(&mut self, c: char, out: &mut String) {
        match c {
            ESC => self.state = State::Escape,
            '\r' => self.carriage_return = true,
            '\n' => {
                out.push_str(&self.line);
                out.push('\n');
                self.line.clear();
                self.carriage_return = false;
                if self.line.capacity() > 4096 {
                    self.line.shrink_to_fit();
                }
            }
            BACKSPACE => {
                // At the start of a redraw the cursor is at column 0:
                // nothing to take back.
                if !self.carriage_return {
                    self.line.pop();
                }
            }
            _ => {
                if self.carriage_return {
                    self.line.clear();
                    self.carriage_return = false;
                }
                if self.line.len() + c.len_utf8() > HELD_LINE_BYTES {
                    out.push_str(&self.line);
                    self.line.clear();
                }
                self.line.push(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{HELD_LINE_BYTES, TerminalText};
    use proptest::prelude::*;

    fn clean(text: &str) -> String {
        let mut cleaner = TerminalText::new();
        let mut out = String::new();
        cleaner.push(text, &mut out);
        cleaner.finish(&mut out);
        out
    }

    fn clean_in_pieces(text: &str, cuts: &[usize]) -> String {
        let mut cleaner = TerminalText::new();
        let mut out = String::new();
        let mut start = 0;
        let mut cuts: Vec<usize> = cuts
            .iter()
            .map(|cut| (*cut).min(text.len()))
            .filter(|cut| text.is_char_boundary(*cut))
            .collect();
        cuts.sort_unstable();
        for cut in cuts {
            cleaner.push(&text[start..cut], &mut out);
            start = cut;
        }
        cleaner.push(&text[start..], &mut out);
        cleaner.finish(&mut out);
        out
    }

    /// What carriage-return collapsing shows (the rule exec-tools applies
    /// on read): of each line, what follows its last `\r`.
    fn collapsed(text: &str) -> String {
        text.split('\n')
            .map(|line| {
                let line = line.trim_end_matches('\r');
                line.rsplit('\r').next().unwrap_or(line).to_owned()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn colours_titles_links_and_modes_are_removed() {
        assert_eq!(clean("\u{1b}[1;31merror\u{1b}[0m: x\n"), "error: x\n");
        assert_eq!(clean("\u{1b}]0;title\u{7}ok"), "ok");
        assert_eq!(
            clean("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\"),
            "link"
        );
        assert_eq!(clean("\u{1b}[?2004h\u{1b}[?1049l$ "), "$ ");
        assert_eq!(clean("\u{1b}(B\u{1b}=\u{1b}7a\u{1b}8"), "a");
        assert_eq!(clean("\u{1b}Pq#0;2;0;0;0\u{1b}\\b"), "b");
        assert_eq!(clean("\u{1b}_app\u{1b}\\\u{1b}^pm\u{1b}\\c"), "c");
    }

    #[test]
    fn progress_redraws_keep_their_last_drawing() {
        assert_eq!(
            clean("start\r\n 10%\r 50%\r100%\r\ndone\r\n"),
            "start\n100%\ndone\n"
        );
        assert_eq!(clean("x\r 1/3\r 2/3"), " 2/3");
        assert_eq!(clean("x\r 1/3\r"), " 1/3");
        assert_eq!(
            clean("\u{1b}[2K\r[##  ] 50%\u{1b}[2K\r[####] 100%\n"),
            "[####] 100%\n"
        );
    }

    #[test]
    fn backspace_takes_back_the_last_character() {
        assert_eq!(clean("abc\u{8} \u{8}\n"), "ab\n");
        assert_eq!(clean("|\u{8}/\u{8}-\u{8}done\n"), "done\n");
        assert_eq!(clean("\u{8}\u{8}x"), "x");
    }

    #[test]
    fn a_sequence_cut_by_a_read_is_still_removed() {
        let text = "a\u{1b}[38;5;196mb\u{1b}]0;t\u{1b}\\c\r\nd";
        for cut in 0..=text.len() {
            assert_eq!(clean_in_pieces(text, &[cut]), "abc\nd", "cut at {cut}");
        }
    }

    #[test]
    fn a_long_line_is_written_once_it_outgrows_the_bound() {
        let mut cleaner = TerminalText::new();
        let mut out = String::new();
        cleaner.push(&"x".repeat(HELD_LINE_BYTES + 10), &mut out);
        assert_eq!(out.len(), HELD_LINE_BYTES);
        assert!(cleaner.line.len() <= HELD_LINE_BYTES);
        cleaner.finish(&mut out);
        assert_eq!(out.len(), HELD_LINE_BYTES + 10);
    }

    #[test]
    fn a_broken_sequence_ends_and_its_text_stands() {
        assert_eq!(clean("\u{1b}[12é\n"), "é\n");
        assert_eq!(clean("\u{1b}]title never ended"), "");
        assert_eq!(clean("\u{1b}]t\u{1b}[31mx"), "x");
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_text(
            text in "(?s)(\u{1b}|\u{1b}\\[|\u{1b}\\]|\u{1b}P|\u{1b}\\\\|\u{7}|\r|\n|\u{8}|[0-9;m?A-Za-z]|é|.){0,200}",
            cuts in proptest::collection::vec(0usize..800, 0..6),
        ) {
            prop_assert_eq!(clean_in_pieces(&text, &cuts), clean(&text));
        }

        #[test]
        fn the_text_never_holds_an_escape_or_a_carriage_return(text in "(?s).{0,400}") {
            let cleaned = clean(&text);
            prop_assert!(!cleaned.contains(['\u{1b}', '\r', '\u{8}']), "{:?}", cleaned);
        }

        #[test]
        fn text_without_escapes_carriage_returns_or_backspaces_is_untouched(
            text in "[^\u{1b}\r\u{8}]{0,400}",
        ) {
            prop_assert_eq!(clean(&text), text);
        }

        #[test]
        fn without_escapes_or_backspaces_redraws_collapse_as_on_read(
            text in "[^\u{1b}\u{8}]{0,400}",
        ) {
            prop_assert_eq!(clean(&text), collapsed(&text));
        }

        #[test]
        fn lines_outside_sequences_are_never_lost(text in "[^\u{1b}]{0,400}") {
            prop_assert_eq!(clean(&text).matches('\n').count(), text.matches('\n').count());
        }
    }
}
