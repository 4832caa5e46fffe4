//! The `Tool` trait and its type-erased form.

use std::fmt;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::ExecutionContext;
use crate::definition::{ToolAnnotations, ToolDefinition};
use crate::schema::{InputSchema, SchemaError, ValidationError, ValidationRule};
use crate::tool_result::{Answer, ToolResult};

/// What kind of work a tool does; hosts may group or gate tools by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCategory {
    /// Runs commands or processes.
    Execution,
    /// Reads or writes files.
    File,
    /// Searches code or text.
    Search,
    /// Talks to the network.
    Network,
    /// Anything else.
    Other,
}

impl fmt::Display for ToolCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Execution => "execution",
            Self::File => "file",
            Self::Search => "search",
            Self::Network => "network",
            Self::Other => "other",
        })
    }
}

/// A tool with typed parameters.
///
/// `Params` derives `Deserialize` and `JsonSchema`; its doc comments become
/// the schema's descriptions and its `#[schemars(...)]` bounds become both
/// schema keywords and the checks applied before `execute` is called. Use
/// `#[serde(deny_unknown_fields)]` so unknown arguments are refused.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The typed arguments.
    type Params: DeserializeOwned + JsonSchema + Send + 'static;

    /// The facts each answer carries (MCP `structuredContent`, with the
    /// answer's text added as `output`); its schema is the tool's
    /// `outputSchema`. A tool without a type of its own uses
    /// [`Metadata`](crate::Metadata) and answers [`ToolResult`].
    type Metadata: Serialize + JsonSchema + Default + Send + 'static;

    /// The name clients call the tool by (letters, digits, `_` and `-`).
    fn name(&self) -> &str;

    /// What the tool does and how to use it, written for a model to read.
    fn description(&self) -> String;

    /// What kind of work it does.
    fn category(&self) -> ToolCategory;

    /// Hints for clients (title, read-only, destructive, open world);
    /// none by default.
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default()
    }

    /// Runs the tool with arguments that already passed validation.
    async fn execute(
        &self,
        context: &ExecutionContext,
        params: Self::Params,
    ) -> Answer<Self::Metadata>;
}

/// A tool behind a type-erased interface: raw JSON in, [`ToolResult`] out.
#[async_trait]
pub trait DynTool: Send + Sync {
    /// The tool's name.
    fn name(&self) -> &str;

    /// The tool's description.
    fn description(&self) -> String;

    /// The tool's category.
    fn category(&self) -> ToolCategory;

    /// The tool's input schema.
    fn input_schema(&self) -> &InputSchema;

    /// The schema of its answers' metadata, `output` included.
    fn output_schema(&self) -> &InputSchema;

    /// Hints for clients.
    fn annotations(&self) -> ToolAnnotations;

    /// Name, description, schemas and hints together.
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name().to_owned(),
            description: self.description(),
            input_schema: self.input_schema().json().clone(),
            output_schema: Some(self.output_schema().json().clone()),
            annotations: self.annotations(),
        }
    }

    /// Validates `arguments` (`null` counts as `{}`) and runs the tool. Bad
    /// arguments give a failed result naming each field and rule; nothing runs.
    async fn call(&self, context: &ExecutionContext, arguments: Value) -> ToolResult;
}

/// Adapts a [`Tool`] to [`DynTool`], holding its compiled schema.
pub struct TypedTool<T: Tool> {
    tool: T,
    schema: InputSchema,
    output_schema: InputSchema,
}

impl<T: Tool> TypedTool<T> {
    /// Wraps `tool`, generating and compiling its schemas once.
    pub fn new(tool: T) -> Result<Self, SchemaError> {
        let schema = InputSchema::for_type::<T::Params>()?;
        let output_schema = InputSchema::for_metadata::<T::Metadata>()?;
        Ok(Self {
            tool,
            schema,
            output_schema,
        })
    }

    /// The wrapped tool.
    pub fn inner(&self) -> &T {
        &self.tool
    }

    /// Validates raw arguments and deserializes them into `T::Params`.
    pub fn parse(&self, arguments: &Value) -> Result<T::Params, Vec<ValidationError>> {
        let empty = Value::Object(serde_json::Map::new());
        let arguments = if arguments.is_null() {
            &empty
        } else {
            arguments
        };
        let cleaned = self.schema.validate(arguments)?;
        serde_json::from_value(cleaned).map_err(|error| {
            // Unreachable for schemas schemars derived, kept as a safety net
            // for hand-written `JsonSchema` impls that promise less than serde checks.
            vec![ValidationError {
                field: "arguments".to_owned(),
                rule: ValidationRule::Deserialize,
                message: error.to_string(),
            }]
        })
    }
}

impl<T: Tool> fmt::Debug for TypedTool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedTool")
            .field("name", &self.tool.name())
            .finish_non_exhaustive()
    }
}

/// The text of a failed validation: one line per broken rule.
pub(crate) fn validation_message(tool: &str, errors: &[ValidationError]) -> String {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    format!("Invalid arguments for {tool}: {}", lines.join("; "))
}

#[async_trait]
impl<T: Tool> DynTool for TypedTool<T> {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn description(&self) -> String {
        self.tool.description()
    }

    fn category(&self) -> ToolCategory {
        self.tool.category()
    }

    fn input_schema(&self) -> &InputSchema {
        &self.schema
    }

    fn output_schema(&self) -> &InputSchema {
        &self.output_schema
    }

    fn annotations(&self) -> ToolAnnotations {
        self.tool.annotations()
    }

    async fn call(&self, context: &ExecutionContext, arguments: Value) -> ToolResult {
        match self.parse(&arguments) {
            Ok(params) => self.tool.execute(context, params).await.into_untyped(),
            Err(errors) => {
                let fields: Vec<Value> = errors
                    .iter()
                    .map(|e| Value::from(e.field.clone()))
                    .collect();
                ToolResult::fail(validation_message(self.tool.name(), &errors))
                    .with_meta("invalid_fields", fields)
            }
        }
    }
}
