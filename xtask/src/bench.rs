//! `cargo xtask bench [--quick]`: runs every benchmark of the workspace,
//! each against its own baseline measured in the same run, and rewrites
//! docs/BENCHMARKS.md (machine facts, the tables, the targets missed, the
//! hand-written notes) and docs/benchmarks.svg (latency distributions).
//!
//! A benchmark prints figures, one JSON object per line
//! (`test_support::bench::Figure`), and nothing else on stdout. Everything
//! here reads that data: a line that is not a figure, a suite without
//! figures, a missing expected figure or a target that cannot be checked
//! is an error, never a row left out.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use test_support::bench::{Compared, Figure, Metric, Target, Unit};

/// One benchmark binary and the section it fills.
struct Suite {
    title: &'static str,
    package: &'static str,
    bench: &'static str,
    about: &'static str,
    layout: Layout,
    /// Ids of the figures every run must produce.
    expected: &'static [&'static str],
    /// Ids of the figures a full run (not `--quick`) must also produce.
    expected_full: &'static [&'static str],
}

/// The columns of a suite's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `figure | median | p99 | ratio | target`.
    Targets,
    /// `figure | median | p99 | per unit | growth`.
    Scaling,
}

const SUITES: &[Suite] = &[
    Suite {
        title: "Policy analysis (exec-policy)",
        package: "exec-policy",
        bench: "analysis",
        about: "Median and p99 per check over batches of about 1 ms. The 10 KB script's baseline is brush-parser's own parse of it.",
        layout: Layout::Targets,
        expected: &[
            "check-typical-1",
            "check-typical-2",
            "check-typical-3",
            "check-typical-4",
            "check-typical-5",
            "check-typical-6",
            "check-typical-7",
            "check-typical-8",
            "check-typical-9",
            "check-typical-10",
            "typical-median",
            "typical-median-100-rules",
            "parse-script",
            "check-script",
        ],
        expected_full: &[],
    },
    Suite {
        title: "Process mechanism (shell-runtime)",
        package: "shell-runtime",
        bench: "runtime",
        about: "Spawn-and-wait alternates with a bare `bash -c true`; capture runs against `cat FILE | cat > /dev/null`, and with redaction against capture without; reads are `read_unseen` on a busy background shell; the sandbox row compares with the sandbox off.",
        layout: Layout::Targets,
        expected: &[
            "spawn-bare",
            "spawn",
            "capture-bare",
            "capture",
            "capture-redacted",
            "peak-rss",
            "background-read",
            "concurrent-bare",
            "concurrent",
            "spawn-unconfined",
            "spawn-sandboxed",
        ],
        expected_full: &[],
    },
    Suite {
        title: "MCP server (agent-exec)",
        package: "agent-exec",
        bench: "mcp_roundtrip",
        about: "A raw JSON-RPC client on the server's stdio; round trips alternate with a bare `bash -c true` (`true` runs without the wrapper that carries `cd`/`export`; `cd .` runs in it); peak RSS is the server's `VmHWM`. The soak is rounds of six calls (foreground success and failure, a background shell read to its end, one killed) and, every fourth round, a tty `cat` session (started, a line written and read back, killed), measured after 140 rounds: 20,000 calls, p99 per window of 1,000 (`--quick`: 1,200 calls, windows of 200); 256 background shells start on a server run under `prlimit --nofile=1024:HARD`, then a foreground `echo ok`; the idle shells each print 3 MB and sleep, unread, on a server of their own; start-up is spawn to the `initialize` answer, alternating with a bare `bash -c true`.",
        layout: Layout::Targets,
        expected: &[
            "mcp-bare",
            "mcp-round-trip",
            "mcp-round-trip-wrapped",
            "ask-refused",
            "rss-foreground",
            "rss-background",
            "soak-rss",
            "soak-fds",
            "soak-p99",
            "limit-shells",
            "idle-server-rss",
            "idle-shells-peak-rss",
            "idle-shells-accepted",
            "idle-shells-after",
            "startup-bare",
            "startup",
            "startup-secrets",
        ],
        expected_full: &[],
    },
    Suite {
        title: "Interactive sessions (agent-exec)",
        package: "agent-exec",
        bench: "tty",
        about: "The same raw JSON-RPC client on the server's stdio. The echo is timed from sending `WriteStdin {input: \"line\\n\", wait_ms: 0}` to a tty `cat` (sent again at once if the answer is \"not waiting for input\", counted in the row) until the line has been in the answers twice (the terminal's echo, then `cat`'s copy), polling `BashOutput` without a wait; `WriteStdin`'s own wait for input after 200 ms of quiet is not used, since it would add at least 200 ms to every line. Its baseline is the same line written to `cat` on a bare pseudo-terminal the benchmark opens (`posix_openpt`), read back twice, alternating line by line. `Bash true` with 64 idle tty `bash -i` at a prompt (each screen read once) alternates in rounds with `Bash true` with none, on the same server (open 64, time, KillShell all, time again); fds are counted once all are killed, leaving out the 4 to 8 cgroups the spawn pool keeps open; memory per shell is the server's RSS delta with the 64 open, over 64.",
        layout: Layout::Targets,
        expected: &[
            "pty-bare-echo",
            "mcp-write-stdin-echo",
            "tty-bash-none",
            "tty-bash-64",
            "tty-fds-after",
            "memory-per-idle-tty-shell",
        ],
        expected_full: &[],
    },
    Suite {
        title: "Policy at every exec (exec-tools)",
        package: "exec-tools",
        bench: "exec_check",
        about: "The same `Bash` calls on two environments of one process, one judging every exec of the command's tree (seccomp user notification and the real analysis, docs/decisions/0018) and one not, alternating call by call after a first round that warms both. The 5,000 programs are `/bin/true`, `/bin/echo \"$i\"`, `/usr/bin/test -d src` and `/bin/cat /dev/null` 1,250 times (the `echo` a new argument each time); `make -B -j2` rebuilds 13 C files with gcc. The MCP server adds the same framing to both, so `Bash true`'s difference is what an MCP round trip of it gains.",
        layout: Layout::Targets,
        expected: &[
            "execs-5000-unchecked",
            "execs-5000-checked",
            "execs-5000-server-cpu",
            "make-j2-unchecked",
            "make-j2-checked",
            "make-j2-server-cpu",
            "bash-true-unchecked",
            "bash-true-checked",
            "bash-true-server-cpu",
        ],
        expected_full: &[],
    },
    Suite {
        title: "Scaling (exec-tools)",
        package: "exec-tools",
        bench: "scaling",
        about: "How cost grows with work; the growth column names what was observed between the first and the last figure.",
        layout: Layout::Scaling,
        expected: &[
            "bash-1-shells",
            "bash-10-shells",
            "bash-100-shells",
            "memory-per-idle-shell",
            "bash-growth",
            "capture-1-mib",
            "capture-growth",
        ],
        expected_full: &[
            "bash-1000-shells",
            "capture-10-mib",
            "capture-100-mib",
            "capture-1024-mib",
        ],
    },
];

