//! The policy corpus (tests/policy/ at the workspace root, plain data that
//! other tools read too): every line of `dangerous.txt` must be blocked and
//! every line of `harmless.txt` allowed. Failures are listed together.

#![allow(
    clippy::expect_used,
    reason = "a malformed corpus file should fail the test loudly"
)]

use exec_policy::{Analyzer, AnalyzerConfig, Decision};

fn analyzer() -> Analyzer {
    Analyzer::new(AnalyzerConfig {
        home: Some("/home/agent".to_owned()),
        ..AnalyzerConfig::default()
    })
}

/// Commands of a corpus file; a here-document spans lines, so lines
/// between `<<'EOF2'` and `EOF2` join the line that opened it.
fn cases(text: &str) -> Vec<String> {
    let mut cases: Vec<String> = Vec::new();
    let mut heredoc = false;
    for line in text.lines() {
        if heredoc {
            let last = cases.last_mut().expect("a heredoc has an opening line");
            last.push('\n');
            last.push_str(line);
            heredoc = line != "EOF2";
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        heredoc = line.contains("<<'EOF2'");
        cases.push(line.to_owned());
    }
    cases
}

#[test]
fn dangerous_corpus_is_all_blocked() {
    let analyzer = analyzer();
    let cases = cases(include_str!("../../../tests/policy/dangerous.txt"));
    assert!(cases.len() >= 150, "only {} dangerous cases", cases.len());
    let missed: Vec<&String> = cases
        .iter()
        .filter(|command| analyzer.check(command).is_allowed())
        .collect();
    assert!(
        missed.is_empty(),
        "{} dangerous commands allowed:\n{missed:#?}",
        missed.len()
    );
}

#[test]
fn harmless_corpus_is_all_allowed() {
    let analyzer = analyzer();
    let cases = cases(include_str!("../../../tests/policy/harmless.txt"));
    assert!(cases.len() >= 150, "only {} harmless cases", cases.len());
    let blocked: Vec<(String, String)> = cases
        .iter()
        .filter_map(|command| match analyzer.check(command) {
            Decision::Deny(denial) => Some((command.clone(), denial.message())),
            Decision::Allow { .. } => None,
        })
        .collect();
    assert!(
        blocked.is_empty(),
        "{} harmless commands blocked:\n{blocked:#?}",
        blocked.len()
    );
}
