//! Black-box tests of the shell manager: ids, listing, waiting, killing,
//! eviction, shutdown and many shells at once.
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

use std::time::{Duration, Instant};

mod common;

use common::{alive, read_pid, spec};
use shell_runtime::{KillOutcome, ManagerError, ShellManager, ShellStatus, Stream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shells_are_tracked_by_id() {
    let manager = ShellManager::new();
    let (id, shell) = manager.spawn(spec("echo hello")).await.expect("spawns");
    assert!(id.starts_with("shell_") && id.len() == 14, "{id}");
    assert!(
        id[6..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_eq!(
        manager
            .wait(&id, Duration::from_secs(10))
            .await
            .expect("known"),
        ShellStatus::Completed
    );
    assert_eq!(shell.snapshot(Stream::Stdout).render(), "hello\n");
    assert!(manager.get(&id).is_some());
    assert_eq!(manager.list().len(), 1);
    assert!(manager.list_running().is_empty());
    assert!(manager.get("shell_00000000").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_runs_out_changes_nothing() {
    let manager = ShellManager::new();
    let (id, shell) = manager.spawn(spec("sleep 1000")).await.expect("spawns");
    let status = manager
        .wait(&id, Duration::from_millis(100))
        .await
        .expect("known");
    assert_eq!(status, ShellStatus::Running);
    assert!(shell.is_running());
    assert_eq!(manager.list_running().len(), 1);
    assert_eq!(
        manager
            .kill(&id, Duration::from_secs(2))
            .await
            .expect("known"),
        KillOutcome::Terminated
    );
    assert_eq!(shell.status(), ShellStatus::Killed);
    assert_eq!(
        manager
            .kill(&id, Duration::from_secs(2))
            .await
            .expect("known"),
        KillOutcome::AlreadyStopped(ShellStatus::Killed)
    );
    assert!(!alive(shell.pid()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ids_are_errors() {
    let manager = ShellManager::new();
    let error = manager
        .kill("shell_deadbeef", Duration::ZERO)
        .await
        .expect_err("unknown");
    assert!(matches!(error, ManagerError::NotFound(_)));
    assert!(error.to_string().contains("not found"));
    assert!(manager.wait("nope", Duration::ZERO).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_shells_are_evicted_oldest_first_and_running_ones_never() {
    let manager = ShellManager::with_limit(3);
    let mut ids = Vec::new();
    for index in 0..3 {
        let (id, shell) = manager
            .spawn(spec(&format!("echo {index}")))
            .await
            .expect("spawns");
        shell.wait().await;
        ids.push(id);
    }
    let (fourth, _) = manager
        .spawn(spec("sleep 1000"))
        .await
        .expect("evicts the oldest");
    assert!(manager.get(&ids[0]).is_none());
    assert!(manager.get(&ids[1]).is_some());
    manager
        .spawn(spec("sleep 1000"))
        .await
        .expect("evicts the next");
    manager
        .spawn(spec("sleep 1000"))
        .await
        .expect("evicts the last finished");
    let refused = manager.spawn(spec("true")).await.expect_err("all running");
    assert!(
        matches!(refused, ManagerError::TooManyShells(3)),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("too many running shells"));
    assert!(manager.get(&fourth).is_some());
    assert_eq!(manager.kill_all(Duration::from_secs(2)).await, 3);
    assert!(manager.list_running().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_forgets_old_finished_shells() {
    let manager = ShellManager::new();
    let (done, shell) = manager.spawn(spec("true")).await.expect("spawns");
    shell.wait().await;
    let (running, _) = manager.spawn(spec("sleep 1000")).await.expect("spawns");
    assert_eq!(manager.cleanup_completed(Duration::from_secs(3600)), 0);
    // Any finished shell is at least zero old.
    assert_eq!(manager.cleanup_completed(Duration::ZERO), 1);
    assert!(manager.get(&done).is_none());
    assert!(manager.get(&running).is_some());
    manager.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_and_drop_end_every_tree() {
    let manager = ShellManager::new();
    let (_, background) = manager
        .spawn(spec("sleep 1000 & wait"))
        .await
        .expect("spawns");
    let foreground = manager
        .spawn_foreground(spec("sleep 1000"))
        .await
        .expect("spawns");
    manager.shutdown(Duration::from_secs(1)).await;
    assert_eq!(background.status(), ShellStatus::Killed);
    assert_eq!(foreground.status(), ShellStatus::Killed);

    let dropped = ShellManager::new();
    let (_, shell) = dropped.spawn(spec("sleep 1000")).await.expect("spawns");
    let pid = shell.pid();
    drop(dropped);
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        assert!(Instant::now() < deadline, "drop left {pid} running");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_shells_complete_and_read_back() {
    let manager = std::sync::Arc::new(ShellManager::new());
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..200 {
        let manager = std::sync::Arc::clone(&manager);
        tasks.spawn(async move {
            let command = format!(
                "echo start-{index}; sleep 0.2; echo end-{index} >&2; exit $(({index} % 3))"
            );
            let (id, _) = manager.spawn(spec(&command)).await.expect("spawns");
            (index, id)
        });
    }
    let mut ids = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        ids.push(joined.expect("task"));
    }
    assert_eq!(manager.list().len(), 200);
    for (index, id) in ids {
        manager
            .wait(&id, Duration::from_secs(60))
            .await
            .expect("known");
        let shell = manager.get(&id).expect("tracked");
        let output = shell.read_unseen();
        assert_eq!(output.stdout.render(), format!("start-{index}\n"));
        assert_eq!(output.stderr.render(), format!("end-{index}\n"));
        assert_eq!(shell.exit().expect("exited").code, index % 3);
        let expected = if index % 3 == 0 {
            ShellStatus::Completed
        } else {
            ShellStatus::Failed
        };
        assert_eq!(shell.status(), expected);
    }
}

// The seed-003 "Shell Manager" and "Shell Process" scenarios, by name.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_shell() {
    let manager = ShellManager::new();
    let (id, shell) = manager
        .spawn(spec("echo test; sleep 300"))
        .await
        .expect("spawns");
    assert_eq!(shell.status(), ShellStatus::Running);
    assert!(manager.get(&id).is_some());
    manager.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_shell_by_id_and_non_existent_shell() {
    let manager = ShellManager::new();
    let (id, shell) = manager.spawn(spec("true")).await.expect("spawns");
    assert!(std::sync::Arc::ptr_eq(
        &manager.get(&id).expect("found"),
        &shell
    ));
    assert!(manager.get("shell_xyz").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_all_shells_and_list_running() {
    let manager = ShellManager::new();
    manager.spawn(spec("sleep 300")).await.expect("spawns");
    manager.spawn(spec("sleep 300")).await.expect("spawns");
    let (_, done) = manager.spawn(spec("true")).await.expect("spawns");
    done.wait().await;
    assert_eq!(manager.list().len(), 3);
    let running = manager.list_running();
    assert_eq!(running.len(), 2);
    assert!(running.iter().all(|(_, shell)| shell.is_running()));
    assert_eq!(manager.kill_all(Duration::from_secs(1)).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_all_shells() {
    let manager = ShellManager::new();
    for _ in 0..3 {
        manager.spawn(spec("sleep 300")).await.expect("spawns");
    }
    assert_eq!(manager.kill_all(Duration::from_secs(1)).await, 3);
    assert!(
        manager
            .list()
            .iter()
            .all(|(_, shell)| shell.status() == ShellStatus::Killed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_process_lifecycle_and_duration() {
    let manager = ShellManager::new();
    let (_, shell) = manager.spawn(spec("sleep 0.3")).await.expect("spawns");
    assert_eq!(shell.status(), ShellStatus::Running);
    assert_eq!(shell.wait().await, ShellStatus::Completed);
    let duration = shell.duration();
    assert!(
        duration >= Duration::from_millis(300) && duration < Duration::from_secs(5),
        "{duration:?}"
    );
    assert_eq!(
        shell.duration(),
        duration,
        "a finished shell's duration is fixed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_new_output() {
    let manager = ShellManager::new();
    let (_, shell) = manager
        .spawn(spec("printf 'line1\\nline2\\nline3\\n'"))
        .await
        .expect("spawns");
    shell.wait().await;
    let mut cursor = shell_runtime::ReadCursor::default();
    let all = shell.read_since(&mut cursor);
    assert_eq!(all.stdout.render(), "line1\nline2\nline3\n");
    assert!(shell.read_since(&mut cursor).stdout.is_empty());
}

/// A stopped tree gets SIGCONT after SIGTERM, so it acts on the SIGTERM
/// (here a handler that writes a file) instead of waiting for SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_stopped_tree_continues_it_so_it_sees_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let handled = dir.path().join("handled");
    let started = dir.path().join("started");
    let manager = ShellManager::new();
    let (id, _) = manager
        .spawn(spec(&format!(
            "trap 'echo yes > {}; exit 0' TERM; echo $$ > {}; kill -STOP $$; sleep 300",
            handled.display(),
            started.display()
        )))
        .await
        .expect("spawns");
    let pid = read_pid(&started).await;
    // Wait until it has stopped itself.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('T'))
    }) {
        assert!(Instant::now() < deadline, "never stopped");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let outcome = manager
        .kill(&id, Duration::from_secs(10))
        .await
        .expect("kills");
    assert_eq!(outcome, KillOutcome::Terminated);
    assert_eq!(
        std::fs::read_to_string(&handled).unwrap_or_default(),
        "yes\n",
        "the TERM handler did not run"
    );
}
