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
/// no real command nests subshells a dozen deep. Parentheses in quoted
/// text, comments and here-document bodies are text, and not counted
/// (`echo "(((((((((((((("` once sent a whole command to the fallback);
/// those in a `$( )` inside double quotes are code, and are.
pub(crate) fn has_deep_nesting(script: &str) -> bool {
    scan(script).deep
}

/// The top-level lines of `script`: split at newlines outside quotes,
/// parentheses, braces and here-document bodies (a body stays with the
/// line that opened it). Each is a command list of its own, for the
/// parser to try alone when the whole text does not parse; as byte ranges.
pub(crate) fn top_level_lines(script: &str) -> Vec<(usize, usize)> {
    let mut lines = Vec::new();
    let mut start = 0;
    for end in scan(script).breaks {
        lines.push((start, end));
        start = end + 1;
    }
    lines.push((start, script.len()));
    lines
}

/// What [`scan`] finds.
struct Scan {
    /// `(` nests deeper than [`MAX_PAREN_DEPTH`] in code.
    deep: bool,
    /// Byte offsets of the top-level newlines.
    breaks: Vec<usize>,
}

/// One pass over `script` as bash would lex its quoting: code, single and
/// double quotes, `$( )` inside double quotes, comments and here-document
/// bodies.
fn scan(script: &str) -> Scan {
    let bytes = script.as_bytes();
    let mut out = Scan {
        deep: false,
        breaks: Vec::new(),
    };
    // For each open `(` or `{`: whether closing it returns to double quotes.
    let mut stack: Vec<bool> = Vec::new();
    let mut in_double = false;
    // Here-document delimiters whose bodies start at the next newline.
    let mut pending: Vec<String> = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if in_double {
            match byte {
                b'"' => in_double = false,
                b'\\' => index += 1,
                b'$' if bytes.get(index + 1) == Some(&b'(') => {
                    index += 1;
                    stack.push(true);
                    in_double = false;
                    out.deep |= stack.len() > MAX_PAREN_DEPTH;
                }
                _ => {}
            }
            index += 1;
            continue;
        }
        let word_start = index == 0
            || matches!(
                bytes[index - 1],
                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')'
            );
        match byte {
            b'#' if word_start => {
                // A comment runs to the end of the line (the newline is
                // handled on the next turn).
                while index + 1 < bytes.len() && bytes[index + 1] != b'\n' {
                    index += 1;
                }
            }
            b'\'' => {
                index += 1;
                while index < bytes.len() && bytes[index] != b'\'' {
                    index += 1;
                }
            }
            b'"' => in_double = true,
            b'\\' => index += 1,
            b'(' | b'{' => {
                stack.push(false);
                out.deep |= stack.len() > MAX_PAREN_DEPTH;
            }
            b')' | b'}' => {
                if let Some(back) = stack.pop() {
                    in_double = back;
                }
            }
            // A here-string, `<<<`: no body follows.
            b'<' if bytes.get(index + 1) == Some(&b'<') && bytes.get(index + 2) == Some(&b'<') => {
                index += 3;
                continue;
            }
            b'<' if bytes.get(index + 1) == Some(&b'<') => {
                index += 2;
                if bytes.get(index) == Some(&b'-') {
                    index += 1;
                }
                while matches!(bytes.get(index), Some(b' ' | b'\t')) {
                    index += 1;
                }
                let begin = index;
                while index < bytes.len()
                    && !bytes[index].is_ascii_whitespace()
                    && !matches!(bytes[index], b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')')
                {
                    index += 1;
                }
                let word: String = script[begin..index]
                    .chars()
                    .filter(|c| !matches!(c, '\'' | '"' | '\\'))
                    .collect();
                if !word.is_empty() {
                    pending.push(word);
                }
                continue;
            }
            b'\n' => {
                if !pending.is_empty() {
                    // Skip each body in turn, up to its delimiter line.
                    for word in std::mem::take(&mut pending) {
                        loop {
                            let line_start = index + 1;
                            if line_start >= bytes.len() {
                                index = bytes.len();
                                break;
                            }
                            let line_end = script[line_start..]
                                .find('\n')
                                .map_or(bytes.len(), |at| line_start + at);
                            index = line_end;
                            if script[line_start..line_end].trim_start_matches('\t') == word {
                                break;
                            }
                        }
                    }
                }
                if stack.is_empty() && index < bytes.len() {
                    out.breaks.push(index);
                }
            }
            _ => {}
        }
        index += 1;
    }
    out
}
