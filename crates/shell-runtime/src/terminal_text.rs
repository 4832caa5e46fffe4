//! Turning a terminal's output stream into plain text as it arrives, for
//! the output file of a tty shell and for every answer: escape sequences
//! (every ECMA-48 family, in their 7-bit and C1 forms) and stray control
//! characters removed, `\r\n` made `\n`, a line redrawn with `\r` kept at
//! its last drawing, backspaces applied. The grammar of sequences is the
//! `vte` parser's (the one `vt100` uses for tty screens); this module only
//! draws the line. Everything that matters across reads (a sequence cut in
//! two, the line being drawn) is state, so the text comes out the same
//! however the stream was cut. Characters are never cut: the input is
//! already decoded text (docs/decisions/0021-one-terminal-text-cleaner.md).

const BACKSPACE: char = '\u{8}';

/// The longest line held back while it may still be redrawn, in bytes:
/// a longer one is written as it stands, so a stream that never ends its
/// line holds bounded memory.
pub(crate) const HELD_LINE_BYTES: usize = 64 * 1024;

/// How many bytes may go into the parser without a single callback
/// before it is restarted inside a fresh OSC string: a string never ended
/// is the one thing vte holds (it buffers OSC text in a `Vec` that only the
/// string's end clears), so this bounds what a stream that opens one and
/// never closes it can make the cleaner hold.
const SILENT_BYTES: usize = 64 * 1024;

/// The most fed to the parser at once, so silence is seen in time.
const FEED_BYTES: usize = 4096;

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

/// Cleans one terminal stream as tty output files are cleaned; see the
/// module documentation.
pub struct TerminalText {
    options: CleanOptions,
    /// The sequence grammar, across reads.
    parser: vte::Parser,
    line: Line,
    /// Bytes fed since the parser last called back (at least).
    silent: usize,
    /// How often the parser was restarted for silence.
    #[cfg(test)]
    restarts: usize,
}

impl std::fmt::Debug for TerminalText {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TerminalText")
            .field("options", &self.options)
            .field("line", &self.line)
            .finish_non_exhaustive()
    }
}

/// The line being drawn, held until its end decides what it shows.
#[derive(Debug)]
struct Line {
    redraws: bool,
    /// Lines longer than this (bytes) are written as they stand.
    held_line_bytes: usize,
    text: String,
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
            parser: vte::Parser::new(),
            line: Line {
                redraws: options.redraws,
                held_line_bytes,
                text: String::new(),
                carriage_return: false,
            },
            silent: 0,
            #[cfg(test)]
            restarts: 0,
        }
    }

    /// Feeds `chunk`; appends to `out` the lines it finished (and a line
    /// held past [`HELD_LINE_BYTES`]).
    pub fn push(&mut self, chunk: &str, out: &mut String) {
        if !self.options.escapes {
            for c in chunk.chars() {
                self.line.control_or_char(c, out);
            }
            return;
        }
        // vte executes a C1 control written as a character (UTF-8
        // `C2 9B`) instead of starting a sequence: the C1 forms of CSI,
        // OSC, DCS, SOS, PM, APC and ST are fed as their 7-bit forms.
        let bytes = chunk.as_bytes();
        let mut start = 0;
        let mut at = 0;
        while let Some(found) = memchr::memchr(0xc2, &bytes[at..]) {
            let lead = at + found;
            match bytes.get(lead + 1) {
                Some(&c1 @ (0x90 | 0x98 | 0x9b..=0x9f)) => {
                    self.feed(&bytes[start..lead], out);
                    self.feed(&[0x1b, c1 - 0x40], out);
                    start = lead + 2;
                    at = start;
                }
                _ => at = lead + 1,
            }
        }
        self.feed(&bytes[start..], out);
    }

    /// Parses `bytes` in pieces, restarting the parser inside a fresh OSC
    /// string once it has been silent for [`SILENT_BYTES`] (see there).
    fn feed(&mut self, bytes: &[u8], out: &mut String) {
        for piece in bytes.chunks(FEED_BYTES) {
            let mut drawing = Drawing {
                line: &mut self.line,
                out,
                called: false,
            };
            self.parser.advance(&mut drawing, piece);
            if drawing.called {
                self.silent = 0;
                continue;
            }
            self.silent += piece.len();
            if self.silent > SILENT_BYTES {
                // Only a string (or a sequence far too long to be one)
                // is this quiet; its text is never shown, so a fresh
                // string stands for it with nothing held.
                self.parser = vte::Parser::new();
                self.parser.advance(&mut drawing, b"\x1b]");
                self.silent = 0;
                #[cfg(test)]
                {
                    self.restarts += 1;
                }
            }
        }
    }

    /// Ends the stream: the line being drawn is appended as it stands (an
    /// unfinished escape sequence is dropped).
    pub fn finish(&mut self, out: &mut String) {
        out.push_str(&self.line.text);
        self.line.text.clear();
        self.line.text.shrink_to_fit();
        self.line.carriage_return = false;
        self.parser = vte::Parser::new();
        self.silent = 0;
    }
}

