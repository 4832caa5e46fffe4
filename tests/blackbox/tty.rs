//! Interactive sessions through the MCP front door with rmcp's client:
//! `Bash` with `tty: true`, the wait for input, `WriteStdin`, Ctrl-C,
//! lines typed to a shell checked like commands, redaction, and nothing
//! left running.

use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use crate::rmcp_support::{call, mcp_command, serve, text};

use test_support::gone;

type Client = RunningService<RoleClient, ()>;

const SECRET: &str = "tok-0123456789-abcdef";

async fn connect(dir: &std::path::Path, extra: &[&str]) -> Client {
    let mut command = mcp_command(dir);
    command.args(extra).env("MY_SERVICE_TOKEN", SECRET);
    serve((), command).await.0
}

fn meta<'a>(result: &'a CallToolResult, key: &str) -> &'a Value {
    &result.structured_content.as_ref().expect("metadata")[key]
}

/// Starts a foreground tty command expected to stop at a prompt; returns
/// its answer and id.
async fn until_prompt(client: &Client, command: &str) -> (String, String) {
    let started = Instant::now();
    let answer = call(client, "Bash", json!({ "command": command, "tty": true })).await;
    let body = text(&answer);
    assert_eq!(answer.is_error, Some(false), "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "slow answer: {:?}",
        started.elapsed()
    );
    assert_eq!(meta(&answer, "waiting_for_input"), true, "{body}");
    assert_eq!(meta(&answer, "status"), "running");
    let id = meta(&answer, "bash_id")
        .as_str()
        .expect("bash_id")
        .to_owned();
    assert!(
        body.ends_with(&format!("Waiting for input: {id}")),
        "{body}"
    );
    (body, id)
}

