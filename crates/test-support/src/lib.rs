//! Helpers shared by the tests and benchmarks of every crate of the
//! workspace: processes looked up by pid, waits on events with generous
//! deadlines, percentiles, a shell's spawn spec ([`spec`]), a stub tool, the table of escape sequences cleaners are
//! checked against ([`mod@escapes`]), and the figures benchmarks report
//! ([`mod@bench`]). A dev-dependency only (`cargo xtask check-layers` refuses
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
pub mod escapes;
pub mod jail;
pub mod mcp;
mod process;
mod stub;

pub use process::{
    alive, child_where, children_of, gone, is_root, kill_pids, numbers_in, pids_in,
    processes_naming, processes_where, read_pid, read_pid_blocking, scan_processes, status_kib,
    wait_gone,
};
pub use stub::{Echo, EchoParams};

use std::time::Duration;

use shell_runtime::SpawnSpec;

/// `bash -c COMMAND` in the temp dir with this process's environment: the
/// spawn spec shell-runtime's tests, benchmarks and examples start from.
pub fn spec(command: &str) -> SpawnSpec {
    SpawnSpec::shell(command, std::env::temp_dir()).with_env(std::env::vars_os())
}

/// `text` fed to shell-runtime's streaming terminal cleaner in pieces cut
/// at `cuts` (clamped to the text, those inside a character dropped): what
/// a tty output file holds, and what any chunking must agree with.
pub fn clean_in_pieces(text: &str, cuts: &[usize]) -> String {
    let mut cuts: Vec<usize> = cuts
        .iter()
        .map(|cut| (*cut).min(text.len()))
        .filter(|cut| text.is_char_boundary(*cut))
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut cleaner = shell_runtime::TerminalText::new();
    let mut out = String::new();
    let mut start = 0;
    for cut in cuts {
        cleaner.push(&text[start..cut], &mut out);
        start = cut;
    }
    cleaner.push(&text[start..], &mut out);
    cleaner.finish(&mut out);
    out
}

/// A guard each command that signals broadly (`kill -9 -1`) starts with:
/// it goes on only as PID 2 (a sandbox's shell, its init being PID 1) with
/// the given host pids invisible, so a namespace that failed to appear can
/// never let it loose on the host.
pub fn only_in_a_namespace(host_pids: &[u32]) -> String {
    let mut guard = String::from("[ \"$$\" = 2 ] || { echo 'not in a namespace'; exit 99; }; ");
    for pid in host_pids {
        guard.push_str(&format!(
            "[ -e /proc/{pid} ] && {{ echo 'host pid {pid} visible'; exit 99; }}; "
        ));
    }
    guard
}

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
    fn the_namespace_guard_checks_pid_2_and_every_host_pid() {
        let guard = only_in_a_namespace(&[41, 4242]);
        assert!(guard.starts_with("[ \"$$\" = 2 ] || {"), "{guard}");
        assert!(guard.contains("[ -e /proc/41 ] && { echo 'host pid 41 visible'; exit 99; }; "));
        assert!(guard.contains("[ -e /proc/4242 ] &&"), "{guard}");
        assert!(guard.ends_with("; "), "a command can follow: {guard}");
    }

    #[test]
    fn percentiles_pick_by_rank() {
        let mut samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        assert_eq!(percentile(&mut samples, 50), Duration::from_millis(51));
        assert_eq!(percentile(&mut samples, 99), Duration::from_millis(100));
        assert_eq!(percentile(&mut samples, 100), Duration::from_millis(100));
        assert_eq!(percentile(&mut samples, 0), Duration::from_millis(1));
    }
}

/// A small tmpfs mounted on a fresh temp directory, for tests of what
/// happens when the disk is full; unmounted when dropped. Needs root (CI
/// runs as root); `None` elsewhere, and the test says it was skipped.
#[derive(Debug)]
pub struct SmallDisk {
    dir: std::path::PathBuf,
}

impl SmallDisk {
    /// A tmpfs of `kib` KiB, or `None` where it cannot be mounted.
    #[expect(
        clippy::disallowed_methods,
        reason = "a test fixture runs mount(8), as a person setting up the fault would"
    )]
    pub fn mount(kib: u64) -> Option<Self> {
        let dir = std::env::temp_dir().join(format!(
            "agent-exec-small-disk-{}-{}",
            std::process::id(),
            DISKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).ok()?;
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(&dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            let _ = std::fs::remove_dir(&dir);
            #[expect(clippy::print_stderr, reason = "a skipped test says so")]
            {
                eprintln!("skipped: cannot mount a tmpfs here (needs root)");
            }
            return None;
        }
        Some(Self { dir })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &std::path::Path {
        &self.dir
    }
}

static DISKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Drop for SmallDisk {
    #[expect(clippy::disallowed_methods, reason = "a test fixture runs umount(8)")]
    fn drop(&mut self) {
        // Lazy: a process still holding a file there must not keep it mounted.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}
