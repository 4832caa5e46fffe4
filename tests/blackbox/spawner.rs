//! The spawner process (docs/decisions/0016-spawner-process.md): commands
//! are started by a separate, undumpable child of the server, forked before
//! the server read any secret back, which adopts what escapes a command's
//! tree.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::{Duration, Instant};

use test_support::read_pid_blocking as read_pid;

use crate::alive;
use crate::stale::Peer;
use test_support::is_root;

/// A value the scrubbing recognises by name; it must reach neither the
/// spawner's environment nor its memory.
const SECRET: &str = "sk-proj-Sp4wnerT3stS3cretValue0123456789abcdef";

/// The server's child named `agent-spawner`.
fn spawner_of(server: u32) -> Option<u32> {
    test_support::child_where(server, |pid| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|comm| comm.trim_end() == "agent-spawner")
    })
}

/// A `/proc/PID/status` field.
fn status_field(pid: u32, name: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .map(|value| value.trim().to_owned())
}

/// Whether `needle` is anywhere in the readable memory of `pid` (root
/// only: the spawner is not dumpable). Returns the bytes read as well.
fn memory_holds(pid: u32, needle: &[u8]) -> (bool, usize) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).expect("open mem (root)");
    let mut total = 0;
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let path = fields.nth(3).unwrap_or("");
        if !perms.starts_with('r') || path == "[vvar]" || path == "[vsyscall]" {
            continue;
        }
        let Some((start, end)) = range.split_once('-') else {
            continue;
        };
        let start = u64::from_str_radix(start, 16).expect("hex");
        let end = u64::from_str_radix(end, 16).expect("hex");
        let mut bytes = vec![0u8; usize::try_from(end - start).expect("size")];
        if mem.seek(SeekFrom::Start(start)).is_err() || mem.read_exact(&mut bytes).is_err() {
            continue;
        }
        total += bytes.len();
        if bytes.windows(needle.len()).any(|window| window == needle) {
            return (true, total);
        }
    }
    (false, total)
}

#[test]
fn commands_come_from_a_separate_undumpable_spawner_that_holds_no_secret() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let mut server = Peer::start_with(
        &[],
        &["--cwd", cwd, "--sandbox", "off"],
        &std::env::temp_dir(),
        &[("OPENAI_API_KEY", SECRET)],
    );
    let server_pid = server.pid();
    let spawner = spawner_of(server_pid).expect("the server has a spawner process");
    // A process of its own, not a thread of the server.
    assert_eq!(
        status_field(spawner, "Tgid"),
        Some(spawner.to_string()),
        "the spawner is a process"
    );
    assert!(!Path::new(&format!("/proc/{server_pid}/task/{spawner}")).exists());
    assert_eq!(status_field(spawner, "PPid"), Some(server_pid.to_string()));
    // The command's shell is its child; without CAP_SYS_PTRACE the command
    // cannot open an undumpable process's memory, as root too.
    let (text, failed) = server.bash(
        "echo parent=$PPID; (exec 3</proc/$PPID/mem) 2>/dev/null && echo mem opened || echo mem refused",
    );
    assert!(!failed, "{text}");
    assert!(text.contains(&format!("parent={spawner}")), "{text}");
    assert!(text.contains("mem refused"), "{text}");
    // Its environment is the scrubbed one.
    let environ = std::fs::read(format!("/proc/{spawner}/environ")).unwrap_or_default();
    assert!(
        !environ
            .windows(SECRET.len())
            .any(|window| window == SECRET.as_bytes()),
        "the spawner's environ holds the secret"
    );
    assert!(
        !environ
            .split(|byte| *byte == 0)
            .any(|entry| entry.starts_with(b"OPENAI_API_KEY=")),
        "the spawner's environ names the secret"
    );
    // Nor its memory: it was forked before the server read the secrets back.
    if is_root() {
        let (found, read) = memory_holds(spawner, SECRET.as_bytes());
        assert!(read > 0, "nothing of the spawner's memory could be read");
        assert!(!found, "the spawner's memory holds the secret");
    }
    server.close();
    // It ends with the server.
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(spawner) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(spawner), "the spawner outlived the server");
}

/// Forks with `CLONE_PARENT` (the new process is a sibling of the caller,
/// a child of the caller's parent); the sibling runs `sleep` and the
/// caller prints the sibling's parent.
const CLONE_PARENT_SCRIPT: &str = r#"
import ctypes, os, platform, sys, time
libc = ctypes.CDLL(None, use_errno=True)
number = {"x86_64": 56, "aarch64": 220}[platform.machine()]
CLONE_PARENT, SIGCHLD = 0x00008000, 17
pid = libc.syscall(number, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0)
if pid == 0:
    os.execv("/bin/sh", ["sh", "-c", "echo $$ > " + sys.argv[1] + ".tmp; mv " + sys.argv[1] + ".tmp " + sys.argv[1] + "; exec sleep 1000"])
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
with open("/proc/%d/status" % pid) as status:
    ppid = [line.split()[1] for line in status if line.startswith("PPid:")][0]
