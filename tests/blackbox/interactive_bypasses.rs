//! The red team's interactive bypasses (issue 28), as a corpus: ways to
//! get a `tty: true` shell to run a program the line check never saw as a
//! line (`read` eating a `#`, `bind`, history expansion, prompt hooks,
//! traps, `stty` editing characters, relays, the dynamic loader, a copy
//! of bash, programs that run what they read). The policy denies a marker
//! program that would leave `ran` behind; each case is judged by its
//! effect: the marker never ran. Programs run only through an exec, and
//! every exec is judged (docs/interactive.md).

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::json;

use crate::rmcp_support::{call, mcp_command, serve, text};

const MARKER: &str = "aemarker";

/// One piece of input: text, then named keys.
type Typed = (&'static str, &'static [&'static str]);

const fn line(text: &'static str) -> Typed {
    (text, &[])
}

/// The dynamic loader of this architecture.
#[cfg(target_arch = "aarch64")]
const LOADER: &str = "/lib/ld-linux-aarch64.so.1 /bin/bash --norc -i\n";
#[cfg(not(target_arch = "aarch64"))]
const LOADER: &str = "/lib64/ld-linux-x86-64.so.2 /bin/bash --norc -i\n";

fn cases() -> Vec<(&'static str, Vec<Typed>)> {
    vec![
        (
            "read -n1 eats a #",
            vec![line("read -n1 x\n"), line("#aemarker\n")],
        ),
        (
            "read -n2 eats '# '",
            vec![line("read -n2 x\n"), line("# aemarker\n")],
        ),
        (
            "read -d eats up to #",
            vec![line("read -d '#' x\n"), line("#aemarker\n")],
        ),
        (
            "read -N1 -s eats a #",
            vec![line("read -N1 -s x\n"), line("#aemarker\n")],
        ),
        (
            "bind -x on a key",
            vec![
                line("bind -x '\"\\C-l\": a=aemar; ${a}ker'\n"),
                ("", &["Ctrl-L"]),
            ],
        ),
        (
            "bind a macro",
            vec![
                line("bind '\"\\C-l\": \"aem\\\"\\\"arker\\n\"'\n"),
                ("", &["Ctrl-L"]),
            ],
        ),
        (
            "history !!:*",
            vec![line("echo aemarker\n"), line("!!:*\n")],
        ),
        ("history !$", vec![line("echo aemarker\n"), line("!$\n")]),
        (
            "history ^echo ^",
            vec![line("echo aemarker\n"), line("^echo ^\n")],
        ),
        (
            "history !echo:1",
            vec![line("echo aemarker\n"), line("!echo:1\n")],
        ),
        (
            "fc -s echo=",
            vec![line("echo aemarker\n"), line("fc -s echo=\n")],
        ),
        (
            "history -s then !!",
            vec![line("history -s aemarker\n"), line("!!\n")],
        ),
        (
            "PS1 runs code",
            vec![line("PS1='$(a=aemar; ${a}ker)'\n"), line("\n")],
        ),
        (
            "PROMPT_COMMAND",
            vec![line("PROMPT_COMMAND='a=aemar; ${a}ker'\n"), line("\n")],
        ),
        (
            "trap DEBUG",
            vec![line("trap 'a=aemar; ${a}ker' DEBUG\n"), line("true\n")],
        ),
        (
            "trap EXIT",
            vec![line("trap 'a=aemar; ${a}ker' EXIT\n"), line("exit\n")],
        ),
        (
            "stty kill",
            vec![line("stty kill q\n"), line("echo qaemarker\n")],
        ),
        (
            "stty werase",
            vec![line("stty werase q\n"), line("echo qaemarker\n")],
        ),
        (
            "stty erase",
            vec![line("stty erase q\n"), line("echo qqqqqaemarker\n")],
        ),
        (
            "script -qfc bash relay",
            vec![
                line("script -qfc 'bash --norc -i' /dev/null\n"),
                line("aemarker\n"),
            ],
        ),
        (
            "python pty.spawn relay",
            vec![
                line("python3 -c 'import pty; pty.spawn([\"bash\", \"--norc\", \"-i\"])'\n"),
                line("aemarker\n"),
            ],
        ),
        (
            "the dynamic loader runs bash",
            vec![line(LOADER), line("aemarker\n")],
        ),
        (
            "a copy of bash",
            vec![
                line("cp /bin/bash ./b2 && ./b2 --norc -i\n"),
                line("aemarker\n"),
            ],
        ),
        (
            "cat | bash",
            vec![line("cat | bash\n"), line("aemarker\n"), ("", &["Ctrl-D"])],
        ),
        (
            "python3 REPL",
            vec![
                line("python3 -q -i\n"),
                line("import os; os.system('aemarker')\n"),
            ],
        ),
        (
            "perl runs a line read",
            vec![
                line("perl -e 'system(scalar <STDIN>)'\n"),
                line("aemarker\n"),
            ],
        ),
        (
            "xargs runs lines",
            vec![
                line("xargs -I{} sh -c {}\n"),
                line("aemarker\n"),
                ("", &["Ctrl-D"]),
            ],
        ),
        (
            "a read-eval loop",
            vec![
                line("while read -r l; do eval \"$l\"; done\n"),
                line("aemarker\n"),
            ],
        ),
        (
            "an alias from a file",
            vec![line("alias e=\"$(cat name.txt)\"\n"), line("e\n")],
        ),
        (
            "a function from a file",
            vec![line("f() { $(cat name.txt); }\n"), line("f\n")],
        ),
        (
            "complete -C on Tab",
            vec![
                line("complete -C \"$(cat name.txt)\" zz\n"),
                ("zz ", &["Tab"]),
            ],
        ),
        (
            "source a substitution",
            vec![line("source <(cat name.txt)\n")],
        ),
        ("BASH_ENV", vec![line("BASH_ENV=name.txt bash -c :\n")]),
        (
            "read from a descriptor",
            vec![line("exec 3<name.txt; read -u3 x; $x\n")],
        ),
        (
            "a here-string to bash",
            vec![line("bash <<< \"$(cat name.txt)\"\n")],
        ),
        ("env -S", vec![line("env -S \"$(cat name.txt)\"\n")]),
    ]
}

/// Every case under a policy that denies the marker: none runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_interactive_bypass_runs_a_denied_program() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let marker = root.join(MARKER);
    std::fs::write(
        &marker,
        format!("#!/bin/sh\ntouch '{}/ran'\n", root.display()),
    )
    .expect("marker");
    std::fs::set_permissions(&marker, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(root.join("name.txt"), MARKER).expect("name");
    let policy = root.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[[rule]]\nid = \"no-marker\"\ndecision = \"deny\"\nprogram = \"{MARKER}\"\nreason = \"the marker\"\n"
        ),
    )
    .expect("policy");
    let mut command = mcp_command(&root);
    command.arg("--policy").arg(&policy).env(
        "PATH",
        format!(
            "{}:{}",
            root.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    );
    let client = serve((), command).await.0;
    let cases = cases();
    assert!(cases.len() >= 31, "{}", cases.len());
    let mut acted = Vec::new();
    let mut stopped_at_exec = 0;
    for (label, typed) in &cases {
        let _ = std::fs::remove_file(root.join("ran"));
        let started = call(
            &client,
            "Bash",
            json!({ "command": "bash --norc -i", "tty": true }),
        )
        .await;
        let meta = started.structured_content.clone().expect("metadata");
        let Some(id) = meta["bash_id"].as_str().map(str::to_owned) else {
            panic!("{label}: no shell: {}", text(&started));
        };
        let mut answers = String::new();
        for (input, keys) in typed {
            let answer = call(
                &client,
                "WriteStdin",
                json!({ "bash_id": id, "input": input, "keys": keys, "wait_ms": 1500 }),
            )
            .await;
            answers.push_str(&text(&answer));
            answers.push('\n');
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        if root.join("ran").exists() {
            acted.push(format!("{label}: {answers}"));
        }
        // Past the line check, stopped at the exec: what would have acted
        // without the check at every exec.
        if answers.contains("[refused at run time: ") {
            stopped_at_exec += 1;
        }
        let _ = call(&client, "KillShell", json!({ "shell_id": id })).await;
    }
    client.cancel().await.expect("closes");
    eprintln!(
        "{stopped_at_exec} of {} cases got past the line check and were stopped at their exec",
        cases.len()
    );
    assert!(
        acted.is_empty(),
        "{} of {} acted:\n{}",
        acted.len(),
        cases.len(),
        acted.join("\n---\n")
    );
}
