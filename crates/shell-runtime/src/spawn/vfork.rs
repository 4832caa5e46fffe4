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

#![allow(
    unsafe_code,
    reason = "starting a process without fork needs clone(2) and a child that makes raw syscalls"
)]

use std::ffi::{CStr, CString, c_int, c_void};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::confine::{ChildConfinement, SANDBOX_CAPABILITIES};
use super::init::INIT_NAME;

/// A started child: its pid, a pidfd to wait on, and its output pipes.
pub(crate) struct RawChild {
    pub(crate) pid: i32,
    pub(crate) pidfd: OwnedFd,
    /// Stdout and stderr: pipes, or `None` under a terminal (the caller
    /// holds its master).
    pub(crate) output: Option<(OwnedFd, OwnedFd)>,
    /// Where the namespace's init reports the shell's wait status.
    pub(crate) status: Option<OwnedFd>,
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
/// namespaces of its own keeps only [`SANDBOX_CAPABILITIES`].
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
/// see (`CLONE_VM`) and which stays valid while the parent is suspended.
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
    /// The init's status pipe (-1 without namespaces).
    status: RawFd,
    /// With namespaces, the shell the child starts before it execs the
    /// init (null for the start-up probe), its argv, and the top of the
    /// stack its own clone child runs on.
    shell_program: *const libc::c_char,
    shell_argv: *const *const libc::c_char,
    shell_stack: usize,
    parent: libc::pid_t,
    capabilities: CapDrop,
    /// The command's `cgroup.procs` (or `tasks`), opened by the parent, or -1.
    cgroup: RawFd,
    confinement: *const ChildConfinement,
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
/// as the process.
pub(crate) fn spawn(
    program: &CStr,
    argv: &[CString],
    envp: &[CString],
    cwd: &CStr,
    cgroup: Option<RawFd>,
    confinement: Option<&ChildConfinement>,
    tty: Option<RawFd>,
) -> io::Result<RawChild> {
    let stdin = match tty {
        Some(_) => None,
        None => Some(std::fs::File::open("/dev/null")?),
    };
    let output = match tty {
        Some(_) => None,
        None => Some((pipe()?, pipe()?)),
    };
    let (report_read, report_write) = pipe()?;
    let init = confinement.and_then(ChildConfinement::init);
    let namespace_flags = confinement.map_or(0, ChildConfinement::clone_flags);
    let status_pipe = init.map(|_| pipe()).transpose()?;
    // With namespaces the child (PID 1) starts the shell (PID 2), then
    // execs the init, which learns the shell's pid from its argv. An empty
    // program is the start-up probe: no shell, pid 0.
    let shell_program = match init {
        Some(_) if !program.is_empty() => program.as_ptr(),
        _ => std::ptr::null(),
    };
    let (exec_program, init_argv) = match (init, &status_pipe) {
        (Some(init), Some((_, status_write))) => {
            let shell_pid = if shell_program.is_null() { c"0" } else { c"2" };
            let init_argv = vec![
                CString::new(INIT_NAME).unwrap_or_default(),
                CString::new(status_write.as_raw_fd().to_string()).unwrap_or_default(),
                shell_pid.to_owned(),
            ];
            (init, Some(init_argv))
        }
        _ => (program, None),
    };
    let argv_ptrs = null_pointers(init_argv.as_deref().unwrap_or(argv));
    let shell_argv_ptrs = null_pointers(argv);
    let envp_ptrs = null_pointers(envp);
    // 64 KiB is ample for a child that makes a handful of syscalls; with
    // namespaces the shell's own clone child runs on a second 64 KiB below.
    let half = 64 * 1024;
    let mut stack = vec![0u8; if init.is_some() { 2 * half } else { half }];
    // The stack grows down: pass its top, aligned to 16 bytes.
    let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
    let shell_stack = (stack.as_mut_ptr() as usize + half) & !15;
    let dropped = if init.is_some() {
        !SANDBOX_CAPABILITIES
    } else {
        1 << CAP_SYS_PTRACE
    };
    let plan = ChildPlan {
        program: exec_program.as_ptr(),
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
        tty: tty.is_some(),
        status: status_pipe
            .as_ref()
            .map_or(-1, |(_, write)| write.as_raw_fd()),
        shell_program,
        shell_argv: shell_argv_ptrs.as_ptr(),
        shell_stack,
        // SAFETY: getpid has no preconditions.
        parent: unsafe { libc::getpid() },
        capabilities: CapDrop::prepare(dropped, namespace_flags & libc::CLONE_NEWUSER != 0),
        cgroup: cgroup.unwrap_or(-1),
        confinement: confinement.map_or(std::ptr::null(), std::ptr::from_ref),
    };
    let mut pidfd: c_int = -1;

    // Signals stay blocked from clone to exec, so no handler of ours runs
    // in the child on the shared memory; the child unblocks after resetting them.
    let mut all: libc::sigset_t = unsafe_zeroed_sigset();
    let mut previous: libc::sigset_t = unsafe_zeroed_sigset();
    // SAFETY: both sets are valid, initialised sigset_t values.
    unsafe {
        libc::sigfillset(&raw mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut previous);
    }
    // SAFETY: `child_main` only makes raw syscalls on `plan`, which outlives
    // the child's use of it (CLONE_VFORK suspends us until exec or exit);
    // `top` is the aligned top of `stack`, alive across the call; `pidfd`
    // is a valid int for CLONE_PIDFD to fill.
    let pid = unsafe {
        libc::clone(
            child_main,
            top as *mut c_void,
            libc::CLONE_VM
                | libc::CLONE_VFORK
                | libc::CLONE_PIDFD
                | namespace_flags
                | libc::SIGCHLD,
            (&raw const plan).cast_mut().cast::<c_void>(),
            &raw mut pidfd,
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: `previous` holds the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &raw const previous, std::ptr::null_mut());
    }
    drop(stack);
    if pid < 0 {
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

    // The child wrote its errno here if it could not exec.
    let mut errno = [0u8; 4];
    let read = read_full(&report_read, &mut errno);
    if read == errno.len() {
        // It has exited (or is about to): collect it so it is no zombie.
        // SAFETY: `pid` is our child; a null status pointer is allowed.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
    }
    Ok(RawChild {
        pid,
        pidfd,
        output,
        status,
    })
}

/// The wait status the namespace's init reported for the shell, read once
/// the init has exited (`None`: it reported none, as when it was killed).
pub(crate) fn reported_status(status: &OwnedFd) -> Option<c_int> {
    let mut bytes = [0u8; 4];
    (read_full(status, &mut bytes) == bytes.len()).then(|| c_int::from_ne_bytes(bytes))
}

/// Waits for a child to exit (blocking) and returns the status its init
/// reported: for the start-up probe.
pub(crate) fn wait_blocking(child: &RawChild) -> Option<c_int> {
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
    // Its own cgroup before anything else, so every process it starts is
    // in it whatever it does to its session or environment.
    if plan.cgroup >= 0 {
        // SAFETY: a descriptor the parent keeps open until we exec; "0"
        // names the writing process.
        if unsafe { libc::write(plan.cgroup, b"0".as_ptr().cast::<c_void>(), 1) } != 1 {
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
    for (from, to) in [(stdin, 0), (stdout, 1), (stderr, 2)] {
        // SAFETY: `from` is a descriptor the parent keeps open until we exec.
        if unsafe { libc::dup2(from, to) } < 0 {
            // SAFETY: as above.
            unsafe { fail(plan) };
        }
    }
    // Without namespaces this process is the shell: its new session takes
    // the terminal now. With them, the shell does after its own `setsid`.
    // SAFETY: as in `take_terminal`.
    if plan.tty && plan.shell_program.is_null() && !unsafe { take_terminal() } {
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
        // The init's signals stay blocked through its exec: what arrives
        // meanwhile (the shell's SIGCHLD, a SIGTERM) waits for it.
        for signal in INIT_SIGNALS {
            // SAFETY: `mask` is initialised; `signal` is a valid number.
            unsafe { libc::sigaddset(&raw mut mask, signal) };
        }
    }
    // SAFETY: `mask` is initialised; a null old-set pointer is allowed.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &raw const mask, std::ptr::null_mut()) };
    // Landlock and seccomp last: after them, only execve remains.
    if let Some(confinement) = confinement {
        // SAFETY: we are the spawned child; its pointers are the parent's, still valid.
        if !unsafe { confinement.restrict() } {
            // SAFETY: as above.
            unsafe { fail(plan) };
        }
    }
    if !plan.shell_program.is_null() {
        // The shell: a child of ours sharing the memory until it execs,
        // under everything above; we go on once it has (CLONE_VFORK).
        // SAFETY: `shell_main` makes raw syscalls on `plan`, alive while the
        // parent is suspended; `shell_stack` is the aligned top of the
        // lower half of the parent's stack buffer, which we do not use.
        let shell = unsafe {
            libc::clone(
                shell_main,
                plan.shell_stack as *mut c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                std::ptr::from_ref(plan).cast_mut().cast::<c_void>(),
            )
        };
        // The first process after PID 1 of a new namespace is 2; the init
        // is told so.
        if shell != 2 {
            // SAFETY: as above.
            unsafe { fail(plan) };
        }
    }
    if plan.status >= 0 {
        // The init inherits the status pipe (our descriptor table is our
        // own: the parent's copy stays close-on-exec).
        // SAFETY: fcntl on a descriptor the parent keeps open.
        if unsafe { libc::fcntl(plan.status, libc::F_SETFD, 0) } != 0 {
            // SAFETY: as above.
            unsafe { fail(plan) };
        }
    }
    // SAFETY: program, argv and envp are C strings and null-terminated
    // pointer arrays the parent keeps alive until we exec.
    unsafe { libc::execve(plan.program, plan.argv, plan.envp) };
    // SAFETY: as above.
    unsafe { fail(plan) }
}

/// The signals the namespace's init waits for.
const INIT_SIGNALS: [c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD];

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
    // SAFETY: C strings and null-terminated arrays the parent keeps alive.
    unsafe { libc::execve(plan.shell_program, plan.shell_argv, plan.envp) };
    // SAFETY: as above.
    unsafe { fail(plan) }
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
pub(crate) fn watch_pidfd(pidfd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd stays open, and names the same description, for as
    // long as the AsyncFd owns it; its as_raw_fd never changes.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
    }
    .map_err(io::Error::from)
}
