//! The cost of policy at every exec (docs/decisions/0018) as the tools pay
//! it: the same `Bash` calls on two environments of one process, one with
//! `check_execs` (every exec stopped by seccomp and judged by the real
//! analysis) and one without, alternating call by call.
//!
//! `cargo bench -p exec-tools --bench exec_check` (`-- --quick`: fewer
//! rounds). Workloads: a script of 5,000 short programs (a quarter of
//! them with a new argument each time, so their decisions are not all
//! cached), `make -B -j2` of a small C project (`gcc` runs `cc1`, `as`,
//! `collect2` and `ld` with long argument vectors), and `Bash true`, whose
//! difference is what an MCP round trip of it gains. Prints one JSON
//! figure per line for `cargo xtask bench`.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a benchmark may stop on a broken setup"
)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use exec_tools::{ExecConfig, ExecEnvironment, register_execution_tools};
use serde_json::{Value, json};
use test_support::bench::{Figure, Metric, Op, Unit, emit};
use test_support::percentile;
use tool_core::{DynTool, ExecutionContext, ToolRegistry};

/// 5,000 execs: each round runs four programs, one with its own argument.
const EXECS: &str = "for i in $(seq 1250); do /bin/true; /bin/echo \"$i\" > /dev/null; \
                     /usr/bin/test -d src; /bin/cat /dev/null; done";

/// Source files of the C project.
const C_FILES: usize = 12;

/// The `Bash` tool of an environment with or without the exec check.
fn bash_tool(dir: &Path, check_execs: bool) -> Arc<dyn DynTool> {
    let mut config = ExecConfig::new(vec![dir.to_path_buf()], dir.to_path_buf());
    config.check_execs = check_execs;
    let env = Arc::new(ExecEnvironment::new(config));
    let mut registry = ToolRegistry::new();
    register_execution_tools(&mut registry, &env).unwrap();
    Arc::clone(registry.get("Bash").unwrap())
}

/// A small C project: [`C_FILES`] sources, a header and a Makefile.
fn c_project(dir: &Path) {
    let mut objects = Vec::new();
    let mut calls = String::new();
    for i in 0..C_FILES {
        std::fs::write(
            dir.join(format!("f{i}.c")),
            format!(
                "#include <stdio.h>\n#include \"p.h\"\nint f{i}(int x) {{ int s = 0; for (int k = 0; k < x; k++) s += k * {i}; printf(\"%d\\n\", s); return s; }}\n"
            ),
        )
        .unwrap();
        objects.push(format!("f{i}.o"));
        calls.push_str(&format!("f{i}(argc); "));
    }
    let header: String = (0..C_FILES)
        .map(|i| format!("int f{i}(int x);\n"))
        .collect();
    std::fs::write(dir.join("p.h"), header).unwrap();
    std::fs::write(
        dir.join("main.c"),
        format!(
            "#include \"p.h\"\nint main(int argc, char **argv) {{ (void)argv; {calls}return 0; }}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("Makefile"),
        format!(
            "OBJS = main.o {}\nprog: $(OBJS)\n\tgcc -o $@ $(OBJS)\n%.o: %.c p.h\n\tgcc -O1 -Wall -c -o $@ $<\n",
            objects.join(" ")
        ),
    )
    .unwrap();
}

/// The CPU time this process (the server's side: the tools, the
/// supervisor threads, the judge) has used, from `/proc/self/stat`.
fn own_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name's closing parenthesis; utime and
    // stime are the 14th and 15th of the line, in clock ticks (100 Hz).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// Samples of one environment: wall clock per call, and the server's CPU
/// time over all calls.
#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    cpu: Duration,
}

/// Runs `args` on both tools `rounds` times, alternating which goes first,
/// and returns (without, with) samples.
fn alternate(
    runtime: &tokio::runtime::Runtime,
    context: &ExecutionContext,
    tools: &[Arc<dyn DynTool>; 2],
    args: &Value,
    rounds: usize,
) -> (Samples, Samples) {
    let mut samples = [Samples::default(), Samples::default()];
    for round in 0..=rounds {
        for which in [round % 2, 1 - round % 2] {
            let cpu = own_cpu();
            let t = Instant::now();
            let result = runtime.block_on(tools[which].call(context, args.clone()));
            let elapsed = t.elapsed();
            let cpu = own_cpu().saturating_sub(cpu);
            assert!(result.success, "{args}: {}", result.output);
            // The first round warms both up (page cache, decision cache
            // as a long-lived server has it) and is not counted.
            if round > 0 {
                samples[which].wall.push(elapsed);
                samples[which].cpu += cpu;
            }
        }
    }
    let [plain, judged] = samples;
    (plain, judged)
}

/// The figures of one workload; `execs` is how many programs one call
/// runs, for the server's CPU time per exec the check adds.
fn figures(id: &str, what: &str, target: f64, plain: Samples, judged: Samples, execs: u32) {
    let calls = u32::try_from(plain.wall.len()).unwrap();
    let extra = judged.cpu.saturating_sub(plain.cpu) / (calls * execs);
    let (mut plain, mut judged) = (plain.wall, judged.wall);
    let (plain50, plain99) = (percentile(&mut plain, 50), percentile(&mut plain, 99));
    let (judged50, judged99) = (percentile(&mut judged, 50), percentile(&mut judged, 99));
    let base = format!("{id}-unchecked");
    emit(
        &Figure::new(&base, format!("{what}, execs not checked (baseline)"))
            .timing(plain50, plain99),
    );
    emit(
        &Figure::new(
            format!("{id}-checked"),
            format!("{what}, every exec judged"),
        )
        .timing(judged50, judged99)
        .against(&base, judged50.as_secs_f64() / plain50.as_secs_f64())
        .target(Metric::Ratio, Op::AtMost, target, Unit::Times),
    );
    emit(
        &Figure::new(
            format!("{id}-server-cpu"),
            format!("{what}: the server's CPU time the check adds per exec"),
        )
        .median(extra),
    );
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    c_project(dir.path());
    let tools = [bash_tool(dir.path(), false), bash_tool(dir.path(), true)];
    let context = ExecutionContext::new(dir.path());

    let rounds = if quick { 3 } else { 7 };
    let (plain, judged) = alternate(
        &runtime,
        &context,
        &tools,
        &json!({ "command": EXECS, "timeout": 600_000 }),
        rounds,
    );
    figures(
        "execs-5000",
        "a script of 5,000 short programs",
        1.10,
        plain,
        judged,
        5000,
    );

    let (plain, judged) = alternate(
        &runtime,
        &context,
        &tools,
        &json!({ "command": "make -B -j2 -s", "timeout": 600_000 }),
        rounds,
    );
    figures(
        "make-j2",
        &format!("`make -B -j2` of a C project of {} files", C_FILES + 1),
        1.10,
        plain,
        judged,
        // gcc, cc1, as and collect2/ld per file, and the link.
        u32::try_from(C_FILES + 1).unwrap() * 4 + 5,
    );

    let calls = if quick { 100 } else { 500 };
    let (plain, judged) = alternate(
        &runtime,
        &context,
        &tools,
        &json!({ "command": "true" }),
        calls,
    );
    figures(
        "bash-true",
        &format!("`Bash true`, {calls} calls"),
        1.05,
        plain,
        judged,
        1,
    );
}
