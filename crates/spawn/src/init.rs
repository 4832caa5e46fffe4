//! PID 1 of a sandboxed command's PID namespace (docs/decisions/0010 and
//! 0013).
//!
//! The spawned child becomes PID 1 of the new namespace, still in the
//! server's memory (`CLONE_VM` without `CLONE_VFORK`, on a stack of its
//! own), starts the shell (PID 2, in a process session of its own), closes
//! its copy of every descriptor but the status pipe (the server then sees
//! the end of its report pipe, and its own descriptors are held by no
//! command), and runs [`run`]: it forwards SIGTERM, SIGINT and SIGHUP to
//! the shell's process group, reaps every process that ends (orphans are
//! re-parented to PID 1), and when the shell exits writes the shell's raw
//! wait status on the status pipe and exits. The kernel then kills what is
//! left in the namespace. The server reads the status from the pipe, so a
//! shell killed by SIGTERM reads as killed by SIGTERM (143), as without
//! the sandbox: PID 1 itself cannot die of a signal sent from inside.
//!
//! Started by the spawner process ([`linger_in_this_process`]), the init
//! lingers instead when the shell leaves processes behind
//! (docs/decisions/0025): it reports the status at once, marked as
//! lingering, and stays until its last child is gone, so the server can
//! sweep the leftovers as without a namespace (count them, end them, and
//! move the `keep_running` ones with this init to the keep cgroup). It
//! holds no descriptor of the command's output meanwhile (0, 1 and 2 are
//! closed), so the output's end depends on the command's processes only.
//!
//! The init runs beside the server, on its memory and its thread pointer:
//! it makes only the raw system calls of `raw.rs` (no `errno`), and touches
//! no heap, lock, thread-local or panicking code. Its four signals are
//! blocked from before the clone; it waits for them with
//! `rt_sigtimedwait`, never through a handler (every disposition is the
//! default: the server's handlers point into the server's code).

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use super::raw;

/// Set in the spawner process before it starts any init, never changed
/// after: inits it starts (which share its memory) linger for the
/// server's sweep. A plain load for the init, no lock. Elsewhere (inits
/// started from a thread of an embedding process, whose exit future waits
/// for the init itself) the init exits with its shell.
static LINGER: AtomicBool = AtomicBool::new(false);

/// Makes the inits this process starts from now on linger after their
/// shell while other processes of the namespace live.
pub(crate) fn linger_in_this_process() {
    LINGER.store(true, Ordering::Release);
}

/// The second word of a lingering init's report (after the wait status):
/// the status is the shell's, and the init goes on.
pub(crate) const LINGERING: c_int = 0x4c49_4e47;

/// The signals the namespace's init waits for.
pub(crate) const INIT_SIGNALS: [c_int; 4] =
    [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD];

/// The signals forwarded to the shell's process group.
const FORWARDED: [c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// [`INIT_SIGNALS`] as a kernel signal set (bit N-1 for signal N).
const WAITED: u64 = {
    let mut set = 0u64;
    let mut index = 0;
    while index < INIT_SIGNALS.len() {
        set |= 1 << (INIT_SIGNALS[index] - 1);
        index += 1;
    }
    set
};

/// `__WALL`: wait for every kind of child, whatever its exit signal.
const WAIT_ALL: c_int = 0x4000_0000;

/// The init's life: `status_fd` is the status pipe, `shell` the shell's
/// pid (0: the start-up probe, which only reports status 0). Never returns.
/// Raw system calls only (see the module comment); the four signals must
/// be blocked.
pub(crate) fn run(status_fd: c_int, shell: libc::pid_t) -> ! {
    if shell == 0 {
        report_status(status_fd, 0);
        raw::exit_group(0);
    }
    let linger = LINGER.load(Ordering::Acquire);
    if linger {
        // The shell has its copies: ours would hold its output open for
        // as long as a kept process keeps this init.
        for fd in 0..3 {
            raw::close(fd);
        }
    }
    // The shell's status once it has been reported and the init lingers.
    let mut lingering = None;
    loop {
        let signal = raw::wait_signal(&WAITED);
        if signal == libc::SIGCHLD as isize {
            let (ended, none_left) = reap(shell);
            if let Some(status) = ended {
                if !linger || none_left {
                    report_status(status_fd, status);
                    raw::exit_group(exit_code(status));
                }
                report_lingering(status_fd, status);
                raw::close(status_fd);
                lingering = Some(status);
            } else if let Some(status) = lingering
                && none_left
            {
                raw::exit_group(exit_code(status));
            }
        } else if lingering.is_none()
            && FORWARDED
                .iter()
                .any(|&forwarded| forwarded as isize == signal)
        {
            let signal = signal as c_int;
            // The shell made its own session (and group) before its exec.
            if raw::kill(-shell, signal) != 0 {
                raw::kill(shell, signal);
            }
        }
        // Anything else (EINTR after a stop and continue) waits again.
    }
}

/// Reaps every process that has ended: the shell's wait status if it was
/// among them, and whether no child is left at all.
fn reap(shell: libc::pid_t) -> (Option<c_int>, bool) {
    let mut found = None;
    loop {
        let mut status: c_int = 0;
        let pid = raw::wait4(-1, &mut status, libc::WNOHANG | WAIT_ALL);
        if pid <= 0 {
            return (found, pid == -(libc::ECHILD as isize));
        }
        if pid == shell as isize {
            found = Some(status);
        }
    }
}

/// The status and [`LINGERING`] in one write (atomic on a pipe), so the
/// reader tells it from a report the init's exit follows.
fn report_lingering(fd: c_int, status: c_int) {
    let [a, b, c, d] = status.to_ne_bytes();
    let [e, f, g, h] = LINGERING.to_ne_bytes();
    raw::write(fd, &[a, b, c, d, e, f, g, h]);
}

fn report_status(fd: c_int, status: c_int) {
    raw::write(fd, &status.to_ne_bytes());
}

/// The init's own exit code: the shell's, as a shell reports it (128+N
/// after signal N). Shifts and masks only.
fn exit_code(status: c_int) -> c_int {
    let signal = status & 0x7f;
    if signal != 0 && signal != 0x7f {
        128 + signal
    } else {
        (status >> 8) & 0xff
    }
}

#[cfg(test)]
mod tests {
    use super::exit_code;

    #[test]
    fn exit_codes_read_as_a_shell_reports_them() {
        assert_eq!(exit_code(0), 0);
        assert_eq!(exit_code(7 << 8), 7);
        assert_eq!(exit_code(libc::SIGTERM), 143);
        assert_eq!(exit_code(libc::SIGKILL | 0x80), 137);
    }
}
