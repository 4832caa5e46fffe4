//! The shape of a `tools/call` answer as the JSON line the server writes:
//! `structuredContent` carries the same text as the content item (clients
//! such as Claude Code and Codex forward only `structuredContent` to the
//! model), after every metadata key.

#![allow(
    clippy::needless_pass_by_value,
    reason = "helpers take JSON by value so calls read like the messages they send"
)]

use serde_json::{Value, json};
use test_support::mcp::{Launch, RawClient};
use tool_core::InputSchema;

/// A running `agent-exec mcp` and the raw lines it writes.
struct Server(RawClient);

impl Server {
    fn start(args: &[&str]) -> Self {
        Self(
            Launch::new(test_support::agent_exec_binary!())
                .args(args)
                .start(),
        )
    }

    /// Sends a request; answers the response (parsed, keys in the order
    /// they were written) and its raw line. Notifications are dropped.
    fn request(&mut self, method: &str, params: Value) -> (Value, String) {
        let (response, line, _) = self.request_noting(method, params);
        (response, line)
    }

    /// As `request`, also answering the notifications sent before it.
    fn request_noting(&mut self, method: &str, params: Value) -> (Value, String, Vec<Value>) {
        let reply = self.0.request(method, &params);
        let before = reply.before.into_iter().map(|line| line.value).collect();
        (reply.response.value, reply.response.raw, before)
    }

    /// Calls `tool`; answers the result and the raw response line.
    fn call(&mut self, tool: &str, arguments: Value) -> (Value, String) {
        let reply = self.0.call_reply(tool, &arguments);
        (reply.response.value["result"].clone(), reply.response.raw)
    }

    fn close(self) -> std::process::ExitStatus {
        self.0.close()
    }
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().expect("a text item")
}

/// Checks what every answer must hold: `structuredContent.output` is the
/// content item's text, and it is the last key of the object, in the
/// parsed value and in the bytes of the line.
fn assert_output_mirrors_text(result: &Value, line: &str) {
    let structured = result["structuredContent"]
        .as_object()
        .unwrap_or_else(|| panic!("no structuredContent: {result}"));
    assert_eq!(
        structured.get("output").and_then(Value::as_str),
        Some(text(result)),
        "{line}"
    );
    assert_eq!(
        structured.keys().next_back().map(String::as_str),
        Some("output"),
        "{line}"
    );
    // The line itself: `"output":` comes after the object's other keys.
    let object_start = line.find("\"structuredContent\":{").expect("key in line");
    let output_at = line[object_start..]
        .rfind("\"output\":")
        .expect("output in line")
        + object_start;
    for key in structured.keys().filter(|key| *key != "output") {
        let at = line[object_start..]
            .find(&format!("\"{key}\":"))
            .expect("key in line")
            + object_start;
        assert!(at < output_at, "{key} after output in {line}");
    }
}

/// Each tool's `outputSchema` from `tools/list`, compiled.
fn output_schemas(server: &mut Server) -> Vec<(String, InputSchema)> {
    let (listed, _) = server.request("tools/list", json!({}));
    listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|tool| {
            let name = tool["name"].as_str().expect("name").to_owned();
            let schema = InputSchema::from_json(tool["outputSchema"].clone())
                .unwrap_or_else(|error| panic!("{name}'s outputSchema: {error}"));
            (name, schema)
        })
        .collect()
}

/// Checks `result`'s `structuredContent` against `tool`'s `outputSchema`.
fn assert_fits_schema(schemas: &[(String, InputSchema)], tool: &str, result: &Value) {
    let (_, schema) = schemas
        .iter()
        .find(|(name, _)| name == tool)
        .expect("a listed tool");
    if let Err(errors) = schema.validate(&result["structuredContent"]) {
        panic!("{tool}: {errors:?} in {result}");
    }
}

fn keys(result: &Value) -> Vec<&str> {
    result["structuredContent"]
        .as_object()
        .expect("structuredContent")
        .keys()
        .map(String::as_str)
        .collect()
}

