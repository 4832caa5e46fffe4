//! `--sandbox` and `--network deny` as a user sees them: permission errors
//! from the command itself, nothing written where it must not be.

use crate::{agent_exec, stdout};

fn run(dir: &std::path::Path, flags: &[&str], command: &str) -> (i32, String) {
    let mut args = vec!["run", "--cwd", dir.to_str().expect("utf-8")];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", command]);
    let output = agent_exec(&args);
    (output.status.code().unwrap_or(-1), stdout(&output))
}

#[test]
fn workspace_write_allows_the_roots_and_tmpdir_only() {
    let root = tempfile::tempdir().expect("root");
    let sibling = tempfile::tempdir().expect("sibling");
    let victim = sibling.path().join("victim.txt");
    std::fs::write(&victim, "original").expect("write");
    let (code, text) = run(
        root.path(),
        &["--sandbox", "workspace-write"],
        &format!(
            "echo a > inside.txt && echo b > \"$TMPDIR/t\" && cat inside.txt \"$TMPDIR/t\"; \
             echo evil > {v}; sh -c 'echo evil > {v}'; echo c > /tmp/agent-exec-sandbox-probe-$$",
            v = victim.display()
        ),
    );
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("a\nb\n"), "{text}");
    assert_eq!(text.matches("Permission denied").count(), 3, "{text}");
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "original");
    assert_eq!(
        std::fs::read_to_string(root.path().join("inside.txt")).expect("read"),
        "a\n"
    );
}

#[test]
fn a_write_the_walls_refused_is_named_in_the_answer() {
    let root = tempfile::tempdir().expect("root");
    let sibling = tempfile::tempdir().expect("sibling");
    let outside = sibling.path().join("new.txt");
    let (_, text) = run(
        root.path(),
        &["--sandbox", "workspace-write"],
        &format!("touch {}; touch inside.txt", outside.display()),
    );
    assert!(
        text.contains(&format!(
            "[sandbox: refused write to {} (outside the writable roots)]",
            outside.display()
        )),
        "{text}"
    );
    assert!(!outside.exists());
    assert!(root.path().join("inside.txt").exists());
    assert_eq!(text.matches("[sandbox: refused").count(), 1, "{text}");
    let (_, text) = run(root.path(), &["--sandbox", "read-only"], "touch again.txt");
    assert!(
        text.contains(&format!(
            "[sandbox: refused write to {} (the sandbox is read-only)]",
            root.path().join("again.txt").display()
        )),
        "{text}"
    );
    // Without walls, a file's own mode is not the sandbox's doing.
    let (_, text) = run(
        root.path(),
        &["--sandbox", "contain"],
        "touch /proc/version",
    );
    assert!(!text.contains("[sandbox:"), "{text}");
}

#[test]
fn read_only_refuses_writes_inside_the_roots_too() {
    let root = tempfile::tempdir().expect("root");
    let (code, text) = run(
        root.path(),
        &["--sandbox", "read-only"],
        "cat /etc/hostname > /dev/null && echo read-ok; echo x > inside.txt; echo y > /dev/null && echo null-ok",
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("read-ok") && text.contains("null-ok"),
        "{text}"
    );
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!root.path().join("inside.txt").exists());
}

#[test]
fn network_deny_refuses_tcp_but_not_unix_sockets() {
    let root = tempfile::tempdir().expect("root");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let socket_path = root.path().join("s.sock");
    let unix = std::os::unix::net::UnixListener::bind(&socket_path).expect("unix");
    let (_, text) = run(
        root.path(),
        &["--network", "deny"],
        &format!(
            "(echo hi > /dev/tcp/127.0.0.1/{port}) 2>&1 | head -1; \
             python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"unix ok\")'",
            socket_path.display()
        ),
    );
    assert!(text.contains("Permission denied"), "{text}");
    assert!(text.contains("unix ok"), "{text}");
    drop((listener, unix));
}

