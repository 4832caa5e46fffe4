//! `--sandbox contain`, the default: each command in PID, mount and IPC
//! namespaces of its own, `/sys/fs/cgroup` read-only, a cut capability
//! set, the keyring calls refused. Every probe is a harmless failing call:
//! nothing here changes the host when it succeeds (no value is written, no
//! module loaded, no key added).

use crate::{agent_exec, stderr, stdout};

/// `agent-exec run --cwd DIR FLAGS -- COMMAND`: exit code and stdout.
fn run(dir: &std::path::Path, flags: &[&str], command: &str) -> (i32, String) {
    let mut args = vec!["run", "--cwd", dir.to_str().expect("utf-8")];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", command]);
    let output = agent_exec(&args);
    let text = stdout(&output);
    assert!(
        !stderr(&output).contains("error"),
        "{text}\n{}",
        stderr(&output)
    );
    (output.status.code().unwrap_or(-1), text)
}

/// The capabilities the contract says no contained command holds.
const DROPPED: [(&str, u32); 12] = [
    ("CAP_DAC_READ_SEARCH", 2),
    ("CAP_NET_ADMIN", 12),
    ("CAP_SYS_MODULE", 16),
    ("CAP_SYS_RAWIO", 17),
    ("CAP_SYS_PTRACE", 19),
    ("CAP_SYS_ADMIN", 21),
    ("CAP_SYS_BOOT", 22),
    ("CAP_MAC_OVERRIDE", 32),
    ("CAP_MAC_ADMIN", 33),
    ("CAP_SYSLOG", 34),
    ("CAP_PERFMON", 38),
    ("CAP_BPF", 39),
];

/// The listed capabilities found in `grep Cap /proc/self/status` output's
/// `CapBnd` and `CapEff` lines.
fn held_dropped(status: &str) -> Vec<String> {
    let mut held = Vec::new();
    for set in ["CapBnd:", "CapEff:"] {
        let line = status
            .lines()
            .find(|line| line.starts_with(set))
            .unwrap_or_else(|| panic!("no {set} in {status}"));
        let bits = u64::from_str_radix(line[set.len()..].trim(), 16).expect("hex");
        for (name, bit) in DROPPED {
            if bits & (1 << bit) != 0 {
                held.push(format!("{set} {name}"));
            }
        }
    }
    held
}

#[test]
fn the_clients_process_and_environment_are_out_of_reach_by_default() {
    let dir = tempfile::tempdir().expect("dir");
    // The test process is the server's parent, as an MCP client is.
    let client = std::process::id();
    let command = format!(
        "test -e /proc/{client} && echo client-visible; \
         {{ tr '\\0' '\\n' < /proc/{client}/environ; }} 2>/dev/null | grep -c '^PATH=' ; \
         ps -e -o pid= > pids; wc -l < pids"
    );
    let (code, text) = run(dir.path(), &[], &command);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("client-visible"), "{text}");
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    // No environment read; the init, bash and ps are all there is.
    assert_eq!(lines, ["0", "3"], "{text}");
    // The same command outside the namespace sees the client.
    let (_, off) = run(dir.path(), &["--sandbox", "off"], &command);
    assert!(off.contains("client-visible"), "{off}");
}

#[test]
fn contained_commands_hold_none_of_the_dropped_capabilities() {
    let dir = tempfile::tempdir().expect("dir");
    let (code, text) = run(dir.path(), &[], "grep Cap /proc/self/status");
    assert_eq!(code, 0, "{text}");
    assert_eq!(held_dropped(&text), Vec::<String>::new(), "{text}");
    // As root, the same command without containment holds them.
    let (_, off) = run(
        dir.path(),
        &["--sandbox", "off"],
        "grep Cap /proc/self/status",
    );
    if off.contains("CapEff:\t000001ffffffffff") {
        assert!(held_dropped(&off).len() > 2, "{off}");
    }
}

/// Each probe prints `NAME errno` (0: it succeeded). Harmless whatever
/// happens: `release_agent` is opened without `O_TRUNC` and nothing is
/// written; `open_by_handle_at` gets a garbage handle; `init_module` a
/// null image of length 0; `add_key` a null type; `keyctl` only asks for
/// the user keyring's id without creating it; `request_key` a null type.
const PROBES: &str = r#"
import ctypes, glob, os, platform
libc = ctypes.CDLL(None, use_errno=True)
numbers = {
    "x86_64": dict(init_module=175, add_key=248, request_key=249, keyctl=250, open_by_handle_at=304),
    "aarch64": dict(init_module=105, add_key=217, request_key=218, keyctl=219, open_by_handle_at=265),
}[platform.machine()]
def call(name, *args):
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(ctypes.c_long(numbers[name]), *args)
    print(name, 0 if result >= 0 else ctypes.get_errno())
agents = sorted(glob.glob("/sys/fs/cgroup/*/release_agent"))
for path in agents[:1]:
    try:
        os.close(os.open(path, os.O_WRONLY))
        print("release_agent 0")
    except OSError as error:
        print("release_agent", error.errno)
