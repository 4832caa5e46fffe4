//! The one matcher: whether a format's token starts at a position where one
//! of its prefixes occurs, for whole values and, driven by shell-runtime,
//! for streams.

use std::sync::OnceLock;

use regex::Regex;

use crate::{FORMATS, TokenFormat};

/// Why a format could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFormat {
    /// The format's id.
    pub id: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for BadFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "token format `{}`: {}", self.id, self.message)
    }
}

impl std::error::Error for BadFormat {}

/// A token found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenMatch {
    /// Its format.
    pub format: &'static TokenFormat,
    /// Byte offset of the secret part (the whole token, or its group).
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
}

/// A set of bytes, from a regex class: bytes of non-ASCII characters all
/// count as the class says of U+FFFD.
type ByteClass = [bool; 256];

fn byte_class(id: &str, class: &str) -> Result<Option<Box<ByteClass>>, BadFormat> {
    if class.is_empty() {
        return Ok(None);
    }
    let regex = Regex::new(&format!(r"\A(?:{class})\z")).map_err(|error| BadFormat {
        id: id.to_owned(),
        message: error.to_string(),
    })?;
    let mut set = Box::new([false; 256]);
    let mut buffer = [0u8; 4];
    for (byte, slot) in set.iter_mut().enumerate() {
        let probe = u8::try_from(byte)
            .ok()
            .filter(u8::is_ascii)
            .map_or('\u{fffd}', char::from);
        *slot = regex.is_match(probe.encode_utf8(&mut buffer));
    }
    Ok(Some(set))
}

/// A format compiled: its regex anchored at the prefix, and its classes as
/// byte tables.
#[derive(Debug, Clone)]
pub struct Matcher {
    format: &'static TokenFormat,
    regex: Regex,
    grouped: bool,
    body: Box<ByteClass>,
    edge: Option<Box<ByteClass>>,
    preceded_by: Option<Box<ByteClass>>,
}

impl Matcher {
    /// Compiles `format`, refusing one without prefixes or with a regex or
    /// class that does not compile.
    pub fn new(format: &'static TokenFormat) -> Result<Self, BadFormat> {
        let bad = |message: String| BadFormat {
            id: format.id.to_owned(),
            message,
        };
        if format.prefixes.is_empty() || format.prefixes.iter().any(|prefix| prefix.is_empty()) {
            return Err(bad("every format needs non-empty prefixes".to_owned()));
        }
        let regex = Regex::new(&format!(r"\A(?:{})", format.regex))
            .map_err(|error| bad(error.to_string()))?;
        let body = byte_class(format.id, format.body)?
            .ok_or_else(|| bad("the body class is empty".to_owned()))?;
        Ok(Self {
            format,
            grouped: regex.captures_len() > 1,
            regex,
            body,
            edge: byte_class(format.id, format.edge)?,
            preceded_by: byte_class(format.id, format.preceded_by)?,
        })
    }

    /// The format this matches.
    pub fn format(&self) -> &'static TokenFormat {
        self.format
    }

    /// Whether only a group of the match is secret (a URL's password).
    pub fn grouped(&self) -> bool {
        self.grouped
    }

    /// Where the run of body bytes starting at `from` ends.
    pub fn run_end(&self, bytes: &[u8], from: usize) -> usize {
        from + bytes
            .get(from..)
            .unwrap_or_default()
            .iter()
            .take_while(|byte| self.body[usize::from(**byte)])
            .count()
    }

    /// Whether a token may start right after `before` (`None`: at the
    /// start of the text).
    pub fn may_follow(&self, before: Option<u8>) -> bool {
        match (&self.preceded_by, before) {
            (Some(class), Some(byte)) => class[usize::from(byte)],
            (Some(_), None) => false,
            (None, _) => !self.touches(before),
        }
    }

    fn touches(&self, byte: Option<u8>) -> bool {
        match (&self.edge, byte) {
            (Some(edge), Some(byte)) => edge[usize::from(byte)],
            _ => false,
        }
    }

    /// The token whose prefix (`prefix_len` bytes) starts at `at` in
    /// `text`, if there is one; `before` is the byte before `at` (it may
    /// lie outside `text`, in a stream).
    pub fn match_at(
        &self,
        text: &str,
        at: usize,
        prefix_len: usize,
        before: Option<u8>,
    ) -> Option<TokenMatch> {
        if !self.may_follow(before) {
            return None;
        }
        let haystack = text.get(at..)?;
        let (whole_end, start, end) = if self.grouped {
            let captures = self.regex.captures(haystack)?;
            let whole = captures.get(0)?;
            let secret = captures.get(1).unwrap_or(whole);
            (whole.end(), secret.start(), secret.end())
        } else {
            let whole = self.regex.find(haystack)?;
            (whole.end(), whole.start(), whole.end())
        };
        let whole_end = at + whole_end;
        let bytes = text.as_bytes();
        if self.touches(bytes.get(whole_end).copied()) || end <= start {
            return None;
        }
        let body_start = (at + prefix_len).min(whole_end);
        if self.format.needs_digit && !bytes[body_start..whole_end].iter().any(u8::is_ascii_digit) {
            return None;
        }
        Some(TokenMatch {
            format: self.format,
            start: at + start,
            end: at + end,
        })
    }
}

/// One slot per format of [`FORMATS`], compiled the first time one of its
/// prefixes is found: start-up scans every environment value, and most
/// values hold no prefix at all, so most formats are never compiled there
/// (compiling them all takes milliseconds of every start).
fn slots() -> &'static [OnceLock<Option<Matcher>>] {
    static SLOTS: OnceLock<Vec<OnceLock<Option<Matcher>>>> = OnceLock::new();
    SLOTS.get_or_init(|| FORMATS.iter().map(|_| OnceLock::new()).collect())
}

/// [`FORMATS`]`[index]` compiled, once per process; `None` past the end or
/// for a format that does not compile (the table test compiles each).
pub fn matcher(index: usize) -> Option<&'static Matcher> {
    let format = FORMATS.get(index)?;
    slots()
        .get(index)?
        .get_or_init(|| Matcher::new(format).ok())
        .as_ref()
}

/// Compiles every format of [`FORMATS`] now (each once per process), so
/// that no later search waits for one: for a warm-up thread at start-up.
pub fn compile_all() {
    for index in 0..FORMATS.len() {
        let _ = matcher(index);
    }
}

/// The first token in `text` in any of [`FORMATS`], if there is one: the
/// earliest, and of two at one place the format listed first.
pub fn find_token(text: &str) -> Option<TokenMatch> {
    let mut best: Option<(usize, TokenMatch)> = None;
    for (index, format) in FORMATS.iter().enumerate() {
        for prefix in format.prefixes {
            for (at, _) in text.match_indices(prefix) {
                if best.is_some_and(|(best, _)| best <= at) {
                    break;
                }
                let Some(matcher) = matcher(index) else {
                    break;
                };
                let before = at.checked_sub(1).map(|i| text.as_bytes()[i]);
                if let Some(found) = matcher.match_at(text, at, prefix.len(), before) {
                    best = Some((at, found));
                    break;
                }
            }
        }
    }
    best.map(|(_, found)| found)
}

/// Whether `value` (a variable's) holds a secret by its form.
pub fn is_secret_value(value: &str) -> bool {
    find_token(value).is_some()
}
