//! Nothing is lost silently: an answer says `full output in FILE` only
//! when FILE holds the whole output; otherwise it says how much FILE holds
//! and why (the per-command cap, a full disk). A state that could not be
//! saved on a full disk is named, and later calls keep the last good one.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use common::{World, meta};
use exec_tools::OUTPUT_FILE_CAP;
use serde_json::json;
use test_support::SmallDisk;

/// The truncation line of an answer.
fn marker(text: &str) -> &str {
    text.lines()
        .find(|line| line.starts_with("[Output truncated: "))
        .unwrap_or_else(|| panic!("no truncation line in an answer of {} chars", text.len()))
}

/// The `first N bytes in FILE: WHY` of a truncation line.
fn first_bytes_in(marker: &str) -> (u64, &str, &str) {
    let rest = &marker[marker.find("; first ").expect("a partial file is named") + 8..];
    let (bytes, rest) = rest.split_once(" bytes in ").expect("bytes in");
    let (file, why) = rest.split_once(": ").expect("a reason");
    (
        bytes.parse().expect("a count"),
        file,
        why.trim_end_matches(']'),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_past_the_per_command_cap_is_named_as_its_first_bytes() {
    let world = World::new();
    // About 89 MB, past the 64 MiB cap.
    let result = world.bash("seq 1 12000000").await;
    assert!(result.success);
    let line = marker(result.text());
    assert!(!line.contains("full output in"), "{line}");
    let (bytes, file, why) = first_bytes_in(line);
    assert_eq!(why, "the per-command cap was reached");
    assert_eq!(bytes, OUTPUT_FILE_CAP);
    assert_eq!(std::fs::metadata(file).expect("the file").len(), bytes);
    assert_eq!(meta(&result, "output_file"), file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_shell_past_the_cap_says_what_its_file_lacks() {
    let world = World::new();
    let id = world.background("seq 1 12000000").await;
    let read = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 60000 }))
        .await;
    assert!(
        read.text().starts_with("Status: completed"),
        "{}",
        &read.text()[..200]
    );
    let line = marker(read.text());
    assert!(!line.contains("full output in"), "{line}");
    let (bytes, file, why) = first_bytes_in(line);
    assert_eq!(why, "the per-command cap was reached");
    assert_eq!(bytes, OUTPUT_FILE_CAP);
    assert!(file.ends_with(".stdout"), "{file}");
    assert_eq!(std::fs::metadata(file).expect("the file").len(), bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_file_is_named_as_the_full_output() {
    let world = World::new();
    let result = world.bash("seq 1 100000").await;
    let line = marker(result.text());
    let file = line
        .split("; full output in ")
        .nth(1)
        .expect("the whole output is in a file")
        .trim_end_matches(']');
    let expected: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(file).expect("the file"), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_named_and_the_state_is_kept() {
    let Some(disk) = SmallDisk::mount(1024) else {
        return;
    };
    let world = World::with_output_dir(disk.path());
    let first = world.bash("export KEPT=good").await;
    assert_eq!(first.text(), "");
    // About 2.6 MB of output on a 1 MiB disk.
    let result = world.bash("seq 1 400000").await;
    let line = marker(result.text());
    assert!(!line.contains("full output in"), "{line}");
    if line.contains("; no output file: ") {
        // The spills filled the disk before their copy: nothing is named.
        assert!(
            line.ends_with("; no output file: the disk is full]"),
            "{line}"
        );
        assert!(result.metadata_value().get("output_file").is_none());
    } else {
        let (bytes, file, why) = first_bytes_in(line);
        assert_eq!(why, "the disk is full");
        assert!(bytes > 0 && bytes < 1024 * 1024, "{bytes}");
        assert_eq!(std::fs::metadata(file).expect("the file").len(), bytes);
    }

    // Fill what is left of the disk: the state of the next call is still
    // carried (it comes back in memory, not in a file).
    let filler = disk.path().join("filler");
    {
        use std::io::Write as _;
        let mut file = std::fs::File::create(&filler).expect("filler");
        while file.write_all(&[b'x'; 4096]).is_ok() {}
    }
    let kept = world.bash("export KEPT=full").await;
    assert!(!kept.text().contains("not kept"), "{}", kept.text());
    assert_eq!(world.bash("echo $KEPT").await.text(), "full\n");
    std::fs::remove_file(&filler).expect("frees the disk");
}

/// Open file descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("fd dir").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_shells_hold_no_file_descriptor_after_a_cut_read() {
    let world = World::new();
    let before = open_fds();
    for _ in 0..30 {
        // Longer than one answer, shorter than what memory keeps: the read
        // is cut and names a file, made for it.
        let id = world.background("seq 1 20000").await;
        let read = world
            .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
            .await;
        assert!(
            read.text().contains("[Output truncated"),
            "{}",
            &read.text()[..100]
        );
        let again = world.call("BashOutput", json!({ "bash_id": id })).await;
        assert!(again.success);
    }
    // Other tests of this binary run beside this one: allow a few of theirs.
    let after = open_fds();
    assert!(
        after <= before + 8,
        "{before} fds before, {after} after 30 shells"
    );
}

/// A world whose output files may hold 3,000,000 bytes together.
fn small_budget_world() -> World {
    World::with(|mut config| {
        config.output_budget = 3_000_000;
        config
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_stop_at_the_budget_and_read_shells_give_theirs_back_first() {
    let world = small_budget_world();
    // 2 MB each, past what memory keeps: both go to disk.
    let print = "head -c 2000000 /dev/zero | tr '\\0' x; echo";
    let first = world.background(print).await;
    let read = world
        .call("BashOutput", json!({ "bash_id": first, "wait_ms": 10000 }))
        .await;
    assert!(
        marker(read.text()).contains("full output in"),
        "{}",
        marker(read.text())
    );
    let second = world.background(print).await;
    let read = world
        .call("BashOutput", json!({ "bash_id": second, "wait_ms": 10000 }))
        .await;
    let (bytes, file, why) = first_bytes_in(marker(read.text()));
    assert_eq!(why, "the server's budget for output files was reached");
    assert!(bytes < 2_000_000, "{bytes}");
    assert_eq!(std::fs::metadata(file).expect("kept").len(), bytes);
    // A third command needs room: the oldest file that may go is the
    // first shell's (finished, read to its end; before, files of tracked
    // shells never went, and this one's answer named an empty file); the
    // second's stays, as the budget then has room.
    let result = world.bash("seq 1 100000").await;
    assert!(
        marker(result.text()).contains("full output in"),
        "{}",
        marker(result.text())
    );
    let spills: Vec<String> = world
        .output_files()
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "stdout"))
        .map(|path| path.display().to_string())
        .collect();
    assert_eq!(spills, vec![file.to_owned()]);
}

/// A tty command that neither exits nor waits for input goes on in the
/// background after `--background-after`; with 256 shells already tracked
/// it cannot, and without a timeout of its own the foreground default ends
/// it instead of holding the call for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_command_with_no_room_in_the_background_ends_at_the_default_timeout() {
    let world = World::with(|mut config| {
        config.background_after = Some(std::time::Duration::from_millis(300));
        config.default_timeout = std::time::Duration::from_millis(2500);
        config
    });
    let mut ids = Vec::new();
    for _ in 0..shell_runtime::MAX_TRACKED_SHELLS {
        ids.push(world.background("exec sleep 300").await);
    }
    let result = world
        .call(
            "Bash",
            json!({ "command": "echo pid $$; exec sleep 300", "tty": true }),
        )
        .await;
    for id in &ids {
        world.call("KillShell", json!({ "shell_id": id })).await;
    }
    assert!(!result.success, "{}", result.text());
    assert!(
        result.text().starts_with("Command timed out after 2500ms"),
        "{}",
        result.text()
    );
    assert_eq!(meta(&result, "status"), "timeout");
    let pid = test_support::numbers_in(&result.text().replace("pid", " "))
        .first()
        .copied()
        .expect("the command's pid");
    assert!(test_support::gone(pid).await, "{pid} outlived the call");
}
