//! Linux: starting a shell the way `posix_spawn` does (a child that shares
//! our memory until it calls `execve`, so nothing is copied), with the two
//! things `posix_spawn` cannot do: `setsid` and `PR_SET_PDEATHSIG`.
//!
//! `fork` copies the page tables of the whole server; measured here, that
//! alone was a third of the cost of running `true`. `clone(CLONE_VM |
//! CLONE_VFORK)` suspends the calling thread until the child has called
//! `execve` (or exited), and the child runs on a stack of its own.
//!
//! The child may only make raw system calls: it shares the parent's memory,
//! so it must not allocate, lock, or unwind. Everything it needs (paths,
//! argv, envp, descriptors, the capability sets it keeps) is prepared by the
//! parent beforehand.
//!
//! With a PID namespace (the sandbox) the child is the namespace's init
//! instead (docs/decisions/0013): cloned without `CLONE_VFORK` onto an
//! [`InitStack`], it starts the shell with a `CLONE_VM | CLONE_VFORK` clone
//! of its own and stays, in our memory, as `init.rs`'s loop; the parent
//! waits for the end of the report pipe rather than being suspended.

#![allow(
    unsafe_code,
    reason = "starting a process without fork needs clone(2) and a child that makes raw syscalls"
)]

use std::ffi::{CStr, CString, c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::confine::ChildConfinement;
use super::init::{self, INIT_SIGNALS};
use super::raw;

/// A started child: its pid, a pidfd to wait on, and its output pipes.
pub struct RawChild {
    /// Its pid.
    pub pid: i32,
    /// A pidfd to wait on.
    pub pidfd: OwnedFd,
    /// Stdout and stderr: pipes, or `None` under a terminal (the caller
    /// holds its master).
    pub output: Option<(OwnedFd, OwnedFd)>,
    /// Where the namespace's init reports the shell's wait status.
    pub status: Option<OwnedFd>,
    /// The stack the namespace's init runs on: unmapped only once the
    /// init has ended (see [`InitStack`]).
    pub stack: Option<InitStack>,
    /// A terminal of the namespace's own devpts instance (master, slave),
    /// opened inside by the init and sent back, when one was asked for.
    pub terminal: Option<(OwnedFd, OwnedFd)>,
}

/// The memory the namespace's init runs on, for as long as it runs: an
/// anonymous mapping with a guard page at its low end (the init's stack in
/// the upper half, the shell's until its exec in the lower). It is
/// unmapped on drop only once the init can no longer run: after it was
/// reaped or seen exited; if it still runs then, it is killed (which ends
/// its namespace) and waited for first.
pub struct InitStack {
    base: *mut c_void,
    len: usize,
    /// The init's pidfd (a duplicate of the caller's), to learn whether it
    /// runs; `None` while no init was started.
    pidfd: Option<OwnedFd>,
}

// SAFETY: the mapping is owned by this value alone (the init that runs on
// it never frees it), so it may be dropped on any thread.
unsafe impl Send for InitStack {}

/// Each half of the init's stack: ample for a child that makes a handful
/// of system calls and keeps a few words of state.
const HALF_STACK: usize = 64 * 1024;

impl InitStack {
    /// Maps the two halves and the guard page below them.
    fn map() -> io::Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|page| page.is_power_of_two())
            .unwrap_or(4096);
        let len = 2 * HALF_STACK + page;
        // SAFETY: a new private anonymous mapping; no address is imposed.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Self {
            base,
            len,
            pidfd: None,
        };
        // SAFETY: the lowest page of the mapping just made.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The aligned top of the init's half (the stack grows down).
    fn init_top(&self) -> usize {
        (self.base as usize + self.len) & !15
    }

    /// The aligned top of the shell's half.
    fn shell_top(&self) -> usize {
        (self.base as usize + self.len - HALF_STACK) & !15
    }

    /// Whether the init may still run on this memory: not yet exited.
    fn init_may_run(&self) -> bool {
        let Some(pidfd) = &self.pidfd else {
            return false;
        };
        // SAFETY: a zeroed siginfo_t is a valid buffer; the pidfd is ours.
        // WNOWAIT leaves an exited init to its owner to reap.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let result = libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd().unsigned_abs(),
                &raw mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            // ECHILD: reaped already. Otherwise a pid says it has exited.
            result == 0 && info.si_pid() == 0
        }
    }
}

impl Drop for InitStack {
    fn drop(&mut self) {
        if let Some(pidfd) = self.pidfd.as_ref().filter(|_| self.init_may_run()) {
            // Dropped before the init ended (its owner gave up on it): end
            // it, and with it its namespace, before its stack goes.
            // SAFETY: a pidfd of ours; SIGKILL with no siginfo.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0u32,
                );
            }
            loop {
                // SAFETY: as in `init_may_run`, blocking this time.
                let result = unsafe {
                    let mut info: libc::siginfo_t = std::mem::zeroed();
                    libc::waitid(
                        libc::P_PIDFD,
                        pidfd.as_raw_fd().unsigned_abs(),
                        &raw mut info,
                        libc::WEXITED | libc::WNOWAIT,
                    )
                };
                if result == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    break;
                }
            }
        }
        // SAFETY: the mapping made in `map`, of `len` bytes; the init that
        // ran on it has ended (above), and nothing else refers to it.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// `CAP_SYS_PTRACE` (linux/capability.h): attaching to and reading the
