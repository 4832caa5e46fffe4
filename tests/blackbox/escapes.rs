//! Processes that leave their command's session, process group and
//! environment tag still end with it: at the end of a foreground call, on
//! `KillShell`, at server exit, and when the server is killed with SIGKILL
//! (its janitor then removes its cgroups and temp directory), with and
//! without the sandbox. A process on the keep list survives its command
//! and ends with the server.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::{alive, read_pid_blocking, wait_gone};

use crate::containment::Server;

/// Each escape starts a `sleep SECONDS` that writes its pid to `NAME.pid`
/// first. `SECONDS` is unique to the test and the escape, so the test finds
/// the sleep's pid as the host sees it: under the sandbox the command runs
/// in a PID namespace of its own, where `$$` is another number.
const ESCAPES: &[(&str, &str)] = &[
    (
        "setsid-f",
        "setsid -f env -u AGENT_EXEC_SHELL sh -c 'echo $$ > setsid-f.pid; exec sleep SECONDS'",
    ),
    (
        "double-fork",
        "(setsid env -u AGENT_EXEC_SHELL sh -c 'echo $$ > double-fork.pid; exec sleep SECONDS' &)",
    ),
    (
        "env-i",
        "setsid -f env -i /bin/sh -c 'echo $$ > env-i.pid; exec /bin/sleep SECONDS'",
    ),
    (
        "process-group",
        "set -m; env -u AGENT_EXEC_SHELL setsid sh -c 'echo $$ > process-group.pid; exec sleep SECONDS' & set +m",
    ),
];

/// The `sleep` argument of escape `index` in the test whose directory is `dir`.
fn marker_seconds(dir: &Path, index: usize) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    dir.hash(&mut hasher);
    format!("300.{:08}{index}", hasher.finish() % 100_000_000)
}

/// The host pid of the process whose command line is `sleep SECONDS`.
fn host_pid_of_sleep(seconds: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.find_map(|entry| {
        let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let mut words = cmdline.split(|byte| *byte == 0);
        let program = words.next()?;
        (program.ends_with(b"sleep") && words.next()? == seconds.as_bytes()).then_some(pid)
    })
}

/// Starts every escape and returns once each has written its pid.
fn escapes_command(dir: &Path) -> String {
    let mut command = String::new();
    for (index, (_, escape)) in ESCAPES.iter().enumerate() {
        command.push_str(&escape.replace("SECONDS", &marker_seconds(dir, index)));
        command.push_str(" >/dev/null 2>&1\n");
    }
    command.push_str("for f in");
    for (name, _) in ESCAPES {
        command.push_str(&format!(" {name}.pid"));
    }
    command.push_str("; do while [ ! -s $f ]; do sleep 0.02; done; done\n");
    command
}

