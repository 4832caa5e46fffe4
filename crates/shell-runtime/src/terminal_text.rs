//! Turning a terminal's output stream into plain text as it arrives, for
//! the output file of a tty shell and for every answer: escape sequences
//! (every ECMA-48 family, in their 7-bit and C1 forms) and stray control
//! characters removed, `\r\n` made `\n`, a line redrawn with `\r` kept at
//! its last drawing, backspaces applied. Everything that matters across
//! reads (a sequence cut in two, the line being drawn) is state, so the
//! text comes out the same however the stream was cut. Characters are
//! never cut: the input is already decoded text.

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';
const BACKSPACE: char = '\u{8}';
/// The C1 forms of CSI, OSC, the strings ended by ST (DCS, SOS, PM, APC),
/// and ST itself.
const C1_CSI: char = '\u{9b}';
const C1_OSC: char = '\u{9d}';
const C1_STRINGS: [char; 4] = ['\u{90}', '\u{98}', '\u{9e}', '\u{9f}'];
const C1_ST: char = '\u{9c}';

/// The longest line held back while it may still be redrawn, in bytes:
/// a longer one is written as it stands, so a stream that never ends its
/// line holds bounded memory.
pub(crate) const HELD_LINE_BYTES: usize = 64 * 1024;

/// What a cleaner removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanOptions {
    /// Escape sequences of every ECMA-48 family (CSI; OSC, DCS, SOS, PM and
    /// APC strings; `ESC ( B` and other escapes with intermediates; two-byte
    /// escapes; their C1 forms) and control characters other than tab and
    /// newline.
    pub escapes: bool,
    /// Redraws: of a line redrawn with `\r`, its last drawing (`\r\n` is
    /// `\n`); backspaces take back the character before them.
    pub redraws: bool,
}

impl CleanOptions {
    /// Everything removed, as tty output files are cleaned.
    pub const ALL: Self = Self {
        escapes: true,
        redraws: true,
    };
}

/// `text` cleaned as `options` say, as one whole stream (no line is too
/// long to be redrawn). Text with nothing to clean is returned as it is.
pub fn clean_text(text: &str, options: CleanOptions) -> String {
    let attention = |byte: &u8| match *byte {
        b'\n' | b'\t' => false,
        b'\r' | 0x08 => options.redraws,
        // 0xC2 leads the two-byte form of every C1 control.
        0x00..=0x1f | 0x7f | 0xc2 => options.escapes,
        _ => false,
    };
    if !text.as_bytes().iter().any(attention) {
        return text.to_owned();
    }
    let mut cleaner = TerminalText::with_options(options, usize::MAX);
    let mut out = String::with_capacity(text.len());
    cleaner.push(text, &mut out);
    cleaner.finish(&mut out);
    out
}

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

/// Cleans one terminal stream as tty output files are cleaned; see the
/// module documentation.
#[derive(Debug)]
pub struct TerminalText {
    options: CleanOptions,
    /// Lines longer than this (bytes) are written as they stand.
    held_line_bytes: usize,
    state: State,
    /// The line being drawn, held until its end decides what it shows.
    line: String,
    /// A `\r` came last in the line: the next character starts it over,
    /// unless it is `\n` (or another `\r`).
    carriage_return: bool,
}

impl Default for TerminalText {
    fn default() -> Self {
        Self::new()
    }
}

impl TerminalText {
    /// A cleaner at the start of a stream, removing everything, holding
    /// lines up to [`HELD_LINE_BYTES`].
    pub fn new() -> Self {
        Self::with_options(CleanOptions::ALL, HELD_LINE_BYTES)
    }

    /// A cleaner removing what `options` say, holding lines up to
    /// `held_line_bytes`.
    pub(crate) fn with_options(options: CleanOptions, held_line_bytes: usize) -> Self {
        Self {
            options,
            held_line_bytes,
            state: State::Ground,
            line: String::new(),
            carriage_return: false,
        }
    }

    /// Feeds `chunk`; appends to `out` the lines it finished (and a line
    /// held past [`HELD_LINE_BYTES`]).
    pub fn push(&mut self, chunk: &str, out: &mut String) {
        for c in chunk.chars() {
            self.step(c, out);
        }
    }

    /// Ends the stream: the line being drawn is appended as it stands (an
    /// unfinished escape sequence is dropped).
    pub fn finish(&mut self, out: &mut String) {
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
                C1_ST => self.state = State::Ground,
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
        let CleanOptions { escapes, redraws } = self.options;
        match c {
            ESC if escapes => self.state = State::Escape,
            C1_CSI if escapes => self.state = State::Csi,
            C1_OSC if escapes => self.state = State::String { bel_ends: true },
            c if escapes && C1_STRINGS.contains(&c) => {
                self.state = State::String { bel_ends: false };
            }
            '\r' if redraws => self.carriage_return = true,
            '\n' => {
                out.push_str(&self.line);
                out.push('\n');
                self.line.clear();
                self.carriage_return = false;
                if self.line.capacity() > 4096 {
                    self.line.shrink_to_fit();
                }
            }
            BACKSPACE if redraws => {
                // At the start of a redraw the cursor is at column 0:
                // nothing to take back.
                if !self.carriage_return {
                    self.line.pop();
                }
            }
            // `\r` and backspace are redraws, kept when those are.
            '\r' | BACKSPACE => self.print(c, out),
            // Stray controls (BEL, SO, SI, NUL, DEL, the other C1 controls)
            // show nothing on a terminal.
            c if escapes && c != '\t' && c.is_control() => {}
            _ => self.print(c, out),
        }
    }

