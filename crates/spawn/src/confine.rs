//! Linux confinement applied in the child before `execve`: a Landlock
//! ruleset (where writes may go), seccomp filters (`filter.rs`: no reboot,
//! kexec, module loading or ptrace; with `--network deny` no non-Unix
//! sockets and no `io_uring`), resource limits, and a pids cgroup.
//! Everything that can fail is prepared and checked here, before any
//! command runs; the child only makes the final system calls, and fails
//! rather than run less confined.

#![allow(
    unsafe_code,
    reason = "Landlock and seccomp have no safe wrappers here; each call is a plain syscall on prepared data"
)]

use std::ffi::{CString, c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::filter::{self, MAX_PROGRAMS};
use crate::spec::{CgroupParent, ConfinementSpec};

/// `setrlimit`'s resource type: glibc's own alias, a plain `c_int` on musl.
#[cfg(target_env = "gnu")]
type RlimitResource = libc::__rlimit_resource_t;
/// `setrlimit`'s resource type: glibc's own alias, a plain `c_int` on musl.
#[cfg(not(target_env = "gnu"))]
type RlimitResource = libc::c_int;

/// Why a confinement cannot be enforced on this machine. Where the kernel
/// refused, its error is the `source()`, never repeated in the message (a
/// printer walking the chain, `{:#}` in anyhow, shows it once).
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The kernel has no Landlock (or it is disabled).
    #[error("the kernel does not support Landlock (needed for --sandbox)")]
    NoLandlock(#[source] io::Error),
    /// A path given as writable cannot be opened.
    #[error("cannot open `{path}` for a Landlock rule")]
    BadPath {
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The kernel refused seccomp (`PR_GET_SECCOMP` failed).
    #[error("cannot install the sandbox's seccomp filter")]
    SeccompRefused(#[source] io::Error),
    /// The seccomp programs cannot be built for this architecture, or do
    /// not fit.
    #[error("cannot install the sandbox's seccomp filter: {0}")]
    NoSeccomp(String),
    /// No PID and mount namespace can be made for a command.
    #[error("cannot give commands a PID namespace of their own: {reason}")]
    NoNamespace {
        /// Why, in words, with a hint where one helps.
        reason: String,
        /// What the kernel said, where it refused.
        #[source]
        source: Option<io::Error>,
    },
    /// Another kernel refusal.
    #[error("cannot prepare the sandbox")]
    Io(#[from] io::Error),
}

// Landlock ABI constants (linux/landlock.h).
const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: u32 = 1;
const ACCESS_WRITE_FILE: u64 = 1 << 1;
const ACCESS_REMOVE_DIR: u64 = 1 << 4;
const ACCESS_REMOVE_FILE: u64 = 1 << 5;
const ACCESS_MAKE_ALL: u64 = 0b111_1111 << 6; // CHAR DIR REG SOCK FIFO BLOCK SYM
const ACCESS_REFER: u64 = 1 << 13;
const ACCESS_TRUNCATE: u64 = 1 << 14;

/// Devices every command may write even in `read-only`: with `/dev/ptmx`
/// and `/dev/pts` (the directory: every terminal's slave), a command under
/// a terminal can use it and open terminals of its own.
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// A confinement prepared once per server and applied to every command.
#[derive(Debug)]
pub struct Confinement {
    landlock: Option<OwnedFd>,
    /// BPF programs, installed in this order; each fits a `sock_fprog`.
    seccomp: Vec<Vec<libc::sock_filter>>,
    rlimits: Vec<(RlimitResource, u64)>,
    cgroup: Option<Cgroup>,
    /// How the child enters a PID and mount namespace of its own.
    namespace: Option<Namespace>,
    /// Set when a process cap was asked for but no cgroup could be made.
    pub missing_process_cap: Option<String>,
    /// Whether non-Unix sockets are refused (`ConfinementSpec::deny_network`).
    deny_network: bool,
}

/// What a command's own PID, mount and IPC namespaces need, prepared once.
#[derive(Debug)]
struct Namespace {
    /// `Some` when we are not root: the child makes a user namespace too
    /// and maps only our own ids (`uid_map`, `gid_map` lines).
    user: Option<(CString, CString)>,
    /// `/sys/fs/cgroup` (or a mount below it) exists, to be made read-only
    /// inside: a command cannot leave its cgroup, raise its limits or
    /// write a v1 hierarchy's `release_agent`.
    cgroup_fs: bool,
    /// `/dev/pts` exists: a devpts instance of the command's own is
    /// mounted there, so it sees no other terminal.
    devpts: bool,
}

/// Where the cgroup hierarchies are mounted.
const CGROUP_FS: &std::ffi::CStr = c"/sys/fs/cgroup";

/// `struct mount_attr` (linux/mount.h), for `mount_setattr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `MOUNT_ATTR_RDONLY`.
const MOUNT_ATTR_RDONLY: u64 = 1;

/// Capabilities a sandboxed command keeps (as root; a normal user's
/// commands hold none): owning, changing and reading files whatever
/// their mode, signalling, changing ids, binding low ports, raw sockets,
/// audit messages. Everything else goes, from the bounding set too:
/// `CAP_SYS_ADMIN` (mounts: `/proc` cannot be unmounted), `CAP_SYS_BOOT`,
/// `CAP_SYS_MODULE`, `CAP_SYS_PTRACE`, `CAP_MKNOD` (a block device in a
/// writable root would bypass Landlock), `CAP_DAC_READ_SEARCH`
/// (`open_by_handle_at`), `CAP_SYS_RESOURCE` (raising the rlimits).
pub(crate) const SANDBOX_CAPABILITIES: u64 = 1 << 0 // CAP_CHOWN
    | 1 << 1 // CAP_DAC_OVERRIDE
    | 1 << 3 // CAP_FOWNER
    | 1 << 4 // CAP_FSETID
    | 1 << 5 // CAP_KILL
    | 1 << 6 // CAP_SETGID
    | 1 << 7 // CAP_SETUID
    | 1 << 10 // CAP_NET_BIND_SERVICE
    | 1 << 13 // CAP_NET_RAW
    | 1 << 29; // CAP_AUDIT_WRITE

/// Capabilities a contained command keeps without write walls (`contain`):
/// the sandbox's, and those a root user's ordinary work needs that reach
/// nothing outside its namespaces or the files it may write anyway:
/// `CAP_SYS_CHROOT` (sshd's privilege separation, build chroots),
/// `CAP_MKNOD`, `CAP_LINUX_IMMUTABLE`, `CAP_NET_BROADCAST`,
/// `CAP_IPC_LOCK`, `CAP_IPC_OWNER` (its own IPC namespace), `CAP_SYS_NICE`,
/// `CAP_SYS_RESOURCE`, `CAP_LEASE`, `CAP_SETFCAP` and `CAP_AUDIT_READ`.
/// Still gone: the contract's list (`CAP_SYS_ADMIN`, `CAP_SYS_MODULE`,
/// `CAP_SYS_RAWIO`, `CAP_SYS_PTRACE`, `CAP_BPF`, `CAP_PERFMON`,
/// `CAP_SYS_BOOT`, `CAP_SYSLOG`, `CAP_MAC_ADMIN`, `CAP_MAC_OVERRIDE`,
/// `CAP_NET_ADMIN`, `CAP_DAC_READ_SEARCH`) and those that act on the
/// machine or other processes: `CAP_SETPCAP`, `CAP_SYS_PACCT`,
/// `CAP_SYS_TIME`, `CAP_SYS_TTY_CONFIG`, `CAP_AUDIT_CONTROL`,
/// `CAP_WAKE_ALARM`, `CAP_BLOCK_SUSPEND`, `CAP_CHECKPOINT_RESTORE`.
pub(crate) const CONTAIN_CAPABILITIES: u64 = SANDBOX_CAPABILITIES
    | 1 << 9 // CAP_LINUX_IMMUTABLE
    | 1 << 11 // CAP_NET_BROADCAST
    | 1 << 14 // CAP_IPC_LOCK
    | 1 << 15 // CAP_IPC_OWNER
    | 1 << 18 // CAP_SYS_CHROOT
    | 1 << 23 // CAP_SYS_NICE
    | 1 << 24 // CAP_SYS_RESOURCE
    | 1 << 27 // CAP_MKNOD
    | 1 << 28 // CAP_LEASE
    | 1 << 31 // CAP_SETFCAP
    | 1 << 37; // CAP_AUDIT_READ

#[derive(Debug)]
struct Cgroup {
    dir: PathBuf,
    procs: CString,
}

impl Drop for Confinement {
    fn drop(&mut self) {
        if let Some(cgroup) = &self.cgroup {
            // Empty once every command has ended; otherwise the next server removes it.
            let _ = std::fs::remove_dir(&cgroup.dir);
        }
    }
}

impl Confinement {
    /// Checks what the kernel can enforce and prepares `spec`; a pids cap
    /// goes in a cgroup below what `cgroup_parent` claims.
    pub fn prepare(
        spec: &ConfinementSpec,
        cgroup_parent: CgroupParent,
    ) -> Result<Self, ConfineError> {
        let landlock = if spec.restrict_writes {
            Some(landlock_ruleset(&spec.writable)?)
        } else {
            None
        };
        let seccomp = seccomp_programs(spec.deny_network)?;
        let mut rlimits = Vec::new();
        if spec.no_core_dumps {
            rlimits.push((libc::RLIMIT_CORE, 0));
        }
        if let Some(size) = spec.max_file_size {
            rlimits.push((libc::RLIMIT_FSIZE, size));
        }
        if let Some(files) = spec.max_open_files {
            rlimits.push((libc::RLIMIT_NOFILE, files));
        }
        let (cgroup, missing_process_cap) = match spec.max_processes {
            None => (None, None),
            Some(max) => match make_cgroup(max, cgroup_parent) {
                Ok(cgroup) => (Some(cgroup), None),
                Err(reason) => (None, Some(reason)),
            },
        };
        let namespace = spec
            .isolate_processes
            .then(Namespace::prepare)
            .transpose()?;
        let confinement = Self {
            landlock,
            seccomp,
            rlimits,
            cgroup,
            namespace,
            missing_process_cap,
            deny_network: spec.deny_network,
        };
        if let Some(namespace) = &confinement.namespace {
            probe(&confinement, namespace)?;
        }
        Ok(confinement)
    }

    /// Whether commands are refused network sockets, so their network
    /// failures can be explained.
    pub fn denies_network(&self) -> bool {
        self.deny_network
    }

    /// Whether each command gets a PID namespace of its own.
    pub fn isolates_processes(&self) -> bool {
        self.namespace.is_some()
    }

    /// The pids cgroup all commands run in, when one could be made.
    pub fn cgroup_dir(&self) -> Option<&Path> {
        self.cgroup.as_ref().map(|cgroup| cgroup.dir.as_path())
    }

    /// What the child needs, as raw values it can use without allocating.
    pub fn plan(&self) -> ChildConfinement {
        let mut seccomp = [libc::sock_fprog {
            len: 0,
            filter: std::ptr::null_mut(),
        }; MAX_PROGRAMS];
        let mut seccomp_count = 0;
        // `prepare` checked the count and each length (and a zero length
        // would make the kernel refuse the program: the child fails, it
        // does not run unfiltered).
        for (slot, program) in seccomp.iter_mut().zip(&self.seccomp) {
            *slot = libc::sock_fprog {
                len: u16::try_from(program.len()).unwrap_or(0),
                filter: program.as_ptr().cast_mut(),
            };
            seccomp_count += 1;
        }
        ChildConfinement {
            landlock: self.landlock.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            seccomp,
            seccomp_count,
            rlimits: self.rlimits.as_ptr(),
            rlimit_count: self.rlimits.len(),
            cgroup_procs: self
                .cgroup
                .as_ref()
                .map_or(std::ptr::null(), |cgroup| cgroup.procs.as_ptr()),
            namespace: self.namespace.is_some(),
            cgroup_fs: self
                .namespace
                .as_ref()
                .is_some_and(|namespace| namespace.cgroup_fs),
            // Not under write walls: their Landlock rule for `/dev/pts` names
            // the host's instance, and a rule per command's instance would
            // pin every one of them in the shared ruleset.
            devpts: self.landlock.is_none()
                && self
                    .namespace
                    .as_ref()
                    .is_some_and(|namespace| namespace.devpts),
            keep_capabilities: if self.landlock.is_some() {
                SANDBOX_CAPABILITIES
            } else {
                CONTAIN_CAPABILITIES
            },
            maps: self
                .namespace
                .as_ref()
                .and_then(|namespace| namespace.user.as_ref())
                .map(|(uid, gid)| (uid.as_ptr(), gid.as_ptr())),
        }
    }
}

impl Namespace {
    fn prepare() -> Result<Self, ConfineError> {
        if !super::raw::SUPPORTED {
            return Err(ConfineError::NoNamespace {
                reason: format!(
                    "the namespace's init is not built for {}",
                    std::env::consts::ARCH
                ),
                source: None,
            });
        }
        // The commands' inits share our memory: not dumpable, nothing of
        // it reads through `/proc/PID/mem`, `environ` or `maps` but with
        // CAP_SYS_PTRACE, which no command holds (a second wall beside
        // Landlock's; agent-exec does so at start-up already).
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) } != 0 {
            return Err(ConfineError::NoNamespace {
                reason: "cannot make this process undumpable".to_owned(),
                source: Some(io::Error::last_os_error()),
            });
        }
        // SAFETY: geteuid and getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let user = if uid == 0 {
            None
        } else {
            let line = |id: u32| CString::new(format!("{id} {id} 1")).unwrap_or_default();
            Some((line(uid), line(gid)))
        };
        let cgroup_fs = std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|mounts| {
            mounts.lines().any(|line| {
                line.split_whitespace()
                    .nth(4)
                    .is_some_and(|point| point.starts_with("/sys/fs/cgroup"))
            })
        });
        let devpts = Path::new("/dev/pts").is_dir();
        Ok(Self {
            user,
            cgroup_fs,
            devpts,
        })
    }
}

