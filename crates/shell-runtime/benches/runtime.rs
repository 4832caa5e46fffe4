//! Process mechanism costs against baselines measured in the same run:
//! spawn-and-wait of `true` against a bare `bash -c true`, capture of a
//! large output against `cat FILE | cat > /dev/null`, and reading new
//! output from a running background shell.
//!
//! `cargo bench -p shell-runtime --bench runtime` (`-- --quick` for a short
//! run with a 64 MiB file instead of 1 GiB; `-- capture` and the like run
//! only the groups named: spawn, capture, reads, concurrent, sandbox,
//! spawner, exec-check). Prints one JSON figure per line for `cargo xtask bench`.
//!
//! `spawner` (only when named) starts the spawner process first, as the
//! binary does, and compares spawn-and-wait of `true` through it with the
//! spawner thread, alternating.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a benchmark may stop on a broken setup"
)]

use std::io::Write;
use std::time::{Duration, Instant};
use test_support::bench::{Figure, Metric, Op, Unit, emit, save_samples};
use test_support::{percentile, spec};

use shell_runtime::ShellProcess;

#[expect(
    clippy::disallowed_methods,
    reason = "the baseline is a bare Command, by definition"
)]
fn bare_bash(command: &str) {
    let status = std::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .status()
        .expect("bash runs");
    assert!(status.success());
}

fn spawn_and_wait(runtime: &tokio::runtime::Runtime, rounds: usize) {
    let mut bare = Vec::new();
    let mut ours = Vec::new();
    // Warm both paths, then alternate so drift hits both alike.
    for _ in 0..20 {
        bare_bash("true");
        runtime.block_on(async {
            ShellProcess::spawn(spec("true"))
                .await
                .unwrap()
                .wait()
                .await
        });
    }
    for _ in 0..rounds {
        let t = Instant::now();
        bare_bash("true");
        bare.push(t.elapsed());
        let t = Instant::now();
        runtime.block_on(async {
            ShellProcess::spawn(spec("true"))
                .await
                .unwrap()
                .wait()
                .await
        });
        ours.push(t.elapsed());
    }
    save_samples("spawn-bare", &bare);
    save_samples("spawn-shell-runtime", &ours);
    let (bare50, bare99) = (percentile(&mut bare, 50), percentile(&mut bare, 99));
    let (ours50, ours99) = (percentile(&mut ours, 50), percentile(&mut ours, 99));
    emit(&Figure::new("spawn-bare", "bare `bash -c true` spawn and wait").timing(bare50, bare99));
    emit(
        &Figure::new("spawn", "`ShellProcess::spawn(\"true\")` and wait")
            .timing(ours50, ours99)
            .against("spawn-bare", ours50.as_secs_f64() / bare50.as_secs_f64())
            .target(Metric::Ratio, Op::AtMost, 1.1, Unit::Times),
    );
}

