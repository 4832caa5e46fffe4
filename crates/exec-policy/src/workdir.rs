//! Where commands may run: an existing directory inside an allowed root.

use std::io;
use std::path::{Path, PathBuf};

/// Why a working directory was refused.
#[derive(Debug, thiserror::Error)]
pub enum WorkdirError {
    /// Nothing exists at the path.
    #[error("working directory `{}` does not exist", path.display())]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// The path is not a directory.
    #[error("working directory `{}` is not a directory", path.display())]
    NotADirectory {
        /// The path as given.
        path: PathBuf,
    },
    /// The directory lies outside every allowed root.
    #[error("working directory `{}` is outside the allowed roots ({})", path.display(), list(roots))]
    OutsideRoots {
        /// The canonical path.
        path: PathBuf,
        /// The allowed roots.
        roots: Vec<PathBuf>,
    },
    /// The path could not be examined.
    #[error("cannot examine working directory `{}`", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: io::Error,
    },
}

fn list(roots: &[PathBuf]) -> String {
    roots
        .iter()
        .map(|root| format!("`{}`", root.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Canonicalises `path` (symlinks resolved) and checks that it is a directory.
pub fn canonical_dir(path: &Path) -> Result<PathBuf, WorkdirError> {
    let canonical = path.canonicalize().map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => WorkdirError::NotFound {
            path: path.to_owned(),
        },
        io::ErrorKind::NotADirectory => WorkdirError::NotADirectory {
            path: path.to_owned(),
        },
        _ => WorkdirError::Io {
            path: path.to_owned(),
            source,
        },
    })?;
    if !canonical.is_dir() {
        return Err(WorkdirError::NotADirectory {
            path: path.to_owned(),
        });
    }
    Ok(canonical)
}

/// Whether `path` (canonical) is one of `roots` (canonical) or lies below one.
pub fn is_within_roots(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

/// Canonicalises `path` and checks it exists, is a directory, and lies inside
/// one of `roots` (which must be canonical, see [`canonical_dir`]).
pub fn resolve_working_dir(path: &Path, roots: &[PathBuf]) -> Result<PathBuf, WorkdirError> {
    let canonical = canonical_dir(path)?;
    if !is_within_roots(&canonical, roots) {
        return Err(WorkdirError::OutsideRoots {
            path: canonical,
            roots: roots.to_vec(),
        });
    }
    Ok(canonical)
}

/// For a working directory that no longer exists (deleted, or replaced by
/// a file): the nearest directory above `path` that still does and lies
/// inside `roots`, as `(path, canonical)`, where `path` is the ancestor as
/// written (a prefix of `path`, so the session keeps the names it used).
/// `None` when the walk leaves the roots, or reaches one that cannot be
/// examined, before it finds one.
pub fn nearest_existing_ancestor(path: &Path, roots: &[PathBuf]) -> Option<(PathBuf, PathBuf)> {
    for ancestor in path.ancestors().skip(1) {
        match canonical_dir(ancestor) {
            Ok(canonical) if is_within_roots(&canonical, roots) => {
                return Some((ancestor.to_owned(), canonical));
            }
            Err(WorkdirError::NotFound { .. } | WorkdirError::NotADirectory { .. }) => {}
            // Outside the roots, or unreadable: going higher would only
            // leave the roots further behind.
            Ok(_) | Err(_) => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("exec-policy-workdir-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("root/inner")).unwrap();
        fs::create_dir_all(dir.join("outside")).unwrap();
        fs::write(dir.join("root/file"), "x").unwrap();
        dir.canonicalize().unwrap()
    }

    #[test]
    fn inside_a_root_resolves_to_canonical_path() {
        let dir = scratch("inside");
        let roots = [dir.join("root")];
        let resolved = resolve_working_dir(&dir.join("root/inner/../inner"), &roots).unwrap();
        assert_eq!(resolved, dir.join("root/inner"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn each_refusal_says_which_rule() {
        let dir = scratch("refusals");
        let roots = [dir.join("root")];
        let missing = resolve_working_dir(&dir.join("root/missing"), &roots).unwrap_err();
        assert!(
            matches!(missing, WorkdirError::NotFound { .. }),
            "{missing}"
        );
        assert!(missing.to_string().ends_with("does not exist"));
        let file = resolve_working_dir(&dir.join("root/file"), &roots).unwrap_err();
        assert!(file.to_string().ends_with("is not a directory"), "{file}");
        let outside = resolve_working_dir(&dir.join("outside"), &roots).unwrap_err();
        assert!(
            outside.to_string().contains("is outside the allowed roots"),
            "{outside}"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_deleted_directory_falls_back_to_its_nearest_ancestor_inside_the_roots() {
        let dir = scratch("ancestor");
        let roots = [dir.join("root")];
        let deep = dir.join("root/inner/gone/deeper");
        assert_eq!(
            nearest_existing_ancestor(&deep, &roots),
            Some((dir.join("root/inner"), dir.join("root/inner")))
        );
        // A file where the directory was is no directory either.
        assert_eq!(
            nearest_existing_ancestor(&dir.join("root/file/x"), &roots),
            Some((dir.join("root"), dir.join("root")))
        );
        // The root itself gone: nothing above it is inside the roots.
        let gone_root = [dir.join("root/inner/gone")];
        assert_eq!(nearest_existing_ancestor(&deep, &gone_root), None);
        fs::remove_dir_all(dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_resolved_before_the_root_check() {
        let dir = scratch("symlink");
        std::os::unix::fs::symlink(dir.join("outside"), dir.join("root/escape")).unwrap();
        let roots = [dir.join("root")];
        let error = resolve_working_dir(&dir.join("root/escape"), &roots).unwrap_err();
        assert!(
            matches!(error, WorkdirError::OutsideRoots { .. }),
            "{error}"
        );
        fs::remove_dir_all(dir).unwrap();
    }
}
