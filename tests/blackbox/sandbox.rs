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
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#).expect("write");
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