async fn type_in(client: &Client, id: &str, input: &str, keys: &[&str]) -> CallToolResult {
    call(
        client,
        "WriteStdin",
        json!({ "bash_id": id, "input": input, "keys": keys, "wait_ms": 5000 }),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_and_a_repl_answer_instead_of_hanging() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(dir.path(), &[]).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "Bash",
            "BashOutput",
            "KillShell",
            "ListShells",
            "WriteStdin"
        ]
    );

    // isatty under tty, not without; colours are cleaned away.
    let probe =
        "[ -t 0 ] && [ -t 1 ] && echo tty-yes || echo tty-no; printf '\\033[31mred\\033[0m\\n'";
    let under = call(&client, "Bash", json!({ "command": probe, "tty": true })).await;
    assert_eq!(text(&under), "tty-yes\nred\n");
    assert_eq!(meta(&under, "waiting_for_input"), false);
    let without = call(&client, "Bash", json!({ "command": probe })).await;
    assert_eq!(text(&without), "tty-no\nred\n");
    // `tput sgr0`'s `ESC ( B` and a kitty graphics string leave nothing.
    let escapes = "printf 'a\\033(Bb\\033_Gf=100;AAAA\\033\\\\c\\n'";
    for tty in [true, false] {
        let cleaned = call(&client, "Bash", json!({ "command": escapes, "tty": tty })).await;
        assert_eq!(text(&cleaned), "abc\n", "tty: {tty}");
    }

    // `read -p`: the call answers at the prompt, WriteStdin answers it.
    let (body, id) = until_prompt(&client, "read -r -p 'Name? ' n; echo \"hello $n\"").await;
    assert!(body.starts_with("Name? \n\nWaiting for input: "), "{body}");
    let read = call(&client, "BashOutput", json!({ "bash_id": id })).await;
    assert!(
        text(&read).starts_with("Status: running (waiting for input), Duration: "),
        "{}",
        text(&read)
    );
    assert_eq!(meta(&read, "waiting_for_input"), true);
    let answered = type_in(&client, &id, "Ann\n", &[]).await;
    let body = text(&answered);
    assert!(
        body.starts_with("Status: completed, Exit code: 0"),
        "{body}"
    );
    assert!(body.contains("hello Ann"), "{body}");
    let again = type_in(&client, &id, "more\n", &[]).await;
    assert_eq!(again.is_error, Some(true));
    assert!(text(&again).contains("not running"), "{}", text(&again));

    // A python REPL: 6*7, then Ctrl-D ends it.
    let (_, id) = until_prompt(&client, "python3 -q").await;
    let answer = type_in(&client, &id, "print(6*7)\n", &[]).await;
    let body = text(&answer);
    assert!(body.contains("42"), "{body}");
    assert!(
        body.starts_with("Status: running (waiting for input)"),
        "{body}"
    );
    let ended = type_in(&client, &id, "", &["Ctrl-D"]).await;
    assert!(
        text(&ended).starts_with("Status: completed"),
        "{}",
        text(&ended)
    );

    // Unknown key and unknown id.
    let unknown = type_in(&client, &id, "", &["F13"]).await;
    assert_eq!(unknown.is_error, Some(true));
    assert!(text(&unknown).contains("Ctrl-C"), "{}", text(&unknown));
    let missing = type_in(&client, "shell_00000000", "x", &[]).await;
    assert!(text(&missing).contains("not found"), "{}", text(&missing));
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_ends_a_loop_with_and_without_a_terminal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(dir.path(), &[]).await;
    for tty in [true, false] {
        let started = call(
            &client,
            "Bash",
            json!({ "command": "echo looping; while :; do sleep 0.1; done", "run_in_background": true, "tty": tty }),
        )
        .await;
        let id = meta(&started, "bash_id").as_str().expect("id").to_owned();
        if !tty {
            let refused = type_in(&client, &id, "hello\n", &[]).await;
            assert_eq!(refused.is_error, Some(true));
            assert!(
                text(&refused).contains("has no terminal"),
                "{}",
                text(&refused)
            );
        }
        let answer = type_in(&client, &id, "", &["Ctrl-C"]).await;
        let body = text(&answer);
        assert_eq!(meta(&answer, "is_running"), false, "tty {tty}: {body}");
        assert!(body.contains("SIGINT"), "tty {tty}: {body}");
    }
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_typed_to_a_shell_is_checked_and_a_refused_one_is_not_typed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[rule]]\nid = \"no-marker\"\ndecision = \"deny\"\nprogram = \"touch\"\nargs_prefix = [\"forbidden-marker\"]\nreason = \"a test marker\"\n",
    )
    .expect("policy");
    let client = connect(dir.path(), &["--policy", policy.to_str().expect("utf-8")]).await;
    // A shell reading lines: `read` is bash's own, so bash is in front.
    let (_, id) = until_prompt(&client, "while IFS= read -r line; do eval \"$line\"; done").await;
    let refused = type_in(&client, &id, "touch forbidden-marker\n", &[]).await;
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    assert!(text(&refused).contains("no-marker"), "{}", text(&refused));
    let editing = type_in(&client, &id, "", &["Up"]).await;
    assert_eq!(editing.is_error, Some(true));
    // A partial line is kept by the server and checked whole at Enter.
    let partial = type_in(&client, &id, "touch allowed-", &[]).await;
    assert_eq!(partial.is_error, Some(false), "{}", text(&partial));
    let ok = type_in(&client, &id, "marker; echo typed-ok", &["Enter"]).await;
    assert!(text(&ok).contains("typed-ok"), "{}", text(&ok));
    assert!(dir.path().join("allowed-marker").exists());
    assert!(!dir.path().join("forbidden-marker").exists());
    let all = call(&client, "KillShell", json!({ "shell_id": id })).await;
    assert_eq!(all.is_error, Some(false));
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tty_output_is_scrubbed_and_redacted_and_nothing_is_left_running() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Without containment: the job's pid is read from the host.
    let client = connect(dir.path(), &["--sandbox", "off"]).await;
    let (body, id) = until_prompt(
        &client,
        &format!(
            "echo \"env:[${{MY_SERVICE_TOKEN-}}]\"; echo 'printed:{SECRET}'; sleep 300 & echo \"job $!\"; read -r -s -p 'Password: ' p; echo \"len ${{#p}}\""
        ),
    )
    .await;
    assert!(body.contains("env:[]"), "{body}");
    assert!(
        body.contains("printed:[REDACTED:MY_SERVICE_TOKEN]"),
        "{body}"
    );
    assert!(!body.contains(SECRET), "{body}");
    let job: u32 = body
        .lines()
        .find_map(|line| line.strip_prefix("job "))
        .and_then(|pid| pid.trim().parse().ok())
        .expect("a job pid");
    // Typed while echo is off: it never shows.
    let answer = type_in(&client, &id, "hunter2\n", &[]).await;
    assert!(text(&answer).contains("len 7"), "{}", text(&answer));
    assert!(!text(&answer).contains("hunter2"), "{}", text(&answer));
    assert!(gone(job).await, "the tty shell's job outlived it");

    let job_of = |body: &str| -> u32 {
        body.lines()
            .find_map(|line| line.strip_prefix("job "))
            .and_then(|pid| pid.trim().parse().ok())
            .expect("a job pid")
    };
    let (body, id) = until_prompt(&client, "sleep 300 & echo \"job $!\"; read -r x").await;
    let killed = call(&client, "KillShell", json!({ "shell_id": id })).await;
    assert_eq!(text(&killed), format!("Shell {id} terminated"));
    assert!(gone(job_of(&body)).await, "KillShell left the job");
    // Server exit ends a tty shell waiting for input, and its job.
    let (body, _) = until_prompt(&client, "sleep 300 & echo \"job $!\"; read -r x").await;
    client.cancel().await.expect("closes");
    assert!(gone(job_of(&body)).await, "server exit left the job");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn less_and_vim_are_seen_on_the_screen_and_quit_with_keys() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lines: String = (1..=200).map(|n| format!("line {n} {SECRET}\n")).collect();
    std::fs::write(dir.path().join("big.txt"), lines).expect("write");
    let client = connect(dir.path(), &[]).await;

    let (_, id) = until_prompt(&client, "less big.txt").await;
    let screen = call(
        &client,
        "BashOutput",
        json!({ "bash_id": id, "screen": true }),
    )
    .await;
    let body = text(&screen);
    assert!(
        body.starts_with("Status: running (waiting for input)"),
        "{body}"
    );
    assert!(
        body.contains("\n\nline 1 [REDACTED:MY_SERVICE_TOKEN]\nline 2 "),
        "{body}"
    );
    assert!(!body.contains("line 60 "), "one screen only: {body}");
    assert!(!body.contains(SECRET), "{body}");
    assert!(meta(&screen, "cursor_row").is_u64());
    let filtered = call(
        &client,
        "BashOutput",
        json!({ "bash_id": id, "screen": true, "filter": "x" }),
    )
    .await;
    assert_eq!(filtered.is_error, Some(true));
    // Down twice scrolls two lines (application cursor keys under less).
    let _ = type_in(&client, &id, "", &["Down", "Down"]).await;
    let scrolled = call(
        &client,
        "BashOutput",
        json!({ "bash_id": id, "screen": true }),
    )
    .await;
    assert!(
        text(&scrolled).contains("\n\nline 3 [REDACTED"),
        "{}",
        text(&scrolled)
    );
    let quit = type_in(&client, &id, "q", &[]).await;
    assert!(
        text(&quit).starts_with("Status: completed"),
        "{}",
        text(&quit)
    );

    let (_, id) = until_prompt(&client, "vim -u NONE -N notes.txt").await;
    let _ = type_in(&client, &id, "ihello from vim", &["Escape"]).await;
    let screen = call(
        &client,
        "BashOutput",
        json!({ "bash_id": id, "screen": true }),
    )
    .await;
    assert!(
        text(&screen).contains("\n\nhello from vim\n~"),
        "{}",
        text(&screen)
    );
    let saved = type_in(&client, &id, ":wq\n", &[]).await;
    assert!(
        text(&saved).starts_with("Status: completed"),
        "{}",
        text(&saved)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).expect("saved"),
        "hello from vim\n"
    );

    // No terminal, no screen.
    let plain = call(
        &client,
        "Bash",
        json!({ "command": "sleep 30", "run_in_background": true }),
    )
    .await;
    let plain_id = meta(&plain, "bash_id").as_str().expect("id").to_owned();
    let refused = call(
        &client,
        "BashOutput",
        json!({ "bash_id": plain_id, "screen": true }),
    )
    .await;
    assert!(
        text(&refused).contains("has no terminal"),
        "{}",
        text(&refused)
    );
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_an_interactive_bash_top_and_git_add_p_stop_at_their_prompts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(dir.path(), &[]).await;

    let (_, id) = until_prompt(&client, "node -i").await;
    let answer = type_in(&client, &id, "6*7\n", &[]).await;
    assert!(text(&answer).contains("42"), "{}", text(&answer));
    let _ = type_in(&client, &id, "", &["Ctrl-D"]).await;

    let (_, id) = until_prompt(&client, "PS1='$ ' bash --norc --noprofile -i").await;
    let answer = type_in(&client, &id, "echo hi-$((6*7))\n", &[]).await;
    assert!(text(&answer).contains("hi-42"), "{}", text(&answer));
    let answer = type_in(&client, &id, "exit\n", &[]).await;
    assert!(
        text(&answer).starts_with("Status: completed"),
        "{}",
        text(&answer)
    );

    let (_, id) = until_prompt(&client, "top -d 5").await;
    let screen = call(
        &client,
        "BashOutput",
        json!({ "bash_id": id, "screen": true }),
    )
    .await;
    assert!(text(&screen).contains("PID"), "{}", text(&screen));
    let answer = type_in(&client, &id, "q", &[]).await;
    assert!(
        text(&answer).starts_with("Status: completed"),
        "{}",
        text(&answer)
    );

    let setup = call(
        &client,
        "Bash",
        json!({ "command": "git init -q repo && cd repo && git config user.email t@e && git config user.name t && echo a > f && git add f && git commit -qm one && echo b >> f && cd .. && echo set" }),
    )
    .await;
    assert!(text(&setup).starts_with("set\n"), "{}", text(&setup));
    let (body, id) = until_prompt(&client, "cd repo && git add -p").await;
    assert!(body.contains("Stage this hunk"), "{body}");
    let answer = type_in(&client, &id, "y\n", &[]).await;
    assert!(
        text(&answer).starts_with("Status: completed"),
        "{}",
        text(&answer)
    );
    let staged = call(
        &client,
        "Bash",
        json!({ "command": "cd repo && git diff --cached --stat" }),
    )
    .await;
    assert!(
        text(&staged).contains("1 file changed"),
        "{}",
        text(&staged)
    );
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_stdin_is_audited_with_key_names_and_hidden_input_stays_hidden() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("audit.jsonl");
    let client = connect(dir.path(), &["--audit-log", log.to_str().expect("utf-8")]).await;
    let (_, id) = until_prompt(
        &client,
        "read -r -s -p 'Password: ' p; echo; read -r -p 'Line: ' l; echo \"got $l\"",
    )
    .await;
    let _ = type_in(&client, &id, "s3cret-pass\n", &[]).await;
    let answer = type_in(&client, &id, "echo visible", &["Enter"]).await;
    assert!(
        text(&answer).contains("got echo visible"),
        "{}",
        text(&answer)
    );
    client.cancel().await.expect("closes");
    let lines = std::fs::read_to_string(&log).expect("the log");
    assert!(!lines.contains("s3cret-pass"), "{lines}");
    let typed: Vec<Value> = lines
        .lines()
        .map(|line| serde_json::from_str(line).expect("json"))
        .filter(|line: &Value| line["tool"] == "WriteStdin")
        .collect();
    assert_eq!(typed.len(), 2, "{lines}");
    assert_eq!(typed[0]["command"], "[hidden input]");
    assert_eq!(typed[1]["command"], "echo visible[Enter]");
    assert_eq!(typed[1]["decision"], "allow");
    assert_eq!(typed[1]["bash_id"], id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_shell_under_the_sandbox_prompts_and_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(dir.path(), &["--sandbox", "workspace-write"]).await;
    let (body, id) = until_prompt(
        &client,
        "echo \"pid $$\"; [ -t 0 ] && echo tty-yes; read -r -p 'Name? ' n; echo \"hello $n\"",
    )
    .await;
    assert!(body.contains("pid 2\ntty-yes\nName? "), "{body}");
    let answer = type_in(&client, &id, "Ann\n", &[]).await;
    assert!(text(&answer).contains("hello Ann"), "{}", text(&answer));
    assert!(
        text(&answer).starts_with("Status: completed"),
        "{}",
        text(&answer)
    );
    client.cancel().await.expect("closes");
}

