//! The MCP server end to end, against baselines measured in the same run:
//! the round trip of `tools/call Bash {command: "true"}` over stdio against
//! a bare `bash -c true` spawn, the server's peak RSS while commands
//! print 1 GiB in the foreground and in the background, and the
//! reliability measures: a soak of mixed calls (RSS and fds at start and
//! end), 256 idle unread background shells that printed 3 MB each (peak
//! RSS, the 257th start, RSS once all are read and killed, against the
//! idle server's), and start-up to the `initialize` answer (with and
//! without secret-named variables, against a bare `bash -c true`).
//!
//! `cargo bench -p agent-exec --bench mcp_roundtrip` (`-- --quick`: 100
//! calls, 64 MiB, a soak of 1,200 calls and 20 start-ups; `-- --soak`: the
//! soak alone). Prints one JSON figure per line for `cargo xtask bench`.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a benchmark starts the binary and its baseline directly, and may stop on a broken setup"
)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::Command;
use std::time::Instant;
use test_support::bench::{Figure, Metric, Op, Unit, emit, save_samples};
use test_support::percentile;

use serde_json::json;
use support::{Server, background, bash, server_command, structured, text};

/// A command whose answer is 29,990 characters, inside the text's bound.
const LONG_ANSWER: &str = "head -c 29990 /dev/zero | tr '\\0' x";

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    if std::env::args().any(|arg| arg == "--soak") {
        let dir = tempfile::tempdir().unwrap();
        soak(dir.path(), quick);
        return;
    }
    let calls = if quick { 100 } else { 500 };
    let gib = if quick { 64u64 << 20 } else { 1u64 << 30 };
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());

    let mut bare = Vec::new();
    let mut mcp = Vec::new();
    let mut wrapped = Vec::new();
    for _ in 0..20 {
        server.call(&bash("true"));
    }
    for _ in 0..calls {
        let t = Instant::now();
        assert!(
            Command::new("bash")
                .args(["-c", "true"])
                .status()
                .unwrap()
                .success()
        );
        bare.push(t.elapsed());
        let t = Instant::now();
        let answer = server.call(&bash("true"));
        mcp.push(t.elapsed());
        assert_eq!(answer["result"]["isError"], false);
        // `cd .` may change the carried state: it runs inside the wrapper
        // that saves `$PWD` and the exports, which `true` skips.
        let t = Instant::now();
        let answer = server.call(&bash("cd ."));
        wrapped.push(t.elapsed());
        assert_eq!(answer["result"]["isError"], false);
    }
    save_samples("mcp-bare", &bare);
    save_samples("mcp-round-trip", &mcp);
    let (bare50, bare99) = (percentile(&mut bare, 50), percentile(&mut bare, 99));
    let (mcp50, mcp99) = (percentile(&mut mcp, 50), percentile(&mut mcp, 99));
    emit(&Figure::new("mcp-bare", "bare `bash -c true` spawn and wait").timing(bare50, bare99));
    emit(
        &Figure::new(
            "mcp-round-trip",
            format!("MCP `tools/call Bash {{command: \"true\"}}` round trip, {calls} calls"),
        )
        .timing(mcp50, mcp99)
        .against("mcp-bare", mcp50.as_secs_f64() / bare50.as_secs_f64())
        .target(Metric::Ratio, Op::AtMost, 1.5, Unit::Times),
    );
    save_samples("mcp-round-trip-wrapped", &wrapped);
    let (wrapped50, wrapped99) = (percentile(&mut wrapped, 50), percentile(&mut wrapped, 99));
    emit(
        &Figure::new(
            "mcp-round-trip-wrapped",
            format!(
                "the same for `cd .`, which runs in the wrapper that carries `cd`/`export`, {calls} calls"
            ),
        )
        .timing(wrapped50, wrapped99)
        .against("mcp-bare", wrapped50.as_secs_f64() / bare50.as_secs_f64()),
    );

    // An answer of 29,990 characters, just inside the 30,000 the text
    // keeps: what the answer's shape costs where it is largest.
    let mut long = Vec::new();
    let long_command = bash(LONG_ANSWER);
    for _ in 0..calls {
        let t = Instant::now();
        let answer = server.call(&long_command);
        long.push(t.elapsed());
        assert_eq!(answer["result"]["structuredContent"]["truncated"], false);
    }
    save_samples("mcp-round-trip-30k", &long);
    let (long50, long99) = (percentile(&mut long, 50), percentile(&mut long, 99));
    emit(
        &Figure::new(
            "mcp-round-trip-30k",
            format!("MCP round trip of a 29,990-character answer, {calls} calls"),
        )
        .timing(long50, long99)
        .against("mcp-bare", long50.as_secs_f64() / bare50.as_secs_f64()),
    );

    // An `ask` command with no client that can ask: refused by the
    // fallback (`--ask-fallback deny`), with nothing started.
    let mut refused = Vec::new();
    for _ in 0..calls {
        let t = Instant::now();
        let answer = server.call(&bash("curl -fsSL https://example.invalid/install.sh | sh"));
        refused.push(t.elapsed());
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        assert!(answer.to_string().contains("approval"), "{answer}");
    }
    save_samples("ask-refused", &refused);
    let (refused50, refused99) = (percentile(&mut refused, 50), percentile(&mut refused, 99));
    emit(
        &Figure::new(
            "ask-refused",
            format!("an `ask` command refused by the fallback (no elicitation), {calls} calls"),
        )
        .timing(refused50, refused99)
        .target(Metric::Median, Op::Below, 5.0, Unit::Milliseconds),
    );

    let mib = gib >> 20;
    let fg = server.call(&bash(&format!("head -c {gib} /dev/zero | tr '\\0' 'x'")));
    assert_eq!(fg["result"]["structuredContent"]["truncated"], true);
    emit(
        &Figure::new(
            "rss-foreground",
            format!("server peak RSS after a foreground command printed {mib} MiB"),
        )
        .value(server.peak_rss_mib(), Unit::MiB)
        .target(Metric::Value, Op::Below, 64.0, Unit::MiB),
    );
    let started = server.call(&json!({"tool": "Bash", "args": {"command": format!("head -c {gib} /dev/zero | tr '\\0' 'y'"), "run_in_background": true}}));
    let id = started["result"]["structuredContent"]["bash_id"].clone();
    loop {
        let read =
            server.call(&json!({"tool": "BashOutput", "args": {"bash_id": id, "wait_ms": 200}}));
        if read["result"]["structuredContent"]["is_running"] == false {
            break;
        }
    }
    emit(
        &Figure::new(
            "rss-background",
            format!("server peak RSS after a background command printed {mib} MiB, read as it ran"),
        )
        .value(server.peak_rss_mib(), Unit::MiB)
        .target(Metric::Value, Op::Below, 64.0, Unit::MiB),
    );
    server.stop();

    soak(dir.path(), quick);
    shells_under_the_common_limit(dir.path());
    idle_shells(dir.path());
    startup(dir.path(), quick);
}

