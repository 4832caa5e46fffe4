//! Whether a terminal's foreground programs wait for input: some process of
//! the group is blocked reading the terminal, directly (`read`) or in a
//! `select`/`poll`/`epoll` call whose set includes it. Read from `/proc`
//! (the blocked system call, its arguments, the descriptors they name); see
//! docs/decisions/0008. Quiet output alone is not a wait: `sleep`, a busy
//! loop and a server waiting on a socket are quiet too.
//!
//! Reading another process's `/proc/PID/syscall` and `/proc/PID/mem` needs
//! ptrace access to it, which a process has over its own descendants (same
//! uid, or root). Where the kernel says no, the answer is "not waiting".

use std::fs;

pub use ::spawn::TerminalDevice;

/// Whether some process of the process group `pgid` is blocked reading
/// `terminal` (see the module documentation).
pub fn group_waits_for_input(pgid: i32, terminal: TerminalDevice) -> bool {
    group_members(pgid)
        .into_iter()
        .any(|pid| waits_for_input(pid, terminal))
}

/// The first process of the process group `pgid` found blocked reading
/// `terminal`: the program input typed now goes to.
pub fn group_reader(pgid: i32, terminal: TerminalDevice) -> Option<i32> {
    group_members(pgid)
        .into_iter()
        .find(|&pid| waits_for_input(pid, terminal))
}

/// How many read calls process `pid` has made (`syscr` of `/proc/PID/io`):
/// once it is larger than before some input was typed, a reader blocked
/// again has taken that input. `None` once the process is gone (or the
/// kernel refuses access).
pub fn read_calls(pid: i32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("syscr:"))
        .and_then(|count| count.trim().parse().ok())
}

/// Whether a thread of process `pid` is blocked reading `terminal`.
pub fn waits_for_input(pid: i32, terminal: TerminalDevice) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let Some(controlling) = controlling_terminal(pid) else {
        return false;
    };
    let is_terminal = |fd: i32| descriptor_is(pid, fd, terminal, controlling);
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| fs::read_to_string(task.path().join("syscall")).ok())
        .filter_map(|text| blocked_call(&text))
        .any(|call| call.waits_on(pid, &is_terminal))
}

/// The processes whose process group is `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| stat_field(*pid, 2).is_some_and(|group| group == i64::from(pgid)))
        .collect()
}

/// Field `index` (0 is the state) after the command name of `/proc/PID/stat`.
fn stat_field(pid: i32, index: usize) -> Option<i64> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &text[text.rfind(')')? + 1..];
    after_name.split_whitespace().nth(index)?.parse().ok()
}

/// The process's controlling terminal (`tty_nr`), if it has one.
fn controlling_terminal(pid: i32) -> Option<Option<TerminalDevice>> {
    let tty_nr = u64::try_from(stat_field(pid, 4)?).ok()?;
    Some((tty_nr != 0).then(|| TerminalDevice::from_tty_nr(tty_nr)))
}

/// Whether descriptor `fd` of `pid` is `terminal`: its device, or
/// `/dev/tty` while `terminal` is the process's controlling terminal (psql,
/// less and ssh's prompts read `/dev/tty`, not fd 0).
fn descriptor_is(
    pid: i32,
    fd: i32,
    terminal: TerminalDevice,
    controlling: Option<TerminalDevice>,
) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(metadata) = fs::metadata(format!("/proc/{pid}/fd/{fd}")) else {
        return false;
    };
    let device = TerminalDevice::from_rdev(metadata.rdev());
    device == terminal || (device == TerminalDevice::CONTROLLING && controlling == Some(terminal))
}

/// A system call a thread is blocked in, as far as waiting for input goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockedCall {
    /// `read`, `readv`, `pread64` of a descriptor.
    Read { fd: i32 },
    /// `poll`, `ppoll`: an array of `struct pollfd` in the process's memory.
    Poll { array: u64, count: u64 },
    /// `select`, `pselect6`: a read set of `nfds` bits in the process's memory.
    Select { nfds: u64, read_set: u64 },
    /// The `epoll_wait` family: the interest list of an epoll descriptor.
    Epoll { epfd: i32 },
}

