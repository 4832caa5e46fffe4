//! PID 1 of a sandboxed command's PID namespace (docs/decisions/0010).
//!
//! The spawned child (PID 1 of the new namespace) starts the shell (PID 2,
//! in a process session of its own) and then execs the program named in
//! [`ConfinementSpec::init`](crate::ConfinementSpec::init) with `argv[0]`
//! set to [`INIT_NAME`]; that program acts as the init before its `main`
//! (glibc) or when it calls [`run_if_init`], and never returns. The init
//! forwards SIGTERM, SIGINT and SIGHUP to the shell's process group, reaps
//! every process that ends (orphans are re-parented to PID 1), and when the
//! shell exits writes the shell's raw wait status on an inherited pipe and
//! exits. The kernel then kills what is left in the namespace. The server
//! reads the status from the pipe, so a shell killed by SIGTERM reads as
//! killed by SIGTERM (143), as without the sandbox: PID 1 itself cannot die
//! of a signal sent from inside. The four signals stay blocked from before
//! the shell starts to the init's `sigwaitinfo`, so none is lost.
//!
//! `argv`: `[INIT_NAME, STATUS_FD, SHELL_PID]`. `SHELL_PID` 0 is the
//! start-up probe: it reports status 0 if it is PID 1.

#![allow(
    unsafe_code,
    reason = "a minimal init: sigwaitinfo, waitpid and kill are raw syscalls"
)]

/// `argv[0]` that makes [`run_if_init`] act as the namespace's init.
pub const INIT_NAME: &str = "shell-runtime-init";

/// On glibc every program that links this crate acts as the init when
/// started as one, before its `main` runs (glibc hands `.init_array`
/// functions `argc`, `argv` and `envp`): test binaries and library users'
/// programs included. [`run_if_init`] does the same where this does not
/// run (musl calls these functions without arguments).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[unsafe(link_section = ".init_array")]
pub(crate) static RUN_AS_INIT: extern "C" fn(
    std::ffi::c_int,
    *const *const std::ffi::c_char,
    *const *const std::ffi::c_char,
) = run_as_init_if_named;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn run_as_init_if_named(
    argc: std::ffi::c_int,
    argv: *const *const std::ffi::c_char,
    _envp: *const *const std::ffi::c_char,
) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(count) = usize::try_from(argc) else {
        return;
    };
    if count == 0 || argv.is_null() {
        return;
    }
    // SAFETY: glibc passes the process's `argc` C strings in `argv`.
    let arg = |index: usize| unsafe { std::ffi::CStr::from_ptr(*argv.add(index)) };
    if arg(0).to_bytes() != INIT_NAME.as_bytes() {
        return;
    }
    let args: Vec<_> = (1..count)
        .map(|index| std::ffi::OsStr::from_bytes(arg(index).to_bytes()).to_owned())
        .collect();
    std::process::exit(linux::run(&args));
}

/// Acts as the init of a sandboxed command's PID namespace when this
/// process was started as one (`argv[0]` is [`INIT_NAME`]), and then never
/// returns; otherwise returns at once. A program named as
/// [`ConfinementSpec::init`](crate::ConfinementSpec::init) calls it first
/// thing in `main`.
pub fn run_if_init() {
    let mut args = std::env::args_os();
    if args.next().as_deref() != Some(std::ffi::OsStr::new(INIT_NAME)) {
        return;
    }
    #[cfg(target_os = "linux")]
    std::process::exit(linux::run(&args.collect::<Vec<_>>()));
    #[cfg(not(target_os = "linux"))]
    std::process::exit(127);
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::{OsString, c_int, c_void};

    /// The signals forwarded to the shell's process group.
    const FORWARDED: [c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

    extern "C" fn ignore(_signal: c_int) {}

    fn fd_arg(arg: Option<&OsString>) -> Option<c_int> {
        arg?.to_str()?.parse().ok()
    }

    /// The init's life; returns its exit code (the shell's, as a shell
    /// reports it: 128+N after signal N).
    pub(super) fn run(args: &[OsString]) -> i32 {
        let (Some(status_fd), Some(shell)) = (fd_arg(args.first()), fd_arg(args.get(1))) else {
            return 127;
        };
        // SAFETY: fcntl on a descriptor number; a bad one only fails.
        unsafe { libc::fcntl(status_fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        if shell == 0 {
            // The probe: answer only as PID 1 of a namespace of our own.
            // SAFETY: getpid has no preconditions.
            if unsafe { libc::getpid() } != 1 {
                return 127;
            }
            report_status(status_fd, 0);
            return 0;
        }
        let mut waited = empty_set();
        // SAFETY: `waited` is a valid sigset_t; the numbers are valid
        // signals. (The spawn blocked them already; what came meanwhile,
        // the shell's SIGCHLD included, is pending.)
        unsafe {
            for signal in FORWARDED.into_iter().chain([libc::SIGCHLD]) {
                libc::sigaddset(&raw mut waited, signal);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &raw const waited, std::ptr::null_mut());
        }
        // PID 1 gets no signal whose action is the default once it is
        // unblocked: a handler each, never run while they stay blocked.
        for signal in FORWARDED.into_iter().chain([libc::SIGCHLD]) {
            // SAFETY: a zeroed sigaction with a valid handler address.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = ignore as *const () as libc::sighandler_t;
                libc::sigaction(signal, &raw const action, std::ptr::null_mut());
            }
        }
        loop {
            // SAFETY: a zeroed siginfo_t is a valid buffer for sigwaitinfo.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: `waited` and `info` are valid.
            let signal = unsafe { libc::sigwaitinfo(&raw const waited, &raw mut info) };
            if signal == libc::SIGCHLD {
                if let Some(status) = reap(shell) {
                    report_status(status_fd, status);
                    return exit_code(status);
                }
            } else if FORWARDED.contains(&signal) {
                // SAFETY: kill with integer arguments. The shell made its
                // own session (and group) before its exec.
                unsafe {
                    if libc::kill(-shell, signal) != 0 {
                        libc::kill(shell, signal);
                    }
                }
            }
        }
    }

    /// Reaps every process that has ended; the shell's wait status if it
    /// was among them.
    fn reap(shell: libc::pid_t) -> Option<c_int> {
        let mut found = None;
        loop {
            let mut status: c_int = 0;
            // SAFETY: `status` is a valid int.
            let pid = unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) };
            if pid <= 0 {
                return found;
            }
            if pid == shell {
                found = Some(status);
            }
        }
    }

    fn report_status(fd: c_int, status: c_int) {
        let bytes = status.to_ne_bytes();
        // SAFETY: a buffer on our stack and the inherited status pipe.
        unsafe { libc::write(fd, bytes.as_ptr().cast::<c_void>(), bytes.len()) };
    }

    fn exit_code(status: c_int) -> i32 {
        if libc::WIFSIGNALED(status) {
            128 + libc::WTERMSIG(status)
        } else {
            libc::WEXITSTATUS(status)
        }
    }

    fn empty_set() -> libc::sigset_t {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut set);
            set
        }
    }
}