/// The series drawn in the chart: (samples file, label).
const SERIES: &[(&str, &str)] = &[
    ("spawn-bare", "bare bash -c true (baseline)"),
    ("spawn-shell-runtime", "ShellProcess spawn + wait"),
    ("spawn-sandboxed", "the same, sandboxed"),
    ("mcp-bare", "bare bash -c true (MCP run baseline)"),
    ("mcp-round-trip", "MCP tools/call Bash true"),
    ("pty-bare-echo", "bare pty: line to cat and back"),
    (
        "mcp-write-stdin-echo",
        "MCP WriteStdin line to tty cat, echoed",
    ),
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
        let stdout = run_suite(root, suite, quick, &samples)?;
        eprintln!(
            "xtask bench: {} took {:.0?}",
            suite.title,
            suite_started.elapsed()
        );
        let figures = read_figures(suite, &stdout, quick)?;
        missed.extend(
            missed_targets(&figures)
                .with_context(|| format!("checking the {} benchmark's targets", suite.bench))?,
        );
        let _ = write!(
            sections,
            "## {}\n\n`cargo bench -p {} --bench {}`{}. {}\n\n{}\n",
            suite.title,
            suite.package,
            suite.bench,
            if quick { " (`-- --quick`)" } else { "" },
            suite.about,
            table(suite.layout, &figures)
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

/// Runs one benchmark binary and returns its stdout.
#[expect(
    clippy::disallowed_methods,
    reason = "xtask drives cargo, as a developer would"
)]
fn run_suite(root: &Path, suite: &Suite, quick: bool, samples: &Path) -> anyhow::Result<String> {
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
    String::from_utf8(output.stdout)
        .with_context(|| format!("the {} benchmark's stdout is not UTF-8", suite.bench))
}

