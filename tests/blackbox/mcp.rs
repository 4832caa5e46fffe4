//! `agent-exec mcp` spoken to in raw newline-delimited JSON-RPC, the way
//! any client sees it.

#![allow(
    clippy::needless_pass_by_value,
    reason = "helpers take JSON by value so calls read like the messages they send"
)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::mcp::{Launch, RawClient};

use crate::alive;
use test_support::{processes_naming, read_pid_blocking as read_pid, wait_gone};

/// A running server and the lines it writes.
pub(crate) struct Server(RawClient);

impl Server {
    pub(crate) fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// A server whose own environment also holds `env`.
    pub(crate) fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self(
            Launch::new(test_support::agent_exec_binary!())
                .args(args)
                .envs(env)
                .start(),
        )
    }

    /// The peak resident memory of the server (`VmHWM`), in bytes.
    fn peak_rss(&self) -> u64 {
        test_support::status_kib(&self.0.pid().to_string(), "VmHWM") * 1024
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.0.notify_with(method, &params);
    }

    fn start_request(&mut self, method: &str, params: Value) -> u64 {
        self.0.send_request(method, &params)
    }

    /// Waits for the response to `id`, collecting notifications on the way.
    fn response(&mut self, id: u64, notifications: &mut Vec<Value>) -> Value {
        let reply = self.0.response_to(id);
        notifications.extend(reply.before.into_iter().map(|line| line.value));
        reply.response.value
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.0.request(method, &params).response.value
    }

    pub(crate) fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.0.call(tool, &arguments)
    }

    /// Closes stdin and waits for the exit status.
    pub(crate) fn close(self) -> std::process::ExitStatus {
        self.0.close()
    }
}

test_support::deref_to_raw_client!(Server);

pub(crate) fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn lists_exactly_the_three_tools_and_answers_calls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(&["--cwd", dir.path().to_str().expect("utf-8")]);
    let listed = server.request("tools/list", json!({}));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|tool| tool["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "Bash",
            "BashOutput",
            "KillShell",
            "ListShells",
            "WriteStdin"
        ]
    );

    let ok = server.call("Bash", json!({ "command": "echo hi; echo oops >&2" }));
    assert_eq!(text(&ok), "hi\n\n[stderr]\noops\n");
    assert_eq!(ok["isError"], false);
    assert_eq!(ok["structuredContent"]["exit_code"], 0);

    let failed = server.call("Bash", json!({ "command": "exit 4" }));
    assert_eq!(failed["isError"], true);
    assert_eq!(text(&failed), "Command failed with exit code 4");

    let invalid = server.call("Bash", json!({ "command": "true", "timeout": 5 }));
    assert_eq!(invalid["isError"], true);
    assert!(text(&invalid).contains("timeout"), "{}", text(&invalid));

    let unknown = server.request("tools/call", json!({ "name": "Nope", "arguments": {} }));
    assert_eq!(unknown["error"]["code"], -32602);

    assert!(server.close().success());
}

#[test]
fn refusals_name_their_rule_and_policy_rules_see_the_program() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[deny]\nregex = [\"curl\"]\n").expect("write");
    let mut server = Server::start(&[
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
    ]);
    let builtin = server.call("Bash", json!({ "command": "rm -rf /" }));
    assert_eq!(builtin["isError"], true);
    assert!(text(&builtin).contains("dangerous"), "{}", text(&builtin));
    assert_eq!(builtin["structuredContent"]["status"], "blocked");
    assert_eq!(builtin["structuredContent"]["decision"], "deny");
    assert_eq!(
        builtin["structuredContent"]["rule"],
        "recursive-delete-protected"
    );

    let user = server.call("Bash", json!({ "command": "command /usr/bin/curl x" }));
    assert_eq!(user["isError"], true);
    assert!(
        text(&user).contains("blocked by the policy file") && !text(&user).contains("dangerous"),
        "{}",
        text(&user)
    );
    assert_eq!(user["structuredContent"]["status"], "blocked");
    assert_eq!(user["structuredContent"]["decision"], "deny");
    assert_eq!(user["structuredContent"]["rule"], "policy.deny[0]");

    let echoed = server.call("Bash", json!({ "command": "echo curl" }));
    assert_eq!(text(&echoed), "curl\n");

    let read = server.call("Bash", json!({ "command": "read x" }));
    assert_eq!(
        text(&read),
        "Command failed with exit code 1\n[stdin is empty: pass input with a here-doc, a file, or tty: true]"
    );
    assert!(server.close().success());
}

