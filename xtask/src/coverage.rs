//! `cargo xtask coverage`: line coverage with cargo-tarpaulin (LLVM
//! source-based engine; docs/decisions/0012), a table per crate, and the
//! floors the project holds itself to.
//!
//! Measured: every `src/` file of the workspace's crates, through every
//! unit, integration and black-box test. The black-box tests drive the
//! built binary in child processes; the instrumented binary writes its own
//! profile, so what the server runs counts too. Excluded: test code
//! (`tests/`, `#[cfg(test)]` modules), benches and examples, nothing else.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use cargo_metadata::MetadataCommand;
use serde_json::Value;

/// Lines covered, over all measured files, below which the run fails.
const OVERALL_FLOOR: f64 = 90.0;
/// Lines covered in any one library crate below which the run fails.
const LIBRARY_FLOOR: f64 = 85.0;
/// shell-runtime's floor: its spawner process serves from a forked child
/// that dies by SIGKILL with the server, so its profile is never written
/// and the serving side of `spawn/process.rs` counts as uncovered although
/// every black-box test runs through it (84.7% measured with it).
const SPAWN_CRATE_FLOOR: f64 = 84.0;
/// The library crates that each must reach [`LIBRARY_FLOOR`] (shell-runtime:
/// [`SPAWN_CRATE_FLOOR`]).
const LIBRARY_CRATES: [&str; 5] = [
    "tool-core",
    "secret-formats",
    "exec-policy",
    "shell-runtime",
    "exec-tools",
];

/// Runs tarpaulin (unless `report` names an existing report) and checks the floors.
pub(crate) fn run(root: &Path, report: Option<&Path>) -> anyhow::Result<()> {
    let report = match report {
        Some(path) => path.to_path_buf(),
        None => measure(root)?,
    };
    let text = std::fs::read_to_string(&report)
        .with_context(|| format!("reading {}", report.display()))?;
    let json: Value = serde_json::from_str(&text).context("parsing the tarpaulin report")?;
    let table = Table::from_report(root, &json)?;
    print!("{}", table.render());
    let failures = table.failures();
    if failures.is_empty() {
        Ok(())
    } else {
        bail!("coverage below the floor: {}", failures.join("; "))
    }
}

/// Runs cargo-tarpaulin over every test target; returns the JSON report's path.
#[allow(
    clippy::disallowed_methods,
    reason = "xtask drives cargo, as a developer would"
)]
fn measure(root: &Path) -> anyhow::Result<PathBuf> {
    let metadata = MetadataCommand::new()
        .manifest_path(root.join("Cargo.toml"))
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    let out_dir = root.join("target/tarpaulin");
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(root).args([
        "tarpaulin",
        "--engine",
        "llvm",
        "--workspace",
        "--exclude",
        "xtask",
        // Test code shared by the tests, like the tests themselves.
        "--exclude",
        "test-support",
        "--lib",
        "--bins",
        "--skip-clean",
        "--locked",
        "--timeout",
        "600",
        "--out",
        "Json",
    ]);
    command.arg("--target-dir").arg(&out_dir);
    command.arg("--output-dir").arg(&out_dir);
    for pattern in [
        "*/benches/*",
        "*/examples/*",
        "*/tests/*",
        "tests/*",
        "fuzz/*",
        // Test code shared by the tests: measured by what it tests.
        "*/test-support/*",
    ] {
        command.args(["--exclude-files", pattern]);
    }
    let mut tests: Vec<String> = metadata
        .workspace_packages()
        .iter()
        // xtask is excluded above; its tests (the tidy checks) read the
        // repository, not the crates whose coverage is measured.
        .filter(|package| !["xtask", "test-support"].contains(&package.name.as_str()))
        .flat_map(|package| &package.targets)
        .filter(|target| target.is_test())
        .map(|target| target.name.clone())
        .collect();
    tests.sort();
    for test in tests {
        command.args(["--test", &test]);
    }
    let status = command
        .status()
        .context("running cargo tarpaulin (cargo install --locked cargo-tarpaulin)")?;
    // A process the tests start with a cleared environment writes its
    // profile to its working directory (`default_*.profraw`): remove those.
    let mut dirs: Vec<PathBuf> = metadata
        .workspace_packages()
        .iter()
        .filter_map(|package| {
            package
                .manifest_path
                .parent()
                .map(|dir| dir.as_std_path().to_path_buf())
        })
        .collect();
    dirs.push(root.to_path_buf());
    for dir in dirs {
        remove_profiles(&dir);
    }
    if !status.success() {
        bail!("cargo tarpaulin failed: {status}");
    }
    Ok(out_dir.join("tarpaulin-report.json"))
}

