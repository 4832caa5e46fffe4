//! Processes that leave their command's session, process group, parent
//! and environment tag still end with it: at the end of a foreground call,
//! on `KillShell`, on a timeout, at server exit, and when the server is
//! killed with SIGKILL (its janitor then removes its cgroups and temp
//! directory), in the default mode, under `--sandbox off` and under a
//! sandbox. The command's cgroup, not its process tree, is what it owns: a
//! child made with `CLONE_PARENT`, a stopped or traced process, a renamed
//! one and a daemon end with it too. A process on the keep list survives
//! its command and ends with the server.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::{alive, is_root, read_pid_blocking};

use crate::containment::Server;

/// Each escape starts one or more `sleep` processes whose argument is a
/// marker unique to the test and the escape (`SECONDS`, `SECONDS2`), and
/// writes `NAME.pid` once it is under way. The test finds the sleeps as the
/// host sees them by their argument (under a PID namespace `$$` is another
/// number, and `exec -a` renames the program), and kills them by pid in
/// cleanup. Every escape sheds the `AGENT_EXEC_SHELL` tag, so only the
/// cgroup (or the namespace) still ties it to its command.
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
    (
        "nohup",
        "nohup env -u AGENT_EXEC_SHELL setsid sh -c 'echo $$ > nohup.pid; exec sleep SECONDS' &",
    ),
    (
        "disown",
        "env -u AGENT_EXEC_SHELL setsid sh -c 'echo $$ > disown.pid; exec sleep SECONDS' & disown",
    ),
    (
        "clone-parent",
        "env -u AGENT_EXEC_SHELL python3 -c '
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
number = 56 if platform.machine() == \"x86_64\" else 220
# CLONE_PARENT | SIGCHLD: the child is a sibling of python, under its shell.
if libc.syscall(number, 0x8000 | 17, 0, 0, 0, 0) == 0:
    os.setsid()
    open(\"clone-parent.pid\", \"w\").write(str(os.getpid()))
    os.execvp(\"sleep\", [\"sleep\", \"SECONDS\"])
'",
    ),
    (
        "stopped",
        "env -u AGENT_EXEC_SHELL setsid sh -c 'echo $$ > stopped.pid; exec sleep SECONDS' &
while [ ! -s stopped.pid ]; do sleep 0.02; done; sleep 0.1; kill -STOP $(cat stopped.pid)",
    ),
    (
        "traced",
        "env -u AGENT_EXEC_SHELL python3 -c '
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
if os.fork() == 0:
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME: stopped at its exec
    open(\"traced.pid\", \"w\").write(str(os.getpid()))
    os.execvp(\"sleep\", [\"sleep\", \"SECONDS\"])
# The tracer leaves the session and lives on as a sleep too.
os.setsid()
os.execvp(\"sleep\", [\"sleep\", \"SECONDS2\"])
' &",
    ),
    (
        "exec-a",
        "setsid -f env -u AGENT_EXEC_SHELL bash -c 'echo $$ > exec-a.pid; exec -a kworker/0:1 sleep SECONDS'",
    ),
    (
        "daemon",
        "env -u AGENT_EXEC_SHELL python3 -c '
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(\"daemon.pid\", \"w\").write(str(os.getpid()))
        os.execvp(\"sleep\", [\"sleep\", \"SECONDS\"])
    os._exit(0)
'",
    ),
    (
        "cgroup-move",
        "env -u AGENT_EXEC_SHELL setsid sh -c '
if python3 -c \"import sys; open(\\\"/sys/fs/cgroup/pids/cgroup.procs\\\", \\\"w\\\").write(sys.argv[1])\" $$
then echo moved > moved; else echo refused > moved; fi
echo $$ > cgroup-move.pid; exec sleep SECONDS' 2>/dev/null &",
    ),
];

/// The escape that moves itself to the root pids cgroup (by Python: the
/// analysis refuses a write it can see into `/sys`): it can only
/// where the cgroup tree is writable (root, no sandbox), and is then not
/// contained (docs/sandbox.md, Containment).
const MOVER: &str = "cgroup-move";

/// How a test's server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No `--sandbox` flag.
    Default,
    /// `--sandbox off`.
    Off,
    /// `--sandbox workspace-write`.
    Sandbox,
}

impl Mode {
    fn args(self) -> &'static [&'static str] {
        match self {
            Self::Default => &[],
            Self::Off => &["--sandbox", "off"],
            Self::Sandbox => &["--sandbox", "workspace-write"],
        }
    }
}

/// The markers' common start in the test whose directory is `dir`.
fn marker_prefix(dir: &Path) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    dir.hash(&mut hasher);
    format!("300.{:08}", hasher.finish() % 100_000_000)
}

/// The command that starts every escape and returns once each is under way.
fn escapes_command(dir: &Path) -> String {
    let prefix = marker_prefix(dir);
    let mut command = String::new();
    for (index, (_, escape)) in ESCAPES.iter().enumerate() {
        let escape = escape
            .replace("SECONDS2", &format!("{prefix}{index:02}2"))
            .replace("SECONDS", &format!("{prefix}{index:02}1"));
        command.push_str(&format!("{{ {escape}\n}} >/dev/null 2>&1\n"));
    }
    command.push_str("for f in");
    for (name, _) in ESCAPES {
        command.push_str(&format!(" {name}.pid"));
    }
    command.push_str("; do while [ ! -s $f ]; do sleep 0.02; done; done\n");
    command
}

/// The live marker processes of the test in `dir`, as (escape name, pid):
/// every process with an argument that is one of its markers.
fn markers_alive(dir: &Path) -> Vec<(&'static str, u32)> {
    let prefix = marker_prefix(dir);
    test_support::scan_processes(|pid, words| {
        let index = words.iter().skip(1).find_map(|word| {
            let rest = std::str::from_utf8(word).ok()?.strip_prefix(&prefix)?;
            (rest.len() == 3 && rest.bytes().all(|b| b.is_ascii_digit()))
                .then(|| rest.get(..2)?.parse::<usize>().ok())?
        })?;
        let name = ESCAPES.get(index)?.0;
        alive(pid).then_some((name, pid))
    })
}

/// The escapes of the test in `dir`; SIGKILL, by pid, to every marker
/// still alive when dropped.
struct Markers {
    dir: PathBuf,
    /// The mover's sleep escaped its cgroup (possible only where the
    /// command could write the cgroup tree): it is left out of the checks.
    mover_escaped: bool,
}

impl Markers {
    /// Once every escape wrote its pid file; checks each is alive, and
    /// what the mover could do in `mode`.
    fn started(dir: &Path, mode: Mode) -> Self {
        let mut markers = Self {
            dir: dir.to_path_buf(),
            mover_escaped: false,
        };
        for (name, _) in ESCAPES {
            read_pid_blocking(&dir.join(format!("{name}.pid")));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let alive = markers_alive(dir);
            let missing: Vec<&str> = ESCAPES
                .iter()
                .map(|(name, _)| *name)
                .filter(|name| !alive.iter().any(|(found, _)| found == name))
                .collect();
            if missing.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "no sleep found for {missing:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        markers.check_mover(mode);
        markers
    }

    /// For a command that has already ended: its pid files are there.
    fn ended(dir: &Path, mode: Mode) -> Self {
        for (name, _) in ESCAPES {
            read_pid_blocking(&dir.join(format!("{name}.pid")));
        }
        let mut markers = Self {
            dir: dir.to_path_buf(),
            mover_escaped: false,
        };
        markers.check_mover(mode);
        markers
    }

    /// A namespaced command (a sandbox, or `contain`) cannot move itself:
    /// the cgroup tree is read-only there. Under `--sandbox off` a root
    /// command can, and is then not contained (as docs/sandbox.md says).
    fn check_mover(&mut self, mode: Mode) {
        let moved = std::fs::read_to_string(self.dir.join("moved")).unwrap_or_default();
        let namespaced = namespaced(&self.dir);
        if mode == Mode::Sandbox || namespaced {
            assert_eq!(
                moved.trim(),
                "refused",
                "a contained command left its cgroup"
            );
        } else if mode == Mode::Off && is_root() && Path::new("/sys/fs/cgroup/pids").is_dir() {
            assert_eq!(
                moved.trim(),
                "moved",
                "a root command under --sandbox off could not move"
            );
        }
        self.mover_escaped = moved.trim() == "moved";
    }

    fn left(&self) -> Vec<&'static str> {
        let mut left: Vec<&str> = markers_alive(&self.dir)
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| !(self.mover_escaped && *name == MOVER))
            .collect();
        left.sort_unstable();
        left.dedup();
        left
    }

    /// No marker is left within 2 s, or the test fails naming those left.
    fn assert_gone(&self, after: &str) {
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.left().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left = self.left();
        assert!(left.is_empty(), "still alive 2 s after {after}: {left:?}");
    }
}

impl Drop for Markers {
    fn drop(&mut self) {
        for (_, pid) in markers_alive(&self.dir) {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
    }
}

/// A process by pid, sent SIGKILL when dropped if still alive.
struct Kept(u32);

impl Drop for Kept {
    fn drop(&mut self) {
        if alive(self.0) {
            let _ = Command::new("kill")
                .arg("-9")
                .arg(self.0.to_string())
                .status();
        }
    }
}

/// Whether the escapes of `dir` run in a PID namespace other than ours.
fn namespaced(dir: &Path) -> bool {
    let ours = std::fs::read_link("/proc/self/ns/pid").ok();
    markers_alive(dir)
        .iter()
        .any(|(_, pid)| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok() != ours)
}

fn start(dir: &Path, mode: Mode, policy: Option<&Path>) -> Server {
    let mut args = vec!["--cwd", dir.to_str().expect("utf-8")];
    args.extend_from_slice(mode.args());
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
fn background_escapes(server: &mut Server, dir: &Path, mode: Mode) -> (String, Markers) {
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
    (id, Markers::started(dir, mode))
}

fn foreground_end(mode: Mode) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = start(dir.path(), mode, None);
    let answer = server.bash(&escapes_command(dir.path()));
    let markers = Markers::ended(dir.path(), mode);
    markers.assert_gone(&format!("the foreground call ended ({answer})"));
    server.close();
}

fn timeout(mode: Mode) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = start(dir.path(), mode, None);
    let result = server.call(
        "Bash",
        &json!({
            "command": format!("{}touch all-started; sleep 300", escapes_command(dir.path())),
            "timeout": 8000
        }),
    );
    assert!(
        dir.path().join("all-started").exists(),
        "the escapes did not all start before the timeout: {}",
        text(&result)
    );
    assert_eq!(result["structuredContent"]["status"], "timeout", "{result}");
    let markers = Markers::ended(dir.path(), mode);
    markers.assert_gone("the timeout");
    server.close();
}

fn kill_shell(mode: Mode) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = start(dir.path(), mode, None);
    let (id, markers) = background_escapes(&mut server, dir.path(), mode);
    let killed = server.call("KillShell", &json!({ "shell_id": id }));
    assert_eq!(killed["isError"], false, "{}", text(&killed));
    markers.assert_gone("KillShell");
    server.close();
}

fn server_exit(mode: Mode) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = start(dir.path(), mode, None);
    let (_, markers) = background_escapes(&mut server, dir.path(), mode);
    server.close();
    markers.assert_gone("the server's exit");
}