fn temp_server(extra: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut args = vec!["--cwd", dir.path().to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    let server = Server::start(&args);
    (dir, server)
}

#[test]
fn structured_content_carries_the_text_for_every_kind_of_answer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[deny]\nregex = [\"forbidden-word\"]\n").expect("write");
    let mut server = Server::start(&[
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--policy",
        policy.to_str().expect("utf-8"),
    ]);
    let schemas = output_schemas(&mut server);
    let mut answers: Vec<(&str, Value)> = Vec::new();

    let (ok, line) = server.call("Bash", json!({ "command": "seq 1 5" }));
    assert_eq!(text(&ok), "1\n2\n3\n4\n5\n");
    assert_output_mirrors_text(&ok, &line);
    assert_eq!(
        keys(&ok),
        [
            "status",
            "exit_code",
            "truncated",
            "command",
            "timeout_ms",
            "duration_ms",
            "output"
        ],
        "{line}"
    );
    answers.push(("Bash", ok));

    let (failed, line) = server.call(
        "Bash",
        json!({ "command": "echo out; echo err >&2; exit 3" }),
    );
    assert_eq!(failed["isError"], true);
    assert!(text(&failed).contains("exit code 3"), "{line}");
    assert!(text(&failed).contains("[stderr]\nerr"), "{line}");
    assert_output_mirrors_text(&failed, &line);
    answers.push(("Bash", failed));

    let (timed_out, line) = server.call(
        "Bash",
        json!({ "command": "echo before; sleep 30", "timeout": 1000 }),
    );
    assert!(text(&timed_out).contains("timed out"), "{line}");
    assert!(text(&timed_out).contains("before"), "{line}");
    assert_output_mirrors_text(&timed_out, &line);
    assert_eq!(
        timed_out["structuredContent"]["status"], "timeout",
        "{line}"
    );
    answers.push(("Bash", timed_out));

    let (long, line) = server.call("Bash", json!({ "command": "seq 1 40000" }));
    assert_eq!(long["structuredContent"]["truncated"], true);
    let output = long["structuredContent"]["output"]
        .as_str()
        .expect("output");
    assert!(output.contains("[Output truncated"), "{output}");
    assert!(output.ends_with("40000\n"), "{output}");
    assert_output_mirrors_text(&long, &line);
    // What a client that keeps only the head needs comes first.
    assert_eq!(
        keys(&long)[..5],
        [
            "status",
            "exit_code",
            "truncated",
            "output_file",
            "omitted_chars"
        ],
        "{line}"
    );
    let omitted = long["structuredContent"]["omitted_chars"]
        .as_u64()
        .expect("omitted_chars");
    assert!(
        output.contains(&format!("[Output truncated: {omitted} characters omitted")),
        "{output}"
    );
    answers.push(("Bash", long));

    let (started, line) = server.call(
        "Bash",
        json!({ "command": "echo bg; sleep 30", "run_in_background": true }),
    );
    assert!(
        text(&started).starts_with("Started background shell: shell_"),
        "{line}"
    );
    assert_output_mirrors_text(&started, &line);
    assert_eq!(keys(&started)[..2], ["status", "bash_id"], "{line}");
    let id = started["structuredContent"]["bash_id"]
        .as_str()
        .expect("bash_id")
        .to_owned();

    answers.push(("Bash", started));
    let (read, line) = server.call("BashOutput", json!({ "bash_id": id, "wait_ms": 300 }));
    assert!(text(&read).starts_with("Status: running"), "{line}");
    assert_output_mirrors_text(&read, &line);
    answers.push(("BashOutput", read));

    let (killed, line) = server.call("KillShell", json!({ "shell_id": id }));
    assert!(text(&killed).contains("terminated"), "{line}");
    assert_output_mirrors_text(&killed, &line);
    assert_eq!(keys(&killed)[0], "status", "{line}");
    answers.push(("KillShell", killed));

    let (unknown, line) = server.call("BashOutput", json!({ "bash_id": "shell_00000000" }));
    assert_eq!(unknown["isError"], true);
    assert_output_mirrors_text(&unknown, &line);
    answers.push(("BashOutput", unknown));

    let (refused, line) = server.call("Bash", json!({ "command": "forbidden-word now" }));
    assert_eq!(refused["isError"], true);
    assert_eq!(refused["structuredContent"]["status"], "blocked");
    assert_output_mirrors_text(&refused, &line);
    assert_eq!(keys(&refused)[0], "status", "{line}");
    answers.push(("Bash", refused));

    let (invalid, line) = server.call("Bash", json!({ "command": "" }));
    assert_eq!(invalid["isError"], true);
    assert_output_mirrors_text(&invalid, &line);
    answers.push(("Bash", invalid));

    let (typed, line) = server.call("WriteStdin", json!({ "bash_id": "shell_00000000" }));
    assert_output_mirrors_text(&typed, &line);
    answers.push(("WriteStdin", typed));

    for (tool, answer) in &answers {
        assert_fits_schema(&schemas, tool, answer);
    }
    assert!(server.close().success());
}

