//! Words as the analysis sees them: the literal value where it is known,
//! the raw text always, and whether unquoted glob characters remain.

use brush_parser::ParserOptions;
use brush_parser::word::{Parameter, ParameterExpr, TildeExpr, WordPiece};

use super::lexical::code_substitutions;
use super::watchdog::{self, Deadline};
use crate::glob::has_glob;

/// One shell word after quote removal and the expansions the analysis can
/// do statically (`~`, `$HOME`, variables assigned literally earlier).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The value, when no part of it depends on run time.
    pub(crate) text: Option<String>,
    /// The word as written.
    pub(crate) raw: String,
    /// Whether unquoted `*`, `?` or `[` remain (the value is a pattern).
    pub(crate) glob: bool,
    /// Byte range in the top-level command, when the word comes from it.
    pub(crate) span: Option<(usize, usize)>,
}

impl Word {
    /// A word whose value is known.
    pub(crate) fn literal(text: &str) -> Self {
        Self {
            text: Some(text.to_owned()),
            raw: text.to_owned(),
            glob: false,
            span: None,
        }
    }

    /// The value if known, else the raw text: for display and regexes.
    pub(crate) fn display(&self) -> &str {
        self.text.as_deref().unwrap_or(&self.raw)
    }

    /// The known value.
    pub(crate) fn value(&self) -> Option<&str> {
        self.text.as_deref()
    }
}

/// What expanding a word needs from its surroundings.
pub(crate) trait Expansion {
    /// The value of `$name` if known statically.
    fn variable(&self, name: &str) -> Option<String>;
    /// The home directory (`~`) as the analysis names it.
    fn home(&self) -> String;
    /// Called with the text of each command substitution found in a word.
    fn substitution(&mut self, script: &str);
}

/// Characters that make a word more than its literal text.
fn is_plain(raw: &str) -> bool {
    !raw.contains(['$', '`', '\'', '"', '\\', '~'])
}

/// Expands `raw` as far as is statically possible.
pub(crate) fn expand(
    raw: &str,
    options: &ParserOptions,
    deadline: Deadline,
    env: &mut dyn Expansion,
) -> Word {
    if is_plain(raw) {
        return Word {
            text: Some(raw.to_owned()),
            raw: raw.to_owned(),
            glob: has_glob(raw),
            span: None,
        };
    }
    let mut out = Expanded::default();
    match watchdog::parse_word(raw, options, deadline) {
        Some(pieces) => {
            for piece in pieces {
                push_piece(&piece.piece, false, &mut out, env);
            }
        }
        None => {
            // Unparsed (a parser panic or out of time): the value is
            // unknown, and whatever might be a substitution is checked.
            out.dynamic = true;
            for script in code_substitutions(raw) {
                env.substitution(&script);
            }
        }
    }
    Word {
        text: (!out.dynamic).then_some(out.text),
        raw: raw.to_owned(),
        glob: out.glob,
        span: None,
    }
}

#[derive(Default)]
struct Expanded {
    text: String,
    dynamic: bool,
    glob: bool,
}

fn push_piece(piece: &WordPiece, quoted: bool, out: &mut Expanded, env: &mut dyn Expansion) {
    match piece {
        WordPiece::Text(text) => {
            if !quoted && has_glob(text) {
                out.glob = true;
            }
            out.text.push_str(text);
        }
        WordPiece::SingleQuotedText(text) => out.text.push_str(text),
        WordPiece::AnsiCQuotedText(text) => out.text.push_str(&ansi_c(text)),
        WordPiece::DoubleQuotedSequence(pieces)
        | WordPiece::GettextDoubleQuotedSequence(pieces) => {
            for inner in pieces {
                push_piece(&inner.piece, true, out, env);
            }
        }
        WordPiece::TildeExpansion(TildeExpr::Home) => out.text.push_str(&env.home()),
        WordPiece::TildeExpansion(TildeExpr::UserHome(user)) => {
            if user == "root" {
                out.text.push_str("/root");
            } else {
                out.text.push_str("/home/");
                out.text.push_str(user);
            }
        }
        WordPiece::ParameterExpansion(expr) => match simple_parameter(expr) {
            Some(name) if name == "HOME" => out.text.push_str(&env.home()),
            Some(name) => match env.variable(&name) {
                Some(value) => out.text.push_str(&value),
                None => out.dynamic = true,
            },
            None => out.dynamic = true,
        },
        WordPiece::CommandSubstitution(script)
        | WordPiece::BackquotedCommandSubstitution(script) => {
            env.substitution(script);
            out.dynamic = true;
        }
        WordPiece::EscapeSequence(escaped) => {
            let literal = escaped.strip_prefix('\\').unwrap_or(escaped);
            // Inside double quotes a backslash before an ordinary character stays.
            if quoted && !literal.starts_with(['$', '`', '"', '\\', '\n']) {
                out.text.push('\\');
            }
            if literal != "\n" {
                out.text.push_str(literal);
            }
        }
        WordPiece::ArithmeticExpression(_) | WordPiece::TildeExpansion(_) => out.dynamic = true,
    }
}