/// The server's parent cgroup in the v1 pids hierarchy, read from a
/// process's `/proc/PID/cgroup` (`None` where commands get no cgroup).
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

fn server_killed(mode: Mode) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = start(dir.path(), mode, None);
    let server_pid = server.pid();
    let (_, markers) = background_escapes(&mut server, dir.path(), mode);
    let cgroup = markers_alive(dir.path())
        .into_iter()
        .find(|(name, _)| *name != MOVER)
        .and_then(|(_, pid)| server_cgroup(pid));
    let temp_dirs = crate::server_temp_dirs(server_pid);
    assert!(!temp_dirs.is_empty(), "no temp dir seen");
    server.kill_hard();
    markers.assert_gone("kill -9 of the server");
    let deadline = Instant::now() + Duration::from_secs(2);
    let all_gone = || {
        cgroup.as_ref().is_none_or(|cgroup| !cgroup.exists())
            && temp_dirs.iter().all(|dir| !dir.exists())
    };
    while !all_gone() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Some(cgroup) = &cgroup {
        assert!(!cgroup.exists(), "{} is still there", cgroup.display());
    }
    let left: Vec<&PathBuf> = temp_dirs.iter().filter(|dir| dir.exists()).collect();
    assert!(
        left.is_empty(),
        "the temp dirs outlived the server: {left:?}"
    );
}

