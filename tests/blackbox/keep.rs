//! `[processes] keep` in the default mode (`contain`): a kept daemon
//! outlives the command that started it (and `KillShell` of its shell), in
//! a server-level place of its own, until the server exits or is killed;
//! what the keep list does not name still ends with its command.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use test_support::{alive, processes_naming};

use crate::containment::Server;

/// A test's directory, policy and markers. Each sleep it starts carries a
/// marker argument unique to the test (`300.<digits><role>`), by which the
/// host's pid is found (inside the namespace `$$` is another number); every
/// marked process still alive when this is dropped gets SIGKILL by pid.
struct Keep {
    dir: tempfile::TempDir,
    prefix: String,
}

impl Keep {
    fn new() -> Self {
        use std::hash::{Hash as _, Hasher as _};
        let dir = tempfile::tempdir().expect("temp dir");
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        dir.path().hash(&mut hasher);
        let prefix = format!("300.{:08}", hasher.finish() % 100_000_000);
        // Kept by its executable's file name: a copy of sleep named for it.
        std::fs::copy("/bin/sleep", dir.path().join("keeper-sleep")).expect("copy sleep");
        std::fs::write(
            dir.path().join("policy.toml"),
            "[processes]\nkeep = [\"keeper-sleep\"]\n",
        )
        .expect("write the policy");
        Self { dir, prefix }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The server in the default mode, with the keep list.
    fn server(&self) -> Server {
        let policy: PathBuf = self.path().join("policy.toml");
        Server::start(
            &[
                "--cwd",
                self.path().to_str().expect("utf-8"),
                "--policy",
                policy.to_str().expect("utf-8"),
            ],
            &[],
        )
    }

    /// The marker of `role` (a digit).
    fn marker(&self, role: u8) -> String {
        format!("{}{role}", self.prefix)
    }

    /// Starts a kept daemon (marker 1) and a plain one (marker 2), both in
    /// sessions of their own, and waits until both have exec'd (a sweep
    /// before that would find `sh`, which the keep list does not name).
    fn daemons(&self) -> String {
        format!(
            "setsid -f sh -c 'echo $$ > kept.pid; exec ./keeper-sleep {kept}' >/dev/null 2>&1\n\
             setsid -f sh -c 'echo $$ > plain.pid; exec sleep {plain}' >/dev/null 2>&1\n\
             until [ -s kept.pid ] && [ -s plain.pid ] \\\n\
               && readlink /proc/$(cat kept.pid)/exe | grep -q '/keeper-sleep$' \\\n\
               && readlink /proc/$(cat plain.pid)/exe | grep -q '/sleep$'; do sleep 0.02; done\n\
             echo started\n",
            kept = self.marker(1),
            plain = self.marker(2),
        )
    }

    /// The one live process marked `role` that runs `program` (not the
    /// `sh` before its exec), as the host sees it.
    fn find(&self, role: u8, program: &str) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let found: Vec<u32> = processes_naming(&self.marker(role))
                .into_iter()
                .filter(|pid| {
                    std::fs::read_link(format!("/proc/{pid}/exe"))
                        .is_ok_and(|exe| exe.file_name() == Some(program.as_ref()))
                })
                .collect();
            if let [pid] = found[..] {
                return pid;
            }
            assert!(
                Instant::now() < deadline,
                "no single process marked {role}: {found:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether `pid` ends within `limit`.
    fn gone_within(pid: u32, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while alive(pid) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }
}

impl Drop for Keep {
    fn drop(&mut self) {
        test_support::kill_pids(&processes_naming(&self.prefix));
    }
}

/// Whether `pid` runs in a PID namespace other than the test's.
fn namespaced(pid: u32) -> bool {
    std::fs::read_link("/proc/self/ns/pid").ok()
        != std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

#[test]
fn a_kept_daemon_outlives_its_command_and_ends_with_the_server() {
    let keep = Keep::new();
    let mut server = keep.server();
    let answer = server.bash(&keep.daemons());
    let kept = keep.find(1, "keeper-sleep");
    assert!(
        namespaced(kept),
        "the command ran in no namespace of its own"
    );
    // The plain one was swept at the command's end, and the answer says so.
    assert!(
        answer.contains("[ended 1 background job(s) left by the command]"),
        "{answer}"
    );
    assert!(
        processes_naming(&keep.marker(2)).is_empty(),
        "the plain daemon outlived its command"
    );
    // Well past the sweep of the command's leftovers.
    assert_eq!(server.bash("echo next"), "next\n");
    assert!(alive(kept), "the kept daemon ended with its command");
    server.close();
    assert!(
        Keep::gone_within(kept, Duration::from_secs(2)),
        "the kept daemon outlived the server"
    );
}

#[test]
fn a_kept_daemon_ends_within_2s_of_a_server_killed_with_sigkill() {
    let keep = Keep::new();
    let mut server = keep.server();
    server.bash(&keep.daemons());
    let kept = keep.find(1, "keeper-sleep");
    assert_eq!(server.bash("echo next"), "next\n");
    assert!(alive(kept), "the kept daemon ended with its command");
    server.kill_hard();
    assert!(
        Keep::gone_within(kept, Duration::from_secs(2)),
        "the kept daemon outlived the killed server by 2 s"
    );
}

#[test]
fn the_default_mode_says_nothing_of_the_keep_list() {
    let keep = Keep::new();
    let policy = keep.path().join("policy.toml");
    let output = crate::agent_exec(&[
        "run",
        "--cwd",
        keep.path().to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
        "--",
        "true",
    ]);
    assert!(output.status.success(), "{}", crate::stderr(&output));
    assert!(
        !crate::stderr(&output).contains("[processes] keep"),
        "{}",
        crate::stderr(&output)
    );
}
#[test]
fn a_kept_daemon_outlives_killshell_of_its_shell() {
    let keep = Keep::new();
    let mut server = keep.server();
    let started = server.call(
        "Bash",
        &json!({
            "command": format!("{}sleep 300", keep.daemons()),
            "run_in_background": true
        }),
    );
    let id = started["structuredContent"]["bash_id"]
        .as_str()
        .expect("a shell id")
        .to_owned();
    let kept = keep.find(1, "keeper-sleep");
    let plain = keep.find(2, "sleep");
    let killed = server.call("KillShell", &json!({ "shell_id": id }));
    assert_eq!(killed["isError"], false, "{killed}");
    assert!(
        Keep::gone_within(plain, Duration::from_secs(10)),
        "the plain daemon outlived KillShell"
    );
    assert_eq!(server.bash("echo next"), "next\n");
    assert!(alive(kept), "the kept daemon ended with KillShell");
    server.close();
    assert!(
        Keep::gone_within(kept, Duration::from_secs(2)),
        "the kept daemon outlived the server"
    );
}
