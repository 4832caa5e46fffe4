//! Behaviour across modules: typed tools behind the registry and executor.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use test_support::Echo;
use tool_core::*;

#[derive(Debug, Deserialize, JsonSchema)]
struct NoParams {}

/// A tool whose name, description or behaviour can be chosen per test.
struct Custom {
    name: &'static str,
    description: &'static str,
    category: ToolCategory,
}

#[async_trait]
impl Tool for Custom {
    type Params = NoParams;
    type Metadata = tool_core::Metadata;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> String {
        self.description.into()
    }

    fn category(&self) -> ToolCategory {
        self.category
    }

    async fn execute(&self, _context: &ExecutionContext, _params: NoParams) -> ToolResult {
        if self.name == "Panics" {
            panic!("deliberate failure");
        }
        ToolResult::ok(self.name)
    }
}

fn custom(name: &'static str, category: ToolCategory) -> Custom {
    Custom {
        name,
        description: "A test tool.",
        category,
    }
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(Echo).unwrap();
    registry
        .register(custom("Panics", ToolCategory::Execution))
        .unwrap();
    registry
}

fn context() -> ExecutionContext {
    ExecutionContext::new(std::env::temp_dir())
}

#[tokio::test]
async fn typed_tool_runs_with_valid_arguments() {
    let registry = registry();
    let result = registry
        .get("Echo")
        .unwrap()
        .call(&context(), json!({"text": "hi"}))
        .await;
    assert_eq!(result, ToolResult::ok("hi"));
}

#[tokio::test]
async fn invalid_arguments_fail_naming_fields_and_nothing_runs() {
    let registry = registry();
    let result = registry
        .get("Echo")
        .unwrap()
        .call(&context(), json!({"text": "", "delay_ms": 5000}))
        .await;
    assert!(!result.success);
    assert_eq!(
        result.text(),
        "Invalid arguments for Echo: delay_ms: must be between 0 and 1000, got 5000; text: must not be empty"
    );
    assert_eq!(
        result.metadata["invalid_fields"],
        json!(["delay_ms", "text"])
    );
}

#[tokio::test]
async fn null_arguments_count_as_an_empty_object() {
    let registry = registry();
    let result = registry
        .get("Echo")
        .unwrap()
        .call(&context(), Value::Null)
        .await;
    assert_eq!(
        result.text(),
        "Invalid arguments for Echo: text: is required"
    );
    let result = registry.get("Panics").unwrap().definition();
    assert_eq!(result.input_schema, json!({"type": "object"}));
}

#[tokio::test]
async fn context_reaches_the_tool() {
    let registry = registry();
    let result = registry
        .get("Echo")
        .unwrap()
        .call(&context().with_dry_run(true), json!({"text": "hi"}))
        .await;
    assert_eq!(result.text(), "would say hi");
    assert_eq!(result.metadata["dry_run"], json!(true));
}

#[test]
fn registry_lists_in_name_order_and_by_category() {
    let mut registry = registry();
    registry
        .register(custom("Alpha", ToolCategory::Execution))
        .unwrap();
    let names: Vec<&str> = registry.list().map(|tool| tool.name()).collect();
    assert_eq!(names, ["Alpha", "Echo", "Panics"]);
    let execution: Vec<&str> = registry
        .by_category(ToolCategory::Execution)
        .map(|tool| tool.name())
        .collect();
    assert_eq!(execution, ["Alpha", "Panics"]);
    assert_eq!(registry.len(), 3);
    assert!(!registry.is_empty());
    assert!(ToolRegistry::new().is_empty());
    assert!(format!("{registry:?}").contains("Alpha"));
}

#[test]
fn registry_refuses_duplicates_and_bad_names() {
    let mut registry = registry();
    assert_eq!(
        registry.register(Echo),
        Err(RegistryError::DuplicateName("Echo".into()))
    );
    for bad in ["", "has space", "dot.name", "ünicode"] {
        assert_eq!(
            registry.register(custom(bad, ToolCategory::Other)),
            Err(RegistryError::InvalidName(bad.into())),
            "{bad:?}"
        );
    }
    let long: &'static str = Box::leak("x".repeat(65).into_boxed_str());
    assert!(
        registry
            .register(custom(long, ToolCategory::Other))
            .is_err()
    );
    let blank = Custom {
        name: "Blank",
        description: "  ",
        category: ToolCategory::Other,
    };
    assert_eq!(
        registry.register(blank),
        Err(RegistryError::EmptyDescription("Blank".into()))
    );
}