#[test]
fn progress_notifications_carry_recent_output() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(&["--cwd", dir.path().to_str().expect("utf-8")]);
    let id = server.start_request(
        "tools/call",
        json!({
            "name": "Bash",
            "arguments": { "command": "echo first; sleep 2.5; echo second" },
            "_meta": { "progressToken": "p-1" }
        }),
    );
    let mut notifications = Vec::new();
    let response = server.response(id, &mut notifications);
    assert_eq!(text(&response["result"]), "first\nsecond\n");
    let progress: Vec<&Value> = notifications
        .iter()
        .filter(|message| message["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 2, "{notifications:?}");
    assert_eq!(progress[0]["params"]["progressToken"], "p-1");
    assert_eq!(progress[0]["params"]["message"], "first");
    assert!(server.close().success());
}

#[test]
fn cancellation_ends_the_tree_and_sends_no_response() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("pid");
    let mut server = Server::start(&[
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--sandbox",
        "off",
    ]);
    let id = server.start_request(
        "tools/call",
        json!({
            "name": "Bash",
            "arguments": { "command": format!("sleep 300 & echo $! > {}; wait", pid_file.display()) }
        }),
    );
    let pid = read_pid(&pid_file);
    server.notify(
        "notifications/cancelled",
        json!({ "requestId": id, "reason": "test" }),
    );
    assert!(wait_gone(pid), "{pid} is still running");
    let ping = server.start_request("ping", json!({}));
    let mut seen = Vec::new();
    server.response(ping, &mut seen);
    assert!(
        seen.iter().all(|message| message["id"] != id),
        "a cancelled call was answered: {seen:?}"
    );
    assert!(server.close().success());
}

#[test]
fn stdin_eof_ends_every_shell_and_removes_the_temp_dir() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("pid");
    let mut server = Server::start(&[
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--sandbox",
        "off",
    ]);
    let server_pid = server.pid();
    let started = server.call(
        "Bash",
        json!({
            "command": format!("sh -c 'echo $$ > {}; exec sleep 300'", pid_file.display()),
            "run_in_background": true
        }),
    );
    assert!(text(&started).starts_with("Started background shell: shell_"));
    let pid = read_pid(&pid_file);
    assert!(alive(pid));
    let temp_dirs_before = crate::server_temp_dirs(server_pid);
    assert_eq!(temp_dirs_before.len(), 1, "{temp_dirs_before:?}");
    assert!(server.close().success());
    assert!(wait_gone(pid), "{pid} is still running");
    assert!(
        !temp_dirs_before[0].exists(),
        "the temp dir outlived the server"
    );
}

/// SIGHUP, SIGINT and SIGTERM each end every shell, remove the temp dir,
/// and exit 128+N so a supervisor can tell a signal from a client leaving.
#[test]
fn each_stop_signal_ends_every_shell_and_exits_128_plus_its_number() {
    for (signal, code) in [("HUP", 129), ("INT", 130), ("TERM", 143)] {
        let dir = tempfile::tempdir().expect("temp dir");
        let pid_file = dir.path().join("pid");
        let mut server = Server::start(&[
            "--cwd",
            dir.path().to_str().expect("utf-8"),
            "--sandbox",
            "off",
        ]);
        let server_pid = server.pid();
        server.call(
            "Bash",
            json!({
                "command": format!("sleep 300 & echo $! > {}; wait", pid_file.display()),
                "run_in_background": true
            }),
        );
        let pid = read_pid(&pid_file);
        let temp_dirs = crate::server_temp_dirs(server_pid);
        assert_eq!(temp_dirs.len(), 1, "{temp_dirs:?}");
        send_signal(server_pid, signal);
        let status = server
            .wait_exit(Duration::from_secs(20))
            .expect("the server exits");
        assert_eq!(status.code(), Some(code), "SIG{signal}: {status:?}");
        assert!(wait_gone(pid), "SIG{signal}: {pid} is still running");
        assert!(
            !temp_dirs[0].exists(),
            "SIG{signal}: the temp dir outlived the server"
        );
    }
}

fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

#[test]
fn bad_start_up_flags_exit_2_before_serving() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_text = dir.path().to_str().expect("utf-8");
    for (args, needle) in [
        (
            vec!["mcp", "--cwd", dir_text, "--coauthor", "nobody"],
            "--coauthor",
        ),
        (vec!["mcp", "--cwd", "/nonexistent/dir"], "/nonexistent/dir"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "stdout is the protocol only");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn a_server_killed_with_sigkill_takes_each_shell_with_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let shell_file = dir.path().join("shell");
    let job_file = dir.path().join("job");
    let mut server = Server::start(&[
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--sandbox",
        "off",
    ]);
    server.call(
        "Bash",
        json!({
            "command": format!(
                "echo $$ > {}; sleep 300 & echo $! > {}; wait",
                shell_file.display(),
                job_file.display()
            ),
            "run_in_background": true
        }),
    );
    let shell = read_pid(&shell_file);
    let job = read_pid(&job_file);
    let status = Command::new("kill")
        .args(["-KILL", &server.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    server
        .wait_exit(Duration::from_secs(20))
        .expect("the server exits");
    // The parent-death signal ends the shell even though the server had no
    // chance to clean up.
    assert!(wait_gone(shell), "{shell} is still running");
    // Its background job is out of reach without a cgroup: end it here.
    let _ = Command::new("kill")
        .args(["-KILL", &job.to_string()])
        .status();
    assert!(wait_gone(job), "{job} is still running");
}

#[test]
fn the_server_answers_and_kills_during_a_process_storm_under_the_sandbox() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[processes]\nmax = 30\n").expect("write");
    let mut server = Server::start(&[
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--sandbox",
        "workspace-write",
        "--policy",
        policy.to_str().expect("utf-8"),
    ]);
    let storm = server.call(
        "Bash",
        json!({
            "command": "for i in $(seq 200); do sleep 300 & done 2>/dev/null; echo spawned $(jobs -p | wc -l); wait",
            "run_in_background": true
        }),
    );
    let id = storm["structuredContent"]["bash_id"]
        .as_str()
        .expect("bash_id")
        .to_owned();
    // The server keeps answering while the storm runs.
    let started = Instant::now();
    let read = server.call("BashOutput", json!({ "bash_id": id }));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        text(&read).starts_with("Status: running"),
        "{}",
        text(&read)
    );
    let killed = server.call("KillShell", json!({ "shell_id": id }));
    assert_eq!(killed["isError"], false, "{}", text(&killed));
    // Once it is gone, commands run again.
    let after = server.call("Bash", json!({ "command": "echo fine" }));
    assert_eq!(text(&after), "fine\n");
    assert!(server.close().success());
}

#[test]
fn background_after_hands_a_long_foreground_command_to_the_background() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(&[
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--background-after",
        "500",
    ]);
    let slow = server.call(
        "Bash",
        json!({ "command": "echo started; while [ ! -e go ]; do sleep 0.05; done; echo done" }),
    );
    assert_eq!(slow["isError"], false, "{slow}");
    assert_eq!(slow["structuredContent"]["status"], "running");
    let id = slow["structuredContent"]["bash_id"]
        .as_str()
        .expect("bash_id")
        .to_owned();
    assert_eq!(
        text(&slow),
        format!("started\n[still running after 500 ms: continues as background shell {id}]")
    );
    std::fs::write(dir.path().join("go"), "").expect("release the command");
    let read = server.call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }));
    assert!(
        text(&read).starts_with("Status: completed"),
        "{}",
        text(&read)
    );
    assert!(text(&read).ends_with("\n\ndone\n"), "{}", text(&read));
    assert!(server.close().success());
}

#[test]
fn invalid_json_gets_a_parse_error_and_the_server_goes_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(&["--cwd", dir.path().to_str().expect("utf-8")]);
    server.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \n");
    let error = server.next_where("parse error", |message| message.get("error").is_some());
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert_eq!(error.get("id"), Some(&Value::Null), "{error}");
    let ping = server.request("ping", json!({}));
    assert_eq!(ping["result"], json!({}));
    assert!(server.close().success());
}

