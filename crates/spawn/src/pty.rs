//! Linux: the pseudo-terminal a `tty` command runs under. The parent opens
//! the pair before the spawn; the child (see `vfork.rs`) makes the slave
//! its controlling terminal and stdin, stdout and stderr. No PTY crate: they
//! start children through `Command`, which would bypass the one spawn funnel.

#![allow(
    unsafe_code,
    reason = "opening a pseudo-terminal pair and setting its size are raw ioctls"
)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, ReadBuf};

/// Columns of every terminal the runtime makes.
pub const TERMINAL_COLUMNS: u16 = 120;
/// Rows of every terminal the runtime makes.
pub const TERMINAL_ROWS: u16 = 40;
/// The `TERM` a `tty` command gets.
pub const TERMINAL_TYPE: &str = "xterm-256color";

/// A new pair: the master (non-blocking, close-on-exec) and the slave
/// (`O_NOCTTY`, close-on-exec: only the `dup2` copies in the child stay open
/// across its exec), sized 120x40.
pub fn open_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: posix_openpt with flags only; it returns a new descriptor or -1.
    let master = unsafe {
        libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK)
    };
    if master < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: posix_openpt succeeded, so the descriptor is open and ours alone.
    let master = unsafe { OwnedFd::from_raw_fd(master) };
    // SAFETY: grantpt and unlockpt on the master we just opened.
    if unsafe { libc::grantpt(master.as_raw_fd()) } != 0
        || unsafe { libc::unlockpt(master.as_raw_fd()) } != 0
    {
        return Err(io::Error::last_os_error());
    }
    let slave = open_slave(&master)?;
    let size = libc::winsize {
        ws_row: TERMINAL_ROWS,
        ws_col: TERMINAL_COLUMNS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads a winsize from the pointer, valid for the call.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &raw const size) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((master, slave))
}

/// A pair opened elsewhere (a command's own devpts, by its init): the
/// master made non-blocking and the terminal sized as [`open_pair`]'s.
pub fn adopt((master, slave): (OwnedFd, OwnedFd)) -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    let flags = unsafe { libc::fcntl(master.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0
        || unsafe { libc::fcntl(master.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0
    {
        return Err(io::Error::last_os_error());
    }
    let size = libc::winsize {
        ws_row: TERMINAL_ROWS,
        ws_col: TERMINAL_COLUMNS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads a winsize from the pointer, valid for the call.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &raw const size) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((master, slave))
}

/// The slave of `master`: through `TIOCGPTPEER` where the kernel has it (no
/// path lookup, so a mount namespace's view of `/dev/pts` does not matter),
/// else by the name `ptsname_r` gives.
fn open_slave(master: &OwnedFd) -> io::Result<OwnedFd> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: TIOCGPTPEER takes the open flags as an integer and returns a
    // new descriptor or -1.
    let peer = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTPEER, flags) };
    if peer >= 0 {
        // SAFETY: the ioctl returned a new descriptor we own.
        return Ok(unsafe { OwnedFd::from_raw_fd(peer) });
    }
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: the buffer and its length describe `name`.
    let failed = unsafe { libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) };
    if failed != 0 {
        return Err(io::Error::from_raw_os_error(failed));
    }
    // SAFETY: ptsname_r wrote a NUL-terminated path into `name`.
    let slave = unsafe { libc::open(name.as_ptr(), flags) };
    if slave < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: open succeeded, so the descriptor is open and ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(slave) })
}

/// The master side of a command's terminal, registered with the reactor;
/// shared by its reader (the capture) and its [`TerminalWriter`].
pub type Master = Arc<AsyncFd<OwnedFd>>;

/// The device number of a terminal's slave side.
pub fn device_of(slave: &OwnedFd) -> io::Result<TerminalDevice> {
    // SAFETY: a zeroed stat is a valid buffer for fstat to fill.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat fills `stat` from a descriptor we own.
    if unsafe { libc::fstat(slave.as_raw_fd(), &raw mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TerminalDevice::from_rdev(stat.st_rdev))
}

/// Registers a master with the runtime's reactor.
pub fn register(master: OwnedFd) -> io::Result<Master> {
    // SAFETY: an OwnedFd stays open, and names the same description, for as
    // long as the AsyncFd owns it; its as_raw_fd never changes.
    unsafe {
        AsyncFd::register_with_interest(
            master,
            tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE,
        )
    }
    .map(Arc::new)
    .map_err(io::Error::from)
}

/// Reads the master as a stream: `EIO` (every slave descriptor closed) is
/// its end.
pub struct MasterReader(pub Master);

impl AsyncRead for MasterReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let result = guard.try_io(|inner| {
                // SAFETY: the pointer and length describe `unfilled`.
                let read = unsafe {
                    libc::read(
                        inner.get_ref().as_raw_fd(),
                        unfilled.as_mut_ptr().cast(),
                        unfilled.len(),
                    )
                };
                usize::try_from(read).map_err(|_| io::Error::last_os_error())
            });
            match result {
                Ok(Ok(read)) => {
                    buf.advance(read);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(error)) if error.raw_os_error() == Some(libc::EIO) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(error)) => return Poll::Ready(Err(error)),
                Err(_would_block) => {}
            }
        }
    }
}

/// Writes input to a command's terminal.
#[derive(Clone)]
pub struct TerminalWriter {
    pub(crate) master: Master,
    pub(crate) device: TerminalDevice,
}

impl std::fmt::Debug for TerminalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalWriter")
            .field("fd", &self.master.get_ref().as_raw_fd())
            .finish()
    }
}