/// `$NAME` or `${NAME}` with no operator: the variable's name.
fn simple_parameter(expr: &ParameterExpr) -> Option<String> {
    match expr {
        ParameterExpr::Parameter {
            parameter: Parameter::Named(name),
            indirect: false,
        } => Some(name.clone()),
        _ => None,
    }
}

/// The value of a `$'...'` string's body: the common escapes.
fn ansi_c(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('x') => {
                let mut hex = String::new();
                while hex.len() < 2 && chars.peek().is_some_and(char::is_ascii_hexdigit) {
                    hex.extend(chars.next());
                }
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(decoded) => out.push(decoded),
                    None => out.push_str("\\x"),
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// Splits text the way a shell splits a command line into words, for the
/// fallback path and for strings such as `env -S`: quotes removed,
/// backslashes honoured, no expansions.
pub(crate) fn split_words(text: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut glob = false;
    let mut dynamic = false;
    let mut chars = text.chars().peekable();
    let mut flush =
        |current: &mut String, in_word: &mut bool, glob: &mut bool, dynamic: &mut bool| {
            if *in_word {
                words.push(Word {
                    text: (!*dynamic).then(|| current.clone()),
                    raw: current.clone(),
                    glob: *glob,
                    span: None,
                });
            }
            current.clear();
            *in_word = false;
            *glob = false;
            *dynamic = false;
        };
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => flush(&mut current, &mut in_word, &mut glob, &mut dynamic),
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    current.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(next) = chars.next() {
                                current.push(next);
                            }
                        }
                        '$' | '`' => {
                            dynamic = true;
                            current.push(q);
                        }
                        _ => current.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            _ => {
                in_word = true;
                if matches!(c, '*' | '?' | '[') {
                    glob = true;
                }
                if matches!(c, '$' | '`') {
                    dynamic = true;
                }
                current.push(c);
            }
        }
    }
    flush(&mut current, &mut in_word, &mut glob, &mut dynamic);
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Env;
    impl Expansion for Env {
        fn variable(&self, name: &str) -> Option<String> {
            (name == "ROOT").then(|| "/".to_owned())
        }
        fn home(&self) -> String {
            "/home/agent".to_owned()
        }
        fn substitution(&mut self, _script: &str) {}
    }

    fn later() -> Deadline {
        Deadline::after(std::time::Duration::from_secs(60))
    }

    /// A word left unparsed (here: out of time) has no known value, and
    /// every substitution in it, closed or not, is still handed over.
    #[test]
    fn an_unparsed_word_still_reports_its_substitutions() {
        struct Recording(Vec<String>);
        impl Expansion for Recording {
            fn variable(&self, _name: &str) -> Option<String> {
                None
            }
            fn home(&self) -> String {
                "/home/agent".to_owned()
            }
            fn substitution(&mut self, script: &str) {
                self.0.push(script.to_owned());
            }
        }
        let raw = format!("{}$(rm -rf /)`id`$(curl x", "{".repeat(20));
        let spent = Deadline::after(std::time::Duration::ZERO);
        let mut env = Recording(Vec::new());
        let word = expand(&raw, &ParserOptions::default(), spent, &mut env);
        assert_eq!(word.text, None);
        assert_eq!(env.0, ["rm -rf /", "curl x", "id"]);
        // Single-quoted text is not code, parsed or not.
        let quoted = format!("'$(rm -rf /)'{}", "{".repeat(20));
        let mut env = Recording(Vec::new());
        expand(&quoted, &ParserOptions::default(), spent, &mut env);
        assert!(env.0.is_empty(), "{:?}", env.0);
    }

    fn value(raw: &str) -> Option<String> {
        expand(raw, &ParserOptions::default(), later(), &mut Env).text
    }

    #[test]
    fn quotes_and_escapes_are_removed() {
        assert_eq!(value(r#""rm""#).as_deref(), Some("rm"));
        assert_eq!(value(r"\rm").as_deref(), Some("rm"));
        assert_eq!(value("'/'").as_deref(), Some("/"));
        assert_eq!(value(r#"r"m""#).as_deref(), Some("rm"));
        assert_eq!(value("$'\\x2f'").as_deref(), Some("/"));
    }

    #[test]
    fn home_and_known_variables_expand() {
        assert_eq!(value("~").as_deref(), Some("/home/agent"));
        assert_eq!(value("~/x").as_deref(), Some("/home/agent/x"));
        assert_eq!(value("$HOME").as_deref(), Some("/home/agent"));
        assert_eq!(value("${HOME}/").as_deref(), Some("/home/agent/"));
        assert_eq!(value("$ROOT").as_deref(), Some("/"));
        assert_eq!(value("$OTHER"), None);
        assert_eq!(value("$(pwd)"), None);
    }

    #[test]
    fn quoted_globs_are_not_globs() {
        let options = ParserOptions::default();
        assert!(expand("/*", &options, later(), &mut Env).glob);
        assert!(!expand("'/*'", &options, later(), &mut Env).glob);
        assert!(!expand("\"/*\"", &options, later(), &mut Env).glob);
    }

    #[test]
    fn split_words_handles_quotes() {
        let words: Vec<String> = split_words(r#"rm -rf "/" 'a b' c\ d"#)
            .iter()
            .map(|w| w.display().to_owned())
            .collect();
        assert_eq!(words, ["rm", "-rf", "/", "a b", "c d"]);
    }
}
