//! The handful of system calls the sandbox's init makes once the server
//! runs beside it (docs/decisions/0013): inline `syscall`/`svc`, so none
//! touches `errno`. The init shares the spawning thread's memory and its
//! thread pointer, so libc's wrappers would write that thread's `errno`
//! while it runs: a failed call of the init could change what a failed
//! call of the server reports.
//!
//! Every function returns the kernel's raw result: a negative errno on
//! failure. None allocates, locks, panics or reads thread-locals.

#![allow(
    unsafe_code,
    reason = "system calls without libc, for a process that shares the server's memory"
)]

use std::ffi::c_int;

/// Whether this architecture has the inline system calls (and so the
/// in-memory init). Elsewhere commands cannot get a PID namespace.
pub(crate) const SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// A system call with up to four arguments.
///
/// # Safety
/// The arguments must be valid for system call `number`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn syscall4(number: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let result: isize;
    // SAFETY: the x86_64 system call convention: number in rax, arguments
    // in rdi, rsi, rdx, r10; the kernel clobbers rcx and r11 and returns
    // in rax. No stack use, no memory of ours beyond what the arguments
    // name (the caller's part of the contract).
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") number as isize => result,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    result
}

/// A system call with up to four arguments.
///
/// # Safety
/// The arguments must be valid for system call `number`.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
unsafe fn syscall4(number: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let result: isize;
    // SAFETY: the aarch64 system call convention: number in x8, arguments
    // in x0 to x3, result in x0; `svc 0` clobbers nothing else.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") number,
            inlateout("x0") a.cast_signed() => result,
            in("x1") b,
            in("x2") c,
            in("x3") d,
            options(nostack),
        );
    }
    result
}

/// Elsewhere no process ever calls these (the namespace is refused at
/// preparation, [`SUPPORTED`]); `ENOSYS`.
///
/// # Safety
/// None needed.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn syscall4(_number: libc::c_long, _a: usize, _b: usize, _c: usize, _d: usize) -> isize {
    -(libc::ENOSYS as isize)
}

/// Sign-extends a C int into a register argument (pids, descriptors).
fn int(value: c_int) -> usize {
    value as isize as usize
}

/// `rt_sigtimedwait(set, NULL, NULL, 8)`: the next of the blocked signals
/// in `set` (bit N-1 for signal N), waiting without end.
pub(crate) fn wait_signal(set: &u64) -> isize {
    // SAFETY: a valid 8-byte kernel sigset; null info and timeout are allowed.
    unsafe {
        syscall4(
            libc::SYS_rt_sigtimedwait,
            std::ptr::from_ref(set) as usize,
            0,
            0,
            size_of::<u64>(),
        )
    }
}

/// `wait4(pid, &status, options, NULL)`.
pub(crate) fn wait4(pid: libc::pid_t, status: &mut c_int, options: c_int) -> isize {
    // SAFETY: `status` is a valid int; a null rusage is allowed.
    unsafe {
        syscall4(
            libc::SYS_wait4,
            int(pid),
            std::ptr::from_mut(status) as usize,
            int(options),
            0,
        )
    }
}

/// `kill(pid, signal)`.
pub(crate) fn kill(pid: libc::pid_t, signal: c_int) -> isize {
    // SAFETY: integer arguments only.
    unsafe { syscall4(libc::SYS_kill, int(pid), int(signal), 0, 0) }
}

/// `write(fd, bytes, len)`.
pub(crate) fn write(fd: c_int, bytes: &[u8]) -> isize {
    // SAFETY: the pointer and length describe `bytes`.
    unsafe {
        syscall4(
            libc::SYS_write,
            int(fd),
            bytes.as_ptr() as usize,
            bytes.len(),
            0,
        )
    }
}

/// `close(fd)`.
pub(crate) fn close(fd: c_int) -> isize {
    // SAFETY: an integer argument only; closing a descriptor of our own table.
    unsafe { syscall4(libc::SYS_close, int(fd), 0, 0, 0) }
}

/// `close_range(first, last, 0)` (Linux 5.9).
pub(crate) fn close_range(first: u32, last: u32) -> isize {
    // SAFETY: integer arguments only.
    unsafe { syscall4(libc::SYS_close_range, first as usize, last as usize, 0, 0) }
}

/// `exit_group(code)`: ends the calling process (the init), never the
/// server, which is another process.
pub(crate) fn exit_group(code: c_int) -> ! {
    loop {
        // SAFETY: an integer argument; the call does not return.
        unsafe { syscall4(libc::SYS_exit_group, int(code), 0, 0, 0) };
    }
}