/// memory of processes that are not dumpable, such as the server.
const CAP_SYS_PTRACE: u32 = 19;
/// `CAP_SETPCAP`: needed to drop a capability from the bounding set.
const CAP_SETPCAP: u32 = 8;
/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets, in two 32-bit words.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `struct __user_cap_header_struct`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

/// `struct __user_cap_data_struct`: one 32-bit word of each set.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// How the child gives up capabilities before exec, prepared by the
/// parent: every command runs without `CAP_SYS_PTRACE`, so none can attach
/// to the server or read its memory, as root too; a sandboxed command with
/// namespaces of its own keeps only what its confinement keeps
/// (`ChildConfinement::keep_capabilities`).
#[derive(Clone, Copy)]
struct CapDrop {
    /// Dropped from the bounding set, so no exec gives them back (a root
    /// shell's every exec would): only possible with `CAP_SETPCAP`; without
    /// it, a process has no way to gain them back anyway but a set-user-ID
    /// or file-capability program.
    bounding: u64,
    /// Lowered in the ambient set (the capabilities the kernel knows).
    ambient: u64,
    /// The spawning thread's sets with them cleared, for `capset` (`None`
    /// when it holds none of them).
    sets: Option<[CapData; 2]>,
}

impl CapDrop {
    /// `dropped`: a bit per capability. `new_user_namespace`: the child
    /// makes a user namespace, where it starts with every capability.
    fn prepare(dropped: u64, new_user_namespace: bool) -> Self {
        let mut header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        // SAFETY: a valid header and an array of the two words version 3 fills.
        let read =
            unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) } == 0;
        let mut cleared = data;
        for (index, sets) in cleared.iter_mut().enumerate() {
            let keep = !((dropped >> (32 * index)) as u32);
            sets.effective &= keep;
            sets.permitted &= keep;
            sets.inheritable &= keep;
        }
        let has_setpcap = new_user_namespace
            || data
                .get(CAP_SETPCAP as usize / 32)
                .is_some_and(|sets| sets.effective & (1 << (CAP_SETPCAP % 32)) != 0);
        let (mut bounding, mut ambient) = (0, 0);
        for cap in 0..64u32 {
            if dropped & (1 << cap) == 0 {
                continue;
            }
            // SAFETY: prctl with integer arguments only.
            let in_bounding =
                unsafe { libc::prctl(libc::PR_CAPBSET_READ, libc::c_ulong::from(cap), 0, 0, 0) };
            if in_bounding < 0 {
                continue; // Not a capability this kernel knows.
            }
            ambient |= 1 << cap;
            if has_setpcap && (in_bounding == 1 || new_user_namespace) {
                bounding |= 1 << cap;
            }
        }
        let sets = if new_user_namespace {
            Some(cleared)
        } else {
            (read && cleared != data).then_some(cleared)
        };
        Self {
            bounding,
            ambient,
            sets,
        }
    }

    /// In the child: bounding set, ambient set, then the thread's own sets.
    /// Returns false on a failure (errno says why).
    ///
    /// # Safety
    /// Call only in the spawned child.
    unsafe fn apply(&self) -> bool {
        for cap in 0..64u32 {
            let bit = 1u64 << cap;
            let number = libc::c_ulong::from(cap);
            // SAFETY: prctl with integer arguments only.
            if self.bounding & bit != 0
                && unsafe { libc::prctl(libc::PR_CAPBSET_DROP, number, 0, 0, 0) } != 0
            {
                return false;
            }
            if self.ambient & bit == 0 {
                continue;
            }
            let lower = libc::c_ulong::try_from(libc::PR_CAP_AMBIENT_LOWER).unwrap_or_default();
            // SAFETY: prctl with integer arguments only.
            if unsafe { libc::prctl(libc::PR_CAP_AMBIENT, lower, number, 0, 0) } != 0 {
                // SAFETY: errno is thread-local and always readable.
                let errno = unsafe { *libc::__errno_location() };
                // EINVAL: a kernel without ambient capabilities (before 4.3).
                if errno != libc::EINVAL {
                    return false;
                }
            }
        }
        if let Some(sets) = self.sets {
            let mut header = CapHeader {
                version: CAPABILITY_VERSION_3,
                pid: 0,
            };
            // SAFETY: a valid header and the two words of version 3, on our stack.
            if unsafe { libc::syscall(libc::SYS_capset, &raw mut header, sets.as_ptr()) } != 0 {
                return false;
            }
        }
        true
    }
}

