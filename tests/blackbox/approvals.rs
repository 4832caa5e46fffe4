//! The ask tier through the MCP front door with rmcp's client: questions
//! by `elicitation/create` (form mode, one optional boolean `remember`),
//! accept / remember / decline, a cancelled call withdraws its question,
//! progress while waiting, clients that cannot be asked, and clients on
//! protocol 2026-07-28 asked through input-required results (raw JSON lines).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, Implementation, ProgressNotificationParam, ProtocolVersion, Request,
    ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};

use crate::rmcp_support::{call, mcp_command, serve, text};

/// What the person does when asked.
#[derive(Clone, Copy)]
enum Person {
    Accept {
        remember: bool,
    },
    Decline,
    Cancel,
    /// Answers accept after this long.
    Slow(Duration),
    /// Never answers.
    Away,
}

#[derive(Clone)]
struct Client {
    person: Arc<Mutex<Person>>,
    /// The questions asked: message and requested schema.
    asked: Arc<Mutex<Vec<(String, Value)>>>,
    withdrawn: Arc<Mutex<Vec<CancelledNotificationParam>>>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    version: ProtocolVersion,
    /// Whether it declares the `elicitation` capability.
    can_ask: bool,
}

impl Client {
    fn new(person: Person, version: ProtocolVersion) -> Self {
        Self {
            person: Arc::new(Mutex::new(person)),
            asked: Arc::default(),
            withdrawn: Arc::default(),
            progress: Arc::default(),
            version,
            can_ask: true,
        }
    }

    fn without_elicitation(mut self) -> Self {
        self.can_ask = false;
        self
    }

    fn asked(&self) -> Vec<(String, Value)> {
        self.asked.lock().expect("lock").clone()
    }
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.can_ask {
            capabilities.elicitation = Some(ElicitationCapability::new());
        }
        ClientConfig::new(capabilities, Implementation::new("approvals-test", "0"))
            .with_protocol_version(self.version.clone())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).expect("schema");
        self.asked.lock().expect("lock").push((message, schema));
        let person = *self.person.lock().expect("lock");
        Ok(match person {
            Person::Accept { remember } => ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({ "remember": remember })),
            Person::Decline => ElicitResult::new(ElicitationAction::Decline),
            Person::Cancel => ElicitResult::new(ElicitationAction::Cancel),
            Person::Slow(delay) => {
                tokio::time::sleep(delay).await;
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({}))
            }
            Person::Away => {
                tokio::time::sleep(Duration::from_secs(600)).await;
                ElicitResult::new(ElicitationAction::Cancel)
            }
        })
    }

    async fn on_cancelled(
        &self,
        params: CancelledNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.withdrawn.lock().expect("lock").push(params);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().expect("lock").push(params);
    }
}

/// A policy whose one rule asks before `touch` (the ask tests share it).
pub(crate) const TOUCH_ASKS: &str = r#"
[[rule]]
id = "touch-asks"
decision = "ask"
program = "touch"
reason = "touching files needs a nod"
"#;

async fn connect(
    dir: &std::path::Path,
    client: &Client,
    extra: &[&str],
) -> RunningService<RoleClient, Client> {
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, TOUCH_ASKS).expect("write policy");
    let mut command = mcp_command(dir);
    command.arg("--policy").arg(&policy).args(extra);
    serve(client.clone(), command).await.0
}

async fn bash(client: &RunningService<RoleClient, Client>, command: &str) -> CallToolResult {
    call(client, "Bash", json!({ "command": command })).await
}