/// A tty command whose answer is cut: the file it names holds the whole
/// text cleaned (no escape sequences, the progress bar at its last
/// drawing, no `\r`) and redacted, also where an escape sequence split a
/// secret in two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_tty_answer_names_a_file_of_cleaned_redacted_text() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(dir.path(), &[]).await;
    let (head, tail) = SECRET.split_at(8);
    let command = format!(
        "printf '\\033[1;32mgreen\\033[0m\\n'; \
         for i in 20 40 60 80 100; do printf '\\rprogress %d%%' $i; sleep 0.01; done; echo; \
         printf 'split:{head}\\033[0m{tail}\\n'; \
         for i in $(seq 1 2000); do printf '\\033[33mrow %05d\\033[0m ..........\\n' $i; done; echo end"
    );
    let answer = call(&client, "Bash", json!({ "command": command, "tty": true })).await;
    let body = text(&answer);
    assert_eq!(answer.is_error, Some(false), "{body:.300}");
    assert_eq!(meta(&answer, "truncated"), true, "{body:.300}");
    let file = meta(&answer, "output_file")
        .as_str()
        .expect("output_file")
        .to_owned();
    assert!(body.contains(&file), "the cut line names the file");
    assert!(!body.contains(SECRET), "{body:.300}");
    let held = std::fs::read_to_string(&file).expect("the output file");
    let rows: String = (1..=2000)
        .map(|n| format!("row {n:05} ..........\n"))
        .collect();
    assert!(!held.contains('\u{1b}'), "{:?}", &held[..200]);
    assert!(!held.contains('\r'), "{:?}", &held[..200]);
    assert_eq!(
        held,
        format!("green\nprogress 100%\nsplit:[REDACTED:MY_SERVICE_TOKEN]\n{rows}end\n")
    );
    client.cancel().await.expect("closes");
}

