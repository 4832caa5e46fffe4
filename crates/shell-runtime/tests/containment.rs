//! What no command keeps, sandboxed or not: `CAP_SYS_PTRACE`, with which it
//! could attach to the server or read its memory; and what no output
//! shows: tokens in the formats given, however the pipe cuts them.
#![cfg(target_os = "linux")]
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::sync::Arc;

use common::spec;
use shell_runtime::{Confinement, ConfinementSpec, Redactions, ShellProcess, Stream, TokenPattern};

const CAP_SYS_PTRACE: u64 = 1 << 19;
const CAP_SETPCAP: u64 = 1 << 8;

/// `CapInh`, `CapPrm`, `CapEff`, `CapBnd` and `CapAmb` from a
/// `/proc/PID/status` text, in that order.
fn capability_sets(status: &str) -> [u64; 5] {
    let set = |name: &str| {
        let line = status
            .lines()
            .find(|line| line.starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} in {status}"));
        u64::from_str_radix(line[name.len() + 1..].trim(), 16).expect("hex")
    };
    ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"].map(set)
}

async fn command_capabilities(confinement: Option<Arc<Confinement>>) -> [u64; 5] {
    let mut spawn = spec("cat /proc/self/status");
    spawn.confinement = confinement;
    let shell = ShellProcess::spawn(spawn).await.expect("spawns");
    shell.wait().await;
    capability_sets(&shell.snapshot(Stream::Stdout).render())
}

fn check_without_ptrace(ours: [u64; 5], theirs: [u64; 5]) {
    let names = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"];
    for (index, name) in names.iter().enumerate() {
        if *name == "CapBnd" && ours[2] & CAP_SETPCAP == 0 {
            // Without CAP_SETPCAP the bounding set cannot be changed (and
            // holds nothing a command could use without a set-user-ID program).
            continue;
        }
        assert_eq!(
            theirs[index] & CAP_SYS_PTRACE,
            0,
            "{name}: {:#x}",
            theirs[index]
        );
    }
    // Only that one capability goes: the bounding set keeps the others.
    assert_eq!(theirs[3] | CAP_SYS_PTRACE, ours[3] | CAP_SYS_PTRACE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_without_cap_sys_ptrace_sandboxed_or_not() {
    let ours = capability_sets(&std::fs::read_to_string("/proc/self/status").expect("status"));
    check_without_ptrace(ours, command_capabilities(None).await);
    let dir = tempfile::tempdir().expect("temp dir");
    match Confinement::prepare(&ConfinementSpec {
        restrict_writes: true,
        writable: vec![dir.path().to_path_buf()],
        ..ConfinementSpec::default()
    }) {
        Ok(confinement) => {
            check_without_ptrace(
                ours,
                command_capabilities(Some(Arc::new(confinement))).await,
            );
        }
        Err(error) => eprintln!("sandboxed half skipped: {error}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_redacted_from_a_stream_cut_anywhere() {
    let format = secret_formats::FORMATS
        .iter()
        .find(|format| format.id == "github-token")
        .expect("a GitHub format");
    let github = TokenPattern::new(format).expect("compiles");
    let token = "ghp_R4nd0mL00k1ngT0k3nW1thTh1rtySixChr5x";
    let (first, second) = token.split_at(9);
    // Three writes, a pause between them: the reader sees the token cut.
    let mut redacted = spec(&format!(
        "printf 'a {first}'; sleep 0.05; printf '{second}'; sleep 0.05; printf ' b\\n'"
    ));
    redacted.replacements = Some(Arc::new(Redactions::new([], vec![github])));
    let shell = ShellProcess::spawn(redacted).await.expect("spawns");
    shell.wait().await;
    assert_eq!(
        shell.snapshot(Stream::Stdout).render(),
        "a [REDACTED:github-token] b\n"
    );
}
