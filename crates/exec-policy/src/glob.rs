//! Shell-style glob matching (`*`, `?`, `[...]`), used for variable-name
//! patterns and for asking whether a path glob could reach a protected path.

/// Whether `pattern` matches all of `text`. `*` matches any run (including
/// `/`, callers split paths into components first when that matters), `?`
/// one character, `[abc]`, `[a-z]` and `[!a]` / `[^a]` one character of a set.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    matches(&pattern, &text)
}

/// Case-insensitive [`glob_match`] for ASCII names such as variable names.
pub(crate) fn glob_match_ignore_case(pattern: &str, text: &str) -> bool {
    glob_match(&pattern.to_ascii_uppercase(), &text.to_ascii_uppercase())
}

/// Whether `text` has an unescaped glob character.
pub(crate) fn has_glob(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

fn matches(pattern: &[char], text: &[char]) -> bool {
    // Iterative matcher with single-star backtracking: linear in practice and
    // never recursive, so hostile patterns cannot blow the stack.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                '*' => {
                    star = Some((p, t));
                    p += 1;
                    continue;
                }
                '?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = class(&pattern[p..], text[t]) {
                        if matched {
                            p += next;
                            t += 1;
                            continue;
                        }
                    } else if text[t] == '[' {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
                c if c == text[t] => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((star_p, star_t)) => {
                p = star_p + 1;
                t = star_t + 1;
                star = Some((star_p, star_t + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// Matches `c` against the class at the start of `pattern` (`[...]`).
/// Returns whether it matched and the class's length, or `None` when the
/// bracket does not open a well-formed class (then it is a literal `[`).
fn class(pattern: &[char], c: char) -> Option<(bool, usize)> {
    let mut i = 1;
    let negated = matches!(pattern.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < pattern.len() {
        let current = pattern[i];
        if current == ']' && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        if pattern.get(i + 1) == Some(&'-') && pattern.get(i + 2).is_some_and(|&end| end != ']') {
            let end = pattern[i + 2];
            if current <= c && c <= end {
                matched = true;
            }
            i += 3;
        } else {
            if current == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_and_questions() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*_TOKEN", "GH_TOKEN"));
        assert!(!glob_match("*_TOKEN", "TOKENIZERS"));
        assert!(glob_match("*_TOKEN_*", "A_TOKEN_B"));
        assert!(glob_match("/e?c", "/etc"));
        assert!(glob_match("/*", "/etc"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
    }

    #[test]
    fn classes() {
        assert!(glob_match("/[e]tc", "/etc"));
        assert!(glob_match("/[a-f]tc", "/etc"));
        assert!(!glob_match("/[!e]tc", "/etc"));
        assert!(glob_match("/[^x]tc", "/etc"));
        assert!(glob_match("[]]", "]"));
        assert!(glob_match("[", "["));
        assert!(!glob_match("[", "x"));
    }

    #[test]
    fn case_insensitive_names() {
        assert!(glob_match_ignore_case("corp_*", "CORP_KEY"));
        assert!(!glob_match_ignore_case("corp_*", "CORPORATE"));
    }
}
