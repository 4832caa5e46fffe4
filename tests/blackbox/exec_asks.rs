//! Asking at an exec (docs/policy.md, "Approvals at run time"): a
//! policy-file `ask` rule met only when a program is run is put to the
//! person while the command waits, with the question a command gets;
//! approved, the exec goes on; declined, it fails (`EPERM`) with the
//! `[refused at run time: ...]` line; the time the question is open counts
//! toward no timeout. An approval given before the command ran holds at
//! the exec only for the same effect, taken again there.

use std::collections::VecDeque;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};

use crate::rmcp_support::{call, mcp_command, serve, text};

/// The program the policy asks about: it leaves `ran` behind.
const MARKER: &str = "aemarker";

/// Something done to the files while a question is open.
type Change = Box<dyn FnOnce() + Send>;

/// A person who answers the questions with `answers` in turn (`None`, or
/// none left: declines) after `delay`, and may change a file while
/// reading the first.
#[derive(Clone, Default)]
struct Person {
    answers: Arc<Mutex<VecDeque<Option<Value>>>>,
    delay: Arc<Mutex<Duration>>,
    asked: Arc<Mutex<Vec<String>>>,
    /// Run while the question is open (a link re-pointed).
    meanwhile: Arc<Mutex<Option<Change>>>,
}

impl Person {
    fn answering(answers: &[Option<Value>]) -> Self {
        let person = Self::default();
        person
            .answers
            .lock()
            .expect("lock")
            .extend(answers.iter().cloned());
        person
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().expect("lock").clone()
    }
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new());
        ClientConfig::new(capabilities, Implementation::new("exec-asks-test", "0"))
            .with_protocol_version(ProtocolVersion::V_2025_06_18)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        self.asked.lock().expect("lock").push(message);
        if let Some(change) = self.meanwhile.lock().expect("lock").take() {
            change();
        }
        let delay = *self.delay.lock().expect("lock");
        tokio::time::sleep(delay).await;
        let answer = self.answers.lock().expect("lock").pop_front().flatten();
        Ok(match answer {
            Some(content) => ElicitResult::new(ElicitationAction::Accept).with_content(content),
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }
}

struct Setup {
    dir: tempfile::TempDir,
    log: PathBuf,
}

