//! Per-command limits seen from outside: a command past its memory limit
//! (`--memory-limit`, or the policy's `[limits] memory`) is reported out
//! of memory and the server answers the next call; without a limit, when
//! memory runs out around the server, the OOM killer takes the command
//! (`oom_score_adj` 1000), not the server; one command's 1022 processes do
//! not stop another shell (each command has its own process cap).
//!
//! The memory tests run the server inside a v1 memory cgroup the test makes
//! (512 MiB or 256 MiB), never against the machine's OOM killer; they are
//! skipped where no such cgroup can be made (not root, no v1 memory
//! hierarchy).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::containment::Server;

/// Writes 200 MiB for real (a bytes object filled with `x`).
const HUNGRY: &str = "python3 -c 'b = b\"x\" * (200 << 20)'";

/// A v1 memory cgroup of the test's own, below the test process's one,
/// with a limit; whatever is left in it is killed and it is removed when
/// dropped.
struct MemoryCgroup(PathBuf);

impl MemoryCgroup {
    fn new(limit: u64) -> Option<Self> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let own = own
            .lines()
            .find_map(|line| line.split_once(":memory:").map(|(_, path)| path.to_owned()))?;
        let base = Path::new("/sys/fs/cgroup/memory").join(own.trim_start_matches('/'));
        let dir = base.join(format!(
            "blackbox-memory-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).ok()?;
        let cgroup = Self(dir);
        std::fs::write(cgroup.0.join("memory.limit_in_bytes"), limit.to_string()).ok()?;
        // Where swap is accounted, the limit covers it too.
        let _ = std::fs::write(
            cgroup.0.join("memory.memsw.limit_in_bytes"),
            limit.to_string(),
        );
        Some(cgroup)
    }

    /// A shell that moves itself into the cgroup, then execs the server.
    fn wrapper(&self) -> Vec<String> {
        vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("echo $$ > {}/cgroup.procs && exec \"$@\"", self.0.display()),
            "sh".to_owned(),
        ]
    }

    fn start(&self, args: &[&str]) -> Server {
        let wrapper = self.wrapper();
        let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
        Server::start_wrapped(&wrapper, args, &[])
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        fn pids(dir: &Path, into: &mut Vec<i32>) {
            if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                into.extend(
                    text.split_whitespace()
                        .filter_map(|pid| pid.parse::<i32>().ok()),
                );
            }
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    pids(&entry.path(), into);
                }
            }
        }
        fn remove(dir: &Path) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    remove(&entry.path());
                }
            }
            let _ = std::fs::remove_dir(dir);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut left = Vec::new();
            pids(&self.0, &mut left);
            if left.is_empty() || Instant::now() > deadline {
                break;
            }
            for pid in left {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        remove(&self.0);
    }
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[expect(clippy::print_stderr, reason = "a skipped test says why")]
fn skip(what: &str) {
    // `.ci/run`'s sandbox phase runs as root, where one can be made.
    assert!(
        std::env::var_os("AGENT_EXEC_SANDBOX_SELF_TEST").is_none(),
        "the sandbox self-test cannot skip {what}"
    );
    eprintln!("skipped: no v1 memory cgroup can be made here for {what}");
}

/// The server still answers, and its process is alive.
fn assert_alive(server: &mut Server) {
    assert_eq!(server.bash("echo ok"), "ok\n");
    assert!(crate::alive(server.pid()), "the server died");
}

#[test]
fn a_command_past_its_memory_limit_is_reported_out_of_memory() {
    let Some(cgroup) = MemoryCgroup::new(512 << 20) else {
        return skip("a server in a 512 MiB cgroup");
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let mut server = cgroup.start(&["--cwd", cwd, "--memory-limit", "64M"]);
    let result = server.call("Bash", &json!({ "command": HUNGRY }));
    let answer = text(&result);
    assert!(
        answer.starts_with("Command killed: out of memory (limit 64 MiB), exit code 137"),
        "{answer}"
    );
    assert_eq!(result["structuredContent"]["status"], "failed", "{result}");
    assert_eq!(result["structuredContent"]["exit_code"], 137, "{result}");
    assert_alive(&mut server);
    // Within the limit, nothing is said.
    let fits = server.call(
        "Bash",
        &json!({ "command": "python3 -c 'b = b\"x\" * (16 << 20); print(len(b) >> 20)'" }),
    );
    assert_eq!(text(&fits), "16\n");
    // A background one: BashOutput's status line says it.
    let started = server.call(
        "Bash",
        &json!({ "command": HUNGRY, "run_in_background": true }),
    );
    let id = started["structuredContent"]["bash_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no bash_id in {started}"))
        .to_owned();
    let read = server.call("BashOutput", &json!({ "bash_id": id, "wait_ms": 20000 }));
    let status = text(&read);
    assert!(
        status.starts_with(
            "Status: failed, Exit code: 137, killed: out of memory (limit 64 MiB), Duration: "
        ),
        "{status}"
    );
    server.close();
}

