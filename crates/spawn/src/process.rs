//! The spawner process (docs/decisions/0016-spawner-process.md): a small
//! process forked at start-up, before the server reads any secret, that
//! starts every command (and every namespace init) on the server's behalf.
//! It shares no memory with the server, is never re-executed, is not
//! dumpable, dies with the server (`PR_SET_PDEATHSIG`), adopts the
//! orphans of the trees it starts (child subreaper) and reaps all of its
//! children itself.
//!
//! The server sends a plain request over a `SOCK_SEQPACKET` socket pair
//! (program, argv, envp, cwd, the confinement, descriptors by
//! `SCM_RIGHTS`: the command's cgroup files to join (`cgroup.procs` or
//! v1 `tasks`, up to three), a terminal's slave, the Landlock ruleset,
//! descriptors the program inherits at fixed numbers); the spawner
//! answers with the shell's pid (the same PID namespace as the server's)
//! and descriptors: stdout and stderr (none under a terminal), the
//! terminal a namespace's init opened in its own devpts (master and
//! slave, when the server asked for one) and an exit pipe, on
//! which it writes the shell's raw wait status once it has reaped it (a
//! namespace init's report of its shell's status where there is one).
//!
//! Without [`start_spawner_process`] (in-process embedders, tests) the
//! commands are started from a thread of the calling process, as before.

#![allow(
    unsafe_code,
    reason = "fork, descriptor passing and the spawner's own process settings are raw system calls"
)]

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_int, c_void};
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use super::confine::Confinement;
use super::vfork;

/// Bytes per packet: a request (an environment, a script) may be far
/// larger than one datagram of the socket's buffer, so it goes in pieces.
const PACKET: usize = 32 * 1024;
/// The most descriptors one message carries.
const MAX_FDS: usize = 16;
/// What the spawner calls itself (`/proc/PID/comm`, at most 15 bytes).
pub(crate) const SPAWNER_NAME: &CStr = c"agent-spawner";

/// A request: start one process.
const REQUEST_SPAWN: u8 = 1;
/// Request flags: a terminal's slave follows; the init of a namespace
/// with a devpts of its own opens the terminal there.
const WITH_TERMINAL: u8 = 1;
const OWN_TERMINAL: u8 = 2;
/// The socket the child sends its exec-notify listener on follows.
const EXEC_NOTIFY: u8 = 4;
/// How the confinement is named: none, one defined before, one defined here.
const CONFINEMENT_NONE: u8 = 0;
const CONFINEMENT_KNOWN: u8 = 1;
const CONFINEMENT_NEW: u8 = 2;
/// Answers: started, refused with an errno, refused with a message.
const ANSWER_STARTED: u8 = 0;
const ANSWER_ERRNO: u8 = 1;
const ANSWER_MESSAGE: u8 = 2;

fn malformed() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "a malformed message between the server and its spawner process",
    )
}

/// Plain data, written in native byte order (both ends are one binary).
#[derive(Default)]
pub(crate) struct Writer(Vec<u8>);

impl Writer {
    #[cfg(test)]
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    pub(crate) fn u8(&mut self, value: u8) {
        self.0.push(value);
    }

    pub(crate) fn u16(&mut self, value: u16) {
        self.0.extend_from_slice(&value.to_ne_bytes());
    }

    pub(crate) fn u32(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_ne_bytes());
    }

    pub(crate) fn i32(&mut self, value: i32) {
        self.0.extend_from_slice(&value.to_ne_bytes());
    }

    pub(crate) fn i64(&mut self, value: i64) {
        self.0.extend_from_slice(&value.to_ne_bytes());
    }

    pub(crate) fn u64(&mut self, value: u64) {
        self.0.extend_from_slice(&value.to_ne_bytes());
    }

    /// A count or length: no request holds 4 GiB of anything (the kernel
    /// refuses far smaller argument lists).
    pub(crate) fn count(&mut self, count: usize) {
        self.u32(u32::try_from(count).unwrap_or(u32::MAX));
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.extend_from_slice(bytes);
    }
}