/// A tty command that neither exits nor waits for input does not hold
/// the call: without an explicit timeout it answers after
/// `--background-after` (or the 120000 ms default) and goes on as a
/// background shell; an explicit timeout still ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_command_that_never_reads_goes_on_in_the_background() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(dir.path(), &["--background-after", "1500"]).await;
    let started = Instant::now();
    let answer = call(
        &client,
        "Bash",
        json!({ "command": "echo serving; sleep 600", "tty": true }),
    )
    .await;
    let body = text(&answer);
    let took = started.elapsed();
    assert_eq!(answer.is_error, Some(false), "{body}");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(15),
        "{took:?}"
    );
    let id = meta(&answer, "bash_id")
        .as_str()
        .expect("bash_id")
        .to_owned();
    assert_eq!(meta(&answer, "status"), "running");
    assert_eq!(meta(&answer, "waiting_for_input"), false);
    assert_eq!(
        body,
        format!("serving\n[still running after 1500 ms: continues as background shell {id}]")
    );
    let read = call(&client, "BashOutput", json!({ "bash_id": id })).await;
    assert!(
        text(&read).starts_with("Status: running"),
        "{}",
        text(&read)
    );
    let killed = call(&client, "KillShell", json!({ "shell_id": id })).await;
    assert_eq!(text(&killed), format!("Shell {id} terminated"));
    client.cancel().await.expect("closes");

    // An explicit timeout ends it, as for any foreground command.
    let client = connect(dir.path(), &[]).await;
    let answer = call(
        &client,
        "Bash",
        json!({ "command": "echo serving; sleep 600", "tty": true, "timeout": 1000 }),
    )
    .await;
    assert_eq!(answer.is_error, Some(true), "{}", text(&answer));
    assert!(
        text(&answer).starts_with("Command timed out after 1000ms"),
        "{}",
        text(&answer)
    );
    client.cancel().await.expect("closes");
}

