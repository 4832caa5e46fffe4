//! `SpawnSpec::exec_judge`: every exec of a command's tree but the shell's
//! own is stopped and judged; a refused one fails with EPERM in the
//! command, allowed ones run, with or without namespaces.
#![cfg(target_os = "linux")]
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};

use common::spec;
use shell_runtime::{
    Confinement, ConfinementSpec, ExecJudge, ExecRequest, ExecVerdict, ShellProcess, Stream,
};

/// A program that would leave a file behind if it ran.
fn marker(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("marker");
    std::fs::write(&path, format!("#!/bin/sh\ntouch {}/ran\n", dir.display())).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

type Seen = Arc<Mutex<Vec<ExecRequest>>>;

/// Refuses what is named `marker` (symlinks resolved), allows the rest,
/// and remembers every request.
fn judge(seen: &Seen) -> ExecJudge {
    let seen = Arc::clone(seen);
    ExecJudge(Arc::new(move |request: &ExecRequest| {
        seen.lock().unwrap().push(request.clone());
        let named_marker = request
            .real_path
            .as_ref()
            .and_then(|path| path.file_name())
            .is_some_and(|name| name == "marker");
        if named_marker {
            ExecVerdict::Deny
        } else {
            ExecVerdict::Allow
        }
    }))
}

async fn refused_and_allowed(confinement: Option<Arc<Confinement>>) {
    let dir = tempfile::tempdir().unwrap();
    let marker = marker(dir.path());
    std::os::unix::fs::symlink(&marker, dir.path().join("innocent")).unwrap();
    let seen: Seen = Arc::default();
    let mut spawn = spec(&format!(
        "cd {dir}; /bin/true; ./marker; x=./innocent; $x a b; /bin/echo hi",
        dir = dir.path().display()
    ));
    spawn.exec_judge = Some(judge(&seen));
    spawn.confinement = confinement;
    let shell = ShellProcess::spawn(spawn).await.expect("spawns");
    shell.wait().await;
    let stdout = shell.snapshot(Stream::Stdout).render();
    let stderr = shell.snapshot(Stream::Stderr).render();
    assert_eq!(stdout, "hi\n", "stderr: {stderr}");
    assert_eq!(
        stderr.matches("Operation not permitted").count(),
        2,
        "stderr: {stderr}"
    );
    assert!(!dir.path().join("ran").exists(), "the marker ran");
    let seen = seen.lock().unwrap();
    let paths: Vec<_> = seen
        .iter()
        .map(|r| r.path.to_string_lossy().into_owned())
        .collect();
    assert_eq!(paths, ["/bin/true", "./marker", "./innocent", "/bin/echo"]);
    let via_link = &seen[2];
    assert_eq!(via_link.argv, ["./innocent", "a", "b"]);
    assert_eq!(via_link.cwd, std::fs::canonicalize(dir.path()).unwrap());
    assert!(via_link.file.is_some());
    assert_eq!(
        via_link.home.as_deref(),
        std::env::var_os("HOME").as_deref(),
        "HOME from the process's environment"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_execs_fail_with_eperm_and_allowed_ones_run() {
    refused_and_allowed(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execs_are_judged_in_namespaces_too() {
    match Confinement::prepare(&ConfinementSpec {
        isolate_processes: true,
        restrict_writes: false,
        ..ConfinementSpec::default()
    }) {
        Ok(confinement) => refused_and_allowed(Some(Arc::new(confinement))).await,
        Err(error) => eprintln!("skipped: {error}"),
    }
}

/// Once the supervisor is gone the kernel fails every exec: no judge
/// means no exec, never an unjudged one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_that_panics_leaves_no_exec_unjudged() {
    let dir = tempfile::tempdir().unwrap();
    let marker = marker(dir.path());
    let mut spawn = spec(&format!("/bin/true; {}; echo $?", marker.display()));
    spawn.exec_judge = Some(ExecJudge(Arc::new(|_: &ExecRequest| {
        panic!("the judge fails")
    })));
    let shell = ShellProcess::spawn(spawn).await.expect("spawns");
    shell.wait().await;
    let stdout = shell.snapshot(Stream::Stdout).render();
    let stderr = shell.snapshot(Stream::Stderr).render();
    assert!(!dir.path().join("ran").exists(), "the marker ran");
    assert_eq!(stdout, "126\n", "stderr: {stderr}");
    assert!(
        stderr.contains("Function not implemented"),
        "stderr: {stderr}"
    );
}
