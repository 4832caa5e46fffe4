//! What a benchmark reports, as data: one [`Figure`] per measured (or
//! skipped) quantity, printed by [`emit`] as one JSON object per line on
//! stdout. `cargo xtask bench` reads those lines, checks each figure's
//! targets and renders docs/BENCHMARKS.md from them, so the benchmarks
//! never format a report and xtask never parses one.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One row of a benchmark report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// Stable key within its suite, independent of sizes and counts: what
    /// the suite's list of expected figures and a [`Figure::baseline`] name.
    pub id: String,
    /// What was measured, as the report shows it (Markdown, unescaped).
    pub name: String,
    /// Median time per call, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_ns: Option<u64>,
    /// 99th-percentile time per call, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<u64>,
    /// A plain value that is not a time, such as a peak RSS in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Quantity>,
    /// A figure per unit of work, such as a throughput in MiB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_unit: Option<Quantity>,
    /// The `id` of the figure of the same run this one is compared to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// This figure over its baseline, by [`Figure::ratio_of`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// What [`Figure::ratio`] compares.
    #[serde(default, skip_serializing_if = "Compared::is_median")]
    pub ratio_of: Compared,
    /// What the figure is held to; all must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<Target>,
    /// How a cost grew between the first and the last figure of a series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth: Option<Growth>,
    /// Why the figure could not be measured on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// A number with its unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantity {
    /// The number, in `unit`.
    pub value: f64,
    /// What `value` counts.
    pub unit: Unit,
}

/// The units figures and targets are given in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    /// A ratio: `1.5x`.
    #[serde(rename = "x")]
    Times,
    /// Nanoseconds.
    #[serde(rename = "ns")]
    Nanoseconds,
    /// Microseconds.
    #[serde(rename = "µs", alias = "us")]
    Microseconds,
    /// Milliseconds.
    #[serde(rename = "ms")]
    Milliseconds,
    /// Seconds.
    #[serde(rename = "s")]
    Seconds,
    /// Kibibytes.
    KiB,
    /// Mebibytes.
    MiB,
    /// Mebibytes per second.
    #[serde(rename = "MiB/s")]
    MiBPerSecond,
    /// Open file descriptors.
    #[serde(rename = "fds")]
    Fds,
    /// Shells.
    #[serde(rename = "shells")]
    Shells,
}

impl Unit {
    /// Nanoseconds in one of this unit, for the units of time.
    pub fn nanoseconds(self) -> Option<f64> {
        match self {
            Self::Nanoseconds => Some(1.0),
            Self::Microseconds => Some(1e3),
            Self::Milliseconds => Some(1e6),
            Self::Seconds => Some(1e9),
            Self::Times | Self::KiB | Self::MiB | Self::MiBPerSecond | Self::Fds | Self::Shells => {
                None
            }
        }
    }

    /// Decimals a measured value in this unit is shown with.
    pub fn decimals(self) -> usize {
        match self {
            Self::Times => 2,
            Self::MiBPerSecond | Self::Fds | Self::Shells => 0,
            _ => 1,
        }
    }

    /// The unit as the report writes it.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Times => "x",
            Self::Nanoseconds => "ns",
            Self::Microseconds => "µs",
            Self::Milliseconds => "ms",
            Self::Seconds => "s",
            Self::KiB => "KiB",
            Self::MiB => "MiB",
            Self::MiBPerSecond => "MiB/s",
            Self::Fds => "fds",
            Self::Shells => "shells",
        }
    }
}

impl fmt::Display for Quantity {
    /// `8.6 MiB`, `1303 MiB/s`, `1.26x`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let decimals = self.unit.decimals();
        let space = if self.unit == Unit::Times { "" } else { " " };
        write!(f, "{:.decimals$}{space}{}", self.value, self.unit.symbol())
    }
}

/// What a ratio compares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compared {
    /// Median time over the baseline's median time: lower is better.
    #[default]
    Median,
    /// Throughput ([`Figure::per_unit`]) over the baseline's: higher is better.
    Throughput,
}

