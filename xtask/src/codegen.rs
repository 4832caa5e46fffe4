//! Generated files: one schema file per tool under `schemas/`.
//!
//! Every output goes through [`ensure_file_contents`], which in check mode
//! compares instead of writing and fails with a diff, so a stale file is
//! caught by CI and by `cargo test` alike.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::Value;
use tool_core::{DefinitionFormat, ToolRegistry};

/// Regenerates (or, with `check`, verifies) everything under `schemas/`.
pub(crate) fn run(root: &Path, check: bool) -> anyhow::Result<()> {
    let registry = exec_tools::execution_registry().context("building the tool registry")?;
    let outcome = generate_schemas(&root.join("schemas"), &registry, check)?;
    if !check {
        for path in &outcome.written {
            println!("wrote {path}");
        }
        for path in &outcome.removed {
            println!("removed {path}");
        }
    }
    println!("schemas: {} tool(s), up to date", registry.len());
    Ok(())
}

/// What a generation run changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) written: Vec<String>,
    pub(crate) removed: Vec<String>,
}

/// Writes `dir/<Tool>.json` for every tool (its MCP definition with the
/// default description) and removes `.json` files no tool produces.
pub(crate) fn generate_schemas(
    dir: &Path,
    registry: &ToolRegistry,
    check: bool,
) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::default();
    let mut expected = BTreeSet::new();
    for definition in registry.definitions() {
        let file_name = format!("{}.json", definition.name);
        let text = pretty_sorted(&definition.render(DefinitionFormat::Mcp))?;
        if ensure_file_contents(&dir.join(&file_name), &text, check)? {
            outcome.written.push(file_name.clone());
        }
        expected.insert(file_name);
    }
    let existing = match fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<BTreeSet<_>, _>>()
            .with_context(|| format!("reading {}", dir.display()))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
        Err(error) => return Err(error).with_context(|| format!("reading {}", dir.display())),
    };
    for stale in existing
        .iter()
        .filter(|name| name.ends_with(".json") && !expected.contains(*name))
    {
        if check {
            bail!(
                "{} is not produced by any tool; run `cargo xtask codegen` and commit",
                dir.join(stale).display()
            );
        }
        fs::remove_file(dir.join(stale)).with_context(|| format!("removing {stale}"))?;
        outcome.removed.push(stale.clone());
    }
    Ok(outcome)
}

/// Pretty JSON with keys sorted at every level and a trailing newline, so
/// the files diff well whatever map order `serde_json` was built with.
pub(crate) fn pretty_sorted(value: &Value) -> anyhow::Result<String> {
    fn sort(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sort(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    let mut text = serde_json::to_string_pretty(&sort(value))?;
    text.push('\n');
    Ok(text)
}

/// Makes `path` hold `contents` (newlines normalised). In check mode fails
/// with a unified diff instead of writing. Returns whether it wrote.
pub(crate) fn ensure_file_contents(
    path: &Path,
    contents: &str,
    check: bool,
) -> anyhow::Result<bool> {
    let contents = contents.replace("\r\n", "\n");
    let current = match fs::read_to_string(path) {
        Ok(text) => Some(text.replace("\r\n", "\n")),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    if current.as_deref() == Some(contents.as_str()) {
        return Ok(false);
    }
    if check {
        let old = current.unwrap_or_default();
        let diff = similar::TextDiff::from_lines(&old, &contents)
            .unified_diff()
            .header(
                &format!("{} (committed)", path.display()),
                &format!("{} (generated)", path.display()),
            )
            .to_string();
        bail!(
            "{} is out of date; run `cargo xtask codegen` and commit\n{diff}",
            path.display()
        );
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::write(path, contents).with_context(|| format!("writing {}", path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::Echo;

    fn registry() -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry.register(Echo).unwrap();
        registry
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-codegen-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn writes_then_checks_clean() {
        let dir = temp_dir("clean");
        let outcome = generate_schemas(&dir, &registry(), false).unwrap();
        assert_eq!(outcome.written, ["Echo.json"]);
        let text = fs::read_to_string(dir.join("Echo.json")).unwrap();
        assert!(
            text.starts_with("{\n  \"description\": \"Says the text back.\",\n  \"inputSchema\""),
            "{text}"
        );
        assert!(text.ends_with("}\n"));
        assert_eq!(
            generate_schemas(&dir, &registry(), true).unwrap(),
            Outcome::default()
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn check_fails_on_drift_with_a_diff() {
        let dir = temp_dir("drift");
        generate_schemas(&dir, &registry(), false).unwrap();
        let path = dir.join("Echo.json");
        let edited = fs::read_to_string(&path)
            .unwrap()
            .replace("Says the text back.", "Edited by hand.");
        fs::write(&path, edited).unwrap();
        let error = generate_schemas(&dir, &registry(), true)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("is out of date; run `cargo xtask codegen` and commit"),
            "{error}"
        );
        assert!(
            error.contains("-  \"description\": \"Edited by hand.\","),
            "{error}"
        );
        assert!(
            error.contains("+  \"description\": \"Says the text back.\","),
            "{error}"
        );
        // Regenerating repairs it.
        generate_schemas(&dir, &registry(), false).unwrap();
        generate_schemas(&dir, &registry(), true).unwrap();
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn check_fails_on_missing_and_stale_files() {
        let dir = temp_dir("stale");
        let error = generate_schemas(&dir, &registry(), true)
            .unwrap_err()
            .to_string();
        assert!(error.contains("Echo.json is out of date"), "{error}");
        generate_schemas(&dir, &registry(), false).unwrap();
        fs::write(dir.join("Gone.json"), "{}\n").unwrap();
        fs::write(dir.join("README.md"), "kept\n").unwrap();
        let error = generate_schemas(&dir, &registry(), true)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("Gone.json is not produced by any tool"),
            "{error}"
        );
        let outcome = generate_schemas(&dir, &registry(), false).unwrap();
        assert_eq!(outcome.removed, ["Gone.json"]);
        assert!(dir.join("README.md").exists());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn crlf_is_not_drift() {
        let dir = temp_dir("crlf");
        generate_schemas(&dir, &registry(), false).unwrap();
        let path = dir.join("Echo.json");
        let crlf = fs::read_to_string(&path).unwrap().replace('\n', "\r\n");
        fs::write(&path, crlf).unwrap();
        generate_schemas(&dir, &registry(), true).unwrap();
        fs::remove_dir_all(dir).unwrap();
    }

    /// The committed schemas/ matches the registry (as `cargo test` catches drift too).
    #[test]
    fn committed_schemas_are_up_to_date() {
        let root = crate::workspace_root();
        let registry = exec_tools::execution_registry().unwrap();
        generate_schemas(&root.join("schemas"), &registry, true).unwrap();
    }
}
