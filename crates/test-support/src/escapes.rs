//! One table of terminal escape sequences, by ECMA-48 family, and what
//! cleaned text they leave: the streaming cleaner of tty output files
//! (shell-runtime) and the cleaning of answers (exec-tools) are both
//! checked against it, so the two cannot drift apart.

/// One sequence family: a name, a text holding it, and that text cleaned
/// (escape sequences and stray controls removed, redraws applied).
#[derive(Debug, Clone, Copy)]
pub struct EscapeCase {
    /// The family, for the failure message.
    pub family: &'static str,
    /// Text holding sequences of that family.
    pub text: &'static str,
    /// What cleaning leaves.
    pub cleaned: &'static str,
}

const fn case(family: &'static str, text: &'static str, cleaned: &'static str) -> EscapeCase {
    EscapeCase {
        family,
        text,
        cleaned,
    }
}

/// Every family of sequence a program may write, each with its text.
pub const ESCAPE_FAMILIES: &[EscapeCase] = &[
    case(
        "CSI colours",
        "\u{1b}[1;31merror\u{1b}[0m: x\n",
        "error: x\n",
    ),
    case("CSI private modes", "\u{1b}[?2004h\u{1b}[?1049l$ ", "$ "),
    case("CSI with intermediates", "a\u{1b}[2 qb\u{1b}[!pc", "abc"),
    case("CSI > and = parameters", "\u{1b}[>4;1m\u{1b}[=5ua", "a"),
    case("OSC title ended by BEL", "\u{1b}]0;title\u{7}ok", "ok"),
    case(
        "OSC 8 link ended by ST",
        "\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\",
        "link",
    ),
    case("DCS (sixel)", "\u{1b}Pq#0;2;0;0;0\u{1b}\\b", "b"),
    case(
        "APC (kitty graphics)",
        "a\u{1b}_Gf=100,a=T;iVBORw0KGgo=\u{1b}\\b",
        "ab",
    ),
    case("PM", "\u{1b}^private message\u{1b}\\c", "c"),
    case("SOS", "\u{1b}Xstart of string\u{1b}\\d", "d"),
    case("nF: ESC ( B (tput sgr0)", "a\u{1b}(Bb\n", "ab\n"),
    case("nF: ESC ) 0", "a\u{1b})0b", "ab"),
    case(
        "nF: ESC # 8, ESC % G, ESC SP F",
        "\u{1b}#8\u{1b}%G\u{1b} Fe",
        "e",
    ),
    case(
        "tput sgr0 after colour",
        "\u{1b}[31mred\u{1b}(B\u{1b}[m plain\n",
        "red plain\n",
    ),
    case("Fp: ESC = and ESC >", "\u{1b}=a\u{1b}>b", "ab"),
    case("Fp: ESC 7 and ESC 8", "\u{1b}7a\u{1b}8", "a"),
    case(
        "Fe: ESC M, ESC D, ESC E, ESC H",
        "\u{1b}Ma\u{1b}D\u{1b}E\u{1b}Hb",
        "ab",
    ),
    case("Fs: ESC c (reset)", "\u{1b}ca", "a"),
    case("C1 CSI", "\u{9b}31mred\u{9b}0m", "red"),
    case("C1 OSC ended by C1 ST", "\u{9d}0;title\u{9c}ok", "ok"),
    case("C1 OSC ended by BEL", "\u{9d}0;title\u{7}ok", "ok"),
    case(
        "C1 DCS, PM, APC, SOS",
        "\u{90}q\u{9c}\u{9e}pm\u{9c}\u{9f}apc\u{9c}\u{98}sos\u{9c}x",
        "x",
    ),
    case(
        "other C1 controls",
        "a\u{84}\u{85}\u{88}\u{8d}\u{8e}\u{8f}b",
        "ab",
    ),
    case(
        "stray C0 controls",
        "a\u{7}\u{e}\u{f}\u{0}\u{1}\u{7f}b\tc\n",
        "ab\tc\n",
    ),
    case(
        "CAN and SUB cancel a sequence",
        "\u{1b}[31\u{18}a\u{1b}[1\u{1a}b",
        "ab",
    ),
    case("ESC in a string starts over", "\u{1b}]t\u{1b}[31mx", "x"),
    case("ESC ESC", "\u{1b}\u{1b}[0mok", "ok"),
    case("an escape never finished", "ok\u{1b}[", "ok"),
    case("a string never finished", "ok\u{1b}]title", "ok"),
    case(
        "redraws",
        "start\r\n 10%\r 50%\r100%\r\ndone\r\n",
        "start\n100%\ndone\n",
    ),
    case(
        "redraw by erase line",
        "\u{1b}[2K\r[##  ] 50%\u{1b}[2K\r[####] 100%\n",
        "[####] 100%\n",
    ),
    case(
        "backspaces",
        "abc\u{8} \u{8}\n|\u{8}/\u{8}done\n",
        "ab\ndone\n",
    ),
    case(
        "plain text",
        "plain é ✓ \u{a0}text\n",
        "plain é ✓ \u{a0}text\n",
    ),
];

/// A proptest regex of text rich in sequence openers, terminators and
/// controls, for properties of a cleaner.
pub const ESCAPE_HEAVY_TEXT: &str = "(?s)(\u{1b}|\u{1b}\\[|\u{1b}\\]|\u{1b}P|\u{1b}_|\u{1b}\\(|\u{1b}\\\\|\u{9b}|\u{9d}|\u{9c}|\u{90}|\u{7}|\u{18}|\r|\n|\u{8}|[ -/]|[0-9;m?A-Za-z]|é|.){0,200}";
