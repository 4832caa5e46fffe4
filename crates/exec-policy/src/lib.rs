//! Pure decisions for agent shell commands: dangerous-command analysis,
//! environment scrubbing and working-directory rules. Starts no process and
//! knows nothing of tokio.