/// Reads what a [`Writer`] wrote; any shortfall is a malformed message.
pub(crate) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    #[cfg(test)]
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self(bytes)
    }

    fn take<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or_else(malformed)?;
        self.0 = rest;
        Ok(*head)
    }

    pub(crate) fn u8(&mut self) -> io::Result<u8> {
        Ok(u8::from_ne_bytes(self.take()?))
    }

    pub(crate) fn u16(&mut self) -> io::Result<u16> {
        Ok(u16::from_ne_bytes(self.take()?))
    }

    pub(crate) fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_ne_bytes(self.take()?))
    }

    pub(crate) fn i32(&mut self) -> io::Result<i32> {
        Ok(i32::from_ne_bytes(self.take()?))
    }

    pub(crate) fn i64(&mut self) -> io::Result<i64> {
        Ok(i64::from_ne_bytes(self.take()?))
    }

    pub(crate) fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_ne_bytes(self.take()?))
    }

    pub(crate) fn count(&mut self) -> io::Result<usize> {
        usize::try_from(self.u32()?).map_err(|_| malformed())
    }

    pub(crate) fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let length = self.count()?;
        if length > self.0.len() {
            return Err(malformed());
        }
        let (head, rest) = self.0.split_at(length);
        self.0 = rest;
        Ok(head)
    }

    pub(crate) fn c_string(&mut self) -> io::Result<CString> {
        CString::new(self.bytes()?).map_err(|_| malformed())
    }
}

/// Sends one packet of `parts` with `fds` attached.
fn send_packet(socket: RawFd, parts: &[&[u8]], fds: &[RawFd]) -> io::Result<()> {
    let mut iov: Vec<libc::iovec> = parts
        .iter()
        .map(|part| libc::iovec {
            iov_base: part.as_ptr().cast_mut().cast::<c_void>(),
            iov_len: part.len(),
        })
        .collect();
    let fd_bytes = std::mem::size_of_val(fds);
    // u64 words: the control buffer must be aligned for `cmsghdr`.
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(u32::try_from(fd_bytes).map_err(|_| malformed())?) };
    let mut control = vec![0u64; (space as usize).div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = iov.as_mut_ptr();
    #[allow(
        clippy::cast_possible_wrap,
        reason = "musl's msg_iovlen is a c_int; the vector holds a few entries"
    )]
    {
        header.msg_iovlen = iov.len() as _;
    }
    if !fds.is_empty() {
        header.msg_control = control.as_mut_ptr().cast::<c_void>();
        header.msg_controllen = space as _;
        // SAFETY: `control` holds CMSG_SPACE(fd_bytes) bytes, so the first
        // header and its data fit; the data is written unaligned.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&raw const header);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(u32::try_from(fd_bytes).unwrap_or(0)) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                fd_bytes,
            );
        }
    }
    loop {
        // SAFETY: `header` describes live buffers (above).
        let sent = unsafe { libc::sendmsg(socket, &raw const header, libc::MSG_NOSIGNAL) };
        if sent >= 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Receives one packet into `buffer`: its length and the descriptors it
/// carried (close-on-exec). Zero bytes: the other end has closed.
fn receive_packet(socket: RawFd, buffer: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast::<c_void>(),
        iov_len: buffer.len(),
    };
    let fd_room = u32::try_from(MAX_FDS * std::mem::size_of::<RawFd>()).unwrap_or(64);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(fd_room) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; the pointers set below outlive the call.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &raw mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast::<c_void>();
    header.msg_controllen = space as _;
    let received = loop {
        // SAFETY: `header` describes live buffers (above).
        let received = unsafe { libc::recvmsg(socket, &raw mut header, libc::MSG_CMSG_CLOEXEC) };
        if received >= 0 {
            break received.cast_unsigned();
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `control` as `header` describes; each
    // header's data holds `cmsg_len - CMSG_LEN(0)` bytes of descriptors,
    // read unaligned, each now ours alone.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&raw const header);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for index in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = data
                        .add(index * std::mem::size_of::<RawFd>())
                        .cast::<RawFd>()
                        .read_unaligned();
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&raw const header, cmsg);
        }
    }
    if header.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(malformed());
    }
    Ok((received, fds))
}

/// Sends `message` with `fds` (attached to its first packet).
fn send_message(socket: RawFd, message: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let total = (message.len() as u64).to_ne_bytes();
    let (first, rest) = message.split_at(message.len().min(PACKET - total.len()));
    send_packet(socket, &[&total, first], fds)?;
    for chunk in rest.chunks(PACKET) {
        send_packet(socket, &[chunk], &[])?;
    }
    Ok(())
}

/// Receives one message; `None` once the other end has closed.
fn receive_message(socket: RawFd) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut buffer = vec![0u8; PACKET];
    let (length, fds) = receive_packet(socket, &mut buffer)?;
    if length == 0 {
        return Ok(None);
    }
    let mut reader = Reader(buffer.get(..length).ok_or_else(malformed)?);
    let total = usize::try_from(reader.u64()?).map_err(|_| malformed())?;
    let mut message = Vec::with_capacity(total);
    message.extend_from_slice(reader.0);
    while message.len() < total {
        let (length, more) = receive_packet(socket, &mut buffer)?;
        if length == 0 || !more.is_empty() {
            return Err(malformed());
        }
        message.extend_from_slice(buffer.get(..length).ok_or_else(malformed)?);
    }
    if message.len() != total {
        return Err(malformed());
    }
    Ok(Some((message, fds)))
}