print("sibling-parent=" + ppid)
"#;

#[test]
fn a_commands_parent_is_the_spawner_and_a_clone_parent_sibling_ends_with_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let script = dir.path().join("clone_parent.py");
    std::fs::write(&script, CLONE_PARENT_SCRIPT).expect("write the script");
    let pid_file = dir.path().join("sibling.pid");
    let mut server = Peer::start(
        &[],
        &["--cwd", cwd, "--sandbox", "off"],
        &std::env::temp_dir(),
    );
    let server_pid = server.pid();
    let spawner = spawner_of(server_pid).expect("the server has a spawner process");
    // `exec`: python3 is the shell process itself, whose parent is the
    // spawner, so its CLONE_PARENT sibling is the spawner's child.
    let (text, _) = server.bash(&format!(
        "echo parent=$PPID; exec python3 {} {}",
        script.display(),
        pid_file.display(),
    ));
    assert!(text.contains(&format!("parent={spawner}")), "{text}");
    assert!(
        text.contains(&format!("sibling-parent={spawner}")),
        "{text}"
    );
    let sibling = read_pid(&pid_file);
    // The command has ended: what it started goes with it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(sibling) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survived = alive(sibling);
    if survived {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(sibling).expect("pid")),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(!survived, "the CLONE_PARENT sibling outlived its command");
    server.close();
}

/// SIGKILLs the server's spawner process and waits for its death.
fn kill_spawner(server: &Peer) {
    let spawner = spawner_of(server.pid()).expect("the server has a spawner process");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(spawner).expect("pid")),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the spawner");
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(spawner) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn commands_still_run_once_the_spawner_was_killed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let mut server = Peer::start(
        &[],
        &["--cwd", cwd, "--sandbox", "off"],
        &std::env::temp_dir(),
    );
    let (text, failed) = server.bash("echo before");
    assert!(!failed && text.contains("before"), "{text}");
    kill_spawner(&server);
    // The server starts its commands itself from then on.
    for round in 0..2 {
        let (text, failed) = server.bash(&format!("echo after-{round}"));
        assert!(!failed, "{text}");
        assert!(text.contains(&format!("after-{round}")), "{text}");
    }
    server.close();
}

/// A namespace's init would run in the server's memory: once the spawner
/// is gone, a sandboxed command is refused rather than started there.
#[test]
fn a_sandboxed_command_is_refused_once_the_spawner_was_killed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let mut server = Peer::start(
        &[],
        &["--cwd", cwd, "--sandbox", "workspace-write"],
        &std::env::temp_dir(),
    );
    let (text, failed) = server.bash("echo before; cat /proc/1/comm");
    assert!(!failed && text.contains("before"), "{text}");
    if !text.contains("agent-spawner") {
        // No PID namespace here (no user namespaces for this user).
        eprintln!("skipped: commands get no PID namespace here: {text}");
        server.close();
        return;
    }
    kill_spawner(&server);
    for round in 0..2 {
        let (text, failed) = server.bash(&format!("echo after-{round}"));
        assert!(failed, "{text}");
        assert!(!text.contains(&format!("after-{round}\n")), "{text}");
        assert!(text.contains("the spawner process has"), "{text}");
    }
    server.close();
}

/// Under the default `--sandbox contain` a command's namespace init is
/// cloned by the spawner and shares its memory: the command's
/// `oom_score_adj` of 1000 (written by the process that execs, never by
/// the init) is not copied by the kernel to the spawner, nor the server.
#[test]
fn a_contained_commands_init_lives_in_the_spawner_whose_oom_score_stays() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().to_str().expect("utf-8");
    let ours = std::fs::read_to_string("/proc/self/oom_score_adj").expect("our score");
    assert_ne!(ours.trim(), "1000", "this test runs at the top score");
    let mut server = Peer::start(&[], &["--cwd", cwd], &std::env::temp_dir());
    let server_pid = server.pid();
    let spawner = spawner_of(server_pid).expect("the server has a spawner process");
    let (text, failed) =
        server.bash("echo init=$(cat /proc/1/comm); echo score=$(cat /proc/self/oom_score_adj)");
    assert!(!failed, "{text}");
    if !text.contains("init=agent-spawner") {
        assert!(
            std::env::var_os("AGENT_EXEC_SANDBOX_SELF_TEST").is_none(),
            "the sandbox self-test cannot skip a contained command: {text}"
        );
        eprintln!("skipped: commands get no PID namespace here: {text}");
        server.close();
        return;
    }
    assert!(text.contains("score=1000"), "{text}");
    let score =
        |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).expect("a score");
    assert_eq!(score(spawner), ours, "the spawner's score changed");
    assert_eq!(score(server_pid), ours, "the server's score changed");
    server.close();
}
