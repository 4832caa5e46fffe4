//! The sandbox's seccomp programs, compiled by seccompiler for the
//! architecture this build runs on. They are compiled once, in the parent
//! (`Confinement::prepare`); the child only hands them to the kernel.
//!
//! Two filters, because seccompiler gives one filter one action for what it
//! matches and the two parts answer with different errors:
//!
//! - always on: syscalls that act on the whole machine (reboot, kexec,
//!   kernel modules), on another process's memory (`ptrace`,
//!   `process_vm_readv`/`writev`) or on the kernel's keyrings (`add_key`,
//!   `request_key`, `keyctl`) fail with EPERM;
//! - `--network deny`: `socket` for any family but `AF_UNIX`, and the three
//!   `io_uring` calls (which could open sockets behind the filter's back),
//!   fail with EACCES.
//!
//! Each program starts with seccompiler's architecture check: a system call
//! made under another ABI (32-bit `int 0x80` on `x86_64`, `AArch32` on `aarch64`)
//! kills the process, since its numbers mean other calls. On `x86_64` a third,
//! hand-written program refuses the x32 ABI (same architecture value, numbers
//! with bit 30 set), which seccompiler cannot express (it matches numbers
//! only by equality): without it every rule could be sidestepped.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// At most this many programs are installed (`programs` returns no more).
pub(crate) const MAX_PROGRAMS: usize = 3;

/// Refused with EPERM in every sandbox: the whole machine, another
/// process's memory, and the kernel's keyrings (the host's and other
/// users' keys are not namespaced).
const HOST_SYSCALLS: [libc::c_long; 12] = [
    libc::SYS_reboot,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_keyctl,
];

/// Refused with EACCES under `--network deny`, whatever their arguments.
const IO_URING_SYSCALLS: [libc::c_long; 3] = [
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The programs to install, in order: the x32 guard (`x86_64` only), the
/// always-on part, and the network part when `deny_network`. `Err` names
/// why they cannot be built for this architecture.
pub(crate) fn programs(deny_network: bool) -> Result<Vec<Vec<libc::sock_filter>>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|error| error.to_string())?;
    let mut programs = Vec::with_capacity(MAX_PROGRAMS);
    #[cfg(target_arch = "x86_64")]
    programs.push(x32_guard());
    programs.push(compile(host_rules(), libc::EPERM, arch)?);
    if deny_network {
        programs.push(compile(network_rules()?, libc::EACCES, arch)?);
    }
    Ok(programs)
}

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

/// An empty rule list matches the call whatever its arguments.
fn host_rules() -> Rules {
    HOST_SYSCALLS
        .iter()
        .map(|&number| (number, Vec::new()))
        .collect()
}

fn network_rules() -> Result<Rules, String> {
    // `int domain`: the kernel reads the low 32 bits only, so do we.
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        u64::from(libc::AF_UNIX.unsigned_abs()),
    )
    .and_then(|condition| SeccompRule::new(vec![condition]))
    .map_err(|error| error.to_string())?;
    let mut rules: Rules = IO_URING_SYSCALLS
        .iter()
        .map(|&number| (number, Vec::new()))
        .collect();
    rules.insert(libc::SYS_socket, vec![not_unix]);
    Ok(rules)
}

/// Matching calls fail with `errno`; every other call is allowed.
fn compile(rules: Rules, errno: i32, arch: TargetArch) -> Result<Vec<libc::sock_filter>, String> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno.unsigned_abs()),
        arch,
    )
    .map_err(|error| error.to_string())?;
    let program = BpfProgram::try_from(filter).map_err(|error| error.to_string())?;
    // seccompiler has its own copy of the instruction type (for Debug and
    // Eq); the kernel's layout is libc's.
    Ok(program
        .into_iter()
        .map(|instruction| libc::sock_filter {
            code: instruction.code,
            jt: instruction.jt,
            jf: instruction.jf,
            k: instruction.k,
        })
        .collect())
}

