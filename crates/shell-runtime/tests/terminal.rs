//! Commands under a pseudo-terminal (`SpawnSpec::tty`): the terminal is
//! their controlling terminal and stdin/stdout/stderr, sized 120x40, its
//! output is captured as one stream, input is written through the
//! `TerminalWriter`, and the sandbox and kill rules are those of any command.
#![cfg(target_os = "linux")]
#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{spec, text, wait_for_output};
use shell_runtime::{Confinement, ConfinementSpec, ShellProcess, Stream, group_waits_for_input};

async fn run(spawn: shell_runtime::SpawnSpec) -> Arc<ShellProcess> {
    let shell = ShellProcess::spawn(spawn).await.expect("spawns");
    tokio::time::timeout(Duration::from_secs(20), shell.wait())
        .await
        .expect("the shell ends");
    shell
}

/// Polls (the wait is a kernel state, no event tells it) until the shell's
/// terminal's foreground group is blocked reading it.
async fn wait_for_input_wait(shell: &ShellProcess) {
    let terminal = shell.terminal().expect("a terminal");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(group) = terminal.foreground_group()
            && group_waits_for_input(group, terminal.device())
        {
            return;
        }
        assert!(Instant::now() < deadline, "never waited: {:?}", text(shell));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const PROBE: &str = "[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo is-a-tty || echo not-a-tty; \
     (: < /dev/tty) 2>/dev/null && echo controlling || echo no-controlling; \
     echo \"term=$TERM\"; stty size 2>/dev/null || echo no-size; echo err >&2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_command_has_the_terminal_as_its_controlling_terminal_and_all_three_streams() {
    let shell = run(spec(PROBE).with_tty()).await;
    let output = text(&shell);
    // One stream: stderr arrives on the terminal too; the line
    // discipline turns each newline into CR LF.
    assert_eq!(
        output.replace("\r\n", "\n"),
        "is-a-tty\ncontrolling\nterm=xterm-256color\n40 120\nerr\n",
    );
    assert!(shell.snapshot(Stream::Stderr).render().is_empty());
    assert!(shell.has_terminal());
    assert!(
        shell.terminal().is_none(),
        "a finished shell holds no terminal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tty_nothing_is_a_terminal() {
    let mut spawn = spec(PROBE);
    spawn.env.push(("TERM".into(), "dumb".into()));
    let shell = run(spawn).await;
    assert_eq!(
        shell.snapshot(Stream::Stdout).render(),
        "not-a-tty\nno-controlling\nterm=dumb\nno-size\n"
    );
    assert!(!shell.has_terminal());
    assert!(shell.terminal().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_written_to_the_terminal_is_read_by_the_command() {
    let shell = ShellProcess::spawn(spec("read -r line; echo \"got:$line\"").with_tty())
        .await
        .expect("spawns");
    wait_for_input_wait(&shell).await;
    let terminal = shell.terminal().expect("a terminal");
    assert!(terminal.echoes());
    terminal.write_all(b"hello there\n").await.expect("written");
    shell.wait().await;
    let output = text(&shell).replace("\r\n", "\n");
    // The terminal echoes the input, then the command answers.
    assert_eq!(output, "hello there\ngot:hello there\n");
    assert_eq!(shell.exit().expect("exited").code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_off_is_seen_from_the_master() {
    let shell = ShellProcess::spawn(spec("stty -echo; echo off; read -r x; echo done").with_tty())
        .await
        .expect("spawns");
    wait_for_output(&shell, "off").await;
    wait_for_input_wait(&shell).await;
    let terminal = shell.terminal().expect("a terminal");
    assert!(!terminal.echoes());
    terminal.write_all(b"secret\n").await.expect("written");
    shell.wait().await;
    let output = text(&shell);
    assert!(!output.contains("secret"), "{output}");
    assert!(output.contains("done"), "{output}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_the_terminal_interrupts_the_foreground_group() {
    let shell = ShellProcess::spawn(spec("echo started; while :; do sleep 0.1; done").with_tty())
        .await
        .expect("spawns");
    wait_for_output(&shell, "started").await;
    let terminal = shell.terminal().expect("a terminal");
    assert_eq!(
        terminal.foreground_group(),
        Some(i32::try_from(shell.pid()).expect("a pid"))
    );
    terminal.write_all(b"\x03").await.expect("written");
    tokio::time::timeout(Duration::from_secs(10), shell.wait())
        .await
        .expect("Ctrl-C ends it");
    assert_eq!(shell.exit().expect("exited").signal, Some(libc::SIGINT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_ends_a_tty_tree_and_its_background_jobs() {
    let shell = ShellProcess::spawn(spec("sleep 300 & echo job $!; read -r x").with_tty())
        .await
        .expect("spawns");
    wait_for_output(&shell, "job ").await;
    let job = common::numbers_in(&text(&shell))
        .first()
        .copied()
        .expect("a job pid");
    wait_for_input_wait(&shell).await;
    assert!(shell.terminate(Duration::from_millis(500)).await);
    assert!(common::gone(job).await, "the job outlived its shell");
    assert!(shell.terminal().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tty_commands_leave_no_descriptor_behind() {
    let before = open_descriptors();
    // Kept, as a manager keeps finished shells until they are read.
    let mut finished = Vec::new();
    for _ in 0..20 {
        let shell = run(spec("echo hi").with_tty()).await;
        assert!(text(&shell).contains("hi"));
        finished.push(shell);
    }
    // Other tests of this binary run alongside: allow their few descriptors.
    let after = open_descriptors();
    assert!(after <= before + 8, "descriptors {before} -> {after}");
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("fds").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_tty_command_in_its_own_namespace_uses_its_terminal() {
    let dir = tempfile::tempdir().expect("dir");
    let confinement = Arc::new(
        Confinement::prepare(&ConfinementSpec {
            restrict_writes: true,
            writable: vec![dir.path().to_path_buf()],
            isolate_processes: true,
            ..ConfinementSpec::default()
        })
        .expect("namespaces are available (root)"),
    );
    let mut spawn = spec(&format!(
        "{PROBE}; echo \"pid $$\"; echo hi > /dev/tty && echo tty-writable; \
         python3 -c 'import os; m, s = os.openpty(); print(\"openpty\", os.isatty(s))'; \
         read -r line; echo \"got:$line\""
    ))
    .with_tty();
    spawn.confinement = Some(confinement);
    let shell = ShellProcess::spawn(spawn).await.expect("spawns");
    wait_for_output(&shell, "openpty").await;
    wait_for_input_wait(&shell).await;
    shell
        .terminal()
        .expect("a terminal")
        .write_all(b"inside\n")
        .await
        .expect("written");
    tokio::time::timeout(Duration::from_secs(10), shell.wait())
        .await
        .expect("ends");
    let output = text(&shell).replace("\r\n", "\n");
    for line in [
        "is-a-tty",
        "controlling",
        "40 120",
        "pid 2",
        "tty-writable",
        "openpty True",
        "got:inside",
    ] {
        assert!(output.contains(line), "no {line:?} in {output}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_prompt_waits_for_input_and_a_quiet_sleep_does_not() {
    let quiet = Duration::from_millis(300);
    let prompt = ShellProcess::spawn(spec("read -r -p 'name? ' x; echo \"hi $x\"").with_tty())
        .await
        .expect("spawns");
    let sleeper = ShellProcess::spawn(spec("echo sleeping; sleep 30").with_tty())
        .await
        .expect("spawns");
    wait_for_output(&prompt, "name? ").await;
    wait_for_output(&sleeper, "sleeping").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !prompt.waits_for_input(quiet) {
        assert!(Instant::now() < deadline, "the prompt never waited");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(prompt.quiet_for() >= quiet);
    assert!(sleeper.quiet_for() >= quiet);
    assert!(!sleeper.waits_for_input(quiet), "a sleep is no prompt");
    // A pipe shell never waits for input, whatever it reads.
    let piped = ShellProcess::spawn(spec("sleep 30")).await.expect("spawns");
    tokio::time::sleep(quiet).await;
    assert!(!piped.waits_for_input(quiet));
    for shell in [&sleeper, &piped] {
        shell.terminate(Duration::from_millis(200)).await;
    }
    prompt
        .terminal()
        .expect("a terminal")
        .write_all(b"ann\r")
        .await
        .expect("written");
    prompt.wait().await;
    assert!(text(&prompt).contains("hi ann"));
    assert!(!prompt.waits_for_input(Duration::ZERO));
}

/// The output file of a tty shell holds the text a person would read:
/// no escape sequences, redraws collapsed, and a secret drawn in pieces
/// (`SEC\e[0mRET`) redacted once whole, whether the file is made while
/// the command runs (large output) or after it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_output_file_holds_cleaned_redacted_text() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Large output makes the file while the command runs (memory keeps
    // 1.25 MiB); small output makes it once asked, after the end.
    for (name, filler) in [("small", 0), ("large", 2_000_000)] {
        let path = dir.path().join(format!("{name}.txt"));
        // The secret is cut by a sequence and by a pause between writes.
        let command = format!(
            "head -c {filler} /dev/zero | tr '\\0' x; \
             printf '\\033[1;31mred\\033[0m key=sk-ab\\033[0m'; sleep 0.05; printf 'cdefgh\\n'; \
             for i in 1 2 3; do printf '\\r%s%%' $((i*33)); sleep 0.02; done; printf '\\r100%%\\n'; \
             printf '\\033]0;title\\007end\\n'"
        );
        let mut tty = spec(&command).with_tty();
        tty.replacements = Some(Arc::new(shell_runtime::Redactions::new(
            [("sk-abcdefgh".into(), "[REDACTED:KEY]".into())],
            Vec::new(),
        )));
        tty.stdout_spill = Some(shell_runtime::SpillFile {
            path: path.clone(),
            cap_bytes: 1 << 30,
            budget: None,
        });
        let shell = run(tty).await;
        let report = shell
            .ensure_spill_file(Stream::Stdout)
            .expect("a spill was asked for");
        let file = std::fs::read_to_string(&path).expect("the output file");
        let filler = "x".repeat(filler);
        let expected = format!("{filler}red key=[REDACTED:KEY]\n100%\nend\n");
        assert!(
            file == expected,
            "{name}: {} bytes, ending {:?}",
            file.len(),
            &file[file.len().saturating_sub(200)..]
        );
        assert_eq!(report.written, file.len() as u64, "{name}");
        assert!(report.is_whole(), "{name}");
    }
}

/// A file capped below the cleaned text holds its start, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_output_file_counts_its_cap_in_cleaned_bytes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("capped.txt");
    let mut tty =
        spec("for i in $(seq 1 2000); do printf '\\033[32m%05d\\033[0m\\n' $i; done").with_tty();
    tty.stdout_spill = Some(shell_runtime::SpillFile {
        path: path.clone(),
        cap_bytes: 6000,
        budget: None,
    });
    let shell = run(tty).await;
    let report = shell
        .ensure_spill_file(Stream::Stdout)
        .expect("a spill was asked for");
    let file = std::fs::read_to_string(&path).expect("the output file");
    assert_eq!(file.len(), 6000);
    assert_eq!(report.written, 6000);
    assert_eq!(report.shortfall, Some(shell_runtime::SpillShortfall::Cap));
    assert!(file.starts_with("00001\n00002\n"));
    assert!(!file.contains('\u{1b}'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_hangs_up_an_interactive_shell_that_ignores_sigterm() {
    // Interactive bash ignores SIGTERM; without the hangup it would last
    // the whole grace and end by SIGKILL.
    let shell = ShellProcess::spawn(spec("exec bash --norc --noprofile -i").with_tty())
        .await
        .expect("spawns");
    wait_for_input_wait(&shell).await;
    assert!(shell.terminate(Duration::from_secs(30)).await);
    assert_eq!(shell.exit().expect("exited").signal, Some(libc::SIGHUP));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_of_a_tty_command_that_ends_on_sigterm_reads_as_sigterm() {
    let shell = ShellProcess::spawn(spec("exec sleep 300").with_tty())
        .await
        .expect("spawns");
    // Started: the group is in front of its terminal.
    let terminal = shell.terminal().expect("a terminal");
    let deadline = Instant::now() + Duration::from_secs(10);
    while terminal.foreground_group().is_none() {
        assert!(Instant::now() < deadline, "no foreground group");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(shell.terminate(Duration::from_secs(30)).await);
    assert_eq!(shell.exit().expect("exited").signal, Some(libc::SIGTERM));
}