/// Spawn-and-wait of `true` with and without the sandbox (a PID and mount
/// namespace with its in-memory init, Landlock for a temp dir, the socket filter,
/// rlimits, and the pids cgroup where one can be made), alternating.
fn sandbox_cost(runtime: &tokio::runtime::Runtime, rounds: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let confinement = match shell_runtime::Confinement::prepare(&shell_runtime::ConfinementSpec {
        restrict_writes: true,
        writable: vec![dir.path().to_path_buf()],
        deny_network: true,
        max_file_size: Some(1 << 34),
        max_open_files: Some(4096),
        no_core_dumps: true,
        max_processes: Some(1024),
        isolate_processes: true,
    }) {
        Ok(confinement) => std::sync::Arc::new(confinement),
        Err(error) => {
            let reason = error.to_string();
            emit(&Figure::skipped(
                "spawn-unconfined",
                "spawn and wait of `true`, sandbox off",
                &reason,
            ));
            emit(&Figure {
                baseline: Some("spawn-unconfined".to_owned()),
                ..Figure::skipped("spawn-sandboxed", "sandboxed spawn and wait", reason)
            });
            return;
        }
    };
    let mut off = Vec::new();
    let mut on = Vec::new();
    for round in 0..rounds + 20 {
        let t = Instant::now();
        runtime.block_on(async {
            ShellProcess::spawn(spec("true"))
                .await
                .unwrap()
                .wait()
                .await
        });
        let plain = t.elapsed();
        let mut confined = spec("true");
        confined.confinement = Some(std::sync::Arc::clone(&confinement));
        let t = Instant::now();
        runtime.block_on(async { ShellProcess::spawn(confined).await.unwrap().wait().await });
        if round >= 20 {
            off.push(plain);
            on.push(t.elapsed());
        }
    }
    save_samples("spawn-sandboxed", &on);
    let (off50, off99) = (percentile(&mut off, 50), percentile(&mut off, 99));
    let (on50, on99) = (percentile(&mut on, 50), percentile(&mut on, 99));
    let cgroup = if confinement.cgroup_dir().is_some() {
        "with"
    } else {
        "without"
    };
    emit(
        &Figure::new("spawn-unconfined", "spawn and wait of `true`, sandbox off")
            .timing(off50, off99),
    );
    emit(
        &Figure::new(
            "spawn-sandboxed",
            format!(
                "the same under the sandbox (a PID and mount namespace with its in-memory init, Landlock, seccomp, rlimits, {cgroup} a pids cgroup)"
            ),
        )
        .timing(on50, on99)
        .against("spawn-unconfined", on50.as_secs_f64() / off50.as_secs_f64())
        .target(Metric::Ratio, Op::AtMost, 1.5, Unit::Times),
    );
}

/// 200 shells started at once and waited for, against 200 bare
/// `bash -c` children started at once and waited for.
#[expect(
    clippy::disallowed_methods,
    reason = "the baseline is bare Commands, by definition"
)]
fn concurrent_shells(runtime: &tokio::runtime::Runtime, rounds: usize) {
    const SHELLS: usize = 200;
    let mut bare = Vec::new();
    let mut ours = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let children: Vec<std::process::Child> = (0..SHELLS)
            .map(|index| {
                std::process::Command::new("bash")
                    .arg("-c")
                    .arg(format!("echo {index}"))
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .expect("bash starts")
            })
            .collect();
        for child in children {
            assert!(child.wait_with_output().expect("waits").status.success());
        }
        bare.push(t.elapsed());
        let t = Instant::now();
        runtime.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for index in 0..SHELLS {
                tasks.spawn(async move {
                    let shell = ShellProcess::spawn(spec(&format!("echo {index}")))
                        .await
                        .unwrap();
                    shell.wait().await;
                    assert_eq!(
                        shell.snapshot(shell_runtime::Stream::Stdout).render(),
                        format!("{index}\n")
                    );
                });
            }
            while tasks.join_next().await.is_some() {}
        });
        ours.push(t.elapsed());
    }
    let bare50 = percentile(&mut bare, 50);
    let ours50 = percentile(&mut ours, 50);
    emit(
        &Figure::new(
            "concurrent-bare",
            format!("{SHELLS} bare `bash -c` children at once, all waited"),
        )
        .median(bare50),
    );
    emit(
        &Figure::new(
            "concurrent",
            format!("{SHELLS} concurrent shells started, captured and waited"),
        )
        .median(ours50)
        .against(
            "concurrent-bare",
            ours50.as_secs_f64() / bare50.as_secs_f64(),
        ),
    );
}

fn write_big_file(bytes: u64) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    let line = "the quick brown fox jumps over the lazy dog, 0123456789 ÄÖÜ éè €\n".repeat(1000);
    let mut written = 0;
    while written < bytes {
        file.write_all(line.as_bytes()).expect("write");
        written += line.len() as u64;
    }
    file.flush().expect("flush");
    file
}

