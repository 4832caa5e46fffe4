//! Rendering text for an approval question so the person sees what will
//! run: a terminal or a chat window must not be able to hide, reorder or
//! overwrite part of it. Every character that would not show as itself
//! (controls, escape sequences, bidi overrides and isolates, zero-width and
//! other format characters, combining marks, unusual spaces) is written as
//! a visible escape, line breaks as `⏎`, long runs of blanks as a count,
//! and the field is capped with the cut stated.

use std::fmt::Write as _;

use unicode_general_category::{GeneralCategory, get_general_category};

/// The most characters of a command a question shows.
pub(crate) const COMMAND_CAP: usize = 2_000;

/// The most characters of any other field (directory, rule, reason).
pub(crate) const FIELD_CAP: usize = 500;

/// Runs of blanks (spaces and tabs) longer than this are shown as a count:
/// a screenful of spaces could push the rest of a line out of sight.
const BLANK_RUN: usize = 3;

/// What a field held besides plain printable text.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    /// The field as it may be shown: one line, nothing invisible.
    pub(crate) text: String,
    /// Characters that do not show as themselves were escaped.
    pub(crate) escaped: bool,
    /// The text had line breaks (shown as `⏎`).
    pub(crate) lines: usize,
    /// Distinct non-ASCII characters that were shown as themselves (letters
    /// that may look like ASCII ones), in order of first appearance.
    pub(crate) non_ascii: Vec<char>,
    /// Characters left out at the cap.
    pub(crate) cut: usize,
}

/// Whether `c` would not show as itself, or could change how the text
/// around it shows: it is then written as an escape.
fn hidden(c: char) -> bool {
    if c == ' ' {
        return false;
    }
    // Invisible letters and blanks that are not in a format category.
    if matches!(
        c,
        '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' | '\u{2800}' | '\u{180E}' | '\u{034F}'
    ) {
        return true;
    }
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::SpaceSeparator
            | GeneralCategory::PrivateUse
            | GeneralCategory::Surrogate
            | GeneralCategory::Unassigned
            | GeneralCategory::NonspacingMark
            | GeneralCategory::EnclosingMark
            | GeneralCategory::SpacingMark
    )
}

/// The visible escape for a hidden character: `\xNN` for ASCII controls
/// (`\x1b` for ESC), `\r` and `\t` by name, `<U+NNNN>` for the rest.
fn escape(c: char, out: &mut String) {
    match c {
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c.is_ascii() => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "<U+{:04X}>", u32::from(c));
        }
    }
}

/// Renders `text` as one line for a question, at most about `cap`
/// characters (the cut note comes on top, and an escape is never split).
pub(crate) fn show(text: &str, cap: usize) -> Shown {
    let mut shown = Shown::default();
    let mut out = String::new();
    let mut width = 0usize;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let mut piece = String::new();
        let mut taken = 1;
        if c == ' ' || c == '\t' {
            let run = chars[i..]
                .iter()
                .take_while(|c| **c == ' ' || **c == '\t')
                .count();
            if run > BLANK_RUN {
                let _ = write!(piece, " <{run} blanks> ");
                taken = run;
            } else if c == '\t' {
                shown.escaped = true;
                escape(c, &mut piece);
            } else {
                piece.push(' ');
            }
        } else if c == '\n' {
            shown.lines += 1;
            piece.push('⏎');
        } else if hidden(c) {
            shown.escaped = true;
            escape(c, &mut piece);
        } else {
            if !c.is_ascii() && !shown.non_ascii.contains(&c) {
                shown.non_ascii.push(c);
            }
            piece.push(c);
        }
        let piece_width = piece.chars().count();
        if width + piece_width > cap {
            shown.cut = chars.len() - i;
            break;
        }
        width += piece_width;
        out.push_str(&piece);
        i += taken;
    }
    if shown.cut > 0 {
        let _ = write!(out, " … [cut: {} more characters]", shown.cut);
    }
    if shown.lines > 0 {
        shown.lines += 1;
    }
    shown.text = out;
    shown
}