#[test]
fn network_failures_under_network_deny_say_the_network_is_off() {
    const NOTE: &str = "[network is off for commands (--network deny)]";
    let root = tempfile::tempdir().expect("root");
    let connect = "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 9))'";
    for command in [connect, "getent hosts example.com"] {
        let (code, text) = run(root.path(), &["--network", "deny"], command);
        assert_ne!(code, 0, "{command}: {text}");
        assert!(text.ends_with(&format!("\n{NOTE}\n")), "{command}: {text}");
    }
    // Other failures, and network failures with the network on, say nothing.
    let (code, text) = run(root.path(), &["--network", "deny"], "ls /nonexistent-dir");
    assert_ne!(code, 0, "{text}");
    assert!(!text.contains(NOTE), "{text}");
    let (code, text) = run(root.path(), &[], connect);
    assert_ne!(code, 0, "{text}");
    assert!(!text.contains(NOTE), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_shells_network_failure_is_named_when_it_is_read() {
    use crate::rmcp_support::{call, mcp_command, serve, text};
    let root = tempfile::tempdir().expect("root");
    let mut command = mcp_command(root.path());
    command.args(["--network", "deny"]);
    let client = serve((), command).await.0;
    let started = call(
        &client,
        "Bash",
        serde_json::json!({ "command": "getent hosts example.com", "run_in_background": true }),
    )
    .await;
    let id = started.structured_content.as_ref().expect("metadata")["bash_id"].clone();
    let read = call(
        &client,
        "BashOutput",
        serde_json::json!({ "bash_id": id, "wait_ms": 20000 }),
    )
    .await;
    let answer = text(&read);
    assert!(answer.starts_with("Status: failed"), "{answer}");
    assert!(
        answer.ends_with("\n[network is off for commands (--network deny)]"),
        "{answer}"
    );
    client.cancel().await.expect("closes");
}

#[test]
fn the_bash_description_says_the_sandbox_is_on() {
    let root = tempfile::tempdir().expect("root");
    let (_, text) = run(root.path(), &["--sandbox", "workspace-write"], "true");
    assert_eq!(text, "");
    // The description is what tools/list serves; `schema` shows the defaults,
    // so ask the server itself.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args([
            "mcp",
            "--sandbox",
            "workspace-write",
            "--network",
            "deny",
            "--cwd",
        ])
        .arg(root.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the server runs");
    let lines = {
        use std::io::{BufRead as _, Write as _};
        let mut stdin = child.stdin.take().expect("stdin");
        let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": test_support::mcp::initialize_params("t", &serde_json::json!({}))});
        writeln!(stdin, "{initialize}").expect("write");
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("write");
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).expect("write");
        // Stdin stays open until the answer to tools/list has arrived.
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let (sender, answer) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let list = stdout
                .lines()
                .map_while(Result::ok)
                .find(|line| line.contains(r#""id":2"#));
            let _ = sender.send(list);
        });
        let list = answer
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the server answers within 30 s")
            .expect("an answer to tools/list");
        drop(stdin);
        assert!(child.wait().expect("the server exits").success());
        list
    };
    assert!(
        lines.contains("Sandbox: commands may write only under"),
        "{lines}"
    );
    assert!(lines.contains("network sockets are refused"), "{lines}");
    // TMPDIR is named as such; the server's session state dir is not offered.
    assert!(lines.contains(", TMPDIR ("), "{lines}");
    assert!(!lines.contains("/state"), "{lines}");
}

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "the test gives the binary a home of its own"
)]
fn policy_writable_paths_are_writable_and_their_siblings_are_not() {
    let root = tempfile::tempdir().expect("root");
    let outside = tempfile::tempdir().expect("outside");
    let home = outside.path().join("home");
    let (cache, sibling) = (home.join("cache"), home.join("sibling"));
    for dir in [&cache, &sibling] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    let policy = outside.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[sandbox]\nwritable = [\"~/cache\", \"~/not-yet\"]\n",
    )
    .expect("write policy");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["run", "--sandbox", "workspace-write", "--cwd"])
        .arg(root.path())
        .arg("--policy")
        .arg(&policy)
        .arg("--")
        .arg(format!(
            "echo a > {c}/f && mkdir {c}/d && echo cache-ok; echo b > {s}/f",
            c = cache.display(),
            s = sibling.display()
        ))
        .env("HOME", &home)
        .output()
        .expect("runs");
    let text = stdout(&output);
    assert!(text.contains("cache-ok"), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert_eq!(
        std::fs::read_to_string(cache.join("f")).expect("read"),
        "a\n"
    );
    assert!(cache.join("d").is_dir());
    assert!(!sibling.join("f").exists());
    // A listed path that does not exist is skipped, and start-up says so.
    let errors = crate::stderr(&output);
    assert!(
        errors.contains("agent-exec: warning: [sandbox] writable `~/not-yet`")
            && errors.contains("does not exist"),
        "{errors}"
    );
}