/// What a server's redaction table holds: every well-known token format
/// and two secret values.
fn redaction_table() -> std::sync::Arc<shell_runtime::Redactions> {
    let patterns = secret_formats::FORMATS
        .iter()
        .map(|format| shell_runtime::TokenPattern::new(format).expect("compiles"))
        .collect();
    let secrets = [
        (
            "s3cr3t-v4lue-0123456789".to_owned(),
            "[REDACTED:A_TOKEN]".to_owned(),
        ),
        (
            "hunter2-hunter2-hunter2".to_owned(),
            "[REDACTED:A_PASSWORD]".to_owned(),
        ),
    ];
    std::sync::Arc::new(shell_runtime::Redactions::new(secrets, patterns))
}

fn capture(runtime: &tokio::runtime::Runtime, bytes: u64, rounds: usize) {
    let file = write_big_file(bytes);
    let path = test_support::single_quoted(&file.path().to_string_lossy());
    let size = std::fs::metadata(file.path()).expect("size").len();
    let table = redaction_table();
    // Warm the page cache.
    bare_bash(&format!("cat {path} > /dev/null"));
    let mut bare = Vec::new();
    let mut ours = Vec::new();
    let mut redacted = Vec::new();
    for round in 0..rounds {
        let t = Instant::now();
        bare_bash(&format!("cat {path} | cat > /dev/null"));
        bare.push(t.elapsed());
        // Alternating which goes first, so drift hits both alike.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for with_table in order {
            let mut capture = spec(&format!("cat {path}"));
            if with_table {
                capture.replacements = Some(std::sync::Arc::clone(&table));
            }
            let t = Instant::now();
            let shell = runtime.block_on(async {
                let shell = ShellProcess::spawn(capture).await.unwrap();
                shell.wait().await;
                shell
            });
            if with_table { &mut redacted } else { &mut ours }.push(t.elapsed());
            assert_eq!(shell.totals(shell_runtime::Stream::Stdout).0, size);
        }
    }
    let mib = size as f64 / (1024.0 * 1024.0);
    let bare50 = percentile(&mut bare, 50);
    let ours50 = percentile(&mut ours, 50);
    let redacted50 = percentile(&mut redacted, 50);
    let bare_rate = mib / bare50.as_secs_f64();
    let ours_rate = mib / ours50.as_secs_f64();
    let redacted_rate = mib / redacted50.as_secs_f64();
    emit(
        &Figure::new(
            "capture-bare",
            format!("`cat FILE | cat > /dev/null`, {mib:.0} MiB"),
        )
        .median(bare50)
        .per_unit(bare_rate, Unit::MiBPerSecond),
    );
    emit(
        &Figure::new("capture", format!("capture `cat FILE`, {mib:.0} MiB"))
            .median(ours50)
            .per_unit(ours_rate, Unit::MiBPerSecond)
            .against_throughput("capture-bare", ours_rate / bare_rate)
            .target(Metric::Ratio, Op::AtLeast, 0.5, Unit::Times),
    );
    emit(
        &Figure::new(
            "capture-redacted",
            format!(
                "the same with redaction ({} token formats, 2 secret values)",
                secret_formats::FORMATS.len()
            ),
        )
        .median(redacted50)
        .per_unit(redacted_rate, Unit::MiBPerSecond)
        .against_throughput("capture", redacted_rate / ours_rate)
        .target(Metric::Ratio, Op::AtLeast, 0.9, Unit::Times),
    );
    emit(
        &Figure::new("peak-rss", "peak RSS of the whole benchmark process")
            .value(
                test_support::status_kib("self", "VmHWM") as f64 / 1024.0,
                Unit::MiB,
            )
            .target(Metric::Value, Op::Below, 32.0, Unit::MiB),
    );
}

fn spawn_and_wait_once(runtime: &tokio::runtime::Runtime) -> Duration {
    let t = Instant::now();
    runtime.block_on(async {
        ShellProcess::spawn(spec("true"))
            .await
            .unwrap()
            .wait()
            .await
    });
    t.elapsed()
}

