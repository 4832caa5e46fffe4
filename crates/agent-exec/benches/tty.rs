//! Interactive sessions through the MCP server, against baselines measured
//! in the same run: the latency from `WriteStdin` of one line to a tty
//! `cat` until `cat`'s copy of it is in an answer, next to the same round
//! trip on a bare pseudo-terminal; `Bash true` with 64 idle tty shells at a
//! prompt against none, the server's open fds once they are killed, and
//! its memory per idle tty shell (its screen included).
//!
//! `cargo bench -p agent-exec --bench tty` (`-- --quick`: 200 lines and
//! 4 rounds of 50 calls each way instead of 1,000 lines and 10 rounds of
//! 100). Prints one JSON figure per line for
//! `cargo xtask bench`.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    clippy::cast_precision_loss,
    reason = "a benchmark starts the binary and its baseline directly, and may stop on a broken setup"
)]

mod support;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::pty::{PtyMaster, grantpt, posix_openpt, ptsname_r, unlockpt};
use serde_json::{Value, json};
use support::{Server, bash, structured, text};
use test_support::bench::{Figure, Metric, Op, Unit, emit, save_samples};
use test_support::percentile;

/// Idle tty shells held open while `Bash true` is timed.
const SESSIONS: usize = 64;

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());
    for _ in 0..20 {
        server.call(&bash("true"));
    }
    echo(&mut server, if quick { 200 } else { 1_000 });
    if quick {
        sessions(&mut server, 200, 4);
    } else {
        sessions(&mut server, 1_000, 10);
    }
    server.stop();
}

/// `cat` on a fresh pseudo-terminal of our own (default termios: echo on,
/// line mode).
fn bare_pty() -> (PtyMaster, Child) {
    let master = posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(ptsname_r(&master).unwrap())
        .unwrap();
    let child = Command::new("cat")
        .stdin(slave.try_clone().unwrap())
        .stdout(slave)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (master, child)
}

/// Writes `line` and Enter to the bare terminal and reads until it came
/// back twice: the terminal's echo, then `cat`'s copy.
fn bare_round_trip(master: &mut PtyMaster, line: &str) -> Duration {
    let started = Instant::now();
    master.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut seen = String::new();
    let mut buffer = [0u8; 4096];
    while seen.matches(line).count() < 2 {
        let read = master.read(&mut buffer).unwrap();
        assert!(read > 0, "the bare terminal closed");
        seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
    }
    started.elapsed()
}

/// Calls a round trip made.
#[derive(Default)]
struct Calls {
    /// `WriteStdin` refused because `cat` was not (yet) back in `read`.
    retries: usize,
    /// `BashOutput` calls until the copy was there.
    polls: usize,
}

/// `WriteStdin {input: line + "\n", wait_ms: 0}` (again at once while the
/// answer is "not waiting for input": `cat` not back in `read` yet), then
/// `BashOutput` (no wait) polled until the answers held `line` twice: the
/// terminal's echo, then `cat`'s copy.
fn mcp_round_trip(server: &mut Server, id: &Value, line: &str, calls: &mut Calls) -> Duration {
    let started = Instant::now();
    let written = loop {
        let written = server.call(&json!({"tool": "WriteStdin", "args": {"bash_id": id, "input": format!("{line}\n"), "wait_ms": 0}}));
        if written["result"]["isError"] == false {
            break written;
        }
        assert!(
            text(&written).contains("not waiting for input"),
            "{written}"
        );
        calls.retries += 1;
    };
    let mut seen = text(&written).matches(line).count();
    while seen < 2 {
        let read = server.call(&json!({"tool": "BashOutput", "args": {"bash_id": id}}));
        assert_eq!(read["result"]["isError"], false, "{read}");
        seen += text(&read).matches(line).count();
        calls.polls += 1;
    }
    started.elapsed()
}