/// What the child reads. Lives on the parent's stack, which the child can
/// see (`CLONE_VM`) and which stays valid while the parent is suspended
/// (without namespaces) or blocked reading the report pipe (with them:
/// until the shell has exec'd and the init has closed that pipe).
struct ChildPlan {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    report: RawFd,
    /// stdin, stdout and stderr are a terminal's slave, to be made the
    /// controlling terminal of the shell's new session.
    tty: bool,
    /// The init's status pipe (-1 without namespaces: the child is the
    /// shell and execs `program`).
    status: RawFd,
    /// With namespaces and a terminal: the socket on which the init sends
    /// back the terminal it opened in the namespace's devpts (-1 otherwise).
    terminal_socket: RawFd,
    /// With namespaces, the start-up probe: the init starts no shell.
    probe: bool,
    /// With namespaces, the top of the stack the shell's clone runs on.
    shell_stack: usize,
    parent: libc::pid_t,
    capabilities: CapDrop,
    /// The command's `cgroup.procs` (or `tasks`) in each hierarchy,
    /// opened by the parent; -1 for none.
    cgroups: crate::cgroup::JoinFds,
    confinement: *const ChildConfinement,
    /// `(descriptor, number in the program)` pairs, `inherit_len` of
    /// them; every descriptor above every number (see [`lift`]).
    inherit: *const (RawFd, RawFd),
    inherit_len: usize,
    /// The socket the shell sends its exec-notify listener on (-1: no
    /// filter; `exec_notify.rs`).
    exec_notify: RawFd,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A close-on-exec copy of `fd` numbered `floor` or above.
fn lift(fd: RawFd, floor: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC only makes a new descriptor; `fd` is the
    // caller's, open for the call.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl succeeded: a new descriptor, ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

fn null_pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Starts `program` with `argv` and `envp` in `cwd`, stdin from /dev/null,
/// stdout and stderr on new pipes (or all three on the terminal `tty`, a
/// slave the shell makes its controlling terminal), in a new process session, with SIGKILL
/// as its parent-death signal. The calling thread is the "parent" the kernel
/// watches for that signal, so call this from a thread that lives as long
/// as the process. Each `(fd, number)` of `inherit` reaches the program as
/// `number` (3 or above, each once), and only there: a namespace's init
/// holds none of them. With `own_terminal` (and namespaces whose devpts is
/// their own) the terminal is opened inside instead, and handed back in
/// [`RawChild::terminal`].
#[expect(
    clippy::too_many_arguments,
    reason = "the one internal entry of the spawn funnel; each is plain data"
)]
pub fn spawn(
    program: &CStr,
    argv: &[CString],
    envp: &[CString],
    cwd: &CStr,
    cgroups: Option<crate::cgroup::JoinFds>,
    confinement: Option<&ChildConfinement>,
    tty: Option<RawFd>,
    own_terminal: bool,
    inherit: &[(RawFd, RawFd)],
    exec_notify: Option<RawFd>,
) -> io::Result<RawChild> {
    let targets = || inherit.iter().map(|&(_, to)| to);
    let distinct = targets()
        .enumerate()
        .all(|(at, to)| to > 2 && !targets().skip(at + 1).any(|other| other == to));
    if !distinct {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "inherited descriptors need distinct numbers above 2",
        ));
    }
    // Every source above every number, so no copy in the child
    // overwrites a source not yet copied (nor, below, the report pipe).
    let floor = targets().max().map_or(3, |top| top + 1);
    let lifted = inherit
        .iter()
        .map(|&(from, _)| lift(from, floor))
        .collect::<io::Result<Vec<_>>>()?;
    let inherit: Vec<(RawFd, RawFd)> = lifted
        .iter()
        .zip(targets())
        .map(|(from, to)| (from.as_raw_fd(), to))
        .collect();
    let namespace_flags = confinement.map_or(0, ChildConfinement::clone_flags);
    let namespaces = namespace_flags != 0;
    let own_terminal = own_terminal
        && tty.is_none()
        && confinement.is_some_and(ChildConfinement::has_own_terminals);
    let terminal_socket = own_terminal.then(socket_pair).transpose()?;
    let any_terminal = tty.is_some() || own_terminal;
    let stdin = if any_terminal {
        None
    } else {
        Some(std::fs::File::open("/dev/null")?)
    };
    let output = if any_terminal {
        None
    } else {
        Some((pipe()?, pipe()?))
    };
    let (report_read, mut report_write) = pipe()?;
    if inherit
        .iter()
        .any(|&(_, to)| to == report_write.as_raw_fd())
    {
        report_write = lift(report_write.as_raw_fd(), floor)?;
    }
    let status_pipe = namespaces.then(pipe).transpose()?;
    let argv_ptrs = null_pointers(argv);
    let envp_ptrs = null_pointers(envp);
    // Without namespaces the child runs on a buffer of ours until its exec
    // (we are suspended meanwhile); with them, on a mapping that lives as
    // long as the init (a placeholder pidfd until the clone gives one).
    let mut buffer = if namespaces {
        Vec::new()
    } else {
        vec![0u8; HALF_STACK]
    };
    let mut stack = if namespaces {
        Some(InitStack::map()?)
    } else {
        None
    };
    // The stack grows down: pass its top, aligned to 16 bytes.
    let top = stack.as_ref().map_or_else(
        || (buffer.as_mut_ptr() as usize + buffer.len()) & !15,
        InitStack::init_top,
    );
    let dropped = if let Some(confinement) = confinement.filter(|_| namespaces) {
        !confinement.keep_capabilities()
    } else {
        1 << CAP_SYS_PTRACE
    };
    let plan = ChildPlan {
        program: program.as_ptr(),
        argv: argv_ptrs.as_ptr(),
        envp: envp_ptrs.as_ptr(),
        cwd: cwd.as_ptr(),
        stdin: tty.or(stdin.as_ref().map(AsRawFd::as_raw_fd)).unwrap_or(-1),
        stdout: output
            .as_ref()
            .map_or(-1, |((_, write), _)| write.as_raw_fd()),
        stderr: output
            .as_ref()
            .map_or(-1, |(_, (_, write))| write.as_raw_fd()),
        report: report_write.as_raw_fd(),
        tty: any_terminal,
        terminal_socket: terminal_socket
            .as_ref()
            .map_or(-1, |(_, child)| child.as_raw_fd()),
        status: status_pipe
            .as_ref()
            .map_or(-1, |(_, write)| write.as_raw_fd()),
        probe: program.is_empty(),
        shell_stack: stack.as_ref().map_or(0, InitStack::shell_top),
        // SAFETY: getpid has no preconditions.
        parent: unsafe { libc::getpid() },
        capabilities: CapDrop::prepare(dropped, namespace_flags & libc::CLONE_NEWUSER != 0),
        cgroups: cgroups.unwrap_or([-1; crate::cgroup::MAX_JOINS]),
        confinement: confinement.map_or(std::ptr::null(), std::ptr::from_ref),
        inherit: inherit.as_ptr(),
        inherit_len: inherit.len(),
        exec_notify: exec_notify.unwrap_or(-1),
    };
    let mut pidfd: c_int = -1;

    // Signals stay blocked from clone to exec, so no handler of ours runs
    // in the child on the shared memory; the child unblocks after
    // resetting them. With namespaces they stay blocked here until the
    // report pipe has been read: that read then cannot fail with EINTR,
    // the one errno we would look at while the init (on our thread
    // pointer, hence our errno) may still be writing it.
    let mut all: libc::sigset_t = unsafe_zeroed_sigset();
    let mut previous: libc::sigset_t = unsafe_zeroed_sigset();
    // SAFETY: both sets are valid, initialised sigset_t values.
    unsafe {
        libc::sigfillset(&raw mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut previous);
    }
    // Without namespaces the child is the shell and we are suspended
    // until its exec (CLONE_VFORK). With them the child is the init, which
    // lives as long as the command: we go on at once, and wait for the end
    // of the report pipe instead (the init closes it once the shell has
    // exec'd).
    let vfork = if namespaces { 0 } else { libc::CLONE_VFORK };
    // SAFETY: `child_main` only makes raw syscalls on `plan`, which outlives
    // the child's use of it (without namespaces, CLONE_VFORK suspends us
    // until exec or exit; with them, we read the report pipe to its end
    // below before `plan` goes, and the init stops reading `plan` before it
    // closes that pipe); `top` is the aligned top of `buffer` or of the
    // init's mapping, which outlives the child; `pidfd` is a valid int for
    // CLONE_PIDFD to fill.
    let pid = unsafe {
        libc::clone(
            child_main,
            top as *mut c_void,
            libc::CLONE_VM | vfork | libc::CLONE_PIDFD | namespace_flags | libc::SIGCHLD,
            (&raw const plan).cast_mut().cast::<c_void>(),
            &raw mut pidfd,
        )
    };
    if pid < 0 {
        // No child: errno is ours alone.
        let clone_error = io::Error::last_os_error();
        // SAFETY: `previous` holds the mask saved above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &raw const previous, std::ptr::null_mut());
        }
        return Err(clone_error);
    }
    // SAFETY: CLONE_PIDFD filled `pidfd` with a new descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let status = status_pipe.map(|(read, write)| {
        drop(write);
        read
    });
    let output = output.map(|((stdout, stdout_write), (stderr, stderr_write))| {
        drop((stdout_write, stderr_write));
        (stdout, stderr)
    });
    drop((stdin, report_write));
    let terminal_socket = terminal_socket.map(|(ours, child)| {
        drop(child);
        ours
    });

    // The child (or the shell) wrote its errno here if it could not exec.
    // From the clone to here nothing reads errno: the init may write it.
    let mut errno = [0u8; 4];
    let read = read_full(&report_read, &mut errno);
    let failed = read == errno.len();
    if failed {
        // It has exited (or is about to; with namespaces once it has
        // reaped the shell): collect it so it is no zombie, and so that
        // its stack can go.
        // SAFETY: `pid` is our child; a null status pointer is allowed.
        // Signals are blocked: no EINTR.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    }
    // SAFETY: `previous` holds the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const previous, std::ptr::null_mut());
    }
    drop(buffer);
    if failed {
        return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
    }
    // The init sent its terminal before starting the shell, which has
    // exec'd by now: it waits in the socket.
    let terminal = match terminal_socket.as_ref().map(receive_terminal) {
        None => None,
        Some(Ok(pair)) => Some(pair),
        Some(Err(error)) => {
            // Dropping the stack ends the init first.
            if let Some(stack) = &mut stack {
                stack.pidfd = Some(pidfd);
            }
            return Err(error);
        }
    };
    let copy = stack.is_some().then(|| pidfd.try_clone());
    let pidfd = match (&mut stack, copy) {
        (Some(stack), Some(Ok(copy))) => {
            stack.pidfd = Some(copy);
            pidfd
        }
        (Some(stack), Some(Err(error))) => {
            // Dropping the stack then ends the init first.
            stack.pidfd = Some(pidfd);
            return Err(error);
        }
        _ => pidfd,
    };
    Ok(RawChild {
        pid,
        pidfd,
        output,
        status,
        stack,
        terminal,
    })
}

