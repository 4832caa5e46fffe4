//! The session's working directory through `agent-exec mcp`: a directory
//! deleted under it, `workdir`, where a `cd` leaves the next call, and the
//! processes a background shell leaves behind.

use std::path::{Path, PathBuf};

use rmcp::RoleClient;
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use serde_json::json;
use test_support::{gone, read_pid};

use crate::rmcp_support::{call, mcp_command, serve, text};

type Client = RunningService<RoleClient, ()>;

/// A server over a fresh temp dir; the client, the dir and its canonical path.
async fn connect() -> (Client, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    // Without containment: several tests read their commands' pids from the host.
    let mut command = mcp_command(&root);
    command.args(["--sandbox", "off"]);
    let client = serve((), command).await.0;
    (client, dir, root)
}

async fn bash(client: &Client, command: &str) -> CallToolResult {
    call(client, "Bash", json!({ "command": command })).await
}

fn shown(path: &Path) -> &str {
    path.to_str().expect("utf-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_working_directory_moves_the_session_to_its_nearest_existing_ancestor() {
    let (client, _dir, root) = connect().await;
    let (a, tmp) = (root.join("a"), root.join("a/tmp"));
    let entered = bash(&client, "mkdir -p a/tmp && cd a/tmp").await;
    assert_eq!(entered.is_error, Some(false), "{}", text(&entered));
    // Deleted by a command that cannot change the session (no state read).
    let removed = bash(&client, "rmdir ../tmp").await;
    assert_eq!(removed.is_error, Some(false), "{}", text(&removed));

    let next = bash(&client, "pwd").await;
    assert_eq!(next.is_error, Some(false), "{}", text(&next));
    assert_eq!(
        text(&next),
        format!(
            "{}\n[cwd {} no longer exists: now in {}]",
            shown(&a),
            shown(&tmp),
            shown(&a)
        )
    );
    // Said once: the session is in the ancestor now, for `cd ..` too.
    assert_eq!(
        text(&bash(&client, "pwd").await),
        format!("{}\n", shown(&a))
    );
    let up = bash(&client, "cd .. && pwd").await;
    assert_eq!(
        text(&up),
        format!("{}\n[cwd now {}]", shown(&root), shown(&root))
    );

    // Deleted by the very command that ended in it: never "outside the roots".
    let gone_with = bash(&client, "mkdir b && cd b && rmdir ../b").await;
    let answer = text(&gone_with);
    assert_eq!(gone_with.is_error, Some(false), "{answer}");
    assert!(!answer.contains("outside"), "{answer}");
    assert_eq!(
        answer,
        format!(
            "[cwd {} no longer exists: now in {}]",
            shown(&root.join("b")),
            shown(&root)
        )
    );
    assert_eq!(
        text(&bash(&client, "pwd").await),
        format!("{}\n", shown(&root))
    );
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workdir_runs_one_command_elsewhere_and_leaves_the_session_where_it_was() {
    let (client, _dir, root) = connect().await;
    let sub = root.join("sub");
    std::fs::create_dir(&sub).expect("mkdir");

    let relative = call(
        &client,
        "Bash",
        json!({ "command": "pwd; cd ..; export FROM_WORKDIR=1", "workdir": "sub" }),
    )
    .await;
    assert_eq!(text(&relative), format!("{}\n", shown(&sub)));
    // The directory stays; the export carries over as any other.
    assert_eq!(
        text(&bash(&client, "pwd; echo $FROM_WORKDIR").await),
        format!("{}\n1\n", shown(&root))
    );
    let absolute = call(
        &client,
        "Bash",
        json!({ "command": "pwd", "workdir": shown(&sub) }),
    )
    .await;
    assert_eq!(text(&absolute), format!("{}\n", shown(&sub)));

    // Refused before anything runs.
    let marker = root.join("ran");
    let touch = format!("touch {}", shown(&marker));
    for (workdir, why) in [
        ("..", "outside the allowed roots"),
        ("/", "outside the allowed roots"),
        ("nowhere", "does not exist"),
    ] {
        let refused = call(
            &client,
            "Bash",
            json!({ "command": touch, "workdir": workdir }),
        )
        .await;
        let answer = text(&refused);
        assert_eq!(refused.is_error, Some(true), "{workdir}: {answer}");
        assert!(
            answer.contains("workdir") && answer.contains(why),
            "{workdir}: {answer}"
        );
        assert!(!marker.exists(), "{workdir}: the command ran");
    }
    assert_eq!(
        text(&bash(&client, "pwd").await),
        format!("{}\n", shown(&root))
    );
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cd_carries_over_only_when_it_happened_and_the_answer_says_where_the_next_call_starts() {
    let (client, _dir, root) = connect().await;
    let sub = root.join("sub");
    std::fs::create_dir(&sub).expect("mkdir");

    let failed_cd = bash(&client, "cd nowhere").await;
    let answer = text(&failed_cd);
    assert_eq!(failed_cd.is_error, Some(true), "{answer}");
    assert!(
        answer.contains("cd: nowhere: No such file or directory"),
        "{answer}"
    );
    assert!(!answer.contains("[cwd"), "{answer}");
    assert_eq!(
        text(&bash(&client, "pwd").await),
        format!("{}\n", shown(&root))
    );

    // The command failed, but its `cd` happened: it carries, and says so.
    let failed_after = bash(&client, "cd sub && false").await;
    let answer = text(&failed_after);
    assert_eq!(failed_after.is_error, Some(true), "{answer}");
    assert!(
        answer.ends_with(&format!("\n[cwd now {}]", shown(&sub))),
        "{answer}"
    );
    assert_eq!(
        text(&bash(&client, "pwd").await),
        format!("{}\n", shown(&sub))
    );

    // A `cd` that never ran carries nothing, and nothing is said.
    let never = bash(&client, "false && cd ..").await;
    assert!(!text(&never).contains("[cwd"), "{}", text(&never));
    let back_again = bash(&client, "cd .. && cd sub").await;
    assert!(!text(&back_again).contains("[cwd"), "{}", text(&back_again));
    assert_eq!(
        text(&bash(&client, "pwd").await),
        format!("{}\n", shown(&sub))
    );
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_shells_detached_children_are_ended_and_named_in_its_answer() {
    let (client, _dir, root) = connect().await;
    let command = "setsid -f sh -c 'echo $$ > one.pid; exec sleep 1000'; \
         nohup sh -c 'echo $$ > two.pid; exec sleep 1000' > /dev/null 2>&1 & \
         while [ ! -s one.pid ] || [ ! -s two.pid ]; do sleep 0.05; done; echo started";
    let started = call(
        &client,
        "Bash",
        json!({ "command": command, "run_in_background": true }),
    )
    .await;
    let id = started.structured_content.as_ref().expect("metadata")["bash_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let pids = [
        read_pid(&root.join("one.pid")).await,
        read_pid(&root.join("two.pid")).await,
    ];
    let read = call(
        &client,
        "BashOutput",
        json!({ "bash_id": id, "wait_ms": 20000 }),
    )
    .await;
    let answer = text(&read);
    assert!(answer.starts_with("Status: completed"), "{answer}");
    assert!(
        answer.ends_with(
            "started\n[ended 2 process(es) the shell left running; see [processes] keep]"
        ),
        "{answer}"
    );
    for pid in pids {
        assert!(gone(pid).await, "{pid} still runs");
    }
    client.cancel().await.expect("closes");
}
