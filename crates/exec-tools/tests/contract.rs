//! The contract's behaviour beyond the seed scenarios: the persistent
//! session, leftovers, redaction, cancellation, progress, co-author trailers.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{World, meta, meta_str};
use serde_json::json;
use tool_core::{CancellationToken, ProgressSink, ProgressUpdate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cd_and_export_carry_over_to_later_calls() {
    let world = World::new();
    std::fs::create_dir(world.root().join("sub dir")).expect("mkdir");
    let first = world
        .bash("cd 'sub dir' && export GREETING='hello there'")
        .await;
    assert!(first.success, "{}", first.text());
    let second = world.bash("pwd; echo \"$GREETING\"").await;
    assert_eq!(
        second.text(),
        format!("{}\nhello there\n", world.root().join("sub dir").display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_survives_exit_and_set_e() {
    let world = World::new();
    std::fs::create_dir(world.root().join("a")).expect("mkdir");
    std::fs::create_dir(world.root().join("b")).expect("mkdir");
    let exited = world.bash("cd a; export ONE=1; exit 3").await;
    assert_eq!(meta(&exited, "exit_code"), 3);
    assert_eq!(
        world.bash("pwd; echo $ONE").await.text(),
        format!("{}\n1\n", world.root().join("a").display())
    );
    let failed = world
        .bash("set -e; cd ../b; export TWO=2; false; echo unreachable")
        .await;
    assert!(!failed.success);
    assert!(!failed.text().contains("unreachable"));
    assert_eq!(
        world.bash("pwd; echo $ONE $TWO").await.text(),
        format!("{}\n1 2\n", world.root().join("b").display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unset_variables_stay_unset() {
    let world = World::new();
    world.bash("export GONE_SOON=x").await;
    world.bash("unset GONE_SOON").await;
    assert_eq!(
        world.bash("echo \"[${GONE_SOON-unset}]\"").await.text(),
        "[unset]\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cd_outside_the_roots_is_not_kept() {
    let world = World::new();
    let result = world.bash("cd / && echo moved").await;
    assert!(result.success);
    assert_eq!(
        result.text(),
        "moved\n[cwd not kept: / is outside the allowed roots]"
    );
    assert_eq!(
        world.bash("pwd").await.text(),
        format!("{}\n", world.root().display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_command_leaves_the_session_alone() {
    let world = World::new();
    std::fs::create_dir(world.root().join("elsewhere")).expect("mkdir");
    let result = world
        .call(
            "Bash",
            json!({ "command": "cd elsewhere; export LOST=1; sleep 30", "timeout": 1000 }),
        )
        .await;
    assert!(!result.success);
    assert_eq!(
        world.bash("pwd; echo \"[$LOST]\"").await.text(),
        format!("{}\n[]\n", world.root().display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_shells_start_from_the_session() {
    let world = World::new();
    std::fs::create_dir(world.root().join("work")).expect("mkdir");
    world.bash("cd work && export MODE=fast").await;
    let id = world.background("pwd; echo $MODE").await;
    let result = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    assert!(
        result.text().ends_with(&format!(
            "\n\n{}\nfast\n",
            world.root().join("work").display()
        )),
        "{}",
        result.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftover_background_jobs_are_ended_and_counted() {
    let world = World::new();
    let result = world.bash("sleep 1000 & echo $!; echo done").await;
    assert!(result.success);
    let text = result.text();
    assert!(
        text.ends_with("done\n[ended 1 background job(s) left by the command]"),
        "{text}"
    );
    let pid = common::pids_in(text)[0];
    assert!(common::gone(pid).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_of_the_server_never_show() {
    let secret = "sk-test-0123456789abcdef";
    let mut vars: Vec<(String, String)> = std::env::vars().collect();
    vars.push(("MY_SERVICE_API_KEY".into(), secret.into()));
    let world = World::with_env(vars, |config| config);
    // Scrubbed from the child's environment...
    let env = world.bash("echo \"[${MY_SERVICE_API_KEY-}]\"").await;
    assert_eq!(env.text(), "[]\n");
    // ...and redacted when a command finds the value elsewhere.
    let leak = format!("{}/.env", world.root().display());
    common::write(std::path::Path::new(&leak), &format!("KEY={secret}\n"));
    let shown = world.bash("cat .env; cat .env >&2").await;
    assert_eq!(
        shown.text(),
        "KEY=[REDACTED:MY_SERVICE_API_KEY]\n\n[stderr]\nKEY=[REDACTED:MY_SERVICE_API_KEY]\n"
    );
    let id = world.background("cat .env").await;
    let read = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    assert!(read.text().contains("[REDACTED:MY_SERVICE_API_KEY]") && !read.text().contains(secret));
    // A truncated answer's output file is redacted too.
    let big = world
        .bash("for i in $(seq 1 4000); do cat .env; done")
        .await;
    let file = meta_str(&big, "output_file");
    let saved = std::fs::read_to_string(file).expect("output file");
    assert!(!saved.contains(secret));
    assert_eq!(saved.matches("[REDACTED:MY_SERVICE_API_KEY]").count(), 4000);
    // The dry-run echo as well.
    let dry = world.context.clone().with_dry_run(true);
    let echoed = world
        .call_in(&dry, "Bash", json!({ "command": format!("echo {secret}") }))
        .await;
    assert!(!echoed.text().contains(secret));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_in_well_known_formats_never_show_wherever_they_come_from() {
    let github = "ghp_R4nd0mL00k1ngT0k3nW1thTh1rtySixChr5x";
    let world = World::new();
    common::write(
        &world.root().join(".env"),
        &format!("GH={github}\nDB=postgres://app:s3cr3t-Passw0rd@db:5432/app\nPLAIN=sk-learn\n"),
    );
    let shown = world.bash("cat .env").await;
    assert_eq!(
        shown.text(),
        "GH=[REDACTED:github-token]\nDB=postgres://app:[REDACTED:url-password]@db:5432/app\nPLAIN=sk-learn\n"
    );
    // Printed in two writes, so a pipe read may cut it.
    let (first, second) = github.split_at(20);
    let split = world
        .bash(&format!(
            "printf 'a {first}'; sleep 0.05; printf '{second} b\\n'"
        ))
        .await;
    assert_eq!(split.text(), "a [REDACTED:github-token] b\n");
    let id = world.background("cat .env").await;
    let read = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    assert!(read.text().contains("[REDACTED:github-token]") && !read.text().contains(github));
    // The command's own text, echoed by a dry run, too.
    let dry = world.context.clone().with_dry_run(true);
    let echoed = world
        .call_in(&dry, "Bash", json!({ "command": format!("echo {github}") }))
        .await;
    assert!(!echoed.text().contains(github), "{}", echoed.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_redrawn_in_growing_frames_shows_in_none_of_them() {
    // What the stream keeps (and output files hold) is every frame, not
    // only the last drawing the answer shows.
    let github = "ghp_R4nd0mL00k1ngT0k3nW1thTh1rtySixChr5x";
    let world = World::with(|mut config| {
        config.collapse_progress = false;
        config
    });
    let frames = world
        .bash(&format!(
            "printf '{}\\r{}\\r{github}\\n'",
            &github[..10],
            &github[..30]
        ))
        .await;
    assert_eq!(
        frames.text(),
        format!(
            "{}\r[REDACTED:github-token]\r[REDACTED:github-token]\n",
            &github[..10]
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_redaction_can_be_turned_off() {
    let github = "ghp_R4nd0mL00k1ngT0k3nW1thTh1rtySixChr5x";
    let world = World::with(|mut config| {
        config.redact_formats = false;
        config
    });
    assert_eq!(
        world.bash(&format!("echo {github}")).await.text(),
        format!("{github}\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_interrupts_and_ends_the_tree() {
    let world = World::new();
    let token = CancellationToken::new();
    let context = world.context.clone().with_cancellation(token.clone());
    let marker = world.root().join("pids");
    let command = format!(
        // The trap before the marker: the test interrupts once the marker is written.
        "trap 'echo got INT; exit 130' INT; sleep 1000 & echo $! > {file}; wait",
        file = marker.display()
    );
    let call = tokio::spawn({
        let context = context.clone();
        let registry_env = Arc::clone(&world.env);
        async move {
            let mut registry = tool_core::ToolRegistry::new();
            exec_tools::register_execution_tools(&mut registry, &registry_env).expect("registers");
            registry
                .get("Bash")
                .expect("Bash")
                .call(&context, json!({ "command": command }))
                .await
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&marker).map_or(true, |text| text.trim().is_empty()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the command did not start"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pid: u32 = std::fs::read_to_string(&marker)
        .expect("pid")
        .trim()
        .parse()
        .expect("pid");
    token.cancel();
    let result = call.await.expect("call");
    assert!(!result.success);
    assert!(
        result.text().starts_with("Command interrupted after "),
        "{}",
        result.text()
    );
    assert!(
        result.text().contains("got INT"),
        "SIGINT came first: {}",
        result.text()
    );
    assert!(common::gone(pid).await, "{pid} outlived the cancellation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_reported_every_second() {
    let world = World::new();
    let updates: Arc<Mutex<Vec<ProgressUpdate>>> = Arc::default();
    let sink = {
        let updates = Arc::clone(&updates);
        ProgressSink::new(move |update| updates.lock().unwrap().push(update))
    };
    let context = world.context.clone().with_progress(sink);
    let result = world
        .call_in(
            &context,
            "Bash",
            json!({ "command": "echo step one; sleep 2.5; echo step two" }),
        )
        .await;
    assert!(result.success);
    let updates = updates.lock().unwrap();
    assert!(updates.len() >= 2, "{} updates in 2.5 s", updates.len());
    assert_eq!(updates[0].message.as_deref(), Some("step one"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coauthor_trailer_goes_right_after_git_commit() {
    let world = World::with(|mut config| {
        config.coauthor = Some("Agent Exec <agent@example.com>".into());
        config
    });
    // A stand-in `git` that prints its arguments, first on PATH.
    let bin = world.root().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let fake = bin.join("git");
    common::write(&fake, "#!/bin/sh\nprintf '[%s]' \"$@\"; echo\n");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    // In the same call: a `PATH` with a directory put first does not
    // carry over to the next (docs/decisions/0019).
    let result = world
        .bash(&format!(
            "export PATH={}:$PATH; git add -A && git commit -m \"x\" && git push",
            bin.display()
        ))
        .await;
    let text = result.text();
    assert!(
        text.starts_with(
            "[add][-A]\n[commit][--trailer][Co-authored-by: Agent Exec <agent@example.com>][-m][x]\n[push]\n"
        ),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_ms_returns_early_and_running_out_changes_nothing() {
    let world = World::new();
    let quick = world.background("sleep 0.2; echo finished").await;
    let started = std::time::Instant::now();
    let result = world
        .call("BashOutput", json!({ "bash_id": quick, "wait_ms": 60000 }))
        .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(result.text().contains("finished"));
    let slow = world.background("sleep 300").await;
    let result = world
        .call("BashOutput", json!({ "bash_id": slow, "wait_ms": 100 }))
        .await;
    assert_eq!(meta_str(&result, "status"), "running");
    assert_eq!(result.text(), "Status: running\n");
    world.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_timeout_and_signals_read_as_the_contract_says() {
    let world = World::new();
    let timed = world
        .call(
            "Bash",
            json!({ "command": "sleep 300", "run_in_background": true, "timeout": 1000 }),
        )
        .await;
    let timed = meta_str(&timed, "bash_id");
    let result = world
        .call("BashOutput", json!({ "bash_id": timed, "wait_ms": 20000 }))
        .await;
    assert_eq!(meta_str(&result, "status"), "timeout");
    assert_eq!(meta(&result, "exit_code"), serde_json::Value::Null);
    assert!(
        result.text().starts_with("Status: timeout, Duration: "),
        "{}",
        result.text()
    );

    let killed = world.background("kill -9 $$").await;
    let result = world
        .call("BashOutput", json!({ "bash_id": killed, "wait_ms": 20000 }))
        .await;
    assert!(result.success, "reading a failed shell is a success");
    assert!(
        result
            .text()
            .starts_with("Status: failed, Exit code: 137 (SIGKILL), Duration: "),
        "{}",
        result.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_id_lists_the_known_shells() {
    let world = World::new();
    let id = world.background("sleep 300").await;
    let result = world
        .call("KillShell", json!({ "shell_id": "shell_00000000" }))
        .await;
    assert!(!result.success);
    assert!(
        result
            .text()
            .contains(&format!("{id} (running): sleep 300")),
        "{}",
        result.text()
    );
    world.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_name_the_field_and_run_nothing() {
    let world = World::new();
    let empty = world.call("Bash", json!({ "command": "" })).await;
    assert!(!empty.success);
    assert!(empty.text().contains("command"), "{}", empty.text());
    let slow = world
        .call("Bash", json!({ "command": "true", "timeout": 999 }))
        .await;
    assert!(slow.text().contains("timeout"), "{}", slow.text());
    let unknown = world
        .call("KillShell", json!({ "shell_id": "x", "force": true }))
        .await;
    assert!(unknown.text().contains("force"), "{}", unknown.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ansi_codes_and_progress_redraws_are_cleaned() {
    let world = World::new();
    let result = world
        .bash("printf '\\033[32mgreen\\033[0m\\n 10%%\\r 50%%\\r100%%\\n'")
        .await;
    assert_eq!(result.text(), "green\n100%\n");
}

/// A world whose foreground commands go to the background after 300 ms.
fn backgrounding_world() -> World {
    World::with(|mut config| {
        config.background_after = Some(Duration::from_millis(300));
        config
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_command_outliving_background_after_goes_on_as_a_background_shell() {
    let world = backgrounding_world();
    let quick = world.bash("echo quick").await;
    assert_eq!(quick.text(), "quick\n");
    assert_eq!(meta(&quick, "exit_code"), 0);

    let slow = world
        .bash("echo early; while [ ! -e go ]; do sleep 0.05; done; echo late; exit 3")
        .await;
    assert!(slow.success, "{}", slow.text());
    let id = meta(&slow, "bash_id").as_str().expect("bash_id").to_owned();
    assert_eq!(meta(&slow, "status"), "running");
    assert_eq!(
        slow.text(),
        format!("early\n[still running after 300 ms: continues as background shell {id}]")
    );
    std::fs::write(world.root().join("go"), "").expect("release the command");
    let read = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    assert!(
        read.text().starts_with("Status: failed, Exit code: 3"),
        "{}",
        read.text()
    );
    assert!(read.text().ends_with("\n\nlate\n"), "{}", read.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backgrounded_command_keeps_its_timeout_and_carries_no_state() {
    let world = backgrounding_world();
    std::fs::create_dir(world.root().join("sub")).expect("mkdir");
    let slow = world
        .call(
            "Bash",
            json!({ "command": "cd sub; export AWAY=1; sleep 30", "timeout": 1500 }),
        )
        .await;
    let id = meta(&slow, "bash_id").as_str().expect("bash_id").to_owned();
    let read = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 20000 }))
        .await;
    assert!(
        read.text().starts_with("Status: timeout"),
        "{}",
        read.text()
    );
    assert_eq!(
        world.bash("pwd; echo \"[${AWAY-}]\"").await.text(),
        format!("{}\n[]\n", world.root().display())
    );
}

const EMPTY_STDIN_NOTE: &str = "[stdin is empty: pass input with a here-doc, a file, or tty: true]";

/// Every refusal says why and carries `status`, `decision` and `rule`; a
/// policy-file rule sees the program as the built-in rules do (unwrapped,
/// path reduced) and does not call the command dangerous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_carry_the_rule_and_policy_rules_see_the_program() {
    let world = World::with(|mut config| {
        config.analyzer.deny_regex = vec![regex::Regex::new("curl").unwrap()];
        config
    });
    let builtin = world.bash("rm -rf /").await;
    assert!(!builtin.success);
    assert!(
        builtin.text().contains("blocked") && builtin.text().contains("dangerous"),
        "{}",
        builtin.text()
    );
    assert_eq!(meta_str(&builtin, "status"), "blocked");
    assert_eq!(meta_str(&builtin, "decision"), "deny");
    assert_eq!(meta_str(&builtin, "rule"), "recursive-delete-protected");

    let marker = world.root().join("ran");
    for spelling in [
        "/usr/bin/curl http://127.0.0.1:9",
        "command /usr/bin/curl http://127.0.0.1:9",
        "sudo -u nobody /usr/bin/curl x",
        "env curl x",
        r"\curl x",
        "c''url x",
        "bash -c 'curl x'",
    ] {
        let command = format!("touch {} && {spelling}", marker.display());
        let result = world.bash(&command).await;
        assert!(!result.success, "{spelling} ran");
        let text = result.text();
        assert!(
            text.contains("blocked by the policy file")
                && text.contains("policy.deny[0]")
                && text.contains("matches `curl`")
                && !text.contains("dangerous"),
            "{text}"
        );
        assert_eq!(meta_str(&result, "status"), "blocked");
        assert_eq!(meta_str(&result, "decision"), "deny");
        assert_eq!(meta_str(&result, "rule"), "policy.deny[0]");
        assert!(!marker.exists(), "{spelling}: something ran");
    }

    // A refused dry run answers the same.
    let dry = world.context.clone().with_dry_run(true);
    let result = world
        .call_in(&dry, "Bash", json!({ "command": "nohup /usr/bin/curl x" }))
        .await;
    assert!(!result.success);
    assert_eq!(meta_str(&result, "status"), "blocked");
    assert_eq!(meta_str(&result, "decision"), "deny");
    assert_eq!(meta_str(&result, "rule"), "policy.deny[0]");

    // Look-alikes run.
    for (command, output) in [
        ("echo curl", "curl\n"),
        ("echo 'use curl' | grep -o curl", "curl\n"),
    ] {
        let result = world.bash(command).await;
        assert!(result.success, "{command}: {}", result.text());
        assert_eq!(result.text(), output);
    }
}

/// A command that read the empty stdin and failed or printed nothing gets
/// one line saying why; commands fed input, or that printed and succeeded,
/// do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_read_the_empty_stdin_says_so() {
    let world = World::new();
    for command in [
        "read x",
        "cat",
        "head -n 1",
        "sort",
        "bash",
        "read -r line || exit 3",
        "echo before; read x",
    ] {
        let result = world.bash(command).await;
        let text = result.text();
        assert!(text.ends_with(EMPTY_STDIN_NOTE), "{command}: {text:?}");
        assert_eq!(text.matches(EMPTY_STDIN_NOTE).count(), 1, "{command}");
    }
    let failed = world.bash("read x").await;
    assert_eq!(
        failed.text(),
        format!("Command failed with exit code 1\n{EMPTY_STDIN_NOTE}")
    );
    for command in [
        "read x; echo \"got:$x\"",
        "read x || echo 'no input'",
        "echo hi | read x",
        "read x <<< v; exit 2",
        "cat <<EOF\nEOF",
        "cat /nonexistent/file",
        "true",
        "exit 4",
        "bash -c 'exit 3'",
        "printf 'b\\na\\n' | sort | head -n 1",
    ] {
        let result = world.bash(command).await;
        assert!(
            !result.text().contains("stdin is empty"),
            "{command}: {:?}",
            result.text()
        );
    }
    // A timeout is not the command's own end: no note.
    let result = world
        .call(
            "Bash",
            json!({ "command": "cat; sleep 30", "timeout": 1000 }),
        )
        .await;
    assert!(
        result.text().starts_with("Command timed out"),
        "{}",
        result.text()
    );
    assert!(
        !result.text().contains("stdin is empty"),
        "{}",
        result.text()
    );
}