/// A connected pair of Unix datagram sockets, close-on-exec.
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for socketpair to fill.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair succeeded: both descriptors are open and ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Room for a control message carrying two descriptors, aligned for it.
#[repr(C, align(8))]
struct TwoFds([u8; 32]);

/// The (master, slave) pair the init sent on `socket`, without waiting.
fn receive_terminal(socket: &OwnedFd) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast::<c_void>(),
        iov_len: 1,
    };
    let mut control = TwoFds([0; 32]);
    // SAFETY: a zeroed msghdr is valid; the fields set point into our stack.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &raw mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.0.as_mut_ptr().cast::<c_void>();
    message.msg_controllen = control.0.len() as _;
    // SAFETY: `message` describes buffers that live through the call.
    let received = unsafe {
        libc::recvmsg(
            socket.as_raw_fd(),
            &raw mut message,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        )
    };
    if received < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: recvmsg filled `message`; CMSG_FIRSTHDR reads within it.
    let header = unsafe { libc::CMSG_FIRSTHDR(&raw const message) };
    // SAFETY: a non-null header points into `control`.
    let fds = (!header.is_null()
        && unsafe { (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS }
        // SAFETY: as above.
        && unsafe { (*header).cmsg_len } as usize >= unsafe { libc::CMSG_LEN(8) } as usize)
        .then(|| {
            let mut fds = [0 as c_int; 2];
            // SAFETY: the message holds two descriptors after the header.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    libc::CMSG_DATA(header).cast::<c_int>(),
                    fds.as_mut_ptr(),
                    2,
                );
            }
            fds
        });
    let Some([master, slave]) = fds else {
        return Err(io::Error::other("the namespace's init sent no terminal"));
    };
    // SAFETY: SCM_RIGHTS gave us these two new descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) })
}

