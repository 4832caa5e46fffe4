//! Tool definitions in the shapes the major tool-calling APIs expect.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A tool's name, description and input schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name clients call it by.
    pub name: String,
    /// What it does, for a model to read.
    pub description: String,
    /// Self-contained JSON Schema of its arguments.
    pub input_schema: Value,
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
            DefinitionFormat::Mcp => json!({
                "name": self.name,
                "description": self.description,
                "inputSchema": self.input_schema,
            }),
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
        }
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