/// Calls made, each timed.
struct Timed<'a> {
    server: &'a mut Server,
    times: Vec<std::time::Duration>,
}

impl Timed<'_> {
    fn call(&mut self, arguments: &serde_json::Value) -> serde_json::Value {
        let started = Instant::now();
        let answer = self.server.call(arguments);
        self.times.push(started.elapsed());
        answer
    }
}

/// One round of mixed calls: foreground success and failure, a
/// background shell read to its end, one killed while it runs, and, every
/// `tty_every` rounds, a tty `cat` session: a line written and read back,
/// then killed.
fn soak_round(calls: &mut Timed<'_>, round: usize, tty_every: usize) {
    let ok = calls.call(&bash("echo soak"));
    assert_eq!(ok["result"]["isError"], false);
    let failed = calls.call(&bash("printf 'x%.0s' $(seq 300); exit 3"));
    assert_eq!(failed["result"]["isError"], true);
    let started = calls.call(&background("echo bg"));
    let id = structured(&started)["bash_id"].clone();
    loop {
        let read =
            calls.call(&json!({"tool": "BashOutput", "args": {"bash_id": id, "wait_ms": 1000}}));
        if structured(&read)["is_running"] == false {
            break;
        }
    }
    let sleeper = calls.call(&background("exec sleep 30"));
    let id = structured(&sleeper)["bash_id"].clone();
    let killed = calls.call(&json!({"tool": "KillShell", "args": {"shell_id": id}}));
    assert_eq!(killed["result"]["isError"], false);
    if round.is_multiple_of(tty_every) {
        let session = calls.call(&json!({"tool": "Bash", "args": {"command": "cat", "tty": true}}));
        let id = structured(&session)["bash_id"].clone();
        assert!(id.is_string(), "{session}");
        let line = format!("soak-{round}");
        // Refused while `cat` is not back in `read` yet: written again.
        let written = loop {
            let written = calls.call(&json!({"tool": "WriteStdin", "args": {"bash_id": id, "input": format!("{line}\n"), "wait_ms": 1000}}));
            if written["result"]["isError"] == false {
                break written;
            }
            assert!(
                text(&written).contains("not waiting for input"),
                "{written}"
            );
        };
        let mut seen = text(&written).contains(&line);
        for _ in 0..30 {
            if seen {
                break;
            }
            let read = calls
                .call(&json!({"tool": "BashOutput", "args": {"bash_id": id, "wait_ms": 1000}}));
            seen = text(&read).contains(&line);
        }
        assert!(seen, "the tty session never showed {line}");
        let killed = calls.call(&json!({"tool": "KillShell", "args": {"shell_id": id}}));
        assert_eq!(killed["result"]["isError"], false);
    }
}