#[test]
fn registry_refuses_a_schema_the_validator_cannot_check() {
    #[derive(Deserialize, JsonSchema)]
    struct Patterned {
        #[schemars(regex(pattern = "^a"))]
        #[allow(dead_code, reason = "only the schema is used")]
        field: String,
    }
    struct BadTool;
    #[async_trait]
    impl Tool for BadTool {
        type Params = Patterned;
        type Metadata = tool_core::Metadata;
        fn name(&self) -> &str {
            "Bad"
        }
        fn description(&self) -> String {
            "Has a pattern.".into()
        }
        fn category(&self) -> ToolCategory {
            ToolCategory::Other
        }
        async fn execute(&self, _: &ExecutionContext, _: Patterned) -> ToolResult {
            ToolResult::ok("")
        }
    }
    let error = ToolRegistry::new().register(BadTool).unwrap_err();
    assert_eq!(error.to_string(), "tool `Bad` has an unusable input schema");
    let source = std::error::Error::source(&error).unwrap().to_string();
    assert_eq!(
        source,
        "unsupported schema keyword `pattern` at `/properties/field`"
    );
}

#[test]
fn definitions_render_for_every_format() {
    let definitions = registry().definitions();
    assert_eq!(definitions.len(), 2);
    let echo = &definitions[0];
    assert_eq!(echo.name, "Echo");
    let openai = echo.render(DefinitionFormat::OpenAi);
    assert_eq!(
        openai["function"]["parameters"]["required"],
        json!(["text"])
    );
}

#[tokio::test]
async fn executor_runs_by_name_and_times_the_call() {
    let executor = ToolExecutor::new(Arc::new(registry()));
    let call = executor
        .execute("Echo", &context(), json!({"text": "x", "delay_ms": 20}))
        .await
        .unwrap();
    assert_eq!(call.result.text(), "x");
    assert!(
        call.elapsed >= Duration::from_millis(20),
        "{:?}",
        call.elapsed
    );
    assert_eq!(executor.registry().len(), 2);
}

#[tokio::test]
async fn executor_reports_unknown_tools_with_the_known_ones() {
    let executor = ToolExecutor::new(Arc::new(registry()));
    let error = executor
        .execute("Nope", &context(), json!({}))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown tool `Nope`, available: Echo, Panics"
    );
}

#[tokio::test]
async fn executor_turns_a_panicking_tool_into_a_failure() {
    let executor = ToolExecutor::new(Arc::new(registry()));
    let call = executor
        .execute("Panics", &context(), json!({}))
        .await
        .unwrap();
    assert!(!call.result.success);
    assert_eq!(
        call.result.text(),
        "internal error: tool `Panics` panicked: deliberate failure"
    );
    // The executor stays usable after a panic.
    let call = executor
        .execute("Echo", &context(), json!({"text": "ok"}))
        .await
        .unwrap();
    assert_eq!(call.result.text(), "ok");
}

#[tokio::test]
async fn executor_refuses_an_argument_over_1_mib_and_nothing_runs() {
    let executor = ToolExecutor::new(Arc::new(registry()));
    let long = "x".repeat(MAX_ARGUMENT_BYTES + 1);
    for (arguments, path) in [
        (json!({"text": long}), "text"),
        (json!({"text": "", "env": {"A": [1, long]}}), "env.A[1]"),
    ] {
        // Panics would panic if it ran; the refusal comes first.
        let call = executor
            .execute("Panics", &context(), arguments)
            .await
            .unwrap();
        assert!(!call.result.success);
        assert_eq!(
            call.result.text(),
            format!(
                "argument `{path}` is {} bytes, over the limit of {MAX_ARGUMENT_BYTES} bytes (1 MiB) for one argument: nothing was run; write long text to a file and pass its name",
                MAX_ARGUMENT_BYTES + 1
            )
        );
    }
    // At the limit, it runs.
    let call = executor
        .execute(
            "Echo",
            &context(),
            json!({"text": "y".repeat(MAX_ARGUMENT_BYTES)}),
        )
        .await
        .unwrap();
    assert!(call.result.success);
    assert_eq!(call.result.text().len(), MAX_ARGUMENT_BYTES);
}

#[test]
fn categories_display_in_snake_case() {
    assert_eq!(ToolCategory::Execution.to_string(), "execution");
    assert_eq!(
        serde_json::to_value(ToolCategory::File).unwrap(),
        json!("file")
    );
    for category in [
        ToolCategory::Search,
        ToolCategory::Network,
        ToolCategory::Other,
    ] {
        assert_eq!(
            serde_json::to_value(category).unwrap(),
            json!(category.to_string())
        );
    }
}
