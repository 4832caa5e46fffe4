//! The memory bound, measured on this process's RSS: many idle shells that
//! printed more than the budget and were never read stay within the budget
//! plus a few hundred KiB each, the shell past the limit is refused, and
//! once all are read and ended the memory goes back. Alone in its test
//! binary so that no other test's memory counts.

#![allow(clippy::expect_used, reason = "tests")]

mod common;

use std::time::{Duration, Instant};

use shell_runtime::{ManagerError, MemoryPool, ShellManager, SpillFile, Stream};
use test_support::status_kib;

/// Enough shells, and a budget they overflow, that the test fails both
/// without the budget (the rings alone would hold 80 MiB) and without the
/// allocator giving freed memory back (33 MiB stayed resident).
const SHELLS: usize = 64;
const BUDGET: u64 = 48 << 20;
const PRINTED: u64 = 3_000_000;
/// What each idle shell may cost besides its share of the budget.
const PER_SHELL_KIB: u64 = 300;

fn rss_kib() -> u64 {
    status_kib("self", "VmRSS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_unread_shells_stay_within_the_budget_and_give_it_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = ShellManager::with_limit(SHELLS).with_memory(MemoryPool::new(BUDGET));
    let spec = |index: usize| {
        let mut spec = common::spec(&format!(
            "head -c {PRINTED} /dev/zero | tr '\\0' x; exec sleep 60"
        ));
        spec.stdout_spill = Some(SpillFile {
            path: dir.path().join(format!("{index}.out")),
            cap_bytes: u64::MAX,
            budget: None,
        });
        spec
    };
    // Warm the runtime, the spawner and the allocator once, then measure.
    let (_, warm) = manager.spawn(spec(usize::MAX)).await.expect("starts");
    warm.terminate(Duration::ZERO).await;
    drop(warm);
    manager.cleanup_completed(Duration::ZERO);
    let baseline = rss_kib();

    let mut shells = Vec::new();
    for index in 0..SHELLS {
        shells.push(manager.spawn(spec(index)).await.expect("starts").1);
    }
    assert!(matches!(
        manager.spawn(spec(SHELLS)).await,
        Err(ManagerError::TooManyShells(_))
    ));
    let deadline = Instant::now() + Duration::from_secs(60);
    while shells
        .iter()
        .any(|shell| shell.totals(Stream::Stdout).0 < PRINTED)
    {
        assert!(Instant::now() < deadline, "the shells printed in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let peak = status_kib("self", "VmHWM");
    let bound = baseline + BUDGET / 1024 + SHELLS as u64 * PER_SHELL_KIB;
    assert!(
        peak <= bound,
        "peak RSS {peak} KiB over {bound} KiB (baseline {baseline} KiB)"
    );
    assert!(manager.memory().peak_bytes() <= BUDGET);
    assert!(
        manager.memory().dropped_bytes() > 0,
        "the budget was reached"
    );

    for shell in &shells {
        let new = shell.read_unseen();
        // Whatever memory dropped is counted, and the output file has it.
        let shown = new.stdout.before_gap.len() + new.stdout.after_gap.len();
        assert_eq!(shown as u64 + new.stdout.dropped, PRINTED);
        let report = shell.spill_report(Stream::Stdout).expect("a spill file");
        assert!(report.is_whole() && report.written == PRINTED, "{report:?}");
    }
    manager.kill_all(Duration::ZERO).await;
    for shell in &shells {
        shell.read_unseen();
    }
    assert_eq!(manager.memory().held_bytes(), 0);
    // The allocator gives the memory back on a thread of its own.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut after = rss_kib();
    while after > baseline + 20 * 1024 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = rss_kib();
    }
    assert!(
        after <= baseline + 20 * 1024,
        "RSS {after} KiB after reading and ending, baseline {baseline} KiB"
    );
}