/// The wait status the namespace's init reported for the shell, read once
/// the init has exited (`None`: it reported none, as when it was killed).
pub fn reported_status(status: &OwnedFd) -> Option<c_int> {
    let mut bytes = [0u8; 4];
    (read_full(status, &mut bytes) == bytes.len()).then(|| c_int::from_ne_bytes(bytes))
}

/// Waits for a child to exit (blocking) and returns the status its init
/// reported: for the start-up probe.
pub fn wait_blocking(child: &RawChild) -> Option<c_int> {
    // SAFETY: a zeroed siginfo_t is a valid buffer; the pidfd is ours.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        while libc::waitid(
            libc::P_PIDFD,
            child.pidfd.as_raw_fd().unsigned_abs(),
            &raw mut info,
            libc::WEXITED,
        ) != 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
    }
    child.status.as_ref().and_then(reported_status)
}

fn unsafe_zeroed_sigset() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; all-zero is a valid (empty) value.
    unsafe { std::mem::zeroed() }
}

fn read_full(fd: &OwnedFd, buffer: &mut [u8]) -> usize {
    let mut done = 0;
    while done < buffer.len() {
        // SAFETY: the pointer and length describe the unfilled part of `buffer`.
        let read = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buffer[done..].as_mut_ptr().cast::<c_void>(),
                buffer.len() - done,
            )
        };
        if read > 0 {
            done += read.cast_unsigned();
        } else if read == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
    }
    done
}