/// Harmless probes: `reboot` with invalid magic numbers is EINVAL where it
/// is allowed, `init_module` of a null image EFAULT, `finit_module` of no
/// descriptor EBADF; filtered, each is EPERM.
#[test]
fn reboot_and_module_loading_fail_with_eperm() {
    let root = tempfile::tempdir().expect("root");
    let script = format!(
        "import ctypes\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         for name, number, args in [('reboot', {}, (0, 0, 0, None)), ('init_module', {}, (None, 0, b'')), ('finit_module', {}, (-1, b'', 0))]:\n\
         \x20   ctypes.set_errno(0)\n\
         \x20   print(name, libc.syscall(number, *args), ctypes.get_errno())\n",
        libc_numbers::REBOOT,
        libc_numbers::INIT_MODULE,
        libc_numbers::FINIT_MODULE
    );
    std::fs::write(root.path().join("probe.py"), script).expect("script");
    for mode in ["workspace-write", "read-only"] {
        let (code, text) = run(root.path(), &["--sandbox", mode], "python3 probe.py");
        assert_eq!(code, 0, "{text}");
        assert!(
            text.starts_with("reboot -1 1\ninit_module -1 1\nfinit_module -1 1\n"),
            "{mode}: {text}"
        );
    }
}

/// The system call numbers the probe uses.
mod libc_numbers {
    #[cfg(target_arch = "x86_64")]
    pub(super) const REBOOT: u32 = 169;
    #[cfg(target_arch = "x86_64")]
    pub(super) const INIT_MODULE: u32 = 175;
    #[cfg(target_arch = "x86_64")]
    pub(super) const FINIT_MODULE: u32 = 313;
    #[cfg(target_arch = "aarch64")]
    pub(super) const REBOOT: u32 = 142;
    #[cfg(target_arch = "aarch64")]
    pub(super) const INIT_MODULE: u32 = 105;
    #[cfg(target_arch = "aarch64")]
    pub(super) const FINIT_MODULE: u32 = 273;
}

#[test]
fn processes_keep_under_the_sandbox_is_said_to_have_no_effect() {
    let root = tempfile::tempdir().expect("root");
    let policy = root.path().join("policy.toml");
    std::fs::write(&policy, "[processes]\nkeep = [\"sleep\"]\n").expect("policy");
    let args = [
        "run",
        "--cwd",
        root.path().to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
        "--sandbox",
        "workspace-write",
        "--",
        "true",
    ];
    let output = agent_exec(&args);
    let errors = crate::stderr(&output);
    assert_eq!(
        errors
            .lines()
            .filter(|line| line.contains("[processes] keep has no effect under --sandbox"))
            .count(),
        1,
        "{errors}"
    );
    // Without the sandbox, nothing is said.
    let output = agent_exec(
        &args[..5]
            .iter()
            .chain(&["--sandbox", "off", "--", "true"])
            .copied()
            .collect::<Vec<_>>(),
    );
    assert!(!crate::stderr(&output).contains("[processes] keep"));
}

/// As a normal user the namespaces need a user namespace: the command runs
/// as PID 2 with its own uid, or start-up refuses and says why.
#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "the binary is started as another user"
)]
fn as_a_normal_user_the_sandbox_runs_or_says_why() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().expect("root");
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let output = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["run", "--sandbox", "workspace-write", "--cwd"])
        .arg(root.path())
        .args([
            "--",
            "echo $$ $(id -u); ls /proc | grep -cE '^[0-9]+$'; echo x > f && cat f",
        ])
        .env("HOME", root.path())
        .output()
        .expect("setpriv runs");
    let (text, errors) = (stdout(&output), crate::stderr(&output));
    match output.status.code() {
        Some(0) => {
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.first(), Some(&"2 65534"), "{text}");
            let count: u32 = lines.get(1).and_then(|n| n.parse().ok()).expect("a count");
            assert!((2..=5).contains(&count), "{text}");
            assert_eq!(lines.get(2), Some(&"x"), "{text}");
        }
        Some(2) => assert!(
            errors.contains("as a normal user this needs unprivileged user namespaces"),
            "{errors}"
        ),
        other => panic!("exit {other:?}: {text}{errors}"),
    }
}

/// Runs `command` under `--sandbox workspace-write` with a secret in the
/// server's environment, within a minute (a hang fails the test).
fn run_with_secret(dir: &std::path::Path, command: &str) -> (i32, String, String) {
    let output = std::process::Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["run", "--sandbox", "workspace-write", "--cwd"])
        .arg(dir)
        .args(["--", command])
        .env("AGENT_EXEC_TEST_SECRET", SECRET)
        .output()
        .expect("timeout runs");
    (
        output.status.code().unwrap_or(-1),
        stdout(&output),
        crate::stderr(&output),
    )
}

/// Reads every readable mapping of PID 1 through `/proc/1/mem` (where
/// `/proc/1/maps` reads) and counts the secret's occurrences.
const SCAN: &str = "import re\n\
found = 0\n\
try:\n\
\x20   maps = open('/proc/1/maps').read().splitlines()\n\
\x20   mem = open('/proc/1/mem', 'rb', 0)\n\
except OSError:\n\
\x20   maps = []\n\
for line in maps:\n\
\x20   start, end = (int(x, 16) for x in line.split()[0].split('-'))\n\
\x20   if 'r' not in line.split()[1]:\n\
\x20       continue\n\
\x20   try:\n\
\x20       mem.seek(start)\n\
\x20       found += mem.read(end - start).count(b's3cret-0f-the-server')\n\
\x20   except (OSError, OverflowError, ValueError):\n\
\x20       pass\n\
print('secret-found', found)\n";

