//! `cargo xtask bench [--quick]`: runs every benchmark of the workspace,
//! each against its own baseline measured in the same run, and rewrites
//! docs/BENCHMARKS.md (machine facts, the tables, the targets missed, the
//! hand-written notes) and docs/benchmarks.svg (latency distributions).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, bail};

/// One benchmark binary and the section it fills.
struct Suite {
    title: &'static str,
    package: &'static str,
    bench: &'static str,
    about: &'static str,
}

const SUITES: &[Suite] = &[
    Suite {
        title: "Policy analysis (exec-policy)",
        package: "exec-policy",
        bench: "analysis",
        about: "Median and p99 per check over batches of about 1 ms. The 10 KB script's baseline is brush-parser's own parse of it.",
    },
    Suite {
        title: "Process mechanism (shell-runtime)",
        package: "shell-runtime",
        bench: "runtime",
        about: "Spawn-and-wait alternates with a bare `bash -c true`; capture runs against `cat FILE | cat > /dev/null`; reads are `read_unseen` on a busy background shell; the sandbox row compares with the sandbox off.",
    },
    Suite {
        title: "MCP server (agent-exec)",
        package: "agent-exec",
        bench: "mcp_roundtrip",
        about: "A raw JSON-RPC client on the server's stdio; round trips alternate with a bare `bash -c true`; peak RSS is the server's `VmHWM`.",
    },
    Suite {
        title: "Scaling (exec-tools)",
        package: "exec-tools",
        bench: "scaling",
        about: "How cost grows with work; the growth column names what was observed between the first and the last figure.",
    },
];

/// The series drawn in the chart: (samples file, label).
const SERIES: &[(&str, &str)] = &[
    ("spawn-bare", "bare bash -c true (baseline)"),
    ("spawn-shell-runtime", "ShellProcess spawn + wait"),
    ("spawn-sandboxed", "the same, sandboxed"),
    ("mcp-bare", "bare bash -c true (MCP run baseline)"),
    ("mcp-round-trip", "MCP tools/call Bash true"),
];

pub(crate) fn run(root: &Path, quick: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    let samples = root.join("target").join("bench-samples");
    let _ = std::fs::remove_dir_all(&samples);
    std::fs::create_dir_all(&samples).context("creating target/bench-samples")?;
    let mut sections = String::new();
    let mut missed = Vec::new();
    for suite in SUITES {
        let suite_started = Instant::now();
        eprintln!(
            "xtask bench: {} ({} --bench {})",
            suite.title, suite.package, suite.bench
        );
        // The capture benchmarks leave gigabytes of dirty pages (spill files)
        // whose write-back would land in the next suite's timings.
        flush_writes();
        let rows = run_suite(root, suite, quick, &samples)?;
        eprintln!(
            "xtask bench: {} took {:.0?}",
            suite.title,
            suite_started.elapsed()
        );
        missed.extend(missed_targets(&rows));
        let _ = write!(
            sections,
            "## {}\n\n`cargo bench -p {} --bench {}`{}. {}\n\n{}\n",
            suite.title,
            suite.package,
            suite.bench,
            if quick { " (`-- --quick`)" } else { "" },
            suite.about,
            rows.join("\n")
        );
        sections.push('\n');
    }
    let chart = chart(&samples);
    std::fs::write(root.join("docs").join("benchmarks.svg"), &chart)
        .context("writing docs/benchmarks.svg")?;
    let notes =
        std::fs::read_to_string(root.join("docs").join("benchmarks-notes.md")).unwrap_or_default();
    let report = report(quick, &sections, &missed, &notes);
    std::fs::write(root.join("docs").join("BENCHMARKS.md"), report)
        .context("writing docs/BENCHMARKS.md")?;
    eprintln!(
        "xtask bench: wrote docs/BENCHMARKS.md and docs/benchmarks.svg in {:.0?}; {} target(s) missed",
        started.elapsed(),
        missed.len()
    );
    Ok(())
}

/// Writes dirty pages back (`sync`) so one suite's I/O is not timed in the next.
#[expect(
    clippy::disallowed_methods,
    reason = "xtask runs sync(1), as a developer would"
)]
fn flush_writes() {
    if let Err(error) = std::process::Command::new("sync").status() {
        eprintln!("xtask bench: sync failed ({error}); timings may include write-back");
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "xtask drives cargo, as a developer would"
)]
fn run_suite(
    root: &Path,
    suite: &Suite,
    quick: bool,
    samples: &Path,
) -> anyhow::Result<Vec<String>> {
    let mut command =
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .current_dir(root)
        .args([
            "bench",
            "--quiet",
            "-p",
            suite.package,
            "--bench",
            suite.bench,
        ])
        .env("AGENT_EXEC_BENCH_SAMPLES", samples);
    if quick {
        command.args(["--", "--quick"]);
    }
    let output = command
        .output()
        .with_context(|| format!("running the {} benchmark", suite.bench))?;
    if !output.status.success() {
        bail!(
            "the {} benchmark failed:\n{}",
            suite.bench,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.starts_with('|'))
        .map(str::to_owned)
        .collect())
}

