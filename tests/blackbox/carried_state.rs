//! The `cd`/`export` state a command leaves comes back over a channel the
//! command cannot redirect: whatever it plants where the state once went,
//! or writes into (or closes) every descriptor it has, the server answers
//! in time, keeps its memory, and later honest calls carry as usual.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use serde_json::json;

use crate::rmcp_support::{call, mcp_command, serve, text};

pub(crate) type Client = RunningService<RoleClient, ()>;

/// A server over a fresh temp dir (with a `sub` directory) started with
/// `flags`; the client, its pid, the dir and its canonical path.
async fn connect(flags: &[&str]) -> (Client, u32, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    std::fs::create_dir(root.join("sub")).expect("mkdir");
    let mut command = mcp_command(&root);
    command.args(flags);
    let (client, pid) = serve((), command).await;
    (client, pid, dir, root)
}

/// A call that must be answered within 20 s (a server that reads a
/// planted path blocks or fills its memory instead).
pub(crate) async fn bash(client: &Client, command: &str) -> CallToolResult {
    tokio::time::timeout(
        Duration::from_secs(20),
        call(client, "Bash", json!({ "command": command })),
    )
    .await
    .unwrap_or_else(|_| panic!("no answer within 20 s to {command:?}"))
}

/// The resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let kib = test_support::status_kib(&pid.to_string(), "VmRSS");
    assert!(kib > 0, "no VmRSS for pid {pid}");
    kib
}

/// Plants, for the next 400 calls, every kind of file the state was once
/// read from (in the server's temp dir and its old `state/` dir): links
/// to `/dev/zero` and `/proc/self/fd/0`, and forged records setting `PATH`.
fn plant(temp: &std::path::Path) -> String {
    format!(
        "T='{}'; mkdir -p \"$T/state\"; \
         for i in $(seq 0 400); do for d in \"$T/state\" \"$T\"; do \
           case $((i % 3)) in \
             0) ln -sfn /proc/self/fd/0 \"$d/bash-$i.state\" ;; \
             1) ln -sfn /dev/zero \"$d/bash-$i.state\" ;; \
             2) printf '/\\0declare -x PATH=\"/evil\"\\n\\0agent-exec-state-end\\0' > \"$d/bash-$i.state\" ;; \
           esac; done; done; cd sub; export PLANTED=1",
        temp.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_redirect_the_state_or_stall_the_server() {
    let (client, pid, _dir, root) = connect(&["--sandbox", "off"]).await;
    let temp = crate::server_temp_dirs(pid)
        .pop()
        .expect("the server's temp dir");
    assert!(text(&bash(&client, "export A=1").await).is_empty());
    let rss_before = rss_kib(pid);

    // Paths where the state once went: they are no longer read.
    let started = Instant::now();
    let planted = bash(&client, &plant(&temp)).await;
    assert_eq!(
        text(&planted),
        format!("[cwd now {}]", root.join("sub").display())
    );
    assert_eq!(
        text(&bash(&client, "cd ..; echo $PLANTED").await),
        format!("1\n[cwd now {}]", root.display())
    );

    // 100 MiB into every descriptor above 2: the state is refused unread.
    let flooded = bash(
        &client,
        "for f in /proc/$$/fd/*; do n=${f##*/}; \
           [ \"$n\" -gt 2 ] && head -c 104857600 /dev/zero >&\"$n\"; \
         done 2>/dev/null; cd sub; export B=2",
    )
    .await;
    assert!(
        text(&flooded).contains("[cd/export not kept: the state the shell wrote is over 1 MiB"),
        "{}",
        text(&flooded)
    );

    // Every descriptor above 2 closed: nothing saved, nothing waits.
    let closed = bash(
        &client,
        "for f in /proc/$$/fd/*; do n=${f##*/}; [ \"$n\" -gt 2 ] && eval \"exec $n>&-\"; done 2>/dev/null; \
         cd sub; export C=3",
    )
    .await;
    assert!(
        text(&closed).contains("[cd/export not kept:"),
        "{}",
        text(&closed)
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );

    // The server kept its memory, and honest calls carry as before.
    let grown = rss_kib(pid).saturating_sub(rss_before);
    assert!(grown < 100 * 1024, "the server grew by {grown} KiB");
    bash(&client, "cd sub && export D=4").await;
    let after = bash(&client, "pwd; echo \"$A $B $C $D\"; echo \"$PATH\"").await;
    let answer = text(&after);
    let mut lines = answer.lines();
    assert_eq!(lines.next(), root.join("sub").to_str(), "{answer}");
    assert_eq!(lines.next(), Some("1   4"), "{answer}");
    assert_ne!(lines.next(), Some("/evil"), "{answer}");
    client.cancel().await.expect("closes");
}

/// Under `read-only` the channel needs no writable path: `cd` and
/// `export` carry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cd_and_export_carry_under_read_only() {
    let (client, _pid, _dir, root) = connect(&["--sandbox", "read-only"]).await;
    let moved = bash(&client, "cd sub; export R=1").await;
    assert_eq!(
        text(&moved),
        format!("[cwd now {}]", root.join("sub").display())
    );
    assert_eq!(
        text(&bash(&client, "pwd; echo $R").await),
        format!("{}\n1\n", root.join("sub").display())
    );
    client.cancel().await.expect("closes");
}