impl Setup {
    /// A directory with the marker program, the name only a run reads
    /// (`name.txt`), and a policy that asks about the marker.
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        write_script(
            &root.join(MARKER),
            &format!("touch '{}/ran'", root.display()),
        );
        std::fs::write(root.join("name.txt"), MARKER).expect("name");
        std::fs::write(
            root.join("policy.toml"),
            format!(
                "[[rule]]\nid = \"ask-marker\"\ndecision = \"ask\"\nprogram = \"{MARKER}\"\nreason = \"the marker\"\n"
            ),
        )
        .expect("policy");
        let log = root.join("audit.jsonl");
        Self { dir, log }
    }

    fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).expect("canonical")
    }

    async fn serve(&self, person: &Person) -> RunningService<RoleClient, Person> {
        let root = self.root();
        let mut command = mcp_command(&root);
        command
            .args(["--sandbox", "off", "--policy"])
            .arg(root.join("policy.toml"))
            .arg("--audit-log")
            .arg(&self.log)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    root.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            );
        serve(person.clone(), command).await.0
    }

    fn ran(&self) -> bool {
        self.root().join("ran").exists()
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

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn meta(result: &CallToolResult, field: &str) -> Value {
    result
        .structured_content
        .as_ref()
        .and_then(|meta| meta.get(field))
        .cloned()
        .unwrap_or(Value::Null)
}

/// The marker is named only at run time, so the text check allows the
/// command and only its exec can ask.
const RUN_TIME_MARKER: &str = "m=$(cat name.txt); $m; echo after";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_the_rules_ask_about_is_asked_and_runs_once_approved() {
    let setup = Setup::new();
    let person = Person::answering(&[Some(json!({ "remember": false }))]);
    let client = setup.serve(&person).await;
    let answer = call(&client, "Bash", json!({ "command": RUN_TIME_MARKER })).await;
    let body = text(&answer);
    let asked = person.asked();
    assert_eq!(asked.len(), 1, "{body}");
    let lines: Vec<&str> = asked[0].lines().collect();
    assert_eq!(lines[0], "Run this command?", "{}", asked[0]);
    assert_eq!(lines[2], format!("Command: {MARKER}"), "{}", asked[0]);
    assert_eq!(
        lines[3],
        format!("Working directory: {}", setup.root().display())
    );
    assert!(lines[4].starts_with("Rule: ask-marker"), "{}", asked[0]);
    assert!(setup.ran(), "{body}");
    assert_eq!(answer.is_error, Some(false), "{body}");
    assert!(body.contains("after"), "{body}");
    assert!(!body.contains("refused at run time"), "{body}");
    let lines = setup.exec_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["status"], "approved_at_run_time");
    assert_eq!(lines[0]["approved_by"], "user");
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_declined_fails_and_the_answer_says_so() {
    let setup = Setup::new();
    let person = Person::default();
    let client = setup.serve(&person).await;
    let answer = call(&client, "Bash", json!({ "command": RUN_TIME_MARKER })).await;
    let body = text(&answer);
    assert_eq!(person.asked().len(), 1, "{body}");
    assert!(!setup.ran(), "{body}");
    assert!(
        body.contains(&format!(
            "[refused at run time: {MARKER} (rule ask-marker: declined)]"
        )),
        "{body}"
    );
    // bash reports the failed exec (EPERM) and goes on.
    assert!(body.contains("Operation not permitted"), "{body}");
    assert!(body.contains("after"), "{body}");
    assert_eq!(meta(&answer, "runtime_refusals"), 1, "{body}");
    let lines = setup.exec_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["status"], "refused_at_run_time");
    assert_eq!(lines[0]["decision"], "ask");
    client.cancel().await.expect("closes");
}

/// The question takes 3 s to answer, the command's timeout is 1.5 s: the
/// time asking counts toward no limit, so the command ends by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_a_question_at_an_exec_is_open_counts_toward_no_timeout() {
    let setup = Setup::new();
    let person = Person::answering(&[Some(json!({ "remember": false }))]);
    *person.delay.lock().expect("lock") = Duration::from_secs(3);
    let client = setup.serve(&person).await;
    let answer = call(
        &client,
        "Bash",
        json!({ "command": RUN_TIME_MARKER, "timeout": 1500 }),
    )
    .await;
    let body = text(&answer);
    assert_eq!(person.asked().len(), 1, "{body}");
    assert!(setup.ran(), "{body}");
    assert_eq!(answer.is_error, Some(false), "{body}");
    assert_eq!(meta(&answer, "exit_code"), 0, "{body}");
    // Still a timeout for the command's own time.
    let answer = call(
        &client,
        "Bash",
        json!({ "command": "sleep 30", "timeout": 1500 }),
    )
    .await;
    assert_eq!(answer.is_error, Some(true), "{}", text(&answer));
    client.cancel().await.expect("closes");
}

