//! The set of tools a host offers.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::definition::ToolDefinition;
use crate::schema::SchemaError;
use crate::tool::{DynTool, Tool, ToolCategory, TypedTool};

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Another tool already has this name.
    #[error("a tool named `{0}` is already registered")]
    DuplicateName(String),
    /// The name is empty, too long, or has characters APIs refuse.
    #[error("tool name `{0}` must be 1 to 64 characters of letters, digits, `_` or `-`")]
    InvalidName(String),
    /// The description is empty.
    #[error("tool `{0}` has an empty description")]
    EmptyDescription(String),
    /// The params type does not give a usable schema.
    #[error("tool `{name}` has an unusable input schema")]
    Schema {
        /// The tool.
        name: String,
        /// What is wrong with its schema.
        #[source]
        source: SchemaError,
    },
}

/// Tools by name, listed in name order.
#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn DynTool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Names every major tool-calling API accepts (OpenAI's rule is the strictest).
fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a typed tool, compiling its schema.
    pub fn register<T: Tool>(&mut self, tool: T) -> Result<(), RegistryError> {
        let name = tool.name().to_owned();
        let typed = TypedTool::new(tool).map_err(|source| RegistryError::Schema {
            name: name.clone(),
            source,
        })?;
        self.register_dyn(Arc::new(typed))
    }

    /// Registers an already type-erased tool.
    pub fn register_dyn(&mut self, tool: Arc<dyn DynTool>) -> Result<(), RegistryError> {
        let name = tool.name().to_owned();
        if !is_valid_name(&name) {
            return Err(RegistryError::InvalidName(name));
        }
        if tool.description().trim().is_empty() {
            return Err(RegistryError::EmptyDescription(name));
        }
        if self.tools.contains_key(&name) {
            return Err(RegistryError::DuplicateName(name));
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.tools.get(name)
    }

    /// Every tool, in name order.
    pub fn list(&self) -> impl Iterator<Item = &Arc<dyn DynTool>> {
        self.tools.values()
    }

    /// The tools of one category, in name order.
    pub fn by_category(&self, category: ToolCategory) -> impl Iterator<Item = &Arc<dyn DynTool>> {
        self.tools
            .values()
            .filter(move |tool| tool.category() == category)
    }

    /// Every tool's definition, in name order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools.values().map(|tool| tool.definition()).collect()
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}
