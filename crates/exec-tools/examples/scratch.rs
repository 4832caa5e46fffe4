#![allow(
    clippy::all,
    clippy::pedantic,
    missing_docs,
    clippy::disallowed_methods
)]
use std::sync::Arc;
use std::time::{Duration, Instant};
fn p50(v: &mut Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}
fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir();
    let out = std::path::PathBuf::from(std::env::var("OUT").unwrap_or("/tmp".into()));
    let config = exec_tools::ExecConfig::new(vec![dir.clone()], out);
    let env = Arc::new(exec_tools::ExecEnvironment::new(config));
    let mut reg = tool_core::ToolRegistry::new();
    exec_tools::register_execution_tools(&mut reg, &env).unwrap();
    let bash = reg.get("Bash").unwrap().clone();
    let ctx = tool_core::ExecutionContext::new(dir.clone());
    let vars: Vec<(String, String)> = env.config().env.vars.clone().into_iter().collect();
    let (mut a, mut b, mut c, mut d) = (vec![], vec![], vec![], vec![]);
    let wrapper = std::env::var("W").unwrap();
    let only_tool = std::env::var_os("ONLY").is_some();
    for _ in 0..300 {
        if only_tool {
            for _ in 0..5 {
                rt.block_on(async { bash.call(&ctx, serde_json::json!({"command":"true"})).await });
            }
            continue;
        }
        let t = Instant::now();
        std::process::Command::new("bash")
            .args(["-c", "true"])
            .status()
            .unwrap();
        a.push(t.elapsed());
        let t = Instant::now();
        rt.block_on(async {
            shell_runtime::ShellProcess::spawn(
                shell_runtime::SpawnSpec::shell("true", &dir).with_env(vars.clone()),
            )
            .await
            .unwrap()
            .wait()
            .await
        });
        b.push(t.elapsed());
        let t = Instant::now();
        rt.block_on(async {
            shell_runtime::ShellProcess::spawn(
                shell_runtime::SpawnSpec::shell(wrapper.clone(), &dir).with_env(vars.clone()),
            )
            .await
            .unwrap()
            .wait()
            .await
        });
        c.push(t.elapsed());
        let t = Instant::now();
        rt.block_on(async { bash.call(&ctx, serde_json::json!({"command":"true"})).await });
        d.push(t.elapsed());
    }
    println!(
        "bare {:?} runtime {:?} runtime+wrapper {:?} tool {:?}",
        p50(&mut a),
        p50(&mut b),
        p50(&mut c),
        p50(&mut d)
    );
}
