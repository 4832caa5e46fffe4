//! Analysis cost: typical agent commands, and a 10 KB script against the
//! parser's own parse time of it (the baseline, measured in the same run).
//!
//! Run with `cargo bench -p exec-policy --bench analysis`. A small harness
//! of our own (docs/decisions/0007) times many iterations and reports the
//! median and p99 per call, one JSON figure per line for `cargo xtask bench`.
//!
//! `-- --repeat parse|check N` runs only the parse or the check of the
//! 10 KB script N times and prints nothing: for counting instructions,
//! which a loaded machine does not disturb as it does timings. The cost
//! of one is the difference between two counts over the difference in N
//! (start-up and the first call's warm-up cancel out):
//! `valgrind --tool=callgrind --callgrind-out-file=c1 target/release/deps/analysis-* --repeat check 1`,
//! then with `11`, and (check 11 - check 1) / 10 against the same for
//! parse (docs/benchmarks-notes.md). The parse budgets are scaled up in
//! this mode (`exec_policy::scale_parse_budgets`), as valgrind is slow.

use std::hint::black_box;
use std::time::{Duration, Instant};

use brush_parser::{Parser, ParserOptions};
use exec_policy::{Analyzer, AnalyzerConfig, Policy};
use test_support::bench::{Figure, Metric, Op, Unit, emit};

const TYPICAL: &[&str] = &[
    "git status",
    "ls -la",
    "cargo test --workspace 2>&1 | tail -50",
    r#"cd src && grep -rn "TODO" . | head -20"#,
    "npm install && npm test",
    "python3 -m pytest -x -q tests/",
    r#"git add -A && git commit -m "Fix the parser's handling of quotes""#,
    "find . -name '*.rs' | xargs wc -l | sort -n | tail",
    "rm -rf target/debug/incremental",
    r#"for f in src/*.py; do python3 -m black "$f"; done"#,
];

/// Times `f` over batches and returns (median, p99) per call.
fn measure(mut f: impl FnMut(), target: Duration) -> (Duration, Duration) {
    // Warm up, then size batches so each takes about a millisecond.
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed() < Duration::from_millis(50) {
        f();
        calls += 1;
    }
    let per_call = start.elapsed() / calls.max(1);
    let batch =
        (Duration::from_millis(1).as_nanos() / per_call.as_nanos().max(1)).clamp(1, 10_000) as u32;
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < target || samples.len() < 20 {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        samples.push(t.elapsed() / batch);
    }
    samples.sort();
    let median = samples[samples.len() / 2];
    let p99 = samples[(samples.len() * 99 / 100).min(samples.len() - 1)];
    (median, p99)
}