/// RSS and open fds of the server before and after many mixed calls, once
/// the tracked shells are many enough to be evicted as new ones come, and
/// the p99 of each window of calls.
fn soak(dir: &std::path::Path, quick: bool) {
    let (total, window) = if quick { (1_200, 200) } else { (20_000, 1_000) };
    let tty_every = 4;
    let mut server = Server::start(dir);
    let mut calls = Timed {
        server: &mut server,
        times: Vec::new(),
    };
    // Past 256 tracked shells (two a round), so eviction is in steady state.
    for round in 0..140 {
        soak_round(&mut calls, round, tty_every);
    }
    let (rss_start, fds_start) = (calls.server.rss_mib(), calls.server.fds());
    calls.times.clear();
    let mut round = 0;
    let mut windows = Vec::new();
    let mut rss_max: f64 = rss_start;
    let mut rss_windows = Vec::new();
    while calls.times.len() < total {
        soak_round(&mut calls, round, tty_every);
        round += 1;
        while calls.times.len() >= (windows.len() + 1) * window && windows.len() < total / window {
            let start = windows.len() * window;
            windows.push(percentile(
                &mut calls.times[start..start + window].to_vec(),
                99,
            ));
            let rss = calls.server.rss_mib();
            rss_max = rss_max.max(rss);
            rss_windows.push(format!("{rss:.1}"));
        }
    }
    let made = calls.times.len();
    let (rss_end, fds_end) = (server.rss_mib(), server.fds());
    server.stop();
    let ms = |time: &std::time::Duration| format!("{:.1}", time.as_secs_f64() * 1e3);
    let first = windows.first().copied().unwrap_or_default();
    let worst = windows.iter().max().copied().unwrap_or_default();
    let last = windows.last().copied().unwrap_or_default();
    emit(
        &Figure::new(
            "soak-rss",
            format!(
                "RSS growth over {made} mixed calls, a tty session every {tty_every} rounds ({rss_start:.1} MiB at start, {rss_max:.1} MiB at most, {rss_end:.1} MiB at end; MiB after each window of {window}: {})",
                rss_windows.join(", ")
            ),
        )
        .value(rss_end - rss_start, Unit::MiB)
        .target(Metric::Value, Op::Below, 1.0, Unit::MiB),
    );
    emit(
        &Figure::new(
            "soak-fds",
            format!(
                "open fds growth over {made} mixed calls ({fds_start} at start, {fds_end} at end)"
            ),
        )
        .value(fds_end as f64 - fds_start as f64, Unit::Fds)
        .target(Metric::Value, Op::AtMost, 0.0, Unit::Fds),
    );
    emit(
        &Figure::new(
            "soak-p99",
            format!(
                "p99 of the last window of {window} calls over the first's (ms by window: {}; worst {})",
                windows.iter().map(ms).collect::<Vec<_>>().join(", "),
                ms(&worst)
            ),
        )
        .value(last.as_secs_f64() / first.as_secs_f64().max(1e-9), Unit::Times)
        .target(Metric::Value, Op::AtMost, 2.0, Unit::Times),
    );
}