/// Whether `path` (a program, or a directory it needs) is there. A
/// missing one skips the test here with a message, and fails it under
/// `CI=true`, where `.ci/run` installs it.
#[expect(clippy::print_stderr, reason = "a skipped test says why")]
fn present(path: &str, what: &str) -> bool {
    let found = if path.starts_with('/') {
        std::path::Path::new(path).exists()
    } else {
        std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(path).is_file()))
    };
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{path} ({what}) is missing; .ci/run installs it"
        );
        eprintln!("skipped: {path} ({what}) is missing");
    }
    found
}

/// psql's password prompt (`-W` asks before connecting): the call stops
/// at it, the password typed with echo off never shows, and the failed
/// connection (nothing listens on the port) ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_asks_for_a_password_that_never_shows() {
    if !present("psql", "the PostgreSQL client") {
        return;
    }
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(dir.path(), &[]).await;
    let (body, id) = until_prompt(
        &client,
        &format!("psql -W -h 127.0.0.1 -p {port} -U tester -d nodb"),
    )
    .await;
    assert!(
        body.starts_with("Password: \n\nWaiting for input: "),
        "{body}"
    );
    let answer = type_in(&client, &id, "pw-4f9c2e\n", &[]).await;
    let body = text(&answer);
    assert_eq!(meta(&answer, "is_running"), false, "{body}");
    assert!(body.contains("Exit code: 2"), "{body}");
    assert!(body.contains("Connection refused"), "{body}");
    assert!(!body.contains("pw-4f9c2e"), "{body}");
    client.cancel().await.expect("closes");
}

