//! Telling a terminal program that waits for input from a quiet one, on real
//! pseudo-terminals: a python harness (started through the crate's spawn)
//! runs each program under `pty.fork()` and writes its pid to a file.
#![cfg(target_os = "linux")]
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

use std::time::{Duration, Instant};

mod common;

use common::{read_pid, spec};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use shell_runtime::{ShellProcess, TerminalDevice, group_waits_for_input};
use test_support::{single_quoted, wait_gone};

/// Runs argv[2:] under a new pty, writes its pid to argv[1] and the
/// terminal's device number to argv[1].rdev (from the child, before the
/// program can move its fd 0), and drains the master so the program never
/// blocks on output.
const HARNESS: &str = r"
import os, pty, sys
pid, master = pty.fork()
if pid == 0:
    with open(sys.argv[1] + '.rdev.tmp', 'w') as f:
        f.write(str(os.fstat(0).st_rdev))
    os.rename(sys.argv[1] + '.rdev.tmp', sys.argv[1] + '.rdev')
    os.execvp(sys.argv[2], sys.argv[2:])
while not os.path.exists(sys.argv[1] + '.rdev'):
    pass
with open(sys.argv[1] + '.tmp', 'w') as f:
    f.write(str(pid))
os.rename(sys.argv[1] + '.tmp', sys.argv[1])
while True:
    try:
        if not os.read(master, 4096):
            break
    except OSError:
        break
";

/// A program under a pty; ended (by pid, then its harness) when dropped.
struct UnderTerminal {
    pid: u32,
    terminal: TerminalDevice,
    harness: std::sync::Arc<ShellProcess>,
}

impl UnderTerminal {
    async fn start(argv: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let pid_file = dir.path().join("pid");
        let words: Vec<String> = argv.iter().map(|word| single_quoted(word)).collect();
        let command = format!(
            "exec python3 -c {} {} {}",
            single_quoted(HARNESS),
            single_quoted(pid_file.to_str().expect("utf-8 path")),
            words.join(" ")
        );
        let harness = ShellProcess::spawn(spec(&command)).await.expect("spawns");
        let pid = read_pid(&pid_file).await;
        let rdev: u64 = std::fs::read_to_string(dir.path().join("pid.rdev"))
            .expect("the terminal's device")
            .trim()
            .parse()
            .expect("a number");
        Self {
            pid,
            terminal: TerminalDevice::from_rdev(rdev),
            harness,
        }
    }

    fn waits(&self) -> bool {
        let pgid = i32::try_from(self.pid).expect("pid fits");
        group_waits_for_input(pgid, self.terminal)
    }

    /// Whether it is seen waiting within a generous bound.
    async fn seen_waiting(&self) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) {
            if self.waits() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// Whether it is never seen waiting over a second, after it settled.
    async fn never_seen_waiting(&self) -> bool {
        tokio::time::sleep(Duration::from_millis(500)).await;
        for _ in 0..10 {
            if self.waits() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        true
    }
}

impl Drop for UnderTerminal {
    fn drop(&mut self) {
        let pid = Pid::from_raw(i32::try_from(self.pid).expect("pid fits"));
        // The program leads a session of its own: end its group, then it.
        let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
        let _ = kill(pid, Signal::SIGKILL);
        assert!(wait_gone(self.pid), "the program under the pty is gone");
        let _ = kill(
            Pid::from_raw(i32::try_from(self.harness.pid()).expect("pid fits")),
            Signal::SIGKILL,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_reading_its_terminal_waits_for_input() {
    for argv in [
        // read(0)
        &["bash", "-c", "read -p 'name? ' x"][..],
        // read of /dev/tty, as psql, less and ssh's prompts do
        &["bash", "-c", "read x < /dev/tty"],
        // select, poll and epoll on the terminal
        &[
            "python3",
            "-c",
            "import select, sys; select.select([sys.stdin], [], [])",
        ],
        &[
            "python3",
            "-c",
            "import select; p = select.poll(); p.register(0, select.POLLIN); p.poll()",
        ],
        &[
            "python3",
            "-c",
            "import select; e = select.epoll(); e.register(0, select.EPOLLIN); e.poll()",
        ],
        // a REPL
        &["python3", "-i", "-q"],
    ] {
        let program = UnderTerminal::start(argv).await;
        assert!(program.seen_waiting().await, "{argv:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_program_not_reading_its_terminal_does_not_wait_for_input() {
    for argv in [
        &["sleep", "30"][..],
        &["python3", "-c", "while True: pass"],
        // select on a listening socket: the same kernel wait as a prompt
        &[
            "python3",
            "-c",
            "import socket, select; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); select.select([s], [], [])",
        ],
        // epoll that watches something else
        &[
            "python3",
            "-c",
            "import os, select; r, w = os.pipe(); e = select.epoll(); e.register(r, select.EPOLLIN); e.poll()",
        ],
    ] {
        let program = UnderTerminal::start(argv).await;
        assert!(program.never_seen_waiting().await, "{argv:?}");
    }
}
