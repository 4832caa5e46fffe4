//! Scanners over raw text, for the places the parser does not reach or is
//! not trusted with: which bytes are surely quoted, and where command
//! substitutions sit. They know nothing of the AST.

/// `$(...)` and backtick bodies in `text`, roughly: for text the parser
/// could not read (a here-document body, an unparsed word). An unclosed
/// `$(` takes the rest of the text, so nothing escapes the check; each
/// body is disjoint, so the total is never more than the text.
pub(crate) fn substitutions_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("$(") {
        let after = &rest[start + 2..];
        let mut depth = 1;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            out.push(after.to_owned());
            break;
        };
        out.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    let parts: Vec<&str> = text.split('`').collect();
    out.extend(parts.iter().skip(1).step_by(2).map(|s| (*s).to_owned()));
    out
}

/// The `$( )` and backtick bodies of `text` outside surely single-quoted
/// text (which holds no code): for text the parser did not read.
pub(crate) fn code_substitutions(text: &str) -> Vec<String> {
    // Only ASCII bytes are blanked, so the text stays UTF-8.
    let bytes: Vec<u8> = text
        .bytes()
        .zip(quoted_bytes(text))
        .map(|(byte, quoted)| {
            if quoted && byte.is_ascii() {
                b' '
            } else {
                byte
            }
        })
        .collect();
    substitutions_in(&String::from_utf8_lossy(&bytes))
}

/// For each byte of `script`, whether it surely lies inside single quotes
/// (or is escaped by a backslash) as bash would lex it.
///
/// Only the text before the first construct that changes what a `'` means
/// is classified: a double quote (a `'` inside is literal, and `"$( ... )"`
/// reopens a context where `<<` is an operator), a here-document (its body
/// is literal text), a comment, `$'...'`, a backtick or a `$( )`. From there
/// on every byte counts as unquoted, because a wrong "quoted" would hand a
/// runaway here-document to the parser (fuzzing found `"['... << $(` grow
/// without bound), while a wrong "unquoted" only costs the fallback.
pub(crate) fn quoted_bytes(script: &str) -> Vec<bool> {
    let bytes = script.as_bytes();
    let mut quoted = vec![false; bytes.len()];
    let mut in_single = false;
    // Inside `$'...'`, where a backslash escapes the next byte (`\'`).
    let mut in_ansi = false;
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if in_single || in_ansi {
            if byte == b'\\' && in_ansi {
                quoted[index] = true;
                if let Some(slot) = quoted.get_mut(index + 1) {
                    *slot = true;
                }
                index += 2;
                continue;
            }
            if byte == b'\'' {
                in_single = false;
                in_ansi = false;
            } else {
                quoted[index] = true;
            }
            index += 1;
            continue;
        }
        let next = bytes.get(index + 1).copied();
        // A comment: a `#` starting a word runs to the end of the line,
        // and nothing in it is an operator (`# <<X` is no here-document).
        let word_start = index == 0
            || matches!(
                bytes[index - 1],
                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')'
            );
        if byte == b'#' && word_start {
            while index < bytes.len() && bytes[index] != b'\n' {
                quoted[index] = true;
                index += 1;
            }
            continue;
        }
        if byte == b'$' && next == Some(b'\'') {
            in_ansi = true;
            index += 2;
            continue;
        }
        match byte {
            b'\\' => {
                if let Some(slot) = quoted.get_mut(index + 1) {
                    *slot = true;
                }
                index += 2;
            }
            b'\'' => {
                in_single = true;
                index += 1;
            }
            b'"' | b'`' => break,
            b'$' if matches!(next, Some(b'(' | b'{')) => break,
            b'<' if next == Some(b'<') => {
                if bytes.get(index + 2) != Some(&b'<') {
                    break; // A here-document: its body is literal.
                }
                index += 3;
            }
            _ => index += 1,
        }
    }
    quoted
}