/// A link or a script the person approved, changed after the approval and
/// before the exec (here by something else running meanwhile): the exec
/// is held to what was approved, asked about again (declined here), and
/// the changed program does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_holds_at_the_exec_only_for_the_effect_approved() {
    type Tamper = fn(&Path);
    let cases: [(&str, Tamper); 2] = [
        ("link re-pointed", |root| {
            std::fs::remove_file(root.join("tool")).expect("unlink");
            std::os::unix::fs::symlink("evil", root.join("tool")).expect("link");
        }),
        ("script edited", |root| {
            write_script(
                &root.join("good"),
                &format!("touch '{}/tampered'", root.display()),
            );
        }),
    ];
    for (label, tamper) in cases {
        let setup = Setup::new();
        let root = setup.root();
        std::fs::write(
            root.join("policy.toml"),
            "[[rule]]\nid = \"ask-tool\"\ndecision = \"ask\"\nprogram = \"tool\"\nreason = \"the tool\"\n",
        )
        .expect("policy");
        write_script(&root.join("good"), "echo good");
        write_script(
            &root.join("evil"),
            &format!("touch '{}/tampered'", root.display()),
        );
        std::os::unix::fs::symlink("good", root.join("tool")).expect("link");
        let person = Person::answering(&[Some(json!({ "remember": false })), None]);
        let tampered = root.clone();
        *person.meanwhile.lock().expect("lock") = Some(Box::new(move || {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(1500));
                tamper(&tampered);
            });
        }));
        let client = setup.serve(&person).await;
        let answer = call(
            &client,
            "Bash",
            json!({ "command": "sleep 4; ./tool; echo after" }),
        )
        .await;
        let body = text(&answer);
        assert!(
            !root.join("tampered").exists(),
            "{label}: the changed program ran: {body}"
        );
        assert_eq!(
            person.asked().len(),
            2,
            "{label}: asked again at the exec: {body}"
        );
        assert!(
            body.contains("(rule ask-tool: declined)]"),
            "{label}: {body}"
        );
        client.cancel().await.expect("closes");
    }
}

/// The link is re-pointed while the question at the exec is open: the
/// approval was for what the person was shown, so the exec is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_re_pointed_while_the_exec_question_is_open_runs_nothing() {
    let setup = Setup::new();
    let root = setup.root();
    std::fs::write(
        root.join("policy.toml"),
        "[[rule]]\nid = \"ask-tool\"\ndecision = \"ask\"\nprogram = \"tool\"\nreason = \"the tool\"\n",
    )
    .expect("policy");
    write_script(&root.join("good"), "echo good");
    write_script(
        &root.join("evil"),
        &format!("touch '{}/tampered'", root.display()),
    );
    std::os::unix::fs::symlink("good", root.join("tool")).expect("link");
    std::fs::write(root.join("tool.txt"), "tool").expect("name");
    let person = Person::answering(&[Some(json!({ "remember": true }))]);
    let tampered = root.clone();
    *person.meanwhile.lock().expect("lock") = Some(Box::new(move || {
        std::fs::remove_file(tampered.join("tool")).expect("unlink");
        std::os::unix::fs::symlink("evil", tampered.join("tool")).expect("link");
    }));
    let client = setup.serve(&person).await;
    let answer = call(
        &client,
        "Bash",
        json!({ "command": "t=$(cat tool.txt); ./$t; echo after" }),
    )
    .await;
    let body = text(&answer);
    assert_eq!(person.asked().len(), 1, "{body}");
    assert!(
        !root.join("tampered").exists(),
        "the changed program ran: {body}"
    );
    assert!(
        body.contains("changed while the question was open"),
        "{body}"
    );
    client.cancel().await.expect("closes");
}

/// A line typed to a tty shell and approved there: the exec it leads to
/// is held to that approval, and runs without a second question (the call
/// that started the shell has answered, so nobody could be asked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_approved_in_a_terminal_runs_its_exec() {
    let setup = Setup::new();
    let person = Person::answering(&[Some(json!({ "remember": false }))]);
    let client = setup.serve(&person).await;
    let started = call(
        &client,
        "Bash",
        json!({ "command": "bash --norc -i", "tty": true }),
    )
    .await;
    let id = meta(&started, "bash_id")
        .as_str()
        .map(str::to_owned)
        .expect("a shell");
    let typed = call(
        &client,
        "WriteStdin",
        json!({ "bash_id": id, "input": format!("{MARKER}; echo typed-done\n"), "wait_ms": 5000 }),
    )
    .await;
    let body = text(&typed);
    assert_eq!(person.asked().len(), 1, "{body}");
    assert!(setup.ran(), "{body}");
    assert!(!body.contains("refused at run time"), "{body}");
    let _ = call(&client, "KillShell", json!({ "shell_id": id })).await;
    client.cancel().await.expect("closes");
}