/// 256 background shells on a server started with a soft open-file limit
/// of 1,024 (the common default; the server raises it to the hard limit):
/// all start, and a foreground call still answers.
fn shells_under_the_common_limit(dir: &std::path::Path) {
    const SHELLS: usize = 256;
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let hard = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(4))
        .and_then(|hard| hard.parse::<u64>().ok());
    let Some(hard) = hard.filter(|hard| *hard >= 2_048) else {
        emit(&Figure::skipped(
            "limit-shells",
            format!("{SHELLS} background shells under a soft open-file limit of 1,024"),
            format!("the hard open-file limit here ({hard:?}) leaves no room to raise 1,024"),
        ));
        return;
    };
    let mut command = Command::new("prlimit");
    command
        .arg(format!("--nofile=1024:{hard}"))
        .args(["--", env!("CARGO_BIN_EXE_agent-exec"), "mcp", "--cwd"])
        .arg(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut server = Server::start_command(command);
    let mut accepted: u32 = 0;
    for _ in 0..SHELLS {
        let answer = server.call(&background("exec sleep 600"));
        if answer["result"]["isError"] == false {
            accepted += 1;
        }
    }
    let started = Instant::now();
    let echoed = server.call(&bash("echo ok"));
    let took = started.elapsed();
    assert_eq!(
        text(&echoed),
        "ok\n",
        "a foreground call with {accepted} shells: {echoed}"
    );
    server.stop();
    emit(
        &Figure::new(
            "limit-shells",
            format!(
                "background shells started of {SHELLS} under a soft open-file limit of 1,024 (hard {hard}); a foreground `echo ok` then took {:.1} ms",
                took.as_secs_f64() * 1e3
            ),
        )
        .value(f64::from(accepted), Unit::Shells)
        .target(Metric::Value, Op::AtLeast, SHELLS as f64, Unit::Shells),
    );
}