/// The child: raw syscalls only, then exec. On failure it reports errno
/// on the report pipe and exits 127. Nothing here allocates, takes a lock
/// or can panic (no indexing, no formatting).
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `ChildPlan`, alive while we run.
    let plan = unsafe { &*arg.cast::<ChildPlan>() };
    // Default dispositions: handlers point into the parent's code, and
    // an ignored SIGPIPE (Rust ignores it) would survive exec.
    for signal in 1..65 {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            // SAFETY: SIG_DFL installs no handler; an invalid number only fails.
            unsafe { libc::signal(signal, libc::SIG_DFL) };
        }
    }
    // The OOM killer's first choice: commands, never the server. Only in
    // a process cloned with `CLONE_VFORK`: a namespace's init shares the
    // server's memory without it, and the kernel copies a score written
    // there to every process sharing that memory, the server included.
    // Its shell writes the score instead (`shell_main`).
    if plan.status < 0 {
        // SAFETY: without namespaces (no status pipe) we are the
        // `CLONE_VFORK` child that execs.
        unsafe { raise_oom_score() };
    }
    // Its own cgroup before anything else, so every process it starts is
    // in it whatever it does to its session or environment.
    for &cgroup in &plan.cgroups {
        if cgroup < 0 {
            continue;
        }
        // SAFETY: a descriptor the parent keeps open until we exec; "0"
        // names the writing process.
        if unsafe { libc::write(cgroup, b"0".as_ptr().cast::<c_void>(), 1) } != 1 {
            // SAFETY: as below.
            unsafe { fail(plan) };
        }
    }
    // SAFETY: `confinement` is null or points to the parent's
    // `ChildConfinement`, alive while we run.
    let confinement = unsafe { plan.confinement.as_ref() };
    // The sandbox's cgroup and limits first, so nothing below escapes them.
    if let Some(confinement) = confinement {
        // SAFETY: we are the spawned child; its pointers are the parent's, still valid.
        if !unsafe { confinement.enter_limits() } {
            // SAFETY: `plan` is valid; `fail` only writes and exits.
            unsafe { fail(plan) };
        }
    }
    if let Some(confinement) = confinement {
        // SAFETY: we are the spawned child; its pointers are the parent's, still valid.
        if !unsafe { confinement.map_ids() } {
            // SAFETY: as above.
            unsafe { fail(plan) };
        }
    }
    // SAFETY: setsid takes no arguments.
    if unsafe { libc::setsid() } < 0 {
        // SAFETY: as above.
        unsafe { fail(plan) };
    }
    let (kill, off): (libc::c_ulong, libc::c_ulong) = (libc::SIGKILL.unsigned_abs().into(), 0);
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, kill, off, off, off) } != 0 {
        // SAFETY: as above.
        unsafe { fail(plan) };
    }
    // The parent may have died before the request was made. (In a PID
    // namespace of our own the parent is outside it and reads as 0; it is
    // suspended until we exec, so only a SIGKILL of the server between
    // clone and here goes unseen, and then the init runs without parent.)
    // SAFETY: getppid takes no arguments.
    let parent = unsafe { libc::getppid() };
    if parent != plan.parent && !(plan.status >= 0 && parent == 0) {
        // SAFETY: as above.
        unsafe { fail(plan) };
    }
    // Under a terminal, `stdin` is its slave, for all three.
    let (stdin, stdout, stderr) = if plan.tty {
        (plan.stdin, plan.stdin, plan.stdin)
    } else {
        (plan.stdin, plan.stdout, plan.stderr)
    };
    // A terminal of the namespace's own devpts is opened once it is mounted.
    for (from, to) in [(stdin, 0), (stdout, 1), (stderr, 2)] {
        // SAFETY: `from` is a descriptor the parent keeps open until we exec.
        if plan.terminal_socket < 0 && unsafe { libc::dup2(from, to) } < 0 {
            // SAFETY: as above.
            unsafe { fail(plan) };
        }
    }
    // Without namespaces this process is the shell: its new session takes
    // the terminal now. With them, the shell does after its own `setsid`.
    // SAFETY: as in `take_terminal`.
    if plan.tty && plan.status < 0 && !unsafe { take_terminal() } {
        // SAFETY: as above.
        unsafe { fail(plan) };
    }
    // SAFETY: `cwd` is a C string the parent keeps alive.
    if unsafe { libc::chdir(plan.cwd) } != 0 {
        // SAFETY: as above.
        unsafe { fail(plan) };
    }
    if let Some(confinement) = confinement {
        // SAFETY: we are the spawned child.
        if !unsafe { confinement.mount_proc() } {
            // SAFETY: as above.
            unsafe { fail(plan) };
        }
    }
    // SAFETY: we are the spawned child, in our own devpts instance.
    if plan.terminal_socket >= 0 && !unsafe { open_own_terminal(plan.terminal_socket) } {
        // SAFETY: as above.
        unsafe { fail(plan) };
    }
    // Every command, sandboxed or not, runs without CAP_SYS_PTRACE; with
    // namespaces of its own, with only the sandbox's few capabilities.
    // SAFETY: we are the spawned child; `apply` makes raw syscalls only.
    if !unsafe { plan.capabilities.apply() } {
        // SAFETY: as above.
        unsafe { fail(plan) };
    }
    let mut mask = unsafe_zeroed_sigset();
    // SAFETY: `mask` is a valid sigset_t on our stack.
    unsafe { libc::sigemptyset(&raw mut mask) };
    if plan.status >= 0 {
        // The init's signals stay blocked for good: it waits for them
        // with `rt_sigtimedwait` (what arrives meanwhile, the shell's
        // SIGCHLD or a SIGTERM, waits pending).
        for signal in INIT_SIGNALS {
            // SAFETY: `mask` is initialised; `signal` is a valid number.
            unsafe { libc::sigaddset(&raw mut mask, signal) };
        }
    }
    // SAFETY: `mask` is initialised; a null old-set pointer is allowed.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &raw const mask, std::ptr::null_mut()) };
    if plan.status < 0 || plan.probe {
        // Landlock and seccomp last: after them, only execve remains. With
        // namespaces the shell applies them to itself, so the init stays
        // outside the shell's Landlock domain, which then refuses the
        // command every ptrace-mode access to it (`/proc/1/mem`,
        // `environ`, `maps`); the probe applies them here, to check they
        // hold in the namespaces.
        if let Some(confinement) = confinement {
            // SAFETY: we are the spawned child; its pointers are the parent's, still valid.
            if !unsafe { confinement.restrict() } {
                // SAFETY: as above.
                unsafe { fail(plan) };
            }
        }
    }
    if plan.status < 0 {
        // SAFETY: we are the spawned child, about to exec; before the
        // descriptors move, so none lands on the socket.
        if plan.exec_notify >= 0 && !unsafe { super::exec_notify::install(plan.exec_notify) } {
            // SAFETY: as above.
            unsafe { fail(plan) };
        }
        // SAFETY: we are the spawned child, about to exec.
        if !unsafe { inherit_descriptors(plan) } {
            // SAFETY: as above.
            unsafe { fail(plan) };
        }
        // SAFETY: program, argv and envp are C strings and null-terminated
        // pointer arrays the parent keeps alive until we exec.
        unsafe { libc::execve(plan.program, plan.argv, plan.envp) };
        // SAFETY: as above.
        unsafe { fail(plan) }
    }
    let mut shell = 0;
    if !plan.probe {
        // The shell: a child of ours sharing the memory until it execs,
        // under everything above; we go on once it has (CLONE_VFORK).
        // SAFETY: `shell_main` makes raw syscalls on `plan`, alive while the
        // parent reads the report pipe; `shell_stack` is the aligned top of
        // the lower half of the init's mapping, which we do not use.
        shell = unsafe {
            libc::clone(
                shell_main,
                plan.shell_stack as *mut c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                std::ptr::from_ref(plan).cast_mut().cast::<c_void>(),
            )
        };
        // The first process after PID 1 of a new namespace is 2.
        if shell != 2 {
            // SAFETY: as above.
            unsafe { fail(plan) };
        }
    }
    // From here the parent may run beside us as soon as the report pipe
    // closes: raw system calls only (`raw.rs`: no errno), on copies in
    // our own stack; `plan` is not read again after the close.
    let status = plan.status;
    let (report, below, above) = (
        plan.report,
        u32::try_from(status).unwrap_or(0),
        u32::try_from(status).unwrap_or(u32::MAX - 1),
    );
    // Every descriptor but 0, 1, 2 and the status pipe goes, the report
    // pipe with them: the command's init holds none of the server's
    // descriptors (copied by the clone, closed by no exec) for the
    // command's lifetime. Without close_range (before Linux 5.9), at
    // least the report pipe.
    let closed = below <= 3 || raw::close_range(3, below - 1) == 0;
    if !(closed && raw::close_range(above + 1, u32::MAX) == 0) {
        raw::close(report);
    }
    init::run(status, shell)
}