/// The server's end of the spawner process.
pub struct Client {
    socket: OwnedFd,
    pid: i32,
    /// Set once it has died (killed from outside: a command without the
    /// sandbox runs as the same user): commands are started from the
    /// spawner thread from then on, as without a spawner process, except
    /// those with a PID namespace, whose init would share the server's
    /// memory: those are refused.
    dead: AtomicBool,
    /// Set by [`bypass_spawner_process`], for a benchmark of both paths.
    bypassed: AtomicBool,
    /// Confinements the spawner has a copy of, by the number it knows
    /// them by (a `Weak` keeps the address from being reused).
    defined: Mutex<Vec<(Weak<Confinement>, u32)>>,
}

static CLIENT: OnceLock<Client> = OnceLock::new();

/// The spawner process, once started, while it lives (and is not bypassed).
pub fn client() -> Option<&'static Client> {
    CLIENT.get().filter(|client| {
        !client.dead.load(Ordering::Acquire) && !client.bypassed.load(Ordering::Acquire)
    })
}

/// Whether a spawner process was started and has died since.
pub fn died() -> bool {
    CLIENT
        .get()
        .is_some_and(|client| client.dead.load(Ordering::Acquire))
}

/// The pid of the spawner process, once started, while it lives.
pub fn spawner_pid() -> Option<i32> {
    CLIENT
        .get()
        .filter(|client| !client.dead.load(Ordering::Acquire))
        .map(|client| client.pid)
}

/// Starts commands from the spawner thread (`true`) or the spawner process
/// again (`false`): for the benchmark that compares the two in one run.
#[doc(hidden)]
pub fn bypass_spawner_process(bypass: bool) {
    if let Some(client) = CLIENT.get() {
        client.bypassed.store(bypass, Ordering::Release);
    }
}

/// A process the spawner started.
pub struct Launched {
    /// Its pid, in the server's PID namespace.
    pub pid: i32,
    /// Stdout and stderr, or `None` under a terminal.
    pub output: Option<(OwnedFd, OwnedFd)>,
    /// The terminal (master, slave) the init opened in its own devpts.
    pub terminal: Option<(OwnedFd, OwnedFd)>,
    /// Gets the raw wait status (4 bytes) once the process has ended.
    pub exit: OwnedFd,
}

/// What one request names, borrowed from the server's `Prepared`.
pub struct Request<'a> {
    /// The program's path.
    pub program: &'a CStr,
    /// Its arguments, `argv[0]` first.
    pub argv: &'a [CString],
    /// Its whole environment.
    pub envp: &'a [CString],
    /// Its working directory.
    pub cwd: &'a CStr,
    /// The command cgroup's files the child joins through.
    pub cgroups: Option<crate::cgroup::JoinFds>,
    /// A terminal's slave, its stdin, stdout and stderr.
    pub terminal: Option<RawFd>,
    /// In namespaces with a devpts of their own: the init opens the
    /// terminal there and it comes back in [`Launched::terminal`].
    pub own_terminal: bool,
    /// The sandbox, sent once and then named by this `Arc`.
    pub confinement: Option<&'a Arc<Confinement>>,
    /// `(descriptor, number in the program)` pairs the program inherits.
    pub inherit: &'a [(RawFd, RawFd)],
    /// The socket the child sends its exec-notify listener on.
    pub exec_notify: Option<RawFd>,
}