/// The janitor killed first, then the server with SIGKILL: in a PID
/// namespace every process of a command dies with the namespace's init,
/// which dies with the server. Without a namespace nothing is left to end
/// the escapes until another server starts (docs/sandbox.md).
#[expect(clippy::print_stderr, reason = "a skipped test says why")]
fn janitor_then_server_killed(mode: Mode) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = start(dir.path(), mode, None);
    let server_pid = server.pid();
    let (_, markers) = background_escapes(&mut server, dir.path(), mode);
    if !namespaced(dir.path()) {
        assert_ne!(
            mode,
            Mode::Sandbox,
            "a sandboxed command without a PID namespace"
        );
        eprintln!("skipped: commands run without a PID namespace in {mode:?}");
        return;
    }
    let janitor = crate::janitor::janitor_of(server_pid).expect("the server has a janitor");
    Command::new("kill")
        .args(["-9", &janitor.to_string()])
        .status()
        .expect("kill the janitor");
    server.kill_hard();
    markers.assert_gone("kill -9 of the janitor, then of the server");
    // A janitor started again before the server died ends with nothing to do.
}

#[test]
fn escapes_end_with_the_foreground_call() {
    foreground_end(Mode::Default);
}

#[test]
fn escapes_end_with_the_foreground_call_without_a_sandbox() {
    foreground_end(Mode::Off);
}

