//! exec-tools in a minimal agent loop, no model and no network: tool calls
//! arrive as JSON lines on stdin (OpenAI Chat Completions `tool_calls`
//! entries, or Anthropic `tool_use` blocks), results leave as JSON lines on
//! stdout in the same dialect. The tool definitions are printed first, as a
//! model would receive them.
//!
//! ```sh
//! cargo run -p exec-tools --example agent_loop -- --format openai \
//!     < crates/exec-tools/examples/conversation.jsonl
//! ```
//!
//! `$LAST_BASH_ID` in a call's arguments stands for the id the latest
//! background `Bash` call returned, as a model would copy it.

#![allow(
    clippy::print_stdout,
    clippy::expect_used,
    reason = "an example speaks JSON lines on stdout and stops on a broken setup"
)]

use std::io::BufRead as _;
use std::sync::Arc;

use exec_tools::{ExecConfig, ExecEnvironment, register_execution_tools};
use serde_json::{Value, json};
use tool_core::{DefinitionFormat, ExecutionContext, ToolExecutor, ToolRegistry};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let anthropic = std::env::args().any(|arg| arg == "anthropic");
    let cwd = std::env::current_dir().expect("a working directory");
    let output = tempfile::tempdir().expect("an output dir");
    let env = Arc::new(ExecEnvironment::new(ExecConfig::new(
        vec![cwd.clone()],
        output.path().to_path_buf(),
    )));
    let mut registry = ToolRegistry::new();
    register_execution_tools(&mut registry, &env).expect("registers");
    let format = if anthropic {
        DefinitionFormat::Anthropic
    } else {
        DefinitionFormat::OpenAi
    };
    let tools: Vec<Value> = registry
        .definitions()
        .iter()
        .map(|d| d.render(format))
        .collect();
    println!("{}", json!({ "tools": tools }));

    let executor = ToolExecutor::new(Arc::new(registry));
    let context = ExecutionContext::new(cwd);
    let mut last_bash_id = String::new();
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let Ok(call) = serde_json::from_str::<Value>(&line.replace("$LAST_BASH_ID", &last_bash_id))
        else {
            continue;
        };
        // The two dialects name the same three things differently.
        let (id, name, arguments) = if anthropic {
            (
                call["id"].clone(),
                call["name"].as_str().unwrap_or_default().to_owned(),
                call["input"].clone(),
            )
        } else {
            let arguments = call["function"]["arguments"]
                .as_str()
                .and_then(|text| serde_json::from_str(text).ok())
                .unwrap_or(Value::Null);
            (
                call["id"].clone(),
                call["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                arguments,
            )
        };
        let answer = match executor.execute(&name, &context, arguments).await {
            Ok(executed) => {
                if let Some(bash_id) = executed.result.metadata_value()["bash_id"].as_str() {
                    last_bash_id = bash_id.to_owned();
                }
                (executed.result.text().to_owned(), !executed.result.success)
            }
            Err(error) => (error.to_string(), true),
        };
        let reply = if anthropic {
            json!({ "type": "tool_result", "tool_use_id": id, "content": answer.0, "is_error": answer.1 })
        } else {
            json!({ "role": "tool", "tool_call_id": id, "content": answer.0 })
        };
        println!("{reply}");
    }
    env.shutdown().await;
}
