//! Clean-up of what dead servers left: their temp dirs (`agent-exec-<id>-<n>`
//! under the temp dir, `<id>` random) go once the `initialize` answer is out
//! when nobody holds their `lock` file; a live server's stay, in whatever PID
//! namespace either server runs, and so do its cgroups.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::mcp::{Launch, RawClient, text_of};

use crate::alive;

/// A pid no process has: a child that ran and was reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("true starts");
    let pid = child.id();
    child.wait().expect("true ends");
    pid
}

/// A server spoken to in raw JSON-RPC lines: test-support's client with
/// the server's `TMPDIR` set, answering in the shapes these tests check.
pub(crate) struct Peer(RawClient);

test_support::deref_to_raw_client!(Peer);

impl Peer {
    /// `prefix` (a wrapper such as `unshare`, or nothing) then the binary's
    /// `mcp` with `args`, under `TMPDIR=tmp`; answers `initialize`.
    pub(crate) fn start(prefix: &[&str], args: &[&str], tmp: &Path) -> Self {
        Self::start_with(prefix, args, tmp, &[])
    }

    /// [`Peer::start`] with more environment variables.
    pub(crate) fn start_with(
        prefix: &[&str],
        args: &[&str],
        tmp: &Path,
        vars: &[(&str, &str)],
    ) -> Self {
        Self(Self::launch(prefix, args, tmp).envs(vars).start())
    }

    /// A server started from [`Peer::launch`] with more set.
    pub(crate) fn started(launch: Launch) -> Self {
        Self(launch.start())
    }

    /// How [`Peer::start`] starts the server, for a test that adds to it.
    pub(crate) fn launch(prefix: &[&str], args: &[&str], tmp: &Path) -> Launch {
        Launch::new(test_support::agent_exec_binary!())
            .wrapper(prefix)
            .args(args)
            .env("TMPDIR", tmp)
    }

    /// Sends a request; the whole response (`result` or `error`).
    pub(crate) fn request(&mut self, method: &str, params: &Value) -> Value {
        self.0.request(method, params).response.value
    }

    /// Runs `command` in the foreground: its text, and whether it failed.
    pub(crate) fn bash(&mut self, command: &str) -> (String, bool) {
        let result = self.0.call("Bash", &json!({"command": command}));
        (text_of(&result).to_owned(), result["isError"] == true)
    }

    /// SIGKILLs the server and reaps it.
    pub(crate) fn kill_hard(self) {
        self.0.kill_hard();
    }

    /// Closes stdin and checks the server exits with 0.
    pub(crate) fn close(self) {
        assert!(self.0.close().success());
    }
}

/// Plants a temp dir as a server would leave it, with a `lock` file or not.
fn plant(base: &Path, name: &str, lock: bool) -> PathBuf {
    let dir = base.join(name);
    std::fs::create_dir_all(dir.join("state")).expect("plant the dir");
    std::fs::write(dir.join("bash-0.txt"), "old output").expect("plant a file");
    if lock {
        std::fs::write(dir.join("lock"), "").expect("plant the lock file");
    }
    dir
}

