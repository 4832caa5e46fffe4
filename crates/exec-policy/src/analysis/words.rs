//! Words as the analysis sees them: the literal value where it is known,
//! the raw text always, and whether unquoted glob characters remain.

use brush_parser::ParserOptions;
use brush_parser::word::{
    Parameter, ParameterExpr, ParameterTestType, ParameterTransformOp, SpecialParameter,
    SubstringMatchKind, TildeExpr, WordPiece,
};

use super::lexical::code_substitutions;
use super::watchdog::{self, Deadline};
use crate::glob::{glob_match, has_glob};

/// Separates the fields of an expanded word (NUL never occurs in a shell
/// word): where unquoted expansions split and between the members of
/// `"$@"` and `"${a[@]}"`.
pub(crate) const FIELD_BREAK: char = '\0';

/// Separates the members of an array in a variable's stored value.
pub(crate) const ARRAY_SEP: char = '\u{1}';

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
    /// The value of `$name` if known statically (array members joined by
    /// [`ARRAY_SEP`]).
    fn variable(&self, name: &str) -> Option<String>;
    /// The positional parameters (`$1`...), when known.
    fn positional(&self) -> Option<Vec<String>> {
        None
    }
    /// The home directory (`~`) as the analysis names it.
    fn home(&self) -> String;
    /// Records `${name:=value}` assigning `value`.
    fn assign(&mut self, _name: &str, _value: &str) {}
    /// Called with the text of each command substitution found in a word;
    /// returns what it prints, when that is known statically.
    fn substitution(&mut self, script: &str) -> Option<String>;
    /// Records that the word does something the analysis cannot follow
    /// (`${x@P}` on an unknown value): the command is asked about.
    fn unknown(&mut self, _what: &str) {}
}

/// An [`Expansion`] that remembers the substitutions handed to the one it
/// wraps, so those in operands the value did not need are found after.
struct Recording<'a> {
    inner: &'a mut dyn Expansion,
    seen: Vec<String>,
}

impl Expansion for Recording<'_> {
    fn variable(&self, name: &str) -> Option<String> {
        self.inner.variable(name)
    }
    fn positional(&self) -> Option<Vec<String>> {
        self.inner.positional()
    }
    fn home(&self) -> String {
        self.inner.home()
    }
    fn assign(&mut self, name: &str, value: &str) {
        self.inner.assign(name, value);
    }
    fn substitution(&mut self, script: &str) -> Option<String> {
        self.seen.push(script.to_owned());
        self.inner.substitution(script)
    }
    fn unknown(&mut self, what: &str) {
        self.inner.unknown(what);
    }
}

/// The command substitutions of `raw`, looking through `$(( ))`: an
/// arithmetic body is no script, but substitutions inside it run.
fn raw_substitutions(raw: &str, out: &mut Vec<String>) {
    for body in code_substitutions(raw) {
        let trimmed = body.trim();
        if trimmed.starts_with('(') && trimmed.ends_with(')') && !trimmed.starts_with("( (") {
            raw_substitutions(&trimmed[1..trimmed.len() - 1], out);
        } else {
            out.push(body);
        }
    }
}

/// Characters that make a word more than its literal text.
fn is_plain(raw: &str) -> bool {
    !raw.contains(['$', '`', '\'', '"', '\\', '~'])
}

