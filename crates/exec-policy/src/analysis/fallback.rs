//! The token-level fallback: text the parser cannot read, or must not be
//! handed because it would hang it, is split into commands and words by
//! hand. The guards say which text that is.

use super::command::{Redirect, RedirectKind};
use super::lexical::quoted_bytes;
use super::words::{Word, split_words};

/// The simple commands of text the parser did not read, as words and
/// redirections, split token by token.
pub(crate) fn simple_commands(script: &str) -> impl Iterator<Item = (Vec<Word>, Vec<Redirect>)> {
    split_segments(script).into_iter().map(|segment| {
        let mut words = split_words(&segment);
        // Reserved words open a command's place: `do rm -rf /` runs `rm`.
        let keywords = words
            .iter()
            .take_while(|w| {
                matches!(
                    w.value(),
                    Some("do" | "then" | "else" | "elif" | "if" | "while" | "until" | "!" | "time")
                )
            })
            .count();
        words.drain(..keywords);
        split_redirects(words)
    })
}

/// Splits unparseable text into command segments at shell operators and
/// grouping characters, outside quotes.
fn split_segments(text: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                current.push(c);
            }
            // A backslash escapes the next character, except inside single quotes.
            (Some('"') | None, '\\') => {
                current.push(c);
                current.extend(chars.next());
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                current.push(c);
            }
            (None, ';' | '&' | '|' | '\n' | '(' | ')' | '{' | '}' | '`') => {
                // `>&2` and `&>` are redirections, not separators.
                if c == '&' && (current.ends_with('>') || chars.peek() == Some(&'>')) {
                    current.push(c);
                    continue;
                }
                segments.push(std::mem::take(&mut current));
            }
            (None, '$') if chars.peek() == Some(&'(') => {
                chars.next();
                segments.push(std::mem::take(&mut current));
            }
            // `${NAME...}` is one word's part, not a group.
            (Some('"') | None, '$') if chars.peek() == Some(&'{') => {
                current.push(c);
                let mut depth = 0usize;
                for inner in chars.by_ref() {
                    current.push(inner);
                    match inner {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
            }
            (_, c) => current.push(c),
        }
    }
    segments.push(current);
    segments
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .collect()
}

/// Separates `>`-style redirection tokens from argument words.
fn split_redirects(words: Vec<Word>) -> (Vec<Word>, Vec<Redirect>) {
    let mut args = Vec::new();
    let mut redirects = Vec::new();
    let mut iter = words.into_iter();
    while let Some(word) = iter.next() {
        let raw = word
            .raw
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
        let is_write = raw.starts_with('>');
        let is_read = raw.starts_with('<');
        if !is_write && !is_read {
            args.push(word);
            continue;
        }
        let target_text = raw.trim_start_matches(['>', '<', '|', '&']);
        let target = if target_text.is_empty() {
            match iter.next() {
                Some(next) => next,
                None => break,
            }
        } else {
            Word {
                text: word.text.as_ref().map(|_| target_text.to_owned()),
                raw: target_text.to_owned(),
                glob: word.glob,
                span: None,
            }
        };
        let kind = if is_write {
            RedirectKind::Write
        } else {
            RedirectKind::Other
        };
        redirects.push(Redirect { kind, target });
    }
    (args, redirects)
}

/// True when a here-document's delimiter word is missing or starts like a
/// substitution or an operator (`<< $(`, ``<< ` ``, `<<` at the end).
/// brush-parser 0.4.0 can loop forever, allocating without bound, on such
/// text (found by a property test: `<< $( << $(` grew to 24 GB), so it is
/// never handed to the parser; the token-level fallback checks it instead.
/// Bash itself treats these as syntax errors or literal oddities, so no
/// real command loses precision.
pub(crate) fn has_runaway_here_doc(script: &str) -> bool {
    let bytes = script.as_bytes();
    let quoted = quoted_bytes(script);
    let mut index = 0;
    while let Some(offset) = script[index..].find("<<") {
        let at = index + offset;
        index = at + 2;
        if quoted.get(at).copied().unwrap_or(false) {
            continue; // Text inside quotes, not an operator.
        }
        if bytes.get(index) == Some(&b'<') {
            // `<<<`, a here-string: skip all three.
            index += 1;
            continue;
        }
        let mut next = index;
        if bytes.get(next) == Some(&b'-') {
            next += 1;
        }
        while matches!(bytes.get(next), Some(b' ' | b'\t')) {
            next += 1;
        }
        match bytes.get(next) {
            None | Some(b'\n' | b'`' | b'(' | b')' | b'<' | b'>' | b'|' | b'&' | b';') => {
                return true;
            }
            Some(b'$') if bytes.get(next + 1) == Some(&b'(') => return true,
            Some(_) => {}
        }
        // The delimiter word as written, then as the end line must spell it.
        let raw: String = script[next..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '&' | '|' | '<' | '>'))
            .collect();
        // A substitution or group in the delimiter, or one that unquotes to
        // nothing (`""`, `''`, a lone `\`), makes the end-of-body match loop.
        if raw.contains("$(") || raw.contains(['`', '(', ')']) {
            return true;
        }
        let word: String = raw
            .chars()
            .filter(|c| !matches!(c, '\'' | '"' | '\\'))
            .collect();
        if word.is_empty() {
            return true;
        }
        // A body that runs to the end of the text (no line reads as the
        // delimiter) is where the parser loops: fuzzing found
        // `<<z$( <<----- $(` allocating without bound.
        let rest = &script[next + raw.len()..];
        if !rest
            .lines()
            .skip(1)
            .any(|line| line.trim_start_matches('\t') == word)
        {
            return true;
        }
    }
    false
}

/// Parentheses nested deeper than this (outside quotes) go to the fallback.
const MAX_PAREN_DEPTH: usize = 12;

/// True when `(` nests deeper than [`MAX_PAREN_DEPTH`] outside quotes.
/// brush-parser's PEG grammar backtracks exponentially on such text (found
/// by fuzzing: 30 unclosed `(` took seconds; each one more, about 1.8x), and
/// no real command nests subshells a dozen deep.
pub(crate) fn has_deep_nesting(script: &str) -> bool {
    let mut depth = 0usize;
    let mut chars = script.chars();
    let mut quote: Option<char> = None;
    let mut previous = '\n';
    while let Some(c) = chars.next() {
        let word_start = previous.is_whitespace() || matches!(previous, ';' | '&' | '|');
        previous = c;
        if quote.is_none() && c == '#' && word_start {
            // A comment's parentheses are text.
            for skipped in chars.by_ref() {
                if skipped == '\n' {
                    break;
                }
            }
            previous = '\n';
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => {
                chars.next();
            }
            (None, '\'' | '"') => quote = Some(c),
            (_, '(') => {
                depth += 1;
                if depth > MAX_PAREN_DEPTH {
                    return true;
                }
            }
            (_, ')') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}