impl Compared {
    fn is_median(&self) -> bool {
        *self == Self::Median
    }
}

/// A bound a figure is held to, e.g. `ratio <= 1.1x` or `p99 < 1 ms`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Which of the figure's numbers is bounded.
    pub metric: Metric,
    /// How it compares with `limit`.
    pub op: Op,
    /// The bound, in `unit`.
    pub limit: f64,
    /// `x` for a ratio, a unit of time for a median or p99, the value's
    /// own unit for a value.
    pub unit: Unit,
}

/// The number of a [`Figure`] a [`Target`] bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// [`Figure::ratio`].
    Ratio,
    /// [`Figure::median_ns`].
    Median,
    /// [`Figure::p99_ns`].
    P99,
    /// [`Figure::value`].
    Value,
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// At most.
    #[serde(rename = "<=")]
    AtMost,
    /// Below.
    #[serde(rename = "<")]
    Below,
    /// At least.
    #[serde(rename = ">=")]
    AtLeast,
}

impl Op {
    /// Whether `measured` is within `limit`.
    pub fn holds(self, measured: f64, limit: f64) -> bool {
        match self {
            Self::AtMost => measured <= limit,
            Self::Below => measured < limit,
            Self::AtLeast => measured >= limit,
        }
    }

    /// The operator as written: `<=`, `<`, `>=`.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::AtMost => "<=",
            Self::Below => "<",
            Self::AtLeast => ">=",
        }
    }
}

/// How a cost grew across a series, e.g. `flat` at `0.78x`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Growth {
    /// What was observed, in words (`flat`, `linear`, ...).
    pub verdict: String,
    /// The last figure over the first.
    pub ratio: f64,
}

impl Figure {
    /// A figure with nothing measured yet.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            median_ns: None,
            p99_ns: None,
            value: None,
            per_unit: None,
            baseline: None,
            ratio: None,
            ratio_of: Compared::Median,
            targets: Vec::new(),
            growth: None,
            skipped: None,
        }
    }

    /// A figure this machine cannot measure, and why.
    pub fn skipped(
        id: impl Into<String>,
        name: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            skipped: Some(reason.into()),
            ..Self::new(id, name)
        }
    }

    /// The median time per call.
    #[must_use]
    pub fn median(mut self, median: Duration) -> Self {
        self.median_ns = Some(nanos(median));
        self
    }

    /// The median and 99th-percentile times per call.
    #[must_use]
    pub fn timing(mut self, median: Duration, p99: Duration) -> Self {
        self.median_ns = Some(nanos(median));
        self.p99_ns = Some(nanos(p99));
        self
    }

    /// A plain value, such as a peak RSS.
    #[must_use]
    pub fn value(mut self, value: f64, unit: Unit) -> Self {
        self.value = Some(Quantity { value, unit });
        self
    }

    /// A figure per unit of work, such as a throughput.
    #[must_use]
    pub fn per_unit(mut self, value: f64, unit: Unit) -> Self {
        self.per_unit = Some(Quantity { value, unit });
        self
    }

    /// Compared with the figure `baseline` (its id) of the same run: this
    /// median over the baseline's.
    #[must_use]
    pub fn against(mut self, baseline: impl Into<String>, ratio: f64) -> Self {
        self.baseline = Some(baseline.into());
        self.ratio = Some(ratio);
        self.ratio_of = Compared::Median;
        self
    }

    /// Compared with the figure `baseline` (its id) of the same run: this
    /// throughput over the baseline's.
    #[must_use]
    pub fn against_throughput(mut self, baseline: impl Into<String>, ratio: f64) -> Self {
        self.baseline = Some(baseline.into());
        self.ratio = Some(ratio);
        self.ratio_of = Compared::Throughput;
        self
    }

    /// Held to `metric op limit unit`.
    #[must_use]
    pub fn target(mut self, metric: Metric, op: Op, limit: f64, unit: Unit) -> Self {
        self.targets.push(Target {
            metric,
            op,
            limit,
            unit,
        });
        self
    }

    /// How a cost grew across a series.
    #[must_use]
    pub fn growth(mut self, verdict: impl Into<String>, ratio: f64) -> Self {
        self.growth = Some(Growth {
            verdict: verdict.into(),
            ratio,
        });
        self
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Prints `figure` as one JSON line on stdout, the only thing a benchmark
/// prints there.
///
/// # Panics
/// When a number is not finite (JSON has no NaN or infinity; a ratio over
/// a zero baseline is a broken benchmark).
pub fn emit(figure: &Figure) {
    let numbers = [
        figure.ratio,
        figure.value.map(|q| q.value),
        figure.per_unit.map(|q| q.value),
    ];
    assert!(
        numbers.iter().flatten().all(|n| n.is_finite())
            && figure.growth.as_ref().is_none_or(|g| g.ratio.is_finite()),
        "figure `{}` holds a number that is not finite: {figure:?}",
        figure.id
    );
    let line = serde_json::to_string(figure).expect("a figure serialises");
    #[expect(
        clippy::print_stdout,
        reason = "a benchmark reports its figures on stdout"
    )]
    {
        println!("{line}");
    }
}

