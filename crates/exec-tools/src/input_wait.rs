//! Waiting for a terminal's program to wait for input, as `Bash`
//! (`tty: true`) and `BashOutput` (`block`) do: shared by both tools, so
//! neither imports the other's internals.

use std::time::Duration;

use shell_runtime::ShellProcess;

/// How long a terminal stays quiet before its foreground group's reads
/// count as waiting for input (CONTRACT.md, Interactive sessions).
pub(crate) const INPUT_QUIET: Duration = Duration::from_millis(300);

/// How often a quiet terminal is checked for a wait for input: well inside
/// the 2 s the contract allows between the wait's start and the answer.
const INPUT_POLL: Duration = Duration::from_millis(100);

/// Resolves once `shell` waits for terminal input (never for a shell
/// without a terminal). `/proc` is read only while the shell is quiet.
pub(crate) async fn input_wait(shell: &ShellProcess) {
    let mut events = shell.subscribe_output();
    loop {
        let quiet_left = INPUT_QUIET.saturating_sub(shell.quiet_for());
        if !quiet_left.is_zero() {
            match tokio::time::timeout(quiet_left, events.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return std::future::pending().await,
                Err(_quiet) => {}
            }
        }
        if shell.waits_for_input(INPUT_QUIET) {
            return;
        }
        if !shell.is_running() || !shell.has_terminal() {
            return std::future::pending().await;
        }
        if let Ok(Err(_)) = tokio::time::timeout(INPUT_POLL, events.changed()).await {
            return std::future::pending().await;
        }
    }
}