/// Starts an init in probe mode (no shell) under the whole confinement
/// and checks that it could enter its namespaces and apply the rest.
fn probe(confinement: &Confinement, namespace: &Namespace) -> Result<(), ConfineError> {
    let why_not = |reason: &str, source: Option<io::Error>| {
        let hint = if namespace.user.is_some() {
            "; as a normal user this needs unprivileged user namespaces \
             (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, \
             and no AppArmor restrict_unprivileged_userns), or run as root"
        } else {
            ""
        };
        ConfineError::NoNamespace {
            reason: format!("{reason}{hint}"),
            source,
        }
    };
    let plan = confinement.plan();
    // An empty program: the init answers as PID 1 and exits.
    let child = super::vfork::spawn(
        c"",
        &[],
        &[],
        c"/",
        None,
        Some(&plan),
        None,
        false,
        &[],
        None,
    )
    .map_err(|error| why_not("starting a process in new namespaces failed", Some(error)))?;
    let status = super::vfork::wait_blocking(&child);
    if status == Some(0) {
        Ok(())
    } else {
        Err(why_not(
            &format!("the namespace's init reported {status:?}, not 0"),
            None,
        ))
    }
}

/// The confinement as the child sees it: raw descriptors and pointers into
/// a `Confinement` that outlives the spawn.
pub struct ChildConfinement {
    landlock: RawFd,
    seccomp: [libc::sock_fprog; MAX_PROGRAMS],
    seccomp_count: usize,
    rlimits: *const (RlimitResource, u64),
    rlimit_count: usize,
    cgroup_procs: *const libc::c_char,
    /// The command gets a PID, mount and IPC namespace of its own.
    namespace: bool,
    /// `/sys/fs/cgroup` is made read-only inside.
    cgroup_fs: bool,
    /// A devpts instance of its own is mounted on `/dev/pts`.
    devpts: bool,
    /// The capabilities a command in namespaces of its own keeps.
    keep_capabilities: u64,
    /// `uid_map` and `gid_map` lines when a user namespace is made too.
    maps: Option<(*const libc::c_char, *const libc::c_char)>,
}

