//! A stub tool for registry, schema and executor tests.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use tool_core::{ExecutionContext, Tool, ToolCategory, ToolResult};

/// Arguments of [`Echo`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EchoParams {
    /// Text to say back.
    #[schemars(length(min = 1))]
    pub text: String,
    /// Milliseconds to wait first.
    #[schemars(range(min = 0, max = 1000))]
    pub delay_ms: Option<u64>,
}

/// Says its text back (`would say TEXT` in a dry run), after an optional
/// delay.
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

#[async_trait]
impl Tool for Echo {
    type Params = EchoParams;
    type Metadata = tool_core::Metadata;

    fn name(&self) -> &str {
        "Echo"
    }

    fn description(&self) -> String {
        "Says the text back.".into()
    }

    fn category(&self) -> ToolCategory {
        ToolCategory::Other
    }

    async fn execute(&self, context: &ExecutionContext, params: EchoParams) -> ToolResult {
        if let Some(delay) = params.delay_ms {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if context.dry_run() {
            return ToolResult::ok(format!("would say {}", params.text)).with_meta("dry_run", true);
        }
        ToolResult::ok(params.text)
    }
}
