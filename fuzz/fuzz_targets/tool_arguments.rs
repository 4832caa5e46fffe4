//! Any JSON as the arguments of each tool, in dry-run mode (nothing runs):
//! never a panic; a failure for bad arguments names a field; metadata is
//! always a JSON object.
#![no_main]

use std::sync::{Arc, OnceLock};

use exec_tools::{ExecConfig, ExecEnvironment, register_execution_tools};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tool_core::{ExecutionContext, ToolRegistry};

struct World {
    runtime: tokio::runtime::Runtime,
    registry: ToolRegistry,
    context: ExecutionContext,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let dir = std::env::temp_dir();
        let env = Arc::new(ExecEnvironment::new(ExecConfig::new(
            vec![dir.clone()],
            dir.clone(),
        )));
        let mut registry = ToolRegistry::new();
        register_execution_tools(&mut registry, &env).expect("registers");
        World {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
            registry,
            context: ExecutionContext::new(dir).with_dry_run(true),
        }
    })
}

fuzz_target!(
    // brush-parser panics on some inputs; the analyser catches those and
    // falls back, so the abort-on-any-panic hook is replaced (a panic that
    // reaches the target still ends the run).
    init: { std::panic::set_hook(Box::new(|info| eprintln!("panic: {info}"))); },
    |data: &[u8]| {
    let Some((&selector, json)) = data.split_first() else {
        return;
    };
    let Ok(arguments) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let world = world();
    let names = ["Bash", "BashOutput", "KillShell"];
    let name = names[usize::from(selector) % names.len()];
    let tool = world.registry.get(name).expect("registered");
    let result = world.runtime.block_on(tool.call(&world.context, arguments));
    assert!(result.metadata_value().is_object());
    let text = result.text();
    if text.starts_with("Invalid arguments") {
        assert!(!result.success);
        assert!(text.contains(&format!("for {name}: ")), "{text}");
    }
    if name == "Bash" && result.success {
        assert!(text.starts_with("[Dry Run] Would execute: "), "{text}");
    }
});