/// Every figure on `stdout`, one per line, checked against what `suite`
/// must produce: each line a figure, ids unique, every expected id there,
/// every baseline a figure of the same run, every figure holding a number
/// or the reason it was skipped.
fn read_figures(suite: &Suite, stdout: &str, quick: bool) -> anyhow::Result<Vec<Figure>> {
    let mut figures: Vec<Figure> = Vec::new();
    for (index, line) in stdout.lines().enumerate() {
        let figure = serde_json::from_str(line).with_context(|| {
            format!(
                "the {} benchmark's stdout line {} is not a figure: {line}",
                suite.bench,
                index + 1
            )
        })?;
        figures.push(figure);
    }
    if figures.is_empty() {
        bail!("the {} benchmark produced no figure", suite.bench);
    }
    let mut ids = BTreeSet::new();
    for figure in &figures {
        if !ids.insert(figure.id.as_str()) {
            bail!(
                "the {} benchmark produced figure `{}` twice",
                suite.bench,
                figure.id
            );
        }
    }
    let full: &[&str] = if quick { &[] } else { suite.expected_full };
    let missing: Vec<&str> = suite
        .expected
        .iter()
        .chain(full)
        .copied()
        .filter(|id| !ids.contains(id))
        .collect();
    if !missing.is_empty() {
        bail!(
            "the {} benchmark did not produce figure(s) `{}`",
            suite.bench,
            missing.join("`, `")
        );
    }
    for figure in &figures {
        if let Some(baseline) = &figure.baseline
            && !ids.contains(baseline.as_str())
        {
            bail!(
                "the {} benchmark's figure `{}` is compared to `{baseline}`, which it did not produce",
                suite.bench,
                figure.id
            );
        }
        let holds_a_number = figure.median_ns.is_some()
            || figure.value.is_some()
            || figure.ratio.is_some()
            || figure.growth.is_some();
        if figure.skipped.is_none() && !holds_a_number {
            bail!(
                "the {} benchmark's figure `{}` holds no number and was not skipped",
                suite.bench,
                figure.id
            );
        }
    }
    Ok(figures)
}

/// One line per target a measured figure breaks, e.g.
/// `spawn: 1.20x, target <= 1.1x`. Skipped figures are not checked; a
/// target naming a number the figure does not hold, or in a unit that
/// does not fit it, is an error.
fn missed_targets(figures: &[Figure]) -> anyhow::Result<Vec<String>> {
    let mut missed = Vec::new();
    for figure in figures.iter().filter(|figure| figure.skipped.is_none()) {
        for target in &figure.targets {
            let holds = target_holds(figure, target).with_context(|| {
                format!("figure `{}`, target `{}`", figure.id, target_text(target))
            })?;
            if !holds {
                missed.push(format!(
                    "{}: {}, target {}",
                    figure.name,
                    measured_text(figure, target.metric),
                    target_text(target)
                ));
            }
        }
    }
    Ok(missed)
}