#[test]
fn a_tty_session_answers_fit_their_schemas() {
    let (_dir, mut server) = temp_server(&[]);
    let schemas = output_schemas(&mut server);
    let (waiting, line) = server.call(
        "Bash",
        json!({ "command": "read -p 'name? ' name; echo hello $name", "tty": true }),
    );
    assert_output_mirrors_text(&waiting, &line);
    assert_fits_schema(&schemas, "Bash", &waiting);
    let id = waiting["structuredContent"]["bash_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no bash_id: {line}"))
        .to_owned();
    let (screen, line) = server.call("BashOutput", json!({ "bash_id": id, "screen": true }));
    assert_output_mirrors_text(&screen, &line);
    assert_fits_schema(&schemas, "BashOutput", &screen);
    let (typed, line) = server.call("WriteStdin", json!({ "bash_id": id, "input": "ada\n" }));
    assert!(text(&typed).contains("hello ada"), "{line}");
    assert_output_mirrors_text(&typed, &line);
    assert_fits_schema(&schemas, "WriteStdin", &typed);
    let (killed, line) = server.call("KillShell", json!({ "shell_id": id }));
    assert_output_mirrors_text(&killed, &line);
    assert_fits_schema(&schemas, "KillShell", &killed);
    assert!(server.close().success());
}

#[test]
fn the_metadata_command_is_its_first_1000_characters() {
    let (_dir, mut server) = temp_server(&[]);
    let long = format!("true {}", "é".repeat(3000));
    let (answer, line) = server.call("Bash", json!({ "command": long }));
    let command = answer["structuredContent"]["command"]
        .as_str()
        .expect("command");
    assert_eq!(command.chars().count(), 1000, "{line}");
    assert!(long.starts_with(command));
    assert!(server.close().success());
}

#[test]
fn every_tool_lists_an_output_schema_and_its_hints() {
    let (_dir, mut server) = temp_server(&[]);
    let (listed, _) = server.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().expect("tools");
    let hints = |name: &str| {
        let tool = tools
            .iter()
            .find(|tool| tool["name"] == name)
            .expect("listed");
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
        assert_eq!(
            tool["outputSchema"]["properties"]["output"]["type"], "string",
            "{tool}"
        );
        assert_eq!(
            tool["outputSchema"]["required"],
            json!(["output"]),
            "{tool}"
        );
        assert!(tool["annotations"]["title"].is_string(), "{tool}");
        assert_eq!(tool["title"], tool["annotations"]["title"], "{tool}");
        let hint = |key: &str| tool["annotations"][key].as_bool();
        (
            hint("readOnlyHint"),
            hint("destructiveHint"),
            hint("openWorldHint"),
        )
    };
    assert_eq!(hints("Bash"), (Some(false), Some(true), Some(true)));
    assert_eq!(hints("BashOutput"), (Some(true), Some(false), Some(false)));
    assert_eq!(hints("KillShell"), (Some(false), Some(true), Some(false)));
    assert_eq!(hints("WriteStdin"), (Some(false), Some(true), Some(true)));
    assert!(server.close().success());
}

