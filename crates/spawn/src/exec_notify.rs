//! Policy at every exec, as mechanism (docs/decisions/0018): a seccomp
//! filter whose `execve` and `execveat` go to this process by user
//! notification, and the supervisor that answers each one with the
//! caller's [`ExecJudge`].
//!
//! The child installs the filter last before its own `execve`, with
//! `SECCOMP_FILTER_FLAG_NEW_LISTENER`, and `sendmsg`s the listener on a
//! socket pair made per command (its other end stays here). It cannot go
//! back through the spawn's own reply: whoever started the child (the
//! spawner process or thread) is suspended until the child's exec
//! completes, and that exec is itself notified. The supervisor thread,
//! started before the spawn, receives the listener and lets the first
//! notification (the shell's own exec, whose text was checked before the
//! spawn) through unjudged.
//!
//! Fail closed: a notification the supervisor cannot read is refused; once
//! the listener is closed (the supervisor gone) the kernel fails every
//! exec of the tree with `ENOSYS`.

#![allow(
    unsafe_code,
    reason = "the filter is installed and the listener sent by the clone child with raw syscalls; the supervisor's ioctls have no safe wrapper"
)]

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::proc_view::ProcessView;
use crate::spec::{ExecJudge, ExecRequest, ExecVerdict, FileIdentity};

/// `AUDIT_ARCH_*` of the architecture we are built for.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

/// `offsetof(struct seccomp_data, nr)` and `arch`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

const fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Syscall numbers fit in 32 bits on every architecture we build for.
const EXECVE: u32 = libc::SYS_execve as u32;
const EXECVEAT: u32 = libc::SYS_execveat as u32;
/// The x32 ABI's bit (`__X32_SYSCALL_BIT`): its calls share `x86_64`'s
/// architecture value, so they are told apart by it (and killed).
const X32_BIT: u32 = 0x4000_0000;

/// The program: another ABI's call (32-bit, x32) kills the process, since
/// its numbers mean other calls; `execve` and `execveat` notify; the rest
/// is allowed. Jumps count from the next instruction.
static NOTIFY: [libc::sock_filter; 9] = [
    statement(LOAD, ARCH_OFFSET),
    jump(JEQ, AUDIT_ARCH, 0, 5), // else kill
    statement(LOAD, NR_OFFSET),
    jump(JSET, X32_BIT, 3, 0), // kill
    jump(JEQ, EXECVE, 3, 0),   // notify
    jump(JEQ, EXECVEAT, 2, 0), // notify
    statement(RET, libc::SECCOMP_RET_ALLOW),
    statement(RET, libc::SECCOMP_RET_KILL_PROCESS),
    statement(RET, libc::SECCOMP_RET_USER_NOTIF),
];

/// The filter as the kernel takes it.
fn program() -> libc::sock_fprog {
    libc::sock_fprog {
        // The array's length is a small constant.
        len: NOTIFY.len() as u16,
        filter: NOTIFY.as_ptr().cast_mut(),
    }
}

/// In the child, last before `execve` (after any other filter): installs
/// the notify filter and sends its listener on `socket`. Without
/// `CAP_SYS_ADMIN` the kernel wants `no_new_privs`, which is then set (and
/// `sudo` stops working in that command). A filter with a listener already
/// above us (the server is itself a command of another server, whose
/// supervisor then judges our execs) gives `EBUSY`: we go on without ours.
/// Raw syscalls on our stack only. False on a failure (errno says why).
///
/// # Safety
/// Call only in the spawned process that is about to exec.
pub(crate) unsafe fn install(socket: RawFd) -> bool {
    let fprog = program();
    let install = || {
        // SAFETY: `fprog` points to a static program; the kernel copies it.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &raw const fprog,
            )
        }
    };
    let mut listener = install();
    // SAFETY: errno is thread-local and always readable.
    let errno = || unsafe { *libc::__errno_location() };
    if listener < 0 && errno() == libc::EACCES {
        let (on, off): (libc::c_ulong, libc::c_ulong) = (1, 0);
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, on, off, off, off) } != 0 {
            return false;
        }
        listener = install();
    }
    if listener < 0 {
        return errno() == libc::EBUSY;
    }
    let Ok(listener) = RawFd::try_from(listener) else {
        return false;
    };
    let sent = send_fd(socket, listener);
    // SAFETY: the listener is ours; the supervisor holds its own copy now.
    unsafe { libc::close(listener) };
    sent
}

/// Room for one descriptor's control message, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct OneFd([u8; 32]);

/// `sendmsg` of one byte with `fd` attached. Raw calls, our stack only.
fn send_fd(socket: RawFd, fd: RawFd) -> bool {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = OneFd([0; 32]);
    // SAFETY: a zeroed msghdr is valid; the buffers live on our stack.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &raw mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is arithmetic.
    let space = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) };
    header.msg_controllen = space as _;
    // SAFETY: the control buffer holds `space` bytes (32 >= CMSG_SPACE(4)).
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&raw const header);
        if cmsg.is_null() {
            return false;
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        libc::sendmsg(socket, &raw const header, libc::MSG_NOSIGNAL) == 1
    }
}

