//! Queued approvals under load, through `agent-exec mcp` in raw JSON lines
//! on protocol 2025-06-18 with a client that declared elicitation: one
//! question open at a time, asked in the order the calls came, each asked
//! once, `--ask-timeout` counted from when each question is sent, and a
//! call cancelled while it waits its turn never asked.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::mcp::{Launch, RawClient};

/// A server and the lines it writes, each stamped when it was read.
struct Asker(RawClient);

impl Asker {
    /// Starts the server in `dir` with the asking policy and `extra`
    /// flags, and initializes it as a client that can be asked.
    fn start(dir: &std::path::Path, extra: &[&str]) -> Self {
        let policy = dir.join("policy.toml");
        std::fs::write(&policy, crate::approvals::TOUCH_ASKS).expect("write policy");
        Self(
            Launch::new(test_support::agent_exec_binary!())
                .args([std::ffi::OsStr::new("--cwd"), dir.as_os_str()])
                .args([std::ffi::OsStr::new("--policy"), policy.as_os_str()])
                .args(extra)
                .client("ask-queue", json!({ "elicitation": {} }))
                .start(),
        )
    }

    fn send(&mut self, message: &Value) {
        self.0.send(message);
    }

    fn request(&mut self, method: &str, params: &Value) -> u64 {
        self.0.send_request(method, params)
    }

    /// Sends `Bash` with `command`; its request id.
    fn bash(&mut self, command: &str, progress_token: Option<&str>) -> u64 {
        let mut params = json!({ "name": "Bash", "arguments": { "command": command } });
        if let Some(token) = progress_token {
            params["_meta"] = json!({ "progressToken": token });
        }
        self.request("tools/call", &params)
    }

    /// Answers the question `id` with accept.
    fn accept(&mut self, id: &Value) {
        self.send(&json!({
            "jsonrpc": "2.0",
            "id": id,
            "result": { "action": "accept", "content": { "remember": false } }
        }));
    }

    /// The next line the server writes and when it was read.
    fn next(&mut self) -> (Instant, Value) {
        let line = self.0.next_line();
        (line.at, line.value)
    }

    /// The next line if one comes within `wait`, and when it was read.
    fn next_within(&mut self, wait: Duration) -> Option<(Instant, Value)> {
        self.0.try_next_line(wait).map(|line| (line.at, line.value))
    }
}

/// The command a question asks about (`touch fN`).
fn asked_command(question: &Value) -> String {
    let message = question["params"]["message"].as_str().expect("a message");
    message
        .lines()
        .find_map(|line| line.strip_prefix("Command: "))
        .expect("the command line")
        .to_owned()
}