/// With `AGENT_EXEC_BENCH_SAMPLES=DIR`, writes each sample (ns, one per
/// line) to `DIR/NAME.txt` for `cargo xtask bench` to chart.
///
/// # Panics
/// When the file cannot be written.
pub fn save_samples(name: &str, samples: &[Duration]) {
    if let Some(dir) = std::env::var_os("AGENT_EXEC_BENCH_SAMPLES") {
        let text: String = samples
            .iter()
            .map(|sample| format!("{}\n", sample.as_nanos()))
            .collect();
        std::fs::write(Path::new(&dir).join(format!("{name}.txt")), text).expect("samples written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_round_trips_through_one_json_line() {
        let figure = Figure::new("spawn", "`ShellProcess::spawn(\"true\")` and wait")
            .timing(Duration::from_micros(1600), Duration::from_micros(1700))
            .against("spawn-bare", 1.16)
            .target(Metric::Ratio, Op::AtMost, 1.1, Unit::Times);
        let line = serde_json::to_string(&figure).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<Figure>(&line).unwrap(), figure);
        assert!(
            line.contains(r#""targets":[{"metric":"ratio","op":"<=","limit":1.1,"unit":"x"}]"#),
            "{line}"
        );
        // Absent numbers are left out, not written as null.
        assert!(
            !line.contains("null") && !line.contains("ratio_of"),
            "{line}"
        );
    }

    #[test]
    fn unknown_fields_and_units_are_refused() {
        assert!(serde_json::from_str::<Figure>(r#"{"id":"a","name":"a","median":5}"#).is_err());
        assert!(
            serde_json::from_str::<Figure>(
                r#"{"id":"a","name":"a","value":{"value":1,"unit":"GB"}}"#
            )
            .is_err()
        );
        let figure: Figure =
            serde_json::from_str(r#"{"id":"a","name":"a","value":{"value":1,"unit":"MiB"}}"#)
                .unwrap();
        assert_eq!(figure.value.unwrap().unit, Unit::MiB);
    }

    #[test]
    fn quantities_show_with_their_units() {
        let show = |value, unit| Quantity { value, unit }.to_string();
        assert_eq!(show(8.64, Unit::MiB), "8.6 MiB");
        assert_eq!(show(1303.4, Unit::MiBPerSecond), "1303 MiB/s");
        assert_eq!(show(1.256, Unit::Times), "1.26x");
    }

    #[test]
    #[should_panic(expected = "not finite")]
    fn a_ratio_over_a_zero_baseline_is_refused() {
        emit(&Figure::new("a", "a").against("b", f64::INFINITY));
    }
}
