//! How cost grows with work: Bash latency as live background shells grow,
//! memory per idle background shell, capture throughput as output grows.
//!
//! `cargo bench -p exec-tools --bench scaling` (`-- --quick`: fewer calls,
//! up to 100 shells and 64 MiB). Prints one JSON figure per line for
//! `cargo xtask bench`.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::cast_precision_loss,
    reason = "a benchmark may stop on a broken setup"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};
use test_support::bench::{Figure, Unit, emit};
use test_support::{percentile, spec};

use exec_tools::{ExecConfig, ExecEnvironment, register_execution_tools};
use serde_json::json;
use shell_runtime::{ShellProcess, Stream};
use tool_core::{ExecutionContext, ToolRegistry};

/// Growth between the first and last figure, in words.
fn growth(first: f64, last: f64, work_ratio: f64) -> &'static str {
    let ratio = last / first;
    if ratio < 0.67 {
        "falling (fixed costs amortised)"
    } else if ratio < 1.5 {
        "flat"
    } else if ratio < work_ratio.sqrt() {
        "sub-linear"
    } else if ratio < work_ratio * 1.5 {
        "linear"
    } else {
        "super-linear"
    }
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = Arc::new(ExecEnvironment::new(ExecConfig::new(
        vec![dir.path().to_path_buf()],
        dir.path().to_path_buf(),
    )));
    let mut registry = ToolRegistry::new();
    register_execution_tools(&mut registry, &env).unwrap();
    let bash = Arc::clone(registry.get("Bash").unwrap());
    let context = ExecutionContext::new(dir.path());

    // Bash latency with N live background shells (spawned directly: the
    // tool's manager tracks at most 256, the runtime has no such limit).
    let levels: &[usize] = if quick {
        &[1, 10, 100]
    } else {
        &[1, 10, 100, 1000]
    };
    let calls = if quick { 50 } else { 200 };
    let mut live: Vec<Arc<ShellProcess>> = Vec::new();
    let mut medians = Vec::new();
    let rss_before = test_support::status_kib("self", "VmRSS");
    for &level in levels {
        while live.len() < level {
            live.push(
                runtime
                    .block_on(ShellProcess::spawn(spec("sleep 600")))
                    .unwrap(),
            );
        }
        if level == 100 {
            let per_shell = (test_support::status_kib("self", "VmRSS").saturating_sub(rss_before))
                as f64
                / 100.0;
            emit(
                &Figure::new(
                    "memory-per-idle-shell",
                    "memory per idle background shell (100 shells, RSS delta)",
                )
                .value(per_shell, Unit::KiB),
            );
        }
        let mut samples = Vec::new();
        for _ in 0..calls {
            let t = Instant::now();
            let result = runtime.block_on(bash.call(&context, json!({ "command": "true" })));
            samples.push(t.elapsed());
            assert!(result.success);
        }
        let (p50, p99) = (percentile(&mut samples, 50), percentile(&mut samples, 99));
        medians.push(p50.as_secs_f64());
        emit(
            &Figure::new(
                format!("bash-{level}-shells"),
                format!("`Bash true` with {level} live background shell(s)"),
            )
            .timing(p50, p99),
        );
    }
    let work = *levels.last().unwrap() as f64 / levels[0] as f64;
    emit(
        &Figure::new(
            "bash-growth",
            format!(
                "growth of `Bash true` latency, {} -> {} shells",
                levels[0],
                levels.last().unwrap()
            ),
        )
        .growth(
            growth(medians[0], *medians.last().unwrap(), work),
            medians.last().unwrap() / medians[0],
        ),
    );
    runtime.block_on(async {
        for shell in &live {
            shell.terminate(Duration::from_millis(100)).await;
        }
    });
    drop(live);

    // Capture throughput as output grows.
    let sizes: &[u64] = if quick {
        &[1 << 20, 8 << 20, 64 << 20]
    } else {
        &[1 << 20, 10 << 20, 100 << 20, 1 << 30]
    };
    let mut rates = Vec::new();
    for &size in sizes {
        let command = format!("head -c {size} /dev/zero | tr '\\0' 'x'");
        let t = Instant::now();
        let shell = runtime.block_on(async {
            let shell = ShellProcess::spawn(spec(&command)).await.unwrap();
            shell.wait().await;
            shell
        });
        let elapsed = t.elapsed();
        assert_eq!(shell.totals(Stream::Stdout).0, size);
        let rate = size as f64 / (1024.0 * 1024.0) / elapsed.as_secs_f64();
        rates.push(rate);
        emit(
            &Figure::new(
                format!("capture-{}-mib", size >> 20),
                format!("capture {} MiB", size >> 20),
            )
            .median(elapsed)
            .per_unit(rate, Unit::MiBPerSecond),
        );
    }
    let first = 1.0 / rates[0];
    let last = 1.0 / rates.last().unwrap();
    emit(
        &Figure::new(
            "capture-growth",
            format!(
                "growth of time per MiB, {} -> {} MiB",
                sizes[0] >> 20,
                sizes.last().unwrap() >> 20
            ),
        )
        .growth(
            growth(first, last, *sizes.last().unwrap() as f64 / sizes[0] as f64),
            last / first,
        ),
    );
}