impl ChildConfinement {
    /// The same without the shared pids cgroup: the command has a cgroup
    /// of its own below it, where the same limit holds.
    pub fn without_cgroup(mut self) -> Self {
        self.cgroup_procs = std::ptr::null();
        self
    }

    /// In the child, before `setsid`: join the cgroup, set the limits.
    /// Returns false on any failure (errno says why).
    ///
    /// # Safety
    /// Call only in the spawned child; the pointers must still be valid.
    pub(crate) unsafe fn enter_limits(&self) -> bool {
        if !self.cgroup_procs.is_null() {
            // SAFETY: `cgroup_procs` is a C string in the parent's
            // `Confinement`, which outlives the spawn.
            let fd = unsafe { libc::open(self.cgroup_procs, libc::O_WRONLY | libc::O_CLOEXEC) };
            if fd < 0 {
                return false;
            }
            // "0" means the writing process.
            // SAFETY: a one-byte static buffer and a descriptor we just opened.
            let written = unsafe { libc::write(fd, b"0".as_ptr().cast::<c_void>(), 1) };
            // SAFETY: `fd` is ours and closed once.
            unsafe { libc::close(fd) };
            if written != 1 {
                return false;
            }
        }
        for index in 0..self.rlimit_count {
            // SAFETY: `rlimits` points to `rlimit_count` pairs in the
            // parent's `Confinement`, which outlives the spawn.
            let (resource, value) = unsafe { *self.rlimits.add(index) };
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: `limit` is a valid rlimit on our stack.
            if unsafe { libc::setrlimit(resource, &raw const limit) } != 0 {
                return false;
            }
        }
        true
    }

