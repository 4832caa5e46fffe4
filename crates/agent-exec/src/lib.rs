//! The MCP side of `agent-exec` as a library: the [`Bridge`] that serves a
//! tool registry over any rmcp transport. The binary serves it on stdio;
//! the fuzz target drives it through an in-memory pipe.

mod bridge;

pub use bridge::Bridge;
