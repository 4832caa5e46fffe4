//! shell-runtime alone: start background processes, stream their output,
//! and end a whole tree, escaped grandchild included.
//!
//! `cargo run -p shell-runtime --example trees`

#![allow(
    clippy::print_stdout,
    clippy::expect_used,
    reason = "an example reports on stdout and stops on a broken setup"
)]

use std::time::Duration;

use shell_runtime::ShellManager;
use test_support::spec;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let manager = ShellManager::new();
    let (ticker_id, ticker) = manager
        .spawn(spec("for i in 1 2 3 4 5; do echo tick $i; sleep 0.2; done"))
        .await
        .expect("starts");
    // A tree with a grandchild that escapes into a process session of its own.
    let (tree_id, tree) = manager
        .spawn(spec("(setsid sleep 300 &); sleep 300 & echo started; wait"))
        .await
        .expect("starts");
    println!(
        "started {ticker_id} (pid {}) and {tree_id} (pid {})",
        ticker.pid(),
        tree.pid()
    );

    // Stream: print whatever is new, as it arrives, until the ticker ends.
    let mut events = ticker.subscribe_output();
    while ticker.is_running() {
        let _ = tokio::time::timeout(Duration::from_millis(500), events.changed()).await;
        print!("{}", ticker.read_unseen().stdout.render());
    }
    print!("{}", ticker.read_unseen().stdout.render());
    println!(
        "{ticker_id}: {} (exit {:?})",
        ticker.status(),
        ticker.exit().map(|exit| exit.code)
    );

    print!("{tree_id} says: {}", tree.read_unseen().stdout.render());
    let outcome = manager
        .kill(&tree_id, Duration::from_secs(2))
        .await
        .expect("known");
    println!(
        "{tree_id}: {outcome:?}, status {}, after {:?}",
        tree.status(),
        tree.duration()
    );
    manager.shutdown(Duration::from_secs(1)).await;
}
