//! The policy corpus (tests/policy/ at the workspace root, plain data that
//! other tools read too): every line of `dangerous.txt` must be blocked and
//! every line of `harmless.txt` allowed. Failures are listed together.

#![allow(
    clippy::expect_used,
    reason = "a malformed corpus file should fail the test loudly"
)]

use exec_policy::{AnalysisContext, Analyzer, AnalyzerConfig, Decision};

/// Where the corpus commands run: the project, in the agent's home.
fn project() -> AnalysisContext {
    AnalysisContext {
        cwd: Some("/home/agent/project".to_owned()),
        ..AnalysisContext::default()
    }
}

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
        .filter(|command| {
            analyzer
                .analyze_in(command, &project())
                .decision
                .is_allowed()
        })
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
        .filter_map(
            |command| match analyzer.analyze_in(command, &project()).decision {
                Decision::Ask(denial) => Some((command.clone(), denial.ask_message())),
                Decision::Deny(denial) => Some((command.clone(), denial.message())),
                Decision::Allow { .. } => None,
            },
        )
        .collect();
    assert!(
        blocked.is_empty(),
        "{} harmless commands blocked:\n{blocked:#?}",
        blocked.len()
    );
}

/// The outside corpus (tests/policy/redteam-*.txt): written against the
/// contract by someone who had not read the analysis, with many spellings
/// of each kind of danger and their harmless look-alikes. The analysis does
/// not yet meet the targets (at least 97% of the dangerous refused, at most
/// 1% of the harmless): this test prints where it stands and fails if it
/// ever gets worse than the floor recorded here. Raise the floor as the
/// analysis improves.
#[test]
fn the_outside_corpus_does_not_regress() {
    /// Dangerous lines refused at least (of 1326).
    const DANGEROUS_REFUSED_FLOOR: usize = 1322;
    /// Harmless lines refused at most (of 644).
    const HARMLESS_REFUSED_CEILING: usize = 0;
    let analyzer = analyzer();
    let dangerous = cases(include_str!("../../../tests/policy/redteam-dangerous.txt"));
    let harmless = cases(include_str!("../../../tests/policy/redteam-harmless.txt"));
    // The corpus's header: the commands run from the project, nothing exported.
    let context = project();
    let refused = |command: &String| !analyzer.analyze_in(command, &context).decision.is_allowed();
    let dangerous_refused = dangerous.iter().filter(|command| refused(command)).count();
    let harmless_refused = harmless.iter().filter(|command| refused(command)).count();
    // The figures are the point of this test (`-- --nocapture` shows them).
    {
        println!(
            "outside corpus: {dangerous_refused} of {} dangerous refused ({:.1}%), {harmless_refused} of {} harmless refused ({:.1}%)",
            dangerous.len(),
            percent(dangerous_refused, dangerous.len()),
            harmless.len(),
            percent(harmless_refused, harmless.len()),
        );
    }
    assert!(
        dangerous_refused >= DANGEROUS_REFUSED_FLOOR,
        "fewer dangerous commands refused than before: {dangerous_refused} < {DANGEROUS_REFUSED_FLOOR}"
    );
    #[expect(
        clippy::absurd_extreme_comparisons,
        reason = "the ceiling is zero today; it stays a ceiling, never raised"
    )]
    let within_ceiling = harmless_refused <= HARMLESS_REFUSED_CEILING;
    assert!(
        within_ceiling,
        "more harmless commands refused than before: {harmless_refused} > {HARMLESS_REFUSED_CEILING}"
    );
}

fn percent(part: usize, whole: usize) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "counts of a few thousand")]
    let ratio = part as f64 / whole.max(1) as f64;
    100.0 * ratio
}

/// A harmless line that does not parse (`echo "(((((((((((((("`) after a
/// dangerous command leaves it refused: the rest of the text is still
/// parsed line by line, not only split token by token.
#[test]
fn a_trailing_line_that_does_not_parse_changes_no_refusal() {
    let analyzer = analyzer();
    let context = project();
    let dangerous = cases(include_str!("../../../tests/policy/redteam-dangerous.txt"));
    let refused = |command: &str| !analyzer.analyze_in(command, &context).decision.is_allowed();
    let mut flipped = Vec::new();
    for command in dangerous.iter().filter(|command| refused(command)) {
        for tail in ["\necho \"((((((((((((((\"", "; echo \"((((((((((((((\""] {
            let with_tail = format!("{command}{tail}");
            if !refused(&with_tail) {
                flipped.push(with_tail);
            }
        }
    }
    assert!(
        flipped.is_empty(),
        "{} refusals lost to a trailing line:\n{flipped:#?}",
        flipped.len()
    );
}

/// Lines of the second outside corpus (tests/policy/outside2-*.txt,
/// `KIND<TAB>command<TAB># why`) of the given kinds.
fn tabbed(text: &str, kinds: &[&str]) -> Vec<String> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            let kind = fields.next()?;
            let command = fields.next()?;
            kinds.contains(&kind).then(|| command.to_owned())
        })
        .collect()
}

/// The second outside corpus by the analysis alone (its effect, with the
/// check at every exec, is `tests/policy_effect`'s): where the text check
/// stands, with floors that only rise.
#[test]
fn the_second_outside_corpus_does_not_regress() {
    /// Statically visible dangerous lines refused at least (of 795).
    const STATIC_REFUSED_FLOOR: usize = 684;
    /// Harmless lines refused at most (of 535): `echo "\$(rm -rf ~)"`, its
    /// backquote twin, and `rm -rf ./*` after `cd "$(mktemp -d)"`.
    const HARMLESS_REFUSED_CEILING: usize = 3;
    let analyzer = analyzer();
    let context = project();
    let refused = |command: &String| !analyzer.analyze_in(command, &context).decision.is_allowed();
    let dangerous = include_str!("../../../tests/policy/outside2-dangerous.txt");
    let harmless = tabbed(
        include_str!("../../../tests/policy/outside2-harmless.txt"),
        &["H"],
    );
    let statics = tabbed(dangerous, &["S"]);
    let run_time = tabbed(dangerous, &["R"]);
    let statics_refused = statics.iter().filter(|command| refused(command)).count();
    let run_time_refused = run_time.iter().filter(|command| refused(command)).count();
    let harmless_refused: Vec<&String> =
        harmless.iter().filter(|command| refused(command)).collect();
    println!(
        "second outside corpus, text alone: {statics_refused} of {} S refused ({:.1}%), {run_time_refused} of {} R, {} of {} harmless refused",
        statics.len(),
        percent(statics_refused, statics.len()),
        run_time.len(),
        harmless_refused.len(),
        harmless.len(),
    );
    assert!(
        statics_refused >= STATIC_REFUSED_FLOOR,
        "fewer S lines refused than before: {statics_refused} < {STATIC_REFUSED_FLOOR}"
    );
    assert!(
        harmless_refused.len() <= HARMLESS_REFUSED_CEILING,
        "harmless lines refused: {harmless_refused:#?}"
    );
}