    /// Whether a command's terminal comes from a devpts instance of its
    /// own, opened inside its namespaces.
    pub fn has_own_terminals(&self) -> bool {
        self.namespace && self.devpts
    }

    /// The capabilities a command in namespaces of its own keeps: fewer
    /// under write walls, where `CAP_MKNOD` (a block device in a writable
    /// root) or `CAP_SYS_RESOURCE` would undo them.
    pub(crate) fn keep_capabilities(&self) -> u64 {
        self.keep_capabilities
    }

    /// The clone flags for the namespaces: PID, mount and IPC (System V shared
    /// memory, semaphores and message queues of other processes out of
    /// reach), and a user namespace when not root.
    pub(crate) fn clone_flags(&self) -> c_int {
        let own = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
        if !self.namespace {
            0
        } else if self.maps.is_some() {
            own | libc::CLONE_NEWUSER
        } else {
            own
        }
    }

    /// In the child, right after joining the cgroup: a user namespace's
    /// id maps (only our own ids map; `setgroups` must be denied first).
    /// Returns false on any failure (errno says why).
    ///
    /// # Safety
    /// Call only in the spawned child; the pointers must still be valid.
    pub(crate) unsafe fn map_ids(&self) -> bool {
        let Some((uid_map, gid_map)) = self.maps else {
            return true;
        };
        // Our `/proc/self` files belong to root while the memory we share
        // with the server is not dumpable (as agent-exec makes it), and a
        // normal user could not write them: dumpable for these three
        // writes, then as before. (Commands cannot reach the server
        // meanwhile: each is in a PID namespace of its own, without ptrace.)
        let (off, on): (libc::c_ulong, libc::c_ulong) = (0, 1);
        // SAFETY: prctl with integer arguments only.
        let was = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, off, off, off, off) };
        // SAFETY: as above.
        if was != 1 && unsafe { libc::prctl(libc::PR_SET_DUMPABLE, on, off, off, off) } != 0 {
            return false;
        }
        // SAFETY: C strings in the parent's `Confinement`.
        let mapped = unsafe {
            write_file(c"/proc/self/setgroups", c"deny".as_ptr())
                && write_file(c"/proc/self/gid_map", gid_map)
                && write_file(c"/proc/self/uid_map", uid_map)
        };
        if was != 1 {
            let was = libc::c_ulong::try_from(was).unwrap_or(off);
            // SAFETY: prctl with integer arguments only.
            if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, was, off, off, off) } != 0 {
                return false;
            }
        }
        mapped
    }

    /// In the child, in the new mount namespace: make every mount private
    /// (nothing propagates back to the host), mount a `/proc` of the new
    /// PID namespace over the old one, and make `/sys/fs/cgroup` and every
    /// hierarchy below it read-only (this namespace's copies only).
    ///
    /// # Safety
    /// Call only in the spawned child.
    pub(crate) unsafe fn mount_proc(&self) -> bool {
        if !self.namespace {
            return true;
        }
        let none = std::ptr::null::<libc::c_char>();
        // SAFETY: static C strings; a null data pointer is allowed.
        let mounted = unsafe {
            libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
                && libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                ) == 0
        };
        // A devpts of its own: `ls /dev/pts` shows only the command's
        // terminals, another shell's `/dev/pts/N` has no name here, and
        // `/dev/ptmx` (which opens the `pts` beside it, Linux 4.7 on)
        // makes new ones in it.
        // SAFETY: static C strings.
        let mounted = mounted
            && (!self.devpts
                || unsafe {
                    libc::mount(
                        c"devpts".as_ptr(),
                        c"/dev/pts".as_ptr(),
                        c"devpts".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NOEXEC,
                        c"newinstance,ptmxmode=0666,mode=0620"
                            .as_ptr()
                            .cast::<c_void>(),
                    ) == 0
                });
        if !mounted || !self.cgroup_fs {
            return mounted;
        }
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        // One call for the whole tree (each v1 hierarchy is a mount of its
        // own below the tmpfs): Linux 5.12 or later, else the probe fails.
        // SAFETY: a static path and a valid `mount_attr` of the size given.
        unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                CGROUP_FS.as_ptr(),
                libc::AT_RECURSIVE,
                &raw const attr,
                size_of::<MountAttr>(),
            ) == 0
        }
    }

    /// In the child, last before `execve`: Landlock, then the seccomp programs.
    ///
    /// # Safety
    /// Call only in the spawned child; the pointers must still be valid.
    pub(crate) unsafe fn restrict(&self) -> bool {
        if self.landlock < 0 && self.seccomp_count == 0 {
            return true;
        }
        let (on, off): (libc::c_ulong, libc::c_ulong) = (1, 0);
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, on, off, off, off) } != 0 {
            return false;
        }
        if self.landlock >= 0 {
            // SAFETY: `landlock` is a ruleset descriptor the parent's
            // `Confinement` keeps open; flags must be 0.
            let result =
                unsafe { libc::syscall(libc::SYS_landlock_restrict_self, self.landlock, 0u32) };
            if result != 0 {
                return false;
            }
        }
        for program in self.seccomp.iter().take(self.seccomp_count) {
            // SAFETY: `program` describes a BPF program in the parent's
            // `Confinement`, which outlives the spawn; the kernel copies it.
            let result = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0u32,
                    std::ptr::from_ref(program),
                )
            };
            if result != 0 {
                return false;
            }
        }
        true
    }
}

