//! Tidy tests: rules about the repository's files that `cargo test` keeps,
//! so no separate CI step is needed to keep them.
//!
//! - README.md and docs/ describe the present: no work-period numbering
//!   ("session 4"), no dated lab-notebook entries, no "tried and reverted".
//!   What was tried and why it lost goes in docs/decisions/ and in commit
//!   messages.
//! - `unsafe` is allowed only in shell-runtime's spawn module: nothing else
//!   may lift the workspace's `unsafe_code = "deny"`.
//! - docs/BENCHMARKS.md ends with docs/benchmarks-notes.md, as
//!   `cargo xtask bench` writes it.

#![allow(
    clippy::expect_used,
    reason = "a helper that cannot read the repository should fail the test loudly"
)]

use std::path::{Path, PathBuf};

use regex::Regex;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits in the workspace root")
        .to_path_buf()
}

/// Every file under `dir` (recursively) whose name ends in `extension`,
/// skipping build output and fuzzing working data.
fn files(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            if path.is_dir() {
                if !matches!(name, "target" | "corpus" | "artifacts" | ".git") {
                    pending.push(path);
                }
            } else if name.ends_with(extension) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The lines of a Markdown text outside fenced code blocks, as (number,
/// line, line with inline code spans blanked out): a protocol version or a
/// log line in code is not a diary entry.
fn prose_lines(text: &str) -> Vec<(usize, &str, String)> {
    let code_span = Regex::new("`[^`]*`").expect("valid regex");
    let mut in_fence = false;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            lines.push((
                index + 1,
                line,
                code_span.replace_all(line, "").into_owned(),
            ));
        }
    }
    lines
}

/// What a lab notebook says and documentation does not, one line at a
/// time: `path:line: text` for each offence.
fn notebook_entries(path: &Path) -> Vec<String> {
    let work_period = Regex::new(
        r"(?i)\b(session|stop|wave|sprint) \d+\b|\b(in|this) session\b|\btried and reverted\b",
    )
    .expect("valid regex");
    let date = Regex::new(r"\b\d{4}-\d{2}-\d{2}\b").expect("valid regex");
    // A compiler's version string names its commit and build date
    // (`rustc 1.95.0 (59807616e 2026-04-14)`): a fact about the machine.
    let version_date = Regex::new(r"\b[0-9a-f]{7,40} \d{4}-\d{2}-\d{2}\b").expect("valid regex");
    let text = std::fs::read_to_string(path).expect("a readable Markdown file");
    let mut found = Vec::new();
    for (number, line, prose) in prose_lines(&text) {
        let without_versions = version_date.replace_all(&prose, "");
        if work_period.is_match(&prose) || date.is_match(&without_versions) {
            found.push(format!("{}:{number}: {}", relative(path), line.trim()));
        }
    }
    found
}

fn assert_no_notebook_entries(paths: &[PathBuf]) {
    let found: Vec<String> = paths
        .iter()
        .flat_map(|path| notebook_entries(path))
        .collect();
    assert!(
        found.is_empty(),
        "docs describe the present: move what was tried to docs/decisions/ or a commit message, \
         and drop work-period numbers and dates:\n{}",
        found.join("\n")
    );
}

#[test]
fn docs_read_as_the_present_not_a_lab_notebook() {
    let docs = files(&root().join("docs"), ".md");
    assert!(docs.len() > 5, "found the docs: {docs:?}");
    assert_no_notebook_entries(&docs);
}

#[test]
fn readme_reads_as_the_present_not_a_lab_notebook() {
    assert_no_notebook_entries(&[root().join("README.md")]);
}

#[test]
fn notebook_patterns_catch_what_they_are_meant_to() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let sample = dir.path().join("sample.md");
    let offences = [
        "Measured in session 4 on a quiet machine.",
        "Session 12: the parser.",
        "Fixed at stop 12.",
        "This session moved the reaper.",
        "A full run on 2026-11-26 gave 1.5x.",
        "Inlining was tried and reverted.",
    ];
    let fine = [
        "The session wrapper saves `$PWD`.",
        "Orphans still in the shell's session are adopted.",
        "Machine: rustc 1.95.0 (59807616e 2026-04-14), release profile.",
        "The client sends `\"protocolVersion\": \"2025-06-18\"`.",
        "```",
        "2025-06-18 in a code block",
        "```",
    ];
    std::fs::write(&sample, [&offences[..], &fine[..]].concat().join("\n"))
        .expect("write the sample");
    let found = notebook_entries(&sample);
    assert_eq!(found.len(), offences.len(), "{found:#?}");
    for (offence, line) in offences.iter().zip(&found) {
        assert!(line.ends_with(offence), "{line} for {offence}");
    }
}

/// Lint attributes (and manifest lint tables) that lift `unsafe_code`,
/// outside shell-runtime's spawn module.
fn unsafe_allowances() -> Vec<String> {
    let root = root();
    let spawn = root.join("crates/shell-runtime/src/spawn");
    // Whitespace is removed before matching, so an attribute split over
    // lines (`#![allow(\n    unsafe_code,`) is caught too.
    let attribute =
        Regex::new(r"\b(allow|expect|warn)\([^)]*\bunsafe_code\b").expect("valid regex");
    let mut found = Vec::new();
    for dir in ["crates", "xtask", "tests", "fuzz"] {
        for path in files(&root.join(dir), ".rs") {
            if path.starts_with(&spawn) {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a readable source file");
            let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            if attribute.is_match(&squeezed) {
                found.push(relative(&path));
            }
        }
        for path in files(&root.join(dir), "Cargo.toml") {
            let text = std::fs::read_to_string(&path).expect("a readable manifest");
            if text.contains("unsafe_code") {
                found.push(relative(&path));
            }
        }
    }
    found
}

#[test]
fn unsafe_code_is_allowed_only_in_the_spawn_module() {
    let found = unsafe_allowances();
    assert!(
        found.is_empty(),
        "only crates/shell-runtime/src/spawn/ may allow `unsafe_code` \
         (docs/architecture.md); found in:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_benchmark_report_ends_with_the_current_notes() {
    let docs = root().join("docs");
    let report = std::fs::read_to_string(docs.join("BENCHMARKS.md")).expect("the report");
    let notes = std::fs::read_to_string(docs.join("benchmarks-notes.md")).expect("the notes");
    assert!(
        report.ends_with(&format!("{}\n", notes.trim_end())),
        "docs/BENCHMARKS.md must end with docs/benchmarks-notes.md as `cargo xtask bench` \
         appends it: copy the notes over the report's notes, or run the benchmarks"
    );
}
