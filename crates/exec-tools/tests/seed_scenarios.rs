//! One test per scenario of seed 003 about the three tools, named for the
//! fact it checks; its doc comment names the scenario.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::time::{Duration, Instant};

use common::{World, meta, meta_str};
use serde_json::json;

// Feature: Bash Tool - Foreground Execution

/// Scenario: Execute simple command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simple_command_succeeds_with_its_output_and_exit_code_0() {
    let world = World::new();
    let result = world.bash("echo hello").await;
    assert!(result.success);
    assert!(result.text().contains("hello"));
    assert_eq!(meta(&result, "exit_code"), 0);
}

/// Scenario: Execute command with output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_lists_the_files_of_the_working_directory() {
    let world = World::new();
    common::write(&world.root().join("alpha.txt"), "a");
    common::write(&world.root().join("beta.txt"), "b");
    let result = world.bash("ls -la").await;
    assert!(result.success);
    assert!(result.text().contains("alpha.txt") && result.text().contains("beta.txt"));
    assert_eq!(meta(&result, "exit_code"), 0);
}

/// Scenario: Execute command that fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_command_answers_with_its_exit_code() {
    let world = World::new();
    let result = world.bash("exit 1").await;
    assert!(!result.success);
    assert_eq!(meta(&result, "exit_code"), 1);
    assert!(result.text().starts_with("Command failed with exit code 1"));
}

/// Scenario: Execute command with stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_is_shown_under_its_own_heading() {
    let world = World::new();
    let result = world.bash("echo error >&2").await;
    assert!(result.success);
    assert_eq!(result.text(), "\n[stderr]\nerror\n");
}

/// Scenario: Execute chained commands with &&.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_chained_with_and_all_run_in_order() {
    let world = World::new();
    let result = world.bash("echo first && echo second").await;
    assert!(result.success);
    assert_eq!(result.text(), "first\nsecond\n");
}

/// Scenario: Execute chained commands with failing first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_first_command_stops_an_and_chain() {
    let world = World::new();
    let result = world.bash("exit 1 && echo second").await;
    assert!(!result.success);
    assert!(!result.text().contains("second"));
}

/// Scenario: Execute command with timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_within_its_timeout_completes_and_reports_the_timeout() {
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

/// Scenario: Execute command that times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_over_the_timeout_is_ended_with_its_children() {
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

/// Scenario: Execute command with description.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_description_is_returned_in_the_metadata() {
    let world = World::new();
    let result = world
        .call(
            "Bash",
            json!({ "command": "true", "description": "Install dependencies" }),
        )
        .await;
    assert_eq!(meta_str(&result, "description"), "Install dependencies");
}

/// Scenario: Execute command with large output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_output_keeps_head_and_tail_and_the_whole_in_a_file() {
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

/// Scenario: Execute command in dry run mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_echoes_the_command_and_runs_nothing() {
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

/// Scenario: Block dangerous rm -rf /.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rm_rf_root_is_blocked_as_dangerous() {
    assert_blocked("rm -rf /").await;
}

/// Scenario: Block dangerous rm -rf /*.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rm_rf_root_star_is_blocked_as_dangerous() {
    assert_blocked("rm -rf /*").await;
}

/// Scenario: Block fork bomb.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_blocked_as_dangerous() {
    assert_blocked(":(){ :|:& };:").await;
}

/// Scenario: Block mkfs command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mkfs_is_blocked_as_dangerous() {
    assert_blocked("mkfs.ext4 /dev/sda1").await;
}

/// Scenario: Allow safe rm command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rm_of_one_file_in_the_workspace_runs() {
    let world = World::new();
    let file = world.root().join("test_file.txt");
    common::write(&file, "x");
    let result = world.bash(&format!("rm {}", file.display())).await;
    assert!(result.success, "{}", result.text());
    assert!(!file.exists());
}

/// Scenario: Allow git commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_commands_run() {
    let world = World::new();
    let result = world.bash("git init -q . && git status").await;
    assert!(result.success, "{}", result.text());
    assert!(result.text().contains("On branch") || result.text().contains("No commits yet"));
}

