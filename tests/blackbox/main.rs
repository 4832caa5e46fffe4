//! Black-box tests of the `agent-exec` binary: only its command line,
//! stdout, stderr and exit code are used.

#![cfg(unix)]
#![allow(
    clippy::disallowed_methods,
    reason = "black-box tests start the binary under test directly"
)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test helper that cannot go on should fail the test loudly"
)]

mod answer_shape;
mod approvals;
mod audit;
mod containment;
mod escapes;
mod log;
mod mcp;
mod policy_check;
mod reliability;
mod rmcp_client;
mod rmcp_support;
mod run;
mod sandbox;
mod schema;
mod session;
mod stale;
mod tty;

use std::process::{Command, Output};

pub(crate) use test_support::alive;

/// Runs the binary with `args` and waits for it.
pub(crate) fn agent_exec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(args)
        .output()
        .expect("the agent-exec binary starts")
}

/// Stdout as text.
pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

/// Stderr as text.
pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}
