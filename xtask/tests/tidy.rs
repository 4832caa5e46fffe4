//! Tidy tests: rules about the repository's files that `cargo test` keeps,
//! so no separate CI step is needed to keep them.
//!
//! - README.md and docs/ describe the present: no work-period numbering
//!   ("session 4"), no dated lab-notebook entries, no "tried and reverted".
//!   What was tried and why it lost goes in docs/decisions/ and in commit
//!   messages.
//! - `unsafe` is allowed only in the spawn crate (crates/spawn): nothing else
//!   may lift the workspace's `unsafe_code = "deny"`.
//! - docs/BENCHMARKS.md ends with docs/benchmarks-notes.md, as
//!   `cargo xtask bench` writes it.
//! - No crate's top-level modules use each other in a cycle, read from
//!   their `crate::` and `super::` paths; the edges still allowed to close
//!   one are listed with their reasons.

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
/// outside the spawn crate.
fn unsafe_allowances() -> Vec<String> {
    let root = root();
    let spawn = root.join("crates/spawn/src");
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
fn unsafe_code_is_allowed_only_in_the_spawn_crate() {
    let found = unsafe_allowances();
    assert!(
        found.is_empty(),
        "only crates/spawn/src/ may allow `unsafe_code` \
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

/// What marks a line as history rather than the present: a `(before: ...)`
/// aside beside a figure, or a bisection note. Kept apart from the
/// work-period rule so each says what it caught.
fn history_notes(path: &Path) -> Vec<String> {
    let history = Regex::new(r"(?i)\(before:|\bbisect").expect("valid regex");
    let text = std::fs::read_to_string(path).expect("a readable Markdown file");
    prose_lines(&text)
        .into_iter()
        .filter(|(_, _, prose)| history.is_match(prose))
        .map(|(number, line, _)| format!("{}:{number}: {}", relative(path), line.trim()))
        .collect()
}

/// README.md and every Markdown file under docs/.
fn user_docs() -> Vec<PathBuf> {
    let mut docs = files(&root().join("docs"), ".md");
    docs.push(root().join("README.md"));
    docs
}

#[test]
fn docs_hold_no_before_asides_or_bisection_notes() {
    let found: Vec<String> = user_docs()
        .iter()
        .flat_map(|path| history_notes(path))
        .collect();
    assert!(
        found.is_empty(),
        "docs state the present figure: what it was before, and how a regression was \
         bisected, go in the commit message (or the docs/decisions/ record the choice \
         belongs to):\n{}",
        found.join("\n")
    );
}

#[test]
fn history_patterns_catch_what_they_are_meant_to() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let sample = dir.path().join("sample.md");
    let offences = [
        "| 8 accepted (before: 40) | yes |",
        "every line parses (Before: a cut line glued to the next)",
        "Bisected with release builds of the commits since the report.",
        "A bisection over the last ten commits found it.",
    ];
    let fine = [
        "The spawner forks before any secret is read back.",
        "A state written (before the exit) is read back.",
        "The `(before: N)` form is not used here.",
        "```",
        "(before: 40)",
        "```",
    ];
    std::fs::write(&sample, [&offences[..], &fine[..]].concat().join("\n"))
        .expect("write the sample");
    let found = history_notes(&sample);
    assert_eq!(found.len(), offences.len(), "{found:#?}");
    for (offence, line) in offences.iter().zip(&found) {
        assert!(line.ends_with(offence), "{line} for {offence}");
    }
}

/// A heading's anchor as GitHub makes it: lower case, punctuation other
/// than `-` and `_` dropped, each space a `-`; a repeated heading gets
/// `-1`, `-2`, ... Link syntax in the heading counts by its text only.
fn heading_anchors(text: &str) -> Vec<String> {
    let link = Regex::new(r"\[([^\]]*)\]\([^)]*\)").expect("valid regex");
    let mut anchors: Vec<String> = Vec::new();
    for (_, line, _) in prose_lines(text) {
        let trimmed = line.trim_start();
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !trimmed[hashes..].starts_with(' ') {
            continue;
        }
        let title = link.replace_all(trimmed[hashes..].trim(), "$1");
        let base: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let repeats = anchors
            .iter()
            .filter(|anchor| {
                **anchor == base
                    || anchor
                        .strip_prefix(base.as_str())
                        .and_then(|rest| rest.strip_prefix('-'))
                        .is_some_and(|n| n.parse::<usize>().is_ok())
            })
            .count();
        anchors.push(if repeats == 0 {
            base
        } else {
            format!("{base}-{repeats}")
        });
    }
    anchors
}

/// Relative links (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`)
/// in a Markdown file that lead nowhere: `path:line: target (why)` each.
/// Links with a scheme (`https:`, `mailto:`) are not followed; links in
/// code are not links.
fn dead_links(path: &Path) -> Vec<String> {
    let link = Regex::new(r#"\]\(([^)\s]+)(?:\s+"[^"]*")?\)"#).expect("valid regex");
    let scheme = Regex::new(r"^[a-zA-Z][a-zA-Z0-9+.-]*:").expect("valid regex");
    let text = std::fs::read_to_string(path).expect("a readable Markdown file");
    let dir = path.parent().expect("a file sits in a directory");
    let mut found = Vec::new();
    for (number, _, prose) in prose_lines(&text) {
        for capture in link.captures_iter(&prose) {
            let target = &capture[1];
            if scheme.is_match(target) {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target, None),
            };
            let resolved = if file.is_empty() {
                path.to_path_buf()
            } else {
                dir.join(file)
            };
            let why = if !resolved.exists() {
                Some("no such file".to_owned())
            } else if let Some(anchor) = anchor {
                let heading_text = std::fs::read_to_string(&resolved).unwrap_or_default();
                (resolved.extension().is_none_or(|ext| ext != "md")
                    || !heading_anchors(&heading_text).iter().any(|a| a == anchor))
                .then(|| format!("no heading with the anchor `{anchor}`"))
            } else {
                None
            };
            if let Some(why) = why {
                found.push(format!("{}:{number}: {target} ({why})", relative(path)));
            }
        }
    }
    found
}

#[test]
fn links_inside_the_repository_resolve() {
    let docs = user_docs();
    assert!(docs.len() > 5, "found the docs: {docs:?}");
    let found: Vec<String> = docs.iter().flat_map(|path| dead_links(path)).collect();
    assert!(
        found.is_empty(),
        "a relative link must lead to a file, and its anchor to a heading there \
         (GitHub's anchors: lower case, punctuation dropped, spaces as `-`):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_link_check_catches_what_it_is_meant_to() {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::create_dir(dir.path().join("sub")).expect("a sub dir");
    std::fs::write(
        dir.path().join("sub/other.md"),
        "# Other\n\n## MCP server (agent-exec)\n\n## Notes\n\n### Notes\n",
    )
    .expect("write the target");
    let sample = dir.path().join("sample.md");
    let lines = [
        "# Sample `code` heading",
        "[ok](sub/other.md) and [dir](sub/) and [web](https://example.invalid/x.md)",
        "[anchor](sub/other.md#mcp-server-agent-exec), [repeat](sub/other.md#notes-1)",
        "[here](#sample-code-heading) [mail](mailto:someone@example.invalid)",
        "`[in code](missing.md)`",
        "```",
        "[fenced](missing.md)",
        "```",
        "[gone](sub/missing.md)",
        "[bad anchor](sub/other.md#mcp-server)",
        "[bad local](#nowhere)",
        "[not markdown](sub#x)",
    ];
    std::fs::write(&sample, lines.join("\n")).expect("write the sample");
    let found = dead_links(&sample);
    let lines_found: Vec<&str> = found
        .iter()
        .map(|line| {
            line.split(": ")
                .next()
                .and_then(|place| place.rsplit(':').next())
                .expect("path:line")
        })
        .collect();
    assert_eq!(lines_found, ["9", "10", "11", "12"], "{found:#?}");
    assert!(
        found[0].contains("sub/missing.md (no such file)"),
        "{found:#?}"
    );
    assert!(found[1].contains("`mcp-server`"), "{found:#?}");
}

/// Module files whose first line is not a `//!` doc line: every module
/// says what it is for before anything else.
fn modules_without_a_doc_line(dirs: &[PathBuf]) -> Vec<String> {
    dirs.iter()
        .flat_map(|dir| files(dir, ".rs"))
        .filter(|path| {
            let text = std::fs::read_to_string(path).expect("a readable source file");
            !text
                .lines()
                .next()
                .is_some_and(|line| line.starts_with("//!"))
        })
        .map(|path| relative(&path))
        .collect()
}

#[test]
fn every_module_starts_with_a_doc_line() {
    let root = root();
    let mut dirs = vec![root.join("xtask/src")];
    for entry in std::fs::read_dir(root.join("crates")).expect("the crates directory") {
        dirs.push(entry.expect("a directory entry").path().join("src"));
    }
    let found = modules_without_a_doc_line(&dirs);
    assert!(
        found.is_empty(),
        "every module file starts with a `//!` line saying what it is for:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_doc_line_check_catches_what_it_is_meant_to() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("inner")).expect("the source dirs");
    let modules = [
        ("lib.rs", "//! The crate.\n\nmod inner;\n"),
        ("inner/mod.rs", "//! Inner things.\n"),
        ("inner/tests.rs", "use super::*;\n"),
        ("late.rs", "\n//! A doc line after a blank one.\n"),
        (
            "plain.rs",
            "/// An item's doc, not the module's.\nfn f() {}\n",
        ),
        ("empty.rs", ""),
    ];
    for (name, text) in modules {
        std::fs::write(src.join(name), text).expect("write a module");
    }
    let found = modules_without_a_doc_line(&[src]);
    let names: Vec<&str> = found
        .iter()
        .map(|path| path.rsplit("src/").next().expect("under src"))
        .collect();
    assert_eq!(
        names,
        ["empty.rs", "inner/tests.rs", "late.rs", "plain.rs"],
        "{found:#?}"
    );
}

/// Edges between top-level modules that may close a cycle, as (crate's
/// `src`, from, to, reason). Nothing else may: modules in a cycle cannot be
/// read, tested or moved alone. An edge listed here that no longer exists
/// fails the test too, so the list only shrinks.
const MODULE_CYCLES_ALLOWED: &[(&str, &str, &str, &str)] = &[
    // The spawn module orchestrates with the spec, cgroups and trees it
    // starts commands with; the spec carries the prepared confinement.
    (
        "crates/shell-runtime/src",
        "spec",
        "spawn",
        "`SpawnSpec` carries the prepared `Confinement`",
    ),
    // The spawn crate's modules were one module's parts: a confinement
    // writes itself in the spawner's wire format and probes the kernel by
    // starting a child, while the spawner and the clone apply it.
    (
        "crates/spawn/src",
        "confine",
        "process",
        "a confinement is sent to the spawner process in its wire format",
    ),
    (
        "crates/spawn/src",
        "confine",
        "vfork",
        "preparing a PID namespace probes it with one child",
    ),
];

/// A use tree (`a::{b, c::{d, self}}`, or an expression path
/// `a::b::f(x)`) read from the start of `text`, as the paths it names.
fn use_tree_paths(text: &str) -> Vec<Vec<String>> {
    fn skip_space(chars: &[char], at: &mut usize) {
        while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
            *at += 1;
        }
    }
    fn tree(chars: &[char], at: &mut usize) -> Vec<Vec<String>> {
        skip_space(chars, at);
        if chars.get(*at) == Some(&'{') {
            *at += 1;
            let mut paths = Vec::new();
            loop {
                skip_space(chars, at);
                match chars.get(*at) {
                    Some('}') => {
                        *at += 1;
                        break;
                    }
                    Some(',') => *at += 1,
                    None => break,
                    Some(_) => {
                        let before = *at;
                        paths.extend(tree(chars, at));
                        if *at == before {
                            break;
                        }
                    }
                }
            }
            return paths;
        }
        let start = *at;
        while chars
            .get(*at)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            *at += 1;
        }
        if start == *at {
            return vec![Vec::new()];
        }
        let ident: String = chars[start..*at].iter().collect();
        skip_space(chars, at);
        if chars.get(*at) == Some(&':') && chars.get(*at + 1) == Some(&':') {
            *at += 2;
            return tree(chars, at)
                .into_iter()
                .map(|rest| {
                    let mut path = vec![ident.clone()];
                    path.extend(rest.into_iter().filter(|segment| segment != "self"));
                    path
                })
                .collect();
        }
        if ident == "self" {
            return vec![Vec::new()];
        }
        vec![vec![ident]]
    }
    let chars: Vec<char> = text.chars().collect();
    tree(&chars, &mut 0)
}

/// `text` without its line comments: a doc link is not a dependency.
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The crate-level paths a module file names: every `crate::` path, and
/// every `super::` chain long enough to reach the crate root from a file
/// `depth` modules deep (`src/a.rs` is 1, `src/a/b.rs` 2).
fn crate_level_paths(text: &str, depth: usize) -> Vec<Vec<String>> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let text = without_comments(text);
    let mut paths = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        if text[..at].ends_with(is_ident) {
            continue;
        }
        paths.extend(use_tree_paths(&text[at + "crate::".len()..]));
    }
    let mut at = 0;
    while let Some(found) = text[at..].find("super::") {
        let start = at + found;
        let mut end = start;
        let mut chain = 0;
        while text[end..].starts_with("super::") {
            end += "super::".len();
            chain += 1;
        }
        if !text[..start].ends_with(is_ident) && chain >= depth {
            paths.extend(use_tree_paths(&text[end..]));
        }
        at = end;
    }
    paths
}