fn result_text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// 20 calls sent at once, each asked; the questions in the order they
/// were put and the time it all took.
#[expect(
    clippy::print_stderr,
    reason = "the measured figures for docs/testing.md"
)]
fn twenty_slow_asks() -> (Vec<String>, Duration) {
    const CALLS: usize = 20;
    const ANSWER_AFTER: Duration = Duration::from_millis(300);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Asker::start(dir.path(), &["--ask-timeout", "2000"]);
    let started = Instant::now();
    let mut calls = HashMap::new();
    for n in 0..CALLS {
        let command = format!("touch f{n}");
        calls.insert(server.bash(&command, None), command);
    }
    let sent: Vec<String> = (0..CALLS).map(|n| format!("touch f{n}")).collect();
    let mut asked = Vec::new();
    let mut withdrawn = Vec::new();
    let mut answers = HashMap::new();
    // When the last question was answered: a question read before it was
    // put while another was open.
    let mut answered_at: Option<Instant> = None;
    let mut overlaps = 0;
    while answers.len() < CALLS {
        let (at, line) = server.next();
        if line["method"] == "elicitation/create" {
            if answered_at.is_some_and(|answered| at < answered) {
                overlaps += 1;
            }
            asked.push(asked_command(&line));
            std::thread::sleep(ANSWER_AFTER.saturating_sub(at.elapsed()));
            // Stamped before the answer is written: a question read later
            // may have been put the moment the answer arrived.
            answered_at = Some(Instant::now());
            server.accept(&line["id"]);
        } else if line["method"] == "notifications/cancelled" {
            withdrawn.push(line);
        } else if let Some(id) = line["id"].as_u64()
            && calls.contains_key(&id)
        {
            answers.insert(id, line);
        }
    }
    let total = started.elapsed();
    assert_eq!(overlaps, 0, "two questions were open at once");
    let mut once = asked.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), CALLS, "each call asked once: {asked:?}");
    assert_eq!(asked.len(), CALLS, "each call asked once: {asked:?}");
    assert!(withdrawn.is_empty(), "{withdrawn:?}");
    for (id, answer) in &answers {
        let text = result_text(answer);
        assert_eq!(
            answer["result"]["isError"], false,
            "{} -> {text}",
            calls[id]
        );
        assert!(!text.contains("timed out"), "{text}");
    }
    for n in 0..CALLS {
        assert!(dir.path().join(format!("f{n}")).exists(), "f{n}");
    }
    // The whole queue waited about three times the timeout: each question's
    // timeout starts when it is put.
    assert!(total >= Duration::from_millis(5500), "{total:?}");
    eprintln!("{CALLS} asks answered after {ANSWER_AFTER:?} each: {total:?} in all");
    assert!(sent.iter().all(|command| asked.contains(command)));
    (asked, total)
}

#[test]
fn twenty_queued_asks_answered_slowly_are_each_asked_once_and_all_run() {
    twenty_slow_asks();
}

#[test]
fn twenty_queued_asks_are_asked_in_the_order_the_calls_came() {
    let (asked, _) = twenty_slow_asks();
    let sent: Vec<String> = (0..20).map(|n| format!("touch f{n}")).collect();
    assert_eq!(asked, sent, "asked in the order sent");
}

#[test]
fn queued_unanswered_asks_each_time_out_a_full_timeout_after_their_question() {
    const CALLS: usize = 3;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Asker::start(dir.path(), &["--ask-timeout", "1000"]);
    let started = Instant::now();
    let mut calls = HashMap::new();
    for n in 0..CALLS {
        let command = format!("touch late{n}");
        calls.insert(server.bash(&command, None), command);
    }
    // Question id -> when it was read, and when it was withdrawn.
    let mut questions: HashMap<String, (Instant, Option<Instant>)> = HashMap::new();
    let mut answers = HashMap::new();
    while answers.len() < CALLS {
        let (at, line) = server.next();
        if line["method"] == "elicitation/create" {
            questions.insert(line["id"].to_string(), (at, None));
        } else if line["method"] == "notifications/cancelled" {
            let id = line["params"]["requestId"].to_string();
            let question = questions.get_mut(&id).expect("a question withdrawn");
            question.1 = Some(at);
        } else if let Some(id) = line["id"].as_u64()
            && calls.contains_key(&id)
        {
            answers.insert(id, (at, line));
        }
    }
    let total = started.elapsed();
    assert_eq!(
        questions.len(),
        CALLS,
        "each call asked once: {questions:?}"
    );
    for (id, (_, answer)) in &answers {
        let text = result_text(answer);
        assert_eq!(answer["result"]["isError"], true, "{text}");
        assert!(
            text.contains("blocked") && text.contains("timed out") && !text.contains("declined"),
            "{} -> {text}",
            calls[id]
        );
    }
    // The withdrawal may trail the refusal by a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while questions.values().any(|(_, gone)| gone.is_none()) && Instant::now() < deadline {
        if let Some((at, line)) = server.next_within(Duration::from_millis(100))
            && line["method"] == "notifications/cancelled"
            && let Some(question) = questions.get_mut(&line["params"]["requestId"].to_string())
        {
            question.1 = Some(at);
        }
    }
    for (id, (asked, gone)) in &questions {
        let gone = gone.unwrap_or_else(|| panic!("question {id} never withdrawn"));
        let shown = gone.duration_since(*asked);
        assert!(
            shown >= Duration::from_millis(800),
            "question {id} shown for {shown:?} only"
        );
    }
    assert!(
        total >= Duration::from_millis(2700) && total < Duration::from_secs(15),
        "{total:?}"
    );
    for n in 0..CALLS {
        assert!(!dir.path().join(format!("late{n}")).exists());
    }
    let mut shown: Vec<Duration> = questions
        .values()
        .filter_map(|(asked, gone)| Some(gone.as_ref()?.duration_since(*asked)))
        .collect();
    shown.sort();
    eprintln!("{CALLS} unanswered asks under a 1000 ms timeout: {total:?} in all, shown {shown:?}");
}