handle = ctypes.create_string_buffer(16)
ctypes.c_uint.from_buffer(handle, 0).value = 8
ctypes.c_int.from_buffer(handle, 4).value = 1
mount = os.open("/", os.O_RDONLY)
call("open_by_handle_at", ctypes.c_long(mount), handle, ctypes.c_long(os.O_RDONLY))
call("init_module", ctypes.c_void_p(0), ctypes.c_ulong(0), ctypes.c_char_p(b""))
call("add_key", ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_ulong(0), ctypes.c_long(-2))
call("request_key", ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_long(0))
call("keyctl", ctypes.c_long(0), ctypes.c_long(-4), ctypes.c_long(0))
"#;

#[test]
fn release_agent_handles_modules_and_keyrings_are_refused() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("probes.py"), PROBES).expect("write");
    let (code, text) = run(dir.path(), &[], "python3 probes.py");
    assert_eq!(code, 0, "{text}");
    let errno = |name: &str| -> i32 {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .parse()
            .expect("a number")
    };
    let has_v1 = std::fs::read_dir("/sys/fs/cgroup").is_ok_and(|mut entries| {
        entries.any(|entry| entry.is_ok_and(|entry| entry.path().join("release_agent").exists()))
    });
    if has_v1 {
        let refused = errno("release_agent");
        assert!(
            refused == libc_errno::EROFS || refused == libc_errno::EACCES,
            "{text}"
        );
    }
    assert_eq!(errno("open_by_handle_at"), libc_errno::EPERM, "{text}");
    assert_eq!(errno("init_module"), libc_errno::EPERM, "{text}");
    for name in ["add_key", "request_key", "keyctl"] {
        let refused = errno(name);
        assert!(
            refused == libc_errno::EPERM || refused == libc_errno::ENOSYS,
            "{name}: {text}"
        );
    }
    // Without containment, as root, the keyring and the cgroup tree answer.
    let (_, off) = run(
        dir.path(),
        &["--sandbox", "off"],
        "id -u; python3 probes.py",
    );
    if off.starts_with("0\n") {
        assert!(off.contains("keyctl 0\n"), "{off}");
        if has_v1 {
            assert!(off.contains("release_agent 0\n"), "{off}");
        }
    }
}

/// The errno values the probes print (Linux's, the same on both
/// architectures).
mod libc_errno {
    pub(super) const EPERM: i32 = 1;
    pub(super) const EACCES: i32 = 13;
    pub(super) const EROFS: i32 = 30;
    pub(super) const ENOSYS: i32 = 38;
}

#[test]
fn sysv_shared_memory_of_an_outside_process_is_unreachable() {
    let made = std::process::Command::new("ipcmk")
        .args(["-M", "4096"])
        .output()
        .expect("ipcmk runs");
    let made = String::from_utf8_lossy(&made.stdout).into_owned();
    let id: u32 = made
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("an id in {made:?}"));
    struct Remove(u32);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ipcrm")
                .args(["-m", &self.0.to_string()])
                .status();
        }
    }
    let _remove = Remove(id);
    let dir = tempfile::tempdir().expect("dir");
    let command = format!(
        "ipcs -m | grep -cw {id}; python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); \
         l.shmat.restype = ctypes.c_void_p; r = l.shmat({id}, None, 0); \
         print(\"shmat\", ctypes.get_errno() if r in (None, 2**64 - 1) else 0)'"
    );
    let (_, text) = run(dir.path(), &[], &command);
    assert!(text.starts_with("0\n"), "{text}");
    assert!(text.contains("shmat 22"), "{text}"); // EINVAL: no such segment
    let (_, off) = run(dir.path(), &["--sandbox", "off"], &command);
    assert!(off.starts_with("1\n"), "{off}");
    assert!(off.contains("shmat 0"), "{off}");
}

