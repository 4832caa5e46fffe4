//! The approval question through the MCP front door shows what will run:
//! newlines, `\r`, ANSI sequences, bidi overrides, zero-width characters
//! and padding in a command are escaped visibly, look-alike letters are
//! flagged, and the command, directory and rule come first, for `Bash`
//! and for a line typed with `WriteStdin`. Also the client the approval
//! tests share: it answers every question the same way and keeps them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};

use crate::rmcp_support::{call, mcp_command, serve, text};

/// A client that answers every question with `answer` (an `accept`
/// content, or `None` to decline) and keeps the messages it was asked.
#[derive(Clone)]
pub(crate) struct Asker {
    pub(crate) answer: Arc<Mutex<Option<Value>>>,
    pub(crate) asked: Arc<Mutex<Vec<String>>>,
    /// A file written (path, content) while the person reads the question.
    pub(crate) write_when_asked: Arc<Mutex<Option<(std::path::PathBuf, String)>>>,
}

impl Asker {
    pub(crate) fn new(answer: Option<Value>) -> Self {
        Self {
            answer: Arc::new(Mutex::new(answer)),
            asked: Arc::default(),
            write_when_asked: Arc::default(),
        }
    }

    /// How many questions were asked so far.
    pub(crate) fn count(&self) -> usize {
        self.asked.lock().expect("lock").len()
    }

    /// The last question asked.
    pub(crate) fn last(&self) -> String {
        self.asked
            .lock()
            .expect("lock")
            .last()
            .cloned()
            .expect("a question was asked")
    }
}

impl ClientHandler for Asker {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new());
        ClientConfig::new(capabilities, Implementation::new("question-test", "0"))
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
        if let Some((path, content)) = self.write_when_asked.lock().expect("lock").take() {
            std::fs::write(path, content).expect("write while asked");
        }
        let answer = self.answer.lock().expect("lock").clone();
        Ok(match answer {
            Some(content) => ElicitResult::new(ElicitationAction::Accept).with_content(content),
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }
}

/// Starts `agent-exec mcp --cwd DIR --policy POLICY extra...` for `client`.
pub(crate) async fn connect_with_policy(
    dir: &std::path::Path,
    policy: &std::path::Path,
    client: &Asker,
    extra: &[&str],
) -> RunningService<RoleClient, Asker> {
    let mut command = mcp_command(dir);
    command.arg("--policy").arg(policy).args(extra);
    serve(client.clone(), command).await.0
}

/// Characters that must never reach the person raw.
fn hides(c: char) -> bool {
    let code = u32::from(c);
    (code < 0x20 && c != '\n')
        || (0x7f..=0x9f).contains(&code)
        || (0x202a..=0x202e).contains(&code)
        || (0x2066..=0x2069).contains(&code)
        || (0x200b..=0x200f).contains(&code)
        || code == 0x2060
        || code == 0xfeff
}

/// The question's `Command:` line (the third line).
fn command_line(message: &str) -> &str {
    let line = message.lines().nth(2).expect("a command line");
    assert!(line.starts_with("Command: "), "{message}");
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_questions_show_the_red_teams_seven_tricks_visibly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, crate::approvals::TOUCH_ASKS).expect("policy");
    let client = Asker::new(None);
    let service = connect_with_policy(dir.path(), &policy, &client, &[]).await;
    let padded = format!("echo ok{}; touch pad", " ".repeat(300));
    let cases: [(&str, &[&str]); 7] = [
        ("echo hi\ntouch nl", &["echo hi⏎touch nl", "2 lines"]),
        (
            "touch cr \r echo hi",
            &["touch cr \\r echo hi", "do not show"],
        ),
        (
            "touch ansi\u{1b}[2K\u{1b}[1Gecho hi",
            &["\\x1b[2K", "do not show"],
        ),
        (
            "echo \u{202e}ih\u{202c}; touch bidi",
            &["<U+202E>ih<U+202C>", "do not show"],
        ),
        (&padded, &["echo ok <300 blanks> ; touch pad"]),
        (
            "tou\u{200d}ch zwj; touch z",
            &["tou<U+200D>ch", "do not show"],
        ),
        (
            "touch /tmp/h\u{43e}me-x",
            &["h\u{43e}me", "non-ASCII", "U+043E"],
        ),
    ];
    for (command, shown) in cases {
        let before = client.count();
        let answer = call(&service, "Bash", json!({ "command": command })).await;
        assert_eq!(answer.is_error, Some(true), "{}", text(&answer));
        assert_eq!(client.count(), before + 1, "{command:?}");
        let message = client.last();
        assert!(!message.chars().any(hides), "{message:?}");
        let line = command_line(&message);
        assert!(line.contains(shown[0]), "{command:?}: {message}");
        for needle in shown {
            assert!(message.contains(needle), "{command:?}: {needle}: {message}");
        }
        assert!(
            message
                .lines()
                .nth(3)
                .expect("dir")
                .starts_with("Working directory: ")
        );
        assert!(
            message
                .lines()
                .nth(4)
                .expect("rule")
                .starts_with("Rule: touch-asks")
        );
    }
    // Nothing ran: every question was declined.
    for name in ["nl", "cr", "pad", "bidi", "z"] {
        assert!(!dir.path().join(name).exists(), "{name}");
    }
    // A command longer than the cap is cut, and the cut says so.
    let long = format!("touch {}", "x".repeat(5_000));
    call(&service, "Bash", json!({ "command": long })).await;
    let message = client.last();
    assert!(
        message.contains("… [cut: 3006 more characters]"),
        "{message}"
    );
    assert!(
        message.chars().count() < 3_000,
        "{}",
        message.chars().count()
    );
    service.cancel().await.expect("closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_line_is_shown_as_safely() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, crate::approvals::TOUCH_ASKS).expect("policy");
    let client = Asker::new(None);
    let service = connect_with_policy(dir.path(), &policy, &client, &[]).await;
    let started = call(
        &service,
        "Bash",
        json!({ "command": "exec sh", "tty": true, "timeout": 60_000 }),
    )
    .await;
    let id = started
        .structured_content
        .as_ref()
        .and_then(|meta| meta.get("bash_id"))
        .and_then(Value::as_str)
        .expect("bash_id")
        .to_owned();
    let typed = call(
        &service,
        "WriteStdin",
        json!({ "bash_id": id, "input": "touch typed\u{202e}x\u{200d}y\n", "wait_ms": 2000 }),
    )
    .await;
    assert_eq!(typed.is_error, Some(true), "{}", text(&typed));
    assert_eq!(client.count(), 1, "{}", text(&typed));
    let message = client.last();
    assert!(!message.chars().any(hides), "{message:?}");
    assert!(
        command_line(&message).contains("touch typed<U+202E>x<U+200D>y"),
        "{message}"
    );
    let _ = call(&service, "KillShell", json!({ "shell_id": id })).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    service.cancel().await.expect("closed");
}