/// Scenario: Allow npm commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_commands_run() {
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

/// Scenario: Start background command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_command_answers_with_its_shell_id() {
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

/// Scenario: Background command returns immediately.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_command_answers_while_it_still_runs() {
    let world = World::new();
    let started = Instant::now();
    let id = world.background("sleep 300").await;
    // The answer came while the command runs; the bound only has to be far
    // below the command's 300 s, however loaded the machine.
    assert!(world.env.manager().get(&id).expect("tracked").is_running());
    assert!(started.elapsed() < Duration::from_secs(60));
    world.env.shutdown().await;
}

// Feature: BashOutput Tool

/// Scenario: Get output from running shell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_output_of_a_running_shell_says_running() {
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

/// Scenario: Get output from completed shell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_output_of_a_finished_shell_has_its_output_and_exit_code() {
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

/// Scenario: Get only new output since last read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_output_returns_each_line_once() {
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

/// Scenario: Shell not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_output_of_an_unknown_id_says_not_found() {
    let world = World::new();
    let result = world
        .call("BashOutput", json!({ "bash_id": "shell_nonexistent" }))
        .await;
    assert!(!result.success);
    assert!(result.text().contains("not found"));
}

/// Scenario: Filter output with regex.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_keeps_matching_lines_and_consumes_the_rest() {
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

/// Scenario: Invalid filter regex.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_filter_regex_is_refused() {
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

/// Scenario: Get output with duration info.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_line_of_a_finished_shell_has_exit_code_and_duration() {
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

/// Scenario: Kill running shell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_shell_ends_a_running_shell_and_marks_it_killed() {
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

/// Scenario: Kill already stopped shell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_finished_shell_says_it_already_stopped() {
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

/// Scenario: Kill non-existent shell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_an_unknown_id_says_not_found() {
    let world = World::new();
    let result = world
        .call("KillShell", json!({ "shell_id": "shell_nonexistent" }))
        .await;
    assert!(!result.success);
    assert!(result.text().contains("not found"));
}

/// Scenario: Kill shell returns metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_shell_answers_with_id_command_and_duration() {
    let world = World::new();
    let id = world.background("sleep 300").await;
    let result = world.call("KillShell", json!({ "shell_id": id })).await;
    assert_eq!(meta_str(&result, "shell_id"), id);
    assert_eq!(meta_str(&result, "command"), "sleep 300");
    assert!(meta(&result, "duration_ms").is_u64());
}

// Feature: Shell Process (as seen through the tools)

/// Scenario: Get new output includes stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_output_includes_stderr_under_its_heading() {
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

/// Scenario: Calculate duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_duration_of_a_finished_shell_covers_its_run_time() {
    let world = World::new();
    let id = world.background("sleep 0.5").await;
    let result = world
        .call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }))
        .await;
    let duration = meta(&result, "duration_ms").as_u64().expect("duration");
    // At least the half second it slept; the upper bound only rules out nonsense.
    assert!((500..60_000).contains(&duration), "{duration}");
}

// Feature: Tool Registration

/// Scenario: All execution tools are registered.
#[test]
fn the_registry_holds_the_five_execution_tools() {
    let registry = exec_tools::execution_registry().expect("registry");
    let names: Vec<String> = registry.list().map(|tool| tool.name().to_owned()).collect();
    assert_eq!(names.len(), 5);
    for name in [
        "Bash",
        "BashOutput",
        "KillShell",
        "ListShells",
        "WriteStdin",
    ] {
        let tool = registry.get(name).expect(name);
        assert_eq!(tool.category(), tool_core::ToolCategory::Execution);
    }
}

/// Scenario: Execution tools generate valid schemas.
#[test]
fn each_tool_renders_an_openai_function_with_its_required_field() {
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

/// Scenario: Full background command workflow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_command_can_be_followed_to_its_result() {
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

/// Scenario: Kill and verify workflow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_shell_reads_as_killed_afterwards() {
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

/// Scenario: Multiple concurrent shells.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_shells_have_distinct_ids_and_their_own_output() {
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

/// Scenario: Timeout does not affect other shells.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shells_timeout_leaves_the_others_running() {
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
