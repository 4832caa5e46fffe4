//! Containment seen from outside: the server's memory is out of its
//! commands' reach (as root too), secrets are recognised by their value and
//! tokens never show, and the sandbox warns about hard links in its roots.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use test_support::is_root;
use test_support::mcp::{Launch, RawClient};

use crate::{stderr, stdout};

const GITHUB: &str = "ghp_R4nd0mL00k1ngT0k3nW1thTh1rtySixChr5x";

/// A server on stdio whose stderr lines are collected.
pub(crate) struct Server(RawClient);

impl Server {
    pub(crate) fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_wrapped(&[], args, env)
    }

    /// The server started by `wrapper` (a program and its first
    /// arguments, given the binary and its arguments after them), such as
    /// a shell that moves itself into a cgroup and then execs.
    pub(crate) fn start_wrapped(wrapper: &[&str], args: &[&str], env: &[(&str, &str)]) -> Self {
        Self(
            Launch::new(test_support::agent_exec_binary!())
                .wrapper(wrapper)
                .args(args)
                .envs(env)
                .collect_stderr()
                .start(),
        )
    }

    /// Kills the server with SIGKILL and collects it.
    pub(crate) fn kill_hard(self) {
        self.0.kill_hard();
    }

    /// Stderr lines until one contains `needle` (and that one), or all
    /// lines seen in 30 s when none does.
    fn stderr_until(&mut self, needle: &str) -> Vec<String> {
        self.0.stderr_until(needle, Duration::from_secs(30))
    }

    pub(crate) fn close(self) {
        self.0.close();
    }
}

test_support::deref_to_raw_client!(Server);

/// A Python script that tries to read a process's environment and memory
/// and to attach to it, printing `NAME: refused ERRNO` or `NAME: done`
/// (and `environ: holds the secret` when it does). An attach that succeeds
/// detaches at once.
const PROBE: &str = r#"
import ctypes, os, sys
pid = int(sys.argv[1])
address = int(sys.argv[2], 16) if len(sys.argv) > 2 else None
def attempt(name, action):
    try:
        action()
        print(name + ": done")
    except OSError as error:
        print(name + ": refused " + str(error.errno))
def environ():
    with open("/proc/%d/environ" % pid, "rb") as f:
        if b"tok-0123456789-abcdef" in f.read():
            print("environ: holds the secret")
def memory():
    with open("/proc/%d/mem" % pid, "rb") as f:
        if address is not None:
            f.seek(address)
            f.read(16)
attempt("environ", environ)
attempt("mem", memory)
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
if libc.ptrace(16, pid, None, None) == 0:
    os.waitpid(pid, 0x40000000)
    libc.ptrace(17, pid, None, None)
    print("attach: done")
else:
    print("attach: refused " + str(ctypes.get_errno()))
"#;

fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

fn write_probe(dir: &Path) -> PathBuf {
    let probe = dir.join("probe.py");
    std::fs::write(&probe, PROBE).expect("write the probe");
    probe
}

