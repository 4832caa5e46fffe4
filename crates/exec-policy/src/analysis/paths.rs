//! Path reasoning for the rules: lexical normalisation, protected paths,
//! block devices and system directories.

use crate::glob::glob_match;

/// The last component of a program path (`/usr/bin/rm` -> `rm`).
pub(crate) fn basename(program: &str) -> &str {
    // Every rule asks for the program's name of every simple command: a
    // plain byte loop over a short word costs a fraction of `rsplit`'s
    // searcher (a tenth of a 10 KB script's check went there).
    match program.bytes().rposition(|byte| byte == b'/') {
        Some(slash) => &program[slash + 1..],
        None => program,
    }
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

/// Directories whose files no command should overwrite: programs,
/// libraries, kernels and the kernel's control files. `/etc` is not among
/// them: administration writes its files (hosts, apt sources, a web
/// server's site); only its vital files ([`VITAL_FILES`]) are protected.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libexec",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/boot",
    "/sys",
    "/proc",
];

/// Kernel settings ordinary administration writes (`/proc/sys/...`,
/// transparent huge pages), inside [`SYSTEM_DIRS`].
const TUNABLE_DIRS: &[&str] = &["/proc/sys", "/sys/kernel/mm"];

/// Files whose loss or replacement breaks the machine (no login, no
/// program starts, no boot), as component globs, each with a name it
/// stands for (so a glob target such as `/boot/vmlinuz*` is checked too).
const VITAL_FILES: &[(&str, &str)] = &[
    ("/etc/passwd", "/etc/passwd"),
    ("/etc/shadow", "/etc/shadow"),
    ("/etc/group", "/etc/group"),
    ("/etc/gshadow", "/etc/gshadow"),
    ("/etc/sudoers", "/etc/sudoers"),
    ("/etc/sudoers.d", "/etc/sudoers.d"),
    ("/etc/fstab", "/etc/fstab"),
    ("/etc/ld.so.preload", "/etc/ld.so.preload"),
    ("/etc/ld.so.cache", "/etc/ld.so.cache"),
    ("/etc/nsswitch.conf", "/etc/nsswitch.conf"),
    ("/etc/pam.d", "/etc/pam.d"),
    ("/etc/pam.d/*", "/etc/pam.d/common-auth"),
    ("/lib*/ld-linux*", "/lib64/ld-linux-x86-64.so.2"),
    (
        "/lib*/*-linux-gnu*/ld-linux*",
        "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    ),
    ("/usr/lib*/ld-linux*", "/usr/lib64/ld-linux-x86-64.so.2"),
    (
        "/usr/lib*/*-linux-gnu*/ld-linux*",
        "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    ),
    ("/lib*/libc.so*", "/lib64/libc.so.6"),
    (
        "/lib*/*-linux-gnu*/libc.so*",
        "/lib/x86_64-linux-gnu/libc.so.6",
    ),
    ("/usr/lib*/libc.so*", "/usr/lib64/libc.so.6"),
    (
        "/usr/lib*/*-linux-gnu*/libc.so*",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
    ),
    ("/boot/vmlinuz*", "/boot/vmlinuz"),
    ("/boot/initrd*", "/boot/initrd.img"),
    ("/boot/grub", "/boot/grub"),
    ("/boot/grub/grub.cfg", "/boot/grub/grub.cfg"),
    ("/bin/sh", "/bin/sh"),
    ("/bin/bash", "/bin/bash"),
    ("/usr/bin/sudo", "/usr/bin/sudo"),
];

/// Device nodes that are not disks: writing them is ordinary.
const HARMLESS_DEVICES: &[&str] = &[
    "null",
    "zero",
    "full",
    "random",
    "urandom",
    "tty*",
    "pts",
    "ptmx",
    "console",
    "stdin",
    "stdout",
    "stderr",
    "fd",
    "shm",
    "mqueue",
    "hugepages",
    "tcp",
    "udp",
    "log",
    "kmsg",
    "snd",
    "dri",
    "input",
    "fuse",
    "net",
    "pty*",
    "char",
    "vcs*",
    "vhost-*",
    "kvm",
    "uinput",
    "rtc*",
    "watchdog*",
    "cpu",
    "bus",
    "usb",
    "video*",
    "autofs",
    "ppp",
    "userfaultfd",
];

/// Where a target sits, for the rules.
#[derive(Debug, Clone)]
pub(crate) struct Protected {
    /// Each protected path as components.
    paths: Vec<Vec<String>>,
    /// The home directory.
    pub(crate) home: String,
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
        Self {
            paths,
            home: home.to_owned(),
        }
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

/// `path` with the kernel's magic links resolved: `/proc/PID/root` (any
/// process's root, `self`, `thread-self`) is `/`, `/proc/self/cwd` is
/// `cwd` when known.
pub(crate) fn without_magic_links(path: &str, cwd: Option<&str>) -> String {
    // Before `..` is resolved: `/proc/self/cwd/..` climbs from the cwd.
    let parts: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    if parts.len() >= 3 && parts[0] == "proc" {
        let process = parts[1];
        let is_process = matches!(process, "self" | "thread-self")
            || process.chars().all(|c| c.is_ascii_digit());
        if is_process && parts[2] == "root" {
            return format!("/{}", parts[3..].join("/"));
        }
        if is_process
            && parts[2] == "cwd"
            && let Some(cwd) = cwd
        {
            return join_path(cwd, &parts[3..].join("/"));
        }
    }
    path.to_owned()
}

/// Whether `target` (absolute) is a disk or partition: anything under
/// `/dev` but the character devices and pseudo-files programs write every
/// day (`/dev/null`, terminals, `/dev/shm`, bash's `/dev/tcp`).
pub(crate) fn is_block_device(target: &str) -> bool {
    let parts = components(target);
    parts.len() >= 2
        && parts[0] == "dev"
        && !HARMLESS_DEVICES
            .iter()
            .any(|pattern| glob_match(pattern, parts[1]))
}

/// Whether `target` (absolute; a pattern when `glob`) is or may be a
/// vital file ([`VITAL_FILES`]).
pub(crate) fn is_vital_file(target: &str, glob: bool) -> bool {
    let parts = components(target);
    VITAL_FILES.iter().any(|(pattern, sample)| {
        let by_pattern = components_match(&components(pattern), &parts);
        by_pattern || (glob && components_match(&parts, &components(sample)))
    })
}

/// Whether each component of `pattern` matches the same of `parts`.
fn components_match(pattern: &[&str], parts: &[&str]) -> bool {
    pattern.len() == parts.len()
        && pattern
            .iter()
            .zip(parts)
            .all(|(pattern, part)| glob_match(pattern, part))
}

/// Whether writing to `target` overwrites part of the system: a block
/// device, a vital file, a file among the programs, libraries and kernel
/// controls ([`SYSTEM_DIRS`], not the kernel settings), or a protected
/// path itself.
pub(crate) fn is_system_target(target: &str, protected: &Protected) -> bool {
    if is_block_device(target) || is_vital_file(target, false) {
        return true;
    }
    let normal = format!("/{}", components(target).join("/"));
    let under = |dir: &&str| normal == *dir || normal.starts_with(&format!("{dir}/"));
    (SYSTEM_DIRS.iter().any(under) && !TUNABLE_DIRS.iter().any(under))
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
        assert!(is_block_device("/dev/block/8:0"));
        assert!(is_block_device("/dev/vg0/root"));
        assert!(!is_block_device("/dev/tcp/localhost/80"));
        assert!(!is_block_device("/dev/shm/x"));
        assert!(is_system_target("/etc/passwd", &p));
        assert!(is_system_target("/usr/bin/ls", &p));
        assert!(!is_system_target("/etc/hosts", &p));
        assert!(!is_system_target("/etc/nginx/conf.d/x.conf", &p));
        assert!(!is_system_target("/usr/local/bin/tool", &p));
        assert!(!is_system_target("/proc/sys/vm/drop_caches", &p));
        assert!(is_vital_file("/boot/vmlinuz*", true));
        assert!(is_vital_file("/lib/x86_64-linux-gnu/libc.so.6", false));
        assert!(!is_vital_file("/etc/hosts", false));
        assert!(is_system_target("/boot/vmlinuz", &p));
        assert!(is_system_target("/proc/sysrq-trigger", &p));
        assert!(!is_system_target("/tmp/x", &p));
        assert!(!is_system_target("/dev/null", &p));
        assert!(!is_system_target("/home/agent/.bashrc", &p));
    }
}
