//! Process mechanism for agent shells: spawning in a process group of its
//! own, ending whole trees, bounded UTF-8 output buffers and a shell manager.
//! Knows nothing of tools or policy: it takes plain structs.
//!
//! So far: the incremental UTF-8 decoder and the shell quoting helper; the
//! process side arrives with the shell-runtime issue.

mod decode;
mod quote;

pub use decode::Utf8Decoder;
pub use quote::quote;
