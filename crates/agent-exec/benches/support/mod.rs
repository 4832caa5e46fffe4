//! The server under benchmark: `agent-exec mcp` on a raw JSON-RPC client
//! over its stdio, shared by the benchmarks of this crate.

#![allow(
    dead_code,
    reason = "each benchmark uses the part of the client it needs"
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

pub(crate) struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    pub(crate) fn start(dir: &std::path::Path) -> Self {
        Self::start_binary(std::path::Path::new(env!("CARGO_BIN_EXE_agent-exec")), dir)
    }

    /// `binary mcp` (another build of agent-exec, to compare against).
    pub(crate) fn start_binary(binary: &std::path::Path, dir: &std::path::Path) -> Self {
        Self::start_command(server_command_of(binary, dir))
    }

    /// The server `command` starts (with piped stdin and stdout), after
    /// the handshake.
    pub(crate) fn start_command(mut command: Command) -> Self {
        let mut child = command.spawn().expect("server starts");
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
            &test_support::mcp::initialize_params("bench", &json!({})),
        );
        writeln!(
            server.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        server
    }

    pub(crate) fn request(&mut self, method: &str, params: &Value) -> Value {
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

    /// `tools/call` of `{"tool": NAME, "args": {...}}`.
    pub(crate) fn call(&mut self, arguments: &Value) -> Value {
        self.request(
            "tools/call",
            &json!({"name": arguments["tool"], "arguments": arguments["args"]}),
        )
    }

    pub(crate) fn peak_rss_mib(&self) -> f64 {
        test_support::status_kib(&self.child.id().to_string(), "VmHWM") as f64 / 1024.0
    }

    pub(crate) fn rss_mib(&self) -> f64 {
        test_support::status_kib(&self.child.id().to_string(), "VmRSS") as f64 / 1024.0
    }

    pub(crate) fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .count()
    }

    /// Open fds: (all but the cgroup pool's, the cgroup pool's). The pool
    /// keeps 4 to 8 cgroups ready, each with its `tasks` (v1) or
    /// `cgroup.procs` (v2) open, so that count moves between runs by design.
    pub(crate) fn fds_by_kind(&self) -> (usize, usize) {
        let mut cgroups = 0;
        let mut others = 0;
        for entry in std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).unwrap() {
            // An fd closed between the listing and the readlink is not open.
            let Ok(target) = std::fs::read_link(entry.unwrap().path()) else {
                continue;
            };
            if target.starts_with("/sys/fs/cgroup") {
                cgroups += 1;
            } else {
                others += 1;
            }
        }
        (others, cgroups)
    }

    /// `tools/call` of each of `calls`, all written before any answer is
    /// read (the server runs them concurrently); the answers in order.
    pub(crate) fn call_all(&mut self, calls: &[Value]) -> Vec<Value> {
        let first = self.next_id;
        for arguments in calls {
            let id = self.next_id;
            self.next_id += 1;
            writeln!(
                self.stdin,
                "{}",
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": arguments["tool"], "arguments": arguments["args"]}})
            )
            .unwrap();
        }
        self.stdin.flush().unwrap();
        let mut answers = vec![Value::Null; calls.len()];
        let mut left = calls.len();
        let mut line = String::new();
        while left > 0 {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if let Some(index) = message["id"]
                .as_u64()
                .and_then(|id| id.checked_sub(first))
                .and_then(|index| usize::try_from(index).ok())
                .filter(|index| *index < calls.len())
            {
                answers[index] = message;
                left -= 1;
            }
        }
        answers
    }

    pub(crate) fn stop(mut self) {
        drop(self.stdin);
        self.child.wait().unwrap();
    }
}

pub(crate) fn server_command(dir: &std::path::Path) -> Command {
    server_command_of(std::path::Path::new(env!("CARGO_BIN_EXE_agent-exec")), dir)
}

fn server_command_of(binary: &std::path::Path, dir: &std::path::Path) -> Command {
    let mut command = Command::new(binary);
    command
        .args(["mcp", "--cwd"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    command
}

pub(crate) fn bash(command: &str) -> Value {
    json!({"tool": "Bash", "args": {"command": command}})
}

pub(crate) fn background(command: &str) -> Value {
    json!({"tool": "Bash", "args": {"command": command, "run_in_background": true}})
}

pub(crate) fn structured(answer: &Value) -> &Value {
    &answer["result"]["structuredContent"]
}

/// The answer's text (its first content item).
pub(crate) fn text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
}