/// ssh's host-key question, from a real key exchange: the server is
/// `sshd -i` run by ssh's `ProxyCommand` (no port, no daemon). The call
/// stops at the question, `no` answers it, and ssh ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ssh_host_key_question_is_answered() {
    if !present("ssh", "the OpenSSH client")
        || !present("ssh-keygen", "the OpenSSH client")
        || !present("/usr/sbin/sshd", "openssh-server")
        || !present("/run/sshd", "sshd's privilege separation directory")
    {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(dir.path(), &[]).await;
    let setup = call(
        &client,
        "Bash",
        json!({ "command": "ssh-keygen -q -t ed25519 -N '' -f hostkey && printf 'UsePAM no\\n' > sshd_config && echo ready" }),
    )
    .await;
    assert_eq!(text(&setup), "ready\n");
    let at = dir.path().display();
    let (body, id) = until_prompt(
        &client,
        &format!(
            "ssh -F /dev/null -o ProxyCommand='/usr/sbin/sshd -i -f {at}/sshd_config -h {at}/hostkey' \
             -o UserKnownHostsFile={at}/known_hosts -o GlobalKnownHostsFile=/dev/null \
             -o StrictHostKeyChecking=ask tester@x"
        ),
    )
    .await;
    assert!(body.contains("can't be established"), "{body}");
    assert!(
        body.contains("Are you sure you want to continue connecting (yes/no/[fingerprint])? "),
        "{body}"
    );
    let answer = type_in(&client, &id, "no\n", &[]).await;
    let body = text(&answer);
    assert_eq!(meta(&answer, "is_running"), false, "{body}");
    assert!(body.contains("Host key verification failed."), "{body}");
    assert!(body.contains("Exit code: 255"), "{body}");
    assert!(!dir.path().join("known_hosts").exists());
    client.cancel().await.expect("closes");
}

/// A server whose policy refuses `touch forbidden-marker` (a harmless
/// stand-in for a dangerous line), with an audit log.
async fn marker_server(dir: &std::path::Path) -> (Client, std::path::PathBuf) {
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        "[[rule]]\nid = \"no-marker\"\ndecision = \"deny\"\nprogram = \"touch\"\nargs_prefix = [\"forbidden-marker\"]\nreason = \"a test marker\"\n",
    )
    .expect("policy");
    let log = dir.join("audit.jsonl");
    let client = connect(
        dir,
        &[
            "--policy",
            policy.to_str().expect("utf-8"),
            "--audit-log",
            log.to_str().expect("utf-8"),
        ],
    )
    .await;
    (client, log)
}

