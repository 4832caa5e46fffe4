//! Tool definitions in the shapes the major tool-calling APIs expect.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A tool's name, description, input and output schemas and hints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name clients call it by.
    pub name: String,
    /// What it does, for a model to read.
    pub description: String,
    /// Self-contained JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its answers' metadata (MCP `structuredContent`).
    pub output_schema: Option<Value>,
    /// Hints for clients (MCP `annotations`).
    pub annotations: ToolAnnotations,
}

/// Hints about a tool for the people and clients deciding how to use it
/// (MCP `annotations`). Hints, not guarantees: absent means unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// A name for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool changes nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may change or destroy things (meaningful when not read-only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it again with the same arguments does nothing more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// It may reach things outside a closed world (the network, any program).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl ToolAnnotations {
    /// Whether no hint is given.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Which API's shape to render a definition in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DefinitionFormat {
    /// MCP `tools/list`: `{name, description, inputSchema}`.
    #[default]
    Mcp,
    /// OpenAI Chat Completions: `{"type": "function", "function": {name, description, parameters}}`.
    OpenAi,
    /// Anthropic Messages: `{name, description, input_schema}`.
    Anthropic,
}

impl DefinitionFormat {
    /// Every format, in a stable order.
    pub const ALL: [Self; 3] = [Self::Mcp, Self::OpenAi, Self::Anthropic];

    /// The format's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mcp => "mcp",
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

impl fmt::Display for DefinitionFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A format name that is not `mcp`, `openai` or `anthropic`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown definition format `{0}`, expected one of: mcp, openai, anthropic")]
pub struct UnknownFormat(pub String);

impl FromStr for DefinitionFormat {
    type Err = UnknownFormat;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|format| format.as_str() == name)
            .ok_or_else(|| UnknownFormat(name.to_owned()))
    }
}

impl ToolDefinition {
    /// The definition rendered in `format`'s shape.
    pub fn render(&self, format: DefinitionFormat) -> Value {
        match format {
            DefinitionFormat::Mcp => {
                let mut tool = json!({
                    "name": self.name,
                    "description": self.description,
                    "inputSchema": self.input_schema,
                });
                if let Some(object) = tool.as_object_mut() {
                    if let Some(title) = &self.annotations.title {
                        object.insert("title".to_owned(), json!(title));
                    }
                    if let Some(schema) = &self.output_schema {
                        object.insert("outputSchema".to_owned(), schema.clone());
                    }
                    if !self.annotations.is_empty() {
                        object.insert("annotations".to_owned(), json!(self.annotations));
                    }
                }
                tool
            }
            // The APIs validate these shapes and refuse unknown keys: the
            // output schema and the hints have no place there.
            DefinitionFormat::OpenAi => json!({
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": self.description,
                    "parameters": self.input_schema,
                },
            }),
            DefinitionFormat::Anthropic => json!({
                "name": self.name,
                "description": self.description,
                "input_schema": self.input_schema,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn definition() -> ToolDefinition {
        ToolDefinition {
            name: "Echo".into(),
            description: "Says it back.".into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: ToolAnnotations::default(),
        }
    }

    #[test]
    fn mcp_carries_the_output_schema_and_hints_and_the_apis_do_not() {
        let def = ToolDefinition {
            output_schema: Some(json!({"type": "object"})),
            annotations: ToolAnnotations {
                title: Some("Echo it".into()),
                read_only_hint: Some(true),
                ..ToolAnnotations::default()
            },
            ..definition()
        };
        assert_eq!(
            def.render(DefinitionFormat::Mcp),
            json!({
                "name": "Echo",
                "title": "Echo it",
                "description": "Says it back.",
                "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object"},
                "annotations": {"title": "Echo it", "readOnlyHint": true}
            })
        );
        assert_eq!(
            def.render(DefinitionFormat::OpenAi),
            definition().render(DefinitionFormat::OpenAi)
        );
        assert_eq!(
            def.render(DefinitionFormat::Anthropic),
            definition().render(DefinitionFormat::Anthropic)
        );
    }

    #[test]
    fn renders_each_format() {
        let def = definition();
        assert_eq!(
            def.render(DefinitionFormat::Mcp),
            json!({"name": "Echo", "description": "Says it back.", "inputSchema": {"type": "object"}})
        );
        assert_eq!(
            def.render(DefinitionFormat::OpenAi),
            json!({"type": "function", "function": {"name": "Echo", "description": "Says it back.", "parameters": {"type": "object"}}})
        );
        assert_eq!(
            def.render(DefinitionFormat::Anthropic),
            json!({"name": "Echo", "description": "Says it back.", "input_schema": {"type": "object"}})
        );
    }

    #[test]
    fn format_names_round_trip() {
        for format in DefinitionFormat::ALL {
            assert_eq!(format.to_string().parse::<DefinitionFormat>(), Ok(format));
        }
        let error = "xml".parse::<DefinitionFormat>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown definition format `xml`, expected one of: mcp, openai, anthropic"
        );
    }
}
