//! The execution tools (`Bash`, `BashOutput`, `KillShell`), composed from
//! exec-policy's decisions and shell-runtime's mechanism.
//!
//! Hosts build a [`ToolRegistry`] with [`register_execution_tools`] and
//! serve it however they like (MCP, an agent loop, a CLI).

use tool_core::{RegistryError, ToolRegistry};

/// Adds every execution tool to `registry`.
///
/// The tools themselves land with the exec-tools issue; until then this adds
/// nothing, and `agent-exec schema` and `cargo xtask codegen` list no tools.
pub fn register_execution_tools(registry: &mut ToolRegistry) -> Result<(), RegistryError> {
    let _ = registry;
    Ok(())
}

/// A registry holding exactly the execution tools.
pub fn execution_registry() -> Result<ToolRegistry, RegistryError> {
    let mut registry = ToolRegistry::new();
    register_execution_tools(&mut registry)?;
    Ok(registry)
}