/// Waits (up to 10 s) for `path` to exist.
async fn appears(path: &std::path::Path) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if path.exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_reading_with_echo_off_is_checked_and_the_line_never_shows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (client, log) = marker_server(dir.path()).await;
    let shells = [
        "stty -echo; exec sh",
        "stty -echo; exec bash --norc --noediting -i",
        "stty -echo; exec bash -s 2>/dev/null",
        "stty -echo; exec bash --noediting -s",
        "stty -echo; exec dash -i",
    ];
    for (n, command) in shells.iter().enumerate() {
        let (_, id) = until_prompt(&client, command).await;
        let refused = type_in(&client, &id, "touch forbidden-marker\n", &[]).await;
        let body = text(&refused);
        assert_eq!(refused.is_error, Some(true), "{command}: {body}");
        assert!(body.contains("no-marker"), "{command}: {body}");
        assert!(!body.contains("forbidden"), "{command}: {body}");
        let allowed = format!("touch allowed-marker-{n}\n");
        let ok = type_in(&client, &id, &allowed, &[]).await;
        assert_eq!(ok.is_error, Some(false), "{command}: {}", text(&ok));
        assert!(!text(&ok).contains("allowed-marker"), "{}", text(&ok));
        assert!(
            appears(&dir.path().join(format!("allowed-marker-{n}"))).await,
            "{command}"
        );
        let _ = call(&client, "KillShell", json!({ "shell_id": id })).await;
    }
    assert!(!dir.path().join("forbidden-marker").exists());
    client.cancel().await.expect("closes");
    let lines = std::fs::read_to_string(&log).expect("the log");
    assert!(!lines.contains("marker"), "{lines}");
    assert!(lines.contains("[hidden input]"), "{lines}");
}

