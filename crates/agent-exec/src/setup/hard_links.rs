//! Hard links in the writable roots: the one way out of `workspace-write`
//! that the roots themselves hold. Landlock grants writes by path, so a
//! file inside a root that has another name outside (a hard link made
//! before the server started) can be written through its inside name, and
//! the outside name changes with it. Start-up samples the roots in the
//! background and says so on stderr.

use std::collections::VecDeque;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// Entries (files and directories) looked at, at most, over all roots.
pub(crate) const SAMPLE: usize = 5000;
/// Files named in the warning, at most.
const NAMED: usize = 5;

/// What a scan found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Scan {
    /// Entries looked at (the sample's size).
    pub(crate) entries: usize,
    /// Files among them.
    pub(crate) files: usize,
    /// Regular files with more than one link among them.
    pub(crate) linked: usize,
    /// The first few of those.
    pub(crate) named: Vec<PathBuf>,
}

/// Walks `roots` breadth first (symlinks are not followed, `skip` is not
/// entered) until `limit` entries have been looked at, counting regular
/// files with more than one link.
pub(crate) fn scan(roots: &[PathBuf], skip: &[PathBuf], limit: usize) -> Scan {
    let mut found = Scan::default();
    let mut queue: VecDeque<PathBuf> = roots.iter().cloned().collect();
    while let Some(dir) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if found.entries >= limit {
                return found;
            }
            found.entries += 1;
            let path = entry.path();
            // `DirEntry::metadata` does not follow a symlink.
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                if !skip.iter().any(|skipped| path.starts_with(skipped)) {
                    queue.push_back(path);
                }
                continue;
            }
            found.files += 1;
            if meta.is_file() && meta.nlink() > 1 {
                found.linked += 1;
                if found.named.len() < NAMED {
                    found.named.push(path);
                }
            }
        }
    }
    found
}

/// The warning line for `scan`, if it found any linked file.
pub(crate) fn warning(scan: &Scan) -> Option<String> {
    if scan.linked == 0 {
        return None;
    }
    let mut names: Vec<String> = scan
        .named
        .iter()
        .map(|path| format!("`{}`", path.display()))
        .collect();
    if scan.linked > names.len() {
        names.push("...".to_owned());
    }
    Some(format!(
        "agent-exec: warning: {} of {} files sampled in the writable roots have more than one hard link ({}): \
         the sandbox grants writes by path, so a command can change such a file through its name inside a root, \
         and its other names outside change with it (docs/sandbox.md)",
        scan.linked,
        scan.files,
        names.join(", ")
    ))
}

/// Scans `roots` on a thread of its own, so serving starts at once, and
/// writes the warning to stderr if there is one.
pub(crate) fn warn_in_background(roots: Vec<PathBuf>, skip: Vec<PathBuf>) {
    let spawned = std::thread::Builder::new()
        .name("hard-link-scan".into())
        .spawn(move || {
            let found = scan(&roots, &skip, SAMPLE);
            if let Some(line) = warning(&found) {
                crate::report(&line);
            }
            tracing::info!(
                files = found.files,
                linked = found.linked,
                "hard-link scan of the writable roots done"
            );
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot scan the writable roots for hard links");
    }
}

/// Whether `path` is inside one of `dirs`.
pub(crate) fn within(path: &Path, dirs: &[PathBuf]) -> bool {
    dirs.iter().any(|dir| path.starts_with(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_files_are_found_and_named_up_to_five() {
        let root = tempfile::tempdir().expect("root");
        let outside = tempfile::tempdir().expect("outside");
        std::fs::create_dir(root.path().join("sub")).expect("mkdir");
        std::fs::write(root.path().join("plain"), "x").expect("write");
        for n in 0..7 {
            let original = outside.path().join(format!("o{n}"));
            std::fs::write(&original, "x").expect("write");
            std::fs::hard_link(&original, root.path().join("sub").join(format!("l{n}")))
                .expect("link");
        }
        std::os::unix::fs::symlink(outside.path(), root.path().join("elsewhere")).expect("symlink");
        let found = scan(&[root.path().to_path_buf()], &[], SAMPLE);
        // plain, sub, elsewhere, and the seven links.
        assert_eq!(found.entries, 10);
        assert_eq!((found.files, found.linked, found.named.len()), (9, 7, 5));
        let line = warning(&found).expect("a warning");
        assert!(
            line.starts_with("agent-exec: warning: 7 of 9 files sampled"),
            "{line}"
        );
        assert!(line.contains("/sub/l") && line.contains(", ...)"), "{line}");
    }

    #[test]
    fn the_sample_is_bounded_and_skipped_dirs_are_not_entered() {
        let root = tempfile::tempdir().expect("root");
        let skipped = root.path().join("skipped");
        std::fs::create_dir(&skipped).expect("mkdir");
        let original = skipped.join("a");
        std::fs::write(&original, "x").expect("write");
        std::fs::hard_link(&original, skipped.join("b")).expect("link");
        for n in 0..10 {
            std::fs::write(root.path().join(format!("f{n}")), "x").expect("write");
        }
        let roots = [root.path().to_path_buf()];
        assert_eq!(
            scan(&roots, std::slice::from_ref(&skipped), SAMPLE).linked,
            0
        );
        assert_eq!(scan(&roots, &[], SAMPLE).linked, 2);
        assert_eq!(scan(&roots, &[], 3).entries, 3);
        // Directories count toward the sample: a tree of empty ones ends it too.
        let deep = tempfile::tempdir().expect("deep");
        for n in 0..10 {
            std::fs::create_dir(deep.path().join(format!("d{n}"))).expect("mkdir");
        }
        let dirs = scan(&[deep.path().to_path_buf()], &[], 4);
        assert_eq!((dirs.entries, dirs.files), (4, 0));
        assert_eq!(warning(&scan(&roots, &[skipped], SAMPLE)), None);
        assert!(within(&root.path().join("x/y"), &roots));
    }
}
