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
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if in_single {
            if byte == b'\'' {
                in_single = false;
            } else {
                quoted[index] = true;
            }
            index += 1;
            continue;
        }
        let next = bytes.get(index + 1).copied();
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
            b'"' | b'`' | b'#' => break,
            b'$' if matches!(next, Some(b'\'' | b'(' | b'{')) => break,
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