/// Writes a C string to a file; false on failure (errno says why).
///
/// # Safety
/// `text` must be a valid C string.
unsafe fn write_file(path: &std::ffi::CStr, text: *const libc::c_char) -> bool {
    // SAFETY: a valid path; the descriptor is ours and closed once.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let length = libc::strlen(text);
        let written = libc::write(fd, text.cast::<c_void>(), length);
        libc::close(fd);
        written == length.cast_signed()
    }
}

/// Compiles the seccomp programs (`filter.rs`) once seccomp is known to work.
fn seccomp_programs(deny_network: bool) -> Result<Vec<Vec<libc::sock_filter>>, ConfineError> {
    // SAFETY: PR_GET_SECCOMP takes no arguments.
    if unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) } < 0 {
        return Err(ConfineError::SeccompRefused(io::Error::last_os_error()));
    }
    let programs = filter::programs(deny_network).map_err(ConfineError::NoSeccomp)?;
    if programs.len() > MAX_PROGRAMS
        || programs
            .iter()
            .any(|program| program.is_empty() || u16::try_from(program.len()).is_err())
    {
        return Err(ConfineError::NoSeccomp(format!(
            "{} programs of {:?} instructions do not fit",
            programs.len(),
            programs.iter().map(Vec::len).collect::<Vec<_>>()
        )));
    }
    Ok(programs)
}

