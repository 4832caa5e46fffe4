//! The I/O half of an approval's binding ([`exec_policy::ApprovalKey`]):
//! finding the file a program word runs (a path from the working
//! directory, or a `PATH` lookup with the command's own `PATH`, symlinks
//! resolved) and hashing the content of that file and of the script it
//! runs. A key is built from the command's text before it runs; the same
//! function builds it from an exec request (path, argv, cwd, environment).

use std::collections::HashMap;
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use exec_policy::{AnalysisContext, Analyzer, ApprovalKey, bound_env, is_builtin, script_operand};
use sha2::{Digest as _, Sha256};

/// Files larger than this are bound by size, modification time and inode
/// instead of a digest of their content: the digest is taken on the
/// server's async threads, and 16 MiB hash in tens of milliseconds.
const HASHED_BYTES: u64 = 16 << 20;

/// The keys of every program `command` runs from `cwd` with `env` as the
/// analysis sees it (after unwrapping), in order.
pub(crate) fn command_keys(
    analyzer: &Analyzer,
    command: &str,
    cwd: &Path,
    env: &HashMap<String, String>,
) -> Vec<ApprovalKey> {
    let context = AnalysisContext {
        cwd: cwd.to_str().map(str::to_owned),
        vars: env.clone(),
    };
    let assigned = assigned_names(command);
    let extra: Vec<&str> = assigned.iter().map(String::as_str).collect();
    analyzer
        .planned_commands(command, &context)
        .into_iter()
        .map(|planned| {
            let dir = planned.cwd.map_or_else(|| cwd.to_path_buf(), PathBuf::from);
            exec_key(&planned.argv, &dir, env, &extra)
        })
        .collect()
}

/// The key of one exec: `argv` run from `cwd` with `env`; `extra` names
/// variables that matter besides [`exec_policy::BOUND_VARIABLES`].
pub(crate) fn exec_key(
    argv: &[String],
    cwd: &Path,
    env: &HashMap<String, String>,
    extra: &[&str],
) -> ApprovalKey {
    let path_var = env.get("PATH").map_or("", String::as_str);
    let word = argv.first().map_or("", String::as_str);
    if is_builtin(word) {
        return key_of(format!("builtin:{word}"), None, argv, cwd, env, extra);
    }
    match resolve_program(word, cwd, path_var) {
        Some(found) => key_of(
            found.to_string_lossy().into_owned(),
            Some(digest(&found)),
            argv,
            cwd,
            env,
            extra,
        ),
        None => key_of(format!("unresolved:{word}"), None, argv, cwd, env, extra),
    }
}

/// The key of an exec as it happens: the file the kernel runs is `exe`
/// (canonical, as the process sees it), read through `host` (where this
/// process can open it); `None` when it could not be found.
pub(crate) fn exec_key_of_file(
    exe: Option<(&Path, &Path)>,
    argv: &[String],
    cwd: &Path,
    env: &HashMap<String, String>,
    extra: &[&str],
) -> ApprovalKey {
    match exe {
        Some((exe, host)) => key_of(
            exe.to_string_lossy().into_owned(),
            Some(digest(host)),
            argv,
            cwd,
            env,
            extra,
        ),
        None => {
            let word = argv.first().map_or("", String::as_str);
            key_of(format!("unresolved:{word}"), None, argv, cwd, env, extra)
        }
    }
}

/// The key from what the executable was found to be.
fn key_of(
    exe: String,
    exe_digest: Option<String>,
    argv: &[String],
    cwd: &Path,
    env: &HashMap<String, String>,
    extra: &[&str],
) -> ApprovalKey {
    let path_var = env.get("PATH").map_or("", String::as_str);
    let word = argv.first().map_or("", String::as_str);
    let script_digest = script_operand(argv).map(|script| {
        let sourced = matches!(word, "source" | ".");
        resolve_script(script, cwd, path_var, sourced)
            .map_or_else(|| "missing".to_owned(), |found| digest(&found))
    });
    ApprovalKey {
        exe,
        argv: argv.to_vec(),
        cwd: cwd.to_string_lossy().into_owned(),
        env: bound_env(env, extra),
        exe_digest,
        script_digest,
    }
}