/// Expands `raw` as far as is statically possible, as one word (fields
/// joined by spaces).
pub(crate) fn expand(
    raw: &str,
    options: &ParserOptions,
    deadline: Deadline,
    env: &mut dyn Expansion,
) -> Word {
    let mut word = expand_raw(raw, options, deadline, env);
    if let Some(text) = &mut word.text
        && text.contains(FIELD_BREAK)
    {
        *text = text
            .split(FIELD_BREAK)
            .filter(|f| !f.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
    }
    word
}

/// Expands `raw` into the words bash makes of it: unquoted expansions are
/// split at `$IFS`, `"$@"` gives one word per parameter.
pub(crate) fn expand_fields(
    raw: &str,
    options: &ParserOptions,
    deadline: Deadline,
    env: &mut dyn Expansion,
) -> Vec<Word> {
    let word = expand_raw(raw, options, deadline, env);
    match &word.text {
        Some(text) if text.contains(FIELD_BREAK) => text
            .split(FIELD_BREAK)
            .filter(|f| !f.is_empty())
            .map(|field| Word {
                text: Some(field.to_owned()),
                raw: word.raw.clone(),
                glob: word.glob && has_glob(field),
                span: None,
            })
            .collect(),
        _ => vec![word],
    }
}

fn expand_raw(
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
    let mut recording = Recording {
        inner: env,
        seen: Vec::new(),
    };
    let mut ctx = Ctx {
        options,
        deadline,
        env: &mut recording,
    };
    match watchdog::parse_word(raw, options, deadline) {
        Some(pieces) => {
            for piece in pieces {
                push_piece(&piece.piece, false, &mut out, &mut ctx);
            }
        }
        None => {
            // Unparsed (a parser panic or out of time): the value is
            // unknown, and whatever might be a substitution is checked.
            out.dynamic = true;
        }
    }
    // Every substitution in the word is analysed, whether or not its
    // value was needed: an operand the evaluation skipped (`${x:+$(...)}`,
    // `${x/$(...)/y}`, a subscript, `${x:$(...)}`) still runs in bash
    // whenever its branch is taken, and the analysis cannot always tell.
    if raw.contains(['`', '$']) {
        let mut bodies = Vec::new();
        raw_substitutions(raw, &mut bodies);
        let Recording { inner, seen } = recording;
        for body in bodies {
            if !seen.iter().any(|s| s.trim() == body.trim()) {
                inner.substitution(&body);
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

/// What expanding pieces needs besides the output.
struct Ctx<'a> {
    options: &'a ParserOptions,
    deadline: Deadline,
    env: &'a mut dyn Expansion,
}

#[derive(Default)]
struct Expanded {
    text: String,
    dynamic: bool,
    glob: bool,
}

impl Expanded {
    /// Appends the fields of an expansion: quoted, they join as bash
    /// joins `"$@"`; unquoted, each is split at `ifs` too.
    fn push_fields(&mut self, fields: &[String], quoted: bool, ifs: &str) {
        for (i, field) in fields.iter().enumerate() {
            if i > 0 {
                self.text.push(FIELD_BREAK);
            }
            if quoted {
                self.text.push_str(field);
            } else {
                for c in field.chars() {
                    if ifs.contains(c) {
                        self.text.push(FIELD_BREAK);
                    } else {
                        if matches!(c, '*' | '?' | '[') {
                            self.glob = true;
                        }
                        self.text.push(c);
                    }
                }
            }
        }
    }
}

/// Expands an operand word of a parameter expression (`${V:-WORD}`).
fn operand(raw: &str, ctx: &mut Ctx<'_>) -> Option<String> {
    let word = expand(raw, ctx.options, ctx.deadline, ctx.env);
    word.text
}

fn push_piece(piece: &WordPiece, quoted: bool, out: &mut Expanded, ctx: &mut Ctx<'_>) {
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
                push_piece(&inner.piece, true, out, ctx);
            }
        }
        WordPiece::TildeExpansion(TildeExpr::Home) => out.text.push_str(&ctx.env.home()),
        WordPiece::TildeExpansion(TildeExpr::UserHome(user)) => {
            if user == "root" {
                out.text.push_str("/root");
            } else {
                out.text.push_str("/home/");
                out.text.push_str(user);
            }
        }
        WordPiece::TildeExpansion(TildeExpr::WorkingDir) => match ctx.env.variable("PWD") {
            Some(pwd) => out.text.push_str(&pwd),
            None => out.dynamic = true,
        },
        WordPiece::ParameterExpansion(expr) => {
            let ifs = ctx
                .env
                .variable("IFS")
                .unwrap_or_else(|| " \t\n".to_owned());
            match parameter_expr(expr, ctx) {
                Some(fields) => out.push_fields(&fields, quoted, &ifs),
                None => out.dynamic = true,
            }
        }
        WordPiece::CommandSubstitution(script)
        | WordPiece::BackquotedCommandSubstitution(script) => match ctx.env.substitution(script) {
            Some(output) => {
                let ifs = ctx
                    .env
                    .variable("IFS")
                    .unwrap_or_else(|| " \t\n".to_owned());
                let trimmed = output.trim_end_matches('\n').to_owned();
                out.push_fields(&[trimmed], quoted, &ifs);
            }
            None => out.dynamic = true,
        },
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
        WordPiece::ArithmeticExpression(expr) => {
            // Substitutions inside `$(( ))` run first.
            for script in code_substitutions(&expr.value) {
                ctx.env.substitution(&script);
            }
            out.dynamic = true;
        }
        WordPiece::TildeExpansion(_) => out.dynamic = true,
    }
}

/// The fields a parameter stands for, when known: one for a scalar, one
/// per member for `$@` and `${a[@]}`.
fn parameter_fields(
    parameter: &Parameter,
    indirect: bool,
    ctx: &mut Ctx<'_>,
) -> Option<Vec<String>> {
    let fields = match parameter {
        Parameter::Named(name) if name == "HOME" => Some(vec![ctx.env.home()]),
        Parameter::Named(name) => ctx
            .env
            .variable(name)
            .map(|v| vec![v.split(ARRAY_SEP).next().unwrap_or("").to_owned()]),
        Parameter::NamedWithIndex { name, index } => {
            let value = ctx
                .env
                .variable(name)
                .or_else(|| ctx.env.variable(&format!("{name}[{index}]")))?;
            if let Some(keyed) = ctx.env.variable(&format!("{name}[{index}]")) {
                Some(vec![keyed])
            } else {
                let at: usize = match index.trim().parse() {
                    Ok(at) => at,
                    Err(_) => ctx.env.variable(index.trim())?.parse().ok()?,
                };
                Some(vec![
                    value.split(ARRAY_SEP).nth(at).unwrap_or("").to_owned(),
                ])
            }
        }
        Parameter::NamedWithAllIndices { name, concatenate } => {
            let value = ctx.env.variable(name)?;
            let members: Vec<String> = value.split(ARRAY_SEP).map(str::to_owned).collect();
            Some(if *concatenate {
                vec![members.join(" ")]
            } else {
                members
            })
        }
        Parameter::Positional(0) => ctx.env.variable("0").map(|v| vec![v]),
        Parameter::Positional(n) => {
            let all = ctx.env.positional()?;
            let index = usize::try_from(*n).ok()?.checked_sub(1)?;
            Some(vec![all.get(index).cloned().unwrap_or_default()])
        }
        Parameter::Special(SpecialParameter::AllPositionalParameters { concatenate }) => {
            let all = ctx.env.positional()?;
            Some(if *concatenate {
                vec![all.join(" ")]
            } else {
                all
            })
        }
        Parameter::Special(SpecialParameter::ShellName) => ctx.env.variable("0").map(|v| vec![v]),
        // The shell's own process: `/proc/$$/root` is `/proc/self/root`.
        Parameter::Special(SpecialParameter::ProcessId) => Some(vec!["self".to_owned()]),
        Parameter::Special(_) => None,
    }?;
    if indirect {
        let name = fields.first()?.clone();
        return parameter_fields(&Parameter::Named(name), false, ctx);
    }
    Some(fields)
}

/// Whether a parameter's value counts as missing for `test_type`.
fn missing(fields: Option<&Vec<String>>, test_type: &ParameterTestType) -> Option<bool> {
    match (fields, test_type) {
        // Unknown: the default is what the analysis can check.
        (None, _) => Some(true),
        (Some(fields), ParameterTestType::UnsetOrNull) => Some(fields.iter().all(String::is_empty)),
        (Some(_), ParameterTestType::Unset) => Some(false),
    }
}

/// The value of a parameter expression, when known.
fn parameter_expr(expr: &ParameterExpr, ctx: &mut Ctx<'_>) -> Option<Vec<String>> {
    let one = |fields: Vec<String>| fields.join(" ");
    match expr {
        ParameterExpr::Parameter {
            parameter,
            indirect,
        }
        | ParameterExpr::IndicateErrorIfNullOrUnset {
            parameter,
            indirect,
            ..
        } => parameter_fields(parameter, *indirect, ctx),
        ParameterExpr::UseDefaultValues {
            parameter,
            indirect,
            test_type,
            default_value,
        }
        | ParameterExpr::AssignDefaultValues {
            parameter,
            indirect,
            test_type,
            default_value,
        } => {
            let fields = parameter_fields(parameter, *indirect, ctx);
            if missing(fields.as_ref(), test_type)? {
                let value = operand(default_value.as_deref().unwrap_or(""), ctx)?;
                if let (ParameterExpr::AssignDefaultValues { .. }, Parameter::Named(name)) =
                    (expr, parameter)
                {
                    ctx.env.assign(name, &value);
                }
                Some(vec![value])
            } else {
                fields
            }
        }
        ParameterExpr::UseAlternativeValue {
            parameter,
            indirect,
            test_type,
            alternative_value,
        } => {
            let fields = parameter_fields(parameter, *indirect, ctx)?;
            if missing(Some(&fields), test_type)? {
                Some(vec![String::new()])
            } else {
                Some(vec![operand(
                    alternative_value.as_deref().unwrap_or(""),
                    ctx,
                )?])
            }
        }

        ParameterExpr::RemoveSmallestSuffixPattern {
            parameter,
            indirect,
            pattern,
        }
        | ParameterExpr::RemoveLargestSuffixPattern {
            parameter,
            indirect,
            pattern,
        }
        | ParameterExpr::RemoveSmallestPrefixPattern {
            parameter,
            indirect,
            pattern,
        }
        | ParameterExpr::RemoveLargestPrefixPattern {
            parameter,
            indirect,
            pattern,
        } => {
            let value = one(parameter_fields(parameter, *indirect, ctx)?);
            let pattern = operand(pattern.as_deref().unwrap_or(""), ctx)?;
            let (suffix, largest) = match expr {
                ParameterExpr::RemoveSmallestSuffixPattern { .. } => (true, false),
                ParameterExpr::RemoveLargestSuffixPattern { .. } => (true, true),
                ParameterExpr::RemoveSmallestPrefixPattern { .. } => (false, false),
                _ => (false, true),
            };
            Some(vec![remove_pattern(&value, &pattern, suffix, largest)])
        }
        ParameterExpr::Substring {
            parameter,
            indirect,
            offset,
            length,
        } => {
            let value: Vec<char> = one(parameter_fields(parameter, *indirect, ctx)?)
                .chars()
                .collect();
            let offset: i64 = offset.value.trim().parse().ok()?;
            let start = if offset < 0 {
                value
                    .len()
                    .saturating_sub(usize::try_from(offset.unsigned_abs()).ok()?)
            } else {
                usize::try_from(offset).ok()?.min(value.len())
            };
            let end = match length {
                Some(length) => {
                    let length: i64 = length.value.trim().parse().ok()?;
                    if length < 0 {
                        value
                            .len()
                            .saturating_sub(usize::try_from(length.unsigned_abs()).ok()?)
                    } else {
                        start
                            .saturating_add(usize::try_from(length).ok()?)
                            .min(value.len())
                    }
                }
                None => value.len(),
            };
            Some(vec![value[start..end.max(start)].iter().collect()])
        }
        ParameterExpr::UppercasePattern {
            parameter,
            indirect,
            ..
        } => Some(vec![
            one(parameter_fields(parameter, *indirect, ctx)?).to_uppercase(),
        ]),
        ParameterExpr::LowercasePattern {
            parameter,
            indirect,
            ..
        } => Some(vec![
            one(parameter_fields(parameter, *indirect, ctx)?).to_lowercase(),
        ]),
        ParameterExpr::ReplaceSubstring {
            parameter,
            indirect,
            pattern,
            replacement,
            match_kind,
        } => {
            let value = one(parameter_fields(parameter, *indirect, ctx)?);
            let pattern = operand(pattern, ctx)?;
            let replacement = operand(replacement.as_deref().unwrap_or(""), ctx)?;
            replace(&value, &pattern, &replacement, match_kind).map(|v| vec![v])
        }
        ParameterExpr::Transform {
            parameter,
            indirect,
            op: ParameterTransformOp::PromptExpand,
        } => {
            // `${x@P}` expands the value as a prompt: the substitutions in
            // it run. Known, they are analysed; unknown, nobody can say.
            match parameter_fields(parameter, *indirect, ctx) {
                Some(fields) => {
                    for script in code_substitutions(&fields.join(" ")) {
                        ctx.env.substitution(&script);
                    }
                }
                None => ctx
                    .env
                    .unknown("a prompt expansion (`${x@P}`) of an unknown value"),
            }
            None
        }
        // The value is left unknown; the substitutions in any operand
        // are analysed by `expand_raw` all the same.
        _ => None,
    }
}

/// `${V%P}`, `${V%%P}`, `${V#P}`, `${V##P}`.
fn remove_pattern(value: &str, pattern: &str, suffix: bool, largest: bool) -> String {
    let bounds: Vec<usize> = value
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(value.len()))
        .collect();
    let mut candidates = bounds;
    // `%%` wants the earliest start, `#` the earliest end; `%` and `##`
    // search from the other side.
    if suffix != largest {
        candidates.reverse();
    }
    for at in candidates {
        if suffix {
            if glob_match(pattern, &value[at..]) {
                return value[..at].to_owned();
            }
        } else if glob_match(pattern, &value[..at]) {
            return value[at..].to_owned();
        }
    }
    value.to_owned()
}