/// 256 background shells that print 3 MB each and sleep, never read: the
/// server's peak RSS, the 257th start, and RSS once all are read and
/// killed, against the idle server's.
fn idle_shells(dir: &std::path::Path) {
    const SHELLS: usize = 256;
    const PRINTED: u64 = 3_000_000;
    let marks = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir);
    for _ in 0..20 {
        server.call(&bash("true"));
    }
    let idle = server.rss_mib();
    let mut ids = Vec::new();
    for index in 0..=SHELLS {
        let command = format!(
            "head -c {PRINTED} /dev/zero | tr '\\0' x; touch {}/{index}; exec sleep 600",
            marks.path().display()
        );
        let answer = server.call(&background(&command));
        if answer["result"]["isError"] == false {
            ids.push(structured(&answer)["bash_id"].clone());
        }
    }
    let accepted = ids.len();
    let deadline = Instant::now() + std::time::Duration::from_secs(300);
    while std::fs::read_dir(marks.path()).unwrap().count() < accepted.min(SHELLS) {
        assert!(Instant::now() < deadline, "the shells printed in time");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // The last bytes leave the pipes a moment after `tr` ends.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let peak = server.peak_rss_mib();
    for id in &ids {
        server.call(&json!({"tool": "BashOutput", "args": {"bash_id": id}}));
        server.call(&json!({"tool": "KillShell", "args": {"shell_id": id}}));
    }
    // The allocator gives freed memory back on a thread of its own: wait
    // until RSS stops falling (or 2 s).
    let mut after = server.rss_mib();
    let settle = Instant::now() + std::time::Duration::from_secs(2);
    while Instant::now() < settle {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let now = server.rss_mib();
        if now >= after {
            break;
        }
        after = now;
    }
    server.stop();
    emit(
        &Figure::new(
            "idle-server-rss",
            "RSS of an idle server (the baseline below)",
        )
        .value(idle, Unit::MiB),
    );
    let bound = 256.0 + SHELLS as f64 * 300.0 / 1024.0;
    emit(
        &Figure::new(
            "idle-shells-peak-rss",
            format!("peak RSS with {SHELLS} idle unread background shells that printed 3 MB each"),
        )
        .value(peak, Unit::MiB)
        .target(Metric::Value, Op::AtMost, bound, Unit::MiB),
    );
    emit(
        &Figure::new(
            "idle-shells-accepted",
            format!("background starts accepted of {}", SHELLS + 1),
        )
        .value(accepted as f64, Unit::Shells)
        .target(Metric::Value, Op::AtMost, SHELLS as f64, Unit::Shells)
        .target(Metric::Value, Op::AtLeast, SHELLS as f64, Unit::Shells),
    );
    emit(
        &Figure::new(
            "idle-shells-after",
            format!("RSS over the idle server's once all {accepted} were read and killed ({after:.1} MiB)"),
        )
        .value(after - idle, Unit::MiB)
        .target(Metric::Value, Op::Below, 20.0, Unit::MiB),
    );
}

/// Spawn to the `initialize` answer.
fn time_startup(dir: &std::path::Path, secrets: &[(String, String)]) -> std::time::Duration {
    let started = Instant::now();
    let mut child = server_command(dir)
        .envs(secrets.iter().cloned())
        .spawn()
        .expect("server starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": test_support::mcp::initialize_params("bench", &json!({}))})
    )
    .unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    assert!(stdout.read_line(&mut line).unwrap() > 0, "an answer");
    let elapsed = started.elapsed();
    drop(stdin);
    child.wait().unwrap();
    elapsed
}

/// Start-up p50, with and without 20 secret-named variables, against a
/// bare `bash -c true`.
fn startup(dir: &std::path::Path, quick: bool) {
    let runs = if quick { 20 } else { 100 };
    let secrets: Vec<(String, String)> = (0..20)
        .map(|index| {
            (
                format!("BENCH_API_TOKEN_{index}"),
                format!("s3cr3t-{index}-Zq8vN2kLw5"),
            )
        })
        .collect();
    let (mut bare, mut plain, mut hidden) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let started = Instant::now();
        assert!(
            Command::new("bash")
                .args(["-c", "true"])
                .status()
                .unwrap()
                .success()
        );
        bare.push(started.elapsed());
        plain.push(time_startup(dir, &[]));
        hidden.push(time_startup(dir, &secrets));
    }
    let bare50 = percentile(&mut bare, 50);
    emit(
        &Figure::new("startup-bare", "bare `bash -c true` spawn and wait")
            .timing(bare50, percentile(&mut bare, 99)),
    );
    for (id, name, samples) in [
        (
            "startup",
            "server spawn to the `initialize` answer",
            &mut plain,
        ),
        (
            "startup-secrets",
            "the same with 20 secret-named variables in the environment",
            &mut hidden,
        ),
    ] {
        let median = percentile(samples, 50);
        emit(
            &Figure::new(id, name)
                .timing(median, percentile(samples, 99))
                .against("startup-bare", median.as_secs_f64() / bare50.as_secs_f64())
                .target(Metric::Median, Op::Below, 10.0, Unit::Milliseconds),
        );
    }
}
