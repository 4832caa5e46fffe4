//! What a tool call answers.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Untyped metadata: what hosts receive, and what a tool without a
/// metadata type of its own answers.
pub type Metadata = Map<String, Value>;

/// The outcome of one tool call, as hosts receive it: metadata as a JSON
/// object whose keys keep the order the tool's metadata type declares.
pub type ToolResult = Answer<Metadata>;

/// The outcome of one tool call, with metadata of type `M`.
///
/// A blocked command, a timeout or a non-zero exit is data here, not a Rust
/// error: the model needs to read it. `success` decides which text a host
/// shows: `output` on success, `error` on failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer<M> {
    /// Whether the tool did what was asked.
    pub success: bool,
    /// The text answered on success (may also hold partial output on failure).
    pub output: String,
    /// The message answered on failure; `None` on success.
    pub error: Option<String>,
    /// Structured facts about the call (exit code, durations, ids...).
    pub metadata: M,
}

impl<M: Default> Answer<M> {
    /// A successful result with `output` as its text.
    pub fn ok(output: impl Into<String>) -> Self {
        Self {
            success: true,
            output: output.into(),
            error: None,
            metadata: M::default(),
        }
    }

    /// A failed result with `error` as its text.
    pub fn fail(error: impl Into<String>) -> Self {
        Self {
            success: false,
            output: String::new(),
            error: Some(error.into()),
            metadata: M::default(),
        }
    }
}

impl<M> Answer<M> {
    /// The text a host shows: the output on success, the error on failure.
    pub fn text(&self) -> &str {
        if self.success {
            &self.output
        } else {
            self.error.as_deref().unwrap_or(&self.output)
        }
    }

    /// Sets metadata fields: `answer.meta(|m| m.exit_code = Some(0))`.
    #[must_use]
    pub fn meta(mut self, set: impl FnOnce(&mut M)) -> Self {
        set(&mut self.metadata);
        self
    }
}

impl<M: Serialize> Answer<M> {
    /// The answer with its metadata as a JSON object, keys in the order
    /// `M` serialises them (absent facts stay absent where `M` skips them).
    /// Metadata that does not serialise to an object (`()`, a failing
    /// `Serialize` impl) becomes an empty object: the answer's text still
    /// reaches the host.
    pub fn into_untyped(self) -> ToolResult {
        let metadata = match serde_json::to_value(&self.metadata) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        Answer {
            success: self.success,
            output: self.output,
            error: self.error,
            metadata,
        }
    }
}

impl Answer<Metadata> {
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

    #[derive(Default, Serialize)]
    struct Facts {
        status: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        bash_id: Option<String>,
    }

    #[test]
    fn typed_metadata_keeps_its_declared_order_and_skips_absent_facts() {
        let answer = Answer::<Facts>::fail("boom")
            .meta(|m| m.exit_code = Some(2))
            .meta(|m| m.status = Some("failed"))
            .into_untyped();
        assert_eq!(answer.text(), "boom");
        let keys: Vec<&str> = answer.metadata.keys().map(String::as_str).collect();
        assert_eq!(keys, ["status", "exit_code"]);
        assert_eq!(
            answer.metadata_value(),
            json!({"status": "failed", "exit_code": 2})
        );
    }

    #[test]
    fn metadata_that_is_not_an_object_becomes_empty() {
        let answer = Answer::<()>::ok("fine").into_untyped();
        assert!(answer.metadata.is_empty());
        assert_eq!(answer.text(), "fine");
    }
}
