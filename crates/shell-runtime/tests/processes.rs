//! Black-box tests of the process side: trees, timeouts, leftovers, zombies.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

use std::time::{Duration, Instant};

mod common;

use common::{alive, gone, numbers_in, pids_in, read_pid, spec, wait_for_output};
use shell_runtime::{
    BufferLimits, EndRequest, ShellProcess, ShellStatus, SpawnError, SpawnSpec, SpillFile, Stream,
};
use test_support::single_quoted;

async fn run(command: &str) -> std::sync::Arc<ShellProcess> {
    let shell = ShellProcess::spawn(spec(command)).await.expect("spawns");
    shell.wait().await;
    shell
}

fn stdout(shell: &ShellProcess) -> String {
    shell.snapshot(Stream::Stdout).render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_and_exit_codes_are_captured() {
    let shell = run("echo out; echo err >&2; exit 3").await;
    assert_eq!(stdout(&shell), "out\n");
    assert_eq!(shell.snapshot(Stream::Stderr).render(), "err\n");
    assert_eq!(shell.exit().expect("exited").code, 3);
    assert_eq!(shell.status(), ShellStatus::Failed);

    let ok = run("true").await;
    assert_eq!(ok.status(), ShellStatus::Completed);
    assert_eq!(ok.exit().expect("exited").code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_ends_grandchildren() {
    let shell = ShellProcess::spawn(
        spec("sleep 1000 & echo $!; sleep 1000 & echo $!; wait")
            .with_timeout(Duration::from_millis(500)),
    )
    .await
    .expect("spawns");
    let started = Instant::now();
    assert_eq!(shell.wait().await, ShellStatus::Timeout);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(shell.end_request(), Some(EndRequest::Timeout));
    let pids = pids_in(&stdout(&shell));
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(gone(pid).await, "grandchild {pid} survived the timeout");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_ends_a_double_forked_setsid_child() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("escaped.pid");
    let command = format!(
        "( setsid sh -c 'echo $$ > {file}; exec sleep 1000' & ); sleep 1000",
        file = single_quoted(&pid_file.to_string_lossy())
    );
    let shell = ShellProcess::spawn(spec(&command)).await.expect("spawns");
    let escaped = read_pid(&pid_file).await;
    assert!(alive(escaped));
    assert!(shell.terminate(Duration::from_secs(2)).await);
    assert_eq!(shell.status(), ShellStatus::Killed);
    assert!(
        gone(escaped).await,
        "the setsid child {escaped} survived the kill"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_job_does_not_hold_the_foreground_call() {
    let started = Instant::now();
    let shell = run("sleep 1000 & echo $!; echo done").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let text = stdout(&shell);
    assert!(text.ends_with("done\n"), "{text:?}");
    assert_eq!(shell.status(), ShellStatus::Completed);
    assert_eq!(shell.ended_jobs(), 1);
    let pid = pids_in(&text)[0];
    assert!(
        gone(pid).await,
        "the background sleep {pid} was left running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escaped_leftovers_are_ended_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("escaped.pid");
    let command = format!(
        "( setsid sh -c 'echo $$ > {file}; exec sleep 1000' > /dev/null 2>&1 & ); \
         while [ ! -s {file} ]; do sleep 0.01; done; echo started",
        file = single_quoted(&pid_file.to_string_lossy())
    );
    let shell = run(&command).await;
    assert_eq!(stdout(&shell), "started\n");
    let escaped = read_pid(&pid_file).await;
    assert!(
        gone(escaped).await,
        "the escaped sleep {escaped} was left running"
    );
    assert_eq!(shell.ended_jobs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_named_to_keep_are_left_running() {
    let mut keep = spec("sleep 1000 & echo $!");
    keep.keep_running = vec!["slee*".into()];
    let shell = ShellProcess::spawn(keep).await.expect("spawns");
    shell.wait().await;
    let pid = pids_in(&stdout(&shell))[0];
    assert_eq!(shell.ended_jobs(), 0);
    assert_eq!(shell.kept_processes(), vec![pid]);
    assert!(alive(pid));
    // Shutdown ends kept processes (process-wide).
    shell_runtime::ShellManager::new()
        .shutdown(Duration::ZERO)
        .await;
    assert!(gone(pid).await);
}

/// Spill files sharing a budget stop writing where it is spent, and say so;
/// bytes given back (a file removed) can be written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spill_files_sharing_a_budget_stop_at_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let budget = shell_runtime::SpillBudget::new(3_000_000);
    let mut reports = Vec::new();
    for name in ["first", "second"] {
        // 2 MB each: past what memory keeps, so both go to disk.
        let mut big = spec("head -c 2000000 /dev/zero | tr '\\0' x");
        big.stdout_spill = Some(SpillFile {
            path: dir.path().join(name),
            cap_bytes: 64 << 20,
            budget: Some(budget.clone()),
        });
        let shell = ShellProcess::spawn(big).await.expect("spawns");
        shell.wait().await;
        reports.push(shell.spill_report(Stream::Stdout).expect("spill"));
    }
    assert_eq!(reports[0].written, 2_000_000);
    assert!(reports[0].is_whole());
    assert_eq!(reports[1].written, 1_000_000);
    assert_eq!(
        reports[1].shortfall,
        Some(shell_runtime::SpillShortfall::Budget)
    );
    assert_eq!(budget.used(), 3_000_000);
    assert_eq!(
        std::fs::metadata(dir.path().join("second"))
            .expect("file")
            .len(),
        1_000_000
    );
    budget.give_back(2_000_000);
    assert_eq!(budget.take(5_000_000), 2_000_000);
}

/// `exec -a NAME` sets both `comm` and `argv[0]`: a process that calls
/// itself by a kept name is still ended, since the keep list matches the
/// executable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_names_itself_after_a_kept_program_is_still_ended() {
    let mut spec = spec("(exec -a sccache sleep 1000) & echo $!");
    spec.keep_running = vec!["sccache".into()];
    let shell = ShellProcess::spawn(spec).await.expect("spawns");
    shell.wait().await;
    let pid = pids_in(&stdout(&shell))[0];
    assert!(shell.kept_processes().is_empty());
    assert!(gone(pid).await, "the disguised sleep {pid} was kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_zombies_after_a_hundred_commands() {
    for index in 0..100 {
        let command = match index % 4 {
            0 => "true",
            1 => "sleep 0.01 &",
            2 => "( setsid sleep 0.01 & ) ; echo x",
            _ => "exit 1",
        };
        run(command).await;
    }
    // Other tests of this process run beside this one: a child of theirs
    // may be a zombie for a moment before it is reaped. A leak is a zombie
    // that stays.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let zombies = own_zombies();
        if zombies.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "zombies left: {zombies:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `stat` lines of this process's children that are zombies.
fn own_zombies() -> Vec<String> {
    let me = std::process::id();
    let mut zombies = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{me}/task"))
        .expect("tasks")
        .flatten()
    {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in numbers_in(&children) {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
            {
                zombies.push(stat);
            }
        }
    }
    zombies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_killed_by_a_signal_reports_it() {
    let shell = run("kill -9 $$").await;
    let exit = shell.exit().expect("exited");
    assert_eq!(exit.code, 137);
    assert_eq!(exit.signal, Some(9));
    assert_eq!(exit.signal_name().as_deref(), Some("SIGKILL"));
    assert_eq!(shell.status(), ShellStatus::Failed);

    let termed = run("kill -TERM $$").await;
    assert_eq!(termed.exit().expect("exited").code, 143);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_sends_sigint_first() {
    let shell = ShellProcess::spawn(spec(
        "trap 'echo got INT; exit 130' INT; echo ready; sleep 1000 & wait",
    ))
    .await
    .expect("spawns");
    wait_for_output(&shell, "ready").await;
    assert!(shell.interrupt(Duration::from_secs(2)).await);
    assert!(stdout(&shell).contains("got INT"), "{:?}", stdout(&shell));
    assert_eq!(shell.status(), ShellStatus::Killed);
    assert_eq!(shell.end_request(), Some(EndRequest::Interrupt));
    assert_eq!(shell.exit().expect("exited").code, 130);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_after_exit_says_so() {
    let shell = run("true").await;
    assert!(!shell.terminate(Duration::from_secs(1)).await);
    assert_eq!(shell.status(), ShellStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_errors_are_typed() {
    let missing = ShellProcess::spawn(spec("true").with_program("/nonexistent/shell")).await;
    assert!(
        matches!(missing, Err(SpawnError::ProgramNotFound { .. })),
        "{missing:?}"
    );
    let mut bad_cwd = spec("true");
    bad_cwd.cwd = "/nonexistent/dir".into();
    let error = ShellProcess::spawn(bad_cwd).await.expect_err("refused");
    assert!(
        matches!(error, SpawnError::BadWorkingDir { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("/nonexistent/dir"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_environment_is_exactly_the_one_given() {
    let shell = ShellProcess::spawn(
        SpawnSpec::shell("env", std::env::temp_dir())
            .with_env([("PATH", "/usr/bin:/bin"), ("ONLY_THIS", "yes")]),
    )
    .await
    .expect("spawns");
    shell.wait().await;
    let mut names: Vec<String> = stdout(&shell)
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name.to_owned()))
        .collect();
    names.sort();
    // bash itself sets PWD, SHLVL and _.
    assert_eq!(
        names,
        ["AGENT_EXEC_SHELL", "ONLY_THIS", "PATH", "PWD", "SHLVL", "_"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_is_empty_and_there_is_no_terminal() {
    let shell =
        run("cat; echo end; [ \"$(cut -d' ' -f6 /proc/$$/stat)\" = \"$$\" ] && echo leader").await;
    assert_eq!(stdout(&shell), "end\nleader\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_working_directory_is_used() {
    let dir = tempfile::tempdir().expect("temp dir");
    let odd = dir.path().join("a dir with 'quotes' and $dollar");
    std::fs::create_dir(&odd).expect("mkdir");
    let mut in_dir = spec("pwd");
    in_dir.cwd.clone_from(&odd);
    let shell = ShellProcess::spawn(in_dir).await.expect("spawns");
    shell.wait().await;
    assert_eq!(stdout(&shell).trim_end(), odd.to_str().expect("utf-8"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_output_stays_bounded_and_spills_to_a_capped_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.txt");
    let mut big = spec("head -c 3000000 /dev/zero | tr '\\0' 'x'; echo; echo last line")
        .with_limits(BufferLimits {
            head_bytes: 1000,
            tail_bytes: 1000,
        });
    big.stdout_spill = Some(SpillFile {
        path: path.clone(),
        cap_bytes: 1_000_000,
        budget: None,
    });
    let shell = ShellProcess::spawn(big).await.expect("spawns");
    shell.wait().await;
    let snapshot = shell.snapshot(Stream::Stdout);
    assert_eq!(snapshot.before_gap.len(), 1000);
    assert!(snapshot.after_gap.ends_with("x\nlast line\n"));
    assert_eq!(shell.totals(Stream::Stdout).0, 3_000_000 + 1 + 10);
    assert_eq!(snapshot.dropped, 3_000_011 - 2000);
    let spill = shell.spill_report(Stream::Stdout).expect("spill");
    assert_eq!(spill.written, 1_000_000);
    assert_eq!(spill.shortfall, Some(shell_runtime::SpillShortfall::Cap));
    assert_eq!(std::fs::metadata(&path).expect("file").len(), 1_000_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multibyte_characters_survive_any_pipe_boundary() {
    let shell = run("for i in $(seq 1 20000); do printf 'é€😀'; done; printf '\\xff'").await;
    let text = stdout(&shell);
    assert_eq!(text.chars().count(), 60001);
    assert!(text.ends_with('\u{FFFD}'));
    assert_eq!(text.matches('😀').count(), 20000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_running_shell_gives_only_what_is_new() {
    let shell = ShellProcess::spawn(spec("echo one; sleep 0.3; echo two; sleep 0.3; echo three"))
        .await
        .expect("spawns");
    wait_for_output(&shell, "one").await;
    assert_eq!(shell.read_unseen().stdout.render(), "one\n");
    assert!(shell.is_running());
    shell.wait().await;
    assert_eq!(shell.read_unseen().stdout.render(), "two\nthree\n");
    assert!(shell.read_unseen().stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacements_reach_the_buffer_and_the_spill_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("out.txt");
    // The secret is printed in two writes, so a pipe read may cut it.
    let mut redacted = spec("printf 'key=sk-abc'; sleep 0.05; printf 'defgh done\\n'");
    redacted.replacements = Some(std::sync::Arc::new(shell_runtime::Redactions::new(
        [("sk-abcdefgh".into(), "[REDACTED:KEY]".into())],
        Vec::new(),
    )));
    redacted.stdout_spill = Some(SpillFile {
        path: path.clone(),
        cap_bytes: 1 << 20,
        budget: None,
    });
    let shell = ShellProcess::spawn(redacted).await.expect("spawns");
    shell.wait().await;
    assert_eq!(stdout(&shell), "key=[REDACTED:KEY] done\n");
    // Small output stays in memory until the file is asked for.
    assert!(!path.exists());
    let report = shell
        .ensure_spill_file(Stream::Stdout)
        .expect("a spill was asked for");
    assert!(report.on_disk);
    assert_eq!(
        std::fs::read_to_string(&path).expect("spill"),
        "key=[REDACTED:KEY] done\n"
    );
}

#[test]
fn a_shell_whose_runtime_shuts_down_is_ended_not_orphaned() {
    let first = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let shell = first.block_on(async {
        ShellProcess::spawn(spec("sleep 300"))
            .await
            .expect("spawns")
    });
    let pid = shell.pid();
    assert!(alive(pid));
    drop(first);
    let second = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    second.block_on(async {
        let status = shell.wait_timeout(Duration::from_secs(5)).await;
        assert_eq!(status, Some(ShellStatus::Killed));
        assert!(gone(pid).await, "{pid} outlived its runtime");
    });
}