/// One line to a tty `cat` through the server, alternating with the same
/// on a bare pseudo-terminal.
fn echo(server: &mut Server, lines: usize) {
    let started = server.call(&json!({"tool": "Bash", "args": {"command": "cat", "tty": true}}));
    let id = structured(&started)["bash_id"].clone();
    assert_eq!(structured(&started)["waiting_for_input"], true, "{started}");
    let (mut master, mut cat) = bare_pty();
    for index in 0..20 {
        bare_round_trip(&mut master, &format!("warm-{index:05}"));
        mcp_round_trip(
            server,
            &id,
            &format!("warm-{index:05}"),
            &mut Calls::default(),
        );
    }
    let (mut bare, mut mcp) = (Vec::new(), Vec::new());
    let mut calls = Calls::default();
    for index in 0..lines {
        let line = format!("line-{index:05}");
        bare.push(bare_round_trip(&mut master, &line));
        mcp.push(mcp_round_trip(server, &id, &line, &mut calls));
    }
    cat.kill().unwrap();
    cat.wait().unwrap();
    let killed = server.call(&json!({"tool": "KillShell", "args": {"shell_id": id}}));
    assert_eq!(killed["result"]["isError"], false, "{killed}");
    save_samples("pty-bare-echo", &bare);
    save_samples("mcp-write-stdin-echo", &mcp);
    let (bare50, bare99) = (percentile(&mut bare, 50), percentile(&mut bare, 99));
    let (mcp50, mcp99) = (percentile(&mut mcp, 50), percentile(&mut mcp, 99));
    emit(
        &Figure::new(
            "pty-bare-echo",
            "bare pseudo-terminal: a line written to `cat` until its copy reads back",
        )
        .timing(bare50, bare99),
    );
    emit(
        &Figure::new(
            "mcp-write-stdin-echo",
            format!(
                "MCP `WriteStdin` (`wait_ms: 0`) of a line to a tty `cat` until its copy is in an answer, {lines} lines ({:.1} `BashOutput` polls a line, {} `WriteStdin` again)",
                calls.polls as f64 / lines as f64,
                calls.retries
            ),
        )
        .timing(mcp50, mcp99)
        .against("pty-bare-echo", mcp50.as_secs_f64() / bare50.as_secs_f64())
        .target(Metric::P99, Op::Below, 50.0, Unit::Milliseconds),
    );
}

/// `calls` round trips of `Bash true`.
fn bash_true(server: &mut Server, calls: usize) -> Vec<Duration> {
    (0..calls)
        .map(|_| {
            let started = Instant::now();
            let answer = server.call(&bash("true"));
            let elapsed = started.elapsed();
            assert_eq!(answer["result"]["isError"], false, "{answer}");
            elapsed
        })
        .collect()
}

/// Starts 64 idle tty `bash -i` and waits until each is at its prompt
/// (its screen read once, as a session would be).
fn open_sessions(server: &mut Server) -> Vec<Value> {
    let started: Vec<Value> = (0..SESSIONS)
        .map(|_| json!({"tool": "Bash", "args": {"command": "bash --norc --noprofile -i", "tty": true, "run_in_background": true}}))
        .collect();
    let ids: Vec<Value> = server
        .call_all(&started)
        .iter()
        .map(|answer| {
            assert_eq!(answer["result"]["isError"], false, "{answer}");
            structured(answer)["bash_id"].clone()
        })
        .collect();
    for id in &ids {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let read = server
                .call(&json!({"tool": "BashOutput", "args": {"bash_id": id, "wait_ms": 5000}}));
            if structured(&read)["waiting_for_input"] == true {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the shell reached its prompt: {read}"
            );
        }
        let screen =
            server.call(&json!({"tool": "BashOutput", "args": {"bash_id": id, "screen": true}}));
        assert_eq!(screen["result"]["isError"], false, "{screen}");
    }
    ids
}

