//! Naming a write the sandbox refused. Under `read-only` and
//! `workspace-write`, Landlock answers a write outside the writable roots
//! with `EACCES` (or `EROFS` on a read-only mount), and every tool reports
//! it as a bare `Permission denied` that reads like a file's own mode: a
//! model then tries `chmod` or `sudo`. The kernel keeps no count of what
//! it refused, so the refusal is recognised in what the command printed,
//! and the answer gets one line per path:
//! `[sandbox: refused write to PATH (outside the writable roots)]`.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use exec_policy::is_within_roots;

use crate::environment::ExecEnvironment;

/// The most paths one answer names; the rest are counted.
const MAX_NAMED: usize = 5;

/// What a write refused by the walls looks like in tools' messages
/// (lower case). `EACCES` alone is also a read refused by a file's mode,
/// so it counts only with a verb that writes, or for root, whom file modes
/// never stop.
const DENIED: &[&str] = &["permission denied", "eacces", "operation not permitted"];
const READ_ONLY: &[&str] = &["read-only file system", "erofs"];
const WRITE_VERBS: &[&str] = &[
    "cannot touch",
    "cannot create",
    "cannot remove",
    "cannot move",
    "cannot make",
    "cannot open",
    "cannot overwrite",
    "cannot unlink",
    "cannot link",
    "cannot symlink",
    "cannot rename",
    "cannot change",
    "failed to create",
    "could not create",
    "unable to create",
    "unable to write",
    "could not write",
    "couldn't create",
    "can't create",
    "mkdir",
    "rmdir",
    "unlink",
    "rename",
    "copyfile",
    "open '",
    "write",
    "savefile",
];

/// The answer's lines for the writes a command's `output` (asked for only
/// under write walls) shows refused; `cwd`, where known, resolves the
/// relative paths it names.
pub(crate) fn write_wall_notes(
    exec: &ExecEnvironment,
    cwd: Option<&Path>,
    output: impl FnOnce() -> String,
) -> Vec<String> {
    let Some(walls) = &exec.config.write_walls else {
        return Vec::new();
    };
    let reason = if walls.read_only {
        "the sandbox is read-only"
    } else {
        "outside the writable roots"
    };
    refused_writes(&output(), &walls.writable, cwd, runs_as_root(), reason)
}

/// Whether this process (and so its commands) runs as root: the owner of
/// `/proc/self` is the effective user.
fn runs_as_root() -> bool {
    static ROOT: OnceLock<bool> = OnceLock::new();
    *ROOT.get_or_init(|| std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0))
}

/// The answer's lines for the writes `output` shows refused outside
/// `roots` (canonical writable roots); `cwd` resolves relative paths
/// (without it they are left out). `root`: the command ran as root, whom a
/// file's mode never refuses. `reason` goes in each line's parentheses.
pub(crate) fn refused_writes(
    output: &str,
    roots: &[PathBuf],
    cwd: Option<&Path>,
    root: bool,
    reason: &str,
) -> Vec<String> {
    let mut named: Vec<PathBuf> = Vec::new();
    let mut more = 0usize;
    for line in output.lines() {
        let lower = line.to_lowercase();
        let read_only = READ_ONLY.iter().any(|marker| lower.contains(marker));
        let denied = DENIED.iter().any(|marker| lower.contains(marker));
        if !read_only && !denied {
            continue;
        }
        if !read_only && !root && !WRITE_VERBS.iter().any(|verb| lower.contains(verb)) {
            continue;
        }
        for candidate in paths_in(line) {
            let path = match cwd {
                Some(cwd) => absolute(&candidate, cwd),
                None if candidate.starts_with('/') => absolute(&candidate, Path::new("/")),
                None => continue,
            };
            if is_within_roots(&path, roots) || named.contains(&path) {
                continue;
            }
            if named.len() < MAX_NAMED {
                named.push(path);
            } else {
                more += 1;
            }
        }
    }
    let mut lines: Vec<String> = named
        .iter()
        .map(|path| format!("[sandbox: refused write to {} ({reason})]", path.display()))
        .collect();
    if more > 0 {
        lines.push(format!("[sandbox: {more} more writes refused ({reason})]"));
    }
    lines
}