/// Most words one brace expansion yields; beyond, the word stays whole.
const MAX_BRACE_WORDS: usize = 1024;

/// Bash's brace expansion of one raw word: `/{etc,usr}` is `/etc` and
/// `/usr`, `x{,.old}` is `x` and `x.old`, `{a..c}` is `a b c`. Braces in
/// quotes, after `$` or escaped stay as they are; a word with no list
/// comes back alone. `None` when the word makes more than
/// [`MAX_BRACE_WORDS`] words (the analysis cannot list them).
pub(crate) fn brace_expand_within(raw: &str) -> Option<Vec<String>> {
    let mut out = vec![raw.to_owned()];
    // Each round expands the first list of every word; nesting and several
    // lists take several rounds.
    for _ in 0..8 {
        let mut next = Vec::new();
        let mut changed = false;
        for word in &out {
            match first_list(word) {
                Some((open, close, members)) => {
                    changed = true;
                    for member in members {
                        next.push(format!("{}{member}{}", &word[..open], &word[close + 1..]));
                    }
                }
                None => next.push(word.clone()),
            }
            if next.len() > MAX_BRACE_WORDS {
                return None;
            }
        }
        out = next;
        if !changed {
            break;
        }
    }
    Some(out)
}

/// The first unquoted `{...}` holding a top-level comma or a `..` range:
/// its byte range and members.
fn first_list(word: &str) -> Option<(usize, usize, Vec<String>)> {
    let bytes = word.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match (quote, b) {
            (Some(q), b) if b == q => quote = None,
            (Some(b'\''), _) => {}
            (_, b'\\') => i += 1,
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b'{') if i == 0 || bytes[i - 1] != b'$' => {
                if let Some((close, members)) = list_at(word, i) {
                    return Some((i, close, members));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The members of the list opening at `open`, if it is one.
fn list_at(word: &str, open: usize) -> Option<(usize, Vec<String>)> {
    let bytes = word.as_bytes();
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut commas = Vec::new();
    let mut i = open;
    while i < bytes.len() {
        let b = bytes[i];
        match (quote, b) {
            (Some(q), b) if b == q => quote = None,
            (Some(b'\''), _) => {}
            (_, b'\\') => i += 1,
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b'{') => depth += 1,
            (None, b'}') => {
                depth -= 1;
                if depth == 0 {
                    let inner = &word[open + 1..i];
                    if !commas.is_empty() {
                        let mut members = Vec::new();
                        let mut start = open + 1;
                        for comma in commas {
                            members.push(word[start..comma].to_owned());
                            start = comma + 1;
                        }
                        members.push(word[start..i].to_owned());
                        return Some((i, members));
                    }
                    return range(inner).map(|members| (i, members));
                }
            }
            (None, b',') if depth == 1 => commas.push(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// `a..e` or `1..5`: the members, at most [`MAX_BRACE_WORDS`].
fn range(inner: &str) -> Option<Vec<String>> {
    let (from, to) = inner.split_once("..")?;
    if let (Ok(from), Ok(to)) = (from.parse::<i64>(), to.parse::<i64>()) {
        let count = from.abs_diff(to);
        if count >= MAX_BRACE_WORDS as u64 {
            return None;
        }
        let step = if from <= to { 1 } else { -1 };
        return Some(
            (0..=i64::try_from(count).ok()?)
                .map(|k| (from + k * step).to_string())
                .collect(),
        );
    }
    let (mut from_chars, mut to_chars) = (from.chars(), to.chars());
    let (Some(a), None, Some(b), None) = (
        from_chars.next(),
        from_chars.next(),
        to_chars.next(),
        to_chars.next(),
    ) else {
        return None;
    };
    let (low, high) = if a <= b { (a, b) } else { (b, a) };
    let members: Vec<String> = (low..=high).map(String::from).collect();
    (members.len() <= MAX_BRACE_WORDS).then_some(members)
}
