//! Truncated answers: the `[Output truncated: N characters omitted` line
//! counts exactly what the answer does not show (including what the
//! in-memory buffers dropped), and head and tail end at line boundaries.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use common::{World, meta};
use serde_json::json;

/// What `seq 1 N` prints.
fn seq(n: u32) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

/// An answer's output split around its truncation line: the head, the
/// omitted count and the tail.
struct Cut<'a> {
    head: &'a str,
    omitted: usize,
    tail: &'a str,
}

/// Splits `body` (the answer after any prefix) at its one truncation line.
fn split_at_marker(body: &str) -> Cut<'_> {
    let start = body
        .find("[Output truncated: ")
        .unwrap_or_else(|| panic!("no truncation line in {body}"));
    let line_end = start + body[start..].find('\n').expect("the marker line ends");
    let marker = &body[start..line_end];
    let omitted = marker["[Output truncated: ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {marker}"));
    assert!(
        marker.contains(" characters omitted"),
        "the count is of characters: {marker}"
    );
    assert_eq!(
        body[line_end + 1..].find("[Output truncated"),
        None,
        "one truncation line"
    );
    Cut {
        head: &body[..start],
        omitted,
        tail: &body[line_end + 1..],
    }
}

/// Checks that `cut` shows a prefix and a suffix of `whole`, both ending and
/// starting at line boundaries, and that its count is exact.
fn assert_exact(whole: &str, cut: &Cut<'_>) {
    assert!(
        cut.head.ends_with('\n'),
        "the head ends with a whole line: {:?}",
        &cut.head[cut.head.len().saturating_sub(40)..]
    );
    assert!(
        whole.starts_with(cut.head),
        "the head is the start of the output, whole lines only: {:?}",
        &cut.head[cut.head.len().saturating_sub(40)..]
    );
    assert!(
        whole.ends_with(cut.tail),
        "the tail is the end of the output"
    );
    let tail_start = whole.len() - cut.tail.len();
    assert!(
        whole[..tail_start].ends_with('\n'),
        "the tail starts with a whole line: {:?}",
        &cut.tail[..cut.tail.len().min(40)]
    );
    let shown = cut.head.chars().count() + cut.tail.chars().count();
    assert_eq!(
        cut.omitted,
        whole.chars().count() - shown,
        "N characters omitted is what is not shown"
    );
    assert!(shown <= 30_000, "{shown} characters shown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_answer_is_cut_between_lines() {
    let world = World::new();
    // The head's nominal end falls inside the line `2622`.
    let result = world.bash("seq 1 10000").await;
    assert!(result.success, "{}", result.text());
    assert_eq!(meta(&result, "truncated"), true);
    let cut = split_at_marker(result.text());
    assert_exact(&seq(10_000), &cut);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_count_includes_what_memory_dropped() {
    let world = World::new();
    let result = world.bash("seq 1 3000000").await;
    assert!(result.success, "{}", result.text());
    let cut = split_at_marker(result.text());
    assert_exact(&seq(3_000_000), &cut);
}

/// Reads a finished background shell once and returns the output part of
/// the answer (after the status line and the blank line).
async fn read_once_at_the_end(world: &World, command: &str) -> String {
    let id = world.background(command).await;
    let result = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 60_000 }))
        .await;
    assert!(result.success, "{}", result.text());
    assert_eq!(meta(&result, "status"), "completed", "{}", result.text());
    assert_eq!(meta(&result, "truncated"), true);
    let text = result.text();
    let (status, body) = text.split_once("\n\n").expect("a status line");
    assert!(status.starts_with("Status: completed"), "{status}");
    body.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_output_counts_what_the_ring_dropped() {
    let world = World::new();
    // 22.9 MB, far more than the buffer's head and tail ring hold.
    let body = read_once_at_the_end(&world, "seq 1 3000000").await;
    assert_exact(&seq(3_000_000), &split_at_marker(&body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_output_counts_characters_not_bytes() {
    let world = World::new();
    // 300000 lines of 24 bytes but 17 characters: 7.2 MB.
    let line = "héllo wörld €😀 x\n";
    let body = read_once_at_the_end(
        &world,
        &format!("yes '{}' | head -n 300000", line.trim_end()),
    )
    .await;
    let whole = line.repeat(300_000);
    assert_exact(&whole, &split_at_marker(&body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_keeps_the_line_that_says_what_was_dropped() {
    let world = World::new();
    let id = world.background("seq 1 3000000").await;
    let result = world
        .call(
            "BashOutput",
            json!({ "bash_id": id, "wait_ms": 60_000, "filter": "^2999999$" }),
        )
        .await;
    assert_eq!(meta(&result, "status"), "completed", "{}", result.text());
    let body = result.text().split_once("\n\n").expect("a status line").1;
    let dropped = 22_888_896 - 256 * 1024 - 1024 * 1024;
    assert_eq!(
        body,
        format!("[... {dropped} bytes dropped ...]\n2999999\n"),
        "the gap is a notice, not output a filter removes"
    );
    assert_eq!(meta(&result, "missed_bytes"), dropped, "{}", result.text());
}