/// Paths a message names: quoted (in single, double, typographic or
/// backquote-and-quote pairs) or between the `: ` separators tools put
/// around them (`bash: /etc/x: Permission denied`).
fn paths_in(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let quotes: [(char, char); 4] = [('\'', '\''), ('"', '"'), ('`', '\''), ('‘', '’')];
    for (open, close) in quotes {
        let mut rest = line;
        while let Some(start) = rest.find(open) {
            let after = rest.get(start + open.len_utf8()..).unwrap_or_default();
            let Some(end) = after.find(close) else {
                break;
            };
            let inside = after.get(..end).unwrap_or_default();
            if looks_like_path(inside) {
                found.push(inside.to_owned());
            }
            rest = after.get(end + close.len_utf8()..).unwrap_or_default();
        }
    }
    if found.is_empty() {
        // A path alone between separators, or the last word before one
        // (`couldn't open temporary file ./sedX: Read-only file system`).
        for part in line.split(": ").map(str::trim) {
            let word = if part.contains(' ') {
                part.rsplit(' ').next().unwrap_or_default()
            } else {
                part
            };
            if ["/", "./", "../"]
                .iter()
                .any(|start| word.starts_with(start))
            {
                found.push(word.to_owned());
            }
        }
    }
    found
}

fn looks_like_path(text: &str) -> bool {
    !text.is_empty()
        && text.len() < 4096
        && !text.contains('\n')
        && (text.starts_with('/')
            || text.starts_with("./")
            || text.starts_with("../")
            || !text.contains(' '))
}

/// `path` made absolute against `cwd`, with `.` and `..` folded
/// lexically (the file may not exist).
fn absolute(path: &str, cwd: &Path) -> PathBuf {
    let joined = cwd.join(path);
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Vec<PathBuf> {
        vec![PathBuf::from("/work/repo"), PathBuf::from("/tmp/agent")]
    }

    fn notes(output: &str, root: bool) -> Vec<String> {
        refused_writes(
            output,
            &roots(),
            Some(Path::new("/work/repo")),
            root,
            "outside the writable roots",
        )
    }

    #[test]
    fn tools_refused_a_write_outside_the_roots_are_named() {
        for (output, path) in [
            (
                "touch: cannot touch '/etc/agent-x': Permission denied",
                "/etc/agent-x",
            ),
            (
                "mkdir: cannot create directory ‘/opt/x’: Permission denied",
                "/opt/x",
            ),
            (
                "cp: cannot create regular file '/usr/local/bin/tool': Permission denied",
                "/usr/local/bin/tool",
            ),
            (
                "npm ERR! Error: EACCES: permission denied, mkdir '/usr/lib/node_modules/x'",
                "/usr/lib/node_modules/x",
            ),
            (
                "sed: couldn't open temporary file ../other/sedX: Read-only file system",
                "/work/other/sedX",
            ),
            (
                "rm: cannot remove '../sibling/f': Permission denied",
                "/work/sibling/f",
            ),
        ] {
            assert_eq!(
                notes(output, false),
                [format!(
                    "[sandbox: refused write to {path} (outside the writable roots)]"
                )],
                "{output}"
            );
        }
    }

    #[test]
    fn as_root_a_bare_permission_error_counts() {
        let python = "PermissionError: [Errno 13] Permission denied: '/home/u/.bashrc'";
        assert!(notes(python, false).is_empty());
        assert_eq!(
            notes(python, true),
            ["[sandbox: refused write to /home/u/.bashrc (outside the writable roots)]"]
        );
        let output = "bash: /etc/agent-x: Permission denied";
        assert!(
            notes(output, false).is_empty(),
            "a user's own read errors look the same"
        );
        assert_eq!(
            notes(output, true),
            ["[sandbox: refused write to /etc/agent-x (outside the writable roots)]"]
        );
    }

    #[test]
    fn writes_inside_the_roots_and_other_errors_are_left_alone() {
        for output in [
            "touch: cannot touch 'inside/f': Permission denied",
            "touch: cannot touch '/tmp/agent/f': Permission denied",
            "cat: /etc/shadow: Permission denied",
            "error: could not compile `x`",
            "ls: cannot access '/nope': No such file or directory",
        ] {
            assert!(notes(output, false).is_empty(), "{output}");
        }
    }

    #[test]
    fn many_refusals_are_counted_past_five_and_repeats_named_once() {
        let output: String = (0..8)
            .map(|i| format!("touch: cannot touch '/etc/f{i}': Permission denied\n"))
            .chain(std::iter::once(
                "touch: cannot touch '/etc/f0': Permission denied\n".to_owned(),
            ))
            .collect();
        let lines = notes(&output, false);
        assert_eq!(lines.len(), 6, "{lines:?}");
        assert_eq!(
            lines[5],
            "[sandbox: 3 more writes refused (outside the writable roots)]"
        );
    }
}