/// The names a command assigns (`NAME=value` words anywhere in it, such
/// as an environment prefix `FOO=1 ./deploy.sh`): their values reach the
/// program.
pub(crate) fn assigned_names(command: &str) -> Vec<String> {
    let mut names: Vec<String> = command
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .filter_map(|word| word.split_once('=').map(|(name, _)| name))
        .filter(|name| {
            name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .map(str::to_owned)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// The canonical file `word` runs: a path (it has a `/`) from `cwd`, or
/// the first executable regular file named `word` on `path_var`.
fn resolve_program(word: &str, cwd: &Path, path_var: &str) -> Option<PathBuf> {
    if word.is_empty() {
        return None;
    }
    if word.contains('/') {
        return std::fs::canonicalize(cwd.join(word)).ok();
    }
    path_var
        .split(':')
        .map(|dir| {
            if dir.is_empty() {
                cwd.to_path_buf()
            } else {
                cwd.join(dir)
            }
        })
        .map(|dir| dir.join(word))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .and_then(|found| std::fs::canonicalize(found).ok())
}

/// The canonical file a script operand names: from `cwd`, or for
/// `source NAME` without a `/` the first readable file on `path_var`
/// before `cwd`, as bash looks it up.
fn resolve_script(script: &str, cwd: &Path, path_var: &str, sourced: bool) -> Option<PathBuf> {
    let from_path = (sourced && !script.contains('/'))
        .then(|| {
            path_var
                .split(':')
                .filter(|dir| !dir.is_empty())
                .map(|dir| cwd.join(dir).join(script))
                .find(|candidate| candidate.is_file())
        })
        .flatten();
    std::fs::canonicalize(from_path.unwrap_or_else(|| cwd.join(script))).ok()
}

/// `sha256:HEX` of a file's content, or for a file over [`HASHED_BYTES`]
/// its size, modification time and inode; `unreadable` when it cannot be
/// read (then it is bound by nothing but that word: it asks again only
/// if it becomes readable).
fn digest(path: &Path) -> String {
    let Ok(meta) = std::fs::metadata(path) else {
        return "unreadable".to_owned();
    };
    if meta.len() > HASHED_BYTES {
        return format!(
            "large:{}:{}.{}:{}:{}",
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.dev(),
            meta.ino()
        );
    }
    // The kernel sets ctime on every change to the file, and no one can
    // set it back: a file whose ctime, mtime and size are unchanged has
    // the content it had, and hashing it again (a 7 MB interpreter takes
    // most of a second in a debug build) is skipped.
    let stamp = Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        len: meta.len(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    };
    let mut digests = DIGESTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(known) = digests.get(&stamp) {
        return known.clone();
    }
    drop(digests);
    let digest = hash(path);
    // File times tick coarsely (a few ms): a file changed this recently
    // could change again within the same tick with its stamp unchanged, so
    // its digest is not kept (git's "racily clean" rule).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
        });
    if now.saturating_sub(stamp.ctime.0) < 3 || now.saturating_sub(stamp.mtime.0) < 3 {
        return digest;
    }
    digests = DIGESTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if digests.len() >= 4096 {
        digests.clear();
    }
    digests.insert(stamp, digest.clone());
    digest
}

/// What identifies one state of a file's content, short of reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// Digests already taken, by the state of the file they were taken of.
static DIGESTS: std::sync::LazyLock<std::sync::Mutex<HashMap<Stamp, String>>> =
    std::sync::LazyLock::new(std::sync::Mutex::default);

/// `sha256:HEX` of the content of `path`, or `unreadable`.
fn hash(path: &Path) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return "unreadable".to_owned();
    };
    let mut hasher = Sha256::new();
    let mut buffer = [0u8; 64 * 1024];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => hasher.update(&buffer[..read]),
            Err(_) => return "unreadable".to_owned(),
        }
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(path: &Path) -> HashMap<String, String> {
        HashMap::from([
            ("PATH".to_owned(), path.to_string_lossy().into_owned()),
            ("HOME".to_owned(), "/home/me".to_owned()),
        ])
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn a_key_changes_with_content_links_path_and_directory() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let script = root.join("a.sh");
        std::fs::write(&script, "echo a\n").expect("write");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::os::unix::fs::symlink("a.sh", root.join("deploy.sh")).expect("link");
        let run = argv(&["./deploy.sh"]);
        let key = exec_key(&run, &root, &env(&root), &[]);
        assert_eq!(key.exe, script.to_string_lossy());
        assert!(
            key.exe_digest
                .as_deref()
                .is_some_and(|d| d.starts_with("sha256:"))
        );
        assert_eq!(key, exec_key(&run, &root, &env(&root), &[]));

        // The content changes.
        std::fs::write(&script, "echo b\n").expect("write");
        let edited = exec_key(&run, &root, &env(&root), &[]);
        assert_ne!(key, edited);

        // The link is re-pointed at a file with the same content.
        std::fs::write(root.join("b.sh"), "echo b\n").expect("write");
        std::fs::remove_file(root.join("deploy.sh")).expect("unlink");
        std::os::unix::fs::symlink("b.sh", root.join("deploy.sh")).expect("link");
        assert_ne!(edited.exe, exec_key(&run, &root, &env(&root), &[]).exe);

        // PATH finds another program of the same name.
        let bin = root.join("bin");
        std::fs::create_dir(&bin).expect("mkdir");
        std::fs::copy(&script, bin.join("deploy")).expect("copy");
        std::fs::set_permissions(bin.join("deploy"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let named = exec_key(&argv(&["deploy"]), &root, &env(&bin), &[]);
        assert_eq!(named.exe, bin.join("deploy").to_string_lossy());
        assert_eq!(
            exec_key(&argv(&["deploy"]), &root, &env(&root), &[]).exe,
            "unresolved:deploy"
        );

        // A script behind an interpreter or `source` is hashed.
        let sourced = exec_key(&argv(&["source", "b.sh"]), &root, &env(&bin), &[]);
        assert_eq!(sourced.exe, "builtin:source");
        let before = sourced.script_digest.clone();
        std::fs::write(root.join("b.sh"), "echo c\n").expect("write");
        let after = exec_key(&argv(&["source", "b.sh"]), &root, &env(&bin), &[]);
        assert_ne!(before, after.script_digest);
        let missing = exec_key(&argv(&["bash", "gone.sh"]), &root, &env(&bin), &[]);
        assert_eq!(missing.script_digest.as_deref(), Some("missing"));
    }

    #[test]
    fn a_digest_is_kept_only_for_a_settled_file() {
        let kept = |path: &Path| {
            let meta = std::fs::metadata(path).expect("meta");
            DIGESTS
                .lock()
                .expect("lock")
                .keys()
                .any(|stamp| stamp.ino == meta.ino() && stamp.dev == meta.dev())
        };
        // A file changed a moment ago could change again within the same
        // tick of the file clock: its digest is taken afresh each time.
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("x");
        std::fs::write(&file, "one").expect("write");
        let one = digest(&file);
        assert!(!kept(&file));
        std::fs::write(&file, "two").expect("write");
        assert_ne!(one, digest(&file));
        // A program installed long ago is hashed once.
        let shell = std::fs::canonicalize("/bin/sh").expect("sh");
        let first = digest(&shell);
        assert!(kept(&shell));
        assert_eq!(first, digest(&shell));
    }

    #[test]
    fn assigned_names_are_found_in_prefixes_and_exports() {
        assert_eq!(
            assigned_names("FOO=1 ./deploy.sh; export BAR=2 && x=3 y|z a==b 1x=2 --opt=v"),
            ["BAR", "FOO", "a", "x"]
        );
    }
}