fn report(quick: bool, sections: &str, missed: &[String], notes: &str) -> String {
    let mut text = String::from("# Benchmarks\n\n");
    let _ = writeln!(
        text,
        "Generated by `cargo xtask bench{}`; edit docs/benchmarks-notes.md, not this file.\n",
        if quick { " --quick" } else { "" }
    );
    let _ = writeln!(text, "Machine: {}.\n", machine());
    text.push_str(
        "Every figure is reported with the baseline it is compared to, measured in the same run, \
         and with the target it is held to. Timings are medians and 99th percentiles.\n\n",
    );
    text.push_str("## Targets missed\n\n");
    if missed.is_empty() {
        text.push_str("None in this run.\n\n");
    } else {
        for line in missed {
            let _ = writeln!(text, "- {line}");
        }
        text.push_str("\nWhy, and what was tried: see the notes at the end.\n\n");
    }
    text.push_str(sections);
    text.push_str("## Latency distributions\n\n![Latency distributions: p1 to p99 whiskers, p25 to p75 box, median line](benchmarks.svg)\n\n");
    if !notes.trim().is_empty() {
        text.push_str(notes.trim_end());
        text.push('\n');
    }
    text
}

#[expect(
    clippy::disallowed_methods,
    reason = "asks rustc for its version, as a developer would"
)]
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").map_or_else(
        |_| std::env::consts::OS.to_owned(),
        |text| format!("Linux {}", text.trim()),
    );
    let rustc = std::process::Command::new("rustc")
        .arg("-V")
        .output()
        .ok()
        .map_or_else(
            || "rustc (unknown)".to_owned(),
            |output| String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        );
    format!("{cores} cores ({model}), {kernel}, {rustc}, release profile")
}

/// Rows whose measured value breaks the target in their last column.
/// Targets read like `<= 1.10x`, `p50 <= 1.5x`, `>= 0.5x`, `< 32 MiB`,
/// `median < 20 µs`, `p99 < 1 ms`, joined by `and`; others are not checked.
fn missed_targets(rows: &[String]) -> Vec<String> {
    let mut missed = Vec::new();
    for row in rows {
        // `\|` is a pipe inside a cell (a shell pipeline in a figure's name).
        let row = row.trim().replace("\\|", "\u{1}");
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() < 5 || cells[0] == "figure" || cells[0].starts_with("---") {
            continue;
        }
        let (figure, median, p99, ratio, target) =
            (cells[0], cells[1], cells[2], cells[3], cells[4]);
        for part in target.split(" and ") {
            let Some((column, op, limit, unit)) = parse_target(part) else {
                continue;
            };
            let measured = match (unit.as_str(), column) {
                ("x", _) => leading_number(ratio),
                ("MiB", _) => leading_number(median),
                (_, "p99") => duration_seconds(p99),
                _ => duration_seconds(median),
            };
            let limit_value = match unit.as_str() {
                "x" | "MiB" => Some(limit),
                other => unit_seconds(other).map(|scale| limit * scale),
            };
            let (Some(measured), Some(limit_value)) = (measured, limit_value) else {
                continue;
            };
            let ok = match op.as_str() {
                "<=" => measured <= limit_value,
                "<" => measured < limit_value,
                ">=" => measured >= limit_value,
                _ => true,
            };
            if !ok {
                let shown = if unit == "x" {
                    ratio
                } else if column == "p99" {
                    p99
                } else {
                    median
                };
                missed.push(format!(
                    "{}: {shown}, target {part}",
                    figure.replace('\u{1}', "\\|")
                ));
            }
        }
    }
    missed
}

/// `[column] op number unit`, e.g. `p50 <= 1.5x` or `< 32 MiB`.
fn parse_target(text: &str) -> Option<(&'static str, String, f64, String)> {
    let text = text.trim();
    let (column, rest) = if let Some(rest) = text.strip_prefix("p99 ") {
        ("p99", rest)
    } else if let Some(rest) = text
        .strip_prefix("p50 ")
        .or_else(|| text.strip_prefix("median "))
    {
        ("median", rest)
    } else {
        ("median", text)
    };
    let op = ["<=", ">=", "<"]
        .into_iter()
        .find(|op| rest.starts_with(op))?;
    let rest = rest[op.len()..].trim();
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let limit: f64 = rest[..number_end].parse().ok()?;
    let unit = rest[number_end..]
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned();
    Some((column, op.to_owned(), limit, unit))
}

fn leading_number(text: &str) -> Option<f64> {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    text[..end].parse().ok()
}

fn unit_seconds(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1e-9),
        "µs" | "us" => Some(1e-6),
        "ms" => Some(1e-3),
        "s" => Some(1.0),
        _ => None,
    }
}