#[test]
fn escapes_end_with_the_foreground_call_in_the_sandbox() {
    foreground_end(Mode::Sandbox);
}

#[test]
fn escapes_end_with_a_timeout() {
    timeout(Mode::Default);
}

#[test]
fn escapes_end_with_a_timeout_without_a_sandbox() {
    timeout(Mode::Off);
}

#[test]
fn escapes_end_with_a_timeout_in_the_sandbox() {
    timeout(Mode::Sandbox);
}

#[test]
fn escapes_end_with_kill_shell() {
    kill_shell(Mode::Default);
}

#[test]
fn escapes_end_with_kill_shell_without_a_sandbox() {
    kill_shell(Mode::Off);
}

#[test]
fn escapes_end_with_kill_shell_in_the_sandbox() {
    kill_shell(Mode::Sandbox);
}

#[test]
fn escapes_end_with_the_server() {
    server_exit(Mode::Default);
}

#[test]
fn escapes_end_with_the_server_without_a_sandbox() {
    server_exit(Mode::Off);
}

#[test]
fn escapes_end_with_the_server_in_the_sandbox() {
    server_exit(Mode::Sandbox);
}

#[test]
fn escapes_end_within_2s_of_a_server_killed_with_sigkill() {
    server_killed(Mode::Default);
}

#[test]
fn escapes_end_within_2s_of_a_server_killed_with_sigkill_without_a_sandbox() {
    server_killed(Mode::Off);
}

#[test]
fn escapes_end_within_2s_of_a_server_killed_with_sigkill_in_the_sandbox() {
    server_killed(Mode::Sandbox);
}

#[test]
fn escapes_end_with_the_server_killed_after_its_janitor() {
    janitor_then_server_killed(Mode::Default);
}

#[test]
fn escapes_end_with_the_server_killed_after_its_janitor_in_the_sandbox() {
    janitor_then_server_killed(Mode::Sandbox);
}

#[test]
fn a_kept_process_outlives_its_command_and_ends_with_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Kept by its executable's file name: a copy of sleep under a name of its own.
    let keeper = dir.path().join("keeper-sleep");
    std::fs::copy("/bin/sleep", &keeper).expect("copy sleep");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[processes]\nkeep = [\"keeper-sleep\"]\n").expect("write policy");
    let mut server = start(dir.path(), Mode::Off, Some(&policy));
    server.bash("setsid -f env -u AGENT_EXEC_SHELL sh -c 'echo $$ > kept.pid; exec ./keeper-sleep 300'; while [ ! -s kept.pid ]; do sleep 0.02; done");
    let kept = Kept(read_pid_blocking(&dir.path().join("kept.pid")));
    // Well past the sweep of the command's leftovers.
    let answer = server.bash("echo next");
    assert_eq!(answer, "next\n");
    assert!(alive(kept.0), "the kept process should still run");
    server.close();
    assert!(
        test_support::wait_gone(kept.0),
        "the kept process outlived the server"
    );
}

/// Without a cgroup (an unprivileged server on cgroup v1 cannot make one),
/// the escapes still end at server exit at the latest: the server ends
/// every orphan it adopted.
#[test]
fn escapes_end_at_exit_where_no_cgroup_can_be_made() {
    let Some((dir, binary)) = crate::unprivileged_server_dir() else {
        return;
    };
    let output = Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&binary)
        .args(["run", "--cwd", dir.path().to_str().expect("utf-8"), "--"])
        .arg(escapes_command(dir.path()))
        .env("HOME", dir.path())
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for (name, _) in ESCAPES {
        read_pid_blocking(&dir.path().join(format!("{name}.pid")));
    }
    // Not root: the mover could not move.
    Markers {
        dir: dir.path().to_path_buf(),
        mover_escaped: false,
    }
    .assert_gone("the exit of a server without cgroups");
}
