//! This build's MCP round trip against another build of agent-exec, in the
//! same run, calls alternating between the two servers (which goes first
//! alternates too): `Bash true` and a 29,990-character answer. It measures
//! what a change to the answer's shape costs against the build before it.
//!
//! `AGENT_EXEC_BASE=/path/to/other/agent-exec cargo bench -p agent-exec
//! --bench answer_shape_ab` (`-- --quick`: 100 calls of each;
//! `AGENT_EXEC_AB_CALLS=N`: N calls of each). Without
//! `AGENT_EXEC_BASE` it reports itself skipped. Not part of `cargo xtask
//! bench`: it needs a second build.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a benchmark starts the binaries directly, and may stop on a broken setup"
)]

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Server, bash};
use test_support::bench::{Figure, Metric, Op, Unit, emit};
use test_support::percentile;

fn main() {
    let Some(base) = std::env::var_os("AGENT_EXEC_BASE").map(PathBuf::from) else {
        emit(&Figure::skipped(
            "shape-ab",
            "this build against AGENT_EXEC_BASE",
            "AGENT_EXEC_BASE is not set",
        ));
        return;
    };
    let quick = std::env::args().any(|arg| arg == "--quick");
    let calls = std::env::var("AGENT_EXEC_AB_CALLS")
        .ok()
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(if quick { 100 } else { 500 });
    let dir = tempfile::tempdir().unwrap();
    let mut old = Server::start_binary(&base, dir.path());
    let mut new = Server::start(dir.path());
    let cases = [
        ("true", "`Bash true`", bash("true")),
        (
            "30k",
            "a 29,990-character answer",
            bash("head -c 29990 /dev/zero | tr '\\0' x"),
        ),
    ];
    for (id, name, call) in &cases {
        for _ in 0..20 {
            old.call(call);
            new.call(call);
        }
        let mut old_times = Vec::with_capacity(calls);
        let mut new_times = Vec::with_capacity(calls);
        for round in 0..calls {
            let timed = |server: &mut Server, times: &mut Vec<Duration>| {
                let t = Instant::now();
                let answer: Value = server.call(call);
                times.push(t.elapsed());
                assert_eq!(answer["result"]["isError"], false, "{answer}");
            };
            if round % 2 == 0 {
                timed(&mut old, &mut old_times);
                timed(&mut new, &mut new_times);
            } else {
                timed(&mut new, &mut new_times);
                timed(&mut old, &mut old_times);
            }
        }
        // Each round's two calls ran back to back: their ratio cancels
        // most of what other load on the machine does to both.
        let mut paired: Vec<f64> = old_times
            .iter()
            .zip(&new_times)
            .map(|(old, new)| new.as_secs_f64() / old.as_secs_f64())
            .collect();
        paired.sort_by(f64::total_cmp);
        let paired50 = paired[paired.len() / 2];
        let (old50, old99) = (
            percentile(&mut old_times, 50),
            percentile(&mut old_times, 99),
        );
        let (new50, new99) = (
            percentile(&mut new_times, 50),
            percentile(&mut new_times, 99),
        );
        let base_id = format!("shape-ab-{id}-base");
        emit(
            &Figure::new(&base_id, format!("{name}, AGENT_EXEC_BASE, {calls} calls"))
                .timing(old50, old99),
        );
        emit(
            &Figure::new(
                format!("shape-ab-{id}"),
                format!("{name}, this build, {calls} calls"),
            )
            .timing(new50, new99)
            .against(base_id.clone(), new50.as_secs_f64() / old50.as_secs_f64())
            .target(Metric::Ratio, Op::AtMost, 1.05, Unit::Times),
        );
        emit(
            &Figure::new(
                format!("shape-ab-{id}-paired"),
                format!("{name}: the median of each round's this-build/base ratio"),
            )
            .against(base_id, paired50)
            .target(Metric::Ratio, Op::AtMost, 1.05, Unit::Times),
        );
    }
    old.stop();
    new.stop();
}