fn meta(result: &CallToolResult, key: &str) -> Value {
    result
        .structured_content
        .as_ref()
        .and_then(|meta| meta.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_runs_remember_skips_the_next_question_decline_refuses() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = Client::new(
        Person::Accept { remember: false },
        ProtocolVersion::V_2025_06_18,
    );
    let service = connect(dir.path(), &client, &[]).await;

    let ran = bash(&service, "touch one").await;
    assert_eq!(ran.is_error, Some(false), "{}", text(&ran));
    assert!(dir.path().join("one").exists());
    assert_eq!(meta(&ran, "approved_by"), "user");
    let asked = client.asked();
    assert_eq!(asked.len(), 1);
    let (message, schema) = &asked[0];
    let cwd = std::fs::canonicalize(dir.path()).expect("canonical");
    for needle in [
        "touch one",
        cwd.to_str().expect("utf-8"),
        "touch-asks",
        "touching files needs a nod",
    ] {
        assert!(message.contains(needle), "{needle}: {message}");
    }
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["remember"]["type"], "boolean");
    assert_eq!(schema["properties"]["remember"]["default"], false);
    assert_eq!(schema["properties"]["save"]["type"], "boolean");
    assert_eq!(schema["properties"]["save"]["default"], false);
    assert_eq!(
        schema["properties"].as_object().map(serde_json::Map::len),
        Some(2)
    );
    assert!(
        schema
            .get("required")
            .is_none_or(|r| r.as_array().is_none_or(Vec::is_empty))
    );

    // Not remembered: asked again.
    bash(&service, "touch one").await;
    assert_eq!(client.asked().len(), 2);

    // Remembered: the same text in the same place runs unasked.
    *client.person.lock().expect("lock") = Person::Accept { remember: true };
    let first = bash(&service, "touch two").await;
    assert_eq!(meta(&first, "approved_by"), "user");
    *client.person.lock().expect("lock") = Person::Decline;
    let again = bash(&service, "touch two").await;
    assert_eq!(again.is_error, Some(false), "{}", text(&again));
    assert_eq!(meta(&again, "approved_by"), "remembered");
    assert_eq!(client.asked().len(), 3);

    // A remembered approval holds only while the variables it uses keep
    // their values; the question says what is not known.
    *client.person.lock().expect("lock") = Person::Accept { remember: true };
    bash(&service, "export V=a").await;
    let first = bash(&service, "touch \"$V\" \"$NOT_SET_HERE\"").await;
    assert_eq!(meta(&first, "approved_by"), "user", "{}", text(&first));
    let asked = client.asked().len();
    let (message, _) = client.asked().pop().expect("asked");
    assert!(
        message.contains("$NOT_SET_HERE is not known here"),
        "{message}"
    );
    assert!(!message.contains("$V is not known"), "{message}");
    let same = bash(&service, "touch \"$V\" \"$NOT_SET_HERE\"").await;
    assert_eq!(meta(&same, "approved_by"), "remembered");
    bash(&service, "export V=b").await;
    let changed = bash(&service, "touch \"$V\" \"$NOT_SET_HERE\"").await;
    assert_eq!(meta(&changed, "approved_by"), "user");
    assert_eq!(client.asked().len(), asked + 1);

    // Declined and cancelled: nothing runs.
    for person in [Person::Decline, Person::Cancel] {
        *client.person.lock().expect("lock") = person;
        let refused = bash(&service, "touch three").await;
        assert_eq!(refused.is_error, Some(true));
        let message = text(&refused);
        assert!(
            message.contains("blocked") && message.contains("declined"),
            "{message}"
        );
        assert!(!dir.path().join("three").exists());
    }
    service.cancel().await.expect("closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_reports_progress_and_a_cancelled_call_withdraws_its_question() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = Client::new(
        Person::Slow(Duration::from_millis(2500)),
        ProtocolVersion::V_2025_06_18,
    );
    let service = connect(dir.path(), &client, &[]).await;
    let request = |command: &str| {
        let Value::Object(arguments) = json!({ "command": command, "timeout": 1000 }) else {
            unreachable!("an object")
        };
        ClientRequest::CallToolRequest(Request::new(
            CallToolRequestParams::new("Bash").with_arguments(arguments),
        ))
    };
    // Waiting counts toward no limit: the 1000 ms timeout starts with the command.
    let handle = service
        .send_cancellable_request(request("touch slow"), PeerRequestOptions::no_options())
        .await
        .expect("sent");
    let ServerResult::CallToolResult(result) = handle.await_response().await.expect("answered")
    else {
        panic!("not a tool result")
    };
    assert_eq!(result.is_error, Some(false), "{}", text(&result));
    assert!(dir.path().join("slow").exists());
    let progress = client.progress.lock().expect("lock").clone();
    let waiting = progress
        .iter()
        .filter(|p| p.message.as_deref() == Some("waiting for approval"))
        .count();
    assert!(waiting >= 2, "{progress:?}");

    *client.person.lock().expect("lock") = Person::Away;
    let handle = service
        .send_cancellable_request(request("touch never"), PeerRequestOptions::no_options())
        .await
        .expect("sent");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while client.asked().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    handle.cancel(Some("test".into())).await.expect("cancelled");
    while client.withdrawn.lock().expect("lock").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the question was not withdrawn"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // One question at a time, and the next one is asked once the first is gone.
    *client.person.lock().expect("lock") = Person::Accept { remember: false };
    let after = bash(&service, "touch after").await;
    assert_eq!(after.is_error, Some(false), "{}", text(&after));
    assert!(!dir.path().join("never").exists());
    service.cancel().await.expect("closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_cannot_be_asked_get_the_fallback() {
    let dir = tempfile::tempdir().expect("temp dir");
    // No `elicitation` capability: nobody to ask, whatever the handler would say.
    let client = Client::new(
        Person::Accept { remember: false },
        ProtocolVersion::V_2025_06_18,
    )
    .without_elicitation();
    let service = connect(dir.path(), &client, &[]).await;
    let refused = bash(&service, "touch x").await;
    assert_eq!(refused.is_error, Some(true));
    let message = text(&refused);
    assert!(
        message.contains("blocked") && message.contains("approval"),
        "{message}"
    );
    assert!(message.contains("--ask-fallback allow"), "{message}");
    assert!(message.contains("cannot be asked"), "{message}");
    assert!(client.asked().is_empty());
    assert!(!dir.path().join("x").exists());
    service.cancel().await.expect("closed");

    let client = Client::new(Person::Decline, ProtocolVersion::V_2025_06_18).without_elicitation();
    let service = connect(dir.path(), &client, &["--ask-fallback", "allow"]).await;
    let ran = bash(&service, "touch y").await;
    assert_eq!(ran.is_error, Some(false), "{}", text(&ran));
    assert_eq!(meta(&ran, "approved_by"), "fallback");
    assert!(dir.path().join("y").exists());
    service.cancel().await.expect("closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_question_times_out_and_a_dry_run_never_asks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = Client::new(Person::Away, ProtocolVersion::V_2025_06_18);
    let service = connect(dir.path(), &client, &["--ask-timeout", "500"]).await;
    let refused = bash(&service, "touch late").await;
    let message = text(&refused);
    assert!(
        message.contains("blocked")
            && message.contains("timed out")
            && !message.contains("declined"),
        "{message}"
    );
    assert!(!dir.path().join("late").exists());
    service.cancel().await.expect("closed");

    let client = Client::new(
        Person::Accept { remember: false },
        ProtocolVersion::V_2025_06_18,
    );
    let service = connect(
        dir.path(),
        &client,
        &["--dry-run", "--ask-fallback", "allow"],
    )
    .await;
    let dry = bash(&service, "touch dry").await;
    assert_eq!(text(&dry), "[Dry Run] Would execute: touch dry");
    assert!(client.asked().is_empty());
    service.cancel().await.expect("closed");
}

/// A client on protocol 2026-07-28 spoken in raw JSON lines: no
/// `initialize`, every request carries its version and capabilities in
/// `_meta`, and questions come back as input-required results.
struct Stateless {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<Value>,
    next_id: u64,
    /// Whether the requests declare form elicitation.
    can_ask: bool,
}

impl Stateless {
    fn start(dir: &std::path::Path, extra: &[&str], can_ask: bool) -> Self {
        use std::io::BufRead as _;
        let policy = dir.join("policy.toml");
        std::fs::write(&policy, TOUCH_ASKS).expect("write policy");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agent-exec"))
            .arg("mcp")
            .arg("--cwd")
            .arg(dir)
            .arg("--policy")
            .arg(&policy)
            .args(extra)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("the server starts");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line).expect("a JSON line");
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            next_id: 1,
            can_ask,
        }
    }

    /// Sends `tools/call` with `params` (plus `_meta`) and waits for its answer.
    fn call(&mut self, params: Value) -> Value {
        let id = self.send_call(params);
        self.answer(id)
    }

    fn send(&mut self, message: &Value) {
        use std::io::Write as _;
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{message}").expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends `tools/call` with `params` (plus `_meta`); its id.
    fn send_call(&mut self, mut params: Value) -> u64 {
        let capabilities = if self.can_ask {
            json!({ "elicitation": { "form": {} } })
        } else {
            json!({})
        };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "stateless-test", "version": "0" },
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let id = self.next_id;
        self.next_id += 1;
        let message =
            json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params });
        self.send(&message);
        id
    }

    /// Waits for the answer to request `id`.
    fn answer(&mut self, id: u64) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self.lines.recv_timeout(left).expect("an answer in time");
            if line["id"] == id {
                return line;
            }
        }
    }

    /// A `Bash` call; `retry` adds the request state and answer of an earlier question.
    fn bash(&mut self, command: &str, retry: Option<(&str, Value)>) -> Value {
        let mut params = json!({ "name": "Bash", "arguments": { "command": command } });
        if let Some((state, answer)) = retry {
            params["requestState"] = json!(state);
            if !answer.is_null() {
                params["inputResponses"] = json!({ "approval": answer });
            }
        }
        self.call(params)
    }

    /// Asks about `command` and returns the request state of the question.
    fn question(&mut self, command: &str) -> String {
        let asked = self.bash(command, None);
        let result = &asked["result"];
        assert_eq!(result["resultType"], "input_required", "{asked}");
        let state = result["requestState"].as_str().expect("a request state");
        // Unguessable: 128 random bits.
        assert_eq!(state.len(), 32, "{state}");
        assert!(state.bytes().all(|b| b.is_ascii_hexdigit()), "{state}");
        state.to_owned()
    }
}

