//! Policy at every exec (docs/decisions/0018): programs a command reaches
//! only at run time (a name read from a file, `eval`, `bash -c`, an
//! interpreter's `execv`, a symlink, a hard link or a copy, a relay, a
//! terminal session) are judged at their exec and refused there, with a
//! line in the answer and in the audit log; ordinary work runs as before.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};

use crate::rmcp_support::{call, mcp_command, serve, text};
use crate::{stderr, stdout};

/// The marker program the policy denies: it would leave `ran` behind.
const MARKER: &str = "aemarker";

struct Setup {
    dir: tempfile::TempDir,
    policy: PathBuf,
    log: PathBuf,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let marker = dir.path().join(MARKER);
        std::fs::write(
            &marker,
            format!("#!/bin/sh\ntouch '{}/ran'\n", dir.path().display()),
        )
        .expect("marker");
        std::fs::set_permissions(&marker, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        // The name only a run can read: no text check sees it.
        std::fs::write(dir.path().join("name.txt"), MARKER).expect("name");
        let policy = dir.path().join("policy.toml");
        std::fs::write(
            &policy,
            format!(
                "[[rule]]\nid = \"no-marker\"\ndecision = \"deny\"\nprogram = \"{MARKER}\"\nreason = \"the marker\"\n"
            ),
        )
        .expect("policy");
        let log = dir.path().join("audit.jsonl");
        Self { dir, policy, log }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `PATH` with the marker's directory first, as a user's `~/bin`.
    fn path_var(&self) -> String {
        format!(
            "{}:{}",
            self.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    fn run(&self, sandbox: &str, command: &str) -> Output {
        Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .args(["run", "--cwd"])
            .arg(self.path())
            .args(["--sandbox", sandbox, "--policy"])
            .arg(&self.policy)
            .arg("--audit-log")
            .arg(&self.log)
            .args(["--", command])
            .env("PATH", self.path_var())
            .output()
            .expect("agent-exec runs")
    }

    /// `command` through `agent-exec run` with `home` as the server's
    /// `HOME` and every text-level ask allowed: only the exec check stands
    /// between it and the home.
    fn run_allowing_asks(&self, home: &Path, command: &str) -> Output {
        Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .args([
                "run",
                "--sandbox",
                "off",
                "--ask-fallback",
                "allow",
                "--cwd",
            ])
            .arg(self.path())
            .arg("--audit-log")
            .arg(&self.log)
            .args(["--", command])
            .env("HOME", home)
            .output()
            .expect("agent-exec runs")
    }

    fn ran(&self) -> bool {
        self.path().join("ran").exists()
    }

    fn exec_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
            .filter(|line| line["event"] == "exec")
            .collect()
    }
}

/// Commands that reach the marker only at run time.
const RUN_TIME_SPELLINGS: &[&str] = &[
    "m=$(cat name.txt); $m",
    "eval \"$(cat name.txt)\"",
    "bash -c \"$(cat name.txt)\"",
    "python3 -c 'import os; os.execv(os.path.abspath(open(\"name.txt\").read()), [\"x\"])'",
    "ln -s \"$(cat name.txt)\" link && ./link",
    "ln \"$(cat name.txt)\" hard && ./hard",
    "cp \"$(cat name.txt)\" copy && ./copy",
    "script -qfc 'm=$(cat name.txt); ./$m' /dev/null",
    // Opened, then run by its descriptor: the path is the process's fd 4.
    "exec 4<\"$(cat name.txt)\"; /dev/fd/4",
    "exec 5<\"$(cat name.txt)\"; /proc/self/fd/5",
];

#[test]
fn programs_reached_only_at_run_time_are_refused_at_their_exec() {
    for sandbox in ["off", "contain"] {
        for command in RUN_TIME_SPELLINGS {
            let setup = Setup::new();
            let output = setup.run(sandbox, command);
            let answer = stdout(&output);
            assert!(
                !setup.ran(),
                "{sandbox}: `{command}` ran the marker: {answer}{}",
                stderr(&output)
            );
            assert!(
                answer.contains(&format!("[refused at run time: {MARKER}"))
                    && answer.contains("(rule no-marker)]"),
                "{sandbox}: `{command}`: {answer}{}",
                stderr(&output)
            );
            let lines = setup.exec_lines();
            assert!(!lines.is_empty(), "{sandbox}: `{command}`: no exec line");
            for line in lines {
                assert_eq!(line["rule"], "no-marker", "{line}");
                assert_eq!(line["decision"], "deny", "{line}");
                assert_eq!(line["status"], "refused_at_run_time", "{line}");
                assert_eq!(line["tool"], "Bash", "{line}");
            }
        }
    }
}

#[test]
fn ordinary_work_runs_unrefused() {
    let setup = Setup::new();
    std::fs::write(setup.path().join("Makefile"), "all:\n\t@echo made\n").expect("Makefile");
    let command = "git init -q . && git status --short >/dev/null && ls >/dev/null && make && \
                   python3 -c 'print(\"py\")' && \
                   for i in $(seq 200); do true; /bin/true; done && echo loop-done";
    let started = std::time::Instant::now();
    let output = setup.run("off", command);
    let answer = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{answer}{}", stderr(&output));
    assert_eq!(answer, "made\npy\nloop-done\n", "{}", stderr(&output));
    assert!(setup.exec_lines().is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

/// A built-in rule fires at the exec too: `rm -rf "$HOME"` spelled at run
/// time, with `HOME` a temp dir (if the check were broken, only that
/// directory would go).
#[test]
fn a_recursive_delete_of_home_spelled_at_run_time_is_refused() {
    let setup = Setup::new();
    let home = setup.path().join("home");
    std::fs::create_dir(&home).expect("home");
    std::fs::write(home.join("keep.txt"), "kept").expect("file");
    std::fs::write(setup.path().join("tool.txt"), "rm").expect("name");
    let output = setup.run_allowing_asks(&home, "r=$(cat tool.txt); $r -rf \"$HOME\"; echo after");
    let answer = stdout(&output);
    assert!(
        home.join("keep.txt").exists(),
        "{answer}{}",
        stderr(&output)
    );
    assert!(answer.contains("after"), "{answer}");
    assert!(
        answer.contains(&format!("[refused at run time: rm -rf {}", home.display())),
        "{answer}"
    );
    assert_eq!(setup.exec_lines().len(), 1);
}

/// What a person types into a terminal session runs only through its
/// exec, where it is judged; the refusal is in `WriteStdin`'s answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_session_typing_the_marker_is_refused_at_its_exec() {
    let setup = Setup::new();
    let mut command = mcp_command(setup.path());
    command
        .arg("--policy")
        .arg(&setup.policy)
        .env("PATH", setup.path_var());
    let client = serve((), command).await.0;
    let started = call(
        &client,
        "Bash",
        json!({ "command": "bash --norc -i", "tty": true }),
    )
    .await;
    let meta = started.structured_content.clone().expect("metadata");
    assert_eq!(meta["waiting_for_input"], true, "{}", text(&started));
    let id = meta["bash_id"].as_str().expect("id").to_owned();
    let typed = call(
        &client,
        "WriteStdin",
        json!({ "bash_id": id, "input": "m=$(cat name.txt); $m; echo typed-done\n", "wait_ms": 5000 }),
    )
    .await;
    let answer = text(&typed);
    assert!(!setup.ran(), "{answer}");
    assert!(
        answer.contains(&format!("[refused at run time: {MARKER} (rule no-marker)]")),
        "{answer}"
    );
    let meta = typed.structured_content.clone().expect("metadata");
    assert_eq!(meta["runtime_refusals"], 1, "{answer}");
    let _ = call(&client, "KillShell", json!({ "shell_id": id })).await;
    client.cancel().await.expect("closes");
}

/// A policy-file `ask` rule met only at an exec refuses it, saying it
/// needs approval; a command whose text was approved runs its execs.
#[test]
fn an_ask_rule_met_at_run_time_refuses_unless_the_command_was_approved() {
    let setup = Setup::new();
    std::fs::write(
        &setup.policy,
        format!(
            "[[rule]]\nid = \"ask-marker\"\ndecision = \"ask\"\nprogram = \"{MARKER}\"\nreason = \"the marker\"\n"
        ),
    )
    .expect("policy");
    let output = setup.run("off", "m=$(cat name.txt); $m; echo after");
    let answer = stdout(&output);
    assert!(!setup.ran(), "{answer}");
    assert!(
        answer.contains(&format!(
            "[refused at run time: {MARKER} (rule ask-marker: it needs approval, and nobody could be asked)]"
        )),
        "{answer}{}",
        stderr(&output)
    );
    assert_eq!(setup.exec_lines()[0]["decision"], "ask");
    // Named in the text, the command is asked before it runs; approved
    // (here by the fallback), its exec is not refused again.
    let output = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args([
            "run",
            "--sandbox",
            "off",
            "--ask-fallback",
            "allow",
            "--cwd",
        ])
        .arg(setup.path())
        .arg("--policy")
        .arg(&setup.policy)
        .args(["--", MARKER])
        .env("PATH", setup.path_var())
        .output()
        .expect("agent-exec runs");
    assert!(setup.ran(), "{}{}", stdout(&output), stderr(&output));
}

/// A multi-call program behind a denied name (Debian's `shutdown` is a
/// link to systemctl) is that name only when called by it: run by its own
/// name it runs, called as the denied name (the link, or `exec -a` on the
/// file itself) it is refused.
#[test]
fn a_program_a_denied_name_links_to_is_judged_by_the_name_it_is_called_by() {
    let setup = Setup::new();
    let tool = setup.path().join("multitool");
    std::fs::write(
        &tool,
        format!(
            "#!/bin/sh\ntouch \"{}/ran-$(basename \"$0\")\"\n",
            setup.path().display()
        ),
    )
    .expect("multitool");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let marker = setup.path().join(MARKER);
    std::fs::remove_file(&marker).expect("rm the marker");
    std::os::unix::fs::symlink("multitool", &marker).expect("link");

    let output = setup.run("off", "multitool status");
    assert!(
        setup.path().join("ran-multitool").exists(),
        "the multi-call program by its own name was refused: {}{}",
        stdout(&output),
        stderr(&output)
    );
    for command in [
        "m=$(cat name.txt); ./$m",
        "bash -c \"exec -a $(cat name.txt) ./multitool\"",
    ] {
        let output = setup.run("off", command);
        let answer = stdout(&output);
        assert!(
            answer.contains("(rule no-marker)]"),
            "`{command}` was not refused: {answer}{}",
            stderr(&output)
        );
        assert!(
            !setup.path().join(format!("ran-{MARKER}")).exists(),
            "`{command}` ran as the denied name"
        );
    }
}

/// The dynamic loader run as a program runs the program it is given; the
/// loader's path is read at run time, so only the exec sees it.
#[test]
fn a_program_run_by_the_dynamic_loader_is_judged_as_itself() {
    let Some(loader) = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|loader| Path::new(loader).exists())
    else {
        panic!("no dynamic loader where glibc puts it");
    };
    let setup = Setup::new();
    // An ELF program under the denied name: a copy of touch.
    let elf = setup.path().join("elf");
    std::fs::create_dir(&elf).expect("dir");
    std::fs::copy("/usr/bin/touch", elf.join(MARKER)).expect("a copy of touch");
    std::fs::write(setup.path().join("loader.txt"), loader).expect("loader");
    for sandbox in ["off", "contain"] {
        for command in [
            "l=$(cat loader.txt); $l ./elf/aemarker ran",
            "l=$(cat loader.txt); $l --argv0 ls ./elf/aemarker ran",
        ] {
            let output = setup.run(sandbox, command);
            let answer = stdout(&output);
            assert!(
                !setup.ran(),
                "{sandbox}: `{command}` ran the marker: {answer}{}",
                stderr(&output)
            );
            assert!(
                answer.contains("(rule no-marker)]"),
                "{sandbox}: `{command}`: {answer}{}",
                stderr(&output)
            );
        }
    }
}

/// The paths a command deletes are judged as the process would resolve
/// them: through a symlink made at run time, through a descriptor, and as
/// a glob expanded to every entry of a protected directory (the home here,
/// a temp dir: were the check broken, only it would go).
#[test]
fn paths_are_judged_as_the_process_resolves_them() {
    for command in [
        "ln -s \"$(dirname \"$HOME\")\" up && rm -rf \"up/$(basename \"$HOME\")\"",
        "t=$(mktemp -d); ln -s \"$HOME\" \"$t/x\"; rm -rf \"$t\"/x/*",
        "exec 3<\"$HOME\"; rm -rf /dev/fd/3/*",
        "cd \"$(cat home.txt)\" && rm -rf ./*",
        "cd \"$(cat home.txt)\" && rm -rf keep.txt keep2.txt",
        // A process that points HOME elsewhere does not unprotect the home.
        "HOME=/tmp bash -c 'rm -rf \"$(cat home.txt)\"'",
    ] {
        let setup = Setup::new();
        let home = setup.path().join("home");
        std::fs::create_dir(&home).expect("home");
        std::fs::write(home.join("keep.txt"), "kept").expect("file");
        std::fs::write(home.join("keep2.txt"), "kept").expect("file");
        std::fs::write(
            setup.path().join("home.txt"),
            home.as_os_str().as_encoded_bytes(),
        )
        .expect("home name");
        let output = setup.run_allowing_asks(&home, command);
        let answer = stdout(&output);
        assert!(
            home.join("keep.txt").exists() && home.join("keep2.txt").exists(),
            "`{command}` deleted the home's files: {answer}{}",
            stderr(&output)
        );
        assert!(
            answer.contains("[refused at run time: rm -rf"),
            "`{command}`: {answer}{}",
            stderr(&output)
        );
    }
}

/// Deleting some of a directory's entries, or every entry of a directory
/// nothing protects, runs; so does writing to a process substitution
/// (`tee /dev/fd/63`: a pipe, no path).
#[test]
fn deleting_files_of_an_ordinary_directory_runs() {
    let setup = Setup::new();
    let build = setup.path().join("build");
    std::fs::create_dir(&build).expect("build");
    for name in ["a.o", "b.o", "c.o"] {
        std::fs::write(build.join(name), "").expect("file");
    }
    let output = setup.run(
        "off",
        "echo x | tee >(wc -l >/dev/null) >/dev/null && ln -s build out && rm -rf out/a.o && cd build && rm -rf ./* && echo done",
    );
    let answer = stdout(&output);
    assert!(answer.starts_with("done\n"), "{answer}{}", stderr(&output));
    assert_eq!(std::fs::read_dir(&build).expect("read").count(), 0);
}

/// A recursive delete of a directory that holds a repository, spelled so
/// the text check sees only a name, is asked about at its exec (nobody
/// can be asked here: refused); a scratch clone under /tmp and a plain
/// directory go.
#[test]
fn deleting_a_repository_is_asked_about_at_its_exec() {
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a dir outside /tmp");
    let repository = base.path().join("repo");
    std::fs::create_dir_all(repository.join(".git/objects")).expect("a repository");
    std::fs::create_dir(base.path().join("plain")).expect("a plain dir");
    let scratch = tempfile::tempdir_in("/tmp").expect("a scratch dir");
    std::fs::create_dir_all(scratch.path().join("clone/.git")).expect("a scratch clone");
    let command = format!(
        "for d in repo; do rm -rf \"$d\"; done; rm -rf plain {}; echo after",
        scratch.path().join("clone").display()
    );
    let output = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["run", "--sandbox", "off", "--cwd"])
        .arg(base.path())
        .args(["--", &command])
        .output()
        .expect("agent-exec runs");
    let answer = stdout(&output);
    assert!(
        repository.join(".git/objects").exists(),
        "the repository went: {answer}{}",
        stderr(&output)
    );
    assert!(
        answer.contains("[refused at run time: rm -rf") && answer.contains("delete-repository"),
        "{answer}{}",
        stderr(&output)
    );
    assert!(answer.contains("after"), "{answer}");
    assert!(!base.path().join("plain").exists(), "{answer}");
    assert!(!scratch.path().join("clone").exists(), "{answer}");
}