/// One crate root (`lib.rs` or `main.rs`): the top-level modules it
/// declares and the names it brings into the crate root from them (`pub use
/// a::{B, c::D}` makes `crate::B` and `crate::D` mean module `a`).
fn crate_root_modules(root_file: &Path) -> (Vec<String>, Vec<(String, String)>) {
    let text = without_comments(&std::fs::read_to_string(root_file).expect("a readable root"));
    let declaration = Regex::new(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_0-9]+)\s*;")
        .expect("valid regex");
    let modules: Vec<String> = declaration
        .captures_iter(&text)
        .map(|captures| captures[1].to_owned())
        .collect();
    let import = Regex::new(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+").expect("valid regex");
    let mut names = Vec::new();
    for found in import.find_iter(&text) {
        for path in use_tree_paths(&text[found.end()..]) {
            if let (Some(first), Some(last)) = (path.first(), path.last())
                && path.len() > 1
                && modules.contains(first)
            {
                names.push((last.clone(), first.clone()));
            }
        }
    }
    (modules, names)
}

/// The dependency edges among one crate root's top-level modules, as
/// (from, to) pairs, each once.
fn module_edges(src: &Path, root_file: &Path) -> Vec<(String, String)> {
    let (modules, names) = crate_root_modules(root_file);
    let mut edges = Vec::new();
    for module in &modules {
        let single = src.join(format!("{module}.rs"));
        let mut module_files: Vec<PathBuf> = files(&src.join(module), ".rs");
        if single.exists() {
            module_files.push(single);
        }
        for path in module_files {
            let inside = path.strip_prefix(src).expect("a file under src");
            let mut depth = inside.components().count();
            if inside.ends_with("mod.rs") {
                depth -= 1;
            }
            let text = std::fs::read_to_string(&path).expect("a readable source file");
            for crate_path in crate_level_paths(&text, depth) {
                let Some(first) = crate_path.first() else {
                    continue;
                };
                let target = if modules.contains(first) {
                    Some(first.clone())
                } else {
                    names
                        .iter()
                        .find(|(name, _)| name == first)
                        .map(|(_, module)| module.clone())
                };
                if let Some(target) = target
                    && target != *module
                    && !edges.contains(&(module.clone(), target.clone()))
                {
                    edges.push((module.clone(), target));
                }
            }
        }
    }
    edges.sort();
    edges
}

