//! Paths as another process sees them, resolved from outside it: what an
//! exec judge needs to know which file `/dev/fd/4` or `$tmp/link/etc` is in
//! the process about to run it.
//!
//! The server cannot simply open `/proc/PID/root/PATH`: an absolute symlink
//! met on the way (`/dev/fd` -> `/proc/self/fd`) is resolved against the
//! server's own root, and `/proc/self` is the server. So the path is walked
//! one component at a time in the process's view (its root, its `/proc/self`,
//! its descriptors), each link read and spliced in, as the kernel would for
//! the process.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// At most this many symlinks on one path, as the kernel (`ELOOP`).
const MAX_LINKS: usize = 40;

/// One process's view of the file system, read through `/proc/PID`.
#[derive(Debug, Clone, Copy)]
pub struct ProcessView {
    pid: i32,
}

impl ProcessView {
    /// The view of process `pid` (in this process's PID namespace).
    #[must_use]
    pub fn of(pid: i32) -> Self {
        Self { pid }
    }

    /// Where this process can open what the other process calls `logical`
    /// (absolute, already resolved): its `/proc/self` is `/proc/PID`, and
    /// everything else lies under its root.
    #[must_use]
    pub fn host_path(&self, logical: &Path) -> PathBuf {
        let own = PathBuf::from(format!("/proc/{}", self.pid));
        for self_dir in ["/proc/self", "/proc/thread-self"] {
            if let Ok(rest) = logical.strip_prefix(self_dir) {
                return own.join(rest);
            }
        }
        let mut host = own.join("root").into_os_string();
        host.push(logical.as_os_str());
        PathBuf::from(host)
    }

    /// `path` (relative to `cwd`, itself resolved, unless absolute) with
    /// every symlink the process would follow resolved, in the process's
    /// own terms. The last component is followed only when `follow_last` is
    /// set or the path ends in `/` (as `rm -rf link/` removes what the link
    /// points to).
    /// Components that do not exist are kept as written. `None` when the
    /// path loops or leads to something that is no path (a pipe, a socket).
    #[must_use]
    pub fn resolve(&self, cwd: &Path, path: &OsStr, follow_last: bool) -> Option<PathBuf> {
        let follow_last = follow_last || path.as_bytes().ends_with(b"/");
        let mut pending: VecDeque<OsString> = VecDeque::new();
        let start = Path::new(path);
        // The working directory comes from `/proc/PID/cwd`: already resolved.
        let mut done = if start.is_absolute() {
            PathBuf::from("/")
        } else {
            cwd.to_path_buf()
        };
        push_components(&mut pending, start, false);
        let mut links = 0;
        let mut exists = true;
        while let Some(name) = pending.pop_front() {
            if name == ".." {
                done.pop();
                continue;
            }
            let next = done.join(&name);
            let follow = !pending.is_empty() || follow_last;
            if !exists || !follow {
                done = next;
                continue;
            }
            let host = self.host_path(&next);
            match std::fs::symlink_metadata(&host) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_LINKS {
                        return None;
                    }
                    let target = std::fs::read_link(&host).ok()?;
                    // A descriptor's link names no path for a pipe, a socket
                    // or an anonymous inode (`pipe:[123]`).
                    let bytes = target.as_os_str().as_bytes();
                    if !target.is_absolute()
                        && (bytes.windows(2).any(|pair| pair == b":[")
                            || bytes.starts_with(b"anon_inode:"))
                    {
                        return None;
                    }
                    if target.is_absolute() {
                        done = PathBuf::from("/");
                    }
                    push_components(&mut pending, &target, true);
                }
                Ok(_) => done = next,
                Err(_) => {
                    exists = false;
                    done = next;
                }
            }
        }
        Some(done)
    }

    /// The names in directory `dir` (absolute, resolved) as the process
    /// sees it, `.` and `..` left out; `None` when it cannot be read.
    #[must_use]
    pub fn entries(&self, dir: &Path) -> Option<Vec<OsString>> {
        let read = std::fs::read_dir(self.host_path(dir)).ok()?;
        Some(
            read.filter_map(|entry| entry.ok().map(|entry| entry.file_name()))
                .collect(),
        )
    }
}

/// Adds `path`'s components (names and `..`; `.` and the root dropped) to
/// `pending`, at the front when `front` (a link's target replaces the link).
fn push_components(pending: &mut VecDeque<OsString>, path: &Path, front: bool) {
    let names: Vec<OsString> = path
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    if front {
        for name in names.into_iter().rev() {
            pending.push_front(name);
        }
    } else {
        pending.extend(names);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn own() -> ProcessView {
        ProcessView::of(i32::try_from(std::process::id()).expect("a pid fits"))
    }

    fn resolve(cwd: &Path, path: &str, follow_last: bool) -> Option<PathBuf> {
        own().resolve(cwd, OsStr::new(path), follow_last)
    }

    #[test]
    fn links_on_the_way_are_followed_and_the_last_only_when_asked() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        std::os::unix::fs::symlink("/", base.join("r")).expect("a link");
        std::os::unix::fs::symlink("../", base.join("up")).expect("a link");
        assert_eq!(resolve(&base, "r/etc", false), Some(PathBuf::from("/etc")));
        assert_eq!(resolve(&base, "r/etc/", false), Some(PathBuf::from("/etc")));
        assert_eq!(resolve(&base, "r", false), Some(base.join("r")));
        assert_eq!(resolve(&base, "r", true), Some(PathBuf::from("/")));
        assert_eq!(resolve(&base, "r/", false), Some(PathBuf::from("/")));
        assert_eq!(
            resolve(&base, "up/x/../y", false),
            Some(base.parent().expect("a parent").join("y"))
        );
        assert_eq!(
            resolve(
                Path::new("/"),
                &format!("{}/r/usr/./lib", base.display()),
                false
            ),
            Some(PathBuf::from("/usr/lib"))
        );
        assert_eq!(
            resolve(&base, "missing/a/b", true),
            Some(base.join("missing/a/b"))
        );
    }

    #[test]
    fn the_process_own_descriptors_are_its_own() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::create_dir(base.join("target")).expect("a dir");
        let opened = std::fs::File::open(base.join("target")).expect("opened");
        let fd = opened.as_raw_fd();
        for spelling in [
            format!("/dev/fd/{fd}/x"),
            format!("/proc/self/fd/{fd}/x"),
            format!("/proc/thread-self/fd/{fd}/x"),
        ] {
            assert_eq!(
                resolve(Path::new("/"), &spelling, false),
                Some(base.join("target/x")),
                "{spelling}"
            );
        }
        let (reader, _writer) = std::io::pipe().expect("a pipe");
        assert_eq!(
            resolve(
                Path::new("/"),
                &format!("/dev/fd/{}", reader.as_raw_fd()),
                true
            ),
            None
        );
    }

    #[test]
    fn a_loop_is_no_path() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        std::os::unix::fs::symlink("b", base.join("a")).expect("a link");
        std::os::unix::fs::symlink("a", base.join("b")).expect("a link");
        assert_eq!(resolve(&base, "a", true), None);
        assert_eq!(resolve(&base, "a", false), Some(base.join("a")));
    }

    #[test]
    fn entries_are_read_in_the_process_view() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::write(base.join("one"), "").expect("a file");
        std::fs::write(base.join(".two"), "").expect("a file");
        let mut names = own().entries(&base).expect("read");
        names.sort();
        assert_eq!(names, [OsString::from(".two"), OsString::from("one")]);
    }
}