impl Client {
    /// Has the spawner start `request`. Called on one thread at a time
    /// (the spawner thread), so requests and answers never interleave.
    pub fn launch(&self, request: &Request<'_>) -> io::Result<Launched> {
        let mut out = Writer::default();
        let mut fds = Vec::new();
        out.u8(REQUEST_SPAWN);
        out.bytes(request.program.to_bytes());
        for list in [request.argv, request.envp] {
            out.count(list.len());
            for item in list {
                out.bytes(item.to_bytes());
            }
        }
        out.bytes(request.cwd.to_bytes());
        let joins: Vec<RawFd> = request
            .cgroups
            .iter()
            .flatten()
            .copied()
            .filter(|fd| *fd >= 0)
            .collect();
        out.u8(u8::from(request.cgroups.is_some()));
        out.count(joins.len());
        fds.extend(&joins);
        let mut flags = 0;
        if let Some(fd) = request.terminal {
            flags |= WITH_TERMINAL;
            fds.push(fd);
        }
        if request.own_terminal {
            flags |= OWN_TERMINAL;
        }
        if let Some(fd) = request.exec_notify {
            flags |= EXEC_NOTIFY;
            fds.push(fd);
        }
        out.u8(flags);
        let mut defined = self.defined.lock().unwrap_or_else(PoisonError::into_inner);
        defined.retain(|(confinement, _)| confinement.strong_count() > 0);
        let mut new_definition = None;
        match request.confinement {
            None => out.u8(CONFINEMENT_NONE),
            Some(confinement) => {
                let known = defined
                    .iter()
                    .find(|(known, _)| std::ptr::eq(known.as_ptr(), Arc::as_ptr(confinement)));
                if let Some((_, id)) = known {
                    out.u8(CONFINEMENT_KNOWN);
                    out.u32(*id);
                } else {
                    let id = defined.iter().map(|(_, id)| id + 1).max().unwrap_or(0);
                    out.u8(CONFINEMENT_NEW);
                    out.u32(id);
                    if let Some(landlock) = confinement.encode(&mut out) {
                        fds.push(landlock);
                    }
                    new_definition = Some((Arc::downgrade(confinement), id));
                }
            }
        }
        out.count(request.inherit.len());
        for &(fd, number) in request.inherit {
            out.i32(number);
            fds.push(fd);
        }
        let exchanged = send_message(self.socket.as_raw_fd(), &out.0, &fds)
            .and_then(|()| receive_message(self.socket.as_raw_fd()));
        let (answer, received) = match exchanged {
            Ok(Some(answer)) => answer,
            Ok(None) | Err(_) if !self.alive() => {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the spawner process has ended",
                ));
            }
            Ok(None) => return Err(io::Error::other("the spawner process closed its socket")),
            Err(error) => return Err(error),
        };
        // Any answer means the spawner read the definition.
        defined.extend(new_definition);
        drop(defined);
        let mut input = Reader(&answer);
        match input.u8()? {
            ANSWER_STARTED => {}
            ANSWER_ERRNO => return Err(io::Error::from_raw_os_error(input.i32()?)),
            ANSWER_MESSAGE => {
                let message = String::from_utf8_lossy(input.bytes()?).into_owned();
                return Err(io::Error::other(message));
            }
            _ => return Err(malformed()),
        }
        let pid = input.i32()?;
        let with_output = input.u8()? != 0;
        let with_terminal = input.u8()? != 0;
        let expected = 1 + 2 * usize::from(with_output) + 2 * usize::from(with_terminal);
        if received.len() != expected {
            return Err(malformed());
        }
        // In order: stdout, stderr, master, slave, exit.
        let mut received = received.into_iter();
        let mut pair = |present: bool| {
            present
                .then(|| received.next().zip(received.next()))
                .flatten()
        };
        let output = pair(with_output);
        let terminal = pair(with_terminal);
        let exit = received.next().ok_or_else(malformed)?;
        Ok(Launched {
            pid,
            output,
            terminal,
            exit,
        })
    }
}

impl Client {
    /// Whether the spawner still runs; once it has not, it is reaped, marked
    /// dead (commands start from the spawner thread from then on) and
    /// reported once.
    pub fn alive(&self) -> bool {
        let mut status = 0;
        // SAFETY: a valid int to fill; WNOHANG never blocks; the pid is
        // our child, which only we reap.
        let reaped = unsafe { libc::waitpid(self.pid, &raw mut status, libc::WNOHANG) };
        if reaped == 0 {
            return true;
        }
        if !self.dead.swap(true, Ordering::AcqRel) {
            tracing::error!(
                pid = self.pid,
                status,
                "the spawner process has died; commands without a PID namespace of their own are started from a thread of the server from now on, the others refused"
            );
        }
        false
    }
}

/// Forks the spawner process: every command is started by it from then
/// on. Call it early, while the process has a single thread (the child
/// runs Rust code after the fork), and before any secret is in memory (the
/// spawner keeps a copy of the memory as it is then). Returns its pid.
/// Fails, starting nothing, with more than one thread or when called twice.
pub fn start_spawner_process() -> io::Result<u32> {
    if CLIENT.get().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the spawner process runs already",
        ));
    }
    let threads = std::fs::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::other(format!(
            "the spawner process must be forked by a process with one thread, not {threads}"
        )));
    }
    let mut pair = [0 as c_int; 2];
    // SAFETY: `pair` is a valid array of two ints for socketpair to fill.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair succeeded: both descriptors are open and ours alone.
    let (server_end, spawner_end) =
        unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the process has one thread (checked above), so the child's
    // copy of the memory holds no lock another thread held, and it may run
    // Rust code; it never returns (`serve` ends in `_exit`).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        drop(server_end);
        serve(spawner_end, parent);
    }
    drop(spawner_end);
    let client = Client {
        socket: server_end,
        pid,
        dead: AtomicBool::new(false),
        bypassed: AtomicBool::new(false),
        defined: Mutex::new(Vec::new()),
    };
    if CLIENT.set(client).is_err() {
        // One thread: nothing else can have set it since the check above.
        return Err(io::Error::other("the spawner process runs already"));
    }
    Ok(pid.cast_unsigned())
}