/// The spawner process (docs/decisions/0016) against the spawner thread,
/// alternating in one run.
#[cfg(target_os = "linux")]
fn spawner_process(runtime: &tokio::runtime::Runtime, rounds: usize) {
    let mut thread = Vec::new();
    let mut process = Vec::new();
    for _ in 0..20 {
        shell_runtime::bypass_spawner_process(true);
        spawn_and_wait_once(runtime);
        shell_runtime::bypass_spawner_process(false);
        spawn_and_wait_once(runtime);
    }
    for _ in 0..rounds {
        shell_runtime::bypass_spawner_process(true);
        thread.push(spawn_and_wait_once(runtime));
        shell_runtime::bypass_spawner_process(false);
        process.push(spawn_and_wait_once(runtime));
    }
    let (thread50, thread99) = (percentile(&mut thread, 50), percentile(&mut thread, 99));
    let (process50, process99) = (percentile(&mut process, 50), percentile(&mut process, 99));
    emit(
        &Figure::new(
            "spawn-thread",
            "spawn-and-wait of `true` from the spawner thread",
        )
        .timing(thread50, thread99),
    );
    emit(
        &Figure::new(
            "spawn-process",
            "spawn-and-wait of `true` through the spawner process",
        )
        .timing(process50, process99)
        .against(
            "spawn-thread",
            process50.as_secs_f64() / thread50.as_secs_f64(),
        )
        .target(Metric::Ratio, Op::AtMost, 1.25, Unit::Times),
    );
}

/// A script of 2,000 short execs with every exec judged (a judge that
/// allows at once: the mechanism's cost, the notification's round trip
/// and the reads of `/proc`) against the same without the filter,
/// alternating (docs/decisions/0018).
#[cfg(target_os = "linux")]
fn exec_check(runtime: &tokio::runtime::Runtime, rounds: usize) {
    use std::sync::Arc;
    const SCRIPT: &str = "for i in $(seq 2000); do /bin/true; done";
    let run = |judged: bool| {
        let mut spec = spec(SCRIPT);
        if judged {
            spec.exec_judge = Some(shell_runtime::ExecJudge(Arc::new(|_| {
                shell_runtime::ExecVerdict::Allow
            })));
        }
        let t = Instant::now();
        runtime.block_on(async { ShellProcess::spawn(spec).await.unwrap().wait().await });
        t.elapsed()
    };
    run(false);
    run(true);
    let mut plain = Vec::new();
    let mut judged = Vec::new();
    for _ in 0..rounds {
        plain.push(run(false));
        judged.push(run(true));
    }
    let (plain50, plain99) = (percentile(&mut plain, 50), percentile(&mut plain, 99));
    let (judged50, judged99) = (percentile(&mut judged, 50), percentile(&mut judged, 99));
    emit(
        &Figure::new(
            "execs-plain",
            "a script of 2,000 execs of /bin/true, unjudged",
        )
        .timing(plain50, plain99),
    );
    emit(
        &Figure::new(
            "execs-judged",
            "the same with every exec stopped by seccomp and judged (allow)",
        )
        .timing(judged50, judged99)
        .against(
            "execs-plain",
            judged50.as_secs_f64() / plain50.as_secs_f64(),
        )
        .target(Metric::Ratio, Op::AtMost, 1.10, Unit::Times),
    );
}