#[test]
fn ordinary_work_is_unchanged_by_containment() {
    let dir = tempfile::tempdir().expect("dir");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let accept = std::thread::spawn(move || {
        use std::io::Write as _;
        let (mut stream, _) = listener.accept().expect("a connection");
        stream.write_all(b"hello from the test\n").expect("write");
    });
    let tmp = format!("/tmp/agent-exec-contain-{}", std::process::id());
    let command = format!(
        "echo in-cwd > here.txt && cat here.txt; echo in-tmp > {tmp} && cat {tmp} && rm {tmp}; \
         python3 -c 'import socket; s = socket.create_connection((\"127.0.0.1\", {port})); print(s.recv(100).decode().strip())'; \
         sleep 30 & for _ in $(seq 50); do [ \"$(ps -e -o comm= | grep -cx sleep)\" = 1 ] && break; sleep 0.1; done; \
         ps -e -o comm= | grep -cx sleep; kill %1; wait %1; echo job-status $?; \
         id -u -n >/dev/null && echo id-ok; (exit 3); echo status $?; \
         bash -c 'kill -TERM $$'; echo signalled $?"
    );
    let (code, text) = run(dir.path(), &[], &command);
    accept.join().expect("the listener thread");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.starts_with(
            "in-cwd\nin-tmp\nhello from the test\n1\njob-status 143\nid-ok\nstatus 3\nsignalled 143\n"
        ),
        "{text}"
    );
    assert!(dir.path().join("here.txt").exists());
    let (code, text) = run(dir.path(), &[], "echo out; exit 7");
    assert_eq!(
        (code, text.as_str()),
        (7, "Command failed with exit code 7\nout\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_says_when_commands_are_not_contained() {
    use crate::rmcp_support::{mcp_command, serve};
    let dir = tempfile::tempdir().expect("dir");
    let describe = |flags: &'static [&'static str]| {
        let mut command = mcp_command(dir.path());
        command.args(flags);
        async move {
            let client = serve((), command).await.0;
            let tools = client.list_all_tools().await.expect("tools/list");
            let bash = tools.iter().find(|tool| tool.name == "Bash").expect("Bash");
            let description = bash.description.clone().unwrap_or_default().into_owned();
            client.cancel().await.expect("the client stops");
            description
        }
    };
    let off = describe(&["--sandbox", "off"]).await;
    assert!(off.contains("Commands are not contained"), "{off}");
    let default = describe(&[]).await;
    assert!(!default.contains("not contained"), "{default}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_command_sees_only_its_own_terminal_and_can_open_new_ones() {
    use crate::rmcp_support::{call, mcp_command, serve, text};
    use std::os::fd::AsRawFd as _;
    // Terminals of the test's own, as another shell's would be.
    let others: Vec<_> = (0..3)
        .map(|_| nix::pty::openpty(None, None).expect("a host terminal"))
        .collect();
    let names: Vec<String> = others
        .iter()
        .map(|pair| {
            std::fs::read_link(format!("/proc/self/fd/{}", pair.slave.as_raw_fd()))
                .expect("the slave's name")
                .display()
                .to_string()
        })
        .collect();
    let dir = tempfile::tempdir().expect("dir");
    let command = "ls /dev/pts | tr '\\n' ' '; echo; tty; test \"$(tty)\" -ef /dev/stdin && echo same; \
         python3 -c 'import os, pty; m, s = pty.openpty(); print(\"openpty\", os.ttyname(s))'; \
         script -qc 'echo in-script' /dev/null | tr -d '\\r'";
    let listing = |flags: &'static [&'static str]| {
        let mut server = mcp_command(dir.path());
        server.args(flags);
        async move {
            let client = serve((), server).await.0;
            let answer = call(
                &client,
                "Bash",
                serde_json::json!({ "command": command, "tty": true }),
            )
            .await;
            client.cancel().await.expect("the client stops");
            text(&answer)
        }
    };
    let text = listing(&[]).await;
    assert!(text.starts_with("0 ptmx \n/dev/pts/0\nsame\n"), "{text}");
    assert!(text.contains("openpty /dev/pts/1\n"), "{text}");
    assert!(text.contains("in-script\n"), "{text}");
    // Without containment the test's terminals are there to open.
    let off = listing(&["--sandbox", "off"]).await;
    for name in &names {
        let number = name.trim_start_matches("/dev/pts/");
        assert!(
            off.lines()
                .next()
                .is_some_and(|line| line.split(' ').any(|n| n == number)),
            "{name} in {off}"
        );
    }
    drop(others);
}

/// Where namespaces cannot be made (a test switch stands in for disabled
/// unprivileged user namespaces), the default mode says so in one line,
/// tools/list says so, and commands run uncontained; a walled mode refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_namespaces_the_default_mode_says_it_does_not_contain() {
    use crate::rmcp_support::{mcp_command, serve};
    const SWITCH: &str = "AGENT_EXEC_TEST_NO_NAMESPACES";
    let dir = tempfile::tempdir().expect("dir");
    let client = std::process::id();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["run", "--cwd", dir.path().to_str().expect("utf-8"), "--"])
        .arg(format!("test -e /proc/{client} && echo client-visible"))
        .env(SWITCH, "1")
        .output()
        .expect("runs");
    let errors = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{errors}");
    assert_eq!(stdout(&output), "client-visible\n");
    assert_eq!(errors.lines().count(), 1, "{errors}");
    assert!(
        errors.starts_with("agent-exec: warning: commands are not contained ("),
        "{errors}"
    );
    let walled = std::process::Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["run", "--sandbox", "workspace-write", "--", "true"])
        .env(SWITCH, "1")
        .output()
        .expect("runs");
    assert_eq!(walled.status.code(), Some(2), "{}", stderr(&walled));
    assert!(stderr(&walled).starts_with("agent-exec: error: --sandbox workspace-write"));
    let mut server = mcp_command(dir.path());
    server.env(SWITCH, "1");
    let session = serve((), server).await.0;
    let tools = session.list_all_tools().await.expect("tools/list");
    let bash = tools
        .iter()
        .find(|tool| tool.name == "Bash")
        .and_then(|tool| tool.description.clone())
        .unwrap_or_default();
    session.cancel().await.expect("the client stops");
    assert!(
        bash.contains("Commands are not contained: ") && bash.contains(SWITCH),
        "{bash}"
    );
}
