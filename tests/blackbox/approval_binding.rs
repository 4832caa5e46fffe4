//! A remembered approval binds to the effect, not the words: after
//! approve-and-remember of `./deploy.sh`, the same words ask again when
//! the script's content, a symlink it goes through, `HOME`, `PATH`, the
//! directory, a sourced file, a function of the same name, an environment
//! prefix or a hard link changed; the unchanged repeat runs unasked.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use rmcp::RoleClient;
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use crate::question_display::{Asker, connect_with_policy};
use crate::rmcp_support::{call, text};

const POLICY: &str = r#"
[[rule]]
id = "deploy-asks"
decision = "ask"
program = "deploy.sh"
reason = "deploys"

[[rule]]
id = "deploy-by-name-asks"
decision = "ask"
program = "deploy"
reason = "deploys"

[[rule]]
id = "source-asks"
decision = "ask"
program = "source"
reason = "runs a script in the shell"
"#;

type Service = RunningService<RoleClient, Asker>;

/// A server with the policy, and its client.
async fn start(root: &Path) -> (Service, Asker) {
    let policy = root.join("policy.toml");
    std::fs::write(&policy, POLICY).expect("policy");
    let client = Asker::new(None);
    let service = connect_with_policy(root, &policy, &client, &[]).await;
    (service, client)
}

/// Writes an executable script.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A fresh directory `name` under `root` with `deploy.sh` touching `ran`.
fn case(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir(&dir).expect("mkdir");
    script(&dir.join("deploy.sh"), "touch ran");
    dir
}

/// Runs `command` in `workdir` with the person answering `answer`
/// (accept with `remember`, or decline with `None`); whether a question
/// was asked, and the answer.
async fn run(
    service: &Service,
    client: &Asker,
    command: &str,
    workdir: &Path,
    answer: Option<bool>,
) -> (bool, CallToolResult) {
    *client.answer.lock().expect("lock") = answer.map(|remember| json!({ "remember": remember }));
    let before = client.count();
    let result = call(
        service,
        "Bash",
        json!({ "command": command, "workdir": workdir.to_str().expect("utf-8") }),
    )
    .await;
    (client.count() > before, result)
}

