//! The namespace's init runs in this process's memory (docs/decisions/0013):
//! each of the two walls that keep a command from reading it holds on its
//! own. A binary of its own, because the test flips this process's
//! dumpability, which `Confinement::prepare` in other tests would race.
#![cfg(target_os = "linux")]
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::sync::Arc;

use common::spec;
use shell_runtime::{Confinement, ConfinementSpec, ShellProcess, Stream};

/// Tries PID 1's memory, environment and mappings from inside.
const TRY_PID_1: &str = "for f in mem environ maps; do \
       if head -c 1 /proc/1/$f > /dev/null 2>&1; then echo read-$f; else echo refused-$f; fi; \
     done";

/// What a command under `confinement` reads of PID 1, with this process
/// (and so the init) dumpable or not.
async fn attempts(confinement: ConfinementSpec, dumpable: bool) -> String {
    let confinement = Arc::new(Confinement::prepare(&confinement).expect("prepares (root)"));
    // `prepare` made us undumpable.
    nix::sys::prctl::set_dumpable(dumpable).expect("set dumpable");
    let mut spawn = spec(TRY_PID_1);
    spawn.confinement = Some(confinement);
    let shell = ShellProcess::spawn(spawn).await.expect("spawns");
    shell.wait().await;
    nix::sys::prctl::set_dumpable(false).expect("undumpable");
    shell.snapshot(Stream::Stdout).render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_wall_alone_keeps_the_init_out_of_reach() {
    let dir = tempfile::tempdir().expect("dir");
    let refused = "refused-mem\nrefused-environ\nrefused-maps\n";
    let namespaces = ConfinementSpec {
        isolate_processes: true,
        ..ConfinementSpec::default()
    };
    let landlock = ConfinementSpec {
        restrict_writes: true,
        writable: vec![dir.path().to_path_buf()],
        ..namespaces.clone()
    };
    // Undumpable alone, without Landlock.
    assert_eq!(attempts(namespaces.clone(), false).await, refused);
    // Landlock alone: the init is outside the shell's domain.
    assert_eq!(attempts(landlock, true).await, refused);
    // Neither: what the walls stop (`/proc/1/mem` at offset 0 reads
    // nothing, so only the environment and the mappings show).
    assert_eq!(
        attempts(namespaces, true).await,
        "refused-mem\nread-environ\nread-maps\n"
    );
}