/// One process the spawner started and has not yet reaped.
struct Child {
    /// Where its wait status goes.
    exit: OwnedFd,
    /// A namespace init's report of its shell's status, polled until read.
    status: Option<OwnedFd>,
    /// The status an init reported before its exit, written at its reap.
    reported: Option<c_int>,
    /// The status went to the exit pipe already: the init lingers after
    /// its shell (`init.rs`), and the server sweeps what it waits for.
    forwarded: bool,
    /// The init's stack (in the spawner's memory), unmapped once reaped.
    _stack: Option<vfork::InitStack>,
    _pidfd: OwnedFd,
}

/// The spawner's state.
#[derive(Default)]
struct Spawner {
    /// Never dropped: a dropped `Confinement` removes its cgroup, which
    /// is the server's to remove.
    confinements: HashMap<u32, ManuallyDrop<Confinement>>,
    children: HashMap<i32, Child>,
}

/// The spawner process: never returns.
fn serve(socket: OwnedFd, parent: i32) -> ! {
    let code = match run(socket, parent) {
        Ok(()) => 0,
        Err(error) => {
            tracing::error!(%error, "the spawner process stops");
            1
        }
    };
    // SAFETY: ends this process without running the server's exit code.
    unsafe { libc::_exit(code) }
}

fn check(result: c_int) -> io::Result<()> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Dies with the server, not dumpable, a subreaper, named, on no
/// descriptor of the server's but its socket (moved to 3) and stderr.
fn settle(socket: OwnedFd, parent: i32) -> io::Result<Option<OwnedFd>> {
    let off: libc::c_ulong = 0;
    let kill = libc::c_ulong::from(libc::SIGKILL.unsigned_abs());
    // SAFETY: prctl with integer arguments, or a static C string for the name.
    unsafe {
        check(libc::prctl(libc::PR_SET_PDEATHSIG, kill, off, off, off))?;
        if libc::getppid() != parent {
            return Ok(None);
        }
        check(libc::prctl(libc::PR_SET_DUMPABLE, off, off, off, off))?;
        check(libc::prctl(
            libc::PR_SET_CHILD_SUBREAPER,
            1 as libc::c_ulong,
            off,
            off,
            off,
        ))?;
        libc::prctl(libc::PR_SET_NAME, SPAWNER_NAME.as_ptr(), off, off, off);
    }
    // Signals meant for the server's terminal or group are not ours: the
    // spawner ends with the server (above) or when its socket closes.
    for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: SIG_IGN installs no handler.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    const SOCKET: RawFd = 3;
    // SAFETY: dup2/dup3 onto numbers we own from here; the originals are
    // closed below with everything else.
    unsafe {
        check(libc::dup2(null.as_raw_fd(), 0))?;
        check(libc::dup2(null.as_raw_fd(), 1))?;
    }
    drop(null);
    let socket = socket.into_raw_fd();
    if socket != SOCKET {
        // SAFETY: as above; 3 is free or one of the server's, to be closed.
        unsafe {
            check(libc::dup3(socket, SOCKET, libc::O_CLOEXEC))?;
            libc::close(socket);
        }
    }
    // SAFETY: 3 is the socket, ours alone from here.
    let socket = unsafe { OwnedFd::from_raw_fd(SOCKET) };
    // SAFETY: integer arguments: every descriptor above the socket goes
    // (the secrets' memfd among them).
    let closed = unsafe { libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) } == 0;
    if !closed {
        // Before Linux 5.9: one by one, as listed.
        let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")?
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
            .filter(|fd| *fd > SOCKET)
            .collect();
        for fd in open {
            // SAFETY: a descriptor of the server's that we do not use.
            unsafe { libc::close(fd) };
        }
    }
    // Inits started from here show the spawner's `/proc/1/cmdline`.
    let _ = super::arguments::hide_arguments();
    Ok(Some(socket))
}