#[test]
fn a_dead_servers_temp_dir_is_removed_after_start_up_and_no_other() {
    let base = tempfile::tempdir().expect("temp base");
    let cwd = tempfile::tempdir().expect("cwd");
    // Nobody holds its lock: its server is gone.
    let stale = plant(base.path(), "agent-exec-a000000000000001-0", true);
    // This test holds the lock: a live server's, whatever its pid.
    let live = plant(base.path(), "agent-exec-a000000000000002-0", true);
    let held = std::fs::File::open(live.join("lock")).expect("open the lock");
    held.lock().expect("hold the lock");
    // Nothing proves these a dead server's: no lock file, or a name we do
    // not make (a pid, as older versions named theirs; pid 0; no id).
    let unlocked = plant(base.path(), "agent-exec-a000000000000003-0", false);
    let dead = dead_pid();
    assert!(!alive(dead));
    let keep = [
        live.clone(),
        unlocked,
        plant(base.path(), &format!("agent-exec-{dead}-0"), true),
        plant(base.path(), "agent-exec-0", false),
        plant(base.path(), "agent-exec-notapid-0", true),
    ];

    let server = Peer::start(
        &[],
        &["--cwd", cwd.path().to_str().expect("utf-8")],
        base.path(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while stale.exists() {
        assert!(
            Instant::now() < deadline,
            "the dead server's temp dir is still there"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The clean-up is one pass over the directory: give it time to go on.
    std::thread::sleep(Duration::from_millis(300));
    for dir in &keep {
        assert!(dir.is_dir(), "{} was removed", dir.display());
    }
    let own = crate::server_temp_dirs(server.pid());
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!(own[0].parent(), Some(base.path()), "under TMPDIR");
    server.close();
    assert!(!own[0].exists(), "the server's own temp dir outlived it");
    drop(held);
}

/// The cgroups a live server holds open (its ready ones), by the
/// server-level `agent-exec-*` directory they are in.
fn server_cgroups(pid: u32) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = crate::held_paths(pid)
        .into_iter()
        .filter(|path| path.starts_with("/sys/fs/cgroup"))
        .filter_map(|path| {
            path.ancestors()
                .find(|dir| {
                    dir.file_name()
                        .and_then(|name| name.to_str())
                        .is_some_and(|name| name.starts_with("agent-exec-"))
                })
                .map(Path::to_path_buf)
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// Another server started in a PID namespace of its own (where the first
/// server's pid names no process, or another one) leaves the first one's
/// temp dir and cgroups alone, and its commands go on working.
#[test]
fn a_server_in_another_pid_namespace_leaves_a_live_servers_files_alone() {
    if !test_support::is_root() {
        assert!(
            std::env::var_os("AGENT_EXEC_SANDBOX_SELF_TEST").is_none()
                && std::env::var("CI").as_deref() != Ok("true"),
            "CI cannot skip this: it needs root for a PID namespace"
        );
        eprintln!("skipped: needs root to start a server in a PID namespace of its own");
        return;
    }
    let base = tempfile::tempdir().expect("temp base");
    let cwd = tempfile::tempdir().expect("cwd");
    let cwd = cwd.path().to_str().expect("utf-8");
    let mut first = Peer::start(&[], &["--cwd", cwd, "--sandbox", "off"], base.path());
    let (text, failed) = first.bash("echo one");
    assert!(!failed && text.starts_with("one"), "{text}");
    let temp: Vec<PathBuf> = std::fs::read_dir(base.path())
        .expect("read the base")
        .flatten()
        .map(|entry| entry.path())
        .collect();
    assert_eq!(temp.len(), 1, "the first server's temp dir: {temp:?}");
    let cgroups = server_cgroups(first.pid());

    let mut second = Peer::start(
        &["unshare", "--pid", "--fork", "--mount-proc"],
        &["--cwd", cwd, "--sandbox", "off"],
        base.path(),
    );
    let (text, failed) =
        second.bash("echo $$ in a namespace of its own; ls /proc | grep -c '^[0-9]'");
    assert!(!failed, "{text}");
    // Its clean-ups run beside its first calls: give them time to finish.
    std::thread::sleep(Duration::from_millis(1_000));

    assert!(temp[0].is_dir(), "the live server's temp dir was removed");
    for cgroup in &cgroups {
        assert!(
            cgroup.is_dir(),
            "the live server's cgroup {} was removed",
            cgroup.display()
        );
    }
    for n in 0..8 {
        let (text, failed) = first.bash(&format!("echo call {n}"));
        assert!(
            !failed && text.starts_with(&format!("call {n}")),
            "call {n} of the live server: {text}"
        );
    }
    second.close();
    first.close();
}