    /// Adds a character that shows to the line being drawn.
    fn print(&mut self, c: char, out: &mut String) {
        if self.carriage_return {
            self.line.clear();
            self.carriage_return = false;
        }
        if self.line.len() + c.len_utf8() > self.held_line_bytes {
            out.push_str(&self.line);
            self.line.clear();
        }
        self.line.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::{CleanOptions, HELD_LINE_BYTES, TerminalText, clean_text};
    use proptest::prelude::*;
    use test_support::clean_in_pieces;
    use test_support::escapes::{ESCAPE_FAMILIES, ESCAPE_HEAVY_TEXT};

    fn clean(text: &str) -> String {
        let mut cleaner = TerminalText::new();
        let mut out = String::new();
        cleaner.push(text, &mut out);
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
    fn every_sequence_family_leaves_no_stray_character() {
        for case in ESCAPE_FAMILIES {
            assert_eq!(clean(case.text), case.cleaned, "{}", case.family);
            assert_eq!(
                clean_text(case.text, CleanOptions::ALL),
                case.cleaned,
                "{} (whole text)",
                case.family
            );
            // Cut anywhere, the stream cleans the same.
            for cut in 0..=case.text.len() {
                assert_eq!(
                    clean_in_pieces(case.text, &[cut]),
                    case.cleaned,
                    "{} cut at {cut}",
                    case.family
                );
            }
        }
    }

    #[test]
    fn what_is_not_asked_for_stays() {
        let text = "a\u{1b}(Bb\u{7}\r c\u{8}d\n";
        let only = |escapes, redraws| clean_text(text, CleanOptions { escapes, redraws });
        assert_eq!(only(false, false), text);
        assert_eq!(only(true, false), "ab\r c\u{8}d\n");
        assert_eq!(only(false, true), " d\n");
        assert_eq!(only(true, true), " d\n");
        assert_eq!(
            clean_text("plain\ttext\n", CleanOptions::ALL),
            "plain\ttext\n"
        );
    }

    #[test]
    fn a_whole_text_redraws_a_line_of_any_length() {
        let long = format!("{}\rshort\n", "x".repeat(HELD_LINE_BYTES + 10));
        assert_eq!(clean_text(&long, CleanOptions::ALL), "short\n");
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
            text in ESCAPE_HEAVY_TEXT,
            cuts in proptest::collection::vec(0usize..800, 0..6),
        ) {
            prop_assert_eq!(clean_in_pieces(&text, &cuts), clean(&text));
        }

        #[test]
        fn the_shortcut_for_text_with_nothing_to_clean_changes_nothing(
            text in prop_oneof![ESCAPE_HEAVY_TEXT, "(?s).{0,400}"],
            escapes in any::<bool>(),
            redraws in any::<bool>(),
        ) {
            let options = CleanOptions { escapes, redraws };
            let mut cleaner = TerminalText::with_options(options, usize::MAX);
            let mut slow = String::new();
            cleaner.push(&text, &mut slow);
            cleaner.finish(&mut slow);
            prop_assert_eq!(clean_text(&text, options), slow);
        }

        #[test]
        fn the_whole_text_cleans_as_the_stream_does(text in ESCAPE_HEAVY_TEXT) {
            prop_assert_eq!(clean_text(&text, CleanOptions::ALL), clean(&text));
        }

        #[test]
        fn the_text_never_holds_a_control_but_tab_and_newline(
            text in prop_oneof![ESCAPE_HEAVY_TEXT, "(?s).{0,400}"],
        ) {
            let cleaned = clean(&text);
            prop_assert!(
                !cleaned.chars().any(|c| c.is_control() && c != '\t' && c != '\n'),
                "{:?}",
                cleaned
            );
        }

        #[test]
        fn text_without_controls_is_untouched(
            text in "[^\u{0}-\u{8}\u{b}-\u{1f}\u{7f}-\u{9f}]{0,400}",
        ) {
            prop_assert_eq!(clean(&text), text.clone());
            prop_assert_eq!(clean_text(&text, CleanOptions::ALL), text);
        }

        #[test]
        fn without_other_controls_redraws_collapse_as_on_read(
            text in "[^\u{0}-\u{9}\u{b}\u{c}\u{e}-\u{1f}\u{7f}-\u{9f}]{0,400}",
        ) {
            prop_assert_eq!(clean(&text), collapsed(&text));
        }

        #[test]
        fn lines_outside_sequences_are_never_lost(text in "[^\u{1b}\u{80}-\u{9f}]{0,400}") {
            prop_assert_eq!(clean(&text).matches('\n').count(), text.matches('\n').count());
        }
    }
}
