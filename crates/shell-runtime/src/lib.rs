//! Process mechanism for agent shells: spawning in a process group of its
//! own, ending whole trees, bounded UTF-8 output buffers and a shell manager.
//! Knows nothing of tools or policy: it takes plain structs.