fn background_reads(runtime: &tokio::runtime::Runtime, reads: usize) {
    let mut samples = Vec::with_capacity(reads);
    runtime.block_on(async {
        let shell = ShellProcess::spawn(spec(
            "while :; do echo \"progress line $RANDOM of a running build\"; sleep 0.0002; done",
        ))
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut bytes = 0;
        for _ in 0..reads {
            let t = Instant::now();
            let output = shell.read_unseen();
            samples.push(t.elapsed());
            bytes += output.stdout.after_gap.len() + output.stdout.before_gap.len();
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        shell.terminate(Duration::from_secs(1)).await;
        assert!(bytes > 0);
    });
    let p50 = percentile(&mut samples, 50);
    let p99 = percentile(&mut samples, 99);
    emit(
        &Figure::new(
            "background-read",
            "read new output of a running background shell",
        )
        .timing(p50, p99)
        .target(Metric::P99, Op::Below, 1.0, Unit::Milliseconds),
    );
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    // Any other argument names the groups to run (`capture`, `spawn`, ...).
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let wanted = |group: &str| only.is_empty() || only.iter().any(|name| name == group);
    // Before the runtime's threads: the fork needs a single thread.
    #[cfg(target_os = "linux")]
    let spawner = only.iter().any(|name| name == "spawner");
    #[cfg(target_os = "linux")]
    if spawner {
        shell_runtime::start_spawner_process().expect("the spawner process starts");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if wanted("spawn") {
        spawn_and_wait(&runtime, if quick { 100 } else { 1000 });
    }
    if wanted("capture") {
        capture(
            &runtime,
            if quick { 64 << 20 } else { 1 << 30 },
            if quick { 2 } else { 5 },
        );
    }
    if wanted("reads") {
        background_reads(&runtime, if quick { 1000 } else { 10_000 });
    }
    if wanted("concurrent") {
        concurrent_shells(&runtime, if quick { 2 } else { 5 });
    }
    if wanted("sandbox") {
        sandbox_cost(&runtime, if quick { 100 } else { 1000 });
    }
    #[cfg(target_os = "linux")]
    if spawner {
        spawner_process(&runtime, if quick { 200 } else { 1000 });
    }
    if wanted("contain") {
        contain_cost(&runtime, if quick { 100 } else { 1000 });
    }
    #[cfg(target_os = "linux")]
    if wanted("exec-check") {
        exec_check(&runtime, if quick { 3 } else { 11 });
    }
}

/// Spawn-and-wait of `true` under `--sandbox contain` (the default: PID,
/// mount and IPC namespaces with the in-memory init, a fresh `/proc`, its
/// own devpts, `/sys/fs/cgroup` read-only, the capability cut and the
/// always-on seccomp program) against `--sandbox off`, alternating.
fn contain_cost(runtime: &tokio::runtime::Runtime, rounds: usize) {
    let confinement = match shell_runtime::Confinement::prepare(&shell_runtime::ConfinementSpec {
        isolate_processes: true,
        ..shell_runtime::ConfinementSpec::default()
    }) {
        Ok(confinement) => std::sync::Arc::new(confinement),
        Err(error) => {
            let reason = error.to_string();
            emit(&Figure::skipped(
                "spawn-off",
                "spawn and wait of `true`, --sandbox off",
                &reason,
            ));
            emit(&Figure {
                baseline: Some("spawn-off".to_owned()),
                ..Figure::skipped("spawn-contained", "contained spawn and wait", reason)
            });
            return;
        }
    };
    let mut off = Vec::new();
    let mut on = Vec::new();
    for round in 0..rounds + 20 {
        let t = Instant::now();
        runtime.block_on(async {
            ShellProcess::spawn(spec("true"))
                .await
                .unwrap()
                .wait()
                .await
        });
        let plain = t.elapsed();
        let mut contained = spec("true");
        contained.confinement = Some(std::sync::Arc::clone(&confinement));
        let t = Instant::now();
        runtime.block_on(async { ShellProcess::spawn(contained).await.unwrap().wait().await });
        if round >= 20 {
            off.push(plain);
            on.push(t.elapsed());
        }
    }
    save_samples("spawn-contained", &on);
    let (off50, off99) = (percentile(&mut off, 50), percentile(&mut off, 99));
    let (on50, on99) = (percentile(&mut on, 50), percentile(&mut on, 99));
    emit(&Figure::new("spawn-off", "spawn and wait of `true`, --sandbox off").timing(off50, off99));
    emit(
        &Figure::new(
            "spawn-contained",
            "the same under --sandbox contain (PID, mount and IPC namespaces, fresh /proc, own devpts, read-only cgroup fs, capability cut, seccomp)",
        )
        .timing(on50, on99)
        .against("spawn-off", on50.as_secs_f64() / off50.as_secs_f64())
        .target(Metric::Ratio, Op::AtMost, 1.25, Unit::Times),
    );
}