/// A value that only the server's environment holds.
const SECRET: &str = "s3cret-0f-the-server-7d1e";

/// PID 1 of a sandboxed command's namespace is ours (the init): nothing of
/// its memory, environment or mappings reads from inside, by `/proc` or by
/// a debugger.
#[test]
fn the_namespace_init_is_out_of_the_commands_reach() {
    let root = tempfile::tempdir().expect("root");
    std::fs::write(root.path().join("scan.py"), SCAN).expect("script");
    let script = "for f in mem environ maps; do \
                    if cat /proc/1/$f > /dev/null 2>&1; then echo read-$f; else echo refused-$f; fi; \
                  done; \
                  cat /proc/1/environ 2>/dev/null | grep -ac s3cret-0f; \
                  addr=$( (head -1 /proc/1/maps 2>/dev/null || head -1 /proc/self/maps) | cut -d- -f1); \
                  if dd if=/proc/1/mem of=/dev/null bs=4096 count=1 iflag=skip_bytes skip=$((0x$addr)) 2>/dev/null; \
                    then echo read-mem-at; else echo refused-mem-at; fi; \
                  python3 scan.py";
    let (code, text, errors) = run_with_secret(root.path(), script);
    assert_eq!(code, 0, "{text}{errors}");
    assert!(text.ends_with("\nsecret-found 0\n"), "{text}{errors}");
    assert_eq!(
        text, "refused-mem\nrefused-environ\nrefused-maps\n0\nrefused-mem-at\nsecret-found 0\n",
        "{errors}"
    );
    for (tool, attach) in [
        (
            "gdb",
            "gdb -p 1 -batch -ex 'info registers' < /dev/null 2>&1; echo exit=$?",
        ),
        (
            "strace",
            "timeout 5 strace -p 1 -e trace=none 2>&1; echo exit=$?",
        ),
    ] {
        if !std::path::Path::new("/usr/bin").join(tool).exists() {
            // `.ci/run`'s sandbox phase installs both.
            assert!(
                std::env::var_os("AGENT_EXEC_SANDBOX_SELF_TEST").is_none(),
                "the sandbox self-test cannot skip this: no /usr/bin/{tool}"
            );
            continue;
        }
        let (_, text, errors) = run_with_secret(root.path(), attach);
        assert!(
            text.contains("Operation not permitted") && !text.contains("exit=124"),
            "{tool}: {text}{errors}"
        );
        assert!(!text.contains(SECRET), "{tool}: {text}");
    }
}

/// Stopping or killing PID 1 from inside does nothing: the command goes on
/// in its namespace, ends with its own status, and the server returns.
#[test]
fn signals_to_the_namespace_init_from_inside_are_ignored() {
    let root = tempfile::tempdir().expect("root");
    // (From a file: the policy refuses `kill -STOP 1` as a command line.)
    std::fs::write(
        root.path().join("stop.sh"),
        "kill -STOP 1; kill -KILL 1; sleep 0.3; echo alive $$; \
         ls /proc | grep -cE '^[0-9]+$'; exit 7\n",
    )
    .expect("script");
    let (code, text, errors) = run_with_secret(root.path(), "sh stop.sh");
    assert_eq!(code, 7, "{text}{errors}");
    // (After the line that says the command failed with 7.)
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.starts_with("alive "))
        .collect();
    assert!(!lines.is_empty(), "{text}{errors}");
    let count: u32 = lines.get(1).and_then(|n| n.parse().ok()).expect("a count");
    assert!((2..=5).contains(&count), "{text}");
}

#[test]
fn the_inits_command_line_shows_no_server_argument() {
    let root = tempfile::tempdir().expect("root");
    let marker = format!("agent-exec-init-marker-{}", std::process::id());
    // The init is PID 1 in the server's memory: its command line is the
    // server's, which held `run`'s flags and this very command.
    let (code, text) = run(
        root.path(),
        &["--sandbox", "workspace-write"],
        &format!(
            "tr '\\0' '\\n' < /proc/1/cmdline | grep -c .; \
             tr '\\0' '\\n' < /proc/1/cmdline | grep -c -e run -e workspace-write -e {marker}; \
             pgrep -f {marker} || echo none"
        ),
    );
    assert_eq!(text, "1\n0\nnone\n", "exit {code}");
}