impl Line {
    /// A character outside any sequence: a control this cleaner draws
    /// with, or one that shows.
    fn control_or_char(&mut self, c: char, out: &mut String) {
        match c {
            '\r' if self.redraws => self.carriage_return = true,
            '\n' => {
                out.push_str(&self.text);
                out.push('\n');
                self.text.clear();
                self.carriage_return = false;
                if self.text.capacity() > 4096 {
                    self.text.shrink_to_fit();
                }
            }
            BACKSPACE if self.redraws => {
                // At the start of a redraw the cursor is at column 0:
                // nothing to take back.
                if !self.carriage_return {
                    self.text.pop();
                }
            }
            _ => self.print(c, out),
        }
    }

    /// Adds a character that shows to the line being drawn.
    fn print(&mut self, c: char, out: &mut String) {
        if self.carriage_return {
            self.text.clear();
            self.carriage_return = false;
        }
        if self.text.len() + c.len_utf8() > self.held_line_bytes {
            out.push_str(&self.text);
            self.text.clear();
        }
        self.text.push(c);
    }
}

/// What `vte` calls back while one chunk is parsed: characters and the
/// controls outside sequences go to the line; sequences (the default
/// no-op callbacks) leave nothing.
struct Drawing<'a> {
    line: &'a mut Line,
    out: &'a mut String,
    /// The parser called back at all: it is not inside a string.
    called: bool,
}

impl vte::Perform for Drawing<'_> {
    fn print(&mut self, c: char) {
        self.called = true;
        // vte prints DEL; a terminal shows nothing for it.
        if c != '\u{7f}' {
            self.line.print(c, self.out);
        }
    }

    fn execute(&mut self, byte: u8) {
        self.called = true;
        match byte {
            // `\r` and backspace are kept as they came when redraws are
            // not applied; every other control shows nothing.
            b'\n' | b'\t' | b'\r' | 0x08 => self.line.control_or_char(char::from(byte), self.out),
            _ => {}
        }
    }

    // A sequence ended: it leaves nothing, but the parser spoke.
    fn csi_dispatch(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
        self.called = true;
    }

    fn esc_dispatch(&mut self, _: &[u8], _: bool, _: u8) {
        self.called = true;
    }

    fn osc_dispatch(&mut self, _: &[&[u8]], _: bool) {
        self.called = true;
    }

    fn hook(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
        self.called = true;
    }

    fn unhook(&mut self) {
        self.called = true;
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
        assert!(cleaner.line.text.len() <= HELD_LINE_BYTES);
        cleaner.finish(&mut out);
        assert_eq!(out.len(), HELD_LINE_BYTES + 10);
    }

    /// vte's grammar (DEC's state machine, what a terminal does): a byte
    /// that cannot be in a sequence is ignored inside it, controls inside
    /// one still act, a string runs to its end.
    #[test]
    fn a_broken_sequence_follows_the_terminal_grammar() {
        assert_eq!(clean("\u{1b}[12é\n"), "\n");
        assert_eq!(clean("\u{1b}[1\n2m\n"), "\n\n");
        assert_eq!(clean("\u{1b}]title never ended"), "");
        assert_eq!(clean("\u{1b}]t\u{1b}[31mx"), "x");
    }

    /// A string never ended holds nothing past the silence bound: the
    /// parser restarts inside a fresh one, which ends as the first would.
    #[test]
    fn a_string_never_ended_is_not_held() {
        let mut cleaner = TerminalText::new();
        let mut out = String::new();
        cleaner.push("before\u{1b}]0;", &mut out);
        let body = "t".repeat(1 << 10);
        for _ in 0..1024 {
            cleaner.push(&body, &mut out);
        }
        assert!(cleaner.restarts >= 8, "{}", cleaner.restarts);
        cleaner.push("\u{7}after\n", &mut out);
        cleaner.finish(&mut out);
        assert_eq!(out, "beforeafter\n");
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