/// Any call whose number has the x32 bit set fails with EACCES.
#[cfg(target_arch = "x86_64")]
fn x32_guard() -> Vec<libc::sock_filter> {
    // Classic BPF (linux/bpf_common.h): load a word of `seccomp_data`
    // (offset 0 is `nr`), jump if >= constant, return constant.
    const LOAD_WORD: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JUMP_IF_AT_LEAST: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    vec![
        op(LOAD_WORD, 0, 0, 0),
        op(JUMP_IF_AT_LEAST, 0, 1, X32_SYSCALL_BIT),
        op(
            RETURN,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | libc::EACCES.unsigned_abs(),
        ),
        op(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use super::*;

    /// The `seccomp_data` the kernel hands a filter, as the words a
    /// program loads: `nr`, `arch`, the instruction pointer, six arguments.
    struct Call {
        nr: i64,
        arch: u32,
        args: [u64; 6],
    }

    impl Call {
        fn new(nr: libc::c_long, args: &[u64]) -> Self {
            let mut all = [0; 6];
            all[..args.len()].copy_from_slice(args);
            Self {
                nr,
                arch: native_arch(),
                args: all,
            }
        }

        fn word(&self, offset: u32) -> u32 {
            let low_high = |value: u64, high: bool| {
                u32::try_from(if high {
                    value >> 32
                } else {
                    value & 0xffff_ffff
                })
                .unwrap()
            };
            match offset {
                0 => u32::try_from(self.nr).unwrap(),
                4 => self.arch,
                16..=63 => {
                    let index = usize::try_from((offset - 16) / 8).unwrap();
                    low_high(self.args[index], offset % 8 == 4)
                }
                _ => panic!("load at offset {offset}"),
            }
        }
    }

    fn native_arch() -> u32 {
        // linux/audit.h: EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE.
        match std::env::consts::ARCH {
            "x86_64" => 62 | 0x8000_0000 | 0x4000_0000,
            "aarch64" => 183 | 0x8000_0000 | 0x4000_0000,
            other => panic!("no audit value for {other}"),
        }
    }

    /// A classic-BPF interpreter for the instructions these programs use,
    /// so each rule is checked without making the call for real.
    fn run(program: &[libc::sock_filter], call: &Call) -> u32 {
        let mut accumulator = 0u32;
        let mut pc = 0usize;
        loop {
            let op = program[pc];
            pc += 1;
            let jump = |taken: bool| usize::from(if taken { op.jt } else { op.jf });
            match op.code {
                0x20 => accumulator = call.word(op.k),
                0x54 => accumulator &= op.k,
                0x05 => pc += usize::try_from(op.k).unwrap(),
                0x15 => pc += jump(accumulator == op.k),
                0x25 => pc += jump(accumulator > op.k),
                0x35 => pc += jump(accumulator >= op.k),
                0x45 => pc += jump(accumulator & op.k != 0),
                0x06 => return op.k,
                code => panic!("unexpected instruction {code:#x}"),
            }
        }
    }

    /// What the kernel does with all programs installed: the most
    /// restrictive answer wins (a kill is the lowest value as signed).
    fn verdict(programs: &[Vec<libc::sock_filter>], call: &Call) -> u32 {
        programs
            .iter()
            .map(|program| run(program, call))
            .min_by_key(|&action| action.cast_signed())
            .unwrap()
    }

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM.unsigned_abs();
    const EACCES: u32 = libc::SECCOMP_RET_ERRNO | libc::EACCES.unsigned_abs();

    fn unix() -> u64 {
        u64::from(libc::AF_UNIX.unsigned_abs())
    }

    fn inet() -> u64 {
        u64::from(libc::AF_INET.unsigned_abs())
    }

    #[test]
    fn host_calls_fail_with_eperm_in_every_sandbox() {
        for deny_network in [false, true] {
            let programs = programs(deny_network).unwrap();
            assert!(programs.len() <= MAX_PROGRAMS);
            for nr in HOST_SYSCALLS {
                assert_eq!(verdict(&programs, &Call::new(nr, &[])), EPERM, "{nr}");
            }
            for nr in [libc::SYS_getpid, libc::SYS_execve, libc::SYS_read] {
                assert_eq!(verdict(&programs, &Call::new(nr, &[])), ALLOW, "{nr}");
            }
        }
    }

    #[test]
    fn the_network_part_refuses_non_unix_sockets_and_io_uring_only_when_asked() {
        let socket = |family| Call::new(libc::SYS_socket, &[family, 1, 0]);
        let open = programs(false).unwrap();
        assert_eq!(verdict(&open, &socket(inet())), ALLOW);
        for nr in IO_URING_SYSCALLS {
            assert_eq!(verdict(&open, &Call::new(nr, &[])), ALLOW);
        }
        let closed = programs(true).unwrap();
        assert_eq!(verdict(&closed, &socket(inet())), EACCES);
        assert_eq!(verdict(&closed, &socket(unix())), ALLOW);
        // The kernel reads `domain` as an int: high bits change nothing.
        assert_eq!(verdict(&closed, &socket(unix() | 1 << 32)), ALLOW);
        for nr in IO_URING_SYSCALLS {
            assert_eq!(verdict(&closed, &Call::new(nr, &[])), EACCES);
        }
    }

    #[test]
    fn a_foreign_architecture_is_killed() {
        let mut call = Call::new(libc::SYS_getpid, &[]);
        call.arch = 3 | 0x4000_0000; // AUDIT_ARCH_I386
        assert_eq!(
            verdict(&programs(false).unwrap(), &call),
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_x32_abi_is_refused() {
        for deny_network in [false, true] {
            let programs = programs(deny_network).unwrap();
            for nr in [libc::SYS_getpid, libc::SYS_socket, libc::SYS_reboot] {
                let call = Call::new(0x4000_0000 | nr, &[inet()]);
                assert_eq!(verdict(&programs, &call), EACCES, "{nr}");
            }
        }
    }
}
