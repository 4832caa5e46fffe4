//! Output files under a small budget (`--output-budget`): finished shells
//! whose output was read to its end, and old foreground calls, give their
//! files back when newer ones need room, so the temp dir stays within the
//! budget and the newest file is whole; an answer names no file when
//! nothing could be written.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::stale::Peer;

/// Bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|entry| {
                // A file given back since the listing counts nothing.
                let Ok(meta) = entry.metadata() else { return 0 };
                if meta.is_dir() {
                    bytes_under(&entry.path())
                } else {
                    meta.len()
                }
            })
            .sum()
    })
}

fn call(server: &mut Peer, tool: &str, arguments: &Value) -> Value {
    let answer = server.request("tools/call", &json!({"name": tool, "arguments": arguments}));
    answer["result"].clone()
}

/// The metadata of an answer (`structuredContent`, or `_meta` in older shapes).
fn meta(result: &Value) -> &Value {
    if result["structuredContent"].is_object() {
        &result["structuredContent"]
    } else {
        &result["_meta"]
    }
}

const BUDGET: u64 = 6_000_000;
/// Each command prints this much: more than an answer shows, less than
/// half the room the budget keeps free (an eighth of it): a foreground
/// call holds its spills and their combined copy at once.
const PRINTED: u64 = 300_000;

fn print_command() -> String {
    format!("head -c {PRINTED} /dev/zero | tr '\\0' x")
}

#[test]
fn read_shells_and_old_calls_give_their_files_back_and_the_newest_is_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let budget = BUDGET.to_string();
    let mut server = Peer::start(
        &[],
        &["--cwd", cwd, "--output-budget", &budget],
        &std::env::temp_dir(),
    );
    let temp = crate::server_temp_dirs(server.pid());
    assert_eq!(temp.len(), 1, "{temp:?}");
    let mut newest = None;
    let mut peak = 0;
    for round in 0..45 {
        let result = if round % 3 == 0 {
            call(&mut server, "Bash", &json!({"command": print_command()}))
        } else {
            let started = call(
                &mut server,
                "Bash",
                &json!({"command": print_command(), "run_in_background": true}),
            );
            let id = meta(&started)["bash_id"]
                .as_str()
                .expect("bash_id")
                .to_owned();
            call(
                &mut server,
                "BashOutput",
                &json!({"bash_id": id, "wait_ms": 30_000}),
            )
        };
        assert_eq!(result["isError"], false, "round {round}: {result}");
        let text = result["content"][0]["text"].as_str().expect("text");
        let marker = text
            .lines()
            .find(|line| line.starts_with("[Output truncated"))
            .expect("a cut answer");
        // `full output in FILE]`: the whole of it is there.
        let file = marker.split_once("full output in ").map_or_else(
            || panic!("round {round}: {marker}"),
            |(_, rest)| rest.trim_end_matches(']'),
        );
        newest = Some(PathBuf::from(file));
        peak = peak.max(bytes_under(&temp[0]));
    }
    assert!(
        peak <= BUDGET,
        "the temp dir held {peak} bytes (budget {BUDGET})"
    );
    let newest = newest.expect("45 rounds ran");
    assert_eq!(
        std::fs::metadata(&newest).expect("the newest file").len(),
        PRINTED,
        "{}",
        newest.display()
    );
    server.close();
}

#[test]
fn no_output_file_is_named_when_nothing_could_be_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let mut server = Peer::start(
        &[],
        &["--cwd", cwd, "--output-budget", "2000000"],
        &std::env::temp_dir(),
    );
    // A running shell, never read: its file takes the whole budget and
    // is not given back.
    let started = call(
        &mut server,
        "Bash",
        &json!({"command": "head -c 3000000 /dev/zero | tr '\\0' x; sleep 1000", "run_in_background": true}),
    );
    let id = meta(&started)["bash_id"]
        .as_str()
        .expect("bash_id")
        .to_owned();
    let temp = crate::server_temp_dirs(server.pid());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while bytes_under(&temp[0]) < 2_000_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "the budget was never spent"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let result = call(&mut server, "Bash", &json!({"command": "seq 1 100000"}));
    assert_eq!(result["isError"], false, "{result}");
    let text = result["content"][0]["text"].as_str().expect("text");
    let marker = text
        .lines()
        .find(|line| line.starts_with("[Output truncated"))
        .expect("a cut answer");
    assert!(
        marker.contains("no output file: the server's budget for output files was reached"),
        "{marker}"
    );
    assert!(
        meta(&result).get("output_file").is_none_or(Value::is_null),
        "{}",
        meta(&result)
    );
    let killed = call(&mut server, "KillShell", &json!({"shell_id": id}));
    assert_eq!(killed["isError"], false, "{killed}");
    server.close();
}

/// The budget is sized against the free space where output files go: a
/// quarter of it when that is under 1 GiB, said in a log line. A command
/// printing more than that is told the budget was reached, and the disk
/// keeps room (before, the 1 GiB budget let output files fill the disk).
#[test]
fn the_budget_is_a_quarter_of_the_free_space_when_that_is_less() {
    let Some(disk) = test_support::SmallDisk::mount(16 * 1024) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI cannot skip this: it needs root for a small disk"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let mut server = Peer::started(
        Peer::launch(&[], &["--cwd", cwd], disk.path())
            .env("RUST_LOG", "info")
            .collect_stderr(),
    );
    let result = call(
        &mut server,
        "Bash",
        &json!({"command": "head -c 8000000 /dev/zero | tr '\\0' x"}),
    );
    let text = result["content"][0]["text"].as_str().expect("text");
    let marker = text
        .lines()
        .find(|line| line.starts_with("[Output truncated"))
        .expect("a cut answer");
    assert!(
        marker.ends_with("the server's budget for output files was reached]"),
        "{marker}"
    );
    let log = server
        .stderr_until("output files: budget", Duration::from_secs(10))
        .join("\n");
    server.close();
    let line = log
        .lines()
        .find(|line| line.contains("output files: budget"))
        .unwrap_or_else(|| panic!("no budget line in {log}"));
    // 16 MiB, less what the temp dir took: a quarter is 3 or 4 MiB.
    assert!(
        [
            "budget 3 MiB, a quarter of the 15 MiB free",
            "budget 4 MiB, a quarter of the 16 MiB free"
        ]
        .iter()
        .any(|said| line.contains(said)),
        "{line}"
    );
}