/// 17 MiB in 1 MiB writes: refused with the id read from its head (or
/// `null` when the id comes after the first 64 KiB), never held whole.
#[test]
fn a_line_over_16_mib_is_refused_and_not_held() {
    const LINE: usize = 17 << 20;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(&["--cwd", dir.path().to_str().expect("utf-8")]);
    let chunk = vec![b'x'; 1 << 20];
    for (id, head, tail) in [
        (
            json!(42),
            r#"{"jsonrpc":"2.0","id":42,"method":"ping","params":{"pad":""#.to_owned(),
            "\"}}\n".to_owned(),
        ),
        (
            Value::Null,
            r#"{"jsonrpc":"2.0","method":"ping","params":{"pad":""#.to_owned(),
            "\"},\"id\":43}\n".to_owned(),
        ),
    ] {
        server.send_raw(head.as_bytes());
        let mut written = head.len();
        while written + chunk.len() < LINE {
            server.send_raw(&chunk);
            written += chunk.len();
        }
        server.send_raw(tail.as_bytes());
        let error = server.next_where("answer to the long line", |message| {
            message.get("error").is_some()
        });
        assert_eq!(error["error"]["code"], -32600, "{error}");
        assert_eq!(error.get("id"), Some(&id), "{error}");
    }
    let ping = server.request("ping", json!({}));
    assert_eq!(ping["result"], json!({}));
    let peak = server.peak_rss();
    assert!(peak < 64 << 20, "peak RSS {} MiB", peak >> 20);
    assert!(server.close().success());
}

#[test]
fn a_request_whose_id_is_in_flight_is_refused_and_the_first_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(&["--cwd", dir.path().to_str().expect("utf-8")]);
    let call = |command: &str| {
        json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": { "name": "Bash", "arguments": { "command": command } }
        })
    };
    server.send(&call("sleep 2; echo first"));
    server.send(&call("echo second"));
    let refused = server.next_where("refusal", |message| message["id"] == 7);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let answered = server.next_where("answer", |message| message["id"] == 7);
    assert_eq!(text(&answered["result"]), "first\n", "{answered}");
    // Answered, the id is free again.
    server.send(&call("echo third"));
    let again = server.next_where("answer", |message| message["id"] == 7);
    assert_eq!(text(&again["result"]), "third\n", "{again}");
    assert!(server.close().success());
}

#[test]
fn closing_stdin_mid_call_ends_the_command_and_the_server_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("pid");
    let mut server = Server::start(&[
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--sandbox",
        "off",
    ]);
    server.start_request(
        "tools/call",
        json!({
            "name": "Bash",
            "arguments": {
                "command": format!("sh -c 'echo $$ > {}; exec sleep 1000'", pid_file.display())
            }
        }),
    );
    let pid = read_pid(&pid_file);
    let closed = Instant::now();
    assert!(server.close().success());
    // Well under rmcp's 5 s drain, which used to wait for the command.
    let took = closed.elapsed();
    assert!(took < Duration::from_secs(5), "exited after {took:?}");
    assert!(!alive(pid), "{pid} outlived the server");
}

/// The flags of a server whose commands run sandboxed in `dir`.
fn sandboxed(dir: &std::path::Path) -> [&str; 4] {
    [
        "--cwd",
        dir.to_str().expect("utf-8"),
        "--sandbox",
        "workspace-write",
    ]
}

#[test]
fn sandboxed_commands_see_and_signal_only_their_own_processes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(&sandboxed(dir.path()));
    let (server_pid, client_pid) = (server.pid(), std::process::id());
    let result = server.call(
        "Bash",
        json!({
            "command": format!(
                "echo $$; ls /proc | grep -cE '^[0-9]+$'; \
                 for p in {server_pid} {client_pid}; do \
                 [ -e /proc/$p ] && echo visible || echo hidden; \
                 kill -0 $p 2>/dev/null && echo signalled || echo unreachable; done"
            )
        }),
    );
    let output = text(&result);
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.len(), 6, "{output}");
    assert_eq!(lines[0], "2", "{output}");
    // The init, the shell, and the pipeline's processes; nothing else.
    let count: u32 = lines[1].parse().expect("a count");
    assert!((2..=5).contains(&count), "{output}");
    assert_eq!(
        &lines[2..],
        ["hidden", "unreachable", "hidden", "unreachable"],
        "{output}"
    );
    assert!(server.close().success());
}