/// The escapes' pids; SIGKILL to those still alive when dropped.
struct Markers(Vec<(&'static str, u32)>);

impl Markers {
    fn read(dir: &Path) -> Self {
        Self(
            ESCAPES
                .iter()
                .enumerate()
                .map(|(index, (name, _))| {
                    // Started once it wrote its pid; then found by its argument.
                    read_pid_blocking(&dir.join(format!("{name}.pid")));
                    let seconds = marker_seconds(dir, index);
                    let start = Instant::now();
                    let pid = loop {
                        if let Some(pid) = host_pid_of_sleep(&seconds) {
                            break pid;
                        }
                        assert!(
                            start.elapsed() < Duration::from_secs(10),
                            "no `sleep {seconds}` for {name}"
                        );
                        std::thread::sleep(Duration::from_millis(20));
                    };
                    (*name, pid)
                })
                .collect(),
        )
    }

    /// The markers of a command that has already ended: the pids they
    /// wrote, or under the sandbox (another PID namespace) those of their
    /// `sleep`s still to be found on the host within a second; one not
    /// found has ended.
    fn read_after_end(dir: &Path, sandbox: bool) -> Self {
        Self(
            ESCAPES
                .iter()
                .enumerate()
                .filter_map(|(index, (name, _))| {
                    let written = read_pid_blocking(&dir.join(format!("{name}.pid")));
                    if !sandbox {
                        return Some((*name, written));
                    }
                    let seconds = marker_seconds(dir, index);
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_secs(1) {
                        if let Some(pid) = host_pid_of_sleep(&seconds) {
                            return Some((*name, pid));
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    None
                })
                .collect(),
        )
    }

    /// Every marker is gone, or the test fails naming those left.
    fn assert_gone(&self, after: &str) {
        let left: Vec<&str> = self
            .0
            .iter()
            .filter(|(_, pid)| !wait_gone(*pid))
            .map(|(name, _)| *name)
            .collect();
        assert!(left.is_empty(), "still alive after {after}: {left:?}");
    }

    fn assert_alive(&self) {
        for (name, pid) in &self.0 {
            assert!(alive(*pid), "{name} ({pid}) should still run");
        }
    }
}

impl Drop for Markers {
    fn drop(&mut self) {
        for (_, pid) in &self.0 {
            if alive(*pid) {
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            }
        }
    }
}

/// `--sandbox` modes: `off`, `contain` (the default) and a walled one.
const OFF: &str = "off";
const CONTAIN: &str = "contain";
const WALLED: &str = "workspace-write";

fn start(dir: &Path, mode: &str, policy: Option<&Path>) -> Server {
    let mut args = vec!["--cwd", dir.to_str().expect("utf-8"), "--sandbox", mode];
    if let Some(policy) = policy {
        args.extend(["--policy", policy.to_str().expect("utf-8")]);
    }
    Server::start(&args, &[])
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A background shell that starts the escapes and then waits.
fn background_escapes(server: &mut Server, dir: &Path) -> (String, Markers) {
    let started = server.call(
        "Bash",
        &json!({
            "command": format!("{}sleep 300", escapes_command(dir)),
            "run_in_background": true
        }),
    );
    let id = started["structuredContent"]["bash_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no bash_id in {started}"))
        .to_owned();
    (id, Markers::read(dir))
}

fn foreground_end(mode: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = start(dir.path(), mode, None);
    let answer = server.bash(&escapes_command(dir.path()));
    let markers = Markers::read_after_end(dir.path(), mode != OFF);
    markers.assert_gone(&format!("the foreground call ended ({answer})"));
    server.close();
}

fn kill_shell(mode: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = start(dir.path(), mode, None);
    let (id, markers) = background_escapes(&mut server, dir.path());
    markers.assert_alive();
    let killed = server.call("KillShell", &json!({ "shell_id": id }));
    assert_eq!(killed["isError"], false, "{}", text(&killed));
    markers.assert_gone("KillShell");
    server.close();
}

fn server_exit(mode: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = start(dir.path(), mode, None);
    let (_, markers) = background_escapes(&mut server, dir.path());
    server.close();
    markers.assert_gone("the server's exit");
}

/// The server's parent cgroup in the v1 pids hierarchy, read from a
/// command's `/proc/PID/cgroup` (`None` where commands get no cgroup).
fn server_cgroup(pid: u32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = text
        .lines()
        .find_map(|line| line.split_once(":pids:").map(|(_, path)| path.to_owned()))?;
    let dir = Path::new("/sys/fs/cgroup/pids").join(path.trim_start_matches('/'));
    let parent = dir.parent()?;
    parent
        .file_name()?
        .to_str()?
        .starts_with("agent-exec-")
        .then(|| parent.to_path_buf())
}

fn server_killed(mode: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = start(dir.path(), mode, None);
    let server_pid = server.pid();
    let (_, markers) = background_escapes(&mut server, dir.path());
    let cgroup = server_cgroup(markers.0[0].1);
    let temp_dirs = crate::server_temp_dirs(server_pid);
    assert!(!temp_dirs.is_empty(), "no temp dir seen");
    server.kill_hard();
    let deadline = Instant::now() + Duration::from_secs(2);
    let all_gone = || {
        markers.0.iter().all(|(_, pid)| !alive(*pid))
            && cgroup.as_ref().is_none_or(|cgroup| !cgroup.exists())
            && temp_dirs.iter().all(|dir| !dir.exists())
    };
    while !all_gone() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<&str> = markers
        .0
        .iter()
        .filter(|(_, pid)| alive(*pid))
        .map(|(name, _)| *name)
        .collect();
    assert!(
        left.is_empty(),
        "alive 2 s after kill -9 of the server: {left:?}"
    );
    if let Some(cgroup) = &cgroup {
        assert!(!cgroup.exists(), "{} is still there", cgroup.display());
    }
    let left: Vec<&PathBuf> = temp_dirs.iter().filter(|dir| dir.exists()).collect();
    assert!(
        left.is_empty(),
        "the temp dirs outlived the server: {left:?}"
    );
}

#[test]
fn escapes_end_with_the_foreground_call() {
    foreground_end(OFF);
}

#[test]
fn escapes_end_with_the_foreground_call_contained() {
    foreground_end(CONTAIN);
}

#[test]
fn escapes_end_with_the_foreground_call_in_the_sandbox() {
    foreground_end(WALLED);
}

#[test]
fn escapes_end_with_kill_shell() {
    kill_shell(OFF);
}

#[test]
fn escapes_end_with_kill_shell_contained() {
    kill_shell(CONTAIN);
}

#[test]
fn escapes_end_with_kill_shell_in_the_sandbox() {
    kill_shell(WALLED);
}

#[test]
fn escapes_end_with_the_server() {
    server_exit(OFF);
}

#[test]
fn escapes_end_with_the_server_contained() {
    server_exit(CONTAIN);
}

#[test]
fn escapes_end_with_the_server_in_the_sandbox() {
    server_exit(WALLED);
}

#[test]
fn escapes_end_within_2s_of_a_server_killed_with_sigkill() {
    server_killed(OFF);
}

#[test]
fn escapes_end_within_2s_of_a_server_killed_with_sigkill_contained() {
    server_killed(CONTAIN);
}

#[test]
fn escapes_end_within_2s_of_a_server_killed_with_sigkill_in_the_sandbox() {
    server_killed(WALLED);
}

#[test]
fn a_kept_process_outlives_its_command_and_ends_with_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Kept by its executable's file name: a copy of sleep under a name of its own.
    let keeper = dir.path().join("keeper-sleep");
    std::fs::copy("/bin/sleep", &keeper).expect("copy sleep");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[processes]\nkeep = [\"keeper-sleep\"]\n").expect("write policy");
    let mut server = start(dir.path(), OFF, Some(&policy));
    server.bash("setsid -f env -u AGENT_EXEC_SHELL sh -c 'echo $$ > kept.pid; exec ./keeper-sleep 300'; while [ ! -s kept.pid ]; do sleep 0.02; done");
    let kept = Markers(vec![(
        "kept",
        read_pid_blocking(&dir.path().join("kept.pid")),
    )]);
    // Well past the sweep of the command's leftovers.
    let answer = server.bash("echo next");
    assert_eq!(answer, "next\n");
    kept.assert_alive();
    server.close();
    kept.assert_gone("the server's exit");
}

/// Without a cgroup (an unprivileged server on cgroup v1 cannot make one),
/// the escapes still end at server exit at the latest: the server ends
/// every orphan it adopted.
#[test]
fn escapes_end_at_exit_where_no_cgroup_can_be_made() {
    let is_root = std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"))
    });
    if !is_root || !Path::new("/usr/bin/setpriv").exists() {
        assert!(
            std::env::var_os("AGENT_EXEC_SANDBOX_SELF_TEST").is_none(),
            "the sandbox self-test cannot skip this: needs root and setpriv"
        );
        eprintln!("skipped: needs root and setpriv to start the server as another user");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod");
    let binary = dir.path().join("agent-exec");
    std::fs::copy(env!("CARGO_BIN_EXE_agent-exec"), &binary).expect("copy the binary");
    let output = Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&binary)
        .args([
            "run",
            "--sandbox",
            "off",
            "--cwd",
            dir.path().to_str().expect("utf-8"),
            "--",
        ])
        .arg(escapes_command(dir.path()))
        .env("HOME", dir.path())
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Markers::read_after_end(dir.path(), false).assert_gone("the exit of a server without cgroups");
}
