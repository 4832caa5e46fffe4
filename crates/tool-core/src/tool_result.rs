//! What a tool call answers.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The outcome of one tool call.
///
/// A blocked command, a timeout or a non-zero exit is data here, not a Rust
/// error: the model needs to read it. `success` decides which text a host
/// shows: `output` on success, `error` on failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// Whether the tool did what was asked.
    pub success: bool,
    /// The text answered on success (may also hold partial output on failure).
    pub output: String,
    /// The message answered on failure; `None` on success.
    pub error: Option<String>,
    /// Structured facts about the call (exit code, durations, ids...).
    pub metadata: Map<String, Value>,
}

impl ToolResult {
    /// A successful result with `output` as its text.
    pub fn ok(output: impl Into<String>) -> Self {
        Self {
            success: true,
            output: output.into(),
            error: None,
            metadata: Map::new(),
        }
    }

    /// A failed result with `error` as its text.
    pub fn fail(error: impl Into<String>) -> Self {
        Self {
            success: false,
            output: String::new(),
            error: Some(error.into()),
            metadata: Map::new(),
        }
    }

    /// Adds (or replaces) one metadata entry.
    #[must_use]
    pub fn with_meta(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.to_owned(), value.into());
        self
    }

    /// Adds a metadata entry only when `value` is `Some`; absent facts stay absent.
    #[must_use]
    pub fn with_meta_opt<V: Into<Value>>(self, key: &str, value: Option<V>) -> Self {
        match value {
            Some(value) => self.with_meta(key, value),
            None => self,
        }
    }

    /// The text a host shows: the output on success, the error on failure.
    pub fn text(&self) -> &str {
        if self.success {
            &self.output
        } else {
            self.error.as_deref().unwrap_or(&self.output)
        }
    }

    /// The metadata as a JSON object value.
    pub fn metadata_value(&self) -> Value {
        Value::Object(self.metadata.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ok_shows_output_and_fail_shows_error() {
        let ok = ToolResult::ok("hello");
        assert!(ok.success);
        assert_eq!(ok.text(), "hello");
        let failed = ToolResult::fail("boom");
        assert!(!failed.success);
        assert_eq!(failed.text(), "boom");
    }

    #[test]
    fn absent_optional_metadata_stays_absent() {
        let result = ToolResult::ok("")
            .with_meta("exit_code", 0)
            .with_meta_opt::<i64>("signal", None)
            .with_meta_opt("duration_ms", Some(12));
        assert_eq!(
            result.metadata_value(),
            json!({"exit_code": 0, "duration_ms": 12})
        );
    }

    #[test]
    fn failure_without_error_falls_back_to_output() {
        let mut result = ToolResult::ok("partial");
        result.success = false;
        assert_eq!(result.text(), "partial");
    }
}