/// A realistic script of about 10 KB: functions, conditionals, loops,
/// pipelines, quoting and substitutions.
fn ten_kb_script() -> String {
    let block = r#"
build_one() {
  local dir="$1"
  if [ -d "$dir/src" ]; then
    (cd "$dir" && cargo build --release 2>&1 | tee "build-$(date +%s).log")
  else
    echo "skipping $dir: no sources" >&2
  fi
}
for d in crates/*/; do
  build_one "$d" || { echo "failed: $d"; exit 1; }
done
grep -rn 'TODO\|FIXME' src | awk -F: '{print $1}' | sort | uniq -c | sort -rn | head -20
case "$MODE" in
  fast) export OPT=1 ;;
  slow) export OPT=3 ;;
  *) echo "unknown mode" ;;
esac
find . -name '*.tmp' -mtime +3 -print0 | xargs -0 rm -f
"#;
    let mut script = String::new();
    while script.len() < 10 * 1024 {
        script.push_str(block);
    }
    script
}

/// `--repeat parse|check N`: the operation on the 10 KB script, N times.
fn repeat(what: &str, times: usize) {
    // Valgrind is slow: the budgets that guard against a hung parser
    // would send the script to the fallback.
    exec_policy::scale_parse_budgets(1000);
    let script = ten_kb_script();
    let analyzer = Analyzer::new(AnalyzerConfig {
        home: Some("/home/agent".into()),
        ..AnalyzerConfig::default()
    });
    let options = ParserOptions::default();
    let mut fell_back = 0;
    for _ in 0..times {
        match what {
            "parse" => drop(black_box(
                Parser::new(black_box(script.as_bytes()), &options).parse_program(),
            )),
            _ => fell_back += usize::from(analyzer.check(black_box(&script)).used_fallback()),
        }
    }
    // A check that still took the fallback is not the analysis's count.
    assert_eq!(
        fell_back, 0,
        "checks that ran out of parse time, of {times}"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|arg| arg == "--repeat") {
        let what = args.get(at + 1).map_or("check", String::as_str);
        let times = args.get(at + 2).and_then(|n| n.parse().ok()).unwrap_or(1);
        repeat(what, times);
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let target = if quick {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(2)
    };
    let analyzer = Analyzer::new(AnalyzerConfig {
        home: Some("/home/agent".into()),
        ..AnalyzerConfig::default()
    });

    let mut medians = Vec::new();
    for (index, command) in TYPICAL.iter().enumerate() {
        let (median, p99) = measure(
            || drop(black_box(analyzer.check(black_box(command)))),
            target,
        );
        medians.push(median);
        emit(
            &Figure::new(
                format!("check-typical-{}", index + 1),
                format!("check `{command}`"),
            )
            .timing(median, p99)
            .target(Metric::Median, Op::Below, 20.0, Unit::Microseconds),
        );
    }
    medians.sort();
    emit(
        &Figure::new("typical-median", "typical commands, median of medians")
            .median(medians[medians.len() / 2])
            .target(Metric::Median, Op::Below, 20.0, Unit::Microseconds),
    );

    // The same commands under a policy file of 100 `[[rule]]` entries
    // (half by program and arguments, half by regex; none matches them).
    let mut text = String::new();
    for i in 0..50 {
        text.push_str(&format!(
            "[[rule]]\ndecision = \"ask\"\nprogram = \"tool{i}\"\nargs_prefix = [\"deploy\"]\nargs_any = [\"--force\", \"-f\"]\n\n[[rule]]\ndecision = \"deny\"\nregex = \"other{i}\\\\s+(apply|destroy)\"\n\n"
        ));
    }
    #[expect(
        clippy::expect_used,
        reason = "the bench's own policy text; a bench cannot go on without it"
    )]
    let policy =
        Policy::parse(&text, std::path::Path::new("bench.toml")).expect("the bench policy loads");
    let mut config = policy.analyzer;
    config.home = Some("/home/agent".into());
    let with_rules = Analyzer::new(config);
    let mut medians = Vec::new();
    for command in TYPICAL {
        let (median, _) = measure(
            || drop(black_box(with_rules.check(black_box(command)))),
            target,
        );
        medians.push(median);
    }
    medians.sort();
    emit(
        &Figure::new(
            "typical-median-100-rules",
            "typical commands under a 100-rule policy file, median of medians",
        )
        .median(medians[medians.len() / 2])
        .target(Metric::Median, Op::Below, 30.0, Unit::Microseconds),
    );

    let script = ten_kb_script();
    let options = ParserOptions::default();
    let (parse, parse_p99) = measure(
        || {
            drop(black_box(
                Parser::new(black_box(script.as_bytes()), &options).parse_program(),
            ));
        },
        target,
    );
    let (analysis, analysis_p99) = measure(
        || drop(black_box(analyzer.check(black_box(&script)))),
        target,
    );
    emit(
        &Figure::new(
            "parse-script",
            format!("parse only, {} B script", script.len()),
        )
        .timing(parse, parse_p99),
    );
    emit(
        &Figure::new("check-script", format!("check, {} B script", script.len()))
            .timing(analysis, analysis_p99)
            .against("parse-script", analysis.as_secs_f64() / parse.as_secs_f64())
            .target(Metric::Median, Op::Below, 1.0, Unit::Milliseconds)
            .target(Metric::Ratio, Op::AtMost, 1.5, Unit::Times),
    );
}
