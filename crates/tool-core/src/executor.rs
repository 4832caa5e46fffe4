//! Running a tool by name, with panics contained and time recorded.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::context::ExecutionContext;
use crate::registry::ToolRegistry;
use crate::tool_result::ToolResult;

/// The longest text one tool argument may hold: 1 MiB. A longer one (a
/// script or a file pasted whole) is refused before the tool sees it: it
/// belongs in a file, and held in the server it costs memory for nothing.
pub const MAX_ARGUMENT_BYTES: usize = 1 << 20;

/// Why a call could not be made at all (as opposed to a tool failing).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecutorError {
    /// No tool has this name.
    #[error("unknown tool `{name}`, available: {available}")]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The registered names, comma-separated.
        available: String,
    },
}

/// One finished call: what the tool answered and how long it took.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutedCall {
    /// The tool's answer.
    pub result: ToolResult,
    /// Wall time from validation to answer.
    pub elapsed: Duration,
}

/// Runs tools from a registry by name with raw JSON arguments.
#[derive(Debug, Clone)]
pub struct ToolExecutor {
    registry: Arc<ToolRegistry>,
}

impl ToolExecutor {
    /// An executor over `registry`.
    pub fn new(registry: Arc<ToolRegistry>) -> Self {
        Self { registry }
    }

    /// The registry calls are looked up in.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Runs the tool called `name`. A panic inside the tool becomes a failed
    /// result instead of tearing down the host.
    pub async fn execute(
        &self,
        name: &str,
        context: &ExecutionContext,
        arguments: Value,
    ) -> Result<ExecutedCall, ExecutorError> {
        let tool = self
            .registry
            .get(name)
            .ok_or_else(|| ExecutorError::UnknownTool {
                name: name.to_owned(),
                available: self
                    .registry
                    .list()
                    .map(|tool| tool.name().to_owned())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        if let Some((argument, bytes)) = oversized_argument(&arguments) {
            return Ok(ExecutedCall {
                result: ToolResult::fail(format!(
                    "argument `{argument}` is {bytes} bytes, over the limit of {MAX_ARGUMENT_BYTES} bytes (1 MiB) for one argument: nothing was run; write long text to a file and pass its name"
                )),
                elapsed: Duration::ZERO,
            });
        }
        let started = Instant::now();
        let result = match CatchUnwind(tool.call(context, arguments)).await {
            Ok(result) => result,
            Err(panic) => ToolResult::fail(format!(
                "internal error: tool `{name}` panicked: {}",
                panic_message(panic.as_ref())
            )),
        };
        Ok(ExecutedCall {
            result,
            elapsed: started.elapsed(),
        })
    }
}

/// The first string in `value` longer than [`MAX_ARGUMENT_BYTES`]: its
/// path (`command`, `env.PATH`, `args[2]`) and length. The path is built
/// only for the string found: every call goes through here.
fn oversized_argument(value: &Value) -> Option<(String, usize)> {
    match value {
        Value::String(text) if text.len() > MAX_ARGUMENT_BYTES => Some((String::new(), text.len())),
        Value::Object(fields) => fields.iter().find_map(|(key, field)| {
            let (inner, bytes) = oversized_argument(field)?;
            let path = if inner.is_empty() || inner.starts_with('[') {
                format!("{key}{inner}")
            } else {
                format!("{key}.{inner}")
            };
            Some((path, bytes))
        }),
        Value::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
            let (inner, bytes) = oversized_argument(item)?;
            let path = if inner.is_empty() || inner.starts_with('[') {
                format!("[{index}]{inner}")
            } else {
                format!("[{index}].{inner}")
            };
            Some((path, bytes))
        }),
        _ => None,
    }
}

/// Polls a future, turning a panic during a poll into an `Err`.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        // The future is dropped right after a panic and never polled again,
        // so no broken invariant inside it can be observed.
        match catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}