/// `KillShell` of every one, all at once: `bash -i` ignores SIGTERM, so
/// each ends only after `KillShell`'s grace period.
fn kill_sessions(server: &mut Server, ids: &[Value]) {
    let kills: Vec<Value> = ids
        .iter()
        .map(|id| json!({"tool": "KillShell", "args": {"shell_id": id}}))
        .collect();
    for killed in server.call_all(&kills) {
        assert_eq!(killed["result"]["isError"], false, "{killed}");
    }
}

/// `Bash true` with none and with 64 idle tty shells open, in alternating
/// blocks (none, open 64, with 64, kill them; `rounds` times) so that a
/// change in the machine's load lands on both; the server's RSS per idle
/// tty shell (first round) and its open fds once all are killed (the
/// largest difference of any round).
fn sessions(server: &mut Server, calls: usize, rounds: usize) {
    let block = calls / rounds;
    let (mut none, mut open) = (Vec::new(), Vec::new());
    // Measured after the first block of calls, once the shell of the echo
    // measure is long gone.
    let (mut fds_before, mut pool_before) = (0, 0);
    let (mut rss_before, mut rss_open) = (0.0, 0.0);
    let (mut fds_open, mut fds_after, mut pool_after) = (0, 0, 0);
    for round in 0..rounds {
        none.extend(bash_true(server, block));
        let rss = server.rss_mib();
        if round == 0 {
            (fds_before, pool_before) = server.fds_by_kind();
            (fds_after, pool_after) = (fds_before, pool_before);
        }
        let ids = open_sessions(server);
        if round == 0 {
            (rss_before, rss_open) = (rss, server.rss_mib());
            fds_open = server.fds_by_kind().0;
        }
        open.extend(bash_true(server, block));
        kill_sessions(server, &ids);
        // The shells' terminals close as their readers end: wait until the
        // count is back (or 5 s).
        let mut fds = server.fds_by_kind();
        let settle = Instant::now() + Duration::from_secs(5);
        while fds.0 > fds_before && Instant::now() < settle {
            std::thread::sleep(Duration::from_millis(100));
            fds = server.fds_by_kind();
        }
        if fds.0.abs_diff(fds_before) >= fds_after.abs_diff(fds_before) {
            (fds_after, pool_after) = fds;
        }
    }

    save_samples("tty-bash-none", &none);
    save_samples("tty-bash-64", &open);
    let none50 = percentile(&mut none, 50);
    let open50 = percentile(&mut open, 50);
    emit(
        &Figure::new(
            "tty-bash-none",
            format!(
                "`Bash true` round trip, no tty shell open, {} calls",
                none.len()
            ),
        )
        .timing(none50, percentile(&mut none, 99)),
    );
    emit(
        &Figure::new(
            "tty-bash-64",
            format!(
                "`Bash true` round trip with {SESSIONS} idle tty `bash -i` at a prompt, {} calls",
                open.len()
            ),
        )
        .timing(open50, percentile(&mut open, 99))
        .against("tty-bash-none", open50.as_secs_f64() / none50.as_secs_f64())
        .target(Metric::Ratio, Op::AtMost, 1.1, Unit::Times),
    );
    emit(
        &Figure::new(
            "tty-fds-after",
            format!(
                "server open fds once all {SESSIONS} were killed, over before, {rounds} rounds ({fds_before} before, {fds_open} open, {fds_after} after; the cgroup pool's {pool_before} before and {pool_after} after not counted)"
            ),
        )
        .value(fds_after as f64 - fds_before as f64, Unit::Fds)
        .target(Metric::Value, Op::AtMost, 0.0, Unit::Fds)
        .target(Metric::Value, Op::AtLeast, 0.0, Unit::Fds),
    );
    emit(
        &Figure::new(
            "memory-per-idle-tty-shell",
            format!(
                "server RSS per idle tty shell, screen included ({SESSIONS} shells, {rss_before:.1} MiB before, {rss_open:.1} MiB open)"
            ),
        )
        .value((rss_open - rss_before) * 1024.0 / SESSIONS as f64, Unit::KiB),
    );
}
