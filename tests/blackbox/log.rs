//! The server's log: one line per tool call on stderr at `RUST_LOG=info`,
//! nothing but the protocol on stdout.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "the test sets the server's log level and a secret"
)]
fn each_tool_call_is_one_redacted_log_line_and_stdout_is_only_protocol() {
    let dir = tempfile::tempdir().expect("temp dir");
    let secret = "tok-0123456789-abcdef";
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["mcp", "--cwd"])
        .arg(dir.path())
        .env("RUST_LOG", "info")
        .env("MY_SERVICE_TOKEN", secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params":
            test_support::mcp::initialize_params("blackbox", &json!({}))}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "Bash", "arguments": {"command": format!("echo {secret}\nexit 3")}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "Bash", "arguments": {"command": "rm -rf /"}}}),
    ];
    for message in &messages {
        writeln!(stdin, "{message}").expect("write");
    }
    stdin.flush().expect("flush");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut answered = 0;
    let mut protocol = Vec::new();
    while answered < 3 {
        let line = lines.next().expect("a line before EOF").expect("read");
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("stdout carried {line:?}: {error}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        if message.get("id").is_some() {
            answered += 1;
        }
        protocol.push(line);
    }
    drop(stdin);
    for line in lines {
        let line = line.expect("read");
        serde_json::from_str::<Value>(&line)
            .unwrap_or_else(|error| panic!("stdout carried {line:?}: {error}"));
    }
    let mut log = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut log)
        .expect("read stderr");
    assert!(child.wait().expect("exits").success());

    let calls: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("tool call"))
        .collect();
    assert_eq!(calls.len(), 2, "{log}");
    let ran = calls
        .iter()
        .find(|line| line.contains("exit 3"))
        .unwrap_or_else(|| panic!("no line for the first call: {log}"));
    for part in [
        " INFO ",
        "tool=\"Bash\"",
        "command=\"echo [REDACTED:MY_SERVICE_TOKEN]\\nexit 3\"",
        "decision=\"allow\"",
        "status=\"failed\"",
        "exit_code=3",
        "duration_ms=",
        "is_error=true",
    ] {
        assert!(ran.contains(part), "{part} missing in {ran}");
    }
    let refused = calls
        .iter()
        .find(|line| line.contains("command=\"rm -rf /\""))
        .unwrap_or_else(|| panic!("no line for the refused call: {log}"));
    assert!(
        refused.contains("decision=\"deny\"") || refused.contains("decision=\"refused\""),
        "{refused}"
    );
    assert!(!refused.contains("exit_code"), "{refused}");
    assert!(!log.contains(secret), "{log}");
    assert!(protocol.iter().all(|line| !line.contains(secret)));
}