/// The warnings a question adds under its fields for what `field` (named
/// `name`) held: several lines, hidden characters, look-alike letters.
pub(crate) fn warnings(name: &str, field: &Shown) -> Vec<String> {
    let mut said = Vec::new();
    if field.lines > 1 {
        said.push(format!(
            "Warning: the {name} has {} lines; each line break is shown as ⏎ and every line runs",
            field.lines
        ));
    }
    if field.escaped {
        said.push(format!(
            "Warning: the {name} contains characters that do not show as themselves (control, escape, bidi or zero-width); they are shown as \\xNN, \\r, \\t or <U+NNNN>"
        ));
    }
    if !field.non_ascii.is_empty() {
        let listed: Vec<String> = field
            .non_ascii
            .iter()
            .take(8)
            .map(|c| format!("{c} U+{:04X}", u32::from(*c)))
            .collect();
        let more = if field.non_ascii.len() > 8 {
            ", …"
        } else {
            ""
        };
        said.push(format!(
            "Warning: the {name} contains non-ASCII characters ({}{more}); some look like ASCII letters",
            listed.join(", ")
        ));
    }
    said
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Characters no rendered field may hold.
    pub(crate) fn forbidden(c: char) -> bool {
        let code = u32::from(c);
        code < 0x20
            || (0x7f..=0x9f).contains(&code)
            || (0x202a..=0x202e).contains(&code)
            || (0x2066..=0x2069).contains(&code)
            || (0x200b..=0x200f).contains(&code)
            || code == 0x2060
            || code == 0xfeff
            || code == 0x061c
    }

    fn bounded(shown: &Shown, cap: usize) -> bool {
        // The cap, the cut note, and one escape that may straddle it.
        shown.text.chars().count() <= cap + 48
    }

    /// Any text: any characters (proptest's own strings leave out
    /// controls), with the red team's favourites mixed in.
    pub(crate) fn any_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![any::<char>(), (0..HOSTILE.len()).prop_map(|i| HOSTILE[i])],
            0..300,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    /// Characters the red team hides things with, and plain ones.
    const HOSTILE: [char; 13] = [
        '\n', '\r', '\u{1b}', '\u{202e}', '\u{200d}', ' ', '\t', 'a', 'о', '\u{85}', '\u{7f}',
        '\u{feff}', '\u{2066}',
    ];

    proptest! {
        #[test]
        fn any_text_renders_to_one_visible_bounded_line(text in any_text()) {
            let shown = show(&text, COMMAND_CAP);
            prop_assert!(!shown.text.chars().any(forbidden), "{:?}", shown.text);
            prop_assert!(!shown.text.contains('\n'));
            prop_assert!(bounded(&shown, COMMAND_CAP));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn long_hostile_text_stays_bounded(
            picks in proptest::collection::vec(0..HOSTILE.len(), 0..3_000)
        ) {
            let text: String = picks.into_iter().map(|i| HOSTILE[i]).collect();
            let shown = show(&text, COMMAND_CAP);
            prop_assert!(!shown.text.chars().any(forbidden), "{:?}", shown.text);
            prop_assert!(!shown.text.contains('\n'));
            prop_assert!(bounded(&shown, COMMAND_CAP));
        }
    }

    #[test]
    fn plain_commands_show_as_typed() {
        for command in [
            "ls -la",
            "rm -rf \"$X\"/*",
            "git commit -m 'a b'",
            "a  b   c",
        ] {
            let shown = show(command, COMMAND_CAP);
            assert_eq!(shown.text, command);
            assert_eq!(
                shown,
                Shown {
                    text: command.to_owned(),
                    ..Shown::default()
                }
            );
            assert!(warnings("command", &shown).is_empty());
        }
    }

    #[test]
    fn the_cut_is_stated_and_escapes_are_never_split() {
        let shown = show(&"x".repeat(2_500), COMMAND_CAP);
        assert!(
            shown.text.ends_with(" … [cut: 500 more characters]"),
            "{}",
            shown.text
        );
        assert_eq!(shown.cut, 500);
        let shown = show(&format!("{}\u{1b}tail", "x".repeat(9)), 10);
        assert_eq!(shown.text, "xxxxxxxxx … [cut: 5 more characters]");
    }

    /// The red team's misleading questions: what a terminal or chat window
    /// would have shown, and what the question must show instead.
    #[test]
    fn misleading_commands_show_what_runs() {
        let padded = format!("echo safe{}; rm -rf ~", " ".repeat(300));
        let cases: [(&str, &str, &[&str]); 7] = [
            // A newline hides a second command below the first.
            ("echo hello\nrm -rf ~", "echo hello⏎rm -rf ~", &["2 lines"]),
            // `\r` returns to the line start and overwrites what came before.
            (
                "rm -rf ~ \r echo hi      ",
                "rm -rf ~ \\r echo hi <6 blanks> ",
                &["do not show"],
            ),
            // An ANSI sequence clears the line and prints something else.
            (
                "rm -rf ~\u{1b}[2K\u{1b}[1Gecho hi",
                "rm -rf ~\\x1b[2K\\x1b[1Gecho hi",
                &["do not show"],
            ),
            // A right-to-left override reorders `rm -rf /` on screen.
            (
                "echo \u{202e}/ fr- mr\u{202c}; rm -rf /",
                "echo <U+202E>/ fr- mr<U+202C>; rm -rf /",
                &["do not show"],
            ),
            // 300 spaces push the tail off screen.
            (&padded, "echo safe <300 blanks> ; rm -rf ~", &[]),
            // Zero-width joiners inside `rm` defeat a reader's eye.
            (
                "r\u{200d}m -rf \u{2060}~",
                "r<U+200D>m -rf <U+2060>~",
                &["do not show"],
            ),
            // A Cyrillic `о` in a path looks like a Latin one.
            (
                "rm -rf /h\u{43e}me/me",
                "rm -rf /h\u{43e}me/me",
                &["non-ASCII", "о U+043E"],
            ),
        ];
        for (command, expected, said) in cases {
            let shown = show(command, COMMAND_CAP);
            assert_eq!(shown.text, expected, "{command:?}");
            let warned = warnings("command", &shown).join("\n");
            for needle in said {
                assert!(warned.contains(needle), "{command:?}: {warned}");
            }
        }
    }

    #[test]
    fn c1_controls_and_unusual_spaces_are_escaped() {
        let shown = show("a\u{85}b\u{a0}c\u{2028}d\u{e000}e\u{301}", COMMAND_CAP);
        assert_eq!(shown.text, "a<U+0085>b<U+00A0>c<U+2028>d<U+E000>e<U+0301>");
        assert!(shown.escaped);
        assert_eq!(show("a\u{7f}\u{0}b", 50).text, "a\\x7f\\x00b");
    }
}
