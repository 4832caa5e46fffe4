//! The MCP side of `agent-exec` as a library: the [`Bridge`] that serves a
//! tool registry over any rmcp transport, and the [`Framed`] transport in
//! front of rmcp (line reader, size cap, protocol errors, ids in flight).
//! The binary serves the two on stdio; the fuzz target drives them through
//! an in-memory pipe.

mod bridge;
mod framing;

pub use bridge::Bridge;
pub use framing::{Framed, ID_WINDOW, MAX_LINE, Tracked};