/// Makes this process the OOM killer's first choice (`oom_score_adj`
/// 1000; raising one's own score needs no privilege). A failure leaves the
/// inherited score: no reason to fail the spawn. Raw calls only.
///
/// # Safety
/// Call only in a spawned child cloned with `CLONE_VFORK`, before exec.
unsafe fn raise_oom_score() {
    // SAFETY: a static C string; the descriptor is closed at once.
    unsafe {
        let fd = libc::open(
            c"/proc/self/oom_score_adj".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            libc::write(fd, b"1000".as_ptr().cast::<c_void>(), 4);
            libc::close(fd);
        }
    }
}

/// The shell of a namespace, started by its PID 1: a session of its own,
/// no blocked signals, `execve`. On failure it reports errno as the child
/// does, and the init reaps it.
extern "C" fn shell_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's `ChildPlan`, alive while we run.
    let plan = unsafe { &*arg.cast::<ChildPlan>() };
    let mut empty = unsafe_zeroed_sigset();
    // SAFETY: `empty` is a valid sigset_t on our stack.
    unsafe { libc::sigemptyset(&raw mut empty) };
    // SAFETY: `empty` is initialised; a null old-set pointer is allowed.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &raw const empty, std::ptr::null_mut()) };
    // SAFETY: setsid takes no arguments.
    if unsafe { libc::setsid() } < 0 {
        // SAFETY: as in `child_main`.
        unsafe { fail(plan) };
    }
    // SAFETY: as in `take_terminal`.
    if plan.tty && !unsafe { take_terminal() } {
        // SAFETY: as in `child_main`.
        unsafe { fail(plan) };
    }
    // SAFETY: `confinement` is null or the parent's, alive while we run.
    if let Some(confinement) = unsafe { plan.confinement.as_ref() } {
        // Landlock and seccomp for the shell alone (see `child_main`).
        // SAFETY: we are the spawned shell; its pointers are still valid.
        if !unsafe { confinement.restrict() } {
            // SAFETY: as in `child_main`.
            unsafe { fail(plan) };
        }
    }
    // SAFETY: we are the spawned shell, about to exec (see `child_main`).
    if plan.exec_notify >= 0 && !unsafe { super::exec_notify::install(plan.exec_notify) } {
        // SAFETY: as in `child_main`.
        unsafe { fail(plan) };
    }
    // SAFETY: we are the spawned shell (a `CLONE_VFORK` child: the score
    // stays its own), about to exec.
    unsafe { raise_oom_score() };
    // SAFETY: we are the spawned shell, about to exec.
    if !unsafe { inherit_descriptors(plan) } {
        // SAFETY: as in `child_main`.
        unsafe { fail(plan) };
    }
    // SAFETY: C strings and null-terminated arrays the parent keeps alive.
    unsafe { libc::execve(plan.program, plan.argv, plan.envp) };
    // SAFETY: as above.
    unsafe { fail(plan) }
}