fn target_holds(figure: &Figure, target: &Target) -> anyhow::Result<bool> {
    let (measured, limit) = match target.metric {
        Metric::Ratio => {
            if target.unit != Unit::Times {
                bail!("a ratio's limit is in x, not {}", target.unit.symbol());
            }
            let ratio = figure.ratio.context("the figure has no ratio")?;
            (ratio, target.limit)
        }
        Metric::Median | Metric::P99 => {
            let scale = target
                .unit
                .nanoseconds()
                .with_context(|| format!("{} is not a unit of time", target.unit.symbol()))?;
            let (ns, what) = if target.metric == Metric::Median {
                (figure.median_ns, "median")
            } else {
                (figure.p99_ns, "p99")
            };
            let ns = ns.with_context(|| format!("the figure has no {what}"))?;
            #[expect(
                clippy::cast_precision_loss,
                reason = "nanoseconds below 2^53 (104 days) are exact"
            )]
            let ns = ns as f64;
            (ns, target.limit * scale)
        }
        Metric::Value => {
            let value = figure.value.context("the figure has no value")?;
            if value.unit != target.unit {
                bail!(
                    "the value is in {}, the limit in {}",
                    value.unit.symbol(),
                    target.unit.symbol()
                );
            }
            (value.value, target.limit)
        }
    };
    Ok(target.op.holds(measured, limit))
}

/// `median < 20 µs`, `p99 < 1 ms`, `<= 1.5x`, `< 64 MiB`.
fn target_text(target: &Target) -> String {
    let metric = match target.metric {
        Metric::Ratio | Metric::Value => "",
        Metric::Median => "median ",
        Metric::P99 => "p99 ",
    };
    let space = if target.unit == Unit::Times { "" } else { " " };
    format!(
        "{metric}{} {}{space}{}",
        target.op.symbol(),
        target.limit,
        target.unit.symbol()
    )
}

/// The figure's number a target bounds, as its table cell shows it.
fn measured_text(figure: &Figure, metric: Metric) -> String {
    match metric {
        Metric::Ratio => ratio_text(figure),
        Metric::Median => figure.median_ns.map(duration_text).unwrap_or_default(),
        Metric::P99 => figure.p99_ns.map(duration_text).unwrap_or_default(),
        Metric::Value => figure
            .value
            .map(|value| value.to_string())
            .unwrap_or_default(),
    }
}

fn duration_text(ns: u64) -> String {
    format!("{:.1?}", Duration::from_nanos(ns))
}

fn ratio_text(figure: &Figure) -> String {
    figure.ratio.map_or_else(String::new, |ratio| {
        let of = match figure.ratio_of {
            Compared::Median => "",
            Compared::Throughput => " throughput",
        };
        format!("{ratio:.2}x{of}")
    })
}