/// Removes the `*.profraw` files directly in `dir`.
fn remove_profiles(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path
            .extension()
            .is_some_and(|extension| extension == "profraw")
        {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Covered and coverable lines per crate.
#[derive(Debug, Default, PartialEq, Eq)]
struct Table {
    crates: BTreeMap<String, (u64, u64)>,
}

impl Table {
    /// Groups the report's files by the crate directory they sit in.
    fn from_report(root: &Path, report: &Value) -> anyhow::Result<Self> {
        let files = report["files"]
            .as_array()
            .context("the report has no `files` array")?;
        let mut table = Self::default();
        for file in files {
            let path: PathBuf = file["path"]
                .as_array()
                .context("a file without a path")?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let covered = file["covered"].as_u64().context("`covered`")?;
            let coverable = file["coverable"].as_u64().context("`coverable`")?;
            if coverable == 0 {
                continue; // Build-script output and the like: nothing to count.
            }
            let relative = path.strip_prefix(root).unwrap_or(&path);
            let name = crate_of(relative);
            let entry = table.crates.entry(name).or_default();
            entry.0 += covered;
            entry.1 += coverable;
        }
        Ok(table)
    }

    fn totals(&self) -> (u64, u64) {
        self.crates
            .values()
            .fold((0, 0), |(c, t), (covered, total)| (c + covered, t + total))
    }

    fn render(&self) -> String {
        let mut out = String::from("| crate | lines covered | coverage |\n| --- | ---: | ---: |\n");
        for (name, (covered, total)) in &self.crates {
            let _ = writeln!(
                out,
                "| {name} | {covered}/{total} | {:.1}% |",
                percent(*covered, *total)
            );
        }
        let (covered, total) = self.totals();
        let _ = writeln!(
            out,
            "| **all** | {covered}/{total} | {:.1}% |",
            percent(covered, total)
        );
        out
    }

    /// What falls below a floor, in words; empty when all is well.
    fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let (covered, total) = self.totals();
        if percent(covered, total) < OVERALL_FLOOR {
            failures.push(format!(
                "overall {:.1}% < {OVERALL_FLOOR}%",
                percent(covered, total)
            ));
        }
        for name in LIBRARY_CRATES {
            let floor = if name == "shell-runtime" {
                SPAWN_CRATE_FLOOR
            } else {
                LIBRARY_FLOOR
            };
            match self.crates.get(name) {
                Some(&(covered, total)) if percent(covered, total) >= floor => {}
                Some(&(covered, total)) => {
                    failures.push(format!("{name} {:.1}% < {floor}%", percent(covered, total)));
                }
                None => failures.push(format!("{name} is missing from the report")),
            }
        }
        failures
    }
}

/// `crates/NAME/...` -> NAME; anything else is named by its first component.
fn crate_of(relative: &Path) -> String {
    let mut parts = relative.iter().filter_map(|part| part.to_str());
    match (parts.next(), parts.next()) {
        (Some("crates"), Some(name)) => name.to_owned(),
        (Some(first), _) => first.to_owned(),
        (None, _) => "(unknown)".to_owned(),
    }
}

#[allow(clippy::cast_precision_loss, reason = "line counts are far below 2^52")]
fn percent(covered: u64, total: u64) -> f64 {
    if total == 0 {
        100.0
    } else {
        covered as f64 * 100.0 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn report(files: &[(&str, u64, u64)]) -> Value {
        json!({
            "files": files
                .iter()
                .map(|(path, covered, coverable)| {
                    let parts: Vec<&str> = std::iter::once("/")
                        .chain(path.split('/').filter(|part| !part.is_empty()))
                        .collect();
                    json!({ "path": parts, "covered": covered, "coverable": coverable })
                })
                .collect::<Vec<_>>()
        })
    }

    fn table(files: &[(&str, u64, u64)]) -> Table {
        Table::from_report(Path::new("/repo"), &report(files)).expect("parses")
    }

    #[test]
    fn files_are_grouped_by_crate_and_totalled() {
        let table = table(&[
            ("/repo/crates/tool-core/src/a.rs", 9, 10),
            ("/repo/crates/tool-core/src/b/c.rs", 10, 10),
            ("/repo/crates/exec-policy/src/lib.rs", 45, 50),
            ("/repo/target/debug/build/out.rs", 0, 0),
        ]);
        assert!(!table.crates.contains_key("target"));
        assert_eq!(table.crates["tool-core"], (19, 20));
        assert_eq!(table.totals(), (64, 70));
        let text = table.render();
        assert!(text.contains("| tool-core | 19/20 | 95.0% |"), "{text}");
        assert!(text.contains("| **all** | 64/70 | 91.4% |"), "{text}");
    }

    #[test]
    fn each_floor_is_enforced() {
        let healthy = [
            ("/repo/crates/tool-core/src/a.rs", 95, 100),
            ("/repo/crates/exec-policy/src/a.rs", 95, 100),
            ("/repo/crates/shell-runtime/src/a.rs", 95, 100),
            ("/repo/crates/exec-tools/src/a.rs", 95, 100),
            ("/repo/crates/secret-formats/src/a.rs", 95, 100),
        ];
        assert!(table(&healthy).failures().is_empty());

        // One library crate under 85% fails even when the total is fine.
        let mut weak = healthy.to_vec();
        weak[3] = ("/repo/crates/exec-tools/src/a.rs", 84, 100);
        weak.push(("/repo/crates/agent-exec/src/a.rs", 1000, 1000));
        let failures = table(&weak).failures();
        assert_eq!(failures, ["exec-tools 84.0% < 85%"]);
        // shell-runtime's own floor (its spawner's child side is not measured).
        let mut spawn = healthy.to_vec();
        spawn[2] = ("/repo/crates/shell-runtime/src/a.rs", 83, 100);
        spawn.push(("/repo/crates/agent-exec/src/a.rs", 1000, 1000));
        assert_eq!(table(&spawn).failures(), ["shell-runtime 83.0% < 84%"]);
        spawn[2] = ("/repo/crates/shell-runtime/src/a.rs", 84, 100);
        assert!(table(&spawn).failures().is_empty());

        // The total under 90% fails even when every library crate passes.
        let mut low = healthy.to_vec();
        low.push(("/repo/crates/agent-exec/src/a.rs", 0, 100));
        assert_eq!(table(&low).failures(), ["overall 79.2% < 90%"]);

        // A library crate that is not measured at all is a failure too.
        assert!(
            table(&healthy[..3])
                .failures()
                .contains(&"exec-tools is missing from the report".to_owned())
        );
    }

    #[test]
    fn stray_profiles_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("default_1_0_2.profraw"), b"x").expect("write");
        std::fs::write(dir.path().join("notes.txt"), b"x").expect("write");
        super::remove_profiles(dir.path());
        assert!(!dir.path().join("default_1_0_2.profraw").exists());
        assert!(dir.path().join("notes.txt").exists());
    }
}