fn landlock_abi() -> io::Result<i64> {
    // SAFETY: the version query takes a null attribute and size 0.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<c_void>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if abi < 1 {
        return Err(io::Error::last_os_error());
    }
    Ok(abi)
}

fn landlock_ruleset(writable: &[PathBuf]) -> Result<OwnedFd, ConfineError> {
    let abi = landlock_abi().map_err(ConfineError::NoLandlock)?;
    let mut handled = ACCESS_WRITE_FILE | ACCESS_REMOVE_DIR | ACCESS_REMOVE_FILE | ACCESS_MAKE_ALL;
    if abi >= 2 {
        handled |= ACCESS_REFER;
    }
    let mut file_rights = ACCESS_WRITE_FILE;
    if abi >= 3 {
        handled |= ACCESS_TRUNCATE;
        file_rights |= ACCESS_TRUNCATE;
    }
    let attr = RulesetAttr {
        handled_access_fs: handled,
    };
    // SAFETY: `attr` is a valid ruleset attribute of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &raw const attr,
            size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(ConfineError::NoLandlock(io::Error::last_os_error()));
    }
    let fd = RawFd::try_from(fd).map_err(|_| {
        ConfineError::Io(io::Error::other(format!(
            "landlock_create_ruleset returned `{fd}`, not a descriptor"
        )))
    })?;
    // SAFETY: the syscall returned a new descriptor (close-on-exec) we own.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd) };
    for path in writable {
        add_rule(&ruleset, path, handled, true)?;
    }
    for device in WRITABLE_DEVICES {
        let path = Path::new(device);
        if path.exists() {
            add_rule(&ruleset, path, file_rights, false)?;
        }
    }
    Ok(ruleset)
}

