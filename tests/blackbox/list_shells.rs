//! `ListShells` over MCP: the caller's background shells with id, status,
//! command and start time, in the text and in `structuredContent`.

use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::mcp::{Server, text};

#[test]
fn list_shells_names_each_background_shell_with_status_command_and_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(&["--cwd", dir.path().to_str().expect("utf-8")]);
    let empty = server.call("ListShells", json!({}));
    assert_eq!(empty["isError"], false, "{empty}");
    assert_eq!(text(&empty), "No background shells.");
    assert_eq!(empty["structuredContent"]["shells"], json!([]), "{empty}");

    let mut ids = Vec::new();
    for command in ["sleep 60", "exit 3"] {
        let started = server.call(
            "Bash",
            json!({ "command": command, "run_in_background": true }),
        );
        ids.push(
            started["structuredContent"]["bash_id"]
                .as_str()
                .expect("a background shell")
                .to_owned(),
        );
    }
    let ended = server.call(
        "BashOutput",
        json!({ "bash_id": ids[1], "until": { "exit": true }, "wait_ms": 20000 }),
    );
    assert_eq!(ended["structuredContent"]["status"], "failed", "{ended}");

    let listed = server.call("ListShells", json!({}));
    assert_eq!(listed["isError"], false, "{listed}");
    let answer = text(&listed);
    let lines: Vec<&str> = answer.lines().collect();
    assert_eq!(lines[0], "2 background shell(s):", "{answer}");
    assert!(
        lines[1].starts_with(&format!("{} (running, started 20", ids[0])),
        "{answer}"
    );
    assert!(lines[1].ends_with("Z): sleep 60"), "{answer}");
    assert!(
        lines[2].starts_with(&format!("{} (failed, started ", ids[1])),
        "{answer}"
    );
    assert!(lines[2].ends_with("): exit 3"), "{answer}");
    let shells = listed["structuredContent"]["shells"]
        .as_array()
        .expect("shells");
    assert_eq!(shells.len(), 2, "{listed}");
    assert_eq!(shells[0]["id"], ids[0].as_str());
    assert_eq!(shells[0]["status"], "running");
    assert_eq!(shells[0]["command"], "sleep 60");
    assert!(shells[0].get("exit_code").is_none(), "{listed}");
    assert_eq!(shells[1]["status"], "failed");
    assert_eq!(shells[1]["exit_code"], 3);
    // The start time is this run's, to the second.
    let started = shells[0]["started_at"].as_str().expect("a start time");
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let year = 1970 + now / 31_556_952;
    assert!(started.starts_with(&year.to_string()), "{started}");
    assert!(
        shells[0]["duration_ms"].as_u64().expect("a duration")
            < Duration::from_secs(60).as_millis() as u64
    );

    let killed = server.call("KillShell", json!({ "shell_id": ids[0] }));
    assert_eq!(killed["isError"], false, "{killed}");
    let after = server.call("ListShells", json!({}));
    assert_eq!(
        after["structuredContent"]["shells"][0]["status"], "killed",
        "{after}"
    );
    let unknown = server.call("ListShells", json!({ "all": true }));
    assert_eq!(unknown["isError"], true, "{unknown}");
    assert!(server.close().success());
}