/// More entries than this are not read (a program waiting on its terminal
/// among thousands of descriptors is not a prompt worth the cost).
const MAX_WATCHED: u64 = 4096;

/// `POLLIN`, and the same bit in epoll's `EPOLLIN`.
const READABLE: u64 = 0x1;

impl BlockedCall {
    fn waits_on(self, pid: i32, is_terminal: &dyn Fn(i32) -> bool) -> bool {
        match self {
            Self::Read { fd } => is_terminal(fd),
            Self::Poll { array, count } => {
                let Some(bytes) = read_memory(pid, array, count.min(MAX_WATCHED) * 8) else {
                    return false;
                };
                // struct pollfd { int fd; short events; short revents; }
                bytes.chunks_exact(8).any(|entry| {
                    let fd = i32::from_ne_bytes([entry[0], entry[1], entry[2], entry[3]]);
                    let events = u16::from_ne_bytes([entry[4], entry[5]]);
                    u64::from(events) & READABLE != 0 && fd >= 0 && is_terminal(fd)
                })
            }
            Self::Select { nfds, read_set } => {
                if read_set == 0 {
                    return false;
                }
                let nfds = nfds.min(MAX_WATCHED);
                let Some(bits) = read_memory(pid, read_set, nfds.div_ceil(8)) else {
                    return false;
                };
                (0..nfds)
                    .filter(|fd| {
                        usize::try_from(fd / 8)
                            .ok()
                            .and_then(|index| bits.get(index))
                            .is_some_and(|byte| byte >> (fd % 8) & 1 == 1)
                    })
                    .any(|fd| i32::try_from(fd).is_ok_and(is_terminal))
            }
            Self::Epoll { epfd } => {
                let Ok(info) = fs::read_to_string(format!("/proc/{pid}/fdinfo/{epfd}")) else {
                    return false;
                };
                epoll_targets(&info)
                    .into_iter()
                    .any(|(fd, events)| events & READABLE != 0 && is_terminal(fd))
            }
        }
    }
}

/// Reads `len` bytes at `address` of process `pid`'s memory.
fn read_memory(pid: i32, address: u64, len: u64) -> Option<Vec<u8>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut memory = fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    memory.seek(SeekFrom::Start(address)).ok()?;
    let mut bytes = vec![0; usize::try_from(len).ok()?];
    memory.read_exact(&mut bytes).ok()?;
    Some(bytes)
}

/// The `tfd:` lines of an epoll descriptor's fdinfo: each watched
/// descriptor and its event mask (hexadecimal).
fn epoll_targets(info: &str) -> Vec<(i32, u64)> {
    info.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            if words.next()? != "tfd:" {
                return None;
            }
            let fd = words.next()?.parse().ok()?;
            if words.next()? != "events:" {
                return None;
            }
            let events = u64::from_str_radix(words.next()?, 16).ok()?;
            Some((fd, events))
        })
        .collect()
}

/// Parses `/proc/PID/task/TID/syscall`: `NR ARG1 ... ARG6 SP PC` (the
/// number in decimal, the rest in hexadecimal), `running`, or `-1 SP PC`
/// for a thread blocked outside a system call.
fn blocked_call(text: &str) -> Option<BlockedCall> {
    let mut words = text.split_whitespace();
    let number: i64 = words.next()?.parse().ok()?;
    let mut args = [0_u64; 3];
    for arg in &mut args {
        *arg = u64::from_str_radix(words.next()?.trim_start_matches("0x"), 16).ok()?;
    }
    let fd = |arg: u64| i32::try_from(arg).ok();
    classify(number, args, fd)
}