/// Receives the listener the child sent; `None` at end of file (the child
/// failed before, or went on without a filter of its own: `EBUSY`).
fn receive_fd(socket: &OwnedFd) -> Option<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = OneFd([0; 32]);
    // SAFETY: a zeroed msghdr is valid; the buffers live on our stack.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &raw mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.0.as_mut_ptr().cast();
    header.msg_controllen = control.0.len() as _;
    loop {
        // SAFETY: the header's buffers are valid for the call.
        let got =
            unsafe { libc::recvmsg(socket.as_raw_fd(), &raw mut header, libc::MSG_CMSG_CLOEXEC) };
        if got < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if got <= 0 {
            return None;
        }
        break;
    }
    // SAFETY: the kernel filled the control buffer `header` describes.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&raw const header);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return None;
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
        Some(OwnedFd::from_raw_fd(fd))
    }
}

/// The per-command channel: the end the child sends the listener on (to
/// hand down with the spawn, dropped here once it has been), and the
/// supervisor's thread already waiting on the other.
pub struct Channel {
    /// The end the child sends its listener on.
    pub child_end: OwnedFd,
}

/// Makes the channel and starts the supervisor of one command.
pub fn start(judge: ExecJudge) -> io::Result<Channel> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints to fill.
    let made = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if made != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair succeeded: two new descriptors, ours alone.
    let (ours, child_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    std::thread::Builder::new()
        .name("exec-supervisor".into())
        .spawn(move || supervise(&ours, &judge))?;
    Ok(Channel { child_end })
}

/// The supervisor: waits for the listener, then answers notifications until
/// no process holds the filter any more (`POLLHUP`).
fn supervise(socket: &OwnedFd, judge: &ExecJudge) {
    let Some(listener) = receive_fd(socket) else {
        return;
    };
    let mut first = true;
    loop {
        let mut poll = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&raw mut poll, 1, -1) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if poll.revents & libc::POLLIN == 0 {
            // POLLHUP: every process with the filter has exited.
            return;
        }
        // SAFETY: a zeroed seccomp_notif is what the kernel wants.
        let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the listener and a buffer of the ioctl's type.
        if unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                &raw mut notif,
            )
        } != 0
        {
            // ENOENT: the process died before we read it.
            continue;
        }
        let answer = if first {
            // The shell itself: its text was checked before the spawn.
            first = false;
            Answer::Continue
        } else {
            match read_request(&listener, &notif) {
                Ok(Read::Request(request)) => match (judge.0)(&request) {
                    ExecVerdict::Allow => Answer::Continue,
                    ExecVerdict::Deny => Answer::Fail(libc::EPERM),
                },
                Ok(Read::Missing(errno)) => Answer::Fail(errno),
                // The process is gone: nothing to answer.
                Ok(Read::Gone) => continue,
                // Fail closed: what cannot be read is not run.
                Err(_) => Answer::Fail(libc::EPERM),
            }
        };
        respond(&listener, notif.id, answer);
    }
}

/// How a notification is answered.
#[derive(Clone, Copy)]
enum Answer {
    /// The exec goes on.
    Continue,
    /// The exec fails with this errno.
    Fail(i32),
}

/// What reading a notification found.
enum Read {
    Request(ExecRequest),
    /// No such file (`ENOENT`, `ENOTDIR`): the exec would fail by itself,
    /// and fails with that errno unjudged (a shell's or `env`'s search of
    /// `PATH` makes many such execs). Failing it ourselves, rather than
    /// letting it go on, leaves no window for a file made meanwhile.
    Missing(i32),
    /// The process went away meanwhile.
    Gone,
}

fn respond(listener: &OwnedFd, id: u64, answer: Answer) {
    let mut response = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: 0,
    };
    match answer {
        Answer::Continue => response.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        Answer::Fail(errno) => response.error = -errno,
    }
    // SAFETY: the listener and a response of the ioctl's type. A failure
    // (ENOENT: the process died meanwhile) leaves nothing to do.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &raw mut response,
        );
    }
}

/// Whether the notification is still pending (the process did not die and
/// reuse nothing meanwhile): what was read from its memory is its own.
fn still_valid(listener: &OwnedFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the listener and a u64, as the ioctl wants.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &raw mut id,
        ) == 0
    }
}

/// The most an argument vector may take to be read: beyond, refused.
const MAX_ARGV_BYTES: usize = 4 << 20;
const MAX_ARGS: usize = 1 << 17;