#[test]
fn max_output_chars_bounds_the_answer() {
    let (_dir, mut server) = temp_server(&["--max-output-chars", "5000"]);
    let (long, line) = server.call("Bash", json!({ "command": "seq 1 40000" }));
    let output = text(&long);
    let marker = output
        .lines()
        .find(|l| l.starts_with("[Output truncated"))
        .unwrap_or_else(|| panic!("no truncation line: {line}"));
    let shown = output.chars().count() - marker.chars().count();
    assert!(shown <= 5000, "{shown} characters besides the marker");
    assert!(shown > 4000, "{shown} characters besides the marker");
    assert!(output.ends_with("40000\n"), "{output}");
    let (listed, _) = server.request("tools/list", json!({}));
    assert!(
        listed["result"]["tools"][0]["description"]
            .as_str()
            .expect("description")
            .contains("Output over 5000 characters"),
        "{listed}"
    );
    let (started, _) = server.call(
        "Bash",
        json!({ "command": "seq 1 40000", "run_in_background": true }),
    );
    let id = started["structuredContent"]["bash_id"].clone();
    let (read, line) = server.call("BashOutput", json!({ "bash_id": id, "wait_ms": 10000 }));
    assert_eq!(read["structuredContent"]["truncated"], true, "{line}");
    assert!(text(&read).chars().count() < 5300, "{line}");
    assert!(server.close().success());
}

#[test]
fn max_output_chars_below_1000_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = crate::agent_exec(&[
        "mcp",
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--max-output-chars",
        "999",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = crate::stderr(&output);
    assert!(
        stderr.starts_with("agent-exec: error: --max-output-chars 999"),
        "{stderr}"
    );
}

#[test]
fn progress_carries_no_total() {
    let (_dir, mut server) = temp_server(&[]);
    let (response, _, notifications) = server.request_noting(
        "tools/call",
        json!({
            "name": "Bash",
            "arguments": { "command": "echo first; sleep 2.5" },
            "_meta": { "progressToken": "p-1" }
        }),
    );
    assert_eq!(response["result"]["isError"], false);
    let progress: Vec<&Value> = notifications
        .iter()
        .filter(|message| message["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "{notifications:?}");
    for message in progress {
        assert!(message["params"].get("total").is_none(), "{message}");
        assert!(message["params"]["message"].is_string(), "{message}");
    }
    assert!(server.close().success());
}

#[test]
fn dry_run_answers_carry_the_text_too() {
    let (_dir, mut server) = temp_server(&["--dry-run"]);
    let (listed, _) = server.request("tools/list", json!({}));
    let bash = listed["result"]["tools"][0]["description"]
        .as_str()
        .expect("description");
    assert!(bash.contains("This server is a dry run"), "{bash}");
    let (answer, line) = server.call("Bash", json!({ "command": "echo hi" }));
    assert!(text(&answer).starts_with("[Dry Run]"), "{line}");
    assert_output_mirrors_text(&answer, &line);
    assert!(server.close().success());
}

#[test]
fn run_takes_max_output_chars_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = crate::agent_exec(&[
        "run",
        "--cwd",
        dir.path().to_str().expect("utf-8"),
        "--max-output-chars",
        "2000",
        "--",
        "seq 1 10000",
    ]);
    assert!(output.status.success(), "{}", crate::stderr(&output));
    let text = crate::stdout(&output);
    let marker = text
        .lines()
        .find(|l| l.starts_with("[Output truncated"))
        .unwrap_or_else(|| panic!("no truncation line: {text}"));
    let shown = text.chars().count() - marker.chars().count();
    assert!(shown <= 2000, "{shown} characters besides the marker");
    assert!(text.ends_with("10000\n"), "{text}");
}