fn approved_by(result: &CallToolResult) -> Value {
    result
        .structured_content
        .as_ref()
        .and_then(|meta| meta.get("approved_by"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// What the repeat after the change runs, when not the same words in the
/// same directory.
#[derive(Default, Clone, Copy)]
struct Then<'a> {
    command: Option<&'a str>,
    dir: Option<&'a Path>,
}

/// Approves `command` with `remember`, checks the unchanged repeat runs
/// unasked (the look-alike), then `change`s something and checks the same
/// words ask again (declined: nothing runs).
async fn remembered_then_changed(
    service: &Service,
    client: &Asker,
    label: &str,
    command: &str,
    dir: &Path,
    change: impl AsyncFnOnce(),
    then: Then<'_>,
) {
    let (asked, first) = run(service, client, command, dir, Some(true)).await;
    assert!(asked, "{label}: the first run asks");
    assert_eq!(first.is_error, Some(false), "{label}: {}", text(&first));
    let (asked, again) = run(service, client, command, dir, None).await;
    assert!(!asked, "{label}: the unchanged repeat asks again");
    assert_eq!(
        approved_by(&again),
        "remembered",
        "{label}: {}",
        text(&again)
    );
    change().await;
    let _ = std::fs::remove_file(dir.join("ran"));
    let command = then.command.unwrap_or(command);
    let dir = then.dir.unwrap_or(dir);
    let (asked, changed) = run(service, client, command, dir, None).await;
    assert!(
        asked,
        "{label}: ran unasked after the change: {}",
        text(&changed)
    );
    assert_eq!(changed.is_error, Some(true), "{label}: {}", text(&changed));
    assert!(!dir.join("ran").exists(), "{label}: it ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_approval_holds_only_for_the_same_effect() {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(temp.path()).expect("canonical");
    let (service, client) = start(&root).await;

    // (a) The script's content changes.
    let dir = case(&root, "a");
    let change = async || script(&dir.join("deploy.sh"), "touch ran; touch more");
    remembered_then_changed(
        &service,
        &client,
        "content",
        "./deploy.sh",
        &dir,
        change,
        Then::default(),
    )
    .await;

    // (b) A symlink it goes through is re-pointed (at the same content).
    let dir = root.join("b");
    std::fs::create_dir(&dir).expect("mkdir");
    script(&dir.join("v1.sh"), "touch ran");
    script(&dir.join("v2.sh"), "touch ran");
    std::os::unix::fs::symlink("v1.sh", dir.join("deploy.sh")).expect("link");
    let change = async || {
        std::fs::remove_file(dir.join("deploy.sh")).expect("unlink");
        std::os::unix::fs::symlink("v2.sh", dir.join("deploy.sh")).expect("link");
    };
    remembered_then_changed(
        &service,
        &client,
        "symlink",
        "./deploy.sh",
        &dir,
        change,
        Then::default(),
    )
    .await;

    // (e) The same words from another directory with the same script.
    let dir = case(&root, "e1");
    let other = case(&root, "e2");
    let change = async || {};
    remembered_then_changed(
        &service,
        &client,
        "directory",
        "./deploy.sh",
        &dir,
        change,
        Then {
            dir: Some(&other),
            ..Then::default()
        },
    )
    .await;

    // (f) `source` of a different file under the same name.
    let dir = root.join("f");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("lib.sh"), "touch ran\n").expect("write");
    std::fs::write(dir.join("other.sh"), "touch ran; touch other\n").expect("write");
    let change = async || std::fs::rename(dir.join("other.sh"), dir.join("lib.sh")).expect("mv");
    remembered_then_changed(
        &service,
        &client,
        "source",
        "source lib.sh",
        &dir,
        change,
        Then::default(),
    )
    .await;

    // (g) A function of the same name runs instead of the script.
    let dir = case(&root, "g");
    let change = async || {};
    remembered_then_changed(
        &service,
        &client,
        "function",
        "./deploy.sh",
        &dir,
        change,
        Then {
            command: Some("function ./deploy.sh { touch ran; }; ./deploy.sh"),
            ..Then::default()
        },
    )
    .await;

    // (h) The same words behind an environment prefix.
    let dir = case(&root, "h");
    let change = async || {};
    remembered_then_changed(
        &service,
        &client,
        "env prefix",
        "./deploy.sh",
        &dir,
        change,
        Then {
            command: Some("FOO=1 ./deploy.sh"),
            ..Then::default()
        },
    )
    .await;

    // (i) A hard link swapped for one to another file.
    let dir = root.join("i");
    std::fs::create_dir(&dir).expect("mkdir");
    script(&dir.join("real1.sh"), "touch ran");
    script(&dir.join("real2.sh"), "touch ran; touch swapped");
    std::fs::hard_link(dir.join("real1.sh"), dir.join("deploy.sh")).expect("link");
    let change = async || {
        std::fs::remove_file(dir.join("deploy.sh")).expect("unlink");
        std::fs::hard_link(dir.join("real2.sh"), dir.join("deploy.sh")).expect("link");
    };
    remembered_then_changed(
        &service,
        &client,
        "hard link",
        "./deploy.sh",
        &dir,
        change,
        Then::default(),
    )
    .await;
    assert!(!dir.join("swapped").exists());
    service.cancel().await.expect("closed");

    // (c) HOME changes (a session of its own: the export is carried).
    let (service, client) = start(&root).await;
    let dir = case(&root, "c");
    let change = async || {
        let (asked, _) = run(
            &service,
            &client,
            "export HOME=/nonexistent-home",
            &dir,
            None,
        )
        .await;
        assert!(!asked);
    };
    remembered_then_changed(
        &service,
        &client,
        "HOME",
        "./deploy.sh",
        &dir,
        change,
        Then::default(),
    )
    .await;
    service.cancel().await.expect("closed");

    // (d) PATH changes so `deploy` is found elsewhere (same content).
    let (service, client) = start(&root).await;
    let dir = root.join("d");
    for bin in ["bin1", "bin2"] {
        std::fs::create_dir_all(dir.join(bin)).expect("mkdir");
        script(&dir.join(bin).join("deploy"), "touch ran");
    }
    let export = |bin: &str| format!("export PATH={}:\"$PATH\"", dir.join(bin).display());
    let (asked, _) = run(&service, &client, &export("bin1"), &dir, None).await;
    assert!(!asked);
    let change = async || {
        let (asked, _) = run(&service, &client, &export("bin2"), &dir, None).await;
        assert!(!asked);
    };
    remembered_then_changed(
        &service,
        &client,
        "PATH",
        "deploy",
        &dir,
        change,
        Then::default(),
    )
    .await;
    service.cancel().await.expect("closed");
}

/// `save` appends an `allow` rule to the policy file: it holds after a
/// restart with the same file, the file still loads, and a command with
/// other arguments still asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_approval_is_a_rule_that_survives_a_restart() {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(temp.path()).expect("canonical");
    let policy = root.join("policy.toml");
    std::fs::write(&policy, "# the person's own policy\n").expect("policy");
    // Deletes only the fresh temp file it makes; its target is known only
    // at run time, so the built-in rule asks.
    let command = "X=$(mktemp) && rm -rf \"$X\" && touch ran";
    let other = "X=$(mktemp) && rm -rf \"$X\" \"$X\" && touch ran";

    let client = Asker::new(Some(json!({ "save": true })));
    let service = connect_with_policy(&root, &policy, &client, &[]).await;
    let answer = call(
        &service,
        "Bash",
        json!({ "command": command, "workdir": root.to_str().expect("utf-8") }),
    )
    .await;
    assert_eq!(client.count(), 1, "{}", text(&answer));
    let body = text(&answer);
    assert!(
        body.contains("[approval saved as rule saved-1 in "),
        "{body}"
    );
    assert_eq!(answer.is_error, Some(false), "{body}");
    let written = std::fs::read_to_string(&policy).expect("read");
    assert!(
        written.starts_with("# the person's own policy\n"),
        "{written}"
    );
    assert!(written.contains("decision = \"allow\""), "{written}");
    service.cancel().await.expect("closed");

    // Restarted with the same file: it runs unasked; other arguments ask.
    let client = Asker::new(None);
    let service = connect_with_policy(&root, &policy, &client, &[]).await;
    std::fs::remove_file(root.join("ran")).expect("ran before");
    let (asked, again) = run(&service, &client, command, &root, None).await;
    assert!(!asked, "{}", text(&again));
    assert_eq!(again.is_error, Some(false), "{}", text(&again));
    assert!(root.join("ran").exists());
    let (asked, differs) = run(&service, &client, other, &root, None).await;
    assert!(asked, "{}", text(&differs));
    service.cancel().await.expect("closed");

    // The file loads and its examples hold, as `policy check` reads it.
    let check = |command: &str| {
        crate::agent_exec(&[
            "policy",
            "check",
            "--policy",
            policy.to_str().expect("utf-8"),
            "--",
            command,
        ])
        .status
        .code()
    };
    assert_eq!(check(command), Some(0));
    assert_eq!(check(other), Some(3));
}