impl TerminalWriter {
    /// Input to the terminal `device` through its registered `master`.
    pub fn new(master: Master, device: TerminalDevice) -> Self {
        Self { master, device }
    }

    /// Writes all of `bytes`, waiting while the terminal's input queue is full.
    pub async fn write_all(&self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let mut guard = self.master.writable().await?;
            let result = guard.try_io(|inner| {
                // SAFETY: the pointer and length describe `bytes`.
                let written = unsafe {
                    libc::write(
                        inner.get_ref().as_raw_fd(),
                        bytes.as_ptr().cast(),
                        bytes.len(),
                    )
                };
                usize::try_from(written).map_err(|_| io::Error::last_os_error())
            });
            match result {
                Ok(Ok(written)) => bytes = bytes.get(written..).unwrap_or_default(),
                Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(error)) => return Err(error),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }

    /// The terminal's foreground process group (`tcgetpgrp` on the master).
    pub fn foreground_group(&self) -> Option<i32> {
        // SAFETY: tcgetpgrp on a descriptor we own.
        let group = unsafe { libc::tcgetpgrp(self.master.get_ref().as_raw_fd()) };
        (group > 0).then_some(group)
    }

    /// Whether input typed now would be hidden: echo off in canonical
    /// (line) mode, as at a password prompt. A program in raw mode
    /// (readline, an editor) turns echo off to draw input itself, so that
    /// is not hiding.
    pub fn hides_input(&self) -> bool {
        // SAFETY: a zeroed termios is a valid buffer for tcgetattr to fill.
        let mut termios: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: tcgetattr fills `termios` from a descriptor we own.
        let read = unsafe { libc::tcgetattr(self.master.get_ref().as_raw_fd(), &raw mut termios) };
        read == 0 && termios.c_lflag & libc::ECHO == 0 && termios.c_lflag & libc::ICANON != 0
    }

    /// Whether the terminal is in canonical (line) mode: a read returns at
    /// most one line, so a program that reads one line leaves the next ones
    /// in the terminal's input queue for whoever reads after it.
    pub fn canonical(&self) -> bool {
        // SAFETY: a zeroed termios is a valid buffer for tcgetattr to fill.
        let mut termios: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: tcgetattr fills `termios` from a descriptor we own.
        let read = unsafe { libc::tcgetattr(self.master.get_ref().as_raw_fd(), &raw mut termios) };
        read == 0 && termios.c_lflag & libc::ICANON != 0
    }

    /// The bytes that end a read of the terminal in canonical mode, or
    /// that make it send a signal (which may end the reader): newline, the
    /// end-of-file and end-of-line characters, carriage return where it is
    /// turned into a newline, and the interrupt, quit and suspend
    /// characters while signals are on. Empty when the settings cannot be read.
    pub fn read_ends(&self) -> Vec<u8> {
        // SAFETY: a zeroed termios is a valid buffer for tcgetattr to fill.
        let mut termios: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: tcgetattr fills `termios` from a descriptor we own.
        let read = unsafe { libc::tcgetattr(self.master.get_ref().as_raw_fd(), &raw mut termios) };
        if read != 0 {
            return Vec::new();
        }
        let mut ends = vec![b'\n'];
        let mut special = vec![libc::VEOF, libc::VEOL, libc::VEOL2];
        if termios.c_lflag & libc::ISIG != 0 {
            special.extend([libc::VINTR, libc::VQUIT, libc::VSUSP]);
        }
        // 0 is _POSIX_VDISABLE on Linux: the character is off.
        ends.extend(
            special
                .into_iter()
                .filter_map(|index| termios.c_cc.get(index).copied())
                .filter(|&byte| byte != 0),
        );
        if termios.c_iflag & libc::ICRNL != 0 && termios.c_iflag & libc::IGNCR == 0 {
            ends.push(b'\r');
        }
        ends
    }

    /// Whether the terminal echoes input (off at a password prompt).
    pub fn echoes(&self) -> bool {
        // SAFETY: a zeroed termios is a valid buffer for tcgetattr to fill.
        let mut termios: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: tcgetattr fills `termios` from a descriptor we own.
        let read = unsafe { libc::tcgetattr(self.master.get_ref().as_raw_fd(), &raw mut termios) };
        read != 0 || termios.c_lflag & libc::ECHO != 0
    }

    /// The terminal device, for shell-runtime's `group_waits_for_input`.
    pub fn device(&self) -> TerminalDevice {
        self.device
    }
}

/// A terminal, as the kernel numbers it: the device of a pseudo-terminal's
/// slave side (`st_rdev` of `/dev/pts/N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalDevice {
    major: u32,
    minor: u32,
}

impl TerminalDevice {
    /// The terminal whose device number (`st_rdev`, as `stat` gives it) is `rdev`.
    pub fn from_rdev(rdev: u64) -> Self {
        Self {
            major: libc::major(rdev),
            minor: libc::minor(rdev),
        }
    }

    /// The terminal `/proc/PID/stat` names in its `tty_nr` field, which
    /// packs the numbers differently from `st_rdev`.
    pub fn from_tty_nr(tty_nr: u64) -> Self {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "both parts are masked to at most 20 bits"
        )]
        Self {
            major: ((tty_nr >> 8) & 0xfff) as u32,
            minor: ((tty_nr & 0xff) | ((tty_nr >> 12) & 0xf_ff00)) as u32,
        }
    }

    /// `/dev/tty`: whatever the opening process's controlling terminal is.
    pub const CONTROLLING: Self = Self { major: 5, minor: 0 };
}