/// Marks every descriptor above 2 close-on-exec (what the server itself
/// inherited without the flag included: only 0, 1, 2 and the plan's reach
/// the program; on kernels before 5.11, which lack the flag, those
/// inherited ones still do), then copies the plan's inherited descriptors
/// to their numbers (`dup2` leaves the copy without close-on-exec). Last
/// before `execve`: nothing after needs a descriptor but the report pipe,
/// which the parent moved off every number. No allocation, no panic.
///
/// # Safety
/// Call only in the spawned process that is about to exec, with the
/// parent's plan.
unsafe fn inherit_descriptors(plan: &ChildPlan) -> bool {
    // SAFETY: integer arguments only; a kernel without the flag refuses
    // the call and changes nothing.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3_u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    // SAFETY: the parent's slice of `inherit_len` pairs (a non-null,
    // aligned pointer even when empty), alive until we exec.
    let pairs = unsafe { std::slice::from_raw_parts(plan.inherit, plan.inherit_len) };
    pairs
        .iter()
        // SAFETY: `from` is open in our copy of the parent's table.
        .all(|&(from, to)| unsafe { libc::dup2(from, to) } == to)
}

/// Opens a terminal pair in the namespace's own devpts instance (mounted
/// on `/dev/pts`), makes its slave descriptors 0, 1 and 2, and sends
/// (master, slave) to the parent on `socket`. Raw system calls on our
/// stack only. False on a failure (errno says why).
///
/// # Safety
/// Call only in the spawned child, after the devpts mount.
unsafe fn open_own_terminal(socket: RawFd) -> bool {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: a static path.
    let master = unsafe { libc::open(c"/dev/pts/ptmx".as_ptr(), flags) };
    if master < 0 {
        return false;
    }
    let unlock: c_int = 0;
    // SAFETY: TIOCSPTLCK reads an int; TIOCGPTPEER takes the flags and
    // returns a new descriptor.
    let slave = unsafe {
        if libc::ioctl(master, libc::TIOCSPTLCK, &raw const unlock) != 0 {
            return false;
        }
        libc::ioctl(master, libc::TIOCGPTPEER, flags)
    };
    if slave < 0 {
        return false;
    }
    for to in 0..3 {
        // SAFETY: `slave` is open.
        if unsafe { libc::dup2(slave, to) } < 0 {
            return false;
        }
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast::<c_void>(),
        iov_len: 1,
    };
    let mut control = TwoFds([0; 32]);
    // SAFETY: a zeroed msghdr is valid; the fields set point into our stack.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &raw mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.0.as_mut_ptr().cast::<c_void>();
    // SAFETY: CMSG_SPACE is arithmetic.
    message.msg_controllen = unsafe { libc::CMSG_SPACE(8) } as _;
    // SAFETY: the header lies within `control`, sized for two descriptors.
    let sent = unsafe {
        let header = libc::CMSG_FIRSTHDR(&raw const message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(8) as _;
        let data = libc::CMSG_DATA(header).cast::<c_int>();
        data.write_unaligned(master);
        data.add(1).write_unaligned(slave);
        libc::sendmsg(socket, &raw const message, 0) == 1
    };
    // SAFETY: our copies; the parent has its own, and 0-2 stay.
    unsafe {
        libc::close(master);
        libc::close(slave);
    }
    sent
}

/// Makes descriptor 0, a terminal's slave, the controlling terminal of the
/// calling process's session (`TIOCSCTTY`), which it must lead.
///
/// # Safety
/// Call only in a spawned child, after `setsid` and the `dup2` to 0.
unsafe fn take_terminal() -> bool {
    // SAFETY: TIOCSCTTY takes an integer (0: do not steal it from another session).
    unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) == 0 }
}

/// Reports errno to the parent and exits without running any of its code.
///
/// # Safety
/// Call only in the spawned child, with the parent's plan.
unsafe fn fail(plan: &ChildPlan) -> ! {
    // SAFETY: errno is thread-local and always readable.
    let errno = unsafe { *libc::__errno_location() };
    let bytes = errno.to_ne_bytes();
    // SAFETY: a buffer on our stack and the report pipe the parent keeps open.
    unsafe { libc::write(plan.report, bytes.as_ptr().cast::<c_void>(), bytes.len()) };
    // SAFETY: _exit runs no destructors or handlers of the shared memory.
    unsafe { libc::_exit(127) }
}

/// Registers a pidfd with the runtime's reactor, to learn when the process exits.
pub fn watch_pidfd(pidfd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd stays open, and names the same description, for as
    // long as the AsyncFd owns it; its as_raw_fd never changes.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
    }
    .map_err(io::Error::from)
}