/// Reads what an exec is about.
fn read_request(listener: &OwnedFd, notif: &libc::seccomp_notif) -> io::Result<Read> {
    let pid = i32::try_from(notif.pid).map_err(|_| io::Error::other("pid out of range"))?;
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let memory = File::open(proc_dir.join("mem"))?;
    let args = notif.data.args;
    let nr = i64::from(notif.data.nr);
    let (dirfd, path_at, argv_at, envp_at, flags) = if nr == libc::SYS_execveat {
        // int dirfd: the low 32 bits.
        (args[0] as i32, args[1], args[2], args[3], args[4])
    } else {
        (libc::AT_FDCWD, args[0], args[1], args[2], 0)
    };
    let path = read_string(&memory, path_at)?;
    let cwd = std::fs::read_link(proc_dir.join("cwd"))?;
    let empty_path = path.is_empty() && flags & libc::AT_EMPTY_PATH as u64 != 0;
    // Where the file is, from the process's point of view.
    let base = if dirfd == libc::AT_FDCWD {
        proc_dir.join("cwd")
    } else {
        proc_dir.join("fd").join(dirfd.to_string())
    };
    let direct = if empty_path {
        base
    } else if path.as_bytes().starts_with(b"/") {
        let mut root = proc_dir.join("root").into_os_string();
        root.push(&path);
        PathBuf::from(root)
    } else {
        base.join(&path)
    };
    // The file in the process's own terms: opening `direct` resolves an
    // absolute link on the way (`/dev/fd/4` -> `/proc/self/fd/4`) in this
    // process, whose fd 4 is another file or none.
    let view = ProcessView::of(pid);
    let logical = if empty_path {
        None
    } else if dirfd == libc::AT_FDCWD {
        view.resolve(&cwd, &path, true)
    } else {
        view.resolve(
            Path::new("/"),
            OsStr::new(&format!("/proc/self/fd/{dirfd}")),
            true,
        )
        .and_then(|dir| view.resolve(&dir, &path, true))
    };
    let open = |target: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
            .open(target)
    };
    let by_view = logical
        .as_ref()
        .map(|logical| open(&view.host_path(logical)));
    let (opened, real_path) = match by_view {
        Some(Ok(file)) => (Some(file), logical),
        // Not found in the process's view either way: the exec fails alone.
        Some(Err(error)) if open(&direct).is_err() => match error.raw_os_error() {
            Some(errno @ (libc::ENOENT | libc::ENOTDIR)) => return Ok(Read::Missing(errno)),
            _ => (None, None),
        },
        _ => match open(&direct) {
            Ok(file) => {
                let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok();
                (Some(file), real)
            }
            Err(error) => match error.raw_os_error() {
                Some(errno @ (libc::ENOENT | libc::ENOTDIR)) => return Ok(Read::Missing(errno)),
                _ => (None, None),
            },
        },
    };
    let argv = read_vector(&memory, argv_at)?;
    // The environment the program will see is the exec's own vector, not
    // the one the process started with (`/proc/PID/environ`): a shell
    // hands its children what it exported since.
    let env = read_vector(&memory, envp_at)?;
    let home = env
        .iter()
        .find_map(|entry| entry.as_bytes().strip_prefix(b"HOME="))
        .map(|home| OsString::from_vec(home.to_vec()));
    let file = opened
        .as_ref()
        .and_then(|file| file.metadata().ok())
        .map(|meta| FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime: meta.mtime(),
            size: meta.size(),
        });
    if !still_valid(listener, notif.id) {
        return Ok(Read::Gone);
    }
    Ok(Read::Request(ExecRequest {
        pid,
        path,
        real_path,
        file,
        argv,
        cwd,
        home,
        env,
    }))
}

/// A NULL-ended vector of strings (`argv`, `envp`) in the process's
/// memory; a NULL vector is empty, as the kernel takes it.
fn read_vector(memory: &File, at: u64) -> io::Result<Vec<OsString>> {
    let mut strings = Vec::new();
    if at == 0 {
        return Ok(strings);
    }
    let mut total = 0;
    for index in 0..MAX_ARGS {
        let mut pointer = [0u8; 8];
        memory.read_exact_at(&mut pointer, at + 8 * index as u64)?;
        let pointer = u64::from_ne_bytes(pointer);
        if pointer == 0 {
            break;
        }
        let string = read_string(memory, pointer)?;
        total += string.len() + 1;
        if total > MAX_ARGV_BYTES {
            return Err(io::Error::other("argument vector too large"));
        }
        strings.push(string);
    }
    Ok(strings)
}

/// A NUL-ended string of the process's memory, read in pages.
fn read_string(memory: &File, at: u64) -> io::Result<OsString> {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut offset = at;
    loop {
        // Up to the page's end, so a string at the end of a mapping reads.
        let room = 4096 - (offset % 4096) as usize;
        let got = memory.read_at(&mut chunk[..room], offset)?;
        if got == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if let Some(end) = chunk[..got].iter().position(|&byte| byte == 0) {
            bytes.extend_from_slice(&chunk[..end]);
            return Ok(OsString::from_vec(bytes));
        }
        bytes.extend_from_slice(&chunk[..got]);
        if bytes.len() > MAX_ARGV_BYTES {
            return Err(io::Error::other("string too long"));
        }
        offset += got as u64;
    }
}
