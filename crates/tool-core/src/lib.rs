//! The bottom layer of agent-exec: what a tool is, how its arguments are
//! described and checked, what it answers, and how tools are found and run.
//!
//! A tool implements [`Tool`] with a typed `Params` struct. The struct's
//! `schemars` derive is the single source of truth for both the JSON Schema
//! that clients see and the validation applied to raw JSON arguments, so the
//! two cannot drift. [`ToolRegistry`] holds type-erased tools ([`DynTool`]),
//! and [`ToolExecutor`] runs one by name with raw JSON, catching panics and
//! recording the time taken.

mod context;
mod definition;
mod executor;
mod registry;
mod schema;
mod tool;
mod tool_result;

pub use context::{
    Approval, Approver, Arrival, ArrivalLine, ExecutionContext, Principal, ProgressSink,
    ProgressUpdate, Session,
};
pub use definition::{DefinitionFormat, ToolAnnotations, ToolDefinition, UnknownFormat};
pub use executor::{ExecutedCall, ExecutorError, MAX_ARGUMENT_BYTES, ToolExecutor};
pub use registry::{RegistryError, ToolRegistry};
pub use schema::{InputSchema, SchemaError, ValidationError, ValidationRule};
pub use tool::{DynTool, Tool, ToolCategory, TypedTool};
pub use tool_result::{Answer, Metadata, ToolResult};

/// Re-exported so that tools and hosts share one cancellation type.
pub use tokio_util::sync::CancellationToken;