/// The Markdown table of a suite's figures, in the order they were
/// produced; a figure another one is compared to is marked `(baseline)`.
fn table(layout: Layout, figures: &[Figure]) -> String {
    let baselines: BTreeSet<&str> = figures
        .iter()
        .filter_map(|figure| figure.baseline.as_deref())
        .collect();
    let mut lines = vec![
        match layout {
            Layout::Targets => "| figure | median | p99 | ratio | target |",
            Layout::Scaling => "| figure | median | p99 | per unit | growth |",
        }
        .to_owned(),
        "| --- | --- | --- | --- | --- |".to_owned(),
    ];
    for figure in figures {
        let mut name = figure.name.clone();
        if baselines.contains(figure.id.as_str()) {
            name.push_str(" (baseline)");
        }
        let cells = if let Some(reason) = &figure.skipped {
            [
                name,
                format!("skipped: {reason}"),
                String::new(),
                String::new(),
                String::new(),
            ]
        } else {
            let mut median = figure
                .median_ns
                .map(duration_text)
                .or_else(|| figure.value.map(|value| value.to_string()))
                .unwrap_or_default();
            let per_unit = figure
                .per_unit
                .map(|per_unit| per_unit.to_string())
                .unwrap_or_default();
            let p99 = figure.p99_ns.map(duration_text).unwrap_or_default();
            match layout {
                Layout::Targets => {
                    if !per_unit.is_empty() {
                        let _ = write!(median, " ({per_unit})");
                    }
                    let target = if !figure.targets.is_empty() {
                        figure
                            .targets
                            .iter()
                            .map(target_text)
                            .collect::<Vec<_>>()
                            .join(" and ")
                    } else if figure.ratio.is_some() {
                        "reported".to_owned()
                    } else {
                        String::new()
                    };
                    [name, median, p99, ratio_text(figure), target]
                }
                Layout::Scaling => {
                    let growth = figure
                        .growth
                        .as_ref()
                        .map(|growth| format!("{} ({:.2}x)", growth.verdict, growth.ratio))
                        .unwrap_or_default();
                    [name, median, p99, per_unit, growth]
                }
            }
        };
        let mut line = String::from("|");
        for cell in cells {
            if cell.is_empty() {
                line.push_str(" |");
            } else {
                // A pipe inside a cell (a shell pipeline in a name) is escaped.
                let _ = write!(line, " {} |", cell.replace('|', "\\|"));
            }
        }
        lines.push(line);
    }
    lines.join("\n")
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
    use test_support::bench::Op;

    use super::*;

    const SUITE: Suite = Suite {
        title: "Test",
        package: "test",
        bench: "suite",
        about: "",
        layout: Layout::Targets,
        expected: &["spawn-bare", "spawn"],
        expected_full: &["full-only"],
    };

    fn ms(millis: f64) -> Duration {
        Duration::from_secs_f64(millis / 1000.0)
    }

    fn lines(figures: &[Figure]) -> String {
        figures
            .iter()
            .map(|figure| serde_json::to_string(figure).unwrap() + "\n")
            .collect()
    }

    fn spawn_pair() -> Vec<Figure> {
        vec![
            Figure::new("spawn-bare", "bare `bash -c true`").timing(ms(1.4), ms(1.5)),
            Figure::new("spawn", "spawn `true`")
                .timing(ms(1.6), ms(1.7))
                .against("spawn-bare", 1.16)
                .target(Metric::Ratio, Op::AtMost, 1.1, Unit::Times),
        ]
    }

    #[test]
    fn the_targets_table_renders_as_the_report_always_has() {
        let figures = vec![
            Figure::new("check", "check `a | b`")
                .timing(Duration::from_nanos(2_200), Duration::from_nanos(3_250))
                .target(Metric::Median, Op::Below, 20.0, Unit::Microseconds),
            Figure::new("typical", "typical, median of medians")
                .median(Duration::from_nanos(5_200))
                .target(Metric::Median, Op::Below, 20.0, Unit::Microseconds),
            Figure::new("parse", "parse only").timing(ms(0.967), ms(1.0)),
            Figure::new("script", "check script")
                .timing(ms(1.6), ms(2.0))
                .against("parse", 1.684)
                .target(Metric::Median, Op::Below, 1.0, Unit::Milliseconds)
                .target(Metric::Ratio, Op::AtMost, 1.5, Unit::Times),
            Figure::new("cat", "`cat FILE | cat`, 1024 MiB")
                .median(ms(786.0))
                .per_unit(1303.2, Unit::MiBPerSecond),
            Figure::new("capture", "capture, 1024 MiB")
                .median(ms(626.0))
                .per_unit(1637.0, Unit::MiBPerSecond)
                .against_throughput("cat", 1.256)
                .target(Metric::Ratio, Op::AtLeast, 0.5, Unit::Times),
            Figure::new("rss", "peak RSS")
                .value(8.64, Unit::MiB)
                .target(Metric::Value, Op::Below, 32.0, Unit::MiB),
            Figure::new("reads", "reads")
                .timing(Duration::from_nanos(491), Duration::from_nanos(1_300))
                .target(Metric::P99, Op::Below, 1.0, Unit::Milliseconds),
            Figure::new("many", "200 shells")
                .median(ms(167.0))
                .against("cat", 0.81),
            Figure::skipped("off", "sandbox off", "no Landlock"),
            Figure {
                baseline: Some("off".to_owned()),
                ..Figure::skipped("on", "sandboxed | spawn", "no Landlock")
            },
        ];
        assert_eq!(
            table(Layout::Targets, &figures),
            "\
| figure | median | p99 | ratio | target |
| --- | --- | --- | --- | --- |
| check `a \\| b` | 2.2µs | 3.2µs | | median < 20 µs |
| typical, median of medians | 5.2µs | | | median < 20 µs |
| parse only (baseline) | 967.0µs | 1.0ms | | |
| check script | 1.6ms | 2.0ms | 1.68x | median < 1 ms and <= 1.5x |
| `cat FILE \\| cat`, 1024 MiB (baseline) | 786.0ms (1303 MiB/s) | | | |
| capture, 1024 MiB | 626.0ms (1637 MiB/s) | | 1.26x throughput | >= 0.5x |
| peak RSS | 8.6 MiB | | | < 32 MiB |
| reads | 491.0ns | 1.3µs | | p99 < 1 ms |
| 200 shells | 167.0ms | | 0.81x | reported |
| sandbox off (baseline) | skipped: no Landlock | | | |
| sandboxed \\| spawn | skipped: no Landlock | | | |"
        );
    }

    #[test]
    fn the_scaling_table_shows_per_unit_and_growth() {
        let figures = vec![
            Figure::new("bash-1", "`Bash true` with 1 live background shell(s)")
                .timing(ms(2.9), ms(3.5)),
            Figure::new("memory", "memory per idle background shell").value(45.6, Unit::KiB),
            Figure::new("capture-1", "capture 1 MiB")
                .median(ms(5.3))
                .per_unit(188.4, Unit::MiBPerSecond),
            Figure::new("growth", "growth of time per MiB, 1 -> 1024 MiB")
                .growth("falling (fixed costs amortised)", 0.1712),
        ];
        assert_eq!(
            table(Layout::Scaling, &figures),
            "\
| figure | median | p99 | per unit | growth |
| --- | --- | --- | --- | --- |
| `Bash true` with 1 live background shell(s) | 2.9ms | 3.5ms | | |
| memory per idle background shell | 45.6 KiB | | | |
| capture 1 MiB | 5.3ms | | 188 MiB/s | |
| growth of time per MiB, 1 -> 1024 MiB | | | | falling (fixed costs amortised) (0.17x) |"
        );
    }

    /// Every metric against every operator, with the measured number below,
    /// at and above the limit.
    #[test]
    fn every_op_is_checked_on_every_metric() {
        let figure = Figure::new("f", "f")
            .timing(ms(1.0), ms(2.0))
            .value(10.0, Unit::MiB)
            .against("b", 1.5);
        // (metric, unit, limit equal to the measured number in that unit)
        let metrics = [
            (Metric::Ratio, Unit::Times, 1.5),
            (Metric::Median, Unit::Microseconds, 1000.0),
            (Metric::P99, Unit::Milliseconds, 2.0),
            (Metric::Value, Unit::MiB, 10.0),
        ];
        for (metric, unit, at) in metrics {
            for (op, below, equal, above) in [
                (Op::AtMost, true, true, false),
                (Op::Below, true, false, false),
                (Op::AtLeast, false, true, true),
            ] {
                // Measured below the limit: the limit is above the measure.
                for (limit, expected) in [(at * 1.01, below), (at, equal), (at * 0.99, above)] {
                    let target = Target {
                        metric,
                        op,
                        limit,
                        unit,
                    };
                    assert_eq!(
                        target_holds(&figure, &target).unwrap(),
                        expected,
                        "{metric:?} {} {limit}",
                        op.symbol()
                    );
                }
            }
        }
    }

    #[test]
    fn missed_targets_name_the_figure_its_number_and_the_target() {
        let mut figures = spawn_pair();
        figures.push(
            Figure::new("script", "check, 10260 B script")
                .timing(ms(1.6), ms(2.0))
                .against("parse", 1.2)
                .target(Metric::Median, Op::Below, 1.0, Unit::Milliseconds)
                .target(Metric::Ratio, Op::AtMost, 1.5, Unit::Times),
        );
        figures.push(
            Figure::new("reads", "reads")
                .timing(Duration::from_nanos(500), ms(1.2))
                .target(Metric::P99, Op::Below, 1.0, Unit::Milliseconds),
        );
        figures.push(Figure::new("rss", "rss").value(70.0, Unit::MiB).target(
            Metric::Value,
            Op::Below,
            64.0,
            Unit::MiB,
        ));
        // A skipped figure's targets are not checked.
        figures.push(Figure::skipped("off", "off", "no Landlock").target(
            Metric::Ratio,
            Op::AtMost,
            1.0,
            Unit::Times,
        ));
        assert_eq!(
            missed_targets(&figures).unwrap(),
            [
                "spawn `true`: 1.16x, target <= 1.1x",
                "check, 10260 B script: 1.6ms, target median < 1 ms",
                "reads: 1.2ms, target p99 < 1 ms",
                "rss: 70.0 MiB, target < 64 MiB",
            ]
        );
    }

    #[test]
    fn a_target_the_figure_cannot_answer_is_an_error() {
        let cases = [
            (
                Figure::new("a", "a").value(1.0, Unit::MiB).target(
                    Metric::Median,
                    Op::Below,
                    1.0,
                    Unit::Milliseconds,
                ),
                "figure `a`, target `median < 1 ms`: the figure has no median",
            ),
            (
                Figure::new("a", "a").median(ms(1.0)).target(
                    Metric::P99,
                    Op::Below,
                    1.0,
                    Unit::Milliseconds,
                ),
                "figure `a`, target `p99 < 1 ms`: the figure has no p99",
            ),
            (
                Figure::new("a", "a").median(ms(1.0)).target(
                    Metric::Ratio,
                    Op::AtMost,
                    1.5,
                    Unit::Times,
                ),
                "figure `a`, target `<= 1.5x`: the figure has no ratio",
            ),
            (
                Figure::new("a", "a").median(ms(1.0)).target(
                    Metric::Median,
                    Op::Below,
                    1.0,
                    Unit::MiB,
                ),
                "figure `a`, target `median < 1 MiB`: MiB is not a unit of time",
            ),
            (
                Figure::new("a", "a").value(1.0, Unit::KiB).target(
                    Metric::Value,
                    Op::Below,
                    1.0,
                    Unit::MiB,
                ),
                "figure `a`, target `< 1 MiB`: the value is in KiB, the limit in MiB",
            ),
            (
                Figure::new("a", "a").against("b", 1.0).target(
                    Metric::Ratio,
                    Op::AtMost,
                    1.0,
                    Unit::Milliseconds,
                ),
                "figure `a`, target `<= 1 ms`: a ratio's limit is in x, not ms",
            ),
        ];
        for (figure, message) in cases {
            let error = missed_targets(&[figure]).unwrap_err();
            assert_eq!(format!("{error:#}"), message);
        }
    }

    #[test]
    fn figures_are_read_from_the_lines_a_bench_emits() {
        let figures = spawn_pair();
        let read = read_figures(&SUITE, &lines(&figures), true).unwrap();
        assert_eq!(read, figures);
    }

    #[test]
    fn a_line_that_is_not_a_figure_is_an_error_naming_suite_and_line() {
        let mut text = lines(&spawn_pair());
        text.push_str("| spawn | 1.6ms | 1.7ms | 1.16x | <= 1.10x |\n");
        let error = read_figures(&SUITE, &text, true).unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.starts_with(
                "the suite benchmark's stdout line 3 is not a figure: | spawn | 1.6ms"
            ),
            "{message}"
        );
        // A field of the wrong type or unknown to the format is no figure either.
        for bad in [
            r#"{"id":"x","name":"x","median_ns":"fast"}"#,
            r#"{"id":"x","name":"x","median_ns":5,"colour":"red"}"#,
            r#"{"id":"x","name":"x","median_ns":5,"targets":[{"metric":"mean","op":"<","limit":1,"unit":"ms"}]}"#,
            r#"{"id":"x","name":"x","median_ns":5,"targets":[{"metric":"median","op":"==","limit":1,"unit":"ms"}]}"#,
            "",
        ] {
            let text = format!("{}{bad}\n", lines(&spawn_pair()));
            let error = read_figures(&SUITE, &text, true).unwrap_err();
            assert!(
                format!("{error:#}").contains("stdout line 3 is not a figure"),
                "{bad}: {error:#}"
            );
        }
    }

    #[test]
    fn a_suite_without_figures_is_an_error() {
        let error = read_figures(&SUITE, "", true).unwrap_err();
        assert_eq!(error.to_string(), "the suite benchmark produced no figure");
    }

    #[test]
    fn a_missing_expected_figure_is_an_error() {
        let only_bare = lines(&spawn_pair()[..1]);
        let error = read_figures(&SUITE, &only_bare, true).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the suite benchmark did not produce figure(s) `spawn`"
        );
        // A full run must also produce the full-only figures.
        let error = read_figures(&SUITE, &lines(&spawn_pair()), false).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the suite benchmark did not produce figure(s) `full-only`"
        );
        // A skipped figure is there, with its reason.
        let mut figures = spawn_pair();
        figures.push(Figure::skipped("full-only", "full only", "no Landlock"));
        assert!(read_figures(&SUITE, &lines(&figures), false).is_ok());
    }

    #[test]
    fn duplicates_unknown_baselines_and_empty_figures_are_errors() {
        let mut twice = spawn_pair();
        twice.push(spawn_pair()[0].clone());
        let mut unknown_baseline = spawn_pair();
        unknown_baseline[1].baseline = Some("nowhere".to_owned());
        let mut empty = spawn_pair();
        empty.push(Figure::new("empty", "empty"));
        for (figures, message) in [
            (
                twice,
                "the suite benchmark produced figure `spawn-bare` twice",
            ),
            (
                unknown_baseline,
                "the suite benchmark's figure `spawn` is compared to `nowhere`, which it did not produce",
            ),
            (
                empty,
                "the suite benchmark's figure `empty` holds no number and was not skipped",
            ),
        ] {
            let error = read_figures(&SUITE, &lines(&figures), true).unwrap_err();
            assert_eq!(error.to_string(), message);
        }
    }

    #[test]
    fn the_tty_suite_reads_its_benchmark_output() {
        let suite = SUITES
            .iter()
            .find(|suite| suite.bench == "tty")
            .expect("the tty suite");
        // A quick run's output, as `cargo bench -p agent-exec --bench tty` prints it.
        let stdout = r#"{"id":"pty-bare-echo","name":"bare pseudo-terminal: a line written to `cat` until its copy reads back","median_ns":24277,"p99_ns":68521}
{"id":"mcp-write-stdin-echo","name":"MCP `WriteStdin`","median_ns":2158176,"p99_ns":6494777,"baseline":"pty-bare-echo","ratio":88.9,"targets":[{"metric":"p99","op":"<","limit":50.0,"unit":"ms"}]}
{"id":"tty-bash-none","name":"`Bash true`, none open","median_ns":2898305,"p99_ns":11990930}
{"id":"tty-bash-64","name":"`Bash true`, 64 open","median_ns":2722083,"p99_ns":12002928,"baseline":"tty-bash-none","ratio":0.94,"targets":[{"metric":"ratio","op":"<=","limit":1.1,"unit":"x"}]}
{"id":"tty-fds-after","name":"fds after","value":{"value":0.0,"unit":"fds"},"targets":[{"metric":"value","op":"<=","limit":0.0,"unit":"fds"},{"metric":"value","op":">=","limit":0.0,"unit":"fds"}]}
{"id":"memory-per-idle-tty-shell","name":"RSS per idle tty shell","value":{"value":167.625,"unit":"KiB"}}
"#;
        let figures = read_figures(suite, stdout, false).expect("the figures");
        assert_eq!(
            missed_targets(&figures).expect("checked"),
            Vec::<String>::new()
        );
        let rendered = table(suite.layout, &figures);
        assert!(
            rendered.contains("| MCP `WriteStdin` | 2.2ms | 6.5ms | 88.90x | p99 < 50 ms |"),
            "{rendered}"
        );
        assert!(
            rendered.contains("| fds after | 0 fds | | | <= 0 fds and >= 0 fds |"),
            "{rendered}"
        );
    }

    #[test]
    fn every_suite_expects_figures() {
        for suite in SUITES {
            assert!(!suite.expected.is_empty(), "{}", suite.bench);
        }
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