fn run(socket: OwnedFd, parent: i32) -> io::Result<()> {
    let Some(socket) = settle(socket, parent)? else {
        return Ok(());
    };
    super::init::linger_in_this_process();
    // SIGCHLD arrives on a descriptor, polled beside the socket.
    // SAFETY: a zeroed sigset_t is valid; the calls only fill and apply it.
    let signals = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        libc::sigaddset(&raw mut set, libc::SIGCHLD);
        check(libc::sigprocmask(
            libc::SIG_BLOCK,
            &raw const set,
            std::ptr::null_mut(),
        ))?;
        let fd = libc::signalfd(-1, &raw const set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        check(fd)?;
        OwnedFd::from_raw_fd(fd)
    };
    let mut spawner = Spawner::default();
    loop {
        let mut polled = vec![
            libc::pollfd {
                fd: socket.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: signals.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // The status pipes of the inits still to report.
        let reporting: Vec<i32> = spawner
            .children
            .iter()
            .filter_map(|(pid, child)| {
                let fd = child.status.as_ref()?.as_raw_fd();
                polled.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
                Some(*pid)
            })
            .collect();
        let count = libc::nfds_t::try_from(polled.len()).map_err(|_| malformed())?;
        // SAFETY: `polled` is a valid array of `count` pollfd.
        if unsafe { libc::poll(polled.as_mut_ptr(), count, -1) } < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        let ready = |index: usize| polled.get(index).is_some_and(|fd| fd.revents != 0);
        for (index, pid) in reporting.iter().enumerate() {
            if ready(index + 2) {
                spawner.take_report(*pid);
            }
        }
        if ready(1) {
            drain(&signals);
            spawner.reap();
        }
        if ready(0) {
            let Some((message, fds)) = receive_message(socket.as_raw_fd())? else {
                return Ok(());
            };
            let (answer, fds) = spawner.answer(&message, fds);
            let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
            send_message(socket.as_raw_fd(), &answer, &raw)?;
        }
    }
}

/// Empties the signalfd (its readiness is level-triggered).
fn drain(signals: &OwnedFd) {
    let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
    // SAFETY: reads into a buffer of the size of one record.
    while unsafe { libc::read(signals.as_raw_fd(), info.as_mut_ptr().cast(), info.len()) } > 0 {}
}

impl Spawner {
    /// Reaps every child that has ended: a command's status goes to its
    /// exit pipe (unless it went there already); an adopted orphan's is
    /// dropped.
    fn reap(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: a valid int to fill; WNOHANG never blocks.
            let pid = unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG | libc::__WALL) };
            if pid <= 0 {
                return;
            }
            if let Some(child) = self.children.remove(&pid) {
                if child.forwarded {
                    continue;
                }
                // The init's report wins: it cannot die of its shell's signal.
                let status = child
                    .reported
                    .or_else(|| child.status.as_ref().and_then(vfork::reported_status))
                    .unwrap_or(status);
                forward(&child.exit, status);
            }
        }
    }

    /// Reads what the init of `pid` wrote on its status pipe, once it is
    /// readable: a lingering init's status goes to the exit pipe now (the
    /// init stays while processes of its namespace live); any other is
    /// kept for the init's reap, which follows at once, so the server
    /// finds the namespace gone when it reads the status.
    fn take_report(&mut self, pid: i32) {
        let Some(child) = self.children.get_mut(&pid) else {
            return;
        };
        let Some(status_pipe) = child.status.take() else {
            return;
        };
        let mut bytes = [0u8; 8];
        // SAFETY: reads into a buffer of ours; the init writes its report
        // in one write of 4 or 8 bytes, atomic on a pipe.
        let read = unsafe { libc::read(status_pipe.as_raw_fd(), bytes.as_mut_ptr().cast(), 8) };
        let [a, b, c, d, e, f, g, h] = bytes;
        let status = c_int::from_ne_bytes([a, b, c, d]);
        match read {
            8 if c_int::from_ne_bytes([e, f, g, h]) == super::init::LINGERING => {
                forward(&child.exit, status);
                child.forwarded = true;
            }
            4 | 8 => child.reported = Some(status),
            // Killed before it reported: its reap gives its own status.
            _ => {}
        }
    }

    /// The answer to one request, with the descriptors it sends.
    fn answer(&mut self, message: &[u8], fds: Vec<OwnedFd>) -> (Vec<u8>, Vec<OwnedFd>) {
        let mut out = Writer::default();
        match self.spawn(message, fds) {
            Ok(launched) => {
                out.u8(ANSWER_STARTED);
                out.i32(launched.pid);
                let mut fds = Vec::with_capacity(5);
                out.u8(u8::from(launched.output.is_some()));
                out.u8(u8::from(launched.terminal.is_some()));
                if let Some((stdout, stderr)) = launched.output {
                    fds.extend([stdout, stderr]);
                }
                if let Some((master, slave)) = launched.terminal {
                    fds.extend([master, slave]);
                }
                fds.push(launched.exit);
                (out.0, fds)
            }
            Err(error) => {
                if let Some(errno) = error.raw_os_error() {
                    out.u8(ANSWER_ERRNO);
                    out.i32(errno);
                } else {
                    out.u8(ANSWER_MESSAGE);
                    out.bytes(error.to_string().as_bytes());
                }
                (out.0, Vec::new())
            }
        }
    }

    fn spawn(&mut self, message: &[u8], fds: Vec<OwnedFd>) -> io::Result<Launched> {
        let mut input = Reader(message);
        let mut fds = fds.into_iter();
        if input.u8()? != REQUEST_SPAWN {
            return Err(malformed());
        }
        let program = input.c_string()?;
        let mut lists = [Vec::new(), Vec::new()];
        for list in &mut lists {
            for _ in 0..input.count()? {
                list.push(input.c_string()?);
            }
        }
        let [argv, envp] = lists;
        let cwd = input.c_string()?;
        let mut next_fd = || fds.next().ok_or_else(malformed);
        let with_cgroups = input.u8()? != 0;
        let mut cgroups = Vec::new();
        for _ in 0..input.count()?.min(crate::cgroup::MAX_JOINS + 1) {
            cgroups.push(next_fd()?);
        }
        if cgroups.len() > crate::cgroup::MAX_JOINS {
            return Err(malformed());
        }
        let mut joins = [-1; crate::cgroup::MAX_JOINS];
        for (slot, fd) in joins.iter_mut().zip(&cgroups) {
            *slot = fd.as_raw_fd();
        }
        let flags = input.u8()?;
        let own_terminal = flags & OWN_TERMINAL != 0;
        let terminal = (flags & WITH_TERMINAL != 0)
            .then(&mut next_fd)
            .transpose()?;
        let exec_notify = (flags & EXEC_NOTIFY != 0).then(&mut next_fd).transpose()?;
        let confinement = match input.u8()? {
            CONFINEMENT_NONE => None,
            CONFINEMENT_KNOWN => Some(input.u32()?),
            CONFINEMENT_NEW => {
                let id = input.u32()?;
                let confinement = Confinement::decode(&mut input, &mut next_fd)?;
                self.confinements.insert(id, ManuallyDrop::new(confinement));
                Some(id)
            }
            _ => return Err(malformed()),
        };
        let mut inherit = Vec::new();
        for _ in 0..input.count()? {
            let number = input.i32()?;
            inherit.push((next_fd()?, number));
        }
        let inherit_raw: Vec<(RawFd, RawFd)> = inherit
            .iter()
            .map(|(fd, number)| (fd.as_raw_fd(), *number))
            .collect();
        let plan = match confinement {
            None => None,
            Some(id) => {
                let plan = self.confinements.get(&id).ok_or_else(malformed)?.plan();
                // A cgroup of its own, below the shared one, holds the same limit.
                Some(if with_cgroups {
                    plan.without_cgroup()
                } else {
                    plan
                })
            }
        };
        let child = vfork::spawn(
            &program,
            &argv,
            &envp,
            &cwd,
            with_cgroups.then_some(joins),
            plan.as_ref(),
            terminal.as_ref().map(AsRawFd::as_raw_fd),
            own_terminal,
            &inherit_raw,
            exec_notify.as_ref().map(AsRawFd::as_raw_fd),
        )?;
        // The child has its copies (it has exec'd, or its init has).
        drop((cgroups, terminal, inherit, exec_notify));
        let (exit_read, exit_write) = pipe()?;
        self.children.insert(
            child.pid,
            Child {
                exit: exit_write,
                status: child.status,
                reported: None,
                forwarded: false,
                _stack: child.stack,
                _pidfd: child.pidfd,
            },
        );
        Ok(Launched {
            pid: child.pid,
            output: child.output,
            terminal: child.terminal,
            exit: exit_read,
        })
    }
}

