//! The server under faults and at its resource limits: the open-file
//! limit, a request id reused after a cancel, big messages, a client that
//! closes its end of stdout.

#![allow(
    clippy::needless_pass_by_value,
    reason = "helpers take JSON by value so calls read like the messages they send"
)]

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::mcp::{Launch, RawClient};

use test_support::{processes_naming, status_kib, wait_gone};

/// A running server and the messages it writes.
struct Server(RawClient);

/// `agent-exec mcp --cwd DIR`, to be started (and adjusted) by the test.
fn server_command(dir: &std::path::Path) -> Launch {
    Launch::new(test_support::agent_exec_binary!())
        .args([std::ffi::OsStr::new("--cwd"), dir.as_os_str()])
}

/// `agent-exec mcp --cwd DIR` under `prlimit --nofile=SOFT:HARD`.
fn under_open_file_limit(dir: &std::path::Path, soft: u64, hard: u64) -> Launch {
    server_command(dir).wrapper(&["prlimit", &format!("--nofile={soft}:{hard}"), "--"])
}

impl Server {
    /// Starts `launch` and completes the handshake.
    fn start(launch: Launch) -> Self {
        Self(launch.start())
    }

    /// Waits for the next message with this id, dropping others.
    fn answer(&mut self, id: &Value) -> Value {
        self.0
            .next_where(&format!("answer to {id}"), |message| message["id"] == *id)
    }

    fn start_request(&mut self, method: &str, params: Value) -> u64 {
        self.0.send_request(method, &params)
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.start_request(method, params);
        self.answer(&json!(id))
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request(
            "tools/call",
            json!({ "name": tool, "arguments": arguments }),
        )["result"]
            .clone()
    }

    /// Closes stdin and waits for the exit status.
    fn close(self) -> std::process::ExitStatus {
        self.0.close()
    }
}

test_support::deref_to_raw_client!(Server);

/// Waits until `path` exists.
fn wait_for_file(path: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A `sleep` no other test runs: `sleep 1000.NNNN`, NNNN from this
/// process's pid and `salt`, so the processes can be found by name.
fn marked_sleep(salt: u32) -> String {
    format!("1000.{}{salt}", std::process::id())
}

/// Item 1 of issue 29: the soft limit is raised to the hard one; background
/// shells stop with a clear refusal while foreground calls still have
/// descriptors; nothing is left once the server exits.
#[test]
fn background_shells_are_refused_before_descriptors_run_out_and_foreground_calls_still_work() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(under_open_file_limit(dir.path(), 64, 128));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.pid())).expect("limits");
    let open_files = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .expect("the open-file limit");
    assert_eq!(
        open_files.split_whitespace().collect::<Vec<_>>()[3..5],
        ["128", "128"],
        "the soft limit was not raised: {open_files}"
    );
    let sleep = marked_sleep(1);
    let mut started = 0;
    let refusal = loop {
        assert!(started < 64, "64 background shells under a limit of 128");
        let result = server.call(
            "Bash",
            json!({ "command": format!("exec sleep {sleep}"), "run_in_background": true }),
        );
        if result["isError"] == true {
            break text(&result);
        }
        started += 1;
    };
    assert!(
        refusal.contains("too many open files") && refusal.contains("foreground"),
        "{refusal}"
    );
    assert!(started >= 1, "no background shell fits: {refusal}");
    eprintln!("{started} background shells under a limit of 128; then: {refusal}");
    for _ in 0..3 {
        let echoed = server.call("Bash", json!({ "command": "echo ok" }));
        assert_eq!(text(&echoed), "ok\n", "{echoed}");
    }
    let sleeps = processes_naming(&sleep);
    assert!(!sleeps.is_empty());
    assert!(server.close().success());
    for pid in sleeps {
        assert!(wait_gone(pid), "{pid} outlived the server");
    }
}

/// At limits too small to start, start-up fails with the documented error
/// line and exit code 2; it never panics.
#[test]
fn start_up_at_tiny_open_file_limits_is_clean_or_the_error_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = [
        json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params":
            test_support::mcp::initialize_params("blackbox", &json!({})) }),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "Bash", "arguments": { "command": "echo ok" } } }),
    ]
    .iter()
    .map(|message| format!("{message}\n"))
    .collect::<String>();
    for round in 0..3 {
        for limit in 9..=14 {
            let mut child = under_open_file_limit(dir.path(), limit, limit)
                .command()
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("starts");
            let mut stdin = child.stdin.take().expect("stdin");
            // A server that already failed has closed its stdin.
            let _ = stdin.write_all(input.as_bytes());
            drop(stdin);
            let output = child.wait_with_output().expect("exits");
            let stderr = String::from_utf8_lossy(&output.stderr);
            let code = output.status.code();
            let clean = code == Some(0)
                || (code == Some(2)
                    && stderr
                        .lines()
                        .any(|line| line.starts_with("agent-exec: error: ")));
            assert!(
                clean && !stderr.contains("panicked"),
                "limit {limit} (round {round}): exit {code:?}, stderr:\n{stderr}"
            );
        }
    }
}

