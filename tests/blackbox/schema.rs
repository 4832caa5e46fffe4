//! `agent-exec schema` and the command line's refusals.

use serde_json::Value;

use crate::{agent_exec, stderr, stdout};

fn schema(format: &str) -> Vec<Value> {
    let output = agent_exec(&["schema", "--format", format]);
    assert!(output.status.success(), "{}", stderr(&output));
    let parsed: Value = serde_json::from_str(&stdout(&output)).expect("valid JSON");
    parsed.as_array().expect("a JSON array").clone()
}

#[test]
fn schema_prints_a_json_array_in_every_format() {
    for format in ["mcp", "openai", "anthropic"] {
        let definitions = schema(format);
        for definition in &definitions {
            let keys = |value: &Value| -> Vec<String> {
                value
                    .as_object()
                    .expect("an object")
                    .keys()
                    .cloned()
                    .collect()
            };
            match format {
                "mcp" => {
                    assert!(definition["inputSchema"].is_object());
                    assert_eq!(definition["outputSchema"]["type"], "object");
                    assert!(definition["annotations"]["title"].is_string());
                }
                // Exactly the keys the APIs accept: they refuse unknown ones.
                "openai" => {
                    assert_eq!(keys(definition), ["type", "function"]);
                    assert_eq!(
                        keys(&definition["function"]),
                        ["name", "description", "parameters"]
                    );
                    assert!(definition["function"]["parameters"].is_object());
                }
                _ => {
                    assert_eq!(keys(definition), ["name", "description", "input_schema"]);
                    assert!(definition["input_schema"].is_object());
                }
            }
        }
    }
}

#[test]
fn schema_defaults_to_mcp_and_ends_with_a_newline() {
    let output = agent_exec(&["schema"]);
    assert!(output.status.success());
    let text = stdout(&output);
    assert!(text.ends_with('\n'));
    assert_eq!(text, stdout(&agent_exec(&["schema", "--format", "mcp"])));
}

#[test]
fn unknown_format_is_refused_with_exit_2() {
    let output = agent_exec(&["schema", "--format", "xml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("invalid value 'xml'"),
        "{}",
        stderr(&output)
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn subcommand_is_required() {
    let output = agent_exec(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("Usage"), "{}", stderr(&output));
}

#[test]
fn run_needs_a_command_after_double_dash() {
    let output = agent_exec(&["run"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
}

#[test]
fn version_is_printed() {
    let output = agent_exec(&["--version"]);
    assert!(output.status.success());
    assert!(stdout(&output).starts_with("agent-exec "));
}
