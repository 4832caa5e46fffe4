//! One test per scenario of seed 003 about the three tools, named after it.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::time::{Duration, Instant};

use common::{World, meta, meta_str};
use serde_json::json;

// Feature: Bash Tool - Foreground Execution

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_simple_command() {
    let world = World::new();
    let result = world.bash("echo hello").await;
    assert!(result.success);
    assert!(result.text().contains("hello"));
    assert_eq!(meta(&result, "exit_code"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_command_with_output() {
    let world = World::new();
    common::write(&world.root().join("alpha.txt"), "a");
    common::write(&world.root().join("beta.txt"), "b");
    let result = world.bash("ls -la").await;
    assert!(result.success);
    assert!(result.text().contains("alpha.txt") && result.text().contains("beta.txt"));
    assert_eq!(meta(&result, "exit_code"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_command_that_fails() {
    let world = World::new();
    let result = world.bash("exit 1").await;
    assert!(!result.success);
    assert_eq!(meta(&result, "exit_code"), 1);
    assert!(result.text().starts_with("Command failed with exit code 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_command_with_stderr() {
    let world = World::new();
    let result = world.bash("echo error >&2").await;
    assert!(result.success);
    assert_eq!(result.text(), "\n[stderr]\nerror\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_chained_commands_with_and() {
    let world = World::new();
    let result = world.bash("echo first && echo second").await;
    assert!(result.success);
    assert_eq!(result.text(), "first\nsecond\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_chained_commands_with_failing_first() {
    let world = World::new();
    let result = world.bash("exit 1 && echo second").await;
    assert!(!result.success);
    assert!(!result.text().contains("second"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_command_with_timeout() {
    let world = World::new();
    let result = world
        .call(
            "Bash",
            json!({ "command": "sleep 0.1 && echo done", "timeout": 5000 }),
        )
        .await;
    assert!(result.success);
    assert!(result.text().contains("done"));
    assert_eq!(meta(&result, "timeout_ms"), 5000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_command_that_times_out() {
    let world = World::new();
    let started = Instant::now();
    let result = world
        .call(
            "Bash",
            json!({ "command": "echo begun; sleep 10 & echo $!; sleep 10", "timeout": 1000 }),
        )
        .await;
    assert!(!result.success);
    assert!(started.elapsed() < Duration::from_secs(8));
    let text = result.text();
    assert!(text.starts_with("Command timed out after 1000ms"), "{text}");
    assert!(text.contains("begun"), "the output so far is kept: {text}");
    assert_eq!(meta(&result, "exit_code"), serde_json::Value::Null);
    assert_eq!(meta_str(&result, "status"), "timeout");
    for pid in common::pids_in(text) {
        assert!(common::gone(pid).await, "{pid} outlived the timeout");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_command_with_description() {
    let world = World::new();
    let result = world
        .call(
            "Bash",
            json!({ "command": "true", "description": "Install dependencies" }),
        )
        .await;
    assert_eq!(meta_str(&result, "description"), "Install dependencies");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_command_with_large_output() {
    let world = World::new();
    let result = world
        .bash("for i in $(seq 1 5000); do echo \"line $i xxxxx\"; done")
        .await;
    assert!(result.success);
    let text = result.text();
    let marker = text
        .lines()
        .find(|line| line.starts_with("[Output truncated"))
        .expect("a truncation line");
    let rest: usize = text
        .lines()
        .filter(|line| !line.starts_with("[Output truncated"))
        .map(|line| line.chars().count() + 1)
        .sum();
    assert!(rest <= 30_000 + 1, "{rest} characters besides the marker");
    assert!(text.starts_with("line 1 xxxxx\n"));
    assert!(text.ends_with("line 5000 xxxxx\n"), "the last line is kept");
    assert_eq!(meta(&result, "truncated"), true);
    let file = meta_str(&result, "output_file");
    assert!(marker.contains(&file), "{marker}");
    let full = std::fs::read_to_string(&file).expect("output file");
    assert_eq!(full.lines().count(), 5000);
    assert!(full.contains("line 2500 xxxxx"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_command_in_dry_run_mode() {
    let world = World::new();
    let victim = world.root().join("test");
    std::fs::create_dir(&victim).expect("mkdir");
    let context = world.context.clone().with_dry_run(true);
    let command = format!("rm -rf {}", victim.display());
    let result = world
        .call_in(&context, "Bash", json!({ "command": command }))
        .await;
    assert!(result.success);
    assert_eq!(result.text(), format!("[Dry Run] Would execute: {command}"));
    assert_eq!(meta(&result, "dry_run"), true);
    assert!(victim.exists(), "nothing ran");
}

// Feature: Bash Tool - Security

async fn assert_blocked(command: &str) {
    let world = World::new();
    let result = world.bash(command).await;
    assert!(!result.success, "{command} ran");
    assert!(result.text().contains("blocked"), "{}", result.text());
    assert!(result.text().contains("dangerous"), "{}", result.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_dangerous_rm_rf_root() {
    assert_blocked("rm -rf /").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_dangerous_rm_rf_star() {
    assert_blocked("rm -rf /*").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_fork_bomb() {
    assert_blocked(":(){ :|:& };:").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_mkfs_command() {
    assert_blocked("mkfs.ext4 /dev/sda1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_safe_rm_command() {
    let world = World::new();
    let file = world.root().join("test_file.txt");
    common::write(&file, "x");
    let result = world.bash(&format!("rm {}", file.display())).await;
    assert!(result.success, "{}", result.text());
    assert!(!file.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_git_commands() {
    let world = World::new();
    let result = world.bash("git init -q . && git status").await;
    assert!(result.success, "{}", result.text());
    assert!(result.text().contains("On branch") || result.text().contains("No commits yet"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_npm_commands() {
    let world = World::new();
    common::write(
        &world.root().join("package.json"),
        "{\"name\":\"x\",\"version\":\"1.0.0\"}",
    );
    let result = world.bash("npm --version").await;
    assert!(result.success, "{}", result.text());
    assert!(
        result.text().trim().split('.').count() >= 2,
        "a version number: {}",
        result.text()
    );
}

// Feature: Bash Tool - Background Execution

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_background_command() {
    let world = World::new();
    let result = world
        .call(
            "Bash",
            json!({ "command": "sleep 5", "run_in_background": true }),
        )
        .await;
    assert!(result.success);
    let id = meta_str(&result, "bash_id");
    assert!(id.starts_with("shell_") && id.len() == 14);
    assert!(
        result
            .text()
            .starts_with(&format!("Started background shell: {id}"))
    );
    world.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_command_returns_immediately() {
    let world = World::new();
    let started = Instant::now();
    let id = world.background("sleep 300").await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(world.env.manager().get(&id).expect("tracked").is_running());
    world.env.shutdown().await;
}

// Feature: BashOutput Tool

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_output_from_running_shell() {
    let world = World::new();
    let id = world
        .background("while true; do echo tick; sleep 1; done")
        .await;
    world.read_until(&id, "tick").await;
    let result = world.call("BashOutput", json!({ "bash_id": id })).await;
    assert!(result.success);
    assert_eq!(meta_str(&result, "status"), "running");
    assert_eq!(meta(&result, "is_running"), true);
    assert!(result.text().starts_with("Status: running\n"));
    world.env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_output_from_completed_shell() {
    let world = World::new();
    let id = world.background("echo hello").await;
    let result = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    assert!(result.success);
    assert!(result.text().contains("hello"));
    assert_eq!(meta_str(&result, "status"), "completed");
    assert_eq!(meta(&result, "exit_code"), 0);
    assert_eq!(meta(&result, "is_running"), false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_only_new_output_since_last_read() {
    let world = World::new();
    let id = world
        .background("for i in $(seq 1 400); do echo \"n$i.\"; sleep 0.01; done")
        .await;
    let first = world.read_until(&id, "n3.").await;
    let second = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 20000 }))
        .await;
    let second = second.text();
    assert!(second.contains("n400."));
    for line in first.lines().filter(|line| line.starts_with('n')) {
        assert!(
            !second.lines().any(|seen| seen == line),
            "{line} read twice"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_not_found() {
    let world = World::new();
    let result = world
        .call("BashOutput", json!({ "bash_id": "shell_nonexistent" }))
        .await;
    assert!(!result.success);
    assert!(result.text().contains("not found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_output_with_regex() {
    let world = World::new();
    let id = world
        .background(
            "echo 'info: start'; echo 'error: bad'; echo 'info: end'; echo 'error: worse' >&2",
        )
        .await;
    let result = world
        .call(
            "BashOutput",
            json!({ "bash_id": id, "filter": "error", "wait_ms": 10000 }),
        )
        .await;
    assert!(result.success);
    let text = result.text();
    assert!(
        text.contains("error: bad") && text.contains("error: worse"),
        "{text}"
    );
    assert!(!text.contains("info"), "{text}");
    // The dropped lines were consumed too.
    let again = world.call("BashOutput", json!({ "bash_id": id })).await;
    assert!(!again.text().contains("info"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_filter_regex() {
    let world = World::new();
    let id = world.background("true").await;
    let result = world
        .call(
            "BashOutput",
            json!({ "bash_id": id, "filter": "[invalid(regex" }),
        )
        .await;
    assert!(!result.success);
    assert!(result.text().starts_with("Invalid filter regex"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_output_with_duration_info() {
    let world = World::new();
    let id = world.background("echo x").await;
    let result = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    let header = result.text().lines().next().unwrap_or_default().to_owned();
    assert!(
        header.starts_with("Status: completed, Exit code: 0, Duration: "),
        "{header}"
    );
    assert!(header.ends_with("ms"));
    assert_eq!(meta(&result, "exit_code"), 0);
}

// Feature: KillShell Tool

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_running_shell() {
    let world = World::new();
    let id = world.background("sleep 300").await;
    let result = world.call("KillShell", json!({ "shell_id": id })).await;
    assert!(result.success);
    assert_eq!(result.text(), format!("Shell {id} terminated"));
    let shell = world.env.manager().get(&id).expect("tracked");
    assert_eq!(shell.status().as_str(), "killed");
    assert!(!shell.is_running());
    assert!(!common::alive(shell.pid()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_already_stopped_shell() {
    let world = World::new();
    let id = world.background("true").await;
    world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    let result = world.call("KillShell", json!({ "shell_id": id })).await;
    assert!(result.success);
    assert_eq!(
        result.text(),
        format!("Shell {id} already stopped (status: completed)")
    );
    assert_eq!(meta(&result, "already_stopped"), true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_non_existent_shell() {
    let world = World::new();
    let result = world
        .call("KillShell", json!({ "shell_id": "shell_nonexistent" }))
        .await;
    assert!(!result.success);
    assert!(result.text().contains("not found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_shell_returns_metadata() {
    let world = World::new();
    let id = world.background("sleep 300").await;
    let result = world.call("KillShell", json!({ "shell_id": id })).await;
    assert_eq!(meta_str(&result, "shell_id"), id);
    assert_eq!(meta_str(&result, "command"), "sleep 300");
    assert!(meta(&result, "duration_ms").is_u64());
}

// Feature: Shell Process (as seen through the tools)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_new_output_includes_stderr() {
    let world = World::new();
    let id = world.background("echo out; echo err >&2").await;
    let result = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    assert!(
        result.text().ends_with("\n\nout\n\n[stderr]\nerr\n"),
        "{}",
        result.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calculate_duration() {
    let world = World::new();
    let id = world.background("sleep 0.5").await;
    let result = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    let duration = meta(&result, "duration_ms").as_u64().expect("duration");
    assert!((500..5000).contains(&duration), "{duration}");
}

// Feature: Tool Registration

#[test]
fn all_execution_tools_are_registered() {
    let registry = exec_tools::execution_registry().expect("registry");
    let names: Vec<String> = registry.list().map(|tool| tool.name().to_owned()).collect();
    assert_eq!(names.len(), 3);
    for name in ["Bash", "BashOutput", "KillShell"] {
        let tool = registry.get(name).expect(name);
        assert_eq!(tool.category(), tool_core::ToolCategory::Execution);
    }
}

#[test]
fn execution_tools_generate_valid_schemas() {
    let registry = exec_tools::execution_registry().expect("registry");
    for (name, required) in [
        ("Bash", "command"),
        ("BashOutput", "bash_id"),
        ("KillShell", "shell_id"),
    ] {
        let definition = registry.get(name).expect(name).definition();
        let openai = definition.render(tool_core::DefinitionFormat::OpenAi);
        assert_eq!(openai["type"], "function");
        assert_eq!(openai["function"]["name"], name);
        assert_eq!(openai["function"]["parameters"]["type"], "object");
        assert_eq!(
            openai["function"]["parameters"]["required"],
            json!([required])
        );
    }
}

// Feature: Integration Tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_background_command_workflow() {
    let world = World::new();
    let id = world
        .background("echo begin; sleep 0.3; echo result=42")
        .await;
    let progress = world.call("BashOutput", json!({ "bash_id": id })).await;
    assert!(progress.success);
    let last = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    assert!(last.success);
    let all = format!("{}{}", progress.text(), last.text());
    assert!(all.contains("begin") && all.contains("result=42"), "{all}");
    assert_eq!(meta_str(&last, "status"), "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_and_verify_workflow() {
    let world = World::new();
    let id = world.background("sleep 300").await;
    let before = world.call("BashOutput", json!({ "bash_id": id })).await;
    assert_eq!(meta_str(&before, "status"), "running");
    let kill = world.call("KillShell", json!({ "shell_id": id })).await;
    assert!(kill.success);
    let after = world.call("BashOutput", json!({ "bash_id": id })).await;
    assert_eq!(meta_str(&after, "status"), "killed");
    assert_eq!(meta(&after, "is_running"), false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multiple_concurrent_shells() {
    let world = World::new();
    let mut ids = Vec::new();
    for index in 0..5 {
        ids.push(world.background(&format!("echo shell-{index}")).await);
    }
    let unique: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), 5);
    assert_eq!(world.env.manager().list().len(), 5);
    for (index, id) in ids.iter().enumerate() {
        let result = world
            .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
            .await;
        assert!(
            result.text().ends_with(&format!("\n\nshell-{index}\n")),
            "{}",
            result.text()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_does_not_affect_other_shells() {
    let world = World::new();
    let a = world
        .background("for i in 1 2 3 4 5 6; do echo a$i; sleep 0.3; done")
        .await;
    let b = world
        .call(
            "Bash",
            json!({ "command": "sleep 300", "run_in_background": true, "timeout": 1000 }),
        )
        .await;
    let b = meta_str(&b, "bash_id");
    let b_result = world
        .call("BashOutput", json!({ "bash_id": b, "wait_ms": 20000 }))
        .await;
    assert_eq!(meta_str(&b_result, "status"), "timeout");
    let a_result = world
        .call("BashOutput", json!({ "bash_id": a, "wait_ms": 20000 }))
        .await;
    assert_eq!(meta_str(&a_result, "status"), "completed");
    assert!(
        a_result.text().ends_with("a1\na2\na3\na4\na5\na6\n"),
        "{}",
        a_result.text()
    );
}