/// Every probe was refused; with `environ_may_open`, `environ` may have
/// been read, as long as it held no secret.
fn check_refused(text: &str, environ_may_open: bool) {
    assert!(!text.contains("holds the secret"), "{text}");
    for name in ["environ", "mem", "attach"] {
        let line = text
            .lines()
            .find(|line| line.starts_with(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} line in {text}"));
        if name == "environ" && environ_may_open {
            continue;
        }
        assert!(line.contains("refused"), "{line} in {text}");
    }
}

#[test]
fn no_command_reads_the_servers_memory_or_attaches_to_it_even_as_root() {
    let dir = tempfile::tempdir().expect("temp dir");
    let probe = write_probe(dir.path());
    let cwd = dir.path().to_str().expect("utf-8");
    // A secret makes the server re-execute itself: the image that serves
    // must have made itself undumpable again.
    // Without containment: the command is the server's child and sees it.
    let mut server = Server::start(
        &["--cwd", cwd, "--sandbox", "off"],
        &[("MY_SERVICE_TOKEN", "tok-0123456789-abcdef")],
    );
    let pid = server.pid();
    // A mapped address of the serving image, where the test may read it.
    let address = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .ok()
        .and_then(|maps| {
            maps.lines()
                .next()
                .map(|line| line.split('-').next().unwrap_or("").to_owned())
        })
        .unwrap_or_default();
    // The shell's parent is the spawner process, a child of the server.
    let text = server.bash(&format!(
        "grep -qxE 'PPid:[[:space:]]+{pid}' /proc/$PPID/status && echo parent ok; grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status; {} {} {pid} {address}",
        python(),
        probe.display()
    ));
    assert!(text.contains("parent ok"), "{text}");
    // Recent kernels let CAP_SYS_ADMIN or CAP_PERFMON read another
    // process's environ and maps (not its memory): a root command keeps
    // those, and the environ it sees holds no secret.
    check_refused(&text, is_root());
    // The spawner (a fork of the server: the same address is mapped) is
    // out of reach the same way.
    let spawner = server.bash(&format!("{} {} $PPID {address}", python(), probe.display()));
    check_refused(&spawner, is_root());
    for line in text.lines().filter(|line| line.starts_with("Cap")) {
        let (name, hex) = line.split_once(':').expect("Cap line");
        let set = u64::from_str_radix(hex.trim(), 16).expect("hex");
        if name == "CapBnd" && !is_root() {
            continue;
        }
        assert_eq!(set & (1 << 19), 0, "CAP_SYS_PTRACE in {line}");
    }
    server.close();
}

#[test]
fn an_unprivileged_servers_memory_is_out_of_reach_too() {
    let Some((dir, binary)) = crate::unprivileged_server_dir() else {
        return;
    };
    let probe = write_probe(dir.path());
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
        .arg(format!(
            "{} {} $PPID; sleep 30 & echo tok-0123456789-abcdef",
            python(),
            probe.display()
        ))
        .env("HOME", dir.path())
        .env("MY_SERVICE_TOKEN", "tok-0123456789-abcdef")
        .output()
        .expect("runs");
    let text = stdout(&output);
    assert!(output.status.success(), "{text}{}", stderr(&output));
    check_refused(&text, false);
    // The secret came back over the memfd, and the escaped job was found
    // and ended (both read /proc files of the undumpable server itself).
    assert!(text.contains("[REDACTED:MY_SERVICE_TOKEN]"), "{text}");
    assert!(text.contains("[ended 1 background job(s)"), "{text}");
}

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "the test sets the server's environment"
)]
fn secrets_are_recognised_by_value_and_tokens_never_show() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join(".env"),
        format!("GH={GITHUB}\nDB=postgres://app:s3cr3t-Passw0rd@db/app\n"),
    )
    .expect("write .env");
    let run = |policy: Option<&Path>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agent-exec"));
        command.args(["run", "--cwd", dir.path().to_str().expect("utf-8")]);
        if let Some(policy) = policy {
            command.arg("--policy").arg(policy);
        }
        command
            .args(["--", "echo \"hook:[${DEPLOY_HOOK-}]\"; cat .env"])
            .env("DEPLOY_HOOK", "https://ci:hook-pa55word@ci.example.com/")
            .output()
            .expect("runs")
    };
    let text = stdout(&run(None));
    assert_eq!(
        text,
        "hook:[]\nGH=[REDACTED:github-token]\nDB=postgres://app:[REDACTED:url-password]@db/app\n"
    );
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[redact]\nformats = false\n").expect("write policy");
    let text = stdout(&run(Some(&policy)));
    assert!(
        text.starts_with("hook:[]\n"),
        "a value is scrubbed whatever the policy: {text}"
    );
    assert!(text.contains(GITHUB), "{text}");
}

#[test]
fn workspace_write_warns_about_hard_links_in_its_roots() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    for path in [&root, &outside] {
        std::fs::create_dir(path).expect("mkdir");
    }
    std::fs::write(root.join("plain.txt"), "x").expect("write");
    let start = || {
        Server::start(
            &[
                "--cwd",
                root.to_str().expect("utf-8"),
                "--sandbox",
                "workspace-write",
            ],
            &[("RUST_LOG", "agent_exec=info")],
        )
    };
    let done = "hard-link scan of the writable roots done";
    let mut server = start();
    let lines = server.stderr_until(done);
    assert!(lines.iter().any(|line| line.contains(done)), "{lines:?}");
    assert!(
        !lines.iter().any(|line| line.contains("hard link")),
        "{lines:?}"
    );
    server.close();

    std::fs::write(outside.join("shadow"), "x").expect("write");
    std::fs::hard_link(outside.join("shadow"), root.join("linked")).expect("link");
    let mut server = start();
    let lines = server.stderr_until(done);
    let warning = lines
        .iter()
        .find(|line| line.starts_with("agent-exec: warning: 1 of 2 files"))
        .unwrap_or_else(|| panic!("no warning in {lines:?}"));
    let linked = std::fs::canonicalize(root.join("linked")).expect("canonical");
    assert!(
        warning.contains(&format!("`{}`", linked.display())),
        "{warning}"
    );
    server.close();
}