fn classify(number: i64, args: [u64; 3], fd: impl Fn(u64) -> Option<i32>) -> Option<BlockedCall> {
    if [libc::SYS_read, libc::SYS_readv, libc::SYS_pread64].contains(&number) {
        return Some(BlockedCall::Read { fd: fd(args[0])? });
    }
    if number == libc::SYS_ppoll || is_legacy(number, Legacy::Poll) {
        return Some(BlockedCall::Poll {
            array: args[0],
            count: args[1],
        });
    }
    if number == libc::SYS_pselect6 || is_legacy(number, Legacy::Select) {
        return Some(BlockedCall::Select {
            nfds: args[0],
            read_set: args[1],
        });
    }
    if [libc::SYS_epoll_pwait, libc::SYS_epoll_pwait2].contains(&number)
        || is_legacy(number, Legacy::EpollWait)
    {
        return Some(BlockedCall::Epoll { epfd: fd(args[0])? });
    }
    None
}

/// The older calls that only some architectures have (`x86_64` does,
/// aarch64 has only the `p` forms).
#[derive(Clone, Copy)]
enum Legacy {
    Poll,
    Select,
    EpollWait,
}

#[cfg(target_arch = "x86_64")]
fn is_legacy(number: i64, call: Legacy) -> bool {
    number
        == match call {
            Legacy::Poll => libc::SYS_poll,
            Legacy::Select => libc::SYS_select,
            Legacy::EpollWait => libc::SYS_epoll_wait,
        }
}

#[cfg(not(target_arch = "x86_64"))]
fn is_legacy(_number: i64, _call: Legacy) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_calls_count_up_and_end_with_the_process() {
        let pid = i32::try_from(std::process::id()).expect("pid fits");
        let before = read_calls(pid).expect("our own counts");
        let _ = fs::read_to_string("/proc/self/stat").expect("readable");
        assert!(read_calls(pid).expect("our own counts") > before);
        assert_eq!(read_calls(i32::MAX), None);
    }

    #[test]
    fn blocked_calls_parse_from_proc_text() {
        let read = format!(
            "{} 0x3 0x7ffc 0x1 0x0 0x0 0x0 0x7ff0 0x7ff8",
            libc::SYS_read
        );
        assert_eq!(blocked_call(&read), Some(BlockedCall::Read { fd: 3 }));
        let select = format!(
            "{} 0x1 0x7ffd 0x0 0x0 0x0 0x0 0x7ff0 0x7ff8",
            libc::SYS_pselect6
        );
        assert_eq!(
            blocked_call(&select),
            Some(BlockedCall::Select {
                nfds: 1,
                read_set: 0x7ffd
            })
        );
        let epoll = format!(
            "{} 0x11 0x7ffe 0x400 0x1fa0 0x0 0x0 0x1 0x2",
            libc::SYS_epoll_pwait
        );
        assert_eq!(blocked_call(&epoll), Some(BlockedCall::Epoll { epfd: 17 }));
        assert_eq!(blocked_call("running"), None);
        assert_eq!(blocked_call("-1 0x7ffc 0x7ff8"), None);
        let sleep = format!(
            "{} 0x0 0x0 0x7ffc 0x0 0x0 0x0 0x1 0x2",
            libc::SYS_clock_nanosleep
        );
        assert_eq!(blocked_call(&sleep), None);
    }

    #[test]
    fn epoll_interest_lists_parse() {
        let info = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t2074\n\
                    tfd:       18 events:       19 data:               12  pos:0 ino:5 sdev:d\n\
                    tfd:       24 events:        4 data:               18  pos:0 ino:3 sdev:19\n";
        assert_eq!(epoll_targets(info), vec![(18, 0x19), (24, 0x4)]);
    }

    #[test]
    fn both_device_encodings_name_the_same_terminal() {
        // /dev/pts/3 is major 136, minor 3; /dev/pts/300 needs the high minor bits.
        for minor in [3_u32, 300, 70_000] {
            let rdev = libc::makedev(136, minor);
            let tty_nr = u64::from(minor & 0xff) | (136 << 8) | (u64::from(minor & !0xff) << 12);
            assert_eq!(
                TerminalDevice::from_rdev(rdev),
                TerminalDevice::from_tty_nr(tty_nr),
                "minor {minor}"
            );
        }
    }
}