#[test]
fn kill_minus_one_in_the_sandbox_ends_only_the_commands_processes() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A canary of another uid: root could kill it without the namespace.
    let mut canary = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sleep",
            "300",
        ])
        .spawn()
        .expect("the canary starts");
    let mut server = Server::start(&sandboxed(dir.path()));
    // The analysis refuses `kill -9 -1` as typed; a program that means
    // it is what the namespace is for.
    let guard = test_support::only_in_a_namespace(&[server.pid(), std::process::id(), canary.id()]);
    let result = server.call(
        "Bash",
        json!({
            "command": format!(
                "{guard}sleep 300 & python3 -c 'import os, signal; os.kill(-1, signal.SIGKILL)'; \
                 echo not reached"
            )
        }),
    );
    // Everything of the command but the caller went, its shell included.
    assert!(
        text(&result).starts_with("Command failed with exit code 137"),
        "{}",
        text(&result)
    );
    assert!(alive(canary.id()), "the canary outside was killed");
    let after = server.call("Bash", json!({ "command": "echo server fine" }));
    assert_eq!(text(&after), "server fine\n");
    assert!(server.close().success());
    canary.kill().expect("the canary is ended by pid");
    canary.wait().expect("reaped");
}

#[test]
fn kill_shell_and_cancellation_under_the_sandbox_behave_as_without_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(&sandboxed(dir.path()));
    let started = server.call(
        "Bash",
        json!({ "command": "echo ready; while :; do :; done", "run_in_background": true }),
    );
    let id = started["structuredContent"]["bash_id"]
        .as_str()
        .expect("bash_id")
        .to_owned();
    let killed = server.call("KillShell", json!({ "shell_id": id }));
    assert_eq!(killed["isError"], false, "{}", text(&killed));
    let read = server.call("BashOutput", json!({ "bash_id": id }));
    assert!(
        text(&read).starts_with("Status: killed, Exit code: 143 (SIGTERM)"),
        "{}",
        text(&read)
    );

    // Cancellation (SIGINT first) stops a busy loop; no answer is sent.
    let marker = format!("agent-exec-busy-{}", std::process::id());
    let call = server.start_request(
        "tools/call",
        json!({
            "name": "Bash",
            // The command's own shell shows no command text: the loop runs
            // in a bash whose command line names the marker.
            "arguments": { "command": format!("bash -c ': {marker}; while :; do :; done'") }
        }),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_naming(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the loop did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.notify(
        "notifications/cancelled",
        json!({ "requestId": call, "reason": "test" }),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_naming(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "still running: {:?}",
            processes_naming(&marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(server.close().success());
}

#[test]
fn a_sandboxed_server_killed_with_sigkill_takes_every_namespace_with_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = format!("agent-exec-orphan-{}", std::process::id());
    let mut server = Server::start(&sandboxed(dir.path()));
    let started = server.call(
        "Bash",
        json!({
            "command": format!(
                "setsid sh -c 'sleep 300; : {marker}' & sh -c 'sleep 300; : {marker}'"
            ),
            "run_in_background": true
        }),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_naming(&marker).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the command did not start: {started}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-KILL", &server.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    server
        .wait_exit(Duration::from_secs(20))
        .expect("the server exits");
    // The init dies with the server (its parent-death signal), and with it
    // everything in its namespace, the `setsid` job included.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_naming(&marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "still running: {:?}",
            processes_naming(&marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_d_at_a_terminal_before_any_request_exits_0_quietly() {
    use nix::pty::openpty;
    use nix::sys::termios::{SpecialCharacterIndices, tcgetattr};
    let dir = tempfile::tempdir().expect("temp dir");
    let pty = openpty(None, None).expect("a pseudo-terminal");
    let slave = std::fs::File::from(pty.slave);
    let end_of_file =
        tcgetattr(&slave).expect("termios").control_chars[SpecialCharacterIndices::VEOF as usize];
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["mcp", "--cwd", dir.path().to_str().expect("utf-8")])
        .stdin(slave.try_clone().expect("dup"))
        .stdout(slave.try_clone().expect("dup"))
        .stderr(slave)
        .spawn()
        .expect("the server starts");
    let mut master = std::fs::File::from(pty.master);
    // What a person types: EOF at the start of a line.
    master.write_all(&[end_of_file]).expect("typed");
    let reader = {
        let mut master = master.try_clone().expect("dup");
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            // EIO once the server, the last holder of the slave, is gone.
            let _ = std::io::Read::read_to_end(&mut master, &mut seen);
            seen
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("waits") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not end on EOF");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let seen = reader.join().expect("reader");
    let text = String::from_utf8_lossy(&seen);
    // The terminal echoes nothing for EOF; whatever else shows is ours.
    assert_eq!(text.trim(), "", "the server wrote {text:?}");
    assert_eq!(status.code(), Some(0), "{text}");
}

#[test]
fn no_process_the_server_starts_carries_the_command_text_in_its_command_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(&["--cwd", dir.path().to_str().expect("utf-8")]);
    let marker = format!("agent-exec-marker-{}", std::process::id());
    // The marker is only in the command text: `pgrep -f` finds nothing,
    // in the foreground, in the background and under a terminal.
    let command = format!("pgrep -f {marker} || echo none");
    let foreground = server.call("Bash", json!({ "command": command }));
    assert_eq!(text(&foreground), "none\n", "{foreground}");
    let tty = server.call("Bash", json!({ "command": command, "tty": true }));
    assert_eq!(text(&tty), "none\n", "{tty}");
    // The carried-state wrapper (a `cd` makes it needed) too.
    let wrapped = server.call("Bash", json!({ "command": format!("cd .; {command}") }));
    assert_eq!(text(&wrapped), "none\n", "{wrapped}");
    let started = server.call(
        "Bash",
        json!({ "command": format!("{command}; sleep 0.5"), "run_in_background": true }),
    );
    let id = started["structuredContent"]["bash_id"]
        .as_str()
        .expect("a background shell")
        .to_owned();
    let read = server.call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }));
    assert!(text(&read).ends_with("\nnone\n"), "{read}");
    // Nor does the variable that carries it reach the command.
    let variables = server.call(
        "Bash",
        json!({ "command": "env | grep -c AGENT_EXEC_SCRIPT; echo ${__agent_exec_script-unset}" }),
    );
    assert_eq!(text(&variables), "0\nunset\n", "{variables}");
    assert!(server.close().success());
}

/// A loopback port no one listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

#[test]
fn pkill_f_of_a_dev_server_ends_the_server_not_the_shell_asking() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("server.pid");
    let mut server = Server::start(&[
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--sandbox",
        "off",
    ]);
    let port = free_port();
    let started = server.call(
        "Bash",
        json!({
            "command": format!(
                "python3 -m http.server {port} --bind 127.0.0.1 & echo $! > server.pid; wait"
            ),
            "run_in_background": true
        }),
    );
    let id = started["structuredContent"]["bash_id"]
        .as_str()
        .expect("a background shell")
        .to_owned();
    let http_server = read_pid(&pid_file);
    // Listening, so the pattern below names a running server.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the server did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let stop = server.call(
        "Bash",
        json!({ "command": format!("pkill -f 'python3 -m http.server {port}'; echo pkill $?") }),
    );
    assert_eq!(text(&stop), "pkill 0\n", "{stop}");
    assert_eq!(stop["structuredContent"]["exit_code"], 0, "{stop}");
    assert!(wait_gone(http_server), "the http server is still running");
    let read = server.call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }));
    // The background shell saw its server end and ended itself (`wait`
    // with no job left answers 0); nothing killed it.
    assert!(
        text(&read).starts_with("Status: completed, Exit code: 0"),
        "{read}"
    );
    assert!(server.close().success());
    if alive(http_server) {
        let _ = Command::new("kill")
            .args(["-KILL", &http_server.to_string()])
            .status();
    }
}
