//! Exports that some program would turn into code in a later call do not
//! carry over to it (docs/decisions/0019): the call that sets them says
//! so, and the next call's environment does not have them, while ordinary
//! exports and a `PATH` that only appends carry.

use crate::carried_state::bash;
use crate::rmcp_support::{mcp_command, serve, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_that_turn_into_code_do_not_carry_over() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let mut command = mcp_command(&root);
    command.args(["--sandbox", "off"]);
    let (client, _pid) = serve((), command).await;

    let set = bash(
        &client,
        "export GIT_CONFIG_PARAMETERS=\"'core.fsmonitor'='touch pwned'\" \
         TAR_OPTIONS=--to-command=true LESSOPEN='|true %s' GIT_EXTERNAL_DIFF=true \
         GIT_EDITOR=true PAGER=true LD_PRELOAD=/nonexistent.so FOO=1 \
         PATH=\"$PATH:/opt/extra\"",
    )
    .await;
    let note = text(&set);
    for name in [
        "GIT_CONFIG_PARAMETERS",
        "TAR_OPTIONS",
        "LESSOPEN",
        "GIT_EXTERNAL_DIFF",
        "GIT_EDITOR",
        "PAGER",
        "LD_PRELOAD",
    ] {
        assert!(
            note.contains("[not carried over to later calls:") && note.contains(name),
            "{name}: {note}"
        );
    }
    assert!(!note.contains("FOO") && !note.contains("PATH,"), "{note}");

    let later = bash(
        &client,
        "env | grep -E '^(GIT_|TAR_OPTIONS|LESSOPEN|LD_PRELOAD|FOO)=|^PAGER=true$' | sort; \
         case \":$PATH:\" in *:/opt/extra:*) echo appended ;; esac",
    )
    .await;
    // (The server's own `PAGER=cat` stays: only the command's value is dropped.)
    assert_eq!(text(&later), "FOO=1\nappended\n");

    // A directory put before the existing PATH does not carry either.
    let first = bash(&client, "export PATH=\"/opt/first:$PATH\"").await;
    assert!(
        text(&first).contains("[not carried over to later calls: PATH"),
        "{}",
        text(&first)
    );
    let path = bash(&client, "echo \"$PATH\"").await;
    assert!(!text(&path).starts_with("/opt/first"), "{}", text(&path));
    client.cancel().await.expect("closes");
}
