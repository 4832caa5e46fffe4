//! The MCP server end to end, against baselines measured in the same run:
//! the round trip of `tools/call Bash {command: "true"}` over stdio against
//! a bare `bash -c true` spawn, and the server's peak RSS while commands
//! print 1 GiB in the foreground and in the background.
//!
//! `cargo bench -p agent-exec --bench mcp_roundtrip` (`-- --quick`: 100
//! calls and 64 MiB). Prints one JSON figure per line for
//! `cargo xtask bench`.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a benchmark starts the binary and its baseline directly, and may stop on a broken setup"
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;
use test_support::bench::{Figure, Metric, Op, Unit, emit, save_samples};
use test_support::percentile;

use serde_json::{Value, json};

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    fn start(dir: &std::path::Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .args(["mcp", "--cwd"])
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("server starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut server = Self {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        server.request(
            "initialize",
            &json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
        );
        writeln!(
            server.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        server
    }

    fn request(&mut self, method: &str, params: &Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    fn call(&mut self, arguments: &Value) -> Value {
        self.request(
            "tools/call",
            &json!({"name": arguments["tool"], "arguments": arguments["args"]}),
        )
    }

    fn peak_rss_mib(&self) -> f64 {
        test_support::status_kib(&self.child.id().to_string(), "VmHWM") as f64 / 1024.0
    }

    fn stop(mut self) {
        drop(self.stdin);
        self.child.wait().unwrap();
    }
}

fn bash(command: &str) -> Value {
    json!({"tool": "Bash", "args": {"command": command}})
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let calls = if quick { 100 } else { 500 };
    let gib = if quick { 64u64 << 20 } else { 1u64 << 30 };
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path());

    let mut bare = Vec::new();
    let mut mcp = Vec::new();
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
}