/// A variable whose value is not UTF-8 in the server's environment does
/// not stop it; commands run without that variable.
#[test]
fn a_non_utf8_value_in_the_environment_starts_fine() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().expect("temp dir");
    let command = server_command(dir.path()).env(
        "AGENT_EXEC_NOT_UTF8",
        std::ffi::OsStr::from_bytes(b"caf\xe9 \xff"),
    );
    let mut server = Server::start(command);
    let echoed = server.call(
        "Bash",
        json!({ "command": "echo ok ${AGENT_EXEC_NOT_UTF8-unset}" }),
    );
    assert_eq!(text(&echoed), "ok unset\n", "{echoed}");
    assert!(server.close().success());
}

/// Item 3 of issue 29: an id reused while its cancelled request is still
/// finishing is refused (-32600); once it has finished, the id is served
/// as new, and the cancelled call's answer never arrives under it.
#[test]
fn an_id_reused_after_a_cancel_is_refused_until_the_cancelled_call_has_finished() {
    let dir = tempfile::tempdir().expect("temp dir");
    let started = dir.path().join("started");
    let mut server = Server::start(server_command(dir.path()));
    let call = |id: u64, command: &str| {
        json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "Bash", "arguments": { "command": command } }
        })
    };
    // The interrupted command takes a second to end.
    server.send(&call(
        5,
        &format!(
            "trap 'sleep 1; exit 1' INT; touch {}; sleep 300 & wait",
            started.display()
        ),
    ));
    wait_for_file(&started);
    server.send(
        &json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": 5, "reason": "test" } }),
    );
    server.send(&call(5, "echo reused"));
    let refused = server.answer(&json!(5));
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    // Once the cancelled call has finished, 5 is a new request.
    let deadline = Instant::now() + Duration::from_secs(20);
    let served = loop {
        server.send(&call(5, "echo again"));
        let answer = server.answer(&json!(5));
        if answer["error"]["code"] != -32600 {
            break answer;
        }
        assert!(Instant::now() < deadline, "5 stays in flight: {answer}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(text(&served["result"]), "again\n", "{served}");
    // Nothing more arrives under 5: the ping's answer comes next.
    let ping = server.start_request("ping", json!({}));
    let next = server
        .try_next_line(Duration::from_secs(30))
        .expect("the ping's answer")
        .value;
    assert_eq!(next["id"], ping, "{next}");
    assert!(server.close().success());
}

/// Item 6 of issue 29: a `command` over 1 MiB is refused before anything
/// runs, and the memory a 15 MiB message took is given back.
#[test]
fn a_command_over_1_mib_is_refused_and_memory_goes_back_after_big_messages() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(server_command(dir.path()));
    let marker = dir.path().join("ran");
    let huge = format!("touch {} # {}", marker.display(), "x".repeat(15 << 20));
    let refused = server.call("Bash", json!({ "command": huge }));
    assert_eq!(refused["isError"], true, "{}", text(&refused));
    assert!(
        text(&refused).contains("argument `command` is 15728") && text(&refused).contains("1 MiB"),
        "{}",
        text(&refused)
    );
    assert!(!marker.exists(), "the refused command ran");
    let eight = format!("# {}", "y".repeat(8 << 20));
    let refused = server.call("Bash", json!({ "command": eight }));
    assert_eq!(refused["isError"], true);
    for round in 0..100 {
        let echoed = server.call("Bash", json!({ "command": format!("echo {round}") }));
        assert_eq!(text(&echoed), format!("{round}\n"), "{echoed}");
    }
    let rss = status_kib(&server.pid().to_string(), "VmRSS");
    let peak = status_kib(&server.pid().to_string(), "VmHWM");
    eprintln!("RSS {rss} KiB after the big messages and 100 calls, peak {peak} KiB");
    assert!(rss > 0);
    assert!(rss < 40 << 10, "RSS {} MiB after big messages", rss >> 10);
    assert!(peak < 96 << 10, "peak RSS {} MiB", peak >> 10);
    assert!(server.close().success());
}

/// Item 8 of issue 29: when the client closes its end of stdout, the next
/// answer fails with EPIPE: the server ends every command and exits as
/// for a closed stdin.
#[test]
fn a_closed_stdout_ends_the_commands_and_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(server_command(dir.path()));
    let background = marked_sleep(8);
    let started = server.call(
        "Bash",
        json!({ "command": format!("exec sleep {background}"), "run_in_background": true }),
    );
    assert_ne!(started["isError"], true, "{started}");
    let foreground = marked_sleep(9);
    server.start_request(
        "tools/call",
        json!({ "name": "Bash", "arguments": { "command": format!("exec sleep {foreground}") } }),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let sleeps = loop {
        let sleeps = [processes_naming(&background), processes_naming(&foreground)];
        if sleeps.iter().all(|pids| !pids.is_empty()) {
            break sleeps.concat();
        }
        assert!(Instant::now() < deadline, "the sleeps did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The reader drops stdout after the ping's answer.
    server.drop_stdout_after_next_line();
    server.request("ping", json!({}));
    std::thread::sleep(Duration::from_millis(200));
    // Its answer meets a closed pipe.
    server.start_request("ping", json!({}));
    let left = Instant::now();
    let status = server.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some(),
        "the server still runs {:?} after stdout broke",
        left.elapsed()
    );
    eprintln!(
        "exited {:?} after the write to a closed stdout",
        left.elapsed()
    );
    for pid in sleeps {
        assert!(wait_gone(pid), "{pid} outlived the server");
    }
}
