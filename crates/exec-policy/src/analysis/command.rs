//! A simple command as the rules see it: its words after unwrapping, its
//! file redirections, and where it sits.

use super::paths::basename;
use super::words::Word;

/// How a redirection writes its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedirectKind {
    /// `>`, `>>`, `>|`, `<>`, `&>`, `&>>`.
    Write,
    /// `<` and the rest.
    Other,
}

/// A redirection with a file target.
#[derive(Debug, Clone)]
pub(crate) struct Redirect {
    pub(crate) kind: RedirectKind,
    pub(crate) target: Word,
}

/// One simple command as it would run.
#[derive(Debug, Clone)]
pub(crate) struct Cmd {
    /// argv after unwrapping; may be empty (a bare redirection).
    pub(crate) words: Vec<Word>,
    pub(crate) redirects: Vec<Redirect>,
    /// The working directory, when a literal `cd` earlier made it known.
    pub(crate) cwd: Option<String>,
    /// Innermost enclosing function definition.
    pub(crate) function: Option<String>,
    /// Part of a pipeline of two or more commands.
    pub(crate) in_pipeline: bool,
    /// Run with `&`.
    pub(crate) background: bool,
    /// Nesting depth (0: the command as given).
    pub(crate) depth: usize,
    /// Paths a preceding `find` feeds to this command (`find | xargs`, `-exec`).
    pub(crate) fed_paths: Vec<Word>,
    /// Something feeds its standard input: a pipe from an earlier command,
    /// a `<` redirection, a here-document or a here-string, its own or an
    /// enclosing command's (`while read l; do ...; done < file`).
    pub(crate) stdin_fed: bool,
    /// The text on its standard input, when known (`echo X | cmd`, `<<<`).
    pub(crate) stdin_text: Option<String>,
    /// Split token by token (the parser could not read its text).
    pub(crate) fallback: bool,
    /// The words of the simple commands in the earlier stages of its
    /// pipeline (substitutions included): what may write into its standard
    /// input (`curl URL | sh`).
    pub(crate) upstream: Vec<Vec<Word>>,
    /// Runs after a `cd -`, `popd` or `cd "$UNKNOWN"` left the working
    /// directory unknown.
    pub(crate) cwd_lost: bool,
}

impl Cmd {
    /// The program's name (basename of the first word), if known.
    pub(crate) fn program(&self) -> Option<&str> {
        self.words.first().and_then(Word::value).map(basename)
    }

    /// The command as text, from its program word on, redirections last.
    pub(crate) fn text(&self) -> String {
        self.render(String::push_str)
    }

    /// The text the regexes see: as [`text`](Self::text), but with the
    /// program's path reduced to its name (`/usr/bin/curl` is `curl`, as
    /// for the built-in rules), and redirection characters inside words
    /// (quoted text, such as `echo '> /dev/sda'`) turned into `_`, so only
    /// real redirections read as redirections (found by fuzzing:
    /// `echo '$(>> /dev/sda)'` was refused).
    pub(crate) fn regex_text(&self) -> String {
        let mut text = self.render(|text, word| {
            text.extend(word.chars().map(|c| {
                if matches!(c, '<' | '>' | '|' | '&' | ';') {
                    '_'
                } else {
                    c
                }
            }));
        });
        if let Some(program) = self.words.first().and_then(Word::value)
            && let Some(slash) = program.rfind('/')
        {
            // The rendered program word is `program` with some characters
            // replaced one for one, so its path prefix has the same length.
            text.drain(..=slash);
        }
        text
    }

    /// The words (each written by `push_word`) and the redirections,
    /// separated by spaces, built in one string: the rules render every
    /// simple command, and a string per word plus a join cost more than
    /// the rules themselves.
    fn render(&self, push_word: impl Fn(&mut String, &str)) -> String {
        let mut text = String::new();
        for (i, word) in self.words.iter().enumerate() {
            if i > 0 {
                text.push(' ');
            }
            push_word(&mut text, word.display());
        }
        for (i, redirect) in self.redirects.iter().enumerate() {
            if i > 0 || !self.words.is_empty() {
                text.push(' ');
            }
            text.push(if redirect.kind == RedirectKind::Write {
                '>'
            } else {
                '<'
            });
            text.push(' ');
            text.push_str(redirect.target.display());
        }
        text
    }
}