/// `${V/P/R}` and its anchored and global forms, for literal patterns
/// and single `?`/`*` globs at the edges; `None` when unsure.
fn replace(
    value: &str,
    pattern: &str,
    replacement: &str,
    kind: &SubstringMatchKind,
) -> Option<String> {
    if has_glob(pattern) {
        return None;
    }
    if pattern.is_empty() {
        return Some(value.to_owned());
    }
    Some(match kind {
        SubstringMatchKind::Prefix => match value.strip_prefix(pattern) {
            Some(rest) => format!("{replacement}{rest}"),
            None => value.to_owned(),
        },
        SubstringMatchKind::Suffix => match value.strip_suffix(pattern) {
            Some(rest) => format!("{rest}{replacement}"),
            None => value.to_owned(),
        },
        SubstringMatchKind::FirstOccurrence => value.replacen(pattern, replacement, 1),
        SubstringMatchKind::Anywhere => value.replace(pattern, replacement),
    })
}

/// The value of a `$'...'` string's body: the common escapes.
pub(crate) fn ansi_c(body: &str) -> String {
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
            Some(digit @ '0'..='7') => {
                let mut octal = String::from(digit);
                while octal.len() < 3 && chars.peek().is_some_and(|c| ('0'..='7').contains(c)) {
                    octal.extend(chars.next());
                }
                match u32::from_str_radix(&octal, 8).ok().and_then(char::from_u32) {
                    Some(decoded) => out.push(decoded),
                    None => out.push('?'),
                }
            }
            Some(kind @ ('u' | 'U')) => {
                let most = if kind == 'u' { 4 } else { 8 };
                let mut hex = String::new();
                while hex.len() < most && chars.peek().is_some_and(char::is_ascii_hexdigit) {
                    hex.extend(chars.next());
                }
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(decoded) => out.push(decoded),
                    None => out.push('?'),
                }
            }
            Some('e' | 'E') => out.push('\u{1b}'),
            Some('a') => out.push('\u{7}'),
            Some('b') => out.push('\u{8}'),
            Some('v') => out.push('\u{b}'),
            Some('f') => out.push('\u{c}'),
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
        fn substitution(&mut self, _script: &str) -> Option<String> {
            None
        }
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
            fn substitution(&mut self, script: &str) -> Option<String> {
                self.0.push(script.to_owned());
                None
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