#[test]
fn the_policy_sets_the_memory_limit_and_the_flag_wins() {
    let Some(cgroup) = MemoryCgroup::new(512 << 20) else {
        return skip("a server in a 512 MiB cgroup");
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[limits]\nmemory = \"96M\"\n").expect("write policy");
    let policy = policy.to_str().expect("utf-8");
    let mut server = cgroup.start(&["--cwd", cwd, "--policy", policy]);
    let answer = server.bash(HUNGRY);
    assert!(
        answer.starts_with("Command killed: out of memory (limit 96 MiB), exit code 137"),
        "{answer}"
    );
    server.close();
    let mut server = cgroup.start(&["--cwd", cwd, "--policy", policy, "--memory-limit", "1.5G"]);
    // 200 MiB fits under the flag's 1.5 GiB (and the test's 512 MiB).
    let answer = server.bash("python3 -c 'b = b\"x\" * (200 << 20); print(len(b) >> 20)'");
    assert_eq!(answer, "200\n");
    server.close();
}

#[test]
fn a_bad_memory_limit_is_refused_at_start() {
    let output = crate::agent_exec(&["run", "--memory-limit", "4 gigs", "--", "true"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = crate::stderr(&output);
    assert!(stderr.contains("4 gigs"), "{stderr}");
}

/// Without a limit of its own, a command filling the memory of the cgroup
/// around the server is what the OOM killer takes: the server lives on.
#[test]
fn when_memory_runs_out_the_oom_killer_takes_the_command_not_the_server() {
    let Some(cgroup) = MemoryCgroup::new(256 << 20) else {
        return skip("a server in a 256 MiB cgroup");
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let mut server = cgroup.start(&["--cwd", cwd]);
    // The server inherits this test's score and keeps it: a namespace's
    // init shares the server's memory, and a score written there would
    // be copied to the server by the kernel (the start-up probe is one).
    let server_score = std::fs::read_to_string("/proc/self/oom_score_adj").expect("our score");
    assert_ne!(
        server_score.trim(),
        "1000",
        "this test runs at the top score"
    );
    let started = std::fs::read_to_string(format!("/proc/{}/oom_score_adj", server.pid()))
        .expect("the server's score");
    assert_eq!(
        started, server_score,
        "the server's score changed at start-up"
    );
    assert_eq!(server.bash("cat /proc/self/oom_score_adj"), "1000\n");
    let answer = server.bash("python3 -c 'b = b\"x\" * (400 << 20)'");
    assert!(
        answer.starts_with("Command killed: out of memory, exit code 137"),
        "{answer}"
    );
    assert_alive(&mut server);
    let after = std::fs::read_to_string(format!("/proc/{}/oom_score_adj", server.pid()))
        .expect("the server's score");
    assert_eq!(after, server_score, "the server's own score changed");
    server.close();
}

/// One command's 1022 sleeping processes (and its shell) fit under its
/// own cap of 1024; another shell still starts. Under the sandbox too,
/// where all commands once shared one cap of 1024.
fn many_processes_do_not_stop_another_shell(args: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let mut full = vec!["--cwd", cwd];
    full.extend_from_slice(args);
    let mut server = Server::start(&full, &[]);
    let marker = format!("30.{}{}", std::process::id(), args.len());
    let _cleanup = KillSleeps(marker.clone());
    let started = server.call(
        "Bash",
        &json!({
            "command": format!(
                "for i in $(seq 1022); do sleep {marker} & done; echo started > started; wait"
            ),
            "run_in_background": true
        }),
    );
    let id = started["structuredContent"]["bash_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no bash_id in {started}"))
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.path().join("started").exists() {
        assert!(Instant::now() < deadline, "the 1022 sleeps did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // `&` returns at the fork: the last children may not have exec'd
    // `sleep` yet when `started` is written.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut count = sleeps(&marker).len();
    while count < 1022 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        count = sleeps(&marker).len();
    }
    let answer = server.bash("echo ok");
    let killed = server.call("KillShell", &json!({ "shell_id": id }));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sleeps(&marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = sleeps(&marker);
    assert_eq!(count, 1022, "not every sleep started");
    assert_eq!(answer, "ok\n");
    assert_eq!(killed["isError"], false, "{killed}");
    assert!(left.is_empty(), "{} sleeps outlived KillShell", left.len());
    server.close();
}

/// SIGKILL, by pid, to every `sleep MARKER` left when dropped.
struct KillSleeps(String);

impl Drop for KillSleeps {
    fn drop(&mut self) {
        test_support::kill_pids(&sleeps(&self.0));
    }
}

/// The pids of the processes running `sleep MARKER`.
fn sleeps(marker: &str) -> Vec<u32> {
    test_support::processes_where(|words| {
        words.len() == 2 && words[0].ends_with(b"sleep") && words[1] == marker.as_bytes()
    })
}

#[test]
fn many_processes_of_one_command_do_not_stop_another_shell() {
    many_processes_do_not_stop_another_shell(&[]);
}

#[test]
fn many_processes_of_one_command_do_not_stop_another_shell_in_the_sandbox() {
    many_processes_do_not_stop_another_shell(&["--sandbox", "workspace-write"]);
}