/// `1.6ms`, `500.0ns`, `1.2µs`, `1s` as seconds.
fn duration_seconds(text: &str) -> Option<f64> {
    let text = text.split_whitespace().next()?;
    let number = leading_number(text)?;
    let unit = text.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    unit_seconds(unit).map(|scale| number * scale)
}

/// Horizontal box plots (p1-p99 whiskers, p25-p75 box, median) of the
/// sampled series, on one millisecond axis.
fn chart(samples: &Path) -> String {
    let mut series = Vec::new();
    for (file, label) in SERIES {
        let Ok(text) = std::fs::read_to_string(samples.join(format!("{file}.txt"))) else {
            continue;
        };
        let mut values: Vec<f64> = text
            .lines()
            .filter_map(|line| line.trim().parse::<f64>().ok())
            .map(|ns| ns / 1e6)
            .collect();
        if values.is_empty() {
            continue;
        }
        values.sort_by(f64::total_cmp);
        let at = |pct: usize| values[(values.len() * pct / 100).min(values.len() - 1)];
        series.push((*label, [at(1), at(25), at(50), at(75), at(99)]));
    }
    let width = 760.0;
    let left = 260.0;
    let plot = width - left - 30.0;
    let row = 34.0;
    let height = 60.0 + row * series.len() as f64;
    let max = series
        .iter()
        .map(|(_, p)| p[4])
        .fold(0.0_f64, f64::max)
        .max(0.001)
        * 1.05;
    let x = |ms: f64| left + ms / max * plot;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"18\" font-size=\"14\">Latency per call (ms): whiskers p1-p99, box p25-p75, line = median</text>\n"
    );
    for (index, (label, p)) in series.iter().enumerate() {
        let y = 40.0 + row * index as f64;
        let mid = y + 10.0;
        let _ = write!(
            svg,
            "<text x=\"10\" y=\"{}\">{label}</text>\n\
             <line x1=\"{:.1}\" y1=\"{mid}\" x2=\"{:.1}\" y2=\"{mid}\" stroke=\"#555\"/>\n\
             <rect x=\"{:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"20\" fill=\"#9ecae1\" stroke=\"#3182bd\"/>\n\
             <line x1=\"{:.1}\" y1=\"{y}\" x2=\"{:.1}\" y2=\"{}\" stroke=\"#08306b\" stroke-width=\"2\"/>\n\
             <text x=\"{:.1}\" y=\"{}\" fill=\"#08306b\">{:.2}</text>\n",
            mid + 4.0,
            x(p[0]),
            x(p[4]),
            x(p[1]),
            (x(p[3]) - x(p[1])).max(1.0),
            x(p[2]),
            x(p[2]),
            y + 20.0,
            x(p[4]) + 4.0,
            mid + 4.0,
            p[2],
        );
    }
    let axis_y = 40.0 + row * series.len() as f64 + 4.0;
    let _ = writeln!(
        svg,
        "<line x1=\"{left}\" y1=\"{axis_y}\" x2=\"{}\" y2=\"{axis_y}\" stroke=\"black\"/>",
        left + plot
    );
    for tick in 0..=4 {
        let ms = max * f64::from(tick) / 4.0;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{ms:.2}</text>",
            x(ms),
            axis_y + 14.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_and_checked() {
        let rows = vec![
            "| figure | median | p99 | ratio | target |".to_owned(),
            "| spawn | 1.6ms | 2.0ms | 1.20x | <= 1.10x |".to_owned(),
            "| capture | 641ms | | 1.14x throughput | >= 0.5x |".to_owned(),
            "| rss | 8.3 MiB | | | < 32 MiB |".to_owned(),
            "| reads | 500.0ns | 2.0µs | | p99 < 1 ms |".to_owned(),
            "| check script | 1.4ms | 2.4ms | | < 1 ms and <= 1.5x parse |".to_owned(),
            "| ratio | 1.41x | | | <= 1.5x |".to_owned(),
        ];
        let missed = missed_targets(&rows);
        assert_eq!(
            missed,
            [
                "spawn: 1.20x, target <= 1.10x",
                "check script: 1.4ms, target < 1 ms"
            ]
        );
    }

    #[test]
    fn durations_parse_in_every_unit() {
        assert_eq!(duration_seconds("1.5ms"), Some(0.0015));
        assert!(duration_seconds("500.0ns").is_some_and(|s| (s - 5e-7).abs() < 1e-15));
        assert!(duration_seconds("2.0µs").is_some_and(|s| (s - 2e-6).abs() < 1e-12));
        assert_eq!(duration_seconds("1s (1016 MiB/s)"), Some(1.0));
    }

    #[test]
    fn the_chart_is_svg_even_without_samples() {
        let dir = std::env::temp_dir().join(format!("xtask-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("spawn-bare.txt"), "1000000\n1200000\n3000000\n").expect("write");
        let svg = chart(&dir);
        assert!(svg.starts_with("<svg") && svg.contains("bare bash -c true"));
        std::fs::remove_dir_all(dir).expect("cleanup");
    }
}