/// The groups of modules that reach each other through `edges` (the
/// strongly connected components with more than one module), sorted.
fn module_cycles(edges: &[(String, String)]) -> Vec<Vec<String>> {
    let reaches = |from: &str, to: &str| {
        let mut seen = vec![from.to_owned()];
        let mut pending = vec![from.to_owned()];
        while let Some(module) = pending.pop() {
            for (_, next) in edges.iter().filter(|(source, _)| *source == module) {
                if next == to {
                    return true;
                }
                if !seen.contains(next) {
                    seen.push(next.clone());
                    pending.push(next.clone());
                }
            }
        }
        false
    };
    let mut modules: Vec<&String> = edges.iter().flat_map(|(from, to)| [from, to]).collect();
    modules.sort();
    modules.dedup();
    let mut cycles: Vec<Vec<String>> = Vec::new();
    for module in modules {
        if cycles.iter().any(|cycle| cycle.contains(module)) {
            continue;
        }
        let mut cycle: Vec<String> = edges
            .iter()
            .filter(|(_, to)| to != module && reaches(module, to) && reaches(to, module))
            .map(|(_, to)| to.clone())
            .collect();
        if !cycle.is_empty() {
            cycle.push(module.clone());
            cycle.sort();
            cycle.dedup();
            cycles.push(cycle);
        }
    }
    cycles
}

