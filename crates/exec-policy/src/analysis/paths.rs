//! Path reasoning for the rules: lexical normalisation, protected paths,
//! block devices and system directories.

use crate::glob::glob_match;

/// The last component of a program path (`/usr/bin/rm` -> `rm`).
pub(crate) fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// `base` joined with `path` unless `path` is absolute.
pub(crate) fn join_path(base: &str, path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{}/{path}", base.trim_end_matches('/'))
    }
}

/// The components of an absolute path after resolving `.`, `..` and
/// repeated slashes lexically (`..` at the root stays at the root).
pub(crate) fn components(path: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The protected paths built into every policy. A `*` component stands for
/// any one name (`/var/lib/*` is every direct child of /var/lib), and such an
/// entry does not extend to patterns inside that child (`/var/lib/apt/*`).
/// Other /etc subdirectories and /usr/local are left out on purpose: they are
/// what administrators and Dockerfiles rebuild.
pub(crate) const BUILTIN_PROTECTED: &[&str] = &[
    "/",
    "/home",
    "/root",
    "/etc",
    "/etc/ssh",
    "/usr",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/libexec",
    "/usr/share",
    "/usr/include",
    "/bin",
    "/sbin",
    "/lib",
    "/lib/modules",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/lib32",
    "/lib64",
    "/libx32",
    "/boot",
    "/boot/*",
    "/var",
    "/var/lib",
    "/var/lib/*",
    "/opt",
    "/srv",
    "/sys",
    "/proc",
    "/dev",
];

/// Directories inside the home that hold keys and configuration, protected
/// like the home itself.
const HOME_PROTECTED: &[&str] = &[".ssh", ".gnupg", ".config", ".local"];

/// Directories whose contents no command should overwrite.
const SYSTEM_DIRS: &[&str] = &[
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/sys",
    "/proc",
];

/// Block device names under /dev (globs on the first component).
const BLOCK_DEVICES: &[&str] = &[
    "sd*", "nvme*", "vd*", "xvd*", "hd*", "mmcblk*", "disk*", "loop*", "dm-*", "md*", "mapper",
    "sr*", "nbd*",
];

/// Where a target sits, for the rules.
#[derive(Debug, Clone)]
pub(crate) struct Protected {
    /// Each protected path as components.
    paths: Vec<Vec<String>>,
}

impl Protected {
    /// The built-in list plus `home` and `extra` (already expanded).
    pub(crate) fn new(home: &str, extra: &[String]) -> Self {
        let home_dirs: Vec<String> = HOME_PROTECTED
            .iter()
            .map(|dir| join_path(home, dir))
            .collect();
        let mut paths: Vec<Vec<String>> = BUILTIN_PROTECTED
            .iter()
            .copied()
            .chain(std::iter::once(home))
            .chain(home_dirs.iter().map(String::as_str))
            .chain(extra.iter().map(String::as_str))
            .map(|p| components(p).into_iter().map(str::to_owned).collect())
            .collect();
        paths.sort();
        paths.dedup();
        Self { paths }
    }

    /// The protected path `target` is or reaches, if any. `target` is
    /// absolute (callers resolve relative paths against a known cwd first);
    /// `glob` says whether it is a pattern.
    pub(crate) fn reached_by(&self, target: &str, glob: bool) -> Option<String> {
        let parts = components(target);
        for protected in &self.paths {
            let n = protected.len();
            let any_child = protected.iter().any(|prot| prot == "*");
            let same = |count: usize| {
                parts.len() == count
                    && parts.iter().take(n).zip(protected).all(|(part, prot)| {
                        if prot == "*" {
                            true
                        } else if glob {
                            glob_match(part, prot)
                        } else {
                            part == prot
                        }
                    })
            };
            // The path itself (or a pattern matching it)...
            let itself = same(n);
            // ...or a pattern for everything directly inside it (`/etc/*`).
            let contents = glob
                && !any_child
                && same(n + 1)
                && parts.last().is_some_and(|last| crate::glob::has_glob(last));
            let lib_family = !glob
                && n == 1
                && protected[0] == "lib"
                && parts.len() == 1
                && parts[0].starts_with("lib");
            if itself || contents || lib_family {
                return Some(format!("/{}", protected.join("/")));
            }
        }
        None
    }
}

/// Whether `target` (absolute, normalised) is a block device.
pub(crate) fn is_block_device(target: &str) -> bool {
    let parts = components(target);
    parts.len() >= 2
        && parts[0] == "dev"
        && BLOCK_DEVICES
            .iter()
            .any(|pattern| glob_match(pattern, parts[1]))
}

/// Whether writing to `target` overwrites part of the system (a block
/// device, a file in a system directory, or a protected path itself).
pub(crate) fn is_system_target(target: &str, protected: &Protected) -> bool {
    if is_block_device(target) {
        return true;
    }
    let normal = format!("/{}", components(target).join("/"));
    SYSTEM_DIRS
        .iter()
        .any(|dir| normal == *dir || normal.starts_with(&format!("{dir}/")))
        || protected.reached_by(target, false).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protected() -> Protected {
        Protected::new("/home/agent", &["/data".to_owned()])
    }

    #[test]
    fn literal_paths_match_only_themselves() {
        let p = protected();
        for target in [
            "/",
            "//",
            "/.",
            "/etc",
            "/etc/",
            "/usr/..",
            "/home/agent",
            "/data",
            "/lib64",
            "/libfoo",
        ] {
            assert!(p.reached_by(target, false).is_some(), "{target}");
        }
        for target in [
            "/etc/nginx",
            "/tmp",
            "/home/agent/project",
            "/data/x",
            "/usr/local",
        ] {
            assert_eq!(p.reached_by(target, false), None, "{target}");
        }
    }

    #[test]
    fn globs_reach_paths_and_their_contents() {
        let p = protected();
        for target in [
            "/*",
            "/e*",
            "/etc/*",
            "/home/agent/*",
            "/[e]tc",
            "/?sr",
            "/var/*.log",
        ] {
            assert!(p.reached_by(target, true).is_some(), "{target}");
        }
        for target in [
            "/tmp/*",
            "/etc/nginx/*",
            "/home/agent/src/*",
            "/var/log/*.log",
        ] {
            assert_eq!(p.reached_by(target, true), None, "{target}");
        }
    }

    #[test]
    fn devices_and_system_files() {
        let p = protected();
        assert!(is_block_device("/dev/sda"));
        assert!(is_block_device("/dev/nvme0n1p1"));
        assert!(is_block_device("/dev/disk/by-id/x"));
        assert!(!is_block_device("/dev/null"));
        assert!(!is_block_device("/dev/stdout"));
        assert!(is_system_target("/etc/passwd", &p));
        assert!(is_system_target("/boot/vmlinuz", &p));
        assert!(is_system_target("/proc/sysrq-trigger", &p));
        assert!(!is_system_target("/tmp/x", &p));
        assert!(!is_system_target("/dev/null", &p));
        assert!(!is_system_target("/home/agent/.bashrc", &p));
    }
}