impl Drop for Stateless {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn accept(remember: bool) -> Value {
    json!({ "action": "accept", "content": { "remember": remember } })
}

fn result_text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn input_required_on_2026_07_28_binds_the_answer_to_its_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Stateless::start(dir.path(), &[], true);
    let cwd = std::fs::canonicalize(dir.path()).expect("canonical");

    // The question: the same message and schema as elicitation/create.
    let asked = server.bash("touch first", None);
    let request = &asked["result"]["inputRequests"]["approval"];
    assert_eq!(request["method"], "elicitation/create", "{asked}");
    assert_eq!(request["params"]["mode"], "form", "{asked}");
    let message = request["params"]["message"].as_str().expect("message");
    for needle in [
        "touch first",
        cwd.to_str().expect("utf-8"),
        "touch-asks",
        "touching files needs a nod",
    ] {
        assert!(message.contains(needle), "{needle}: {message}");
    }
    let schema = &request["params"]["requestedSchema"];
    assert_eq!(schema["properties"]["remember"]["type"], "boolean");
    assert_eq!(schema["properties"]["remember"]["default"], false);
    let state = asked["result"]["requestState"]
        .as_str()
        .expect("state")
        .to_owned();
    assert!(!dir.path().join("first").exists());

    // Other arguments with that state: refused, nothing runs, and the
    // question stays open for its own call.
    let tampered = server.bash("touch evil", Some((&state, accept(false))));
    assert_eq!(tampered["error"]["code"], -32602, "{tampered}");
    let other_tool = server.call(json!({
        "name": "KillShell",
        "arguments": { "shell_id": "shell_00000000" },
        "requestState": state,
        "inputResponses": { "approval": accept(false) },
    }));
    assert_eq!(other_tool["error"]["code"], -32602, "{other_tool}");
    // A state we never issued.
    let unknown = server.bash(
        "touch first",
        Some(("0123456789abcdef0123456789abcdef", accept(false))),
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(!dir.path().join("evil").exists());
    assert!(!dir.path().join("first").exists());

    // The right retry runs it.
    let ran = server.bash("touch first", Some((&state, accept(false))));
    assert_eq!(ran["result"]["isError"], false, "{ran}");
    assert_eq!(ran["result"]["structuredContent"]["approved_by"], "user");
    assert!(dir.path().join("first").exists());

    // Replayed: the state was used once and is gone.
    std::fs::remove_file(dir.path().join("first")).expect("remove");
    let replay = server.bash("touch first", Some((&state, accept(false))));
    assert_eq!(replay["error"]["code"], -32602, "{replay}");
    assert!(!dir.path().join("first").exists());

    // Remember: the same command later runs unasked.
    let state = server.question("touch kept");
    let kept = server.bash("touch kept", Some((&state, accept(true))));
    assert_eq!(kept["result"]["structuredContent"]["approved_by"], "user");
    let again = server.bash("touch kept", None);
    assert_eq!(
        again["result"]["structuredContent"]["approved_by"], "remembered",
        "{again}"
    );

    // Decline, cancel, and a retry without an answer: refused as declined.
    for answer in [
        json!({ "action": "decline" }),
        json!({ "action": "cancel" }),
        Value::Null,
    ] {
        let state = server.question("touch never");
        let refused = server.bash("touch never", Some((&state, answer)));
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        let text = result_text(&refused);
        assert!(
            text.contains("blocked") && text.contains("declined"),
            "{text}"
        );
        assert!(!dir.path().join("never").exists());
    }
}

#[test]
fn on_2026_07_28_a_late_answer_times_out_and_a_client_without_elicitation_gets_the_fallback() {
    let dir = tempfile::tempdir().expect("temp dir");
    // `--ask-timeout` counts from the input-required result: an accept
    // that comes after it runs nothing.
    let mut server = Stateless::start(dir.path(), &["--ask-timeout", "500"], true);
    let state = server.question("touch late");
    std::thread::sleep(Duration::from_millis(1500));
    let late = server.bash("touch late", Some((&state, accept(false))));
    assert_eq!(late["result"]["isError"], true, "{late}");
    let text = result_text(&late);
    assert!(
        text.contains("blocked") && text.contains("timed out") && !text.contains("declined"),
        "{text}"
    );
    assert!(!dir.path().join("late").exists());
    drop(server);

    let mut server = Stateless::start(dir.path(), &[], false);
    let refused = server.bash("touch nobody", None);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = result_text(&refused);
    assert!(
        text.contains("blocked") && text.contains("approval") && text.contains("cannot be asked"),
        "{text}"
    );
    assert!(!dir.path().join("nobody").exists());
}

#[test]
fn on_2026_07_28_a_cancelled_call_ends_its_command() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Stateless::start(dir.path(), &[], true);
    let id = server.send_call(json!({
        "name": "Bash",
        "arguments": { "command": "echo > started; sleep 3; echo > finished" },
    }));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !dir.path().join("started").exists() {
        assert!(std::time::Instant::now() < deadline, "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.send(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": "test" },
    }));
    std::thread::sleep(Duration::from_secs(5));
    assert!(!dir.path().join("finished").exists());
    // The server goes on.
    let after = server.bash("echo after", None);
    assert_eq!(result_text(&after), "after\n", "{after}");
}

#[test]
fn on_2026_07_28_a_call_that_asks_nothing_holds_no_later_question_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Stateless::start(dir.path(), &[], true);
    let sent = std::time::Instant::now();
    // Sent first, allowed and long: the question of the call after it is
    // put while it runs.
    let slow = server.send_call(json!({ "name": "Bash", "arguments": { "command": "sleep 4" } }));
    let asks =
        server.send_call(json!({ "name": "Bash", "arguments": { "command": "touch quick" } }));
    let asked = server.answer(asks);
    let waited = sent.elapsed();
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    assert!(
        waited < Duration::from_millis(2500),
        "the question waited for the earlier call to end: {waited:?}"
    );
    let state = asked["result"]["requestState"]
        .as_str()
        .expect("state")
        .to_owned();
    let ran = server.bash("touch quick", Some((&state, accept(false))));
    assert_eq!(ran["result"]["isError"], false, "{ran}");
    let slept = server.answer(slow);
    assert_eq!(slept["result"]["isError"], false, "{slept}");
}