/// Every crate root in the workspace with its `src` directory.
fn crate_roots() -> Vec<(PathBuf, PathBuf)> {
    let root = root();
    let mut sources: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("the crates directory")
        .map(|entry| entry.expect("a directory entry").path().join("src"))
        .collect();
    sources.push(root.join("xtask/src"));
    sources.sort();
    let mut roots = Vec::new();
    for src in sources {
        for name in ["lib.rs", "main.rs"] {
            if src.join(name).exists() {
                roots.push((src.clone(), src.join(name)));
            }
        }
    }
    roots
}

#[test]
fn no_crate_has_a_cycle_among_its_top_level_modules() {
    let roots = crate_roots();
    assert!(roots.len() > 6, "found the crates: {roots:?}");
    let mut found = Vec::new();
    let mut allowed_seen = Vec::new();
    for (src, root_file) in roots {
        let edges: Vec<(String, String)> = module_edges(&src, &root_file)
            .into_iter()
            .filter(|(from, to)| {
                let allowed =
                    MODULE_CYCLES_ALLOWED
                        .iter()
                        .find(|(dir, allowed_from, allowed_to, _)| {
                            relative(&src) == *dir && from == allowed_from && to == allowed_to
                        });
                allowed_seen.extend(allowed);
                allowed.is_none()
            })
            .collect();
        for cycle in module_cycles(&edges) {
            let inside: Vec<String> = edges
                .iter()
                .filter(|(from, to)| cycle.contains(from) && cycle.contains(to))
                .map(|(from, to)| format!("{from} -> {to}"))
                .collect();
            found.push(format!(
                "{}: {} ({})",
                relative(&root_file),
                cycle.join(", "),
                inside.join(", ")
            ));
        }
    }
    for allowed in MODULE_CYCLES_ALLOWED {
        if !allowed_seen.contains(&allowed) {
            found.push(format!(
                "{}: {} -> {} is allowed but no longer used: drop it from MODULE_CYCLES_ALLOWED",
                allowed.0, allowed.1, allowed.2
            ));
        }
    }
    assert!(
        found.is_empty(),
        "top-level modules use each other: move the shared piece into a module \
         both use, or turn one dependency around:\n{}",
        found.join("\n")
    );
}

#[test]
fn module_paths_are_read_in_every_form() {
    assert_eq!(
        crate_level_paths("use crate::{tree::{kill, Tag}, sys};", 1),
        [vec!["tree", "kill"], vec!["tree", "Tag"], vec!["sys"]]
    );
    assert_eq!(
        crate_level_paths("let x = crate::pool::MemoryPool::new(1); // crate::doc", 1),
        [vec!["pool", "MemoryPool", "new"]]
    );
    assert_eq!(
        crate_level_paths("use super::super::env::Rules; use super::words;", 2),
        [vec!["env", "Rules"]]
    );
    assert!(crate_level_paths("$crate::x; my_crate::y; use super::tests;", 2).len() == 1);
    let edges = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "d")]
        .map(|(from, to)| (from.to_owned(), to.to_owned()));
    assert_eq!(module_cycles(&edges), [vec!["a", "b", "c"]]);
    assert!(module_cycles(&edges[1..]).is_empty());
}