#[test]
fn a_call_cancelled_while_waiting_its_turn_is_never_asked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Asker::start(dir.path(), &[]);
    let first = server.bash("touch first", None);
    let (_, question) = server.next();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(asked_command(&question), "touch first");
    // The second waits its turn: its progress says so.
    let queued = server.bash("touch queued", Some("q"));
    loop {
        let (_, line) = server.next();
        assert_ne!(line["method"], "elicitation/create", "{line}");
        if line["method"] == "notifications/progress" && line["params"]["progressToken"] == "q" {
            assert_eq!(line["params"]["message"], "waiting for approval");
            break;
        }
    }
    server.send(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": { "requestId": queued, "reason": "test" }
    }));
    // Give the cancellation time to land before the turn passes.
    std::thread::sleep(Duration::from_millis(300));
    server.accept(&question["id"]);
    let last = server.bash("touch last", None);
    let mut asked = vec![asked_command(&question)];
    let mut answered = HashMap::new();
    while !(answered.contains_key(&first) && answered.contains_key(&last)) {
        let (_, line) = server.next();
        if line["method"] == "elicitation/create" {
            asked.push(asked_command(&line));
            server.accept(&line["id"]);
        } else if let Some(id) = line["id"].as_u64()
            && line.get("method").is_none()
        {
            answered.insert(id, line);
        }
    }
    assert_eq!(asked, ["touch first", "touch last"]);
    assert_eq!(
        answered[&first]["result"]["isError"], false,
        "{}",
        answered[&first]
    );
    assert_eq!(
        answered[&last]["result"]["isError"], false,
        "{}",
        answered[&last]
    );
    assert!(dir.path().join("first").exists());
    assert!(dir.path().join("last").exists());
    assert!(!dir.path().join("queued").exists());
}

#[test]
fn a_call_that_asks_nothing_holds_no_later_question_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Asker::start(dir.path(), &[]);
    let sent = Instant::now();
    // Sent first, allowed, and long: it decides at once not to ask, so the
    // question of the call after it goes out while it runs.
    let slow = server.bash("sleep 4", None);
    let asks = server.bash("touch quick", None);
    let mut answered = Vec::new();
    let mut asked_after = None;
    while answered.len() < 2 {
        let (at, line) = server.next();
        if line["method"] == "elicitation/create" {
            assert_eq!(asked_command(&line), "touch quick");
            asked_after = Some(at.duration_since(sent));
            server.accept(&line["id"]);
        } else if line["id"] == slow || line["id"] == asks {
            assert_eq!(line["result"]["isError"], false, "{line}");
            answered.push(line["id"].clone());
        }
    }
    let asked_after = asked_after.expect("asked");
    assert!(
        asked_after < Duration::from_millis(2500),
        "the question waited for the earlier call to end: {asked_after:?}"
    );
    assert_eq!(answered[0], asks, "the asked call ran and answered first");
    assert!(dir.path().join("quick").exists());
}
