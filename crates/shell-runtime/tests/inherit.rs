//! `SpawnSpec::inherit`: descriptors handed to the program at fixed
//! numbers, with or without namespaces, and refused when the numbers
//! cannot work.
#![cfg(target_os = "linux")]
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use common::spec;
use shell_runtime::{
    Confinement, ConfinementSpec, ShellProcess, SpawnSpec, Stream, anonymous_file,
};

fn channel() -> (std::fs::File, Arc<OwnedFd>) {
    let file = anonymous_file("inherit-test").expect("memfd");
    let copy = Arc::new(OwnedFd::from(file.try_clone().expect("dup")));
    (file, copy)
}

fn contents(mut file: &std::fs::File) -> String {
    use std::io::Seek;
    file.rewind().expect("rewind");
    let mut text = String::new();
    file.read_to_string(&mut text).expect("read");
    text
}

async fn run(spawn: SpawnSpec) -> String {
    let shell = ShellProcess::spawn(spawn).await.expect("spawns");
    shell.wait().await;
    shell.snapshot(Stream::Stdout).render() + &shell.snapshot(Stream::Stderr).render()
}

async fn writes_reach_the_numbers_given(confinement: Option<Arc<Confinement>>) {
    let (three, three_copy) = channel();
    let (seven, seven_copy) = channel();
    let mut spawn = spec("echo to-three >&3; echo to-seven >&7; echo done")
        .with_inherited(three_copy, 3)
        .with_inherited(seven_copy, 7);
    spawn.confinement = confinement;
    let output = run(spawn).await;
    assert_eq!(output, "done\n");
    assert_eq!(contents(&three), "to-three\n");
    assert_eq!(contents(&seven), "to-seven\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inherited_descriptors_reach_the_program_at_their_numbers() {
    writes_reach_the_numbers_given(None).await;
    match Confinement::prepare(&ConfinementSpec {
        isolate_processes: true,
        ..ConfinementSpec::default()
    }) {
        Ok(confinement) => writes_reach_the_numbers_given(Some(Arc::new(confinement))).await,
        Err(error) => eprintln!("namespace half skipped: {error}"),
    }
}

/// The descriptor already has the number it is to get in the child: the
/// child's copy still loses close-on-exec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_already_at_its_number_is_still_inherited() {
    let (file, copy) = channel();
    let number = copy.as_raw_fd();
    let output =
        run(spec(&format!("echo same >&{number} && echo ok")).with_inherited(copy, number)).await;
    assert_eq!(output, "ok\n");
    assert_eq!(contents(&file), "same\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_below_three_or_given_twice_are_refused() {
    let (_file, copy) = channel();
    for numbers in [[2, 5], [5, 5]] {
        let spawn = spec("true")
            .with_inherited(Arc::clone(&copy), numbers[0])
            .with_inherited(Arc::clone(&copy), numbers[1]);
        let Err(error) = ShellProcess::spawn(spawn).await else {
            panic!("{numbers:?} accepted");
        };
        assert!(error.to_string().contains("distinct numbers"), "{error}");
    }
}

/// Without an entry, the number stays closed in the program.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_inherited_unless_asked() {
    let (_file, _copy) = channel();
    let output = run(spec("{ echo x >&3; } 2>/dev/null || echo closed")).await;
    assert_eq!(output, "closed\n");
}

/// Once started, the shell holds no copy of what it handed on: a running
/// shell costs no descriptor of ours for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_lets_go_of_inherited_descriptors_once_started() {
    let (_file, copy) = channel();
    let shell = ShellProcess::spawn(spec("sleep 0.5").with_inherited(Arc::clone(&copy), 3))
        .await
        .expect("spawns");
    assert_eq!(Arc::strong_count(&copy), 1);
    assert!(shell.is_running());
    shell.wait().await;
}

/// A descriptor this process holds without close-on-exec (one it
/// inherited itself, say) does not reach the program.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_listed_descriptors_reach_the_program() {
    let (_file, copy) = channel();
    // `dup` leaves the copy without close-on-exec.
    let leaky = nix::unistd::dup(&*copy).expect("dup");
    let output = run(spec(&format!(
        "{{ echo x >&{}; }} 2>/dev/null && echo leaked || echo closed",
        std::os::fd::AsRawFd::as_raw_fd(&leaky)
    )))
    .await;
    assert_eq!(output, "closed\n");
}

/// The memfds `pid` holds open.
fn memfds_of(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .flatten()
        .filter_map(|entry| std::fs::read_link(entry.path()).ok())
        .map(|link| link.to_string_lossy().into_owned())
        .filter(|link| link.starts_with("/memfd:inherit-test"))
        .collect()
}

/// Under namespaces the shell has the descriptor and the init, which
/// lives as long as the command, does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_init_holds_no_inherited_descriptor() {
    let confinement = match Confinement::prepare(&ConfinementSpec {
        isolate_processes: true,
        ..ConfinementSpec::default()
    }) {
        Ok(confinement) => Arc::new(confinement),
        Err(error) => {
            eprintln!("skipped: {error}");
            return;
        }
    };
    let (_file, copy) = channel();
    let mut spawn = spec("exec sleep 2").with_inherited(copy, 3);
    spawn.confinement = Some(confinement);
    let shell = ShellProcess::spawn(spawn).await.expect("spawns");
    let init = shell.pid();
    let children =
        std::fs::read_to_string(format!("/proc/{init}/task/{init}/children")).expect("children");
    let sleeper: u32 = children.trim().parse().expect("one child");
    assert!(memfds_of(init).is_empty(), "{:?}", memfds_of(init));
    assert_eq!(memfds_of(sleeper).len(), 1);
    shell.terminate(std::time::Duration::from_millis(100)).await;
}
