//! Helpers shared by the tests and benchmarks of every crate of the
//! workspace: processes looked up by pid, waits on events with generous
//! deadlines, percentiles, a stub tool, and the figures benchmarks report
//! ([`bench`]). A dev-dependency only (`cargo xtask check-layers` refuses
//! it as a normal one, except for xtask, which reads the figures).
//!
//! Test helpers panic with a clear message when they cannot go on: that is
//! how a test fails.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "a test helper that cannot go on fails the test loudly"
)]

pub mod bench;
mod process;
mod stub;

pub use process::{alive, gone, numbers_in, pids_in, read_pid, read_pid_blocking, wait_gone};
pub use stub::{Echo, EchoParams};

use std::time::Duration;

/// `text` in single quotes, as bash reads it back literally (tests splice
/// paths into commands with it).
pub fn single_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The `pct` percentile of `samples` (sorted in place), nearest rank.
///
/// # Panics
/// When `samples` is empty.
pub fn percentile(samples: &mut [Duration], pct: usize) -> Duration {
    assert!(!samples.is_empty(), "a percentile of no samples");
    samples.sort();
    samples[(samples.len() * pct / 100).min(samples.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_by_rank() {
        let mut samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        assert_eq!(percentile(&mut samples, 50), Duration::from_millis(51));
        assert_eq!(percentile(&mut samples, 99), Duration::from_millis(100));
        assert_eq!(percentile(&mut samples, 100), Duration::from_millis(100));
        assert_eq!(percentile(&mut samples, 0), Duration::from_millis(1));
    }
}