fn add_rule(
    ruleset: &OwnedFd,
    path: &Path,
    access: u64,
    required: bool,
) -> Result<(), ConfineError> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| ConfineError::BadPath {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"),
    })?;
    // SAFETY: a valid C string; O_PATH opens without reading.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        let source = io::Error::last_os_error();
        return if required {
            Err(ConfineError::BadPath {
                path: path.to_path_buf(),
                source,
            })
        } else {
            Ok(())
        };
    }
    // SAFETY: open succeeded; we own the descriptor.
    let parent = unsafe { OwnedFd::from_raw_fd(fd) };
    let rule = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: a valid rule for the ruleset descriptor.
    let result = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &raw const rule,
            0u32,
        )
    };
    if result != 0 {
        return Err(ConfineError::BadPath {
            path: path.to_path_buf(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Finds the pids controller, makes `agent-exec-<id>/sandbox` below our own
/// cgroup with `pids.max`, and removes those of servers that are gone.
fn make_cgroup(max: u64, cgroup_parent: CgroupParent) -> Result<Cgroup, String> {
    let (mount, own) = pids_hierarchy().ok_or("no pids cgroup controller is mounted")?;
    let parent = mount.join(own.trim_start_matches('/'));
    // Below the server's cgroup, beside the unsandboxed commands' ones,
    // so the cap counts sandboxed commands only.
    let dir = cgroup_parent(&parent)
        .map_err(|error| {
            format!(
                "cannot create this server's cgroup in `{}`: {error}",
                parent.display()
            )
        })?
        .join("sandbox");
    std::fs::create_dir_all(&dir)
        .map_err(|error| format!("cannot create `{}`: {error}", dir.display()))?;
    std::fs::write(dir.join("pids.max"), max.to_string())
        .map_err(|error| format!("cannot set `{}/pids.max`: {error}", dir.display()))?;
    let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
        .map_err(|_| "NUL in the cgroup path".to_owned())?;
    Ok(Cgroup { dir, procs })
}

/// The pids controller's mount point and our cgroup path in it (v1), or
/// the unified hierarchy when it offers pids (v2).
fn pids_hierarchy() -> Option<(PathBuf, String)> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for line in mountinfo.lines() {
        let (before, after) = line.split_once(" - ")?;
        let mut after = after.split_whitespace();
        let fstype = after.next()?;
        let options = after.nth(1).unwrap_or_default();
        let mount = PathBuf::from(before.split_whitespace().nth(4)?);
        if fstype == "cgroup" && options.split(',').any(|option| option == "pids") {
            let own = cgroups
                .lines()
                .find(|entry| {
                    entry
                        .split(':')
                        .nth(1)
                        .is_some_and(|list| list.split(',').any(|c| c == "pids"))
                })?
                .splitn(3, ':')
                .nth(2)?
                .to_owned();
            return Some((mount, own));
        }
        if fstype == "cgroup2" {
            let own = cgroups.lines().find(|entry| entry.starts_with("0::"))?[3..].to_owned();
            let controllers = std::fs::read_to_string(
                mount
                    .join(own.trim_start_matches('/'))
                    .join("cgroup.subtree_control"),
            )
            .unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "pids") {
                return Some((mount, own));
            }
        }
    }
    None
}

/// The confinement as plain data, for the spawner process (`process.rs`),
/// which starts the commands and needs its own copy of what their child
/// steps read.
impl Confinement {
    /// Writes every field the child steps read; returns the Landlock
    /// ruleset's descriptor, which goes beside the data.
    pub(crate) fn encode(&self, out: &mut super::process::Writer) -> Option<RawFd> {
        // Every field by name: one added to `Confinement` must be carried
        // here too, or this stops compiling.
        let Self {
            landlock,
            seccomp,
            rlimits,
            cgroup,
            namespace,
            missing_process_cap: _,
            deny_network,
        } = self;
        out.u8(u8::from(landlock.is_some()));
        out.count(seccomp.len());
        for program in seccomp {
            out.count(program.len());
            for instruction in program {
                out.u16(instruction.code);
                out.u8(instruction.jt);
                out.u8(instruction.jf);
                out.u32(instruction.k);
            }
        }
        out.count(rlimits.len());
        for (resource, value) in rlimits {
            out.i64(i64::from(*resource));
            out.u64(*value);
        }
        out.u8(u8::from(cgroup.is_some()));
        if let Some(cgroup) = cgroup {
            out.bytes(cgroup.dir.as_os_str().as_bytes());
            out.bytes(cgroup.procs.to_bytes());
        }
        match namespace {
            None => out.u8(0),
            Some(Namespace {
                user,
                cgroup_fs,
                devpts,
            }) => {
                match user {
                    None => out.u8(1),
                    Some((uid_map, gid_map)) => {
                        out.u8(2);
                        out.bytes(uid_map.to_bytes());
                        out.bytes(gid_map.to_bytes());
                    }
                }
                out.u8(u8::from(*cgroup_fs));
                out.u8(u8::from(*devpts));
            }
        }
        out.u8(u8::from(*deny_network));
        landlock.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reads what [`Confinement::encode`] wrote; `next_fd` gives the
    /// descriptors that came with it, in order. Nothing is checked or
    /// probed again: the server did so when it prepared the original.
    pub(crate) fn decode(
        input: &mut super::process::Reader<'_>,
        next_fd: &mut dyn FnMut() -> io::Result<OwnedFd>,
    ) -> io::Result<Self> {
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "a malformed confinement");
        let landlock = if input.u8()? != 0 {
            Some(next_fd()?)
        } else {
            None
        };
        let mut seccomp = Vec::new();
        for _ in 0..input.count()?.min(MAX_PROGRAMS + 1) {
            let mut program = Vec::new();
            for _ in 0..input.count()? {
                program.push(libc::sock_filter {
                    code: input.u16()?,
                    jt: input.u8()?,
                    jf: input.u8()?,
                    k: input.u32()?,
                });
            }
            seccomp.push(program);
        }
        if seccomp.len() > MAX_PROGRAMS {
            return Err(bad());
        }
        let mut rlimits = Vec::new();
        for _ in 0..input.count()? {
            let resource = RlimitResource::try_from(input.i64()?).map_err(|_| bad())?;
            rlimits.push((resource, input.u64()?));
        }
        let cgroup = if input.u8()? != 0 {
            let dir = PathBuf::from(std::ffi::OsStr::from_bytes(input.bytes()?));
            Some(Cgroup {
                dir,
                procs: input.c_string()?,
            })
        } else {
            None
        };
        let namespace = match input.u8()? {
            0 => None,
            kind @ (1 | 2) => {
                let user = if kind == 2 {
                    Some((input.c_string()?, input.c_string()?))
                } else {
                    None
                };
                Some(Namespace {
                    user,
                    cgroup_fs: input.u8()? != 0,
                    devpts: input.u8()? != 0,
                })
            }
            _ => return Err(bad()),
        };
        Ok(Self {
            landlock,
            seccomp,
            rlimits,
            cgroup,
            namespace,
            missing_process_cap: None,
            deny_network: input.u8()? != 0,
        })
    }
}

#[cfg(test)]
mod wire_tests {
    use super::*;
    use crate::process::{Reader, Writer};

    /// What the spawner process decodes is what the server prepared.
    #[test]
    fn a_confinement_crosses_to_the_spawner_whole() {
        let (landlock, _) = std::os::unix::net::UnixStream::pair().expect("a descriptor");
        let original = Confinement {
            landlock: Some(OwnedFd::from(landlock)),
            seccomp: vec![
                vec![libc::sock_filter {
                    code: 6,
                    jt: 1,
                    jf: 2,
                    k: 0x7fff_0000,
                }],
                Vec::new(),
            ],
            rlimits: vec![(libc::RLIMIT_CORE, 0), (libc::RLIMIT_NOFILE, 512)],
            cgroup: Some(Cgroup {
                dir: PathBuf::from("/sys/fs/cgroup/pids/x"),
                procs: c"/sys/fs/cgroup/pids/x/cgroup.procs".to_owned(),
            }),
            namespace: Some(Namespace {
                user: Some((c"1000 1000 1".to_owned(), c"100 100 1".to_owned())),
                cgroup_fs: false,
                devpts: true,
            }),
            missing_process_cap: None,
            deny_network: true,
        };
        let mut out = Writer::default();
        let fd = original.encode(&mut out).expect("the ruleset's descriptor");
        let bytes = out.into_bytes();
        let mut fds = vec![OwnedFd::from(
            std::fs::File::open("/dev/null").expect("a stand-in descriptor"),
        )];
        let mut decoded = Confinement::decode(&mut Reader::new(&bytes), &mut || {
            fds.pop().ok_or_else(|| io::Error::other("none"))
        })
        .expect("decodes");
        assert!(decoded.landlock.is_some());
        assert_ne!(fd, -1);
        assert_eq!(decoded.seccomp.len(), 2);
        assert_eq!(
            (
                decoded.seccomp[0][0].code,
                decoded.seccomp[0][0].jt,
                decoded.seccomp[0][0].jf,
                decoded.seccomp[0][0].k
            ),
            (6, 1, 2, 0x7fff_0000)
        );
        assert_eq!(decoded.rlimits, original.rlimits);
        let cgroup = decoded.cgroup.take().expect("cgroup");
        assert_eq!(cgroup.dir, PathBuf::from("/sys/fs/cgroup/pids/x"));
        assert_eq!(
            cgroup.procs.as_c_str(),
            c"/sys/fs/cgroup/pids/x/cgroup.procs"
        );
        let user = decoded
            .namespace
            .as_ref()
            .and_then(|namespace| namespace.user.as_ref());
        assert_eq!(
            user.map(|(uid, gid)| (uid.as_c_str(), gid.as_c_str())),
            Some((c"1000 1000 1", c"100 100 1"))
        );
        let namespace = decoded.namespace.as_ref().expect("namespace");
        assert!(!namespace.cgroup_fs);
        assert!(namespace.devpts);
        assert!(decoded.deny_network);
        // Neither removes a cgroup on drop: neither holds one now.
        let mut original = original;
        original.cgroup = None;
    }
}

#[cfg(test)]
mod error_tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn sandbox_errors_with_a_source_do_not_repeat_it() {
        for error in [
            ConfineError::BadPath {
                path: PathBuf::from("/nowhere"),
                source: io::Error::from_raw_os_error(2),
            },
            ConfineError::Io(io::Error::from_raw_os_error(1)),
            ConfineError::NoLandlock(io::Error::from_raw_os_error(38)),
            ConfineError::SeccompRefused(io::Error::from_raw_os_error(22)),
            ConfineError::NoNamespace {
                reason: "cannot make this process undumpable".to_owned(),
                source: Some(io::Error::from_raw_os_error(1)),
            },
        ] {
            let cause = error.source().expect("a source").to_string();
            assert!(!error.to_string().contains(&cause), "{error}");
        }
    }

    /// The kernel's error is carried as itself, not as its text: a caller
    /// can tell ENOSYS from EPERM.
    #[test]
    fn the_kernels_error_is_the_source_with_its_kind() {
        let source_of = |error: &ConfineError| {
            error
                .source()
                .and_then(|source| source.downcast_ref::<io::Error>())
                .map(io::Error::kind)
        };
        let landlock = ConfineError::NoLandlock(io::Error::from_raw_os_error(38));
        assert_eq!(source_of(&landlock), Some(io::ErrorKind::Unsupported));
        let seccomp = ConfineError::SeccompRefused(io::Error::from_raw_os_error(22));
        assert_eq!(source_of(&seccomp), Some(io::ErrorKind::InvalidInput));
        let namespace = ConfineError::NoNamespace {
            reason: "starting a process in new namespaces failed".to_owned(),
            source: Some(io::Error::from_raw_os_error(1)),
        };
        assert_eq!(source_of(&namespace), Some(io::ErrorKind::PermissionDenied));
        let no_kernel_word = ConfineError::NoNamespace {
            reason: "the namespace's init reported None, not 0".to_owned(),
            source: None,
        };
        assert!(no_kernel_word.source().is_none());
    }
}
