//! `BashOutput`'s `until` over MCP: each kind fires on what it names, the
//! shell ending ends any wait, `wait_ms` bounds it, and bad `until`s are
//! refused with a message naming the mistake.

#![allow(
    clippy::needless_pass_by_value,
    reason = "helpers take JSON by value so calls read like the messages they send"
)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp::{Server, text};

fn server(dir: &tempfile::TempDir) -> Server {
    Server::start(&["--cwd", dir.path().to_str().expect("utf-8")])
}

/// Starts `command` as a background shell and returns its id.
fn background(server: &mut Server, command: &str) -> String {
    let started = server.call(
        "Bash",
        json!({ "command": command, "run_in_background": true }),
    );
    started["structuredContent"]["bash_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a background shell: {started}"))
        .to_owned()
}

/// `BashOutput` with `until` and `wait_ms`, and how long it took.
fn read_until(server: &mut Server, id: &str, until: Value, wait_ms: u64) -> (Value, Duration) {
    let asked = Instant::now();
    let read = server.call(
        "BashOutput",
        json!({ "bash_id": id, "until": until, "wait_ms": wait_ms }),
    );
    (read, asked.elapsed())
}

fn kill(server: &mut Server, id: &str) {
    let killed = server.call("KillShell", json!({ "shell_id": id }));
    assert_eq!(killed["isError"], false, "{killed}");
}

#[test]
fn a_regex_fires_on_the_first_new_matching_line_and_an_unread_one_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = server(&dir);
    let id = background(
        &mut server,
        "echo starting; sleep 1; printf '\\033[32mready\\033[0m on 5173\\n'; sleep 60",
    );
    let (read, took) = read_until(
        &mut server,
        &id,
        json!({ "regex": "^ready on \\d+$" }),
        30_000,
    );
    let answer = text(&read);
    assert_eq!(read["isError"], false, "{read}");
    assert!(
        answer.ends_with("starting\nready on 5173\n[until: regex matched]"),
        "{answer}"
    );
    assert_eq!(read["structuredContent"]["until"], "regex", "{read}");
    assert_eq!(read["structuredContent"]["status"], "running", "{read}");
    assert!(took < Duration::from_secs(20), "took {took:?}");

    // The line was read: it cannot fire again, so the wait runs out.
    let (again, _) = read_until(&mut server, &id, json!({ "regex": "ready" }), 500);
    assert!(
        text(&again).ends_with("[until: wait ran out after 500 ms]"),
        "{again}"
    );
    assert_eq!(
        again["structuredContent"]["until"], "wait_ran_out",
        "{again}"
    );

    // A line printed before the call but not yet read counts.
    let flag = dir.path().join("printed");
    let early = background(&mut server, "echo listening; touch printed; sleep 60");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.exists() {
        assert!(Instant::now() < deadline, "the shell never printed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (read, took) = read_until(&mut server, &early, json!({ "regex": "listening" }), 20_000);
    assert_eq!(read["structuredContent"]["until"], "regex", "{read}");
    assert!(
        text(&read).ends_with("listening\n[until: regex matched]"),
        "{read}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    kill(&mut server, &id);
    kill(&mut server, &early);
    assert!(server.close().success());
}

#[test]
fn a_port_fires_once_something_accepts_on_loopback() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = server(&dir);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let id = background(
        &mut server,
        &format!("sleep 1; exec python3 -m http.server {port} --bind 127.0.0.1"),
    );
    let (read, took) = read_until(&mut server, &id, json!({ "port": port }), 30_000);
    assert_eq!(read["isError"], false, "{read}");
    assert!(
        text(&read).ends_with(&format!("[until: port {port} open]")),
        "{read}"
    );
    assert_eq!(read["structuredContent"]["until"], "port", "{read}");
    assert!(
        took >= Duration::from_millis(900),
        "fired before the server ran: {took:?}"
    );
    assert!(took < Duration::from_secs(25), "took {took:?}");
    std::net::TcpStream::connect(("127.0.0.1", port)).expect("the port accepts");
    kill(&mut server, &id);
    assert!(server.close().success());
}

#[test]
fn idle_fires_after_that_long_without_output() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = server(&dir);
    let id = background(
        &mut server,
        "for i in 1 2 3 4 5; do echo tick $i; sleep 0.3; done; sleep 60",
    );
    let (read, took) = read_until(&mut server, &id, json!({ "idle_ms": 1500 }), 30_000);
    let answer = text(&read);
    assert!(answer.contains("tick 5\n[until: idle 1500 ms]"), "{answer}");
    assert_eq!(read["structuredContent"]["until"], "idle_ms", "{read}");
    // Five ticks 0.3 s apart, then 1.5 s of quiet.
    assert!(took >= Duration::from_millis(2500), "took {took:?}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    kill(&mut server, &id);
    assert!(server.close().success());
}

#[test]
fn the_shell_ending_ends_any_wait_and_wait_ms_bounds_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = server(&dir);
    let exits = background(&mut server, "sleep 1; echo done");
    let (read, took) = read_until(&mut server, &exits, json!({ "exit": true }), 30_000);
    assert!(
        text(&read).starts_with("Status: completed, Exit code: 0"),
        "{read}"
    );
    assert!(text(&read).ends_with("done\n[until: exited]"), "{read}");
    assert_eq!(read["structuredContent"]["until"], "exit", "{read}");
    assert!(took < Duration::from_secs(20), "took {took:?}");

    // A regex that never matches: the end of the shell answers.
    let ends = background(&mut server, "sleep 1; echo nothing to see; exit 3");
    let (read, took) = read_until(&mut server, &ends, json!({ "regex": "ready" }), 30_000);
    assert!(
        text(&read).ends_with("nothing to see\n[until: exited]"),
        "{read}"
    );
    assert_eq!(read["structuredContent"]["exit_code"], 3, "{read}");
    assert!(took < Duration::from_secs(20), "took {took:?}");

    // A port nobody opens and a shell that runs on: wait_ms ends it, and
    // the shell's status is unchanged.
    let runs = background(&mut server, "sleep 60");
    let (read, took) = read_until(&mut server, &runs, json!({ "port": 9 }), 700);
    assert!(
        text(&read).ends_with("[until: wait ran out after 700 ms]"),
        "{read}"
    );
    assert_eq!(read["structuredContent"]["status"], "running", "{read}");
    assert!(took >= Duration::from_millis(700), "took {took:?}");
    kill(&mut server, &runs);
    assert!(server.close().success());
}

#[test]
fn a_bad_until_is_refused_with_what_is_wrong() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = server(&dir);
    let id = background(&mut server, "sleep 60");
    for (until, says) in [
        (json!({ "regex": "x", "port": 80 }), "exactly one of"),
        (json!({}), "got none"),
        (json!({ "regex": "(" }), "Invalid until regex"),
        (json!({ "exit": false }), "only be `true`"),
        (json!({ "port": 0 }), "port"),
        (json!({ "idle": 5 }), "idle"),
    ] {
        let (read, _) = read_until(&mut server, &id, until.clone(), 0);
        assert_eq!(read["isError"], true, "{until}: {read}");
        assert!(text(&read).contains(says), "{until}: {read}");
    }
    kill(&mut server, &id);
    assert!(server.close().success());
}
