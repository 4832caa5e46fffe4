//! Bearer tokens: the token file (one principal per line), made at first
//! start, and the constant-time lookup of a presented token.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

use anyhow::{Context as _, bail};
use tool_core::Principal;

/// The fewest characters a token may have: shorter ones are guessable.
const MIN_TOKEN_CHARS: usize = 16;

/// The principals a server knows, each with its token.
#[derive(Debug)]
pub(crate) struct Tokens(Vec<(Principal, Vec<u8>)>);

impl Tokens {
    /// Reads `path`, or creates it (mode 0600) with one generated token
    /// when it does not exist; `true` when it was created.
    pub(crate) fn load_or_create(path: &Path) -> anyhow::Result<(Self, bool)> {
        let created = match std::fs::symlink_metadata(path) {
            Ok(_) => false,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                create(path)?;
                true
            }
            Err(error) => {
                return Err(error).with_context(|| format!("--token-file `{}`", path.display()));
            }
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--token-file `{}`", path.display()))?;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            crate::report(&format!(
                "agent-exec: warning: the token file `{}` is readable by other users (chmod 600 it)",
                path.display()
            ));
        }
        let tokens =
            Self::parse(&text).with_context(|| format!("--token-file `{}`", path.display()))?;
        Ok((tokens, created))
    }

    /// One principal per line: `NAME:TOKEN`, or a bare token named by its
    /// line number; empty lines and `#` comments are skipped. No token at
    /// all, a short one or one given twice is refused: auth fails closed.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let mut tokens: Vec<(Principal, Vec<u8>)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let number = index + 1;
            let (name, token) = match line.split_once(':') {
                Some((name, token)) => (name.trim().to_owned(), token.trim()),
                None => (number.to_string(), line),
            };
            let valid_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c));
            if !valid_name {
                bail!("line {number}: `{name}` is not a principal name (letters, digits, `._-@`)");
            }
            if token.chars().count() < MIN_TOKEN_CHARS || token.contains(char::is_whitespace) {
                bail!(
                    "line {number}: a token needs at least {MIN_TOKEN_CHARS} characters and no spaces"
                );
            }
            if tokens.iter().any(|(_, known)| known == token.as_bytes()) {
                bail!("line {number}: this token is already given on an earlier line");
            }
            tokens.push((Principal::named(&name), token.as_bytes().to_vec()));
        }
        if tokens.is_empty() {
            bail!(
                "no token in it: nobody could call (use --no-auth on a Unix socket or loopback instead)"
            );
        }
        Ok(Self(tokens))
    }

    /// The principal whose token `presented` is. Every token is compared,
    /// each in constant time, so the answer's timing says nothing about
    /// which one matched or how much of one did.
    pub(crate) fn principal(&self, presented: &[u8]) -> Option<Principal> {
        let mut found = None;
        for (principal, token) in &self.0 {
            if constant_time_eq(token, presented) && found.is_none() {
                found = Some(principal.clone());
            }
        }
        found
    }
}

/// `a == b` in time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (index, byte) in a.iter().enumerate() {
        let other = b.get(index).copied().unwrap_or(0);
        diff |= usize::from(byte ^ other);
    }
    std::hint::black_box(diff) == 0
}

/// A new token: 256 bits from the system's generator, in hex.
fn generate() -> anyhow::Result<String> {
    let mut bytes = [0_u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut file| file.read_exact(&mut bytes))
        .context("reading /dev/urandom for a token")?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Makes the token file with one generated token, readable by its owner
/// only from the start (never widened, then narrowed).
fn create(path: &Path) -> anyhow::Result<()> {
    let token = generate()?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create the token file `{}`", path.display()))?;
    file.write_all(format!("{token}\n").as_bytes())
        .with_context(|| format!("cannot write the token file `{}`", path.display()))?;
    Ok(())
}

/// The token `mcp --attach` presents: `AGENT_EXEC_TOKEN`'s value is used
/// when no file is given; from a file, its first principal's token.
pub(crate) fn token_for_attach(file: Option<&Path>) -> anyhow::Result<Option<String>> {
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--token-file `{}`", path.display()))?;
        let tokens =
            Tokens::parse(&text).with_context(|| format!("--token-file `{}`", path.display()))?;
        let token = tokens.0.into_iter().next().map(|(_, token)| token);
        return Ok(token.map(|token| String::from_utf8_lossy(&token).into_owned()));
    }
    Ok(std::env::var("AGENT_EXEC_TOKEN")
        .ok()
        .filter(|token| !token.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_principals_by_name_or_line_number() {
        let tokens =
            Tokens::parse("# comment\nalice:aaaaaaaaaaaaaaaaaaaa\n\nbbbbbbbbbbbbbbbbbbbbbbbb\n")
                .expect("parses");
        assert_eq!(
            tokens.principal(b"aaaaaaaaaaaaaaaaaaaa"),
            Some(Principal::named("alice"))
        );
        assert_eq!(
            tokens.principal(b"bbbbbbbbbbbbbbbbbbbbbbbb"),
            Some(Principal::named("4"))
        );
        assert_eq!(tokens.principal(b"aaaaaaaaaaaaaaaaaaa"), None);
        assert_eq!(tokens.principal(b"aaaaaaaaaaaaaaaaaaaaa"), None);
        assert_eq!(tokens.principal(b""), None);
    }

    #[test]
    fn no_short_or_repeated_token_and_not_none_at_all() {
        assert!(Tokens::parse("").is_err());
        assert!(Tokens::parse("# only a comment\n").is_err());
        assert!(Tokens::parse("a:short").is_err());
        assert!(Tokens::parse("a:aaaaaaaaaaaaaaaaaaaa\nb:aaaaaaaaaaaaaaaaaaaa").is_err());
        assert!(Tokens::parse("a b:aaaaaaaaaaaaaaaaaaaa").is_err());
    }

    #[test]
    fn a_missing_file_is_made_0600_with_one_token_and_read_back_the_same() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("token");
        let (first, created) = Tokens::load_or_create(&path).expect("created");
        assert!(created);
        let mode = std::fs::metadata(&path)
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).expect("reads");
        assert_eq!(text.trim().len(), 64, "{text}");
        assert_eq!(
            first.principal(text.trim().as_bytes()),
            Some(Principal::named("1"))
        );
        let (again, created) = Tokens::load_or_create(&path).expect("read");
        assert!(!created);
        assert_eq!(
            again.principal(text.trim().as_bytes()),
            Some(Principal::named("1"))
        );
        let attach = token_for_attach(Some(&path)).expect("reads");
        assert_eq!(attach.as_deref(), Some(text.trim()));
    }
}
