//! Helpers shared by the shell-runtime test files.
#![allow(
    dead_code,
    unused_imports,
    unreachable_pub,
    reason = "test helpers shared by several test crates"
)]

use shell_runtime::SpawnSpec;

/// `bash -c COMMAND` in the temp dir with this process's environment.
pub fn spec(command: &str) -> SpawnSpec {
    SpawnSpec::shell(command, std::env::temp_dir()).with_env(std::env::vars_os())
}

pub use test_support::{alive, gone, numbers_in, pids_in, read_pid};