/// After a program that reads one line, a shell reads the terminal.
const THEN_A_SHELL: &str = "; while IFS= read -r line; do eval \"$line\"; done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_typed_ahead_of_a_one_line_reader_are_checked_by_the_shell_after_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (client, _log) = marker_server(dir.path()).await;
    let readers = [
        ("head -n1", "x\ntouch forbidden-marker\n"),
        ("dd bs=1 count=2 2>/dev/null", "x\ntouch forbidden-marker\n"),
        ("python3 -c 'input()'", "x\rtouch forbidden-marker\r"),
        ("head -n1 >/dev/null", "x\r\ntouch forbidden-marker\n"),
        (
            "printf '\\033[?2004h'; head -n1",
            "x\ntouch forbidden-marker;#\n",
        ),
    ];
    for (n, (reader, input)) in readers.iter().enumerate() {
        let (_, id) = until_prompt(&client, &format!("{reader}{THEN_A_SHELL}")).await;
        let refused = type_in(&client, &id, input, &[]).await;
        assert_eq!(refused.is_error, Some(true), "{reader}: {}", text(&refused));
        assert!(text(&refused).contains("no-marker"), "{}", text(&refused));
        // The look-alike: a harmless line after the reader's goes through.
        let ok = type_in(&client, &id, &format!("touch allowed-{n}\n"), &[]).await;
        assert_eq!(ok.is_error, Some(false), "{reader}: {}", text(&ok));
        assert!(
            appears(&dir.path().join(format!("allowed-{n}"))).await,
            "{reader}"
        );
        let _ = call(&client, "KillShell", json!({ "shell_id": id })).await;
    }
    // An interactive bash with `head -n1` in front.
    let (_, id) = until_prompt(&client, "exec bash --norc -i").await;
    let head = type_in(&client, &id, "head -n1\n", &[]).await;
    assert_eq!(head.is_error, Some(false), "{}", text(&head));
    let refused = type_in(&client, &id, "x\ntouch forbidden-marker\n", &[]).await;
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    let _ = type_in(&client, &id, "head -n1\n", &[]).await;
    let ok = type_in(&client, &id, "y\ntouch allowed-i\n", &[]).await;
    assert_eq!(ok.is_error, Some(false), "{}", text(&ok));
    assert!(appears(&dir.path().join("allowed-i")).await);
    let _ = call(&client, "KillShell", json!({ "shell_id": id })).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!dir.path().join("forbidden-marker").exists());
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_line_to_a_reader_that_ends_before_enter_is_held_and_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (client, _log) = marker_server(dir.path()).await;
    let (_, id) = until_prompt(
        &client,
        &format!("python3 -c 'import signal; signal.alarm(1); input()'{THEN_A_SHELL}"),
    )
    .await;
    let partial = type_in(&client, &id, "touch forbidden-marker", &[]).await;
    assert_eq!(partial.is_error, Some(false), "{}", text(&partial));
    // python ends on its alarm without the line; the shell reads next.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let refused = type_in(&client, &id, "\n", &[]).await;
    assert_eq!(refused.is_error, Some(true), "{}", text(&refused));
    assert!(text(&refused).contains("no-marker"), "{}", text(&refused));
    let _ = call(&client, "KillShell", json!({ "shell_id": id })).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!dir.path().join("forbidden-marker").exists());
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_lines_reach_cat_and_a_python_repl_line_by_line_in_good_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(dir.path(), &[]).await;
    let lines: String = (0..50).map(|n| format!("line-{n}\n")).collect();
    let (_, id) = until_prompt(&client, "cat > fifty.txt").await;
    let started = Instant::now();
    let answer = call(
        &client,
        "WriteStdin",
        json!({ "bash_id": id, "input": lines, "wait_ms": 20000 }),
    )
    .await;
    let cat = started.elapsed();
    assert_eq!(answer.is_error, Some(false), "{}", text(&answer));
    let _ = type_in(&client, &id, "", &["Ctrl-D"]).await;
    assert!(appears(&dir.path().join("fifty.txt")).await);
    let written = std::fs::read_to_string(dir.path().join("fifty.txt")).expect("file");
    assert_eq!(written, lines);
    let (_, id) = until_prompt(&client, "python3 -q").await;
    let python: String = (0..50).map(|n| format!("x{n} = {n}\n")).collect();
    let started = Instant::now();
    let answer = call(
        &client,
        "WriteStdin",
        json!({ "bash_id": id, "input": format!("{python}print(x49 * 2)\n"), "wait_ms": 20000 }),
    )
    .await;
    let repl = started.elapsed();
    assert!(text(&answer).contains("98"), "{}", text(&answer));
    eprintln!("50 lines: cat {cat:?}, python REPL {repl:?}");
    assert!(cat < Duration::from_secs(10), "{cat:?}");
    assert!(repl < Duration::from_secs(10), "{repl:?}");
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_nobody_reads_within_wait_ms_are_not_typed_and_counted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(dir.path(), &[]).await;
    let (_, id) = until_prompt(&client, "head -n1; sleep 30").await;
    let answer = call(
        &client,
        "WriteStdin",
        json!({ "bash_id": id, "input": "x\ny\nz", "wait_ms": 1500 }),
    )
    .await;
    let body = text(&answer);
    assert_eq!(answer.is_error, Some(false), "{body}");
    assert!(body.contains("[2 line(s) not typed"), "{body}");
    assert_eq!(meta(&answer, "lines_not_typed"), 2, "{body}");
    let _ = call(&client, "KillShell", json!({ "shell_id": id })).await;
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_line_that_would_ask_is_refused_without_showing_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[rule]]\nid = \"ask-marker\"\ndecision = \"ask\"\nprogram = \"touch\"\nargs_prefix = [\"secret-word\"]\nreason = \"a test marker\"\n",
    )
    .expect("policy");
    let client = connect(dir.path(), &["--policy", policy.to_str().expect("utf-8")]).await;
    let (_, id) = until_prompt(&client, "stty -echo; exec sh").await;
    let refused = type_in(&client, &id, "touch secret-word\n", &[]).await;
    let body = text(&refused);
    assert_eq!(refused.is_error, Some(true), "{body}");
    assert!(body.contains("ask-marker"), "{body}");
    assert!(!body.contains("secret-word"), "{body}");
    let _ = call(&client, "KillShell", json!({ "shell_id": id })).await;
    assert!(!dir.path().join("secret-word").exists());
    client.cancel().await.expect("closes");
}