/// Writes a raw wait status on a command's exit pipe; a server that
/// stopped reading only makes this fail.
fn forward(exit: &OwnedFd, status: c_int) {
    let bytes = status.to_ne_bytes();
    // SAFETY: a buffer of ours and the exit pipe's write end.
    unsafe { libc::write(exit.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both descriptors are open and ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message far larger than one packet, and than one datagram the
    /// socket's buffer can hold (1 MiB), arrives whole, with its
    /// descriptors, and a closed end reads as `None`.
    #[test]
    fn messages_cross_in_pieces_with_their_descriptors() {
        let mut pair = [0 as c_int; 2];
        // SAFETY: a valid array for socketpair to fill.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        };
        assert_eq!(made, 0);
        // SAFETY: both are open and ours.
        let (left, right) =
            unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let message: Vec<u8> = (0..(1 << 20) + 17)
            .map(|index| (index % 251) as u8)
            .collect();
        let (read, write) = pipe().expect("pipe");
        let sender = std::thread::spawn({
            let message = message.clone();
            move || send_message(left.as_raw_fd(), &message, &[write.as_raw_fd()]).map(|()| left)
        });
        let (received, fds) = receive_message(right.as_raw_fd())
            .expect("receives")
            .expect("a message");
        let left = sender.join().expect("joins").expect("sends");
        assert_eq!(received, message);
        assert_eq!(fds.len(), 1);
        // The descriptor received is the pipe's write end.
        let byte = [7u8];
        // SAFETY: a valid buffer and descriptor.
        assert_eq!(
            unsafe { libc::write(fds[0].as_raw_fd(), byte.as_ptr().cast(), 1) },
            1
        );
        let mut back = [0u8];
        // SAFETY: as above.
        assert_eq!(
            unsafe { libc::read(read.as_raw_fd(), back.as_mut_ptr().cast(), 1) },
            1
        );
        assert_eq!(back, byte);
        drop(left);
        assert!(receive_message(right.as_raw_fd()).expect("reads").is_none());
    }

    /// The spawner's `Child` for an init whose status pipe is `status`,
    /// with `exit` as its exit pipe's write end.
    fn init_child(status: OwnedFd, exit: OwnedFd) -> Child {
        Child {
            exit,
            status: Some(status),
            reported: None,
            forwarded: false,
            _stack: None,
            _pidfd: std::fs::File::open("/dev/null").expect("/dev/null").into(),
        }
    }

    fn write_all(fd: &OwnedFd, bytes: &[u8]) {
        // SAFETY: a valid buffer and descriptor.
        let written = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        assert_eq!(usize::try_from(written).ok(), Some(bytes.len()));
    }

    /// What the exit pipe holds now (it is closed first, so this never waits).
    fn exit_bytes(read: &OwnedFd) -> Vec<u8> {
        let mut bytes = [0u8; 16];
        // SAFETY: a valid buffer and descriptor.
        let got = unsafe { libc::read(read.as_raw_fd(), bytes.as_mut_ptr().cast(), bytes.len()) };
        bytes[..usize::try_from(got).unwrap_or(0)].to_vec()
    }

    /// A lingering init's report (status and marker in one write) goes to
    /// the exit pipe at once, and its reap writes nothing more; a plain
    /// report waits for the reap.
    #[test]
    fn a_lingering_inits_status_is_passed_on_at_once() {
        let mut spawner = Spawner::default();
        let (status_read, status_write) = pipe().expect("pipe");
        let (exit_read, exit_write) = pipe().expect("pipe");
        spawner
            .children
            .insert(7, init_child(status_read, exit_write));
        let status: c_int = 143 << 8;
        let mut report = status.to_ne_bytes().to_vec();
        report.extend_from_slice(&super::super::init::LINGERING.to_ne_bytes());
        write_all(&status_write, &report);
        spawner.take_report(7);
        let child = spawner.children.remove(&7).expect("still unreaped");
        assert!(child.forwarded);
        assert!(
            child.status.is_none(),
            "the status pipe is no longer polled"
        );
        drop(child);
        assert_eq!(exit_bytes(&exit_read), status.to_ne_bytes());

        let (status_read, status_write) = pipe().expect("pipe");
        let (exit_read, exit_write) = pipe().expect("pipe");
        spawner
            .children
            .insert(8, init_child(status_read, exit_write));
        write_all(&status_write, &3_i32.to_ne_bytes());
        spawner.take_report(8);
        let child = spawner.children.remove(&8).expect("still unreaped");
        assert!(!child.forwarded);
        assert_eq!(child.reported, Some(3));
        drop(child);
        assert!(exit_bytes(&exit_read).is_empty(), "written before the reap");
    }

    #[test]
    fn a_short_message_is_malformed() {
        let mut reader = Reader(&[1, 0]);
        assert_eq!(reader.u8().expect("one byte"), 1);
        assert!(reader.u32().is_err());
        let mut writer = Writer::default();
        writer.bytes(b"abc");
        let mut reader = Reader(&writer.0[..5]);
        assert!(reader.bytes().is_err());
    }
}
